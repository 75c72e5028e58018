import CFFmpeg
import KilnCore

/// The format an audio encoder takes: sample format, rate and channel layout.
struct AudioFormat {
    var sampleFormat: AVSampleFormat
    var sampleRate: Int32
    var layout: AVChannelLayout
}

/// Channel layouts where a stream states none, and for a re-encode's output.
enum ChannelLayouts {
    /// The layout assumed for `channels` channels in no stated order (AVI, some MPEG-TS,
    /// PCM in Matroska): libavutil's default, except that three are left, right and centre
    /// (3.0) rather than 2.1. Mixed down to stereo, a centre taken for LFE is dropped, and
    /// with it the dialogue; an LFE taken for a centre is only heard a little.
    /// libavutil has no default for some counts (9, 11, 13–15, 17 …); those channels are
    /// taken in WAVE's order, the first positions of libavutil's native order (front pair,
    /// centre, LFE, back pair, front centre pair, back centre, side pair, top …), which
    /// libswresample can mix. In no order at all, none of 9 channels of PCM could be mixed
    /// down, and the output was silence. Beyond the 18 positions WAVE names, the count
    /// stays in no order, and a mix to fewer channels is refused.
    static func assumed(_ channels: Int32, into layout: inout AVChannelLayout) {
        av_channel_layout_uninit(&layout)
        if channels == 3, av_channel_layout_from_string(&layout, "3.0") == 0 { return }
        av_channel_layout_default(&layout, channels)
        if layout.order != AV_CHANNEL_ORDER_NATIVE, channels > 0, channels <= AV_CHAN_TOP_BACK_RIGHT.rawValue + 1 {
            av_channel_layout_uninit(&layout)
            av_channel_layout_from_mask(&layout, (UInt64(1) << UInt64(channels)) - 1)
        }
    }

    /// Which of `candidates` (layouts of the same count) a source in `source` is best
    /// re-encoded into: the one that keeps the most of its channels; among equals, one
    /// with side surrounds where the source has them, then the first. A 7.1 source (front,
    /// centre, LFE, back and side pairs) keeps its side pair in 5.1: BS.775's surrounds
    /// sit where 7.1's sides do, and the back pair folds into them at −3 dB, as the ffmpeg
    /// command does. libavutil's default 5.1 has back surrounds, into which the side pair
    /// was folded at −3 dB and the back pair kept whole.
    static func best(of candidates: [AVChannelLayout], for source: inout AVChannelLayout) -> AVChannelLayout? {
        var guess = AVChannelLayout()
        defer { av_channel_layout_uninit(&guess) }
        if source.order != AV_CHANNEL_ORDER_NATIVE { assumed(source.nb_channels, into: &guess) }
        let mask = source.order == AV_CHANNEL_ORDER_NATIVE ? source.u.mask : guess.u.mask
        // AV_CH_SIDE_LEFT and _RIGHT (macros Swift does not import): their channels' bits.
        let sides: UInt64 = 1 << AV_CHAN_SIDE_LEFT.rawValue | 1 << AV_CHAN_SIDE_RIGHT.rawValue
        func score(_ c: AVChannelLayout) -> (Int, Int) {
            var layout = c
            let kept = av_channel_layout_subset(&layout, mask).nonzeroBitCount
            let side = mask & sides == sides && av_channel_layout_subset(&layout, sides) == sides ? 1 : 0
            return (kept, side)
        }
        var best: (layout: AVChannelLayout, score: (Int, Int))?
        for c in candidates where best == nil || score(c) > best!.score { best = (c, score(c)) }
        return best?.layout
    }
}

/// Converts decoded audio to the encoder's format with libswresample (sample format,
/// rate, and a downmix such as 5.1 → stereo with libswresample's standard matrix), and
/// re-cuts it into frames of the encoder's frame size through an `AVAudioFifo`.
final class Resampler {
    let output: AudioFormat
    private var swr: OpaquePointer?
    private var fifo: OpaquePointer
    /// The input format the current `SwrContext` was made for; a change rebuilds it.
    private var inputKey: (format: Int32, rate: Int32, layout: AVChannelLayout)?
    private let scratch: Frame
    /// Between libswresample and the FIFO, for float planar output (which every encoder
    /// Kiln re-encodes with takes).
    private var limiter: PeakLimiter?

    /// The resampler keeps its own copy of `output.layout`. `limiting`: float planar output
    /// goes through the peak limiter (false where the sound is not yet the encoder's: one
    /// stream of several a `ChannelMerge` makes one of).
    init(output: AudioFormat, limiting: Bool = true) throws(KilnError) {
        var own = output, source = output.layout
        own.layout = AVChannelLayout()
        try check(av_channel_layout_copy(&own.layout, &source), .filter, "cannot copy the channel layout")
        self.output = own
        if limiting, output.sampleFormat == AV_SAMPLE_FMT_FLTP {
            limiter = PeakLimiter(channels: Int(output.layout.nb_channels), sampleRate: output.sampleRate)
        }
        guard let fifo = av_audio_fifo_alloc(output.sampleFormat, output.layout.nb_channels, 4096) else {
            throw KilnError(.resourceLimit, stage: .filter, "out of memory for the audio FIFO")
        }
        self.fifo = fifo
        do { scratch = try Frame() } catch { av_audio_fifo_free(fifo); av_channel_layout_uninit(&own.layout); throw error }
    }

    deinit {
        swr_free(&swr)
        av_audio_fifo_free(fifo)
        var layout = output.layout
        av_channel_layout_uninit(&layout)
        if var key = inputKey?.layout { av_channel_layout_uninit(&key) }
    }

    /// Samples waiting in the FIFO.
    var buffered: Int { Int(av_audio_fifo_size(fifo)) }

    /// Converts one decoded frame and appends the result to the FIFO; without its first
    /// `skipping` samples (at the frame's rate) where the source overlapped itself.
    func push(_ frame: Frame, skipping: Int32 = 0) throws(KilnError) {
        let f = frame.pointer
        var layout = AVChannelLayout()
        if f.pointee.ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || f.pointee.ch_layout.nb_channels == 0 {
            // Containers that only give a count (AVI, some TS): assume the usual layout.
            ChannelLayouts.assumed(max(1, f.pointee.ch_layout.nb_channels), into: &layout)
        } else {
            try check(av_channel_layout_copy(&layout, &f.pointee.ch_layout), .filter, "cannot read the channel layout")
        }
        defer { av_channel_layout_uninit(&layout) }
        // A damaged stream can decode into a frame no resampler takes (no rate, no or
        // impossibly many channels): that frame is the source's damage, not our failure.
        let stated = f.pointee.ch_layout.nb_channels
        guard f.pointee.sample_rate > 0, stated > 0, stated <= 64 else {
            throw KilnError(.sourceCorrupt, stage: .filter,
                            "a decoded audio frame has \(f.pointee.sample_rate) Hz and \(stated) channels")
        }
        // A count no layout is known for (past WAVE's 18 positions) is a format Kiln lacks:
        // the resampler takes no unordered channels.
        guard layout.nb_channels > 0, layout.order != AV_CHANNEL_ORDER_UNSPEC else {
            throw KilnError(.sourceUnsupported, stage: .filter, "no channel layout is known for \(stated) channels")
        }
        try configure(format: f.pointee.format, rate: f.pointee.sample_rate, layout: layout)
        let skip = min(max(0, skipping), f.pointee.nb_samples)
        guard skip > 0 else {
            // Every frame but a cut one: its planes as they are, no array built per frame.
            return try convert(UnsafeMutablePointer<UnsafePointer<UInt8>?>(OpaquePointer(f.pointee.extended_data)), count: f.pointee.nb_samples)
        }
        let format = AVSampleFormat(rawValue: f.pointee.format)
        let planar = av_sample_fmt_is_planar(format) != 0
        // Each plane from its `skip`-th sample: a plane a channel (planar), or one plane
        // of interleaved channels.
        let step = Int(skip) * Int(av_get_bytes_per_sample(format)) * (planar ? 1 : Int(layout.nb_channels))
        var planes: [UnsafePointer<UInt8>?] = (0..<(planar ? Int(layout.nb_channels) : 1)).map {
            f.pointee.extended_data[$0].map { UnsafePointer($0 + step) }
        }
        try planes.withUnsafeMutableBufferPointer { (p) throws(KilnError) in try convert(p.baseAddress, count: f.pointee.nb_samples - skip) }
    }

    /// Appends `count` samples of silence to the FIFO (a gap in the source's audio).
    func pushSilence(_ count: Int) throws(KilnError) {
        var left = count
        while left > 0 {
            let n = min(left, 4096)
            try allocate(scratch, samples: Int32(n))
            let s = scratch.pointer
            av_samples_set_silence(s.pointee.extended_data, 0, Int32(n), output.layout.nb_channels, output.sampleFormat)
            // Through the limiter, behind the sound it still holds.
            try store(limit(n) { limiter, planes in limiter.process(planes, count: n) })
            scratch.unref()
            left -= n
        }
    }

    /// Samples libswresample (its filter delay) and the limiter (its look-ahead) hold back,
    /// at the output rate.
    var held: Int { (swr.map { Int(swr_get_delay($0, Int64(output.sampleRate))) } ?? 0) + (limiter?.held ?? 0) }

    /// Drains what libswresample and the limiter still hold into the FIFO.
    func flush() throws(KilnError) {
        if swr != nil { try convert(nil, count: 0) }
        guard let room = limiter?.lookAhead, room > 0 else { return }
        try allocate(scratch, samples: Int32(room))
        try store(limit(0) { limiter, planes in limiter.drain(into: planes) })
        scratch.unref()
    }

    /// Runs the limiter (if any) over `scratch`'s planes; how many samples they then hold
    /// (`count` without one).
    private func limit(_ count: Int, _ body: (inout PeakLimiter, [UnsafeMutablePointer<Float>]) -> Int) -> Int {
        guard limiter != nil else { return count }
        let data = scratch.pointer.pointee.extended_data!
        let planes = (0..<Int(output.layout.nb_channels)).map { UnsafeMutableRawPointer(data[$0]!).assumingMemoryBound(to: Float.self) }
        return body(&limiter!, planes)
    }

    /// Appends `scratch`'s first `count` samples to the FIFO.
    private func store(_ count: Int) throws(KilnError) {
        guard count > 0 else { return }
        let planes = UnsafeMutablePointer<UnsafeMutableRawPointer?>(OpaquePointer(scratch.pointer.pointee.extended_data))
        try check(av_audio_fifo_write(fifo, planes, Int32(count)), .filter, "cannot write the audio FIFO")
    }

    /// Takes `count` samples from the FIFO into `frame` (allocated here); with `padTo` the
    /// frame is padded with silence to that many samples (for encoders that cannot take a
    /// short last frame).
    func pull(_ count: Int, into frame: Frame, padTo: Int? = nil) throws(KilnError) {
        let size = max(count, padTo ?? 0)
        try allocate(frame, samples: Int32(size))
        let f = frame.pointer
        let planes = UnsafeMutablePointer<UnsafeMutableRawPointer?>(OpaquePointer(f.pointee.extended_data))
        let read = av_audio_fifo_read(fifo, planes, Int32(count))
        try check(read, .filter, "cannot read the audio FIFO")
        if size > Int(read) {
            av_samples_set_silence(f.pointee.extended_data, read, Int32(size) - read,
                                   output.layout.nb_channels, output.sampleFormat)
        }
    }

    /// Takes `count` samples from the FIFO into `planes` (one a channel, planar; one for all,
    /// interleaved), which have room for them.
    func read(_ count: Int, into planes: UnsafeMutablePointer<UnsafeMutableRawPointer?>) throws(KilnError) {
        let read = av_audio_fifo_read(fifo, planes, Int32(count))
        try check(read, .filter, "cannot read the audio FIFO")
        guard Int(read) == count else { throw KilnError(.internalError, stage: .filter, "the audio FIFO held \(read) samples, not \(count)") }
    }

    /// Leaves out the FIFO's first `count` samples.
    func discard(_ count: Int) throws(KilnError) {
        try check(av_audio_fifo_drain(fifo, Int32(count)), .filter, "cannot drain the audio FIFO")
    }

    /// Gives `frame` (emptied first) a buffer of `samples` samples in the output format.
    private func allocate(_ frame: Frame, samples: Int32) throws(KilnError) {
        let f = frame.pointer
        frame.unref()
        f.pointee.nb_samples = samples
        f.pointee.format = output.sampleFormat.rawValue
        f.pointee.sample_rate = output.sampleRate
        var layout = output.layout
        try check(av_channel_layout_copy(&f.pointee.ch_layout, &layout), .filter, "cannot set the channel layout")
        try check(av_frame_get_buffer(f, 0), .filter, "cannot allocate an audio frame")
    }

    private func configure(format: Int32, rate: Int32, layout: AVChannelLayout) throws(KilnError) {
        if let key = inputKey, key.format == format, key.rate == rate {
            var a = key.layout, b = layout
            if av_channel_layout_compare(&a, &b) == 0 { return }
        }
        // A change of input format mid-stream: what the old context holds is flushed first
        // (libswresample's alone: the limiter's look-ahead carries on across the change;
        // drained here, it put its delay's worth of silence mid-stream and lost the end).
        if swr != nil { try convert(nil, count: 0) }
        swr_free(&swr)
        if var old = inputKey?.layout { av_channel_layout_uninit(&old) }
        inputKey = nil
        var outLayout = output.layout, inLayout = layout
        try check(swr_alloc_set_opts2(&swr, &outLayout, output.sampleFormat, output.sampleRate,
                                      &inLayout, AVSampleFormat(rawValue: format), rate, 0, nil),
                  .filter, "cannot set up the audio resampler for a decoded frame", as: .sourceCorrupt)
        try check(swr_init(swr), .filter, "cannot set up the audio resampler for a decoded frame", as: .sourceCorrupt)
        var copy = AVChannelLayout()
        try check(av_channel_layout_copy(&copy, &inLayout), .filter, "cannot copy the channel layout")
        inputKey = (format, rate, copy)
    }

    private func convert(_ input: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, count: Int32) throws(KilnError) {
        let capacity = swr_get_out_samples(swr, count)
        try check(capacity, .filter, "the audio resampler failed")
        guard capacity > 0 else { return }
        try allocate(scratch, samples: capacity)
        let converted = swr_convert(swr, scratch.pointer.pointee.extended_data, capacity, input, count)
        try check(converted, .filter, "the audio resampler failed")
        if converted > 0 { try store(limit(Int(converted)) { limiter, planes in limiter.process(planes, count: Int(converted)) }) }
        scratch.unref()
    }
}
