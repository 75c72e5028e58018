#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// An MP4 being written: owns the output `AVFormatContext` and its file. Lanes add their
/// streams, the pipeline writes the header, every packet goes through `write`, which is
/// the one place timestamps are made legal for the muxer.
final class Muxer {
    let context: UnsafeMutablePointer<AVFormatContext>
    /// The file being written; nil for the index forecast's muxer, which writes to a
    /// recorder instead.
    let path: String?
    private let recorder: IndexRecorder?
    /// Where the muxer's first byte is: the bytes before it are left for the index.
    let room: Int64
    /// Held for as long as the context lives: C's interrupt callback reads its flag.
    private let cancellation: Cancellation
    private var headerWritten = false
    private var finished = false
    /// Per output stream: last DTS written, to keep DTS strictly increasing.
    private var lastDTS: [Int64] = []
    /// Each stream's last packet duration: where the next packet goes when it comes with
    /// no time at all (an elementary stream, which only knows its frame rate).
    private var lastDuration: [Int64] = []
    /// Where the pictures and sound written so far end (AV_TIME_BASE units).
    private var mediaEnd = Int64.min
    /// Per output stream, the ending of a reordered video stream (`Ending`).
    private var endings: [Ending?] = []
    /// The chapters, held back from the header until the end is known (`finish`).
    private var heldChapters: (list: UnsafeMutablePointer<UnsafeMutablePointer<AVChapter>?>?, count: UInt32)?
    /// Bytes of packets written, for progress and the result.
    private(set) var payloadBytes: Int64 = 0
    /// Packets whose timestamps had to be repaired (missing or non-monotonic DTS).
    private(set) var repairedTimestamps = 0
    /// Write-behind: the file's pages are sent to disk every `writebackBytes` as they are
    /// written, so the final fsync (and moving the index, which flushes first) finds
    /// little left, and a big remux does not pile up gigabytes of dirty pages.
    private let writeback: FileDescriptor?
    private var unsentBytes: Int64 = 0
    static let writebackBytes: Int64 = 16 << 20

    /// - Parameter room: bytes left free at the start of the file for the index
    ///   (`IndexRoom`); the muxer's first byte goes after them.
    init(path: String, room: Int64 = 0, cancellation: Cancellation) throws(KilnError) {
        self.cancellation = cancellation
        self.path = path
        self.room = room
        recorder = nil
        let ctx = try Muxer.context(path: path, cancellation: cancellation)
        context = ctx
        var cb = ctx.pointee.interrupt_callback
        var ret = avio_open2(&ctx.pointee.pb, LibAVPath.file(path), AVIO_FLAG_WRITE, &cb, nil)
        // The MP4 muxer records absolute positions (chunk offsets, the media data box it
        // patches last), so starting it further in makes an index that is already right
        // for where it will be copied to. The room is a hole until then.
        if ret >= 0, room > 0 { ret = Int32(clamping: min(0, avio_seek(ctx.pointee.pb, room, SEEK_SET))) }
        if ret < 0 {
            avio_closep(&ctx.pointee.pb)
            avformat_free_context(ctx)
            throw classify(ret, .write, "cannot create the output file", as: .ioError)
        }
        writeback = try? FileDescriptor(path: path, flags: O_RDONLY)  // any descriptor of the file will do
    }

    /// A muxer whose output goes to `recorder` (the index forecast): the same MP4 muxer
    /// with the same options and room, so the same packets make the same bytes.
    init(recorder: IndexRecorder, room: Int64, cancellation: Cancellation) throws(KilnError) {
        self.cancellation = cancellation
        self.recorder = recorder
        self.room = room
        path = nil
        writeback = nil
        context = try Muxer.context(path: nil, cancellation: cancellation)
        context.pointee.pb = recorder.io
        context.pointee.flags |= AVFMT_FLAG_CUSTOM_IO
        if room > 0 { avio_seek(recorder.io, room, SEEK_SET) }
    }

    /// An MP4 muxer's context, whose interrupt callback reads `cancellation`.
    private static func context(path: String?, cancellation: Cancellation) throws(KilnError) -> UnsafeMutablePointer<AVFormatContext> {
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        try check(avformat_alloc_output_context2(&ctx, nil, "mp4", path), .mux, "cannot create the MP4 muxer")
        guard let ctx else { throw KilnError(.resourceLimit, stage: .mux, "cannot create the MP4 muxer") }
        cancellation.install(on: ctx)
        return ctx
    }

    deinit {
        restoreChapters()
        if !finished, headerWritten { av_write_trailer(context) }
        if recorder == nil { avio_closep(&context.pointee.pb) } else { context.pointee.pb = nil }  // the recorder owns it
        avformat_free_context(context)
    }

    func addStream() throws(KilnError) -> UnsafeMutablePointer<AVStream> {
        guard let st = avformat_new_stream(context, nil) else {
            throw KilnError(.resourceLimit, stage: .mux, "cannot add an output stream")
        }
        lastDTS.append(noPTS)
        lastDuration.append(0)
        endings.append(nil)
        return st
    }

    func stream(_ index: Int32) -> UnsafeMutablePointer<AVStream> { context.pointee.streams[Int(index)]! }

    /// Writes the header; the index goes in front when the file is finished (`FastStart`,
    /// not libavformat's `+faststart`, which rewrites every byte). The muxer's strictness
    /// is lowered because libavformat 59 writes Dolby Vision dvcC only
    /// below "official" and still calls FLAC in MP4 experimental, though the players we
    /// serve read both; it changes no other output.
    func writeHeader() throws(KilnError) {
        let options = Options([("movflags", "+disable_chpl"), ("strict", "experimental"), ("write_tmcd", "0")])
        // No timecode track from a source's start timecode (MXF, MOV): a track no player of a
        // download reads, counting from a start the output no longer has.
        // Chapters are kept as a QuickTime chapter track, which Apple and most Android players
        // read; Nero chpl boxes are left out because some players then show them twice.
        // The interleaver holds packets until every stream has one queued, or until they span
        // this much: a subtitle track is silent between cues (and its cues come late, once
        // the next one has started: `CueSchedule`), so at the default 10 s a 30 Mb/s remux
        // held 40 MB of pictures. A second keeps the file's interleaving and its memory.
        context.pointee.max_interleave_delta = Int64(kiln_time_base())
        // The chapter track is made at the header if there are chapters then, else at the
        // trailer: held back, the chapters can first be cut to where the pictures and sound
        // end (a chapter they do not reach would be a menu entry that leads nowhere).
        if context.pointee.nb_chapters > 0 {
            heldChapters = (context.pointee.chapters, context.pointee.nb_chapters)
            context.pointee.chapters = nil
            context.pointee.nb_chapters = 0
        }
        // One default track of a kind, the first: the MP4 muxer enables every default track
        // and, where a kind has two, gives each track an alternate group of its own, so a
        // player shows both at once and lists them apart (a Blu-ray remux's English and
        // English forced subtitles, both marked default).
        var defaults = Set<Int32>()
        for i in 0..<Int(context.pointee.nb_streams) {
            let st = context.pointee.streams[i]!
            if st.pointee.disposition & AV_DISPOSITION_DEFAULT != 0, !defaults.insert(st.pointee.codecpar.pointee.codec_type.rawValue).inserted {
                st.pointee.disposition &= ~AV_DISPOSITION_DEFAULT
            }
        }
        let ret = avformat_write_header(context, &options.dict)
        // EINVAL here is libavformat refusing what the streams say (a codec or framing MP4
        // has no sample entry for): the same file fails the same way again, so it is not a
        // write to retry.
        if ret == -EINVAL {
            throw KilnError(.sourceUnsupported, stage: .mux, underlying: ret,
                            "the MP4 muxer refuses the streams as they are (\(avErrorText(ret))): they cannot be written to MP4")
        }
        try check(ret, .mux, "cannot write the MP4 header", as: .ioError)
        headerWritten = true
        // Each text track is set aside until its first cue (`unwrittenText`).
        for i in 0..<Int(context.pointee.nb_streams) {
            let par = context.pointee.streams[i]!.pointee.codecpar!
            if par.pointee.codec_id == AV_CODEC_ID_MOV_TEXT {
                par.pointee.codec_id = AV_CODEC_ID_NONE
                unwrittenText.insert(Int32(i))
            }
        }
    }

    /// The text tracks that have had no sample: none goes in the file. The MP4 muxer gives a
    /// `mov_text` track a blank sample from the start to its first cue, as soon as any
    /// packet comes after the start, and one at its end in the trailer, while it leaves out
    /// a track with no sample at all. A text track whose source gave no text (a SubRip
    /// track of no cues, an ASS track of drawings only) had so been a track of one blank
    /// sample: listed in a player's menu, and shown by default where the source marked it
    /// so. The muxer tells a text track from its codec, so each is marked as none until its
    /// first cue comes, when it is `mov_text` again and the blank goes in before the cue,
    /// as it would have.
    private(set) var unwrittenText: Set<Int32> = []

    /// Writes one packet whose timestamps are in `timeBase` and whose stream index is an
    /// output index. Missing DTS become the PTS (or the last DTS + 1) and DTS never goes
    /// backwards, as the ffmpeg command does before its muxer.
    func write(_ packet: Packet, from timeBase: AVRational) throws(KilnError) {
        let index = Int(packet.streamIndex)
        let st = stream(packet.streamIndex)
        av_packet_rescale_ts(packet.pointer, timeBase, st.pointee.time_base)
        let p = packet.pointer
        if p.pointee.dts == noPTS {
            if lastDTS[index] == noPTS || p.pointee.pts == noPTS || p.pointee.pts > lastDTS[index] {
                p.pointee.dts = p.pointee.pts
            }
            repairedTimestamps += 1
        }
        if p.pointee.dts == noPTS {
            // No time at all: one packet duration after the last, or the start.
            p.pointee.dts = lastDTS[index] != noPTS ? lastDTS[index] + max(1, lastDuration[index]) : 0
        }
        if lastDTS[index] != noPTS, p.pointee.dts != noPTS, p.pointee.dts <= lastDTS[index] {
            p.pointee.dts = lastDTS[index] + 1
            repairedTimestamps += 1
        }
        if p.pointee.pts != noPTS, p.pointee.dts != noPTS, p.pointee.pts < p.pointee.dts {
            p.pointee.pts = p.pointee.dts
        }
        if p.pointee.pts == noPTS { p.pointee.pts = p.pointee.dts }
        lastDTS[index] = p.pointee.dts
        lastDuration[index] = max(0, p.pointee.duration)
        let type = st.pointee.codecpar.pointee.codec_type
        if type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO {
            mediaEnd = max(mediaEnd, rescale(p.pointee.pts + max(0, p.pointee.duration), from: st.pointee.time_base, to: kiln_time_base_q()))
        }
        if type == AVMEDIA_TYPE_VIDEO {
            if endings[index] == nil { endings[index] = Ending(firstDelay: p.pointee.pts - p.pointee.dts) }
            let ending = endings[index]!
            ending.presentedEnd = max(ending.presentedEnd, p.pointee.pts + max(0, p.pointee.duration))
            if p.pointee.pts > p.pointee.dts, ending.packet == nil { ending.packet = try Packet() }
            if let held = ending.packet {
                if ending.holding {
                    ending.previousDTS = held.pointer.pointee.dts
                    try send(held.pointer)
                }
                held.take(packet)
                ending.holding = true
                return
            }
        }
        try send(p)
    }

    /// A reordered video stream's last packet, held back until the next comes or the file
    /// ends. The MP4 muxer makes a track's length (`mdhd`, and the length players and
    /// ffprobe give the stream) its decode times' span: the last packet's decode time plus
    /// its duration. Reordered, the picture shown last need not be decoded last, nor only
    /// the usual delay before it is shown: a variable-rate stream whose last picture comes
    /// seconds after the one before (a screen recording's still ending) decodes it among
    /// the pictures shown before the gap, and its track was seconds short of the film
    /// (3.04 s of a 6 s clip; verification refused it). So the last packet is written at
    /// the end, its decode time moved to its presentation time less the stream's first
    /// delay where it was shown later than that (nothing is decoded after it), and lasting
    /// to where the stream's pictures end.
    private final class Ending {
        /// The first packet's presentation less decode time: the delay the muxer's edit
        /// list takes off the whole track.
        let firstDelay: Int64
        var presentedEnd = Int64.min
        /// Made once the stream shows a reordered picture: before that, each picture is
        /// shown as it is decoded, and its packet goes straight through.
        var packet: Packet?
        var holding = false
        /// The decode time of the packet written before the held one.
        var previousDTS = noPTS
        init(firstDelay: Int64) { self.firstDelay = firstDelay }

        /// The held packet, made to end the track where its pictures end.
        func close() {
            guard let p = packet?.pointer else { return }
            if p.pointee.pts - p.pointee.dts > firstDelay {
                p.pointee.dts = p.pointee.pts - firstDelay
                if previousDTS != noPTS { p.pointee.dts = max(p.pointee.dts, previousDTS + 1) }
            }
            p.pointee.duration = max(p.pointee.duration, presentedEnd - firstDelay - p.pointee.dts)
        }
    }

    private func send(_ p: UnsafeMutablePointer<AVPacket>) throws(KilnError) {
        if !unwrittenText.isEmpty, unwrittenText.remove(p.pointee.stream_index) != nil {
            stream(p.pointee.stream_index).pointee.codecpar.pointee.codec_id = AV_CODEC_ID_MOV_TEXT
        }
        payloadBytes += Int64(p.pointee.size)
        unsentBytes += Int64(p.pointee.size)
        if unsentBytes >= Muxer.writebackBytes, let writeback {
            unsentBytes = 0
            _ = kiln_start_writeback(writeback.rawValue)
        }
        try Muxer.refuse(av_interleaved_write_frame(context, p), "cannot write to the output")
    }

    /// Gives the held chapters back to the context (which frees them with itself).
    private func restoreChapters() {
        guard let held = heldChapters else { return }
        context.pointee.chapters = held.list
        context.pointee.nb_chapters = held.count
        heldChapters = nil
    }

    /// Throws for a muxer call that failed. The MP4 muxer parses some packets (E-AC-3
    /// frame headers, Annex B video) and, in its trailer, the parameter sets it puts in the
    /// sample entry (avcC, hvcC); it refuses damaged ones with AVERROR_INVALIDDATA: the
    /// source's data, the same on every run, not a failed write to retry. So is a packet
    /// timed further from the one before than an MP4 sample can last (AVERROR_PATCHWELCOME,
    /// "out of range": a Matroska TimestampScale damaged stretched a 4 s film's times by
    /// hundreds), which had been a retryable `io_error` the farm would have run again and
    /// again.
    private static func refuse(_ ret: Int32, _ what: String) throws(KilnError) {
        if ret == kiln_averror_invaliddata() || ret == kiln_averror_patchwelcome() {
            throw KilnError(.sourceCorrupt, stage: .mux, underlying: ret,
                            "\(what): the source's data cannot be stored in MP4 (damaged packets, parameter sets or times)")
        }
        if ret < 0 { throw classify(ret, .mux, what, as: .ioError) }
    }

    /// Writes the trailer (the index, at the end) and closes the file. The index still has
    /// to go in front (`FastStart.apply`), once this muxer (and its sample tables, a few
    /// MB for a film) is gone.
    func finish() throws(KilnError) {
        finished = true
        for case let ending? in endings where ending.holding {
            ending.close()
            ending.holding = false
            if let held = ending.packet { try send(held.pointer) }
        }
        if let recorder {
            // Everything still queued for interleaving is media data; what the trailer
            // writes after it is the index, which the recorder keeps.
            try Muxer.refuse(av_interleaved_write_frame(context, nil), "cannot write to the output")
            recorder.keepFromEnd()
        }
        restoreChapters()
        if mediaEnd > Int64.min { kiln_trim_chapters(context, mediaEnd) }
        try Muxer.refuse(av_write_trailer(context), "cannot finish the MP4")
        if let pb = context.pointee.pb {
            avio_flush(pb)
            if pb.pointee.error < 0 { throw classify(pb.pointee.error, .write, "cannot write the output", as: .ioError) }
        }
        if path != nil { avio_closep(&context.pointee.pb) }
    }
}
