import Foundation
import Testing
import KilnCore
import KilnTestSupport

@Suite("a broadcast's sound that goes on in another codec on its PID")
struct SoundCodecChangeTests {
    /// Parts laid end to end as a DVB recording's are, the audio PID the same throughout
    /// and each part's programme map a new version: `(codec, channels, tone Hz, start s,
    /// seconds)`. libavformat keeps the first part's codec for the whole stream.
    static func recording(_ name: String, _ parts: [(codec: String, channels: Int, tone: Int, start: Int, seconds: Int)]) throws -> String {
        try Media.concatenatedTS(name, parts: parts.enumerated().map { i, p in
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(p.seconds)",
             "-f", "lavfi", "-i", "sine=frequency=\(p.tone):sample_rate=48000:duration=\(p.seconds)",
             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", p.codec, "-ac", "\(p.channels)",
             "-streamid", "0:256", "-streamid", "1:257", "-tables_version", "\(i)", "-output_ts_offset", "\(p.start)"]
        })
    }

    /// The tone's pitch in each whole second of `path`'s sound (its channels mixed), from
    /// the sign changes of the decoded samples.
    static func pitches(_ path: String) throws -> [Int] {
        let raw = path + ".s16"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-map", "0:a", "-ac", "1", "-ar", "48000",
                                           "-f", "s16le", raw])
        guard r.status == 0 else { throw TestFailure(r.stderr) }
        let data = try Data(contentsOf: URL(fileURLWithPath: raw))
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        return stride(from: 0, to: samples.count - 48000 + 1, by: 48000).map { start in
            var changes = 0
            for i in start + 1..<start + 48000 where (samples[i - 1] < 0) != (samples[i] < 0) { changes += 1 }
            return changes / 2
        }
    }

    static func near(_ hz: Int, _ expected: Int) -> Bool { abs(hz - expected) <= expected / 50 }

    @Test("AAC stereo that goes on as AC-3 5.1 for a film, across a jump in the clock, then back to AAC: the probe finds the 5.1 and the change, the sound is decoded in each codec and encoded once (it was refused: 'no sound for its last seconds'), each part's tone where its pictures are; a stereo device gets stereo")
    func followedAcrossCodecs() throws {
        let source = try Self.recording("aac-ac3-aac-same-pid.ts", [("aac", 2, 440, 0, 6), ("ac3", 6, 880, 5000, 6), ("aac", 2, 440, 300, 6)])
        let sound = try #require(try Command.probedStreams(source).first { $0["type"] == .string("audio") }, "no audio probed")
        #expect(sound["channels"]?.int == 6 && sound["format_changes"] == .bool(true), "\(sound)")
        for (caps, channels) in [("ios", 6), ("web", 2)] {
            try Command.prepare(source, quality: "original", caps: caps, scratch: "codec-change-\(caps)") { r, out in
                #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
                let json = try Command.json(r)
                #expect("\(json["plan"]?["reasons"] ?? .null)".contains("audio_format_changes"), "\(r.stdout.prefix(600))")
                #expect(json["stats"]?["adjustments"] == nil, "encoded once: \(r.stdout.suffix(600))")
                let audio = try FFprobe(out).streams("audio")
                #expect(audio.count == 1 && audio.first?["channels"]?.int == channels, "\(audio)")
                #expect(try FFprobe(out).duration("audio").map { abs($0 - 18) < 0.2 } == true)
                let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:a", "-f", "null", "-"])
                #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
                let pitches = try Self.pitches(out)
                #expect(pitches.count == 18, "\(pitches)")
                for (second, hz) in pitches.enumerated() where second % 6 != 0 {
                    #expect(Self.near(hz, (6..<12).contains(second) ? 880 : 440), "second \(second): \(pitches)")
                }
            }
        }
    }

    @Test("AC-3 5.1 that goes on as AAC stereo (libavformat's AC-3 parser finds no frame in AAC's bytes): the sound after the change was lost, the output's sound ending at 6 s of 12 with exit 0; it now goes on, each part's tone in its seconds")
    func soundAfterTheChangeKept() throws {
        let source = try Self.recording("ac3-then-aac-same-pid.ts", [("ac3", 6, 880, 0, 6), ("aac", 2, 440, 6, 6)])
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "codec-change-ac3-aac") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try FFprobe(out).duration("audio").map { abs($0 - 12) < 0.2 } == true)
            let pitches = try Self.pitches(out)
            #expect(pitches.count == 12, "\(pitches)")
            for (second, hz) in pitches.enumerated() where second % 6 != 0 {
                #expect(Self.near(hz, second < 6 ? 880 : 440), "second \(second): \(pitches)")
            }
        }
    }

    @Test("a change the probe's samples fall short of (the last two seconds of 45) stops the copy of the AAC where the AC-3 begins, and the sound is re-encoded, said in the adjustments; the AC-3 part plays its own tone")
    func copyStopsAtCodec() throws {
        let source = try Self.recording("aac-then-ac3-late-same-pid.ts", [("aac", 2, 440, 0, 45), ("ac3", 6, 880, 45, 2)])
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "codec-change-late") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("copy"), "the probe did not foresee it: \(r.stdout.prefix(600))")
            let adjustments = "\(json["stats"]?["adjustments"] ?? .null)"
            #expect(adjustments.contains("audio_reencoded") && adjustments.contains("goes on in ac3"), "\(adjustments)")
            #expect(try FFprobe(out).duration("audio").map { abs($0 - 47) < 0.2 } == true)
            let pitches = try Self.pitches(out)
            #expect(pitches.count == 47 && Self.near(pitches[44], 440) && Self.near(pitches[46], 880), "\(pitches)")
        }
    }
}
