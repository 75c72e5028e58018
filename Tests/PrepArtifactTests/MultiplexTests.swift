import Foundation
import Testing
import KilnCore
import KilnTestSupport

@Suite("a whole multiplex recorded (an HDHomeRun's or a DVB card's full channel)")
struct MultiplexTests {
    /// Two channels' programmes in one transport stream, 8 s: the first's pictures with
    /// 5.1 AC-3 at 384 kbit/s (a 440 Hz tone), the second's with stereo AC-3 at 192 kbit/s
    /// (880 Hz), all in English.
    static func multiplex() throws -> String {
        try Media.generated("two-programmes.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
            "-f", "lavfi", "-i", "smptebars=size=320x240:rate=25:duration=8", "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=8",
            "-map", "0:v", "-map", "1:a", "-map", "2:v", "-map", "3:a", "-c:v", "libx264", "-preset", "ultrafast",
            "-c:a", "ac3", "-ac:a:0", "6", "-b:a:0", "384k", "-ac:a:1", "2", "-b:a:1", "192k",
            "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=eng",
            "-program", "title=One:st=0:st=1", "-program", "title=Two:st=2:st=3", "-f", "mpegts"])
    }

    @Test("the probe says which programme lists each stream; at 2 Mbps the sound is the first channel's, whose pictures go (the second channel's stereo, nearer the rung's budget, had gone with them), and the other channel's streams are listed as other_programme; a file of one programme says none")
    func soundOfThePicturesChannel() throws {
        let source = try Self.multiplex()
        let streams = try Command.probedStreams(source)
        let programmes = streams.map { s -> [Int] in
            guard case .array(let listed)? = s["programs"] else { return [] }
            return listed.compactMap(\.int)
        }
        #expect(programmes == [[1], [1], [2], [2]], "\(programmes)")
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "multiplex-2mbps") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["source_index"]?.int == 0 && json["plan"]?["audio"]?["source_index"]?.int == 1, "\(r.stdout.prefix(800))")
            guard case .array(let dropped)? = json["output"]?["dropped"] else { Issue.record("no dropped list"); return }
            #expect(dropped.map { "\($0["source_index"]?.int ?? -1) \($0["reason"]?.string ?? "")" } == ["2 other_programme", "3 other_programme"],
                    "\(dropped)")
            let pitches = try SoundCodecChangeTests.pitches(out)
            #expect(pitches.count >= 7 && pitches.dropFirst().dropLast().allSatisfy { SoundCodecChangeTests.near($0, 440) }, "\(pitches)")
        }
        let single = try Command.probedStreams(try Media.soundRecording("ac3", channels: [2]))
        #expect(single.allSatisfy { $0["programs"] == nil }, "\(single)")
    }

    @Test("a subchannel's rate is its own: in a multiplex of a 0.7 Mbit/s channel beside a 4 Mbit/s one, the probe gives each stream's part (multiplex_bit_rate), and at 2 Mbps the small channel's pictures are copied (the whole multiplex's rate had them re-encoded)")
    func subchannelRate() throws {
        let source = try Media.generated("small-and-large-channels.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
            "-f", "lavfi", "-i", "nullsrc=size=640x360:rate=25:duration=8,geq=random(1)*255:128:128",
            "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=8",
            "-map", "0:v", "-map", "1:a", "-map", "2:v", "-map", "3:a", "-c:v", "libx264", "-preset", "ultrafast",
            "-b:v:0", "500k", "-maxrate:v:0", "500k", "-bufsize:v:0", "1M", "-b:v:1", "4M", "-maxrate:v:1", "4M", "-bufsize:v:1", "8M",
            "-c:a", "ac3", "-b:a", "192k", "-program", "title=Small:st=0:st=1", "-program", "title=Large:st=2:st=3", "-f", "mpegts"])
        let streams = try Command.probedStreams(source)
        let parts = streams.map { $0["multiplex_bit_rate"]?.int ?? 0 }
        #expect(parts.count == 4 && (300_000...1_000_000).contains(parts[0]) && parts[2] > 3_000_000, "\(parts)")
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "subchannel-rate") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["source_index"]?.int == 0 && json["plan"]?["video"]?["action"] == .string("copy"),
                    "\(r.stdout.prefix(800))")
            let video = try FFprobe(out).streams("video")
            #expect(video.count == 1 && video.first?["width"]?.int == 320, "\(video)")
        }
    }
}

@Suite("a broadcast stream whose language descriptor lists several languages")
struct ListedLanguagesTests {
    @Test("a DVB ISO 639 descriptor listing English then German (libavformat gives \"eng,deu\", which the probe shows) is planned as English, and the output's track says English (it said und)")
    func firstListedLanguage() throws {
        let source = try Media.generated("mp2-eng-deu.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                           "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                           "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "mp2",
                                                           "-metadata:s:a:0", "language=eng,deu", "-f", "mpegts"])
        let sound = try #require(try Command.probedStreams(source).first { $0["type"] == .string("audio") }, "no audio probed")
        #expect(sound["language"] == .string("eng,deu"), "\(sound)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "listed-languages") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["audio"]?["language"] == .string("eng"))
            #expect(try FFprobe(out).streams("audio").first?["tags"]?["language"] == .string("eng"))
        }
    }
}

@Suite("a bilingual broadcast's dual-mono sound")
struct DualMonoTests {
    @Test("MP2 in dual-channel mode, English left (440 Hz) and German right (880 Hz): the probe says dual_mono; the output is the one channel, English by default, German when asked, its track labelled so (both had played at once, one a side)")
    func oneLanguage() throws {
        let source = try Media.generated("mp2-dual-mono-eng-deu.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
            "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=6", "-filter_complex", "[1:a][2:a]amerge=inputs=2[a]",
            "-map", "0:v", "-map", "[a]", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "libtwolame", "-mode", "dual_channel",
            "-b:a", "192k", "-metadata:s:a:0", "language=eng,deu", "-f", "mpegts"])
        try Self.expectOneLanguage(source, quality: "2mbps", scratch: "dual-mono", [(nil, 440, "eng"), ("deu", 880, "deu")])
    }

    /// The probe says `source`'s sound is dual mono, and each `(language asked, tone, track
    /// language)` prepares to that one channel alone, its track labelled so.
    static func expectOneLanguage(_ source: String, quality: String, scratch: String,
                                  _ cases: [(language: String?, hz: Int, tag: String)]) throws {
        let sound = try #require(try Command.probedStreams(source).first { $0["type"] == .string("audio") }, "no audio probed")
        #expect(sound["dual_mono"] == .bool(true), "\(sound)")
        let dir = Media.scratch(scratch)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (language, hz, tag) in cases {
            let out = dir.appendingPathComponent("\(language ?? "default").mp4").path
            let r = try Command.run(["prepare", source, "--quality", quality, "--caps", "ios", "--output", out, "--json"]
                                    + (language.map { ["--audio-language", $0] } ?? []))
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let audio = try FFprobe(out).streams("audio")
            #expect(audio.count == 1 && audio.first?["channels"]?.int == 1 && audio.first?["tags"]?["language"] == .string(tag), "\(audio)")
            let pitches = try SoundCodecChangeTests.pitches(out)
            #expect(pitches.count >= 5 && pitches.dropFirst().prefix(4).allSatisfy { SoundCodecChangeTests.near($0, hz) }, "\(language ?? "default"): \(pitches)")
        }
    }

    @Test("ISDB's AAC dual mono (ADTS of channel configuration 0 with a program config element of two single channel elements), Japanese left (440 Hz) and English right (880 Hz): the probe says dual_mono; the output is the one channel, Japanese by default, English when asked (it was copied as stereo, both at once)")
    func aacDualMono() throws {
        try Self.expectOneLanguage(try Media.aacDualMono(), quality: "original", scratch: "aac-dual-mono", [(nil, 440, "jpn"), ("eng", 880, "eng")])
    }

    @Test("dual channel that goes on in stereo on the same PID (the next programme's: 330 Hz left, 550 Hz right): the stereo part is mixed down, not cut to its left side")
    func stereoAfterDualMono() throws {
        let source = try Media.concatenatedTS("mp2-dual-then-stereo.ts", parts: [
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
             "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=4", "-filter_complex", "[1:a][2:a]amerge=inputs=2[a]",
             "-map", "0:v", "-map", "[a]", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "libtwolame", "-mode", "dual_channel",
             "-b:a", "192k", "-metadata:s:a:0", "language=eng,deu", "-streamid", "0:256", "-streamid", "1:257", "-tables_version", "0"],
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-f", "lavfi", "-i", "sine=frequency=330:sample_rate=48000:duration=4",
             "-f", "lavfi", "-i", "sine=frequency=550:sample_rate=48000:duration=4", "-filter_complex", "[1:a][2:a]amerge=inputs=2[a]",
             "-map", "0:v", "-map", "[a]", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "libtwolame", "-mode", "stereo",
             "-b:a", "192k", "-metadata:s:a:0", "language=eng,deu", "-streamid", "0:256", "-streamid", "1:257", "-tables_version", "1",
             "-output_ts_offset", "4"],
        ])
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "dual-then-stereo") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let pitches = try SoundCodecChangeTests.pitches(out)
            #expect(pitches.count >= 7, "\(pitches)")
            #expect(pitches[1...2].allSatisfy { SoundCodecChangeTests.near($0, 440) }, "the English side: \(pitches)")
            #expect(pitches[5...6].allSatisfy { $0 > 400 }, "both sides of the stereo, not its 330 Hz left alone: \(pitches)")
        }
    }
}
