import Foundation
import Testing
import CFFmpeg
import KilnCore
@testable import MediaEngine

@Suite("Dolby Vision profile 7 layers")
struct DolbyVisionLayersTests {
    /// A length-prefixed packet (4-byte lengths) of NAL units of these types, each with a
    /// two-byte header and a few payload bytes that say which unit it was.
    private func packet(_ types: [Int]) throws -> Packet {
        try packet(units: types.enumerated().map { ($1, $0) })
    }

    /// The same from (type, place) pairs: the place is the payload's marker byte.
    private func packet(units: [(type: Int, place: Int)]) throws -> Packet {
        var bytes: [UInt8] = []
        for (t, i) in units {
            let unit: [UInt8] = [UInt8(t << 1), 1, UInt8(i), 0xAB, UInt8(t)]
            bytes += [0, 0, 0, UInt8(unit.count)] + unit
        }
        let p = try Packet()
        #expect(av_new_packet(p.pointer, Int32(bytes.count)) == 0)
        p.pointer.pointee.data.update(from: bytes, count: bytes.count)
        p.pointer.pointee.pts = 1234
        p.pointer.pointee.dts = 1200
        p.pointer.pointee.flags = AV_PKT_FLAG_KEY
        return p
    }

    private func bytes(_ p: Packet) -> [UInt8] {
        Array(UnsafeBufferPointer(start: p.pointer.pointee.data, count: Int(p.pointer.pointee.size)))
    }

    @Test("the enhancement layer (63) and RPU (62) units leave the packet; the base layer's stay byte for byte, with the packet's times and flags")
    func strips() throws {
        // VPS, SPS, PPS, a CRA slice, an RPU, the enhancement layer, a suffix SEI.
        let p = try packet([32, 33, 34, 21, 62, 63, 40])
        try DolbyVisionLayers.strip(p, lengthSize: 4)
        #expect(bytes(p) == bytes(try packet(units: [(32, 0), (33, 1), (34, 2), (21, 3), (40, 6)])))
        #expect(p.pointer.pointee.pts == 1234 && p.pointer.pointee.dts == 1200 && p.pointer.pointee.flags == AV_PKT_FLAG_KEY)
    }

    @Test("a packet without those units, or whose lengths run past its end, is left as it is")
    func leftAlone() throws {
        let plain = try packet([1, 1])
        let before = bytes(plain)
        try DolbyVisionLayers.strip(plain, lengthSize: 4)
        #expect(bytes(plain) == before)

        let damaged = try packet([1, 62, 63])
        damaged.pointer.pointee.data[4 + 5] = 200   // the second unit's length now runs past the end
        let damagedBefore = bytes(damaged)
        try DolbyVisionLayers.strip(damaged, lengthSize: 4)
        #expect(bytes(damaged) == damagedBefore)
    }
}
