import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A fragmented MP4 whose fragments are not laid in the order of their times: a segment
/// downloader that writes each segment as it arrives, with several fetched at once.
@Suite("fragments stored out of order")
struct FragmentOrderTests {
    /// 8 s in 1 s fragments (a moof at each keyframe, offsets from the moof, no `mfra`) at
    /// 1.5 Mbit/s (above the 1 Mbit/s rung: re-encoded there),
    /// its fragments laid in `order` (indices into the 8 as ffmpeg wrote them).
    static func fragments(_ name: String, order: [Int]) throws -> String {
        try Media.generated("fragments-\(name).mp4") { tmp in
            let whole = tmp + ".whole.mp4"
            defer { try? FileManager.default.removeItem(atPath: whole) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-qp", "8", "-c:a", "aac",
                                               "-movflags", "frag_keyframe+empty_moov+default_base_moof", whole])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
            var head: [UInt8] = [], fragments: [[UInt8]] = []
            var at = 0
            while at + 8 <= bytes.count {
                let size = bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
                let type = String(decoding: bytes[at + 4..<at + 8], as: UTF8.self)
                guard size >= 8, at + size <= bytes.count else { throw TestFailure("a box of \(size) bytes at \(at)") }
                let box = Array(bytes[at..<at + size])
                switch type {
                case "moof": fragments.append(box)
                case "mdat": fragments[fragments.count - 1] += box
                case "mfra": break  // its offsets are where ffmpeg laid the fragments; a downloader writes none
                default: head += box
                }
                at += size
            }
            guard fragments.count == 8 else { throw TestFailure("ffmpeg wrote \(fragments.count) fragments, not 8") }
            try Data(head + order.flatMap { fragments[$0] }).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("two fragments swapped are refused as damaged, exit 3, naming the disorder: libavformat hands the later-stored one after the one that follows it, marked not shown, and the copy lost its second, the transcode two, each with exit 0 and a gap of silence (found by a helper's fragmented-MP4 audit)",
          arguments: [("original", "ios"), ("1mbps", "web")])
    func swapped(quality: String, caps: String) throws {
        let source = try Self.fragments("4-5-swapped", order: [0, 1, 2, 3, 5, 4, 6, 7])
        try Command.prepare(source, quality: quality, caps: caps, scratch: "fragments-swapped-\(quality)") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_corrupt"))
            #expect(error?["message"]?.string?.contains("out of order") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("a fragment missing, or one written again after the next, is no disorder: remuxed as before, the missing second a gap, the repeat left out",
          arguments: [("4-missing", [0, 1, 2, 3, 5, 6, 7], 175), ("4-repeated-late", [0, 1, 2, 3, 4, 5, 4, 6, 7], 200)])
    func missingOrRepeated(name: String, order: [Int], pictures: Int) throws {
        let source = try Self.fragments(name, order: order)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "fragments-\(name)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let count = try FFprobe.packetCount(out, "v")
            #expect(count == pictures)
        }
    }
}
