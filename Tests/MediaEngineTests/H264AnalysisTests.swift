import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// The stream analysis learns an H.264 stream's parameters from its SPS instead of decoding
/// its first picture (`H264Analysis`): what it learns, and everything the demuxer then
/// reports and reads, must be what the decode gave.
@Suite("H.264 analysis without a decoded picture")
struct H264AnalysisTests {
    /// x264 encodes covering what the SPS reader handles: B-pyramids in Matroska and MP4,
    /// full range with a colour description, chroma siting and a non-square aspect ratio,
    /// a size cropped on the right and bottom, 4:2:2 and 4:4:4 at 10 bits, RGB, interlaced
    /// (MBAFF), variable frame rate, audio starting before the video and subtitles before
    /// both (the file's start), and scaling matrices.
    static func sources() throws -> [String] {
        let tone = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
        let x264 = ["-c:v", "libx264", "-preset", "ultrafast"]
        return [
            try Media.generated("h264-bpyramid.mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=24", "-t", "3"] + tone
                + x264 + ["-bf", "3", "-x264-params", "b-pyramid=normal", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"]),
            try Media.generated("h264-bpyramid.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=24", "-t", "3"] + tone
                + x264 + ["-bf", "3", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"]),
            try Media.generated("h264-fullrange-sar.mkv", ["-f", "lavfi", "-i", "testsrc2=size=638x358:rate=25", "-t", "2"]
                + x264 + ["-bf", "2", "-pix_fmt", "yuvj420p", "-color_primaries", "bt709", "-color_trc", "bt709",
                          "-colorspace", "bt709", "-x264-params", "chromaloc=2:sar=4/3"]),
            try Media.generated("h264-422-10bit.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2"]
                + x264 + ["-bf", "2", "-pix_fmt", "yuv422p10le", "-x264-params", "cqm=jvt"]),
            try Media.generated("h264-444.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2"]
                + x264 + ["-bf", "1", "-pix_fmt", "yuv444p10le"]),
            try Media.generated("h264-rgb.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2",
                "-c:v", "libx264rgb", "-preset", "ultrafast", "-bf", "2", "-pix_fmt", "bgr24"]),
            try Media.generated("h264-mbaff.mkv", ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25", "-t", "2"]
                + x264 + ["-bf", "2", "-flags", "+ildct+ilme", "-x264-params", "tff=1", "-pix_fmt", "yuv420p"]),
            try Media.generated("h264-vfr.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-t", "3",
                "-vf", "setpts='if(lt(N,30),N/30,1+(N-30)/12)/TB'", "-fps_mode", "vfr"]
                + x264 + ["-bf", "3", "-pix_fmt", "yuv420p"]),
            try Media.generated("h264-late-video.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "3"] + tone
                + ["-f", "lavfi", "-i", "sine=frequency=220:sample_rate=48000:duration=3"]
                + ["-map", "0:v", "-map", "1:a", "-map", "2:a", "-filter_complex", "[0:v]setpts=PTS+0.4/TB[v]",
                   "-map", "[v]"] + x264 + ["-bf", "2", "-pix_fmt", "yuv420p", "-c:a", "aac", "-t", "3"]),
        ]
    }

    /// The shared H.264 files (MP4 and Matroska, with chapters, subtitles, many tracks).
    static let sharedH264 = ["ax_sample_mdat_too_long.mp4", "ax_sample_with_chapters.mkv", "ax_sample_with_pgs_subtitles.mkv",
                             "ax_sample_with_srt.mkv", "gr_test_yuv420p10le_x264.mp4", "mb_rotate-buck-bunny.mp4",
                             "mi_many_tracks.mp4", "sp_bear-640x360-ec3.mp4", "sp_bear-640x360-trailing-moov.mp4"]

    /// What a demuxer reports about its streams and the file's times, and the packets it
    /// reads from the start.
    struct Snapshot: Equatable {
        var streams: [String] = []
        var file = ""
        var packets: [String] = []
    }

    static func snapshot(_ demuxer: Demuxer) throws -> Snapshot {
        var s = Snapshot()
        let ctx = demuxer.context.pointee
        s.file = "start \(ctx.start_time) duration \(ctx.duration) bit_rate \(ctx.bit_rate)"
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i).pointee
            let p = st.codecpar.pointee
            s.streams.append("\(i) codec \(p.codec_id.rawValue) fmt \(p.format) depth \(p.bits_per_raw_sample) delay \(p.video_delay) "
                + "\(p.width)x\(p.height) sar \(p.sample_aspect_ratio.num)/\(p.sample_aspect_ratio.den) "
                + "st_sar \(st.sample_aspect_ratio.num)/\(st.sample_aspect_ratio.den) range \(p.color_range.rawValue) "
                + "pri \(p.color_primaries.rawValue) trc \(p.color_trc.rawValue) spc \(p.color_space.rawValue) "
                + "loc \(p.chroma_location.rawValue) field \(p.field_order.rawValue) profile \(p.profile) level \(p.level) "
                + "start \(st.start_time) duration \(st.duration) frames \(st.nb_frames) "
                + "r \(st.r_frame_rate.num)/\(st.r_frame_rate.den) avg \(st.avg_frame_rate.num)/\(st.avg_frame_rate.den) "
                + "rate \(p.sample_rate) fmt_a \(p.format) channels \(p.ch_layout.nb_channels) frame_size \(p.frame_size)")
        }
        if !demuxer.wasRewound { try demuxer.rewind() }
        let packet = try Packet()
        while s.packets.count < 400, try demuxer.read(into: packet) {
            let p = packet.pointer.pointee
            s.packets.append("\(p.stream_index) pts \(p.pts) dts \(p.dts) dur \(p.duration) flags \(p.flags) size \(p.size)")
            packet.unref()
        }
        return s
    }

    @Test("the demuxer reports and reads the same with and without the decode", arguments: try sources() + sharedH264.map(Media.shared))
    func sameAsDecoding(_ path: String) throws {
        let spared = try Demuxer(path: path, cancellation: Cancellation())
        let decoded = try Demuxer(path: path, cancellation: Cancellation(), h264Shortcut: false)
        #expect(!decoded.sparedH264Decode)
        let a = try Self.snapshot(spared), b = try Self.snapshot(decoded)
        for (x, y) in zip(a.streams, b.streams) where x != y { Issue.record("stream differs:\n  spared:  \(x)\n  decoded: \(y)") }
        #expect(a.file == b.file)
        #expect(a.streams.count == b.streams.count)
        #expect(a.packets.count == b.packets.count)
        if let i = a.packets.indices.first(where: { $0 < b.packets.count && a.packets[$0] != b.packets[$0] }) {
            Issue.record("packet \(i) differs: spared \(a.packets[i]), decoded \(b.packets[i])")
        }
    }

    /// The generated encodes are all ones the shortcut serves (so the comparison above
    /// compares two paths), and a stream it does not vouch for is decoded as before.
    @Test func takenWhereTheSPSSays() throws {
        for path in try Self.sources() {
            #expect(try Demuxer(path: path, cancellation: Cancellation()).sparedH264Decode, "\(path)")
        }
        let intra = try Media.generated("h264-no-reorder.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "1",
                                                              "-c:v", "libx264", "-preset", "ultrafast", "-bf", "0", "-pix_fmt", "yuv420p"])
        let d = try Demuxer(path: intra, cancellation: Cancellation())
        #expect(!d.sparedH264Decode)
        #expect(d.stream(0).pointee.codecpar.pointee.format == AV_PIX_FMT_YUV420P.rawValue)
    }

    /// `kiln_h264_parameters` against the decoder itself: open it on the stream, decode the
    /// first picture, compare what it then reports.
    @Test("the SPS reader says what the decoder says", arguments: try sources())
    func readerMatchesDecoder(_ path: String) throws {
        let demuxer = try Demuxer(path: path, cancellation: Cancellation(), analyze: false)
        let index = try #require((0..<demuxer.streamCount).first { demuxer.stream($0).pointee.codecpar.pointee.codec_id == AV_CODEC_ID_H264 })
        let st = demuxer.stream(index)
        var p = KilnH264Parameters()
        #expect(kiln_h264_parameters(st.pointee.codecpar, &p) == 1)
        let decoder = try Decoder(stream: st, threads: 1)
        let packet = try Packet()
        var decoded = false
        while !decoded, try demuxer.read(into: packet) {
            defer { packet.unref() }
            guard packet.streamIndex == index else { continue }
            try decoder.decode(packet) { _ in decoded = true }
        }
        try decoder.decode(nil) { _ in decoded = true }
        #expect(decoded)
        let c = decoder.context.pointee
        #expect(p.pix_fmt == c.pix_fmt.rawValue)
        #expect(p.bits_per_raw_sample == c.bits_per_raw_sample)
        #expect(p.reorder_depth == c.has_b_frames)
        #expect(p.sample_aspect_ratio.num == c.sample_aspect_ratio.num && p.sample_aspect_ratio.den == c.sample_aspect_ratio.den)
        #expect(p.color_range == Int32(c.color_range.rawValue))
        #expect(p.color_primaries == Int32(c.color_primaries.rawValue))
        #expect(p.color_trc == Int32(c.color_trc.rawValue))
        #expect(p.colorspace == Int32(c.colorspace.rawValue))
        #expect(p.chroma_location == Int32(c.chroma_sample_location.rawValue))
    }

    /// Records it must not vouch for: none, damaged, cut short, several SPSs.
    @Test func refusesWhatItCannotRead() throws {
        let path = try Self.sources()[0]
        let demuxer = try Demuxer(path: path, cancellation: Cancellation(), analyze: false)
        let par = try #require(avcodec_parameters_alloc())
        defer { var p: UnsafeMutablePointer<AVCodecParameters>? = par; avcodec_parameters_free(&p) }
        #expect(avcodec_parameters_copy(par, demuxer.stream(0).pointee.codecpar) >= 0)
        var p = KilnH264Parameters()
        #expect(kiln_h264_parameters(par, &p) == 1)
        let record = Array(UnsafeBufferPointer(start: par.pointee.extradata, count: Int(par.pointee.extradata_size)))
        func answer(_ bytes: [UInt8]) -> Int32 {
            av_freep(&par.pointee.extradata)
            par.pointee.extradata = av_mallocz(bytes.count + 64)?.assumingMemoryBound(to: UInt8.self)
            bytes.withUnsafeBufferPointer { par.pointee.extradata.update(from: $0.baseAddress!, count: bytes.count) }
            par.pointee.extradata_size = Int32(bytes.count)
            return kiln_h264_parameters(par, &p)
        }
        let spsLength = Int(record[6]) << 8 | Int(record[7])
        #expect(answer(Array(record[0..<(8 + spsLength / 2)])) == 0)          // cut short
        var two = record
        two[5] = (two[5] & 0xe0) | 2                                            // two SPSs
        #expect(answer(two) == 0)
        var annexB = record
        annexB[0] = 0                                                           // not avcC
        #expect(answer(annexB) == 0)
        var truncatedVUI = record
        truncatedVUI[6] = UInt8((spsLength - 3) >> 8); truncatedVUI[7] = UInt8((spsLength - 3) & 0xff)
        #expect(answer(truncatedVUI) == 0)                                      // the restriction cut off
        #expect(answer(record) == 1)
    }
}
