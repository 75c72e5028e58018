import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// Open-GOP HEVC keyframes (CRA) decoded alone, as verification decodes them: as the IDR
/// pictures they are to a decoder that starts there.
@Suite("HEVC keyframes decoded alone")
struct HEVCKeyframeTests {
    /// The sources' CRA keyframes: x265 10-bit with wavefront entry points and one slice
    /// per picture; 8-bit with three slices, SAO off and a scaling list; without
    /// wavefronts (no entry points); range extensions and the rest below: each slice header
    /// field the rewrite walks is there; and a shared file from another encoder.
    static func sources() throws -> [String] {
        [try VerifierTests.openGOPHEVC(),
         try Media.generated("open-gop-hevc-slices.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "3", "-pix_fmt", "yuv420p",
            "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:open-gop=1:keyint=25:min-keyint=25:bframes=4:slices=3:sao=0:scaling-list=default"]),
         try Media.generated("open-gop-hevc-no-wpp.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "3", "-pix_fmt", "yuv420p",
            "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:open-gop=1:keyint=25:min-keyint=25:bframes=2:wpp=0:ref=3"]),
         // Range extensions (4:4:4 10-bit, lossless), 16-pixel CTUs and two slices (longer
         // slice addresses), transform skip, chroma QP offsets, several reference sets in
         // the SPS (the slice names one by index), temporal layers.
         try Media.generated("open-gop-hevc-rext.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "3", "-pix_fmt", "yuv444p10le",
            "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:open-gop=1:keyint=25:min-keyint=25:bframes=3:ctu=16:tskip=1:cbqpoffs=3:crqpoffs=-2:"
                + "multi-pass-opt-rps=1:opt-qp-pps=1:slices=2:temporal-layers=3:lossless=1"]),
         // Another encoder's CRAs (MP4, its parameter sets in band as well).
         Media.shared("sp_bear-1280x720-hevc.mp4")]
    }

    /// The keyframes after the first (CRAs), as the demuxer reads them.
    private func craKeyframes(_ path: String) throws -> (Demuxer, Int, [Packet]) {
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let index = demuxer.firstVideoStream
        var found: [Packet] = []
        let packet = try Packet()
        var first = true
        while try demuxer.read(into: packet) {
            defer { packet.unref() }
            guard packet.streamIndex == Int32(index), packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 else { continue }
            if first { first = false; continue }
            let held = try Packet()
            #expect(av_packet_ref(held.pointer, packet.pointer) == 0)
            found.append(held)
        }
        return (demuxer, index, found)
    }

    private func nalTypes(_ packet: Packet) -> [Int] {
        var types: [Int] = []
        LengthPrefixed.forEachUnit(in: UnsafeBufferPointer(start: packet.pointer.pointee.data, count: Int(packet.pointer.pointee.size)),
                                   lengthSize: 4) { types.append(Int($0[0] >> 1) & 0x3f) }
        return types
    }

    /// The picture's planes, row by row (without the padding at each row's end).
    static func planes(_ frame: Frame) -> [UInt8] {
        let f = frame.pointer.pointee
        guard let desc = av_pix_fmt_desc_get(AVPixelFormat(rawValue: f.format))?.pointee else { return [] }
        let bytes = Int(desc.comp.0.step)
        let data = [f.data.0, f.data.1, f.data.2], sizes = [f.linesize.0, f.linesize.1, f.linesize.2]
        var planes: [UInt8] = []
        for plane in 0..<3 {
            guard let start = data[plane] else { return [] }
            let w = plane == 0 ? Int(f.width) : Int(f.width) >> Int(desc.log2_chroma_w)
            let h = plane == 0 ? Int(f.height) : Int(f.height) >> Int(desc.log2_chroma_h)
            for y in 0..<h {
                planes.append(contentsOf: UnsafeBufferPointer(start: start + y * Int(sizes[plane]), count: w * bytes))
            }
        }
        return planes
    }

    /// The keyframe's picture from a full decoder: `alone` (verification's way, rewritten)
    /// or its bytes sent as they are.
    private func picture(_ packet: Packet, _ stream: UnsafeMutablePointer<AVStream>, alone: Bool) throws -> [UInt8] {
        let decoder = try Decoder(stream: stream, threads: 1)
        var planes: [UInt8] = []
        let collect = { (frame: Frame) throws(KilnError) in planes = Self.planes(frame) }
        if alone {
            try decoder.decodeKeyframeAlone(packet, collect)
        } else {
            try decoder.decode(packet, collect)
            try decoder.decode(nil, collect)
        }
        #expect(decoder.corruptPackets == 0)
        return planes
    }

    @Test("a CRA keyframe becomes IDR slices: the same picture, decoded without inventing its leading pictures' references")
    func craAsIDR() throws {
        for path in try Self.sources() {
            let (demuxer, index, keyframes) = try craKeyframes(path)
            let st = demuxer.stream(index)
            let par = st.pointee.codecpar.pointee
            #expect(keyframes.count >= 2, "\(path): \(keyframes.count) keyframes after the first")
            for packet in keyframes {
                #expect(nalTypes(packet).contains(21), "a CRA keyframe: \(nalTypes(packet))")
                let rewritten = try Packet()
                #expect(kiln_hevc_keyframe_as_idr(par.extradata, par.extradata_size, packet.pointer, rewritten.pointer) == 1)
                let types = nalTypes(rewritten)
                #expect(!types.contains(21) && types.contains(20), "\(types)")
                #expect(rewritten.pointer.pointee.pts == packet.pointer.pointee.pts)

                // The picture is the CRA's own, to the last sample: the decoder fed the
                // original (inventing references) and fed the rewrite agree.
                let asIDR = try picture(packet, st, alone: true), asCRA = try picture(packet, st, alone: false)
                #expect(!asIDR.isEmpty && asIDR == asCRA)

                // As verification decodes it: one picture asked for, not one per reference.
                let verifying = try Decoder(stream: st, threads: 1, sharedPicture: true)
                var frames = 0
                try verifying.decodeKeyframeAlone(packet) { (_: Frame) throws(KilnError) in frames += 1 }
                #expect(frames == 1 && verifying.corruptPackets == 0 && verifying.picturesAllocated == 1)
                let asIs = try Decoder(stream: st, threads: 1, sharedPicture: true)
                try asIs.decode(packet) { (_: Frame) throws(KilnError) in }
                try asIs.decode(nil) { (_: Frame) throws(KilnError) in }
                #expect(asIs.picturesAllocated > 1, "decoded as it is, the CRA's references are invented")
            }
        }
    }

    @Test("an IDR keyframe, or a damaged one, is decoded as it is; nothing the rewrite reads makes it crash")
    func leftAlone() throws {
        let path = try VerifierTests.openGOPHEVC()
        let (demuxer, index, keyframes) = try craKeyframes(path)
        let par = demuxer.stream(index).pointee.codecpar.pointee
        // The first keyframe is an IDR: nothing to rewrite.
        let first = try Demuxer(path: path, cancellation: Cancellation())
        let packet = try Packet()
        while try first.read(into: packet) {
            if packet.streamIndex == Int32(index), packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 { break }
            packet.unref()
        }
        let out = try Packet()
        #expect(kiln_hevc_keyframe_as_idr(par.extradata, par.extradata_size, packet.pointer, out.pointer) == 0)
        #expect(out.pointer.pointee.size == 0)
        // Without the decoder configuration record there are no parameter sets to read.
        let cra = try #require(keyframes.first)
        #expect(kiln_hevc_keyframe_as_idr(nil, 0, cra.pointer, out.pointer) == 0)

        // Flipped bytes anywhere in the first 256 (parameter sets and slice headers): the
        // answer is a rewrite or none, and what is decoded never crashes the decoder.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let damaged = try Packet()
            #expect(av_packet_ref(damaged.pointer, cra.pointer) == 0)
            #expect(av_packet_make_writable(damaged.pointer) == 0)
            let size = Int(damaged.pointer.pointee.size)
            for _ in 0..<3 {
                let at = Int.random(in: 0..<min(size, 256), using: &generator)
                damaged.pointer.pointee.data[at] ^= UInt8.random(in: 1...255, using: &generator)
            }
            let result = kiln_hevc_keyframe_as_idr(par.extradata, par.extradata_size, damaged.pointer, out.pointer)
            #expect(result == 0 || result == 1)
            let decoder = try Decoder(stream: demuxer.stream(index), threads: 1, sharedPicture: true)
            try decoder.decodeKeyframeAlone(damaged) { (_: Frame) throws(KilnError) in }
        }
    }
}
