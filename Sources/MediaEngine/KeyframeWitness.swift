import CFFmpeg
import KilnCore
import Synchronization

/// Decodes, beside a video stream copy, the keyframes verification will ask about — the
/// first, and the last one before the final second — so verification need not decode
/// them after the copy, when nothing is left to overlap with.
///
/// Verification still reads those keyframes from the finished output; it takes this
/// decoder's word for one only when the output's packet is byte for byte the packet
/// decoded here and the output's codec parameters (the sample entry: SPS/PPS/VPS) are
/// the ones this decoder was opened with (`Verifier` checks both). Identical bytes through
/// an identical decoder setup decode identically, so it is the same check, done earlier.
/// Anything else (a container change that rewrites packets, such as Annex B in MPEG-TS
/// to MP4, or a keyframe it did not predict) verification decodes as before.
final class KeyframeWitness: @unchecked Sendable {
    /// One witnessed keyframe: its bytes (a reference to the demuxer's buffer) and whether
    /// it decoded; `verdict` waits for the decode.
    final class Entry: @unchecked Sendable {
        let packet: Packet
        fileprivate var decoded = false
        fileprivate var started = false      // guarded by the witness's lock
        fileprivate let done = Latch()

        fileprivate init(_ packet: Packet) { self.packet = packet }

        /// Whether the keyframe decoded without error (waits for the decode).
        var verdict: Bool {
            done.wait()
            return decoded
        }
    }

    /// The stream's parameters, copied: the worker opens its decoders from them while the
    /// copying thread goes on reading the stream, and verification compares the output's
    /// with them.
    let parameters: CodecParameters
    private let timeBase: AVRational
    private let frameRate: AVRational
    private let streamIndex: Int
    /// Keyframes at or before this output time may be the last second's (verification
    /// seeks to the stream's end minus one second and decodes the keyframe it finds).
    private let lastSecondStart: Double
    /// How far before the last second keyframes are decoded while the copy runs: which
    /// one is last is only known at the end, but decoding the newest as they come (a newer
    /// one replaces any still waiting) finds it done, or nearly, when the copy ends. GOPs
    /// rarely exceed 10 s.
    static let speculationWindow = 10.0
    /// How far the output's stream duration may differ from the source's estimate.
    static let boundary = 0.5

    /// What verification may match, in the copy's order; owned by the copying thread.
    private(set) var entries: [Entry] = []
    /// Keyframes verification took from this witness instead of decoding them.
    private(set) var matches = 0
    /// Keyframes handed to the decoder (some dropped before it started on them).
    private(set) var queued = 0
    /// Keyframes no decoder has started on.
    var waiting: Int { state.withLock { $0.waiting.count } }
    private var candidate: Entry?
    private var offeredFirst = false
    /// The stream's keyframes as the source's index lists them (MP4's sample table,
    /// Matroska's cues), in output seconds, ascending; empty without an index.
    private var indexed: [Double] = []
    /// Entries waiting for the decoder, whether the worker is running, and whether decodes
    /// wait for `decodeWaiting` instead of a worker (`deferDecodes`).
    private let state = Mutex<(waiting: [Entry], running: Bool, deferred: Bool)>(([], false, false))

    init(stream: UnsafeMutablePointer<AVStream>, durationSeconds: Double) throws(KilnError) {
        // One decoder opened now: a stream without one fails here, and the copy goes on
        // without a witness (verification then decodes, and says why it cannot).
        _ = try Decoder(stream: stream, threads: 1, sharedPicture: true)
        parameters = try CodecParameters(copying: stream.pointee.codecpar)
        frameRate = stream.pointee.avg_frame_rate.num > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate
        streamIndex = Int(stream.pointee.index)
        timeBase = stream.pointee.time_base
        lastSecondStart = max(0, durationSeconds - 1)
    }

    /// Whether an MP4 copy of the stream keeps its samples and sample entry as the source
    /// has them, so that decoding the source's keyframes can stand for decoding the
    /// output's. Not for H.264 or HEVC in Annex B (MPEG-TS, AVI, bare streams): the MP4
    /// muxer writes those as length-prefixed samples under a new avcC/hvcC, verification
    /// never takes such a witness's word, and its decodes (an open-GOP HEVC keyframe in
    /// Annex B with its invented references) were spent for nothing.
    static func copyKeepsSamples(_ stream: UnsafeMutablePointer<AVStream>) -> Bool {
        let par = stream.pointee.codecpar.pointee
        guard par.codec_id == AV_CODEC_ID_H264 || par.codec_id == AV_CODEC_ID_HEVC else { return true }
        // avcC and hvcC both begin with configuration version 1; Annex B with a start code.
        return par.extradata_size > 0 && par.extradata[0] == 1
    }

    /// Learns where the stream's keyframes are from the source's index, so that a keyframe
    /// the index shows is followed by another before the last second is not decoded for
    /// nothing (`shift`: what the pipeline adds to the source's timestamps, AV_TIME_BASE
    /// units). An index that is wrong or sparse only costs decodes: a keyframe verification
    /// asks about and nobody decoded is decoded by verification.
    func expectKeyframes(of stream: UnsafeMutablePointer<AVStream>, shift: Int64) {
        let count = min(Int(avformat_index_get_entries_count(stream)), 1 << 22)
        let offset = Double(shift) / Double(kiln_time_base())
        var times: [Double] = []
        for i in 0..<count {
            guard let e = avformat_index_get_entry(stream, Int32(i)), e.pointee.flags & AVINDEX_KEYFRAME != 0,
                  let t = seconds(e.pointee.timestamp, timeBase) else { continue }
            times.append(t + offset)
        }
        indexed = times.sorted()
    }

    /// Called by the copy lane with each video keyframe it writes (timestamps shifted so
    /// the output starts at zero).
    func offer(_ packet: Packet) throws(KilnError) {
        // A keyframe that cannot be decoded alone (a recovery point) verification decodes
        // on from itself; a lone decode here would only fail.
        if !offeredFirst {
            offeredFirst = true
            if Decoder.decodesAlone(packet, parameters: parameters.pointer) { try enqueue(packet, replacing: nil) }
            return
        }
        guard let t = seconds(packet.time, timeBase), t <= lastSecondStart + Self.boundary,
              t >= lastSecondStart - Self.speculationWindow, Decoder.decodesAlone(packet, parameters: parameters.pointer) else { return }
        if t >= lastSecondStart - Self.boundary {
            // Near the boundary the output's own duration (what verification measures from)
            // decides which side a keyframe falls on: keep both.
            try enqueue(packet, replacing: nil)
        } else if !indexShowsLater(than: t) {
            candidate = try enqueue(packet, replacing: candidate)
        }
    }

    /// Whether the index lists a keyframe after `t` that still comes before the last
    /// second (or near its boundary, where both are kept): `t`'s is then not the last.
    private func indexShowsLater(than t: Double) -> Bool {
        // Half a frame: the index and the packet may round the same time differently.
        let slack = frameRate.num > 0 ? 0.5 * Double(frameRate.den) / Double(frameRate.num) : 0.02
        var lo = 0, hi = indexed.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if indexed[mid] <= t + slack { lo = mid + 1 } else { hi = mid }
        }
        return lo < indexed.count && indexed[lo] <= lastSecondStart + Self.boundary
    }


    /// Keyframes wait for `decodeWaiting` instead of a thread of their own. While an index
    /// forecast and the hash it lets start early hold the second core, that core is the
    /// run's critical path and a decode there delays the whole run; the copying thread, once
    /// the copy is done, has nothing to do but wait for the hash.
    func deferDecodes() { state.withLock { $0.deferred = true } }

    /// Decodes the keyframes still waiting, on this thread, unless a worker is at it; later
    /// ones get a worker again.
    func decodeWaiting() {
        let run = state.withLock { s -> Bool in
            s.deferred = false
            guard !s.running, !s.waiting.isEmpty else { return false }
            s.running = true
            return true
        }
        if run { drain() }
    }

    /// The witnessed keyframe with exactly these bytes, if any. A decode still deferred is
    /// done first, here: nobody else would start it.
    func entry(matching packet: Packet) -> Entry? {
        decodeWaiting()
        let p = packet.pointer.pointee
        let found = entries.first { e in
            let w = e.packet.pointer.pointee
            return w.size == p.size && (p.size == 0 || memcmp(w.data, p.data, Int(p.size)) == 0)
        }
        if found != nil { matches += 1 }
        return found
    }


    /// Queues `packet` for decoding; `replacing`, if the decoder has not started on it yet,
    /// is dropped (a newer candidate supersedes it).
    @discardableResult
    private func enqueue(_ packet: Packet, replacing old: Entry?) throws(KilnError) -> Entry {
        let held = try Packet()
        try check(av_packet_ref(held.pointer, packet.pointer), .verify, "cannot hold a keyframe", as: .resourceLimit)
        let entry = Entry(held)
        queued += 1
        let (dropped, start) = state.withLock { s -> (Bool, Bool) in
            var dropped = false
            if let old, !old.started, let i = s.waiting.firstIndex(where: { $0 === old }) {
                s.waiting.remove(at: i)
                dropped = true
            }
            s.waiting.append(entry)
            let start = !s.running && !s.deferred
            if start { s.running = true }
            return (dropped, start)
        }
        if dropped, let old { entries.removeAll { $0 === old } }
        entries.append(entry)
        if start { Threads.start { [self] in drain() } }
        return entry
    }

    /// The worker: decodes waiting entries until none is left.
    private func drain() {
        while let entry = state.withLock({ s -> Entry? in
            guard !s.waiting.isEmpty else { s.running = false; return nil }
            let e = s.waiting.removeFirst()
            e.started = true
            return e
        }) {
            // A decoder of its own for each keyframe, as verification opens one: a keyframe
            // that only decodes after another (parameter sets sent in band once) fails here
            // too. One at a time, freed (a UHD picture and its tables) when it is done.
            var frames = 0
            do {
                let decoder = try Decoder(parameters: parameters.pointer, timeBase: timeBase, frameRate: frameRate,
                                          streamIndex: streamIndex, threads: 1, sharedPicture: true)
                try decoder.decodeKeyframeAlone(entry.packet) { (_: Frame) throws(KilnError) in frames += 1 }
                if decoder.corruptPackets > 0 { frames = 0 }
            } catch {
                frames = 0
            }
            entry.decoded = frames > 0
            entry.done.open()
        }
    }
}

