import CFFmpeg
import KilnCore

/// One sound made of several audio streams, their channels side by side in stream order
/// (ffmpeg's `amerge`): a camera's CH1 and CH2, recorded as two mono tracks, become the
/// left and right of one stereo sound (`AudioPlan.mergeSources`).
///
/// Each stream's decoded frames are converted to float planar at the first stream's rate
/// into a FIFO of their own. What a stream sends out is a queue of runs: its own samples
/// (in the FIFO) and silence (a count, which takes no memory). Whenever every queue holds
/// samples, the same count is taken from each into one frame, which the lane resamples
/// and encodes as it would a decoded one.
///
/// The streams keep to their timestamps on one clock, started by the first frame any of
/// them gives: a stream that starts later or has a gap gets silence there, one that
/// overlaps itself is cut, as the lane does for one stream, but past half a frame (a
/// stream's first frame: a tick of its clock), not the 40 ms sound may stray from
/// pictures: one lost 25p edit unit (1,920 samples) left the sides 40 ms apart for good.
/// So the sides stay together however the file interleaves them. Memory stays bounded:
/// - a stream that stops while another goes on gets silence once the other's own samples
///   have waited `heldSeconds` for it, and its sound, if it comes back, takes the place of
///   that silence;
/// - a stream whose times jump ahead alone (damage: a flipped bit put it an hour on)
///   waits behind its silence while the others go on: once that silence has gone out for
///   `jumpSeconds` with half a second of the stream's own samples waiting behind it, the jump
///   is taken for damage, the silence left out and the stream goes on where it is (what
///   waited of it is lost), so a gap both streams have (a recording's dropout) is still
///   kept, whatever its length, and costs no memory;
/// - a time more than `heldSeconds` past where the file's other streams (the pictures)
///   have come to is damage at once (`othersReach`).
/// At the end every stream is filled with silence to the longest, so nothing of any is
/// lost (`amerge` stops at the shortest); a stream that gave nothing is silence.
final class ChannelMerge {
    /// How far one stream's own samples may wait for another's before the other is taken
    /// to have stopped: 30 s of float mono is 5.6 MB at 48 kHz.
    static let heldSeconds = 30
    /// How long a jump's silence goes out with the stream's own samples waiting behind it
    /// (`Run.overtaken`) before the jump is taken for damage. A stream that starts late
    /// beside one that has stopped waits behind its silence too, but nothing overtakes it.
    static let jumpSeconds = 1
    /// The most samples in one merged frame (the lane re-cuts them for its encoder).
    static let frameSamples = 4096

    /// Samples of one stream in the order they go out: its own (`silent` false, in the
    /// FIFO) or silence. `consumed`: how much of a silent run has gone out; `overtaken`:
    /// how much of that went out while half a second or more of the stream's own samples waited
    /// behind it (the other streams going on past a jump it alone made).
    private struct Run {
        var silent: Bool
        var count: Int
        var consumed = 0
        var overtaken = 0
    }

    private struct Input {
        let index: Int32
        /// nil for the lane's own stream, whose decoder is the lane's.
        var decoder: Decoder?
        let fifo: Resampler
        let channels: Int32
        var packets = 0
        var runs: [Run] = []
        /// Samples its times are ahead of where it is: the jumps taken for damage.
        var shift: Int64 = 0
        /// Whether a frame of it has been placed.
        var started = false
        /// Samples queued, own and silence.
        var queued: Int { runs.reduce(0) { $0 + $1.count } }

        mutating func append(silent: Bool, _ count: Int) {
            guard count > 0 else { return }
            if let last = runs.last, last.silent == silent {
                runs[runs.count - 1].count += count
            } else {
                runs.append(Run(silent: silent, count: count))
            }
        }
    }
    private var inputs: [Input]
    /// The merged frames' layout: libavutil's default for the channels together (stereo
    /// for two mono streams), which is how `amerge` lays out inputs that state no positions.
    private var layout = AVChannelLayout()
    let rate: Int32
    var timeBase: AVRational { AVRational(num: 1, den: rate) }
    /// Output timestamp (samples at `rate`) of the first sample the queues hold; nil until
    /// the first frame.
    private var next: Int64?
    private let merged: Frame
    /// No gap is filled past the source's length plus a second (`AudioTranscodeLane.lastSecond`).
    private let lastSecond: Double?
    private let cancellation: Cancellation
    private(set) var counters = LaneStats()
    /// Frames no resampler takes (damaged parameters): skipped, their time filled later.
    private var rejected = 0
    /// Where the file's other audio and video streams have come to (seconds, output time;
    /// nil without any): a stream's time `heldSeconds` past it is damage, not a gap. Files
    /// store packets in time order, so a stream that starts late comes when the pictures
    /// get there; one whose times jumped an hour on comes with its neighbours (or, in
    /// Matroska, which orders by the times, after everything), far past the pictures. Its
    /// silence had made an 8 s camera clip 10 hours long.
    var othersReach: Double?

    /// `indices`: the lane's own stream first; `rate`: the first stream's.
    init(demuxer: Demuxer, indices: [Int32], rate: Int32, lastSecond: Double?) throws(KilnError) {
        self.rate = rate
        self.lastSecond = lastSecond
        cancellation = demuxer.cancellation
        merged = try Frame()
        var inputs: [Input] = []
        for (k, index) in indices.enumerated() {
            let stream = demuxer.stream(Int(index))
            let channels = max(1, stream.pointee.codecpar.pointee.ch_layout.nb_channels)
            var own = AVChannelLayout()
            ChannelLayouts.assumed(channels, into: &own)
            defer { av_channel_layout_uninit(&own) }
            let fifo = try Resampler(output: AudioFormat(sampleFormat: AV_SAMPLE_FMT_FLTP, sampleRate: rate, layout: own), limiting: false)
            inputs.append(Input(index: index, decoder: k == 0 ? nil : try Decoder(stream: stream, threads: 1), fifo: fifo, channels: channels))
        }
        self.inputs = inputs
        ChannelLayouts.assumed(inputs.reduce(0) { $0 + $1.channels }, into: &layout)
    }

    deinit { av_channel_layout_uninit(&layout) }

    /// Input `k`'s layout by name, as its FIFO holds it ("mono").
    func layoutName(of k: Int) -> String {
        var layout = inputs[k].fifo.output.layout
        return Prober.name(of: &layout) ?? "\(inputs[k].channels)c"
    }

    /// The merged layout, copied into `out`.
    func copyLayout(into out: inout AVChannelLayout) throws(KilnError) {
        try check(av_channel_layout_copy(&out, &layout), .filter, "cannot copy the channel layout")
    }

    var stats: LaneStats {
        var s = counters
        s.corruptPackets = rejected + inputs.reduce(0) { $0 + ($1.decoder?.corruptPackets ?? 0) }
        s.framesDecoded = inputs.reduce(0) { $0 + ($1.decoder?.framesDecoded ?? 0) }
        return s
    }

    /// Decodes a packet of one of the other streams (not the lane's own).
    func consume(_ packet: Packet, emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        guard let k = inputs.firstIndex(where: { $0.index == packet.streamIndex }), let decoder = inputs[k].decoder else {
            throw KilnError(.internalError, stage: .decode, "the merged sound has no stream \(packet.streamIndex)")
        }
        inputs[k].packets += 1
        try decoder.decodeRequiringOutput(packet, giveUpAfter: AudioTranscodeLane.undecodableAfterPackets) { (f: Frame) throws(KilnError) in
            try self.take(f, input: k, timeBase: decoder.timeBase, emit: emit)
        }
    }

    /// Places one decoded frame of input `k` (0: the lane's own stream) on the clock.
    func take(_ frame: Frame, input k: Int, timeBase: AVRational, emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        let f = frame.pointer
        let ts = f.pointee.best_effort_timestamp
        let start: Int64? = ts == noPTS ? nil : rescale(ts, from: timeBase, to: self.timeBase) - inputs[k].shift
        if next == nil { next = start ?? 0 }
        var skip: Int32 = 0
        if let start, let next {
            var lands = next + Int64(inputs[k].queued + inputs[k].fifo.held)
            // A stream's first frame takes its place to within a tick of its clock
            // (Matroska's millisecond): a side starting 5 ms late is 5 ms late. After that,
            // times within half a frame of where the samples have come are the same
            // place (a muxer's jitter of a few ms), and a lost frame, a whole one, is more.
            // 40 ms, what sound may stray from pictures, is more than a 25p edit unit
            // (1,920 samples): one lost would have left the sides 40 ms apart for good.
            let tick = Double(rate) * Double(timeBase.num) / Double(max(1, timeBase.den))
            let half = Double(f.pointee.nb_samples) * Double(rate) / Double(max(1, f.pointee.sample_rate)) / 2
            let exact = tick.rounded(.up) + 2
            let tolerance = Int64(inputs[k].started ? max(exact, min(half, AudioTranscodeLane.syncTolerance * Double(rate))) : exact)
            if start - lands > tolerance {
                // A time past the source's end is damage, not a gap (`AudioTranscodeLane`).
                if let lastSecond, Double(start) > lastSecond * Double(rate) {
                    counters.repairedTimestamps += 1
                } else if let reach = othersReach, Double(start) / Double(rate) - reach > Double(Self.heldSeconds) {
                    // It goes on where it is: its later times are the jump ahead.
                    inputs[k].shift += start - lands
                    counters.repairedTimestamps += 1
                } else {
                    // Lost frames are whole frames: on a clock coarser than a sample
                    // (Matroska's millisecond) a hole within a tick of a number of this
                    // frame's length is that many frames (1,024 samples, not the 1,008 the
                    // rounded times say, which moved the side after it 0.3 ms).
                    var gap = start - lands
                    let frame = Int64((2 * half).rounded())
                    if tick > 1, frame > 0, case let frames = (gap + frame / 2) / frame, frames >= 1,
                       abs(gap - frames * frame) <= Int64(tick.rounded(.up)) {
                        gap = frames * frame
                    }
                    inputs[k].append(silent: true, Int(gap))
                    counters.gapsFilled += 1
                }
            } else if lands - start > tolerance {
                // Silence given to a stream that had stopped gives way to its sound, where
                // it has not gone out yet.
                if let last = inputs[k].runs.last, last.silent {
                    let give = Int(min(Int64(last.count), lands - start))
                    inputs[k].runs[inputs[k].runs.count - 1].count -= give
                    if inputs[k].runs[inputs[k].runs.count - 1].count == 0 { inputs[k].runs.removeLast() }
                    lands -= Int64(give)
                }
                if lands - start > tolerance {
                    counters.framesDropped += 1
                    let inputRate = Int64(f.pointee.sample_rate)
                    let overlap = inputRate > 0 ? (lands - start) * inputRate / Int64(rate) : .max
                    guard overlap < Int64(f.pointee.nb_samples) else { return }
                    skip = Int32(overlap)
                }
            }
        }
        let before = inputs[k].fifo.buffered
        do { try inputs[k].fifo.push(frame, skipping: skip) } catch where error.code == .sourceCorrupt {
            rejected += 1
            return
        }
        inputs[k].started = true
        inputs[k].append(silent: false, inputs[k].fifo.buffered - before)
        try drain(emit: emit)
        try settle(emit: emit)
    }

    /// At the end: the other streams' decoders drained, what each FIFO's converter holds
    /// flushed, every stream filled with silence to the longest, and the rest merged.
    func finish(emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        // (A stream that gave no packet is silence: its decoder would say it gave nothing.)
        for k in inputs.indices where inputs[k].packets > 0 {
            guard let decoder = inputs[k].decoder else { continue }
            try decoder.decodeRequiringOutput(nil, giveUpAfter: AudioTranscodeLane.undecodableAfterPackets) { (f: Frame) throws(KilnError) in
                try self.take(f, input: k, timeBase: decoder.timeBase, emit: emit)
            }
        }
        for k in inputs.indices {
            let before = inputs[k].fifo.buffered
            try inputs[k].fifo.flush()
            inputs[k].append(silent: false, inputs[k].fifo.buffered - before)
        }
        let most = inputs.map(\.queued).max() ?? 0
        for k in inputs.indices { pad(k, to: most) }
        try drain(emit: emit)
    }

    /// Silence for input `k` up to `queued` samples.
    private func pad(_ k: Int, to queued: Int) {
        let n = queued - inputs[k].queued
        guard n > 0 else { return }
        inputs[k].append(silent: true, n)
        if n > Int(AudioTranscodeLane.syncTolerance * Double(rate)) { counters.gapsFilled += 1 }
    }

    /// Bounds what waits (see the type's comment): a jump that stood in long enough is left
    /// out; a stream whose own samples waited `heldSeconds` for the others gives them silence.
    private func settle(emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        let jump = Self.jumpSeconds * Int(rate)
        for k in inputs.indices {
            guard let first = inputs[k].runs.first, first.silent, first.overtaken >= jump, first.count > jump else { continue }
            // The samples that waited were due when the silence went out in their place; the
            // stream's later times are the jump ahead.
            inputs[k].runs.removeFirst()
            inputs[k].shift += Int64(first.consumed + first.count)
            try pull(first.consumed, from: k, into: nil)
            counters.repairedTimestamps += 1
        }
        if let waiting = inputs.indices.max(by: { inputs[$0].fifo.buffered < inputs[$1].fifo.buffered }),
           inputs[waiting].fifo.buffered > Self.heldSeconds * Int(rate) {
            let level = inputs[waiting].queued
            for k in inputs.indices where inputs[k].queued < level - Int(rate) { pad(k, to: level) }
        }
        try drain(emit: emit)
    }

    /// Merges what every queue holds, in frames of at most `frameSamples`.
    private func drain(emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        while let next, let ready = inputs.map(\.queued).min(), ready > 0 {
            try cancellation.check(.encode)
            let n = min(ready, Self.frameSamples)
            let f = merged.pointer
            merged.unref()
            f.pointee.nb_samples = Int32(n)
            f.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
            f.pointee.sample_rate = rate
            try check(av_channel_layout_copy(&f.pointee.ch_layout, &layout), .filter, "cannot set the channel layout")
            try check(av_frame_get_buffer(f, 0), .filter, "cannot allocate an audio frame")
            let planes = UnsafeMutablePointer<UnsafeMutableRawPointer?>(OpaquePointer(f.pointee.extended_data!))
            var channel = 0
            for k in inputs.indices {
                try pull(n, from: k, into: planes + channel)
                channel += Int(inputs[k].channels)
            }
            f.pointee.pts = next
            f.pointee.best_effort_timestamp = next
            self.next = next + Int64(n)
            try emit(merged)
            merged.unref()
        }
    }

    /// Takes `count` samples from the front of input `k`'s queue into its channels' planes
    /// (`planes`, float), or leaves them out (nil).
    private func pull(_ count: Int, from k: Int, into planes: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) throws(KilnError) {
        var done = 0
        let channels = Int(inputs[k].channels)
        let width = MemoryLayout<Float>.size
        while done < count, let run = inputs[k].runs.first {
            let m = min(run.count, count - done)
            if run.silent {
                if let planes { for c in 0..<channels { planes[c]!.advanced(by: done * width).initializeMemory(as: UInt8.self, repeating: 0, count: m * width) } }
                inputs[k].runs[0].consumed += m
                if inputs[k].fifo.buffered >= Int(rate) / 2 { inputs[k].runs[0].overtaken += m }
            } else if let planes {
                var at = (0..<channels).map { planes[$0]!.advanced(by: done * width) as UnsafeMutableRawPointer? }
                try at.withUnsafeMutableBufferPointer { (p) throws(KilnError) in try inputs[k].fifo.read(m, into: p.baseAddress!) }
            } else {
                try inputs[k].fifo.discard(m)
            }
            inputs[k].runs[0].count -= m
            if inputs[k].runs[0].count == 0 { inputs[k].runs.removeFirst() }
            done += m
        }
    }
}
