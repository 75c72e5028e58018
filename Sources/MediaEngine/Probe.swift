#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore
import Synchronization

/// Reads a file into a `MediaInfo`. The work is capped: libavformat reads at most
/// `Demuxer.probeSizeBytes`, the packet scan (frame rate, Dolby Vision) reads a bounded
/// number of packets, and the whole probe gives up after `deadlineSeconds`.
public enum Prober {
    public static let deadlineSeconds: Double = 30

    public static func probe(path: String, cancellation: Cancellation = Cancellation(),
                             fingerprint: Bool = true) throws(KilnError) -> MediaInfo {
        try open(path: path, cancellation: cancellation, fingerprint: fingerprint).info
    }

    /// Probes and keeps the file open, rewound to its first packet, for a pipeline to
    /// read: the one-shot command then analyses each source once, not twice.
    /// - Parameter preparing: the caller goes on to prepare the source, so a source big
    ///   enough for the index forecast also gets its second reader (`SecondReader`), opened
    ///   and analysed on the other core while the probe goes on.
    public static func open(path: String, cancellation: Cancellation = Cancellation(),
                            fingerprint: Bool = true, preparing: Bool = false) throws(KilnError) -> ProbedSource {
        try open(path: path, cancellation: cancellation, fingerprint: fingerprint,
                 secondReaderFrom: preparing ? .standard : nil)
    }

    /// `secondReaderFrom`: the smallest source that gets a second reader (nil: none).
    static func open(path: String, cancellation: Cancellation = Cancellation(), fingerprint: Bool = true,
                     secondReaderFrom minimum: IndexForecast.Threshold?) throws(KilnError) -> ProbedSource {
        let deadline = Deadline(seconds: deadlineSeconds, cancellation: cancellation)
        defer { deadline.disarm() }
        // First, so that whatever is read of the file after it (the fingerprint too) is
        // checked against it.
        let watch = SourceWatch(path: path)
        let cpuMark = minimum != nil ? SpareCores.mark() : nil
        // The fingerprint does not need the analysis, so it runs beside it.
        let fingerprinting = fingerprint
            ? Background { () throws(KilnError) -> String in try SourceFingerprint.compute(path: path) } : nil
        do throws(KilnError) {
            let demuxer = try Demuxer(path: path, cancellation: cancellation)
            // Opened once the first reader's analysis is done, not beside it: two analyses at
            // once would double the probe's peak memory (each holds decoded pictures). It
            // still runs while the packets are scanned and the plan is made. A failed probe
            // drops it, which cancels it.
            let second = minimum.flatMap { threshold in
                IndexForecast.worthwhile(sourceBytes: FileIO.size(atPath: path) ?? 0, main: demuxer, from: threshold,
                                         idleCores: cpuMark?.idleOthers())
                    ? SecondReader(path: path, skimmable: IndexForecast.skimmable(demuxer)) : nil
            }
            var info = try describe(demuxer)
            // A length the file's bytes cannot hold is refused here, not only by a remux or
            // transcode: an original goes as it is (a 47-hour audiobook of 80 kB went out,
            // playing nothing), and a library scan would list a length that never plays.
            let media = info.streams.filter { ($0.type == .video || $0.type == .audio) && !$0.disposition.attachedPicture }.map(\.index)
            if let why = implausibleLength(info, of: media, demuxer: demuxer) { throw KilnError(.sourceCorrupt, stage: .probe, why) }
            // The probe's looks that give up quietly (a survey's reads) may have been what the
            // deadline stopped: its cancellation is still set, and the run would have failed
            // as canceled by request at its first read, a code that invites a retry.
            if deadline.fired { throw KilnError(.canceled, stage: .probe, "the probe's deadline passed") }
            // Where the packet scan could not go back to the start (a seek that failed in a
            // damaged index, or one that would skip sound before the first keyframe), or
            // going back would read a fragment twice, the run reads the file from a fresh
            // demuxer (`ProbedSource.demuxer()`).
            info.fingerprint = try fingerprinting?.wait()
            return ProbedSource(demuxer: demuxer, info: info, watch: watch, secondReader: second, cpuMark: cpuMark)
        } catch {
            // Its thread must not outlive a failed probe: the command then exits, and exit
            // tears down libcrypto under a hash still running (a crash at exit).
            _ = try? fingerprinting?.wait()
            if error.code == .canceled && deadline.fired {
                throw KilnError(.sourceUnreadable, stage: .probe,
                                "probing took longer than \(Int(deadlineSeconds)) s; the file is too damaged to read")
            }
            // An MP4 cut short inside its index (at its end), or inside a fragment, may not
            // open at all: say so.
            if error.code == .sourceUnreadable, let size = FileIO.size(atPath: path), let cut = cutBox(path, size: Int64(size)) {
                let box = cut.type == "moov" ? "index (moov)" : "\(cut.type) box at byte \(cut.offset)"
                throw KilnError(.sourceCorrupt, stage: .probe,
                                "the file is cut short: its \(box) declares \(cut.missing) bytes past its end (\(size) bytes)")
            }
            throw error
        }
    }

    /// - Parameter scan: read the first packets for frame rate, field order and Dolby
    ///   Vision (sources); verification of Kiln's own output does not need it.
    static func describe(_ demuxer: Demuxer, scan: Bool = true) throws(KilnError) -> MediaInfo {
        let ctx = demuxer.context
        let formatName = String(cString: ctx.pointee.iformat.pointee.name)
        let ext = fileExtension(demuxer.path)
        let size = FileIO.size(atPath: demuxer.path) ?? 0
        var streams: [StreamInfo] = []
        for i in 0..<demuxer.streamCount {
            streams.append(describe(stream: demuxer.stream(i)))
        }
        if let entries = demuxer.matroskaTracks {
            describeTracks(entries, &streams)
        }
        var duration = seconds(ctx.pointee.duration, kiln_time_base_q()) ?? 0
        var warnings: [String] = []
        // The container's bitrate is its size over the length it declared (libavformat's):
        // where Kiln takes another length, the bitrate is worked out again from it.
        var lengthCorrected = false
        // The pictures' and sound's, where there are any: an MP4's chapter track (a text
        // track) may run on for hours past them (a chapter list ending at 10 h made a 10 s
        // film 10 h long in its header, its bitrate 3,600 times too low for the plan).
        let timed = streams.filter { ($0.type == .video || $0.type == .audio) && !$0.disposition.attachedPicture }
        // Each track's end from the file's start: one that starts later (an edit list holding
        // the sound back 3 s) ends its start later than its own length says. Taken as its
        // length alone, a 13 s file's 10 s tracks had "corrected" its length to 10 s.
        let start = seconds(ctx.pointee.start_time, kiln_time_base_q()) ?? 0
        func reach(_ s: StreamInfo) -> Double? { s.durationSeconds.map { $0 + max(0, (s.startSeconds ?? start) - start) } }
        var longestTrack = (timed.isEmpty ? streams : timed).compactMap(reach).max() ?? 0
        func disagrees() -> Bool { abs(duration - longestTrack) > max(2, 0.1 * longestTrack) }
        // The header's length is not the file's for players either (`MediaInfo.durationWrong`).
        var headerLengthWrong = false
        if formatName.hasPrefix("mov,mp4"), scan, duration > 0, longestTrack > 0, disagrees() {
            // A track's own length (mdhd) is its decode times' span, which a reordered
            // stream's presentation can outrun by seconds: a variable-rate stream's last
            // picture, after a pause, is decoded among those before the pause (ffmpeg's
            // muxer wrote 3.04 s for the video of a 6 s clip whose last picture is at
            // 5.96 s, and its movie 6 s). Where they disagree, the tracks' last packets say
            // where each is shown to.
            let timedIndexes = timed.map(\.index)
            let ends = try demuxer.keepingParameters { () throws(KilnError) in presentedEnds(demuxer, of: timedIndexes) }
            for k in streams.indices {
                guard let end = ends[streams[k].index] else { continue }
                let length = end - (streams[k].startSeconds ?? start)
                if length > (streams[k].durationSeconds ?? 0) { streams[k].durationSeconds = length }
            }
            longestTrack = streams.filter { timedIndexes.contains($0.index) }.compactMap(reach).max() ?? longestTrack
        }
        if duration <= 0 {
            duration = longestTrack
        } else if formatName.hasPrefix("mov,mp4"), longestTrack > 0, disagrees() {
            // An MP4's movie duration (mvhd) is its longest track's by definition: one that
            // says otherwise is damaged (three times its length, or 49 days), and its
            // tracks' own (mdhd, edit lists) say how long the file plays. Its bitrate read a
            // third of what it was, so a file above a rung went to that rung as it was.
            // Wrong for players too, unless a text track or the chapters run to it: a
            // chapter list or subtitle track past the film makes the movie that long by
            // definition (the bitrate is still the film's).
            let chapterEnds = (0..<Int(ctx.pointee.nb_chapters)).compactMap { i in
                ctx.pointee.chapters[i].flatMap { seconds($0.pointee.end, $0.pointee.time_base) }.map { $0 - start }
            }
            headerLengthWrong = !(streams.compactMap(reach) + chapterEnds).contains { abs(duration - $0) <= max(2, 0.1 * $0) }
            duration = longestTrack
            lengthCorrected = true
            warnings.append("duration_from_tracks")
        }
        // Ogg Opus: libavformat counts the stream's length from its last granule with the
        // pre-skip in it (the decoder's first samples, which are dropped: the packets begin
        // at minus the pre-skip). 312 samples (6.5 ms) as most encoders write it, but up to
        // 65,535 (1.37 s): such a file said 12.72 s for 11.35 s of sound, and every prepare
        // was refused as cut short.
        if formatName == "ogg" {
            var trimmed = false
            for k in streams.indices where streams[k].codec == "opus" {
                let padding = Double(demuxer.stream(streams[k].index).pointee.codecpar.pointee.initial_padding) / 48000
                guard padding > 0, let length = streams[k].durationSeconds, length > padding else { continue }
                streams[k].durationSeconds = length - padding
                trimmed = true
            }
            let longest = (timed.isEmpty ? streams : timed).compactMap { s in streams.first { $0.index == s.index }.flatMap(reach) }.max()
            if trimmed, let longest, longest < duration {
                duration = longest
                lengthCorrected = true
            }
        }
        // An MP4's box layout, read once: whether it is fragmented, and indexed.
        let layout = formatName.hasPrefix("mov,") ? fragmentLayout(demuxer.path) : nil
        // A fragmented MP4 whose fragments' times begin past zero (a live stream recorded
        // from its 40th segment on: its init segment and the segments after): libavformat
        // takes each track's last fragment end for its length, counted from zero, so a 20 s
        // recording starting at 40 s said 60 s, and every prepare was refused as stopping
        // at a third of it. The tracks' last packets say where they end.
        if let layout, layout.fragments, scan, start > 0 {
            let timedIndexes = timed.map(\.index)
            let ends = try demuxer.keepingParameters { () throws(KilnError) in
                presentedEnds(demuxer, of: timedIndexes, fromStatedEnd: true)
            }
            if let last = ends.values.max(), last > start, duration - (last - start) > Verifier.durationTolerance(last - start) {
                for k in streams.indices {
                    guard let end = ends[streams[k].index] else { continue }
                    streams[k].durationSeconds = end - (streams[k].startSeconds ?? start)
                }
                duration = last - start
                lengthCorrected = true
                warnings.append("duration_from_tracks")
            }
        }
        var surveyedLength = false
        // The pictures' and sound's own length where the container's counts more (`bitRate`).
        var filmSeconds: Double? = nil
        if streams.isEmpty { warnings.append("no_streams") }
        // Windows Media DRM: the ASF demuxer says so only in the file's metadata (from the
        // header's content encryption objects); its packets decode to garbage.
        if formatName.hasPrefix("asf"), ["ASF_Protection_Type", "encryption"].contains(where: { dictValue(ctx.pointee.metadata, $0) != nil }) {
            for i in streams.indices where streams[i].type == .video || streams[i].type == .audio { streams[i].encrypted = true }
        }
        var shares: [Int: Double] = [:]
        var clockDamage: (stream: Int, why: String)?
        // Which streams' rates the container states (the others the scan measures).
        let statedRates = streams.map { $0.bitRate != nil }
        if scan {
            try demuxer.keepingParameters { () throws(KilnError) in
                let scanned = try scanPackets(demuxer, &streams, &warnings)
                // One picture and no sound is a still picture, whatever holds it (an icon, a GIF
                // of one frame): prepared, it came out a 0.04 s clip, reported ok, where the
                // picture formats libavformat reads as such are refused (`Demuxer.notAFilm`).
                if scanned.onePicture, !streams.contains(where: { $0.type == .audio }) {
                    throw KilnError(.sourceUnsupported, stage: .probe,
                                    "the source is a still picture (one \(streams.first { $0.type == .video }?.codec ?? "video") picture in \(demuxer.formatName)), not a video or sound")
                }
                shares = scanned.shares
                clockDamage = scanned.clockDamage
                // No duration in the header (a live or interrupted recording's Matroska): the
                // last packets say where the file ends, for progress, the plan's bitrate and
                // verification's length check.
                var measured = false
                // Files joined one after another (`links_chained`): their length read from the
                // file, where there is one, replaces the header's and the streams' own (the same
                // header's).
                func chained(_ length: Double?) {
                    if let length {
                        duration = length
                        lengthCorrected = true
                        for i in streams.indices { streams[i].durationSeconds = nil }
                    }
                    warnings.append("links_chained")
                    measured = true
                }
                if duration <= 0, let end = measuredEnd(demuxer, size: Int64(size)), end > start {
                    duration = end - start
                    measured = true
                    warnings.append("duration_measured")
                }
                // A length libavformat worked out from the file's size and a bit rate (MP3 and
                // ADTS without a frame count, bare video streams) is no declaration: MP3 files
                // joined with `cat` (an audiobook's chapters) count their tags as sound and
                // were refused as "cut short" of it; a bare MPEG-1 stream whose header says
                // "variable rate" (18 bits set, read as 104.9 Mbit/s) was 0.009 s long and
                // refused as running past it. A file up to `readWhole` bytes is read through
                // for its length; a longer one's stays an estimate (`duration_estimated`),
                // which a run's own end replaces.
                if duration > 0, !measured, ctx.pointee.duration_estimation_method == AVFMT_DURATION_FROM_BITRATE {
                    if Int64(size) <= Self.readWhole, let end = lengthByReading(demuxer)?.end, end > start {
                        duration = end - start
                        lengthCorrected = true
                        warnings.append("duration_measured")
                    } else {
                        warnings.append("duration_estimated")
                    }
                    // The streams' lengths were the same estimate.
                    for i in streams.indices { streams[i].durationSeconds = nil }
                    measured = true
                }
                // Links chained one after another (`LinkChain`: Ogg or FLAC songs joined with
                // `cat`, an Icecast recording): libavformat's length is the last Ogg link's, the
                // first FLAC file's. Read through, up to `readWhole` bytes; a longer file's run
                // replaces it with its own end.
                if Demuxer.chainedFormats.contains(formatName), !measured, Int64(size) <= Self.readWhole,
                   let read = lengthByReading(demuxer), read.chained, read.end > start {
                    if let why = read.unfollowable {
                        throw KilnError(.sourceUnsupported, stage: .probe, "the source cannot be timed: \(why)")
                    }
                    chained(read.end - start)
                }
                // AVI files joined with `cat` (`AVIJoin`): libavformat's length is the first
                // file's. Read through up to `readWhole` bytes, else the files' headers say (a
                // byte seek into an AVI reads no times); a run takes its own end either way.
                if formatName == "avi", !measured, case let files = AVIJoin.files(path: demuxer.path), files.count > 1 {
                    let length = Int64(size) <= Self.readWhole ? lengthByReading(demuxer).map { $0.end - start }
                        : AVIJoin.length(path: demuxer.path, files: files)
                    chained(length.flatMap { $0 > duration ? $0 : nil })
                }
                // Sound whose header counts its samples exactly (FLAC's STREAMINFO, a WAV or
                // AIFF data chunk's size) and whose file stops well before them: cut short (a
                // rip or download that did not finish). A remux or transcode refused it, but
                // as it is it went out whole, its player stopping at the cut (0.5 s of a 51 s
                // FLAC). The last packets say where the sound ends.
                // (A length just measured from those packets is not judged by them again.)
                // FLAC files joined with `cat` past `readWhole` (an album's songs): the last
                // packets are the last file's, which disagree with the first file's header either
                // way, or show the join itself; each file's header gives its length
                // (`FLACJoin.joinedLength`).
                if duration > 0, !measured, Self.exactLengthFormats.contains(formatName),
                   let end = measuredEnd(demuxer, size: Int64(size)) {
                    let tolerance = Verifier.durationTolerance(duration)
                    if formatName == "flac", demuxer.linksChained || abs(end - start - duration) > tolerance,
                       let joined = FLACJoin.joinedLength(path: demuxer.path) {
                        chained(joined)
                    } else if end - start < duration - tolerance {
                        throw KilnError(.sourceCorrupt, stage: .probe,
                                        "the source's sound stops at \(Format.fixed(max(0, end - start), decimals: 2)) s of the "
                                        + "\(Format.fixed(duration, decimals: 2)) s its header counts: the file is cut short")
                    }
                }
                // libavformat's length of an MPEG-TS file is its last time less its first:
                // across a splice, any span (a recording whose clock jumped on by hours
                // looked days long and was refused as damaged; a 1 Mbit/s request got the
                // 2.5 Mbit/s source as it was).
                // Matroska's Duration, as ffmpeg and most muxers write it, is its last time,
                // not its length: a recording kept on the clock it was captured with (its
                // first block at 100 s) declared 110 s for 10 s, and its bitrate read a ninth
                // of what it was (a 12 Mbit/s file went to a 2 Mbit/s device as it was). Where
                // the last packets end at the declared time, not at the start plus it, the
                // length is the declared time less the start. FLV's onMetaData duration, as
                // the ffmpeg command writes it, is the same (a clip whose pictures start at
                // 1.03 s declared 9.03 s for 8.02, and was refused as cut short). A length just
                // measured from the end is already its length: the tail is not read again.
                if formatName.hasPrefix("matroska") || formatName == "flv", !measured, start > 0.5, duration > start,
                   let end = measuredEnd(demuxer, size: Int64(size)) {
                    if abs(end - duration) < abs(end - (start + duration)) {
                        duration -= start
                        lengthCorrected = true
                        warnings.append("duration_from_start")
                    }
                }
                // Matroska's Duration is its last block's end, subtitles' included: a cue whose
                // end is wrong (ten minutes after a 10 s film), or a subtitle track running on
                // past the film, made its bitrate a fraction of what it is, so a 3 Mbit/s clip
                // went as it was to a 1 Mbit/s device. In a complete file (its index there, its
                // Segment within it) the pictures' and sound's last block gives the film's own
                // length, from which the bitrate is worked out. With subtitles, the length
                // itself stays the declared one, which verification explains by the cues
                // (`lengthExplained`). Only the last 4 MB are read: a UHD film's last 64 MB,
                // where its last cluster was larger, had doubled its remux's memory (53 → 105
                // MB); a cluster that begins in them lies whole in them, to the file's end.
                // Without subtitles nothing explains a Duration far from the last cluster: a
                // header patched or left from an edit (600 s for a 12 s clip, or a tenth of
                // it) is wrong. Its bitrate had been taken from it (a 5 Mbit/s clip sent as it
                // was to a 1 Mbit/s device), the file had gone as it was with that length for
                // players to show, and a remux of one declaring a tenth had been refused as
                // damaged. The length is the film's then, and the file is remuxed where it can
                // be (`MediaInfo.durationWrong`). A tail read a little short (a laced block's
                // last frames) is well within the margin: two seconds, or a tenth. Only a
                // cluster read whole says the film ends there: one whose block's size is
                // damaged hides the rest (an audio file's one cluster read as 0.02 s of 4,
                // which the remux then delivered as whole). And a film runs past its Duration
                // only where the last cluster itself starts past it: a block's time is 16
                // bits relative to its cluster's, and one damaged put a 1.2 s film's end at
                // 32.8 s.
                if formatName.hasPrefix("matroska"), !measured, !lengthCorrected, duration > 0,
                   demuxer.matroskaHead?.whole(size: Int64(size)) == true,
                   var tail = matroskaTail(demuxer, size: Int64(size), widen: false), tail.end > start {
                    var film = tail.end - start, margin = max(2, 0.1 * film)
                    let cuesMayExplain = streams.contains { $0.type == .subtitle }
                    // A last cluster longer than the tail (a UHD film's) is read again with
                    // the one before it, where it would change the length.
                    if tail.follows == nil, Int64(size) > Prober.tailBytes, tail.start - start > duration + margin || duration - film > margin,
                       let wider = matroskaTail(demuxer, size: Int64(size), widen: false, reading: 16 * Prober.tailBytes), wider.end > start {
                        tail = wider
                        film = tail.end - start
                        margin = max(2, 0.1 * film)
                    }
                    // And only a cluster that follows the one before it: one whose own time is
                    // damaged (a flipped bit, two clusters swapped) put a correct 60 s Duration
                    // at 43.7 s, and the remux of a whole film was refused as too long.
                    if tail.whole, tail.follows == true, tail.start - start > duration + margin || (duration - film > margin && !cuesMayExplain) {
                        duration = film
                        lengthCorrected = true
                        headerLengthWrong = true
                        warnings.append("duration_from_tracks")
                    } else if tail.follows == true, duration - film > margin && cuesMayExplain {
                        filmSeconds = film
                        warnings.append("bitrate_from_tracks")
                    }
                }
                if SoundFormatSurvey.survey(demuxer, size: Int64(size), start: start, duration: duration, streams: &streams) {
                    try? demuxer.rewind()
                }
                if demuxer.hasDiscontinuousTimestamps {
                    let surveyed = TimelineSurvey.duration(demuxer, size: Int64(size))
                    try? demuxer.rewind()
                    if let surveyed {
                        duration = surveyed
                        surveyedLength = true
                        for i in streams.indices { streams[i].durationSeconds = nil }
                        warnings.append("timestamps_jump")
                    }
                }
            }
        }
        // Fonts and pictures attached to a Matroska file (anime releases carry megabytes of
        // fonts) are no part of its pictures' and sound's rate, which libavformat takes as
        // the whole file's size over its length: a 6 s clip with a 357 kB font was 1.3
        // Mbit/s, and its picture was re-encoded for a 1 Mbit/s rung it fitted.
        let attached = demuxer.attachedBytes
        var bitRate = surveyedLength || lengthCorrected || attached > 0 || filmSeconds != nil ? 0 : Int(ctx.pointee.bit_rate)
        if bitRate <= 0, let seconds = filmSeconds ?? (duration > 0 ? duration : nil) {
            bitRate = Int(Double(max(0, Int64(size) - attached)) * 8 / seconds)
        }
        // A sound alone whose rate the scan measured from its first seconds: lossless sound
        // (FLAC) spends few bits on a quiet start, and a song measured 579 kbit/s for the
        // 1,419 it has was copied to a 1 Mbit/s rung as fitting. The whole file's rate, less
        // its cover pictures, is the sound's where that is more.
        let sounds = streams.indices.filter { streams[$0].type == .audio }
        if duration > 0, sounds.count == 1, case let k = sounds[0], !statedRates[k], let measured = streams[k].bitRate,
           !streams.contains(where: { $0.type == .video && !$0.disposition.attachedPicture }) {
            let pictures = (0..<demuxer.streamCount).reduce(Int64(0)) { sum, i in
                let st = demuxer.stream(i).pointee
                return sum + (st.disposition & AV_DISPOSITION_ATTACHED_PIC != 0 ? Int64(st.attached_pic.size) : 0)
            }
            let whole = Int(Double(max(0, Int64(size) - attached - pictures)) * 8 / duration)
            if Double(whole) > Double(measured) * 1.1 { streams[k].bitRate = whole }
        }

        var chapters: [Chapter] = []
        for i in 0..<Int(ctx.pointee.nb_chapters) {
            guard let ch = ctx.pointee.chapters[i] else { continue }
            chapters.append(Chapter(startSeconds: seconds(ch.pointee.start, ch.pointee.time_base) ?? 0,
                                    endSeconds: seconds(ch.pointee.end, ch.pointee.time_base) ?? 0,
                                    title: dictValue(ch.pointee.metadata, "title")))
        }
        // A Matroska edition that is a timeline of its own: Kiln delivers the file's (`MatroskaChapters`).
        if let edition = demuxer.matroskaChapters?.edition, edition.ordered {
            warnings.append("ordered_chapters")
            if edition.chapters.contains(where: \.linked) { warnings.append("linked_segments") }
        }
        let listing = Self.programmes(ctx.pointee)
        for k in streams.indices { streams[k].programs = listing[streams[k].index] }
        // A multiplex's rate is every channel's; each stream's share of it is its channel's
        // part (a 1 Mbit/s subchannel beside a 7 Mbit/s one was re-encoded at a 5 Mbit/s rung).
        if !listing.isEmpty, bitRate > 0 {
            for k in streams.indices {
                streams[k].multiplexBitRate = shares[streams[k].index].map { Int((Double(bitRate) * $0).rounded(.up)) }
            }
        }
        var brand = demuxer.matroskaHead.map { $0.docType } ?? dictValue(ctx.pointee.metadata, "major_brand")
        // Tools that write every Matroska file as "matroska" (ffmpeg's `-f matroska`) make
        // WebM so too: a `.webm` of WebM's codecs alone is WebM whatever its DocType.
        let webmCodecs: Set<String> = ["vp8", "vp9", "av1", "vorbis", "opus", "webvtt"]
        if brand == "matroska", ext.lowercased() == "webm",
           streams.allSatisfy({ !($0.type == .video || $0.type == .audio) || webmCodecs.contains($0.codec) }) {
            brand = "webm"
        }
        // A sound of a few samples (a game's 1-sample "silence", a test file of 5): its AAC
        // encode holds little more than the encoder's priming, which decodes to nothing, and
        // verification failed every time as a retryable `verify_failed` (under 1 ms here).
        if scan, duration > 0, duration < Self.shortestSound, !streams.contains(where: { $0.type == .video }),
           let sound = streams.first(where: { $0.type == .audio }) {
            let samples = sound.sampleRate.map { " (\(Format.count(Int((duration * Double($0)).rounded()), "sample")))" } ?? ""
            throw KilnError(.sourceUnsupported, stage: .probe,
                            "the source's sound lasts \(Format.fixed(duration * 1000, decimals: 2)) ms\(samples): too short to be made into a file "
                            + "(\(Format.fixed(Self.shortestSound * 1000, decimals: 0)) ms at least)")
        }
        var info = MediaInfo(formatName: formatName, container: Container.name(formatName: formatName, fileExtension: ext, brand: brand),
                             durationSeconds: duration, startSeconds: start, bitRate: bitRate, sizeBytes: size,
                             streams: streams, chapters: chapters, warnings: warnings)
        if headerLengthWrong { info.durationWrong = true }
        if let layout {
            if layout.fragments && !layout.indexed { info.fragmented = true }
            if layout.fragments {
                demuxer.readsFragmentsAgain = true
                // libavformat counts a stream's bytes in the fragments it read at the
                // start over the length a `sidx` gives: an HLS download's pictures read
                // 1.3 Mbit/s for 1.9, and went as they were to a 2 Mbit/s rung; a DASH
                // file's 128 kbit/s sound read 12.5 and was copied where it did not fit.
                // The sound's is its samples read so far over the time they cover; the
                // pictures', the file's size over its length less the sound (the
                // planner's figure where a stream says none).
                for i in info.streams.indices {
                    switch info.streams[i].type {
                    case .video: info.streams[i].bitRate = nil
                    case .audio: info.streams[i].bitRate = indexedBitRate(demuxer.stream(info.streams[i].index))
                    default: break
                    }
                }
            }
        }
        if scan {
            // Tracks lost before libavformat reached them: no delivery can be known whole.
            if formatName.hasPrefix("mov,"),
               let why = movieBoxDamage(demuxer.path) ?? (info.fragmented != true ? sampleTablesShortfall(demuxer) : nil) {
                throw KilnError(.sourceCorrupt, stage: .probe, "the source's index is damaged: \(why)")
            }
            // Fragments stored out of order are read in the order of their times
            // (`Demuxer.fragmentsReordered`), and the file goes out remuxed in that order,
            // never as it is. Where they cannot be moved (a fragment's data placed by its
            // offset in the file), read as stored they would come out with a gap: refused
            // before any work, rather than delivered short with success.
            // Recordings appended after one header are read joined, each timed to follow the
            // one before (`Demuxer.recordingsJoined`), and go out so, never as they are: a
            // player too would drop all but the first. Where they cannot be joined, the
            // second would be lost: refused, as fragments out of order are.
            // An index put in after the fragments' offsets were written is read as the file
            // was before it (`Demuxer.fragmentOffsetsShifted`), and the file goes out remuxed:
            // as it is, players take every fragment's samples from the bytes before them.
            // A recording laid after another with its own header, coded otherwise: libavformat
            // reads the first header only, and decoded the later samples with its parameter
            // sets, every picture broken from the join on. Its decoder is told of each change
            // (`Demuxer.switchedStreams`) and the track re-encoded; where it cannot be, refused.
            if let problem = demuxer.codingSwitchProblem {
                let which = demuxer.codingChange.map { "track \($0.track) is coded otherwise in the one from byte \($0.offset)" }
                    ?? "a later one times a track in another timescale"
                throw KilnError(.sourceUnsupported, stage: .probe,
                                "the source holds recordings laid one after another, each with its own header, and \(which), which Kiln cannot follow: \(problem)")
            }
            if demuxer.codingChange != nil {
                for s in demuxer.switchedStreams {
                    guard let k = info.streams.firstIndex(where: { $0.index == s }) else { continue }
                    info.streams[k].codingChanges = true
                    // As for sound whose frames change format: described by its largest layout,
                    // so that the sound is encoded at the channels the film has.
                    if info.streams[k].type == .audio, let most = demuxer.switchedChannels[s], most > info.streams[k].channels ?? 0 {
                        info.streams[k].channels = most
                        info.streams[k].channelLayout = nil
                    }
                }
            }
            if demuxer.fragmentsReordered || demuxer.recordingsJoined || demuxer.fragmentOffsetsShifted {
                info.fragmented = true
                if demuxer.fragmentsReordered { info.warnings.append("fragments_reordered") }
                if demuxer.recordingsJoined { info.warnings.append("recordings_appended") }
                if demuxer.fragmentOffsetsShifted { info.warnings.append("fragment_offsets_shifted") }
            } else if let disorder = demuxer.fragmentDisorder {
                let base = (0..<demuxer.streamCount).map(demuxer.stream).first { $0.pointee.id == Int32(bitPattern: disorder.track) }?.pointee.time_base
                let at = { (t: UInt64) in base.flatMap { seconds(Int64(clamping: t), $0) }.map { Format.fixed($0, decimals: 2) + " s" } ?? "time \(t)" }
                throw KilnError(.sourceCorrupt, stage: .probe,
                                "the source's movie fragments are stored out of order (track \(disorder.track)'s fragment from \(at(disorder.time)) "
                                + "lies after its fragment from \(at(disorder.after)), at byte \(disorder.offset)): read as stored, the film "
                                + "would come out with a gap; the file must be written again with its fragments in order")
            } else if demuxer.fragmentRecordings > 1 {
                throw KilnError(.sourceCorrupt, stage: .probe,
                                "the source holds \(demuxer.fragmentRecordings) recordings laid one after another after one header (the second "
                                + "from byte \(demuxer.secondRecording ?? 0), its times starting again), and they cannot be read one after the other: "
                                + "\(demuxer.recordingsJoinProblem ?? "their fragments cannot be read in order")")
            }
            // Matroska clusters likewise (`Demuxer.clustersReordered`); where they cannot be
            // moved (Tags or Chapters among them, which the SeekHead finds by their place),
            // refused.
            if demuxer.clustersReordered {
                info.clustersReordered = true
                info.warnings.append("clusters_reordered")
            } else if demuxer.clustersSized {
                info.clustersUnsized = true
                info.warnings.append("clusters_unsized")
            } else if let disorder = demuxer.clusterDisorder {
                throw KilnError(.sourceCorrupt, stage: .probe,
                                "the source's Matroska clusters are stored out of order (the cluster from \(Format.fixed(disorder.time, decimals: 2)) s "
                                + "lies after the one from \(Format.fixed(disorder.after, decimals: 2)) s, at byte \(disorder.offset)) and cannot be read in "
                                + "order: read as stored, the film would come out with pictures lost or out of order; the file must be written again with its clusters in order")
            }
            if let why = demuxer.matroskaTracks.flatMap(MatroskaTracks.hiddenTrack) {
                throw KilnError(.sourceCorrupt, stage: .probe, "the source's track list is damaged: \(why)")
            }
            info.indexDamage = indexDamage(demuxer, size: Int64(size), fragmented: info.fragmented == true)
            if info.indexDamage == nil, demuxer.matroskaHead?.unindexed == true { info.unindexed = true }
            if formatName.hasPrefix("mov,"),
               let damage = TrackDrift.untimedSound(demuxer) ?? (info.fragmented != true ? TrackDrift.judge(demuxer) : nil) {
                (info.timingDamageStream, info.timingDamage) = (damage.stream, damage.why)
            }
            if info.timingDamage == nil, let clockDamage { (info.timingDamageStream, info.timingDamage) = clockDamage }
            // Laced sound, whose frames within a block keep their spacing whatever scale
            // the blocks' times have, hides a damaged TimecodeScale from the pace above.
            if info.timingDamage == nil, let damage = demuxer.laceScaleDamage {
                let pace = Format.times(damage.ratio) + (damage.ratio < 1 ? " closer together" : " further apart")
                (info.timingDamageStream, info.timingDamage) = (damage.stream, "stream \(damage.stream): its sound's blocks are timed \(pace) than their frames last (a timescale damaged)")
            }
        }
        // Sound laced by a DefaultDuration that is not its frames' (`LaceTimes`): a player
        // given the file as it is spaces the frames by it, as libavformat did.
        if demuxer.lacesRetimed { info.audioLacingWrong = true }
        return info
    }

    /// Sound containers whose header counts the samples (FLAC's STREAMINFO, the data
    /// chunk's size), so that their length is no estimate (unlike MP3's or ADTS AAC's).
    static let exactLengthFormats: Set<String> = ["flac", "wav", "w64", "aiff"]

    /// What a Matroska file's track entries add (`MatroskaTracks`), where they are the
    /// streams (`MatroskaTracks.match`).
    static func describeTracks(_ entries: [MatroskaTracks.Entry], _ streams: inout [StreamInfo]) {
        let types: [StreamType: AVMediaType] = [.video: AVMEDIA_TYPE_VIDEO, .audio: AVMEDIA_TYPE_AUDIO, .subtitle: AVMEDIA_TYPE_SUBTITLE]
        guard MatroskaTracks.match(entries, streams.map { types[$0.type] ?? AVMEDIA_TYPE_UNKNOWN }) else { return }
        let names = ["zlib", "bzlib", "lzo", "header_stripping"]
        for (k, entry) in entries.enumerated() {
            // A tag that says no more than the stream's language ("en" for "eng") is left out.
            if let tag = entry.languageTag, tag.contains("-"), LanguageCode.terminologic(tag) != nil {
                streams[k].languageTag = tag
            }
            if !entry.enabled { streams[k].disabled = true }
            streams[k].compression = entry.compression.map { names.indices.contains($0) ? names[$0] : "unknown" }
        }
    }

    /// The programmes that list each stream, by stream index, where two or more list
    /// pictures or sound (a whole multiplex); empty otherwise. A programme is its MPEG-TS
    /// `program_number` (libavformat's `AVProgram.id`).
    static func programmes(_ ctx: AVFormatContext) -> [Int: [Int]] {
        var listing: [Int: [Int]] = [:]
        var withMedia = 0
        for i in 0..<Int(ctx.nb_programs) {
            guard let program = ctx.programs[i] else { continue }
            let members = UnsafeBufferPointer(start: program.pointee.stream_index, count: Int(program.pointee.nb_stream_indexes))
            let media = members.contains { m in
                guard Int(m) < Int(ctx.nb_streams), let st = ctx.streams[Int(m)] else { return false }
                let type = st.pointee.codecpar.pointee.codec_type
                return (type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO) && st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0
            }
            guard media else { continue }
            withMedia += 1
            for m in members { listing[Int(m), default: []].append(Int(program.pointee.id)) }
        }
        return withMedia >= 2 ? listing : [:]
    }

    /// A stream's bitrate from the samples its index lists (a fragmented MP4's: those of the
    /// fragments read so far) over the time they cover: the first run of them without a
    /// gap of a second (the probe's surveys read fragments further in, and a span to those
    /// read a 128 kbit/s sound at 7); nil under half a second of them.
    static func indexedBitRate(_ st: UnsafeMutablePointer<AVStream>) -> Int? {
        let count = min(Int(avformat_index_get_entries_count(st)), 1 << 20)
        let tb = st.pointee.time_base
        guard count >= 2, tb.num > 0, tb.den > 0, let first = avformat_index_get_entry(st, 0)?.pointee else { return nil }
        let tick = Double(tb.num) / Double(tb.den)
        var bytes = Int64(max(first.size, 0)), previous = Double(first.timestamp), steps = 0
        for k in 1..<count {
            guard let e = avformat_index_get_entry(st, Int32(k))?.pointee else { break }
            // (In doubles: damaged times near ±2^63 would overflow a difference.)
            let step = (Double(e.timestamp) - previous) * tick
            guard step >= 0, step < 1 else { break }
            bytes += Int64(max(e.size, 0))
            previous = Double(e.timestamp)
            steps += 1
        }
        guard steps > 0 else { return nil }
        let covered = (previous - Double(first.timestamp)) * tick * Double(steps + 1) / Double(steps)
        guard covered >= 0.5 else { return nil }
        return Int(Double(bytes) * 8 / covered)
    }

    /// An audio stream's channels, layout and sample rate; none when its parameters do not
    /// say (a stream libavformat met past its analysis: MPEG-TS gives its codec only), not
    /// zero, which the planner took for a count (it planned mono for a stereo stream).
    static func describeFormat(_ par: AVCodecParameters, into info: inout StreamInfo) {
        guard par.ch_layout.nb_channels > 0, par.sample_rate > 0 else { return }
        info.channels = Int(par.ch_layout.nb_channels)
        var layout = par.ch_layout
        info.channelLayout = name(of: &layout)
        info.sampleRate = Int(par.sample_rate)
    }

    /// libavutil's name for a layout ("5.1(side)"), nil if it has none.
    static func name(of layout: inout AVChannelLayout) -> String? {
        var buf = [CChar](repeating: 0, count: 128)
        return av_channel_layout_describe(&layout, &buf, buf.count) > 0 ? cString(buf) : nil
    }

    static func describe(stream st: UnsafeMutablePointer<AVStream>) -> StreamInfo {
        let par = st.pointee.codecpar!.pointee
        let type: StreamType
        switch par.codec_type {
        case AVMEDIA_TYPE_VIDEO: type = .video
        case AVMEDIA_TYPE_AUDIO: type = .audio
        case AVMEDIA_TYPE_SUBTITLE: type = .subtitle
        case AVMEDIA_TYPE_ATTACHMENT: type = .attachment
        // MP4's TTML track (`stpp`) is text subtitles; libavformat 5.1 gives it as data.
        case AVMEDIA_TYPE_DATA: type = SubtitleLane.isTTML(par) ? .subtitle : .data
        default: type = .unknown
        }
        let d = st.pointee.disposition
        // A QuickTime text track says it is forced in its sample description, whose display
        // flags (its first four bytes) have "all samples are forced" (0x80000000, beside
        // "some are", 0x40000000): how HandBrake and Apple mark foreign-dialogue tracks.
        // libavformat 5.1 reads no disposition from it.
        let forcedText = par.codec_id == AV_CODEC_ID_MOV_TEXT && par.extradata_size >= 4 && par.extradata[0] & 0x80 != 0
        let disposition = Disposition(
            isDefault: d & AV_DISPOSITION_DEFAULT != 0, forced: d & AV_DISPOSITION_FORCED != 0 || forcedText,
            hearingImpaired: d & AV_DISPOSITION_HEARING_IMPAIRED != 0,
            visualImpaired: d & AV_DISPOSITION_VISUAL_IMPAIRED != 0,
            commentary: d & AV_DISPOSITION_COMMENT != 0 || isCommentaryTitle(dictValue(st.pointee.metadata, "title")),
            attachedPicture: d & AV_DISPOSITION_ATTACHED_PIC != 0)
        let codecID = Demuxer.codecID(st)
        var info = StreamInfo(index: Int(st.pointee.index), type: type, codec: string(avcodec_get_name(codecID)) ?? "unknown",
                              disposition: disposition)
        info.codecTag = fourCC(par.codec_tag)
        if FairPlay.protects(par) {
            info.encrypted = true
            if par.codec_id == AV_CODEC_ID_NONE, let wrapped = FairPlay.wrappedCodec(par) { info.codec = wrapped }
        }
        info.profile = string(avcodec_profile_name(par.codec_id, par.profile))
        if par.level > 0 { info.level = Int(par.level) }
        // MPEG-1 and MPEG-2 video's sequence header says "variable" with its 18 bits all set,
        // which libavcodec reads as 0x3FFFF × 400 bit/s: no rate at all.
        let variableMarker = (par.codec_id == AV_CODEC_ID_MPEG1VIDEO || par.codec_id == AV_CODEC_ID_MPEG2VIDEO) && par.bit_rate == 0x3FFFF * 400
        if par.bit_rate > 0, !variableMarker { info.bitRate = Int(par.bit_rate) }
        info.durationSeconds = seconds(st.pointee.duration, st.pointee.time_base)
        info.startSeconds = seconds(st.pointee.start_time, st.pointee.time_base)
        info.language = dictValue(st.pointee.metadata, "language").flatMap { $0 == "und" ? nil : $0 }
        info.title = trackTitle(st)

        switch type {
        case .video:
            info.width = Int(par.width)
            info.height = Int(par.height)
            var fmt = AVPixelFormat(rawValue: par.format)
            // Undecoded by the analysis (a slideshow's pictures come after it), an H.264
            // stream's format is still its sequence parameter set's.
            var sps = KilnH264Parameters()
            if par.format < 0, par.codec_id == AV_CODEC_ID_H264, kiln_h264_parameters(st.pointee.codecpar, &sps) == 1 {
                fmt = AVPixelFormat(rawValue: sps.pix_fmt)
            }
            if let desc = av_pix_fmt_desc_get(fmt) {
                info.pixelFormat = string(desc.pointee.name)
                info.bitDepth = Int(desc.pointee.comp.0.depth)
                switch (desc.pointee.log2_chroma_w, desc.pointee.log2_chroma_h) {
                case (1, 1): info.chroma = 420
                case (1, 0): info.chroma = 422
                case (0, 0): info.chroma = desc.pointee.nb_components >= 3 ? 444 : 400
                default: break
                }
                // A monochrome H.264 stream decodes as 4:2:0 with grey chroma; its SPS says 4:0:0.
                if par.codec_id == AV_CODEC_ID_H264, kiln_h264_chroma_format(st.pointee.codecpar) == 0 { info.chroma = 400 }
            }
            // The container's aspect ratio first (Matroska's display size, MP4's pasp), as
            // players and libav's av_guess_sample_aspect_ratio take it, and as a copy writes it.
            let container = st.pointee.sample_aspect_ratio
            let sar = container.num > 0 && container.den > 0 ? container : par.sample_aspect_ratio
            info.sampleAspectRatio = sar.num > 0 && sar.den > 0 ? Rational(Int(sar.num), Int(sar.den)) : Rational.one
            let avg = st.pointee.avg_frame_rate, real = st.pointee.r_frame_rate
            var fps = avg.num > 0 && avg.den > 0 ? avg.seconds : (real.num > 0 && real.den > 0 ? real.seconds : 0)
            // An MP4's average counts its track's whole duration, which with B-frames
            // includes the reorder delay an edit list takes off again: a 3 s HEVC remux at
            // 24 fps averaged 23.36. The base rate, a few percent away, is the rate. (The
            // packet scan measures sources from their times; this is what outputs show.)
            if real.num > 0, real.den > 0, fps > 0, abs(real.seconds / fps - 1) < 0.05 { fps = real.seconds }
            if fps > 0 { info.frameRate = reportedRate(fps) }
            if avg.num > 0, avg.den > 0, real.num > 0, real.den > 0 {
                // A constant-rate stream has its real base rate equal to its average rate;
                // phones and screen recorders write variable rates where they differ.
                info.variableFrameRate = abs(real.seconds - avg.seconds) / avg.seconds > 0.01
            }
            switch par.field_order {
            case AV_FIELD_PROGRESSIVE: info.fieldOrder = .progressive
            case AV_FIELD_TT: info.fieldOrder = .tt
            case AV_FIELD_BB: info.fieldOrder = .bb
            case AV_FIELD_TB: info.fieldOrder = .tb
            case AV_FIELD_BT: info.fieldOrder = .bt
            default: info.fieldOrder = .unknown
            }
            let rot = kiln_stream_rotation(st)
            if !rot.isNaN {
                // libav reports counter-clockwise degrees; players rotate clockwise by the negation.
                let cw = Int((-rot).rounded())
                info.rotation = ((cw % 360) + 360) % 360
                if kiln_stream_mirrored(st) != 0 { info.mirrored = true }
            } else {
                info.rotation = 0
            }
            if par.color_primaries != AVCOL_PRI_UNSPECIFIED { info.colorPrimaries = string(av_color_primaries_name(par.color_primaries)) }
            if par.color_trc != AVCOL_TRC_UNSPECIFIED { info.colorTransfer = string(av_color_transfer_name(par.color_trc)) }
            if par.color_space != AVCOL_SPC_UNSPECIFIED { info.colorMatrix = string(av_color_space_name(par.color_space)) }
            if par.color_range != AVCOL_RANGE_UNSPECIFIED { info.colorRange = string(av_color_range_name(par.color_range)) }
            switch par.color_trc {
            case AVCOL_TRC_SMPTE2084: info.hdr = .hdr10
            case AVCOL_TRC_ARIB_STD_B67: info.hdr = .hlg
            default: info.hdr = .sdr
            }
            if let dovi = kiln_stream_dovi(st) {
                let r = dovi.pointee
                info.dolbyVision = DolbyVision(profile: Int(r.dv_profile), level: Int(r.dv_level), rpuPresent: r.rpu_present_flag != 0,
                                               elPresent: r.el_present_flag != 0, blPresent: r.bl_present_flag != 0,
                                               blCompatibilityId: Int(r.dv_bl_signal_compatibility_id), signalledIn: "container")
                info.hdr = .dolbyVision
            }
        case .audio:
            describeFormat(par, into: &info)
        case .subtitle where SubtitleLane.isTTML(par):
            info.codec = "ttml"
            info.textSubtitle = true
        case .subtitle:
            if let desc = avcodec_descriptor_get(codecID) {
                let props = desc.pointee.props
                if props & AV_CODEC_PROP_TEXT_SUB != 0 { info.textSubtitle = true }
                else if props & AV_CODEC_PROP_BITMAP_SUB != 0 { info.textSubtitle = false }
            }
            if par.codec_id == AV_CODEC_ID_DVB_TELETEXT, let x = par.extradata, par.extradata_size >= 2 {
                info.teletextPages = TeletextPages.subtitlePages(extradata: Array(UnsafeBufferPointer(start: x, count: Int(par.extradata_size))),
                                                                 languages: info.language)
            }
        default: break
        }
        return info
    }

    /// The last path component's extension, as `NSString.pathExtension` reads it: after
    /// its last dot, none when the dot starts the name (`.mkv`) or nothing follows it.
    static func fileExtension(_ path: String) -> String {
        guard let name = path.split(separator: "/").last, let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return String(name[name.index(after: dot)...])
    }

    /// Some muxers mark commentary only in the title.
    static func isCommentaryTitle(_ title: String?) -> Bool {
        guard let t = title?.lowercased() else { return false }
        return t.includes("commentary") || t.includes("kommentar") || t.includes("commentaire")
    }

    /// The length a Matroska muxer states for a track in its statistics tags (`DURATION`,
    /// "HH:MM:SS.nnnnnnnnn": mkvmerge's and libavformat's), nil without one. The segment's
    /// duration counts every track, subtitles too; this is the one track's.
    static func statedDuration(_ st: UnsafeMutablePointer<AVStream>) -> Double? {
        guard let text = dictValue(st.pointee.metadata, "DURATION") else { return nil }
        let parts = text.split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]) else { return nil }
        let total = h * 3600 + m * 60 + s
        return total.isFinite && total >= 0 ? total : nil
    }

    /// MP4 has one code for MPEG-1 audio of every layer, which libavformat calls MP3
    /// whatever the frames are (a broadcast's MP2 copied from MPEG-TS into MP4); planned as
    /// MP3, it was copied to devices that play MP3 and have no Layer II decoder. The first
    /// frame header says the layer (bits 2-1 of its second byte: 3 is Layer I, 2 Layer II).
    static func mpegAudioLayer(_ packet: Packet) -> String? {
        let p = packet.pointer.pointee
        guard p.size >= 4, let data = p.data, data[0] == 0xFF, data[1] & 0xE0 == 0xE0 else { return nil }
        switch (data[1] >> 1) & 3 {
        case 3: return "mp1"
        case 2: return "mp2"
        default: return nil
        }
    }

    /// A frame rate as `MediaInfo` gives it: to a thousandth of a frame a second (29.97),
    /// and for a picture less often than every second, to a thousandth of itself. A picture
    /// a minute read 0.017 fps, 2 % off: its encode put pictures on that grid and drifted
    /// 22 s from the sound over two hours.
    static func reportedRate(_ fps: Double) -> Double {
        guard fps < 1, fps > 0 else { return (fps * 1000).rounded() / 1000 }
        let scale = pow(10, 3 - floor(log10(fps)))
        return (fps * scale).rounded() / scale
    }

    /// The shortest sound without pictures that is prepared, in seconds: what an AAC encode
    /// of less decodes to nothing (a sound of 20 samples at 44.1 kHz did; 50 did not).
    static let shortestSound = 0.002

    /// libavformat's demuxers for bare video elementary streams.
    static let elementaryStreamFormats: Set<String> = ["h264", "hevc", "mpegvideo", "m4v", "vc1", "cavsvideo", "avs2"]
    /// The largest file whose length is read through where libavformat only estimates it
    /// (`lengthByReading`): 64 MB of MP3 packets read in about 0.1 s.
    static let readWhole: Int64 = 64 << 20

    /// Where a file's audio and video packets end, read from its first packet to its last
    /// (bounded by `readWhole`'s packets); nil where the read stops before the end. The
    /// demuxer is back at the start afterwards.
    /// And, for an Ogg or FLAC file, whether its links are chained and why they cannot be
    /// timed (`LinkChain`).
    static func lengthByReading(_ demuxer: Demuxer) -> (end: Double, chained: Bool, unfollowable: String?)? {
        guard let packet = try? Packet() else { return nil }
        // A bare stream cannot go back to its start (libavformat seeks only by its index):
        // read by a reader of its own (a file of at most `readWhole` bytes).
        if (try? demuxer.rewind()) == nil {
            guard let fresh = try? Demuxer(path: demuxer.path, cancellation: demuxer.cancellation) else { return nil }
            return endByReading(fresh, into: packet).map { ($0, fresh.linksChained, fresh.linksUnfollowable) }
        }
        defer { try? demuxer.rewind() }
        return endByReading(demuxer, into: packet).map { ($0, demuxer.linksChained, demuxer.linksUnfollowable) }
    }

    /// Where the audio and video packets `demuxer` reads from where it is end; nil where
    /// the read stops before the file's end.
    private static func endByReading(_ demuxer: Demuxer, into packet: Packet) -> Double? {
        var end: Double?, reads = 0
        while reads < 1_000_000 {
            guard (try? demuxer.read(into: packet)) == true else { return end }
            reads += 1
            defer { packet.unref() }
            if let t = audioVideoEnd(packet, in: demuxer) { end = max(end ?? t, t) }
        }
        return nil
    }

    /// Where an audio or video packet ends (seconds, the file's time); nil for another
    /// stream's or an untimed one.
    static func audioVideoEnd(_ packet: Packet, in demuxer: Demuxer) -> Double? {
        let p = packet.pointer.pointee
        guard p.stream_index >= 0, Int(p.stream_index) < demuxer.streamCount else { return nil }
        let st = demuxer.stream(Int(p.stream_index))
        let type = st.pointee.codecpar.pointee.codec_type
        guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO, packet.time != noPTS else { return nil }
        return seconds(packet.time + max(0, p.duration), st.pointee.time_base)
    }

    /// How much of a file's end `measuredEnd` reads.
    static let tailBytes: Int64 = 4 << 20

    /// Where each of `streams` is shown to (seconds, the file's time), from the packets
    /// after its last keyframe: a picture is decoded after that keyframe at the latest, and
    /// reordering may show an earlier-decoded one last. Streams whose end is not read
    /// (no index, a failed seek, more packets than a probe reads) are left out.
    /// `fromStatedEnd`: seeks to where the stream's start and length say it ends, not to its
    /// last indexed sample: a fragmented file's index holds only the fragments read so far,
    /// and libavformat finds the last one by its fragment index (`sidx`, `mfra`).
    static func presentedEnds(_ demuxer: Demuxer, of streams: [Int], fromStatedEnd: Bool = false) -> [Int: Double] {
        guard let packet = try? Packet() else { return [:] }
        defer { try? demuxer.rewind() }
        var ends: [Int: Double] = [:]
        for i in streams where i >= 0 && i < demuxer.streamCount {
            let st = demuxer.stream(i)
            let entries = avformat_index_get_entries_count(st)
            let stated = st.pointee.start_time != noPTS && st.pointee.duration > 0 ? st.pointee.start_time + st.pointee.duration : nil
            guard let target = fromStatedEnd ? stated : (entries > 0 ? avformat_index_get_entry(st, entries - 1)?.pointee.timestamp : nil),
                  demuxer.seek(stream: Int32(i), to: target, flags: AVSEEK_FLAG_BACKWARD) >= 0 else { continue }
            var end: Int64?
            var reads = 0
            while reads < 20_000, (try? demuxer.read(into: packet)) == true {
                reads += 1
                defer { packet.unref() }
                let p = packet.pointer.pointee
                // Not a packet shown nowhere (past an edit list's end, kept for the pictures
                // before it to decode): a copy leaves it out (`CopyLane.notShown`).
                guard Int(p.stream_index) == i, p.pts != noPTS, p.flags & AV_PKT_FLAG_DISCARD == 0 else { continue }
                end = max(end ?? Int64.min, p.pts + max(0, p.duration))
            }
            guard reads < 20_000, let end, let t = seconds(end, st.pointee.time_base) else { continue }
            ends[i] = t
        }
        return ends
    }

    /// Where a file without a declared duration ends: the latest audio or video packet end
    /// in its last `tailBytes`, read after a byte seek (demuxers find their next packet from
    /// any byte). nil when the container cannot seek by byte or shows no times there. The
    /// demuxer is back at the start afterwards, whatever the tail held: left at the end when
    /// the tail said nothing (a Matroska file without a Duration), the pipeline found no
    /// packets and the file was refused as damaged.
    /// Matroska's is read from its last cluster (`MatroskaTail`): its demuxer does not go
    /// where a byte seek puts it.
    static func measuredEnd(_ demuxer: Demuxer, size: Int64) -> Double? {
        if demuxer.isMatroska { return matroskaEnd(demuxer, size: size) }
        guard size > 0, demuxer.readsFromAnyByte, let packet = try? Packet() else { return nil }
        defer { try? demuxer.rewind() }
        var end: Double? = nil
        let read = demuxer.read(fromByte: max(0, size - tailBytes), limit: 100_000, into: packet) { packet in
            if let t = audioVideoEnd(packet, in: demuxer) { end = max(end ?? t, t) }
            return true
        }
        return read ? end : nil
    }

    /// The latest end of an audio or video block in a Matroska file's last cluster: its
    /// start, plus a frame of its stream (a picture at its rate, a sound frame's samples).
    /// A cluster can be longer than `tailBytes` (5 MB, or 5 s of a high-rate picture, from
    /// ffmpeg's muxer): then the last 64 MB are read.
    /// `widen`: read the last 64 MB where the last 4 MB hold no whole cluster; without it,
    /// give nil there.
    static func matroskaEnd(_ demuxer: Demuxer, size: Int64, widen: Bool = true) -> Double? {
        matroskaTail(demuxer, size: size, widen: widen)?.end
    }

    /// A Matroska file's last cluster of pictures or sound as `matroskaEnd` reads it: the
    /// latest end of its blocks, the cluster's own time (seconds), and whether it was read
    /// whole (`MatroskaTail.Cluster.whole`).
    static func matroskaTail(_ demuxer: Demuxer, size: Int64, widen: Bool = true,
                             reading bytes: Int64 = tailBytes) -> (end: Double, start: Double, whole: Bool, follows: Bool?)? {
        guard size > 0, let file = try? FileDescriptor(path: demuxer.path, flags: O_RDONLY) else { return nil }
        // libavformat makes a stream of each track in the order of their entries, which
        // muxers number from 1 (it keeps no track number). Every track's times are in the
        // segment's units: a block whose track is not found that way still gives its time.
        func known(_ b: MatroskaTail.Block) -> Bool { b.track >= 1 && b.track <= demuxer.streamCount }
        // Clusters of subtitle cues alone after the pictures' and sound's last (a subtitle
        // track running on past the film) are passed over.
        func film(_ b: MatroskaTail.Block) -> Bool {
            guard known(b) else { return true }
            let type = demuxer.stream(b.track - 1).pointee.codecpar.pointee.codec_type
            return type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO
        }
        func cluster(_ bytes: Int64) -> MatroskaTail.Cluster? {
            (try? file.read(upTo: Int(min(size, bytes)), at: max(0, size - bytes))).flatMap { MatroskaTail.lastCluster($0, wanted: film) }
        }
        // Every track's times are in the segment's units, which libavformat gives a picture
        // or sound stream as its time base (not an attachment: a damaged track list that left
        // only a font read a 4 s film's last cluster as 0.04 s).
        guard let timed = (0..<demuxer.streamCount).first(where: {
                  let type = demuxer.stream($0).pointee.codecpar.pointee.codec_type
                  return type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO
              }),
              let read = cluster(bytes) ?? (widen && size > bytes ? cluster(16 * bytes) : nil) else { return nil }
        let end = read.blocks.compactMap { b -> Double? in
            let known = known(b)
            let st = demuxer.stream(known ? b.track - 1 : timed)
            let par = st.pointee.codecpar.pointee
            var frame = 0.0
            switch par.codec_type {
            case AVMEDIA_TYPE_VIDEO where known && st.pointee.r_frame_rate.num > 0:
                frame = 1 / st.pointee.r_frame_rate.seconds
            case AVMEDIA_TYPE_AUDIO where known && par.frame_size > 0 && par.sample_rate > 0:
                frame = Double(par.frame_size) / Double(par.sample_rate)
            case AVMEDIA_TYPE_VIDEO, AVMEDIA_TYPE_AUDIO:
                break
            default:
                if known { return nil }  // subtitles and attachments are not the film's end
            }
            // A time beyond the range is no time, as the demuxer reads it (`TimeLimit`).
            guard TimeLimit.within(b.time, st.pointee.time_base) else { return nil }
            return seconds(b.time, st.pointee.time_base).map { $0 + frame }
        }.max()
        let base = demuxer.stream(timed).pointee.time_base
        guard let end, TimeLimit.within(read.time, base), let start = seconds(read.time, base) else { return nil }
        // Whether the cluster follows the one before it: starts no earlier than a second
        // before that one's last block, and no more than `clusterGap` after it (nil: no
        // cluster before it in the bytes read).
        let follows = read.before.flatMap { seconds(read.time &- $0, base) }.map { $0 >= -1 && $0 <= clusterGap }
        return (end, start, read.whole, follows)
    }

    /// How far (seconds) a film's cluster may start after the last block of the one before.
    static let clusterGap = 10.0

    /// Codecs whose streams are interlaced in real files (HEVC's field SEI is too rare to
    /// pay a UHD decoder for on every probe).
    static let interlaceCapableCodecs: Set<String> = ["h264", "mpeg2video", "mpeg1video", "vc1", "mpeg4", "dvvideo"]

    /// The rate of pictures timed `times` (ascending) when every one lies within a tick of
    /// the straight line from the first to the last, nil when any strays further.
    static func evenlyRounded(_ times: [Int64], _ timeBase: AVRational) -> Double? {
        guard let first = times.first, let last = times.last, last > first, times.count >= 3 else { return nil }
        let step = Double(last - first) / Double(times.count - 1)
        for (i, t) in times.enumerated() where abs(Double(t - first) - Double(i) * step) > 1 { return nil }
        let seconds = step * timeBase.seconds
        return seconds > 0 ? 1 / seconds : nil
    }

    /// Frame rate from presentation timestamps: the median step between sorted PTS, and
    /// "variable" when more than a tenth of the steps stray more than 10 % from it.
    static func frameRate(pts: [Int64], timeBase: AVRational) -> (Double, Bool)? {
        // Three pictures are two steps: a slideshow of three has no more to measure, and
        // libavformat's rate for it is its time base's (30 for one cut from a 30 fps clip).
        guard pts.count >= 3 else { return nil }
        let sorted = pts.sorted()
        let steps = zip(sorted.dropFirst(), sorted).map { $0 - $1 }.filter { $0 > 0 }
        guard steps.count >= 2 else { return nil }
        let median = steps.sorted()[steps.count / 2]
        let seconds = Double(median) * timeBase.seconds
        guard seconds > 0 else { return nil }
        // A step is off the rate when it differs by more than a tenth, or, in a time base
        // coarse for the rate (4 to 10 ticks a frame), than its own rounding (one tick):
        // 120 fps in milliseconds is steps of 8, 8 and 9, which is constant, not a third of
        // its frames astray. (Where a frame is a tick or two, one tick is a real change.)
        let rounding = median >= 4 ? 1.0 : 0
        let stray = steps.filter { abs(Double($0 - median)) > max(0.1 * Double(median), rounding) }.count
        let variable = Double(stray) / Double(steps.count) > 0.1
        // A constant rate is the mean step, which averages away timestamps rounded to
        // milliseconds (MKV's 33/34 ms steps are 29.97 fps, not 30.3). A time less than half
        // a frame after the one before is no frame of its own (VP9's hidden frames, 1 ms
        // after a shown one in WebM, made 23.976 read 25.7). Steps over one and a half
        // frames are left out: a picture with no time of its own (a PES without one, in
        // MPEG-PS) leaves a double step, which made 25 fps read 24.75, and one damaged
        // timestamp far from the rest (a flipped bit in a TS PTS put one picture 13 hours
        // on) would make it 0.003 fps.
        var frames = [sorted[0]]
        for t in sorted.dropFirst() where Double(t - frames[frames.count - 1]) >= 0.5 * Double(median) { frames.append(t) }
        let regular = zip(frames.dropFirst(), frames).map { $0 - $1 }.filter { Double($0) <= 1.5 * Double(median) }
        let sum = Double(regular.reduce(0, +)) * timeBase.seconds
        if !variable, sum > 0 {
            let fps = Double(regular.count) / sum
            if abs(fps * seconds - 1) < 0.1 { return (fps, false) }
        }
        // Where a frame is a few ticks, one tick either way may be rounding as much as a
        // change: 300 fps in milliseconds is steps of 3 and 4, which read as variable at 333
        // (and was encoded at a sixth of that, 55.6). Pictures that all lie within a tick of
        // one straight line from the first to the last come at one rate with their times
        // rounded; a rate that really changes strays from the line by more as it goes on.
        if variable, median < 4, frames.count >= 3, let rate = evenlyRounded(frames, timeBase) { return (rate, false) }
        // A variable rate is the one most pictures come at: the mean of the steps near the
        // median, for the same rounding (120 fps in Matroska with a slower stretch is steps
        // of 8, 8 and 9 ms, 120 fps, not the median's 125, which an encode kept within 60
        // then showed at a third, 41.7).
        let usual = regular.filter { abs(Double($0 - median)) <= max(0.1 * Double(median), rounding) }
        let usualSum = Double(usual.reduce(0, +)) * timeBase.seconds
        if usualSum > 0 { return (Double(usual.count) / usualSum, variable) }
        return (1 / seconds, variable)
    }
}

/// A probed source, still open: its `MediaInfo` and the demuxer a pipeline reads.
public final class ProbedSource {
    private var reader: Demuxer
    /// Whether `reader` cannot be read on from its start (`Demuxer.rewindFailed`,
    /// `readsFragmentsAgain`) and the run needs the file opened afresh.
    private var mustReopen: Bool
    public let info: MediaInfo
    public let path: String
    /// The index forecast's reader, when the probe opened one and nothing has taken it yet.
    var secondReader: SecondReader?
    /// Begun before the source was first opened: whether it changed since.
    let watch: SourceWatch?
    /// The machine's CPU time when the source was first opened, for how much of it others
    /// use (`IndexForecast.worthwhile`).
    let cpuMark: SpareCores?

    init(demuxer: Demuxer, info: MediaInfo, watch: SourceWatch?, secondReader: SecondReader? = nil, cpuMark: SpareCores? = nil) {
        self.cpuMark = cpuMark
        reader = demuxer
        mustReopen = demuxer.rewindFailed || demuxer.readsFragmentsAgain
        path = demuxer.path
        self.info = info
        self.watch = watch
        self.secondReader = secondReader
    }

    /// The reader positioned at the source's first packet: the probe's, or one opened
    /// afresh when the run first asks for it, so that a probe alone (`Prober.probe`, the
    /// daemon's probe child) never opens the file twice. Opened afresh again where a check
    /// before the run (`Preparer.refuseImplausibleDuration`) read a movie-fragment file's
    /// end and sent the reader back: a 120 s slideshow in fragments then went out as its
    /// last 30 s.
    func demuxer() throws(KilnError) -> Demuxer {
        if mustReopen || reader.rewoundThroughFragments {
            let fresh = try Demuxer(path: path, cancellation: reader.cancellation)
            fresh.readsFragmentsAgain = reader.readsFragmentsAgain
            reader = fresh
            mustReopen = false
        }
        return reader
    }
}

/// iTunes Store purchases protected with FairPlay: their sample entries are `drmi`
/// (video) and `drms` (audio), wrapping `avc1` and `mp4a` with a `sinf` box that holds
/// the keys' references. libavformat 59 marks no encryption for them (no side data, unlike
/// CENC), and follows the `frma` box naming the wrapped format only for CENC's `encv`/`enca`,
/// so their video reads as codec "none". Their samples decode to garbage; like CENC, such
/// a file can only be delivered as it is.
enum FairPlay {
    static let sampleEntries: Set<String> = ["drmi", "drms"]

    static func protects(_ par: AVCodecParameters) -> Bool {
        fourCC(par.codec_tag).map(sampleEntries.contains) ?? false
    }

    /// The codec a `drmi` entry wraps when libavformat left it unnamed: H.264 where its
    /// configuration record is an `avcC` (version 1, reserved bits set, a first parameter
    /// set that is an SPS). iTunes video is H.264.
    static func wrappedCodec(_ par: AVCodecParameters) -> String? {
        guard fourCC(par.codec_tag) == "drmi", par.extradata_size >= 9, let x = par.extradata else { return nil }
        guard x[0] == 1, x[4] & 0xFC == 0xFC, x[5] & 0xE0 == 0xE0, x[5] & 0x1F >= 1, x[8] & 0x1F == 7 else { return nil }
        return "h264"
    }
}

/// Finds the NAL unit types in a packet of H.264 or HEVC, either length-prefixed (MP4/MKV:
/// avcC, hvcC) or Annex B (MPEG-TS, AVI).
enum NALScanner {
    /// The NAL units' length size from the stream's decoder configuration record, 0 for
    /// Annex B (no record).
    static func lengthSize(_ st: UnsafeMutablePointer<AVStream>) -> Int {
        let par = st.pointee.codecpar.pointee
        guard let x = par.extradata, par.extradata_size > 4, x[0] == 1 else { return 0 }
        switch par.codec_id {
        // hvcC: byte 21's low two bits are lengthSizeMinusOne.
        case AV_CODEC_ID_HEVC: return par.extradata_size > 22 ? Int(x[21] & 3) + 1 : 0
        // avcC: byte 4's.
        case AV_CODEC_ID_H264: return Int(x[4] & 3) + 1
        default: return 0
        }
    }

    /// The NAL unit types in `data` (`NALUnits.type`).
    static func nalTypes(_ data: UnsafeBufferPointer<UInt8>, lengthSize: Int, h264: Bool = false) -> Set<Int> {
        var types = Set<Int>()
        NALUnits.forEach(in: data, lengthSize: lengthSize) { types.insert(NALUnits.type(of: $0[0], h264: h264)) }
        return types
    }
}

/// Cancels a `Cancellation` when time runs out, so a hostile file cannot hold a probe.
/// A thread waits for the time or for `disarm`, whichever comes first.
final class Deadline: Sendable {
    private struct State { var armed = true, fired = false }
    /// What the waiting thread shares (not the deadline itself, which may go first).
    private final class Shared: Sendable {
        let state = Mutex(State())
        let disarmed = Latch()
    }
    private let shared = Shared()
    var fired: Bool { shared.state.withLock { $0.fired } }

    init(seconds: Double, cancellation: Cancellation) {
        let shared = self.shared
        // Not here and now if no thread can be had: the probe would wait out the time.
        _ = Threads.tryStart {
            guard !shared.disarmed.wait(seconds: seconds) else { return }
            shared.state.withLock { s in
                if s.armed { s.fired = true; cancellation.cancel() }
            }
        }
    }

    deinit { disarm() }

    func disarm() {
        shared.state.withLock { $0.armed = false }
        shared.disarmed.open()
    }
}

/// What a picture's headers say (field order, presentation size), through libavcodec's
/// parser: no picture is decoded. Owns the parser and the codec context it reads parameter
/// sets (extradata) from.
final class HeaderParser {
    private let parser: UnsafeMutablePointer<AVCodecParserContext>
    private var context: UnsafeMutablePointer<AVCodecContext>?

    /// nil for codecs outside `codecs` or without a parser.
    init?(stream: UnsafeMutablePointer<AVStream>, codecs: [AVCodecID]) {
        let id = stream.pointee.codecpar.pointee.codec_id
        guard codecs.contains(id), let parser = av_parser_init(Int32(id.rawValue)) else { return nil }
        guard let context = avcodec_alloc_context3(nil),
              avcodec_parameters_to_context(context, stream.pointee.codecpar) >= 0 else {
            av_parser_close(parser)
            return nil
        }
        // Demuxed packets are whole pictures: parse each as it is, do not wait for the next.
        parser.pointee.flags |= PARSER_FLAG_COMPLETE_FRAMES
        self.parser = parser
        self.context = context
    }

    deinit {
        av_parser_close(parser)
        avcodec_free_context(&context)
    }

    /// Parses one packet (a whole picture); its results are read from the properties.
    func parse(_ packet: Packet) {
        let p = packet.pointer.pointee
        guard let data = p.data, p.size > 0 else { return }
        var out: UnsafeMutablePointer<UInt8>? = nil
        var outSize: Int32 = 0
        _ = av_parser_parse2(parser, context, &out, &outSize, data, p.size, p.pts, p.dts, p.pos)
    }

    /// Parses one packet and returns its picture's order count (POC) as the parser computes
    /// it from the slice header (H.264's counted in fields), nil when it holds no picture.
    func pictureOrder(_ packet: Packet) -> Int32? {
        parser.pointee.output_picture_number = Int32.min
        parse(packet)
        let order = parser.pointee.output_picture_number
        return order == Int32.min ? nil : order
    }

    /// Whether the last parsed picture is a keyframe (H.264: IDR, or a recovery point).
    var keyFrame: Bool { parser.pointee.key_frame == 1 }

    /// The last parsed picture's field order, or nil when its headers do not say.
    var fieldOrder: FieldOrder? {
        switch parser.pointee.field_order {
        case AV_FIELD_PROGRESSIVE: return .progressive
        case AV_FIELD_TT: return .tt
        case AV_FIELD_BB: return .bb
        case AV_FIELD_TB: return .tb
        case AV_FIELD_BT: return .bt
        default: return nil
        }
    }

    /// The last parsed picture's presentation size (its sequence parameter set, cropped),
    /// nil when the headers gave none.
    var size: PictureSize? {
        parser.pointee.width > 0 && parser.pointee.height > 0 ? PictureSize(width: parser.pointee.width, height: parser.pointee.height) : nil
    }
}

/// A picture's width and height, written "WxH".
struct PictureSize: Equatable, CustomStringConvertible {
    let width: Int32
    let height: Int32
    var description: String { "\(width)x\(height)" }
}
