import KilnCore

/// A device as the planner sees it: caps with every list canonicalised into a set (so
/// order and spelling never change a plan) and absent fields replaced by what every
/// player handles.
struct Device: Sendable {
    /// Absent fields fall back to this floor: H.264 8-bit 4:2:0, AAC/MP3, MP4, SDR. An
    /// absent `max_resolution` sets no limit (the ladder still does).
    static let baseline = DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "mp3"],
                                     audioPassthroughCodecs: [], containers: ["mp4"], maxResolution: nil, hdr: false)

    /// The H.264 level a stream needs, as `level_idc`: the one it signals, or a higher one
    /// where its picture size and rate need more (an encoder told `-level 4.1` for 1080p60
    /// writes 4.1, and a decoder held to 4.1 falls behind on it; a stream may also signal
    /// none), or where its average bitrate (`kbps`) needs more than either: its peaks,
    /// which a level limits, are not known, but a stream above the level on average is
    /// above it.
    static func h264Level(_ s: StreamInfo, kbps: Int? = nil) -> Int? {
        let signalled = s.level.flatMap { $0 > 0 ? $0 : nil }
        guard let w = s.width, let h = s.height, w > 0, h > 0, let lowest = H264Level.table.first else { return signalled }
        // A stream that signals 4.0 at 39 Mbit/s (x264 told a level without a VBV to keep
        // to) is above 4.0's 25.
        let needed = H264Level.required(width: w, height: h, fps: Codecs.frameRate(s) ?? 0, maxrateKbps: kbps ?? 0, bufsizeKbps: 0,
                                        floor: lowest).idc
        return max(signalled ?? needed, needed)
    }

    let known: Bool
    let video: Set<String>
    let audioDecode: Set<String>
    let audioPassthrough: Set<String>
    let containers: Set<String>
    let maxResolution: ResolutionClass?
    let hdr: Bool
    let interlaced: Bool
    /// `caps.max_h264_level` as `level_idc`; nil: any.
    let maxH264Level: Int?
    /// `caps.max_video_bit_depth`: for every codec, and by canonical codec name.
    let maxVideoBitDepth: Int?
    let maxVideoBitDepthByCodec: [String: Int]
    /// nil: every HDR format (when `hdr`).
    let hdrFormats: Set<String>?
    let maxAudioChannels: Int?
    /// `caps.max_frame_rate`; nil: any for a copy, `Planner.defaultMaxFrameRate` for an encode.
    let maxFrameRate: Double?

    init(_ caps: DeviceCaps?) {
        known = caps != nil
        let c = caps ?? Device.baseline
        let b = Device.baseline
        video = Set((c.codecsVideo ?? b.codecsVideo!).map(Codecs.canonical))
        audioDecode = Set((c.codecsAudio ?? b.codecsAudio!).map(Codecs.canonical))
        audioPassthrough = Set((c.audioPassthroughCodecs ?? []).map(Codecs.canonical))
        containers = Set((c.containers ?? b.containers!).map(Codecs.canonicalContainer))
        maxResolution = c.maxResolution
        hdr = c.hdr ?? false
        interlaced = c.interlaced ?? false
        maxH264Level = c.maxH264Level
        maxVideoBitDepth = c.maxVideoBitDepth?.every
        maxVideoBitDepthByCodec = Dictionary((c.maxVideoBitDepth?.byCodec ?? [:]).map { (Codecs.canonical($0.key), $0.value) },
                                             uniquingKeysWith: { min($0, $1) })
        hdrFormats = c.hdrFormats.map(Set.init)
        maxAudioChannels = c.maxAudioChannels
        maxFrameRate = c.maxFrameRate
    }

    var dolbyVision: Bool { hdr && (video.contains(Codecs.dolbyVision) || hdrFormats?.contains(Codecs.dolbyVision) == true) }
    /// Whether the display shows HDR of this kind (`Codecs.hdrFormat`).
    func showsHDR(_ format: String) -> Bool { hdr && (hdrFormats?.contains(format) ?? true) }
    var playsMP4: Bool { containers.contains("mp4") }
    func playsContainer(_ name: String) -> Bool { containers.contains(Codecs.canonicalContainer(name)) }
    /// Decoded on the device or passed through to a receiver: either way it plays. A device
    /// that lists `pcm` (or `lpcm`) plays linear PCM, which libavcodec names by sample format
    /// (pcm_s16le, pcm_s24be, …).
    func playsAudio(_ codec: String) -> Bool {
        let c = Codecs.canonical(codec)
        let pcm = c.hasPrefix("pcm_") && (audioDecode.contains("pcm") || audioPassthrough.contains("pcm"))
        return pcm || audioDecode.contains(c) || audioPassthrough.contains(c)
    }

    /// Whether this sound plays as it is (`audioProblem`).
    func playsAudio(_ s: StreamInfo) -> Bool { audioProblem(s) == nil }

    /// Why this sound does not play as it is, as a plan's reason: its codec (`playsAudio`);
    /// more channels than the device plays of a sound it decodes itself (one it passes
    /// through to a receiver has the receiver's); AAC above 48 kHz, which Android
    /// guarantees no decoder for and Media Foundation (browsers on Windows) refuses, the
    /// limit Kiln's own encodes keep to (`EncodedSampleRate`). nil when it plays.
    func audioProblem(_ s: StreamInfo) -> String? {
        guard playsAudio(s.codec) else { return "audio_codec_unsupported" }
        let passedThrough = audioPassthrough.contains(Codecs.canonical(s.codec))
        if let most = maxAudioChannels, (s.channels ?? 0) > most, !passedThrough { return "audio_channels_above_cap" }
        if Codecs.canonical(s.codec) == "aac", (s.sampleRate ?? 0) > EncodedSampleRate.most, !passedThrough {
            return "audio_sample_rate_above_cap"
        }
        return nil
    }

    /// The channels a sound the device decodes itself may have.
    func channels(_ wanted: Int, decodedAs codec: String) -> Int {
        guard let most = maxAudioChannels, !audioPassthrough.contains(Codecs.canonical(codec)) else { return wanted }
        return max(1, min(wanted, most))
    }

    /// Why this video stream cannot be shown as it is (empty when it can). Bit depth and
    /// chroma matter as much as the codec name: H.264 High 10 or 4:4:4 has almost no
    /// hardware decoder, HEVC/VP9/AV1 are fine up to 10-bit 4:2:0.
    /// - Parameter kbps: the stream's bitrate, where known (`PlanContext.videoKbps`).
    func videoProblems(_ s: StreamInfo, kbps: Int? = nil) -> [String] {
        var problems: [String] = []
        let codec = Codecs.canonical(s.codec)
        if !video.contains(codec) {
            problems.append("video_codec_unsupported")
        } else {
            let depth = Codecs.bitDepth(s), chroma = Codecs.chroma(s)
            let maxDepth = maxVideoBitDepthByCodec[codec] ?? maxVideoBitDepth ?? (["hevc", "vp9", "av1"].contains(codec) ? 10 : 8)
            // A device that takes H.264 past 8 bits decodes it in software, any profile.
            if depth > maxDepth || chroma != 420 || (codec == "h264" && maxDepth <= 8 && !Codecs.hardwareH264Profile(s.profile)) {
                problems.append("video_profile_unsupported")
            }
            if codec == "h264", let most = maxH264Level, let level = Self.h264Level(s, kbps: kbps), level > most {
                problems.append("video_level_above_cap")
            }
        }
        if let cap = maxResolution, !FrameSize.codedFits(s, cap) {
            problems.append("resolution_above_cap")
        }
        if let most = maxFrameRate, let fps = Codecs.frameRate(s), FrameRateLimit.rate(fps, within: most) != nil {
            problems.append("frame_rate_above_cap")
        }
        if s.fieldOrder?.isInterlaced == true && !interlaced {
            problems.append("interlaced_unsupported")
        }
        // A display that shows Dolby Vision shows a Dolby Vision stream whatever its base layer.
        if Codecs.isHDR(s) && !showsHDR(Codecs.hdrFormat(s)) && !(s.dolbyVision != nil && dolbyVision) {
            problems.append("hdr_unsupported")
        } else if s.dolbyVisionWithoutBaseLayer && !dolbyVision {
            problems.append("dolby_vision_unsupported")
        }
        return problems
    }
}
