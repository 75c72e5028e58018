import CFFmpeg
import KilnCore

/// A decoder for one input stream: owns the `AVCodecContext`, turns packets into frames.
/// A packet the decoder rejects as invalid data is concealed (skipped and counted), as
/// players do; anything else is an error.
final class Decoder {
    let context: UnsafeMutablePointer<AVCodecContext>
    /// Packets (or receive calls) the decoder reported as invalid data and that were skipped.
    private(set) var corruptPackets = 0
    private(set) var framesDecoded = 0
    /// Packets sent, accepted or rejected, in all: a stream that never yields a frame after
    /// many is undecodable, not merely delayed (`decodeRequiringOutput`).
    private(set) var packetsSent = 0
    /// Packets sent since the last frame came out, and the times (stream time base) of the
    /// first and the latest of them: a stream whose decoding stops for good before its end
    /// (`decodeRequiringOutput`).
    private var sinceFrame = 0
    private var sinceFrameTimes: (first: Int64, last: Int64)?
    private let frame: Frame
    /// The one picture's memory all pictures share (`sharedPicture`), freed after the context.
    private var onePicture: OpaquePointer?

    /// - Parameter threads: 0 lets libavcodec pick (one per core, frame and slice threads).
    /// - Parameter sharedPicture: a video decoder that decodes keyframes only (it skips the
    ///   rest), into one shared picture's memory, without deblocking — for pictures whose
    ///   pixels nobody reads (verification, the probe's field order; see CFFmpeg.h).
    /// - Parameter showUnrecovered: output pictures decoded from a keyframe that is a
    ///   recovery point before decoding has recovered (`AV_CODEC_FLAG2_SHOW_ALL`): the
    ///   pictures of a periodic intra refresh, which verification decodes on from one.
    convenience init(stream: UnsafeMutablePointer<AVStream>, threads: Int = 0, sharedPicture: Bool = false,
                     showUnrecovered: Bool = false) throws(KilnError) {
        let rate = stream.pointee.avg_frame_rate.num > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate
        try self.init(parameters: stream.pointee.codecpar, timeBase: stream.pointee.time_base, frameRate: rate,
                      streamIndex: Int(stream.pointee.index), threads: threads, sharedPicture: sharedPicture,
                      showUnrecovered: showUnrecovered)
    }

    /// The same from a stream's parameters alone (a copy another thread may keep).
    init(parameters par: UnsafePointer<AVCodecParameters>, timeBase: AVRational, frameRate: AVRational, streamIndex: Int,
         threads: Int = 0, sharedPicture: Bool = false, showUnrecovered: Bool = false) throws(KilnError) {
        let codecName = string(avcodec_get_name(par.pointee.codec_id)) ?? "unknown"
        guard let codec = avcodec_find_decoder(par.pointee.codec_id) else {
            // No codec at all: the container names none libavformat knows, or its header
            // was lost (an MP4 cut inside its index).
            throw KilnError(.sourceUnsupported, stage: .decode, par.pointee.codec_id == AV_CODEC_ID_NONE
                            ? "the source's stream \(streamIndex) names no codec Kiln knows (an unknown format, or a damaged header)"
                            : "no decoder for \(codecName) (stream \(streamIndex))")
        }
        guard let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.resourceLimit, stage: .decode, "out of memory for a \(codecName) decoder")
        }
        var owned: UnsafeMutablePointer<AVCodecContext>? = ctx
        let ret = avcodec_parameters_to_context(ctx, par)
        if ret < 0 {
            avcodec_free_context(&owned)
            throw classify(ret, .decode, "cannot configure the \(codecName) decoder", as: .sourceUnsupported)
        }
        ctx.pointee.pkt_timebase = timeBase
        ctx.pointee.thread_count = Int32(threads)
        if par.pointee.codec_type == AVMEDIA_TYPE_VIDEO {
            // The container's frame rate helps decoders that guess timestamps (MPEG-2 in TS).
            ctx.pointee.framerate = frameRate
        }
        if showUnrecovered { ctx.pointee.flags2 |= AV_CODEC_FLAG2_SHOW_ALL }
        var one: OpaquePointer? = nil
        if sharedPicture && par.pointee.codec_type == AVMEDIA_TYPE_VIDEO {
            // Intra pictures only: they never read the references that share their memory.
            // Intra, not key: libavcodec's H.264 "key" is an IDR (or a recovery point), and a
            // keyframe a muxer flagged that is an I-picture decodes alone all the same (x264's
            // I-pictures at scene cuts, which the ffmpeg command flags so in Matroska: a copy
            // of one near the end failed verification and was encoded instead).
            ctx.pointee.skip_frame = AVDISCARD_NONINTRA
            // Nobody looks at these pixels: skip the deblocking filter too (a quarter of
            // H.264's and HEVC's decoding time; errors are found before it runs).
            ctx.pointee.skip_loop_filter = AVDISCARD_ALL
            // Pictures decoded side by side (frame threads) would share that memory too.
            ctx.pointee.thread_type = kiln_thread_slice()
            one = kiln_one_picture_new()
            guard one != nil else {
                avcodec_free_context(&owned)
                throw KilnError(.resourceLimit, stage: .decode, "out of memory for a \(codecName) decoder")
            }
            kiln_decode_into_one_picture(ctx, one)
        }
        let options = Options()
        let open = avcodec_open2(ctx, codec, &options.dict)
        if open < 0 {
            avcodec_free_context(&owned)
            kiln_one_picture_free(&one)
            let e = classify(open, .decode, "cannot open the \(codecName) decoder", as: .sourceUnsupported)
            // Data the decoder cannot make sense of at open is its header (extradata): damaged
            // (a fuzzed Theora header read as unsupported), not a codec Kiln lacks.
            let damaged = isInvalidData(open) || Self.nullAACObject(par)
            throw e.code == .resourceLimit || e.code == .canceled ? e
                : KilnError(damaged ? .sourceCorrupt : .sourceUnsupported, stage: .decode, underlying: open,
                            "the \(codecName) stream \(streamIndex) cannot be decoded (\(avErrorText(open)))"
                            + (damaged ? ": its header is damaged" : ""))
        }
        do {
            frame = try Frame()
        } catch {
            avcodec_free_context(&owned)
            kiln_one_picture_free(&one)
            throw error
        }
        context = ctx
        onePicture = one
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
        kiln_one_picture_free(&onePicture)
    }

    var timeBase: AVRational { context.pointee.pkt_timebase }

    /// Pictures a shared-picture decoder has allocated: the ones it output, and the
    /// references it had to invent for them.
    var picturesAllocated: Int { Int(kiln_one_picture_requests(onePicture)) }

    /// Whether a keyframe's picture can be decoded alone: not when the codec's parser reads
    /// it as a P- or B-picture (a recovery point of x264's periodic intra refresh, which
    /// ffmpeg's muxers flag as keyframes: decoding recovers over the pictures after it).
    /// A picture the parser cannot type is taken to be intra, as before.
    static func decodesAlone(_ packet: Packet, parameters: UnsafePointer<AVCodecParameters>) -> Bool {
        let type = kiln_picture_type(parameters, packet.pointer)
        return type != Int32(AV_PICTURE_TYPE_P.rawValue) && type != Int32(AV_PICTURE_TYPE_B.rawValue)
    }

    /// Decodes one keyframe as the first picture of a stream and flushes (verification's
    /// question: does it decode?). An HEVC open-GOP keyframe (CRA) is decoded as the IDR
    /// picture it is to a decoder that starts there (`kiln_hevc_keyframe_as_idr`): the same
    /// slice data and pictures, without inventing the references of leading pictures that
    /// are not decoded. A keyframe an edit list hides (a clip cut between keyframes: MP4
    /// keeps the pictures from the keyframe before the cut, marked to be decoded and not
    /// shown, `AV_PKT_FLAG_DISCARD`) is decoded all the same: libavcodec drops what such a
    /// packet gives, and the question is whether it decodes, not whether it is shown.
    func decodeKeyframeAlone(_ packet: Packet, _ body: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        let par = context.pointee
        var sent = packet
        if par.codec_id == AV_CODEC_ID_HEVC, par.extradata_size > 0, let rewritten = try? Packet(),
           kiln_hevc_keyframe_as_idr(par.extradata, par.extradata_size, packet.pointer, rewritten.pointer) == 1 {
            sent = rewritten
        }
        let flags = sent.pointer.pointee.flags
        sent.pointer.pointee.flags &= ~AV_PKT_FLAG_DISCARD
        defer { sent.pointer.pointee.flags = flags }
        try decode(sent, body)
        try decode(nil, body)
    }

    /// Sends a packet (nil flushes at end of input) and calls `body` for every frame that
    /// comes out. The frame is only valid during the call; `body` may keep a reference
    /// with `av_frame_ref`/`av_frame_move_ref`.
    func decode(_ packet: Packet?, _ body: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        if let packet {
            packetsSent += 1
            sinceFrame += 1
            let t = packet.pointer.pointee.pts != noPTS ? packet.pointer.pointee.pts : packet.pointer.pointee.dts
            if t != noPTS { sinceFrameTimes = (sinceFrameTimes?.first ?? t, max(sinceFrameTimes?.last ?? t, t)) }
        }
        var pending = true
        while pending {
            let ret = avcodec_send_packet(context, packet?.pointer)
            pending = false
            if ret == avErrorEAGAIN {
                // The decoder's output is full: drain it, then send the same packet again.
                pending = true
            } else if ret == avErrorEOF {
                // Already flushed: nothing more will come out.
                return
            } else if Decoder.rejectsPacket(ret) {
                corruptPackets += 1
                return
            } else if ret < 0 {
                throw classify(ret, .decode, "the decoder failed", as: .sourceCorrupt)
            }
            try receiveAll(body)
        }
    }

    /// `decode`, for a stream that must give pictures or sound: fails when nothing has come
    /// out after `giveUpAfter` packets, or by the end (nil), so a stream that cannot be
    /// decoded at all ends the job with a reason instead of an empty output.
    /// At the end, a stream most of whose packets were rejected fails too: a few damaged
    /// packets are concealed and counted, but an output that is mostly a frozen picture or
    /// silence (28 of 30 AV1 pictures whose OBUs did not parse) is no delivery.
    func decodeRequiringOutput(_ packet: Packet?, giveUpAfter: Int, _ body: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        try decode(packet, body)
        guard packet == nil || framesDecoded == 0 else { return }
        let codec = string(avcodec_get_name(context.pointee.codec_id)) ?? "unknown"
        let what = context.pointee.codec_type == AVMEDIA_TYPE_AUDIO ? ("audio", "sound") : ("video", "picture")
        if packet == nil, framesDecoded > 0, corruptPackets * 2 > packetsSent {
            throw KilnError(.sourceCorrupt, stage: .decode,
                            "the \(codec) \(what.0) stream is mostly damaged: \(corruptPackets) of \(packetsSent) packets could not be decoded")
        }
        // Decoding that stops for good before the end: the output's stream would end there,
        // seconds before the others (an MPEG-TS whose pictures go on in another codec on the
        // same PID, which the decoder of the first takes for damage). A stretch in the middle
        // that gives nothing is concealed, as players do: the decoder finds its way again.
        if packet == nil, framesDecoded > 0, sinceFrame >= Self.lastingSilence.packets, let times = sinceFrameTimes,
           let span = seconds(times.last - times.first, context.pointee.pkt_timebase), span >= Self.lastingSilence.seconds {
            throw KilnError(.sourceCorrupt, stage: .decode,
                            "the \(codec) \(what.0) stream gives no \(what.1) for its last \(Format.fixed(span, decimals: 1)) s "
                            + "(\(Format.count(sinceFrame, "packet"))): it is damaged there, or goes on in another codec")
        }
        if framesDecoded == 0 && (packet == nil || packetsSent >= giveUpAfter) {
            if packetsSent == 0 {
                // The source's packets for it never came (lost to damage in the container).
                throw KilnError(.sourceCorrupt, stage: .decode, "the \(codec) \(what.0) stream has no readable packets")
            }
            throw KilnError(corruptPackets > 0 ? .sourceCorrupt : .sourceUnsupported, stage: .decode,
                            "the \(codec) \(what.0) stream could not be decoded: \(Format.count(packetsSent, "packet")) gave no \(what.1)"
                            + (corruptPackets > 0 ? " (\(corruptPackets) rejected as corrupt)" : ""))
        }
    }

    /// An AAC header (AudioSpecificConfig) of object type 0, "null", which no encoder writes:
    /// a header zeroed or damaged, which libavcodec refuses as a feature it lacks (ENOSYS).
    static func nullAACObject(_ par: UnsafePointer<AVCodecParameters>) -> Bool {
        guard par.pointee.codec_id == AV_CODEC_ID_AAC, let x = par.pointee.extradata, par.pointee.extradata_size >= 2 else { return false }
        return x[0] >> 3 == 0
    }

    /// How long a stream's end may give nothing before the stream counts as undecodable
    /// there: both a number of packets and a time (2 s is 48 pictures at 24 fps, 94 AAC frames).
    static let lastingSilence = (packets: 24, seconds: 2.0)

    /// Whether a decoder's error rejects the packet's data: counted and skipped, as the
    /// ffmpeg command goes on past "Error while decoding". Decoders do not all say
    /// AVERROR_INVALIDDATA for bad data (the AAC decoder answers some with -1, EPERM); only
    /// running out of memory or being interrupted stops the work.
    static func rejectsPacket(_ ret: Int32) -> Bool {
        ret < 0 && ret != avErrorEAGAIN && ret != avErrorEOF && ret != kiln_averror_enomem() && ret != kiln_averror_exit()
    }

    private func receiveAll(_ body: (Frame) throws(KilnError) -> Void) throws(KilnError) {
        while true {
            let ret = avcodec_receive_frame(context, frame.pointer)
            if ret == avErrorEAGAIN || ret == avErrorEOF { return }
            if Decoder.rejectsPacket(ret) {
                // With frame threads a corrupt packet is reported when its frame is due.
                corruptPackets += 1
                continue
            }
            if ret < 0 { throw classify(ret, .decode, "the decoder failed", as: .sourceCorrupt) }
            framesDecoded += 1
            sinceFrame = 0
            sinceFrameTimes = nil
            defer { frame.unref() }
            try body(frame)
        }
    }
}

extension CodecParameters {
    /// An audio stream's parameters with the sample rate, channels and frame size its
    /// `packet` decodes to; nil if it did not decode (a later packet may). For a stream
    /// libavformat met mid-file (MPEG-TS: the programme map gives only its codec, and its
    /// probe window is long past), whose `codecpar` has no format, and keeps none written
    /// into it: the next PES packet puts the sample rate back to 0.
    static func audioFormat(of stream: UnsafeMutablePointer<AVStream>, from packet: Packet) -> CodecParameters? {
        guard let params = try? CodecParameters(copying: stream.pointee.codecpar),
              let decoder = try? Decoder(stream: stream, threads: 1), let copy = try? Packet(),
              av_packet_ref(copy.pointer, packet.pointer) >= 0 else { return nil }
        let par = params.pointer
        var learnt = false
        let learn = { (f: Frame) throws(KilnError) in
            let frame = f.pointer.pointee
            guard !learnt, frame.sample_rate > 0, frame.ch_layout.nb_channels > 0 else { return }
            var layout = frame.ch_layout
            guard av_channel_layout_copy(&par.pointee.ch_layout, &layout) >= 0 else { return }
            par.pointee.sample_rate = frame.sample_rate
            par.pointee.format = frame.format
            if par.pointee.frame_size <= 0 { par.pointee.frame_size = frame.nb_samples }
            learnt = true
        }
        try? decoder.decode(copy, learn)
        if !learnt { try? decoder.decode(nil, learn) }
        return learnt ? params : nil
    }
}
