import CFFmpeg
import KilnCore
#if canImport(Glibc)
import Glibc
#endif

/// What a finished run wrote, as a fresh probe of the output sees it (CONTRACT.md
/// section 2, `output`).
public struct OutputInfo: Codable, Sendable, Equatable {
    public struct Video: Codable, Sendable, Equatable {
        public var codec: String
        public var width: Int
        public var height: Int
        public var pixelFormat: String?
        public var frameRate: Double?
        public var rotation: Int
        public var hdr: HDRKind
        enum CodingKeys: String, CodingKey {
            case codec, width, height, pixelFormat = "pixel_format", frameRate = "frame_rate", rotation, hdr
        }
    }
    public struct Audio: Codable, Sendable, Equatable {
        public var codec: String
        public var channels: Int
        public var sampleRate: Int
        public var bitRate: Int?
        public var language: String?
        enum CodingKeys: String, CodingKey { case codec, channels, sampleRate = "sample_rate", bitRate = "bit_rate", language }
    }
    public struct Subtitle: Codable, Sendable, Equatable {
        public var codec: String
        public var language: String?
        public var forced: Bool
    }
    /// A source stream left out of the output, and why (bitmap subtitles, attachments, …).
    public struct Dropped: Codable, Sendable, Equatable {
        public var sourceIndex: Int
        public var type: String
        public var codec: String
        public var reason: String
        /// The stream's language where the source names one (which sound was left out).
        public var language: String?
        enum CodingKeys: String, CodingKey { case sourceIndex = "source_index", type, codec, reason, language }
    }

    public var path: String
    public var bytes: Int64
    public var sha256: String
    public var durationSeconds: Double
    public var container: String
    @Nullable public var video: Video?
    @Nullable public var audio: Audio?
    public var subtitles: [Subtitle]
    public var chapters: Int
    public var dropped: [Dropped]

    enum CodingKeys: String, CodingKey {
        case path, bytes, sha256, durationSeconds = "duration_seconds", container, video, audio, subtitles, chapters, dropped
    }
}

public struct PrepareStats: Codable, Sendable, Equatable {
    public var wallSeconds: Double
    public var speed: Double
    /// Corrupt packets the decoders skipped (concealed) instead of failing.
    public var corruptPackets: Int
    /// Packets whose timestamps were missing or out of order and were repaired.
    public var repairedTimestamps: Int
    /// Gaps in the source's audio filled with silence when it was re-encoded (nil when
    /// none): the sound keeps its place against the picture.
    public var audioGapsFilled: Int?
    /// The ffmpeg command that makes the same streams with the same settings (filters,
    /// encoder options, mapping), to reproduce or compare the work; nil for `original`.
    public var ffmpegEquivalent: [String]?
    /// Wall seconds per phase (`work`: demux to trailer; `verify`: reopen, check, decode
    /// ends and hash; `finalize`: fsync and rename), so a slow run says where it went.
    public var phases: [String: Double]
    /// Whether the SHA-256 was computed while the file was written (the index forecast
    /// held, `IndexForecast`) rather than by reading the finished file again.
    public var hashedWhileWriting: Bool
    /// Where the output departs from the plan because the source left no other way, each
    /// a machine-readable reason and why (nil when it follows the plan): `audio_reencoded`
    /// for copied AAC whose format changes mid-stream, `video_reencoded` for a copied
    /// picture whose size does (the plan's `videoFallback` replaces it); either for a copy
    /// of damaged data the MP4 muxer refuses, or that does not decode from the MP4 where
    /// the source does; `audio_continued` (`video_continued`) where the sound (the
    /// pictures) went on in another of the source's streams when the chosen one ended
    /// (`StreamSuccession`); `subtitle_recoded` where text cues that are not UTF-8 were
    /// read in their language's code page (`SubtitleCharset`); `subtitle_cues_left_out`
    /// where cues came while the most a screen shows were on it, or while the most the
    /// schedule holds waited past the pictures (`CueSchedule`); `video_starts_late` where a
    /// copied picture's first keyframe comes more than the length tolerance in.
    public var adjustments: [String]?
    /// A burnt-in forced subtitle track's work (nil without one).
    public var burnedSubtitles: BurnedSubtitles?
    /// Bytes of the source the index forecast skimmed instead of reading (not reported:
    /// tests check that it skims).
    var forecastSkippedBytes: Int64 = 0
    enum CodingKeys: String, CodingKey {
        case wallSeconds = "wall_seconds", speed, corruptPackets = "corrupt_packets", repairedTimestamps = "repaired_timestamps"
        case ffmpegEquivalent = "ffmpeg_equivalent", phases, hashedWhileWriting = "hashed_while_writing"
        case audioGapsFilled = "audio_gaps_filled", adjustments, burnedSubtitles = "burned_subtitles"
    }
}

/// What painting a forced subtitle track into the pictures came to (`SubtitleBurner`).
public struct BurnedSubtitles: Codable, Sendable, Equatable {
    /// Display sets decoded (a PGS "clear" counts), pictures painted, and display sets a
    /// damaged track piled up past `SubtitleBurner.pendingLimit` and lost.
    public var displaySets: Int
    public var pictures: Int
    public var droppedDisplaySets: Int
    enum CodingKeys: String, CodingKey {
        case displaySets = "display_sets", pictures, droppedDisplaySets = "dropped_display_sets"
    }
}

public struct PrepareResult: Codable, Sendable, Equatable {
    public var output: OutputInfo
    public var stats: PrepareStats
    /// The plan as carried out where the engine had to change it (`stats.adjustments`): a
    /// copied picture or sound re-encoded, a text track that gave no text left out. Nil
    /// when the output is what the plan said.
    public var executedPlan: Plan?
}

/// Carries out a plan on a source: the media engine's one entry point.
public enum Preparer {
    /// Writes the plan's output to `output`. On success the file is complete, verified and
    /// durable; on any failure or cancellation nothing is left at `output` or beside it.
    /// `info` is the source's probe (its duration drives progress and verification).
    public static func prepare(source: String, plan: Plan, info: MediaInfo, output: String,
                               cancellation: Cancellation = Cancellation(),
                               progress: @escaping (JobProgress) -> Void = { _ in }) throws(KilnError) -> PrepareResult {
        let watch = SourceWatch(path: source)
        let opened = ProbedSource(demuxer: try Demuxer(path: source, cancellation: cancellation), info: info, watch: watch)
        return try prepare(source: opened, plan: plan, output: output, cancellation: cancellation, progress: progress)
    }

    /// The same, reading a source `Prober.open` has already opened and analysed.
    public static func prepare(source opened: ProbedSource, plan: Plan, output: String,
                               cancellation: Cancellation = Cancellation(),
                               progress: @escaping (JobProgress) -> Void = { _ in }) throws(KilnError) -> PrepareResult {
        try prepare(source: opened, plan: plan, output: output, forecastFrom: .standard,
                    awaitForecast: false, cancellation: cancellation, progress: progress)
    }

    /// `forecastFrom`: the smallest source whose remux is hashed while it is written
    /// (`IndexForecast`); `awaitForecast`: wait for a forecast still running when the copy
    /// ends instead of hashing afterwards; `room`: the room left for the index instead of
    /// `IndexRoom`'s estimate. Tests use them to exercise the forecast on small files and
    /// an index that outgrows its room.
    static func prepare(source opened: ProbedSource, plan: Plan, output: String, forecastFrom: IndexForecast.Threshold,
                        awaitForecast: Bool, room fixedRoom: Int64? = nil, cancellation: Cancellation = Cancellation(),
                        progress: @escaping (JobProgress) -> Void = { _ in }) throws(KilnError) -> PrepareResult {
        try refuseOverwritingSource(opened.path, output: output)
        if plan.deliveryFormat != .original { try refuseImplausibleDuration(opened.info, plan: plan, demuxer: try opened.demuxer()) }
        var change: FormatChange?
        var current = plan
        var adjustments: [String] = []
        var source = opened
        // Each copied stream can stop the copy once (audio, then picture), a merged sound be
        // taken apart once, and a silent audio stream be dropped once: at most five runs.
        while true {
            do {
                var result = try prepareOnce(source: source, plan: current, output: output, forecastFrom: forecastFrom,
                                             awaitForecast: awaitForecast, room: adjustments.isEmpty ? fixedRoom : nil,
                                             cancellation: cancellation, progress: progress, formatChange: &change)
                if !adjustments.isEmpty {
                    result.stats.adjustments = adjustments + (result.stats.adjustments ?? [])
                    result.executedPlan = result.executedPlan ?? current
                }
                // The planned sound that gave no packet is left out for that, and a merged
                // sound's partners for not merging, not as unchosen.
                let lost = Set(plan.audio?.sourceIndices ?? []).subtracting(current.audio?.sourceIndices ?? [])
                for i in result.output.dropped.indices where lost.contains(result.output.dropped[i].sourceIndex) {
                    result.output.dropped[i].reason = current.audio == nil ? "audio_dropped" : "audio_tracks_not_merged"
                }
                return result
            } catch {
                // A source that changed under the read looks damaged (packets past the length
                // it declared, an index cut short): its change is the reason to give.
                if !cancellation.isCanceled { try opened.watch?.check(error.stage) }
                // A camera's tracks that fail as one sound (one of them damaged: its times
                // jumping alone, its frames undecodable, its header unreadable) go as the
                // first alone, as before they were merged, rather than not at all; a file that
                // fails so too fails.
                if change == nil, error.code == .sourceCorrupt || error.code == .sourceUnsupported,
                   current.audio?.mergeSources?.isEmpty == false {
                    change = FormatChange(video: false, description: "the tracks merged into the sound failed as one (\(error.message))",
                                          unmerges: true)
                }
                guard let what = change, !cancellation.isCanceled else { throw blamingIndexDamage(error, info: opened.info) }
                change = nil
                if what.unmerges {
                    current.audio?.mergeSources = nil
                    adjustments.append("audio_tracks_not_merged: \(what.description)")
                } else if what.dropsAudio {
                    guard current.audio != nil else { throw error }
                    current.audio = nil
                    current.audioFallback = nil
                    adjustments.append("audio_dropped: \(what.description)")
                } else if what.video {
                    // The picture changed size, or the stream has no keyframe to start a copy
                    // on: the plan's encode replaces the copy (the filter graph fits each size
                    // into its frame; the decoder starts on what it can).
                    guard let fallback = current.videoFallback, current.video?.action == .copy else { throw error }
                    current.video = fallback
                    current.videoFallback = nil
                    adjustments.append("video_reencoded: \(what.description)")
                } else {
                    // The audio's format changed: re-encoded (decoders follow the change; the
                    // resampler keeps one format).
                    guard let audio = current.audio, audio.action == .copy else { throw error }
                    current.audio = current.audioFallback ?? reencoded(audio, source: opened.info)
                    current.audioFallback = nil
                    adjustments.append("audio_reencoded: \(what.description)")
                }
                source = ProbedSource(demuxer: try Demuxer(path: opened.path, cancellation: cancellation), info: opened.info,
                                      watch: opened.watch)
            }
        }
    }

    /// Closing a recording's splices gives the length of its parts, which the probe surveyed
    /// (`TimelineSurvey`, the `timestamps_jump` length). Where the run came out far longer
    /// (twice that, and a minute more), it did not follow the timeline across them and left
    /// jumps open as gaps: an audio PID that went from AAC to AC-3 at each splice (libavformat
    /// 5.1 goes on calling it AAC, so its packets' lengths were misread) made a 4-minute
    /// recording 3.3 hours of pictures at half a frame a second, which then verified against
    /// itself. That sound is followed now (`SoundCodecFollower`); a file whose timeline still
    /// cannot be followed is refused with that reason rather than delivered so.
    static func refuseUnfollowedSplices(end: Double, splices: Int, info: MediaInfo) throws(KilnError) {
        let parts = info.durationSeconds
        guard splices > 0, info.warnings.contains("timestamps_jump"), parts > 0, end - parts > max(60, parts) else { return }
        throw KilnError(.sourceCorrupt, stage: .mux,
                        "the recording's timeline cannot be followed across its \(splices) splices: the output would last "
                        + "\(Format.fixed(end, decimals: 0)) s where its parts last \(Format.fixed(parts, decimals: 0)) s")
    }

    /// A run that failed on a source whose index cannot be the file's (`MediaInfo.indexDamage`;
    /// most often a copy or download that stopped part-way) is answered with that cause
    /// first, then the symptom the run met: "the aac audio stream has no readable packets"
    /// alone sent an operator looking at the codec, not at the truncated file. One sentence,
    /// the conclusion first and said once: "the file is cut short or its offsets are
    /// damaged: stream 0's index places …, and the source's audio and video stop at 1.88 s
    /// of the 46.94 s it declares" (each part's own conclusion nested in the other had made
    /// 280 characters and four colons).
    static func blamingIndexDamage(_ error: KilnError, info: MediaInfo) -> KilnError {
        guard let damage = info.indexDamage, error.code == .sourceCorrupt || error.code == .verifyFailed else { return error }
        var symptom = Substring(error.message)
        // The symptom's own verdict ("…: the file is cut short or damaged") only repeats the cause's.
        if let verdict = symptom.occurrences(of: ": the file is cut short").last { symptom = symptom[..<verdict.lowerBound] }
        guard let split = Substring(damage).occurrences(of: ": ").last else {
            return KilnError(.sourceCorrupt, stage: error.stage, underlying: error.underlying,
                             "the source's index is damaged (\(damage)), and \(symptom)")
        }
        return KilnError(.sourceCorrupt, stage: error.stage, underlying: error.underlying,
                         "\(damage[split.upperBound...]): \(damage[..<split.lowerBound]), and \(symptom)")
    }

    /// The copied audio and video lanes, and which is which.
    static func copied(_ lanes: [Lane], demuxer: Demuxer) -> [(lane: CopyLane, video: Bool)] {
        lanes.compactMap { lane in
            guard let copy = lane as? CopyLane else { return nil }
            let type = demuxer.stream(Int(lane.inputIndex)).pointee.codecpar.pointee.codec_type
            return type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO ? (copy, type == AVMEDIA_TYPE_VIDEO) : nil
        }
    }

    /// The MP4 muxer refused a copied stream's data as damaged (`Muxer.refuse`). Re-encoded
    /// from the source (the plan's fallback), whose decoder conceals what it cannot read,
    /// the file still has an answer. The refusal names no stream (the interleaver writes
    /// queued packets of any stream, the trailer sample entries): the audio goes first,
    /// whose re-encoding costs little, and if the next run is refused too, the video.
    static func refusedCopy(_ error: KilnError, lanes: [Lane], demuxer: Demuxer) -> FormatChange? {
        guard error.code == .sourceCorrupt, error.stage == .mux, error.underlying == kiln_averror_invaliddata() else { return nil }
        let copies = copied(lanes, demuxer: demuxer)
        guard let refused = copies.first(where: { !$0.video }) ?? copies.first else { return nil }
        return FormatChange(video: refused.video,
                            description: "the MP4 muxer refuses the source's data as damaged (\(error.message))")
    }

    /// A copied stream that stopped because its format changed mid-stream (`CopyLane`), or
    /// (`dropsAudio`) an audio stream that gave nothing at all.
    struct FormatChange {
        let video: Bool
        let description: String
        var dropsAudio = false
        /// A merged sound failed: the plan's first track goes alone.
        var unmerges = false
    }

    /// The plan's audio stream gave no packet at all while its pictures came (a track with
    /// no frames, a recording whose sound PID never carried any): the file goes without
    /// sound rather than not at all. nil where another cause is the run's.
    static func missingSound(delivered: [Int32: Pipeline.Delivered], lanes: [Lane], demuxer: Demuxer) -> FormatChange? {
        func packets(_ lane: Lane) -> Int { Pipeline.delivered(to: lane, from: delivered)?.packets ?? 0 }
        func type(_ lane: Lane) -> AVMediaType { demuxer.stream(Int(lane.inputIndex)).pointee.codecpar.pointee.codec_type }
        guard let silent = lanes.first(where: { type($0) == AVMEDIA_TYPE_AUDIO && packets($0) == 0 }),
              lanes.contains(where: { type($0) == AVMEDIA_TYPE_VIDEO && packets($0) > 0 }) else { return nil }
        return FormatChange(video: false, description: "the source's audio stream \(silent.inputIndex) has no packets", dropsAudio: true)
    }

    /// A file that goes as it is is what the device downloads and plays: its planned picture
    /// and sound must give something at their start. A Matroska cluster whose timestamp's
    /// size was damaged, or an MP4 sound track whose sample sizes were lost, had gone out
    /// as they were, with exit 0, to a device that could play nothing of them (the same
    /// files remuxed were refused). A stream libavcodec has no decoder for, or one
    /// encrypted (the device's DRM decrypts it), is taken on trust; one damaged further in
    /// goes, as the source it is.
    static func refuseUnreadableOriginal(_ opened: ProbedSource, plan: Plan, cancellation: Cancellation) throws(KilnError) {
        let demuxer = try opened.demuxer()
        for (index, kind) in [(plan.video?.sourceIndex, "video"), (plan.audio?.sourceIndex, "audio")] {
            guard let index, index >= 0, index < demuxer.streamCount, opened.info.stream(index)?.encrypted != true else { continue }
            let st = demuxer.stream(index)
            guard avcodec_find_decoder(Demuxer.codecID(st)) != nil else { continue }
            // A header the decoder cannot open on because it is damaged (a zeroed AAC or Opus
            // header) opens on no player either: the file had gone to Android as it was. A
            // feature libavcodec lacks is left to the device.
            do { _ = try Decoder(stream: st, threads: 1) } catch {
                if error.code == .sourceCorrupt || error.code == .canceled || error.code == .resourceLimit { throw error }
                continue
            }
            let start = seconds(st.pointee.start_time, st.pointee.time_base) ?? 0
            // A file that cannot be sought in (read only from its start) is taken on trust too.
            let second: Verifier.Second
            do { second = try Verifier.decodeSecond(demuxer, stream: index, from: start, streamEnd: .infinity, cancellation: cancellation) } catch {
                guard error.code == .verifyFailed else { throw error }
                continue
            }
            guard second.frames == 0 else { continue }
            throw KilnError(.sourceCorrupt, stage: .decode,
                            "the source's \(kind) stream \(index) gives nothing to \(kind == "video" ? "show" : "play") at its start: it cannot go as it is")
        }
    }

    /// The output renamed over the source would replace the user's file with what was made
    /// from it (a typo away with `--output`), and a symlink or hard link to it is the same
    /// file: refused before any work.
    static func refuseOverwritingSource(_ source: String, output: String) throws(KilnError) {
        var a = stat(), b = stat()
        guard stat(source, &a) == 0, stat(output, &b) == 0, a.st_dev == b.st_dev, a.st_ino == b.st_ino else { return }
        throw KilnError(.usage, stage: .request, field: "output", "the output is the source file itself: choose another path")
    }

    /// A header that declares far more time than the file's bytes could hold
    /// (`Prober.implausibleLength`), judged by the streams the plan keeps. The probe judged
    /// it by every picture and sound stream; a subtitle track the copy leaves out can carry
    /// the damage alone (the ffmpeg command's VobSub from PGS gives a packet 49 days long,
    /// and the segment that length).
    static func refuseImplausibleDuration(_ info: MediaInfo, plan: Plan, demuxer: Demuxer) throws(KilnError) {
        if let why = Prober.implausibleLength(info, of: plan.keptSourceIndices, demuxer: demuxer) {
            throw KilnError(.sourceCorrupt, stage: .probe, why)
        }
    }

    /// A copied audio stream's re-encoded replacement: AAC with the channels the copy would
    /// have had (the device takes those) at the source's bit rate, kept within 32 to 96
    /// kbit/s per channel. Seven channels (6.1) become 5.1: AAC has no channel
    /// configuration for seven, and its program config element left the output's track
    /// with no channel count a reader could see (verification found 0 channels).
    static func reencoded(_ audio: AudioPlan, source info: MediaInfo) -> AudioPlan {
        let copied = max(1, min(audio.channels > 0 ? audio.channels : 2, 8))
        let channels = copied == 7 ? 6 : copied
        let sourceKbps = (info.stream(audio.sourceIndex)?.bitRate ?? 0) / 1000
        let kbps = min(max(sourceKbps > 0 ? sourceKbps : 64 * channels, 32 * channels), 96 * channels)
        return AudioPlan(sourceIndex: audio.sourceIndex, action: .transcode, codec: "aac", channels: channels,
                         bitrateKbps: kbps, language: audio.language)
    }

    private static func prepareOnce(source opened: ProbedSource, plan: Plan, output: String, forecastFrom: IndexForecast.Threshold,
                                    awaitForecast: Bool, room fixedRoom: Int64?, cancellation: Cancellation,
                                    progress: @escaping (JobProgress) -> Void,
                                    formatChange: inout FormatChange?) throws(KilnError) -> PrepareResult {
        let source = opened.path, info = opened.info
        let clock = SystemClock()
        let started = clock.monotonicSeconds()
        let out = try AtomicOutput(destination: output)
        defer { out.discard() }
        EngineLog.reset()
        var corrupt = 0, repaired = 0, gaps = 0
        // Packets whose times were repaired, left out as a run that came back, or made continuous across a splice.
        var timelineRepairs = 0
        var equivalent: [String]? = nil
        var continued: [String] = []
        var subtitleNotes: [String] = []
        var burned: BurnedSubtitles?
        var phases: [String: Double] = [:]
        var mark = started
        func phase(_ name: String) {
            let now = clock.monotonicSeconds()
            phases[name, default: 0] += now - mark
            mark = now
        }
        let expected = expectedDuration(info: info, plan: plan)
        let frameLengths = Pipeline.frameLengths(of: info)
        // The plan as carried out: less the text tracks that gave no text.
        var executed = plan
        var outInfo: MediaInfo

        let digest: (sha256: String, bytes: Int64)
        var synced = false
        var witness: KeyframeWitness? = nil
        // The SHA-256 computed while the file was written, when the index forecast held.
        var streaming: StreamingDigest? = nil
        defer { streaming?.abandon() }
        var hashedWhileWriting = plan.deliveryFormat == .original
        var forecast: IndexForecast? = nil
        // Taken here or closed: a plan without a forecast (an encode, the file as it is) must
        // not hold a second demuxer's buffers while it runs.
        let second = opened.secondReader
        opened.secondReader = nil
        if plan.deliveryFormat == .original {
            try refuseUnreadableOriginal(opened, plan: plan, cancellation: cancellation)
            // The source is the artifact: copy its bytes as they are, hashing as they go.
            digest = try copyFile(from: source, to: out.temporary, cancellation: cancellation, duration: info.durationSeconds,
                                  watch: opened.watch, progress: progress)
            outInfo = info
        } else {
            let demuxer = try opened.demuxer()
            if let v = plan.video, v.action == .copy, let s = info.stream(v.sourceIndex), v.sourceIndex < demuxer.streamCount,
               KeyframeWitness.copyKeepsSamples(demuxer.stream(v.sourceIndex)) {
                // Without a decoder for it, verification decodes the keyframes itself (and says why).
                witness = try? KeyframeWitness(stream: demuxer.stream(v.sourceIndex), durationSeconds: s.durationSeconds ?? expected)
            }
            let lanes = try lanes(for: plan, demuxer: demuxer, info: info, witness: witness)
            let room = fixedRoom ?? IndexRoom.bytes(plan: plan, demuxer: demuxer, durationSeconds: expected)
            var delivered: [Int32: Pipeline.Delivered] = [:]
            // What the output must last; across splices, what the source's packets covered.
            var verifiedLength = expected
            var startOffset = 0.0   // the source's time at the output's zero
            do {
                let muxer = try Muxer(path: out.temporary, room: room, cancellation: cancellation)
                if IndexForecast.applies(to: plan),
                   IndexForecast.worthwhile(sourceBytes: info.sizeBytes, main: demuxer, from: forecastFrom,
                                            idleCores: opened.cpuMark?.idleOthers(),
                                            samples: IndexRoom.estimate(plan: plan, demuxer: demuxer, durationSeconds: expected).samples) {
                    let reader = second ?? SecondReader(path: source, skimmable: IndexForecast.skimmable(demuxer))
                    let started = IndexForecast(reader: reader, main: demuxer, plan: plan, info: info, room: room)
                    forecast = started
                    streaming = try StreamingDigest(path: out.temporary, forecast: started, cancellation: cancellation)
                    witness?.deferDecodes()
                }
                let pipeline = Pipeline(demuxer: demuxer, lanes: lanes, muxer: muxer, durationSeconds: expected,
                                        cancellation: cancellation, watch: opened.watch, frameLengths: frameLengths,
                                        onProgress: progress)
                // Timestamps that jump (MPEG-TS) move by more than the start; such files have no index anyway.
                if let witness, let v = plan.video, !demuxer.hasDiscontinuousTimestamps {
                    witness.expectKeyframes(of: demuxer.stream(v.sourceIndex), shift: -pipeline.startOffset())
                }
                do { try pipeline.run() } catch {
                    formatChange = lanes.lazy.compactMap { $0 as? CopyLane }.compactMap { lane in
                        lane.formatChange.map { FormatChange(video: lane.isVideo, description: $0) }
                    }.first ?? refusedCopy(error, lanes: lanes, demuxer: demuxer)
                    throw error
                }
                delivered = pipeline.delivered
                // A text track that gave no text is not in the file (`Muxer.unwrittenText`):
                // the plan as carried out leaves it out, and says so.
                for lane in lanes.compactMap({ $0 as? SubtitleLane }) where muxer.unwrittenText.contains(lane.outputIndex) {
                    guard let i = executed.subtitles.firstIndex(where: { $0.sourceIndex == Int(lane.inputIndex) && $0.action == .convert }) else { continue }
                    executed.subtitles[i].action = .drop
                    executed.subtitles[i].reason = "subtitle_empty"
                    executed.subtitles[i].codec = info.stream(Int(lane.inputIndex))?.codec ?? executed.subtitles[i].codec
                    subtitleNotes.append("subtitle_empty: the source's stream \(lane.inputIndex) gave no text to show; left out")
                }
                // Where the pipeline changed the source's timeline (closed a splice, left out a
                // run that came back), the length the source declares does not hold.
                // Nor does a length the probe could only estimate (`duration_estimated`: a long
                // MP3 without a frame count), or a file of files joined, its last Ogg link's or
                // first FLAC or AVI file's (`LinkChain`, `AVIJoin`), which the run's own end replaces.
                if let why = demuxer.linksUnfollowable { throw KilnError(.sourceUnsupported, stage: .demux, "the source cannot be timed: \(why)") }
                if info.warnings.contains("duration_estimated") || info.warnings.contains("links_chained") || demuxer.linksChained,
                   let end = pipeline.picturesAndSoundEnd {
                    verifiedLength = end
                }
                if pipeline.splices > 0 || pipeline.outliers > 0, let end = delivered.values.map(\.endSeconds).filter(\.isFinite).max() {
                    verifiedLength = end
                    try refuseUnfollowedSplices(end: end, splices: pipeline.splices, info: info)
                }
                startOffset = Double(pipeline.startOffset()) / Double(kiln_time_base())
                // Cues that reach the declared length explain nothing in a file whose index
                // says it is cut short: a download stopped at 80 % keeps a subtitle line
                // stored before the cut and shown to the end (a Matroska film with subtitles
                // went out 4.8 s of 6, where one without was refused as cut short).
                if let end = pipeline.picturesAndSoundEnd,
                   lengthExplained(declared: verifiedLength, picturesAndSoundEnd: end, start: startOffset,
                                   cueReach: info.indexDamage == nil ? pipeline.cueReach : nil, lanes: lanes, demuxer: demuxer) {
                    verifiedLength = end
                }
                burned = lanes.lazy.compactMap { ($0 as? BurnLane)?.burner }.first.map {
                    BurnedSubtitles(displaySets: $0.stats.framesDecoded, pictures: $0.stats.framesEncoded, droppedDisplaySets: $0.droppedSets)
                }
                subtitleNotes += lanes.compactMap { lane in
                    (lane as? SubtitleLane).flatMap { sub in
                        sub.charset.map {
                            let cues = sub.recodedCues == 1 ? "1 cue of the source's stream \(sub.inputIndex) is" : "\(sub.recodedCues) cues of the source's stream \(sub.inputIndex) are"
                            return "subtitle_recoded: \(cues) not UTF-8; read as \($0.name)"
                        }
                    }
                }
                subtitleNotes += lanes.compactMap { lane in
                    guard let sub = lane as? SubtitleLane, sub.leftOutCues > 0 else { return nil }
                    return "subtitle_cues_left_out: \(sub.leftOutCues) cues of the source's stream \(sub.inputIndex), "
                        + "come while \(sub.mostOnScreen) were on screen or held ahead of the pictures"
                }
                continued = pipeline.continued.map { h, at in
                    (h.video ? "video_continued: the pictures go on" : "audio_continued: the sound goes on") + " in the source's stream \(h.to)"
                        + (at.map { " at \(Format.fixed($0, decimals: 2)) s" } ?? "") + ", where stream \(h.from) ends"
                }
                // A copy starts at a keyframe: pictures before the first one (a recording cut
                // mid-GOP, damaged first keyframes) cannot be shown, and the output's start later.
                continued += lanes.compactMap { lane in
                    guard let copy = lane as? CopyLane, let late = copy.startsLate,
                          late.seconds > Verifier.durationTolerance(expected) else { return nil }
                    return "video_starts_late: the source's stream \(copy.inputIndex) has no keyframe in its first "
                        + "\(Format.fixed(late.seconds, decimals: 2)) s (\(Format.count(late.packets, "packet"))); the pictures start there"
                }
                repaired = muxer.repairedTimestamps + pipeline.repairedTimestamps
                    + lanes.reduce(0) { $0 + $1.stats.repairedTimestamps }
                // What a file cut short lost of the kept streams counts too (the sound of a
                // fragmented download's last second, laid after its pictures, went uncounted).
                corrupt = lanes.reduce(0) { $0 + $1.stats.corruptPackets } + pipeline.outliers
                    + Set(lanes.flatMap(\.inputIndices)).reduce(0) { $0 + demuxer.samplesPastEnd(stream: Int($1)) }
                timelineRepairs = repaired + pipeline.outliers + pipeline.splices
                gaps = lanes.reduce(0) { $0 + $1.stats.gapsFilled }
                let decoding: [String] = lanes.flatMap(\.ffmpegInputOptions)
                let chapters: [String] = demuxer.context.pointee.nb_chapters > 0 ? [] : ["-map_chapters", "-1"]
                equivalent = ["ffmpeg"] + decoding + ["-i", source] + lanes.flatMap(\.ffmpegEquivalent)
                    + chapters + ["-movflags", "+faststart", output]
            }
            // The muxer is gone. An index moved into its room leaves alone what the streaming
            // digest reads, which then goes on while the index moves and verification decodes;
            // an index inserted in front moves that data, so the digest finishes first.
            let readingOn = streaming?.writerFinished(awaitingForecast: awaitForecast) ?? false
            let claimed = readingOn ? nil : streaming?.claim()
            try cancellation.check(.mux)
            let fastStart = try FastStart.apply(path: out.temporary, room: room, cancellation: cancellation)
            // Keyframes the witness deferred (the hash holds the other core) are decoded now,
            // before verification opens the output: a UHD keyframe's decoder tables (~9 MB)
            // and the output's sample index (~1 MB for a 6-minute film) are then never held
            // at once.
            EngineMemory.release()
            witness?.decodeWaiting()
            phase("work")
            try cancellation.check(.verify)
            // Hashing (one core), flushing (the disk) and verification (decoding, the other
            // core) need only the finished file, so they run side by side.
            let temporary = out.temporary, following = readingOn ? streaming : nil
            let hashing = Background { () throws(KilnError) -> (sha256: String, bytes: Int64, streamed: Bool) in
                if let c = claimed ?? following?.claim(), c.matches(fastStart) { return (c.sha256, c.bytes, true) }
                let d = try AtomicOutput.digest(path: temporary, cancellation: cancellation)
                return (d.sha256, d.bytes, false)
            }
            let flushing = Background { () throws(KilnError) in try AtomicOutput.fsync(path: temporary) }
            // A copied stream's damaged packets are the source's: they may stay, counted, where
            // the source is damaged too (as a transcode conceals them).
            // Not where most of the source's packets there do not decode: that would play as a
            // few frames among noise (a fragmented MP4 with a kilobyte inserted decoded 3 of
            // its first second's 47 sound frames), and the source is to blame.
            var carried = 0
            var mostlyDamaged: String?
            let sourceDamaged = { (stream: Int, from: Double) -> Bool in
                guard let lane = lanes.first(where: { $0.outputIndex == Int32(stream) }), lane is CopyLane,
                      let second = damagedSecond(demuxer, stream: Int(lane.inputIndex), from: from + startOffset,
                                                 cancellation: cancellation) else { return false }
                if second.errors > second.frames {
                    mostlyDamaged = "the source's stream \(lane.inputIndex) is mostly damaged near \(Int(from)) s: "
                        + "\(Format.count(second.errors, "packet")) there \(second.errors == 1 ? "does" : "do") not decode (\(Format.count(second.frames, "frame")) \(second.frames == 1 ? "does" : "do"))"
                    return false
                }
                carried += second.errors
                return true
            }
            var undecodable: Int?
            let verified = Result { () throws(KilnError) -> MediaInfo in
                do throws(KilnError) {
                    let pictureSeconds = plan.video.flatMap { frameLengths[Int32($0.sourceIndex)] }.map { Double($0) / Double(kiln_time_base()) } ?? 0
                    return try Verifier.verify(path: out.temporary, plan: executed, expectedDuration: verifiedLength, lastPicture: pictureSeconds,
                                               cancellation: cancellation, witness: witness, sourceDamaged: sourceDamaged,
                                               undecodable: { undecodable = $0 })
                } catch {
                    guard error.code == .verifyFailed else { throw error }
                    if let mostlyDamaged { throw KilnError(.sourceCorrupt, stage: .decode, mostlyDamaged) }
                    let blamed = blameSource(error, delivered: delivered, lanes: lanes, demuxer: demuxer, info: info, expected: verifiedLength,
                                             timelineRepairs: timelineRepairs, cancellation: cancellation)
                    // Not where the index reaches past the file's end: there the sound is lost
                    // with the file's tail (an MP4 stores it in long runs after the pictures),
                    // and the file is refused as cut short.
                    if info.indexDamage == nil, let missing = missingSound(delivered: delivered, lanes: lanes, demuxer: demuxer) {
                        formatChange = missing
                        throw blamed
                    }
                    // A copy that does not decode from the MP4 where the source does (a damaged
                    // codec header that misled the muxer): the stream is re-encoded from the
                    // source, whose decoder finds its way, as the plan's fallback.
                    if blamed.code == .verifyFailed, let stream = undecodable,
                       let lane = copied(lanes, demuxer: demuxer).first(where: { $0.lane.outputIndex == Int32(stream) }) {
                        formatChange = FormatChange(video: lane.video, description: "the copied \(lane.video ? "video" : "audio") does not decode "
                                                    + "from the MP4 where the source does (\(error.message))")
                    }
                    throw blamed
                }
            }
            let hashed = try hashing.wait()
            digest = (hashed.sha256, hashed.bytes)
            hashedWhileWriting = hashed.streamed
            try flushing.wait()
            synced = true
            outInfo = try verified.get()
            corrupt += carried
            phase("verify")
        }
        try cancellation.check(.finalize)
        if plan.deliveryFormat == .original { phase("work") }
        // What was read must be the file that was planned, all of it.
        try opened.watch?.check(.demux)
        try out.commit(synced: synced)
        phase("finalize")
        let wall = clock.monotonicSeconds() - started
        return PrepareResult(
            output: describe(outInfo, path: output, digest: digest, plan: executed, source: info),
            stats: PrepareStats(wallSeconds: wall, speed: info.durationSeconds / max(wall, 1e-3),
                                corruptPackets: corrupt, repairedTimestamps: repaired, audioGapsFilled: gaps > 0 ? gaps : nil,
                                ffmpegEquivalent: equivalent, phases: phases,
                                hashedWhileWriting: hashedWhileWriting, adjustments: continued.isEmpty && subtitleNotes.isEmpty ? nil : continued + subtitleNotes,
                                burnedSubtitles: burned, forecastSkippedBytes: forecast?.skippedBytes ?? 0),
            executedPlan: executed == plan ? nil : executed)
    }

    /// The pipeline's lanes for `plan`, reading `demuxer`: one per kept stream, in output
    /// order (video, audio, subtitles). `witness` decodes a copied video's keyframes.
    /// `watchingPictureSize`: a copied video with a fallback stops when its picture size
    /// changes (`CopyLane`).
    static func lanes(for plan: Plan, demuxer: Demuxer, info: MediaInfo, witness: KeyframeWitness? = nil,
                      watchingPictureSize: Bool = true) throws(KilnError) -> [Lane] {
        // Whatever a plan says, nothing the probe found encrypted is decoded or copied: CENC
        // (whose packets the pipeline also refuses as they come), FairPlay and Windows Media
        // DRM (whose packets say nothing, and FairPlay video has no decoder to fail on first).
        for index in plan.keptSourceIndices where info.stream(index)?.encrypted == true {
            throw KilnError(.sourceUnsupported, stage: .plan,
                            "the source's stream \(index) is encrypted (DRM): it can only be delivered as the file it is")
        }
        var lanes: [Lane] = []
        var burnLane: BurnLane?
        if let v = plan.video {
            guard let s = info.stream(v.sourceIndex), v.sourceIndex < demuxer.streamCount else {
                throw KilnError(.planUnsupported, stage: .plan, "the plan's video stream \(v.sourceIndex) is not in the source")
            }
            if v.action == .copy {
                lanes.append(CopyLane(demuxer: demuxer, index: v.sourceIndex, witness: witness,
                                      watchPictureSize: watchingPictureSize && plan.videoFallback != nil,
                                      derivePresentationTimes: s.presentationTimesMissing == true))
            } else {
                let lane = try VideoTranscodeLane(demuxer: demuxer, plan: v, source: s)
                // A forced bitmap track to paint into the pictures: its packets reach the
                // burner through a lane of their own, on the output's timeline.
                if let burn = plan.subtitles.first(where: { $0.action == .burn }) {
                    guard burn.sourceIndex >= 0, burn.sourceIndex < demuxer.streamCount,
                          demuxer.stream(burn.sourceIndex).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_SUBTITLE else {
                        throw KilnError(.planUnsupported, stage: .plan, "the plan's subtitle stream \(burn.sourceIndex) to burn in is not a subtitle stream of the source")
                    }
                    let burner = try SubtitleBurner(source: demuxer.stream(burn.sourceIndex), picture: demuxer.stream(v.sourceIndex),
                                                    width: lane.size.width, height: lane.size.height, bt601: lane.bt601,
                                                    forcedOnly: burn.forcedOnly == true)
                    lane.burner = burner
                    burnLane = BurnLane(burner)
                }
                lanes.append(lane)
            }
        }
        if let a = plan.audio {
            guard let s = info.stream(a.sourceIndex), a.sourceIndex < demuxer.streamCount else {
                throw KilnError(.planUnsupported, stage: .plan, "the plan's audio stream \(a.sourceIndex) is not in the source")
            }
            if a.action == .copy, a.mergeSources?.isEmpty == false {
                throw KilnError(.planUnsupported, stage: .plan, "the plan copies audio stream \(a.sourceIndex) and merges others into it: only an encode merges streams")
            }
            lanes.append(a.action == .copy ? CopyLane(demuxer: demuxer, index: a.sourceIndex, probed: s, sourceSeconds: info.durationSeconds)
                                           : try AudioTranscodeLane(demuxer: demuxer, plan: a, source: s, sourceSeconds: info.durationSeconds))
        }
        for sub in plan.subtitles where sub.action == .convert {
            guard info.stream(sub.sourceIndex) != nil, sub.sourceIndex < demuxer.streamCount else {
                throw KilnError(.planUnsupported, stage: .plan, "the plan's subtitle stream \(sub.sourceIndex) is not in the source")
            }
            lanes.append(try SubtitleLane(demuxer: demuxer, plan: sub))
        }
        guard !lanes.isEmpty else {
            throw KilnError(.planUnsupported, stage: .plan, "the plan keeps no stream")
        }
        return lanes + [burnLane].compactMap { $0 }
    }

    /// Whether a source whose pictures and sound end well before the length it declares is
    /// whole all the same: Matroska's duration counts every track, so a subtitle cue that
    /// runs on past the end (the last line over the credits) makes it longer. Either the
    /// source's subtitle cues (`Pipeline.cueReach`) reach the declared length, or the
    /// muxer's own statistics for the kept audio and video (`Prober.statedDuration`) put
    /// their end where it was found. A file cut short has neither: its cues stop where
    /// everything stops, and its tags, if any, state the whole length. And the ffmpeg
    /// command's Matroska muxer writes the segment's duration as its last time, not its
    /// length: a recording saved with its own clock (`-copyts`, times from 1.4 s on)
    /// declares its start more than it lasts, so an end at the declared time (`start`, the
    /// source's time at the output's zero, added back) is the whole file.
    static func lengthExplained(declared: Double, picturesAndSoundEnd end: Double, start: Double, cueReach: Double?,
                                lanes: [Lane], demuxer: Demuxer) -> Bool {
        let tolerance = Verifier.durationTolerance(declared)
        guard declared - end > tolerance else { return false }
        // Not where much of the file lies past the last packet read:
        // libavformat gave up on damage and searched on to the end for nothing (Matroska's
        // resync after a block naming no track, which came out 0.33 s of 1.23, its one
        // subtitle cue "reaching" the end), which reads as the file's end. Cues, tags and
        // an index at the end are a small part of a file.
        // A Matroska file's Cues, at its end, hold an entry for each cue as for each
        // keyframe: 40,000 subtitle cues are a megabyte of index past the last packet.
        if demuxer.furthestByte > 0, let size = FileIO.size(atPath: demuxer.path),
           case let cues = demuxer.matroskaHead?.cuesStart,
           case let media = cues.flatMap({ $0 >= demuxer.furthestByte && $0 <= size ? $0 : nil }) ?? size,
           media - demuxer.furthestByte > max(16 << 10, size / 10) { return false }
        let lengths = [declared] + (demuxer.isMatroska && start > tolerance && declared - start > tolerance ? [declared - start] : [])
        for length in lengths where length - end <= tolerance || cueReach.map({ $0 >= length - tolerance }) == true { return true }
        let stated = lanes.filter { !SubtitleLane.isText(demuxer.stream(Int($0.inputIndex)).pointee.codecpar.pointee) }
            .map { Prober.statedDuration(demuxer.stream(Int($0.inputIndex))) }
        return !stated.isEmpty && stated.allSatisfy { $0.map { $0 <= end + tolerance } ?? false }
    }

    /// A failed verification's cause, when the source shows it: the decoders concealed
    /// damaged packets, a kept audio or video stream gave no packet, or the source's packets
    /// stop well short of (or run past) the duration it declares (a file cut short). That failure is
    /// permanent (`source_corrupt`: the same file fails the same way again); without such
    /// evidence it stays `verify_failed`, a write gone wrong and worth retrying.
    /// A copied stream that fails to decode in the output is checked in the source too: the
    /// same bytes failing there are the source's damage.
    /// `timelineRepairs`: packets whose times the pipeline or the muxer repaired, or left
    /// out as a run that jumped and came back: a source whose times are damaged.
    static func blameSource(_ error: KilnError, delivered: [Int32: Pipeline.Delivered], lanes: [Lane], demuxer: Demuxer,
                            info: MediaInfo, expected: Double, timelineRepairs: Int = 0, cancellation: Cancellation) -> KilnError {
        // A stream that gave nothing at all says more than the packets that failed beside it.
        for lane in lanes where (Pipeline.delivered(to: lane, from: delivered)?.packets ?? 0) == 0 {
            let type = demuxer.stream(Int(lane.inputIndex)).pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO else { continue }
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's \(type == AVMEDIA_TYPE_VIDEO ? "video" : "audio") stream \(lane.inputIndex) has no readable packets")
        }
        let corrupt = lanes.reduce(0) { $0 + $1.stats.corruptPackets }
        if corrupt > 0 {
            return KilnError(.sourceCorrupt, stage: .decode,
                             "the source is damaged (\(Format.count(corrupt, "packet")) marked damaged or not decodable): \(error.message)")
        }
        if timelineRepairs > 0 {
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's timestamps are damaged (\(Format.count(timelineRepairs, "packet")) repaired or left out): \(error.message)")
        }
        var last: Double? = nil
        var shortest: (span: Double, type: String, index: Int32)? = nil
        // What the output keeps, as the messages name it ("audio and video", "audio").
        var kinds = Set<String>()
        for lane in lanes {
            let type = demuxer.stream(Int(lane.inputIndex)).pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO else { continue }
            let name = type == AVMEDIA_TYPE_VIDEO ? "video" : "audio"
            kinds.insert(name)
            guard let d = Pipeline.delivered(to: lane, from: delivered) else { continue }
            // A sound packet lasts a fraction of a second: one whose stated length runs on
            // for seconds is the demuxer's guess across what it lost (Ogg's last page read
            // before a damaged one gave its packet the 4.1 s to the stream's declared end).
            last = max(last ?? 0, type == AVMEDIA_TYPE_AUDIO ? min(d.endSeconds, d.lastStartSeconds + 1) : d.endSeconds)
            if d.span < shortest?.span ?? .infinity { shortest = (d.span, name, lane.inputIndex) }
        }
        let declared = Format.fixed(expected, decimals: 2), tolerance = Verifier.durationTolerance(expected)
        if let last, expected > 0, last < expected - tolerance {
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's \(kinds.sorted().joined(separator: " and ")) \(kinds.count > 1 ? "stop" : "stops") at \(Format.fixed(last, decimals: 2)) s "
                             + "of the \(declared) s it declares: the file is cut short or damaged")
        }
        if let last, expected > 0, last > expected + tolerance {
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's packets run to \(Format.fixed(last, decimals: 2)) s, past the \(declared) s it declares: the file is damaged")
        }
        // Damage that costs a stream its start (the output starts where both have begun).
        if let shortest, expected > 0, shortest.span < expected - tolerance {
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's \(shortest.type) stream \(shortest.index) covers only \(Format.fixed(shortest.span, decimals: 2)) s of the \(declared) s it declares: the file is damaged")
        }
        // A copied video starts at its first keyframe: one far into the file (the first
        // ones damaged) leaves the output short of the source's length.
        for case let lane as CopyLane in lanes {
            guard let late = lane.startsLate, expected > 0, late.seconds > tolerance else { continue }
            return KilnError(.sourceCorrupt, stage: .demux,
                             "the source's video stream \(lane.inputIndex) has no keyframe in its first \(Format.fixed(late.seconds, decimals: 2)) s "
                             + "(\(Format.count(late.packets, "packet"))): a copy starts at a keyframe, and the file is damaged")
        }
        for (lane, video) in copied(lanes, demuxer: demuxer) {
            let index = Int(lane.inputIndex), st = demuxer.stream(index)
            let name = video ? "video" : "audio"
            // The copy carries the source's codec parameters as they are: if no decoder opens
            // with them (a damaged hvcC or avcC), neither output nor source can be played.
            do { _ = try Decoder(stream: st, threads: 1, sharedPicture: true) } catch {
                if error.underlying == kiln_averror_invaliddata() {
                    return KilnError(.sourceCorrupt, stage: .decode, underlying: error.underlying,
                                     "the source's \(name) stream \(index) has damaged codec parameters (its header): \(error.message)")
                }
            }
            let start = seconds(st.pointee.start_time, st.pointee.time_base) ?? 0
            let end = start + (info.stream(index)?.durationSeconds ?? expected)
            for from in [start, max(start, end - 1)] {
                guard let second = damagedSecond(demuxer, stream: index, from: from, streamEnd: end,
                                                 cancellation: cancellation) else { continue }
                return KilnError(.sourceCorrupt, stage: .decode,
                                 "the source's \(name) stream \(index) does not decode near \(Int(from - start)) s "
                                 + "(\(second.frames) frames, \(second.errors) errors): the file is damaged")
            }
        }
        return error
    }

    /// The source's second of one stream from `from` (source time), decoded as verification
    /// decodes the output's, when it does not decode cleanly; nil when it does, or when it
    /// cannot be sought or decoded at all (no evidence either way). Nothing decoded and
    /// nothing rejected is no evidence either when the seek found no keyframe before the
    /// stream ended: MPEG-TS seeks by timestamp to any packet, so near the end of a file
    /// with long GOPs the check may reach none; the file is not damaged for that. A keyframe
    /// reached that gives no picture is damage.
    static func damagedSecond(_ demuxer: Demuxer, stream index: Int, from: Double, streamEnd: Double = .infinity,
                              cancellation: Cancellation) -> Verifier.Second? {
        guard let second = try? Verifier.decodeSecond(demuxer, stream: index, from: from, streamEnd: streamEnd,
                                                      cancellation: cancellation), !second.decoded,
              second.frames > 0 || second.errors > 0 || second.witnessFailed || second.keyframeSent else { return nil }
        return second
    }

    /// The duration the output must have: the longest of the kept audio and video
    /// streams of the source, or the container's duration when streams do not say.
    static func expectedDuration(info: MediaInfo, plan: Plan) -> Double {
        let kept = plan.keptSourceIndices.compactMap { info.stream($0) }
        // From the first kept stream's start to the last one's end: the output starts where
        // the first starts, and a stream that starts late (pictures half a second after the
        // sound) lasts less than the whole.
        let spans = kept.compactMap { s -> (start: Double, end: Double)? in
            guard let start = s.startSeconds, let length = s.durationSeconds, length > 0 else { return nil }
            return (start, start + length)
        }
        if let first = spans.map(\.start).min(), let last = spans.map(\.end).max(), spans.count == kept.count { return last - first }
        return kept.compactMap(\.durationSeconds).filter { $0 > 0 }.max() ?? info.durationSeconds
    }

    static func describe(_ m: MediaInfo, path: String, digest: (sha256: String, bytes: Int64), plan: Plan, source: MediaInfo) -> OutputInfo {
        let v = m.videoStreams.first
        let a = m.audioStreams.first
        var dropped: [OutputInfo.Dropped] = []
        if plan.deliveryFormat != .original {
            // Each with its language as MP4 writes languages (the plan's, else the stream's).
            func language(_ index: Int) -> String? { LanguageCode.terminologic(source.stream(index)?.language) }
            for s in plan.subtitles where s.action == .drop {
                dropped.append(.init(sourceIndex: s.sourceIndex, type: "subtitle", codec: s.codec, reason: s.reason ?? "subtitle_unsupported",
                                     language: s.language ?? language(s.sourceIndex)))
            }
            // Every source stream the output does not carry is said, with why: a user who
            // finds the French sound or the second angle missing offline learns it here,
            // not from the plan's indices. A camera's merged partner is carried (in the
            // sound); a planned sound that gave no packet is left out at run time.
            let kept = Set(plan.keptSourceIndices)
            // A whole multiplex's other channels (`StreamInfo.programs`) are said as such.
            let programme = plan.video.flatMap { source.stream($0.sourceIndex)?.programs }.map(Set.init)
            for s in source.streams {
                let left: (type: String, reason: String)?
                if let programme, let own = s.programs, programme.isDisjoint(with: own), !kept.contains(s.index) {
                    let type = s.type == .video && s.disposition.attachedPicture ? "attached_picture" : s.type.rawValue
                    dropped.append(.init(sourceIndex: s.index, type: type, codec: s.codec, reason: "other_programme", language: language(s.index)))
                    continue
                }
                switch s.type {
                case .attachment: left = ("attachment", "attachment_unsupported")
                case .video where s.disposition.attachedPicture: left = ("attached_picture", "attachment_unsupported")
                case .data: left = ("data", "data_stream_unsupported")
                case .video where s.packetless == true && !kept.contains(s.index): left = ("video", "video_track_empty")
                case .video where !kept.contains(s.index): left = ("video", "video_track_not_chosen")
                case .audio where !kept.contains(s.index): left = ("audio", "audio_track_not_chosen")
                case .unknown: left = ("unknown", "stream_unsupported")
                default: left = nil
                }
                if let left {
                    dropped.append(.init(sourceIndex: s.index, type: left.type, codec: s.codec, reason: left.reason, language: language(s.index)))
                }
            }
            dropped.sort { $0.sourceIndex < $1.sourceIndex }
        }
        // A copied sound has the source's channels. The MP4 sample entry of an MP3 says 2
        // whatever the frames hold (nothing else in the index says it), and the output is
        // read without decoding.
        let copiedChannels = plan.audio.flatMap { $0.action == .copy ? source.stream($0.sourceIndex)?.channels : nil }.flatMap { $0 > 0 ? $0 : nil }
        // A copied picture stream is the source's bitstream: its pixel format is the one the
        // probe learnt there (the output is read without decoding, and said none).
        let copiedPixelFormat = plan.video.flatMap { $0.action == .copy ? source.stream($0.sourceIndex)?.pixelFormat : nil }
        return OutputInfo(
            path: path, bytes: digest.bytes, sha256: digest.sha256, durationSeconds: m.durationSeconds,
            container: plan.deliveryFormat == .original ? source.container : "mp4",
            video: v.map { OutputInfo.Video(codec: $0.codec, width: $0.width ?? 0, height: $0.height ?? 0, pixelFormat: $0.pixelFormat ?? copiedPixelFormat,
                                 frameRate: $0.frameRate, rotation: $0.rotation ?? 0, hdr: $0.hdr ?? .sdr) },
            audio: a.map { OutputInfo.Audio(codec: $0.codec, channels: copiedChannels ?? $0.channels ?? 0, sampleRate: $0.sampleRate ?? 0, bitRate: $0.bitRate,
                                 language: $0.language) },
            subtitles: m.subtitleStreams.map { .init(codec: $0.codec, language: $0.language, forced: $0.disposition.forced) },
            chapters: m.chapters.count, dropped: dropped)
    }

    /// Copies a file's bytes (an `original` delivery), cancellable, with progress; returns
    /// the SHA-256 and size of what was written.
    static func copyFile(from source: String, to destination: String, cancellation: Cancellation, duration: Double,
                         watch: SourceWatch?, progress: (JobProgress) -> Void) throws(KilnError) -> (sha256: String, bytes: Int64) {
        let input: FileDescriptor, output: FileDescriptor
        do throws(SystemCallError) { input = try FileDescriptor(path: source, flags: O_RDONLY) } catch {
            throw error.errno == EMFILE || error.errno == ENFILE
                ? AtomicOutput.error(error.errno, "cannot open the source", stage: .open)
                : KilnError(.sourceUnreadable, stage: .open, underlying: error.errno,
                            "the source cannot be read: \(String(cString: strerror(error.errno)))")
        }
        do throws(SystemCallError) { output = try FileDescriptor(path: destination, flags: O_WRONLY | O_CREAT | O_TRUNC) } catch {
            throw AtomicOutput.error(error.errno, "cannot create the output file", stage: .write)
        }
        let total = Double(FileIO.size(atPath: source) ?? 0)
        var copied = 0.0
        let hash = SHA256()
        var pacer = ProgressPacer()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            try cancellation.check(.write)
            let chunk: UnsafeRawBufferPointer
            do throws(SystemCallError) {
                chunk = UnsafeRawBufferPointer(rebasing: buffer[0..<(try input.read(into: buffer))])
                try output.write(chunk)
            } catch {
                throw KilnError(error.errno == ENOSPC ? .diskFull : .ioError, stage: .write, "cannot copy the source: \(error)")
            }
            if chunk.isEmpty { break }
            hash.update(chunk)
            copied += Double(chunk.count)
            // The source is looked at with each report, as the demux loop does.
            if let due = pacer.due(position: total > 0 ? duration * copied / total : 0, duration: duration) {
                try watch?.check(.demux)
                if total > 0 { progress(due) }
            }
        }
        progress(pacer.final(position: duration, duration: duration))
        return (hash.hexDigest(), Int64(copied))
    }
}
