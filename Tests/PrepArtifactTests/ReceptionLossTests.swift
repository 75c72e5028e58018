import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A broadcast recording that lost transport packets in reception (a weak signal): the
/// demuxer marks each PES it assembled across a continuity-counter break. A copy decodes
/// nothing, so that mark is how its stats can say the source was damaged.
@Suite("a recording that lost packets in reception")
struct ReceptionLossTests {
    static func clean() throws -> String {
        try Media.generated("reception-clean.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
                                                   "-i", "sine=frequency=440:sample_rate=48000", "-t", "6",
                                                   "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac"])
    }

    @Test("a remux counts the damaged PES the copy keeps (it said corrupt_packets 0 for a recording that lost one video transport packet in thirty), and a clean recording none; every picture is still delivered")
    func lossCounted() throws {
        let clean = try Self.clean()
        let lossy = try Media.generated("reception-lossy.ts") { tmp in
            // From the second second on, one video transport packet in thirty is lost.
            let packets = try Splice.packets(clean)
            var video = 0
            let kept = packets.enumerated().filter { i, p in
                guard Splice.pid(p) == Splice.videoPID else { return true }
                video += 1
                return i < packets.count / 3 || video % 30 != 0
            }.map(\.element)
            try Data(kept.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(clean, quality: "original", caps: "ios", scratch: "reception-clean") { run, _ in
            #expect(run.status == 0, "\(run.stderr)")
            let result = try Command.json(run)
            #expect(result["plan"]?["delivery_format"]?.string == "remux")
            #expect(result["stats"]?["corrupt_packets"] == .number(0))
        }
        try Command.prepare(lossy, quality: "original", caps: "ios", scratch: "reception-lossy") { run, out in
            #expect(run.status == 0, "\(run.stderr)")
            let result = try Command.json(run)
            #expect(result["plan"]?["delivery_format"]?.string == "remux")
            // Each lost packet damages one picture's PES (a few fall in one).
            let counted = result["stats"]?["corrupt_packets"]?.int ?? 0
            #expect(counted >= 10 && counted <= 150, "\(counted)")
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(lossy, "v"))
        }
    }
}
