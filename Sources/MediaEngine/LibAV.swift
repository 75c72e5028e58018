import CFFmpeg
import KilnCore

/// Whether libav said it cannot make sense of the data: AVERROR_INVALIDDATA, or the bare
/// -1 (AVERROR(EPERM)) many demuxers and decoders return for the same (`avErrorText`).
func isInvalidData(_ code: Int32) -> Bool { code == kiln_averror_invaliddata() || code == kiln_averror(EPERM) }

/// libav's text for an error code.
func avErrorText(_ code: Int32) -> String {
    // A bare -1 is how many demuxers and decoders (AVI's header, Theora's, WMA's) say they
    // cannot make sense of their data; as AVERROR(EPERM) it reads "Operation not permitted",
    // which no read of a file Kiln opened gives.
    if code == kiln_averror(EPERM) { return "invalid data" }
    var buf = [CChar](repeating: 0, count: 256)
    kiln_strerror(code, &buf, buf.count)
    return cString(buf)
}

/// Turns a negative libav return code into a `KilnError` that keeps the stage and the
/// code; the one place where AVERROR values are classified (STYLE.md: one helper for C
/// return codes, no `-1` checks at call sites).
@discardableResult
func check(_ ret: Int32, _ stage: KilnError.Stage, _ what: @autoclosure () -> String,
           as defaultCode: KilnError.Code = .internalError) throws(KilnError) -> Int32 {
    guard ret < 0 else { return ret }
    throw classify(ret, stage, what(), as: defaultCode)
}

func classify(_ ret: Int32, _ stage: KilnError.Stage, _ what: String,
              as defaultCode: KilnError.Code = .internalError) -> KilnError {
    let code: KilnError.Code
    switch ret {
    case kiln_averror_exit(): code = .canceled
    case kiln_averror_enospc(), kiln_averror(EDQUOT): code = .diskFull
    // Out of memory, threads (a pids limit, systemd's TasksMax: a decoder's or filter's
    // thread not started is EAGAIN) or descriptors: the file is fine, the machine is short.
    case kiln_averror_enomem(), kiln_averror(EAGAIN), kiln_averror(EMFILE), kiln_averror(ENFILE): code = .resourceLimit
    case kiln_averror_eio(): code = .ioError
    case kiln_averror_enoent(): code = stage == .open ? .sourceNotFound : .ioError
    case kiln_averror_eacces(): code = stage == .open ? .sourceUnreadable : .ioError
    case _ where isInvalidData(ret): code = stage == .open || stage == .demux ? .sourceUnreadable : defaultCode
    // Not implemented in libav ("patches welcome"): the file is what it is, every try fails the same.
    case kiln_averror_decoder_not_found(), kiln_averror_demuxer_not_found(), kiln_averror_patchwelcome(): code = .sourceUnsupported
    default: code = defaultCode
    }
    let message = code == .canceled ? "canceled" : "\(what): \(avErrorText(ret))"
    return KilnError(code, stage: stage, underlying: ret, message)
}

let noPTS: Int64 = kiln_nopts_value()
let avErrorEOF: Int32 = kiln_averror_eof()
let avErrorEAGAIN: Int32 = kiln_averror_eagain()

extension AVRational {
    var seconds: Double { den == 0 ? 0 : Double(num) / Double(den) }
}

func rescale(_ ts: Int64, from a: AVRational, to b: AVRational) -> Int64 {
    ts == noPTS ? noPTS : av_rescale_q_rnd(ts, a, b, AVRounding(rawValue: AV_ROUND_NEAR_INF.rawValue | AV_ROUND_PASS_MINMAX.rawValue))
}

func seconds(_ ts: Int64, _ tb: AVRational) -> Double? {
    ts == noPTS ? nil : Double(ts) * tb.seconds
}

/// The text in a NUL-terminated C buffer.
func cString(_ buf: [CChar]) -> String {
    let bytes = buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}

/// File names as libav must be given them.
enum LibAVPath {
    /// libav reads a name as a URL: whatever comes before a colon is taken for a protocol,
    /// so a film saved as "Alien: Covenant.mkv", named relative to the working folder, is
    /// "Protocol not found". The file protocol's own prefix makes every name a file name.
    static func file(_ path: String) -> String { "file:" + path }
}

/// A C string from an optional libav pointer.
func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }

/// A codec tag as its four characters (little-endian, as libav stores them: "hvc1"), or nil
/// when there is none or it is not four printable characters (MPEG-TS stream types,
/// WAVE format numbers).
func fourCC(_ tag: UInt32) -> String? {
    let bytes = (0..<4).map { UInt8(truncatingIfNeeded: tag >> (8 * $0)) }
    guard tag != 0, bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return nil }
    return String(decoding: bytes, as: UTF8.self)
}

/// Reads an entry of a libav dictionary.
func dictValue(_ dict: OpaquePointer?, _ key: String) -> String? {
    guard let dict, let e = av_dict_get(dict, key, nil, 0) else { return nil }
    return string(e.pointee.value)
}

/// An owned `AVDictionary` of options, freed when it goes away.
final class Options {
    var dict: OpaquePointer?
    init(_ pairs: [(String, String)] = []) { for (k, v) in pairs { set(k, v) } }
    func set(_ key: String, _ value: String) { av_dict_set(&dict, key, value, 0) }
    deinit { av_dict_free(&dict) }
}

/// An owned `AVPacket`.
final class Packet {
    let pointer: UnsafeMutablePointer<AVPacket>
    init() throws(KilnError) {
        guard let p = av_packet_alloc() else { throw KilnError(.resourceLimit, stage: .demux, "out of memory for a packet") }
        pointer = p
    }
    deinit { var p: UnsafeMutablePointer<AVPacket>? = pointer; av_packet_free(&p) }
    func unref() { av_packet_unref(pointer) }
    /// Takes `other`'s contents, leaving it blank (`av_packet_move_ref`). As a method, the
    /// caller's reference keeps `other`, which frees its AVPacket when released, alive for
    /// the move (`held.removeFirst().pointer` alone would not).
    func take(_ other: Packet) { av_packet_move_ref(pointer, other.pointer) }
    var streamIndex: Int32 { get { pointer.pointee.stream_index } set { pointer.pointee.stream_index = newValue } }
    /// The presentation time, or the decode time of a packet without one (noPTS if neither).
    var time: Int64 { pointer.pointee.pts != noPTS ? pointer.pointee.pts : pointer.pointee.dts }
    /// Whether the demuxer says the packet's data is encrypted (CENC/CBCS sample encryption).
    var isEncrypted: Bool { av_packet_get_side_data(pointer, AV_PKT_DATA_ENCRYPTION_INFO, nil) != nil }
}

/// An owned `AVFrame`.
final class Frame {
    let pointer: UnsafeMutablePointer<AVFrame>
    init() throws(KilnError) {
        guard let p = av_frame_alloc() else { throw KilnError(.resourceLimit, stage: .decode, "out of memory for a frame") }
        pointer = p
    }
    deinit { var p: UnsafeMutablePointer<AVFrame>? = pointer; av_frame_free(&p) }
    func unref() { av_frame_unref(pointer) }
}

/// Cancellation shared between the thread that asks (a signal handler's watcher, the
/// farm) and the pipeline; C's interrupt callback reads the same flag atomically, so a
/// blocked demux or mux call returns AVERROR_EXIT too.
public final class Cancellation: @unchecked Sendable {
    let flag: OpaquePointer
    public init() { flag = kiln_interrupt_flag_new()! }
    deinit { kiln_interrupt_flag_free(flag) }
    public func cancel() { kiln_interrupt_flag_set(flag, 1) }
    public var isCanceled: Bool { kiln_interrupt_flag_get(flag) != 0 }
    func install(on ctx: UnsafeMutablePointer<AVFormatContext>) { kiln_set_interrupt(ctx, flag) }
    func check(_ stage: KilnError.Stage) throws(KilnError) {
        if isCanceled { throw KilnError(.canceled, stage: stage, "canceled") }
    }
}

/// An input's interrupt callback (`kiln_read_guard`): the run's cancellation, and a byte
/// position a look at one place in the file reads no further past (`Demuxer.lookBytes`).
final class ReadGuard {
    let pointer: OpaquePointer
    /// Held for the flag the callback reads.
    private let cancellation: Cancellation

    init(_ cancellation: Cancellation) throws(KilnError) {
        guard let g = kiln_read_guard_new(cancellation.flag) else {
            throw KilnError(.resourceLimit, stage: .open, "out of memory opening the source")
        }
        pointer = g
        self.cancellation = cancellation
    }
    deinit { kiln_read_guard_free(pointer) }

    func install(on ctx: UnsafeMutablePointer<AVFormatContext>) { kiln_read_guard_install(pointer, ctx) }
    /// Reads past `ceiling` (a byte position) are interrupted; nil: none are.
    func set(ceiling: Int64?) { kiln_read_guard_set_ceiling(pointer, ceiling ?? -1) }
    /// Whether the ceiling interrupted a read since it was set.
    var hit: Bool { kiln_read_guard_hit(pointer) != 0 }
}

/// Process-wide memory policy for the media engine's commands.
public enum EngineMemory {
    /// Packets come and go in every thread's malloc heap (the pipeline, the index
    /// forecast, the keyframe witness); by default glibc keeps freed heap memory for reuse
    /// and raises its thresholds after each big block, so a remux's resident memory grew
    /// with the number of threads that had touched packets. Freed memory above 1 MiB at a
    /// heap's top now goes back at once.
    ///
    /// That fixes glibc's mapping threshold at its initial 128 KiB, below a film's
    /// keyframes: each of those, and the H.264 parser's zeroed copy of each, was a mapping
    /// of its own, faulted in page by page and handed back at once. Up to 512 KiB they now
    /// come from the heap, which reuses the memory (512 KiB does as well as 2 MiB, which
    /// cost 4 MB). And every packet's buffer, a large block, first merged the fast bins'
    /// small freed blocks back into the heap: without fast bins (tcache still serves small
    /// blocks) nothing is left to merge. Together a film's remux takes 5-8 % less CPU, with
    /// resident memory within a megabyte of what it was.
    public static func configure() { _ = kiln_malloc_policy(1 << 20, 512 << 10) }

    /// Gives back what the heaps keep of freed memory (each thread's heap keeps up to the
    /// 1 MiB above, plus holes), before a phase that needs much of its own.
    static func release() { _ = kiln_malloc_release() }
}

/// libav's log goes to a ring buffer, so failures can report the last lines and the
/// command's output stays clean.
public enum EngineLog {
    public static func capture(verbose: Bool = false) {
        kiln_log_capture(verbose ? AV_LOG_INFO : AV_LOG_WARNING, verbose ? 1 : 0)
    }
    public static func recentLines(_ max: Int = 20) -> [String] {
        var buf = [CChar](repeating: 0, count: 64 * 512)
        _ = kiln_log_recent(&buf, buf.count, Int32(max))
        return cString(buf).split(separator: "\n").map(String.init)
    }
    static var errorCount: Int { Int(kiln_log_error_count()) }
    static func reset() { kiln_log_reset() }
}

/// An owned copy of a stream's `AVCodecParameters`.
final class CodecParameters: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<AVCodecParameters>

    init(copying source: UnsafePointer<AVCodecParameters>) throws(KilnError) {
        guard let p = avcodec_parameters_alloc() else {
            throw KilnError(.resourceLimit, stage: .verify, "out of memory for codec parameters")
        }
        pointer = p
        try check(avcodec_parameters_copy(p, source), .verify, "cannot copy codec parameters", as: .resourceLimit)
    }

    deinit { var p: UnsafeMutablePointer<AVCodecParameters>? = pointer; avcodec_parameters_free(&p) }
}

/// The libav libraries the process runs with, as loaded (a Debian update replaces them
/// under an installed Kiln): what a bug report needs beside Kiln's own version.
/// (libavfilter is loaded only by a transcode's first filter graph, so not asked here.)
public enum LibraryVersions {
    public static var text: String {
        func dotted(_ v: UInt32) -> String { "\(v >> 16).\((v >> 8) & 0xff).\(v & 0xff)" }
        return ["libavformat \(dotted(avformat_version()))", "libavcodec \(dotted(avcodec_version()))",
                "libswscale \(dotted(swscale_version()))",
                "libswresample \(dotted(swresample_version()))", "libavutil \(dotted(avutil_version()))"].joined(separator: ", ")
    }
}
