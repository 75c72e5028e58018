import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

// The Dolby Vision mapper against an independent path on a real file. A profile 8 stream
// carries an RPU too, with identity reshaping and the BT.2020 Y'CbCr matrices, so mapping
// its pictures through the RPU must give what the ordinary HDR10 path (zscale from PQ
// Y'CbCr) gives. That checks the matrices, the offsets, the PQ curve, the HPE LMS
// conversion and the scale the tone mapper expects, on pictures nobody drew for the test.

@Suite("Dolby Vision RPU mapping")
struct DolbyVisionMapperTests {
    /// The first decoded pictures of a file's video stream, each pushed through `body`.
    private func firstPictures(_ path: String, count: Int, _ body: (Frame, Decoder) throws -> Void) throws {
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let index = (0..<demuxer.streamCount).first { demuxer.stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO }!
        let decoder = try Decoder(stream: demuxer.stream(index))
        let packet = try Packet()
        var seen = 0
        while seen < count, try demuxer.read(into: packet) {
            defer { packet.unref() }
            guard packet.pointer.pointee.stream_index == Int32(index) else { continue }
            try decoder.decode(packet) { (frame: Frame) throws(KilnError) in
                guard seen < count else { return }
                seen += 1
                do { try body(frame, decoder) } catch { throw KilnError(.internalError, stage: .filter, "\(error)") }
            }
        }
        #expect(seen == count)
    }

    /// Runs `frame` through the engine's tone-mapping chain for `toneMap` at w x h and
    /// returns the yuv420p planes.
    private func toneMapped(_ frame: Frame, _ toneMap: ToneMapSource, width: Int, height: Int, timeBase: AVRational) throws -> [[UInt8]] {
        let plan = VideoPlan(sourceIndex: 0, action: .transcode, codec: "h264", width: width, height: height, bitrateKbps: 1000,
                             toneMap: true, deinterlace: false, rotation: 0, encoder: nil)
        let input = VideoInput(frame.pointer, interlacedSeen: false)
        let graph = try VideoFilterGraph(input: input, timeBase: timeBase, frameRate: AVRational(num: 24, den: 1),
                                         description: videoFilterDescription(plan: plan, input: input, toneMap: toneMap, outputMatrix: "bt709"))
        try graph.push(frame)
        try graph.push(nil)
        let out = try Frame()
        #expect(try graph.pull(into: out))
        let p = out.pointer.pointee
        var planes: [[UInt8]] = []
        for (i, (w, h)) in [(width, height), (width / 2, height / 2), (width / 2, height / 2)].enumerated() {
            let base = [p.data.0, p.data.1, p.data.2][i]!, stride = Int([p.linesize.0, p.linesize.1, p.linesize.2][i])
            planes.append((0..<h).flatMap { y in (0..<w).map { base[y * stride + $0] } })
        }
        return planes
    }

    @Test("profile 8 mapped through its RPU matches the HDR10 path on the same pictures")
    func profile8MatchesHDR10Path() throws {
        let path = Media.shared("sp_sparks_dovi_8.mp4")
        let mapper = try DolbyVisionMapper()
        try firstPictures(path, count: 3) { frame, decoder in
            #expect(av_frame_get_side_data(frame.pointer, AV_FRAME_DATA_DOVI_METADATA) != nil, "libavcodec exports the RPU")
            let w = 320, h = 180   // downscaled, as a transcode to a smaller rung does
            let reference = try toneMapped(frame, .pq, width: w, height: h, timeBase: decoder.timeBase)
            let mapped = try mapper.map(frame, width: Int32(w), height: Int32(h))
            #expect(mapped.pointer.pointee.format == AV_PIX_FMT_GBRPF32LE.rawValue)
            #expect(mapped.pointer.pointee.color_trc == AVCOL_TRC_LINEAR)
            let viaRPU = try toneMapped(mapped, .dolbyVision, width: w, height: h, timeBase: decoder.timeBase)
            for (plane, name) in zip(0..<3, ["Y", "Cb", "Cr"]) {
                let a = reference[plane], b = viaRPU[plane]
                let meanDiff = zip(a, b).map { abs(Int($0) - Int($1)) }.reduce(0, +)
                let mean = Double(meanDiff) / Double(a.count)
                let meanA = Double(a.map(Int.init).reduce(0, +)) / Double(a.count)
                let meanB = Double(b.map(Int.init).reduce(0, +)) / Double(b.count)
                // Scaler and chroma upsampling differ (libswscale 4:4:4 16-bit vs zscale),
                // so single pixels may move; the picture as a whole may not.
                #expect(mean < 1.5, "\(name): mean absolute difference \(mean) code values")
                #expect(abs(meanA - meanB) < 1.0, "\(name): means \(meanA) vs \(meanB)")
            }
        }
    }

    @Test("a picture without any RPU is refused with a reason, not mapped to garbage")
    func noRPU() throws {
        let mapper = try DolbyVisionMapper()
        let path = try Media.generated("hdr10-no-rpu.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=24", "-t", "0.2", "-pix_fmt", "yuv420p10le",
            "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error"])
        try firstPictures(path, count: 1) { frame, _ in
            let error = #expect(throws: KilnError.self) { _ = try mapper.map(frame, width: 320, height: 180) }
            #expect(error?.code == .sourceUnsupported)
            #expect(error?.message.contains("RPU") == true)
        }
    }
}
