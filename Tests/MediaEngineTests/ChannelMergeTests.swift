import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// Plans that merge sound streams (`AudioPlan.mergeSources`) as the engine takes them from
/// outside the planner (the farm's stored plans, a client's): only what it can do.
@Suite("merged sound plans")
struct ChannelMergeTests {
    static func camera() throws -> String {
        try Media.generated("merge-plans-camera.mov",
            ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=3",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
             "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000:duration=3",
             "-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le"])
    }

    @Test("a plan that copies a sound and merges another into it, or merges a picture, a missing stream or its own stream, is plan_unsupported and leaves no file", arguments: [
        (StreamAction.copy, [2]), (.transcode, [0]), (.transcode, [9]), (.transcode, [1]), (.transcode, [2, 2]),
    ])
    func refused(action: StreamAction, merged: [Int]) throws {
        let path = try Self.camera()
        let info = try Prober.probe(path: path)
        var plan = try #require(EnginePlans.remux(info))
        plan.audio = AudioPlan(sourceIndex: 1, action: action, codec: action == .copy ? "pcm_s16le" : "aac", channels: 2,
                               bitrateKbps: action == .copy ? 0 : 128, mergeSources: merged)
        let dir = Media.scratch("merge-plans")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        #expect(throws: KilnError.self) { try Preparer.prepare(source: path, plan: plan, info: info, output: out) }
        do { _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out) } catch {
            #expect(error.code == .planUnsupported, "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: out))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }
}
