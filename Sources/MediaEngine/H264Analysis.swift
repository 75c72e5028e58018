import CFFmpeg
import KilnCore

/// Spares `avformat_find_stream_info` its H.264 keyframe decode where the stream's own
/// parameter set says what that decode would learn.
///
/// libavformat decodes an H.264 stream's first picture (50 ms for a 1080p intra picture,
/// the longest step of a remux's start) for its pixel format and reorder depth, and goes on
/// decoding until the decoder's reorder depth matches its SPS. `kiln_h264_parameters` reads
/// both (and what else the decoder would set: depth, aspect ratio, colour description,
/// chroma siting) from the avcC record; they go into the stream's codec parameters before
/// the analysis, whose decoder then skips every picture (`skip_frame=all`: it opens, and
/// reads headers, so nothing else in the analysis changes).
///
/// Only where the container says when each packet is decoded, or where what libavformat
/// learns from decode times alone can be put right: MP4/QuickTime (decode times stored),
/// and Matroska with a declared duration and frame rate. Matroska stores presentation
/// times only; libavformat derives decode times once it trusts the reorder depth, which
/// without a decoded picture is never during the analysis. So `restoreTimes` sets the
/// stream's start as libavformat would have (its first packet's presentation time), the
/// analysis stops reading where decoding would have let it (`max_ts_probe`), and the
/// demuxer goes back to the start so that every packet is read with derived decode times,
/// as after any rewind.
enum H264Analysis {
    /// Containers whose H.264 packets carry decode times.
    static let decodeTimedFormats: Set<String> = ["mov,mp4,m4a,3gp,3g2,mj2"]
    /// Containers where the stream's start is put right after the analysis.
    static let presentationTimedFormats: Set<String> = ["matroska,webm"]

    /// What the shortcut changed: the streams, and their durations before the analysis
    /// (an undecoded stream takes the file's).
    struct Prefilled {
        var streams: [Int] = []
        var durations: [Int64] = []
        var needsTimes = false
        /// The format context's `max_ts_probe` before the analysis.
        var maxTimestampProbe: Int32 = 0
        var isEmpty: Bool { streams.isEmpty }
    }

    /// Fills the codec parameters of every H.264 stream the shortcut can serve, or of none
    /// (a file with one stream it cannot serve is analysed as before: the format context's
    /// decode-time logic is per stream, but an undecoded stream beside a decoded one gains
    /// nothing worth a second path).
    static func prefill(_ ctx: UnsafeMutablePointer<AVFormatContext>) -> Prefilled {
        let format = String(cString: ctx.pointee.iformat.pointee.name)
        let needsTimes = presentationTimedFormats.contains(format)
        guard decodeTimedFormats.contains(format) || (needsTimes && ctx.pointee.duration != noPTS) else { return Prefilled() }
        var found: [(Int, KilnH264Parameters)] = []
        for i in 0..<Int(ctx.pointee.nb_streams) {
            guard let par = ctx.pointee.streams[i]!.pointee.codecpar else { return Prefilled() }
            guard par.pointee.codec_id == AV_CODEC_ID_H264 else { continue }
            var p = KilnH264Parameters()
            guard kiln_h264_parameters(par, &p) == 1, par.pointee.video_delay <= p.reorder_depth else { return Prefilled() }
            // Without a frame rate in the header (Matroska's default duration), libavformat
            // estimates one from the decode times it derives during the analysis.
            if needsTimes && ctx.pointee.streams[i]!.pointee.r_frame_rate.num <= 0 { return Prefilled() }
            found.append((i, p))
        }
        var done = Prefilled()
        done.needsTimes = needsTimes
        for (i, p) in found {
            let st = ctx.pointee.streams[i]!
            let par = st.pointee.codecpar!
            par.pointee.format = p.pix_fmt
            par.pointee.bits_per_raw_sample = p.bits_per_raw_sample
            par.pointee.video_delay = p.reorder_depth
            par.pointee.sample_aspect_ratio = p.sample_aspect_ratio
            par.pointee.color_range = AVColorRange(rawValue: UInt32(p.color_range))
            par.pointee.color_primaries = AVColorPrimaries(rawValue: UInt32(p.color_primaries))
            par.pointee.color_trc = AVColorTransferCharacteristic(rawValue: UInt32(p.color_trc))
            par.pointee.color_space = AVColorSpace(rawValue: UInt32(p.colorspace))
            par.pointee.chroma_location = AVChromaLocation(rawValue: UInt32(p.chroma_location))
            done.streams.append(i)
            done.durations.append(st.pointee.duration)
        }
        // The analysis reads on until each video stream shows a decode time, or for
        // `max_ts_probe` of its packets. Decoding, the first decode time comes with the
        // packet after the reorder depth's worth; the analysis stops reading there too.
        done.maxTimestampProbe = ctx.pointee.max_ts_probe
        if needsTimes, let deepest = found.map({ $0.1.reorder_depth }).max() {
            ctx.pointee.max_ts_probe = min(ctx.pointee.max_ts_probe, deepest + 1)
        }
        return done
    }

    /// After the analysis, in a container without decode times: each prefilled stream
    /// starts at its first packet's presentation time and keeps the duration it had, and
    /// the file starts where its earliest stream does (libavformat's rule: subtitles count
    /// only when they start less than a second before the rest). Reads packets: the caller
    /// goes back to the start, to the first packets `marks` notes. False when a stream shows
    /// no timed packet early on.
    static func restoreTimes(_ ctx: UnsafeMutablePointer<AVFormatContext>, _ done: Prefilled,
                             marking marks: inout StartMarks) -> Bool {
        ctx.pointee.max_ts_probe = done.maxTimestampProbe
        guard let packet = av_packet_alloc() else { return false }
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        var first: [Int: Int64] = [:]
        var reads = 0
        while first.count < done.streams.count, reads < 4096, av_read_frame(ctx, packet) >= 0 {
            reads += 1
            marks.note(packet.pointee, of: ctx.pointee.streams[Int(packet.pointee.stream_index)]!)
            let i = Int(packet.pointee.stream_index)
            if done.streams.contains(i), first[i] == nil { first[i] = packet.pointee.pts }
            av_packet_unref(packet)
        }
        guard first.count == done.streams.count, !first.values.contains(noPTS) else { return false }
        for (n, i) in done.streams.enumerated() {
            let st = ctx.pointee.streams[i]!
            st.pointee.start_time = first[i]!
            st.pointee.duration = done.durations[n]
        }
        var start = Int64.max, textStart = Int64.max
        for i in 0..<Int(ctx.pointee.nb_streams) {
            let st = ctx.pointee.streams[i]!
            guard st.pointee.start_time != noPTS, st.pointee.time_base.den != 0 else { continue }
            let t = av_rescale_q(st.pointee.start_time, st.pointee.time_base, kiln_time_base_q())
            let type = st.pointee.codecpar.pointee.codec_type
            if type == AVMEDIA_TYPE_SUBTITLE || type == AVMEDIA_TYPE_DATA {
                textStart = min(textStart, t)
            } else {
                start = min(start, t)
            }
        }
        if start == .max || (textStart != .max && start > textStart && start - textStart < Int64(kiln_time_base())) {
            start = textStart
        }
        if start != .max { ctx.pointee.start_time = start }
        return true
    }
}
