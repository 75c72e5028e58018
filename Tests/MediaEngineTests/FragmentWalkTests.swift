import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// How the fragment walk tells a fragment stored late, one written twice, one missing, and
/// a recording appended after another, from the fragments' times, samples and sequence
/// numbers alone (one track, a millisecond timescale, fragments of one 1 s sample).
@Suite("fragment walk")
struct FragmentWalkTests {
    static func be32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }
    static func be64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * $0)) } }
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(UInt32(8 + payload.count)) + Array(type.utf8) + payload }

    /// A fragment numbered `number` from `time` (ms): one sample of 1 s (the track's default),
    /// or `halves` two of 0.5 s (other samples at the same time).
    struct Fragment {
        var number: UInt32, time: UInt64, halves = false
    }

    /// A file of a header (its track's samples 1 s by default) and `fragments`, as `name` in `dir`.
    static func file(_ name: String, _ fragments: [Fragment], in dir: URL) throws -> String {
        var bytes = box("ftyp", Array("isom".utf8) + be32(0) + Array("isom".utf8))
        bytes += box("moov", box("mvex", box("trex", be32(0) + be32(1) + be32(1) + be32(1000) + be32(10) + be32(0))))
        for f in fragments {
            let tfhd = f.halves ? box("tfhd", be32(0x02_0008) + be32(1) + be32(500)) : box("tfhd", be32(0x02_0000) + be32(1))
            let traf = box("traf", tfhd + box("tfdt", [1, 0, 0, 0] + be64(f.time)) + box("trun", be32(0) + be32(f.halves ? 2 : 1)))
            bytes += box("moof", box("mfhd", be32(0) + be32(f.number)) + traf) + box("mdat", [UInt8](repeating: 0, count: 20))
        }
        let path = dir.appendingPathComponent("\(name).mp4").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func walk(_ name: String, _ fragments: [Fragment]) throws -> Prober.FragmentWalk {
        let dir = Media.scratch("fragment-walk")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = try file(name, fragments, in: dir)
        guard let walk = Prober.fragmentWalk(path, timeBase: { _ in AVRational(num: 1, den: 1000) }) else { throw TestFailure("no walk") }
        return walk
    }

    static func inOrder(_ times: [UInt64], from number: UInt32 = 1) -> [Fragment] {
        times.enumerated().map { Fragment(number: number + UInt32($0.offset), time: $0.element) }
    }

    @Test("fragments in order, one missing, or one written again (same time, same samples) are one recording in order")
    func oneRecording() throws {
        for (name, fragments) in [("in-order", Self.inOrder([0, 1000, 2000, 3000])),
                                  ("missing", Self.inOrder([0, 1000, 3000])),
                                  ("repeated", Self.inOrder([0, 1000, 2000]) + [Fragment(number: 2, time: 1000)] + Self.inOrder([3000], from: 4))] {
            let walk = try Self.walk(name, fragments)
            #expect(walk.recordings == 1 && walk.disorder == nil, "\(name)")
        }
    }

    @Test("a fragment whose time comes back into a gap is stored out of order; with every segment numbered 1 and the first two swapped, still out of order")
    func disorder() throws {
        let swapped = try Self.walk("swapped", [Fragment(number: 1, time: 0), Fragment(number: 3, time: 2000), Fragment(number: 2, time: 1000)])
        #expect(swapped.recordings == 1 && swapped.disorder?.time == 1000)
        let ones = try Self.walk("numbered-one", [1000, 0, 2000].map { Fragment(number: 1, time: $0) })
        #expect(ones.recordings == 1 && ones.disorder?.time == 0)
    }

    @Test("a fragment whose time comes back into time its recording covers, with other samples, or back before it with a number the recording used, begins a new recording, timed by the rewrite to follow the first")
    func appended() throws {
        let covered = try Self.walk("appended-covered", Self.inOrder([0, 1000, 2000]) + [Fragment(number: 1, time: 0, halves: true)] + Self.inOrder([1000], from: 2))
        #expect(covered.recordings == 2 && covered.disorder == nil)
        #expect(covered.fragments.map(\.recording) == [0, 0, 0, 1, 1])
        // Moved by the first's 3 s: its fragments read from 3 s and 4 s.
        #expect(covered.rewrite()?.patches.map(\.value) == [3000, 4000])
        let before = try Self.walk("appended-before", Self.inOrder([10_000, 11_000, 12_000]) + Self.inOrder([0, 1000]))
        #expect(before.recordings == 2 && before.disorder == nil)
        #expect(before.rewrite()?.patches.map(\.value) == [13_000, 14_000])
        let three = try Self.walk("appended-three", Self.inOrder([0, 1000]) + Self.inOrder([0, 1000]).map { Fragment(number: $0.number, time: $0.time, halves: true) }
                                  + Self.inOrder([500]))
        #expect(three.recordings == 3)
        #expect(three.rewrite()?.patches.map(\.value) == [2000, 3000, 4000])
    }
}
