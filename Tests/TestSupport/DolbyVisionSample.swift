import Foundation

/// Dolby Vision profile 5 test media, which no shared sample has, and its HDR10 twin: the
/// same flat colour patches once as a profile 5 stream (IPTPQc2 codes, reshaped, with an RPU
/// on every frame, no backward-compatible base layer) and once as plain HDR10 (PQ BT.2020
/// Y'CbCr). A correct profile 5 mapping makes both look the same after tone mapping.
///
/// Each patch has a known linear BT.2020 colour; both files are encoded losslessly, so every
/// decoded sample at a patch's centre is exactly the code computed here.
public enum DolbyVisionSample {
    public static let width = 1280, height = 720, frameRate = 24, frameCount = 48

    public struct Patch: Sendable {
        public let name: String
        /// Where the patch is in the 1280×720 source; every edge is on a multiple of 16 px, so
        /// no macroblock, CTU or 4:2:0 chroma sample straddles two patches.
        public let x: Int, y: Int, width: Int, height: Int
        /// Linear BT.2020 RGB in cd/m² (nits). All inside the BT.709 gamut, so the SDR output
        /// clips none of them.
        public let nits: SIMD3<Double>
    }

    /// Five columns of 256 px by three rows of 240 px, filling the frame.
    public static let patches: [Patch] = {
        let rows: [[(String, SIMD3<Double>)]] = [
            [("black", [0.5, 0.5, 0.5]), ("dark grey", [5, 5, 5]), ("grey", [20, 20, 20]),
             ("white", [100, 100, 100]), ("bright", [600, 600, 600])],
            [("red", [130, 22, 12]), ("green", [43, 102, 19]), ("blue", [29, 17, 360]),
             ("yellow", [85, 84, 16]), ("cyan", [34, 71, 87])],
            [("magenta", [83, 17, 110]), ("skin", [51, 39, 28]), ("orange", [136, 77, 18]),
             ("warm highlight", [280, 253, 206]), ("deep blue", [26, 30, 84])],
        ]
        return rows.enumerated().flatMap { r, row in
            row.enumerated().map { c, p in Patch(name: p.0, x: c * 256, y: r * 240, width: 256, height: 240, nits: p.1) }
        }
    }()

    // MARK: Files

    /// Profile 5 in MP4 (HEVC Main 10, full range, no colour description, an RPU NAL unit
    /// last in every access unit, no dvcC: only the bitstream says Dolby Vision) with an AAC
    /// tone. The name carries a version: bump it when the generator changes, as the file
    /// is cached in .build/test-media.
    public static func profile5() throws -> String {
        try Media.generated("dv-p5-iptpqc2-v1.mp4") { out in
            let dir = Media.scratch("dv5-gen")
            defer { try? FileManager.default.removeItem(at: dir) }
            let raw = dir.appendingPathComponent("frame.yuv").path
            try frame(profile5Codes).write(to: URL(fileURLWithPath: raw))
            let bare = dir.appendingPathComponent("bare.hevc").path
            try ffmpeg(rawInput(raw) + length + [
                "-c:v", "libx265", "-preset", "ultrafast",
                "-x265-params", "log-level=error:lossless=1:range=full:keyint=24:bframes=0",
                "-color_range", "pc", "-f", "hevc", bare])
            let stream = try Data(contentsOf: URL(fileURLWithPath: bare))
            let (withRPU, count) = appendingRPU(RPU.nal, toAccessUnitsOf: [UInt8](stream))
            guard count == frameCount else { throw TestFailure("found \(count) access units, not \(frameCount)") }
            let dv = dir.appendingPathComponent("dv.hevc").path
            try Data(withRPU).write(to: URL(fileURLWithPath: dv))
            try ffmpeg(["-framerate", "\(frameRate)", "-i", dv] + tone + length + [
                "-map", "0:v", "-map", "1:a", "-c:v", "copy", "-tag:v", "hvc1", "-c:a", "aac", "-b:a", "128k",
                "-f", "mp4", out])
        }
    }

    /// The same patches as HDR10 (PQ, BT.2020 non-constant luminance, limited range, with
    /// mastering display and content light level) in MKV with an AAC tone.
    public static func hdr10Twin() throws -> String {
        try Media.generated("dv-p5-hdr10-twin-v1.mkv") { out in
            let dir = Media.scratch("dv5-twin")
            defer { try? FileManager.default.removeItem(at: dir) }
            let raw = dir.appendingPathComponent("frame.yuv").path
            try frame(hdr10Codes).write(to: URL(fileURLWithPath: raw))
            try ffmpeg(rawInput(raw) + tone + length + [
                "-map", "0:v", "-map", "1:a", "-c:v", "libx265", "-preset", "ultrafast",
                "-x265-params", "log-level=error:lossless=1:keyint=24:bframes=0:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:range=limited:master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1):max-cll=1000,400",
                "-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-color_range", "tv",
                "-c:a", "aac", "-b:a", "128k", "-f", "matroska", out])
        }
    }

    static let tone = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]

    /// One raw frame, looped to the clip's length.
    static func rawInput(_ path: String) -> [String] {
        ["-f", "rawvideo", "-pix_fmt", "yuv420p10le", "-s", "\(width)x\(height)", "-framerate", "\(frameRate)",
         "-stream_loop", "\(frameCount - 1)", "-i", path]
    }

    /// The clip's length, as output options.
    static let length = ["-frames:v", "\(frameCount)", "-t", "\(frameCount / frameRate)"]

    static func ffmpeg(_ args: [String]) throws {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args)
        guard r.status == 0 else { throw TestFailure("ffmpeg \(args.joined(separator: " ")): \(r.stderr)") }
    }

    /// A yuv420p10le frame with every patch filled with its three codes.
    static func frame(_ codes: (Patch) -> SIMD3<Int>) -> Data {
        var planes = [[UInt16](repeating: 0, count: width * height),
                      [UInt16](repeating: 0, count: width * height / 4),
                      [UInt16](repeating: 0, count: width * height / 4)]
        for p in patches {
            let c = codes(p)
            for row in p.y..<(p.y + p.height) {
                for col in p.x..<(p.x + p.width) { planes[0][row * width + col] = UInt16(c[0]) }
            }
            for row in (p.y / 2)..<((p.y + p.height) / 2) {
                for col in (p.x / 2)..<((p.x + p.width) / 2) {
                    planes[1][row * width / 2 + col] = UInt16(c[1])
                    planes[2][row * width / 2 + col] = UInt16(c[2])
                }
            }
        }
        var data = Data()
        for plane in planes { plane.map(\.littleEndian).withUnsafeBytes { data.append(contentsOf: $0) } }
        return data
    }

    // MARK: Colour

    /// SMPTE ST 2084 inverse EOTF: linear light (1.0 = 10000 nits) to signal.
    public static func pqEncode(_ y: Double) -> Double {
        let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128
        let c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32
        let p = pow(max(y, 0), m1)
        return pow((c1 + c2 * p) / (1 + c3 * p), m2)
    }

    /// SMPTE ST 2084 EOTF: signal to linear light (1.0 = 10000 nits).
    public static func pqDecode(_ e: Double) -> Double {
        let m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128
        let c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32
        let p = pow(max(e, 0), 1 / m2)
        return pow(max(p - c1, 0) / (c2 - c3 * p), 1 / m1)
    }

    /// HDR10 codes: PQ R'G'B' to BT.2020 non-constant-luminance Y'CbCr, limited range 10-bit.
    public static func hdr10Codes(_ patch: Patch) -> SIMD3<Int> {
        let e = SIMD3(pqEncode(patch.nits[0] / 10000), pqEncode(patch.nits[1] / 10000), pqEncode(patch.nits[2] / 10000))
        let y = 0.2627 * e[0] + 0.6780 * e[1] + 0.0593 * e[2]
        let cb = (e[2] - y) / 1.8814, cr = (e[0] - y) / 1.4746
        return SIMD3(Int((64 + 876 * y).rounded()), Int((512 + 896 * cb).rounded()), Int((512 + 896 * cr).rounded()))
    }

    /// What HDR10 codes stand for, in linear BT.2020 nits.
    public static func hdr10Decode(_ codes: SIMD3<Int>) -> SIMD3<Double> {
        let y = Double(codes[0] - 64) / 876, cb = Double(codes[1] - 512) / 896, cr = Double(codes[2] - 512) / 896
        let r = y + 1.4746 * cr, b = y + 1.8814 * cb
        let g = (y - 0.2627 * r - 0.0593 * b) / 0.6780
        return SIMD3(pqDecode(r), pqDecode(g), pqDecode(b)) * 10000
    }

    /// LMS to BT.2020 RGB (Hunt-Pointer-Estévez based), as Dolby Vision decoders apply it
    /// after the RPU's rgb_to_lms matrix: rgb = HPE_LMS2RGB · L · lms.
    static let hpeLMSToRGB: [[Double]] = [[3.06441879, -2.16597676, 0.10155818],
                                          [-0.65612108, 1.78554118, -0.12943749],
                                          [0.01736321, -0.04725154, 1.03004253]]
    /// The decoder's LMS → RGB, M = HPE_LMS2RGB × L, and its inverse for the encoder.
    static let lmsToRGB = product(hpeLMSToRGB, matrix(RPU.rgbToLMS, scale: 16384))
    static let rgbToLMS = inverse(lmsToRGB)
    /// L'M'S' = N · (IPT − offset), with N and the offset from the RPU.
    static let iptToLMS = matrix(RPU.yccToRGB, scale: 8192)
    static let lmsToIPT = inverse(iptToLMS)
    static let iptOffset = SIMD3(RPU.yccToRGBOffset.map { Double($0) / Double(1 << 28) })

    /// Profile 5 codes (I, P, T; full-range 10-bit) for a patch: linear RGB → LMS → PQ →
    /// IPT, then through the inverse of the RPU's reshaping. Each code is the one whose
    /// reshaped value is nearest the wanted one, searched over all 1024, so the decoder's
    /// value is exact for the code written (luma first, then T, then P, whose MMR curve
    /// reads the other two components' codes).
    public static func profile5Codes(_ patch: Patch) -> SIMD3<Int> {
        let lms = apply(rgbToLMS, patch.nits / 10000)
        precondition(lms.min() >= 0, "\(patch.name) is outside the LMS cone")
        let lmsPQ = SIMD3(pqEncode(lms[0]), pqEncode(lms[1]), pqEncode(lms[2]))
        let ipt = apply(lmsToIPT, lmsPQ) + iptOffset
        precondition(ipt.min() >= 0 && ipt.max() <= 1, "\(patch.name) has IPT \(ipt) outside [0, 1]")
        func nearest(_ component: Int, _ codes: (Int) -> SIMD3<Int>) -> Int {
            (0...1023).min { abs(RPU.reshape(codes($0))[component] - ipt[component]) < abs(RPU.reshape(codes($1))[component] - ipt[component]) }!
        }
        let i = nearest(0) { SIMD3($0, 512, 512) }
        let t = nearest(2) { SIMD3(i, 512, $0) }
        let p = nearest(1) { SIMD3(i, $0, t) }
        return SIMD3(i, p, t)
    }

    /// What a Dolby Vision decoder makes of profile 5 codes, in linear BT.2020 nits:
    /// reshape with the RPU's curves (or `reshape`, to model a decoder that gets them
    /// wrong), IPT → L'M'S', PQ EOTF, LMS → RGB.
    public static func profile5Decode(_ codes: SIMD3<Int>,
                                      reshape: (SIMD3<Int>) -> SIMD3<Double> = RPU.reshape) -> SIMD3<Double> {
        let lmsPQ = apply(iptToLMS, reshape(codes) - iptOffset)
        let lms = SIMD3(pqDecode(lmsPQ[0]), pqDecode(lmsPQ[1]), pqDecode(lmsPQ[2]))
        return apply(lmsToRGB, lms) * 10000
    }

    static func matrix(_ coefficients: [Int], scale: Double) -> [[Double]] {
        (0..<3).map { r in (0..<3).map { c in Double(coefficients[r * 3 + c]) / scale } }
    }

    static func apply(_ m: [[Double]], _ v: SIMD3<Double>) -> SIMD3<Double> {
        SIMD3((0..<3).map { r in m[r][0] * v[0] + m[r][1] * v[1] + m[r][2] * v[2] })
    }

    static func product(_ a: [[Double]], _ b: [[Double]]) -> [[Double]] {
        (0..<3).map { r in (0..<3).map { c in (0..<3).reduce(0) { $0 + a[r][$1] * b[$1][c] } } }
    }

    static func inverse(_ m: [[Double]]) -> [[Double]] {
        func minor(_ r: Int, _ c: Int) -> Double {
            let rs = (0..<3).filter { $0 != r }, cs = (0..<3).filter { $0 != c }
            return m[rs[0]][cs[0]] * m[rs[1]][cs[1]] - m[rs[0]][cs[1]] * m[rs[1]][cs[0]]
        }
        let det = (0..<3).reduce(0) { $0 + (($1 % 2 == 0) ? 1 : -1) * m[0][$1] * minor(0, $1) }
        return (0..<3).map { r in (0..<3).map { c in (((r + c) % 2 == 0) ? 1 : -1) * minor(c, r) / det } }
    }

    // MARK: RPU

    /// The one RPU every frame carries, in the syntax libavcodec's ff_dovi_rpu_parse reads
    /// (rpu_type 2, rpu_format 18, profile 5 sequence info, one mapping, DM data, no
    /// extension blocks), with dovi_tool's profile 5 colour matrices.
    public enum RPU {
        public static let coefLog2Denom = 23
        /// ycc_to_rgb_coef, /8192, row-major: L'M'S'_i = Σ_j N[i][j]·(IPT_j − offset_j).
        public static let yccToRGB = [8192, 799, 1681, 8192, -933, 1091, 8192, 267, -5545]
        /// ycc_to_rgb_offset, /2^28.
        public static let yccToRGBOffset: [UInt32] = [0, 1 << 27, 1 << 27]
        /// rgb_to_lms_coef, /16384.
        public static let rgbToLMS = [17081, -349, -349, -349, 17081, -349, -349, -349, 17081]
        /// 12-bit PQ codes: about 0.005 and 1000 nits.
        public static let sourceMinPQ = 62, sourceMaxPQ = 3079

        public enum Piece: Equatable, Sendable {
            /// out = Σ c_k·s^k, coefficients in units of 2^-coefLog2Denom.
            case polynomial([Int64])
            /// Order 1: out = const + a0·s0 + a1·s1 + a2·s2 + a3·s0s1 + a4·s0s2 + a5·s1s2 +
            /// a6·s0s1s2, where s0…s2 are the pixel's three codes before reshaping.
            case mmr(constant: Int64, coefficients: [Int64])
        }

        public struct Curve: Equatable, Sendable {
            /// 10-bit code values; piece i covers [pivots[i], pivots[i+1]).
            public let pivots: [Int]
            public let pieces: [Piece]
        }

        static func fixed(_ x: Double) -> Int64 { Int64((x * Double(1 << coefLog2Denom)).rounded()) }

        /// I: 0.8·s below the middle pivot, then a parabola through (p, 0.8p) and (1, 1)
        /// with slope 0.8 at p, so the curve is continuous and rising. P: an MMR map that
        /// mixes in the luma and T codes. T: a straight line that moves neutral off 512.
        /// Every one differs from identity enough that ignoring it shows in the picture.
        public static let curves: [Curve] = {
            let p = 512.0 / 1023, k = 0.2 / ((1 - p) * (1 - p))
            return [
                Curve(pivots: [0, 512, 1023], pieces: [
                    .polynomial([0, fixed(0.8)]),
                    .polynomial([fixed(k * p * p), fixed(0.8 - 2 * k * p), fixed(k)]),
                ]),
                Curve(pivots: [0, 1023], pieces: [
                    .mmr(constant: fixed(-0.1), coefficients: [fixed(0.15), fixed(0.9), fixed(0.05), fixed(0.1), 0, 0, 0]),
                ]),
                Curve(pivots: [0, 1023], pieces: [.polynomial([fixed(0.08), fixed(0.8)])]),
            ]
        }()

        /// The decoder's reshaping of one pixel's codes to normalised IPT.
        public static func reshape(_ codes: SIMD3<Int>) -> SIMD3<Double> {
            let s = SIMD3((0..<3).map { min(max(Double(codes[$0]) / 1023, 0), 1) })
            let denom = Double(1 << coefLog2Denom)
            return SIMD3((0..<3).map { c -> Double in
                let curve = curves[c]
                let pivots = curve.pivots.map { Double($0) / 1023 }
                let i = (0..<curve.pieces.count).last { pivots[$0] <= s[c] } ?? 0
                let out: Double
                switch curve.pieces[i] {
                case .polynomial(let coefficients):
                    out = coefficients.enumerated().reduce(0) { $0 + Double($1.element) / denom * pow(s[c], Double($1.offset)) }
                case .mmr(let constant, let a):
                    let terms = [s[0], s[1], s[2], s[0] * s[1], s[0] * s[2], s[1] * s[2], s[0] * s[1] * s[2]]
                    out = Double(constant) / denom + zip(a, terms).reduce(0) { $0 + Double($1.0) / denom * $1.1 }
                }
                return min(max(out, pivots.first!), pivots.last!)
            })
        }

        /// The RPU NAL unit: header (type 62), then the escaped payload.
        public static let nal: [UInt8] = [0x7C, 0x01] + escaped(payload)

        /// 0x19, the RPU bits, the CRC-32/MPEG-2 of those bytes, and 0x80.
        public static let payload: [UInt8] = {
            var w = BitWriter()
            w.bits(2, 6)                      // rpu_type
            w.bits(18, 11)                    // rpu_format
            w.bits(0, 4); w.bits(0, 4)        // vdr_rpu_profile, vdr_rpu_level
            w.bit(true)                       // vdr_seq_info_present_flag
            w.bit(false)                      // chroma_resampling_explicit_filter_flag
            w.bits(0, 2)                      // coefficient_data_type: fixed point
            w.ue(UInt64(coefLog2Denom))
            w.bits(1, 2)                      // vdr_rpu_normalized_idc
            w.bit(true)                       // bl_video_full_range_flag
            w.ue(2); w.ue(2); w.ue(4)         // BL, EL and VDR bit depth − 8
            w.bit(false)                      // spatial_resampling_filter_flag
            w.bits(0, 3)                      // reserved_zero_3bits
            w.bit(false)                      // el_spatial_resampling_filter_flag
            w.bit(true)                       // disable_residual_flag
            w.bit(true)                       // vdr_dm_metadata_present_flag
            w.bit(false)                      // use_prev_vdr_rpu_flag
            w.ue(0)                           // vdr_rpu_id
            w.ue(0); w.ue(0)                  // mapping_color_space, mapping_chroma_format_idc
            for curve in curves {
                w.ue(UInt64(curve.pivots.count - 2))
                var previous = 0
                for pivot in curve.pivots { w.bits(UInt64(pivot - previous), 10); previous = pivot }
            }
            w.ue(0); w.ue(0)                  // num_x_partitions − 1, num_y_partitions − 1
            for curve in curves {
                for piece in curve.pieces {
                    switch piece {
                    case .polynomial(let c):
                        w.ue(0)               // mapping_idc: polynomial
                        w.ue(UInt64(c.count - 2))
                        if c.count == 2 { w.bit(false) }   // linear_interp_flag
                        for x in c { w.coefficient(x) }
                    case .mmr(let constant, let a):
                        w.ue(1)               // mapping_idc: MMR
                        w.bits(0, 2)          // mmr_order − 1
                        w.coefficient(constant)
                        for x in a { w.coefficient(x) }
                    }
                }
            }
            w.ue(0); w.ue(0); w.ue(0)         // affected_dm_metadata_id, current_dm_metadata_id, scene_refresh_flag
            for x in yccToRGB { w.signed(x, 16) }
            for x in yccToRGBOffset { w.bits(UInt64(x), 32) }
            for x in rgbToLMS { w.signed(x, 16) }
            w.bits(65535, 16)                 // signal_eotf
            w.bits(0, 16); w.bits(0, 16); w.bits(0, 32)   // signal_eotf_param0…2
            w.bits(12, 5)                     // signal_bit_depth
            w.bits(2, 2)                      // signal_color_space: IPT
            w.bits(0, 2)                      // signal_chroma_format
            w.bits(1, 2)                      // signal_full_range_flag
            w.bits(UInt64(sourceMinPQ), 12); w.bits(UInt64(sourceMaxPQ), 12)
            w.bits(42, 10)                    // source_diagonal (inches)
            w.ue(0)                           // num_ext_blocks
            w.align()
            let crc = crc32MPEG2(w.bytes)
            return [0x19] + w.bytes + (0..<4).map { UInt8(truncatingIfNeeded: crc >> (24 - 8 * $0)) } + [0x80]
        }()
    }

    struct BitWriter {
        var bytes: [UInt8] = []
        var count = 0

        mutating func bit(_ b: Bool) {
            if count % 8 == 0 { bytes.append(0) }
            if b { bytes[bytes.count - 1] |= 0x80 >> UInt8(count % 8) }
            count += 1
        }
        mutating func bits(_ value: UInt64, _ n: Int) {
            for i in stride(from: n - 1, through: 0, by: -1) { bit((value >> UInt64(i)) & 1 == 1) }
        }
        /// Two's complement in n bits.
        mutating func signed(_ value: Int, _ n: Int) { bits(UInt64(bitPattern: Int64(value)) & ((1 << UInt64(n)) - 1), n) }
        /// Exp-Golomb ue(v).
        mutating func ue(_ value: UInt64) {
            let x = value + 1, n = 64 - x.leadingZeroBitCount
            bits(0, n - 1)
            bits(x, n)
        }
        mutating func se(_ value: Int64) { ue(value > 0 ? UInt64(2 * value - 1) : UInt64(-2 * value)) }
        /// A fixed-point coefficient: se(v) integer part (floor), then the fraction in
        /// coefLog2Denom bits, as ff_dovi_rpu_parse's get_se_coef reads it.
        mutating func coefficient(_ value: Int64) {
            let denom = RPU.coefLog2Denom
            se(value >> Int64(denom))
            bits(UInt64(value & ((1 << Int64(denom)) - 1)), denom)
        }
        mutating func align() { while count % 8 != 0 { bit(false) } }
    }

    /// CRC-32/MPEG-2 (polynomial 0x04C11DB7, initial 0xFFFFFFFF, not reflected, no final XOR).
    static func crc32MPEG2(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        }
        return crc
    }

    /// Emulation prevention: 0x03 after two zero bytes that a byte ≤ 3 follows.
    static func escaped(_ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [], zeros = 0
        for byte in payload {
            if zeros >= 2 && byte <= 3 { out.append(3); zeros = 0 }
            out.append(byte)
            zeros = byte == 0 ? zeros + 1 : 0
        }
        return out
    }

    // MARK: Annex B

    /// The NAL units of an Annex B stream (start codes and trailing zero bytes removed).
    static func nalUnits(_ stream: [UInt8]) -> [ArraySlice<UInt8>] {
        var starts: [(code: Int, payload: Int)] = []
        var i = 0
        while i + 2 < stream.count {
            if stream[i] == 0, stream[i + 1] == 0, stream[i + 2] == 1 {
                starts.append((i, i + 3))
                i += 3
            } else {
                i += 1
            }
        }
        return starts.indices.map { k in
            var end = k + 1 < starts.count ? starts[k + 1].code : stream.count
            while end > starts[k].payload, stream[end - 1] == 0 { end -= 1 }
            return stream[starts[k].payload..<end]
        }
    }

    /// The stream with `nal` appended to every access unit (after its last NAL unit), and
    /// how many access units there were. A new access unit starts at a VPS, SPS, PPS, AUD,
    /// prefix SEI or reserved 41–44/48–55 NAL unit, or a slice with
    /// first_slice_segment_in_pic_flag, once the current one has a picture.
    static func appendingRPU(_ nal: [UInt8], toAccessUnitsOf stream: [UInt8]) -> ([UInt8], Int) {
        let startCode: [UInt8] = [0, 0, 0, 1]
        var out: [UInt8] = [], units = 0, hasPicture = false
        for unit in nalUnits(stream) where unit.count >= 2 {
            let type = Int(unit[unit.startIndex] >> 1) & 0x3F
            let isSlice = type < 32
            let startsUnit = (32...35).contains(type) || type == 39 || (41...44).contains(type) || (48...55).contains(type)
                || (isSlice && unit.count > 2 && unit[unit.startIndex + 2] & 0x80 != 0)
            if startsUnit && hasPicture {
                out += startCode + nal
                units += 1
                hasPicture = false
            }
            out += startCode + unit
            if isSlice { hasPicture = true }
        }
        if hasPicture { out += startCode + nal; units += 1 }
        return (out, units)
    }
}
