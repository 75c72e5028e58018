import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

// The engine applies the tone map's curve itself, between two filter graphs, where the
// chain it reports (and the ffmpeg command that reproduces it) says `tonemap=`. Both must
// give the same pictures, bit for bit: checked against libavfilter's filter on values
// nobody meets in a film and on real HDR pictures through the whole chain.

@Suite("tone map step")
struct ToneMapStepTests {
    /// A gbrpf32le picture whose pixels walk through `values` on each plane at different
    /// strides, so every component is brightest somewhere, and values meet in all orders.
    private func floatPicture(_ values: [Float], width: Int32 = 64, height: Int32 = 48) throws -> Frame {
        let frame = try Frame()
        let f = frame.pointer
        f.pointee.format = AV_PIX_FMT_GBRPF32LE.rawValue
        f.pointee.width = width
        f.pointee.height = height
        f.pointee.color_trc = AVCOL_TRC_LINEAR
        #expect(av_frame_get_buffer(f, 0) >= 0)
        let planes = [f.pointee.data.0!, f.pointee.data.1!, f.pointee.data.2!]
        let strides = [Int(f.pointee.linesize.0), Int(f.pointee.linesize.1), Int(f.pointee.linesize.2)]
        for (p, (base, stride)) in zip(planes, strides).enumerated() {
            for y in 0..<Int(height) {
                let row = UnsafeMutableRawPointer(base + y * stride).assumingMemoryBound(to: Float.self)
                for x in 0..<Int(width) { row[x] = values[(x * (p + 1) + y * (2 * p + 3)) % values.count] }
            }
        }
        return frame
    }

    /// The three planes' floats as bit patterns.
    private func bits(_ frame: Frame) -> [[UInt32]] {
        let f = frame.pointer.pointee
        let planes = [f.data.0!, f.data.1!, f.data.2!], strides = [Int(f.linesize.0), Int(f.linesize.1), Int(f.linesize.2)]
        return zip(planes, strides).map { base, stride in
            (0..<Int(f.height)).flatMap { y in
                let row = UnsafeRawPointer(base + y * stride).assumingMemoryBound(to: Float.self)
                return (0..<Int(f.width)).map { row[$0].bitPattern }
            }
        }
    }

    @Test("the engine's Möbius curve gives libavfilter's tonemap filter's floats bit for bit: below and above the knee, past the peak, at zero, negative (out of BT.709's gamut) and tiny, for HDR10, HLG and a peak at reference white")
    func curveIsTheFilters() throws {
        let values: [Float] = [-0.25, -1e-7, 0, 1e-7, 1e-6, 1.0000001e-6, 0.05, 0.2999, 0.3, 0.3001, 0.5, 1, 2.5, 4.926, 4.93, 10, 49.26, 100]
        for peak in [ToneCurve.assumedPeak, 4000, ToneCurve.referenceWhite, 10000] {
            let curve = MobiusToneMap(param: ToneCurve.linearUpTo, peakNits: peak, whiteNits: ToneCurve.referenceWhite)
            let ours = try floatPicture(values), theirs = try floatPicture(values)
            let input = VideoInput(ours.pointer, interlacedSeen: false)
            let graph = try VideoFilterGraph(input: input, timeBase: AVRational(num: 1, den: 24), frameRate: AVRational(num: 24, den: 1),
                                             description: curve.filter, output: AV_PIX_FMT_GBRPF32LE)
            try graph.push(theirs)
            try graph.push(nil)
            let filtered = try Frame()
            #expect(try graph.pull(into: filtered))
            try curve.apply(to: ours)
            let (a, b) = (bits(ours), bits(filtered))
            let same = a == b, changed = a != bits(try floatPicture(values))
            #expect(same, "peak \(peak): \(zip(a[0], b[0]).filter { $0 != $1 }.prefix(4).map { (Float(bitPattern: $0), Float(bitPattern: $1)) })")
            // Not the identity: the curve brought the brightest values down.
            #expect(changed, "peak \(peak): the curve changed nothing")
        }
        // Only linear-light float pictures: anything else is refused, not misread.
        let other = try Frame()
        other.pointer.pointee.format = AV_PIX_FMT_YUV420P10LE.rawValue
        other.pointer.pointee.width = 16
        other.pointer.pointee.height = 16
        #expect(av_frame_get_buffer(other.pointer, 0) >= 0)
        #expect(throws: KilnError.self) { try MobiusToneMap(param: 0.3, peakNits: 1000, whiteNits: 203).apply(to: other) }
    }

    /// Every yuv420p picture `filters` gives for `path`'s first `count` pictures.
    private func pictures(_ path: String, count: Int, through make: (VideoInput, AVRational) throws -> (push: (Frame?) throws -> Void, pull: (Frame) throws -> Bool)) throws -> [[UInt8]] {
        var stage: (push: (Frame?) throws -> Void, pull: (Frame) throws -> Bool)?
        var out: [[UInt8]] = []
        let picture = try Frame()
        func collect() throws {
            while let stage, try stage.pull(picture) {
                defer { picture.unref() }
                let p = picture.pointer.pointee
                let sizes = [(Int(p.width), Int(p.height)), (Int(p.width) / 2, Int(p.height) / 2), (Int(p.width) / 2, Int(p.height) / 2)]
                let planes = [p.data.0!, p.data.1!, p.data.2!], strides = [Int(p.linesize.0), Int(p.linesize.1), Int(p.linesize.2)]
                out.append(zip(sizes, zip(planes, strides)).flatMap { size, plane in
                    (0..<size.1).flatMap { y in (0..<size.0).map { plane.0[y * plane.1 + $0] } }
                })
            }
        }
        try firstPictures(path, count: count) { frame, decoder in
            if stage == nil { stage = try make(VideoInput(frame.pointer, interlacedSeen: false), decoder.timeBase) }
            try stage?.push(frame)
            try collect()
        }
        try stage?.push(nil)
        try collect()
        return out
    }

    @Test("real HDR pictures through the engine's filters (two graphs, the curve between them) come out as the chain it reports gives them in one libavfilter graph, byte for byte: HDR10 shrunk and at its own size, Dolby Vision profile 8's base layer",
          arguments: [("sp_bear-640x360-hevc-hdr10.mp4", 320, 180), ("sp_bear-640x360-hevc-hdr10.mp4", 640, 360), ("sp_sparks_dovi_8.mp4", 640, 360)])
    func engineMatchesItsChain(file: String, width: Int, height: Int) throws {
        let path = Media.shared(file)
        let plan = VideoPlan(sourceIndex: 0, action: .transcode, codec: "h264", width: width, height: height, bitrateKbps: 1000,
                             toneMap: true, deinterlace: false, rotation: 0, encoder: nil)
        func chain(_ input: VideoInput) -> VideoFilterChain {
            videoFilterChain(plan: plan, input: input, toneMap: .pq, peakNits: 1000, outputMatrix: "bt709")
        }
        let engine = try pictures(path, count: 12) { input, timeBase in
            let filters = try VideoFilters(input: input, timeBase: timeBase, frameRate: AVRational(num: 24, den: 1), chain: chain(input))
            #expect(filters.chain.toneMap != nil && !filters.chain.after.isEmpty)
            return ({ try filters.push($0) }, { try filters.pull(into: $0) })
        }
        let reference = try pictures(path, count: 12) { input, timeBase in
            let description = chain(input).description
            #expect(description.contains(",tonemap=tonemap=mobius:param=0.3:desat=0:peak=1000/203,zscale=t=bt709:m=bt709:r=tv"))
            let graph = try VideoFilterGraph(input: input, timeBase: timeBase, frameRate: AVRational(num: 24, den: 1), description: description)
            return ({ try graph.push($0) }, { try graph.pull(into: $0) })
        }
        #expect(engine.count == 12 && reference.count == 12)
        #expect(engine.first?.count == width * height * 3 / 2)
        for (i, (a, b)) in zip(engine, reference).enumerated() {
            let same = a == b
            #expect(same, "picture \(i): \(zip(a, b).filter { $0 != $1 }.count) bytes differ")
        }
    }
}
