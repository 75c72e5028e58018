import CFFmpeg
import KilnCore

/// Re-encodes one audio stream as an `AudioPlan` says (AAC, AC-3 or E-AC-3 at the plan's
/// channels and bitrate): decode → libswresample (format, rate, downmix) → FIFO → frames
/// of the encoder's size → encoder. The first output sample takes the first decoded
/// frame's timestamp; after that timestamps count samples, so the output has no gaps.
/// The source's gaps (a recording's dropout, packets dropped as corrupt) are filled with
/// silence and its overlaps cut, once they pass `syncTolerance`: otherwise everything
/// after a gap would play early by its length, after an overlap late.
/// A sound made of several streams (`AudioPlan.mergeSources`) is merged first
/// (`ChannelMerge`), and its merged frames go the same way.
final class AudioTranscodeLane: Lane {
    static let undecodableAfterPackets = 200
    /// How far the audio may drift from its source timestamps before silence is inserted or
    /// an overlap cut: EBU R37's tolerance for sound ahead of the picture (40 ms; behind it,
    /// 60). It was aresample's hard compensation threshold, 100 ms, with overlaps dropped a
    /// frame at a time: parts of a recording laid end to end, each sound a few ms longer
    /// than its pictures (whole AC-3 frames), left the sound up to 93 ms late before a frame
    /// went. Each cut or fill puts the sound back on its timestamps exactly.
    static let syncTolerance = 0.04
    /// Encoders the plan may name, by libavcodec name.
    static let encoders: Set<String> = ["aac", "ac3", "eac3"]

    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let plan: AudioPlan
    private let inputStream: UnsafeMutablePointer<AVStream>
    private var decoder: Decoder
    /// The stream whose packets come now: the plan's, or one followed (`follow`).
    private var current: UnsafeMutablePointer<AVStream>
    /// The codec `decoder` decodes: the current stream's, or the one its sound went on in
    /// (`SoundCodecFollower`).
    private var decoding: AVCodecID
    private var codecChange: SoundCodecFollower?
    /// What the decoders of streams followed before this one counted (`follow`).
    private var retired = (corrupt: 0, decoded: 0)
    private var encoder: Encoder?
    private var resampler: Resampler?
    private let frame: Frame
    /// The one channel `AudioPlan.sourceChannel` takes, made once, and whether the frames
    /// decoding now are two programmes (their header's word): a stretch in stereo (the
    /// next programme's, on the same PID) is mixed down as any sound is, not halved.
    private var picked: Frame?
    private var twoProgrammes = true
    /// Next output timestamp, in samples at the output rate (the encoder's time base).
    private var nextPTS = noPTS
    /// The latest decoded frame's own time (its time base's), to tell a time that stands
    /// still from one that goes back.
    private var latestSourceTime = noPTS
    /// The probe's rate for the stream: its largest where it changes (`SoundFormatSurvey`).
    private let surveyedRate: Int?
    /// Whether the stream's packets have said where they are in the file (`dropGuessedTime`).
    private var positioned = false
    /// The previous packet's time (its decode time, else its presentation time), to tell
    /// one that stands still (`playStandingStill`).
    private var previousPacketTime = noPTS
    private var frameSize = 1024
    private var counters = LaneStats()
    /// Decoded frames the resampler could not take (damaged parameters), and those it took.
    private var rejectedFrames = 0, acceptedFrames = 0
    private var firstRejection: KilnError?
    /// The source's length in seconds, plus a second: no gap is filled past it (nil when
    /// the probe could not say). The probe's, not libavformat's: across a splice that
    /// steps back 3 s libavformat says 9 s for 12, and a gap in the sound at 8.8 s was
    /// taken for damage 10 s on: not filled, everything after it 1.3 s early.
    private var lastSecond: Double? { Self.lastSecond(of: sourceSeconds) }
    static func lastSecond(of sourceSeconds: Double) -> Double? { sourceSeconds > 0 ? sourceSeconds + 1 : nil }
    private let sourceSeconds: Double
    /// Checked while a gap is filled: minutes of silence are minutes of encoding.
    private let cancellation: Cancellation
    /// The streams whose channels follow this one's (`AudioPlan.mergeSources`), and their
    /// merge (at this stream's rate; the resampler takes it to the encoder's).
    private let mergeSources: [Int32]
    private let merge: ChannelMerge?

    var inputIndices: [Int32] { [inputIndex] + mergeSources }

    /// Where the file's other audio and video streams have come to (seconds, output
    /// time), set by the pipeline before each packet of a merged sound (`ChannelMerge.othersReach`).
    var othersReach: Double? {
        get { merge?.othersReach }
        set { merge?.othersReach = newValue }
    }

    init(demuxer: Demuxer, plan: AudioPlan, source: StreamInfo, sourceSeconds: Double) throws(KilnError) {
        guard Self.encoders.contains(plan.codec) else {
            throw KilnError(.planUnsupported, stage: .plan, "audio can be re-encoded to aac, ac3 or eac3, not \(plan.codec)")
        }
        guard plan.channels >= 1, plan.channels <= 8 else {
            throw KilnError(.planUnsupported, stage: .plan, "the audio plan asks for \(plan.channels) channels")
        }
        guard plan.sourceIndex >= 0, plan.sourceIndex < demuxer.streamCount,
              demuxer.stream(plan.sourceIndex).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO else {
            throw KilnError(.planUnsupported, stage: .plan, "the plan's audio stream \(plan.sourceIndex) is not an audio stream of the source")
        }
        let merged = plan.mergeSources ?? []
        for index in merged {
            guard index >= 0, index < demuxer.streamCount, index != plan.sourceIndex,
                  demuxer.stream(index).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO else {
                throw KilnError(.planUnsupported, stage: .plan, "the plan's audio stream \(index) to merge is not another audio stream of the source")
            }
        }
        guard Set(merged).count == merged.count, merged.count < 8 else {
            throw KilnError(.planUnsupported, stage: .plan, "the plan merges the audio streams \(merged.map(String.init).joined(separator: ", ")), more than 8 or one twice")
        }
        mergeSources = merged.map(Int32.init)
        surveyedRate = source.sampleRate
        let stream = demuxer.stream(plan.sourceIndex)
        inputIndex = Int32(plan.sourceIndex)
        inputStream = stream
        self.plan = plan
        decoder = try Decoder(stream: stream, threads: 1)
        current = stream
        decoding = stream.pointee.codecpar.pointee.codec_id
        codecChange = merged.isEmpty ? SoundCodecFollower(stream: stream, laneIndex: inputIndex, parsedByDemuxer: demuxer.isMultiplex) : nil
        frame = try Frame()
        cancellation = demuxer.cancellation
        self.sourceSeconds = sourceSeconds
        let rate = stream.pointee.codecpar.pointee.sample_rate
        merge = merged.isEmpty ? nil : try ChannelMerge(demuxer: demuxer, indices: [inputIndex] + mergeSources,
                                                        rate: rate > 0 ? rate : 48000, lastSecond: Self.lastSecond(of: sourceSeconds))
    }

    var stats: LaneStats {
        var s = counters
        let merged = merge?.stats ?? LaneStats()
        s.corruptPackets = retired.corrupt + decoder.corruptPackets + rejectedFrames + merged.corruptPackets + (codecChange?.skippedRuns ?? 0)
        s.framesDecoded = retired.decoded + decoder.framesDecoded + merged.framesDecoded
        s.gapsFilled += merged.gapsFilled
        s.framesDropped += merged.framesDropped
        s.repairedTimestamps += merged.repairedTimestamps
        s.framesEncoded = encoder?.framesEncoded ?? 0
        return s
    }

    /// The ffmpeg command's options for this stream: its mix to the encoder's layout and
    /// rate, then the limiter (`PeakLimiter`; alimiter is its nearest equivalent there, the
    /// same ceiling, look-ahead and release, its delay compensated).
    /// A merged sound's streams each keep their times as `ChannelMerge` keeps them: from
    /// the output's start (`aresample`'s `first_pts`), silence where they have none (from
    /// 10 ms: `min_hard_comp`, 100 ms by default, closed a lost frame up), to the source's
    /// length (`apad`), and `amerge` puts them side by side.
    var ffmpegEquivalent: [String] {
        let o = outputIndex
        var encode = ["-c:\(o)", plan.codec, "-b:\(o)", "\(plan.bitrateKbps)k", "-ac:\(o)", String(plan.channels)]
        var graph: String?
        if let context = encoder?.context {
            var layout = context.pointee.ch_layout
            let name = Prober.name(of: &layout)
            encode += ["-ar:\(o)", String(context.pointee.sample_rate)]
            if let name, context.pointee.sample_fmt == AV_SAMPLE_FMT_FLTP {
                graph = "aformat=sample_rates=\(context.pointee.sample_rate):channel_layouts=\(name),"
                    + "alimiter=limit=\(PeakLimiter.ceiling):attack=5:release=100:level=false:latency=true"
            }
        }
        guard let merge else { return ["-map", "0:\(inputIndex)"] + encode + (graph.map { ["-filter:\(o)", $0] } ?? []) }
        let padded = inputIndices.enumerated().map { k, index in
            "[0:\(index)]aresample=async=1:min_hard_comp=0.01:first_pts=0"
                + (sourceSeconds > 0 ? ",apad=whole_dur=\(Format.fixed(sourceSeconds, decimals: 3))" : "")
                + ",aformat=channel_layouts=\(merge.layoutName(of: k))[m\(k)]"
        }
        let merged = inputIndices.indices.map { "[m\($0)]" }.joined() + "amerge=inputs=\(inputIndices.count)" + (graph.map { "," + $0 } ?? "") + "[a\(o)]"
        return ["-filter_complex", (padded + [merged]).joined(separator: ";"), "-map", "[a\(o)]"] + encode
    }

    func prepare(muxer: Muxer) throws(KilnError) {
        let plan = self.plan
        let par = inputStream.pointee.codecpar!
        // A merged sound's rate and layout are the merge's (stereo for two mono streams); a
        // sound whose rate changes along the file is encoded at its largest (`SoundFormatSurvey`).
        let stated = max(par.pointee.sample_rate, Int32(clamping: surveyedRate ?? 0))
        let sourceRate = merge?.rate ?? (stated > 0 ? stated : 48000)
        var sourceLayout = AVChannelLayout()
        defer { av_channel_layout_uninit(&sourceLayout) }
        if let merge {
            try merge.copyLayout(into: &sourceLayout)
        } else {
            try check(av_channel_layout_copy(&sourceLayout, &par.pointee.ch_layout), .encode, "cannot copy the channel layout")
        }
        var chosen = AudioFormat(sampleFormat: AV_SAMPLE_FMT_FLTP, sampleRate: 48000, layout: AVChannelLayout())
        let encoder = try Encoder(name: plan.codec) { ctx, codec throws(KilnError) in
            chosen.sampleFormat = Self.sampleFormat(codec)
            chosen.sampleRate = Self.sampleRate(codec, preferred: sourceRate)
            try Self.channelLayout(codec, channels: Int32(plan.channels), source: &sourceLayout, into: &chosen.layout)
            ctx.pointee.sample_fmt = chosen.sampleFormat
            ctx.pointee.sample_rate = chosen.sampleRate
            try check(av_channel_layout_copy(&ctx.pointee.ch_layout, &chosen.layout), .encode, "cannot set the channel layout")
            ctx.pointee.bit_rate = Int64(plan.bitrateKbps) * 1000
            ctx.pointee.time_base = AVRational(num: 1, den: chosen.sampleRate)
        }
        defer { av_channel_layout_uninit(&chosen.layout) }
        self.encoder = encoder
        let variable = (encoder.codec.pointee.capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) != 0
        frameSize = encoder.context.pointee.frame_size > 0 && !variable ? Int(encoder.context.pointee.frame_size) : 1024
        resampler = try Resampler(output: chosen)
        let output = try encoder.addStream(to: muxer, from: inputStream)
        // The plan's language: a dual-mono stream's channel's, not the stream's first.
        if let language = plan.language { setLanguage(language, of: output) }
        outputIndex = output.pointee.index
    }

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        counters.packetsIn += 1
        if let merge, packet.streamIndex != inputIndex {
            return try merge.consume(packet) { (f: Frame) throws(KilnError) in try self.resample(f, timeBase: merge.timeBase, muxer: muxer) }
        }
        dropGuessedTime(packet)
        playStandingStill(packet)
        guard codecChange != nil else { return try decode(packet, muxer: muxer) }
        for cut in try codecChange!.take(packet) { try decode(cut, muxer: muxer) }
    }

    /// A frame the demuxer's parser cut out of a container packet after its first (an
    /// MPEG-TS PES holds several AAC frames; only the first is timed) comes without a
    /// position, timed by the demuxer one frame after the one before, a frame being what
    /// the stream's first header said. Where the sound changes its rate (HE-AAC signalled
    /// implicitly is 24 kHz, then 48), the AAC parser leaves that rate as it was: frames of
    /// 21 ms were timed 46 ms apart, each PES's frames stretched past the next one's start,
    /// and the sound came out chopped into gaps of silence and left-out overlaps. Its time
    /// is the parser's guess, not the source's: it follows on (and a codec change's framer,
    /// `SoundCodecFollower`, anchors only on the times the source gave). A stream whose
    /// packets never say where they are keeps its times.
    private func dropGuessedTime(_ packet: Packet) {
        let p = packet.pointer
        if p.pointee.pos >= 0 { positioned = true } else if positioned { p.pointee.pts = noPTS; p.pointee.dts = noPTS }
    }

    /// libavformat marks an MP4 sample that lies before its edit list's start to be decoded
    /// and not played (`AV_PKT_FLAG_DISCARD`: an encoder's priming), and libavcodec drops
    /// what it gives. A sound whose sample times stand still (a damaged `stts`, every delta
    /// 0) lies wholly before a start past its first time: every frame was marked, and 2.7 s
    /// of E-AC-3 came out as 0.06 s of sound. Priming goes forward frame by frame; a frame
    /// timed as the one before it says nothing of where it lies, and follows on (`resample`):
    /// it is played.
    private func playStandingStill(_ packet: Packet) {
        let p = packet.pointer
        let time = p.pointee.dts != noPTS ? p.pointee.dts : p.pointee.pts
        if time != noPTS, time == previousPacketTime { p.pointee.flags &= ~AV_PKT_FLAG_DISCARD }
        previousPacketTime = time
    }

    private func decode(_ packet: Packet?, muxer: Muxer) throws(KilnError) {
        if plan.sourceChannel != nil, let p = packet?.pointer.pointee, let data = p.data,
           let h = SoundFrameHeader(UnsafeBufferPointer(start: data, count: Int(p.size)), at: 0), let dualMono = h.dualMono {
            twoProgrammes = dualMono
        }
        try decoder.decodeRequiringOutput(packet, giveUpAfter: Self.undecodableAfterPackets) { (f: Frame) throws(KilnError) in
            try self.decoded(f, muxer: muxer)
        }
    }

    /// A frame of the sound cut by its own header (`SoundCodecFollower`): a decoder of its
    /// codec takes over when the codec changes, as one does for a stream followed.
    private func decode(_ cut: SoundFramer.Cut, muxer: Muxer) throws(KilnError) {
        let declared = current.pointee.codecpar.pointee.codec_id
        let codec = cut.header?.codec ?? declared
        if codec != decoding {
            try retire(muxer: muxer)
            if let h = cut.header, codec != declared {
                decoder = try SoundCodecFollower.decoder(for: h, timeBase: current.pointee.time_base, streamIndex: Int(current.pointee.index))
            } else {
                decoder = try Decoder(stream: current, threads: 1)
            }
            decoding = codec
        }
        try decode(cut.packet, muxer: muxer)
    }

    /// Drains the decoder and keeps its counts, before another takes over.
    private func retire(muxer: Muxer) throws(KilnError) {
        try decode(nil, muxer: muxer)
        retired.corrupt += decoder.corruptPackets
        retired.decoded += decoder.framesDecoded
    }

    /// A frame of this lane's own stream: resampled, or merged first; of two mono
    /// programmes side by side (`AudioPlan.sourceChannel`), the plan's channel alone (a
    /// frame of one channel, or of a stereo stretch, as it is).
    private func decoded(_ f: Frame, muxer: Muxer) throws(KilnError) {
        if let channel = plan.sourceChannel, twoProgrammes, f.pointer.pointee.ch_layout.nb_channels > 1 {
            if picked == nil { picked = try Frame() }
            let one = picked!
            let side = min(Int32(channel), f.pointer.pointee.ch_layout.nb_channels - 1)
            try check(kiln_frame_one_channel(one.pointer, f.pointer, side), .filter, "cannot take channel \(side) of the sound",
                      as: .sourceCorrupt)
            defer { one.unref() }
            return try resample(one, timeBase: decoder.timeBase, muxer: muxer)
        }
        guard let merge else { return try resample(f, timeBase: decoder.timeBase, muxer: muxer) }
        try merge.take(f, input: 0, timeBase: decoder.timeBase) { (m: Frame) throws(KilnError) in
            try self.resample(m, timeBase: merge.timeBase, muxer: muxer)
        }
    }

    /// The sound goes on in another stream (`StreamSuccession`): what this decoder holds
    /// goes out, then a decoder for the new stream's codec takes over. The resampler
    /// follows a new format as it does one that changes mid-stream, and timestamps go on
    /// as they are (the same clock, the same time base).
    func follow(_ stream: UnsafeMutablePointer<AVStream>, muxer: Muxer) throws(KilnError) {
        if codecChange != nil { for cut in try codecChange!.finish() { try decode(cut, muxer: muxer) } }
        try retire(muxer: muxer)
        retired.corrupt += codecChange?.skippedRuns ?? 0
        decoder = try Decoder(stream: stream, threads: 1)
        current = stream
        decoding = stream.pointee.codecpar.pointee.codec_id
        codecChange = SoundCodecFollower(stream: stream, laneIndex: inputIndex, parsedByDemuxer: true)
    }

    func finish(muxer: Muxer) throws(KilnError) {
        // A stream that never gave a packet (a track with no frames) makes no sound here, as
        // a copy of it makes none: verification then finds the output without it, and the
        // run goes again without the sound (`Preparer.missingSound`). Refused here, the
        // whole file was, at a rung that re-encodes its sound.
        if codecChange != nil { for cut in try codecChange!.finish() { try decode(cut, muxer: muxer) } }
        if merge == nil, decoder.packetsSent == 0, retired.decoded == 0 { return }
        try decode(nil, muxer: muxer)
        if let merge { try merge.finish { (m: Frame) throws(KilnError) in try self.resample(m, timeBase: merge.timeBase, muxer: muxer) } }
        guard let resampler, let encoder else { return }
        if acceptedFrames == 0, let error = firstRejection { throw Self.unconvertible(error) }
        try resampler.flush()
        try encodeBuffered(muxer: muxer)
        if resampler.buffered > 0 {
            let small = (encoder.codec.pointee.capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0
            try resampler.pull(resampler.buffered, into: frame, padTo: small ? nil : frameSize)
            try encodeFrame(muxer: muxer)
        }
        try encoder.encode(nil) { (p: Packet) throws(KilnError) in try self.write(p, muxer: muxer) }
    }

    /// `timeBase`: the frame's timestamps'.
    private func resample(_ decoded: Frame, timeBase: AVRational, muxer: Muxer) throws(KilnError) {
        guard let resampler else { throw KilnError(.internalError, stage: .encode, "the audio encoder is not open") }
        let rate = resampler.output.sampleRate
        var ts = decoded.pointer.pointee.best_effort_timestamp
        // A frame timed as the one before it says nothing of where it goes: it follows on.
        // ffmpeg's RealMedia muxer times every RealAudio 1.0 packet 0, and each frame after
        // the first was left out as an overlap (12 s of pictures came with 0.06 s of sound).
        // An overlap goes back, then on.
        if ts != noPTS, ts == latestSourceTime, decoded.pointer.pointee.nb_samples > 0 {
            counters.repairedTimestamps += 1
            ts = noPTS
        } else {
            latestSourceTime = ts
        }
        let start = ts == noPTS ? noPTS : rescale(ts, from: timeBase, to: AVRational(num: 1, den: rate))
        var skip: Int32 = 0
        if nextPTS == noPTS {
            nextPTS = start == noPTS ? 0 : start
        } else if start != noPTS {
            // Where this frame's first sample lands in the output, against where the source
            // puts it.
            let lands = nextPTS + Int64(resampler.buffered + resampler.held)
            let tolerance = Int64(Self.syncTolerance * Double(rate))
            if start - lands > tolerance {
                // A time past the source's end is damage (a flipped bit put one frame hours
                // on), not a gap: the frame follows on. Hours of silence were gigabytes in
                // the FIFO, then a failed write.
                if let lastSecond, Double(start) > lastSecond * Double(rate) {
                    counters.repairedTimestamps += 1
                } else {
                    // Encoded as it is made, a second at a time: memory stays flat.
                    var left = Int(start - lands)
                    while left > 0 {
                        try cancellation.check(.encode)
                        let n = min(left, Int(rate))
                        try resampler.pushSilence(n)
                        try encodeBuffered(muxer: muxer)
                        left -= n
                    }
                    counters.gapsFilled += 1
                }
            } else if lands - start > tolerance {
                // The source overlaps itself: its part already in the output is left out,
                // the whole frame if it lies there entirely.
                counters.framesDropped += 1
                let inputRate = Int64(decoded.pointer.pointee.sample_rate)
                let overlap = inputRate > 0 ? (lands - start) * inputRate / Int64(rate) : .max
                guard overlap < Int64(decoded.pointer.pointee.nb_samples) else { return }
                skip = Int32(overlap)
            }
        }
        do { try resampler.push(decoded, skipping: skip) } catch where error.code == .sourceCorrupt {
            // A frame no resampler takes is skipped like a packet the decoder rejected
            // (its gap is filled at the next good frame). A stream none of whose frames it
            // takes fails, as one that decodes to nothing does: its output was silence.
            rejectedFrames += 1
            firstRejection = firstRejection ?? error
            if acceptedFrames == 0, rejectedFrames >= Self.undecodableAfterPackets { throw Self.unconvertible(error) }
            return
        }
        acceptedFrames += 1
        try encodeBuffered(muxer: muxer)
    }

    /// Every frame rejected was the source's damage (`Resampler.push` says so: no rate, no
    /// or impossibly many channels): the stream is damaged, not in a format Kiln lacks (a
    /// recording cut after 100 packets had been `source_unsupported`).
    private static func unconvertible(_ error: KilnError) -> KilnError {
        KilnError(.sourceCorrupt, stage: .filter, underlying: error.underlying,
                  "the sound is damaged: none of its decoded frames can be converted for the encoder (\(error.message))")
    }

    private func encodeBuffered(muxer: Muxer) throws(KilnError) {
        guard let resampler else { return }
        while resampler.buffered >= frameSize {
            try resampler.pull(frameSize, into: frame)
            try encodeFrame(muxer: muxer)
        }
    }

    private func encodeFrame(muxer: Muxer) throws(KilnError) {
        guard let encoder else { return }
        frame.pointer.pointee.pts = nextPTS == noPTS ? 0 : nextPTS
        nextPTS = frame.pointer.pointee.pts + Int64(frame.pointer.pointee.nb_samples)
        try encoder.encode(frame) { (p: Packet) throws(KilnError) in try self.write(p, muxer: muxer) }
        frame.unref()
    }

    private func write(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        guard let encoder else { return }
        packet.streamIndex = outputIndex
        try muxer.write(packet, from: encoder.timeBase)
        counters.packetsOut += 1
    }

    // MARK: choosing the encoder's format

    private static func sampleFormat(_ codec: UnsafePointer<AVCodec>) -> AVSampleFormat {
        guard let list = codec.pointee.sample_fmts else { return AV_SAMPLE_FMT_FLTP }
        var i = 0
        while list[i] != AV_SAMPLE_FMT_NONE {
            if list[i] == AV_SAMPLE_FMT_FLTP { return AV_SAMPLE_FMT_FLTP }
            i += 1
        }
        return list[0] == AV_SAMPLE_FMT_NONE ? AV_SAMPLE_FMT_FLTP : list[0]
    }

    /// The source's rate when the encoder takes it, else 48 kHz, else the encoder's first.
    /// Never above 48 kHz (`EncodedSampleRate`).
    static func sampleRate(_ codec: UnsafePointer<AVCodec>, preferred source: Int32) -> Int32 {
        let preferred = Int32(EncodedSampleRate.of(source: Int(source)))
        guard let list = codec.pointee.supported_samplerates else { return preferred }
        var rates: [Int32] = []
        var i = 0
        while list[i] != 0 { rates.append(list[i]); i += 1 }
        if rates.isEmpty || rates.contains(preferred) { return preferred }
        if rates.contains(48000) { return 48000 }
        return rates[0]
    }

    /// The source's layout when it has the planned channel count and the encoder lists it,
    /// else the layout of that count the encoder lists that keeps the most of the source's
    /// channels (`ChannelLayouts.best`), else libavutil's default for the count (an encoder
    /// that lists none: AAC, which writes a 5.1 with side surrounds, AC-3's and DTS's 5.1,
    /// with a program config element that MP4's sample entry cannot say: 0 channels to a
    /// reader of the index, and to some decoders).
    private static func channelLayout(_ codec: UnsafePointer<AVCodec>, channels: Int32,
                                      source: inout AVChannelLayout, into out: inout AVChannelLayout) throws(KilnError) {
        var listed: [AVChannelLayout] = []
        if let list = codec.pointee.ch_layouts {
            var i = 0
            while list[i].nb_channels != 0 { listed.append(list[i]); i += 1 }
        }
        let sourceUsable = source.nb_channels == channels && source.order == AV_CHANNEL_ORDER_NATIVE
        if sourceUsable && listed.contains(where: { var c = $0; return av_channel_layout_compare(&c, &source) == 0 }) {
            try check(av_channel_layout_copy(&out, &source), .encode, "cannot copy the channel layout")
            return
        }
        // libavutil's default for the count first, so that it wins among equals.
        var fallback = AVChannelLayout()
        ChannelLayouts.assumed(channels, into: &fallback)
        defer { av_channel_layout_uninit(&fallback) }
        var candidates = [fallback].filter { f in listed.isEmpty || listed.contains { var c = $0, f = f; return av_channel_layout_compare(&c, &f) == 0 } }
        // An encoder that lists none (AAC) gets libavutil's default for the count: the AAC
        // encoder writes other layouts (5.1 with side surrounds) with a program config
        // element, which some decoders mishandle.
        candidates += listed
        if var match = ChannelLayouts.best(of: candidates.filter { $0.nb_channels == channels && $0.order == AV_CHANNEL_ORDER_NATIVE }, for: &source) {
            try check(av_channel_layout_copy(&out, &match), .encode, "cannot copy the channel layout")
            return
        }
        throw KilnError(.planUnsupported, stage: .encode, "the \(string(codec.pointee.name) ?? "audio") encoder cannot write \(channels) channels")
    }
}
