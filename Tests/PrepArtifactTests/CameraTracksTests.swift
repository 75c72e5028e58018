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

    /// A clip of `seconds` of `picture` with CH1 a 440 Hz tone for `ch1` s and CH2 a 1 kHz
    /// tone for `ch2` s (both the whole clip by default), `filters` applied to them.
    static func tones(_ name: String, seconds: Int, ch1: Int? = nil, ch2: Int? = nil, picture: String = "color=c=gray:size=64x64:rate=5",
                      filters: [String] = [], codec: String = "pcm_s16le") throws -> String {
        let tone = { (hz: Int, length: Int) in ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=48000:duration=\(length)"] }
        return try Media.generated(name, ["-f", "lavfi", "-i", "\(picture):duration=\(seconds)"]
            + tone(440, ch1 ?? seconds) + tone(1000, ch2 ?? seconds) + ["-map", "0", "-map", "1", "-map", "2"] + filters
            + ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", codec])
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

    /// Checks that channel `c` of `path`'s sound lasts `seconds` (within 0.1 s) and sounds each
    /// tone at its frequency (within 10 Hz) over its stretch; `label` names the run in failures.
    static func expectTones(_ path: String, channel c: Int = 0, lasting seconds: Double,
                            _ tones: [(from: Double, to: Double, hz: Double)], _ label: String = "") throws {
        let sound = try channel(path, c)
        #expect(abs(Double(sound.count) / 48000 - seconds) < 0.1, "\(label): \(Double(sound.count) / 48000) s of sound for \(seconds) s")
        for (from, to, hz) in tones {
            let found = frequency(sound, from: from, to: to)
            #expect(abs(found - hz) < 10, "\(label), \(from)-\(to) s: \(found) Hz for \(hz)")
        }
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

    /// Zero crossings' phase within a 1 kHz tone's half period (0.5 ms), averaged on the
    /// circle, over `samples[from..<to]` (seconds): where the tone sits in time, to a few µs.
    static func phase(_ samples: [Int16], from: Double, to: Double) -> Double {
        var x = 0.0, y = 0.0
        for i in Int(from * 48000)..<min(samples.count, Int(to * 48000)) where samples[i - 1] < 0 && samples[i] >= 0 {
            // The crossing between samples i-1 and i, interpolated.
            let t = (Double(i - 1) + Double(-samples[i - 1]) / Double(Int(samples[i]) - Int(samples[i - 1]))) / 48000
            let angle = 2 * Double.pi * t.truncatingRemainder(dividingBy: 0.001) / 0.001
            x += cos(angle)
            y += sin(angle)
        }
        return atan2(y, x) / (2 * Double.pi) * 0.001
    }

    @Test("one lost frame of CH2 (21 ms) is kept as a hole: the right goes on at its own time, not 21 ms early for the rest of the file (the 40 ms that sound may stray from the pictures had let the sides drift apart by it)")
    func lostFrameKeepsSidesTogether() throws {
        let source = try Self.tones("camera-ch2-lost-frame.mkv", seconds: 6, picture: "testsrc2=size=160x120:rate=25",
                                    filters: ["-filter:a:1", "asetnsamples=1024,aselect='not(eq(n\\,141))'"], codec: "pcm_s24le")
        try Command.prepare(source, quality: "5mbps", caps: "ios", scratch: "camera-lost-frame") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let right = try Self.channel(out, 1)
            let before = Self.phase(right, from: 1, to: 2.9), after = Self.phase(right, from: 3.2, to: 5.5)
            var shift = abs(after - before)
            shift = min(shift, 0.001 - shift)
            #expect(shift < 0.00005, "the right's tone moved \(shift * 1000) ms across the lost frame")
            #expect(Self.frequency(right, from: 3.01, to: 3.025) == 0, "the lost frame's time is silent")
        }
    }

    @Test("CH1 stopping at 40 s beside CH2 to 90 s: the right keeps its tone to the end and the left is silent after 40 s (CH2's waiting samples had made the merge give it 30 s of silence and cut its sound, and the job failed as damaged)")
    func firstChannelStopsEarly() throws {
        let source = try Self.tones("camera-ch1-40s-of-90.mov", seconds: 90, ch1: 40)
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "camera-ch1-short") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            #expect(abs(Self.frequency(left, from: 1, to: 39) - 440) < 5)
            #expect(Self.frequency(left, from: 41, to: 89) == 0)
            #expect(abs(Self.frequency(right, from: 1, to: 89) - 1000) < 5, "right: \(Self.frequency(right, from: 1, to: 89)) Hz")
            let length = try #require(FFprobe(out).duration("audio"))
            #expect(abs(length - 90) < 0.2, "the sound lasts \(length) s")
        }
    }

    /// 120 s of pictures and CH1/CH2 tones, both tracks without packets from 10 s to
    /// 110 s where `dropout` (a recording's dropout).
    static func dropout(_ dropout: Bool) throws -> String {
        let cut = dropout ? ["-filter:a", "asetnsamples=1024,aselect='not(between(t\\,10\\,110))'"] : []
        return try Self.tones("camera-\(dropout ? "both-dropout" : "no-dropout")-120s.mkv", seconds: 120, filters: cut)
    }

    @Test("both tracks losing the same 100 s (a recording's dropout, longer than the merge holds anything for) keep the hole, both sides going on at their own times after it, in no more memory than without it (the silence had waited in memory, 19 MB here, 370 MB for half an hour)")
    func commonDropout() throws {
        let dir = Media.scratch("camera-dropout")
        defer { try? FileManager.default.removeItem(at: dir) }
        var peaks: [Int] = []
        for dropout in [false, true] {
            let out = dir.appendingPathComponent("\(dropout).mp4").path
            let r = try Run.peakMemory(Command.binary, ["prepare", try Self.dropout(dropout), "--quality", "1mbps", "--caps", "ios", "--output", out])
            #expect(r.status == 0)
            peaks.append(r.maxRSSKiB)
            guard dropout, r.status == 0 else { continue }
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            for (side, tone) in [(left, 440.0), (right, 1000.0)] {
                #expect(abs(Self.frequency(side, from: 1, to: 9.9) - tone) < 5)
                #expect(Self.frequency(side, from: 10.2, to: 109.8) == 0)
                #expect(abs(Self.frequency(side, from: 110.2, to: 119.5) - tone) < 5)
                let back = try #require(Self.onset(Array(side[(109 * 48000)...]))) + 109
                #expect(abs(back - 110) < 0.03, "the tone comes back at \(back) s")
            }
        }
        #expect(peaks[1] < peaks[0] + 8192, "peak RSS \(peaks[0]) KiB without the dropout, \(peaks[1]) KiB with it")
    }

    @Test("CH2's handler damaged from soun to vide (its 2-byte samples read as pictures of no codec, one a packet): the probe lists it so and answers in about the memory of the undamaged file, whose picture rate it finds as it does there, and the prepare merges CH1 with CH3, CH2 listed as left out (the analysis had held all 960,000 of its packets: 390 MB more for 20 s, 610 MB for 40 s of 1080p)")
    func soundTrackDeclaredAsPictures() throws {
        let plain = try Media.cameraTracks(seconds: 20, ch2AsPictures: false)
        let damaged = try Media.cameraTracks(seconds: 20, ch2AsPictures: true)
        let streams = try Command.probedStreams(damaged)
        #expect(streams.count == 5)
        guard streams.count == 5 else { return }
        #expect(streams[2]["type"] == .string("video") && streams[2]["codec"] == .string("none"), "\(streams[2])")
        #expect(streams[0]["frame_rate"] == .number(25) && streams[0]["variable_frame_rate"] == .bool(false), "\(streams[0])")
        // Beside the undamaged file's peak: libavformat's index of CH2 (24 bytes a sample,
        // 23 MB, held twice while it applies the edit list) and slack; not its packets.
        let dir = Media.scratch("camera-ch2-vide")
        defer { try? FileManager.default.removeItem(at: dir) }
        for args in [["probe"], ["prepare", "--quality", "original", "--caps", "ios", "--output", dir.appendingPathComponent("o.mp4").path]] {
            let peaks = try [plain, damaged].map { source in
                let r = try Run.peakMemory(Command.binary, [args[0], source] + args.dropFirst())
                #expect(r.status == 0, "\(args[0]) \(source)")
                return r.maxRSSKiB
            }
            #expect(peaks[1] < peaks[0] + 64 * 1024, "\(args[0]): peak RSS \(peaks[0]) KiB undamaged, \(peaks[1]) KiB with CH2 as pictures")
        }
        try Command.prepare(damaged, quality: "original", caps: "ios", scratch: "camera-ch2-vide-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.prefix(400)) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let json = try Command.json(run)
            #expect(json["plan"]?["audio"]?["source_index"]?.int == 1 && json["plan"]?["audio"]?["merge_sources"] == .array([.number(3)]),
                    "\(json["plan"]?["audio"] ?? .null)")
            #expect(DroppedStreamsTests.dropped(json).contains(.init(index: 2, type: "video", reason: "video_track_not_chosen", language: nil)),
                    "\(DroppedStreamsTests.dropped(json))")
            let probe = try FFprobe(out)
            #expect(probe.streams("video").count == 1 && probe.streams("audio").count == 1)
            #expect(abs(probe.formatDuration - 20) < 0.2)
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            #expect(abs(Self.frequency(left, from: 1, to: 19) - 440) < 5, "left: \(Self.frequency(left, from: 1, to: 19)) Hz")
            #expect(abs(Self.frequency(right, from: 1, to: 19) - 2000) < 5, "right: \(Self.frequency(right, from: 1, to: 19)) Hz")
        }
    }

    /// The lag (samples, within ±`reach`) at which `right` best matches `left` over the 0.1 s
    /// from `second`.
    static func lag(_ left: [Int16], _ right: [Int16], at second: Int, reach: Int = 300) -> Int {
        let a = second * 48000
        var best = (score: Int.min, lag: 0)
        for lag in -reach...reach {
            var score = 0
            for i in stride(from: 0, to: 4800, by: 4) { score += Int(left[a + i]) * Int(right[a + i + lag]) }
            if score > best.score { best = (score, lag) }
        }
        return best.lag
    }

    @Test("CH2's times jittering by up to 5 ms from packet to packet (its samples continuous) are absorbed: the sides stay together to the sample all along, where they had wandered ±5 ms, with a click at each fill")
    func jitterAbsorbed() throws {
        let source = try Media.generated("camera-ch2-jitter.mkv",
            ["-f", "lavfi", "-i", "color=c=gray:size=64x64:rate=5:duration=12",
             "-f", "lavfi", "-i", "anoisesrc=r=48000:d=12:a=0.3:seed=7",
             "-map", "0", "-map", "1", "-map", "1", "-filter:a:0", "asetnsamples=1024",
             "-filter:a:1", "asetnsamples=1024,asetpts='if(eq(N\\,0)\\,PTS\\,PTS+(random(0)*0.01-0.005)/TB)'",
             "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le"])
        try Command.prepare(source, quality: "5mbps", caps: "ios", scratch: "camera-jitter") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr.suffix(300))")
            guard run.status == 0 else { return }
            let left = try Self.channel(out, 0), right = try Self.channel(out, 1)
            let lags = (1...10).map { Self.lag(left, right, at: $0) }
            #expect(lags.allSatisfy { $0 == 0 }, "the right's lag behind the left, second by second: \(lags)")
        }
    }

    @Test("CH2's times jumping an hour on at 5 s of an 8 s clip (Matroska then stores those packets after everything else) are damage, not an hour's gap; the merged sound fails as damaged, and CH1 goes alone, as before the merge, said in the adjustments, the delivered plan and `dropped` (the run was refused; its silence had first made the clip an hour long)")
    func oneTrackJump() throws {
        let source = try Self.tones("camera-ch2-jump-1h.mkv", seconds: 8, filters: [
            "-filter:a:0", "asetnsamples=1024", "-filter:a:1", "asetnsamples=1024,asetpts='if(gte(T\\,5)\\,PTS+3600/TB\\,PTS)'"])
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "camera-jump") { run, out in
            #expect(run.status == 0, "\(run.stdout.prefix(400)) \(run.stderr.suffix(300))")
            let json = try Command.json(run)
            #expect(json["plan"]?["audio"]?["merge_sources"] != nil, "the plan merges: \(run.stdout.prefix(600))")
            #expect("\(json["stats"]?["adjustments"] ?? .null)".contains("audio_tracks_not_merged"), "\(run.stdout.suffix(600))")
            let executed = try #require(json["executed_plan"], "no executed_plan")
            #expect(executed["audio"]?["merge_sources"] == nil && executed["audio"]?["source_index"]?.int == 1, "\(executed)")
            #expect("\(executed["reasons"] ?? .null)".contains("audio_tracks_not_merged"))
            #expect(DroppedStreamsTests.dropped(json) == [.init(index: 2, type: "audio", reason: "audio_tracks_not_merged", language: nil)])
            #expect(abs(try FFprobe(out).formatDuration - 8) < 0.2)
            // Both sides are CH1 (440 Hz) for the whole clip.
            for side in [0, 1] {
                let samples = try Self.channel(out, side)
                #expect(abs(Self.frequency(samples, from: 1, to: 7) - 440) < 5, "side \(side)")
            }
        }
    }

    @Test("CH2's edit list damaged (its one segment 0 long, so its one packet gives no sound): the pair cannot be decoded as one, and CH1 goes alone, said in the adjustments (the file was refused as undecodable)")
    func partnerUndecodable() throws {
        let source = try Media.generated("camera-ch2-elst0.mov") { tmp in
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=gray:size=64x64:rate=5:duration=8",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
                                               "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000:duration=8",
                                               "-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast",
                                               "-c:a", "pcm_s24le", "-f", "mov", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tmp)))
            // The third `elst` is CH2's (tracks in order: picture, CH1, CH2): its first
            // segment's duration, after the box's version, flags and entry count.
            let tag = Array("elst".utf8)
            let found = (0..<(bytes.count - 4)).filter { bytes[$0..<($0 + 4)].elementsEqual(tag) }
            guard found.count == 3 else { throw TestFailure("\(found.count) edit lists") }
            for k in 0..<4 { bytes[found[2] + 12 + k] = 0 }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "camera-elst0") { run, out in
            #expect(run.status == 0, "\(run.stdout.prefix(400)) \(run.stderr.suffix(300))")
            let json = try Command.json(run)
            #expect("\(json["stats"]?["adjustments"] ?? .null)".contains("audio_tracks_not_merged"), "\(run.stdout.suffix(600))")
            #expect(json["executed_plan"]?["audio"]?["merge_sources"] == nil)
            let samples = try Self.channel(out, 1)
            #expect(abs(Self.frequency(samples, from: 1, to: 7) - 440) < 5, "CH1 on the right too")
        }
    }
}
