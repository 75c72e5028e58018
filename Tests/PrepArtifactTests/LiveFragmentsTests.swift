import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A live stream recorded part-way through, in fragmented MP4: the HLS or DASH init segment,
/// then the media segments from the one the recorder joined at, whose fragments keep the
/// stream's times (their `tfdt` from 10 s on, not 0).
@Suite("a live stream recorded from its middle, in fragments")
struct LiveFragmentsTests {
    static func recording() throws -> String {
        try Media.hlsSegments("live-from-10s.mp4", seconds: 20, order: Array(10...19))
    }

    @Test("lasts what its fragments hold, 10 s from where they start (libavformat: 20 s, counted from zero), and is remuxed and transcoded whole, from zero (every prepare was refused as stopping at half its length) (found by a helper's fragmented-MP4 audit)")
    func lastsItsFragments() throws {
        let source = try Self.recording()
        let probe = try Command.probed(source)
        #expect(abs((probe["duration_seconds"]?.double ?? 0) - 10) < 0.2, "\(probe["duration_seconds"] ?? .null)")
        for (quality, caps) in [("original", "ios"), ("1mbps", "web")] {
            try Command.prepare(source, quality: quality, caps: caps, scratch: "live-fragments-\(quality)") { run, out in
                #expect(run.status == 0, "\(run.stdout.suffix(300))")
                let output = try FFprobe(out)
                #expect(abs((output.duration("video") ?? 0) - 10) < 0.15)
                #expect(abs((output.duration("audio") ?? 0) - 10) < 0.15)
                #expect((output.startTime("audio") ?? 1) < 0.1)
                #expect(try FFprobe.packetCount(out, "v") == 250)
            }
        }
    }
}
