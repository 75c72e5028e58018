import CFFmpeg
import KilnCore

/// One frame of silence in a copied sound's own codec and configuration, to fill a gap in
/// the copy (`CopyLane`). MP4 has no gaps: a copy carries one as the length of the frame
/// before it, and a player that times sound by its samples (Android's ExoPlayer, whose
/// audio sink resynchronises past 200 ms of "timestamp discontinuity") jumps its clock by
/// the gap and drops the pictures shown meanwhile. Frames of silence there keep the
/// track's samples and times one.
///
/// Made by libavcodec's own encoder of the codec, at the track's rate and channel count,
/// from zeros: AAC-LC (each frame decodes alone; the encoder's AudioSpecificConfig must be
/// the track's: object type, rate and channel configuration), AC-3 and E-AC-3 (frames say
/// their own configuration). Nil for anything else: HE-AAC's SBR, which an LC frame does
/// not carry; MP3, whose frames borrow bits from the frames before; lossless codecs, whose
/// frames number themselves.
struct SilentFrame {
    let bytes: [UInt8]
    /// Samples per channel the frame holds.
    let samples: Int32

    /// AAC's configuration of the track, from its AudioSpecificConfig, else (MPEG-TS) from
    /// its first ADTS header.
    static func make(for par: AVCodecParameters, adts: ADTSConfiguration?) -> SilentFrame? {
        let codec = par.codec_id
        guard par.sample_rate > 0, par.ch_layout.nb_channels > 0,
              codec == AV_CODEC_ID_AAC || codec == AV_CODEC_ID_AC3 || codec == AV_CODEC_ID_EAC3 else { return nil }
        let track: AACConfiguration?
        if codec == AV_CODEC_ID_AAC {
            // Profile as libavformat's analysis decoded it: SBR found in band (implicit
            // signalling) makes it HE-AAC even where the configuration says LC.
            guard par.profile == FF_PROFILE_AAC_LOW || par.profile == FF_PROFILE_UNKNOWN else { return nil }
            track = par.extradata_size >= 2 ? AACConfiguration(par.extradata, count: Int(par.extradata_size))
                : adts.map { AACConfiguration(objectType: $0.profile + 1, frequencyIndex: $0.frequencyIndex, channels: $0.channelConfiguration) }
            guard let track, track.objectType == 2, track.channels != 0 else { return nil }
        } else {
            track = nil
        }
        let name = codec == AV_CODEC_ID_AAC ? "aac" : codec == AV_CODEC_ID_AC3 ? "ac3" : "eac3"
        let attempts: [Int64] = codec == AV_CODEC_ID_AAC ? [0] : par.bit_rate > 0 ? [par.bit_rate, 0] : [0]
        for bitRate in attempts {
            guard let encoder = try? Encoder(name: name, configure: { ctx, _ in
                ctx.pointee.sample_rate = par.sample_rate
                ctx.pointee.sample_fmt = AV_SAMPLE_FMT_FLTP
                ctx.pointee.time_base = AVRational(num: 1, den: par.sample_rate)
                var layout = par.ch_layout
                if layout.order == AV_CHANNEL_ORDER_NATIVE, codec != AV_CODEC_ID_AAC {
                    _ = av_channel_layout_copy(&ctx.pointee.ch_layout, &layout)
                } else {
                    av_channel_layout_default(&ctx.pointee.ch_layout, par.ch_layout.nb_channels)
                }
                ctx.pointee.bit_rate = bitRate
            }) else { continue }
            let ctx = encoder.context.pointee
            // The same number of samples per frame (AAC of 960, E-AC-3 of fewer blocks: no).
            guard ctx.frame_size > 0, par.frame_size <= 0 || par.frame_size == ctx.frame_size else { return nil }
            if let track {
                guard ctx.extradata_size >= 2, AACConfiguration(ctx.extradata, count: Int(ctx.extradata_size)) == track else { return nil }
            }
            guard let raw = firstPacket(of: encoder) else { continue }
            // Packets that carry ADTS headers (MPEG-TS) go through the muxer's conversion,
            // which takes every one from its header.
            let bytes = adts.map { $0.header(payloadBytes: raw.count) + raw } ?? raw
            return SilentFrame(bytes: bytes, samples: ctx.frame_size)
        }
        return nil
    }

    /// Encodes frames of zeros until a packet comes out (the encoder's delay), and gives
    /// its bytes: every sample any of them holds is zero.
    private static func firstPacket(of encoder: Encoder) -> [UInt8]? {
        guard let frame = try? Frame() else { return nil }
        let ctx = encoder.context
        frame.pointer.pointee.nb_samples = ctx.pointee.frame_size
        frame.pointer.pointee.format = ctx.pointee.sample_fmt.rawValue
        frame.pointer.pointee.sample_rate = ctx.pointee.sample_rate
        guard av_channel_layout_copy(&frame.pointer.pointee.ch_layout, &ctx.pointee.ch_layout) >= 0,
              av_frame_get_buffer(frame.pointer, 0) >= 0,
              av_samples_set_silence(frame.pointer.pointee.extended_data, 0, frame.pointer.pointee.nb_samples,
                                     ctx.pointee.ch_layout.nb_channels, ctx.pointee.sample_fmt) >= 0 else { return nil }
        var bytes: [UInt8]?
        for i in 0..<8 where bytes == nil {
            frame.pointer.pointee.pts = Int64(i) * Int64(ctx.pointee.frame_size)
            try? encoder.encode(frame) { packet in
                let p = packet.pointer.pointee
                if bytes == nil, let data = p.data, p.size > 0 { bytes = Array(UnsafeBufferPointer(start: data, count: Int(p.size))) }
            }
        }
        return bytes
    }
}

/// An AudioSpecificConfig's first fields (ISO/IEC 14496-3 section 1.6.2.1).
struct AACConfiguration: Equatable {
    let objectType: UInt8
    let frequencyIndex: UInt8
    let channels: UInt8

    init(objectType: UInt8, frequencyIndex: UInt8, channels: UInt8) {
        self.objectType = objectType
        self.frequencyIndex = frequencyIndex
        self.channels = channels
    }

    /// nil for an escaped object type or frequency (31, 15): not the plain LC this is for.
    init?(_ bytes: UnsafePointer<UInt8>?, count: Int) {
        guard let bytes, count >= 2 else { return nil }
        objectType = bytes[0] >> 3
        frequencyIndex = (bytes[0] & 0x07) << 1 | bytes[1] >> 7
        channels = (bytes[1] >> 3) & 0x0F
        guard objectType != 31, frequencyIndex != 15 else { return nil }
    }
}
