import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// The caps a device can add beside the contract's (`max_h264_level`, `max_audio_channels`,
/// …), judged on what ffprobe reads from the output.
@Suite("finer device caps")
struct FinerCapsTests {
    @Test("an old TV's caps (H.264 up to level 4.0, stereo): a level 5.1 film with 5.1 AAC comes out at a level it decodes, in two channels")
    func levelAndChannels() throws {
        let source = try Media.generated("level51-aac51.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=24", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-level", "5.1", "-af", "pan=5.1|FL=c0|FR=c0|FC=c0|LFE=c0|BL=c0|BR=c0",
            "-c:a", "aac", "-b:a", "384k"])
        let dir = Media.scratch("finer-caps")
        defer { try? FileManager.default.removeItem(at: dir) }
        let caps = dir.appendingPathComponent("tv.json").path
        try #"{"codecs_video": ["h264"], "codecs_audio": ["aac"], "containers": ["mp4"], "max_h264_level": "4.0", "max_audio_channels": 2}"#
            .write(toFile: caps, atomically: true, encoding: .utf8)
        let before = try Command.probedStreams(source)
        #expect(before.first?["level"]?.int == 51 && before.last?["channels"]?.int == 6, "the source is what the test needs")
        try Command.prepare(source, quality: "original", caps: caps, scratch: "finer-caps-out") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            let reasons = "\(try Command.json(run)["plan"]?["reasons"] ?? .null)"
            #expect(reasons.contains("video_level_above_cap") && reasons.contains("audio_channels_above_cap"), "\(reasons)")
            let r = try Run.command("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,level,channels", "-of", "json", out])
            let streams = try JSONValue.parse(Array(r.stdout.utf8))["streams"]
            guard case .array(let s)? = streams, s.count == 2 else { throw TestFailure("streams: \(r.stdout)") }
            #expect(s[0]["codec_name"] == .string("h264") && (s[0]["level"]?.int ?? 99) <= 40, "\(s[0])")
            #expect(s[1]["codec_name"] == .string("aac") && s[1]["channels"]?.int == 2, "\(s[1])")
        }
    }

    /// The first video stream of `out` as ffprobe counts it: its rates, its pictures
    /// decoded (`nb_read_frames`), start and duration.
    static func countedVideo(_ out: String) throws -> JSONValue {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-count_frames",
                                            "-show_entries", "stream=r_frame_rate,avg_frame_rate,nb_read_frames,start_time,duration", "-of", "json", out])
        guard case .array(let streams)? = try JSONValue.parse(Array(r.stdout.utf8))["streams"], let v = streams.first else {
            throw TestFailure("no video stream: \(r.stdout)")
        }
        return v
    }

    @Test("a 120 fps clip is encoded at 60 fps, every second picture (not a mix of both), and at 30 for a device that says max_frame_rate 30, even at original")
    func frameRateLimit() throws {
        // Even pictures dark, odd ones light: every second picture is all one brightness. The
        // noise gives it more bits than the 1 Mbit/s rung, so it is encoded there.
        let source = try Media.generated("alternating-noisy-120fps.mp4", [
            "-f", "lavfi", "-i", "color=c=gray:size=320x240:rate=120,geq=lum='if(mod(N,2),200,40)':cb=128:cr=128,noise=alls=20:allf=t",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2",
            "-c:v", "libx264", "-preset", "ultrafast", "-qp", "10", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        let dir = Media.scratch("frame-rate-caps")
        defer { try? FileManager.default.removeItem(at: dir) }
        let caps = dir.appendingPathComponent("thirty.json").path
        try #"{"codecs_video": ["h264"], "codecs_audio": ["aac"], "containers": ["mp4"], "max_frame_rate": 30}"#
            .write(toFile: caps, atomically: true, encoding: .utf8)
        for (quality, device, rate) in [("1mbps", "ios", 60), ("original", caps, 30)] {
            try Command.prepare(source, quality: quality, caps: device, scratch: "frame-rate-out") { run, out in
                #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
                #expect("\(try Command.json(run)["plan"]?["reasons"] ?? .null)".contains("frame_rate_reduced"))
                let v = try Self.countedVideo(out)
                #expect(v["r_frame_rate"] == .string("\(rate)/1") && v["avg_frame_rate"] == .string("\(rate)/1"), "\(v)")
                let frames = Int(v["nb_read_frames"]?.string ?? "") ?? 0
                #expect(abs(frames - 2 * rate) <= 1, "\(frames) pictures for 2 s at \(rate) fps")
                #expect(abs((Double(v["duration"]?.string ?? "") ?? 0) - 2) < 0.05, "\(v)")
                let brightness = try FFprobe.brightness(out).map(\.luma)
                #expect(brightness.count == frames, "\(brightness.count) pictures measured")
                #expect((brightness.max() ?? 0) - (brightness.min() ?? 0) < 20, "pictures of both kinds: \(brightness.prefix(8))")
            }
        }
    }

    @Test("a 30 fps film for a device that says max_frame_rate 25 is encoded at 25 fps, its length kept: it had been halved to 15")
    func thirtyWithinTwentyFive() throws {
        let source = try Media.generated("testsrc-30fps-2s.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        let dir = Media.scratch("frame-rate-25")
        defer { try? FileManager.default.removeItem(at: dir) }
        let caps = dir.appendingPathComponent("pal.json").path
        try #"{"codecs_video": ["h264"], "codecs_audio": ["aac"], "containers": ["mp4"], "max_frame_rate": 25}"#
            .write(toFile: caps, atomically: true, encoding: .utf8)
        try Command.prepare(source, quality: "original", caps: caps, scratch: "frame-rate-25-out") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            let v = try Self.countedVideo(out)
            #expect(v["r_frame_rate"] == .string("25/1") && v["avg_frame_rate"] == .string("25/1"), "\(v)")
            #expect(abs((Int(v["nb_read_frames"]?.string ?? "") ?? 0) - 50) <= 1, "\(v)")
            #expect(abs((Double(v["duration"]?.string ?? "") ?? 0) - 2) < 0.05, "\(v)")
        }
    }

    @Test("a 300 fps high-speed clip is encoded at 60 fps, every fifth picture, with keyframes 2 s apart: it had been taken for a clip of unknown rate and encoded at 300 fps, keyframes every 50 pictures; in Matroska's milliseconds too (steps of 3 and 4 ms, which read 333 fps and made 55.6)", arguments: ["mp4", "mkv"])
    func highSpeedClip(_ container: String) throws {
        let source = try Media.generated("testsrc-300fps-2s.\(container)", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=300", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "frame-rate-300-\(container)-out") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect("\(try Command.json(run)["plan"]?["reasons"] ?? .null)".contains("frame_rate_reduced"))
            let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "frame=key_frame,pts_time", "-of", "csv=p=0", out])
            let frames = r.stdout.split(separator: "\n").map { $0.split(separator: ",") }.filter { $0.count == 2 }
            #expect(abs(frames.count - 120) <= 1, "\(frames.count) pictures for 2 s at 60 fps")
            let keys = frames.filter { $0[0] == "1" }.compactMap { Double($0[1]) }
            #expect(keys.count == 1 || (keys.count == 2 && abs(keys[1] - keys[0] - 2) < 0.05), "keyframes at \(keys)")
        }
    }
}
