import CFFmpeg
import KilnCore

/// One sound made of several audio streams, their channels side by side in stream order
/// (ffmpeg's `amerge`): a camera's CH1 and CH2, recorded as two mono tracks, become the
/// left and right of one stereo sound (`AudioPlan.mergeSources`).
///
/// Each stream's decoded frames are converted to float planar at the encoder's rate into
/// a FIFO of their own; whenever every FIFO holds samples, the same count is taken from
/// each into one frame, which the lane encodes as it would a decoded one. The streams keep
/// to their timestamps on one clock, started by the first frame any of them gives: a
/// stream that starts later or has a gap is filled with silence, one that overlaps itself
/// is cut, past `AudioTranscodeLane.syncTolerance`, as the lane does for one stream. So
/// the sides stay together to the sample however the file interleaves them. A stream that
/// stops while another goes on is filled with silence once the other is `heldSeconds`
/// ahead (memory stays bounded); at the end every stream is filled to the longest, so
/// nothing of any is lost (`amerge` stops at the shortest).
final class ChannelMerge {
    /// How far one stream's samples may wait for another's before the other is taken to
    /// have stopped: 30 s of float mono is 5.6 MB at 48 kHz.
    static let heldSeconds = 30
    /// The most samples in one merged frame (the lane re-cuts them for its encoder).
    static let frameSamples = 4096

    private struct Input {
        let index: Int32
        /// nil for the lane's own stream, whose decoder is the lane's.
        var decoder: Decoder?
        let fifo: Resampler
        let channels: Int32
    }
    private var inputs: [Input]
    /// The merged frames' layout: libavutil's default for the channels together (stereo
    /// for two mono streams), which is how `amerge` lays out inputs that state no positions.
    private var layout = AVChannelLayout()
    let rate: Int32
    var timeBase: AVRational { AVRational(num: 1, den: rate) }
    /// Output timestamp (samples at `rate`) of the first sample the FIFOs hold; nil until
    /// the first frame.
    private var next: Int64?
    private let merged: Frame
    /// No gap is filled past the source's length plus a second (`AudioTranscodeLane.lastSecond`).
    private let lastSecond: Double?
    private let cancellation: Cancellation
    private(set) var counters = LaneStats()
    /// Frames no resampler takes (damaged parameters): skipped, their time filled later.
    private var rejected = 0

    /// `indices`: the lane's own stream first; `rate`: the encoder's.
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

    /// The channel count of the merged sound.
    var channels: Int32 { layout.nb_channels }

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
        try decoder.decodeRequiringOutput(packet, giveUpAfter: AudioTranscodeLane.undecodableAfterPackets) { (f: Frame) throws(KilnError) in
            try self.take(f, input: k, timeBase: decoder.timeBase, emit: emit)
        }
    }

    /// Places one decoded frame of input `k` (0: the lane's own stream) on the clock.
    func take(_ frame: Frame, input k: Int, timeBase: AVRational, emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        let f = frame.pointer
        let ts = f.pointee.best_effort_timestamp
        let start: Int64? = ts == noPTS ? nil : rescale(ts, from: timeBase, to: self.timeBase)
        if next == nil { next = start ?? 0 }
        var skip: Int32 = 0
        if let start, let next {
            let fifo = inputs[k].fifo
            let lands = next + Int64(fifo.buffered + fifo.held)
            let tolerance = Int64(AudioTranscodeLane.syncTolerance * Double(rate))
            if start - lands > tolerance {
                // A time past the source's end is damage, not a gap (`AudioTranscodeLane`).
                if let lastSecond, Double(start) > lastSecond * Double(rate) {
                    counters.repairedTimestamps += 1
                } else {
                    try fill(k, count: Int(start - lands), emit: emit)
                    counters.gapsFilled += 1
                }
            } else if lands - start > tolerance {
                counters.framesDropped += 1
                let inputRate = Int64(f.pointee.sample_rate)
                let overlap = inputRate > 0 ? (lands - start) * inputRate / Int64(rate) : .max
                guard overlap < Int64(f.pointee.nb_samples) else { return }
                skip = Int32(overlap)
            }
        }
        do { try inputs[k].fifo.push(frame, skipping: skip) } catch where error.code == .sourceCorrupt {
            rejected += 1
            return
        }
        try drain(emit: emit)
        // A stream that has stopped (its track ends early, its packets are gone): silence,
        // so the others' samples do not pile up waiting for it.
        let most = inputs.map(\.fifo.buffered).max() ?? 0
        if most > Self.heldSeconds * Int(rate) {
            for j in inputs.indices where inputs[j].fifo.buffered < most - Int(rate) {
                try fill(j, count: most - inputs[j].fifo.buffered, emit: emit)
                counters.gapsFilled += 1
            }
        }
    }

    /// At the end: the other streams' decoders drained, what each FIFO's converter holds
    /// flushed, every stream filled with silence to the longest, and the rest merged.
    func finish(emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        for k in inputs.indices {
            guard let decoder = inputs[k].decoder else { continue }
            try decoder.decodeRequiringOutput(nil, giveUpAfter: AudioTranscodeLane.undecodableAfterPackets) { (f: Frame) throws(KilnError) in
                try self.take(f, input: k, timeBase: decoder.timeBase, emit: emit)
            }
        }
        for input in inputs { try input.fifo.flush() }
        let most = inputs.map(\.fifo.buffered).max() ?? 0
        for k in inputs.indices where inputs[k].fifo.buffered < most {
            try fill(k, count: most - inputs[k].fifo.buffered, emit: emit)
        }
        try drain(emit: emit)
    }

    /// Silence for input `k`, merged as it is made, a second at a time: the other streams
    /// hold the samples it pairs with, or come with them next.
    private func fill(_ k: Int, count: Int, emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        var left = count
        while left > 0 {
            try cancellation.check(.encode)
            let n = min(left, Int(rate))
            try inputs[k].fifo.pushSilence(n)
            try drain(emit: emit)
            left -= n
        }
    }

    /// Merges what every FIFO holds, in frames of at most `frameSamples`.
    private func drain(emit: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        while let next, let ready = inputs.map(\.fifo.buffered).min(), ready > 0 {
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
            for input in inputs {
                try input.fifo.read(n, into: planes + channel)
                channel += Int(input.channels)
            }
            f.pointee.pts = next
            f.pointee.best_effort_timestamp = next
            self.next = next + Int64(n)
            try emit(merged)
            merged.unref()
        }
    }
}
