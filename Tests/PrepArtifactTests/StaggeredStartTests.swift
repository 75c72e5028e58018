import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Files whose pictures and sound do not start together (a recording whose pictures come
/// half a second after its sound, a clip whose sound was laid in late): whole and valid,
/// they keep their offset, and are not taken for damaged.
@Suite("streams that start apart")
struct StaggeredStartTests {
    /// 5 s of pictures and 5 s of AC-3 sound, `late` starting 0.7 s after the other.
    static func source(late: String, container: String) throws -> String {
        let picture = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=5"]
        let sound = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=5"]
        let offset = ["-itsoffset", "0.7"]
        return try Media.generated("staggered-\(late)-late.\(container)",
            (late == "video" ? offset : []) + picture + (late == "audio" ? offset : []) + sound
                + ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "ac3"])
    }

    @Test("a Matroska file whose pictures or sound start 0.7 s after the other (and an MP4 whose sound does) is remuxed, AC-3 copied for iOS and re-encoded for Android, with the offset kept; the Matroska one was refused as damaged, its late stream shorter than the file", arguments: [
        ("video", "mkv"), ("audio", "mkv"), ("audio", "mp4"),
    ])
    func offsetKept(_ late: String, _ container: String) throws {
        let source = try Self.source(late: late, container: container)
        for caps in ["ios", "android"] {
            try Command.prepare(source, quality: "original", caps: caps, scratch: "staggered-\(late)-\(container)-\(caps)") { run, out in
                #expect(run.status == 0, "\(caps): \(run.stdout) \(run.stderr.suffix(300))")
                guard run.status == 0 else { return }
                let json = try Command.json(run)
                // (iOS plays the MP4 as it is.)
                #expect(json["plan"]?["delivery_format"] == .string(container == "mp4" && caps == "ios" ? "original" : "remux"))
                let probe = try FFprobe(out)
                let other = late == "video" ? "audio" : "video"
                let lateStart = try #require(probe.startTime(late)), otherStart = try #require(probe.startTime(other))
                #expect(abs(lateStart - otherStart - 0.7) < 0.1, "\(caps): the \(late) starts \(lateStart) s, the \(other) \(otherStart) s")
                let length = try #require(json["output"]?["duration_seconds"]?.double)
                #expect(abs(length - 5.7) < 0.2, "\(caps): the output lasts \(length) s")
                #expect(try FFprobe.decodeErrors(out).isEmpty)
            }
        }
    }
}
