import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// Media the shared files lack, generated once with the ffmpeg command.
enum Generated {
    static let tone = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]

    /// 480i MPEG-2 with 5.1 AC-3 in MPEG-TS, top field first.
    static func interlacedTS() throws -> String {
        try Media.generated("interlaced-480i-ac3.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=720x480:rate=60000/1001",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "4", "-vf", "tinterlace=interleave_top,setfield=tff", "-flags", "+ildct+ilme", "-top", "1",
            "-c:v", "mpeg2video", "-b:v", "4M", "-af", "pan=5.1|FL=c0|FR=c0|FC=c0|LFE=c0|BL=c0|BR=c0",
            "-c:a", "ac3", "-b:a", "384k"])
    }

    /// 10-bit HEVC HDR10 (PQ, BT.2020, mastering metadata) with AAC, in MKV.
    static func hdr10HEVC() throws -> String {
        try Media.generated("hdr10-hevc-main10.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=24", ] + tone + [
            "-t", "3", "-pix_fmt", "yuv420p10le", "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(10000000,1):max-cll=1000,400",
            "-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc",
            "-c:a", "aac", "-b:a", "128k"])
    }

    /// Variable frame rate H.264 (frames dropped unevenly) with B-frames in MKV: MKV
    /// stores no DTS, so the remux must synthesize them.
    static func vfrMKV() throws -> String {
        try Media.generated("vfr-h264-bframes.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30", ] + tone + [
            "-t", "4", "-vf", "select='not(between(n,20,40))*not(eq(mod(n,4),1))+lt(n,20)'", "-fps_mode", "vfr",
            "-c:v", "libx264", "-preset", "ultrafast", "-bf", "3", "-c:a", "aac"])
    }

    /// A phone's clip: 30 fps for 3 s, then 24 fps for 3 s (low light), in QuickTime, whose
    /// average (27 fps) is no rate any of its frames come at.
    static func phoneVFR() throws -> String {
        try Media.generated("phone-vfr-30-24.mov", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30:duration=3", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=24:duration=3",
            "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=6", "-filter_complex", "[0:v][1:v]concat=n=2:v=1:a=0[v]",
            "-map", "[v]", "-map", "2:a", "-fps_mode", "vfr", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
    }

    /// A clip trimmed between keyframes without re-encoding, as a phone's trim or
    /// `ffmpeg -ss 3.3 -c copy` writes it: the pictures from the keyframe before the cut
    /// (2 s, a 50-frame GOP at 25 fps) are kept, and an edit list hides them. AC-3 sound.
    static func trimmedMP4() throws -> String {
        try Media.generated("trimmed-editlist-ac3.mp4") { tmp in
            let scratch = Media.scratch("trim")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let full = scratch.appendingPathComponent("full.mp4").path
            for args in [["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25"] + tone + ["-t", "12", "-c:v", "libx264", "-preset", "ultrafast", "-g", "50",
                          "-bf", "2", "-c:a", "ac3", full],
                         ["-ss", "3.3", "-i", full, "-c", "copy", tmp]] {
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args)
                guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            }
        }
    }

    /// A TV recording saved to Matroska with its own clock (`ffmpeg -copyts`): times from
    /// the TS's 1.4 s on, and a segment duration that is the last time (7.4 s), not the
    /// length (6 s).
    static func copytsMKV() throws -> String {
        try Media.generated("copyts-recording.mkv") { tmp in
            let scratch = Media.scratch("copyts")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let ts = scratch.appendingPathComponent("rec.ts").path
            for args in [["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25"] + tone + ["-t", "6", "-c:v", "libx264", "-preset", "ultrafast",
                          "-c:a", "ac3", ts],
                         ["-copyts", "-i", ts, "-map", "0", "-c", "copy", tmp]] {
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args)
                guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            }
        }
    }

    /// A clip whose first picture is held a second, with B-frames, saved to FLV by the
    /// ffmpeg command: its pictures' decode times start a second before they are shown, at
    /// 0, so its sound and pictures run from 1.01 s and the `onMetaData` duration it
    /// declares is its last time (9.03 s), not its length (8.02 s).
    static func heldOpeningFLV() throws -> String {
        try Media.generated("held-opening.flv") { tmp in
            let scratch = Media.scratch("held-opening")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let ts = scratch.appendingPathComponent("clip.ts").path
            for args in [["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30"] + tone
                            + ["-t", "8", "-vf", "setpts='if(eq(N,0),0,(N+29)/30)/TB'", "-fps_mode", "vfr", "-c:v", "libx264",
                               "-preset", "veryfast", "-c:a", "aac", "-shortest", ts],
                         ["-i", ts, "-c", "copy", "-f", "flv", tmp]] {
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args)
                guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            }
        }
    }

    /// MPEG-TS whose timestamps wrap past 2^33 (90 kHz) in the middle.
    static func wrappingTS() throws -> String {
        try Media.generated("pts-wrap.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "6", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
            "-output_ts_offset", "95441"])
    }

    /// Interlaced H.264 (top field first) in MPEG-TS, where only the bitstream says so.
    static func interlacedH264() throws -> String {
        try Media.generated("interlaced-h264.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=720x576:rate=50", "-t", "2",
            "-vf", "tinterlace=interleave_top,setfield=tff", "-c:v", "libx264", "-preset", "ultrafast",
            "-flags", "+ildct+ilme", "-x264opts", "tff=1"])
    }

    /// A broadcast master's MXF (MPEG-2, PCM) and a camera's MOV (H.264, AAC), each with a
    /// start timecode.
    static func timecoded() throws -> [String] {
        let v = ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25"]
        return [
            try Media.generated("timecode-mpeg2-pcm.mxf", v + tone + [
                "-t", "2", "-c:v", "mpeg2video", "-b:v", "8M", "-c:a", "pcm_s16le", "-timecode", "10:00:00:00"]),
            try Media.generated("timecode-h264-aac.mov", v + tone + [
                "-t", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-timecode", "01:00:00:00"]),
        ]
    }

    /// 10 s of H.264 and AAC in MKV with two text subtitle tracks as real files have them:
    /// SubRip in French with overlapping cues, a cue written in Windows-1252 (not UTF-8)
    /// and a last cue running 4 s past the pictures (so the segment declares 14 s); ASS with
    /// a sign over dialogue and a vector drawing.
    static func subtitled() throws -> String {
        try Media.generated("subtitled-srt-ass.mkv") { tmp in
            let dir = Media.scratch("subs")
            defer { try? FileManager.default.removeItem(at: dir) }
            let srt = dir.appendingPathComponent("fr.srt"), ass = dir.appendingPathComponent("signs.ass")
            var subrip = Array("""
                1
                00:00:00,500 --> 00:00:02,000
                <i>Premier</i>

                2
                00:00:01,500 --> 00:00:03,000
                Second

                3
                00:00:04,000 --> 00:00:05,000
                Caf
                """.utf8)
            subrip += [0xE9, 0x20, 0x63, 0x72, 0xE8, 0x6D, 0x65]   // "é crème" in Windows-1252
            subrip += Array("""


                4
                00:00:09,000 --> 00:00:14,000
                Fin

                """.utf8)
            try Data(subrip).write(to: srt)
            try """
                [Script Info]
                ScriptType: v4.00+
                PlayResX: 640
                PlayResY: 360

                [V4+ Styles]
                Format: Name, Fontname, Fontsize, PrimaryColour, SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding
                Style: Default,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,100,100,0,0,1,2,0,2,10,10,10,1

                [Events]
                Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text
                Dialogue: 0,0:00:00.50,0:00:02.00,Default,,0,0,0,,Dialogue
                Dialogue: 0,0:00:01.00,0:00:03.00,Default,,0,0,0,,{\\pos(320,50)}SIGN
                Dialogue: 0,0:00:04.00,0:00:05.00,Default,,0,0,0,,{\\p1}m 0 0 l 100 0 100 100 0 100{\\p0}
                Dialogue: 0,0:00:06.00,0:00:07.00,Default,,0,0,0,,Last

                """.write(to: ass, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y",
                "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                "-i", srt.path, "-i", ass.path, "-map", "0:v", "-map", "1:a", "-map", "2", "-map", "3", "-t", "10",
                "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:s:0", "copy", "-c:s:1", "ass",
                "-metadata:s:s:0", "language=fre", "-metadata:s:s:1", "language=eng", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not generate subtitled-srt-ass.mkv: \(r.stderr)") }
        }
    }

    /// The shared PGS sample with its bitmap subtitles 5 s later, so that their last picture
    /// ends 5 s after the sound, and without mkvmerge's per-track statistics (as MakeMKV and
    /// older muxers write it): the segment declares 6.24 s of a 1 s file.
    static func lateBitmapSubtitles() throws -> String {
        try Media.generated("late-pgs-no-statistics.mkv") { tmp in
            let r = try Run.command("mkvmerge", ["-q", "--disable-track-statistics-tags", "-o", tmp, "--sync", "2:5000",
                                                 Media.shared("ax_sample_with_pgs_subtitles.mkv")])
            guard r.status <= 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(r.stderr)") }
        }
    }

    /// 6 s of video with an ASS track that puts 1500 signs of 80 characters on screen at
    /// once, from 1 s to 4 s (120 KB of text, more than a mov_text sample holds), then a line.
    static func crowdedSigns() throws -> String {
        try Media.generated("crowded-signs.mkv") { tmp in
            let ass = tmp + ".ass"
            defer { try? FileManager.default.removeItem(atPath: ass) }
            var lines = ["[Script Info]", "ScriptType: v4.00+", "", "[Events]",
                         "Format: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text"]
            for i in 0..<1500 {
                lines.append("Dialogue: 0,0:00:01.00,0:00:04.00,Default,,0,0,0,,Sign \(1000 + i) with quite a lot of text so that together they overflow")
            }
            lines.append("Dialogue: 0,0:00:05.00,0:00:06.00,Default,,0,0,0,,After")
            try lines.joined(separator: "\n").write(toFile: ass, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                               "-i", ass, "-map", "0", "-map", "1", "-t", "6", "-c:v", "libx264", "-preset", "ultrafast",
                                               "-c:s", "ass", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not generate crowded-signs.mkv: \(r.stderr)") }
        }
    }

    /// A 30-second 720p broadcast-like recording in MPEG-TS, for a recording still in progress.
    static func recording720p() throws -> String {
        try Media.generated("recording-720p-30s.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", ] + tone + [
            "-t", "30", "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac"])
    }

    /// A longer 720p clip, for cancellation mid-run.
    static func long720p() throws -> String {
        try Media.generated("long-720p.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", ] + tone + [
            "-t", "40", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
    }
}

/// Frames ffmpeg's idet filter classifies as interlaced (TFF or BFF) by their content.
func interlacedFrames(_ path: String) throws -> Int {
    let r = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-i", path, "-vf", "idet", "-an", "-f", "null", "-"])
    guard let line = r.stderr.split(separator: "\n").last(where: { $0.contains("Multi frame detection") }) else {
        throw TestFailure("idet printed nothing for \(path)")
    }
    let words = line.split(separator: " ")
    func count(_ key: String) -> Int { words.firstIndex(of: Substring(key + ":")).flatMap { Int(words[$0 + 1]) } ?? 0 }
    return count("TFF") + count("BFF")
}

@Suite("media engine on generated media", .serialized)
struct GeneratedMediaTests {
    /// `lasting`: the length the output must have (by default, the probe's).
    func roundTrip(_ path: String, lasting: Double? = nil, _ makePlan: (MediaInfo) -> Plan?) throws -> (MediaInfo, Plan, String, URL) {
        let info = try Prober.probe(path: path)
        let plan = try #require(makePlan(info))
        let dir = Media.scratch("gen")
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        try checkOutput(out, plan: plan, source: info, sourcePath: path, lasting: lasting)
        return (info, plan, out, dir)
    }

    @Test("interlaced 480i MPEG-2 with 5.1 AC-3 is deinterlaced and downmixed")
    func interlaced() throws {
        let path = try Generated.interlacedTS()
        let info = try Prober.probe(path: path)
        let audio = try #require(info.audioStreams.first)
        #expect(audio.channels == 6 && audio.codec == "ac3")
        let (_, _, out, dir) = try roundTrip(path) { info in
            var p = EnginePlans.transcode(info, height: 480)
            p?.video?.deinterlace = true
            return p
        }
        defer { try? FileManager.default.removeItem(at: dir) }
        // Deinterlaced: ffmpeg's field detector (idet) sees combing in every source frame
        // and in none of the output's.
        #expect(try interlacedFrames(path) > 100)
        #expect(try interlacedFrames(out) < 5)
        #expect(try FFprobe(out).streams("audio")[0]["channels"]?.int == 2)
        // The same source remuxed keeps its AC-3 5.1 as it is.
        let (_, _, remuxed, d2) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: d2) }
        let a = try FFprobe(remuxed).streams("audio")[0]
        #expect(a["codec_name"]?.string == "ac3" && a["channels"]?.int == 6)
    }

    @Test("probe finds interlacing only the bitstream signals, and progressive frames as progressive")
    func fieldOrder() throws {
        #expect(try Prober.probe(path: try Generated.interlacedH264()).videoStreams.first?.fieldOrder?.isInterlaced == true)
        #expect(try Prober.probe(path: try Generated.interlacedTS()).videoStreams.first?.fieldOrder == .tt)
        #expect(try Prober.probe(path: Media.shared("ax_sample_with_srt.mkv")).videoStreams.first?.fieldOrder == .progressive)
        // DV (a camcorder's tape in AVI) says so only in its frames: the plan deinterlaces it
        // and says so, where it said nothing while the engine deinterlaced the frames.
        let dv = try Media.generated("pal-dv.avi", ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25:duration=1",
                                                    "-vf", "tinterlace=interleave_bottom", "-c:v", "dvvideo", "-pix_fmt", "yuv420p"])
        #expect(try Prober.probe(path: dv).videoStreams.first?.fieldOrder?.isInterlaced == true)
    }

    @Test("HDR10 HEVC 10-bit: probe sees HDR10, remux keeps hvc1 and PQ, transcode tone-maps to 8-bit BT.709")
    func hdr10() throws {
        let path = try Generated.hdr10HEVC()
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.hdr == .hdr10)
        #expect(info.videoStreams.first?.bitDepth == 10)
        let (_, _, remuxed, d1) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: d1) }
        let rv = try FFprobe(remuxed).streams("video")[0]
        #expect(rv["codec_tag_string"]?.string == "hvc1")
        #expect(rv["color_transfer"]?.string == "smpte2084")
        // The result reports the copy's rate, 24 fps, not the MP4's average over a track
        // whose duration holds the B-frames' reorder delay (23.36).
        let again = d1.appendingPathComponent("again.mp4").path
        let result = try Preparer.prepare(source: path, plan: try #require(EnginePlans.remux(info)), info: info, output: again)
        #expect(result.output.video?.frameRate == 24, "\(String(describing: result.output.video))")
        let (_, _, transcoded, d2) = try roundTrip(path) { EnginePlans.transcode($0, height: 360) }
        defer { try? FileManager.default.removeItem(at: d2) }
        let tv = try FFprobe(transcoded).streams("video")[0]
        #expect(tv["pix_fmt"]?.string == "yuv420p")
        #expect(tv["color_transfer"]?.string == "bt709")
        #expect(tv["height"]?.int == 360)
    }

    @Test("variable frame rate H.264 with B-frames from MKV (no DTS) remuxes with its timing")
    func vfr() throws {
        let path = try Generated.vfrMKV()
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.variableFrameRate == true)
        let (_, _, out, dir) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try FFprobe.packetCount(out, "v:0") == FFprobe.packetCount(path, "v:0"), "every frame kept")
    }

    @Test("a variable-rate recording whose last picture comes after a pause (B-frames) keeps it there, copied and re-encoded: it was put on the picture before the pause (MKV refused as damaged), an MP4 of pictures alone probed short, the output's track ended at the pause, and a 27 s still ending, its picture written at the file's end, was taken for drifting tracks",
          arguments: ["mkv", "mp4", "silent.mp4", "long-still.mov"])
    func pauseBeforeLastPicture(name: String) throws {
        // A screen recording that held a still: pictures to 2.96 s, then one 3 s (or 27 s)
        // later, which x264 decodes before the pictures shown ahead of it; sound throughout,
        // or none (then the MP4's only track is the short one). The long still's last picture
        // comes from the encoder only at the end, and ffmpeg's muxer writes it there.
        let length = name.hasPrefix("long") ? 30.0 : 6
        let sound = name.hasPrefix("silent") ? [] : ["-f", "lavfi", "-i", "sine=sample_rate=48000:duration=\(Int(length))", "-c:a", "aac"]
        let path = try Media.generated("pause-before-last-picture.\(name)", [
            "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=\(Int(length))"] + sound + [
            "-vf", "select='lt(t,3)+gte(t,\(length - 0.04))'", "-vsync", "vfr", "-c:v", "libx264", "-preset", "superfast", "-bf", "3"])
        let sourceTimes = try FFprobe.packetTimes(path, "v:0")
        // (Matroska starts the pictures 21 ms in, after the sound's priming.)
        func lastAfterFirst(_ times: [Double]) -> Double { (times.last ?? 0) - (times.first ?? 0) }
        #expect(sourceTimes.count == 76 && abs(lastAfterFirst(sourceTimes) - (length - 0.04)) < 0.01, "\(sourceTimes.suffix(3))")
        let info = try Prober.probe(path: path)
        #expect(abs(info.durationSeconds - length) < 0.1 && info.timingDamage == nil, "\(info.durationSeconds) \(String(describing: info.timingDamage))")
        for plan in [EnginePlans.remux, { EnginePlans.transcode($0) }] as [(MediaInfo) -> Plan?] {
            let (_, _, out, dir) = try roundTrip(path, lasting: length, plan)
            defer { try? FileManager.default.removeItem(at: dir) }
            let times = try FFprobe.packetTimes(out, "v:0")
            #expect(times.count == 76 && abs(lastAfterFirst(times) - (length - 0.04)) < 0.01, "\(times.suffix(3))")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - length) < 0.05, "the track lasts to its last picture's end")
        }
    }

    @Test("a variable-rate recording whose first picture is held before the next (1.5 s with B-frames, 3 s without) keeps it at the start, copied and re-encoded: it had been taken for a damaged opening and moved to the second picture's time, or left out",
          arguments: [("1.5s", "-bf 3"), ("3s", "-bf 0")])
    func pauseAfterFirstPicture(pause: String, bframes: String) throws {
        let seconds = Double(pause.dropLast())!
        let path = try Media.generated("pause-after-first-picture-\(pause)\(bframes.replacingOccurrences(of: " ", with: "")).mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30:duration=8", "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8",
            "-vf", "select='lt(t,0.02)+gte(t,\(seconds))'", "-vsync", "vfr", "-c:v", "libx264", "-preset", "superfast"]
            + bframes.split(separator: " ").map(String.init) + ["-c:a", "aac"])
        let sourceTimes = try FFprobe.packetTimes(path, "v:0")
        #expect(sourceTimes.count > 100 && (sourceTimes.dropFirst().first ?? 0) - (sourceTimes.first ?? 0) > seconds - 0.1, "\(sourceTimes.prefix(3))")
        for plan in [EnginePlans.remux, { EnginePlans.transcode($0) }] as [(MediaInfo) -> Plan?] {
            let (_, _, out, dir) = try roundTrip(path, lasting: 8, plan)
            defer { try? FileManager.default.removeItem(at: dir) }
            let times = try FFprobe.packetTimes(out, "v:0")
            // (A transcode puts pictures on its 30 fps grid: 21 ms becomes 33.)
            #expect(times.count == sourceTimes.count && abs((times.first ?? 9) - (sourceTimes.first ?? 0)) < 0.02
                    && abs((times.dropFirst().first ?? 0) - (sourceTimes.dropFirst().first ?? 0)) < 0.02, "\(times.prefix(3)) for \(sourceTimes.prefix(3))")
        }
    }

    @Test("a variable-rate screen recording whose last picture is held (30 fps, then a picture each 0.2 s; the MP4's last sample lasts 0.2 s) is re-encoded with that picture lasting as long: it lasted one frame of 30 fps, and the video ended 0.17 s before the sound")
    func heldLastPicture() throws {
        let made = try Media.generated("screen-recording-5fps-end.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30:duration=6", "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=6",
            "-vf", "select='lt(t,2)+not(mod(n,6))'", "-vsync", "vfr", "-c:v", "libx264", "-preset", "superfast", "-bf", "0",
            "-c:a", "aac", "-use_editlist", "0", "-video_track_timescale", "15360"])
        // As a recorder writes it: the last sample lasts until the recording stopped (3072
        // ticks, 0.2 s; ffmpeg's muxer wrote one frame of the rate), the media's and the
        // track's durations with it.
        let path = try Media.generated("screen-recording-5fps-end-held.mp4") { tmp in
            var b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: made)))
            func u32(_ at: Int) -> Int { b[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
            func set(_ at: Int, _ v: Int) { for i in 0..<4 { b[at + i] = UInt8(truncatingIfNeeded: v >> (24 - 8 * i)) } }
            let stts = try #require(b.firstRange(of: Array("stts".utf8))).lowerBound
            let last = stts + 12 + 8 * (u32(stts + 8) - 1)
            try #require(u32(last) == 1, "the last sample has an entry of its own")
            let extra = 3072 - u32(last + 4)
            set(last + 4, 3072)
            let mdhd = try #require(b[..<stts].lastRange(of: Array("mdhd".utf8))).lowerBound
            let timescale = u32(mdhd + 16)
            set(mdhd + 20, u32(mdhd + 20) + extra)
            let tkhd = try #require(b[..<stts].lastRange(of: Array("tkhd".utf8))).lowerBound
            let mvhd = try #require(b.firstRange(of: Array("mvhd".utf8))).lowerBound
            set(tkhd + 24, u32(tkhd + 24) + extra * u32(mvhd + 16) / timescale)
            try Data(b).write(to: URL(fileURLWithPath: tmp))
        }
        let held = try #require(try FFprobe(path).duration("video"))
        #expect(abs(held - 6.02) < 0.01, "the source's pictures last to its end: \(held)")
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.variableFrameRate == true)
        let (_, _, out, dir) = try roundTrip(path) { EnginePlans.transcode($0) }
        defer { try? FileManager.default.removeItem(at: dir) }
        let video = try #require(try FFprobe(out).duration("video"))
        #expect(abs(video - held) < 0.01, "the last picture lasts as it did: \(video) s for \(held) s")
    }

    @Test("a variable-rate phone clip (60 fps for half a second, then 15) is transcoded with keyframes no more than the plan's 2 s apart in time, as its ffmpeg equivalent says: counted in pictures at its 17 fps average they were 2.33 s apart")
    func variableRateKeyframesInTime() throws {
        let path = try Media.generated("vfr-60-then-15fps.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=60:duration=8", "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8",
            "-vf", "select='if(lt(t,0.5),1,not(mod(n,4)))'", "-fps_mode", "vfr", "-c:v", "libx264", "-preset", "superfast",
            "-c:a", "aac"])
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.variableFrameRate == true)
        let plan = try #require(EnginePlans.transcode(info))
        let dir = Media.scratch("vfr-keyframes")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        try checkOutput(out, plan: plan, source: info, sourcePath: path)
        let keys = try FFprobe.keyframeTimes(out)
        let gaps = zip(keys.dropFirst(), keys).map { $0 - $1 }
        #expect(keys.count >= 4 && gaps.allSatisfy { $0 <= 2.0 + 1.0 / 15 + 0.001 }, "keyframes \(keys)")
        #expect(result.stats.ffmpegEquivalent?.contains("expr:gte(t,n_forced*2.0)") == true, "\(result.stats.ffmpegEquivalent ?? [])")
    }

    @Test("a film at 23.976 fps with a stretch at 29.97 after its first 10 s (an anime episode's opening, timecodes v2) is transcoded with every picture at its own time and keyframes 2 s apart: the probe judges the rate from the start, and on 23.976's grid one picture in five of the stretch was dropped; the track's declared 120 fps put keyframes 10 s apart")
    func laterStretchAtAnotherRate() throws {
        let path = try Media.generated("23.976-then-29.97.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=120000/1001:duration=16", "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=16",
            "-vf", "select='if(between(t,10,14),not(mod(n,4)),not(mod(n,5)))'", "-vsync", "vfr",
            "-c:v", "libx264", "-preset", "superfast", "-bf", "3", "-c:a", "aac"])
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.variableFrameRate != true, "the start is at one rate")
        let sourceTimes = try FFprobe.packetTimes(path, "v:0").sorted()
        #expect(sourceTimes.count == 408)
        let (_, _, out, dir) = try roundTrip(path) { EnginePlans.transcode($0) }
        defer { try? FileManager.default.removeItem(at: dir) }
        let times = try FFprobe.packetTimes(out, "v:0").sorted()
        #expect(times.count == sourceTimes.count, "every picture kept: \(times.count) of \(sourceTimes.count)")
        // Both start at zero (Matroska's first picture is 21 ms in, after the sound's priming).
        let offset = (sourceTimes.first ?? 0) - (times.first ?? 0)
        let off = zip(sourceTimes, times).map { abs($0 - offset - $1) }.max() ?? 1
        #expect(off < 0.0045, "each picture within a tenth of a frame of its time (where it is put on the grid): \(off)")
        // Where the source's millisecond times keep to the rate (its first 4 s), the output's
        // lie exactly a frame apart: on the grid, not the source's rounding.
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        #expect(steps.prefix(90).allSatisfy { abs($0 - 1001.0 / 24000) < 0.0001 }, "\(steps.prefix(90).map { Int(($0 * 1000).rounded()) })")
        // The track declares 120 fps (ffmpeg's muxer, after the select): x264 was told so,
        // and put its keyframes 10 s apart, not the plan's 2 s.
        let keys = try FFprobe.keyframeTimes(out)
        #expect(keys.count >= 8 && zip(keys.dropFirst(), keys).allSatisfy { $0 - $1 <= 2.1 }, "keyframes \(keys)")
    }

    @Test("a 23.976 fps Matroska whose times jitter by up to 3 ms is transcoded on 23.976's grid with keyframes 2 s apart: libavformat's average for it (27.7 fps) had been the encode's rate, with keyframes 2.3 s apart and every picture off the grid")
    func jitteredMatroska() throws {
        let plain = try Media.generated("23.976-plain-8s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=24000/1001:duration=8",
                                                                "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8",
                                                                "-c:v", "libx264", "-preset", "superfast", "-bf", "0", "-c:a", "aac"])
        let path = try Media.generated("23.976-jittered-3ms.mkv") { tmp in
            // Each picture's time moved by up to 3 ms, pseudo-randomly and the same way every run.
            var seed: UInt64 = 1
            let times = (0..<192).map { (i: Int) -> String in
                seed = (1_103_515_245 * seed + 12_345) % (1 << 31)
                let jitter: Double = i == 0 ? 0 : Double(seed) / Double(1 << 31) * 6 - 3
                return String(format: "%.3f", Double(i) * 1001 / 24 + jitter)
            }
            let file = tmp + ".times.txt"
            defer { try? FileManager.default.removeItem(atPath: file) }
            try ("# timestamp format v2\n" + times.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let r = try Run.command("mkvmerge", ["-q", "-o", tmp, "--timestamps", "0:\(file)", plain])
            guard r.status == 0 || r.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(r.stderr)") }
        }
        let info = try Prober.probe(path: path)
        #expect(info.videoStreams.first?.variableFrameRate == false && abs((info.videoStreams.first?.frameRate ?? 0) - 23.976) < 0.02)
        let average = try FFprobe(path).streams("video").first?["avg_frame_rate"]?.string ?? ""
        let rate = average.split(separator: "/").compactMap { Double($0) }
        #expect(rate.count == 2 && rate[0] / rate[1] > 26, "libavformat's average for it: \(average)")
        let (_, _, out, dir) = try roundTrip(path) { EnginePlans.transcode($0) }
        defer { try? FileManager.default.removeItem(at: dir) }
        let times = try FFprobe.packetTimes(out, "v:0")
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        #expect(times.count == 192 && steps.allSatisfy { abs($0 - 1001.0 / 24000) < 0.0001 }, "\(steps.map { Int(($0 * 1000).rounded()) })")
        let keys = try FFprobe.keyframeTimes(out)
        #expect(keys.count >= 4 && zip(keys.dropFirst(), keys).allSatisfy { $0 - $1 <= 2.1 }, "keyframes \(keys)")
    }

    @Test("a phone clip whose rate varies (30 fps, then 24) is transcoded with every frame, on the 30 fps grid: on its 27 fps average one frame in ten of the 30 fps part was dropped")
    func vfrTranscode() throws {
        let path = try Generated.phoneVFR()
        let (info, _, out, dir) = try roundTrip(path) { EnginePlans.transcode($0) }
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(info.videoStreams.first?.variableFrameRate == true)
        #expect(try FFprobe.packetCount(out, "v:0") == FFprobe.packetCount(path, "v:0"), "every frame kept")
        let times = try FFprobe.packetTimes(out, "v:0").sorted()
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }
        // 33 ms steps in the first half, 33 or 67 ms (24 fps on a 30 fps grid) in the second.
        #expect(steps.prefix(80).allSatisfy { abs($0 - 1.0 / 30) < 0.002 } && steps.suffix(60).allSatisfy { $0 < 0.07 }, "\(steps)")
    }

    @Test("a clip trimmed between keyframes (an edit list hides the pictures before the cut) remuxes with them still hidden: the source's first pictures and frame count, its sound re-encoded from the cut; it failed as source_corrupt")
    func trimmedBetweenKeyframes() throws {
        let path = try Generated.trimmedMP4()
        func shown(_ file: String) throws -> (first: [String], count: Int) {
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", file, "-map", "0:v", "-f", "framemd5", "-"])
            let lines = r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }
            return (lines.prefix(3).map { String($0.split(separator: ",").last ?? "") }, lines.count)
        }
        let source = try shown(path)
        let stored = try FFprobe.packetCount(path, "v:0")
        #expect(source.count == 217 && stored == 250, "the source must hide pictures: \(source.count) of \(stored)")
        let (_, _, out, dir) = try roundTrip(path) { info in
            var plan = EnginePlans.remux(info)
            plan?.audio = EnginePlans.audio(info, forceTranscode: true)
            return plan
        }
        defer { try? FileManager.default.removeItem(at: dir) }
        let output = try shown(out)
        #expect(output.first == source.first && output.count == source.count, "\(output) against \(source)")
        #expect(abs(try FFprobe(out).formatDuration - 8.7) < 0.1)
    }

    @Test("a Matroska recording saved with its own clock (times from 1.4 s, its declared duration the last time) is as long as its blocks span and remuxes whole from zero: it failed as cut short")
    func copytsMatroska() throws {
        let path = try Generated.copytsMKV()
        let declared = try FFprobe(path).formatDuration
        let info = try Prober.probe(path: path)
        #expect(info.startSeconds > 1 && declared > 7, "the source must declare its end time: \(info.startSeconds) \(declared)")
        #expect(abs(info.durationSeconds - 6) < 0.2 && info.warnings.contains("duration_from_start"), "\(info.durationSeconds)")
        let (_, _, _, dir) = try roundTrip(path, lasting: 6, EnginePlans.remux)
        try? FileManager.default.removeItem(at: dir)
    }

    @Test("an FLV that declares its last time as its duration (pictures and sound from 1.01 s) is as long as they span and remuxes whole: it was refused as cut short")
    func heldOpeningFLV() throws {
        let path = try Generated.heldOpeningFLV()
        let declared = try FFprobe(path).formatDuration
        let info = try Prober.probe(path: path)
        #expect(info.startSeconds > 0.9 && declared > 8.9, "the source must declare its end time: \(info.startSeconds) \(declared)")
        #expect(abs(info.durationSeconds - (declared - info.startSeconds)) < 0.05 && info.warnings.contains("duration_from_start"),
                "\(info.durationSeconds)")
        let (_, _, _, dir) = try roundTrip(path, lasting: declared - info.startSeconds, EnginePlans.remux)
        try? FileManager.default.removeItem(at: dir)
    }

    @Test("chapters the pictures and sound do not reach are left out, and the last one they reach ends with them")
    func chaptersPastTheEnd() throws {
        let path = try Media.generated("chapters-past-end.mkv") { tmp in
            let meta = tmp + ".txt"
            defer { try? FileManager.default.removeItem(atPath: meta) }
            let chapters = [(0, 2000, "One"), (2000, 6000, "Two"), (5000, 8000, "Past the end")]
            try Data((";FFMETADATA1\n" + chapters.map { "[CHAPTER]\nTIMEBASE=1/1000\nSTART=\($0.0)\nEND=\($0.1)\ntitle=\($0.2)\n" }.joined()).utf8)
                .write(to: URL(fileURLWithPath: meta))
            // No -t: the ffmpeg command would cut the chapters itself.
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                               "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=4", "-i", meta, "-map", "0:v", "-map", "1:a",
                                               "-map_chapters", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        #expect(try Prober.probe(path: path).chapters.count == 3)
        let (_, _, out, dir) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: dir) }
        let chapters = try Prober.probe(path: out).chapters
        #expect(chapters.map(\.title) == ["One", "Two"])
        #expect(abs((chapters.last?.endSeconds ?? 0) - 4) < 0.1, "\(chapters)")
    }

    @Test("a film without sound whose subtitles run on long after it is whole: the cues' index at the end is not damage")
    func manyCuesPastTheEnd() throws {
        // 4,000 cues after 4 s of pictures: their packets and the Cues entries the muxer
        // writes for each are most of the file, the index alone a quarter of it. One cue
        // is within the pictures: a track with none would be left out (`subtitle_empty`).
        let path = try Media.generated("cues-past-end-no-sound-one-within.mkv") { tmp in
            let srt = tmp + ".srt"
            defer { try? FileManager.default.removeItem(atPath: srt) }
            func time(_ ms: Int) -> String {
                let h = ms / 3_600_000, m = ms / 60_000 % 60, s = ms / 1000 % 60
                return [h, m, s].map { $0 < 10 ? "0\($0)" : "\($0)" }.joined(separator: ":") + "," + String(String(ms % 1000 + 1000).dropFirst())
            }
            let cues = ["1\n\(time(1000)) --> \(time(2000))\nwithin\n"]
                + (1...4000).map { i in "\(i + 1)\n\(time(4000 + i * 1000)) --> \(time(4500 + i * 1000))\nline \(i)\n" }
            try Data(cues.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: srt))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10:duration=4",
                                               "-i", srt, "-c:v", "libx264", "-preset", "ultrafast", "-c:s", "srt", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        let declared = try Prober.probe(path: path).durationSeconds
        #expect(declared > 4000, "the segment must declare the last cue's end: \(declared)")
        let (_, _, out, dir) = try roundTrip(path, lasting: 4, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try FFprobe(out).streams("subtitle").first?["codec_name"]?.string == "mov_text")
    }

    @Test("a Matroska download cut short at 80 % is refused as cut short though a subtitle line stored before the cut is shown to the end: its cue had explained the missing seconds, and 4.8 s of a 6 s film went out")
    func cutShortWithSubtitles() throws {
        let whole = try Media.generated("subtitled-6s.mkv") { tmp in
            let srt = tmp + ".srt"
            defer { try? FileManager.default.removeItem(atPath: srt) }
            try Data("1\n00:00:00,500 --> 00:00:02,000\nfirst\n\n2\n00:00:02,500 --> 00:00:06,000\nto the end\n".utf8)
                .write(to: URL(fileURLWithPath: srt))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=6",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6", "-i", srt,
                                               "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:s", "srt", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        let path = try Media.generated("subtitled-6s-cut-80pc.mkv") { tmp in
            let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
            try bytes.prefix(bytes.count * 8 / 10).write(to: URL(fileURLWithPath: tmp))
        }
        let info = try Prober.probe(path: path)
        #expect(info.indexDamage != nil)
        let dir = Media.scratch("cut")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let error = #expect(throws: KilnError.self) {
            _ = try Preparer.prepare(source: path, plan: try #require(EnginePlans.remux(info)), info: info, output: out)
        }
        #expect(error?.code == .sourceCorrupt && error?.message.contains("cut short") == true, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test("a phone video's creation time (its date taken) and title are carried")
    func creationTime() throws {
        let path = try Media.generated("phone-dated.mov", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=2",
                                                            "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=2", "-c:v", "libx264",
                                                            "-preset", "ultrafast", "-c:a", "aac", "-metadata", "creation_time=2020-05-06T10:11:12.000000Z",
                                                            "-metadata", "title=Holiday"])
        let (_, _, out, dir) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: dir) }
        let tags = try FFprobe(out).json["format"]?["tags"]
        #expect(tags?["creation_time"]?.string == "2020-05-06T10:11:12.000000Z" && tags?["title"]?.string == "Holiday", "\(String(describing: tags))")
    }

    @Test("MPEG-TS timestamps wrapping past 2^33 come out continuous, starting at zero, A/V offset kept")
    func ptsWrap() throws {
        let path = try Generated.wrappingTS()
        let (_, _, out, d1) = try roundTrip(path, EnginePlans.remux)
        defer { try? FileManager.default.removeItem(at: d1) }
        let (_, _, out2, d2) = try roundTrip(path) { EnginePlans.transcode($0) }
        defer { try? FileManager.default.removeItem(at: d2) }
        // Before the wrap the file's timestamps are near 2^33 / 90 kHz = 95443.7 s.
        #expect(try FFprobe(path).formatDuration < 7)
        for o in [out, out2] {
            #expect(abs(try FFprobe(o).formatDuration - 6.0) < 0.1)
        }
    }

    @Test("a source's start timecode (MXF, MOV) does not become a timecode track beside the video and sound")
    func timecode() throws {
        for path in try Generated.timecoded() {
            let info = try Prober.probe(path: path)
            let plans = [EnginePlans.remux(info), EnginePlans.transcode(info, height: 360)].compactMap { $0 }
            #expect(plans.count == 2)
            for plan in plans {
                let dir = Media.scratch("tc")
                defer { try? FileManager.default.removeItem(at: dir) }
                let out = dir.appendingPathComponent("out.mp4").path
                _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
                try checkOutput(out, plan: plan, source: info, sourcePath: path)   // no third track
                #expect(try FFprobe(out).streams.count == 2)
            }
        }
    }

    @Test("text subtitles keep their times when cues overlap, their accents when not UTF-8, and end with the pictures")
    func subtitleCues() throws {
        let path = try Generated.subtitled()
        let info = try Prober.probe(path: path)
        #expect(info.durationSeconds > 13, "the segment counts the last cue: \(info.durationSeconds) s")
        let plans = [EnginePlans.remux(info), EnginePlans.transcode(info, height: 360)].compactMap { $0 }
        #expect(plans.count == 2)
        for plan in plans {
            #expect(plan.subtitles.filter { $0.action == .convert }.count == 2)
            let dir = Media.scratch("cues")
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out.mp4").path
            // The pictures and sound are whole: the 14 s declared are the last cue's.
            let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
            try checkOutput(out, plan: plan, source: info, sourcePath: path, lasting: 10)
            #expect(abs(result.output.durationSeconds - 10) < 0.1)
            #expect(result.stats.adjustments?.contains { $0.hasPrefix("subtitle_recoded: 1 cue of the source's stream 2 is not UTF-8") && $0.hasSuffix("CP1252") } == true)
            // Matroska's bibliographic "fre" is MP4's "fra" (ISO 639-2/T).
            #expect(try FFprobe(out).streams("subtitle").map { $0["tags"]?["language"]?.string } == ["fra", "eng"])
            let french = try cues(out, track: 0), signs = try cues(out, track: 1)
            // Each cue shows from its own start to its own end; where two overlap, both.
            let expectedFrench: [(Double, Double, String)] = [
                (0.5, 1.5, "Premier"), (1.5, 2.0, "Premier\nSecond"), (2.0, 3.0, "Second"), (4.0, 5.0, "Café crème"), (9.0, 10.0, "Fin")]
            #expect(french.map(\.text) == expectedFrench.map(\.2))
            for (cue, want) in zip(french, expectedFrench) {
                #expect(abs(cue.start - want.0) < 0.05 && abs(cue.end - want.1) < 0.05, "\(cue) against \(want)")
            }
            // The drawing is left out; the sign stays where it belongs.
            #expect(signs.map(\.text) == ["Dialogue", "Dialogue\nSIGN", "SIGN", "Last"])
            #expect(abs((signs.dropFirst().first?.start ?? 0) - 1.0) < 0.05)
        }
        // mov_text with style boxes (binary, after the text) is read as it is: never taken for
        // text in another code page.
        let dir = Media.scratch("cues2")
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = dir.appendingPathComponent("first.mp4").path, again = dir.appendingPathComponent("again.mp4").path
        _ = try Preparer.prepare(source: path, plan: plans[0], info: info, output: first)
        let firstInfo = try Prober.probe(path: first)
        let plan = try #require(EnginePlans.remux(firstInfo))
        let result = try Preparer.prepare(source: first, plan: plan, info: firstInfo, output: again)
        #expect(result.stats.adjustments == nil)
        #expect(try cues(again, track: 0).map(\.text) == cues(first, track: 0).map(\.text))
        // The index forecast's second reader makes the same cues: the remux is hashed while written.
        let (forecast, reference) = try #require(try IndexForecastTests.remux(path))
        #expect(forecast.stats.hashedWhileWriting && forecast.output.sha256 == reference)
    }

    @Test("closed captions are found when the first comes after the probe's usual scan, not for padding alone, and read from field 1 whatever comes first")
    func closedCaptionsFound() throws {
        // 12 s of padding: the first caption is shown at 13 s, past the 240 pictures (8 s) scanned for the rest.
        let late = try ClosedCaptionSample.recording(.h264, delay: 12)
        let info = try Prober.probe(path: late)
        #expect(info.videoStreams.first?.closedCaptions == true)
        let dir = Media.scratch("cc-late")
        defer { try? FileManager.default.removeItem(at: dir) }
        let plan = try #require(EnginePlans.remux(info))
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: late, plan: plan, info: info, output: out)
        #expect(result.output.subtitles.map(\.codec) == ["mov_text"])
        #expect(try FFprobe.packetCount(out, "s:0") >= ClosedCaptionSample.popOn.count)
        // Padding and nothing else: no track of nothing.
        let padding = try Prober.probe(path: ClosedCaptionSample.recording(.h264, captioned: false))
        #expect(padding.videoStreams.first?.closedCaptions == nil)
        // A CEA-708 packet before each picture's CEA-608 pairs: the decoder keeps to field 1
        // (ffmpeg's own reading follows the first triplet's field, and shows nothing).
        let dtvcc = try ClosedCaptionSample.recording(.h264, cea708First: true)
        let dtvccInfo = try Prober.probe(path: dtvcc)
        let dtvccOut = dir.appendingPathComponent("708.mp4").path
        _ = try Preparer.prepare(source: dtvcc, plan: try #require(EnginePlans.remux(dtvccInfo)), info: dtvccInfo, output: dtvccOut)
        #expect(try FFprobe.packetCount(dtvccOut, "s:0") >= ClosedCaptionSample.popOn.count + ClosedCaptionSample.rollUp.count)
    }

    @Test("closed captions: the index forecast reads them as the remux does, so the remux is hashed while written")
    func closedCaptionsForecast() throws {
        let path = try ClosedCaptionSample.recording(.h264)
        let (forecast, reference) = try #require(try IndexForecastTests.remux(path))
        #expect(forecast.output.subtitles.map(\.codec) == ["mov_text"])
        #expect(forecast.stats.hashedWhileWriting && forecast.output.sha256 == reference)
    }

    @Test("a Matroska file whose dropped bitmap subtitles outlast its sound is whole, not cut short")
    func lateBitmapSubtitles() throws {
        let path = try Generated.lateBitmapSubtitles()
        let info = try Prober.probe(path: path)
        #expect(info.durationSeconds > 6)
        let plan = try #require(EnginePlans.remux(info))
        #expect(plan.subtitles.map(\.action) == [.drop])
        let dir = Media.scratch("latepgs")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        try checkOutput(out, plan: plan, source: info, sourcePath: path, lasting: 1.01)
        #expect(result.output.dropped.contains { $0.type == "subtitle" && $0.codec == "hdmv_pgs_subtitle" })
    }

    @Test("more signs on screen at once than a mov_text sample holds: the first ones are shown, not none")
    func crowdedSigns() throws {
        let path = try Generated.crowdedSigns()
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        let dir = Media.scratch("crowded")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        #expect(result.stats.corruptPackets == 0)
        let shown = try cues(out, track: 0)
        #expect(shown.map { $0.text.hasPrefix("Sign 1000") } == [true, false], "\(shown.map { $0.text.prefix(40) })")
        let signs = shown.first?.text.split(separator: "\n").count ?? 0
        #expect(signs > 300 && signs < 1500, "\(signs) signs in the first sample")
        #expect(shown.last?.text == "After")
    }

    /// A text track's cues as the ffmpeg command reads them: times in seconds, text lines
    /// joined by a newline, markup left out.
    func cues(_ path: String, track: Int) throws -> [(start: Double, end: Double, text: String)] {
        let srt = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:s:\(track)", "-f", "srt", "-"]).stdout
        func seconds(_ t: Substring) -> Double {
            let p = t.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: ",", with: ".").split(separator: ":")
            return p.count == 3 ? Double(p[0])! * 3600 + Double(p[1])! * 60 + Double(p[2])! : .nan
        }
        return srt.replacingOccurrences(of: "\r", with: "").components(separatedBy: "\n\n").compactMap { block in
            let lines = block.split(separator: "\n", omittingEmptySubsequences: true)
            guard lines.count >= 3, let arrow = lines[1].range(of: "-->") else { return nil }
            let text = lines.dropFirst(2).map {
                $0.replacingOccurrences(of: "<[^>]*>", with: "", options: .regularExpression).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            return (seconds(lines[1][..<arrow.lowerBound]), seconds(lines[1][arrow.upperBound...]), text.joined(separator: "\n"))
        }
    }

    @Test("canceling mid-run stops promptly and leaves no file behind")
    func cancel() throws {
        let path = try Generated.long720p()
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.transcode(info, height: 720))
        let dir = Media.scratch("cancel")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let cancellation = Cancellation()
        var reports = 0
        #expect {
            _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out, cancellation: cancellation) { p in
                reports += 1
                #expect(p.encodedSeconds < info.durationSeconds)
                if reports == 2 { cancellation.cancel() }
            }
        } throws: { ($0 as? KilnError)?.code == .canceled }
        #expect(reports == 2, "no progress after cancellation")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test("a source another file is renamed over after the probe (a library manager's upgrade) fails as source_changed: the copy, which opens the path again, would read the new file",
          arguments: [DeliveryFormat.original, .remux])
    func replacedSource(_ format: DeliveryFormat) throws {
        let dir = Media.scratch("replaced-\(format.rawValue)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("episode.ts").path
        try FileManager.default.copyItem(atPath: Generated.recording720p(), toPath: source)
        let opened = try Prober.open(path: source)
        var plan = try #require(EnginePlans.remux(opened.info))
        plan.deliveryFormat = format
        let upgrade = dir.appendingPathComponent("upgrade.ts").path
        try FileManager.default.copyItem(atPath: Generated.wrappingTS(), toPath: upgrade)
        #expect(rename(upgrade, source) == 0)
        #expect {
            _ = try Preparer.prepare(source: opened, plan: plan, output: dir.appendingPathComponent("out.mp4").path)
        } throws: { ($0 as? KilnError)?.code == .sourceChanged && "\($0)".contains("replaced by another file") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["episode.ts"])
    }

    @Test("the file as it is, copied: its progress comes at most twice a second, with its speed, and ends at its length")
    func originalCopyProgress() throws {
        let path = try Generated.long720p()
        let opened = try Prober.open(path: path)
        var plan = try #require(EnginePlans.remux(opened.info))
        plan.deliveryFormat = .original
        let dir = Media.scratch("original-progress")
        defer { try? FileManager.default.removeItem(at: dir) }
        let clock = SystemClock()
        let started = clock.monotonicSeconds()
        var reports: [JobProgress] = []
        _ = try Preparer.prepare(source: opened, plan: plan, output: dir.appendingPathComponent("out.mkv").path) { reports.append($0) }
        let wall = clock.monotonicSeconds() - started
        // 37 MB in 4 MB reads: one report per read before.
        #expect(Double(reports.count) <= 2 + wall / ProgressPacer.interval, "\(reports.count) reports in \(wall) s")
        #expect(reports.allSatisfy { $0.speed > 0 && $0.encodedSeconds <= opened.info.durationSeconds })
        #expect(reports.last?.encodedSeconds == opened.info.durationSeconds)
    }

    @Test("a source still being written (a recording in progress, a copy into the library) fails as source_changed, not as damage: at once, with nothing left behind; complete, the same file prepares",
          arguments: [DeliveryFormat.transcode, .remux, .original])
    func growingSource(_ format: DeliveryFormat) throws {
        let full = try Data(contentsOf: URL(fileURLWithPath: Generated.recording720p()))
        let dir = Media.scratch("growing-\(format.rawValue)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("recording.ts")
        let written = full.count * 2 / 5 / 188 * 188
        try full.prefix(written).write(to: source)
        let out = dir.appendingPathComponent("out.mp4").path
        let opened = try Prober.open(path: source.path)
        var plan = try #require(format == .transcode ? EnginePlans.transcode(opened.info, height: 720) : EnginePlans.remux(opened.info))
        plan.deliveryFormat = format
        let recorder = try FileHandle(forWritingTo: source)
        defer { try? recorder.close() }
        func record(_ bytes: Data) throws {
            try recorder.seekToEnd()
            try recorder.write(contentsOf: bytes)
        }
        var reports = 0
        #expect {
            if format != .transcode { try record(full[written..<(written + 188 * 1000)]) }   // after the probe
            _ = try Preparer.prepare(source: opened, plan: plan, output: out) { _ in
                reports += 1
                // While the transcode goes on: it stops at its next look, not at the end.
                if format == .transcode && reports == 1 { try? record(full[written..<(written + 188 * 1000)]) }
            }
        } throws: { error in
            guard let e = error as? KilnError else { return false }
            return e.code == .sourceChanged && e.message.contains("grew from \(written) to \(written + 188 * 1000) bytes")
        }
        if format == .transcode { #expect(reports == 1, "the transcode went on after the source grew") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["recording.ts"], "nothing left beside the output")

        // The recording complete: the same path prepares.
        try record(full[(written + 188 * 1000)...])
        guard format == .remux else { return }
        let complete = try Prober.open(path: source.path)
        let result = try Preparer.prepare(source: complete, plan: try #require(EnginePlans.remux(complete.info)), output: out)
        #expect(abs(result.output.durationSeconds - 30) < 0.2)
    }

    @Test("files that are not media, truncated or random bytes end with a clean error")
    func badInput() throws {
        let dir = Media.scratch("bad")
        defer { try? FileManager.default.removeItem(at: dir) }
        var rng = SystemRandomNumberGenerator()
        let random = dir.appendingPathComponent("random.mkv")
        try Data((0..<200_000).map { _ in UInt8.random(in: 0...255, using: &rng) }).write(to: random)
        let source = try Data(contentsOf: URL(fileURLWithPath: Media.shared("sp_bear-640x360-ec3.mp4")))
        let truncated = dir.appendingPathComponent("truncated.mp4")
        try source.prefix(source.count / 3).write(to: truncated)
        for url in [random, truncated] {
            do {
                let info = try Prober.probe(path: url.path)
                guard let plan = EnginePlans.remux(info) else { continue }
                let out = dir.appendingPathComponent("out-\(url.lastPathComponent).mp4").path
                do {
                    _ = try Preparer.prepare(source: url.path, plan: plan, info: info, output: out)
                    #expect(try FFprobe.decodeErrors(out) == "")
                } catch let error as KilnError {
                    #expect([KilnError.Code.sourceUnreadable, .sourceCorrupt, .sourceUnsupported, .verifyFailed].contains(error.code))
                    #expect(!FileManager.default.fileExists(atPath: out))
                }
            } catch let error as KilnError {
                // A file cut short is said to be (source_corrupt, "cut short"), where the probe can tell.
                let cutShort = url == truncated && error.code == .sourceCorrupt && error.message.contains("cut short")
                #expect(cutShort || [KilnError.Code.sourceUnreadable, .sourceUnsupported].contains(error.code), "\(url.lastPathComponent): \(error)")
            }
        }
    }
}
