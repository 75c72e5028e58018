import KilnCore

/// What Kiln knows about codec names, containers and pixel formats, independent of any device.
enum Codecs {
    /// Folds the spellings clients and tools use onto libavcodec's names, so caps written
    /// as `["avc1", "HEVC", "ec-3"]` mean what their author meant. A codec string as
    /// browsers and Apple's players take it (RFC 6381: `avc1.640028`, `hvc1.2.4.L153.B0`,
    /// `mp4a.40.2`) names its codec by what comes before the first dot (for `mp4a`, by the
    /// object type after it); its profile and level say more than a caps list can use.
    static func canonical(_ name: String) -> String {
        let n = name.lowercased()
        if let dot = n.firstIndex(of: "."), case let family = String(n[..<dot]), family.count == 4 {
            let detail = n[n.index(after: dot)...]
            guard family == "mp4a" else { return canonical(family) }
            switch detail.prefix(2) {
            case "40", "66", "67", "68": return "aac"  // MPEG-4 audio and MPEG-2 AAC's profiles
            case "69", "6b": return "mp3"
            case "a5": return "ac3"
            case "a6": return "eac3"
            default: return n
            }
        }
        switch n {
        case "avc", "avc1", "avc3", "h.264", "x264", "libx264": return "h264"
        case "h265", "h.265", "hvc1", "hev1", "x265", "libx265": return "hevc"
        case "av01", "libaom-av1", "libdav1d", "libsvtav1": return "av1"
        case "vp09", "libvpx-vp9": return "vp9"
        case "vp08", "libvpx": return "vp8"
        case "xvid", "divx", "mp4v": return "mpeg4"
        case "mpeg2", "mp2v": return "mpeg2video"
        case "dvhe", "dvh1", "dovi", "dolbyvision", "dolby-vision", "dv": return dolbyVision
        case "mp4a", "aac_latm", "he-aac", "aac-lc": return "aac"
        case "ac-3", "a52": return "ac3"
        case "e-ac-3", "ec-3", "ec3", "ddp": return "eac3"
        case "mp3float", "mpeg3", "mp3adu": return "mp3"
        case "mp2float": return "mp2"
        case "dca", "dts-hd", "dtshd": return "dts"
        case "true-hd", "mlp": return "truehd"
        case "fla", "flac ": return "flac"
        case "lpcm": return "pcm"
        default: return n
        }
    }

    /// The word a device lists in `codecs_video` to say it decodes Dolby Vision itself
    /// (needed for profile 5, whose base layer alone is not watchable).
    static let dolbyVision = "dolby_vision"

    static func canonicalContainer(_ name: String) -> String {
        switch name.lowercased() {
        case "m4v", "m4a", "mp4v", "isom": return "mp4"
        case "matroska", "mka": return "mkv"
        case "mpegts", "m2ts", "mts": return "ts"
        case "quicktime", "qt": return "mov"
        default: return name.lowercased()
        }
    }

    /// Video codecs the MP4 muxer writes and players find in MP4 (ISO/IEC 14496-12/15 and
    /// the AV1/VP9 ISOBMFF bindings). VP8 and Theora have no MP4 binding.
    static let mp4Video: Set<String> = ["h264", "hevc", "av1", "vp9", "mpeg4", "mpeg2video", "mpeg1video"]

    /// How many times a source's bitrate H.264 may take to keep what the source shows:
    /// HEVC and VP9 say as much in about half the bits, AV1 in less, and a second encode
    /// (often with a rescale) loses detail the source's own bits kept. Measured on a clean
    /// 300 kbit/s 1080p H.264 made 720p: x 1.25 cost 0.008 SSIM, x 2.5 0.005 at two
    /// thirds of the rung's bits.
    static func h264BitrateFactor(_ codec: String) -> Double {
        switch canonical(codec) {
        case "hevc", "vp9": 4
        case "av1": 5
        default: 2.5
        }
    }
    /// How many times a source's bitrate H.264 takes, as a rule, for the same picture:
    /// HEVC and VP9 about half H.264's bits, AV1 about two fifths (what every codec
    /// comparison finds at streaming rates). Where `original` must re-encode a picture, its
    /// rung is chosen for that many bits: a 1.9 Mbps HEVC 720p had gone to the 2 Mbps rung's
    /// 1.8 Mbps of H.264 (43.1 dB PSNR, against 46.3 at 5 Mbps).
    static func h264Equivalence(_ codec: String) -> Double {
        switch canonical(codec) {
        case "hevc", "vp9": 2
        case "av1": 2.5
        default: 1
        }
    }
    /// Reordered video whose presentation times the media engine derives where the source
    /// gives decode times only: H.264 and HEVC, whose slice headers carry each picture's
    /// order count.
    static let presentationTimesDerivable: Set<String> = ["h264", "hevc"]
    /// Audio codecs MP4 carries. DTS, TrueHD, Vorbis and PCM are left out: either no
    /// registered sample entry or no player that reads them from MP4. FLAC in MP4 needs
    /// `-strict experimental` with FFmpeg before 6.0; the engine owns that flag.
    static let mp4Audio: Set<String> = ["aac", "ac3", "eac3", "mp3", "alac", "opus", "flac"]

    /// Whether a source audio stream's packets can be copied into MP4: its codec is one MP4
    /// carries, in a framing MP4 takes or the media engine takes it out of. AAC in LATM
    /// (broadcast TS: DVB, ISDB-Tb) is the AAC a device decodes, taken out of its framing
    /// frame by frame (`LATMFrames`; a layout it does not take is re-encoded then).
    static func copiesIntoMP4(_ codec: String) -> Bool {
        mp4Audio.contains(canonical(codec)) && codec.lowercased() != "mp3adu"
    }

    /// Text subtitle codecs libavcodec decodes and can re-encode as `mov_text` (DVB teletext:
    /// its subtitle page, through libzvbi, which Debian's libavcodec is built with).
    static let textSubtitles: Set<String> = [
        "subrip", "srt", "ass", "ssa", "mov_text", "webvtt", "text", "microdvd", "subviewer",
        "subviewer1", "realtext", "sami", "stl", "jacosub", "mpl2", "pjs", "vplayer", "dvb_teletext",
        // CEA-608 captions in a track of their own (QuickTime's c608).
        "eia_608",
        // TTML (IMSC, EBU-TT-D) in MP4, read by the engine's own reader (`TTMLCues`).
        "ttml",
    ]

    /// Transfer characteristics (libavutil names) that only look right on an HDR display.
    static let hdrTransfers: Set<String> = ["smpte2084", "arib-std-b67"]

    /// Bit depth from the stream, else from its pixel format name; 8 when unknown.
    static func bitDepth(_ s: StreamInfo) -> Int {
        if let d = s.bitDepth, d > 0 { return d }
        guard let f = s.pixelFormat?.lowercased() else {
            let p = s.profile?.lowercased() ?? ""
            return p.includes("10") ? 10 : 8
        }
        for (marker, depth) in [("16", 16), ("14", 14), ("12", 12), ("10", 10), ("9", 9)] where f.includes("p\(marker)") {
            return depth
        }
        if f.hasPrefix("p010") { return 10 }
        return 8
    }

    /// Whether an H.264 profile is one hardware decoders take (unknown: assumed so). The
    /// high profiles past High are known by their depth or chroma, all but one: x264's
    /// lossless mode (`-qp 0`, OBS's lossless recordings) is High 4:4:4 Predictive in
    /// 8-bit 4:2:0, whose transform bypass no phone or TV decodes.
    static func hardwareH264Profile(_ profile: String?) -> Bool {
        guard let p = profile?.lowercased(), !p.isEmpty else { return true }
        return ["baseline", "constrained baseline", "main", "extended", "high",
                "multiview high", "stereo high"].contains(p)
    }

    /// Chroma subsampling (420, 422, 444) from the stream, else its pixel format or profile; 420 when unknown.
    static func chroma(_ s: StreamInfo) -> Int {
        if let c = s.chroma, c > 0 { return c }
        if let f = s.pixelFormat?.lowercased() {
            if f.includes("444") || f.hasPrefix("gbr") || f.hasPrefix("rgb") || f.hasPrefix("bgr") { return 444 }
            if f.includes("422") || f.hasPrefix("yuyv") || f.hasPrefix("uyvy") { return 422 }
            if f.includes("411") { return 411 }
            if f.includes("440") { return 440 }
            return 420
        }
        let p = s.profile?.lowercased() ?? ""
        if p.includes("4:4:4") { return 444 }
        if p.includes("4:2:2") { return 422 }
        return 420
    }

    /// Whether the picture needs an HDR display: PQ or HLG transfer, HDR10/HLG, or Dolby
    /// Vision whose base layer is not plain SDR. A Dolby Vision stream whose base layer
    /// claims SDR but whose transfer is PQ (it happens: see sp_sparks_dovi_8.mp4) is HDR.
    static func isHDR(_ s: StreamInfo) -> Bool {
        if let t = s.colorTransfer?.lowercased(), hdrTransfers.contains(t) { return true }
        if let dv = s.dolbyVision { return dv.baseLayer != .sdr }
        switch s.hdr {
        case .hdr10?, .hlg?: return true
        case .dolbyVision?: return true
        default: return false
        }
    }

    /// The HDR format a display must show for an HDR picture (`DeviceCaps.hdrFormats`):
    /// `hlg` for HLG (also a Dolby Vision base layer in HLG), `hdr10` for PQ (HDR10, HDR10+,
    /// a Dolby Vision base layer in PQ), `dolby_vision` for Dolby Vision without a base
    /// layer to fall back on.
    static func hdrFormat(_ s: StreamInfo) -> String {
        if s.dolbyVisionWithoutBaseLayer { return dolbyVision }
        if s.colorTransfer?.lowercased() == "arib-std-b67" || s.hdr == .hlg || s.dolbyVision?.baseLayer == .hlg { return "hlg" }
        return "hdr10"
    }

    /// true: text `mov_text` can carry (`textSubtitles`); false: pictures; nil: neither, or
    /// text libavcodec has no decoder for here (Blu-ray TextST, ARIB captions), which a
    /// conversion would fail on, and with it the whole artifact.
    static func isTextSubtitle(_ s: StreamInfo) -> Bool? {
        let codec = s.codec.lowercased()
        // Pictures, as the probe found (TTML in its image profile), whatever the codec.
        if s.textSubtitle == false || ["hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle", "xsub"].contains(codec) {
            return false
        }
        if textSubtitles.contains(codec) { return true }
        return nil
    }

    /// The frame rate when it is believable (`StandardFrameRate.fastestBelievable`): above,
    /// it is treated as unknown (no step-down, levels sized for 30 fps). A rate
    /// near a standard one is that one (`StandardFrameRate`): 30.001 from Matroska's
    /// milliseconds would need the next H.264 level up for the pictures the encoder makes at 30.
    static func frameRate(_ s: StreamInfo) -> Double? {
        guard let r = s.frameRate, r.isFinite, r > 0, r <= StandardFrameRate.fastestBelievable else { return nil }
        return StandardFrameRate.nearest(r).map { Double($0.num) / Double($0.den) } ?? r
    }

    /// Clockwise rotation folded into 0, 90, 180 or 270.
    static func rotation(_ s: StreamInfo) -> Int {
        guard let r = s.rotation else { return 0 }
        let m = ((r % 360) + 360) % 360
        return (m + 45) / 90 * 90 % 360
    }
}
