import CFFmpeg
import KilnCore

/// Paints a forced bitmap subtitle track into re-encoded pictures (`SubtitleAction.burn`).
///
/// The track is read by a demuxer of its own, a little ahead of the pictures: the source's
/// interleaving may put a subtitle after pictures it covers (a Matroska block sits where
/// its cluster is; a disc's display set comes just before its time), and the pipeline's
/// pictures come out of the decoder and filters late anyway. Each display set is decoded
/// once into an overlay at the output size (`kiln_overlay_new`), and the one on screen at a
/// picture's time is blended into it just before the encoder. A display set lasts until
/// the next one (PGS has no end time) or its own end (DVD, DVB). Times are the source's
/// clock in microseconds: the pictures' timestamps before the output's shift to zero.
final class SubtitleBurner {
    /// How far ahead of a picture the track is read (µs).
    static let lookAhead: Int64 = 3_000_000

    private let demuxer: Demuxer
    private let index: Int32
    private let timeBase: AVRational
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private let packet: Packet
    private let width: Int32, height: Int32
    private let bt601: Bool
    /// The canvas when the stream does not say (the source picture's size).
    private let pictureSize: (width: Int32, height: Int32)
    private var readTo = Int64.min
    private var ended = false
    /// Display sets not yet over, by start time.
    private var shown: [Shown] = []
    private(set) var paintedPictures = 0
    private(set) var displaySets = 0
    private(set) var corruptPackets = 0

    private struct Shown {
        var start: Int64
        var end: Int64?
        var overlay: Overlay?
    }

    /// - Parameters:
    ///   - source: the subtitle stream in the pipeline's demuxer; the burner's own demuxer
    ///     finds the same stream by its container id and codec.
    ///   - width, height: the encoded pictures' size. `bt601`: their matrix is BT.601's.
    init(path: String, cancellation: Cancellation, source: UnsafeMutablePointer<AVStream>,
         picture: UnsafeMutablePointer<AVStream>, width: Int32, height: Int32, bt601: Bool) throws(KilnError) {
        demuxer = try Demuxer(path: path, cancellation: cancellation)
        let wanted = source.pointee
        var found: Int32?
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            if found == nil, st.pointee.id == wanted.id, st.pointee.codecpar.pointee.codec_id == wanted.codecpar.pointee.codec_id,
               i == Int(wanted.index) || st.pointee.id != 0 {
                found = Int32(i)
            } else {
                st.pointee.discard = AVDISCARD_ALL
            }
        }
        guard let found else {
            throw KilnError(.sourceUnsupported, stage: .open, "the forced subtitle stream \(wanted.index) is not found on a second reading of the source")
        }
        index = found
        let stream = demuxer.stream(Int(found))
        timeBase = stream.pointee.time_base
        let par = stream.pointee.codecpar!
        let name = string(avcodec_get_name(par.pointee.codec_id)) ?? "?"
        guard let codec = avcodec_find_decoder(par.pointee.codec_id), let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.sourceUnsupported, stage: .decode, "no decoder for the \(name) subtitle stream")
        }
        decoder = ctx
        try check(avcodec_parameters_to_context(ctx, par), .decode, "cannot configure the \(name) subtitle decoder")
        ctx.pointee.pkt_timebase = timeBase
        try check(avcodec_open2(ctx, codec, nil), .decode, "cannot open the \(name) subtitle decoder", as: .sourceUnsupported)
        packet = try Packet()
        self.width = width
        self.height = height
        self.bt601 = bt601
        pictureSize = (picture.pointee.codecpar.pointee.width, picture.pointee.codecpar.pointee.height)
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
    }

    /// Blends the display set on screen at `time` (µs, source clock) into `frame`, an
    /// 8-bit 4:2:0 picture of the output size.
    func paint(_ frame: Frame, at time: Int64) throws(KilnError) {
        try read(through: time + Self.lookAhead)
        shown.removeAll { $0.end.map { $0 <= time } ?? false }
        guard let on = shown.last(where: { $0.start <= time }), let overlay = on.overlay else { return }
        let f = frame.pointer
        guard f.pointee.width == width, f.pointee.height == height else { return }
        try check(av_frame_make_writable(f), .encode, "cannot paint the forced subtitles", as: .resourceLimit)
        try check(kiln_overlay_blend(overlay.pointer, f), .encode, "cannot paint the forced subtitles")
        paintedPictures += 1
    }

    /// Reads and decodes the track until a packet past `limit` (µs) or its end.
    private func read(through limit: Int64) throws(KilnError) {
        while !ended && readTo <= limit {
            guard try demuxer.read(into: packet) else {
                ended = true
                return
            }
            defer { packet.unref() }
            guard packet.streamIndex == index else { continue }
            let t = packet.time
            if t != noPTS { readTo = max(readTo, rescale(t, from: timeBase, to: kiln_time_base_q())) }
            try decode()
        }
    }

    private func decode() throws(KilnError) {
        var sub = AVSubtitle()
        var got: Int32 = 0
        let ret = avcodec_decode_subtitle2(decoder, &sub, &got, packet.pointer)
        if ret < 0 { corruptPackets += 1; return }
        guard got != 0 else { return }
        defer { avsubtitle_free(&sub) }
        let at: Int64
        if sub.pts != noPTS { at = sub.pts }
        else if packet.time != noPTS { at = rescale(packet.time, from: timeBase, to: kiln_time_base_q()) }
        else { return }
        let start = at + Int64(sub.start_display_time) * 1000
        var end: Int64? = nil
        if sub.end_display_time != UInt32.max, sub.end_display_time > sub.start_display_time {
            end = at + Int64(sub.end_display_time) * 1000
        }
        // A new display set ends the one before (a PGS "clear" is one without pictures).
        for i in shown.indices where shown[i].start <= start && (shown[i].end ?? .max) > start { shown[i].end = start }
        displaySets += 1
        guard sub.num_rects > 0, let rects = sub.rects else { return }
        var reach = (width: Int32(0), height: Int32(0))
        for i in 0..<Int(sub.num_rects) {
            guard let r = rects[i]?.pointee else { continue }
            reach = (max(reach.width, r.x + r.w), max(reach.height, r.y + r.h))
        }
        let canvas = Self.canvas(declared: (decoder.pointee.width, decoder.pointee.height), codec: decoder.pointee.codec_id,
                                 picture: pictureSize, reach: reach)
        var error: Int32 = 0
        let made = kiln_overlay_new(rects, Int32(sub.num_rects), canvas.width, canvas.height, width, height, bt601 ? 1 : 0, &error)
        try check(error, .decode, "cannot draw the forced subtitles", as: .resourceLimit)
        let overlay = made.map(Overlay.init)
        let entry = Shown(start: start, end: end, overlay: overlay)
        // Display sets come in time order; one that does not is put where it belongs.
        let place = shown.lastIndex(where: { $0.start <= start }).map { $0 + 1 } ?? 0
        shown.insert(entry, at: place)
    }
}

extension SubtitleBurner {
    typealias Size = (width: Int32, height: Int32)

    /// The canvas a display set's positions are on: the stream's own (PGS always says; DVD
    /// in its extradata), else the standard's (DVB without a display definition: 720x576;
    /// a DVD's: 720 by its system's lines), else the source picture's (XSUB). Positions past
    /// it mean the guess was wrong: the picture's size if that holds them, else as far as
    /// they reach.
    static func canvas(declared: Size, codec: AVCodecID, picture: Size, reach: Size) -> Size {
        var c: Size
        if declared.width > 0, declared.height > 0 { c = declared }
        else if codec == AV_CODEC_ID_DVB_SUBTITLE { c = (720, 576) }
        else if codec == AV_CODEC_ID_DVD_SUBTITLE { c = (720, picture.height == 480 ? 480 : 576) }
        else { c = picture }
        if reach.width > c.width || reach.height > c.height {
            c = picture.width >= reach.width && picture.height >= reach.height
                ? picture : (max(c.width, reach.width), max(c.height, reach.height))
        }
        return c
    }
}

/// An owned `KilnOverlay` (one display set, drawn at the output size).
final class Overlay {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { var p: OpaquePointer? = pointer; kiln_overlay_free(&p) }
}
