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
        let mapper = try DolbyVisionMapper(whiteNits: Double(ToneCurve.referenceWhite))
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
        let mapper = try DolbyVisionMapper(whiteNits: Double(ToneCurve.referenceWhite))
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

/// The mapper against a reference written out here in Double from the definitions
/// (libplacebo's order), on a flat picture with an RPU built by hand: curves the real
/// samples do not have — two-piece MMR of orders 1 and 3, an order-2 MMR, a two-piece
/// order-2 polynomial — so every reshaping path is checked, not only the common ones.
@Suite("Dolby Vision reshaping paths")
struct DolbyVisionReshapingTests {
    static let denom = 23
    static func q(_ x: Double) -> Int64 { Int64((x * Double(1 << denom)).rounded()) }

    struct Piece { var mmr: Bool; var order: Int; var poly: [Double] = []; var constant = 0.0; var mmrCoef: [[Double]] = [] }
    struct Curve { var pivots: [Int]; var pieces: [Piece] }

    static let curves: [Curve] = [
        Curve(pivots: [0, 512, 1023], pieces: [Piece(mmr: false, order: 1, poly: [0.02, 0.9, 0]),
                                               Piece(mmr: false, order: 2, poly: [0.05, 0.7, 0.2])]),
        Curve(pivots: [0, 300, 1023], pieces: [
            Piece(mmr: true, order: 1, constant: 0.1, mmrCoef: [[0.05, 0.8, 0.02, 0.1, -0.05, 0.03, 0.01]]),
            Piece(mmr: true, order: 3, constant: -0.05, mmrCoef: [[0.1, 0.9, -0.05, 0.02, 0.01, -0.02, 0.05],
                                                                 [0.01, -0.1, 0.02, 0.03, 0, 0.01, -0.01],
                                                                 [0, 0.05, 0, -0.01, 0.02, 0, 0.01]])]),
        Curve(pivots: [0, 1023], pieces: [Piece(mmr: true, order: 2, constant: 0.08,
                                                mmrCoef: [[-0.02, 0.03, 0.85, 0.01, 0.02, -0.03, 0],
                                                          [0.01, 0, 0.05, 0, -0.01, 0.02, 0.01]])]),
    ]
    static let ycc: [Double] = [8192, 799, 1681, 8192, -933, 1091, 8192, 267, -5545].map { $0 / 8192 }
    static let offset: [Double] = [0, 0.5, 0.5]
    static let lms: [Double] = [17081, -349, -349, -349, 17081, -349, -349, -349, 17081].map { $0 / 16384 }
    static let hpe: [Double] = [3.06441879, -2.16597676, 0.10155818, -0.65612108, 1.78554118, -0.12943749,
                                0.01736321, -0.04725154, 1.03004253]

    static func pqEOTF(_ x: Double) -> Double {
        let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32
        let p = pow(max(x, 0), 1 / m2)
        return pow(max(p - c1, 0) / (c2 - c3 * p), 1 / m1)
    }

    /// Linear BT.2020 RGB (1.0 = 100 cd/m²) for one pixel's 10-bit codes.
    static func reference(_ codes: [Int]) -> [Double] {
        let sig = codes.map { Double($0) / 1023 }
        var reshaped: [Double] = []
        for (c, curve) in curves.enumerated() {
            let pivots = curve.pivots.map { Double($0) / 1023 }
            var i = 0
            while i < curve.pieces.count - 1 && sig[c] >= pivots[i + 1] { i += 1 }
            let p = curve.pieces[i]
            var v: Double
            if !p.mmr {
                v = p.poly[0] + p.poly[1] * sig[c] + p.poly[2] * sig[c] * sig[c]
            } else {
                let t = [sig[0], sig[1], sig[2], sig[0] * sig[1], sig[0] * sig[2], sig[1] * sig[2], sig[0] * sig[1] * sig[2]]
                v = p.constant
                for o in 0..<p.order { for k in 0..<7 { v += p.mmrCoef[o][k] * pow(t[k], Double(o + 1)) } }
            }
            reshaped.append(min(max(v, pivots.first!), pivots.last!))
        }
        let d = (0..<3).map { reshaped[$0] - offset[$0] }
        let lmsPQ = (0..<3).map { r in (0..<3).reduce(0.0) { $0 + ycc[r * 3 + $1] * d[$1] } }
        let lmsLinear = lmsPQ.map { pqEOTF(min(max($0, 0), 1)) }
        var m = [Double](repeating: 0, count: 9)
        for r in 0..<3 { for c in 0..<3 { m[r * 3 + c] = (0..<3).reduce(0.0) { $0 + hpe[r * 3 + $1] * lms[$1 * 3 + c] } } }
        return (0..<3).map { r in max(0, (0..<3).reduce(0.0) { $0 + m[r * 3 + $1] * lmsLinear[$1] } * 10000 / Double(ToneCurve.referenceWhite)) }
    }

    /// A flat 64x64 yuv420p10 picture carrying the hand-built RPU.
    static func picture(_ codes: [Int]) throws -> Frame {
        let frame = try Frame()
        let f = frame.pointer
        f.pointee.format = AV_PIX_FMT_YUV420P10LE.rawValue
        f.pointee.width = 64
        f.pointee.height = 64
        #expect(av_frame_get_buffer(f, 0) >= 0)
        for plane in 0..<3 {
            let h = plane == 0 ? 64 : 32, w = plane == 0 ? 64 : 32
            let base = [f.pointee.data.0, f.pointee.data.1, f.pointee.data.2][plane]!
            let stride = Int([f.pointee.linesize.0, f.pointee.linesize.1, f.pointee.linesize.2][plane])
            for y in 0..<h {
                let row = UnsafeMutableRawPointer(base + y * stride).assumingMemoryBound(to: UInt16.self)
                for x in 0..<w { row[x] = UInt16(codes[plane]) }
            }
        }
        var size = 0
        let md = try #require(av_dovi_metadata_alloc(&size))
        defer { av_free(md) }
        let header = av_dovi_get_header(md)!
        header.pointee.bl_bit_depth = 10
        header.pointee.coef_log2_denom = UInt8(denom)
        header.pointee.disable_residual_flag = 1
        let mapping = av_dovi_get_mapping(md)!
        withUnsafeMutablePointer(to: &mapping.pointee.curves) { curvesPointer in
            curvesPointer.withMemoryRebound(to: AVDOVIReshapingCurve.self, capacity: 3) { out in
                for (c, curve) in curves.enumerated() {
                    out[c].num_pivots = UInt8(curve.pivots.count)
                    withUnsafeMutableBytes(of: &out[c].pivots) { $0.withMemoryRebound(to: UInt16.self) { p in
                        for (i, v) in curve.pivots.enumerated() { p[i] = UInt16(v) } } }
                    for (i, piece) in curve.pieces.enumerated() {
                        withUnsafeMutableBytes(of: &out[c].mapping_idc) { $0.withMemoryRebound(to: AVDOVIMappingMethod.self) {
                            $0[i] = piece.mmr ? AV_DOVI_MAPPING_MMR : AV_DOVI_MAPPING_POLYNOMIAL } }
                        if piece.mmr {
                            withUnsafeMutableBytes(of: &out[c].mmr_order) { $0[i] = UInt8(piece.order) }
                            withUnsafeMutableBytes(of: &out[c].mmr_constant) { $0.withMemoryRebound(to: Int64.self) { $0[i] = q(piece.constant) } }
                            withUnsafeMutableBytes(of: &out[c].mmr_coef) { $0.withMemoryRebound(to: Int64.self) { p in
                                for o in 0..<piece.order { for k in 0..<7 { p[i * 21 + o * 7 + k] = q(piece.mmrCoef[o][k]) } } } }
                        } else {
                            withUnsafeMutableBytes(of: &out[c].poly_order) { $0[i] = UInt8(piece.order) }
                            withUnsafeMutableBytes(of: &out[c].poly_coef) { $0.withMemoryRebound(to: Int64.self) { p in
                                for k in 0..<3 { p[i * 3 + k] = q(piece.poly[k]) } } }
                        }
                    }
                }
            }
        }
        let color = av_dovi_get_color(md)!
        withUnsafeMutableBytes(of: &color.pointee.ycc_to_rgb_matrix) { $0.withMemoryRebound(to: AVRational.self) { p in
            for i in 0..<9 { p[i] = AVRational(num: Int32((ycc[i] * 8192).rounded()), den: 8192) } } }
        withUnsafeMutableBytes(of: &color.pointee.ycc_to_rgb_offset) { $0.withMemoryRebound(to: AVRational.self) { p in
            for i in 0..<3 { p[i] = AVRational(num: Int32(offset[i] * 1024), den: 1024) } } }
        withUnsafeMutableBytes(of: &color.pointee.rgb_to_lms_matrix) { $0.withMemoryRebound(to: AVRational.self) { p in
            for i in 0..<9 { p[i] = AVRational(num: Int32((lms[i] * 16384).rounded()), den: 16384) } } }
        color.pointee.source_max_pq = 3079
        let side = try #require(av_frame_new_side_data(f, AV_FRAME_DATA_DOVI_METADATA, size))
        memcpy(side.pointee.data, md, size)
        return frame
    }

    @Test("polynomial, one- and two-piece MMR of orders 1 to 3: the mapped picture is the reference's", arguments: [
        [100, 200, 300], [600, 250, 700], [900, 512, 512], [512, 299, 800], [512, 301, 100], [1000, 900, 20],
    ])
    func matchesReference(codes: [Int]) throws {
        let mapper = try DolbyVisionMapper(whiteNits: Double(ToneCurve.referenceWhite))
        let mapped = try mapper.map(try Self.picture(codes), width: 32, height: 32).pointer.pointee
        func sample(_ plane: Int) -> Double {
            let base = [mapped.data.0, mapped.data.1, mapped.data.2][plane]!
            let stride = Int([mapped.linesize.0, mapped.linesize.1, mapped.linesize.2][plane])
            return Double(UnsafeMutableRawPointer(base + 16 * stride).assumingMemoryBound(to: Float.self)[16])
        }
        let got = [sample(2), sample(0), sample(1)]   // gbrp: G, B, R planes → R, G, B
        let want = Self.reference(codes)
        for (g, w) in zip(got, want) {
            // 16-bit intermediate planes and a 16-bit PQ table: well under a percent.
            #expect(abs(g - w) <= max(0.01 * w, 1e-3), "codes \(codes): got \(got), want \(want)")
        }
    }
}
