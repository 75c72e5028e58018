import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// Dolby Vision profile 5 (IPTPQc2, no backward-compatible base layer) against its HDR10
/// twin: the same flat patches, so a correct mapping through the RPU gives the same SDR
/// picture as the HDR10 path, patch by patch.
@Suite("Dolby Vision profile 5", .serialized)
struct DolbyVisionTests {
    typealias Sample = DolbyVisionSample
    static let outputWidth = 640, outputHeight = 360

    /// How far (in 8-bit code values, per channel) the profile 5 output may stray from the
    /// twin's. The two sources quantise the same colours differently (10-bit IPT through the
    /// reshaping curves, 10-bit limited-range Y'CbCr): through the tone curve that alone
    /// moves a patch by at most 1.1 (`quantisation`). The twin's output lies within 1.5 of
    /// the modelled curve, so the engine's own rounding (scaling, 8-bit 4:2:0, H.264) is
    /// about that size, and a profile 5 path rounds at other places. 4 leaves room for both
    /// and is far below what a mistake in the mapping costs (`negativeControls`): IPT read
    /// as Y'CbCr moves every patch by 60 or more, skipping the reshaping by 20 or more,
    /// skipping any one of its three curves moves most patches by more than 4.
    static let tolerance = 4.0
    /// How far the twin's output may stray from `sdrModel` (1.5 measured; x264's output
    /// depends a little on its thread count).
    static let modelTolerance = 3.0

    @Test("the generator's codes decode back to every patch's colour, and the files hold exactly those codes")
    func generator() throws {
        for p in Sample.patches {
            for decoded in [Sample.profile5Decode(Sample.profile5Codes(p)), Sample.hdr10Decode(Sample.hdr10Codes(p))] {
                for c in 0..<3 {
                    // 10-bit PQ steps are under 1 % apart below 1000 nits.
                    #expect(abs(decoded[c] - p.nits[c]) <= 0.015 * p.nits[c] + 0.01, "\(p.name): \(decoded) for \(p.nits)")
                }
            }
        }
        // Lossless: the decoder returns the computed codes at every patch's centre.
        for (path, codes) in [(try Sample.profile5(), Sample.profile5Codes), (try Sample.hdr10Twin(), Sample.hdr10Codes)] {
            let planes = try firstFrame10Bit(path)
            for p in Sample.patches {
                let x = p.x + p.width / 2, y = p.y + p.height / 2
                let chroma = y / 2 * Sample.width / 2 + x / 2
                let got = SIMD3(Int(planes[0][y * Sample.width + x]), Int(planes[1][chroma]), Int(planes[2][chroma]))
                #expect(got == codes(p), "\(p.name) in \(path)")
            }
        }
    }

    @Test("libavcodec reads the sample's RPU, on every frame, as exactly the curves, matrices and offsets written")
    func rpu() throws {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_frames", "-print_format", "json",
                                            try Sample.profile5()])
        #expect(r.status == 0, "\(r.stderr)")
        guard case .array(let frames)? = try JSONValue.parse(Array(r.stdout.utf8))["frames"] else {
            throw TestFailure("ffprobe listed no frames")
        }
        #expect(frames.count == Sample.frameCount)
        let metadata: [JSONValue] = frames.compactMap { frame in
            guard case .array(let list)? = frame["side_data_list"] else { return nil }
            return list.first { $0["side_data_type"]?.string == "Dolby Vision Metadata" }
        }
        #expect(metadata.count == Sample.frameCount, "every frame carries the RPU")
        let dovi = try #require(metadata.first)
        #expect(metadata.allSatisfy { $0 == dovi })
        let expected: [String: Int] = [
            "rpu_type": 2, "rpu_format": 18, "vdr_rpu_profile": 0, "coef_data_type": 0, "coef_log2_denom": 23,
            "vdr_rpu_normalized_idc": 1, "bl_video_full_range_flag": 1, "bl_bit_depth": 10, "el_bit_depth": 10,
            "vdr_bit_depth": 12, "disable_residual_flag": 1, "nlq_method_idc": -1, "signal_eotf": 65535,
            "signal_bit_depth": 12, "signal_color_space": 2, "signal_full_range_flag": 1,
            "source_min_pq": Sample.RPU.sourceMinPQ, "source_max_pq": Sample.RPU.sourceMaxPQ,
        ]
        for (key, value) in expected { #expect(dovi[key]?.int == value, "\(key)") }
        func joined<T>(_ values: [T]) -> String { values.map { "\($0)" }.joined(separator: " ") }
        #expect(dovi["ycc_to_rgb_matrix"]?.string == joined(Sample.RPU.yccToRGB.map { "\($0)/8192" }))
        #expect(dovi["ycc_to_rgb_offset"]?.string == joined(Sample.RPU.yccToRGBOffset.map { "\($0)/268435456" }))
        #expect(dovi["rgb_to_lms_matrix"]?.string == joined(Sample.RPU.rgbToLMS.map { "\($0)/16384" }))
        guard case .array(let components)? = dovi["components"] else { throw TestFailure("no reshaping components") }
        #expect(components.count == 3)
        for (component, curve) in zip(components, Sample.RPU.curves) {
            #expect(component["pivots"]?.string == joined(curve.pivots))
            guard case .array(let pieces)? = component["pieces"] else { throw TestFailure("no pieces") }
            #expect(pieces.count == curve.pieces.count)
            for (piece, written) in zip(pieces, curve.pieces) {
                switch written {
                case .polynomial(let c):
                    #expect(piece["mapping_idc_name"]?.string == "polynomial")
                    #expect(piece["poly_order"]?.int == c.count - 1)
                    #expect(piece["poly_coef"]?.string == joined(c))
                case .mmr(let constant, let a):
                    #expect(piece["mapping_idc_name"]?.string == "mmr")
                    #expect(piece["mmr_order"]?.int == 1)
                    #expect(piece["mmr_constant"]?.int == Int(constant))
                    #expect(piece["mmr_coef"]?.string == joined(a))
                }
            }
        }
    }

    @Test("the probe sees Dolby Vision profile 5 with no base layer, from the bitstream alone")
    func probe() throws {
        let video = try #require(try Prober.probe(path: try Sample.profile5()).videoStreams.first)
        #expect(video.hdr == .dolbyVision)
        #expect(video.hdr?.isHDR == true)
        let dv = try #require(video.dolbyVision)
        #expect(dv.profile == 5 && dv.blCompatibilityId == 0 && dv.baseLayer == nil)
        #expect(dv.rpuPresent && !dv.elPresent)
        #expect(dv.signalledIn == "bitstream")
        #expect(video.colorRange == "pc")
    }

    @Test("the HDR10 twin tone-maps to 8-bit BT.709 with every patch where the tone curve puts it")
    func twin() throws {
        let (out, dir) = try transcode(try Sample.hdr10Twin())
        defer { try? FileManager.default.removeItem(at: dir) }
        let colours = try Self.patchColours(out)
        for (p, got) in zip(Sample.patches, colours) {
            let want = Self.sdrModel(p.nits)
            #expect(Self.distance(got, want) <= Self.modelTolerance, "\(p.name): \(got), model \(want)")
        }
    }

    @Test("HDR10 comes out as bright as an SDR grade: a grey card where BT.2408 puts it, reference white near SDR white, highlights above it")
    func brightness() throws {
        let (out, dir) = try transcode(try Sample.hdr10Twin())
        defer { try? FileManager.default.removeItem(at: dir) }
        let colours = Dictionary(uniqueKeysWithValues: zip(Sample.patches.map(\.name), try Self.patchColours(out)))
        // BT.2408: HDR's 203 nits is SDR's 100 % white, shown on BT.1886's 2.4 power.
        func anchor(_ nits: Double) -> Double { pow(nits / 203, 1 / 2.4) * 255 }
        for (name, nits) in [("dark grey", 5.0), ("grey", 20.0)] {
            let got = try #require(colours[name])
            #expect(Self.distance(got, SIMD3(repeating: anchor(nits))) <= 3, "\(name) (\(nits) nits): \(got), BT.2408 \(anchor(nits))")
        }
        let white = try #require(colours["white"]), bright = try #require(colours["bright"])
        #expect(white.min() >= anchor(100) - 8, "100 nits: \(white), BT.2408 \(anchor(100))")
        #expect(bright.min() > white.max() + 40 && bright.max() < 252, "600 nits: \(bright), 100 nits: \(white)")
    }

    @Test("profile 5 tone-maps to the colours of its HDR10 twin")
    func profile5() throws {
        let (twin, d1) = try transcode(try Sample.hdr10Twin())
        defer { try? FileManager.default.removeItem(at: d1) }
        let (dv, d2) = try transcode(try Sample.profile5())
        defer { try? FileManager.default.removeItem(at: d2) }
        let want = try Self.patchColours(twin), got = try Self.patchColours(dv)
        for (p, (g, w)) in zip(Sample.patches, zip(got, want)) {
            #expect(Self.distance(g, w) <= Self.tolerance, "\(p.name): profile 5 \(g), HDR10 \(w)")
        }
    }

    @Test("the two encodings of each patch, through the same tone curve, differ by about one code value at most")
    func quantisation() {
        for p in Sample.patches {
            let dv = Self.sdrModel(Sample.profile5Decode(Sample.profile5Codes(p)))
            let hdr10 = Self.sdrModel(Sample.hdr10Decode(Sample.hdr10Codes(p)))
            #expect(Self.distance(dv, hdr10) <= 1.1, "\(p.name): \(dv) vs \(hdr10)")
        }
    }

    @Test("the comparison catches IPT codes read as BT.2020 Y'CbCr, and reshaping ignored")
    func negativeControls() throws {
        let (twin, dir) = try transcode(try Sample.hdr10Twin())
        defer { try? FileManager.default.removeItem(at: dir) }
        let want = try Self.patchColours(twin)
        // The profile 5 file through the HDR10 chain, as if its codes were PQ BT.2020 Y'CbCr.
        let asYCbCr = try Self.patchColours(try Sample.profile5(), filter: [
            "setparams=range=pc:color_primaries=bt2020:color_trc=smpte2084:colorspace=bt2020nc",
            "zscale=tin=smpte2084:min=bt2020nc:pin=bt2020:rin=full:t=linear:npl=203", "format=gbrpf32le", "zscale=p=bt709",
            "tonemap=tonemap=mobius:param=0.3:desat=0:peak=1000/203", "zscale=t=bt709:m=bt709:r=tv", "format=yuv420p",
        ].joined(separator: ","))
        for (p, (got, w)) in zip(Sample.patches, zip(asYCbCr, want)) {
            #expect(Self.distance(got, w) > 10 * Self.tolerance, "IPT read as Y'CbCr: \(p.name) \(got) vs \(w)")
        }
        // A decoder that skips the reshaping, or one of its curves, misses patches too
        // (modelled, against the patches' own colours through the same curve).
        func misses(_ reshape: @escaping (SIMD3<Int>) -> SIMD3<Double>) -> Int {
            Sample.patches.filter { p in
                let decoded = Sample.profile5Decode(Sample.profile5Codes(p), reshape: reshape)
                return Self.distance(Self.sdrModel(decoded), Self.sdrModel(p.nits)) > Self.tolerance
            }.count
        }
        #expect(misses { SIMD3<Double>($0) / 1023 } == Sample.patches.count, "reshaping ignored")
        for c in 0..<3 {
            let skipped = misses { codes in
                var ipt = Sample.RPU.reshape(codes)
                ipt[c] = Double(codes[c]) / 1023
                return ipt
            }
            #expect(skipped >= 10, "curve \(c) ignored: only \(skipped) patches off")
        }
    }

    // MARK: Helpers

    func transcode(_ path: String) throws -> (String, URL) {
        let (_, plan, out, dir) = try GeneratedMediaTests().roundTrip(path) {
            EnginePlans.transcode($0, height: Self.outputHeight)
        }
        #expect(plan.video?.toneMap == true)
        let v = try #require(try FFprobe(out).streams("video").first)
        #expect(v["pix_fmt"]?.string == "yuv420p")
        #expect(v["color_primaries"]?.string == "bt709")
        #expect(v["color_transfer"]?.string == "bt709")
        #expect(v["color_space"]?.string == "bt709")
        #expect(v["width"]?.int == Self.outputWidth && v["height"]?.int == Self.outputHeight)
        return (out, dir)
    }

    /// The largest per-channel difference.
    static func distance(_ a: SIMD3<Double>, _ b: SIMD3<Double>) -> Double {
        let d = a - b
        return max(abs(d.x), abs(d.y), abs(d.z))
    }

    /// The mean RGB (in 8-bit code values) of a 32×32 window at each patch's centre, at the
    /// output's size, over every frame: BT.709 limited-range video (or what `filter` makes
    /// of the file) converted by zimg in float, as swscale's integer path is off by up to 2.
    static func patchColours(_ path: String, filter: String? = nil) throws -> [SIMD3<Double>] {
        let dir = Media.scratch("dv-rgb")
        defer { try? FileManager.default.removeItem(at: dir) }
        let raw = dir.appendingPathComponent("frames.gbrpf32").path
        let w = outputWidth, h = outputHeight
        let toRGB = "zscale=w=\(w):h=\(h):f=bicubic:min=bt709:rin=limited:m=bt709:r=full:d=none,format=gbrpf32le"
        let vf = ([filter].compactMap { $0 } + [toRGB]).joined(separator: ",")
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-vf", vf, "-f", "rawvideo", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg could not decode \(path): \(r.stderr)") }
        let data = try Data(contentsOf: URL(fileURLWithPath: raw))
        let plane = w * h, frames = data.count / (plane * 3 * 4)
        guard frames > 0 else { throw TestFailure("no frames decoded from \(path)") }
        let samples: [Float] = data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
        let sx = Double(w) / Double(Sample.width), sy = Double(h) / Double(Sample.height), half = 16
        return Sample.patches.map { p in
            let cx = Int((Double(p.x) + Double(p.width) / 2) * sx), cy = Int((Double(p.y) + Double(p.height) / 2) * sy)
            var sum = SIMD3<Double>(0, 0, 0)
            for f in 0..<frames {
                let base = f * plane * 3
                for y in (cy - half)..<(cy + half) {
                    for x in (cx - half)..<(cx + half) {
                        let i = base + y * w + x
                        // Planes in G, B, R order.
                        sum += SIMD3(Double(samples[i + 2 * plane]), Double(samples[i]), Double(samples[i + plane]))
                    }
                }
            }
            return sum / Double(frames * 4 * half * half) * 255
        }
    }

    /// The engine's HDR10 → SDR mapping (VideoFilterGraph's ToneCurve) for a linear BT.2020
    /// colour, in 8-bit code values: BT.709 primaries with BT.2408's reference white
    /// (203 nits) = 1, Möbius on the brightest component (linear up to 0.3, reaching 1 at
    /// the peak: MaxCLL 1000 nits), then zimg's BT.709 transfer, which is display-referred:
    /// the inverse of BT.1886's 2.4 power.
    static func sdrModel(_ nits: SIMD3<Double>) -> SIMD3<Double> {
        let toBT709: [SIMD3<Double>] = [[1.6605, -0.5876, -0.0728], [-0.1246, 1.1329, -0.0083], [-0.0182, -0.1006, 1.1187]]
        let linear = SIMD3(toBT709.map { ($0 * nits).sum() / 203 })
        func mobius(_ x: Double) -> Double {
            let j = 0.3, peak = 1000.0 / 203
            guard x > j else { return x }
            let a = -j * j * (peak - 1) / (j * j - 2 * j + peak), b = (j * j - 2 * j * peak + peak) / (peak - 1)
            return (b * b + 2 * b * j + j * j) / (b - a) * (x + a) / (x + b)
        }
        let signal = max(linear.max(), 1e-6)
        let mapped = linear * (mobius(signal) / signal)
        return SIMD3(mapped.indices.map { pow(min(max(mapped[$0], 0), 1), 1 / 2.4) * 255 })
    }

    /// The Y, Cb and Cr planes of a file's first frame, as 10-bit codes.
    func firstFrame10Bit(_ path: String) throws -> [[UInt16]] {
        let dir = Media.scratch("dv-yuv")
        defer { try? FileManager.default.removeItem(at: dir) }
        let raw = dir.appendingPathComponent("frame.yuv").path
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-frames:v", "1",
                                           "-f", "rawvideo", "-pix_fmt", "yuv420p10le", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg could not decode \(path): \(r.stderr)") }
        let samples: [UInt16] = try Data(contentsOf: URL(fileURLWithPath: raw)).withUnsafeBytes {
            $0.bindMemory(to: UInt16.self).map { UInt16(littleEndian: $0) }
        }
        let luma = Sample.width * Sample.height
        guard samples.count == luma * 3 / 2 else { throw TestFailure("\(path): \(samples.count) samples in a frame") }
        return [Array(samples[0..<luma]), Array(samples[luma..<(luma * 5 / 4)]), Array(samples[(luma * 5 / 4)...])]
    }
}
