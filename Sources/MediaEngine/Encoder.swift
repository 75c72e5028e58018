import CFFmpeg
import KilnCore

/// An encoder for one output stream: owns the `AVCodecContext`, turns frames into packets.
/// It is opened when it is made, because the MP4 muxer needs its codec parameters and
/// extradata (global header) before the file's header is written.
final class Encoder {
    let context: UnsafeMutablePointer<AVCodecContext>
    let codec: UnsafePointer<AVCodec>
    private(set) var framesEncoded = 0
    private(set) var packetsOut = 0
    private let packet: Packet

    /// Finds the encoder `name`, lets `configure` set up the context, sets the global-header
    /// flag (MP4 keeps SPS/PPS and AudioSpecificConfig in the sample entry) and opens it.
    init(name: String, options: [(String, String)] = [],
         configure: (UnsafeMutablePointer<AVCodecContext>, UnsafePointer<AVCodec>) throws(KilnError) -> Void) throws(KilnError) {
        guard let codec = avcodec_find_encoder_by_name(name) else {
            throw KilnError(.planUnsupported, stage: .encode, underlying: kiln_averror_encoder_not_found(),
                            "the encoder \(name) is not available in this libavcodec")
        }
        guard let ctx = avcodec_alloc_context3(codec) else {
            throw KilnError(.resourceLimit, stage: .encode, "out of memory for the \(name) encoder")
        }
        var owned: UnsafeMutablePointer<AVCodecContext>? = ctx
        do throws(KilnError) {
            try configure(ctx, codec)
            ctx.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER
            let opts = Options(options)
            let opened = avcodec_open2(ctx, codec, &opts.dict)
            if opened < 0 { throw Encoder.failure(opened, "cannot open the \(name) encoder") }
            packet = try Packet()
        } catch {
            avcodec_free_context(&owned)
            throw error
        }
        self.codec = codec
        context = ctx
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
    }

    var timeBase: AVRational { context.pointee.time_base }

    /// Fills an output stream's codec parameters from the opened encoder.
    /// Adds the output stream this encoder feeds: its parameters, time base, and the
    /// language, title and dispositions of the input stream it re-encodes.
    func addStream(to muxer: Muxer, from input: UnsafeMutablePointer<AVStream>) throws(KilnError) -> UnsafeMutablePointer<AVStream> {
        let stream = try muxer.addStream()
        try check(avcodec_parameters_from_context(stream.pointee.codecpar, context), .encode,
                  "cannot describe the encoded stream")
        stream.pointee.time_base = context.pointee.time_base
        copyStreamMetadata(from: input, to: stream)
        return stream
    }

    /// An encoder's failure, classified. libx264 says only "generic error in an external
    /// library" when its worker threads cannot start (a pids limit, systemd's TasksMax) or
    /// its malloc fails (an address-space limit): what the machine is short of, if
    /// anything, tells these from a misconfiguration.
    static func failure(_ ret: Int32, _ what: String) -> KilnError {
        if ret == kiln_averror_external(), let short = Shortage.current() {
            return KilnError(.resourceLimit, stage: .encode, underlying: ret, "\(what): \(short)")
        }
        return classify(ret, .encode, what)
    }

    /// Sends a frame (nil drains at end of stream) and calls `body` for every packet that
    /// comes out, timestamps in `timeBase`. The packet is unreferenced after `body`.
    func encode(_ frame: Frame?, _ body: (Packet) throws(KilnError) -> Void) throws(KilnError) {
        var pending = true
        while pending {
            pending = false
            let ret = avcodec_send_frame(context, frame?.pointer)
            if ret == avErrorEAGAIN {
                pending = true
            } else if ret == avErrorEOF {
                return
            } else if ret < 0 {
                throw Encoder.failure(ret, "the encoder rejected a frame")
            } else if frame != nil {
                framesEncoded += 1
            }
            while true {
                let r = avcodec_receive_packet(context, packet.pointer)
                if r == avErrorEAGAIN || r == avErrorEOF { break }
                if r < 0 { throw Encoder.failure(r, "the encoder failed") }
                packetsOut += 1
                defer { packet.unref() }
                try body(packet)
            }
        }
    }
}
