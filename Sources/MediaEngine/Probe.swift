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
        // The fingerprint does not need the analysis, so it runs beside it.
        let fingerprinting = fingerprint
            ? Background { () throws(KilnError) -> String in try SourceFingerprint.compute(path: path) } : nil
        do {
            var demuxer = try Demuxer(path: path, cancellation: cancellation)
            // Opened once the first reader's analysis is done, not beside it: two analyses at
            // once would double the probe's peak memory (each holds decoded pictures). It
            // still runs while the packets are scanned and the plan is made. A failed probe
            // drops it, which cancels it.
            let second = minimum.flatMap { threshold in
                IndexForecast.worthwhile(sourceBytes: FileIO.size(atPath: path) ?? 0, main: demuxer, from: threshold)
                    ? SecondReader(path: path, skimmable: IndexForecast.skimmable(demuxer)) : nil
            }
            var info = try describe(demuxer)
            // The packet scan could not go back to the start (a seek that failed in a
            // damaged index, or one that would skip sound before the first keyframe): a
            // fresh demuxer reads the file from its beginning.
            if demuxer.rewindFailed { demuxer = try Demuxer(path: path, cancellation: cancellation) }
            info.fingerprint = try fingerprinting?.wait()
            return ProbedSource(demuxer: demuxer, info: info, watch: watch, secondReader: second)
        } catch {
            // Its thread must not outlive a failed probe: the command then exits, and exit
            // tears down libcrypto under a hash still running (a crash at exit).
            _ = try? fingerprinting?.wait()
            if error.code == .canceled && deadline.fired {
                throw KilnError(.sourceUnreadable, stage: .probe,
                                "probing took longer than \(Int(deadlineSeconds)) s; the file is too damaged to read")
            }
            // An MP4 cut short inside its index (at its end) may not open at all: say so.
            if error.code == .sourceUnreadable, let size = FileIO.size(atPath: path),
               let missing = movieBoxShortfall(path, size: Int64(size)) {
                throw KilnError(.sourceCorrupt, stage: .probe,
                                "the file is cut short: its index (moov) declares \(missing) bytes past its end (\(size) bytes)")
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
        var duration = seconds(ctx.pointee.duration, kiln_time_base_q()) ?? 0
        var warnings: [String] = []
        // The container's bitrate is its size over the length it declared (libavformat's):
        // where Kiln takes another length, the bitrate is worked out again from it.
        var lengthCorrected = false
        let longestTrack = streams.compactMap(\.durationSeconds).max() ?? 0
        if duration <= 0 {
            duration = longestTrack
        } else if formatName.hasPrefix("mov,mp4"), longestTrack > 0, abs(duration - longestTrack) > max(2, 0.1 * longestTrack) {
            // An MP4's movie duration (mvhd) is its longest track's by definition: one that
            // says otherwise is damaged (three times its length, or 49 days), and its
            // tracks' own (mdhd, edit lists) say how long the file plays. Its bitrate read a
            // third of what it was, so a file above a rung went to that rung as it was.
            duration = longestTrack
            lengthCorrected = true
            warnings.append("duration_from_tracks")
        }
        let start = seconds(ctx.pointee.start_time, kiln_time_base_q()) ?? 0
        var surveyedLength = false
        if streams.isEmpty { warnings.append("no_streams") }
        // Windows Media DRM: the ASF demuxer says so only in the file's metadata (from the
        // header's content encryption objects); its packets decode to garbage.
        if formatName.hasPrefix("asf"), ["ASF_Protection_Type", "encryption"].contains(where: { dictValue(ctx.pointee.metadata, $0) != nil }) {
            for i in streams.indices where streams[i].type == .video || streams[i].type == .audio { streams[i].encrypted = true }
        }
        if scan {
            try demuxer.keepingParameters { () throws(KilnError) in
                try scanPackets(demuxer, &streams, &warnings)
                // No duration in the header (a live or interrupted recording's Matroska): the
                // last packets say where the file ends, for progress, the plan's bitrate and
                // verification's length check.
                if duration <= 0, let end = measuredEnd(demuxer, size: Int64(size)), end > start {
                    duration = end - start
                    warnings.append("duration_measured")
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
                // 1.03 s declared 9.03 s for 8.02, and was refused as cut short).
                if formatName.hasPrefix("matroska") || formatName == "flv", start > 0.5, duration > start,
                   let end = measuredEnd(demuxer, size: Int64(size)) {
                    if abs(end - duration) < abs(end - (start + duration)) {
                        duration -= start
                        lengthCorrected = true
                        warnings.append("duration_from_start")
                    }
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
        let attached = (0..<demuxer.streamCount).reduce(Int64(0)) { sum, i in
            let par = demuxer.stream(i).pointee.codecpar.pointee
            return par.codec_type == AVMEDIA_TYPE_ATTACHMENT ? sum + Int64(max(0, par.extradata_size)) : sum
        }
        var bitRate = surveyedLength || lengthCorrected || attached > 0 ? 0 : Int(ctx.pointee.bit_rate)
        if bitRate <= 0, duration > 0 { bitRate = Int(Double(max(0, Int64(size) - attached)) * 8 / duration) }

        var chapters: [Chapter] = []
        for i in 0..<Int(ctx.pointee.nb_chapters) {
            guard let ch = ctx.pointee.chapters[i] else { continue }
            chapters.append(Chapter(startSeconds: seconds(ch.pointee.start, ch.pointee.time_base) ?? 0,
                                    endSeconds: seconds(ch.pointee.end, ch.pointee.time_base) ?? 0,
                                    title: dictValue(ch.pointee.metadata, "title")))
        }
        var info = MediaInfo(formatName: formatName, container: Container.name(formatName: formatName, fileExtension: ext),
                             durationSeconds: duration, startSeconds: start, bitRate: bitRate, sizeBytes: size,
                             streams: streams, chapters: chapters, warnings: warnings)
        if formatName.hasPrefix("mov,"), isFragmented(demuxer.path) { info.fragmented = true }
        if scan {
            // Tracks lost before libavformat reached them: no delivery can be known whole.
            if formatName.hasPrefix("mov,"), info.fragmented != true,
               let why = movieBoxDamage(demuxer.path) ?? sampleTablesShortfall(demuxer) {
                throw KilnError(.sourceCorrupt, stage: .probe, "the source's index is damaged: \(why)")
            }
            info.indexDamage = indexDamage(demuxer, size: Int64(size), fragmented: info.fragmented == true)
            if formatName.hasPrefix("mov,"), info.fragmented != true { info.timingDamage = TrackDrift.judge(demuxer) }
        }
        return info
    }

    /// The first stream whose index, as the demuxer read it from the file's header (MP4
    /// sample tables, Matroska cues, AVI's idx1), cannot be the file's: a sample lying
    /// past the file's end (a file cut short, a size or offset damaged), or a picture
    /// stream with no sample at all (its tables damaged: libavformat then keeps the
    /// stream and reads nothing of it). Such a file cannot go out as it is, however
    /// well its streams would play; the remux and its checks decide what it still holds.
    static func indexDamage(_ demuxer: Demuxer, size: Int64, fragmented: Bool) -> String? {
        let format = String(cString: demuxer.context.pointee.iformat.pointee.name)
        if format.hasPrefix("matroska"), let missing = matroskaShortfall(demuxer.path, size: size) {
            return "its Matroska segment declares \(missing) bytes past the file's end (\(size) bytes): the file is cut short"
        }
        let mp4 = format.hasPrefix("mov,")
        if let mislabelled = picturesDeclaredAsSound(demuxer) { return mislabelled }
        if mp4, let missing = movieBoxShortfall(demuxer.path, size: size) {
            return "its index (moov) declares \(missing) bytes past the file's end (\(size) bytes): the file is cut short"
        }
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            let type = st.pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO,
                  st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let count = min(Int(avformat_index_get_entries_count(st)), 1 << 22)
            if count == 0, type == AVMEDIA_TYPE_VIDEO, mp4, !fragmented {
                return "stream \(i): its sample tables list no picture"
            }
            for k in 0..<count {
                guard let e = avformat_index_get_entry(st, Int32(k)) else { continue }
                let end = e.pointee.pos + Int64(max(e.pointee.size, 0))
                if e.pointee.pos >= 0, end > size {
                    return "stream \(i): its index places a sample at bytes \(e.pointee.pos)–\(end), past the file's end (\(size) bytes): the file is cut short or its offsets are damaged"
                }
            }
        }
        return nil
    }

    /// A stream whose header declares it sound while its sample
    /// entry names a picture codec (an MP4 track's handler damaged from `vide` to `soun`):
    /// libavformat makes it a sound stream of no codec, and the pictures were left out
    /// quietly as an unknown sound track. MP4 and AVI's tables of picture tags say which.
    static func picturesDeclaredAsSound(_ demuxer: Demuxer) -> String? {
        for i in 0..<demuxer.streamCount {
            let par = demuxer.stream(i).pointee.codecpar.pointee
            // Sound only: data tracks of no codec legitimately carry `mp4s` (ISMA's object
            // descriptor and scene tracks), which the tables also list as MPEG-4 pictures.
            guard par.codec_id == AV_CODEC_ID_NONE, par.codec_type == AVMEDIA_TYPE_AUDIO, par.codec_tag != 0,
                  case let codec = kiln_picture_codec_for_tag(par.codec_tag), codec != AV_CODEC_ID_NONE else { continue }
            return "stream \(i): its header declares it sound, but its sample entry (\(fourCC(par.codec_tag) ?? "?")) holds "
                + "\(string(avcodec_get_name(codec)) ?? "video") pictures: the header is damaged"
        }
        return nil
    }

    /// How many bytes a Matroska file's Segment declares beyond the file's end: a file cut
    /// short (a copy or download that stopped), whose Cues, at the end, went with it, so
    /// libavformat has no index to find past the end and reads what is there as the whole.
    /// nil where the Segment's size is unknown (a live recording) or fits. Only the first
    /// two element headers are read.
    static func matroskaShortfall(_ path: String, size: Int64) -> Int64? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY),
              let head = try? file.read(upTo: 4096, at: 0) else { return nil }
        /// An EBML variable-length number at `at`: its value (nil for "unknown", all ones)
        /// and its length, or nil where it is not one.
        func vint(_ at: Int) -> (value: UInt64?, length: Int)? {
            guard at < head.count, head[at] != 0 else { return nil }
            let length = head[at].leadingZeroBitCount + 1
            guard at + length <= head.count else { return nil }
            var value = UInt64(head[at] & (0xFF >> length))
            for k in 1..<length { value = value << 8 | UInt64(head[at + k]) }
            return (value == (UInt64(1) << (7 * length)) - 1 ? nil : value, length)
        }
        // EBML header (1A 45 DF A3), then the Segment (18 53 80 67).
        guard head.count >= 8, head[0..<4] == [0x1A, 0x45, 0xDF, 0xA3], let ebml = vint(4), let ebmlSize = ebml.value,
              case let segment = 4 + ebml.length + Int(clamping: ebmlSize), segment + 4 < head.count,
              head[segment..<segment + 4] == [0x18, 0x53, 0x80, 0x67], let declared = vint(segment + 4),
              let bytes = declared.value else { return nil }
        let end = Int64(segment + 4 + declared.length) + Int64(clamping: bytes)
        return end > size ? end - size : nil
    }

    /// How many bytes an MP4's `moov` box declares beyond the file's end: a file whose index
    /// is at its end (not made for streaming) and was cut short there. libavformat reads
    /// what is left of the index, streams whose sample entries went with the tail name no
    /// codec, and the file was refused as unsupported. Only the first 64 top-level box
    /// headers are read; nil where `moov` fits or is not found.
    static func movieBoxShortfall(_ path: String, size: Int64) -> Int64? {
        // Also asked of files that did not open: a named pipe must not be waited on here.
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              let file = try? FileDescriptor(path: path, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        var offset: Int64 = 0
        for _ in 0..<64 where offset + 8 <= size {
            guard let head = try? file.read(upTo: 16, at: offset), head.count >= 8 else { return nil }
            var declared = Int64(head[0]) << 24 | Int64(head[1]) << 16 | Int64(head[2]) << 8 | Int64(head[3])
            if declared == 1, head.count >= 16 {
                declared = head[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) }
            }
            guard declared >= 8 else { return nil }
            if String(decoding: head[4..<8], as: UTF8.self) == "moov" {
                return declared > size - offset ? declared - (size - offset) : nil
            }
            guard declared <= size - offset else { return nil }
            offset += declared
        }
        return nil
    }

    /// Damage in the movie box's own children, which libavformat reads in turn before any
    /// track: they must tile it (a size that runs past it, or lands inside a neighbour, has
    /// libavformat read what follows from the wrong place, or clamp the box over it), each
    /// of a readable four-character type, and the movie header one of its two sizes (108
    /// bytes, or 120 in version 1). An MP4 whose `mvhd` size was damaged lost its sound
    /// track, or every track, quietly: a remux came out with pictures alone. Fewer than 8
    /// bytes of zeros may end the box (QuickTime's padding). nil where it is whole, or
    /// where there is no movie box to judge.
    static func movieBoxDamage(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              let file = try? FileDescriptor(path: path, flags: O_RDONLY | O_NONBLOCK), let size = FileIO.size(atPath: path),
              let top = try? FastStart.topLevelBoxes(file, fileSize: size, limit: 64, upToDamage: true),
              let moov = top.first(where: { $0.type == "moov" }) else { return nil }
        let end = moov.offset + moov.size
        guard let children = try? FastStart.topLevelBoxes(file, from: moov.offset + 8, fileSize: end, limit: 100_000, upToDamage: true)
        else { return nil }
        for box in children {
            guard box.type.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
                return "its index (moov) holds a box of no readable type at byte \(box.offset)"
            }
            if box.type == "mvhd", box.size != 108, box.size != 120 {
                return "its movie header (mvhd) declares \(box.size) bytes, not 108 or 120"
            }
        }
        let offset = children.last.map { $0.offset + $0.size } ?? moov.offset + 8
        if end - offset >= 8 {
            return "its index (moov) holds a box at byte \(offset) whose size runs past the index's end"
        }
        if offset < end, let rest = try? file.read(upTo: Int(end - offset), at: offset), rest.contains(where: { $0 != 0 }) {
            return "its index (moov) ends in \(end - offset) bytes that are no box"
        }
        return nil
    }

    /// A track whose sample tables give fewer samples than it holds, and cover far less
    /// time than its header declares: a sample count damaged in `stsz` (one sample of 250)
    /// leaves libavformat one picture to read, and a 10 s film came out as a single
    /// picture beside 10 s of sound, the sound's length passing for the output's. Both
    /// must hold: a track trimmed by an edit list also indexes fewer samples than it has,
    /// but covers the time it declares; a still picture shown for an hour is one sample.
    static func sampleTablesShortfall(_ demuxer: Demuxer) -> String? {
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            let type = st.pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO,
                  st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let entries = Int(avformat_index_get_entries_count(st)), samples = Int(st.pointee.nb_frames)
            guard entries > 0, samples > entries, let declared = seconds(st.pointee.duration, st.pointee.time_base),
                  let first = avformat_index_get_entry(st, 0)?.pointee.timestamp,
                  let last = avformat_index_get_entry(st, Int32(entries - 1))?.pointee.timestamp else { continue }
            let step = entries > 1 ? (last - first) / Int64(entries - 1) : 0
            guard let span = seconds(last - first + step, st.pointee.time_base), declared - span > max(1, declared * 0.1) else { continue }
            return "stream \(i): its sample tables give \(entries) of its \(samples) samples, "
                + "\(Format.fixed(span, decimals: 2)) s of the \(Format.fixed(declared, decimals: 2)) s its track declares"
        }
        return nil
    }

    /// Whether an MP4 or QuickTime file is in movie fragments with no segment index: its
    /// `moov` holds an `mvex` (which announces fragments), or a `moof` follows, and no
    /// top-level `sidx` says where they are. Only box headers are read, of the first 64
    /// top-level boxes and of `moov`'s children; a damaged box ends the walk (not fragmented).
    static func isFragmented(_ path: String) -> Bool {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY), let size = FileIO.size(atPath: path),
              // (A file cut short in its last fragment is fragmented all the same.)
              let top = try? FastStart.topLevelBoxes(file, fileSize: size, limit: 64, upToDamage: true) else { return false }
        if top.contains(where: { $0.type == "sidx" }) { return false }
        if top.contains(where: { $0.type == "moof" }) { return true }
        guard let moov = top.first(where: { $0.type == "moov" }),
              let children = try? FastStart.topLevelBoxes(file, from: moov.offset + 8, fileSize: moov.offset + moov.size, limit: 64) else { return false }
        return children.contains { $0.type == "mvex" }
    }

    /// An audio stream's channels, layout and sample rate; none when its parameters do not
    /// say (a stream libavformat met past its analysis: MPEG-TS gives its codec only), not
    /// zero, which the planner took for a count (it planned mono for a stereo stream).
    static func describeFormat(_ par: AVCodecParameters, into info: inout StreamInfo) {
        guard par.ch_layout.nb_channels > 0, par.sample_rate > 0 else { return }
        info.channels = Int(par.ch_layout.nb_channels)
        var buf = [CChar](repeating: 0, count: 128)
        var layout = par.ch_layout
        if av_channel_layout_describe(&layout, &buf, buf.count) > 0 { info.channelLayout = cString(buf) }
        info.sampleRate = Int(par.sample_rate)
    }

    static func describe(stream st: UnsafeMutablePointer<AVStream>) -> StreamInfo {
        let par = st.pointee.codecpar!.pointee
        let type: StreamType
        switch par.codec_type {
        case AVMEDIA_TYPE_VIDEO: type = .video
        case AVMEDIA_TYPE_AUDIO: type = .audio
        case AVMEDIA_TYPE_SUBTITLE: type = .subtitle
        case AVMEDIA_TYPE_ATTACHMENT: type = .attachment
        case AVMEDIA_TYPE_DATA: type = .data
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
        var info = StreamInfo(index: Int(st.pointee.index), type: type, codec: string(avcodec_get_name(par.codec_id)) ?? "unknown",
                              disposition: disposition)
        info.codecTag = fourCC(par.codec_tag)
        if FairPlay.protects(par) {
            info.encrypted = true
            if par.codec_id == AV_CODEC_ID_NONE, let wrapped = FairPlay.wrappedCodec(par) { info.codec = wrapped }
        }
        info.profile = string(avcodec_profile_name(par.codec_id, par.profile))
        if par.level > 0 { info.level = Int(par.level) }
        if par.bit_rate > 0 { info.bitRate = Int(par.bit_rate) }
        info.durationSeconds = seconds(st.pointee.duration, st.pointee.time_base)
        info.startSeconds = seconds(st.pointee.start_time, st.pointee.time_base)
        info.language = dictValue(st.pointee.metadata, "language").flatMap { $0 == "und" ? nil : $0 }
        info.title = trackTitle(st)

        switch type {
        case .video:
            info.width = Int(par.width)
            info.height = Int(par.height)
            let fmt = AVPixelFormat(rawValue: par.format)
            if let desc = av_pix_fmt_desc_get(fmt) {
                info.pixelFormat = string(desc.pointee.name)
                info.bitDepth = Int(desc.pointee.comp.0.depth)
                switch (desc.pointee.log2_chroma_w, desc.pointee.log2_chroma_h) {
                case (1, 1): info.chroma = 420
                case (1, 0): info.chroma = 422
                case (0, 0): info.chroma = desc.pointee.nb_components >= 3 ? 444 : 400
                default: break
                }
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
            if fps > 0 { info.frameRate = (fps * 1000).rounded() / 1000 }
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
        case .subtitle:
            if let desc = avcodec_descriptor_get(par.codec_id) {
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

    /// Reads the first packets of the main video stream (a bounded number) to learn what
    /// the headers do not say reliably: the real frame rate and whether it varies (MKV's
    /// default durations and r_frame_rate are often wrong), and Dolby Vision signalled
    /// only in the bitstream (HEVC RPU NAL units, type 62, and an enhancement layer, type
    /// 63, with no dvcC/dvvC record), whose profile is inferred from the base layer;
    /// and what every stream's first packets tell (`FirstPackets`), in files without
    /// video too.
    static func scanPackets(_ demuxer: Demuxer, _ streams: inout [StreamInfo], _ warnings: inout [String]) throws(KilnError) {
        guard let vi = streams.firstIndex(where: { $0.type == .video && !$0.disposition.attachedPicture }) else {
            // No pictures (a radio recording, an album): only what the sound streams' first
            // packets tell, read until each has told it.
            var first = FirstPackets()
            guard !first.settled(streams) || !first.measured(streams) else { return }
            let packet = try Packet()
            defer { _ = try? demuxer.rewind() }
            var reads = 0
            while !first.settled(streams) || !first.measured(streams), reads < scanPacketLimit * 4 {
                reads += 1
                guard try demuxer.read(into: packet) else { first.readToEnd = true; break }
                defer { packet.unref() }
                first.observe(packet, demuxer, &streams)
            }
            first.measureBitRates(&streams)
            return
        }
        let target = Int32(streams[vi].index)
        let st = demuxer.stream(Int(target))
        let scanDV = streams[vi].codec == "hevc" && streams[vi].dolbyVision == nil
        let lengthSize = NALScanner.lengthSize(st)
        let packet = try Packet()
        // The stream's packets' presentation and decode times, in the order read, since its
        // decode times last jumped (a splice); and the longest run before that. Two
        // timelines sorted together (DVD cells put back to back, the second timed from 2 s)
        // made 25 fps read 50, variable.
        var pts: [Int64] = [], dts: [Int64] = []
        var longest: (pts: [Int64], dts: [Int64]) = ([], [])
        var rpu = false, el = false, reads = 0, scanned = 0, decodeTimesOnly = 0
        var first = FirstPackets()
        defer { first.measureBitRates(&streams) }
        // Closed captions in the pictures (`ClosedCaptions`): looked for until some text is
        // found. Their bytes alone are not enough: stations send padding all along, through
        // programmes no one captioned, and a track of nothing would only disappoint.
        let codecID = st.pointee.codecpar.pointee.codec_id
        var captions = [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC, AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_MPEG1VIDEO].contains(codecID)
            ? CaptionSurvey() : nil
        let captionsIn = { (p: AVPacket) -> [UInt8] in
            guard let data = p.data else { return [] }
            return ClosedCaptions.triplets(in: UnsafeBufferPointer(start: data, count: Int(p.size)), codec: codecID, lengthSize: lengthSize)
        }
        // Elementary streams (raw H.264, HEVC, MPEG video) carry no times at all.
        let untimed = Prober.elementaryStreamFormats.contains(String(cString: demuxer.context.pointee.iformat.pointee.name))
        // Field order is only in the bitstream for many H.264 and MPEG-2 files. libavcodec's
        // parser reads it from the first keyframe's headers (slice header and picture
        // timing, picture coding extension) in microseconds; where it cannot say, the
        // keyframe is decoded (one thread, drained at once rather than after the reorder
        // delay's worth of pictures) and the picture asked.
        var fieldParser: HeaderParser? = nil
        var fieldDecoder: Decoder? = nil
        // DV's is always its bitstream's: a MOV's `fiel` box (ffmpeg's muxer writes one)
        // said progressive for PAL DV, which the decoder flags interlaced.
        let containerUnsure = streams[vi].fieldOrder == nil || streams[vi].fieldOrder == .unknown || streams[vi].codec == "dvvideo"
        // An H.264 stream in a container that says progressive is asked the bitstream's word
        // too (the parser gives it for nothing): field-coded H.264 (MBAFF, PAFF) in a Matroska
        // file flagged progressive (ffmpeg's muxer writes the flag of the pictures it was
        // given) went as it was to devices whose decoders take no field-coded H.264. The
        // bitstream wins only where it says interlaced. Not MPEG-2: every decoder of it
        // decodes field-coded pictures, and encoders mark progressive film so (`+ildct`,
        // progressive_frame 0), which the container's word then rightly overrules.
        let containerProgressive = streams[vi].fieldOrder == .progressive && streams[vi].codec == "h264"
        if containerUnsure || containerProgressive, Prober.interlaceCapableCodecs.contains(streams[vi].codec) {
            fieldParser = HeaderParser(stream: st, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_MPEG1VIDEO])
            if fieldParser == nil && containerUnsure { fieldDecoder = try? Decoder(stream: st, threads: 1, sharedPicture: true) }
        }
        // No seek first: the packets find_stream_info read are still buffered and come
        // back first (unless `H264Analysis` already went back to the start). Afterwards
        // the demuxer is rewound for the pipeline.
        defer { _ = try? demuxer.rewind() }
        // Counted in the stream's packets, timed or not: AVI's have no presentation times,
        // and waiting for them read the whole file.
        while scanned < scanPacketLimit, reads < scanPacketLimit * 32 {
            reads += 1
            guard try demuxer.read(into: packet) else { first.readToEnd = true; break }
            defer { packet.unref() }
            first.observe(packet, demuxer, &streams)
            guard packet.streamIndex == target else { continue }
            let p = packet.pointer.pointee
            scanned += 1
            if p.dts != noPTS, let last = dts.last,
               SpliceTimeline.isJump(rescale(p.dts - last, from: st.pointee.time_base, to: kiln_time_base_q())) {
                if dts.count > longest.dts.count { longest = (pts, dts) }
                (pts, dts) = ([], [])
            }
            if p.dts != noPTS { dts.append(p.dts) }
            if p.pts != noPTS { pts.append(p.pts) } else if p.dts != noPTS || untimed { decodeTimesOnly += 1 }
            if let parser = fieldParser, p.flags & AV_PKT_FLAG_KEY != 0 {
                parser.parse(packet)
                if let order = parser.fieldOrder {
                    if containerUnsure || order.isInterlaced { streams[vi].fieldOrder = order }
                } else if containerUnsure {
                    fieldDecoder = try? Decoder(stream: st, threads: 1, sharedPicture: true)
                }
                fieldParser = nil
            }
            if let decoder = fieldDecoder, p.flags & AV_PKT_FLAG_KEY != 0 {
                var order: FieldOrder? = nil
                let look = { (frame: Frame) throws(KilnError) in
                    guard order == nil else { return }
                    let f = frame.pointer.pointee
                    order = f.interlaced_frame == 0 ? .progressive : (f.top_field_first != 0 ? .tt : .bb)
                }
                try? decoder.decode(packet, look)
                try? decoder.decode(nil, look)
                if let order { streams[vi].fieldOrder = order }
                fieldDecoder = nil
            }
            if captions?.complete == false { captions?.read(captionsIn(p), at: p.pts != noPTS ? p.pts : nil) }
            if scanDV, let data = p.data {
                let types = NALScanner.nalTypes(UnsafeBufferPointer(start: data, count: Int(p.size)), lengthSize: lengthSize)
                if types.contains(62) { rpu = true }
                if types.contains(63) { el = true }
            }
        }
        // Caption padding and no text yet (a programme that opens on music): the pictures
        // are read on for the first caption, and nothing else, up to `captionScanLimit`.
        // (Only for a first caption: a second service found late is not worth reading on for.)
        captions?.finish()
        if let survey = captions, survey.found.isEmpty, survey.padding {
            var more = 0
            while more < Prober.captionScanLimit, reads < Prober.captionScanLimit * 32 {
                reads += 1
                guard try demuxer.read(into: packet) else { break }
                defer { packet.unref() }
                guard packet.streamIndex == target else { continue }
                more += 1
                let p = packet.pointer.pointee
                captions?.read(captionsIn(p), at: p.pts != noPTS ? p.pts : nil)
                if captions?.found.isEmpty == false { break }
            }
            captions?.finish()
        }
        if let found = captions?.found, !found.isEmpty {
            streams[vi].closedCaptions = true
            streams[vi].captionServices = found
        }
        // Reordered pictures (B-frames) with decode times only: a copy would show them in
        // decode order on players that take the container's times (Apple's).
        if decodeTimesOnly > 0, st.pointee.codecpar.pointee.video_delay > 0 { streams[vi].presentationTimesMissing = true }
        // Where some pictures have no presentation time (MPEG-4 Part 2 in AVI gives its
        // B-frames one), the rest's are no frame clock: the decode times are.
        if longest.dts.count > dts.count { (pts, dts) = longest }
        if let (fps, variable) = frameRate(pts: decodeTimesOnly > 0 ? dts : pts, timeBase: st.pointee.time_base) {
            streams[vi].frameRate = (fps * 1000).rounded() / 1000
            streams[vi].variableFrameRate = variable
        }
        let questions = FieldSurvey.questions(for: streams[vi])
        if questions.any {
            let found = FieldSurvey.survey(demuxer, stream: Int(target), asking: questions)
            streams[vi].telecined = found.telecined
            streams[vi].progressiveFrames = found.progressiveFrames
        }
        guard rpu else { return }
        let base = streams[vi].hdr ?? .sdr
        let profile: Int, compat: Int
        if el { profile = 7; compat = 6 }
        else {
            switch base {
            case .hdr10: profile = 8; compat = 1
            case .hlg: profile = 8; compat = 4
            default:
                // No PQ/HLG signalling on the base layer: the IPTPQc2 colour of profile 5
                // (or an SDR-compatible 8.2 with BT.709 tags).
                if streams[vi].colorPrimaries == "bt709" { profile = 8; compat = 2 } else { profile = 5; compat = 0 }
            }
        }
        streams[vi].dolbyVision = DolbyVision(profile: profile, level: 0, rpuPresent: true, elPresent: el, blPresent: true,
                                              blCompatibilityId: compat, signalledIn: "bitstream")
        streams[vi].hdr = .dolbyVision
        warnings.append("dolby_vision_inferred_from_bitstream")
    }

    static let scanPacketLimit = 240
    /// How many more pictures the scan reads for a first caption where it met only their
    /// padding: half a minute at 30 frames a second.
    static let captionScanLimit = 900

    /// What a stream's first packets tell the probe beyond libavformat's analysis: that they
    /// are encrypted; an audio stream's format where it was found without one (MPEG-TS: its
    /// packets begin past the analysis), as its first frame decodes; and MPEG-1 audio's
    /// layer (`mpegAudioLayer`).
    struct FirstPackets {
        private var tries: [Int: Int] = [:]
        private var layerRead: Set<Int> = []
        static let formatTries = 16
        /// A sound stream's packets read: their bytes and the time they span (seconds).
        private struct Heard {
            var bytes = 0, packets = 0
            var first: Double, end: Double
            /// Enough to measure a bitrate by: at least two seconds.
            var enough: Bool { packets >= 20 && end - first >= 2 }
        }
        private var read: [Int: Heard] = [:]
        /// The scan read the file to its end: what it heard of a stream is all of it, so a
        /// clip shorter than `Heard.enough` is measured too (AAC in a 1 s Matroska clip was
        /// re-encoded for want of a bitrate).
        var readToEnd = false

        mutating func observe(_ packet: Packet, _ demuxer: Demuxer, _ streams: inout [StreamInfo]) {
            guard let i = streams.firstIndex(where: { $0.index == Int(packet.streamIndex) }) else { return }
            if packet.isEncrypted { streams[i].encrypted = true }
            guard streams[i].type == .audio else { return }
            let st = demuxer.stream(Int(packet.streamIndex))
            let p = packet.pointer.pointee
            if packet.time != noPTS, let t = seconds(packet.time, st.pointee.time_base) {
                let end = t + max(0, seconds(p.duration, st.pointee.time_base) ?? 0)
                var heard = read[i] ?? Heard(first: t, end: end)
                heard.bytes += Int(p.size)
                heard.packets += 1
                heard.first = min(heard.first, t)
                heard.end = max(heard.end, end)
                read[i] = heard
            }
            if streams[i].sampleRate == nil, tries[i, default: 0] < Self.formatTries {
                tries[i, default: 0] += 1
                if let learnt = CodecParameters.audioFormat(of: st, from: packet) {
                    Prober.describeFormat(learnt.pointer.pointee, into: &streams[i])
                }
            }
            if streams[i].codec == "mp3", !layerRead.contains(i) {
                layerRead.insert(i)
                if let codec = Prober.mpegAudioLayer(packet) { streams[i].codec = codec }
            }
        }

        /// A bitrate for each sound stream whose container and headers give none (Matroska
        /// and MPEG-TS carry no bitrate for AAC, Opus or Vorbis, whose frames vary), from
        /// the packets the scan read: at least two seconds of them. Without one the planner
        /// cannot tell whether the sound fits a rung, and re-encodes it.
        func measureBitRates(_ streams: inout [StreamInfo]) {
            for (i, r) in read where streams[i].bitRate == nil && (r.enough || readToEnd && r.packets >= 2 && r.end > r.first) {
                streams[i].bitRate = Int((Double(r.bytes) * 8 / (r.end - r.first)).rounded())
            }
        }

        /// Whether every sound stream without a bitrate has had enough packets read to
        /// measure one (a file of sound only is read on for them, within the scan's cap).
        func measured(_ streams: [StreamInfo]) -> Bool {
            streams.indices.allSatisfy { i in streams[i].type != .audio || streams[i].bitRate != nil || read[i]?.enough == true }
        }

        /// Whether every sound stream has told what it can.
        func settled(_ streams: [StreamInfo]) -> Bool {
            streams.indices.allSatisfy { i in
                streams[i].type != .audio
                    || ((streams[i].sampleRate != nil || tries[i, default: 0] >= Self.formatTries)
                        && (streams[i].codec != "mp3" || layerRead.contains(i)))
            }
        }
    }
    /// libavformat's demuxers for bare video elementary streams.
    static let elementaryStreamFormats: Set<String> = ["h264", "hevc", "mpegvideo", "m4v", "vc1", "cavsvideo", "avs2"]
    /// How much of a file's end `measuredEnd` reads.
    static let tailBytes: Int64 = 4 << 20

    /// Where a file without a declared duration ends: the latest audio or video packet end
    /// in its last `tailBytes`, read after a byte seek (demuxers find their next packet from
    /// any byte). nil when the container cannot seek by byte or shows no times there. The
    /// demuxer is back at the start afterwards, whatever the tail held: left at the end when
    /// the tail said nothing (a Matroska file without a Duration), the pipeline found no
    /// packets and the file was refused as damaged.
    static func measuredEnd(_ demuxer: Demuxer, size: Int64) -> Double? {
        guard size > 0, demuxer.readsFromAnyByte, let packet = try? Packet() else { return nil }
        defer { try? demuxer.rewind() }
        var end: Double? = nil
        let read = demuxer.read(fromByte: max(0, size - tailBytes), limit: 100_000, into: packet) { packet in
            let p = packet.pointer.pointee
            guard p.stream_index >= 0, Int(p.stream_index) < demuxer.streamCount else { return true }
            let st = demuxer.stream(Int(p.stream_index))
            let type = st.pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO else { return true }
            let ts = packet.time
            guard ts != noPTS, let t = seconds(ts + max(0, p.duration), st.pointee.time_base) else { return true }
            end = max(end ?? t, t)
            return true
        }
        return read ? end : nil
    }
    /// Codecs whose streams are interlaced in real files (HEVC's field SEI is too rare to
    /// pay a UHD decoder for on every probe).
    static let interlaceCapableCodecs: Set<String> = ["h264", "mpeg2video", "mpeg1video", "vc1", "mpeg4", "dvvideo"]

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
    let demuxer: Demuxer
    public let info: MediaInfo
    public var path: String { demuxer.path }
    /// The index forecast's reader, when the probe opened one and nothing has taken it yet.
    var secondReader: SecondReader?
    /// Begun before the source was first opened: whether it changed since.
    let watch: SourceWatch?

    init(demuxer: Demuxer, info: MediaInfo, watch: SourceWatch?, secondReader: SecondReader? = nil) {
        self.demuxer = demuxer
        self.info = info
        self.watch = watch
        self.secondReader = secondReader
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
