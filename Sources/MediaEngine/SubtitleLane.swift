import CFFmpeg
import KilnCore

/// Converts a text subtitle stream (SubRip, ASS/SSA, WebVTT, …) to MP4's `mov_text`,
/// keeping language, title and the forced flag. Bitmap subtitles never get here: the
/// plan drops them, because MP4 players cannot show them.
final class SubtitleLane: Lane {
    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let input: UnsafeMutablePointer<AVStream>
    private let decoder: UnsafeMutablePointer<AVCodecContext>
    private var encoder: UnsafeMutablePointer<AVCodecContext>?
    private(set) var stats = LaneStats()
    private let plan: SubtitlePlan
    private static let timeBase = AVRational(num: 1, den: 1000)

    init(demuxer: Demuxer, plan: SubtitlePlan) throws(KilnError) {
        let index = plan.sourceIndex
        self.plan = plan
        inputIndex = Int32(index)
        input = demuxer.stream(index)
        let par = input.pointee.codecpar!
        guard let codec = avcodec_find_decoder(par.pointee.codec_id), let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.sourceUnsupported, stage: .decode, "no decoder for the \(string(avcodec_get_name(par.pointee.codec_id)) ?? "?") subtitle stream")
        }
        decoder = ctx
        try check(avcodec_parameters_to_context(ctx, par), .decode, "cannot configure the subtitle decoder")
        ctx.pointee.pkt_timebase = input.pointee.time_base
        try check(avcodec_open2(ctx, codec, nil), .decode, "cannot open the subtitle decoder", as: .sourceUnsupported)
    }

    deinit {
        var d: UnsafeMutablePointer<AVCodecContext>? = decoder
        avcodec_free_context(&d)
        if encoder != nil { avcodec_free_context(&encoder) }
    }

    var ffmpegEquivalent: [String] { ["-map", "0:\(inputIndex)", "-c:\(outputIndex)", "mov_text"] }

    func prepare(muxer: Muxer) throws(KilnError) {
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_MOV_TEXT), let enc = avcodec_alloc_context3(codec) else {
            throw KilnError(.internalError, stage: .encode, "the mov_text encoder is missing")
        }
        encoder = enc
        enc.pointee.time_base = SubtitleLane.timeBase
        // mov_text takes its styles from the decoder's ASS header.
        if let header = decoder.pointee.subtitle_header, decoder.pointee.subtitle_header_size > 0 {
            let size = Int(decoder.pointee.subtitle_header_size)
            guard let copy = av_mallocz(size + 1)?.assumingMemoryBound(to: UInt8.self) else {
                throw KilnError(.resourceLimit, stage: .encode, "out of memory")
            }
            copy.update(from: header, count: size)
            enc.pointee.subtitle_header = copy
            enc.pointee.subtitle_header_size = Int32(size)
        }
        try check(avcodec_open2(enc, codec, nil), .encode, "cannot open the mov_text encoder")
        let out = try muxer.addStream()
        outputIndex = out.pointee.index
        try check(avcodec_parameters_from_context(out.pointee.codecpar, enc), .mux, "cannot set subtitle parameters")
        out.pointee.time_base = SubtitleLane.timeBase
        copyStreamMetadata(from: input, to: out)
        // The plan has the last word on what a player shows in its subtitle menu.
        if let language = plan.language { av_dict_set(&out.pointee.metadata, "language", language, 0) }
        if plan.forced { out.pointee.disposition |= AV_DISPOSITION_FORCED } else { out.pointee.disposition &= ~AV_DISPOSITION_FORCED }
    }

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        stats.packetsIn += 1
        guard let encoder else { return }
        var sub = AVSubtitle()
        var got: Int32 = 0
        let ret = avcodec_decode_subtitle2(decoder, &sub, &got, packet.pointer)
        if ret < 0 { stats.corruptPackets += 1; return }
        guard got != 0 else { return }
        defer { avsubtitle_free(&sub) }
        stats.framesDecoded += 1
        let tb = input.pointee.time_base
        let start = packet.time
        guard start != noPTS else { return }
        var durationMs = Int64(sub.end_display_time) - Int64(sub.start_display_time)
        if durationMs <= 0 || sub.end_display_time == UInt32.max {
            durationMs = rescale(packet.pointer.pointee.duration, from: tb, to: SubtitleLane.timeBase)
        }
        let startMs = rescale(start, from: tb, to: SubtitleLane.timeBase) + Int64(sub.start_display_time)
        // mov_text's encoder wants the display window relative to the packet.
        sub.pts = rescale(startMs, from: SubtitleLane.timeBase, to: kiln_time_base_q())
        sub.start_display_time = 0
        sub.end_display_time = UInt32(clamping: max(durationMs, 1))
        var buf = [UInt8](repeating: 0, count: 64 * 1024)
        let size = avcodec_encode_subtitle(encoder, &buf, Int32(buf.count), &sub)
        guard size > 0 else {
            if size < 0 { stats.corruptPackets += 1 }
            return
        }
        let out = try Packet()
        try check(av_new_packet(out.pointer, size), .encode, "cannot allocate a subtitle packet", as: .resourceLimit)
        out.pointer.pointee.data.update(from: buf, count: Int(size))
        out.pointer.pointee.pts = startMs
        out.pointer.pointee.dts = startMs
        out.pointer.pointee.duration = max(durationMs, 1)
        out.streamIndex = outputIndex
        try muxer.write(out, from: SubtitleLane.timeBase)
        stats.packetsOut += 1
    }

    func finish(muxer: Muxer) throws(KilnError) {}
}
