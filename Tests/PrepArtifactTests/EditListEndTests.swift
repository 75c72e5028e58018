import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A QuickTime file trimmed without re-encoding (QuickTime Player's or LosslessCut's trim):
/// its edit lists show the first seconds of the samples it keeps, and its headers say that
/// length. libavformat hands out the pictures past the edit's end up to the next keyframe,
/// marked not to be shown, so that those shown before the end decode.
@Suite("a recording trimmed by its edit lists")
struct EditListEndTests {
    /// 20 s of H.264 with B-frames (a keyframe a second) and AAC in MOV, its edit lists and
    /// headers cut to `milliseconds`.
    /// `headers`: the tracks' and movie's lengths cut too (as a trimming tool writes them);
    /// else they still say 20 s.
    static func trimmed(_ milliseconds: Int, headers: Bool = true) throws -> String {
        try Media.generated("trimmed-by-edit-\(milliseconds)\(headers ? "" : "-headers-20s").mov") { tmp in
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=20",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=20",
                                               "-c:v", "libx264", "-preset", "veryfast", "-g", "25", "-c:a", "aac", "-f", "mov", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tmp)))
            func offsets(_ tag: String) -> [Int] {
                let t = Array(tag.utf8)
                return (0..<(bytes.count - 4)).filter { bytes[$0..<($0 + 4)].elementsEqual(t) }
            }
            func put(_ value: Int, at i: Int) { for k in 0..<4 { bytes[i + k] = UInt8(value >> (24 - 8 * k) & 0xFF) } }
            // In the movie's timescale (ffmpeg's: 1000), version 0 boxes: the first edit's
            // length, each track's length and the movie's.
            let edits = offsets("elst"), tracks = offsets("tkhd"), movie = offsets("mvhd")
            guard edits.count == 2, tracks.count == 2, movie.count == 1,
                  (edits + tracks + movie).allSatisfy({ bytes[$0 + 4] == 0 }) else { throw TestFailure("unexpected boxes") }
            for e in edits { put(milliseconds, at: e + 12) }
            if headers {
                for t in tracks { put(milliseconds, at: t + 24) }
                put(milliseconds, at: movie[0] + 20)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("is remuxed to its edits' length: trimmed at a keyframe (10 s), every picture shown and none past, whether its headers say 10 s or still 20 (the probe measured 11.04 s from the pictures past the edit, and the right copy was refused); mid-GOP (9.46 s), the few past the end that pictures before it may need are kept; each decodes cleanly (the copy had 11.04 s of pictures beside 10 s of sound, and was refused as running past its length) (found by a helper's fragmented-MP4 and edit-list audit)",
          arguments: [(10000, 250...250, true), (9460, 237...240, true), (10000, 250...250, false)])
    func remuxedToItsLength(_ milliseconds: Int, pictures: ClosedRange<Int>, headers: Bool) throws {
        let source = try Self.trimmed(milliseconds, headers: headers)
        try Command.prepare(source, quality: "original", caps: "android", scratch: "trimmed-\(milliseconds)-\(headers)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == "remux")
            let probe = try FFprobe(out)
            let seconds = Double(milliseconds) / 1000
            #expect(abs((probe.duration("audio") ?? 0) - seconds) < 0.05)
            #expect(abs((probe.duration("video") ?? 0) - seconds) < (pictures.count == 1 ? 0.02 : 0.2))
            #expect(pictures.contains(try FFprobe.packetCount(out, "v")))
            let decoded = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
            #expect(decoded.status == 0 && decoded.stderr.isEmpty, "\(decoded.stderr.prefix(300))")
        }
    }
}
