import CFFmpeg
import KilnCore

/// Completes an H.264 or HEVC sample entry whose parameter sets travel only in the stream.
///
/// MP4 files tagged `avc3`/`hev1` may leave their `avcC`/`hvcC` without SPS/PPS (and VPS):
/// decoders find them in the keyframes instead. A remux writes `avc1`/`hvc1`, which promise
/// them in the sample entry; Apple's players read them only from there. The MP4 muxer copies
/// an `avcC`/`hvcC` it is given as it is, so a copy would keep the empty lists under the
/// new tag. This builds the record again with the parameter sets of the stream's first
/// keyframe, keeping the rest of the header, so the output is what its tag says.
enum ParameterSets {
    /// A complete `avcC`/`hvcC` for `stream` of the file at `path`, or nil when its own is
    /// complete already, is not in record form (Annex B sources: libav builds the record
    /// from the stream), or the first keyframe does not carry what is missing.
    static func completedRecord(for stream: UnsafeMutablePointer<AVStream>, path: String) -> [UInt8]? {
        let par = stream.pointee.codecpar.pointee
        guard par.codec_id == AV_CODEC_ID_HEVC || par.codec_id == AV_CODEC_ID_H264,
              let data = par.extradata, par.extradata_size > 0 else { return nil }
        let bytes = Array(UnsafeBufferPointer(start: data, count: Int(par.extradata_size)))
        let hevc = par.codec_id == AV_CODEC_ID_HEVC
        let record: (any DecoderRecord)? = hevc ? HVCC(bytes) : AVCC(bytes)
        guard let parsed = record, !parsed.isComplete else { return nil }
        let found = keyframeUnits(stream: Int(stream.pointee.index), path: path, lengthSize: parsed.lengthSize) {
            parsed.needed.contains(hevc ? ($0 >> 1) & 0x3f : $0 & 0x1f)
        }
        return parsed.completed(with: found)
    }

    /// The NAL units of the stream's first keyframe that `wanted` (given the unit's first
    /// byte) picks, in stream order, without repeats (`Demuxer.readAfresh`).
    static func keyframeUnits(stream index: Int, path: String, lengthSize: Int, wanted: (UInt8) -> Bool) -> [[UInt8]] {
        var units: [[UInt8]] = []
        Demuxer.readAfresh(path) { p in
            guard p.stream_index == Int32(index), p.flags & AV_PKT_FLAG_KEY != 0, let bytes = p.data else { return true }
            LengthPrefixed.forEachUnit(in: UnsafeBufferPointer(start: bytes, count: Int(p.size)), lengthSize: lengthSize) { u in
                let unit = Array(u)
                if wanted(unit[0]), !units.contains(unit) { units.append(unit) }
            }
            return false
        }
        return units
    }
}

extension Demuxer {
    /// How many packets a reader of its own reads at most (`readAfresh`).
    static let afreshReadLimit = 10_000

    /// Reads the file's first packets with a demuxer of its own, handing each to `body`
    /// until it says stop (false), the file ends, or `afreshReadLimit` were read: what a
    /// sample entry needs from the stream (parameter sets, LATM's configuration), learnt
    /// before the copy reads a packet. False where the file could not be opened.
    @discardableResult
    static func readAfresh(_ path: String, _ body: (AVPacket) -> Bool) -> Bool {
        guard let demuxer = try? Demuxer(path: path, cancellation: Cancellation(), analyze: false),
              let packet = try? Packet() else { return false }
        for _ in 0..<afreshReadLimit {
            guard (try? demuxer.read(into: packet)) == true else { break }
            defer { packet.unref() }
            if !body(packet.pointer.pointee) { break }
        }
        return true
    }
}

/// NAL units as MP4 and Matroska store them: each after its big-endian length of
/// `lengthSize` bytes (the avcC/hvcC record says how many).
enum LengthPrefixed {
    /// Calls `body` with each unit (never empty), stopping at a length that runs past the end.
    static func forEachUnit(in data: UnsafeBufferPointer<UInt8>, lengthSize: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        guard let base = data.baseAddress, lengthSize > 0 else { return }
        var at = 0
        while at + lengthSize < data.count {
            var length = 0
            for i in 0..<lengthSize { length = length << 8 | Int(data[at + i]) }
            at += lengthSize
            guard length > 0, at + length <= data.count else { return }
            body(UnsafeBufferPointer(start: base + at, count: length))
            at += length
        }
    }
}

/// An `avcC`/`hvcC` record as far as completing it needs.
protocol DecoderRecord {
    /// The size of each NAL unit's length prefix in the samples.
    var lengthSize: Int { get }
    /// The NAL unit types a complete record lists.
    var needed: Set<UInt8> { get }
    var isComplete: Bool { get }
    /// The record with the parameter sets among `units`, or nil if some are still missing.
    func completed(with units: [[UInt8]]) -> [UInt8]?
}

/// Reads a record front to back; nil past its end (a damaged record is left as it is).
private struct RecordReader {
    let bytes: [UInt8]
    var at: Int
    init(_ bytes: [UInt8], at: Int) { self.bytes = bytes; self.at = at }

    mutating func byte() -> UInt8? {
        guard at < bytes.count else { return nil }
        defer { at += 1 }
        return bytes[at]
    }

    /// `count` units, each after its big-endian 16-bit length.
    mutating func units(_ count: Int) -> [[UInt8]]? {
        var units: [[UInt8]] = []
        for _ in 0..<count {
            guard let high = byte(), let low = byte() else { return nil }
            let length = Int(high) << 8 | Int(low)
            guard at + length <= bytes.count else { return nil }
            units.append(Array(bytes[at..<at + length]))
            at += length
        }
        return units
    }
}

/// Big-endian 16-bit length followed by the bytes, as both records list their units.
private func lengthPrefixed(_ unit: [UInt8]) -> [UInt8] { [UInt8(unit.count >> 8), UInt8(unit.count & 0xff)] + unit }

/// ISO/IEC 14496-15 `HEVCDecoderConfigurationRecord`: a 22-byte header, then arrays of NAL
/// units by type.
struct HVCC: DecoderRecord {
    let header: [UInt8]
    /// (type, units), as listed.
    let arrays: [(type: UInt8, units: [[UInt8]])]
    let needed: Set<UInt8> = [32, 33, 34]   // VPS, SPS, PPS

    init?(_ record: [UInt8]) {
        guard record.count >= 23, record[0] == 1 else { return nil }
        header = Array(record[0..<22])
        var arrays: [(UInt8, [[UInt8]])] = []
        var reader = RecordReader(record, at: 23)
        for _ in 0..<Int(record[22]) {
            guard let type = reader.byte(), let high = reader.byte(), let low = reader.byte(),
                  let units = reader.units(Int(high) << 8 | Int(low)) else { return nil }
            arrays.append((type & 0x3f, units))
        }
        self.arrays = arrays
    }

    var lengthSize: Int { Int(header[21] & 3) + 1 }

    var isComplete: Bool { needed.allSatisfy { t in arrays.contains { $0.type == t && !$0.units.isEmpty } } }

    func completed(with units: [[UInt8]]) -> [UInt8]? {
        let sets = needed.sorted().map { t in (type: t, units: units.filter { ($0[0] >> 1) & 0x3f == t }) }
        guard sets.allSatisfy({ !$0.units.isEmpty }) else { return nil }
        // The parameter sets first, complete (array_completeness set, as hvc1 requires);
        // other arrays (SEI) as they were.
        let all = sets + arrays.filter { !needed.contains($0.type) && !$0.units.isEmpty }
        var out = header + [UInt8(all.count)]
        for a in all {
            out += [(needed.contains(a.type) ? 0x80 : 0) | a.type, UInt8(a.units.count >> 8), UInt8(a.units.count & 0xff)]
            for u in a.units { out += lengthPrefixed(u) }
        }
        return out
    }
}

/// ISO/IEC 14496-15 `AVCDecoderConfigurationRecord`: version, profile, compatibility,
/// level, length size, then the SPS and PPS lists.
struct AVCC: DecoderRecord {
    let lengthSize: Int
    let sps: [[UInt8]]
    let pps: [[UInt8]]
    let needed: Set<UInt8> = [7, 8]   // SPS, PPS

    init?(_ record: [UInt8]) {
        guard record.count >= 7, record[0] == 1 else { return nil }
        lengthSize = Int(record[4] & 3) + 1
        var reader = RecordReader(record, at: 5)
        guard let spsCount = reader.byte(), let sps = reader.units(Int(spsCount & 0x1f)),
              let ppsCount = reader.byte(), let pps = reader.units(Int(ppsCount)) else { return nil }
        self.sps = sps
        self.pps = pps
    }

    var isComplete: Bool { !sps.isEmpty && !pps.isEmpty }

    func completed(with units: [[UInt8]]) -> [UInt8]? {
        let sps = units.filter { $0[0] & 0x1f == 7 && $0.count >= 4 }, pps = units.filter { $0[0] & 0x1f == 8 }
        guard !sps.isEmpty, !pps.isEmpty, sps.count < 32, pps.count < 256 else { return nil }
        // Profile, compatibility and level as the first SPS states them.
        var out: [UInt8] = [1, sps[0][1], sps[0][2], sps[0][3], 0xfc | UInt8(lengthSize - 1), 0xe0 | UInt8(sps.count)]
        for s in sps { out += lengthPrefixed(s) }
        out.append(UInt8(pps.count))
        for p in pps { out += lengthPrefixed(p) }
        return out
    }
}

/// Replaces a stream's extradata with `bytes` (libav-allocated, padded as libav requires).
func setExtradata(_ par: UnsafeMutablePointer<AVCodecParameters>, _ bytes: [UInt8]) throws(KilnError) {
    guard let buffer = av_mallocz(bytes.count + Int(AV_INPUT_BUFFER_PADDING_SIZE))?.assumingMemoryBound(to: UInt8.self) else {
        throw KilnError(.resourceLimit, stage: .mux, "out of memory for a stream's parameter sets")
    }
    buffer.update(from: bytes, count: bytes.count)
    av_freep(&par.pointee.extradata)
    par.pointee.extradata = buffer
    par.pointee.extradata_size = Int32(bytes.count)
}
