import CFFmpeg
import KilnCore

/// Paints a forced bitmap subtitle track into re-encoded pictures (`SubtitleAction.burn`).
///
/// The track's packets come through the pipeline like every kept stream's (`BurnLane`),
/// so they are on the output's timeline, moved as the pictures are (start, splices), and
/// the file is read once. They come ahead of the pictures they cover: the container
/// interleaves them by time, and a picture reaches the encoder only after the decoder's
/// and the filters' delay. Each display set is decoded when it comes and drawn at the
/// output size (`kiln_overlay_new`) only when a picture shows it, then blended into each
/// picture it covers just before the encoder. A display set lasts until the next one (PGS
/// has no end time) or its own end (DVD, DVB). With `forcedOnly` (a full track burnt for
/// its forced lines) only the rectangles the decoder flags forced are shown, and a set with
/// none clears the screen as an empty one does.
final class SubtitleBurner {
    /// Display sets held that no picture has reached yet, at most: a legitimate track has
    /// one or two within the pipeline's delay; a damaged one piling up hundreds of
    /// full-screen sets in a moment (each a decoded bitmap) loses its oldest instead.
    static let pendingLimit = 16

    let inputIndex: Int32
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private let timeBase: AVRational
    private let width: Int32, height: Int32
    private let bt601: Bool
    private let forcedOnly: Bool
    /// The source picture's stored size and pixel aspect, for a canvas that does not say
    /// its own (`canvas`) and for the shape of its pixels (`canvasPixelAspect`).
    private let picture: Size
    private let pictureSAR: Double
    /// Display sets not yet over, by start time (µs, output time).
    private var sets: [DisplaySet] = []
    private(set) var stats = LaneStats()
    private(set) var droppedSets = 0

    /// - Parameters:
    ///   - source: the subtitle stream; `picture` the video stream whose pictures it is painted on.
    ///   - width, height: the encoded pictures' size (square pixels). `bt601`: their matrix is BT.601's.
    ///   - forcedOnly: paint only the display sets' rectangles flagged forced.
    init(source: UnsafeMutablePointer<AVStream>, picture: UnsafeMutablePointer<AVStream>,
         width: Int32, height: Int32, bt601: Bool, forcedOnly: Bool = false) throws(KilnError) {
        inputIndex = source.pointee.index
        timeBase = source.pointee.time_base
        let par = source.pointee.codecpar!
        let name = string(avcodec_get_name(par.pointee.codec_id)) ?? "?"
        guard let codec = avcodec_find_decoder(par.pointee.codec_id), let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.sourceUnsupported, stage: .decode, "no decoder for the \(name) subtitle stream")
        }
        decoder = ctx
        try check(avcodec_parameters_to_context(ctx, par), .decode, "cannot configure the \(name) subtitle decoder")
        ctx.pointee.pkt_timebase = timeBase
        try check(avcodec_open2(ctx, codec, nil), .decode, "cannot open the \(name) subtitle decoder", as: .sourceUnsupported)
        self.width = width
        self.height = height
        self.bt601 = bt601
        self.forcedOnly = forcedOnly
        let p = picture.pointee.codecpar.pointee
        self.picture = (p.width, p.height)
        let sar = p.sample_aspect_ratio
        pictureSAR = sar.num > 0 && sar.den > 0 ? Double(sar.num) / Double(sar.den) : 1
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
    }

    /// One packet of the track, its times already on the output's timeline.
    func add(_ packet: Packet) throws(KilnError) {
        stats.packetsIn += 1
        var sub = AVSubtitle()
        var got: Int32 = 0
        let ret = avcodec_decode_subtitle2(decoder, &sub, &got, packet.pointer)
        if ret < 0 { stats.corruptPackets += 1; return }
        guard got != 0 else { return }
        let set = DisplaySet(sub)
        stats.framesDecoded += 1
        let shown = shownRects(sub).count
        // The decoder's time for the set: its own (pts, µs) is the packet's, moved with it.
        let at: Int64
        if packet.time != noPTS { at = rescale(packet.time, from: timeBase, to: kiln_time_base_q()) }
        else if sub.pts != noPTS { at = sub.pts }
        else { return }
        let start = at + Int64(sub.start_display_time) * 1000
        // A new display set ends the ones before it (a PGS "clear" is one without pictures).
        for s in sets where s.start <= start && (s.end ?? .max) > start { s.end = start }
        guard shown > 0 else { return }
        set.start = start
        if sub.end_display_time != UInt32.max, sub.end_display_time > sub.start_display_time {
            set.end = at + Int64(sub.end_display_time) * 1000
        }
        let place = sets.lastIndex(where: { $0.start <= start }).map { $0 + 1 } ?? 0
        sets.insert(set, at: place)
        if sets.count > Self.pendingLimit {
            let oldest = sets.firstIndex { $0.end != nil } ?? 0
            sets.remove(at: oldest)
            droppedSets += 1
        }
    }

    /// Blends the display set on screen at `time` (µs, output time) into `frame`, an 8-bit
    /// 4:2:0 picture of the output size.
    func paint(_ frame: Frame, at time: Int64) throws(KilnError) {
        sets.removeAll { $0.end.map { $0 <= time } ?? false }
        guard let on = sets.last(where: { $0.start <= time }) else { return }
        let f = frame.pointer
        guard f.pointee.width == width, f.pointee.height == height else { return }
        if !on.drawn {
            on.drawn = true
            on.overlay = try draw(on.subtitle)
            on.release()
        }
        guard let overlay = on.overlay else { return }
        try check(av_frame_make_writable(f), .encode, "cannot paint the forced subtitles", as: .resourceLimit)
        try check(kiln_overlay_blend(overlay.pointer, f), .encode, "cannot paint the forced subtitles")
        stats.framesEncoded += 1
    }

    /// The rectangles of a display set to paint: all, or with `forcedOnly` those flagged forced.
    private func shownRects(_ sub: AVSubtitle) -> [UnsafeMutablePointer<AVSubtitleRect>?] {
        guard let rects = sub.rects else { return [] }
        return (0..<Int(sub.num_rects)).map { rects[$0] }.filter {
            guard let r = $0 else { return false }
            return !forcedOnly || r.pointee.flags & Int32(AV_SUBTITLE_FLAG_FORCED) != 0
        }
    }

    private func draw(_ sub: AVSubtitle) throws(KilnError) -> Overlay? {
        let rects = shownRects(sub)
        guard !rects.isEmpty else { return nil }
        var reach = (width: Int32(0), height: Int32(0))
        for r in rects.compactMap({ $0?.pointee }) {
            reach = (max(reach.width, r.x + r.w), max(reach.height, r.y + r.h))
        }
        let canvas = Self.canvas(declared: (decoder.pointee.width, decoder.pointee.height), codec: decoder.pointee.codec_id,
                                 picture: picture, reach: reach)
        let aspect = Self.canvasPixelAspect(canvas: canvas, picture: picture, pictureSAR: pictureSAR)
        var error: Int32 = 0
        let count = Int32(rects.count)
        let made = rects.withUnsafeBufferPointer {
            kiln_overlay_new($0.baseAddress, count, canvas.width, canvas.height, aspect, width, height, bt601 ? 1 : 0, &error)
        }
        try check(error, .decode, "cannot draw the forced subtitles", as: .resourceLimit)
        return made.map(Overlay.init)
    }

    /// One decoded display set: its pictures until drawn, then the overlay.
    private final class DisplaySet {
        var subtitle: AVSubtitle
        var start: Int64 = 0
        var end: Int64?
        var drawn = false
        var overlay: Overlay?
        private var held = true
        init(_ subtitle: AVSubtitle) { self.subtitle = subtitle }
        /// Frees the decoded pictures once the overlay holds what they showed.
        func release() {
            if held { avsubtitle_free(&subtitle); held = false }
        }
        deinit { release() }
    }
}

extension SubtitleBurner {
    typealias Size = (width: Int32, height: Int32)

    /// The canvas a display set's positions are on: the stream's own (PGS always says; DVD
    /// in its extradata), else the standard's (DVB without a display definition: 720x576;
    /// a DVD's: 720 by its system's lines), else the source picture's (XSUB). A guessed
    /// canvas that positions run past is widened (the picture's size if that holds them);
    /// a declared one is trusted, and what lies past it left out.
    static func canvas(declared: Size, codec: AVCodecID, picture: Size, reach: Size) -> Size {
        if declared.width > 0, declared.height > 0 { return declared }
        var c: Size
        if codec == AV_CODEC_ID_DVB_SUBTITLE { c = (720, 576) }
        else if codec == AV_CODEC_ID_DVD_SUBTITLE { c = (720, picture.height == 480 ? 480 : 576) }
        else { c = picture }
        if reach.width > c.width || reach.height > c.height {
            c = picture.width >= reach.width && picture.height >= reach.height
                ? picture : (max(c.width, reach.width), max(c.height, reach.height))
        }
        return c
    }

    /// The shape of the canvas's pixels, width over height, or 0 where the canvas stands
    /// for the whole picture whatever its shape. A canvas on the picture's own grid (a DVD's
    /// 720x480 over its 720x480 anamorphic picture, or a crop of it) has the picture's
    /// pixels; a standard-definition canvas over a larger picture (DVB subtitles on an HD
    /// channel, a DVD's over an upscale) is the whole screen; a high-definition one (a
    /// disc's 1920x1080) has square pixels, fitted at one scale.
    static func canvasPixelAspect(canvas: Size, picture: Size, pictureSAR: Double) -> Double {
        if canvas.width == picture.width { return pictureSAR }
        if canvas.width <= 720 && picture.width > canvas.width { return 0 }
        return 1
    }
}

/// The burnt-in track's place in the pipeline: it takes the track's packets (on the
/// output's timeline) for the `SubtitleBurner` the video lane paints with, and writes no
/// stream of its own.
final class BurnLane: Lane {
    let burner: SubtitleBurner
    var inputIndex: Int32 { burner.inputIndex }
    let outputIndex: Int32 = -1
    init(_ burner: SubtitleBurner) { self.burner = burner }
    func prepare(muxer: Muxer) throws(KilnError) {}
    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) { try burner.add(packet) }
    func finish(muxer: Muxer) throws(KilnError) {}
    var stats: LaneStats { burner.stats }
    /// The ffmpeg command paints bitmap subtitles with `-filter_complex overlay`, which its
    /// equivalent leaves out.
    var ffmpegEquivalent: [String] { [] }
    var readsOnlyPacketHeads: Bool { false }
}

/// An owned `KilnOverlay` (one display set, drawn at the output size).
final class Overlay {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { var p: OpaquePointer? = pointer; kiln_overlay_free(&p) }
}
