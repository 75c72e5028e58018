import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A camera's microphone recorded as mono tracks (Sony XAVC and Canon Cinema EOS in MXF,
/// pro cameras' MOV): CH1 and CH2 go out as the left and right of one stereo sound.
@Suite("a camera's mono tracks")
struct CameraTracksTests {
    /// 6 s of pictures; CH1 a 440 Hz tone for 6 s, CH2 a 1 kHz tone from `secondStart` for
    /// `secondLength` s; CH3 and CH4 (other tones) where `four`. 24-bit PCM, as cameras record.
    static func camera(_ container: String, secondStart: Double = 0, secondLength: Double = 6, four: Bool = false) throws -> String {
        let tone = { (hz: Int, seconds: Double) in ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=48000:duration=\(seconds)"] }
        let late = secondStart > 0 ? ["-itsoffset", String(secondStart)] : []
        let extra = four ? tone(2000, 6) + tone(3000, 6) : []
        let maps = (0..<(four ? 5 : 3)).flatMap { ["-map", "\($0)"] }
        return try Media.generated("camera-\(four ? 4 : 2)ch-\(secondStart)-\(secondLength).\(container)",
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6"] + tone(440, 6) + late + tone(1000, secondLength) + extra + maps
                + ["-c:v", container == "mxf" ? "mpeg2video" : "libx264", "-b:v", "2M", "-c:a", "pcm_s24le"])
    }

    /// One channel of the output's sound, decoded by ffmpeg, as 16-bit samples at 48 kHz.
    static func channel(_ path: String, _ c: Int) throws -> [Int16] {
        let raw = path + ".c\(c).raw"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-map", "0:a:0", "-af", "pan=mono|c0=c\(c)",
                                           "-f", "s16le", "-ar", "48000", raw])
        guard r.status == 0 else { throw TestFailure(r.stderr) }
        return try Data(contentsOf: URL(fileURLWithPath: raw)).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// The tone's frequency in `samples[from..<to]` (seconds), from its zero crossings; 0 for silence.
    static func frequency(_ samples: [Int16], from: Double, to: Double) -> Double {
        let a = Int(from * 48000), b = min(samples.count, Int(to * 48000))
        guard b > a + 1, samples[a..<b].contains(where: { abs(Int($0)) > 300 }) else { return 0 }
        var crossings = 0
        for i in (a + 1)..<b where (samples[i - 1] < 0) != (samples[i] < 0) { crossings += 1 }
        return Double(crossings) / 2 / (to - from)
    }

    /// Where the tone first sounds (seconds).
    static func onset(_ samples: [Int16]) -> Double? {
        samples.firstIndex { abs(Int($0)) > 300 }.map { Double($0) / 48000 }
    }

    @Test("CH1 and CH2 of a camera's MXF and MOV go out as one stereo sound, CH1 left and CH2 right, remuxed or transcoded; with four tracks, CH3 and CH4 stay behind", arguments: [
        ("mxf", "5mbps", false), ("mov", "original", false), ("mov", "2mbps", true),
    ])
    func leftAndRight(_ container: String, _ quality: String, _ four: Bool) throws {
        let source = try Self.camera(container, four: four)
        try Command.prepare(source, quality: quality, caps: "ios", scratch: "camera-\(container)-\(quality)") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let json = try Command.json(run)
            #expect(json["plan"]?["audio"]?["merge_sources"] == .array([.number(2)]))
            #expect("\(json["plan"]?["reasons"] ?? .null)".contains("audio_tracks_merged"))
            let probe = try FFprobe(out)
            #expect(probe.streams("audio").count == 1)
            #expect(probe.streams("audio").first?["channels"] == .number(2))
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            #expect(abs(Self.frequency(left, from: 0.5, to: 5.5) - 440) < 5, "left: \(Self.frequency(left, from: 0.5, to: 5.5)) Hz")
            #expect(abs(Self.frequency(right, from: 0.5, to: 5.5) - 1000) < 5, "right: \(Self.frequency(right, from: 0.5, to: 5.5)) Hz")
            #expect(try FFprobe.decodeErrors(out).isEmpty)
        }
    }

    @Test("CH2 starting 1 s after CH1 and stopping at 3.5 s keeps its place: the right is silent before and after it, to within a few milliseconds, and the sound lasts the whole 6 s")
    func secondChannelLateAndShort() throws {
        let source = try Self.camera("mov", secondStart: 1, secondLength: 2.5)
        try Command.prepare(source, quality: "5mbps", caps: "ios", scratch: "camera-late") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            let leftOnset = try #require(Self.onset(left)), rightOnset = try #require(Self.onset(right))
            #expect(abs(rightOnset - leftOnset - 1) < 0.005, "CH2 sounds \(rightOnset - leftOnset) s after CH1")
            #expect(Self.frequency(right, from: 0.1, to: 0.9) == 0)
            #expect(abs(Self.frequency(right, from: 1.2, to: 3.3) - 1000) < 5)
            #expect(Self.frequency(right, from: 3.7, to: 5.8) == 0)
            #expect(abs(Self.frequency(left, from: 3.7, to: 5.8) - 440) < 5)
            let length = try #require(FFprobe(out).duration("audio"))
            #expect(abs(length - 6) < 0.1, "the sound lasts \(length) s")
        }
    }
}
