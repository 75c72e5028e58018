import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("Verification")
struct VerifierTests {
    /// Open-GOP HEVC: every keyframe after the first is a CRA whose reference set names
    /// pictures before it, which a decoder started there has to stand in for.
    static func openGOPHEVC() throws -> String {
        try Media.generated("open-gop-hevc-25.mkv", [
            // 25 fps: Matroska's millisecond timestamps stay exact (the checks compare them).
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", ] + Generated.tone + [
            "-t", "4", "-pix_fmt", "yuv420p10le", "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:open-gop=1:keyint=25:min-keyint=25:bframes=3",
            "-c:a", "aac", "-b:a", "96k"])
    }

    @Test("an open-GOP HEVC remux verifies: the keyframes at both ends decode into one shared picture")
    func openGOPVerifies() throws {
        let path = try Self.openGOPHEVC()
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        let dir = Media.scratch("verify-open-gop")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        // Straight from the verifier too, so the test does not hang on what prepare does.
        let seen = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation())
        #expect(seen.videoStreams.first?.pixelFormat == "yuv420p10le", "the end's picture was decoded")
        // The independent decoder agrees the file decodes in full.
        #expect(try FFprobe.decodeErrors(out).isEmpty)
    }

    @Test("an output cut short fails verification: the index promises pictures the file does not hold")
    func truncatedFails() throws {
        let path = try Self.openGOPHEVC()
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        let dir = Media.scratch("verify-truncated")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int)
        #expect(truncate(out, off_t(size * 6 / 10)) == 0)
        #expect {
            try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation())
        } throws: { ($0 as? KilnError)?.code == .verifyFailed }
    }
}
