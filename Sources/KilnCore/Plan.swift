/// The exact output a request resolves to (CONTRACT.md section 2). The planner makes it,
/// the media engine carries it out, the farm stores it; its normalised form is hashed
/// into the artifact key.
public struct Plan: Codable, Sendable, Equatable {
    public var quality: Quality
    public var effectiveQuality: Quality
    public var deliveryFormat: DeliveryFormat
    /// 0 for original and remux; the rung's cap for a transcode.
    public var targetBitrateKbps: Int
    /// Output container: the source's for `original`, "mp4" otherwise.
    public var container: String
    @Nullable public var video: VideoPlan?
    /// For a copied picture: the encode that replaces the copy if the copy stops (an
    /// H.264/HEVC stream that changes its picture size mid-stream, which one MP4 sample
    /// entry cannot carry; damage the muxer cannot take). Made from the same inputs as the
    /// rest of the plan, so not part of its key.
    public var videoFallback: VideoPlan?
    @Nullable public var audio: AudioPlan?
    /// For a copied sound: the encode that replaces the copy if the copy stops (its format
    /// changes mid-stream, damage the muxer cannot take), made by the device's rules (its
    /// codecs, its channels). Not part of the key, as `videoFallback`; nil where the
    /// engine's own (AAC at the copy's channels) is the device's too.
    public var audioFallback: AudioPlan?
    public var subtitles: [SubtitlePlan]
    /// Stable machine words saying why (e.g. `container_unsupported`, `source_fits_target`).
    public var reasons: [String]
    public var artifactKey: String
    /// The caps' fields Kiln does not know, as the client wrote them (`DeviceCaps.ignoredFields`):
    /// they shaped nothing. nil if none.
    public var ignoredCaps: [String]?

    public init(quality: Quality, effectiveQuality: Quality, deliveryFormat: DeliveryFormat,
                targetBitrateKbps: Int, container: String, video: VideoPlan?, audio: AudioPlan?,
                subtitles: [SubtitlePlan], reasons: [String], artifactKey: String) {
        self.quality = quality
        self.effectiveQuality = effectiveQuality
        self.deliveryFormat = deliveryFormat
        self.targetBitrateKbps = targetBitrateKbps
        self.container = container
        self.video = video
        self.audio = audio
        self.subtitles = subtitles
        self.reasons = reasons
        self.artifactKey = artifactKey
    }

    /// The source streams whose pictures or sound go out (a merged sound's each).
    public var keptSourceIndices: [Int] { [video?.sourceIndex].compactMap { $0 } + (audio?.sourceIndices ?? []) }

    enum CodingKeys: String, CodingKey {
        case quality, effectiveQuality = "effective_quality", deliveryFormat = "delivery_format"
        case targetBitrateKbps = "target_bitrate_kbps", container, video, audio, subtitles, reasons
        case artifactKey = "artifact_key", videoFallback = "video_fallback", audioFallback = "audio_fallback"
        case ignoredCaps = "ignored_caps"
    }
}

public enum StreamAction: String, Codable, Sendable {
    case copy, transcode
}

public struct VideoPlan: Codable, Sendable, Equatable {
    public var sourceIndex: Int
    public var action: StreamAction
    /// Output codec: the source's when copied, "h264" when transcoded.
    public var codec: String
    /// Output frame size as stored (after deinterlace, rotation and scaling; square pixels).
    public var width: Int
    public var height: Int
    /// Video budget of the rung in kbit/s; 0 when copied.
    public var bitrateKbps: Int
    /// HDR (HDR10, HLG, Dolby Vision base layer) is mapped to SDR BT.709.
    public var toneMap: Bool
    /// The source is interlaced and is deinterlaced before scaling.
    public var deinterlace: Bool
    /// The source is film in 3:2 pulldown (`StreamInfo.telecined`; pictures flagged
    /// interlaced, or progressive ones with the pulldown baked in): its fields
    /// are matched back into film frames and one picture in five (the repeat) is left out,
    /// 29.97 becoming 23.976; pictures no match makes whole are deinterlaced. nil when not.
    public var inverseTelecine: Bool?
    /// The interlaced source carries progressive pictures (`StreamInfo.progressiveFrames`:
    /// PAL's 25PsF, 29.97p stored interlaced, 2:2 shifted by a field): each picture's
    /// fields are matched with its own or a neighbour's into the whole picture, at the
    /// source's rate, instead of deinterlaced from half its lines; pictures no match makes
    /// whole are deinterlaced. nil when not (and with `inverseTelecine`, which matches too).
    public var fieldMatch: Bool?
    /// Clockwise degrees the source's display matrix asks for. A copy carries the matrix;
    /// a transcode applies it to the pixels (width/height are then the upright size).
    public var rotation: Int
    /// The display matrix also mirrors the picture (`StreamInfo.mirrored`); a transcode
    /// mirrors the pixels with the turn. nil when not.
    public var mirrored: Bool?
    @Nullable public var encoder: EncoderSettings?
    /// A transcode only: the most pictures a second it shows; a source above it shows every
    /// n-th picture (`FrameRateLimit`). Set only where the source's rate is above it, nil
    /// where the encode keeps the source's rate.
    public var maxFrameRate: Double?

    public init(sourceIndex: Int, action: StreamAction, codec: String, width: Int, height: Int,
                bitrateKbps: Int, toneMap: Bool = false, deinterlace: Bool = false, rotation: Int = 0,
                encoder: EncoderSettings? = nil, maxFrameRate: Double? = nil, inverseTelecine: Bool? = nil, fieldMatch: Bool? = nil,
                mirrored: Bool? = nil) {
        self.sourceIndex = sourceIndex
        self.action = action
        self.codec = codec
        self.width = width
        self.height = height
        self.bitrateKbps = bitrateKbps
        self.toneMap = toneMap
        self.deinterlace = deinterlace
        self.rotation = rotation
        self.encoder = encoder
        self.maxFrameRate = maxFrameRate
        self.inverseTelecine = inverseTelecine
        self.fieldMatch = fieldMatch
        self.mirrored = mirrored
    }

    enum CodingKeys: String, CodingKey {
        case sourceIndex = "source_index", action, codec, width, height, bitrateKbps = "bitrate_kbps"
        case toneMap = "tone_map", deinterlace, inverseTelecine = "inverse_telecine", fieldMatch = "field_match", rotation, mirrored, encoder, maxFrameRate = "max_frame_rate"
    }
}

/// Every setting that shapes a video encode, so anyone can reproduce it with another tool.
public struct EncoderSettings: Codable, Sendable, Equatable {
    /// libavcodec encoder name, "libx264".
    public var name: String
    public var preset: String
    /// Capped CRF: quality target, bounded by maxrate/bufsize (VBV).
    public var crf: Double
    public var maxrateKbps: Int
    public var bufsizeKbps: Int
    public var profile: String
    /// H.264 level as a string ("4.1").
    public var level: String
    public var gopSeconds: Double
    public var pixFmt: String

    public init(name: String = "libx264", preset: String, crf: Double, maxrateKbps: Int, bufsizeKbps: Int,
                profile: String, level: String, gopSeconds: Double, pixFmt: String = "yuv420p") {
        self.name = name
        self.preset = preset
        self.crf = crf
        self.maxrateKbps = maxrateKbps
        self.bufsizeKbps = bufsizeKbps
        self.profile = profile
        self.level = level
        self.gopSeconds = gopSeconds
        self.pixFmt = pixFmt
    }

    enum CodingKeys: String, CodingKey {
        case name, preset, crf, maxrateKbps = "maxrate_kbps", bufsizeKbps = "bufsize_kbps"
        case profile, level, gopSeconds = "gop_seconds", pixFmt = "pix_fmt"
    }
}

public struct AudioPlan: Codable, Sendable, Equatable {
    public var sourceIndex: Int
    public var action: StreamAction
    /// Output codec: the source's when copied; "aac", "ac3" or "eac3" when re-encoded.
    public var codec: String
    public var channels: Int
    /// 0 when copied.
    public var bitrateKbps: Int
    @Nullable public var language: String?
    /// The source streams whose channels follow `sourceIndex`'s in the sound, in order
    /// (`merge_sources`): a camera records its microphone's left and right as two mono
    /// tracks (Sony XAVC, Canon Cinema EOS), and the sound is both, the
    /// first track left, the second right, as ffmpeg's `amerge` makes it. Re-encoded
    /// only (a copy is one stream). nil for a sound of one stream.
    public var mergeSources: [Int]?
    /// The one channel of the source's that is the sound (`source_channel`, from 0): a
    /// dual-mono stream's language (`StreamInfo.dualMono`). Re-encoded only; nil for all.
    public var sourceChannel: Int?

    public init(sourceIndex: Int, action: StreamAction, codec: String, channels: Int, bitrateKbps: Int,
                language: String? = nil, mergeSources: [Int]? = nil) {
        self.sourceIndex = sourceIndex
        self.action = action
        self.codec = codec
        self.channels = channels
        self.bitrateKbps = bitrateKbps
        self.language = language
        self.mergeSources = mergeSources
    }

    /// Every source stream the sound is made of, `sourceIndex` first.
    public var sourceIndices: [Int] { [sourceIndex] + (mergeSources ?? []) }

    enum CodingKeys: String, CodingKey {
        case sourceIndex = "source_index", action, codec, channels, bitrateKbps = "bitrate_kbps", language
        case mergeSources = "merge_sources", sourceChannel = "source_channel"
    }
}

public enum SubtitleAction: String, Codable, Sendable {
    /// `burn`: painted into the re-encoded picture (a forced bitmap track, or a full one's
    /// forced display sets: `Planner`).
    case convert, drop, burn
}

public struct SubtitlePlan: Codable, Sendable, Equatable {
    public var sourceIndex: Int
    public var action: SubtitleAction
    /// "mov_text" when converted; the source codec when dropped or burnt in.
    public var codec: String
    @Nullable public var language: String?
    public var forced: Bool
    /// Why it is dropped (`subtitle_bitmap`) or burnt in (`forced_subtitles_burned_in`), nil when converted.
    public var reason: String?
    /// true when the text comes from the closed captions inside the video stream
    /// `sourceIndex` (`StreamInfo.closedCaptions`), not from a subtitle stream; nil otherwise.
    public var closedCaptions: Bool?
    /// Which caption service the closed captions are ("CC3", "SERVICE1": `StreamInfo.captionServices`);
    /// nil for CC1.
    public var captionService: String?
    /// The page of the DVB teletext stream `sourceIndex` this track is made of ("888"); nil
    /// for other streams.
    public var teletextPage: String?
    /// true when a full track is burnt in for the display sets its disc flags forced (PGS
    /// composition objects, DVD forced-start commands: the lines spoken in another
    /// language inside the film's subtitles); the rest of it is not painted. nil otherwise.
    public var forcedOnly: Bool?

    public init(sourceIndex: Int, action: SubtitleAction, codec: String, language: String? = nil,
                forced: Bool = false, reason: String? = nil, closedCaptions: Bool? = nil, captionService: String? = nil,
                teletextPage: String? = nil, forcedOnly: Bool? = nil) {
        self.captionService = captionService
        self.forcedOnly = forcedOnly
        self.sourceIndex = sourceIndex
        self.action = action
        self.codec = codec
        self.language = language
        self.forced = forced
        self.reason = reason
        self.closedCaptions = closedCaptions
        self.teletextPage = teletextPage
    }

    enum CodingKeys: String, CodingKey {
        case sourceIndex = "source_index", action, codec, language, forced, reason, closedCaptions = "closed_captions"
        case teletextPage = "teletext_page", captionService = "caption_service", forcedOnly = "forced_only"
    }
}

/// The media engine's recipe version. It enters every artifact key, so bump it whenever
/// the engine would write different bytes for the same plan (a filter, a muxer flag).
/// 2: text subtitles' overlapping cues share samples instead of being pushed late.
/// 3: gaps in copied sound filled with silence; a transcode's frame grid at the rate most
///    frames come at (and below 1 fps); SDR in BT.2020, and HD in BT.601's matrix,
///    converted to BT.709.
/// 4: HDR tone-mapped after BT.2408 (reference white 203 nits, Möbius to the content's
///    peak) instead of Hable from 100 nits.
/// 5: PCM of 9, 11, 13–15 or 17 channels mixed down in WAVE's order (its frames had all
///    been refused, and the sound came out as silence); a rate under one picture a second
///    kept to a thousandth of itself for a copy's fallback encode (1/60 had been 0.017).
/// 6: a reordered video's last picture after a pause kept at its time (it had been put on
///    the picture before the pause), and its track lasting to that picture's end.
/// 7: a transcode's constant rate timed in tenths of a frame (pictures off its grid keep
///    their own times instead of being dropped), and its rate the probe's where a track
///    declares one over 1.5 times that.
/// 8: a variable-rate transcode's last picture lasting as long as the source's says (up to
///    the longest step between its pictures), not one frame of the rate; an AVI whose
///    stream header's rate is damaged timed by its main header's where the sound agrees;
///    reordered pictures with decode times only (AVI) re-encoded at their times (H.264
///    and HEVC from their order, MPEG-4 Part 2 on the frame clock); inverse telecine's
///    film kept at its first picture's time.
/// 9: reordered H.264/HEVC whose two times are both the decode time (ffmpeg's MXF, an MP4
///    without composition offsets) timed from its pictures' order; HDR tone-mapped from
///    the primaries and matrix it states; SDR in P3 converted to BT.709, and HD in the
///    FCC's or SMPTE 240M's matrix; BT.601 to BT.709 YCbCr rounded exactly.
/// 10: a transcode's chroma read where the source sites it and written where players look
///    for it (left, once rotated): centre- and top-left-sited sources, every shrunk one and
///    every rotated one had it up to half a pixel off.
/// 11: chroma that must move where no scale resamples it (a quarter-turned or centre-sited
///    picture at its own size) re-sited by zscale on the 4:2:0 planes, not through 4:4:4.
/// 12: an HDR picture tone-mapped at its own size gets its chroma where the rotation wants
///    it from the tone map's last zscale, not left and then moved by a second one.
/// 13: a variable-rate transcode's keyframes at least every `gop_seconds` in time, not
///    only every so many pictures (a 15 fps stretch of a 60 fps clip had them 2.33 s apart);
///    AC-3 or E-AC-3 that changes its layout or rate mid-stream re-encoded, not copied under
///    its first frames' sample entry.
/// 14: a steady transcode's grid at its standard base rate where its average falls a little
///    short (one picture held, one missing) and is no standard rate; an MP4 sample the file
///    ends inside left out; a movie-fragment MP4 read afresh after the probe (its last
///    fragment had been read twice).
/// 15: a broadcast's sound that goes on in another codec on its PID decoded in each codec
///    (AC-3 that went on as AAC had lost its sound after the change, and answered ok).
public enum EngineRecipe {
    public static let version = 15
}

extension Plan {
    /// An original is the file at its path, not any file with its content: the daemon keys
    /// it with the planner's key (content and delivery) and the path, so two copies of a film
    /// in a library are two artifacts, each served from its own file.
    public static func originalKey(_ key: String, path: String) -> String {
        SHA256.hex(key + "path=" + path + "\n")
    }
}
