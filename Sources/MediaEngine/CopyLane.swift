import CFFmpeg
import KilnCore

/// Copies a stream's packets into the MP4 unchanged: the remux path for video, and for
/// audio and mov_text subtitles the device can take as they are.
final class CopyLane: Lane {
    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let input: UnsafeMutablePointer<AVStream>
    private let isVideo: Bool
    private var sawKeyframe = false
    private(set) var stats = LaneStats()

    init(demuxer: Demuxer, index: Int) {
        inputIndex = Int32(index)
        input = demuxer.stream(index)
        isVideo = input.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
    }

    func prepare(muxer: Muxer) throws(KilnError) {
        let out = try muxer.addStream()
        outputIndex = out.pointee.index
        try check(avcodec_parameters_copy(out.pointee.codecpar, input.pointee.codecpar), .mux, "cannot copy stream parameters")
        let par = out.pointee.codecpar!
        // The source container's tag means nothing in MP4; let the muxer choose, except
        // HEVC, which Apple players only accept as hvc1 (parameter sets in the sample entry).
        par.pointee.codec_tag = par.pointee.codec_id == AV_CODEC_ID_HEVC ? UInt32(kiln_fftag(0x68, 0x76, 0x63, 0x31)) : 0
        out.pointee.time_base = input.pointee.time_base
        out.pointee.avg_frame_rate = input.pointee.avg_frame_rate
        out.pointee.sample_aspect_ratio = input.pointee.sample_aspect_ratio
        // Display matrix (rotation), Dolby Vision configuration, mastering display and
        // content light levels travel as stream side data.
        try check(kiln_copy_stream_side_data(out, input), .mux, "cannot copy stream side data")
        copyStreamMetadata(from: input, to: out)
    }

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        stats.packetsIn += 1
        // A copied video must start on a keyframe: leading frames that reference
        // pictures before the cut would decode as garbage.
        if isVideo && !sawKeyframe {
            guard packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 else { return }
            sawKeyframe = true
        }
        packet.streamIndex = outputIndex
        try muxer.write(packet, from: input.pointee.time_base)
        stats.packetsOut += 1
    }

    func finish(muxer: Muxer) throws(KilnError) {}
}
