import CFFmpeg
import KilnCore

/// Converts a text subtitle stream (SubRip, ASS/SSA, WebVTT, …) to MP4's `mov_text`,
/// keeping language, title and the forced flag. Cues on screen together share a sample
/// (`CueSchedule`); ASS drawings are left out (`AssEvent.readable`); cues that are not
/// UTF-8 are read in their language's code page (`SubtitleCharset`). Bitmap subtitles
/// never get here: the plan drops them, because MP4 players cannot show them.
///
/// The same lane turns closed captions inside the pictures into a text track
/// (`ClosedCaptions`): it then reads the video stream's packets beside the video's own lane
/// (`Pipeline` hands it each one first) and decodes their captions: CEA-608's with
/// libavcodec's caption decoder, CEA-708's (which libavcodec cannot read) with `DTVCCService`.
final class SubtitleLane: Lane {
    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let input: UnsafeMutablePointer<AVStream>
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private var encoder: UnsafeMutablePointer<AVCodecContext>?
    /// The ASS header's styles' font sizes (`AssEvent.styleSizes`), for pieces of one line.
    private var styleSizes: [Substring: Double] = [:]
    private(set) var stats = LaneStats()
    private let plan: SubtitlePlan
    /// When cues are on screen together (`CueSchedule`).
    private var schedule = CueSchedule()
    /// How far the output's pictures and sound have come (seconds), kept by the pipeline; at
    /// `finish`, where they end: no cue goes on past them.
    var picturesAndSoundReach: Double?
    /// The code page cues that are not UTF-8 are read in, once one has come.
    private(set) var charset: SubtitleCharset?
    /// Cues that were not UTF-8 and were read in `charset`.
    private(set) var recodedCues = 0
    /// Cues past ASCII that are UTF-8 (or UTF-8 with stray bytes), and those that are not.
    private var utf8Cues = 0, codePageCues = 0
    private static let timeBase = AVRational(num: 1, den: 1000)
    /// The output track's language: the plan's, or a teletext subtitle page's own.
    private var language: String?
    /// Where the lane reads closed captions from the video stream's packets; nil for a
    /// subtitle stream.
    private var captions: CaptionReader?
    /// A subtitle stream's cues are short; the captions are read from the pictures' whole
    /// packets, and a TTML sample is a whole document.
    var readsOnlyPacketHeads: Bool { captions == nil && !ttml }
    /// A TTML track (MP4's `stpp`, data to libavformat 5.1, no decoder in libavcodec): its
    /// samples are read by `TTMLCues`; the decoder is SubRip's, only for the ASS header the
    /// `mov_text` encoder takes its default style from.
    private let ttml: Bool
    /// How far the pipeline moved this packet's times (stream ticks): a TTML document's
    /// times are on the source track's clock, not the output's.
    var timesMoved: Int64 = 0
    /// The most cues on screen at once (`CueSchedule.mostOnScreen`) for text that is lines
    /// of dialogue (SubRip, WebVTT, TTML, MP4's and teletext's text): IMSC allows four
    /// regions, four paragraphs each is plenty, and no one reads more. A pile of cues that
    /// never end (a SubRip file whose every cue lasts two hours) had each new cue stacked
    /// on all before it: every sample held all of them, and the schedule every one.
    static let linesOnScreen = 16
    /// The same for ASS, whose typesetting stacks many events on purpose (a sign built of
    /// layers, a karaoke line's syllables): enough for any of that (a test's 1,500 signs at
    /// once fill a sample's 64 kB with 300 and more), bounded all the same.
    static let typesetOnScreen = 2048

    /// Cues left out: come while `mostOnScreen` were on screen, or while the most the
    /// schedule holds were waiting past the pictures (`CueSchedule.mostHeldAhead`).
    var leftOutCues: Int { schedule.crowdedCues + schedule.aheadCues }
    var mostOnScreen: Int { schedule.mostOnScreen ?? 0 }

    /// The most cues of a source codec on screen at once.
    static func mostOnScreen(_ codec: AVCodecID) -> Int {
        codec == AV_CODEC_ID_ASS || codec == AV_CODEC_ID_SSA ? typesetOnScreen : linesOnScreen
    }
    /// The track's first sample's time on its own clock (ms), where an edit list or an
    /// offset put the media clock's zero (`TTMLCues.placed`).
    private var ttmlTrackStart: Int64?
    /// The TTML cues given so far: the next document's stack below them.
    private var ttmlRanked = 0
    /// Whether the decoder is the CEA-608 caption decoder: for the pictures' captions, or a
    /// caption track of its own (QuickTime's c608, whose packets libavformat gives as A/53
    /// triplets).
    private let captionDecoder: Bool
    /// The codec the decoder reads (`Demuxer.codecID`, the TTML reader's SubRip).
    private let textCodec: AVCodecID

    init(demuxer: Demuxer, plan: SubtitlePlan) throws(KilnError) {
        let index = plan.sourceIndex
        self.plan = plan
        inputIndex = Int32(index)
        input = demuxer.stream(index)
        let par = input.pointee.codecpar!
        if plan.closedCaptions == true { captions = CaptionReader(stream: input) }
        ttml = captions == nil && Self.isTTML(par.pointee)
        let codecID = captions != nil ? AV_CODEC_ID_EIA_608 : ttml ? AV_CODEC_ID_SUBRIP : Demuxer.codecID(input)
        textCodec = codecID
        captionDecoder = codecID == AV_CODEC_ID_EIA_608
        schedule.oneScreen = captionDecoder
        schedule.mostOnScreen = Self.mostOnScreen(codecID)
        schedule.stackedByRank = ttml
        guard let codec = avcodec_find_decoder(codecID), let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.sourceUnsupported, stage: .decode, "no decoder for the \(string(avcodec_get_name(codecID)) ?? "?") subtitle stream")
        }
        decoder = ctx
        // The caption decoder takes nothing from the video stream's parameters.
        if captions == nil && !ttml { try check(avcodec_parameters_to_context(ctx, par), .decode, "cannot configure the subtitle decoder") }
        ctx.pointee.pkt_timebase = input.pointee.time_base
        let options = Options()
        language = plan.language
        // CC1, the programme's captions, ride in field 1, CC3 in field 2. Left to choose, the
        // decoder keeps to the field of the first triplet it meets, which may be field 2's
        // programme data or a CEA-708 packet, and then shows nothing.
        if captionDecoder { options.set("data_field", String(captionField)) }
        if par.pointee.codec_id == AV_CODEC_ID_DVB_TELETEXT {
            // Teletext is pages of text, of which only a subtitle page is wanted, as text
            // (libzvbi's default is pictures of the page): the plan's, or where it names
            // none, the one the stream's map puts first (`TeletextPages`), else any.
            let extradata = par.pointee.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(par.pointee.extradata_size))) } ?? []
            let tag = dictValue(input.pointee.metadata, "language")
            let pages = TeletextPages.subtitlePages(extradata: extradata, languages: tag)
            let page: String?
            if let planned = plan.teletextPage {
                page = planned
            } else {
                let chosen = TeletextPages.subtitles(extradata: extradata, languages: plan.language ?? tag)
                page = chosen?.page
                if let chosen { language = chosen.language ?? language }
            }
            hearingImpaired = pages.first { $0.page == page }?.hearingImpaired ?? false
            let decoding = [("txt_format", "text"), ("txt_page", page ?? "subtitle")]
            for (key, value) in decoding { options.set(key, value) }
            // One input's decoder options: the ffmpeg command reads one page of a stream.
            firstPage = page == nil || page == pages.first?.page
            if firstPage { ffmpegInputOptions = decoding.flatMap { ["-" + $0.0, $0.1] } }
        }
        try check(avcodec_open2(ctx, codec, &options.dict), .decode, "cannot open the subtitle decoder", as: .sourceUnsupported)
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
        if encoder != nil { avcodec_free_context(&encoder) }
    }

    /// libavcodec's default ASS header (one Default style), as its SubRip decoder gives
    /// every track it reads.
    static func defaultStyles() -> [UInt8]? {
        var ctx: UnsafeMutablePointer<AVCodecContext>? = nil
        guard let codec = avcodec_find_decoder(AV_CODEC_ID_SUBRIP) else { return nil }
        ctx = avcodec_alloc_context3(codec)
        defer { avcodec_free_context(&ctx) }
        guard let ctx, avcodec_open2(ctx, codec, nil) >= 0, let header = ctx.pointee.subtitle_header, ctx.pointee.subtitle_header_size > 0 else { return nil }
        return Array(UnsafeBufferPointer(start: header, count: Int(ctx.pointee.subtitle_header_size)))
    }

    /// A mov_text encoder (`encoder`, freed first where there was one) opened on `header`
    /// (none: libavcodec's own); what `avcodec_open2` said.
    private func openEncoder(header: UnsafeBufferPointer<UInt8>?) throws(KilnError) -> Int32 {
        if encoder != nil { avcodec_free_context(&encoder) }
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_MOV_TEXT), let enc = avcodec_alloc_context3(codec) else {
            throw KilnError(.internalError, stage: .encode, "the mov_text encoder is missing")
        }
        encoder = enc
        enc.pointee.time_base = SubtitleLane.timeBase
        if let header, let base = header.baseAddress {
            guard let copy = av_mallocz(header.count + 1)?.assumingMemoryBound(to: UInt8.self) else {
                throw KilnError(.resourceLimit, stage: .encode, "out of memory")
            }
            copy.update(from: base, count: header.count)
            enc.pointee.subtitle_header = copy
            enc.pointee.subtitle_header_size = Int32(header.count)
        }
        return avcodec_open2(enc, codec, nil)
    }

    /// The ffmpeg command has no option that makes a track of the captions in the pictures
    /// (only lavfi's `movie` source reads them), nor decodes a teletext stream's second page
    /// beside its first: its equivalent leaves them out.
    /// FFmpeg 5.1 reads no TTML either, nor a track whose codec only Kiln names.
    var ffmpegEquivalent: [String] {
        captions != nil || ttml || !firstPage || input.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_NONE ? []
            : ["-map", "0:\(inputIndex)", "-c:\(outputIndex)", "mov_text"]
    }

    /// MP4's TTML track (`stpp`), which libavformat 5.1 gives as data.
    static func isTTML(_ par: AVCodecParameters) -> Bool {
        par.codec_id == AV_CODEC_ID_TTML || (par.codec_type == AVMEDIA_TYPE_DATA && fourCC(par.codec_tag) == "stpp")
    }

    /// A subtitle stream, TTML given as data included: what the pipeline, the length checks
    /// and the track names treat as text.
    static func isText(_ par: AVCodecParameters) -> Bool { par.codec_type == AVMEDIA_TYPE_SUBTITLE || isTTML(par) }
    /// false for a teletext page other than the first the stream's map lists.
    private var firstPage = true
    /// A teletext page for the deaf and hard of hearing.
    private var hearingImpaired = false
    private(set) var ffmpegInputOptions: [String] = []

    func prepare(muxer: Muxer) throws(KilnError) {
        // mov_text takes its styles from the decoder's ASS header: an ASS track's own (its
        // CodecPrivate), or libavcodec's default for other formats. A damaged or lost one
        // (a size or ID in the track's entry changed) is one the encoder cannot read, and had
        // failed the whole run as an internal error: the track goes on the default styles
        // instead, its lines whole, as libavcodec styles a SubRip track.
        let header = decoder.pointee.subtitle_header.map { UnsafeBufferPointer(start: $0, count: Int(max(0, decoder.pointee.subtitle_header_size))) }
        let own = header?.isEmpty == false ? header : nil
        var opened = try own.map { (h) throws(KilnError) in try openEncoder(header: h) } ?? -1
        if opened >= 0, let own {
            styleSizes = AssEvent.styleSizes(header: String(decoding: own, as: UTF8.self))
        } else if let styles = SubtitleLane.defaultStyles() {
            opened = try styles.withUnsafeBufferPointer { (b) throws(KilnError) in try openEncoder(header: b) }
        }
        try check(opened, .encode, "cannot open the mov_text encoder")
        guard let enc = encoder else { throw KilnError(.internalError, stage: .encode, "the mov_text encoder is missing") }
        // libavcodec 5.1's mov_text encoder starts its first sample's style run from zeros
        // rather than its default style (it sets the default only after a sample): a first
        // line whose style the header does not define (an ASS track with no [V4+ Styles])
        // came out at font size 0 in transparent black, which Apple's players do not show.
        // An empty sample first, thrown away, sets it as every later sample finds it.
        _ = try encode([], lasting: 0, at: 0)
        // The encoder's extradata is the track's sample description, which begins with its
        // display flags; Apple's players take a track as forced subtitles (shown when the
        // sound's language is the viewer's) from "all samples are forced" and "some samples
        // are forced" (0x80000000, 0x40000000), not from the track's disposition.
        if plan.forced, let flags = enc.pointee.extradata, enc.pointee.extradata_size >= 4 { flags[0] |= 0xC0 }
        let out = try muxer.addStream()
        outputIndex = out.pointee.index
        try check(avcodec_parameters_from_context(out.pointee.codecpar, enc), .mux, "cannot set subtitle parameters")
        out.pointee.time_base = SubtitleLane.timeBase
        if captions == nil {
            copyStreamMetadata(from: input, to: out)
        } else {
            // Not the video stream's tags: the track is named for what it is.
            // The programme's captions (CC1, SERVICE1) are the closed captions; others name their service.
            // MP4 keeps no track title; its handler name is what players that name tracks
            // show (`copyStreamMetadata` does the same for other tracks).
            let main = plan.captionService == nil || plan.captionService == "SERVICE1"
            let title = main ? "Closed captions" : "Closed captions (\(plan.captionService!))"
            av_dict_set(&out.pointee.metadata, "title", title, 0)
            av_dict_set(&out.pointee.metadata, "handler_name", title, 0)
            out.pointee.disposition |= AV_DISPOSITION_CAPTIONS
        }
        // The plan has the last word on what a player shows in its subtitle menu.
        if let language { setLanguage(language, of: out) }
        if plan.forced { out.pointee.disposition |= AV_DISPOSITION_FORCED } else { out.pointee.disposition &= ~AV_DISPOSITION_FORCED }
        if hearingImpaired { out.pointee.disposition |= AV_DISPOSITION_HEARING_IMPAIRED }
    }

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        stats.packetsIn += 1
        guard encoder != nil else { return }
        if captions != nil {
            for picture in captions!.add(packet) { try decodeCaptions(picture.item, at: picture.time, muxer: muxer) }
            return
        }
        if captionDecoder, let data = packet.pointer.pointee.data, packet.pointer.pointee.size > 0 {
            // A caption track's packets (QuickTime c608) hold the same triplets.
            let p = packet.pointer.pointee
            try decodeCaptions(Array(UnsafeBufferPointer(start: data, count: Int(p.size))), at: p.pts != noPTS ? p.pts : p.dts,
                               duration: p.duration, muxer: muxer)
            return
        }
        if ttml { return try showTTML(packet, muxer: muxer) }
        _ = try decode(readable(packet), duration: packet.pointer.pointee.duration, muxer: muxer)
    }

    /// A TTML sample's document as cues (`TTMLCues.placed`), on the output's clock.
    private func showTTML(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        let p = packet.pointer.pointee
        guard let data = p.data, p.size > 0, packet.time != noPTS else { return }
        let tb = input.pointee.time_base
        stats.framesDecoded += 1
        let start = rescale(packet.time - timesMoved, from: tb, to: SubtitleLane.timeBase)
        let moved = rescale(timesMoved, from: tb, to: SubtitleLane.timeBase)
        let end: Int64? = p.duration > 0 ? start + rescale(p.duration, from: tb, to: SubtitleLane.timeBase) : nil
        if ttmlTrackStart == nil { ttmlTrackStart = start }
        let cues = TTMLCues.read(Array(UnsafeBufferPointer(start: data, count: Int(p.size))))
        let placed = TTMLCues.placed(cues, sampleStart: start, sampleEnd: end, trackStart: ttmlTrackStart ?? 0)
        // Given in the order they start (as the schedule takes cues), stacked in the document's.
        for (rank, cue) in placed.enumerated().sorted(by: { ($0.element.begin, $0.offset) < ($1.element.begin, $1.offset) }) {
            try addCue(start: max(0, cue.begin + moved), end: cue.end.map { $0 + moved }, events: [event(cue.text)],
                       rank: ttmlRanked + rank, muxer: muxer)
        }
        ttmlRanked += placed.count
    }

    /// An ASS event of the lane's own making (CEA-708 screens, TTML paragraphs, which no
    /// libavcodec decoder gives), in the decoder's form: `ReadOrder,Layer,Style,…,Text`.
    private func event(_ text: String) -> String {
        defer { madeEvents += 1 }
        return "\(madeEvents),0,Default,,0,0,0,," + text
    }
    private var madeEvents = 0

    /// The caption service's triplets (`CaptionChannel`) to the caption decoder, at their
    /// time; marked where a caption would otherwise start before its first character
    /// (`CaptionScreenWatch`).
    private func decodeCaptions(_ triplets: [UInt8], at time: Int64, duration: Int64 = 0, muxer: Muxer) throws(KilnError) {
        if let number = dtvccService {
            let ms = rescale(time, from: input.pointee.time_base, to: SubtitleLane.timeBase)
            for block in dtvccPackets.read(triplets) where block.service == number {
                try show(dtvcc.read(block.data, at: ms), muxer: muxer)
            }
            return
        }
        let kept = channel.kept(triplets)
        guard !kept.isEmpty else { return }
        try decodeCaptionPacket(screen.marked(kept), at: time, duration: duration, muxer: muxer)
    }
    /// The caption service the lane reads: CC1 in field 1, or CC3 in field 2.
    private lazy var channel = CaptionChannel(field: captionField)
    private lazy var screen = CaptionScreenWatch(field: captionField)
    private var captionField: UInt8 { plan.captionService == "CC3" ? 1 : 0 }
    /// The CEA-708 service the lane reads ("SERVICE2": 2), nil for CEA-608's.
    private lazy var dtvccService: Int? = plan.captionService.flatMap { $0.hasPrefix("SERVICE") ? Int($0.dropFirst(7)) : nil }
    private var dtvccPackets = DTVCCPackets()
    private var dtvcc = DTVCCService()

    /// CEA-708 screens (times in milliseconds) as cues: each lasts until the next, a blank
    /// one ends the one before. Their lines come as ASS text, styles as tags.
    private func show(_ screens: [DTVCCService.Screen], muxer: Muxer) throws(KilnError) {
        for screen in screens {
            var events: [String] = []
            if !screen.lines.isEmpty {
                events = [event(screen.marked.joined(separator: "\\N"))]
                stats.framesDecoded += 1
            }
            try addCue(start: max(0, screen.time), end: nil, events: events, muxer: muxer)
        }
    }

    private func decodeCaptionPacket(_ triplets: [UInt8], at time: Int64, duration: Int64, muxer: Muxer) throws(KilnError) {
        let packet = try Packet()
        try check(av_new_packet(packet.pointer, Int32(triplets.count)), .decode, "cannot allocate a caption packet", as: .resourceLimit)
        packet.pointer.pointee.data.update(from: triplets, count: triplets.count)
        packet.pointer.pointee.pts = time
        packet.pointer.pointee.dts = time
        _ = try decode(packet, duration: duration, muxer: muxer)
    }

    /// Decodes one packet (an empty one drains a decoder that holds cues back, as teletext's
    /// does) and schedules what it gives; whether it gave a cue.
    private func decode(_ packet: Packet, duration: Int64, muxer: Muxer) throws(KilnError) -> Bool {
        var sub = AVSubtitle()
        var got: Int32 = 0
        let ret = avcodec_decode_subtitle2(decoder, &sub, &got, packet.pointer)
        if ret < 0 { stats.corruptPackets += 1; return false }
        guard got != 0 else { return false }
        defer { avsubtitle_free(&sub) }
        stats.framesDecoded += 1
        let tb = input.pointee.time_base
        // The decoder's time for the cue: the packet's, or (teletext) that of the packet
        // that completed its page.
        let at: Int64
        if sub.pts != noPTS { at = rescale(sub.pts, from: kiln_time_base_q(), to: SubtitleLane.timeBase) }
        else if packet.time != noPTS { at = rescale(packet.time, from: tb, to: SubtitleLane.timeBase) }
        else { return true }
        // A cue before the output's start shows from it.
        let start = max(0, at + Int64(sub.start_display_time))
        var end: Int64? = nil
        if sub.end_display_time != UInt32.max, sub.end_display_time > sub.start_display_time {
            end = at + Int64(sub.end_display_time)
        } else if duration > 0 {
            end = start + rescale(duration, from: tb, to: SubtitleLane.timeBase)
        }
        var events: [String] = []
        for i in 0..<Int(sub.num_rects) {
            guard let rect = sub.rects[i], rect.pointee.type == SUBTITLE_ASS, let ass = string(rect.pointee.ass),
                  let event = AssEvent.readable(ass, comments: [AV_CODEC_ID_ASS, AV_CODEC_ID_SSA].contains(textCodec),
                                                   entities: [AV_CODEC_ID_SUBRIP, AV_CODEC_ID_SRT].contains(textCodec)) else { continue }
            events.append(event)
        }
        try addCue(start: start, end: end, events: events, muxer: muxer)
        return true
    }

    /// A cue to the schedule (`CueSchedule`), and the samples that are then final written.
    private func addCue(start: Int64, end: Int64?, events: [String], rank: Int? = nil, muxer: Muxer) throws(KilnError) {
        for sample in schedule.add(start: start, end: end, events: events, reach: milliseconds(picturesAndSoundReach), rank: rank) {
            try write(sample, muxer: muxer)
        }
    }

    func finish(muxer: Muxer) throws(KilnError) {
        guard encoder != nil else { return }
        if let waiting = captions?.drain() {
            for picture in waiting { try decodeCaptions(picture.item, at: picture.time, muxer: muxer) }
        }
        if dtvccService != nil {
            try show(dtvcc.finish(), muxer: muxer)
        } else if captionDecoder {
            // The caption decoder gives a screen once the next replaces it; the last one
            // (roll-up captions stay up to the end) is given by erasing it where the
            // pictures and sound end: EDM, in field 1 and field 2.
            if let end = picturesAndSoundReach, end.isFinite {
                let at = rescale(Int64(end * Double(kiln_time_base())), from: kiln_time_base_q(), to: input.pointee.time_base)
                try decodeCaptionPacket(CaptionReader.eraseDisplayed, at: at, duration: 0, muxer: muxer)
            }
        }
        if decoder.pointee.codec.pointee.capabilities & AV_CODEC_CAP_DELAY != 0 {
            let drain = try Packet()
            var cues = 0
            while cues < 64, try decode(drain, duration: 0, muxer: muxer) { cues += 1 }
        }
        for sample in schedule.finish(at: milliseconds(picturesAndSoundReach)) { try write(sample, muxer: muxer) }
        stats.repairedTimestamps += schedule.lateCues
    }

    private func milliseconds(_ seconds: Double?) -> Int64? {
        seconds.flatMap { $0.isFinite ? Int64(($0 * 1000).rounded()) : nil }
    }

    /// The packet as the decoder can read it: cues that are not UTF-8 converted from their
    /// language's code page (`SubtitleCharset`); all others as they are.
    ///
    /// The track decides, not each cue alone: once most of its cues past ASCII are not
    /// UTF-8, it is in a code page, and a cue that happens to be valid UTF-8 is read in it
    /// too (two GB18030 characters, D0 BB D0 BB, are also UTF-8's "лл"). In a UTF-8 track, a
    /// cue with a stray byte of a Windows code page (an SRT edited in a Windows tool) keeps
    /// its UTF-8 and has only that byte read in the code page.
    private func readable(_ packet: Packet) throws(KilnError) -> Packet {
        let p = packet.pointer.pointee
        guard SubtitleLane.plainText.contains(textCodec), p.size > 0, let data = p.data else { return packet }
        let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
        guard bytes.contains(where: { $0 >= 0x80 }) else { return packet }
        let (valid, shape) = SubtitleCharset.utf8Shape(bytes)
        // Opened for the first cue the code page may read: one that is not UTF-8, or any once
        // the track is the page's (the cues below that it reads).
        if charset == nil, !valid || codePageCues > utf8Cues {
            charset = SubtitleCharset(language: plan.language ?? dictValue(input.pointee.metadata, "language"))
        }
        // GB18030's and Big5's pairs are often two-byte UTF-8 (a lead of C2–DF, a trail of
        // A1–BF) and now and then three-byte: a Chinese line can look like UTF-8 with stray
        // bytes. One that reads whole as Chinese, Japanese or Korean is the code page's.
        let mixedShape = shape && charset?.readsAsEastAsian(bytes) != true
        // A cue that is not UTF-8 is read as the track so far is: in a UTF-8 track, as UTF-8
        // with stray bytes (three curly quotes of Windows-1252 beside one "é" had the whole
        // cue read in the code page: "cafÃ©"); in a code page's, whole in the page (a
        // Shift-JIS line whose kana pairs make two-byte UTF-8 by chance had been taken for
        // UTF-8 with stray bytes). Its shape decides only a track's first such cue.
        let utf8Track = utf8Cues > codePageCues, codePageTrack = codePageCues > utf8Cues
        let mixed = !valid && (utf8Track || (!codePageTrack && mixedShape))
        if valid || mixedShape { utf8Cues += 1 } else { codePageCues += 1 }
        guard !valid || codePageCues > utf8Cues, let charset else { return packet }
        let text = mixed ? charset.mixedUTF8(bytes) ?? charset.utf8(bytes) : charset.utf8(bytes)
        let out = try Packet()
        try check(av_new_packet(out.pointer, Int32(text.count)), .decode, "cannot allocate a subtitle packet", as: .resourceLimit)
        out.pointer.pointee.data.update(from: text, count: text.count)
        try check(av_packet_copy_props(out.pointer, packet.pointer), .decode, "cannot copy a subtitle packet's times", as: .resourceLimit)
        recodedCues += 1
        return out
    }

    /// Codecs whose packets are the cue's text and nothing else. Not `mov_text` (a length,
    /// then binary style boxes), nor EIA-608 (byte pairs), whose bytes are no code page's.
    private static let plainText: Set<AVCodecID> = [
        AV_CODEC_ID_SUBRIP, AV_CODEC_ID_SRT, AV_CODEC_ID_ASS, AV_CODEC_ID_SSA, AV_CODEC_ID_WEBVTT, AV_CODEC_ID_TEXT,
        AV_CODEC_ID_MICRODVD, AV_CODEC_ID_SUBVIEWER, AV_CODEC_ID_SUBVIEWER1, AV_CODEC_ID_SAMI, AV_CODEC_ID_REALTEXT,
        AV_CODEC_ID_MPL2, AV_CODEC_ID_PJS, AV_CODEC_ID_VPLAYER, AV_CODEC_ID_JACOSUB, AV_CODEC_ID_STL,
    ]

    /// Encodes one sample of the schedule (its events one under the other) and writes it.
    /// A sample holds at most 64 KB of text: where more cues are on screen at once (a
    /// typesetter's hundreds of signs), the ones that began last are left out of it.
    private func write(_ sample: CueSchedule.Sample, muxer: Muxer) throws(KilnError) {
        // A cue of more text than a sample holds cannot go out whole; the encoder's time
        // grows with the square of its length before it refuses it (2 MB of one cue: 75 s).
        var events = sample.events.filter { $0.utf8.count < Self.sampleTextBytes }
        var encoded: [UInt8]?
        while !events.isEmpty {
            encoded = try encode(events, lasting: sample.end - sample.start, at: sample.start)
            if encoded != nil { break }
            events.removeLast(max(1, events.count / 4))
        }
        guard let encoded else {
            stats.corruptPackets += 1
            return
        }
        guard !encoded.isEmpty else { return }
        let out = try Packet()
        try check(av_new_packet(out.pointer, Int32(encoded.count)), .encode, "cannot allocate a subtitle packet", as: .resourceLimit)
        out.pointer.pointee.data.update(from: encoded, count: encoded.count)
        out.pointer.pointee.pts = sample.start
        out.pointer.pointee.dts = sample.start
        out.pointer.pointee.duration = sample.end - sample.start
        out.streamIndex = outputIndex
        try muxer.write(out, from: SubtitleLane.timeBase)
        stats.packetsOut += 1
    }

    /// What one mov_text sample holds: its text's length is 16 bits.
    static let sampleTextBytes = 64 * 1024

    /// `events` as one mov_text sample: empty when there is no text, nil when the encoder
    /// refuses them (more text than a sample holds).
    private func encode(_ events: [String], lasting: Int64, at start: Int64) throws(KilnError) -> [UInt8]? {
        guard let encoder else { return [] }
        let stacked = AssEvent.stacked(events, sizes: styleSizes)
        var sub = AVSubtitle()
        defer { avsubtitle_free(&sub) }
        guard let rects = av_mallocz(MemoryLayout<UnsafeMutablePointer<AVSubtitleRect>?>.stride * stacked.count) else {
            throw KilnError(.resourceLimit, stage: .encode, "out of memory")
        }
        sub.rects = rects.assumingMemoryBound(to: UnsafeMutablePointer<AVSubtitleRect>?.self)
        for event in stacked {
            guard let rect = av_mallocz(MemoryLayout<AVSubtitleRect>.stride)?.assumingMemoryBound(to: AVSubtitleRect.self) else {
                throw KilnError(.resourceLimit, stage: .encode, "out of memory")
            }
            sub.rects[Int(sub.num_rects)] = rect
            sub.num_rects += 1
            rect.pointee.type = SUBTITLE_ASS
            rect.pointee.ass = av_strdup(event)
        }
        // mov_text's encoder wants the display window relative to the sample.
        sub.pts = rescale(start, from: SubtitleLane.timeBase, to: kiln_time_base_q())
        sub.start_display_time = 0
        sub.end_display_time = UInt32(clamping: lasting)
        var buf = [UInt8](repeating: 0, count: Self.sampleTextBytes)
        let size = avcodec_encode_subtitle(encoder, &buf, Int32(buf.count), &sub)
        return size < 0 ? nil : Array(buf[0..<Int(size)])
    }
}

/// The captions of a video stream's packets (`ClosedCaptions`), one picture's triplets at a
/// time, put into presentation order for the caption decoder.
struct CaptionReader {
    let codec: AVCodecID
    let lengthSize: Int
    /// A frame's duration in the stream's time base: a DVD's GOP brings the captions of
    /// each of its frames at once, each timed a frame after the one before.
    let frameDuration: Int64
    private var order = PresentationOrder<[UInt8]>()

    init(stream: UnsafeMutablePointer<AVStream>) {
        codec = stream.pointee.codecpar.pointee.codec_id
        lengthSize = NALScanner.lengthSize(stream)
        let rate = [stream.pointee.avg_frame_rate, stream.pointee.r_frame_rate].first { $0.num > 0 && $0.den > 0 }
            ?? AVRational(num: 30000, den: 1001)
        frameDuration = max(1, av_rescale_q(1, AVRational(num: rate.den, den: rate.num), stream.pointee.time_base))
    }

    /// Reads `packet`'s captions; the pictures' captions that can go now, in order.
    mutating func add(_ packet: Packet) -> [(time: Int64, item: [UInt8])] {
        let p = packet.pointer.pointee
        let time = p.pts != noPTS ? p.pts : p.dts
        guard time != noPTS, let data = p.data, p.size > 0 else { return [] }
        let frames = ClosedCaptions.frames(in: UnsafeBufferPointer(start: data, count: Int(p.size)), codec: codec, lengthSize: lengthSize)
        var ready: [(time: Int64, item: [UInt8])] = []
        for (k, triplets) in frames.enumerated() { ready += order.add(triplets, at: time + Int64(k) * frameDuration) }
        return ready
    }

    mutating func drain() -> [(time: Int64, item: [UInt8])] { order.drain() }

    /// CEA-608's erase displayed memory (0x14 0x2C with odd parity) for data channel 1 of
    /// field 1 and of field 2, as triplets.
    static let eraseDisplayed: [UInt8] = [0xFC, 0x94, 0x2C, 0xFD, 0x94, 0x2C]
}

