import CFFmpeg
import KilnCore

/// Re-encodes one video stream to H.264 as a `VideoPlan` says: decode → deinterlace →
/// tone-map → scale → 8-bit 4:2:0 → rotate the pixels upright → libx264 (capped CRF).
/// The filter graph is built on the first decoded frame, when the real size, pixel format
/// and interlacing are known, and rebuilt if they change mid-stream.
final class VideoTranscodeLane: Lane {
    /// Packets without a single decoded picture after which the stream counts as undecodable
    /// (about 20 s at 25 fps: longer than any sane GOP a cut stream may start inside).
    static let undecodableAfterPackets = 500

    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let plan: VideoPlan
    private let settings: EncoderSettings
    private let inputStream: UnsafeMutablePointer<AVStream>
    private var decoder: Decoder
    /// Counts of the decoders of streams the pictures went on from (`follow`).
    private var retired = (corrupt: 0, decoded: 0, repaired: 0)
    private var encoder: Encoder?
    private var graph: VideoFilters?
    /// The first decoded picture's display aspect ratio, which the plan's frame was made for.
    private var firstAspect: Double?
    private let filtered: Frame
    private let toneMap: ToneMapSource?
    /// Dolby Vision profile 5 only: maps each decoded picture through its RPU first.
    private let dolbyVision: DolbyVisionMapper?
    /// The output colour description: BT.709 when tone-mapped, otherwise the source's.
    private let color: ColorTags
    /// The source's matrix where the output's differs (BT.601 YCbCr made HD), for the scaler.
    private let inputMatrix: String?
    /// The source's colours as the tone map or gamut conversion reads them.
    private let zscaleSource: ColorTags
    /// The source's rate, as the filter graph's input is timed.
    private let sourceRate: AVRational
    /// The rate the filter graph gives: the source's, or 4/5 of it where film in 3:2
    /// pulldown is matched back into its frames.
    private let filmRate: AVRational
    /// The encode's rate: `filmRate`, or every n-th picture of it where the plan limits it.
    let frameRate: AVRational
    /// Whether pictures keep their own times (a variable rate the plan does not limit) in
    /// the encoder's time base of 1/90000, rather than a grid of `frameRate` every picture
    /// takes a slot of. On any one rate's grid, a phone clip at 30 fps that slows to 24 lost
    /// a picture in five of its 30 fps stretch (24's grid) or left holes in its 24 fps one
    /// (30's), and millisecond-rounded times jittered onto a grid of no standard rate.
    /// x264's rate control is given `frameRate` either way.
    private let variableTiming: Bool
    /// Ticks of the encoder's time base in one frame of a constant `frameRate`. Not one: the
    /// probe judges the rate from the file's start, and a stretch at another rate further
    /// on (an anime encode's 29.97 fps opening in a 23.976 fps episode, timecodes v2) had
    /// no slot for one picture in five, which was dropped. Finer ticks keep such pictures
    /// at their own times, while pictures on the rate's grid lie exactly `gridTicks` apart,
    /// as before. Ten a frame, but at most 240,000 a second: the NTSC rates (23.976, 29.97,
    /// 59.94, 119.88) then share one clock on which each is exact, and a film of up to five
    /// hours keeps within the MP4 track's 32-bit duration (at 600,000 a second a two-hour
    /// 59.94 fps film would need 64-bit boxes, which not every player reads).
    let gridTicks: Int64
    var encoderTimeBase: AVRational {
        variableTiming ? AVRational(num: 1, den: 90000) : av_mul_q(av_inv_q(frameRate), AVRational(num: 1, den: Int32(gridTicks)))
    }
    private var interlacedSeen = false
    /// The HDR content's peak in cd/m² the tone curve ends at (`ToneCurve.peakNits`).
    private var contentPeak: Int?
    private var lastPTS = noPTS
    /// With pictures on their own times: each one's length (the source's, in the encoder's
    /// time base) by its time, until its packet is written. Only the last packet's length
    /// is the MP4 track's own to say (the others' are the steps between them): it was one
    /// frame of the rate, so a screen recording whose last picture holds 0.2 s ended
    /// before its sound.
    private var pictureTicks: [Int64: Int64] = [:]
    /// The longest step between pictures so far: no picture is taken to last longer (a
    /// container's default length is a guess, and may be anything) than that, nor less
    /// than a frame of the rate.
    private var longestStep: Int64 = 0
    /// A variable rate's keyframe clock (`forcedKeyframe`): its first picture's time, and
    /// how many keyframes it has forced.
    private var keyframeClockStart = noPTS
    private var forcedKeyframes = 0
    /// Presentation times from the pictures' order for H.264 or HEVC whose container gives
    /// reordered pictures decode times only (AVI, bare streams), as a copy takes them
    /// (`PictureOrderTimes`). Without them the decoder times each picture by the packet
    /// that pushed it out, its reorder depth later: an AVI with B-frames was encoded 80 ms
    /// behind its sound, and 80 ms apart from its own copy.
    private var pictureOrder: PictureOrderTimes?
    /// The demuxer's format name.
    private let format: String
    /// The same for reordered pictures whose order Kiln does not read (MPEG-4 Part 2 in
    /// AVI: Xvid, DivX), from the container's frame clock: the k-th picture shown takes the
    /// k-th frame from the first packet's time. The decoder's time for a picture (the
    /// packet that pushed it out) is later by the decoder's delay, which the first picture
    /// shows; a later picture is never put earlier than its time less that delay, so a
    /// frame the file leaves out (an empty chunk, a picture that decodes to nothing) moves
    /// the clock on instead of pulling every later picture early. nil for other streams.
    private var frameClock: FrameClock?
    /// Where frames go on a constant rate's grid.
    private var grid: FrameGrid
    private var counters = LaneStats()
    /// Frames dropped because their timestamp did not advance in the encoder's time base.
    private(set) var droppedFrames = 0

    /// Paints the forced bitmap subtitles the plan burns in (`SubtitleBurner`, fed by a
    /// `BurnLane`); nil without.
    var burner: SubtitleBurner?

    init(demuxer: Demuxer, plan: VideoPlan, source: StreamInfo) throws(KilnError) {
        guard let settings = plan.encoder else {
            throw KilnError(.planUnsupported, stage: .plan, "the video plan has no encoder settings")
        }
        guard plan.width >= 2, plan.height >= 2 else {
            throw KilnError(.planUnsupported, stage: .plan, "the video plan's size \(plan.width)x\(plan.height) is not encodable")
        }
        guard plan.sourceIndex >= 0, plan.sourceIndex < demuxer.streamCount,
              demuxer.stream(plan.sourceIndex).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO else {
            throw KilnError(.planUnsupported, stage: .plan, "the plan's video stream \(plan.sourceIndex) is not a video stream of the source")
        }
        let stream = demuxer.stream(plan.sourceIndex)
        inputIndex = Int32(plan.sourceIndex)
        inputStream = stream
        var even = plan
        // 4:2:0 needs even dimensions; the planner makes them even, this only guards it.
        even.width &= ~1
        even.height &= ~1
        self.plan = even
        self.settings = settings
        let par = stream.pointee.codecpar!
        toneMap = plan.toneMap ? try Self.toneMapSource(par: par, source: source)
            : ColorTags.widerThanBT709.contains(par.pointee.color_primaries) && (source.hdr ?? .sdr) == .sdr
                && par.pointee.color_trc != AVCOL_TRC_SMPTE2084 && par.pointee.color_trc != AVCOL_TRC_ARIB_STD_B67 ? .wideGamut : nil
        let sourceColor = ColorTags(par: par)
        zscaleSource = toneMap == .wideGamut ? sourceColor : ColorTags(hdr: par)
        color = toneMap != nil ? .bt709 : sourceColor.forOutput(width: even.width, height: even.height)
        inputMatrix = toneMap == nil && color.matrix != sourceColor.matrix ? sourceColor.matrixName : nil
        dolbyVision = toneMap == .dolbyVision ? try DolbyVisionMapper(whiteNits: Double(ToneCurve.referenceWhite)) : nil
        sourceRate = Self.frameRate(demuxer: demuxer, stream: stream, source: source)
        filmRate = plan.inverseTelecine == true ? av_mul_q(sourceRate, AVRational(num: 4, den: 5)) : sourceRate
        frameRate = Self.limited(filmRate, to: plan.maxFrameRate)
        variableTiming = source.variableFrameRate == true && av_cmp_q(frameRate, sourceRate) == 0
        gridTicks = Int64(max(1, min(10, 240_000 / max(1, Int(frameRate.num)))))
        grid = FrameGrid(step: gridTicks)
        decoder = try Decoder(stream: stream)
        let format = demuxer.formatName
        self.format = format
        pictureOrder = source.presentationTimesMissing == true ? PictureOrderTimes(stream: stream, format: format) : nil
        // Only where the container's times are a frame clock whose first slot is the first
        // picture's (AVI, bare streams): a program or transport stream that leaves a picture
        // untimed times the others itself, the first shown later than the first decoded.
        if source.presentationTimesMissing == true, pictureOrder == nil, sourceRate.num > 0, sourceRate.den > 0,
           format == "avi" || Prober.elementaryStreamFormats.contains(format) {
            frameClock = FrameClock(step: max(1, rescale(1, from: av_inv_q(sourceRate), to: stream.pointee.time_base)))
        }
        filtered = try Frame()
    }

    /// Whether the output's matrix is BT.601's (a burner draws its overlays in it).
    var bt601: Bool { color.matrix == AVCOL_SPC_SMPTE170M || color.matrix == AVCOL_SPC_BT470BG }
    /// The encoded pictures' size.
    var size: (width: Int32, height: Int32) { (Int32(plan.width), Int32(plan.height)) }

    var stats: LaneStats {
        var s = counters
        s.corruptPackets = retired.corrupt + decoder.corruptPackets
        s.framesDecoded = retired.decoded + decoder.framesDecoded
        s.repairedTimestamps += retired.repaired + (pictureOrder?.repaired ?? 0)
        s.framesEncoded = encoder?.framesEncoded ?? 0
        return s
    }

    /// The VBV buffer starts half full, not x264's 90 %: what the buffer holds at the start
    /// is spent on top of maxrate, so a clip of a few seconds came out 10-15 % above its
    /// rung (6 s at a 4.7 Mbit/s maxrate: 5.3). Half a 2 s buffer is one second of maxrate
    /// for the first keyframes; over a film either is nothing.
    static func initialOccupancyBits(_ s: EncoderSettings) -> Int64 { Int64(s.bufsizeKbps) * 1000 / 2 }

    /// Keyframe interval in frames, and the closest scene-cut keyframes may come.
    private var keyint: Int { max(1, Int((settings.gopSeconds * frameRate.seconds).rounded())) }
    private var keyintMin: Int { max(1, min(Int(frameRate.seconds.rounded()), keyint / 2)) }

    var ffmpegEquivalent: [String] {
        let o = outputIndex, s = settings
        var args = ["-map", "0:\(inputIndex)"]
        if let graph { args += ["-filter:\(o)", graph.chain.description] }
        args += ["-c:\(o)", s.name, "-preset:\(o)", s.preset, "-crf:\(o)", String(s.crf),
                 "-maxrate:\(o)", "\(s.maxrateKbps)k", "-bufsize:\(o)", "\(s.bufsizeKbps)k",
                 "-rc_init_occupancy:\(o)", String(Self.initialOccupancyBits(s)),
                 "-profile:\(o)", s.profile, "-level:\(o)", s.level, "-g:\(o)", String(keyint),
                 "-keyint_min:\(o)", String(keyintMin)]
        args += variableTiming ? ["-fps_mode:\(o)", "passthrough", "-enc_time_base:\(o)", "1:90000",
                                  "-force_key_frames:\(o)", "expr:gte(t,n_forced*\(s.gopSeconds))"]
            : ["-r:\(o)", "\(frameRate.num)/\(frameRate.den)"]
        args += ["-pix_fmt:\(o)", s.pixFmt]
        if let p = string(av_color_primaries_name(color.primaries)) { args += ["-color_primaries:\(o)", p] }
        if let t = string(av_color_transfer_name(color.transfer)) { args += ["-color_trc:\(o)", t] }
        if let m = string(av_color_space_name(color.matrix)) { args += ["-colorspace:\(o)", m] }
        return args + ["-color_range:\(o)", "tv"]
    }

    func prepare(muxer: Muxer) throws(KilnError) {
        let plan = self.plan, settings = self.settings, color = self.color, frameRate = self.frameRate
        let timeBase = encoderTimeBase
        let keyint = self.keyint, keyintMin = self.keyintMin
        let encoder = try Encoder(name: settings.name, options: [
            ("preset", settings.preset),
            ("crf", String(settings.crf)),
            ("profile", settings.profile),
            ("level", settings.level),
        ]) { ctx, _ throws(KilnError) in
            guard settings.pixFmt == "yuv420p" else {
                throw KilnError(.planUnsupported, stage: .encode, "only yuv420p output is supported, the plan asks for \(settings.pixFmt)")
            }
            ctx.pointee.width = Int32(plan.width)
            ctx.pointee.height = Int32(plan.height)
            ctx.pointee.pix_fmt = AV_PIX_FMT_YUV420P
            ctx.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
            ctx.pointee.framerate = frameRate
            ctx.pointee.time_base = timeBase
            ctx.pointee.gop_size = Int32(keyint)
            // Scene-cut keyframes no closer than a second (x264 caps this at keyint/2 + 1).
            ctx.pointee.keyint_min = Int32(keyintMin)
            ctx.pointee.rc_max_rate = Int64(settings.maxrateKbps) * 1000
            ctx.pointee.rc_buffer_size = Int32(clamping: Int64(settings.bufsizeKbps) * 1000)
            ctx.pointee.rc_initial_buffer_occupancy = Int32(clamping: Self.initialOccupancyBits(settings))
            ctx.pointee.thread_count = 0
            ctx.pointee.color_primaries = color.primaries
            ctx.pointee.color_trc = color.transfer
            ctx.pointee.colorspace = color.matrix
            ctx.pointee.color_range = AVCOL_RANGE_MPEG
        }
        self.encoder = encoder
        let st = try encoder.addStream(to: muxer, from: inputStream)
        st.pointee.avg_frame_rate = frameRate
        outputIndex = st.pointee.index
    }

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        counters.packetsIn += 1
        frameClock?.start(packet.pointer.pointee.dts)
        guard let pictureOrder else { return try decode(packet, muxer: muxer) }
        for ready in try pictureOrder.add(packet) { try decode(ready, muxer: muxer) }
    }

    /// Decodes a packet (nil: the end of the stream) and sends its pictures on.
    private func decode(_ packet: Packet?, muxer: Muxer) throws(KilnError) {
        try decoder.decodeRequiringOutput(packet, giveUpAfter: Self.undecodableAfterPackets) { (frame: Frame) throws(KilnError) in
            try self.filter(frame, muxer: muxer)
        }
    }

    /// The packets the picture order still holds, then the decoder's last pictures.
    private func drainDecoder(muxer: Muxer) throws(KilnError) {
        for ready in pictureOrder?.finish() ?? [] { try decode(ready, muxer: muxer) }
        try decode(nil, muxer: muxer)
    }

    /// The pictures go on in another stream (`StreamSuccession`): what this decoder holds
    /// goes out, then a decoder for the new stream takes over. The filter graph follows a
    /// new picture shape as it does one that changes mid-stream (fitted in the plan's
    /// frame); the time base is the same.
    func follow(_ stream: UnsafeMutablePointer<AVStream>, muxer: Muxer) throws(KilnError) {
        try drainDecoder(muxer: muxer)
        retired.corrupt += decoder.corruptPackets
        retired.decoded += decoder.framesDecoded
        retired.repaired += pictureOrder?.repaired ?? 0
        decoder = try Decoder(stream: stream)
        pictureOrder = pictureOrder != nil ? PictureOrderTimes(stream: stream, format: format) : nil
    }

    func finish(muxer: Muxer) throws(KilnError) {
        try drainDecoder(muxer: muxer)
        if let graph {
            try graph.push(nil)
            try drain(graph, muxer: muxer)
        }
        guard let encoder else { return }
        try encoder.encode(nil) { (p: Packet) throws(KilnError) in try self.write(p, muxer: muxer) }
    }

    private func filter(_ decoded: Frame, muxer: Muxer) throws(KilnError) {
        decoded.pointer.pointee.pts = frameClock?.time(decoded: decoded.pointer.pointee.best_effort_timestamp)
            ?? decoded.pointer.pointee.best_effort_timestamp
        var frame = decoded
        if let dolbyVision {
            // Mapped at the stored (pre-rotation) output size: the graph then only tone-maps.
            frame = try dolbyVision.map(decoded, width: Int32(plan.storedSize.width), height: Int32(plan.storedSize.height))
        }
        let f = frame.pointer
        if !plan.deinterlace && f.pointee.interlaced_frame != 0 { interlacedSeen = true }
        let input = VideoInput(f, interlacedSeen: interlacedSeen)
        if firstAspect == nil { firstAspect = input.displayAspect }
        if graph?.input != input {
            // Taken once, from the first picture (or the stream), so a rebuilt graph keeps
            // the same curve: per-picture peaks would flicker.
            if contentPeak == nil {
                var maxCLL = 0.0, masteringPeak = 0.0
                kiln_content_light(inputStream, f, &maxCLL, &masteringPeak)
                contentPeak = ToneCurve.peakNits(maxCLL: maxCLL, masteringPeak: masteringPeak)
            }
            let streamStart = graph == nil
            if let old = graph {
                // The old graph may still hold frames (bwdif keeps one): let them out first.
                try old.push(nil)
                try drain(old, muxer: muxer)
            }
            graph = nil
            graph = try VideoFilters(input: input, timeBase: decoder.timeBase, frameRate: sourceRate,
                                     chain: videoFilterChain(plan: plan, input: input, toneMap: toneMap,
                                                             peakNits: contentPeak ?? ToneCurve.assumedPeak,
                                                             sourceColor: zscaleSource,
                                                             frameRate: av_cmp_q(frameRate, filmRate) == 0 ? nil : frameRate,
                                                             outputMatrix: color.matrixName, inputMatrix: inputMatrix,
                                                             picture: picture(for: input)),
                                     streamStart: streamStart)
        }
        guard let graph else { return }
        try graph.push(frame)
        try drain(graph, muxer: muxer)
    }

    /// Where a picture whose shape differs from the first one's goes in the plan's frame.
    private func picture(for input: VideoInput) -> (width: Int32, height: Int32)? {
        return pictureSize(frameWidth: Int32(plan.storedSize.width), frameHeight: Int32(plan.storedSize.height),
                           firstAspect: firstAspect ?? input.displayAspect, aspect: input.displayAspect)
    }

    private func drain(_ graph: VideoFilters, muxer: Muxer) throws(KilnError) {
        guard let encoder else { throw KilnError(.internalError, stage: .encode, "the video encoder is not open") }
        while try graph.pull(into: filtered) {
            defer { filtered.unref() }
            let p = filtered.pointer
            let time = p.pointee.pts
            guard let pts = outputPTS(time, from: graph.outputTimeBase, to: encoder.timeBase) else {
                droppedFrames += 1
                continue
            }
            if let burner, time != noPTS {
                try burner.paint(filtered, at: rescale(time, from: graph.outputTimeBase, to: kiln_time_base_q()))
            }
            if variableTiming {
                if lastPTS != noPTS { longestStep = max(longestStep, pts - lastPTS) }
                // Filters copy a picture's length as it came (in the decoder's time base),
                // also those that halve the graph's time base (yadif, bwdif).
                if p.pointee.pkt_duration > 0 {
                    pictureTicks[pts] = rescale(p.pointee.pkt_duration, from: decoder.timeBase, to: encoder.timeBase)
                }
            }
            lastPTS = pts
            p.pointee.pts = pts
            // A decoded picture type would make libx264 force keyframes where the source had them.
            p.pointee.pict_type = forcedKeyframe(at: pts, timeBase: encoder.timeBase) ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
            try encoder.encode(filtered) { (packet: Packet) throws(KilnError) in try self.write(packet, muxer: muxer) }
        }
    }

    /// Whether the picture at `pts` starts a keyframe the plan's interval asks for. The
    /// keyframe interval is counted in pictures (`keyint`), which with pictures on their own
    /// times is no bound in time: a phone clip at 60 then 30 fps had its second keyframe
    /// 2.5 s in, a 15 fps stretch 2.33 s apart. So a variable rate also gets a keyframe at
    /// the first picture at or past each multiple of the interval from its first picture,
    /// as ffmpeg's `-force_key_frames expr:gte(t,n_forced*G)` does (the same arithmetic, so
    /// its equivalent still reproduces the output); a constant rate's interval is exact.
    private func forcedKeyframe(at pts: Int64, timeBase: AVRational) -> Bool {
        guard variableTiming else { return false }
        if keyframeClockStart == noPTS { keyframeClockStart = pts }
        let t = Double(pts - keyframeClockStart) * av_q2d(timeBase)
        guard t >= Double(forcedKeyframes) * settings.gopSeconds else { return false }
        forcedKeyframes += 1
        return true
    }

    /// One frame of `frameRate` in the encoder's time base.
    private var frameTicks: Double { av_inv_q(frameRate).seconds / encoderTimeBase.seconds }

    /// The encoder timestamp for a filtered frame, or nil to drop it: on a constant rate's
    /// grid as `FrameGrid` places it.
    /// With pictures on their own times, a picture keeps its time (a tick after the last at
    /// least); one more than 0.6 of a frame behind the last is dropped as a duplicate.
    private func outputPTS(_ ts: Int64, from tb: AVRational, to encoderTB: AVRational) -> Int64? {
        if variableTiming {
            let step = max(1, Int64(frameTicks.rounded()))
            if ts == noPTS { return lastPTS == noPTS ? 0 : lastPTS + step }
            let exact = Int64((Double(ts) * tb.seconds / encoderTB.seconds).rounded())
            if lastPTS == noPTS { return exact }
            if Double(exact - lastPTS) <= -0.6 * frameTicks { return nil }
            return max(exact, lastPTS + 1)
        }
        return grid.place(ts == noPTS ? nil : Double(ts) * tb.seconds / encoderTB.seconds)
    }

    private func write(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        guard let encoder else { return }
        packet.streamIndex = outputIndex
        let step = max(1, Int64(frameTicks.rounded()))
        let own = variableTiming ? pictureTicks.removeValue(forKey: packet.pointer.pointee.pts) : nil
        if packet.pointer.pointee.duration == 0 {
            // Never less than the step: a source's packets may state a frame of the codec's
            // rate (Theora, Matroska's default) for a picture held half a second.
            packet.pointer.pointee.duration = own.map { max(step, min($0, longestStep)) } ?? step
        }
        try muxer.write(packet, from: encoder.timeBase)
        counters.packetsOut += 1
    }

    /// Which HDR transfer the source has, for tone mapping; nil when it is SDR after all.
    static func toneMapSource(par: UnsafeMutablePointer<AVCodecParameters>, source: StreamInfo) throws(KilnError) -> ToneMapSource? {
        // Profile 5 (IPTPQc2) only has colours through its RPU's reshaping and matrices;
        // zscale alone would read IPT as Y'CbCr (green and purple pictures).
        if source.dolbyVisionWithoutBaseLayer, source.colorTransfer != "arib-std-b67" { return .dolbyVision }
        switch par.pointee.color_trc {
        case AVCOL_TRC_SMPTE2084: return .pq
        case AVCOL_TRC_ARIB_STD_B67: return .hlg
        default: break
        }
        switch source.hdr ?? .sdr {
        case .hdr10: return .pq
        case .hlg: return .hlg
        case .dolbyVision:
            switch source.dolbyVision?.baseLayer {
            case .hlg: return .hlg
            case .sdr: return nil
            default: return .pq
            }
        case .sdr: return nil
        }
    }

    /// The output frame rate (and, for a constant rate, the encoder's time base): the
    /// container's average when sane, else the probe's, else libavformat's guess, else 25.
    /// An average below the rate most frames come at (the probe's median step) is no rate the frames
    /// come at: a phone clip at 30 fps that slows to 24 in the dark averages 27, one that
    /// skips 3 s averages 15, one that dropped a frame in 37 averages 29.2, and on such a
    /// grid a frame that found its slot taken was dropped (a stutter three times a second,
    /// or half the frames). Those are timed on the grid of the median step instead, where
    /// a slower stretch or a hole only leaves slots empty — except film carried at 29.97
    /// by 3:2 pulldown, whose average is its own 23.976. Slideshows and cover pictures
    /// come at a picture in seconds or minutes: rates down to one in 1,000 s are taken as
    /// they are (a 25 fps grid had been assumed below 1 fps).
    static func frameRate(demuxer: Demuxer, stream: UnsafeMutablePointer<AVStream>, source: StreamInfo) -> AVRational {
        func sane(_ r: AVRational) -> Bool { r.num > 0 && r.den > 0 && r.seconds >= 0.001 && r.seconds <= StandardFrameRate.fastestBelievable }
        let avg = stream.pointee.avg_frame_rate
        // A variable rate keeps its pictures' own times (`variableTiming`); its rate is
        // x264's for its rate control and keyframe interval: the average where it is one
        // (MP4 computes it), not a Matroska track's declared 120 fps for a clip at 24 to 30
        // (keyframes 10 s apart, bits spent as if on five times the pictures). Nor where the
        // probe saw one rate: ffmpeg's Matroska muxer declares the rate it was given, which
        // after a select of every fifth picture of 119.88 fps is still 120. Nor above a rate
        // the probe found constant: libavformat's average for Matroska is its analysis's
        // guess, and 23.976 fps with a few milliseconds of jitter read 27.39 (keyframes
        // 2.3 s apart for a plan's 2 s, and every picture off that grid).
        // Nor, for a steady stream at a standard rate, an average a little below it: one
        // picture held longer (a fragmented MP4 whose first picture lasts 55 ms for 33
        // averaged 29.894 fps over 6 s, 29.936 over 10, 29.968 over 20) or one missing. On
        // that grid the pictures, at 30, slid across its slots and sound led by up to 34 ms.
        func steadyBelowStandard(_ fps: Double) -> Bool {
            source.variableFrameRate == false && StandardFrameRate.nearest(fps) != nil && avg.seconds < fps * (1 - 1e-5)
        }
        if let fps = source.frameRate, fps >= 0.001, fps <= StandardFrameRate.fastestBelievable,
           !sane(avg) || (fps > avg.seconds * 1.01 && !pulldown(film: avg.seconds, carried: fps)) || avg.seconds > fps * 1.5
            || (source.variableFrameRate == false && avg.seconds > fps * 1.01) || steadyBelowStandard(fps) {
            return standardRate(fps)
        }
        if sane(avg) { return standard(reduce(avg)) }
        let guess = av_guess_frame_rate(demuxer.context, stream, nil)
        if sane(guess) { return standard(reduce(guess)) }
        return AVRational(num: 25, den: 1)
    }

    /// Whether film at `film` fps is what `carried` fps shows by 3:2 pulldown (24 at 30,
    /// 23.976 at 29.97): frames stepping a field and a half and a frame in turn.
    static func pulldown(film: Double, carried: Double) -> Bool {
        abs(film * 5 / 4 / carried - 1) < 0.002
    }

    /// The rate an encode of `rate` shows within a plan's limit (`FrameRateLimit`): every
    /// n-th picture exactly (120 fps within 60 is 60, 119.88 is 59.94), or the limit itself.
    static func limited(_ rate: AVRational, to most: Double?) -> AVRational {
        guard let most, let out = FrameRateLimit.rate(rate.seconds, within: most) else { return rate }
        let n = (rate.seconds / out).rounded()
        if n >= 2, abs(rate.seconds / n / out - 1) < 1e-6 {
            var exact = AVRational(num: 0, den: 0)
            av_reduce(&exact.num, &exact.den, Int64(rate.num), Int64(rate.den) * Int64(n), Int64(Int32.max))
            return exact
        }
        return standardRate(out)
    }

    /// `fps` as the nearest standard rate, if within 0.2 % of it (29.97 is 30000/1001), else as it is.
    static func standardRate(_ fps: Double) -> AVRational {
        if let (num, den) = StandardFrameRate.nearest(fps) { return AVRational(num: Int32(num), den: Int32(den)) }
        return av_d2q(fps, 100_000)
    }

    /// A rate within a millionth of a standard one is that one: libavformat's average of
    /// 59.94 fps timed in milliseconds is 19001/317, which became the track's time scale.
    /// (So close, the two grids drift a frame apart only after a million frames.)
    static func standard(_ r: AVRational) -> AVRational {
        let fps = r.seconds
        let standard = [(24000, 1001), (30000, 1001), (60000, 1001), (120000, 1001)]
        if let (num, den) = standard.first(where: { abs(Double($0.0) / Double($0.1) / fps - 1) < 1e-6 }) {
            return AVRational(num: Int32(num), den: Int32(den))
        }
        return r
    }

    /// Averages of variable-rate streams come out as large fractions; keep the time base sane.
    private static func reduce(_ r: AVRational) -> AVRational {
        var num: Int32 = 0, den: Int32 = 0
        av_reduce(&num, &den, Int64(r.num), Int64(r.den), 1_000_000)
        return AVRational(num: num, den: den)
    }
}

/// An output colour description (AVCodecContext's color_* fields).
struct ColorTags {
    var primaries: AVColorPrimaries
    var transfer: AVColorTransferCharacteristic
    var matrix: AVColorSpace

    static let bt709 = ColorTags(primaries: AVCOL_PRI_BT709, transfer: AVCOL_TRC_BT709, matrix: AVCOL_SPC_BT709)
    static let bt601 = ColorTags(primaries: AVCOL_PRI_SMPTE170M, transfer: AVCOL_TRC_SMPTE170M, matrix: AVCOL_SPC_SMPTE170M)
    /// BT.601's 625-line (PAL, SECAM) description: its own primaries (H.273 code 5), the
    /// same transfer and matrix coefficients as 525-line.
    static let bt601_625 = ColorTags(primaries: AVCOL_PRI_BT470BG, transfer: AVCOL_TRC_SMPTE170M, matrix: AVCOL_SPC_BT470BG)
    static let bt2020 = ColorTags(primaries: AVCOL_PRI_BT2020, transfer: AVCOL_TRC_BT2020_10, matrix: AVCOL_SPC_BT2020_NCL)
    /// Primaries whose colours BT.709's cannot hold, which an SDR output is converted from
    /// (`ToneMapSource.wideGamut`): BT.2020's, DCI-P3's and Display P3's. Not BT.601's (625-
    /// and 525-line, SMPTE 240M's are 525-line's), near enough to BT.709's that players
    /// show them as such, nor BT.470 System M's, which files name for NTSC's 525-line ones.
    static let widerThanBT709: Set<AVColorPrimaries> = [AVCOL_PRI_BT2020, AVCOL_PRI_SMPTE431, AVCOL_PRI_SMPTE432]

    init(primaries: AVColorPrimaries, transfer: AVColorTransferCharacteristic, matrix: AVColorSpace) {
        self.primaries = primaries
        self.transfer = transfer
        self.matrix = matrix
    }

    /// The source's tags; what is unspecified is filled with what players assume for the
    /// source's size (BT.709 from 720 lines up, BT.601 below: 625-line for 576 or 288
    /// lines, PAL's, else 525-line), written out explicitly so a player does not guess
    /// differently for the smaller output. RGB sources (screen captures, animation, image
    /// sequences: sRGB, whose primaries are BT.709's) are converted to BT.709 YCbCr and
    /// described as BT.709 whatever their size; an SD-sized one was tagged with BT.601's
    /// primaries and transfer beside the BT.709 matrix it was converted with.
    init(par: UnsafeMutablePointer<AVCodecParameters>) {
        let p = par.pointee
        let rgb = p.color_space == AVCOL_SPC_RGB
            || (av_pix_fmt_desc_get(AVPixelFormat(rawValue: p.format)).map { $0.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0 } ?? false)
        let assumed: ColorTags = rgb || p.height >= 720 || p.width >= 1280 ? .bt709 : [576, 288].contains(p.height) ? .bt601_625 : .bt601
        self.init(par: par, filling: assumed)
    }

    /// The stream's tags, with what it leaves unsaid (unspecified, reserved; an RGB
    /// matrix, which YCbCr pictures cannot have) taken from `assumed`.
    private init(par: UnsafeMutablePointer<AVCodecParameters>, filling assumed: ColorTags) {
        let p = par.pointee
        primaries = [AVCOL_PRI_UNSPECIFIED, AVCOL_PRI_RESERVED0, AVCOL_PRI_RESERVED].contains(p.color_primaries)
            ? assumed.primaries : p.color_primaries
        transfer = [AVCOL_TRC_UNSPECIFIED, AVCOL_TRC_RESERVED0, AVCOL_TRC_RESERVED].contains(p.color_trc) ? assumed.transfer : p.color_trc
        matrix = [AVCOL_SPC_UNSPECIFIED, AVCOL_SPC_RESERVED, AVCOL_SPC_RGB].contains(p.color_space) ? assumed.matrix : p.color_space
    }

    /// The colours of an HDR source as a tone map reads them: its own primaries and matrix
    /// where it states them (HLG and PQ with BT.709's, as Sony, Panasonic and DJI cameras
    /// record them, were read as BT.2020's: every colour oversaturated, greens and reds
    /// clipped), else BT.2020's, which HDR10 and HLG broadcasts use.
    init(hdr par: UnsafeMutablePointer<AVCodecParameters>) { self.init(par: par, filling: .bt2020) }

    /// zscale's options for pictures with these primaries and matrix (its names are
    /// libavutil's, but for two matrices it spells otherwise: those by number). The output's
    /// primaries are stated as the same: zscale's default is the picture's own tag, and an
    /// HLG file that states none left the next zscale nothing to convert from ("no path
    /// between colorspaces": the transcode failed).
    var zscaleInput: String {
        let primariesName = string(av_color_primaries_name(primaries)) ?? String(primaries.rawValue)
        let matrixName = [AVCOL_SPC_SMPTE240M, AVCOL_SPC_SMPTE2085].contains(matrix) ? nil : string(av_color_space_name(matrix))
        return "pin=\(primariesName):min=\(matrixName ?? String(matrix.rawValue)):p=\(primariesName)"
    }

    /// zscale's name for an SDR transfer: the stated one where zscale has it, else BT.709's
    /// (BT.2020's SDR transfer, 10- and 12-bit, is BT.709's curve).
    var zscaleSDRTransfer: String {
        switch transfer {
        case AVCOL_TRC_SMPTE170M: "601"
        case AVCOL_TRC_GAMMA22: "bt470m"
        case AVCOL_TRC_GAMMA28: "bt470bg"
        case AVCOL_TRC_IEC61966_2_1: "iec61966-2-1"
        case AVCOL_TRC_LINEAR: "linear"
        default: "709"
        }
    }

    /// The tags of an output of `width` x `height` made from pictures with these: from 720
    /// lines (or 1280 columns) up, BT.601's matrix becomes BT.709's (the scaler converts):
    /// the ladder promises BT.709, and players that do not read the tag take HD for BT.709
    /// (an MJPEG camera's 720p had come out with JPEG's BT.601 matrix, greens off for them).
    /// The FCC's and SMPTE 240M's matrices, which players do not read (they take BT.601's or
    /// BT.709's by size), become the one for the output's size. Primaries and transfer stay
    /// as they are tagged.
    func forOutput(width: Int, height: Int) -> ColorTags {
        let unread = matrix == AVCOL_SPC_FCC || matrix == AVCOL_SPC_SMPTE240M
        if width >= 1280 || height >= 720, unread || matrix == AVCOL_SPC_SMPTE170M || matrix == AVCOL_SPC_BT470BG {
            return ColorTags(primaries: primaries, transfer: transfer, matrix: AVCOL_SPC_BT709)
        }
        return unread ? ColorTags(primaries: primaries, transfer: transfer, matrix: AVCOL_SPC_SMPTE170M) : self
    }

    /// The matrix as libswscale's `out_color_matrix` names it, for RGB → YCbCr conversion.
    var matrixName: String? {
        switch matrix {
        case AVCOL_SPC_BT709: "bt709"
        case AVCOL_SPC_SMPTE170M, AVCOL_SPC_BT470BG: "bt601"
        case AVCOL_SPC_SMPTE240M: "smpte240m"
        case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: "bt2020"
        case AVCOL_SPC_FCC: "fcc"
        default: nil
        }
    }
}
