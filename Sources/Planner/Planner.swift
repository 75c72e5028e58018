import KilnCore

/// Decides what a request delivers: (source, quality, device caps, policy, presets) → `Plan`.
/// Pure: no files, no clock, no libav; the same inputs always give the same plan.
///
/// The rules, in the order they are tried:
/// - `original` without caps: the source as it is (`source_as_is`).
/// - `original` with caps: as-is when container, picture (codec, bit depth, chroma,
///   resolution, HDR) and the chosen audio track all play (`source_playable`) and a remux
///   has nothing to put right (`remuxFixes`: fragments, Dolby Vision 7 in MP4, a chosen
///   track that is not the one players start with); picture fine but container or audio
///   not: remux into MP4, re-encoding only the audio if need be; otherwise a transcode on
///   the lowest rung that carries the source's bitrate at its frame size (20 Mbps when the
///   bitrate is unknown). `effective_quality` says which.
/// - a bitrate rung: when the source already fits (bitrate, frame class, codecs, HDR) it
///   is delivered as original or remux (`source_fits_target`, effective quality
///   `original`; a remux too where it has something to put right, `remuxFixes`);
///   otherwise a transcode on that rung.
/// - An audio-only source that must be re-encoded at a rung is a transcode on that rung
///   (AAC at the rung's audio bitrate); at `original` it is a remux with compatibility audio.
/// - No video and no audio stream: `quality_unavailable`. So is a device that cannot play
///   what Kiln writes (MP4, H.264, AAC/AC-3/E-AC-3) when the source needs it.
public enum Planner {
    /// Parses the quality word first, so a bad one is `invalid_quality`.
    public static func plan(source: MediaInfo, quality: String, caps: DeviceCaps?, policy: ServerPolicy = .standard,
                            audioLanguage: String? = nil, presets: Presets) throws(KilnError) -> Plan {
        try plan(source: source, quality: Quality(parsing: quality), caps: caps, policy: policy,
                 audioLanguage: audioLanguage, presets: presets)
    }

    public static func plan(source: MediaInfo, quality: Quality, caps: DeviceCaps?, policy: ServerPolicy = .standard,
                            audioLanguage: String? = nil, presets: Presets) throws(KilnError) -> Plan {
        try validate(caps: caps)
        let context = PlanContext(source: source, caps: caps, policy: policy, audioLanguage: audioLanguage, presets: presets)
        var plan = try quality == .original ? context.planOriginal() : context.planRung(quality)
        // A track whose times disagree with the pictures': a copy keeps the wrong times and
        // an encode follows them, so no delivery that plays it, the file as it is included,
        // would play in sync. One the plan leaves out (a camera's third channel, another
        // language) changes nothing.
        if let why = source.timingDamage, source.timingDamageStream.map(plan.keptSourceIndices.contains) ?? true {
            throw KilnError(.sourceCorrupt, stage: .plan, "the source's tracks do not keep time together: \(why)")
        }
        // Two mono programmes side by side: the encode takes the asked language's channel,
        // and the track says that language.
        if let a = plan.audio, a.action == .transcode, a.mergeSources == nil, let s = source.stream(a.sourceIndex), s.dualMono == true {
            let channel = AudioSelection.dualMonoChannel(s, language: audioLanguage)
            plan.audio?.sourceChannel = channel
            plan.audio?.language = s.languages.count > channel ? LanguageCode.terminologic(s.languages[channel]) : a.language
        }
        plan.reasons = unique(plan.reasons)
        plan.ignoredCaps = caps?.ignoredFields
        plan.artifactKey = ArtifactKey.compute(plan: plan, source: source, presetsVersion: presets.version)
        return plan
    }

    /// Caps that parse but describe no usable device. An empty `containers` list, or
    /// empty video and audio lists together, is a client bug worth a 400, not a plan.
    public static func validate(caps: DeviceCaps?) throws(KilnError) {
        guard let caps else { return }
        if let c = caps.containers, c.isEmpty {
            throw KilnError(.invalidCaps, stage: .request, field: "containers", "caps.containers lists no container")
        }
        if let v = caps.codecsVideo, v.isEmpty, let a = caps.codecsAudio, a.isEmpty, (caps.audioPassthroughCodecs ?? []).isEmpty {
            throw KilnError(.invalidCaps, stage: .request, field: "codecs_video", "caps list no video and no audio codec")
        }
    }

    static func unique(_ words: [String]) -> [String] {
        var seen = Set<String>()
        return words.filter { seen.insert($0).inserted }
    }
}

/// One planning run's inputs and the decisions shared by its paths.
struct PlanContext {
    let source: MediaInfo
    let caps: DeviceCaps?
    let policy: ServerPolicy
    let audioLanguage: String?
    let presets: Presets
    let device: Device
    let video: StreamInfo?
    /// A camera's mono tracks that make one stereo sound (`MonoPairs`).
    let monoPairs: MonoPairs

    init(source: MediaInfo, caps: DeviceCaps?, policy: ServerPolicy, audioLanguage: String?, presets: Presets) {
        // (A picture stream that gave no packet where another did is no choice: `packetless`.)
        let videos = AudioSelection.enabledFirst(source.videoStreams.filter { $0.packetless != true })
        let video = videos.first { $0.disposition.isDefault } ?? videos.first
        let programme = Self.programme(of: video, in: source)
        self.monoPairs = MonoPairs(programme)
        self.source = programme
        self.caps = caps
        self.policy = policy
        self.audioLanguage = audioLanguage
        self.presets = presets
        self.device = Device(caps)
        self.video = video
    }

    /// A whole multiplex recorded (`StreamInfo.programs`) is planned as the chosen
    /// picture's programme: its sound and subtitles, and streams no programme lists. The
    /// best-fitting sound of another channel went with the first channel's pictures (a
    /// subchannel's 192 kbit/s stereo beside the main one's 384 kbit/s 5.1, at a rung whose
    /// budget both exceed). Without pictures (a radio multiplex) every stream is a choice.
    /// Its rate is its streams' part of the multiplex's (`StreamInfo.multiplexBitRate`),
    /// where the probe measured the pictures'.
    static func programme(of video: StreamInfo?, in source: MediaInfo) -> MediaInfo {
        guard let video, let own = video.programs, !own.isEmpty else { return source }
        var programme = source
        programme.streams = source.streams.filter { s in s.programs.map { !Set($0).isDisjoint(with: own) } ?? true }
        if video.multiplexBitRate != nil {
            programme.bitRate = programme.streams.compactMap(\.multiplexBitRate).reduce(0) { min($0 + max($1, 0), 1 << 50) }
        }
        return programme
    }

    /// Why the source's file cannot go to the device as it is although its streams play:
    /// its container, or its video track's sample entry (`videoTagProblem`).
    var containerProblems: [String] {
        (device.playsContainer(source.container) ? [] : ["container_unsupported"]) + (videoTagProblem.map { [$0] } ?? [])
    }

    /// What a remux would put right in a file the device could otherwise take as it is,
    /// with `chosen` the audio track going out; nothing where a remux is not possible (the
    /// device takes no MP4, the picture does not copy into MP4, the source is encrypted):
    /// the file as it is is then better than a transcode.
    /// - An MP4 in fragments without a segment index (`MediaInfo.fragmented`): ExoPlayer
    ///   cannot seek in it, nor always tell its length. The remux writes one index, in front.
    /// - A Matroska or WebM file without Cues (`MediaInfo.unindexed`: written live or to a
    ///   pipe, a recorder stopped abruptly): ExoPlayer cannot seek in it, nor a browser in
    ///   such a WebM. The remux's MP4 has its index in front.
    /// - A Matroska track whose blocks are compressed (zlib, as mkvmerge does to VobSub by
    ///   default and to any track asked; `StreamInfo.compression`): ExoPlayer undoes only
    ///   header stripping, and plays zlib's bytes as they are (garbage), or refuses the file
    ///   where the algorithm is written out. The remux writes the tracks as they decode.
    /// - A header whose length is not the film's (`MediaInfo.durationWrong`: a Matroska
    ///   Duration ten times the film, or a tenth of it; an MP4 movie duration against its
    ///   tracks'): players show it and size their seek bar by it. The remux writes the
    ///   film's own.
    /// - Matroska sound laced by a DefaultDuration that is not its frames' length
    ///   (`MediaInfo.audioLacingWrong`): a player spaces the frames by it, overlapping half
    ///   the sound or leaving gaps. The remux times them by their own.
    /// - Dolby Vision profile 7 in MP4 (a UHD Blu-ray's two layers in one track): no MP4
    ///   player decodes it; the remux keeps its HDR10 base layer. (In Matroska a TV box
    ///   that lists it may play it.)
    /// - `chosen` is not the track a player starts with (`audioTrackProblems`).
    func remuxFixes(_ chosen: StreamInfo?) -> [String] {
        guard device.playsMP4, !encrypted, video.flatMap(mp4CopyProblem) == nil else { return [] }
        var fixes: [String] = []
        if source.fragmented == true { fixes.append("container_fragmented") }
        if source.unindexed == true { fixes.append("container_unindexed") }
        if source.durationWrong == true { fixes.append("container_duration_wrong") }
        if source.audioLacingWrong == true { fixes.append("container_audio_lacing_wrong") }
        if source.streams.contains(where: { $0.compression.map { $0 != "header_stripping" } == true }) {
            fixes.append("container_compressed_tracks")
        }
        // Reordered pictures an MP4 gives decode times only (no composition offsets, as a
        // muxer that lost them writes): as they are, players show them in decode order.
        // (A container the device does not take is the remux's reason already.)
        if video?.presentationTimesMissing == true, containerProblems.isEmpty { fixes.append("video_timestamps_missing") }
        if video?.dolbyVision?.profile == 7, ["mp4", "mov", "m4v"].contains(source.container) { fixes.append("dolby_vision_base_layer_only") }
        return fixes + (chosen.map(audioTrackProblems) ?? [])
    }

    /// An index that cannot be the file's (`MediaInfo.indexDamage`: cut short, a sample
    /// table damaged): the file never goes out as it is, for any device. The remux copies
    /// what the file holds and its checks decide whether that is the film (a few samples
    /// short) or not (`source_corrupt`).
    var indexDamaged: Bool { source.indexDamage != nil }
    /// Matroska clusters stored out of the order of their times (`MediaInfo.clustersReordered`):
    /// every player reads them as stored, showing pictures out of order or dropping them,
    /// so such a file never goes out as it is either, even where no remux is possible (VP8
    /// in WebM): Kiln's remux or transcode reads them in order.
    var clustersReordered: Bool { source.clustersReordered == true }
    /// Matroska clusters of unknown size inside a Segment of known size
    /// (`MediaInfo.clustersUnsized`): a player whose demuxer is libavformat's (Kodi, most
    /// players on Android TV boxes) leaves the first of them out, and no caps say which
    /// demuxer a device has; Kiln's remux reads them whole.
    var clustersUnsized: Bool { source.clustersUnsized == true }
    /// Recordings each with its own header, a picture or sound track coded otherwise in a
    /// later one (`StreamInfo.codingChanges`): a player reads the first header only, as
    /// libavformat does, and decodes the later samples wrongly.
    var codingChanges: Bool { source.streams.contains { $0.codingChanges == true } }
    /// Whether the file never goes out as it is, to any device.
    var neverAsIs: Bool { indexDamaged || clustersReordered || clustersUnsized || codingChanges }
    /// The container's reasons among `damage` (those of `clustersReordered` and `clustersUnsized`).
    var containerDamage: [String] {
        (clustersReordered ? ["container_clusters_reordered"] : []) + (clustersUnsized ? ["container_clusters_unsized"] : [])
    }
    var damage: [String] { (indexDamaged ? ["source_index_damaged"] : []) + containerDamage }

    /// HEVC in MP4/MOV tagged `hev1` (Dolby Vision: `dvhe`) keeps its parameter sets in the
    /// stream instead of the sample entry. Apple's players (iOS, tvOS, Safari) refuse such a
    /// track, and caps cannot say whether the device is one of them; the remux writes
    /// `hvc1`, which plays wherever `hev1` does, so such a file is always remuxed.
    var videoTagProblem: String? {
        guard let v = video, Codecs.canonical(v.codec) == "hevc", let tag = v.codecTag, ["hev1", "dvhe"].contains(tag) else {
            return nil
        }
        return "video_tag_unsupported"
    }

    func unavailable(_ message: String) -> KilnError { KilnError(.qualityUnavailable, stage: .plan, message) }

    /// Encrypted samples (DRM) cannot be decoded, and copied into a new file they lose the
    /// boxes that say how to decrypt them: only the source itself can go.
    func refuseEncrypted(_ why: String) throws(KilnError) {
        guard encrypted else { return }
        throw KilnError(.sourceUnsupported, stage: .plan,
                        "the source is encrypted (DRM) and can only be delivered as the file it is, but \(why)")
    }

    var encrypted: Bool { source.streams.contains { ($0.type == .video || $0.type == .audio) && $0.encrypted == true } }

    func requireStreams() throws(KilnError) {
        // A stream that names no codec (an unknown sample entry, a damaged header) is no
        // matter of quality: no rung would do.
        func unknown(_ s: StreamInfo) -> KilnError {
            // Where the index is known damaged, that is why: a file cut short in it.
            if let why = source.indexDamage {
                return KilnError(.sourceCorrupt, stage: .plan, "the source's stream \(s.index) names no codec: \(why)")
            }
            return KilnError(.sourceUnsupported, stage: .plan,
                             "the source's stream \(s.index) names no codec Kiln knows (an unknown format, or a damaged header)")
        }
        if let v = video, v.codec == "none" { throw unknown(v) }
        // A sound track cut from a damaged index is no track to leave out quietly.
        if source.indexDamage != nil, let a = source.streams.first(where: { $0.type == .audio && $0.codec == "none" }) { throw unknown(a) }
        if video == nil && source.audioStreams.isEmpty {
            // No stream at all is no file a tool makes (one of subtitles or attachments lists
            // them): a Matroska track list whose size was damaged reads as none, and was
            // `quality_unavailable`, as if another rung or device could help.
            if source.streams.isEmpty {
                throw KilnError(.sourceCorrupt, stage: .plan, "the source lists no stream at all: its track list is damaged or missing")
            }
            if let s = source.streams.first(where: { $0.codec == "none" }) { throw unknown(s) }
            // An index cut short can take every track with it (an MOV cut 2 kB before its
            // end, where its index is): the file is damaged, not one without sound or pictures.
            if let why = source.indexDamage {
                throw KilnError(.sourceCorrupt, stage: .plan, "the source has no video and no audio stream: \(why)")
            }
            // Subtitles alone (an .ass or .srt file, text libavformat reads as lyrics): no
            // quality or device would make a film of it, which `quality_unavailable` implied.
            throw KilnError(.sourceUnsupported, stage: .plan,
                            "the source has no video and no audio stream (it holds only \(Set(source.streams.map(\.type.rawValue)).sorted().joined(separator: " and ")) streams): there is nothing to play")
        }
    }

    // MARK: original

    func planOriginal() throws(KilnError) -> Plan {
        try requireStreams()
        guard caps != nil || neverAsIs else {
            let audio = AudioSelection.choose(from: source, language: audioLanguage) { _, _ in 0 }
            return asIs(.original, audio: audio, reasons: ["source_as_is"] + (audio?.reasons ?? []))
        }
        let asIsAudio = AudioSelection.choose(from: source, language: audioLanguage) { a, _ in device.playsAudio(a) ? 0 : 1 }
        let videoProblems = video.map { device.videoProblems($0, kbps: videoKbps) } ?? []
        let audioPlays = asIsAudio.map { device.playsAudio($0.stream) } ?? true
        let containerPlays = containerProblems.isEmpty
        let fixes = remuxFixes(asIsAudio?.stream)
        if videoProblems.isEmpty && audioPlays && containerPlays && fixes.isEmpty && !neverAsIs {
            return asIs(.original, audio: asIsAudio, reasons: ["source_playable"] + (asIsAudio?.reasons ?? []))
        }
        try refuseEncrypted("this device cannot play it as it is")
        var reasons = device.playsContainer(source.container) ? [] : ["container_unsupported"]
        let copyProblem = video.flatMap(mp4CopyProblem)
        if videoProblems.isEmpty, copyProblem == nil {
            return try remux(.original, reasons: containerProblems + fixes + damage, audioTarget: nil)
        }
        reasons += videoProblems.isEmpty ? copyProblem.map { [$0] } ?? [] : videoProblems
        if !audioPlays { reasons.append(asIsAudio.flatMap { device.audioProblem($0.stream) } ?? "audio_codec_unsupported") }
        reasons += containerDamage
        return try transcode(requested: .original, rung: fallbackRung(), reasons: reasons)
    }

    /// The rung an `original` request falls back to: the lowest whose cap holds the
    /// source's bitrate, as H.264 would need it (`Codecs.h264Equivalence`), and whose frame
    /// class holds the source's frame (a 3 Mbps 1080p H.264 source gets 5 Mbps, not 20:
    /// spending more bits than the source has buys nothing).
    func fallbackRung() throws(KilnError) -> Rung {
        guard let top = presets.rungs.first else { throw KilnError(.internalError, stage: .plan, "the ladder is empty") }
        guard let sourceKbps else { return top }
        let kbps = Int((Double(sourceKbps) * (video.map { Codecs.h264Equivalence($0.codec) } ?? 1)).rounded())
        let topClass = frameClass(top, highFrameRate: false)
        let needed = min(video.flatMap(FrameSize.smallestClass) ?? .uhd4k, topClass)
        for rung in presets.rungs.reversed() where rung.capKbps >= kbps && frameClass(rung, highFrameRate: false) >= needed {
            return rung
        }
        return top
    }

    // MARK: bitrate rungs

    func planRung(_ quality: Quality) throws(KilnError) -> Plan {
        try requireStreams()
        guard let rung = presets.rung(for: quality) else {
            throw KilnError(.internalError, stage: .plan, "the ladder has no \(quality.rawValue) rung")
        }
        let cap = rung.capKbps
        let overallFits = sourceKbps.map { $0 <= cap } ?? false
        var problems: [String] = []
        if let v = video {
            problems += device.videoProblems(v, kbps: videoKbps)
            if !FrameSize.codedFits(v, frameClass(rung, highFrameRate: false)), !problems.contains("resolution_above_cap") {
                problems.append("resolution_above_target")
            }
        }
        var fixes: [String] = []
        // The file as it is, where only a remux's fixes stand in its way and the remux
        // turns out not to fit: better than a transcode.
        var asItIs: Plan?
        if problems.isEmpty {
            let asIsAudio = AudioSelection.choose(from: source, language: audioLanguage) { a, _ in device.playsAudio(a) ? 0 : 1 }
            let audioPlays = asIsAudio.map { device.playsAudio($0.stream) } ?? true
            let containerPlays = containerProblems.isEmpty
            fixes = remuxFixes(asIsAudio?.stream)
            fixes += damage
            if overallFits && containerPlays && audioPlays && !neverAsIs {
                let plan = asIs(quality, audio: asIsAudio, reasons: ["source_fits_target"] + (asIsAudio?.reasons ?? []))
                if fixes.isEmpty { return plan }
                asItIs = plan
            }
        }
        try refuseEncrypted("it does not fit \(quality.rawValue) as it is, or this device cannot play it as it is")
        if problems.isEmpty {
            if let copyProblem = video.flatMap(mp4CopyProblem) {
                problems.append(copyProblem)
            } else {
                // A remux keeps the picture and one audio track: it fits when the whole file
                // does, or when the picture plus the audio that goes out does (a 4 Mbps film
                // carrying three DTS tracks fits 5 Mbps once two are left behind).
                let remuxAudio = chooseAudio(rung: rung)
                let copies = remuxAudio.map { copiesIntoMP4($0.stream) } ?? true
                let audioOut: Int? = remuxAudio.map { a in
                    copies ? a.stream.bitRate.map(PlanContext.kbps) : audioBudget(a.stream, rung)
                } ?? 0
                let videoPart: Int? = video == nil ? 0 : videoKbps
                // The MP4's own index and headers take 2 % or so beside the streams (ladder.json).
                func fits(_ audio: Int?) -> Bool { videoPart.flatMap { v in audio.map { Double(v + $0) * 1.02 <= Double(cap) } } ?? false }
                let partsFit = fits(audioOut)
                // An audio-only source whose audio must be re-encoded is an encode shaped by
                // the rung: a transcode, not a remux.
                if (overallFits && copies) || (partsFit && (copies || video != nil)) {
                    var reasons = ["source_fits_target"] + containerProblems + fixes
                    // Said where another audio track is left behind; a track re-encoded to fit
                    // says why itself (audio_bitrate_above_target, audio_codec_unsupported).
                    // (A camera's two mono tracks merged into the sound are both kept.)
                    let kept = remuxAudio.map { 1 + (mergeSources($0.stream)?.count ?? 0) } ?? 0
                    if !overallFits && source.audioStreams.count > kept { reasons.append("tracks_dropped_to_fit") }
                    return try remux(quality, reasons: reasons, audioTarget: rung)
                }
                // Only the sound keeps the file from the rung (an AC-3 5.1 at 640 kbit/s, or one
                // whose bitrate is unknown, beside a picture within the rung's own video budget,
                // so that MP4's overhead on a short clip has its room): the sound is re-encoded
                // to the rung's, the picture copied, rather than the picture re-encoded for it.
                if copies, let v = videoPart, v > 0, v <= rung.videoKbps, let a = remuxAudio, fits(audioBudget(a.stream, rung)) {
                    return try remux(quality, reasons: ["source_fits_target"] + containerProblems + fixes, audioTarget: rung, fitAudio: true)
                }
                if video == nil && !copies && overallFits { problems.append("audio_codec_unsupported") }
            }
        }
        if let asItIs { return asItIs }
        var why: [String] = []
        if let kbps = sourceKbps {
            if kbps > cap { why.append("bitrate_above_target") }
        } else {
            why.append("bitrate_unknown")
        }
        if why.isEmpty && problems.isEmpty { why.append("bitrate_above_target") }  // fits overall, not once re-encoded audio is added
        return try transcode(requested: quality, rung: rung, reasons: why + problems)
    }

    // MARK: deliveries

    func asIs(_ quality: Quality, audio: (stream: StreamInfo, reasons: [String])?, reasons: [String]) -> Plan {
        Plan(quality: quality, effectiveQuality: .original, deliveryFormat: .original, targetBitrateKbps: 0,
             container: source.container, video: video.map(copyVideo),
             audio: audio.map { AudioPlan(sourceIndex: $0.stream.index, action: .copy, codec: Codecs.canonical($0.stream.codec),
                                          channels: source.stream($0.stream.index)?.channels ?? $0.stream.channels ?? 0, bitrateKbps: 0,
                                          language: language($0.stream)) },
             subtitles: [], reasons: reasons, artifactKey: "")
    }

    /// Picture copied into MP4; audio copied when the device plays it from MP4, else
    /// re-encoded (the rung's audio for a rung, compatibility audio for `original`).
    /// `fitAudio`: the sound is held to the rung's budget even where the device plays it
    /// as it is (the picture fits the rung only beside the rung's sound).
    func remux(_ quality: Quality, reasons: [String], audioTarget rung: Rung?, fitAudio: Bool = false) throws(KilnError) -> Plan {
        guard device.playsMP4 else {
            throw unavailable("the device lists no container Kiln writes (mp4) and the source must be remuxed")
        }
        var reasons = reasons
        var audioPlan: AudioPlan?
        if let chosen = chooseAudio(rung: rung) {
            reasons += chosen.reasons
            // The whole source already fits (rung) or plays (original): a track the device
            // plays from MP4 is copied whatever its bitrate.
            let (plan, why): (AudioPlan, [String])
            if let rung, fitAudio || !copiesIntoMP4(chosen.stream) {
                (plan, why) = try rungAudio(chosen.stream, rung)
            } else {
                (plan, why) = try compatibilityAudio(chosen.stream)
            }
            audioPlan = plan
            reasons += why
        }
        // MP4 carries profile 7's base layer only (the engine leaves its record, enhancement
        // layer and RPUs out).
        if video?.dolbyVision?.profile == 7, !reasons.contains("dolby_vision_base_layer_only") { reasons.append("dolby_vision_base_layer_only") }
        let (subs, subReasons) = subtitlePlans()
        var plan = Plan(quality: quality, effectiveQuality: .original, deliveryFormat: .remux, targetBitrateKbps: 0,
                        container: "mp4", video: video.map(copyVideo), audio: audioPlan, subtitles: subs,
                        reasons: reasons + subReasons, artifactKey: "")
        plan.videoFallback = videoFallback(rung)
        plan.audioFallback = audioFallback(audioPlan, rung: rung)
        return plan
    }

    func transcode(requested: Quality, rung: Rung, reasons: [String]) throws(KilnError) -> Plan {
        guard policy.transcodingAllowed else {
            throw KilnError(.transcodeDisabled, stage: .plan,
                            "the source needs a transcode (\(Planner.unique(reasons).joined(separator: ", "))) and the server does not allow transcoding")
        }
        guard device.playsMP4 else {
            throw unavailable("the device lists no container Kiln writes (mp4) and the source must be transcoded")
        }
        var reasons = reasons
        var rung = rung
        var audio: (plan: AudioPlan, reasons: [String])?
        if requested == .original, let kept = originalSound(from: rung) {
            audio = (kept.plan, kept.reasons)
            rung = kept.rung
        } else if let chosen = chooseAudio(rung: rung) {
            let (plan, why) = try rungAudio(chosen.stream, rung)
            audio = (plan, chosen.reasons + why)
            // A sound copied a little over the rung's budget takes its excess from the picture.
            if plan.action == .copy, let kbps = chosen.stream.bitRate.map(PlanContext.kbps) { rung = rung.leaving(audioKbps: kbps) }
        }
        var videoPlan: VideoPlan?
        if let v = video {
            let (plan, why) = try encodeVideo(v, rung)
            videoPlan = plan
            reasons += why
        }
        let audioPlan = audio?.plan
        reasons += audio?.reasons ?? []
        let (subs, subReasons) = subtitlePlans(burning: videoPlan == nil ? nil : burntSubtitle(sound: audioPlan))
        var plan = Plan(quality: requested, effectiveQuality: rung.quality, deliveryFormat: .transcode,
                        targetBitrateKbps: rung.capKbps, container: "mp4", video: videoPlan, audio: audioPlan,
                        subtitles: subs, reasons: reasons + subReasons, artifactKey: "")
        plan.audioFallback = audioFallback(audioPlan, rung: requested == .original ? nil : rung)
        return plan
    }

    /// What replaces a copied sound whose copy stops: the encode the device would get had
    /// it not played the sound as it is (the rung's, or `original`'s compatibility audio),
    /// only where the engine's own would not do (a device that cannot decode that many
    /// channels, or AAC at all). Nil for an encoded sound, or where none can be made.
    func audioFallback(_ sound: AudioPlan?, rung: Rung?) -> AudioPlan? {
        guard let sound, sound.action == .copy, let a = source.stream(sound.sourceIndex) else { return nil }
        let channels = max(1, min(sound.channels > 0 ? sound.channels : 2, 8))
        if device.audioDecode.contains("aac") && device.channels(channels, decodedAs: "aac") == channels { return nil }
        let targets = rung.map { ($0.surround, $0.audio) } ?? (presets.compatibilityAudio.surround, presets.compatibilityAudio.stereo)
        return try? encode(a, surround: targets.0, stereo: targets.1)
    }

    /// `originalSound` at `rung`, else at the first rung above it that leaves the picture
    /// enough beside that sound: a 1 Mbit/s film with 640 kbit/s of AC-3 5.1 keeps its
    /// sound at 2 Mbit/s rather than losing it to the 1 Mbit/s rung's stereo.
    func originalSound(from rung: Rung) -> (plan: AudioPlan, reasons: [String], rung: Rung)? {
        presets.rungs.reversed().drop { $0.quality != rung.quality }.lazy.compactMap(originalSound(within:)).first
    }

    /// `original` re-encodes the picture only because the device cannot show it: its sound
    /// keeps what `original` promises (copied where the device plays it from MP4, else the
    /// compatibility target, surround kept where the device plays a surround codec), and
    /// the picture takes what the rung's largest sound would have left it (the rung's own
    /// room for MP4's index stays). Nil, so the rung's audio is used, where the sound's
    /// bitrate is unknown or would leave the picture less than half its budget. `rung` comes
    /// back with the picture's budget (maxrate, and the buffer in proportion).
    func originalSound(within rung: Rung) -> (plan: AudioPlan, reasons: [String], rung: Rung)? {
        guard let chosen = chooseAudio(rung: nil), let (plan, why) = try? compatibilityAudio(chosen.stream),
              let kbps = plan.action == .copy ? chosen.stream.bitRate.map(PlanContext.kbps) : plan.bitrateKbps else { return nil }
        let spent = rung.leaving(audioKbps: kbps)
        guard video == nil || spent.videoKbps >= rung.videoKbps / 2 else { return nil }
        return (plan, chosen.reasons + why, spent)
    }

    /// The picture re-encoded to H.264 at `rung`, and the reasons that says.
    func encodeVideo(_ v: StreamInfo, _ rung: Rung) throws(KilnError) -> (VideoPlan, [String]) {
        guard device.video.contains("h264") else {
            throw unavailable("the source must be transcoded and caps.codecs_video does not list h264, the codec Kiln encodes")
        }
        var reasons: [String] = []
        // Every n-th picture where the source shows more than the device (or, unsaid, more
        // than a display shows: a 120 fps phone clip spent its bits on pictures no 60 Hz
        // screen shows, and a level then took its size).
        // Pictures too small for field filters are taken as progressive (FieldFilters).
        let fieldsFit = FieldFilters.fit(width: v.width ?? FieldFilters.smallestSide, height: v.height ?? FieldFilters.smallestSide)
        let deinterlace = fieldsFit && v.fieldOrder?.isInterlaced == true
        // Film in 3:2 pulldown goes at its own 23.976, four pictures of every five.
        // Also in pictures flagged progressive: a DVD re-encoded with its pulldown left in.
        let inverseTelecine = fieldsFit && v.telecined == true
        // Progressive pictures stored interlaced are matched whole, at their own rate.
        let fieldMatch = deinterlace && !inverseTelecine && v.progressiveFrames == true
        let sourceFPS = Codecs.frameRate(v).map { inverseTelecine ? $0 * 4 / 5 : $0 }
        var limited = sourceFPS.flatMap { FrameRateLimit.rate($0, within: device.maxFrameRate ?? Self.defaultMaxFrameRate) }
        var fps: Double { limited ?? sourceFPS ?? 30 }
        let highRate = sourceFPS != nil && fps > FrameSize.highFrameRate
        // Said only where the smaller class makes a smaller picture (a 360p source fits both).
        if highRate && frameClass(rung, highFrameRate: true) < frameClass(rung, highFrameRate: false),
           let stepped = FrameSize.fit(v, into: frameClass(rung, highFrameRate: true)),
           let full = FrameSize.fit(v, into: frameClass(rung, highFrameRate: false)), stepped.width * stepped.height < full.width * full.height {
            reasons.append("frame_rate_above_30")
        }
        var cls = frameClass(rung, highFrameRate: highRate)
        guard var size = FrameSize.fit(v, into: cls) else {
            // No size after the probe decoded its first pictures: a damaged header (a
            // Matroska Video element's size) or pictures that do not decode. Another rung or
            // device would not help, as `quality_unavailable` would have suggested.
            throw KilnError(.sourceCorrupt, stage: .plan, "the video stream's frame size is unknown (its header is damaged or its pictures do not decode), so it cannot be transcoded")
        }
        var floor = H264Level(rung.level) ?? H264Level.table[0]
        var maxrate = rung.videoKbps, bufsize = rung.bufsizeKbps
        // A source of few bits gets no more in H.264's terms than it had: more cannot bring
        // back detail it lacks (a 300 kbit/s 1080p film came out at 1.6 Mbit/s in 720p).
        var sourceLimit: Int?
        if let limit = sourceVideoCeilingKbps.map({ max(Self.leastLimitKbps, Int(Double($0) * Codecs.h264BitrateFactor(v.codec))) }),
           limit < maxrate {
            bufsize = max(1, bufsize * limit / maxrate)
            maxrate = limit
            sourceLimit = limit
        }
        if let most = device.maxH264Level {
            // Within the device's level: its bitrate, then smaller pictures until the level holds them.
            guard let cap = H264Level.table.last(where: { $0.idc <= most }) else {
                throw unavailable("caps.max_h264_level is below 3.0, the level the smallest picture Kiln makes (480p) needs")
            }
            floor = min(floor, cap)
            if maxrate > cap.maxHighBitrateKbps {
                bufsize = bufsize * cap.maxHighBitrateKbps / maxrate
                maxrate = cap.maxHighBitrateKbps
            }
            bufsize = min(bufsize, cap.maxHighBufferKbps)
            let before = size
            while !cap.holds(width: size.width, height: size.height, fps: fps, maxrateKbps: maxrate, bufsizeKbps: bufsize) {
                if let smaller = ResolutionClass.allCases.last(where: { $0 < cls }), let fitted = FrameSize.fit(v, into: smaller) {
                    cls = smaller
                    size = fitted
                } else if fps / 2 >= FrameRateLimit.leastSmoothRate {
                    // Below 480p's class, half the pictures rather than half the picture:
                    // 480p at 30 fps, not 560x315 at 60, for a level 3.0 device (but 30
                    // stays 30 and its picture shrinks instead).
                    limited = fps / 2
                } else {
                    // Smaller at the same shape until the level holds it (480p30 is 48,600
                    // macroblocks a second, 3.0 takes 40,500: 770x432).
                    guard let smaller = FrameSize.shrunk(size, toMacroblocks: min(cap.maxFrameMacroblocks, Int(Double(cap.maxMacroblocksPerSecond) / fps))) else {
                        throw unavailable("no picture at \(Int(fps.rounded())) fps fits caps.max_h264_level \(cap.name)")
                    }
                    size = smaller
                }
            }
            if size != before { reasons.append("resolution_reduced_for_level") }
        }
        if limited != nil {
            reasons.append("frame_rate_reduced")
            // A rate the level halved to 30 no longer costs the picture its class.
            if fps <= FrameSize.highFrameRate { reasons.removeAll { $0 == "frame_rate_above_30" } }
        }
        // Said only where it is the source that set the bitrate (not the device's level).
        if let sourceLimit, maxrate == sourceLimit { reasons.append("bitrate_limited_to_source") }
        let level = H264Level.required(width: size.width, height: size.height, fps: fps, maxrateKbps: maxrate, bufsizeKbps: bufsize, floor: floor)
        let encoder = EncoderSettings(name: "libx264", preset: rung.preset, crf: rung.crf, maxrateKbps: maxrate,
                                      bufsizeKbps: bufsize, profile: rung.profile, level: level.name,
                                      gopSeconds: rung.gopSeconds, pixFmt: "yuv420p")
        let toneMap = Codecs.isHDR(v)
        if toneMap { reasons.append("hdr_tone_mapped") }
        if inverseTelecine { reasons.append("inverse_telecined") } else if deinterlace { reasons.append(fieldMatch ? "field_matched" : "deinterlaced") }
        if let sar = v.sampleAspectRatio, sar.num > 0, sar.den > 0, sar.num != sar.den { reasons.append("anamorphic_made_square") }
        if Codecs.rotation(v) != 0 || v.mirrored == true { reasons.append("rotation_applied") }
        return (VideoPlan(sourceIndex: v.index, action: .transcode, codec: "h264", width: size.width, height: size.height,
                          bitrateKbps: maxrate, toneMap: toneMap, deinterlace: deinterlace,
                          rotation: Codecs.rotation(v), encoder: encoder, maxFrameRate: limited,
                          inverseTelecine: inverseTelecine ? true : nil, fieldMatch: fieldMatch ? true : nil, mirrored: v.mirrored), reasons)
    }

    /// What replaces a copied picture whose copy stops (an H.264/HEVC size that changes
    /// mid-stream, no keyframe to start on, damage the MP4 muxer cannot take): the encode
    /// at `rung` (the requested one, or `original`'s fallback rung), when the server and the
    /// device allow one; nil otherwise (the copy then goes on as it is, or fails).
    func videoFallback(_ rung: Rung?) -> VideoPlan? {
        guard let v = video, policy.transcodingAllowed else { return nil }
        // At `original` the remux's sound is `originalSound`'s: the picture gets what it leaves.
        guard let rung = rung ?? (try? fallbackRung()).map({ originalSound(from: $0)?.rung ?? $0 }) else { return nil }
        return try? encodeVideo(v, rung).0
    }

    // MARK: streams

    func copyVideo(_ v: StreamInfo) -> VideoPlan {
        VideoPlan(sourceIndex: v.index, action: .copy, codec: Codecs.canonical(v.codec), width: v.width ?? 0,
                  height: v.height ?? 0, bitrateKbps: 0, toneMap: false, deinterlace: false, rotation: Codecs.rotation(v), mirrored: v.mirrored)
    }

    /// Why the file as it is would not play `chosen`: a player starts with the first audio
    /// track marked default (MP4: enabled), else the first, and one that cannot play it
    /// (a browser and AC-3) may stay silent rather than look for another; a language asked
    /// for on another track would not be heard either. A remux makes `chosen` the only
    /// one (`remuxFixes`).
    func audioTrackProblems(_ chosen: StreamInfo) -> [String] {
        let audio = source.audioStreams
        let first = audio.first { $0.disposition.isDefault } ?? audio.first
        return first?.index == chosen.index ? [] : ["audio_track_not_default"]
    }

    /// The audio track for an MP4 (`AudioSelection`): one that copies into it first, and at
    /// a rung (nil: `original`), one that copies within the rung's audio budget before that
    /// (a stereo AAC track beside a 640 kbit/s AC-3 5.1 one, at 5 Mbps).
    /// A track copied within the rung's budget first; then, of tracks over it, the smallest
    /// (a lower rung must not pick the larger track: with a 448 kbit/s AC-3 as default and
    /// a 128 kbit/s AAC beside it, 5 Mbps copied the AAC and 1 Mbps, where neither fits,
    /// the AC-3, a file twice the size), by doublings of the smallest such track of the
    /// group, so that tracks within twice it rank alike and the default goes (a screen
    /// recorder's "Mic" track at 100 kbit/s had gone before its default "Desktop" one at
    /// 140, its silence first); then tracks that must be re-encoded whatever the rung.
    /// A sound whose format changes along the recording (`audio_format_changes`) is ranked
    /// as if it did not: it is the programme's, and would otherwise lose to a steady track
    /// of the same language beside it, which in a broadcast is most often the audio
    /// description or a second mix, not flagged as such.
    /// A track that is one side of a camera's stereo pair comes back as the pair
    /// (`MonoPairs.sound`), re-encoded (`audio_tracks_merged`).
    func chooseAudio(rung: Rung?) -> (stream: StreamInfo, reasons: [String])? {
        // A track's rate where it copies into MP4 but over the rung's budget; nil otherwise.
        func over(_ changing: StreamInfo, _ rung: Rung) -> Int? {
            var a = changing
            a.formatChanges = nil
            guard copiesIntoMP4(a), (try? rungAudio(a, rung))?.0.action != .copy else { return nil }
            return a.bitRate.map(PlanContext.kbps)
        }
        let chosen = AudioSelection.choose(from: source, language: audioLanguage) { changing, group in
            var a = changing
            a.formatChanges = nil
            guard copiesIntoMP4(a) else { return Self.reencodedFit }
            guard let rung else { return 0 }
            if (try? rungAudio(a, rung))?.0.action == .copy { return 0 }
            guard let kbps = a.bitRate.map(PlanContext.kbps) else { return Self.reencodedFit - 1 }
            var step = max(1, group.compactMap { over($0, rung) }.min() ?? kbps), doublings = 0
            while step * 2 <= kbps, doublings < Self.reencodedFit - 3 { step *= 2; doublings += 1 }
            return 1 + doublings
        }
        // Two mono programmes side by side are one channel of sound (`dualMono`).
        if var one = chosen?.stream, one.dualMono == true {
            (one.channels, one.channelLayout, one.bitRate) = (1, "mono", one.bitRate.map { $0 / 2 })
            return (one, chosen!.reasons)
        }
        guard let chosen, monoPairs.paired(chosen.stream.index) else { return chosen }
        return (monoPairs.sound(of: chosen.stream), chosen.reasons + ["audio_tracks_merged"])
    }

    /// `chooseAudio`'s rank of a track that must be re-encoded (after every copyable one).
    static let reencodedFit = 64

    /// Why a video stream's packets cannot be copied into MP4 and play as they do in the
    /// source (nil when they can): a codec MP4 does not carry, or times MP4 needs that the
    /// source lacks. A container that gives reordered pictures decode times only (B-frames
    /// in AVI) leaves a copy without presentation times; players that take the container's
    /// (Apple's) would show the pictures in decode order. The media engine derives them for
    /// H.264, from its pictures' order counts; any other such stream is re-encoded.
    func mp4CopyProblem(_ v: StreamInfo) -> String? {
        let codec = Codecs.canonical(v.codec)
        if !Codecs.mp4Video.contains(codec) { return "video_codec_unsupported_in_mp4" }
        if v.codingChanges == true { return "video_coding_changes" }
        return v.presentationTimesMissing == true && !Codecs.presentationTimesDerivable.contains(codec) ? "video_timestamps_missing" : nil
    }

    func copiesIntoMP4(_ a: StreamInfo) -> Bool { copyProblem(a) == nil }

    /// Why a sound cannot be copied into the device's MP4, nil when it can: the device
    /// does not play it, MP4 does not carry it, or one sample entry could not state its
    /// format (unknown, or changing along the file: the copy would stop at the change and
    /// the whole run be made again).
    func copyProblem(_ a: StreamInfo) -> String? {
        if let problem = device.audioProblem(a) { return problem }
        if !Codecs.copiesIntoMP4(a.codec) { return "audio_codec_unsupported_in_mp4" }
        if !a.formatKnown { return "audio_format_unknown" }
        if a.formatChanges == true { return "audio_format_changes" }
        if a.codingChanges == true { return "audio_coding_changes" }
        // A copy would play both languages at once, one a side.
        if a.dualMono == true { return "audio_dual_mono" }
        // One side of a stereo pair: a copy would be the one track.
        if monoPairs.paired(a.index) { return "audio_tracks_merged" }
        return nil
    }

    /// The surround target when the rung has one, the source has more than two channels
    /// and the device plays one of its codecs (the preset's order decides, never the caps'),
    /// one it decodes itself before one it can only pass through to a receiver: a
    /// download is often played where there is none.
    func surround(_ target: SurroundTarget?, for a: StreamInfo) -> (codec: String, target: SurroundTarget)? {
        guard let target, (a.channels ?? 2) > 2 else { return nil }
        let codecs = target.codecs.map(Codecs.canonical)
        // A device that plays two channels at most of what it decodes gets stereo: a surround
        // encode only it passes through needs a receiver a download is often played without.
        guard (device.maxAudioChannels ?? .max) > 2,
              let codec = codecs.first(where: device.audioDecode.contains) ?? codecs.first(where: device.playsAudio) else { return nil }
        return (codec, target)
    }

    func audioBudget(_ a: StreamInfo, _ rung: Rung) -> Int {
        surround(rung.surround, for: a)?.target.bitrateKbps ?? stereoKbps(rung.audio, channels: a.channels ?? 2)
    }

    /// What stereo is encoded to for a device that plays no AAC, in order of preference.
    static let dolbyStereo = ["eac3", "ac3"]

    /// Mono keeps one channel and half the stereo bitrate.
    func stereoKbps(_ t: AudioTarget, channels: Int) -> Int {
        channels == 1 && t.channels > 1 ? t.bitrateKbps / 2 : t.bitrateKbps
    }

    /// Copy when the device plays it from MP4 and it fits the rung's audio budget (known
    /// bitrate, no more channels than the target); otherwise encode to the rung's target.
    static let audioBudgetSlack = 1.03

    func rungAudio(_ a: StreamInfo, _ rung: Rung) throws(KilnError) -> (AudioPlan, [String]) {
        let channels = a.channels ?? 2
        let sur = surround(rung.surround, for: a)
        let budget = sur?.target.bitrateKbps ?? stereoKbps(rung.audio, channels: channels)
        let maxChannels = sur.map { device.channels($0.target.channels, decodedAs: $0.codec) } ?? device.channels(rung.audio.channels, decodedAs: rung.audio.codec)
        let kbps = a.bitRate.map(PlanContext.kbps)
        var why: [String] = []
        if let problem = copyProblem(a) { why.append(problem) }
        // A track a few percent over (AAC at 128.2 kbit/s beside a 128 budget) is copied: a
        // second encode of it would cost more than the bits it saves.
        if let kbps, Double(kbps) > Double(budget) * Self.audioBudgetSlack { why.append("audio_bitrate_above_target") }
        if kbps == nil { why.append("audio_bitrate_unknown") }
        if channels > maxChannels { why.append("audio_channels_reduced") }
        if why.isEmpty {
            return (AudioPlan(sourceIndex: a.index, action: .copy, codec: Codecs.canonical(a.codec), channels: channels,
                              bitrateKbps: 0, language: language(a)), [])
        }
        return (try encode(a, surround: rung.surround, stereo: rung.audio), why)
    }

    /// For a remux at `original`: the picture is untouched, so the audio gets a generous
    /// target; multichannel stays multichannel when the device plays a surround codec.
    func compatibilityAudio(_ a: StreamInfo) throws(KilnError) -> (AudioPlan, [String]) {
        guard let problem = copyProblem(a) else {
            return (AudioPlan(sourceIndex: a.index, action: .copy, codec: Codecs.canonical(a.codec), channels: a.channels ?? 0,
                              bitrateKbps: 0, language: language(a)), [])
        }
        return (try encode(a, surround: presets.compatibilityAudio.surround, stereo: presets.compatibilityAudio.stereo), [problem])
    }

    /// The sound re-encoded for the device: the surround target where it applies
    /// (`surround`), within the channels the device decodes; else stereo (`encodeStereo`).
    func encode(_ a: StreamInfo, surround target: SurroundTarget?, stereo: AudioTarget) throws(KilnError) -> AudioPlan {
        guard let sur = surround(target, for: a) else { return try encodeStereo(a, stereo) }
        let channels = min(a.channels ?? 2, device.channels(sur.target.channels, decodedAs: sur.codec))
        let kbps = Self.surroundShare(sur.target, codec: sur.codec, channels: channels, stereoKbps: stereo.bitrateKbps)
        return AudioPlan(sourceIndex: a.index, action: .transcode, codec: sur.codec, channels: channels,
                         bitrateKbps: Self.reachableKbps(sourceBoundKbps(kbps, a, codec: sur.codec, channels: channels), codec: sur.codec,
                                                         sampleRate: a.sampleRate, channels: channels),
                         language: language(a), mergeSources: mergeSources(a))
    }

    /// A surround target's bitrate is its channels' (5.1's 640 kbit/s): a sound of fewer (a
    /// 3.0 or 5.0 film, a device that decodes five) takes their share, never less than
    /// stereo's, on the bitrates AC-3 has (its encoder takes no other; a 3.0 Opus had gone
    /// to E-AC-3 3.0 at 640).
    static func surroundShare(_ target: SurroundTarget, codec: String, channels: Int, stereoKbps: Int) -> Int {
        guard channels < target.channels, target.channels > 0 else { return target.bitrateKbps }
        let share = max(target.bitrateKbps * channels / target.channels, stereoKbps)
        guard codec == "ac3" || codec == "eac3" else { return min(share, target.bitrateKbps) }
        return ac3Kbps.last { $0 <= share } ?? target.bitrateKbps
    }

    /// The bitrates an AC-3 frame can have (ATSC A/52's table), kbit/s.
    static let ac3Kbps = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640]

    /// A re-encoded sound gets at most half again its source's bitrate, where that is known:
    /// a 6 kbit/s voice track (AMR, Opus) encoded at the ladder's 64 or 128 was ten times
    /// its bits for nothing the source had, and an encode cannot give back what the
    /// source's codec took away (half again leaves room for a codec that does more with
    /// its bits than AAC: Opus, HE-AAC). Never below `leastKbpsPerChannel` a channel, so that
    /// the encoder does not add losses of its own. Not for a sound merged from two mono
    /// tracks, whose bitrate is both's, nor for one whose format changes along the file
    /// (`formatChanges`: a broadcast's 192 kbit/s stereo, then its 448 kbit/s 5.1, whose
    /// bitrate is the first part's). AC-3 and E-AC-3 take the next bitrate they have.
    func sourceBoundKbps(_ kbps: Int, _ a: StreamInfo, codec: String, channels: Int) -> Int {
        guard let bps = a.bitRate, bps > 0, mergeSources(a) == nil, a.formatChanges != true else { return kbps }
        let dolby = codec == "ac3" || codec == "eac3"
        let least = (dolby ? Self.leastKbpsPerChannel.dolby : Self.leastKbpsPerChannel.aac) * max(1, channels)
        let sourceKbps = bps / 1000 + (bps % 1000 > 0 ? 1 : 0)   // a hostile header's Int.max too
        let bound = min(kbps, max(least, sourceKbps + (sourceKbps + 1) / 2))
        return dolby ? Self.ac3Kbps.first { $0 >= bound } ?? kbps : bound
    }

    /// The least an encode spends on a channel: AAC-LC at 32 kbit/s a channel is clean
    /// for speech and fair for music; AC-3 needs half again that.
    static let leastKbpsPerChannel = (aac: 32, dolby: 48)

    /// At most what the encoder spends at the rate it encodes the source's sound: AAC puts
    /// at most 6,144 bits in a channel's frame of 1,024 samples (libavcodec clamps to it),
    /// so 8 kHz mono (an old phone's AMR voice) takes 48 kbit/s, and a plan that said the
    /// ladder's 64 or 128 promised what the output never had. The rate is the one the
    /// engine encodes at (`EncodedSampleRate`); AC-3 and E-AC-3 encode at 48 kHz.
    static func reachableKbps(_ kbps: Int, codec: String, sampleRate: Int?, channels: Int) -> Int {
        guard codec == "aac", let rate = sampleRate, rate > 0, channels > 0 else { return kbps }
        return min(kbps, 6 * EncodedSampleRate.of(source: rate) * channels / 1000)
    }

    func encodeStereo(_ a: StreamInfo, _ t: AudioTarget) throws(KilnError) -> AudioPlan {
        var codec = Codecs.canonical(t.codec)
        if !device.playsAudio(codec) {
            // A device that plays no AAC but Dolby's codecs (a TV whose sound goes through a
            // receiver) gets one of those, which Kiln encodes too, at the same bitrate (each
            // of the ladder's stereo rates is one AC-3 has).
            guard let dolby = Self.dolbyStereo.first(where: device.audioDecode.contains) ?? Self.dolbyStereo.first(where: device.playsAudio) else {
                throw unavailable("the audio must be re-encoded and caps.codecs_audio lists none of \(codec), eac3 and ac3, the codecs Kiln encodes")
            }
            codec = dolby
        }
        let channels = min(a.channels ?? 2, device.channels(t.channels, decodedAs: codec))
        return AudioPlan(sourceIndex: a.index, action: .transcode, codec: codec, channels: max(1, channels),
                         bitrateKbps: Self.reachableKbps(sourceBoundKbps(stereoKbps(t, channels: channels), a, codec: codec, channels: max(1, channels)),
                                                         codec: codec, sampleRate: a.sampleRate, channels: max(1, channels)),
                         language: language(a), mergeSources: mergeSources(a))
    }

    /// The streams whose channels join `a`'s in its encode (`MonoPairs`), nil for none.
    func mergeSources(_ a: StreamInfo) -> [Int]? {
        monoPairs.partner(of: a.index).map { [$0] }
    }

    /// Bitmap subtitles the media engine paints into a picture it re-encodes (the planes
    /// libavcodec decodes them into: palette pictures on a canvas).
    static let burnableSubtitles: Set<String> = ["hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle", "xsub"]

    /// A bitmap track to paint into a re-encoded picture, whole or only its forced display sets.
    struct Burn {
        var stream: StreamInfo
        var forcedOnly: Bool
    }

    /// Formats whose display sets can say they are forced (a PGS composition object's flag,
    /// a DVD subpicture's forced-start command), so that a full track carries its forced
    /// lines inside it.
    static let forcedDisplaySetSubtitles: Set<String> = ["hdmv_pgs_subtitle", "dvd_subtitle"]

    /// The forced subtitles to paint into a re-encoded picture, if there are any. Forced
    /// subtitles are part of the film (the lines spoken in another language, signs, a
    /// letter read out): without them a scene is not understood, and a bitmap track cannot
    /// go into MP4 as text. A disc gives them as a track of their own, or only as display
    /// sets flagged forced inside its full track (most Blu-ray and DVD rips keep just that
    /// one): then that track is burnt in for those sets alone, the rest left out. Which
    /// sets are forced is known only by reading the whole track, so the plan names the
    /// track and the engine paints what is flagged (none, often). A rotated picture is left
    /// alone (its canvas would not be upright).
    func burntSubtitle(sound: AudioPlan?) -> Burn? {
        guard let v = video, Codecs.rotation(v) == 0, v.mirrored != true else { return nil }
        let bitmaps = source.subtitleStreams.filter { Codecs.isTextSubtitle($0) == false && Self.burnableSubtitles.contains($0.codec.lowercased()) }
        // The flag where a track has it; a title only where none does.
        var forced = bitmaps.filter(\.disposition.forced)
        if forced.isEmpty { forced = bitmaps.filter { Self.titledForced($0.title) } }
        let wanted = sound?.language
        var burn = ownTrack(forced, language: wanted).map { Burn(stream: $0, forcedOnly: false) }
        if burn == nil {
            // Full tracks, the film's own before its hearing-impaired one (the same forced
            // sets, and SDH's extras are not flagged); never a commentary.
            let full = bitmaps.filter {
                !$0.disposition.forced && !Self.titledForced($0.title) && !$0.disposition.commentary
                    && Self.forcedDisplaySetSubtitles.contains($0.codec.lowercased())
            }
            let ordered = full.filter { !$0.disposition.hearingImpaired } + full.filter(\.disposition.hearingImpaired)
            burn = ownTrack(ordered, language: wanted).map { Burn(stream: $0, forcedOnly: true) }
        }
        // A forced text track in that language is kept as one already: painted too, its
        // lines would show twice.
        if let chosen = burn?.stream, source.subtitleStreams.contains(where: {
            $0.disposition.forced && Codecs.isTextSubtitle($0) == true && language($0) == language(chosen)
        }) { return nil }
        return burn
    }

    /// The track among `tracks` that goes with a sound in `language`: one in that language,
    /// else one naming none; a sound naming none takes the only track there is (with
    /// several, it cannot tell which is its own).
    private func ownTrack(_ tracks: [StreamInfo], language wanted: String?) -> StreamInfo? {
        wanted.flatMap { w in tracks.first { language($0) == w } } ?? tracks.first { language($0) == nil }
            ?? (wanted == nil && tracks.count == 1 ? tracks.first : nil)
    }

    /// Whether a track's title says it holds forced subtitles: "Forced", "English (forced)",
    /// not "Non-Forced" or "not forced".
    static func titledForced(_ title: String?) -> Bool {
        guard let t = title?.lowercased() else { return false }
        let words = t.split(whereSeparator: { !$0.isLetter && $0 != "-" }).map(String.init)
        return words.contains { $0 == "forced" || $0.hasPrefix("forced-") } && !words.contains("non-forced") && !words.contains("unforced")
            && !t.includes("not forced") && !t.includes("non forced")
    }

    /// Text subtitles become `mov_text` (language and forced flag kept); bitmaps cannot
    /// live in MP4 as text and are dropped, except the track `burning`, painted into the
    /// re-encoded picture (whole, or its forced display sets).
    func subtitlePlans(burning: Burn? = nil) -> ([SubtitlePlan], [String]) {
        var plans: [SubtitlePlan] = []
        var reasons: [String] = []
        for s in source.subtitleStreams {
            // A teletext stream whose map lists its subtitle pages: a track for each (Nordic
            // broadcasts carry a language a page), each in its page's language.
            if let pages = s.teletextPages {
                if pages.isEmpty {
                    plans.append(SubtitlePlan(sourceIndex: s.index, action: .drop, codec: s.codec, reason: "teletext_without_subtitles"))
                    reasons.append("teletext_without_subtitles")
                }
                for page in pages {
                    plans.append(SubtitlePlan(sourceIndex: s.index, action: .convert, codec: "mov_text",
                                              language: LanguageCode.terminologic(page.language), teletextPage: page.page))
                }
                continue
            }
            switch Codecs.isTextSubtitle(s) {
            case true?:
                plans.append(SubtitlePlan(sourceIndex: s.index, action: .convert, codec: "mov_text", language: language(s),
                                          forced: s.disposition.forced))
            case false? where s.index == burning?.stream.index:
                let only = burning?.forcedOnly == true
                plans.append(SubtitlePlan(sourceIndex: s.index, action: .burn, codec: s.codec, language: language(s), forced: !only || s.disposition.forced,
                                          reason: "forced_subtitles_burned_in", forcedOnly: only ? true : nil))
                reasons.append("forced_subtitles_burned_in")
            case false?:
                plans.append(SubtitlePlan(sourceIndex: s.index, action: .drop, codec: s.codec, language: language(s),
                                          forced: s.disposition.forced, reason: "subtitle_bitmap"))
                reasons.append("subtitle_bitmap")
            case nil:
                plans.append(SubtitlePlan(sourceIndex: s.index, action: .drop, codec: s.codec, language: language(s),
                                          forced: s.disposition.forced, reason: "subtitle_unsupported"))
                reasons.append("subtitle_unsupported")
            }
        }
        // Captions inside the pictures reach no MP4 player there: they become a text track
        // too (and stay in the pictures, copied or encoded), one for each service with text.
        // A/53 names no language in the stream. CC1 carries the programme's: its main
        // sound's (the default, else the first), whichever sound the device asked for
        // (Spanish from the second audio programme leaves English captions English). CC3,
        // where a station fills it, carries a second language, the second audio
        // programme's: the first sound in another language, if there is one. CEA-708's
        // services (where the pictures carry no CEA-608 text) are read the same way: SERVICE1
        // is the programme's, the others a second language. A caption track of the file's
        // own (QuickTime's c608) is those captions already.
        let captionTrack = plans.contains { $0.action == .convert && $0.codec == "mov_text"
            && source.stream($0.sourceIndex)?.codec.lowercased() == "eia_608" }
        if let v = video, v.closedCaptions == true, !captionTrack {
            let main = source.audioStreams.first { $0.disposition.isDefault } ?? source.audioStreams.first
            let mainLanguage = language(v) ?? main.flatMap(language)
            for service in v.captionServices ?? ["CC1"] {
                let cc1 = service == "CC1" || service == "SERVICE1"
                let second = source.audioStreams.lazy.compactMap(language).first { $0 != mainLanguage }
                plans.append(SubtitlePlan(sourceIndex: v.index, action: .convert, codec: "mov_text",
                                          language: cc1 ? mainLanguage : second, closedCaptions: true,
                                          captionService: service == "CC1" ? nil : service))
            }
            reasons.append("closed_captions_converted")
        }
        return (plans, reasons)
    }

    /// A kept stream's language as the MP4 will carry it (`LanguageCode`: "ger" is "deu").
    func language(_ s: StreamInfo) -> String? { LanguageCode.terminologic(s.language) }

    // MARK: numbers

    /// Overall source bitrate in kbit/s, rounded up; from size and duration when the
    /// container says nothing; nil when neither is known.
    var sourceKbps: Int? {
        if source.bitRate > 0 { return PlanContext.kbps(source.bitRate) }
        if source.sizeBytes > 0, source.durationSeconds.isFinite, source.durationSeconds > 0 {
            let k = (Double(source.sizeBytes) * 8 / source.durationSeconds / 1000).rounded(.up)
            return k < 1e12 ? Int(k) : nil
        }
        return nil
    }

    /// At most what the picture can have taken: the larger of its stream's bitrate and the
    /// overall bitrate less the sound's known (a stream's tag can be low; the rest is not).
    var sourceVideoCeilingKbps: Int? {
        let stream = video?.bitRate.flatMap { $0 > 0 ? PlanContext.kbps($0) : nil }
        let ceiling = [stream, sourceKbpsLessSound].compactMap { $0 }.max()
        return ceiling.flatMap { $0 > 0 ? $0 : nil }
    }

    /// The encode's least bitrate where the source's limits it (a thumbnail-sized source's
    /// few dozen kbit/s would starve even its own size).
    static let leastLimitKbps = 200

    /// The video stream's bitrate, else the overall bitrate less the audio bitrates known.
    var videoKbps: Int? {
        if let b = video?.bitRate, b > 0 { return PlanContext.kbps(b) }
        return sourceKbpsLessSound
    }

    var sourceKbpsLessSound: Int? {
        guard let total = sourceKbps else { return nil }
        let audio = source.audioStreams.compactMap { $0.bitRate.map(PlanContext.kbps) }.reduce(0) { min($0 + max($1, 0), 1 << 40) }
        return max(0, total - audio)
    }

    /// The most pictures a second an encode shows for a device that does not say
    /// (`caps.max_frame_rate`): what phone, TV and monitor panels show. A copy keeps any.
    static let defaultMaxFrameRate = 60.0

    /// bit/s → kbit/s rounded up, without overflowing on an absurd probe value.
    static func kbps(_ bits: Int) -> Int { bits / 1000 + (bits % 1000 > 0 ? 1 : 0) }

    /// The largest frame a rung delivers to this device: the rung's class (its 4K class
    /// when policy allows and the device decodes above 1080p), one class down above 30
    /// fps unless the rung has the bits for both, then never above the device's
    /// `max_resolution`.
    func frameClass(_ rung: Rung, highFrameRate: Bool) -> ResolutionClass {
        var cls = fullClass(rung)
        // Twice the pictures cost about 1.5-2x the bits for the same look: a rung with at
        // least twice the least budget the ladder gives that class at up to 30 fps keeps it
        // (1080p60 at 20 Mbps looks better than 1080p30 at the 10 Mbps rung; stepped to
        // 720p it spent 19 Mbit/s on a picture the 2 Mbps rung makes).
        let least = presets.rungs.filter { fullClass($0) == cls }.map(\.videoKbps).min() ?? rung.videoKbps
        if highFrameRate && rung.videoKbps < 2 * least { cls = FrameSize.stepDown(cls) }
        if let dm = device.maxResolution { cls = min(cls, dm) }
        return cls
    }

    /// A rung's class before frame rate and device: its 4K class when policy allows and
    /// the device decodes above 1080p.
    private func fullClass(_ rung: Rung) -> ResolutionClass {
        if policy.allow4KOutput, let big = rung.maxResolution4K, let dm = device.maxResolution, dm > .p1080 { return big }
        return rung.maxResolution
    }
}

extension StreamInfo {
    /// Whether the probe knows an audio stream's channels and sample rate, which an MP4
    /// sample entry must state: not for a stream whose packets only begin past its
    /// analysis (MPEG-TS), which is re-encoded (`audio_format_unknown`); the decoder needs
    /// neither.
    var formatKnown: Bool { (channels ?? 0) > 0 && (sampleRate ?? 0) > 0 }
}
