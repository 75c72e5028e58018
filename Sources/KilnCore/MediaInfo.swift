/// What `prep-artifact probe` learns about a source file. The planner decides from this
/// alone, so everything that makes a stream playable or not on a device is here.
public struct MediaInfo: Codable, Sendable, Equatable {
    /// Which probe described a file; raised when the probe learns something plans depend
    /// on (2: codec tags; 3: reordered pictures without presentation times, encryption; 4:
    /// FairPlay and Windows Media DRM; 5: closed captions in the video, teletext subtitle
    /// pages; 7: CEA-708 caption services, sound bitrates measured where the container
    /// gives none, fragmented MP4; 8: 120 and 240 fps in millisecond time bases are
    /// constant, QuickTime text tracks forced by their display flags, track names from MP4
    /// handler names; 9: index damage; 14: a picture track declared as sound is index
    /// damage, a movie box whose children do not tile it, or a
    /// track whose sample tables fall far short of it, is refused; 15: DV's field order from
    /// its bitstream, not its container; 16: hard telecine found in interlaced 29.97; 17:
    /// progressive pictures found in interlaced ones; 18: an FLV's declared end time taken
    /// for its length no more; 19: the rate of a stream of three to seven pictures measured;
    /// 20: pulldown looked for in SD pictures flagged progressive; 21: field-coded H.264 in a
    /// container that says progressive; 22: Matroska without Cues, a Matroska Duration far
    /// from what the packets' rate says, Matroska tracks' BCP 47 language, enabled flag and
    /// compression; 23: Matroska's WebVTT track as webvtt, Matroska's default edition's
    /// chapters, ordered chapters said, the colours a container states where the bitstream
    /// states none, the container by its MP4 brand or Matroska DocType; 24: Matroska clusters stored out of
    /// order; 25: MP4 recordings appended after one header read joined, `recordings_appended`,
    /// their length the sum; 26: Matroska clusters of unknown size in a Segment of known size
    /// said, MP4 recordings appended each with its own header coded otherwise refused, a
    /// length the bytes cannot hold and a still picture in a video container refused at the
    /// probe, picture streams without packets marked `packetless`), so a description cached by an older one is not planned from.
    public static let describerVersion = 27

    /// The key a description of the file with this fingerprint is cached under.
    public static func cacheKey(fingerprint: String) -> String { "d\(describerVersion):\(fingerprint)" }

    /// libavformat's demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2" or "matroska,webm".
    public var formatName: String
    /// The container as devices name it: mp4, mov, mkv, webm, ts, avi, … (see `Container`).
    public var container: String
    public var durationSeconds: Double
    public var startSeconds: Double
    /// Overall bitrate in bit/s (file size over duration when the container says nothing).
    public var bitRate: Int
    public var sizeBytes: Int64
    public var streams: [StreamInfo]
    public var chapters: [Chapter]
    /// Content fingerprint of the file (see `SourceFingerprint`); identifies the source in
    /// artifact keys and the probe cache.
    public var fingerprint: String?
    /// Things the probe noticed but could not settle (e.g. a truncated mdat), or that Kiln
    /// does not follow: `ordered_chapters` (a Matroska edition that plays its chapters as a
    /// timeline of their own: the file's whole timeline is delivered), `linked_segments`
    /// (that timeline takes parts from other files, which are not included).
    public var warnings: [String]
    /// An MP4 or QuickTime file in fragments (movie fragments after a `moov` with `mvex`:
    /// screen recorders, cameras writing as they go, DASH downloads); nil otherwise.
    public var fragmented: Bool?
    /// A Matroska or WebM file without Cues, the index of its keyframes (a recording written
    /// live or to a pipe, `mkvmerge --no-cues`): ExoPlayer cannot seek in it, nor a browser
    /// in such a WebM; nil otherwise.
    public var unindexed: Bool?
    /// Whether the length the container's header declares is not its pictures' and
    /// sound's (an MP4's movie duration against its tracks', a Matroska Duration against its
    /// last cluster): `durationSeconds` is theirs, and a player given the file as it is
    /// would show the wrong length. nil otherwise.
    public var durationWrong: Bool?
    /// Whether a Matroska sound track's laced frames last other than its DefaultDuration
    /// says (a muxer's mistake: doubled, or halved as for HE-AAC's output rate): Kiln times
    /// them by their own length, and a player given the file as it is would space them by
    /// the wrong one (half the sound overlapping, or gaps). nil otherwise.
    public var audioLacingWrong: Bool?
    /// A Matroska or WebM file whose clusters are stored out of the order of their times (a
    /// muxer that flushed them out of order): Kiln reads them in order, and a player given
    /// the file as it is would show pictures out of order or drop them. nil otherwise.
    public var clustersReordered: Bool?
    /// A Matroska or WebM file whose clusters have no size (as a live muxer writes them)
    /// inside a Segment that has one (mkvmerge keeps them so when it remuxes a live
    /// recording): Kiln reads them whole, and a player built on libavformat given the file
    /// as it is leaves the first such cluster out. nil otherwise.
    public var clustersUnsized: Bool?
    /// Why the index the file's header holds cannot be the file's, a fact and then what it
    /// means ("stream 0's index places a sample … past the file's end (… bytes): the file is
    /// cut short or its offsets are damaged"). Such a file never goes out as it is. nil otherwise.
    public var indexDamage: String?
    /// Why a track's times in the header cannot be the file's (an MP4 track whose times
    /// drift from the pictures' across the file: its timescale or edit damaged). No plan
    /// puts that track right, so a plan that keeps it is refused (`source_corrupt`). nil otherwise.
    public var timingDamage: String?
    /// The track `timingDamage` is about; a plan that leaves it out (another language, a
    /// camera's third channel) is carried out. nil where unknown (probes made before it).
    public var timingDamageStream: Int?

    public init(formatName: String, container: String, durationSeconds: Double, startSeconds: Double = 0,
                bitRate: Int, sizeBytes: Int64, streams: [StreamInfo], chapters: [Chapter] = [],
                fingerprint: String? = nil, warnings: [String] = []) {
        self.formatName = formatName
        self.container = container
        self.durationSeconds = durationSeconds
        self.startSeconds = startSeconds
        self.bitRate = bitRate
        self.sizeBytes = sizeBytes
        self.streams = streams
        self.chapters = chapters
        self.fingerprint = fingerprint
        self.warnings = warnings
    }

    enum CodingKeys: String, CodingKey {
        case formatName = "format_name", container, durationSeconds = "duration_seconds"
        case startSeconds = "start_seconds", bitRate = "bit_rate", sizeBytes = "size_bytes"
        case streams, chapters, fingerprint, warnings, fragmented, unindexed, indexDamage = "index_damage", timingDamage = "timing_damage"
        case durationWrong = "duration_wrong", audioLacingWrong = "audio_lacing_wrong", clustersReordered = "clusters_reordered"
        case clustersUnsized = "clusters_unsized"
        case timingDamageStream = "timing_damage_stream"
    }

    public var videoStreams: [StreamInfo] { streams.filter { $0.type == .video && !$0.disposition.attachedPicture } }
    public var audioStreams: [StreamInfo] { streams.filter { $0.type == .audio } }
    public var subtitleStreams: [StreamInfo] { streams.filter { $0.type == .subtitle } }
    public func stream(_ index: Int) -> StreamInfo? { streams.first { $0.index == index } }
}

public enum StreamType: String, Codable, Sendable {
    case video, audio, subtitle, attachment, data, unknown
}

public enum FieldOrder: String, Codable, Sendable {
    case progressive, tt, bb, tb, bt, unknown
    /// True when the frames are interlaced and need deinterlacing before scaling.
    public var isInterlaced: Bool { self == .tt || self == .bb || self == .tb || self == .bt }
}

public enum HDRKind: String, Codable, Sendable {
    case sdr, hdr10, hlg, dolbyVision = "dolby_vision"
    public var isHDR: Bool { self != .sdr }
}

/// Dolby Vision configuration: from the container's dvcC/dvvC record, or from RPU NAL
/// units in the bitstream when the container says nothing.
public struct DolbyVision: Codable, Sendable, Equatable {
    public var profile: Int
    public var level: Int
    public var rpuPresent: Bool
    public var elPresent: Bool
    public var blPresent: Bool
    /// 0 none (profile 5, IPTPQc2: not watchable without DV), 1 HDR10, 2 SDR, 4 HLG, 6 BT.2100 PQ.
    public var blCompatibilityId: Int
    /// "container" or "bitstream".
    public var signalledIn: String

    public init(profile: Int, level: Int, rpuPresent: Bool = true, elPresent: Bool = false, blPresent: Bool = true,
                blCompatibilityId: Int, signalledIn: String = "container") {
        self.profile = profile
        self.level = level
        self.rpuPresent = rpuPresent
        self.elPresent = elPresent
        self.blPresent = blPresent
        self.blCompatibilityId = blCompatibilityId
        self.signalledIn = signalledIn
    }

    /// What the base layer looks like to a player that ignores Dolby Vision.
    public var baseLayer: HDRKind? {
        switch blCompatibilityId {
        case 1, 6: .hdr10
        case 2: .sdr
        case 4: .hlg
        default: nil   // profile 5 and unknown: the base layer alone is not watchable
        }
    }

    enum CodingKeys: String, CodingKey {
        case profile, level, rpuPresent = "rpu_present", elPresent = "el_present", blPresent = "bl_present"
        case blCompatibilityId = "bl_compatibility_id", signalledIn = "signalled_in"
    }
}

public struct Disposition: Codable, Sendable, Equatable {
    public var isDefault = false
    public var forced = false
    public var hearingImpaired = false
    public var visualImpaired = false
    public var commentary = false
    public var attachedPicture = false

    public init(isDefault: Bool = false, forced: Bool = false, hearingImpaired: Bool = false,
                visualImpaired: Bool = false, commentary: Bool = false, attachedPicture: Bool = false) {
        self.isDefault = isDefault
        self.forced = forced
        self.hearingImpaired = hearingImpaired
        self.visualImpaired = visualImpaired
        self.commentary = commentary
        self.attachedPicture = attachedPicture
    }

    enum CodingKeys: String, CodingKey {
        case isDefault = "default", forced, hearingImpaired = "hearing_impaired"
        case visualImpaired = "visual_impaired", commentary, attachedPicture = "attached_picture"
    }
}

public struct Rational: Codable, Sendable, Equatable, Hashable {
    public var num: Int
    public var den: Int
    public init(_ num: Int, _ den: Int) { self.num = num; self.den = den }
    public var value: Double { den == 0 ? 0 : Double(num) / Double(den) }
    public static let one = Rational(1, 1)
}

public struct StreamInfo: Codable, Sendable, Equatable {
    public var index: Int
    public var type: StreamType
    /// libavcodec's codec name: h264, hevc, av1, vp9, mpeg2video, aac, ac3, eac3, dts, mov_text, …
    public var codec: String
    /// The container's four-character code for the codec, when it has one (MP4/MOV sample
    /// entries such as hvc1 or hev1, AVI's XVID): what some players check before playing.
    public var codecTag: String?
    public var profile: String?
    public var level: Int?
    public var bitRate: Int?
    public var durationSeconds: Double?
    /// When the stream's first packet is presented, in the file's time (a stream may start
    /// later than the others: a recording's pictures half a second after its sound).
    public var startSeconds: Double?
    public var language: String?
    /// The language as a BCP 47 tag where the container gives one that says more than
    /// `language` (Matroska's LanguageIETF: "pt-BR" beside "por", "es-419" beside "spa").
    public var languageTag: String?
    public var title: String?
    public var disposition: Disposition
    /// The container marks the track not to be played (Matroska's FlagEnabled 0); nil
    /// otherwise.
    public var disabled: Bool?
    /// How the container compresses the track's blocks where it does (Matroska's
    /// ContentCompression: "zlib", "bzlib", "lzo", "header_stripping"); nil for none.
    public var compression: String?

    // Video
    public var width: Int?
    public var height: Int?
    public var pixelFormat: String?
    public var bitDepth: Int?
    /// 420, 422 or 444 (chroma subsampling), when known.
    public var chroma: Int?
    public var sampleAspectRatio: Rational?
    public var frameRate: Double?
    public var variableFrameRate: Bool?
    /// A picture stream that gave no packet where another gave many (an ASF file of several
    /// bitrates, one of them recorded): no plan takes it. nil otherwise.
    public var packetless: Bool?
    public var fieldOrder: FieldOrder?
    /// Film carried by 3:2 pulldown baked into the pictures (hard telecine: two frames in
    /// five repeat a field), found by comparing the fields of pictures at three places in
    /// the file (`FieldSurvey`): true for film, false for video; nil where too few pictures
    /// moved to tell or the places disagree, or not looked for (only 29.97 and 30 are,
    /// interlaced, or progressive up to 576 lines at a constant rate: a DVD or an NTSC
    /// broadcast re-encoded with its pulldown left in).
    public var telecined: Bool?
    /// Interlaced pictures whose fields weave whole, each picture's with its own or a
    /// neighbour's (`FieldSurvey`): progressive pictures stored interlaced (PAL's 25PsF,
    /// 29.97p in interlaced MPEG-2, 2:2 shifted by a field; 3:2 pulldown too). false for
    /// video shot interlaced (fields of their own moments); nil where too few pictures
    /// moved, the places disagree, or not interlaced.
    public var progressiveFrames: Bool?
    /// The container gives decode times only, for pictures decoded out of display order
    /// (H.264 with B-frames in AVI): a copy cannot say when each is shown.
    public var presentationTimesMissing: Bool?
    /// Clockwise degrees a player must rotate the frame (0, 90, 180, 270).
    public var rotation: Int?
    /// The display matrix also mirrors the picture (a front camera's selfie left as the
    /// sensor saw it); `rotation` is then the matrix's angle, as libavutil reads it (a
    /// mirror left to right reads as 180). nil when not.
    public var mirrored: Bool?
    public var colorPrimaries: String?
    public var colorTransfer: String?
    public var colorMatrix: String?
    public var colorRange: String?
    public var hdr: HDRKind?
    public var dolbyVision: DolbyVision?
    /// Closed captions travel inside the pictures (ATSC A/53 user data: US
    /// broadcast and cable recordings), seen in the probe's packet scan; nil when none were.
    public var closedCaptions: Bool?
    /// Which caption services carry text: "CC1" (field 1, the programme's captions) and
    /// "CC3" (field 2, often a second language) of CEA-608; where none of those does, CEA-708's
    /// "SERVICE1", "SERVICE2", … (the programme's, a second language, …); nil when none do.
    public var captionServices: [String]?

    // Audio
    /// The most channels the stream carries: where its layout changes along the file
    /// (`formatChanges`), the largest the probe's samples met, not the first frames'.
    public var channels: Int?
    /// The layout of those channels.
    public var channelLayout: String?
    /// The first frames' rate.
    public var sampleRate: Int?
    /// The sound's frames change channels or rate along the file, as broadcast sound does
    /// (stereo adverts around a 5.1 film), seen at samples through a recording
    /// (`SoundFormatSurvey`): one MP4 sample entry cannot carry that as it is. nil when no
    /// change was seen.
    public var formatChanges: Bool?
    /// A fragmented MP4 holding recordings each with its own header, this track coded
    /// otherwise in a later one (another picture size, profile, channel count): a copy
    /// would carry the first header's coding over samples in another, so the track is
    /// re-encoded, its decoder told of each change. nil when it is coded one way.
    public var codingChanges: Bool?
    /// Two mono programmes side by side (AC-3's 1+1, MPEG audio's dual channel, read from
    /// the first frames): a bilingual broadcast, its languages the stream's listed ones
    /// (`languages`) in channel order. nil for any other sound.
    public var dualMono: Bool?

    /// The programmes (MPEG-TS `program_number`s) that list the stream, where the file
    /// holds two or more: a whole multiplex recorded (an HDHomeRun's or a DVB card's full
    /// channel), each programme its own pictures, sound and subtitles. nil in a file of one
    /// programme or none.
    public var programs: [Int]?

    /// In a whole multiplex (`programs`), the bits a second the stream takes of the file's:
    /// its share of the packets' bytes the probe read times the overall rate, which is all
    /// channels'. A programme's streams' sum is the rate of the channel a device gets.
    public var multiplexBitRate: Int?

    /// The stream's samples are encrypted (DRM: CENC/CBCS, FairPlay): they can be delivered
    /// in the file as it is, never decoded or copied into a new file.
    public var encrypted: Bool?

    // Subtitles
    /// true for text subtitles (subrip, ass, mov_text, webvtt), false for bitmaps (PGS, VobSub, DVB).
    public var textSubtitle: Bool?
    /// A DVB teletext stream's subtitle pages, as its map lists them (nil when it lists
    /// none it can be read from: no teletext descriptor).
    public var teletextPages: [TeletextPage]?

    public init(index: Int, type: StreamType, codec: String, codecTag: String? = nil, profile: String? = nil, level: Int? = nil,
                bitRate: Int? = nil, durationSeconds: Double? = nil, language: String? = nil, title: String? = nil,
                disposition: Disposition = Disposition(), width: Int? = nil, height: Int? = nil,
                pixelFormat: String? = nil, bitDepth: Int? = nil, chroma: Int? = nil,
                sampleAspectRatio: Rational? = nil, frameRate: Double? = nil, variableFrameRate: Bool? = nil,
                fieldOrder: FieldOrder? = nil, rotation: Int? = nil, colorPrimaries: String? = nil,
                colorTransfer: String? = nil, colorMatrix: String? = nil, colorRange: String? = nil,
                hdr: HDRKind? = nil, dolbyVision: DolbyVision? = nil, channels: Int? = nil,
                channelLayout: String? = nil, sampleRate: Int? = nil, textSubtitle: Bool? = nil) {
        self.index = index
        self.type = type
        self.codec = codec
        self.codecTag = codecTag
        self.profile = profile
        self.level = level
        self.bitRate = bitRate
        self.durationSeconds = durationSeconds
        self.language = language
        self.title = title
        self.disposition = disposition
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.bitDepth = bitDepth
        self.chroma = chroma
        self.sampleAspectRatio = sampleAspectRatio
        self.frameRate = frameRate
        self.variableFrameRate = variableFrameRate
        self.fieldOrder = fieldOrder
        self.rotation = rotation
        self.colorPrimaries = colorPrimaries
        self.colorTransfer = colorTransfer
        self.colorMatrix = colorMatrix
        self.colorRange = colorRange
        self.hdr = hdr
        self.dolbyVision = dolbyVision
        self.channels = channels
        self.channelLayout = channelLayout
        self.sampleRate = sampleRate
        self.textSubtitle = textSubtitle
    }

    enum CodingKeys: String, CodingKey {
        case index, type, codec, codecTag = "codec_tag", profile, level, bitRate = "bit_rate", durationSeconds = "duration_seconds"
        case startSeconds = "start_seconds", language, languageTag = "language_tag", title, disposition, disabled, compression
        case width, height, pixelFormat = "pixel_format", bitDepth = "bit_depth"
        case chroma, sampleAspectRatio = "sample_aspect_ratio", frameRate = "frame_rate"
        case variableFrameRate = "variable_frame_rate", packetless, fieldOrder = "field_order", telecined, progressiveFrames = "progressive_frames", rotation, mirrored
        case presentationTimesMissing = "presentation_times_missing", encrypted, programs, multiplexBitRate = "multiplex_bit_rate"
        case colorPrimaries = "color_primaries", colorTransfer = "color_transfer", colorMatrix = "color_matrix"
        case colorRange = "color_range", hdr, dolbyVision = "dolby_vision", closedCaptions = "closed_captions", captionServices = "caption_services", channels
        case channelLayout = "channel_layout", sampleRate = "sample_rate", formatChanges = "format_changes", codingChanges = "coding_changes", dualMono = "dual_mono", textSubtitle = "text_subtitle"
        case teletextPages = "teletext_pages"
    }

    /// The languages the stream lists, first its own (a DVB descriptor may name several:
    /// "eng,deu"; a dual-mono stream's are its channels').
    public var languages: [String] { LanguageCode.listed(language) }

    /// Width and height as displayed: sample aspect ratio applied, then rotation.
    public var displaySize: (width: Int, height: Int)? {
        guard let w = width, let h = height, w > 0, h > 0 else { return nil }
        var dw = w
        if let sar = sampleAspectRatio, sar.num > 0, sar.den > 0, sar.num != sar.den {
            dw = Int((Double(w) * sar.value).rounded())
        }
        if let r = rotation, r % 180 != 0 { return (h, dw) }
        return (dw, h)
    }
}

/// One subtitle page of a DVB teletext stream: its number as viewers key it in ("888"),
/// its language, and whether it is the page for the deaf and hard of hearing.
public struct TeletextPage: Codable, Sendable, Equatable {
    public var page: String
    public var language: String?
    public var hearingImpaired: Bool

    public init(page: String, language: String?, hearingImpaired: Bool) {
        self.page = page
        self.language = language
        self.hearingImpaired = hearingImpaired
    }

    enum CodingKeys: String, CodingKey {
        case page, language, hearingImpaired = "hearing_impaired"
    }
}

public struct Chapter: Codable, Sendable, Equatable {
    public var startSeconds: Double
    public var endSeconds: Double
    public var title: String?
    public init(startSeconds: Double, endSeconds: Double, title: String? = nil) {
        self.startSeconds = startSeconds
        self.endSeconds = endSeconds
        self.title = title
    }
    enum CodingKeys: String, CodingKey { case startSeconds = "start_seconds", endSeconds = "end_seconds", title }
}

extension StreamInfo {
    /// Dolby Vision whose base layer alone is nothing a player could show: profile 5
    /// (IPTPQc2), or a stream that says Dolby Vision without naming its base layer (assume
    /// the worst). Only a Dolby Vision decoder, or the RPU applied in software, gives it
    /// its colours.
    public var dolbyVisionWithoutBaseLayer: Bool {
        if let dv = dolbyVision { return dv.baseLayer == nil }
        return hdr == .dolbyVision
    }
}
