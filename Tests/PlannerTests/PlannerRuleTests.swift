import KilnCore
import Testing
@testable import Planner

/// What one case expects; nil fields are not checked.
struct Expect: Sendable {
    var error: KilnError.Code? = nil
    var field: String? = nil
    var delivery: DeliveryFormat? = nil
    var effective: Quality? = nil
    var noVideo: Bool = false
    var noAudio: Bool = false
    var video: StreamAction? = nil
    var size: [Int]? = nil
    var toneMap: Bool? = nil
    var deinterlace: Bool? = nil
    var rotation: Int? = nil
    var level: String? = nil
    /// The encode's maxrate (the picture's bitrate in the plan).
    var videoKbps: Int? = nil
    /// The encode's frame-rate limit (`max_frame_rate`); 0 for none (the source's rate).
    var fps: Double? = nil
    var audioIndex: Int? = nil
    var audio: StreamAction? = nil
    var audioCodec: String? = nil
    var channels: Int? = nil
    var audioKbps: Int? = nil
    var subtitles: [SubtitleAction]? = nil
    var subtitleLanguages: [String?]? = nil
    /// Whether the track burnt in is burnt for its forced display sets only (`forced_only`).
    var burnsForcedOnly: Bool? = nil
    /// The channels of the plan's audio fallback; [] for none.
    var audioFallback: [Int]? = nil
    var reasons: [String] = []
    var notReasons: [String] = []
}

struct Case: Sendable, CustomTestStringConvertible {
    let name: String
    let source: MediaInfo
    let quality: Quality
    let caps: DeviceCaps?
    var policy = ServerPolicy()
    var language: String? = nil
    let expect: Expect
    var testDescription: String { name }

    init(_ name: String, _ source: MediaInfo, _ quality: Quality, _ caps: DeviceCaps?, policy: ServerPolicy = ServerPolicy(),
         language: String? = nil, _ expect: Expect) {
        self.name = name
        self.source = source
        self.quality = quality
        self.caps = caps
        self.policy = policy
        self.language = language
        self.expect = expect
    }
}

let allow4K = ServerPolicy(allow4KOutput: true)
let noTranscode = ServerPolicy(transcodingAllowed: false)
let ios = device("ios"), atv = device("apple-tv-4k"), android = device("android"), androidTV = device("android-tv"), web = device("web")

let h1080 = video("h264", 1920, 1080, profile: "High")
let aacEng = audio("aac", ch: 2, index: 1, lang: "eng", isDefault: true, kbps: 128)

// MARK: original

let originalCases: [Case] = [
    Case("original without caps is the source as it is", media("mkv", kbps: 30000, video("hevc", 3840, 2160), audio("dts", ch: 6)), .original, nil,
         Expect(delivery: .original, effective: .original, video: .copy, reasons: ["source_as_is"])),
    Case("original without caps: audio-only FLAC as it is", media("mkv", kbps: 900, audio("flac", index: 0)), .original, nil,
         Expect(delivery: .original, noVideo: true, reasons: ["source_as_is"])),
    Case("original: everything plays", media("mp4", h1080, aacEng), .original, ios,
         Expect(delivery: .original, video: .copy, audio: .copy, subtitles: [], reasons: ["source_playable"])),
    Case("original: Matroska to iOS is a remux", media("mkv", h1080, aacEng), .original, ios,
         Expect(delivery: .remux, effective: .original, video: .copy, audio: .copy, reasons: ["container_unsupported"])),
    Case("original: DTS 5.1 to iOS becomes E-AC-3 5.1 in a remux", media("mp4", h1080, audio("dts", ch: 6, kbps: 1509)), .original, ios,
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "eac3", channels: 6, audioKbps: 640, reasons: ["audio_codec_unsupported"])),
    Case("original: DTS 5.1 to Android (no AC-3) becomes AAC stereo 256", media("mkv", h1080, audio("dts", ch: 6, kbps: 1509)), .original, android,
         Expect(delivery: .remux, audio: .transcode, audioCodec: "aac", channels: 2, audioKbps: 256, reasons: ["audio_codec_unsupported"], notReasons: ["container_unsupported"])),
    Case("original: mono PCM becomes mono AAC at half the stereo rate", media("mov", video("h264", 1280, 720), audio("pcm_s16le", ch: 1, kbps: 768)), .original, ios,
         Expect(delivery: .remux, audioCodec: "aac", channels: 1, audioKbps: 128)),
    Case("original: H.264 High 10 is not playable", media("mp4", kbps: 3000, video("h264", 1920, 1080, pix: "yuv420p10le", profile: "High 10"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps5, video: .transcode, size: [1920, 1080], reasons: ["video_profile_unsupported"])),
    Case("original: H.264 4:4:4 is not playable", media("mkv", kbps: 1000, video("h264", 320, 240, pix: "yuv444p", profile: "High 4:4:4 Predictive"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps1, size: [320, 240], reasons: ["video_profile_unsupported", "container_unsupported"])),
    Case("original: lossless H.264 (High 4:4:4 Predictive) in 8-bit 4:2:0 is not playable: it had been copied for iOS", media("mp4", kbps: 1200, video("h264", 320, 240, pix: "yuv420p", profile: "High 4:4:4 Predictive"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps2, size: [320, 240], reasons: ["video_profile_unsupported"])),
    Case("original: Constrained Baseline and Main H.264 play", media("mp4", video("h264", 640, 360, profile: "Constrained Baseline"), aacEng), .original, ios,
         Expect(delivery: .original, video: .copy)),
    Case("original: H.264 4:2:2 is not playable", media("mp4", kbps: 9000, video("h264", 1920, 1080, pix: "yuv422p10le", profile: "High 4:2:2"), aacEng), .original, web,
         Expect(delivery: .transcode, effective: .mbps10, reasons: ["video_profile_unsupported"])),
    Case("original: H.264 without pixel format but High 10 profile is 10-bit", media("mp4", StreamInfo(index: 0, type: .video, codec: "h264", profile: "High 10", width: 1280, height: 720), aacEng), .original, ios,
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("original: yuvj420p H.264 plays", media("mp4", video("h264", 1280, 720, pix: "yuvj420p"), aacEng), .original, ios,
         Expect(delivery: .original)),
    Case("original: 4K to a 1080p device is transcoded down", media("mp4", kbps: 40000, video("h264", 3840, 2160), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps20, size: [1920, 1080], level: "4.1", reasons: ["resolution_above_cap"])),
    Case("original: 1080p to a 720p device picks the lowest rung that holds it", media("mp4", kbps: 4000, h1080, aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p720, hdr: false),
         Expect(delivery: .transcode, effective: .mbps5, size: [1280, 720], reasons: ["resolution_above_cap"])),
    Case("original: HDR10 to an SDR phone is tone-mapped (8 Mbps of HEVC is H.264's 16: the 20 Mbps rung)", media("mp4", kbps: 8000, hdr10(), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps20, toneMap: true, reasons: ["hdr_unsupported", "hdr_tone_mapped"])),
    Case("original: HDR10 to Apple TV 4K as it is", media("mp4", kbps: 8000, hdr10(), aacEng), .original, atv,
         Expect(delivery: .original, video: .copy)),
    Case("original: HDR10 in Matroska to Apple TV 4K is a remux", media("mkv", kbps: 8000, hdr10(), aacEng), .original, atv,
         Expect(delivery: .remux, video: .copy, toneMap: false, reasons: ["container_unsupported"])),
    Case("original: Dolby Vision 5 to Apple TV 4K (lists dolby_vision) as it is", media("mp4", kbps: 8000, dolbyVision(profile: 5, compat: 0), aacEng), .original, atv,
         Expect(delivery: .original)),
    Case("original: Dolby Vision 5 to an HDR TV without DV is mapped through its RPU and tone-mapped", media("mp4", kbps: 8000, dolbyVision(profile: 5, compat: 0), aacEng), .original, androidTV,
         Expect(delivery: .transcode, toneMap: true, reasons: ["dolby_vision_unsupported", "hdr_tone_mapped"])),
    Case("original: Dolby Vision 5 to an SDR phone is tone-mapped", media("mp4", kbps: 8000, dolbyVision(profile: 5, compat: 0), aacEng), .original, ios,
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported", "hdr_tone_mapped"])),
    Case("original: Dolby Vision 8.1 plays as HDR10 on an HDR TV", media("mkv", kbps: 8000, dolbyVision(profile: 8, compat: 1), aacEng), .original, androidTV,
         Expect(delivery: .original)),
    Case("original: Dolby Vision 8.1 to an SDR phone is tone-mapped", media("mp4", kbps: 8000, dolbyVision(profile: 8, compat: 1), aacEng), .original, ios,
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported"])),
    Case("original: Dolby Vision 8.2 with a real SDR base layer plays on SDR", media("mp4", kbps: 8000, dolbyVision(profile: 8, compat: 2, transfer: "bt709"), aacEng), .original, ios,
         Expect(delivery: .original)),
    Case("original: Dolby Vision claiming an SDR base layer over PQ is HDR", media("mp4", kbps: 8000, dolbyVision(profile: 8, compat: 2), aacEng), .original, ios,
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported"])),
    Case("original: Dolby Vision 8.4 (HLG base) to an HDR TV plays", media("mp4", kbps: 8000, dolbyVision(profile: 8, compat: 4, transfer: "arib-std-b67"), aacEng), .original, androidTV,
         Expect(delivery: .original)),
    Case("original: HLG to an SDR browser is tone-mapped", media("mp4", kbps: 8000, hlg(), aacEng), .original, web,
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported"])),
    Case("original: HLG to an HDR TV plays", media("mp4", kbps: 8000, hlg(), aacEng), .original, androidTV,
         Expect(delivery: .original)),
    Case("original: VP9 + Opus WebM in a browser plays", media("webm", video("vp9", 1920, 1080), audio("opus")), .original, web,
         Expect(delivery: .original)),
    Case("original: VP8 in a browser that lists no VP8 is transcoded", media("webm", kbps: 1500, video("vp8", 640, 360), audio("vorbis")), .original, web,
         Expect(delivery: .transcode, effective: .mbps2, size: [640, 360], audioCodec: "aac", reasons: ["video_codec_unsupported"])),
    Case("original: VP8 to a device listing it but only MP4: no MP4 binding, transcode", media("webm", kbps: 1500, video("vp8", 640, 360), audio("vorbis", kbps: 96)), .original,
         DeviceCaps(codecsVideo: ["h264", "vp8"], codecsAudio: ["aac", "vorbis"], containers: ["mp4"]),
         Expect(delivery: .transcode, reasons: ["video_codec_unsupported_in_mp4", "container_unsupported"])),
    Case("original: VP9 to a device listing it but only MP4 is a remux", media("webm", video("vp9", 1280, 720), audio("opus", kbps: 96)), .original,
         DeviceCaps(codecsVideo: ["h264", "vp9"], codecsAudio: ["aac", "opus"], containers: ["mp4"]),
         Expect(delivery: .remux, video: .copy, audio: .copy, audioCodec: "opus")),
    Case("original: MPEG-2 in TS to iOS is transcoded", media("ts", kbps: 15000, video("mpeg2video", 1920, 1080, field: .tt), audio("mp2", kbps: 192)), .original, ios,
         Expect(delivery: .transcode, effective: .mbps20, deinterlace: true, audioCodec: "aac", audioKbps: 256, reasons: ["video_codec_unsupported", "deinterlaced"])),
    // `original` re-encodes only what the device cannot show: the sound it plays is copied
    // (5.1 stays 5.1) and the picture takes what the fallback rung's cap leaves.
    Case("original: VP9 to iOS is re-encoded, its E-AC-3 5.1 copied, not folded into the rung's stereo",
         media("mkv", kbps: 4500, video("vp9", 1920, 1080), audio("eac3", ch: 6, kbps: 640)), .original, ios,
         Expect(delivery: .transcode, effective: .mbps10, audio: .copy, audioCodec: "eac3", channels: 6,
                reasons: ["video_codec_unsupported"], notReasons: ["audio_bitrate_above_target", "audio_channels_reduced"])),
    Case("original: sound of unknown bitrate beside a picture to re-encode takes the rung's audio (the cap must hold)",
         media("mkv", kbps: 4500, video("vp9", 1920, 1080), audio("eac3", ch: 6, kbps: nil)), .original, ios,
         Expect(delivery: .transcode, effective: .mbps10, audio: .transcode)),
    Case("original: 1.5 Mbps 1080p falls back to 5 Mbps, not a 720p rung", media("mp4", kbps: 1500, video("h264", 1920, 1080, pix: "yuv420p10le"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps5, size: [1920, 1080])),
    Case("original: 1.9 Mbps of 12-bit HEVC 720p falls back to 5 Mbps: H.264 takes about twice HEVC's bits (2 Mbps had lost 3 dB)",
         media("mp4", kbps: 1940, video("hevc", 1280, 720, pix: "yuv420p12le"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps5, size: [1280, 720])),
    Case("original: 1.5 Mbps 720p falls back to 2 Mbps", media("mp4", kbps: 1500, video("h264", 1280, 720, pix: "yuv420p10le"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps2, size: [1280, 720])),
    Case("original: 400 kbps 480p falls back to 1 Mbps", media("mp4", kbps: 400, video("h264", 640, 480, pix: "yuv420p10le"), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps1, size: [640, 480])),
    Case("original: unknown bitrate falls back to 20 Mbps",
         MediaInfo(formatName: "avi", container: "avi", durationSeconds: 0, bitRate: 0, sizeBytes: 0, streams: [video("mpeg4", 960, 400), audio("mp3")], fingerprint: "fp1-x"),
         .original, ios, Expect(delivery: .transcode, effective: .mbps20, size: [960, 400])),
    Case("original: 40 Mbps falls back to 20 Mbps", media("mkv", kbps: 40000, video("hevc", 1920, 1080, pix: "yuv420p10le", transfer: "smpte2084", hdr: .hdr10), aacEng), .original, ios,
         Expect(delivery: .transcode, effective: .mbps20)),
    Case("original: transcoding disabled and a transcode needed", media("mp4", kbps: 8000, hdr10(), aacEng), .original, ios, policy: noTranscode,
         Expect(error: .transcodeDisabled)),
    Case("original: transcoding disabled still remuxes", media("mkv", h1080, audio("dts", ch: 6)), .original, ios, policy: noTranscode,
         Expect(delivery: .remux, audio: .transcode)),
    Case("original: a device that plays no H.264 cannot get a transcode", media("mp4", kbps: 3000, video("vp9", 1920, 1080), aacEng), .original,
         DeviceCaps(codecsVideo: ["hevc"], codecsAudio: ["aac"], containers: ["mp4"]),
         Expect(error: .qualityUnavailable)),
    Case("original: a device that plays no AAC cannot get re-encoded audio", media("mp4", h1080, audio("dts", ch: 2)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["opus"], containers: ["mp4"]),
         Expect(error: .qualityUnavailable)),
    Case("a picture stream that names no codec (a damaged sample entry) is unsupported at every quality, not a quality to try another of",
         media("mp4", kbps: 3000, video("none", 0, 0), aacEng), .mbps1, ios, Expect(error: .sourceUnsupported)),
    Case("the same where the stream is all there is", media("mp4", kbps: 3000, video("none", 0, 0)), .original, ios,
         Expect(error: .sourceUnsupported)),
    Case("original: a device without MP4 cannot get a remux", media("mkv", h1080, audio("dts")), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["webm"]),
         Expect(error: .qualityUnavailable)),
    Case("original: empty caps fields fall back to the baseline (HEVC not assumed)", media("mp4", kbps: 3000, video("hevc", 1920, 1080), aacEng), .original, DeviceCaps(),
         Expect(delivery: .transcode, reasons: ["video_codec_unsupported"])),
    Case("original: empty caps and a baseline source play as they are", media("mp4", h1080, aacEng), .original, DeviceCaps(),
         Expect(delivery: .original)),
    Case("original: caps spelled avc1/HEVC/EC-3 mean h264/hevc/eac3", media("mp4", video("hevc", 1920, 1080), audio("eac3", ch: 6)), .original,
         DeviceCaps(codecsVideo: ["avc1", "HEVC"], codecsAudio: ["mp4a", "EC-3"], containers: ["MP4"]),
         Expect(delivery: .original)),
    Case("original: caps written as codec strings (RFC 6381: avc1.640028, hvc1.2.4.L153.B0, mp4a.40.2, mp4a.a6) mean h264/hevc/aac/eac3",
         media("mp4", video("hevc", 1920, 1080), audio("eac3", ch: 6)), .original,
         DeviceCaps(codecsVideo: ["avc1.640028", "hvc1.2.4.L153.B0"], codecsAudio: ["mp4a.40.2", "mp4a.a6"], containers: ["mp4"]),
         Expect(delivery: .original)),
    Case("original: an AAC-only device named by its codec string (mp4a.40.2) gets E-AC-3 re-encoded",
         media("mp4", h1080, audio("eac3", ch: 6)), .original,
         DeviceCaps(codecsVideo: ["avc1.640028"], codecsAudio: ["mp4a.40.2"], containers: ["mp4"]),
         Expect(delivery: .remux, reasons: ["audio_codec_unsupported"])),
    Case("original: audio-only DTS-HD MA 7.1 to iOS becomes E-AC-3 5.1", media("mkv", kbps: 3000, audio("dts", ch: 8, index: 0, kbps: nil)), .original, ios,
         Expect(delivery: .remux, noVideo: true, audio: .transcode, audioCodec: "eac3", channels: 6)),
    Case("original: audio-only FLAC in MP4 plays on iOS", media("mp4", kbps: 900, audio("flac", index: 0, kbps: 900)), .original, ios,
         Expect(delivery: .original, noVideo: true)),
    Case("original: audio-only Vorbis in Ogg to iOS becomes AAC in MP4", media("ogg", kbps: 192, audio("vorbis", index: 0, kbps: 192)), .original, ios,
         Expect(delivery: .remux, audioCodec: "aac", audioKbps: 256, reasons: ["container_unsupported", "audio_codec_unsupported"])),
    Case("original: attached cover art is not a video stream", media("mkv", kbps: 900, video("mjpeg", 600, 600, attached: true), audio("flac")), .original, ios,
         Expect(delivery: .remux, noVideo: true, audioCodec: "flac")),
    Case("original: nothing to deliver (data alone) is unsupported media", media("mkv", StreamInfo(index: 0, type: .data, codec: "bin_data")), .original, ios,
         Expect(error: .sourceUnsupported)),
    Case("original without caps: still nothing to deliver", media("mkv", subtitle("subrip", index: 0)), .original, nil,
         Expect(error: .sourceUnsupported)),
    Case("original: empty containers list is invalid caps", media("mp4", h1080, aacEng), .original, DeviceCaps(containers: []),
         Expect(error: .invalidCaps, field: "containers")),
    Case("original: no codecs at all is invalid caps", media("mp4", h1080, aacEng), .original, DeviceCaps(codecsVideo: [], codecsAudio: []),
         Expect(error: .invalidCaps, field: "codecs_video")),
    Case("original: the delivered file keeps its subtitles untouched", media("mkv", h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2)), .original, androidTV,
         Expect(delivery: .original, subtitles: [])),
]

// MARK: bitrate rungs

let rungCases: [Case] = [
    Case("5 Mbps: a 4 Mbps MP4 already fits", media("mp4", kbps: 4000, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .original, effective: .original, video: .copy, reasons: ["source_fits_target"])),
    Case("5 Mbps: exactly at the cap fits", media("mp4", kbps: 5000, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .original, reasons: ["source_fits_target"])),
    Case("5 Mbps: one kbit/s above is transcoded", media("mp4", kbps: 5001, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .transcode, effective: .mbps5, size: [1920, 1080], level: "4.0", reasons: ["bitrate_above_target"])),
    Case("5 Mbps: 8 Mbps 1080p is transcoded at 1080p", media("mp4", kbps: 8000, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .transcode, video: .transcode, size: [1920, 1080], toneMap: false, deinterlace: false, rotation: 0, audio: .copy, reasons: ["bitrate_above_target"])),
    Case("5 Mbps: a fitting Matroska is remuxed", media("mkv", kbps: 4000, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["source_fits_target", "container_unsupported"])),
    Case("5 Mbps: fitting video with DTS is remuxed with the rung's AAC", media("mkv", kbps: 4000, h1080, audio("dts", ch: 6, kbps: 1500)), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "aac", channels: 2, audioKbps: 160)),
    Case("5 Mbps: fitting video whose audio re-encode would overflow is transcoded", media("mkv", kbps: 4950, video("h264", 1920, 1080, kbps: 4900), audio("dts", kbps: nil)), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["bitrate_above_target"])),
    Case("5 Mbps: a 4 Mbps film with three DTS tracks is remuxed with one track", media("mkv", kbps: 8500, video("h264", 1920, 1080, kbps: 4000),
         audio("dts", ch: 6, index: 1, isDefault: true, kbps: 1509), audio("dts", ch: 6, index: 2, lang: "fre", kbps: 1509), audio("dts", ch: 6, index: 3, lang: "ger", kbps: 1509)), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audioIndex: 1, audio: .transcode, audioCodec: "aac", audioKbps: 160, reasons: ["source_fits_target", "tracks_dropped_to_fit"])),
    Case("5 Mbps: a 4 Mbps MP4 with an extra 1.5 Mbps track is remuxed keeping the AAC", media("mp4", kbps: 5700, video("h264", 1920, 1080),
         audio("aac", index: 1, isDefault: true, kbps: 160), audio("ac3", ch: 6, index: 2, lang: "fre", kbps: 1500)), .mbps5, ios,
         Expect(delivery: .remux, audioIndex: 1, audio: .copy, reasons: ["tracks_dropped_to_fit"])),
    Case("original: AAC at 96 kHz is re-encoded (to 48) for a phone, not sent as it is (Android guarantees AAC to 48 kHz)",
         media("mp4", kbps: 4000, h1080, audio("aac", isDefault: true, kbps: 256, rate: 96_000)), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "aac", reasons: ["audio_sample_rate_above_cap"])),
    Case("5 Mbps: AAC at 88.2 kHz in a fitting Matroska is re-encoded, not copied",
         media("mkv", kbps: 4000, h1080, audio("aac", ch: 6, isDefault: true, kbps: 384, rate: 88_200)), .mbps5, web,
         Expect(delivery: .remux, video: .copy, audio: .transcode, reasons: ["audio_sample_rate_above_cap"])),
    Case("1 Mbps: of two tracks neither within the rung's budget the one nearest it goes, as at 5 Mbps (the default AC-3 at 448 kbit/s had made the 1 Mbps file twice the 5 Mbps one)",
         media("mkv", kbps: 723, video("h264", 320, 240, kbps: 140), audio("ac3", ch: 6, index: 1, isDefault: true, kbps: 448),
               audio("aac", index: 2, kbps: 127)), .mbps1, ios,
         Expect(delivery: .remux, audioIndex: 2)),
    Case("2 Mbps: a screen recorder's default 'Desktop' track goes before its 'Mic' track, both over the rung's budget and within twice each other (the Mic, the nearer the budget, had gone, its silence first; found by a helper's audit)",
         media("mkv", kbps: 1800, video("h264", 1280, 720, kbps: 1500), audio("aac", ch: 1, index: 1, isDefault: true, kbps: 140, title: "Desktop"),
               audio("aac", ch: 1, index: 2, kbps: 100, title: "Mic")), .mbps2, ios,
         Expect(audioIndex: 1)),
    Case("5 Mbps: a device that plays AC-3 but no AAC gets the rung's stereo as AC-3 (it was refused as quality_unavailable, though Kiln encodes AC-3)",
         media("mkv", kbps: 4000, h1080, audio("dts", ch: 6, isDefault: true, kbps: 1500)), .mbps5,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "ac3", channels: 2, audioKbps: 160)),
    Case("1 Mbps: a device that plays E-AC-3 and AC-3 but no AAC gets E-AC-3 stereo at the rung's rate",
         media("mkv", kbps: 4000, h1080, audio("dts", ch: 2, isDefault: true, kbps: 768)), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["ac3", "eac3"], containers: ["mp4"]),
         Expect(delivery: .transcode, audio: .transcode, audioCodec: "eac3", channels: 2, audioKbps: 96)),
    Case("5 Mbps: picture and sound that fill the cap to the last kbit/s leave no room for MP4's index: transcoded, not a remux over the cap",
         media("mp4", kbps: 5003, video("av1", 1920, 1080, kbps: 4861), audio("aac", kbps: 128)), .mbps5,
         DeviceCaps(codecsVideo: ["h264", "av1"], codecsAudio: ["aac"], containers: ["mp4"]),
         Expect(delivery: .transcode, reasons: ["bitrate_above_target"])),
    Case("5 Mbps: a Matroska whose one sound is re-encoded smaller says so, not that tracks were dropped",
         media("mkv", kbps: 5200, video("h264", 1920, 1080, kbps: 4000), audio("dts", ch: 6, kbps: 1200)), .mbps5, ios,
         Expect(delivery: .remux, audio: .transcode, reasons: ["audio_codec_unsupported"], notReasons: ["tracks_dropped_to_fit"])),
    Case("2 Mbps: 30 fps read as 30.001 from Matroska's millisecond times is 720p30's level 3.1, not 3.2",
         media("mkv", kbps: 8000, video("h264", 1920, 1080, fps: 30.001), aacEng), .mbps2, ios, Expect(delivery: .transcode, level: "3.1")),
    Case("original: DTS 5.1 for a box that decodes AC-3 and only passes E-AC-3 through becomes AC-3 5.1, which it decodes itself",
         media("mkv", kbps: 6000, h1080, audio("dts", ch: 6, kbps: 1500)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], audioPassthroughCodecs: ["eac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audio: .transcode, audioCodec: "ac3", channels: 6)),
    Case("original: DTS 5.1 for a box that only passes E-AC-3 and AC-3 through still becomes E-AC-3 5.1 (the receiver decodes it)",
         media("mkv", kbps: 6000, h1080, audio("dts", ch: 6, kbps: 1500)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], audioPassthroughCodecs: ["eac3", "ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audio: .transcode, audioCodec: "eac3", channels: 6)),
    Case("original: a device that lists pcm plays the PCM of a MOV as it is",
         media("mov", kbps: 3000, h1080, audio("pcm_s24le", kbps: 2304)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "LPCM"], containers: ["mov", "mp4"]),
         Expect(delivery: .original, reasons: ["source_playable"])),
    Case("5 Mbps: extra tracks of unknown bitrate cannot prove a fit", media("mkv", kbps: 8500, video("h264", 1920, 1080),
         audio("dts", ch: 6, index: 1, isDefault: true, kbps: nil), audio("dts", ch: 6, index: 2, lang: "fre", kbps: nil)), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["bitrate_above_target"])),
    Case("5 Mbps: bitrate from size and duration when the container has none",
         MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 100, bitRate: 0, sizeBytes: 100_000_000, streams: [h1080, aacEng], fingerprint: "fp1-y"),
         .mbps5, ios, Expect(delivery: .transcode, reasons: ["bitrate_above_target"])),
    Case("5 Mbps: unknown bitrate is transcoded",
         MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 0, bitRate: 0, sizeBytes: 0, streams: [h1080, aacEng], fingerprint: "fp1-z"),
         .mbps5, ios, Expect(delivery: .transcode, reasons: ["bitrate_unknown"])),
    Case("2 Mbps: a 1080p source above the rung's frame is transcoded to 720p", media("mp4", kbps: 1500, h1080, aacEng), .mbps2, ios,
         Expect(delivery: .transcode, size: [1280, 720], level: "3.1", reasons: ["resolution_above_target"])),
    Case("5 Mbps: a picture that fits beside a 640 kbit/s AC-3 5.1 the device plays: the sound is re-encoded to the rung's, the picture copied (not re-encoded for the sound's sake)",
         media("mkv", kbps: 5150, video("h264", 1920, 1080, profile: "High", kbps: 4500), audio("ac3", ch: 6, index: 1, isDefault: true, kbps: 640)), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "aac", channels: 2, audioKbps: 160,
                reasons: ["source_fits_target", "audio_bitrate_above_target"], notReasons: ["bitrate_above_target"])),
    Case("the same with the sound's bitrate unknown (Matroska AC-3 the scan did not measure): re-encoded to the rung's, the picture copied",
         media("mkv", kbps: 5150, video("h264", 1920, 1080, profile: "High", kbps: 4500), audio("ac3", ch: 6, index: 1, isDefault: true, kbps: nil)), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioKbps: 160, reasons: ["audio_bitrate_unknown"])),
    Case("a copied picture above the rung's own video budget is re-encoded though it fits beside the rung's sound: MP4's overhead on a short clip put such a remux over the cap",
         media("mp4", kbps: 1100, video("h264", 640, 360, profile: "High", kbps: 879), audio("aac", ch: 2, index: 1, isDefault: true, kbps: 200)), .mbps1, ios,
         Expect(delivery: .transcode, video: .transcode)),
    Case("a picture that does not fit even beside the rung's sound is still re-encoded",
         media("mkv", kbps: 5600, video("h264", 1920, 1080, profile: "High", kbps: 4960), audio("ac3", ch: 6, index: 1, isDefault: true, kbps: 640)), .mbps5, ios,
         Expect(delivery: .transcode, video: .transcode, reasons: ["bitrate_above_target"])),
    Case("2 Mbps: a 300 kbit/s 1080p H.264 source made 720p gets at most two and a half times what it had (of the 306 the file leaves it), not the rung's 1.8 Mbit/s",
         media("mp4", kbps: 370, video("h264", 1920, 1080, profile: "High", kbps: 300), audio("aac", ch: 2, index: 1, isDefault: true, kbps: 64)), .mbps2, ios,
         Expect(delivery: .transcode, size: [1280, 720], videoKbps: 765, reasons: ["resolution_above_target", "bitrate_limited_to_source"])),
    Case("5 Mbps: a 380 kbit/s HEVC for a browser (no HEVC) gets at most four times its bitrate in H.264",
         media("mp4", kbps: 380, video("hevc", 1920, 1080, profile: "Main", kbps: nil), audio("aac", ch: 2, index: 1, isDefault: true, kbps: 64)), .mbps5, web,
         Expect(delivery: .transcode, videoKbps: 1264, reasons: ["video_codec_unsupported", "bitrate_limited_to_source"])),
    Case("a stream's own tag lower than what the file leaves it does not limit the encode below that (the larger is taken)",
         media("mp4", kbps: 3064, video("hevc", 1920, 1080, profile: "Main", kbps: 500), audio("aac", ch: 2, index: 1, isDefault: true, kbps: 64)), .mbps5, web,
         Expect(delivery: .transcode, videoKbps: 4700, notReasons: ["bitrate_limited_to_source"])),
    Case("a thumbnail-sized source's few kbit/s still leave the encode its least",
         media("mp4", kbps: 60, video("hevc", 320, 240, profile: "Main", kbps: 40), audio("aac", ch: 1, index: 1, isDefault: true, kbps: 20)), .mbps1, web,
         Expect(delivery: .transcode, videoKbps: 200, reasons: ["bitrate_limited_to_source"])),
    Case("original: a picture the device cannot play, from a 1 Mbit/s film, keeps its 640 kbit/s AC-3 5.1 at the rung above rather than the 1 Mbit/s rung's stereo",
         media("mkv", kbps: 960, video("vp9", 640, 360, kbps: 300), audio("ac3", ch: 6, index: 1, isDefault: true, kbps: 640)), .original, ios,
         Expect(delivery: .transcode, effective: .mbps2, audio: .copy, audioCodec: "ac3", channels: 6)),
    Case("2 Mbps: AAC a kbit/s over the rung's 128 is copied beside the encoded picture, which gives up that kbit/s",
         media("mp4", kbps: 8000, h1080, audio("aac", ch: 2, index: 1, isDefault: true, kbps: 129)), .mbps2, ios,
         Expect(delivery: .transcode, videoKbps: 1799, audio: .copy, notReasons: ["audio_bitrate_above_target"])),
    Case("2 Mbps: AAC a tenth over the budget is still re-encoded",
         media("mp4", kbps: 8000, h1080, audio("aac", ch: 2, index: 1, isDefault: true, kbps: 141)), .mbps2, ios,
         Expect(delivery: .transcode, videoKbps: 1800, audio: .transcode, audioKbps: 128, reasons: ["audio_bitrate_above_target"])),
    Case("2 Mbps: a 1.5 Mbps 720p MP4 fits", media("mp4", kbps: 1500, video("h264", 1280, 720), aacEng), .mbps2, ios,
         Expect(delivery: .original, reasons: ["source_fits_target"])),
    Case("1 Mbps: 1080p becomes 854x480", media("mp4", kbps: 8000, h1080, aacEng), .mbps1, ios,
         Expect(delivery: .transcode, size: [854, 480], level: "3.0", audio: .transcode, audioCodec: "aac", audioKbps: 96)),
    Case("20 Mbps: 4K to a phone is 1080p", media("mkv", kbps: 40000, video("hevc", 3840, 2160), aacEng), .mbps20, ios,
         Expect(delivery: .transcode, size: [1920, 1080], level: "4.1")),
    Case("20 Mbps: 4K to Apple TV 4K with 4K allowed stays 4K", media("mkv", kbps: 40000, video("hevc", 3840, 2160), aacEng), .mbps20, atv, policy: allow4K,
         Expect(delivery: .transcode, size: [3840, 2160], level: "5.1")),
    Case("20 Mbps: 4K to Apple TV 4K without the policy is 1080p", media("mkv", kbps: 40000, video("hevc", 3840, 2160), aacEng), .mbps20, atv,
         Expect(delivery: .transcode, size: [1920, 1080])),
    Case("20 Mbps: 4K policy on but a 1080p device", media("mkv", kbps: 40000, video("hevc", 3840, 2160), aacEng), .mbps20, ios, policy: allow4K,
         Expect(delivery: .transcode, size: [1920, 1080])),
    Case("20 Mbps: 4K policy and a 1440p device", media("mkv", kbps: 40000, video("hevc", 3840, 2160), aacEng), .mbps20,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p1440, hdr: false), policy: allow4K,
         Expect(delivery: .transcode, size: [2560, 1440], level: "5.0")),
    Case("20 Mbps: a 4K HEVC source at 15 Mbps fits Apple TV with 4K allowed", media("mp4", kbps: 15000, video("hevc", 3840, 2160), aacEng), .mbps20, atv, policy: allow4K,
         Expect(delivery: .original, reasons: ["source_fits_target"])),
    Case("20 Mbps: the same 4K source without 4K policy is above the frame", media("mp4", kbps: 15000, video("hevc", 3840, 2160), aacEng), .mbps20, atv,
         Expect(delivery: .transcode, size: [1920, 1080], reasons: ["resolution_above_target"])),
    Case("10 Mbps: 4K60 with 4K allowed steps down to 1440p", media("mkv", kbps: 40000, video("hevc", 3840, 2160, fps: 59.94), aacEng), .mbps10, atv, policy: allow4K,
         Expect(delivery: .transcode, size: [2560, 1440], level: "5.1", reasons: ["frame_rate_above_30"])),
    Case("20 Mbps: 4K60 with 4K allowed keeps 4K at level 5.2 (19 Mbit/s is twice the 10 Mbps rung's 4K budget)",
         media("mkv", kbps: 40000, video("hevc", 3840, 2160, fps: 60), aacEng), .mbps20, atv, policy: allow4K,
         Expect(delivery: .transcode, size: [3840, 2160], level: "5.2", notReasons: ["frame_rate_above_30"])),
    Case("5 Mbps: 1080p60 steps down to 720p", media("mp4", kbps: 12000, video("h264", 1920, 1080, fps: 60), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, size: [1280, 720], level: "4.0", reasons: ["frame_rate_above_30"])),
    Case("5 Mbps: 1080p at 29.97 fps keeps its size", media("mp4", kbps: 12000, video("h264", 1920, 1080, fps: 30000.0 / 1001), aacEng), .mbps5, ios,
         Expect(size: [1920, 1080], notReasons: ["frame_rate_above_30"])),
    Case("5 Mbps: 1080p at exactly 30 fps keeps its size", media("mp4", kbps: 12000, video("h264", 1920, 1080, fps: 30), aacEng), .mbps5, ios,
         Expect(size: [1920, 1080])),
    Case("5 Mbps: 1080p at 50 fps steps down", media("mkv", kbps: 12000, video("h264", 1920, 1080, fps: 50), aacEng), .mbps5, ios,
         Expect(size: [1280, 720])),
    Case("2 Mbps: 720p60 steps down to 480p", media("mp4", kbps: 6000, video("h264", 1280, 720, fps: 60), aacEng), .mbps2, ios,
         Expect(size: [854, 480], reasons: ["frame_rate_above_30"])),
    Case("1 Mbps: 480p60 cannot step below 480p", media("mp4", kbps: 3000, video("h264", 854, 480, fps: 60), aacEng), .mbps1, ios,
         Expect(size: [854, 480], level: "3.1", notReasons: ["frame_rate_above_30"])),
    Case("20 Mbps: 1080p120 is encoded at 60 fps, in 1080p (the rung has the bits for both), at level 4.2",
         media("mp4", kbps: 40000, video("h264", 1920, 1080, fps: 120), aacEng), .mbps20, ios,
         Expect(size: [1920, 1080], level: "4.2", fps: 60, reasons: ["frame_rate_reduced"], notReasons: ["frame_rate_above_30"])),
    Case("20 Mbps: 1080p60 keeps its size: 19 Mbit/s is twice the least the ladder gives 1080p (4.7), enough for twice the pictures",
         media("mkv", kbps: 40000, video("h264", 1920, 1080, fps: 60), aacEng), .mbps20, ios,
         Expect(delivery: .transcode, size: [1920, 1080], level: "4.2", notReasons: ["frame_rate_above_30"])),
    Case("10 Mbps: 1080p60 steps down to 720p (9.2 Mbit/s is less than twice 4.7)",
         media("mkv", kbps: 40000, video("h264", 1920, 1080, fps: 60), aacEng), .mbps10, ios,
         Expect(delivery: .transcode, size: [1280, 720], reasons: ["frame_rate_above_30"])),
    Case("20 Mbps: 1080p60 for a device of level 4.1 steps down after all, as 4.1 holds 1080p at 30 only",
         media("mkv", kbps: 40000, video("h264", 1920, 1080, fps: 60), aacEng), .mbps20,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 41),
         Expect(delivery: .transcode, size: [1280, 720], level: "4.1", reasons: ["resolution_reduced_for_level"])),
    Case("20 Mbps: 23.976 fps is left alone", media("mp4", kbps: 40000, video("h264", 1920, 1080, fps: 24000.0 / 1001), aacEng), .mbps20, ios,
         Expect(size: [1920, 1080], level: "4.1")),
    Case("5 Mbps: 1921x1081 is fitted and made even", media("mkv", kbps: 9000, video("h264", 1921, 1081), aacEng), .mbps5, ios,
         Expect(size: [1920, 1080])),
    Case("20 Mbps: a tiny 176x144 source is never upscaled", media("3gp", kbps: 25000, video("h263", 176, 144), audio("amr_nb", ch: 1, kbps: 12)), .mbps20, ios,
         Expect(delivery: .transcode, size: [176, 144])),
    Case("20 Mbps: odd 175x143 becomes even 174x142", media("mkv", kbps: 25000, video("h264", 175, 143), aacEng), .mbps20, ios,
         Expect(size: [174, 142])),
    Case("5 Mbps: a 90-degree source is transcoded upright", media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: 90), aacEng), .mbps5, ios,
         Expect(size: [1080, 1920], rotation: 90, reasons: ["rotation_applied"])),
    Case("2 Mbps: a 90-degree 1080p source becomes 720x1280", media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: 90), aacEng), .mbps2, ios,
         Expect(size: [720, 1280], rotation: 90)),
    Case("5 Mbps: a 270-degree source is transcoded upright", media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: 270), aacEng), .mbps5, ios,
         Expect(size: [1080, 1920], rotation: 270)),
    Case("5 Mbps: a 180-degree source keeps its shape", media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: 180), aacEng), .mbps5, ios,
         Expect(size: [1920, 1080], rotation: 180)),
    Case("5 Mbps: -90 degrees folds to 270", media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: -90), aacEng), .mbps5, ios,
         Expect(size: [1080, 1920], rotation: 270)),
    Case("5 Mbps: a fitting rotated source is copied with its matrix", media("mp4", kbps: 4000, video("h264", 1920, 1080, rotation: 90), aacEng), .mbps5, ios,
         Expect(delivery: .original, video: .copy, size: [1920, 1080], rotation: 90)),
    Case("2 Mbps: a portrait 1080x1920 is fitted by its long side", media("mp4", kbps: 8000, video("h264", 1080, 1920), aacEng), .mbps2, ios,
         Expect(size: [720, 1280])),
    Case("5 Mbps: anamorphic DVD 16:9 is made square keeping its 480 lines", media("mkv", kbps: 8000, video("mpeg2video", 720, 480, sar: Rational(32, 27)), audio("ac3", ch: 6, kbps: 448)), .mbps5, ios,
         Expect(size: [854, 480], reasons: ["anamorphic_made_square"])),
    Case("5 Mbps: anamorphic DVD 4:3 is made square", media("mkv", kbps: 8000, video("mpeg2video", 720, 480, sar: Rational(8, 9)), audio("ac3", ch: 2, kbps: 192)), .mbps5, ios,
         Expect(size: [640, 480])),
    Case("5 Mbps: HDV 1440x1080 at 4:3 pixels shows as 1920x1080", media("ts", kbps: 25000, video("h264", 1440, 1080, sar: Rational(4, 3)), audio("mp2", kbps: 384)), .mbps5, ios,
         Expect(size: [1920, 1080])),
    Case("2 Mbps: HDV 1440x1080 at 4:3 pixels fits 720p by its display size", media("ts", kbps: 25000, video("h264", 1440, 1080, sar: Rational(4, 3)), audio("mp2", kbps: 384)), .mbps2, ios,
         Expect(size: [1280, 720])),
    Case("1 Mbps: anamorphic DVD 16:9 fits the 480p box", media("mkv", kbps: 8000, video("mpeg2video", 720, 480, sar: Rational(32, 27)), audio("ac3", ch: 6, kbps: 448)), .mbps1, ios,
         Expect(size: [854, 480])),
    Case("5 Mbps: anamorphic PAL 16:9 keeps its 576 lines", media("mkv", kbps: 8000, video("mpeg2video", 720, 576, sar: Rational(64, 45)), audio("ac3", ch: 2, kbps: 192)), .mbps5, ios,
         Expect(size: [1024, 576])),
    Case("10 Mbps: 1080i MPEG-2 is deinterlaced", media("ts", kbps: 18000, video("mpeg2video", 1920, 1080, fps: 29.97, field: .tt), audio("ac3", ch: 6, kbps: 448)), .mbps10, ios,
         Expect(deinterlace: true, reasons: ["deinterlaced"])),
    Case("5 Mbps: bottom-field-first H.264 is deinterlaced", media("ts", kbps: 12000, video("h264", 1920, 1080, field: .bb), aacEng), .mbps5, ios,
         Expect(deinterlace: true)),
    Case("5 Mbps: progressive is not deinterlaced", media("mp4", kbps: 12000, h1080, aacEng), .mbps5, ios,
         Expect(deinterlace: false, notReasons: ["deinterlaced"])),
    Case("10 Mbps: HDR10 to iOS is tone-mapped", media("mp4", kbps: 8000, hdr10(), aacEng), .mbps10, ios,
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported", "hdr_tone_mapped"])),
    Case("10 Mbps: fitting HDR10 to Apple TV stays HDR", media("mp4", kbps: 8000, hdr10(), aacEng), .mbps10, atv,
         Expect(delivery: .original, toneMap: false)),
    Case("10 Mbps: HDR10 above the rung to an HDR device is still tone-mapped (H.264 SDR out)", media("mp4", kbps: 15000, hdr10(), aacEng), .mbps10, atv,
         Expect(delivery: .transcode, toneMap: true, reasons: ["bitrate_above_target"])),
    Case("10 Mbps: Dolby Vision 5 to an HDR TV without DV is tone-mapped to H.264", media("mp4", kbps: 8000, dolbyVision(profile: 5, compat: 0), aacEng), .mbps10, androidTV,
         Expect(delivery: .transcode, toneMap: true, reasons: ["dolby_vision_unsupported"])),
    Case("10 Mbps: Dolby Vision 5 fits Apple TV 4K", media("mp4", kbps: 8000, dolbyVision(profile: 5, compat: 0), aacEng), .mbps10, atv,
         Expect(delivery: .original)),
    Case("10 Mbps: Dolby Vision 8.1 in Matroska fits an HDR TV", media("mkv", kbps: 8000, dolbyVision(profile: 8, compat: 1), aacEng), .mbps10, androidTV,
         Expect(delivery: .original)),
    Case("5 Mbps: HLG to a browser is tone-mapped", media("mp4", kbps: 4000, hlg(), aacEng), .mbps5, web,
         Expect(delivery: .transcode, toneMap: true)),
    Case("5 Mbps: H.264 High 10 that fits the bitrate is still transcoded", media("mp4", kbps: 3000, video("h264", 1920, 1080, pix: "yuv420p10le", profile: "High 10"), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("5 Mbps: HEVC Main 10 SDR fits iOS", media("mp4", kbps: 3000, video("hevc", 1920, 1080, pix: "yuv420p10le", profile: "Main 10"), aacEng), .mbps5, ios,
         Expect(delivery: .original)),
    Case("5 Mbps: HEVC 4:2:2 is not playable", media("mp4", kbps: 3000, video("hevc", 1920, 1080, pix: "yuv422p10le"), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("5 Mbps: HEVC 12-bit is not playable", media("mp4", kbps: 3000, video("hevc", 1920, 1080, pix: "yuv420p12le"), aacEng), .mbps5, atv,
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("5 Mbps: AV1 in MP4 fits a browser", media("mp4", kbps: 3000, video("av1", 1920, 1080), audio("opus", kbps: 128)), .mbps5, web,
         Expect(delivery: .original)),
    Case("5 Mbps: AV1 to iOS is transcoded", media("mp4", kbps: 3000, video("av1", 1920, 1080), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["video_codec_unsupported"])),
    Case("5 Mbps: VP9 in WebM fits Android", media("webm", kbps: 3000, video("vp9", 1920, 1080), audio("opus", kbps: 128)), .mbps5, android,
         Expect(delivery: .original)),
    Case("5 Mbps: a 720p device caps a 1080p rung", media("mp4", kbps: 8000, h1080, aacEng), .mbps5,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p720), Expect(size: [1280, 720])),
    Case("20 Mbps: a 480p device gets 854x480", media("mp4", kbps: 30000, h1080, aacEng), .mbps20,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p480), Expect(size: [854, 480])),
    Case("5 Mbps: transcoding disabled but the source fits", media("mp4", kbps: 4000, h1080, aacEng), .mbps5, ios, policy: noTranscode,
         Expect(delivery: .original)),
    Case("5 Mbps: transcoding disabled and the source is above the rung", media("mp4", kbps: 8000, h1080, aacEng), .mbps5, ios, policy: noTranscode,
         Expect(error: .transcodeDisabled)),
    Case("5 Mbps: no caps means the baseline device", media("mkv", kbps: 3000, video("hevc", 1920, 1080), aacEng), .mbps5, nil,
         Expect(delivery: .transcode, reasons: ["video_codec_unsupported"])),
    Case("5 Mbps: no caps and a baseline MP4 that fits", media("mp4", kbps: 3000, h1080, aacEng), .mbps5, nil,
         Expect(delivery: .original)),
    Case("5 Mbps: nothing to deliver (fonts alone) is unsupported media: no quality or device would play it (it was quality_unavailable)",
         media("mkv", StreamInfo(index: 0, type: .attachment, codec: "ttf")), .mbps5, ios, Expect(error: .sourceUnsupported)),
    Case("original: subtitles alone (an .ass file) are unsupported media, not a quality unavailable",
         media("ass", subtitle("ass", index: 0)), .original, ios, Expect(error: .sourceUnsupported)),
    Case("5 Mbps: a device that plays no H.264", media("mp4", kbps: 9000, h1080, aacEng), .mbps5,
         DeviceCaps(codecsVideo: ["hevc"], codecsAudio: ["aac"], containers: ["mp4"]), Expect(error: .qualityUnavailable)),
    Case("5 Mbps: video frame size unknown is the source's damage", media("mp4", kbps: 9000, StreamInfo(index: 0, type: .video, codec: "h264"), aacEng), .mbps5, ios,
         Expect(error: .sourceCorrupt)),
    Case("5 Mbps: video-only source has no audio plan", media("mp4", kbps: 9000, h1080), .mbps5, ios,
         Expect(delivery: .transcode, noAudio: true)),
    Case("5 Mbps: video-only source that fits", media("webm", kbps: 900, video("vp9", 426, 240, pix: "yuv420p10le", profile: "Profile 2")), .mbps5, web,
         Expect(delivery: .original, noAudio: true)),
]

// MARK: audio-only sources at rungs

let audioOnlyCases: [Case] = [
    Case("1 Mbps: audio-only DTS-HD is re-encoded as a transcode", media("mkv", kbps: 3000, audio("dts", ch: 8, index: 0, kbps: nil)), .mbps1, ios,
         Expect(delivery: .transcode, effective: .mbps1, noVideo: true, audio: .transcode, audioCodec: "aac", channels: 2, audioKbps: 96)),
    Case("20 Mbps: audio-only DTS-HD keeps 5.1 as E-AC-3 on iOS", media("mkv", kbps: 3000, audio("dts", ch: 8, index: 0, kbps: nil)), .mbps20, ios,
         Expect(delivery: .transcode, audioCodec: "eac3", channels: 6, audioKbps: 640, reasons: ["audio_codec_unsupported", "audio_channels_reduced"])),
    Case("1 Mbps: audio-only AAC in MP4 fits", media("mp4", kbps: 130, audio("aac", index: 0, kbps: 128)), .mbps1, ios,
         Expect(delivery: .original, reasons: ["source_fits_target"])),
    Case("1 Mbps: audio-only FLAC at 900 kbps fits iOS", media("mp4", kbps: 900, audio("flac", index: 0, kbps: 900)), .mbps1, ios,
         Expect(delivery: .original)),
    Case("1 Mbps: audio-only FLAC at 1200 kbps is re-encoded", media("mp4", kbps: 1200, audio("flac", index: 0, kbps: 1200)), .mbps1, ios,
         Expect(delivery: .transcode, audioCodec: "aac", reasons: ["bitrate_above_target"])),
    Case("1 Mbps: audio-only E-AC-3 in Matroska is remuxed for iOS", media("mkv", kbps: 400, audio("eac3", ch: 6, index: 0, kbps: 384)), .mbps1, ios,
         Expect(delivery: .remux, audio: .copy, audioCodec: "eac3")),
    Case("5 Mbps: audio-only with transcoding disabled", media("mkv", kbps: 3000, audio("dts", ch: 6, index: 0)), .mbps5, ios, policy: noTranscode,
         Expect(error: .transcodeDisabled)),
]

// MARK: audio track choice and audio targets

let choiceSource = media("mkv", kbps: 30000, h1080,
                         audio("ac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 448),
                         audio("aac", ch: 2, index: 2, lang: "fre", kbps: 160),
                         audio("aac", ch: 2, index: 3, lang: "eng", kbps: 128, commentary: true))

let audioCases: [Case] = [
    Case("audio: the requested language wins (ISO 639-2/B)", choiceSource, .mbps20, ios, language: "fre",
         Expect(audioIndex: 2, reasons: ["audio_language_matched"])),
    Case("audio: the requested language wins (ISO 639-1)", choiceSource, .mbps20, ios, language: "fr",
         Expect(audioIndex: 2)),
    Case("audio: the requested language wins (BCP 47)", choiceSource, .mbps20, ios, language: "fr-CA",
         Expect(audioIndex: 2)),
    Case("audio: a missing language falls back to the default track", choiceSource, .mbps20, ios, language: "de",
         Expect(audioIndex: 1, reasons: ["audio_language_unavailable"])),
    Case("audio: a code no language has is said unavailable too, and the default track goes", choiceSource, .mbps20, ios, language: "xx",
         Expect(audioIndex: 1, reasons: ["audio_language_unavailable"])),
    Case("audio: no preference takes the default track", choiceSource, .mbps20, ios,
         Expect(audioIndex: 1, audio: .copy, audioCodec: "ac3", channels: 6)),
    Case("audio: never the commentary when a main track exists", media("mkv", kbps: 30000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: false), audio("aac", index: 2, lang: "eng", isDefault: true, commentary: true)), .mbps20, ios,
         Expect(audioIndex: 1)),
    Case("audio: never audio description when a main track exists", media("mkv", kbps: 30000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true, described: true), audio("aac", index: 2, lang: "eng")), .mbps20, ios,
         Expect(audioIndex: 2)),
    Case("audio: a commentary by title only is skipped too", media("mkv", kbps: 30000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true, title: "Director's Commentary"), audio("aac", index: 2, lang: "eng")), .mbps20, ios,
         Expect(audioIndex: 2)),
    Case("audio: the commentary is taken when it is all there is", media("mkv", kbps: 30000, h1080,
         audio("aac", index: 1, lang: "eng", commentary: true)), .mbps20, ios, Expect(audioIndex: 1)),
    Case("audio: the requested language even if only a commentary has it is not chosen over main tracks", media("mkv", kbps: 30000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true), audio("aac", index: 2, lang: "spa", commentary: true)), .mbps20, ios, language: "spa",
         Expect(audioIndex: 1, reasons: ["audio_language_unavailable"])),
    Case("audio: an unflagged mono track does not stand in for the film's DTS 5.1 beside a commentary default (the 5.1 is re-encoded)",
         media("mkv", kbps: 30000, h1080,
               audio("aac", ch: 2, index: 1, lang: "eng", isDefault: true, kbps: 128, commentary: true),
               audio("aac", ch: 1, index: 2, lang: "eng", kbps: 96), audio("dts", ch: 6, index: 3, lang: "eng", kbps: 1509)), .mbps20, ios,
         Expect(audioIndex: 3, audio: .transcode)),
    Case("audio: a mono track flagged default is the sound, though a 5.1 is there (a classic film's original mix)",
         media("mkv", kbps: 30000, h1080,
               audio("aac", ch: 1, index: 1, lang: "eng", isDefault: true, kbps: 96), audio("dts", ch: 6, index: 2, lang: "eng", kbps: 1509)), .mbps20, ios,
         Expect(audioIndex: 1, audio: .copy)),
    Case("audio: among equals, the track the device plays wins", media("mkv", kbps: 30000, h1080,
         audio("dts", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 1509), audio("ac3", ch: 6, index: 2, lang: "eng", kbps: 448)), .original, ios,
         Expect(delivery: .remux, audioIndex: 2, audio: .copy, audioCodec: "ac3")),
    Case("audio: another language's playable track does not beat the default language", media("mkv", kbps: 30000, h1080,
         audio("dts", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 1509), audio("aac", index: 2, lang: "fre")), .original, ios,
         Expect(audioIndex: 1, audio: .transcode, audioCodec: "eac3")),
    Case("audio: two undetermined tracks, Android takes the AAC over the AC-3, alone (a player starts with the default track)", media("mp4", kbps: 600,
         audio("ac3", ch: 6, index: 0, lang: "und", isDefault: true, kbps: 384), audio("aac", index: 1, lang: "und", kbps: 192)), .original, android,
         Expect(delivery: .remux, audioIndex: 1, audio: .copy, reasons: ["audio_track_not_default"])),
    Case("audio: a language asked for on a track that is not the default is a remux with that track, not the file as it is", media("mkv", kbps: 3000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true), audio("aac", index: 2, lang: "ger")), .mbps5, android, language: "deu",
         Expect(delivery: .remux, audioIndex: 2, audio: .copy, reasons: ["audio_language_matched", "audio_track_not_default"])),
    Case("audio: the default track asked for goes as it is", media("mkv", kbps: 3000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true), audio("aac", index: 2, lang: "ger")), .mbps5, android, language: "eng",
         Expect(delivery: .original, audioIndex: 1)),
    Case("audio: in place of an unplayable default, the playable copy of its mix (AC-3 5.1 beside TrueHD 5.1) before a stereo track listed first", media("mkv", kbps: 30000, h1080,
         audio("truehd", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 3000), audio("aac", ch: 2, index: 2, lang: "eng", kbps: 160),
         audio("ac3", ch: 6, index: 3, lang: "eng", kbps: 640)), .original, atv,
         Expect(delivery: .remux, audioIndex: 3, audio: .copy, audioCodec: "ac3")),
    Case("audio: at a rung, a track copied within its audio budget before one re-encoded (stereo AAC 160, not AC-3 5.1 640 downmixed)", media("mkv", kbps: 30000, h1080,
         audio("truehd", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 3000), audio("aac", ch: 2, index: 2, lang: "eng", kbps: 160),
         audio("ac3", ch: 6, index: 3, lang: "eng", kbps: 640)), .mbps5, atv,
         Expect(delivery: .transcode, audioIndex: 2, audio: .copy)),
    Case("audio: 5.1 AC-3 448 fits the 20 Mbps surround budget and is copied", media("mkv", kbps: 30000, h1080, audio("ac3", ch: 6, kbps: 448)), .mbps20, ios,
         Expect(delivery: .transcode, audio: .copy, audioCodec: "ac3", channels: 6)),
    Case("audio: 5.1 DTS at 20 Mbps to iOS becomes E-AC-3 5.1 640", media("mkv", kbps: 30000, h1080, audio("dts", ch: 6, kbps: 1509)), .mbps20, ios,
         Expect(audio: .transcode, audioCodec: "eac3", channels: 6, audioKbps: 640)),
    Case("audio: 5.1 DTS at 10 Mbps to a device with AC-3 only becomes AC-3", media("mkv", kbps: 30000, h1080, audio("dts", ch: 6, kbps: 1509)), .mbps10,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"]),
         Expect(audioCodec: "ac3", channels: 6, audioKbps: 640)),
    Case("audio: 5.1 passthrough-only E-AC-3 counts as playable", media("mkv", kbps: 30000, h1080, audio("dts", ch: 6, kbps: 1509)), .mbps10,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], audioPassthroughCodecs: ["eac3"], containers: ["mp4"]),
         Expect(audioCodec: "eac3", channels: 6)),
    Case("audio: 5.1 AC-3 at 5 Mbps is downmixed to AAC stereo 160", media("mkv", kbps: 30000, h1080, audio("ac3", ch: 6, kbps: 448)), .mbps5, ios,
         Expect(audio: .transcode, audioCodec: "aac", channels: 2, audioKbps: 160, reasons: ["audio_bitrate_above_target", "audio_channels_reduced"])),
    Case("audio: 5.1 AC-3 at 20 Mbps to Android (no AC-3) is AAC stereo 192", media("mkv", kbps: 30000, h1080, audio("ac3", ch: 6, kbps: 448)), .mbps20, android,
         Expect(audioCodec: "aac", channels: 2, audioKbps: 192, reasons: ["audio_codec_unsupported"])),
    Case("audio: 7.1 E-AC-3 at 20 Mbps is re-encoded to 5.1", media("mkv", kbps: 30000, h1080, audio("eac3", ch: 8, kbps: 1024)), .mbps20, ios,
         Expect(audioCodec: "eac3", channels: 6, audioKbps: 640)),
    Case("audio: 3.0 and 5.0 DTS at 20 Mbps to iOS become E-AC-3 at their share of 5.1's 640, on AC-3's bitrates (3.0 had been 640)",
         media("mkv", kbps: 30000, h1080, audio("dts", ch: 3, kbps: 768)), .mbps20, ios,
         Expect(audio: .transcode, audioCodec: "eac3", channels: 3, audioKbps: 320)),
    Case("audio: 5.0 DTS at 20 Mbps to iOS", media("mkv", kbps: 30000, h1080, audio("dts", ch: 5, kbps: 1280)), .mbps20, ios,
         Expect(audio: .transcode, audioCodec: "eac3", channels: 5, audioKbps: 512)),
    Case("audio: AAC 128 at 2 Mbps is copied", media("mp4", kbps: 6000, h1080, audio("aac", kbps: 128)), .mbps2, ios,
         Expect(audio: .copy, audioCodec: "aac")),
    Case("audio: AAC 256 at 2 Mbps is re-encoded to 128", media("mp4", kbps: 6000, h1080, audio("aac", kbps: 256)), .mbps2, ios,
         Expect(audio: .transcode, audioKbps: 128, reasons: ["audio_bitrate_above_target"])),
    Case("audio: AAC of unknown bitrate at 1 Mbps is re-encoded", media("mkv", kbps: 6000, h1080, audio("aac", kbps: nil)), .mbps1, ios,
         Expect(audio: .transcode, audioKbps: 96, reasons: ["audio_bitrate_unknown"])),
    Case("audio: mono AAC 64 at 1 Mbps becomes mono 48", media("mp4", kbps: 6000, h1080, audio("aac", ch: 1, kbps: 64)), .mbps1, ios,
         Expect(audio: .transcode, channels: 1, audioKbps: 48)),
    Case("audio: mono AAC 32 at 1 Mbps is copied", media("mp4", kbps: 6000, h1080, audio("aac", ch: 1, kbps: 32)), .mbps1, ios,
         Expect(audio: .copy, channels: 1)),
    Case("audio: Vorbis cannot go into MP4 even for a device that plays it", media("webm", kbps: 6000, video("vp9", 1920, 1080), audio("vorbis", kbps: 128)), .mbps5, android,
         Expect(audio: .transcode, audioCodec: "aac", reasons: ["audio_codec_unsupported_in_mp4"])),
    Case("audio: the language tag of the chosen track is kept", choiceSource, .mbps5, ios, language: "fra",
         Expect(audioIndex: 2, audioCodec: "aac")),
]

// MARK: subtitles

let subtitleCases: [Case] = [
    Case("subtitles: SRT is converted, PGS (in another language than the sound) dropped", media("mkv", kbps: 8000, h1080, aacEng, subtitle("subrip", index: 2), subtitle("hdmv_pgs_subtitle", index: 3, lang: "ger")), .mbps5, ios,
         Expect(subtitles: [.convert, .drop], reasons: ["subtitle_bitmap"])),
    Case("subtitles: forced flag and language are kept", media("mkv", kbps: 8000, h1080, aacEng, subtitle("ass", index: 2, lang: "jpn", forced: true)), .mbps5, ios,
         Expect(subtitles: [.convert])),
    Case("subtitles: mov_text stays text in a remux", media("mov", kbps: 3000, h1080, aacEng, subtitle("mov_text", index: 2)), .mbps5, ios,
         Expect(delivery: .original)),
    Case("subtitles: text flag from the probe wins over the codec name", media("mkv", kbps: 8000, h1080, aacEng, subtitle("webvtt", index: 2, text: true), subtitle("dvd_subtitle", index: 3, lang: "ger", text: false)), .mbps5, ios,
         Expect(subtitles: [.convert, .drop])),
    Case("subtitles: an unknown codec is dropped as unsupported", media("mkv", kbps: 8000, h1080, aacEng, subtitle("arib_caption", index: 2)), .mbps5, ios,
         Expect(subtitles: [.drop], reasons: ["subtitle_unsupported"])),
    Case("subtitles: a QuickTime caption track (c608) is converted", media("mov", kbps: 8000, h1080, aacEng, subtitle("eia_608", index: 2)), .mbps5, ios,
         Expect(subtitles: [.convert], notReasons: ["subtitle_unsupported"])),
    Case("subtitles: text nothing here decodes (Blu-ray TextST, ARIB captions) is dropped, not converted and failed on", media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_text_subtitle", index: 2, text: true), subtitle("arib_caption", index: 3, text: true), subtitle("subrip", index: 4, text: true)), .mbps5, ios,
         Expect(subtitles: [.drop, .drop, .convert], reasons: ["subtitle_unsupported"])),
    Case("subtitles: TTML in MP4 (IMSC, EBU-TT-D; the engine reads it) is converted (it was dropped)", media("mp4", kbps: 8000, h1080, aacEng, subtitle("ttml", index: 2, text: true)), .mbps5, ios,
         Expect(subtitles: [.convert], notReasons: ["subtitle_unsupported"])),
    Case("subtitles: DVB teletext (a broadcast's subtitle page) is converted, DVB bitmaps dropped", media("ts", kbps: 8000, h1080, aacEng, subtitle("dvb_teletext", index: 2), subtitle("dvb_subtitle", index: 3)), .mbps5, ios,
         Expect(subtitles: [.convert, .drop], reasons: ["subtitle_bitmap"])),
    Case("subtitles: a teletext stream makes a track of each subtitle page, in its page's language", media("ts", kbps: 8000, h1080, aacEng, teletext(index: 2, [("888", "swe", false), ("777", "fin", false), ("889", "swe", true)])), .mbps5, ios,
         Expect(subtitles: [.convert, .convert, .convert], subtitleLanguages: ["swe", "fin", "swe"])),
    Case("subtitles: a teletext stream whose map lists no subtitle page makes no track", media("ts", kbps: 8000, h1080, aacEng, teletext(index: 2, [])), .mbps5, ios,
         Expect(subtitles: [.drop], reasons: ["teletext_without_subtitles"])),
    Case("forced bitmap subtitles (dialogue in another language, signs) are burnt into a re-encoded picture; the full track is still dropped",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2), subtitle("hdmv_pgs_subtitle", index: 3, forced: true)), .mbps5, ios,
         Expect(delivery: .transcode, subtitles: [.drop, .burn], burnsForcedOnly: false, reasons: ["forced_subtitles_burned_in", "subtitle_bitmap"])),
    Case("forced bitmap subtitles: a track titled Forced counts (rips leave the flag unset); DVD and DVB pictures too",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("dvd_subtitle", index: 2, title: "English (Forced)")), .mbps5, ios,
         Expect(subtitles: [.burn], reasons: ["forced_subtitles_burned_in"])),
    Case("forced bitmap subtitles: the track in the sound's language is burnt, not the first one",
         media("mkv", kbps: 8000, h1080, aacEng, audio("ac3", ch: 2, index: 2, lang: "fre"), subtitle("hdmv_pgs_subtitle", index: 3, lang: "eng", forced: true),
               subtitle("hdmv_pgs_subtitle", index: 4, lang: "fre", forced: true)), .mbps5, ios, language: "fra",
         Expect(audioIndex: 2, subtitles: [.drop, .burn], subtitleLanguages: ["eng", "fra"])),
    Case("forced bitmap subtitles in another language than the sound are not burnt (a dub speaks those lines)",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, lang: "ger", forced: true)), .mbps5, ios,
         Expect(subtitles: [.drop], reasons: ["subtitle_bitmap"], notReasons: ["forced_subtitles_burned_in"])),
    Case("forced bitmap subtitles are not burnt where the picture is copied (a remux)",
         media("mkv", kbps: 3000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, forced: true)), .mbps5, ios,
         Expect(delivery: .remux, subtitles: [.drop], reasons: ["subtitle_bitmap"])),
    Case("forced bitmap subtitles are not burnt into a rotated picture (its canvas is not upright)",
         media("mp4", kbps: 8000, video("h264", 1920, 1080, rotation: 90), aacEng, subtitle("dvb_subtitle", index: 2, forced: true)), .mbps5, ios,
         Expect(delivery: .transcode, subtitles: [.drop])),
    Case("forced bitmap subtitles: a full track titled Non-Forced is not taken for a forced one (only its forced display sets are painted)",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, title: "English (Non-Forced)")), .mbps5, ios,
         Expect(subtitles: [.burn], burnsForcedOnly: true)),
    Case("forced display sets: a full PGS track in the sound's language is burnt in for the display sets the disc flags forced (most rips keep no forced track of their own)",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2)), .mbps5, ios,
         Expect(delivery: .transcode, subtitles: [.burn], burnsForcedOnly: true, reasons: ["forced_subtitles_burned_in"], notReasons: ["subtitle_bitmap"])),
    Case("forced display sets: a forced track in another language does not stand in the way of the sound's own full DVD track",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("dvd_subtitle", index: 2, lang: "ger", forced: true), subtitle("dvd_subtitle", index: 3)), .mbps5, ios,
         Expect(subtitles: [.drop, .burn], burnsForcedOnly: true)),
    Case("forced display sets: the film's own full track before its hearing-impaired one, never a commentary",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, commentary: true),
               subtitle("hdmv_pgs_subtitle", index: 3, hearingImpaired: true), subtitle("hdmv_pgs_subtitle", index: 4)), .mbps5, ios,
         Expect(subtitles: [.drop, .drop, .burn], burnsForcedOnly: true)),
    Case("forced display sets: a hearing-impaired track when it is the only one, but not a commentary",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, commentary: true),
               subtitle("hdmv_pgs_subtitle", index: 3, hearingImpaired: true)), .mbps5, ios,
         Expect(subtitles: [.drop, .burn], burnsForcedOnly: true)),
    Case("forced display sets: a full track in another language than the sound is left out (its forced lines translate another dub)",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, lang: "ger")), .mbps5, ios,
         Expect(subtitles: [.drop], reasons: ["subtitle_bitmap"], notReasons: ["forced_subtitles_burned_in"])),
    Case("forced display sets: DVB and XSUB display sets cannot say they are forced, so their full tracks are left out",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("dvb_subtitle", index: 2), subtitle("xsub", index: 3)), .mbps5, ios,
         Expect(subtitles: [.drop, .drop], notReasons: ["forced_subtitles_burned_in"])),
    Case("forced display sets: nothing is burnt into a remux",
         media("mkv", kbps: 3000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2)), .mbps5, ios,
         Expect(delivery: .remux, subtitles: [.drop], reasons: ["subtitle_bitmap"])),
    Case("forced bitmap subtitles: a flagged track wins over one only titled so",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("hdmv_pgs_subtitle", index: 2, title: "Forced"), subtitle("hdmv_pgs_subtitle", index: 3, forced: true)), .mbps5, ios,
         Expect(subtitles: [.drop, .burn])),
    Case("forced bitmap subtitles are not burnt beside a forced text track in the same language (the lines would show twice)",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("subrip", index: 2, forced: true), subtitle("hdmv_pgs_subtitle", index: 3, forced: true)), .mbps5, ios,
         Expect(subtitles: [.convert, .drop], notReasons: ["forced_subtitles_burned_in"])),
    Case("forced bitmap subtitles: an untagged sound takes an untagged forced track, not a German one",
         media("mkv", kbps: 8000, h1080, audio("aac", ch: 2, index: 1, lang: nil, isDefault: true, kbps: 128),
               subtitle("hdmv_pgs_subtitle", index: 2, lang: "ger", forced: true), subtitle("hdmv_pgs_subtitle", index: 3, lang: nil, forced: true)), .mbps5, ios,
         Expect(subtitles: [.drop, .burn])),
    Case("forced bitmap subtitles: an untagged sound takes the only forced track there is",
         media("mkv", kbps: 8000, h1080, audio("aac", ch: 2, index: 1, lang: nil, isDefault: true, kbps: 128),
               subtitle("hdmv_pgs_subtitle", index: 2, lang: "ger", forced: true)), .mbps5, ios,
         Expect(subtitles: [.burn])),
    Case("forced bitmap subtitles: an untagged sound among forced tracks in several languages takes none",
         media("mkv", kbps: 8000, h1080, audio("aac", ch: 2, index: 1, lang: nil, isDefault: true, kbps: 128),
               subtitle("hdmv_pgs_subtitle", index: 2, lang: "ger", forced: true), subtitle("hdmv_pgs_subtitle", index: 3, lang: "fre", forced: true)), .mbps5, ios,
         Expect(subtitles: [.drop, .drop], notReasons: ["forced_subtitles_burned_in"])),
    Case("forced text subtitles stay a text track (flagged forced), not burnt",
         media("mkv", kbps: 8000, h1080, aacEng, subtitle("subrip", index: 2, forced: true)), .mbps5, ios,
         Expect(subtitles: [.convert], notReasons: ["forced_subtitles_burned_in"])),
    Case("subtitles: the plan names languages as MP4 does (Matroska's ger is deu)", media("mkv", kbps: 8000, h1080, aacEng, subtitle("subrip", index: 2, lang: "ger")), .mbps5, ios,
         Expect(subtitles: [.convert], subtitleLanguages: ["deu"])),
    Case("closed captions in the pictures become a text track in the sound's language, after the subtitle streams", media("ts", kbps: 8000, captioned(h1080), aacEng, subtitle("subrip", index: 2, lang: "spa")), .mbps5, ios,
         Expect(delivery: .transcode, subtitles: [.convert, .convert], subtitleLanguages: ["spa", "eng"], reasons: ["closed_captions_converted"])),
    Case("closed captions in the pictures are not made a second time beside the file's own caption track (c608)", media("mov", kbps: 8000, captioned(h1080), aacEng, subtitle("eia_608", index: 2)), .mbps5, ios,
         Expect(subtitles: [.convert], notReasons: ["closed_captions_converted"])),
    Case("closed captions keep the programme's main language when the device asks for the second audio programme", media("ts", kbps: 8000, captioned(h1080), aacEng, audio("ac3", ch: 2, index: 2, lang: "spa")), .mbps5, ios, language: "spa",
         Expect(audioIndex: 2, subtitleLanguages: ["eng"], reasons: ["closed_captions_converted"])),
    Case("closed captions: CC1 in the main sound's language and CC3 in the second audio programme's, each a track", media("ts", kbps: 8000, captioned(h1080, services: ["CC1", "CC3"]), aacEng, audio("ac3", ch: 2, index: 2, lang: "spa")), .mbps5, ios,
         Expect(subtitles: [.convert, .convert], subtitleLanguages: ["eng", "spa"], reasons: ["closed_captions_converted"])),
    Case("closed captions: CC3 alone is a track in the second audio programme's language, or none named", media("ts", kbps: 8000, captioned(h1080, services: ["CC3"]), aacEng), .mbps5, ios,
         Expect(subtitles: [.convert], subtitleLanguages: [nil], reasons: ["closed_captions_converted"])),
    Case("closed captions: CEA-708's SERVICE1 in the main sound's language, SERVICE2 in the second audio programme's, each a track", media("ts", kbps: 8000, captioned(h1080, services: ["SERVICE1", "SERVICE2"]), aacEng, audio("ac3", ch: 2, index: 2, lang: "spa")), .mbps5, ios,
         Expect(subtitles: [.convert, .convert], subtitleLanguages: ["eng", "spa"], reasons: ["closed_captions_converted"])),
    Case("a fragmented MP4 the device plays is remuxed (one index at the front: ExoPlayer cannot seek in fragments without a segment index)",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.fragmented = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_fragmented"])),
    Case("an MP4 whose index cannot be the file's (cut short) never goes as it is: the remux and its checks decide",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.indexDamage = "stream 0: past the end"; return m }(), .original, ios,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["source_index_damaged"])),
    Case("the same at a rung the file fits as it is",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.indexDamage = "stream 0: past the end"; return m }(), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["source_fits_target", "source_index_damaged"])),
    Case("an MOV whose index, cut short, took every track with it is refused as damaged, not as a file without sound or pictures (it was quality_unavailable; found by fuzzing)",
         { var m = media("mov"); m.indexDamage = "its index (moov) declares 2048 bytes past the file's end"; return m }(), .mbps2, ios,
         Expect(error: .sourceCorrupt)),
    Case("recordings each with their own header whose picture is coded otherwise in a later one never go as they are, not even where the file fits: the picture is re-encoded (a copy would carry one header's parameter sets over samples of another)",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.streams[0].codingChanges = true; return m }(), .original, ios,
         Expect(delivery: .transcode, reasons: ["video_coding_changes"])),
    Case("the same at a rung the file fits as it is",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.streams[0].codingChanges = true; return m }(), .mbps5, ios,
         Expect(delivery: .transcode, reasons: ["video_coding_changes"])),
    Case("their sound coded otherwise in a later header: the picture copied, the sound re-encoded",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.streams[1].codingChanges = true; return m }(), .original, ios,
         Expect(delivery: .remux, video: .copy, audio: .transcode, reasons: ["audio_coding_changes"])),
    Case("an MP4 whose tracks drift apart in time (a timescale damaged) is refused as it is too: no delivery would play in sync",
         { var m = media("mp4", kbps: 3000, h1080, aacEng); m.timingDamage = "stream 1's times drift 7 s from stream 0's"; return m }(), .original, nil,
         Expect(error: .sourceCorrupt)),
    Case("the same at a rung that would transcode it",
         { var m = media("mp4", kbps: 30000, h1080, aacEng); m.timingDamage = "stream 1's times drift 7 s from stream 0's"; return m }(), .mbps2, ios,
         Expect(error: .sourceCorrupt)),
    Case("a Matroska file without Cues the device plays is remuxed (ExoPlayer cannot seek in it); with them it goes as it is",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.unindexed = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_unindexed"])),
    Case("a Matroska file whose header's length is not its film's is remuxed for a device that plays it (players show that length); the MP4 has the film's",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.durationWrong = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_duration_wrong"])),
    Case("a Matroska file whose laced sound's DefaultDuration is not its frames' length is remuxed for a device that plays it (a player spaces the frames by it); the MP4 times them by their own",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.audioLacingWrong = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_audio_lacing_wrong"])),
    Case("a Matroska file whose clusters are stored out of order is remuxed for a device that plays it (a player reads them as stored); the MP4 has them in order",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.clustersReordered = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_clusters_reordered"])),
    Case("the same at a rung the file fits as it is",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.clustersReordered = true; return m }(), .mbps5, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["source_fits_target", "container_clusters_reordered"])),
    Case("the same with no device named: never as it is",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.clustersReordered = true; return m }(), .original, nil,
         Expect(delivery: .remux, video: .copy, audio: .copy)),
    Case("a WebM of VP8 whose clusters are stored out of order, for a device that plays it: the pictures cannot go into MP4, and the file as it is would play out of order, so it is re-encoded",
         { var m = media("webm", kbps: 1000, video("vp8", 640, 360), audio("opus", index: 1, lang: "eng", isDefault: true)); m.clustersReordered = true; return m }(), .original,
         DeviceCaps(codecsVideo: ["vp8", "h264"], codecsAudio: ["opus", "aac"], containers: ["mkv", "webm", "mp4"]),
         Expect(delivery: .transcode, reasons: ["container_clusters_reordered"])),
    Case("a Matroska file whose clusters have no size inside a Segment that has one is remuxed for a device that plays it (a player built on libavformat leaves the first out); the MP4 has them whole",
         { var m = media("mkv", kbps: 3000, h1080, aacEng); m.clustersUnsized = true; return m }(), .original, android,
         Expect(delivery: .remux, video: .copy, audio: .copy, reasons: ["container_clusters_unsized"])),
    Case("the same where the pictures cannot go into MP4 (VP8): re-encoded, as for clusters out of order",
         { var m = media("webm", kbps: 1000, video("vp8", 640, 360), audio("opus", index: 1, lang: "eng", isDefault: true)); m.clustersUnsized = true; return m }(), .original,
         DeviceCaps(codecsVideo: ["vp8", "h264"], codecsAudio: ["opus", "aac"], containers: ["mkv", "webm", "mp4"]),
         Expect(delivery: .transcode, reasons: ["container_clusters_unsized"])),
    Case("a Matroska file with Cues the device plays goes as it is",
         media("mkv", kbps: 3000, h1080, aacEng), .original, android, Expect(delivery: .original, reasons: ["source_playable"])),
    Case("an encrypted fragmented MP4 still goes as it is: a remux would lose how to decrypt it",
         { var m = media("mp4", kbps: 3000, encrypted(h1080), encrypted(aacEng)); m.fragmented = true; return m }(), .original, android,
         Expect(delivery: .original, notReasons: ["container_fragmented"])),
    Case("a 60 fps picture smaller than the stepped-down class is not said to be made smaller for its rate", media("mkv", kbps: 40000, video("h264", 640, 360, fps: 60), aacEng), .mbps20, ios,
         Expect(delivery: .transcode, size: [640, 360], notReasons: ["frame_rate_above_30"])),
    Case("a language asked for on a track that is not the default, where the picture cannot go into MP4 (VP8): the file as it is, not a transcode", media("mkv", kbps: 1000,
         video("vp8", 640, 360), audio("opus", index: 1, lang: "eng", isDefault: true), audio("opus", index: 2, lang: "ger")), .original,
         DeviceCaps(codecsVideo: ["vp8", "h264"], codecsAudio: ["opus", "aac"], containers: ["mkv", "webm", "mp4"]), language: "deu",
         Expect(delivery: .original, audioIndex: 2)),
    Case("the same at a rung the file fits: as it is", media("mkv", kbps: 1000,
         video("vp8", 640, 360), audio("opus", index: 1, lang: "eng", isDefault: true), audio("opus", index: 2, lang: "ger")), .mbps2,
         DeviceCaps(codecsVideo: ["vp8", "h264"], codecsAudio: ["opus", "aac"], containers: ["mkv", "webm", "mp4"]), language: "deu",
         Expect(delivery: .original, audioIndex: 2)),
    Case("a non-default track asked for, to a device that takes no MP4: the file as it is", media("mkv", kbps: 3000, h1080,
         audio("aac", index: 1, lang: "eng", isDefault: true), audio("aac", index: 2, lang: "ger")), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mkv"]), language: "deu",
         Expect(delivery: .original, audioIndex: 2)),
    Case("closed captions go with a remux too", media("ts", kbps: 3000, captioned(h1080), aacEng), .original, ios,
         Expect(delivery: .remux, video: .copy, subtitles: [.convert], reasons: ["closed_captions_converted"])),
    Case("closed captions stay in a file delivered as it is", media("mp4", kbps: 3000, captioned(h1080), aacEng), .original, ios,
         Expect(delivery: .original, subtitles: [], notReasons: ["closed_captions_converted"])),
    Case("subtitles: a remux converts text and drops bitmaps too", media("mkv", kbps: 3000, h1080, aacEng, subtitle("subrip", index: 2), subtitle("dvb_subtitle", index: 3)), .original, ios,
         Expect(delivery: .remux, subtitles: [.convert, .drop], reasons: ["subtitle_bitmap"])),
]

// MARK: sample entries

/// HEVC in MP4 with its parameter sets in the stream (`hev1`, Dolby Vision `dvhe`): Apple's
/// players refuse it, and a remux (which writes `hvc1`) plays everywhere it would.
func tagged(_ tag: String, _ stream: StreamInfo = video("hevc", 1920, 1080, profile: "Main")) -> StreamInfo {
    var s = stream
    s.codecTag = tag
    return s
}

let sampleEntryCases: [Case] = [
    Case("original: HEVC tagged hev1 in MP4 is remuxed, not sent as it is", media("mp4", kbps: 4000, tagged("hev1"), aacEng), .original, atv,
         Expect(delivery: .remux, effective: .original, video: .copy, audio: .copy, reasons: ["video_tag_unsupported"],
                notReasons: ["source_playable", "container_unsupported"])),
    Case("original: HEVC tagged hvc1 in MP4 goes as it is", media("mp4", kbps: 4000, tagged("hvc1"), aacEng), .original, atv,
         Expect(delivery: .original, video: .copy, reasons: ["source_playable"], notReasons: ["video_tag_unsupported"])),
    Case("original: Dolby Vision tagged dvhe is remuxed too", media("mp4", kbps: 4000, tagged("dvhe", dolbyVision(profile: 8, compat: 1)), aacEng), .original, atv,
         Expect(delivery: .remux, video: .copy, reasons: ["video_tag_unsupported"])),
    Case("5 Mbps: a fitting hev1 MP4 is remuxed", media("mp4", kbps: 4000, tagged("hev1"), aacEng), .mbps5, ios,
         Expect(delivery: .remux, effective: .original, video: .copy, reasons: ["source_fits_target", "video_tag_unsupported"])),
    Case("5 Mbps: a fitting hev1 Matroska is remuxed for its container, the tag noted", media("mkv", kbps: 4000, tagged("hev1"), aacEng), .mbps5, ios,
         Expect(delivery: .remux, reasons: ["container_unsupported", "video_tag_unsupported"])),
    Case("original: hev1 to a device without HEVC is a transcode, and the tag is no reason", media("mp4", kbps: 4000, tagged("hev1"), aacEng), .original, web,
         Expect(delivery: .transcode, video: .transcode, reasons: ["video_codec_unsupported"], notReasons: ["video_tag_unsupported"])),
]

/// A DVB teletext stream whose map lists these subtitle pages (number, language, for the hard of hearing).
func teletext(index: Int, _ pages: [(String, String, Bool)]) -> StreamInfo {
    var s = subtitle("dvb_teletext", index: index, lang: pages.map(\.1).joined(separator: ","))
    s.teletextPages = pages.map { TeletextPage(page: $0.0, language: $0.1, hearingImpaired: $0.2) }
    return s
}

/// `v` with closed captions in its pictures.
func captioned(_ v: StreamInfo, services: [String]? = nil) -> StreamInfo {
    var c = v
    c.closedCaptions = true
    c.captionServices = services
    return c
}

let h1080i = video("h264", 1920, 1080, fps: 25, profile: "High", field: .tt)

let interlacedCases: [Case] = [
    Case("original: a 1080i H.264 recording to iOS is deinterlaced, not remuxed with its fields", media("ts", kbps: 12000, h1080i, aacEng), .original, ios,
         Expect(delivery: .transcode, video: .transcode, deinterlace: true, reasons: ["interlaced_unsupported", "deinterlaced"],
                notReasons: ["source_playable"])),
    Case("original: interlaced H.264 in MP4 to a browser is deinterlaced too", media("mp4", kbps: 12000, h1080i, aacEng), .original, web,
         Expect(delivery: .transcode, deinterlace: true, reasons: ["interlaced_unsupported"])),
    Case("original: a TV box that deinterlaces gets the recording as it is", media("ts", kbps: 12000, h1080i, aacEng), .original, androidTV,
         Expect(delivery: .original, video: .copy, notReasons: ["interlaced_unsupported"])),
    Case("original: caps saying interlaced plays get a remux", media("ts", kbps: 12000, h1080i, aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], interlaced: true),
         Expect(delivery: .remux, video: .copy, notReasons: ["interlaced_unsupported"])),
    Case("original without caps: an unknown device gets the file as it is", media("ts", kbps: 12000, h1080i, aacEng), .original, nil,
         Expect(delivery: .original, video: .copy)),
    Case("5 Mbps: a fitting interlaced H.264 is deinterlaced rather than sent as it is", media("mp4", kbps: 4000, h1080i, aacEng), .mbps5, ios,
         Expect(delivery: .transcode, deinterlace: true, reasons: ["interlaced_unsupported"], notReasons: ["source_fits_target"])),
    Case("5 Mbps: progressive H.264 that fits is still sent as it is", media("mp4", kbps: 4000, h1080, aacEng), .mbps5, ios,
         Expect(delivery: .original, notReasons: ["interlaced_unsupported"])),
]

let latmCases: [Case] = [
    Case("original: AAC in LATM from a broadcast TS is copied as AAC (the engine takes its frames out of LATM; it was re-encoded)",
         media("ts", kbps: 4000, h1080, audio("aac_latm", ch: 2, index: 1, kbps: 128)), .original, ios,
         Expect(delivery: .remux, video: .copy, audio: .copy, audioCodec: "aac", notReasons: ["audio_codec_unsupported_in_mp4"])),
    Case("5 Mbps: AAC in LATM that fits the rung's audio budget is copied", media("ts", kbps: 4000, h1080, audio("aac_latm", ch: 2, index: 1, kbps: 128)),
         .mbps5, ios, Expect(delivery: .remux, audio: .copy, audioCodec: "aac", notReasons: ["audio_codec_unsupported_in_mp4"])),
    Case("1 Mbps: AAC in LATM above the rung's audio budget is re-encoded", media("ts", kbps: 4000, h1080, audio("aac_latm", ch: 2, index: 1, kbps: 192)),
         .mbps1, ios, Expect(delivery: .transcode, audio: .transcode, audioCodec: "aac")),
    Case("original: a TV box that takes TS gets LATM as it is", media("ts", kbps: 4000, h1080, audio("aac_latm", ch: 2, index: 1, kbps: 128)),
         .original, androidTV, Expect(delivery: .original)),
]

func decodeTimesOnly(_ s: StreamInfo) -> StreamInfo {
    var s = s
    s.presentationTimesMissing = true
    return s
}

let timestampCases: [Case] = [
    Case("original: H.264 with B-frames from AVI (decode times only) is remuxed: the engine derives its display times from the pictures' order",
         media("avi", kbps: 2000, decodeTimesOnly(h1080), audio("mp3", ch: 2, index: 1, kbps: 192)), .original, ios,
         Expect(delivery: .remux, video: .copy, notReasons: ["video_timestamps_missing", "video_codec_unsupported_in_mp4"])),
    Case("original: HEVC with decode times only (a bare stream) is remuxed: its slice headers give the pictures' order too",
         media("hevc", kbps: 2000, decodeTimesOnly(video("hevc", 1920, 1080, profile: "Main"))), .original, ios,
         Expect(delivery: .remux, video: .copy, notReasons: ["video_timestamps_missing"])),
    Case("original: an MP4 whose reordered H.264 has decode times only (its composition offsets lost) is remuxed, not sent as it is: players would show its pictures in decode order",
         media("mp4", kbps: 2000, decodeTimesOnly(h1080), audio("aac", ch: 2, index: 1, kbps: 128)), .original, ios,
         Expect(delivery: .remux, video: .copy, reasons: ["video_timestamps_missing"])),
    Case("5 Mbps: the same MP4 where it fits the rung is remuxed too",
         media("mp4", kbps: 2000, decodeTimesOnly(h1080), audio("aac", ch: 2, index: 1, kbps: 128)), .mbps5, ios,
         Expect(delivery: .remux, video: .copy, reasons: ["video_timestamps_missing"])),
    Case("original: MPEG-4 Part 2 with decode times only is re-encoded, not copied without its display order",
         media("avi", kbps: 2000, decodeTimesOnly(video("mpeg4", 1920, 1080, profile: "Advanced Simple Profile")),
               audio("mp3", ch: 2, index: 1, kbps: 192)),
         .original, DeviceCaps(codecsVideo: ["h264", "mpeg4"], codecsAudio: ["aac", "mp3"], containers: ["mp4"]),
         Expect(delivery: .transcode, video: .transcode, reasons: ["video_timestamps_missing"],
                notReasons: ["video_codec_unsupported_in_mp4", "video_codec_unsupported"])),
    Case("5 Mbps: the same MPEG-4 Part 2 at a rung it fits",
         media("avi", kbps: 2000, decodeTimesOnly(video("mpeg4", 1920, 1080, profile: "Advanced Simple Profile")),
               audio("mp3", ch: 2, index: 1, kbps: 192)),
         .mbps5, DeviceCaps(codecsVideo: ["h264", "mpeg4"], codecsAudio: ["aac", "mp3"], containers: ["mp4"]),
         Expect(delivery: .transcode, video: .transcode, reasons: ["video_timestamps_missing"])),
    Case("original: H.264 from AVI with its times complete is remuxed", media("avi", kbps: 2000, h1080, audio("mp3", ch: 2, index: 1, kbps: 192)), .original, ios,
         Expect(delivery: .remux, video: .copy, notReasons: ["video_timestamps_missing"])),
]

func encrypted(_ s: StreamInfo) -> StreamInfo {
    var s = s
    s.encrypted = true
    return s
}

let encryptedCases: [Case] = [
    Case("original: an encrypted MP4 the device plays goes as it is", media("mp4", kbps: 4000, encrypted(h1080), encrypted(aacEng)), .original, ios,
         Expect(delivery: .original)),
    Case("original: an encrypted MP4 that needs re-encoding is refused, not decoded into garbage", media("mp4", kbps: 4000,
         encrypted(video("hevc", 1920, 1080)), encrypted(aacEng)), .original, web, Expect(error: .sourceUnsupported)),
    Case("1 Mbps: an encrypted MP4 above the rung is refused", media("mp4", kbps: 4000, encrypted(h1080), encrypted(aacEng)), .mbps1, ios,
         Expect(error: .sourceUnsupported)),
    Case("5 Mbps: an encrypted MP4 that fits goes as it is", media("mp4", kbps: 4000, encrypted(h1080), encrypted(aacEng)), .mbps5, ios,
         Expect(delivery: .original)),
]

let dolbyVision7Cases: [Case] = [
    Case("original: Dolby Vision 7 in Matroska to Apple TV is remuxed as its HDR10 base layer, and says so",
         media("mkv", kbps: 40000, dolbyVision(profile: 7, compat: 6, w: 3840, h: 2160), aacEng), .original, atv,
         Expect(delivery: .remux, video: .copy, reasons: ["dolby_vision_base_layer_only"])),
    Case("original: Dolby Vision 7 in MP4, whose container the device plays, is remuxed as its base layer too, not sent as it is",
         media("mp4", kbps: 40000, dolbyVision(profile: 7, compat: 6, w: 3840, h: 2160), aacEng), .original, atv,
         Expect(delivery: .remux, video: .copy, reasons: ["dolby_vision_base_layer_only"])),
    Case("original: Dolby Vision 7 in Matroska to a TV box that plays Matroska and lists Dolby Vision goes as it is",
         media("mkv", kbps: 40000, dolbyVision(profile: 7, compat: 6, w: 3840, h: 2160), aacEng), .original,
         DeviceCaps(codecsVideo: ["hevc", "dolby_vision", "h264"], codecsAudio: ["aac"], containers: ["mkv", "mp4"], maxResolution: .uhd4k, hdr: true),
         Expect(delivery: .original)),
    Case("original: Dolby Vision 7 in Matroska to a device that takes no MP4 goes as it is rather than failing",
         media("mkv", kbps: 40000, dolbyVision(profile: 7, compat: 6, w: 3840, h: 2160), aacEng), .original,
         DeviceCaps(codecsVideo: ["hevc", "h264"], codecsAudio: ["aac"], containers: ["mkv"], maxResolution: .uhd4k, hdr: true),
         Expect(delivery: .original)),
    Case("original: Dolby Vision 8.1 in Matroska keeps its record", media("mkv", kbps: 40000, dolbyVision(profile: 8, compat: 1, w: 3840, h: 2160), aacEng),
         .original, atv, Expect(delivery: .remux, video: .copy, notReasons: ["dolby_vision_base_layer_only"])),
]

/// An MPEG-TS audio stream whose packets begin past libavformat's analysis: its codec is
/// known from the programme map, its channels and sample rate are not.
let aacUnknownFormat = StreamInfo(index: 2, type: .audio, codec: "aac", language: "fra")

let unknownFormatCases: [Case] = [
    Case("original: audio whose channels and sample rate the probe does not know is re-encoded to stereo (an MP4 sample entry must state them; it was planned mono, or copied and refused as damaged)",
         media("ts", kbps: 4000, h1080, aacEng, aacUnknownFormat), .original, ios, language: "fra",
         Expect(delivery: .remux, audioIndex: 2, audio: .transcode, channels: 2, reasons: ["audio_format_unknown"])),
    Case("2 Mbps: the same at a rung", media("ts", kbps: 4000, h1080, aacEng, aacUnknownFormat), .mbps2, ios, language: "fra",
         Expect(audioIndex: 2, audio: .transcode, channels: 2, reasons: ["audio_format_unknown"])),
]

// MARK: the finer caps (H.264 level, bit depth, HDR formats, channels)

let level41 = DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 41)
let finerCapsCases: [Case] = [
    Case("caps.max_h264_level: an H.264 source above the device's level is re-encoded within it",
         media("mp4", kbps: 12000, video("h264", 1920, 1080, profile: "High", level: 51), aacEng), .original, level41,
         Expect(delivery: .transcode, video: .transcode, level: "4.1", reasons: ["video_level_above_cap"])),
    Case("caps.max_h264_level: a source at the device's level plays as it is",
         media("mp4", kbps: 12000, video("h264", 1920, 1080, profile: "High", level: 41), aacEng), .original, level41,
         Expect(delivery: .original)),
    Case("caps.max_h264_level: a source whose picture and rate need more than the level it signals (1080p60 written as 4.1 needs 4.2) is re-encoded, as is an unsignalled one",
         media("mp4", kbps: 6000, video("h264", 1920, 1080, fps: 60, profile: "High", level: 41), aacEng), .original, level41,
         Expect(delivery: .transcode, video: .transcode, level: "4.1", reasons: ["video_level_above_cap"])),
    Case("caps.max_h264_level: a 4K picture signalled as 4.1 needs 5.1 and is re-encoded",
         media("mp4", kbps: 12000, video("h264", 3840, 2160, fps: 30, profile: "High", level: 41), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .uhd4k, maxH264Level: 41),
         Expect(delivery: .transcode, video: .transcode, reasons: ["video_level_above_cap"])),
    Case("caps.max_h264_level: a stream that signals 4.0 at 39 Mbit/s on average (above 4.0's 25 for High) is re-encoded for a 4.0 device (it went as it was)",
         media("mp4", kbps: 39000, video("h264", 1920, 1080, fps: 30, profile: "High", level: 40), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 40),
         Expect(delivery: .transcode, video: .transcode, level: "4.0", reasons: ["video_level_above_cap"])),
    Case("caps.max_h264_level: a 1080p30 stream signalled 4.0 at 15 Mbit/s plays on 4.0 as it is",
         media("mp4", kbps: 15000, video("h264", 1920, 1080, fps: 30, profile: "High", level: 40), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 40),
         Expect(delivery: .original)),
    Case("caps.max_h264_level: 1080p30 without a level needs 4.0 and plays on 4.1 as it is",
         media("mp4", kbps: 6000, video("h264", 1920, 1080, fps: 30, profile: "High"), aacEng), .original, level41,
         Expect(delivery: .original)),
    Case("caps.max_h264_level 3.1 (an old phone): a 1080p encode is made 720p, which 3.1 holds",
         media("mkv", kbps: 12000, h1080, aacEng), .mbps5,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 31),
         Expect(delivery: .transcode, size: [1280, 720], level: "3.1", reasons: ["resolution_reduced_for_level"])),
    Case("caps.max_h264_level 3.0: the 20 Mbps rung's bitrate comes down to what the level allows, and the picture to 480p",
         media("mkv", kbps: 40000, h1080, aacEng), .mbps20,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 30),
         Expect(delivery: .transcode, size: [854, 480], level: "3.0", reasons: ["resolution_reduced_for_level"])),
    Case("caps.max_h264_level 3.0 at 30 fps: 480p is more than 3.0 takes (48,600 macroblocks a second), so the picture is made smaller still, not refused",
         media("mkv", kbps: 12000, video("h264", 1920, 1080, fps: 30, profile: "High"), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 30),
         Expect(delivery: .transcode, size: [770, 432], level: "3.0", reasons: ["resolution_reduced_for_level"])),
    Case("caps.max_h264_level 3.0 at 60 fps: below 480p's class half the pictures go, not half the picture (480p30's size for 3.0, at 30 fps, not 560x315 at 60)",
         media("mkv", kbps: 12000, video("h264", 1280, 720, fps: 60, profile: "High"), aacEng), .mbps2,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 30),
         Expect(delivery: .transcode, size: [770, 432], level: "3.0", fps: 30,
                reasons: ["resolution_reduced_for_level", "frame_rate_reduced"], notReasons: ["frame_rate_above_30"])),
    Case("caps.max_h264_level 3.0 at 25 fps: a rate halved would judder, so only the picture shrinks",
         media("mkv", kbps: 12000, video("h264", 1920, 1080, fps: 25, profile: "High"), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxH264Level: 30),
         Expect(delivery: .transcode, level: "3.0", fps: 0, notReasons: ["frame_rate_reduced"])),
    Case("caps.max_frame_rate 30: a 60 fps film is re-encoded at 30 fps, at its full size, even at original",
         media("mp4", kbps: 8000, video("h264", 1280, 720, fps: 60, profile: "High", level: 32), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 30),
         Expect(delivery: .transcode, size: [1280, 720], fps: 30,
                reasons: ["frame_rate_above_cap", "frame_rate_reduced"], notReasons: ["frame_rate_above_30"])),
    Case("caps.max_frame_rate 59.94: a 60 fps source is within it (0.1 % apart) and plays as it is",
         media("mp4", kbps: 8000, video("h264", 1280, 720, fps: 60, profile: "High", level: 32), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 59.94),
         Expect(delivery: .original)),
    Case("caps.max_frame_rate 30: a 25 fps source is within it", media("mp4", kbps: 3000, video("h264", 1280, 720, fps: 25), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 30),
         Expect(delivery: .transcode, fps: 0, notReasons: ["frame_rate_above_cap", "frame_rate_reduced"])),
    Case("caps.max_frame_rate 25: a 30 fps source is encoded at 25 (a picture left out now and then), not halved to 15",
         media("mp4", kbps: 3000, video("h264", 1280, 720, fps: 30), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 25),
         Expect(delivery: .transcode, fps: 25, reasons: ["frame_rate_reduced"])),
    Case("caps.max_frame_rate 25: 60 fps is encoded at 25, not every third picture (20)",
         media("mp4", kbps: 3000, video("h264", 1280, 720, fps: 60), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 25),
         Expect(delivery: .transcode, fps: 25, reasons: ["frame_rate_reduced"])),
    Case("caps.max_frame_rate 25: 120 fps is encoded at every fifth picture (24), film's rate at an even cadence",
         media("mp4", kbps: 3000, video("h264", 1280, 720, fps: 120), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 25),
         Expect(delivery: .transcode, fps: 24, reasons: ["frame_rate_reduced"])),
    Case("caps.max_frame_rate 20: 30 fps is encoded at 20, not halved to 15",
         media("mp4", kbps: 3000, video("h264", 1280, 720, fps: 30), aacEng), .mbps1,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxFrameRate: 20),
         Expect(delivery: .transcode, fps: 20, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: a 120 fps phone clip is copied as it is at original (a copy keeps any rate)",
         media("mp4", kbps: 12000, video("h264", 1280, 720, fps: 120, profile: "High", level: 42), aacEng), .original, ios,
         Expect(delivery: .original)),
    Case("no caps.max_frame_rate: an encode of a 120 fps clip shows every second picture (60 fps)",
         media("mp4", kbps: 12000, video("h264", 1280, 720, fps: 120, profile: "High", level: 42), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, size: [1280, 720], fps: 60, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: 240 fps slow motion is encoded at 60, 100 fps at 50 (every n-th picture, an even cadence)",
         media("mp4", kbps: 20000, video("h264", 1280, 720, fps: 240, profile: "High", level: 52), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 60, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: a 300 fps high-speed clip is encoded at 60, every fifth picture (it had been taken for a rate unknown: 300 fps at a level for 30)",
         media("mp4", kbps: 20000, video("h264", 1280, 720, fps: 300, profile: "High", level: 52), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 60, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: a screen recording at 64 fps is encoded at 60 (a picture left out now and then), not halved to 32",
         media("mkv", kbps: 20000, video("h264", 1280, 720, fps: 64, profile: "High", level: 42), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 60, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: 90 fps, more than a tenth above 60, is encoded at 45",
         media("mkv", kbps: 20000, video("h264", 1280, 720, fps: 90, profile: "High", level: 42), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 45, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: 100 fps is encoded at 50",
         media("mkv", kbps: 20000, video("h264", 1280, 720, fps: 100, profile: "High", level: 42), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 50, reasons: ["frame_rate_reduced"])),
    Case("no caps.max_frame_rate: 59.94 fps is encoded at its own rate",
         media("mkv", kbps: 20000, video("h264", 1920, 1080, fps: 60000.0 / 1001), aacEng), .mbps5, ios,
         Expect(delivery: .transcode, fps: 0, notReasons: ["frame_rate_reduced"])),
    Case("caps.max_video_bit_depth 8: HEVC Main 10 is re-encoded for an 8-bit HEVC decoder",
         media("mp4", kbps: 6000, video("hevc", 1920, 1080, pix: "yuv420p10le", profile: "Main 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: 8),
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("caps.max_video_bit_depth 10: a software player (Kodi, VLC) gets H.264 High 10 as it is",
         media("mp4", kbps: 6000, video("h264", 1920, 1080, pix: "yuv420p10le", profile: "High 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: 10),
         Expect(delivery: .original)),
    Case("caps.max_video_bit_depth by codec {h264: 10, hevc: 8}: a player decoding H.264 in software gets High 10 as it is",
         media("mp4", kbps: 6000, video("h264", 1920, 1080, pix: "yuv420p10le", profile: "High 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: BitDepthCap(byCodec: ["h264": 10, "hevc": 8])),
         Expect(delivery: .original)),
    Case("caps.max_video_bit_depth by codec {h264: 10, hevc: 8}: the same player's 8-bit HEVC decoder gets Main 10 re-encoded",
         media("mp4", kbps: 6000, video("hevc", 1920, 1080, pix: "yuv420p10le", profile: "Main 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: BitDepthCap(byCodec: ["h264": 10, "hevc": 8])),
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("caps.max_video_bit_depth by codec under another name {h265: 8}: HEVC Main 10 is re-encoded; H.264 keeps its default (8)",
         media("mp4", kbps: 6000, video("hevc", 1920, 1080, pix: "yuv420p10le", profile: "Main 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: BitDepthCap(byCodec: ["h265": 8])),
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("caps.max_video_bit_depth by codec naming another codec: H.264 High 10 keeps the default (8) and is re-encoded",
         media("mp4", kbps: 6000, video("h264", 1920, 1080, pix: "yuv420p10le", profile: "High 10"), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], maxVideoBitDepth: BitDepthCap(byCodec: ["hevc": 12])),
         Expect(delivery: .transcode, reasons: ["video_profile_unsupported"])),
    Case("caps.hdr_formats [hdr10]: HLG is tone-mapped for a display that shows HDR10 only",
         media("mp4", kbps: 6000, hlg(), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], hdr: true, hdrFormats: ["hdr10"]),
         Expect(delivery: .transcode, toneMap: true, reasons: ["hdr_unsupported"])),
    Case("caps.hdr_formats [hdr10]: HDR10 plays as it is",
         media("mp4", kbps: 6000, hdr10(), aacEng), .original,
         DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac"], containers: ["mp4"], hdr: true, hdrFormats: ["hdr10"]),
         Expect(delivery: .original)),
    Case("caps.hdr_formats with dolby_vision: profile 5 (no base layer) plays on the device that lists it there",
         media("mp4", kbps: 6000, dolbyVision(profile: 5, compat: 0), aacEng), .original,
         DeviceCaps(codecsVideo: ["hevc"], codecsAudio: ["aac"], containers: ["mp4"], hdr: true, hdrFormats: ["hdr10", "dolby_vision"]),
         Expect(delivery: .original)),
    Case("caps.hdr_formats [dolby_vision]: profile 8.1 (an HDR10 base layer) plays as the Dolby Vision it is",
         media("mp4", kbps: 6000, dolbyVision(profile: 8, compat: 1), aacEng), .original,
         DeviceCaps(codecsVideo: ["hevc"], codecsAudio: ["aac"], containers: ["mp4"], hdr: true, hdrFormats: ["dolby_vision"]),
         Expect(delivery: .original)),
    Case("caps.max_audio_channels 2: AAC 5.1 is made stereo for a device that decodes it itself",
         media("mp4", kbps: 4000, h1080, audio("aac", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 384)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .remux, video: .copy, audio: .transcode, audioCodec: "aac", channels: 2, reasons: ["audio_channels_above_cap"])),
    Case("caps.max_audio_channels 2: E-AC-3 5.1 a device passes through to a receiver is copied",
         media("mp4", kbps: 4000, h1080, audio("eac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 640)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "eac3"], audioPassthroughCodecs: ["eac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .original)),
    Case("caps.max_audio_channels 2: AAC 5.1 a device decodes becomes stereo AAC, not an E-AC-3 5.1 encode it could only pass through",
         media("mp4", kbps: 4000, h1080, audio("aac", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 384)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3", "eac3"], audioPassthroughCodecs: ["ac3", "eac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .remux, audio: .transcode, audioCodec: "aac", channels: 2, reasons: ["audio_channels_above_cap"])),
    Case("caps.max_audio_channels 2: E-AC-3 5.1 passed through is copied, and were the copy to stop, its encode is stereo (the engine's own would be AAC 5.1)",
         media("mkv", kbps: 4000, h1080, audio("eac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 640)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "eac3"], audioPassthroughCodecs: ["eac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .remux, audio: .copy, audioFallback: [2])),
    Case("AC-3 whose layout changes along a recording (the probe's samples: stereo adverts, a 5.1 film) is encoded once at its largest layout, not copied into one sample entry",
         media("ts", kbps: 8000, h1080, changing(audio("ac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 192))), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audio: .transcode, channels: 6, reasons: ["audio_format_changes"])),
    Case("a changing AC-3 sound for a stereo device: stereo, for its channels (the largest layout is above its cap)",
         media("ts", kbps: 8000, h1080, changing(audio("ac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 192))), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .remux, audio: .transcode, audioCodec: "aac", channels: 2, reasons: ["audio_channels_above_cap"])),
    Case("a broadcast's changing main sound stays the one chosen beside a steady stereo track of the same language (an unflagged audio description), at original and at a rung",
         media("ts", kbps: 8000, h1080, changing(audio("ac3", ch: 6, index: 1, lang: "eng", kbps: 384)), audio("ac3", ch: 2, index: 2, lang: "eng", kbps: 192)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audioIndex: 1, audio: .transcode, channels: 6, reasons: ["audio_format_changes"])),
    Case("a broadcast's changing main sound at a rung: still the main one, not the stereo track that would copy within the rung",
         media("ts", kbps: 8000, h1080, changing(audio("ac3", ch: 6, index: 1, lang: "eng", kbps: 384)), audio("ac3", ch: 2, index: 2, lang: "eng", kbps: 192)), .mbps10,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audioIndex: 1, audio: .transcode, channels: 6, reasons: ["audio_format_changes"])),
    Case("a changing sound at a rung is encoded at the rung's surround, not copied however few bits it spends (the picture fits the rung as it is)",
         media("ts", kbps: 8000, h1080, changing(audio("ac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 192))), .mbps10,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audio: .transcode, audioCodec: "ac3", channels: 6, reasons: ["audio_format_changes"])),
    Case("a copied sound the device could decode as AAC at its channels needs no fallback of the plan's (the engine's own is that)",
         media("mkv", kbps: 4000, h1080, audio("eac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 640)), .original,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "eac3"], containers: ["mp4"]),
         Expect(delivery: .remux, audio: .copy, audioFallback: [])),
    Case("caps.max_audio_channels 2 at a rung: 5.1 becomes stereo, not the rung's decoded surround",
         media("mkv", kbps: 12000, h1080, audio("ac3", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 448)), .mbps10,
         DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3", "eac3"], containers: ["mp4"], maxAudioChannels: 2),
         Expect(delivery: .transcode, audio: .transcode, audioCodec: "aac", channels: 2)),
]

let allCases = finerCapsCases + originalCases + rungCases + audioOnlyCases + audioCases + subtitleCases + sampleEntryCases + interlacedCases + latmCases
    + timestampCases + encryptedCases + dolbyVision7Cases + unknownFormatCases

@Suite("planner rules")
struct PlannerRuleTests {
    @Test("the rule table has at least a hundred cases")
    func enoughCases() { #expect(allCases.count >= 100) }

    @Test("each rule of issue 3 gives the plan users expect", arguments: allCases)
    func rule(_ c: Case) throws {
        let e = c.expect
        let plan: Plan
        do {
            plan = try Planner.plan(source: c.source, quality: c.quality, caps: c.caps, policy: c.policy,
                                    audioLanguage: c.language, presets: presets)
        } catch {
            #expect(e.error == error.code, "unexpected \(error)")
            if let f = e.field { #expect(error.field == f) }
            return
        }
        #expect(e.error == nil, "expected \(String(describing: e.error)), got a plan: \(plan.deliveryFormat) \(plan.reasons)")
        checkInvariants(plan, source: c.source, quality: c.quality, caps: c.caps)
        if let d = e.delivery { #expect(plan.deliveryFormat == d, "reasons \(plan.reasons)") }
        if let q = e.effective { #expect(plan.effectiveQuality == q) }
        if let a = e.video { #expect(plan.video?.action == a) }
        if let s = e.size { #expect([plan.video?.width ?? -1, plan.video?.height ?? -1] == s) }
        if let t = e.toneMap { #expect(plan.video?.toneMap == t) }
        if let d = e.deinterlace { #expect(plan.video?.deinterlace == d) }
        if let r = e.rotation { #expect(plan.video?.rotation == r) }
        if let l = e.level { #expect(plan.video?.encoder?.level == l) }
        if let k = e.videoKbps { #expect(plan.video?.bitrateKbps == k, "reasons \(plan.reasons)") }
        if let f = e.fps { #expect((plan.video?.maxFrameRate ?? 0) == f, "reasons \(plan.reasons)") }
        if let i = e.audioIndex { #expect(plan.audio?.sourceIndex == i) }
        if let a = e.audio { #expect(plan.audio?.action == a, "reasons \(plan.reasons)") }
        if let codec = e.audioCodec { #expect(plan.audio?.codec == codec) }
        if let ch = e.channels { #expect(plan.audio?.channels == ch) }
        if let k = e.audioKbps { #expect(plan.audio?.bitrateKbps == k) }
        if e.noAudio { #expect(plan.audio == nil) }
        if e.noVideo { #expect(plan.video == nil) }
        if let subs = e.subtitles { #expect(plan.subtitles.map(\.action) == subs) }
        if let languages = e.subtitleLanguages { #expect(plan.subtitles.map(\.language) == languages) }
        if let only = e.burnsForcedOnly { #expect(plan.subtitles.first { $0.action == .burn }.map { $0.forcedOnly == true } == only) }
        if let fallback = e.audioFallback { #expect((plan.audioFallback.map { [$0.channels] } ?? []) == fallback, "\(String(describing: plan.audioFallback))") }
        for r in e.reasons { #expect(plan.reasons.contains(r), "missing reason \(r) in \(plan.reasons)") }
        for r in e.notReasons { #expect(!plan.reasons.contains(r), "unexpected reason \(r) in \(plan.reasons)") }
    }

    @Test("a quality word outside the ladder is invalid_quality", arguments: ["remux", "4mbps", "", "Original", "20Mbps"])
    func invalidQuality(_ word: String) {
        #expect(throws: KilnError.self) {
            _ = try Planner.plan(source: media("mp4", h1080, aacEng), quality: word, caps: nil, presets: presets)
        }
        do {
            _ = try Planner.plan(source: media("mp4", h1080, aacEng), quality: word, caps: nil, presets: presets)
        } catch { #expect(error.code == .invalidQuality) }
    }

    /// A broadcast recording of `picture` with 5.1 AC-3, and its plan at 10 Mbit/s for iOS.
    private func broadcast(_ picture: StreamInfo) -> MediaInfo { media("ts", kbps: 18000, picture, audio("ac3", ch: 6, kbps: 448)) }
    private func planAt10(_ source: MediaInfo) throws -> Plan { try Planner.plan(source: source, quality: .mbps10, caps: ios, presets: presets) }

    @Test("film in 3:2 pulldown is planned at its own 23.976 (inverse_telecined, its own key); video shot interlaced is deinterlaced")
    func inverseTelecine() throws {
        var film = video("mpeg2video", 1920, 1080, fps: 29.97, field: .tt)
        film.telecined = true
        let source = broadcast(film)
        let plan = try planAt10(source)
        let v = try #require(plan.video)
        #expect(v.inverseTelecine == true && v.deinterlace && v.maxFrameRate == nil)
        #expect(plan.reasons.contains("inverse_telecined") && !plan.reasons.contains("deinterlaced"))
        var shot = film
        shot.telecined = false
        let interlaced = try planAt10(broadcast(shot))
        #expect(interlaced.video?.inverseTelecine == nil && interlaced.video?.deinterlace == true)
        #expect(interlaced.reasons.contains("deinterlaced") && !interlaced.reasons.contains("inverse_telecined"))
        #expect(ArtifactKey.compute(plan: plan, source: source, presetsVersion: "v")
                != ArtifactKey.compute(plan: interlaced, source: source, presetsVersion: "v"))
        // Pictures flagged progressive with the pulldown baked in (a DVD re-encoded without
        // taking it out) go to 23.976 too; ones the probe found no pulldown in do not.
        var progressive = film
        progressive.fieldOrder = .progressive
        let p = try planAt10(broadcast(progressive))
        #expect(p.video?.inverseTelecine == true && p.video?.deinterlace == false && p.reasons.contains("inverse_telecined"))
        progressive.telecined = nil
        let video = try planAt10(broadcast(progressive))
        #expect(video.video?.inverseTelecine == nil && !video.reasons.contains("inverse_telecined"))
    }

    @Test("progressive pictures stored interlaced (25PsF) are matched whole at their own rate (field_matched, its own key); film in 3:2 pulldown still goes to 23.976, video shot interlaced is deinterlaced")
    func fieldMatch() throws {
        var psf = video("mpeg2video", 1920, 1080, fps: 25, field: .tt)
        psf.progressiveFrames = true
        let source = broadcast(psf)
        let plan = try planAt10(source)
        let v = try #require(plan.video)
        #expect(v.fieldMatch == true && v.deinterlace && v.inverseTelecine == nil && v.maxFrameRate == nil)
        #expect(plan.reasons.contains("field_matched") && !plan.reasons.contains("deinterlaced"))
        var shot = psf
        shot.progressiveFrames = false
        let interlaced = try planAt10(broadcast(shot))
        #expect(interlaced.video?.fieldMatch == nil && interlaced.video?.deinterlace == true)
        #expect(interlaced.reasons.contains("deinterlaced") && !interlaced.reasons.contains("field_matched"))
        #expect(ArtifactKey.compute(plan: plan, source: source, presetsVersion: "v")
                != ArtifactKey.compute(plan: interlaced, source: source, presetsVersion: "v"))
        var film = video("mpeg2video", 1920, 1080, fps: 29.97, field: .tt)
        film.telecined = true
        film.progressiveFrames = true
        let telecine = try planAt10(broadcast(film))
        #expect(telecine.video?.inverseTelecine == true && telecine.video?.fieldMatch == nil)
        #expect(telecine.reasons.contains("inverse_telecined") && !telecine.reasons.contains("field_matched"))
    }

    @Test("sound at a low sample rate is planned at what AAC reaches there (6,144 bits a channel's frame): an old phone's 8 kHz voice at 48 kbit/s, not the ladder's 64 the output never had; 48 kHz keeps the ladder's")
    func lowSampleRateBitrate() throws {
        func planned(_ sound: StreamInfo, _ quality: Quality = .mbps2) throws -> AudioPlan {
            try #require(try Planner.plan(source: media("mp4", kbps: 700, video("h264", 640, 480, fps: 30), sound), quality: quality,
                                          caps: ios, presets: presets).audio)
        }
        let voice = try planned(audio("pcm_s16le", ch: 1, kbps: 128, rate: 8000))
        #expect(voice.codec == "aac" && voice.channels == 1 && voice.bitrateKbps == 48, "\(voice)")
        let stereo = try planned(audio("amr_wb", ch: 2, kbps: 24, rate: 8000))
        #expect(stereo.channels == 2 && stereo.bitrateKbps <= 96, "\(stereo)")
        let wide = try planned(audio("amr_wb", ch: 1, kbps: 24, rate: 16000))
        #expect(wide.bitrateKbps <= 96, "\(wide)")
        // The same ladder at 48 kHz: what 8 kHz mono was capped from.
        let full = try planned(audio("mp2", ch: 1, kbps: 256, rate: 48000))
        #expect(full.codec == "aac" && full.bitrateKbps > 48, "\(full)")
    }

    @Test("a re-encoded sound gets at most half again its source's bitrate, never under 32 kbit/s a channel (48 for AC-3): a 12 kbit/s AMR voice had been encoded at the ladder's 64, a 6 kbit/s Opus at 128; a source of unknown bitrate or of more bits keeps the ladder's")
    func sourceBoundAudioBitrate() throws {
        func planned(_ sound: StreamInfo, _ quality: Quality = .mbps2, caps: DeviceCaps = ios) throws -> AudioPlan {
            try #require(try Planner.plan(source: media("mkv", kbps: 700, video("h264", 640, 480, fps: 30), sound), quality: quality,
                                          caps: caps, presets: presets).audio)
        }
        let ladder = try planned(audio("opus", ch: 2, kbps: nil))
        #expect(ladder.action == .transcode && ladder.bitrateKbps == 128, "\(ladder)")
        let voice = try planned(audio("amr_nb", ch: 1, kbps: 12, rate: 8000))
        #expect(voice.codec == "aac" && voice.channels == 1 && voice.bitrateKbps == 32, "\(voice)")
        let tiny = try planned(audio("opus", ch: 2, kbps: 6))
        #expect(tiny.channels == 2 && tiny.bitrateKbps == 64, "\(tiny)")
        let wma = try planned(audio("wmav2", ch: 2, kbps: 64))
        #expect(wma.action == .transcode && wma.bitrateKbps == 96, "\(wma)")
        let rich = try planned(audio("vorbis", ch: 2, kbps: 500))
        #expect(rich.bitrateKbps == 128, "\(rich)")
        // 5.1 kept at `original` (E-AC-3 for iOS): AC-3's next bitrate above half again 384.
        let surround = try planned(audio("dts", ch: 6, kbps: 384), .original)
        #expect(surround.codec == "eac3" && surround.channels == 6 && surround.bitrateKbps == 576, "\(surround)")
        let full = try planned(audio("dts", ch: 6, kbps: 1509), .original)
        #expect(full.bitrateKbps == 640, "\(full)")
        // A broadcast's sound that goes from 192 kbit/s stereo to 448 kbit/s 5.1: its bitrate
        // is the first part's, and its 5.1 had been encoded at 320.
        let changing = try planned(changing(audio("ac3", ch: 6, kbps: 192)), .original)
        #expect(changing.codec == "eac3" && changing.channels == 6 && changing.bitrateKbps == 640, "\(changing)")
    }

    @Test("a remux that copies video carries the encode that replaces it if the copy stops; nothing else does")
    func videoFallback() throws {
        func plan(_ source: MediaInfo, _ quality: Quality, policy: ServerPolicy = ServerPolicy()) throws -> Plan {
            try Planner.plan(source: source, quality: quality, caps: ios, policy: policy, presets: presets)
        }
        let source = media("ts", kbps: 4000, h1080, aacEng)
        let remux = try plan(source, .original)
        #expect(remux.deliveryFormat == .remux)
        let fallback = try #require(remux.videoFallback)
        // original's fallback rung: the lowest that holds a 4 Mbps 1080p source (5 Mbps).
        #expect(fallback.action == .transcode && fallback.codec == "h264" && fallback.width == 1920 && fallback.height == 1080)
        #expect(fallback.bitrateKbps == presets.rung(for: .mbps5)?.videoKbps)
        // The key names what the plan makes: the fallback, made from the same inputs, is not in it.
        var without = remux
        without.videoFallback = nil
        #expect(ArtifactKey.compute(plan: without, source: source, presetsVersion: "v")
                == ArtifactKey.compute(plan: remux, source: source, presetsVersion: "v"))
        // The file as it is, an encode, or a server that does not transcode: no fallback.
        #expect(try plan(media("mp4", kbps: 4000, h1080, aacEng), .original).videoFallback == nil)
        #expect(try plan(media("ts", kbps: 4000, h1080, aacEng), .mbps1).videoFallback == nil)
        #expect(try plan(source, .original, policy: noTranscode).videoFallback == nil)
        // Any copied codec: a damaged AV1 packet stops its copy too.
        let av1 = try Planner.plan(source: media("mkv", kbps: 4000, video("av1", 1920, 1080), aacEng), quality: .original,
                                   caps: web, presets: presets)
        #expect(av1.video?.action == .copy && av1.videoFallback?.codec == "h264")
    }

    @Test("forced subtitles keep their flag and language")
    func forcedSubtitle() throws {
        let plan = try Planner.plan(source: media("mkv", kbps: 8000, h1080, aacEng, subtitle("ass", index: 2, lang: "jpn", forced: true)),
                                    quality: .mbps5, caps: ios, presets: presets)
        #expect(plan.subtitles == [SubtitlePlan(sourceIndex: 2, action: .convert, codec: "mov_text", language: "jpn", forced: true)])
    }

    @Test("a transcode carries every encoder setting of its rung")
    func encoderSettings() throws {
        let plan = try Planner.plan(source: media("mp4", kbps: 8000, h1080, aacEng), quality: .mbps5, caps: ios, presets: presets)
        let rung = presets.rung(for: .mbps5)!
        #expect(plan.video?.encoder == EncoderSettings(name: "libx264", preset: rung.preset, crf: rung.crf, maxrateKbps: rung.videoKbps,
                                                       bufsizeKbps: rung.bufsizeKbps, profile: "high", level: "4.0",
                                                       gopSeconds: rung.gopSeconds, pixFmt: "yuv420p"))
        #expect(plan.targetBitrateKbps == 5000)
        #expect(plan.container == "mp4")
    }
}

@Suite("frame rates that say nothing")
struct FrameRateTests {
    @Test("a container timebase posing as 1000 (Matroska) or 600 fps (QuickTime) neither steps the frame down nor raises the level",
          arguments: [1000.0, 600, 0, -1, .infinity, .nan])
    func implausible(_ fps: Double) throws {
        let plan = try Planner.plan(source: media("webm", kbps: 9000, video("vp8", 1920, 1080, fps: fps), audio("vorbis")),
                                    quality: .mbps5, caps: ios, presets: presets)
        #expect(plan.video?.width == 1920 && plan.video?.encoder?.level == "4.0")
        #expect(!plan.reasons.contains("frame_rate_above_30"))
    }
}

@Suite("absurd probe values")
struct HostileInputTests {
    static let sources: [MediaInfo] = {
        var out: [MediaInfo] = []
        var m = media("mkv", kbps: 1, video("h264", 1920, 1080), aacEng)
        m.bitRate = Int.max; out.append(m)
        m = media("mkv", video("h264", 1920, 1080), aacEng)
        m.bitRate = 0; m.durationSeconds = .infinity; out.append(m)
        m.durationSeconds = .nan; m.sizeBytes = Int64.max; out.append(m)
        m.durationSeconds = 1e-300; out.append(m)
        out.append(media("mkv", kbps: 9000, video("h264", 1920, 1080, sar: Rational(Int.max, 1)), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", 1920, 1080, sar: Rational(1, Int.max)), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", Int.max, 1), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", 1, 1), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", 0, -5), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", 1920, 1080, rotation: Int.min), aacEng))
        out.append(media("mkv", kbps: 9000, video("h264", 1920, 1080, kbps: Int.max / 1000), audio("dts", kbps: Int.max / 1000)))
        out.append(media("mkv", kbps: 9000, h1080, audio("aac", ch: 0), audio("aac", ch: -3, index: 2)))
        return out
    }()

    @Test("never a trap: a plan or a clean error", arguments: 0..<sources.count)
    func noTrap(_ i: Int) {
        let source = HostileInputTests.sources[i]
        for q in Quality.allCases {
            for caps in [nil, ios, atv] {
                do {
                    let plan = try Planner.plan(source: source, quality: q, caps: caps, presets: presets)
                    _ = renderTable(plan: plan, source: source)
                    if let v = plan.video, v.action == .transcode { #expect(v.width >= 2 && v.height >= 2 && v.width <= 4096) }
                } catch {
                    // A picture of no size (0 × −5) is the source's damage; the rest, no fit.
                    #expect([.qualityUnavailable, .sourceCorrupt].contains(error.code), "\(error)")
                }
            }
        }
    }
}

@Suite("a camera's mono tracks")
struct MonoPairTests {
    /// A camera's MXF or MOV: the picture, then CH1..CHn as mono PCM tracks.
    static func camera(_ tracks: [StreamInfo], container: String = "mxf") -> MediaInfo {
        var source = media(container, kbps: 50_000, seconds: 120, video("mpeg2video", 1920, 1080, fps: 25, kbps: 48_000))
        source.streams += tracks
        return source
    }
    static func channel(_ index: Int, codec: String = "pcm_s24le", lang: String? = nil, title: String? = nil, rate: Int = 48000,
                        commentary: Bool = false) -> StreamInfo {
        audio(codec, ch: 1, index: index, lang: lang, isDefault: index == 1, kbps: 1152, commentary: commentary, title: title, rate: rate)
    }

    @Test("CH1 and CH2 of a camera (mono PCM tracks) go out as one stereo sound, CH1 left and CH2 right, at the stereo bitrate, at every quality that re-encodes or remuxes; CH3 and CH4 stay behind",
          arguments: [Quality.original, .mbps20, .mbps5, .mbps1])
    func cameraPair(quality: Quality) throws {
        let source = Self.camera((1...4).map { Self.channel($0) })
        let plan = try Planner.plan(source: source, quality: quality, caps: ios, presets: presets)
        let a = try #require(plan.audio)
        #expect(a.sourceIndex == 1 && a.mergeSources == [2], "\(a)")
        #expect(a.action == .transcode && a.codec == "aac" && a.channels == 2, "\(a)")
        #expect(a.bitrateKbps >= 96, "a stereo sound's bitrate, not half of it: \(a)")
        #expect(plan.reasons.contains("audio_tracks_merged"))
        #expect(plan.keptSourceIndices == [0, 1, 2])
        // The same plan without the merge is another output: another key.
        var single = plan
        single.audio?.mergeSources = nil
        #expect(ArtifactKey.compute(plan: single, source: source, presetsVersion: presets.version) != plan.artifactKey)
    }

    @Test("a track whose header times drift from the pictures' refuses only a plan that plays it: CH3 drifting leaves CH1+CH2 to go; CH2 drifting is not paired, CH1 goes alone; CH1 drifting, or a drift whose track is not known (a probe from before), refuses as before (one flipped byte in an unused track's table had refused the file)")
    func driftingTrack() throws {
        var source = Self.camera((1...4).map { Self.channel($0) }, container: "mov")
        source.timingDamage = "stream 3's times drift 7.64 s from stream 0's across the file"
        source.timingDamageStream = 3
        let unused = try Planner.plan(source: source, quality: .original, caps: ios, presets: presets)
        #expect(unused.audio?.sourceIndex == 1 && unused.audio?.mergeSources == [2], "\(String(describing: unused.audio))")
        source.timingDamageStream = 2
        let partner = try Planner.plan(source: source, quality: .original, caps: ios, presets: presets)
        #expect(partner.audio?.sourceIndex == 1 && partner.audio?.mergeSources == nil, "\(String(describing: partner.audio))")
        for stream in [1, nil] {
            source.timingDamageStream = stream
            #expect(throws: KilnError.self) { try Planner.plan(source: source, quality: .original, caps: ios, presets: presets) }
        }
    }

    @Test("a language asked for that is the second pair's picks CH3+CH4; a device that plays one channel gets both sides mixed into it")
    func secondPairAndMono() throws {
        let source = Self.camera([Self.channel(1, lang: "eng"), Self.channel(2, lang: "eng"), Self.channel(3, lang: "deu"), Self.channel(4, lang: "deu")])
        let german = try Planner.plan(source: source, quality: .mbps5, caps: ios, audioLanguage: "de", presets: presets)
        #expect(german.audio?.sourceIndex == 3 && german.audio?.mergeSources == [4], "\(String(describing: german.audio))")
        var monoDevice = ios
        monoDevice.maxAudioChannels = 1
        let mono = try Planner.plan(source: source, quality: .mbps5, caps: monoDevice, presets: presets)
        #expect(mono.audio?.channels == 1 && mono.audio?.mergeSources == [2], "\(String(describing: mono.audio))")
    }

    @Test("mono tracks that are not one microphone's two sides stay apart: other languages, other names, a commentary, other rates, coded (AAC) tracks, and a mono track beside a stereo one",
          arguments: [
            [MonoPairTests.channel(1, lang: "eng"), MonoPairTests.channel(2, lang: "fra")],
            [MonoPairTests.channel(1, title: "Interview"), MonoPairTests.channel(2, title: "Room")],
            [MonoPairTests.channel(1), MonoPairTests.channel(2, commentary: true)],
            [MonoPairTests.channel(1), MonoPairTests.channel(2, rate: 44100)],
            [MonoPairTests.channel(1, codec: "aac"), MonoPairTests.channel(2, codec: "aac")],
            [MonoPairTests.channel(1), audio("pcm_s24le", ch: 2, index: 2, lang: nil, kbps: 2304)],
          ])
    func notPairs(tracks: [StreamInfo]) throws {
        let plan = try Planner.plan(source: Self.camera(tracks), quality: .mbps5, caps: ios, presets: presets)
        #expect(plan.audio?.mergeSources == nil, "\(String(describing: plan.audio))")
        #expect(!plan.reasons.contains("audio_tracks_merged"))
    }

    @Test("a camera's H.264 whose PCM takes it over the rung is remuxed with the pair as its sound: no track is said dropped to fit where both go, and the third and fourth are")
    func remuxedPair() throws {
        func plan(_ channels: Int) throws -> Plan {
            var source = media("mov", kbps: 4000 + 1152 * channels, seconds: 120, video("h264", 1920, 1080, fps: 25, kbps: 4000))
            source.streams += (1...channels).map { Self.channel($0) }
            return try Planner.plan(source: source, quality: .mbps5, caps: ios, presets: presets)
        }
        let two = try plan(2), four = try plan(4)
        for p in [two, four] {
            #expect(p.deliveryFormat == .remux && p.audio?.mergeSources == [2] && p.reasons.contains("source_fits_target"), "\(p.reasons)")
        }
        #expect(!two.reasons.contains("tracks_dropped_to_fit"), "\(two.reasons)")
        #expect(four.reasons.contains("tracks_dropped_to_fit"), "\(four.reasons)")
    }

    @Test("a camera file whose index is damaged keeps to CH1, as before: a pair would fail with its damaged side")
    func damagedIndexKeepsOneTrack() throws {
        var source = Self.camera([Self.channel(1), Self.channel(2)], container: "mov")
        source.indexDamage = "stream 2: its index places a sample past the file's end"
        let plan = try Planner.plan(source: source, quality: .mbps5, caps: ios, presets: presets)
        #expect(plan.audio?.sourceIndex == 1 && plan.audio?.mergeSources == nil, "\(String(describing: plan.audio))")
    }

    @Test("the file as it is keeps its tracks as they are: original without caps, and a device that takes the camera's MOV with its PCM")
    func asItIs() throws {
        let source = Self.camera([Self.channel(1), Self.channel(2)], container: "mov")
        let bare = try Planner.plan(source: source, quality: .original, caps: nil, presets: presets)
        #expect(bare.deliveryFormat == .original && bare.audio?.mergeSources == nil)
        var pro = ios
        pro.containers = ["mp4", "mov"]
        pro.codecsVideo = ["h264", "mpeg2video"]
        pro.codecsAudio = ["aac", "pcm"]
        let plays = try Planner.plan(source: source, quality: .original, caps: pro, presets: presets)
        #expect(plays.deliveryFormat == .original && plays.audio?.mergeSources == nil, "\(plays.reasons)")
    }
}
