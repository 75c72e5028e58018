import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// The command as users and the daemon run it: a real child process, real files.
struct Command {
    static let binary = Binaries.path("prep-artifact")

    static func run(_ args: [String], stdin: Data? = nil) throws -> Run.Result {
        let r = try Run.command(binary, args, stdin: stdin)
        return r
    }

    /// What `probe --json` says of `path` (its `media`; null if it printed an error).
    static func probed(_ path: String) throws -> JSONValue {
        try JSONValue.parse(Array(try run(["probe", path, "--json"]).stdout.utf8))["media"] ?? .null
    }

    /// The plan `plan … --json` prints for these arguments (null if it printed an error).
    static func planned(_ args: [String]) throws -> JSONValue {
        try JSONValue.parse(Array(try run(["plan"] + args).stdout.utf8))["plan"] ?? .null
    }

    /// The streams `probe --json` lists for `path`.
    static func probedStreams(_ path: String) throws -> [JSONValue] {
        let probe = try probed(path)
        guard case .array(let streams)? = probe["streams"] else { throw TestFailure("the probe lists no streams for \(path)") }
        return streams
    }

    /// The cues of `path`'s subtitle stream `select` as ffmpeg decodes them (SubRip's times,
    /// its lines joined by spaces, markup left out).
    static func cues(_ path: String, _ select: String = "0:s:0", filter: String? = nil) throws -> [(start: Double, end: Double, text: String)] {
        let input = filter.map { ["-f", "lavfi", "-i", $0] } ?? ["-i", path]
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error"] + input + ["-map", select, "-f", "srt", "-"])
        guard r.status == 0 else { throw TestFailure("ffmpeg cannot read the subtitles of \(path): \(r.stderr)") }
        let blocks = r.stdout.replacingOccurrences(of: "\r", with: "").components(separatedBy: "\n\n").filter { $0.contains("-->") }
        return blocks.map { block in
            let lines = block.split(separator: "\n")
            let times = lines[1].components(separatedBy: " --> ").map { t -> Double in
                let p = t.replacingOccurrences(of: ",", with: ".").split(separator: ":").compactMap { Double($0) }
                return p.count == 3 ? p[0] * 3600 + p[1] * 60 + p[2] : .nan
            }
            let text = lines.dropFirst(2).joined(separator: " ").replacingOccurrences(of: "<[^>]*>|\\{[^}]*\\}", with: "", options: .regularExpression)
            return (times[0], times.count > 1 ? times[1] : .nan, text)
        }
    }

    /// `prepare SOURCE --quality Q --caps C --output OUT --json` with OUT in a scratch folder
    /// named `label`, removed afterwards; `check` sees the run and OUT while it exists.
    static func prepare(_ source: String, quality: String, caps: String, scratch label: String, extra: [String] = [],
                        _ check: (_ run: Run.Result, _ out: String) throws -> Void) throws {
        let dir = Media.scratch(label)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        try check(try run(["prepare", source, "--quality", quality, "--caps", caps, "--output", out, "--json"] + extra), out)
    }

    static func json(_ r: Run.Result) throws -> JSONValue {
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.count == 1, "--json prints exactly one line: \(r.stdout.prefix(300))")
        return try JSONValue.parse(Array(r.stdout.utf8))
    }
}

@Suite("prep-artifact command line")
struct CommandLineTests {
    @Test("usage mistakes exit 2 with a stable code")
    func usage() throws {
        #expect(try Command.run([]).status == 2)
        #expect(try Command.run(["frobnicate"]).status == 2)
        #expect(try Command.run(["probe", Media.shared("sp_bear-flac.mp4"), "--bogus"]).status == 2)
        let q = try Command.run(["plan", Media.shared("sp_bear-flac.mp4"), "--quality", "4k", "--json"])
        #expect(q.status == 2)
        #expect(try Command.json(q)["error"]?["code"] == .string("invalid_quality"))
        let caps = try Command.run(["plan", Media.shared("sp_bear-flac.mp4"), "--quality", "original", "--caps", #"{"hdr": "yes"}"#, "--json"])
        #expect(caps.status == 2)
        let e = try Command.json(caps)["error"]
        #expect(e?["code"] == .string("invalid_caps"))
        #expect(e?["message"]?.string?.contains("hdr") == true)
        let noOut = try Command.run(["prepare", Media.shared("sp_bear-flac.mp4"), "--quality", "original"])
        #expect(noOut.status == 2)
    }

    @Test("--version says Kiln's release and the libav libraries the command runs with (a bug report needs both), exit 0")
    func version() throws {
        let r = try Command.run(["--version"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("prep-artifact \(KilnVersion.number) (media description "), "\(r.stdout)")
        // The loaded libraries' own numbers, as ffmpeg -version prints them.
        let ffmpeg = try Run.command("ffmpeg", ["-hide_banner", "-version"]).stdout
        let avformat = try #require(ffmpeg.split(separator: "\n").first { $0.hasPrefix("libavformat") })
        let numbers = avformat.split(separator: "/").last.map { $0.split(separator: ".").map { String(Int($0.trimmingCharacters(in: .whitespaces)) ?? -1) }.joined(separator: ".") }
        #expect(r.stdout.contains("libavformat \(numbers ?? "?")"), "\(r.stdout) against \(avformat)")
    }

    @Test("what the contract writes as …|null is there as null when it has no value: an audio-only file's video, a copy's encoder, an untagged track's language")
    func contractNulls() throws {
        try Command.prepare(Media.shared("mb_eac3.mkv"), quality: "original", caps: "ios", scratch: "nulls") { r, _ in
            #expect(r.status == 0, "\(r.stderr)")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"] == .null, "the plan's video: \(r.stdout.prefix(400))")
            #expect(json["output"]?["video"] == .null, "the output's video")
            #expect(json["plan"]?["audio"]?["language"] == .null, "an untagged track's language")
            #expect(json["output"]?["audio"]?["codec"] == .string("eac3"))
        }
        let copy = try Command.run(["plan", Media.shared("sp_bear-640x360-ec3.mp4"), "--quality", "original", "--caps", "ios", "--json"])
        let answer = try JSONValue.parse(Array(copy.stdout.utf8))
        #expect(answer["ok"] == .bool(true), "plan --json answers as the contract's success: \(copy.stdout.prefix(200))")
        let plan = answer["plan"] ?? .null
        #expect(plan["video"]?["action"] == .string("copy"))
        #expect(plan["video"]?["encoder"] == .null, "a copied picture has no encoder: \(copy.stdout.prefix(400))")
        // A plan stored without those keys (before they were written) still reads.
        let stored = #"{"quality":"original","effective_quality":"original","delivery_format":"remux","target_bitrate_kbps":0,"container":"mp4","audio":{"source_index":0,"action":"copy","codec":"eac3","channels":6,"bitrate_kbps":0},"subtitles":[],"reasons":[],"artifact_key":"k"}"#
        let read = try JSON.decode(Plan.self, from: Array(stored.utf8))
        #expect(read.video == nil && read.audio?.language == nil && read.audio?.channels == 6)
    }

    @Test("a file size limit (ulimit -f) reached mid-write: exit 4 with io_error and nothing left in the folder (SIGXFSZ killed the command and left its temporary file)")
    func fileSizeLimit() throws {
        let dir = Media.scratch("fsize")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        // A 32 kB limit on a remux of about 100 kB, with SIGXFSZ at its default and unblocked
        // as in a login shell (the test runner blocks it, which children inherit).
        let limited = "import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); "
            + "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGXFSZ]); "
            + "resource.setrlimit(resource.RLIMIT_FSIZE, (32768, 32768)); os.execv(sys.argv[1], sys.argv[1:])"
        let r = try Run.command("python3", ["-c", limited, Command.binary, "prepare",
                                            Media.shared("mb_eac3.mkv"), "--quality", "original", "--caps", "ios",
                                            "--output", out, "--json"])
        #expect(r.status == 4, "\(r.status): \(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["error"]?["code"] == .string("io_error"), "\(r.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "left behind")
    }

    @Test("a missing file and a file that is not media exit 3 with a one-line reason")
    func unreadable() throws {
        let missing = try Command.run(["probe", "/nonexistent/file.mkv", "--json"])
        #expect(missing.status == 3)
        #expect(try Command.json(missing)["error"]?["code"] == .string("source_not_found"))
        let dir = Media.scratch("cli-bad")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        // A symlink loop names something that is there and cannot be read.
        let loop = dir.appendingPathComponent("loop.mkv").path
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: "loop.mkv")
        let looped = try Command.run(["probe", loop, "--json"])
        #expect(looped.status == 3)
        #expect(try Command.json(looped)["error"]?["code"] == .string("source_unreadable"), "\(looped.stdout)")
        let empty = try Command.run(["prepare", Media.shared("vd_empty.mp4"), "--quality", "2mbps", "--output", out, "--json"])
        #expect(empty.status == 3)
        let e = try Command.json(empty)
        #expect(e["ok"] == .bool(false))
        #expect(e["error"]?["code"] == .string("source_unreadable"))
        #expect(e["error"]?["retryable"] == .bool(false))
        #expect(e["error"]?["stage"] != nil)
        let human = try Command.run(["prepare", Media.shared("vd_empty.mp4"), "--quality", "2mbps", "--output", out])
        #expect(human.status == 3)
        #expect(human.stderr.split(separator: "\n").count == 1, "one line: \(human.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test("a sound track with no packets at all beside pictures that play: the file goes without it, said in its adjustments and its delivered plan (it was refused as damaged), copied or encoded (an Opus track, which every rung re-encodes, was refused at the encoder's end)",
          arguments: ["aac", "libopus"])
    func soundTrackWithoutPackets(codec: String) throws {
        let source = try Media.generated("empty-audio-track-\(codec).mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                                   "-f", "lavfi", "-i", "sine=duration=4", "-map", "0:v", "-map", "1:a",
                                                                   "-c:v", "libx264", "-preset", "ultrafast", "-c:a", codec, "-frames:a", "0"])
        let dir = Media.scratch("empty-audio")
        defer { try? FileManager.default.removeItem(at: dir) }
        for quality in ["original", "1mbps"] {
            let out = dir.appendingPathComponent("\(quality).mp4").path
            let r = try Command.run(["prepare", source, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
            #expect(r.status == 0, "\(quality): \(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"] != nil && json["plan"]?["audio"] != .null, "the plan, from the file's header, has sound")
            #expect("\(json["stats"]?["adjustments"] ?? .null)".contains("audio_dropped"), "\(quality): \(r.stdout.suffix(400))")
            let executed = try #require(json["executed_plan"], "\(quality): no executed_plan")
            #expect(executed["audio"] == nil || executed["audio"] == .null)
            #expect("\(executed["reasons"] ?? .null)".contains("audio_dropped"))
            #expect(DroppedStreamsTests.dropped(json) == [.init(index: 1, type: "audio", reason: "audio_dropped", language: nil)],
                    "the output lists the sound it lacks: \(DroppedStreamsTests.dropped(json))")
            let probed = try FFprobe(out)
            #expect(probed.streams("audio").isEmpty && probed.streams("video").count == 1, "\(quality)")
            #expect(abs(probed.formatDuration - 4) < 0.2, "\(quality): \(probed.formatDuration)")
        }
    }

    @Test("Ogg Opus whose pre-skip is the largest there is (65,535 samples, 1.37 s; libavformat counts the length with it) is prepared, its sound's whole length: it had been refused as cut short, 'stops at 8.63 s of the 10.00 s it declares'")
    func opusLongPreSkip() throws {
        let dir = Media.scratch("opus-pre-skip")
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = try Media.generated("opus-10s.opus", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10", "-c:a", "libopus", "-b:a", "64k"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
        // The first page holds OpusHead alone (27 bytes of page header, one lacing value);
        // its pre-skip is the packet's bytes 10–11, little-endian; the page's CRC (bytes
        // 22–25, little-endian) is Ogg's CRC-32 (0x04C11DB7, not reflected) with those zero.
        try #require(bytes[0..<4].elementsEqual("OggS".utf8) && bytes[28..<36].elementsEqual("OpusHead".utf8))
        let pageLength = 27 + Int(bytes[26]) + (0..<Int(bytes[26])).reduce(0) { $0 + Int(bytes[27 + $1]) }
        bytes[38] = 0xFF; bytes[39] = 0xFF
        bytes.replaceSubrange(22..<26, with: [0, 0, 0, 0])
        var crc: UInt32 = 0
        for byte in bytes[0..<pageLength] {
            crc ^= UInt32(byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        }
        bytes.replaceSubrange(22..<26, with: withUnsafeBytes(of: crc.littleEndian, Array.init))
        let source = dir.appendingPathComponent("long-pre-skip.opus").path
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        // What ffmpeg decodes of it: the samples past the pre-skip.
        let wav = dir.appendingPathComponent("decoded.wav").path
        try #require(try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", source, wav]).status == 0)
        let decoded = try #require(try FFprobe(wav).duration("audio"))
        #expect(decoded < 9, "the pre-skip is dropped: \(decoded) s")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "opus-pre-skip-out") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let length = try #require(try FFprobe(out).duration("audio"))
            #expect(abs(length - decoded) < 0.05, "\(length) s, ffmpeg decodes \(decoded) s")
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("a Windows Media file of several bitrates (three picture streams declared, one recorded) is prepared from the one with packets, the others said empty: it had been refused, \"no readable packets\", from the first, a file ffmpeg plays")
    func multipleBitrateASF() throws {
        let source = try Media.generated("asf-three-bitrates-one-recorded.wmv", [
            "-f", "lavfi", "-i", "testsrc2=size=200x150:rate=15:duration=3", "-f", "lavfi", "-i", "sine=sample_rate=22050:duration=3",
            "-map", "1:a", "-map", "0:v", "-map", "0:v", "-map", "0:v", "-c:v", "wmv2", "-c:a", "wmav2", "-frames:v:0", "0", "-frames:v:1", "0"])
        let probe = try Command.probed(source)
        guard case .array(let streams)? = probe["streams"] else { Issue.record("no streams: \(probe)"); return }
        #expect(streams.map { $0["packetless"] ?? .null } == [.null, .bool(true), .bool(true), .null], "\(streams)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "asf-mbr") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            #expect(try FFprobe.packetCount(out, "v:0") == 45)
            #expect(try FFprobe.decodeErrors(out) == "")
            guard case .array(let dropped)? = try Command.json(r)["output"]?["dropped"] else { Issue.record("no dropped list"); return }
            #expect(dropped.map { $0["reason"] ?? .null } == [.string("video_track_empty"), .string("video_track_empty")], "\(dropped)")
        }
    }

    @Test("a sound of a few samples (a game's 1-sample silence, a test file of 20) exits 3 source_unsupported, every time (its AAC encode decoded to nothing and failed verification as retryable, exit 4); one of 100 samples is prepared")
    func soundOfAFewSamples() throws {
        for (samples, prepared) in [(1, false), (20, false), (100, true)] {
            let source = try Media.generated("few-samples-\(samples).wav", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100",
                                                                           "-af", "atrim=end_sample=\(samples)", "-c:a", "pcm_s16le"])
            try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-few-samples-\(samples)") { r, out in
                #expect(r.status == (prepared ? 0 : 3), "\(samples): \(r.stdout.suffix(300))")
                guard !prepared else { return }
                let error = try Command.json(r)["error"]
                #expect(error?["code"] == .string("source_unsupported") && error?["retryable"] == .bool(false), "\(error ?? .null)")
                #expect(error?["message"]?.string?.contains("too short") == true, "\(error ?? .null)")
                #expect(!FileManager.default.fileExists(atPath: out))
            }
        }
    }

    @Test("a text file (README, .nfo) and a still picture (poster, photo, an icon, a GIF or an MP4 of one picture) exit 3 with a reason (libavformat read them as video: a 2 s clip of rendered text, a 0.04 s one of the poster; the icon and the GIF went out as such clips, exit 0)")
    func textAndPictures() throws {
        let dir = Media.scratch("cli-not-film")
        defer { try? FileManager.default.removeItem(at: dir) }
        let readme = dir.appendingPathComponent("README.md").path, nfo = dir.appendingPathComponent("film.nfo").path
        let text = try String(contentsOfFile: Media.repoRoot.appendingPathComponent("README.md").path, encoding: .utf8)
        try text.write(toFile: readme, atomically: true, encoding: .utf8)
        try (1...3000).map(String.init).joined(separator: "\n").write(toFile: nfo, atomically: true, encoding: .utf8)
        let poster = dir.appendingPathComponent("poster.jpg").path, still = dir.appendingPathComponent("still.png").path
        let icon = dir.appendingPathComponent("favicon.ico").path, gif = dir.appendingPathComponent("map.gif").path
        let single = dir.appendingPathComponent("one-picture.mp4").path
        for picture in [poster, still, icon, gif, single] {
            let size = picture == icon ? "32x32" : "640x360"
            let made = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=\(size)", "-frames:v", "1", picture])
            try #require(made.status == 0, "\(picture): \(made.stderr)")
        }
        // A GIF of several pictures is a film (a short animation), prepared as one.
        let animated = dir.appendingPathComponent("animated.gif").path
        try #require(try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=10:duration=2", animated]).status == 0)
        #expect(try Command.run(["probe", animated, "--json"]).status == 0)
        let empty = dir.appendingPathComponent("empty.mp3").path
        FileManager.default.createFile(atPath: empty, contents: Data())
        let nothing = try Command.run(["probe", empty, "--json"])
        #expect(nothing.status == 3 && nothing.stdout.contains("The source is empty (0 bytes)."), "\(nothing.stdout)")
        for (path, code) in [(readme, "source_unreadable"), (nfo, "source_unreadable"), (poster, "source_unsupported"), (still, "source_unsupported"),
                             (icon, "source_unsupported"), (gif, "source_unsupported"), (single, "source_unsupported")] {
            let out = dir.appendingPathComponent("out.mp4").path
            let r = try Command.run(["prepare", path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
            #expect(r.status == 3, "\(path): \(r.stdout)")
            #expect(try Command.json(r)["error"]?["code"] == .string(code), "\(path)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("an HLS playlist is refused as source_unsupported, and the files it names by absolute path (anywhere the process may read) are not read: it was prepared from them, the fingerprint of its own 100 bytes")
    func playlistsNamingOtherFiles() throws {
        let dir = Media.scratch("cli-playlist")
        defer { try? FileManager.default.removeItem(at: dir) }
        let elsewhere = Media.scratch("cli-playlist-elsewhere")
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let segment = elsewhere.appendingPathComponent("secret.ts").path
        try #require(try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                                                "-c:v", "libx264", "-f", "mpegts", segment]).status == 0)
        let playlist = dir.appendingPathComponent("index.m3u8").path
        try "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\n\(segment)\n#EXT-X-ENDLIST\n"
            .write(toFile: playlist, atomically: true, encoding: .utf8)
        let probed = try Command.run(["probe", playlist, "--json"])
        let probeCode = try Command.json(probed)["error"]?["code"]
        #expect(probed.status == 3 && probeCode == .string("source_unsupported"), "\(probed.stdout)")
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", playlist, "--quality", "original", "--caps", "android", "--output", out, "--json"])
        #expect(r.status == 3, "\(r.stdout)")
        let error = try Command.json(r)["error"]
        #expect(error?["code"] == .string("source_unsupported") && error?["message"]?.string?.contains("playlist") == true, "\(error ?? .null)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test("HLS fMP4 media segments without their init segment are refused saying so (it was 'not a media file libavformat can read (Invalid data found when processing input)'); joined behind it they are prepared")
    func segmentsWithoutInit() throws {
        let dir = Media.scratch("cli-no-init")
        defer { try? FileManager.default.removeItem(at: dir) }
        let made = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-c:v", "libx264", "-g", "25",
                                              "-f", "hls", "-hls_time", "1", "-hls_segment_type", "fmp4", "-hls_playlist_type", "vod",
                                              dir.appendingPathComponent("index.m3u8").path])
        try #require(made.status == 0, "\(made.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        let segments = names.filter { $0.hasSuffix(".m4s") }.sorted { $0.count == $1.count ? $0 < $1 : $0.count < $1.count }
        let bare = dir.appendingPathComponent("segments.m4s"), joined = dir.appendingPathComponent("joined.mp4")
        let parts = try segments.map { try Data(contentsOf: dir.appendingPathComponent($0)) }
        try Data(parts.joined()).write(to: bare)
        try (Data(contentsOf: dir.appendingPathComponent("init.mp4")) + Data(parts.joined())).write(to: joined)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", bare.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        let error = try Command.json(r)["error"]
        #expect(r.status == 3 && error?["code"] == .string("source_unreadable"), "\(r.stdout)")
        #expect(error?["message"]?.string?.contains("init segment") == true, "\(error ?? .null)")
        let whole = try Command.run(["prepare", joined.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(whole.status == 0, "\(whole.stdout.suffix(400))")
    }

    @Test("DVB teletext: a mov_text track for each subtitle page, in its page's language (the hard-of-hearing page flagged); other pages stay out")
    func teletextSubtitles() throws {
        let path = try Teletext.recording()
        let dir = Media.scratch("cli-teletext")
        defer { try? FileManager.default.removeItem(at: dir) }
        for quality in ["original", "1mbps"] {
            let out = dir.appendingPathComponent("\(quality).mp4").path
            let r = try Command.run(["prepare", path, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let json = try Command.json(r)
            guard case .array(let planned)? = json["plan"]?["subtitles"] else { Issue.record("no subtitles planned: \(r.stdout)"); continue }
            #expect(planned.map { $0["teletext_page"]?.string } == ["888", "877", "889"])
            #expect(planned.map { $0["language"]?.string } == ["eng", "fin", "eng"], "each page's language, not the map's list")
            // The ffmpeg command that does the same decodes the first page as text.
            guard case .array(let equivalent)? = json["stats"]?["ffmpeg_equivalent"] else {
                Issue.record("no ffmpeg_equivalent: \(r.stdout)")
                continue
            }
            let words = equivalent.compactMap { if case .string(let w) = $0 { w } else { nil } }
            #expect(words.starts(with: ["ffmpeg", "-txt_format", "text", "-txt_page", "888", "-i"]), "\(words)")
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.map { $0["codec_name"]?.string } == ["mov_text", "mov_text", "mov_text"])
            #expect(subs.map { $0["tags"]?["language"]?.string } == ["eng", "fin", "eng"])
            #expect(subs.map { $0["disposition"]?["hearing_impaired"] } == [.number(0), .number(0), .number(1)])
            // Cue times against the output's first picture, as the page was sent against the source's.
            let video = try FFprobe.packetTimes(out, "v:0").min() ?? 0
            for (track, sent) in [Teletext.cues, Teletext.finnish, Teletext.hardOfHearing].enumerated() {
                let cues = try Command.cues(out, "0:s:\(track)")
                #expect(cues.count == sent.count, "\(cues)")
                for (cue, page) in zip(cues, sent) {
                    #expect(cue.text == page.text)
                    // The decoder times a page by the packet that completes it, and the demuxer a
                    // teletext packet by the clock: within a tenth of a second.
                    #expect(abs(cue.start - video - page.start) < 0.1 && abs(cue.end - video - page.end) < 0.1, "\(cue)")
                }
            }
        }
    }

    @Test("closed captions in the pictures (ATSC A/53, a DVD's, SCTE 20's) become a text track, in a remux and in a transcode, and stay in the pictures",
          arguments: [(ClosedCaptionSample.Video.h264, "remux"), (.hevc, "remux"), (.mpeg2Interlaced, "transcode"), (.dvd, "transcode"),
                      (.scte20, "transcode")])
    func closedCaptions(_ video: ClosedCaptionSample.Video, delivery: String) throws {
        let source = try ClosedCaptionSample.recording(video)
        // The generator's own check: ffmpeg sees the captions it wrote.
        let sent = try Command.cues(source, filter: "movie=\(source)[out0+subcc]")
        #expect(sent.map(\.text).prefix(3) == ClosedCaptionSample.popOn.map(\.text)[...], "\(sent)")
        #expect(try Command.probedStreams(source).first?["closed_captions"] == .bool(true))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-cc-\(video.rawValue)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"]?.string == delivery)
            guard case .array(let planned)? = json["plan"]?["subtitles"] else { Issue.record("no subtitles planned: \(r.stdout)"); return }
            #expect(planned.count == 1 && planned.first?["closed_captions"] == .bool(true) && planned.first?["source_index"] == .number(0))
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.count == 1 && subs.first?["codec_name"]?.string == "mov_text")
            let cues = try expectSampleCaptions(out)
            let texts = Self.sampleCaptionTexts
            // The last roll-up screen stays up to the end (ffmpeg's own reading drops it).
            let end = try #require(FFprobe(out).duration("video"))
            if let last = cues.last {
                #expect(last.text == ClosedCaptionSample.rollUp.suffix(2).joined(separator: " "), "\(cues)")
                #expect(abs(last.end - end) < 0.1, "\(last) against the pictures' end \(end)")
            }
            // The pictures, copied or encoded, still carry them (libx264 writes what the decoder found).
            #expect(try Command.cues(out, filter: "movie=\(out)[out0+subcc]").map(\.text) == Array(texts.dropLast()))
        }
    }

    /// The sample's captions as a player shows them: pop-on, then two-row roll-up screens.
    static var sampleCaptionTexts: [String] {
        let rolled = ClosedCaptionSample.rollUp
        return ClosedCaptionSample.popOn.map(\.text) + [rolled[0], rolled[0] + " " + rolled[1], rolled[1] + " " + rolled[2]]
    }

    /// The sample's captions in `out`'s text track: texts, and each pop-on caption from the
    /// picture that shows it to the one that erases it, against the output's first picture
    /// as against the source's.
    @discardableResult
    func expectSampleCaptions(_ out: String) throws -> [(start: Double, end: Double, text: String)] {
        let first = try FFprobe.packetTimes(out, "v:0").min() ?? 0
        let picture = { (t: Double) in first + (t * 30000 / 1001).rounded() * 1001 / 30000 }
        let cues = try Command.cues(out)
        #expect(cues.map(\.text) == Self.sampleCaptionTexts)
        for (cue, shown) in zip(cues, ClosedCaptionSample.popOn) {
            #expect(abs(cue.start - picture(shown.start)) < 0.02 && abs(cue.end - picture(shown.end)) < 0.02, "\(cue) against \(shown)")
        }
        return cues
    }

    @Test("CC1 beside another data channel's captions, a text service and extended data, and CC3 in field 2: a track of each service, nothing else in them (ffmpeg's reading mixes them in)")
    func crowdedCaptions() throws {
        let source = try ClosedCaptionSample.recording(.h264, crowded: true)
        let theirs = try Command.cues(source, filter: "movie=\(source)[out0+subcc]")
        #expect(theirs.contains { $0.text.contains("OTHER CHANNEL") || $0.text.contains("TEXT SERVICE") }, "\(theirs)")
        let video = try #require(try Command.probedStreams(source).first)
        #expect(video["closed_captions"] == .bool(true) && video["caption_services"] == .array([.string("CC1"), .string("CC3")]))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-cc-crowded") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            guard case .array(let planned)? = try Command.json(r)["plan"]?["subtitles"] else { Issue.record("no subtitles planned: \(r.stdout)"); return }
            #expect(planned.map { $0["caption_service"]?.string } == [nil, "CC3"])
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.map { $0["tags"]?["handler_name"]?.string } == ["Closed captions", "Closed captions (CC3)"])
            try expectSampleCaptions(out)
            let first = try FFprobe.packetTimes(out, "v:0").min() ?? 0
            let third = try Command.cues(out, "0:s:1")
            #expect(third.map(\.text) == ClosedCaptionSample.cc3.map(\.text))
            for (cue, shown) in zip(third, ClosedCaptionSample.cc3) {
                // A roll-up line shows as it is typed, a few frames after its carriage return.
                #expect(abs(cue.start - first - shown.start) < 0.2 && abs(cue.end - first - shown.end) < 0.05, "\(cue) against \(shown)")
            }
        }
    }

    @Test("a fragmented MP4 (ExoPlayer cannot seek in one without a segment index) is remuxed into one index at the front, even where the device plays it as it is")
    func fragmentedMP4() throws {
        let source = Media.shared("mb_rotate-buck-bunny.mp4")
        #expect(try Command.probed(source)["fragmented"] == .bool(true))
        try Command.prepare(source, quality: "original", caps: "android", scratch: "cli-fragmented") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let plan = try Command.json(r)["plan"]
            #expect(plan?["delivery_format"]?.string == "remux" && plan?["reasons"] == .array([.string("container_fragmented")]), "\(r.stdout)")
            let bytes = try Data(contentsOf: URL(fileURLWithPath: out))
            #expect(try FFprobe.moovBeforeMdat(out) && bytes.range(of: Data("moof".utf8)) == nil && bytes.range(of: Data("mvex".utf8)) == nil)
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("an MP4 cut short never goes out as it is: cut by a few kB it is remuxed from what it holds; cut to a third, refused as cut short (its index said otherwise before)")
    func cutShortMP4() throws {
        let whole = try Media.generated("cut-faststart-10s.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=10",
                                                                 "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                                                 "-c:a", "aac", "-movflags", "+faststart"])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let dir = Media.scratch("cli-cut-mp4")
        defer { try? FileManager.default.removeItem(at: dir) }
        let slightly = dir.appendingPathComponent("slightly.mp4").path, third = dir.appendingPathComponent("third.mp4").path
        try bytes.prefix(bytes.count - 3000).write(to: URL(fileURLWithPath: slightly))
        try bytes.prefix(bytes.count / 3).write(to: URL(fileURLWithPath: third))
        #expect(try Command.probed(whole)["index_damage"] == nil)
        let damage = try Command.probed(third)["index_damage"]?.string
        #expect(damage?.contains("past the file's end") == true, "\(String(describing: damage))")

        try Command.prepare(slightly, quality: "original", caps: "ios", scratch: "cli-cut-slightly") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let plan = try Command.json(r)["plan"]
            #expect(plan?["delivery_format"]?.string == "remux" && plan?["reasons"] == .array([.string("source_index_damaged")]), "\(r.stdout)")
            #expect(try FFprobe.moovBeforeMdat(out))
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 10) < 0.5)
        }
        for quality in ["original", "2mbps"] {
            try SourceDamageTests.expectSourceCorrupt(third, quality: quality, in: dir, saying: "cut short")
        }
        // Cut before the first of its sound (a file whose sound is stored in long runs): the
        // answer names the cut first, then the stream it cost, for a copy and an encode alike
        // (it had said "1 packets could not be decoded: expected one aac audio stream, found []").
        let hlg = try Data(contentsOf: URL(fileURLWithPath: Media.shared("ax_hlg10-color-test.mp4")))
        let soundless = dir.appendingPathComponent("soundless.mp4").path
        try hlg.prefix(hlg.count * 6 / 10).write(to: URL(fileURLWithPath: soundless))
        for quality in ["original", "2mbps"] {
            let error = try SourceDamageTests.expectSourceCorrupt(soundless, quality: quality, in: dir, saying: "file is cut short")
            let message = error?["message"]?.string ?? ""
            // One sentence, the conclusion said once and first, then the fact and the stream it cost.
            #expect(message.hasPrefix("The file is cut short") && message.contains("index places a sample")
                    && message.hasSuffix("has no readable packets."), "\(message)")
            #expect(Substring(message).occurrences(of: "cut short").count == 1 && !message.contains("(stream"), "\(message)")
        }
    }

    @Test("a clip of a few seconds encoded at a rung keeps to the rung's video budget on average (the VBV buffer starts half full: x264's 90 % put a 6 s clip 10-15 % over), and the ffmpeg equivalent says so")
    func shortClipKeepsToItsBudget() throws {
        let source = try Media.generated("noisy-720p-6s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25:duration=6,noise=alls=25:allf=t",
                                                               "-c:v", "libx264", "-preset", "ultrafast", "-crf", "12"])
        try Command.prepare(source, quality: "2mbps", caps: "android", scratch: "cli-short-clip-budget") { r, out in
            let json = try Command.json(r)
            let maxrate = try #require(json["plan"]?["video"]?["encoder"]?["maxrate_kbps"]?.double)
            // The video track's bytes over its length (ffprobe's stream bitrate in an MP4).
            let kbps = try #require(try FFprobe(out).streams("video").first?["bit_rate"]?.double) / 1000
            #expect(kbps <= maxrate * 1.03 && kbps > maxrate * 0.5, "\(kbps) kbit/s against \(maxrate)")
            guard case .array(let equivalent)? = json["stats"]?["ffmpeg_equivalent"] else { Issue.record("no ffmpeg_equivalent"); return }
            #expect(equivalent.contains { $0.string?.hasPrefix("-rc_init_occupancy") == true }, "\(equivalent)")
        }
    }

    @Test("a Matroska file cut short (its Segment declaring bytes past the end, its Cues gone with them) never goes out as it is: cut by a few percent it is remuxed from what it holds, cut in half refused as cut short (both went to Android as they were)")
    func cutShortMatroska() throws {
        let whole = try Media.generated("cut-mkv-10s.mkv", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=10",
                                                           "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let dir = Media.scratch("cli-cut-mkv")
        defer { try? FileManager.default.removeItem(at: dir) }
        let slightly = dir.appendingPathComponent("slightly.mkv").path, half = dir.appendingPathComponent("half.mkv").path
        try bytes.prefix(bytes.count * 95 / 100).write(to: URL(fileURLWithPath: slightly))
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: half))
        #expect(try Command.probed(whole)["index_damage"] == nil)
        let damage = try Command.probed(half)["index_damage"]?.string
        #expect(damage?.contains("cut short") == true, "\(String(describing: damage))")
        try Command.prepare(slightly, quality: "2mbps", caps: "android", scratch: "cli-cut-mkv-slightly") { r, out in
            let plan = try Command.json(r)["plan"]
            #expect(r.status == 0 && plan?["delivery_format"]?.string == "remux", "\(r.stdout.prefix(500))")
            let length = try FFprobe(out).duration("video") ?? 0
            #expect(length > 8.5 && length < 9.9, "\(length)")
        }
        try SourceDamageTests.expectSourceCorrupt(half, quality: "2mbps", caps: "android", in: dir, saying: "cut short")
    }

    @Test("a Matroska file without its (optional) Duration is prepared whole: the probe's look at its tail left the reader at the end, and it was refused as having no packets")
    func matroskaWithoutDuration() throws {
        let whole = try Media.generated("no-duration-source-4s.mkv", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=4",
                                                                     "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
        // Duration (44 89, an 8-byte float) becomes a Void element (EC) of the same 11 bytes.
        let at = try #require((0..<min(bytes.count, 4096) - 2).first { bytes[$0] == 0x44 && bytes[$0 + 1] == 0x89 && bytes[$0 + 2] == 0x88 })
        bytes.replaceSubrange(at..<at + 11, with: [0xEC, 0x89] + [UInt8](repeating: 0, count: 9))
        let dir = Media.scratch("cli-no-duration")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("no-duration.mkv").path
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        #expect(try Run.command("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", source]).stdout
                    .trimmingCharacters(in: .whitespacesAndNewlines) == "N/A", "the source is what the test needs")
        for (quality, caps) in [("original", "ios"), ("1mbps", "web")] {
            try Command.prepare(source, quality: quality, caps: caps, scratch: "cli-no-duration-out") { r, out in
                #expect(r.status == 0, "\(r.stdout.prefix(400)) \(r.stderr.prefix(400))")
                let video = try FFprobe(out).duration("video") ?? 0, audio = try FFprobe(out).duration("audio") ?? 0
                #expect(abs(video - 4) < 0.2 && abs(audio - 4) < 0.2, "\(quality): \(video) s of pictures, \(audio) s of sound")
            }
        }
    }

    @Test("an MP4 whose movie header declares three times its length, or 49 days, is as long as its tracks and has their bitrate (a 3 Mbit/s file read as 1 went to the 1 Mbit/s rung as it was), and is remuxed rather than sent with that length to show")
    func damagedMovieDuration() throws {
        let whole = try Media.generated("mvhd-4s.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=4",
                                                       "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast",
                                                       "-b:v", "3M", "-c:a", "aac", "-movflags", "+faststart"])
        let dir = Media.scratch("cli-mvhd")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, factor) in [("thrice.mp4", UInt32(3)), ("forever.mp4", UInt32(0))] {
            let source = try damagedCopy(ofFile: whole, in: dir, as: name) { bytes throws in
                let type: [UInt8] = Array("mvhd".utf8)
                var at: Int? = nil
                for i in 0..<min(bytes.count, 1 << 16) - 4 where at == nil && Array(bytes[i..<i + 4]) == type { at = i }
                let d = try #require(at) + 20   // version 0: flags, creation, modification, timescale, then duration
                try #require(bytes[try #require(at) + 4] == 0)
                let declared = UInt32(bytes[d]) << 24 | UInt32(bytes[d + 1]) << 16 | UInt32(bytes[d + 2]) << 8 | UInt32(bytes[d + 3])
                let damaged = factor == 0 ? UInt32.max : declared * factor
                for k in 0..<4 { bytes[d + k] = UInt8(truncatingIfNeeded: damaged >> (24 - 8 * k)) }
            }
            let info = try Command.probed(source.path)
            let seconds = info["duration_seconds"]?.double ?? 0, kbps = (info["bit_rate"]?.double ?? 0) / 1000
            #expect(abs(seconds - 4) < 0.2 && kbps > 2000, "\(name): \(seconds) s, \(kbps) kbit/s")
            let plan = try Command.planned([source.path, "--quality", "1mbps", "--caps", "android", "--json"])
            #expect(plan["delivery_format"]?.string == "transcode", "\(name): \(plan["reasons"] ?? .null)")
            // Not as it is, with that length for players to show: remuxed, its tracks' length written.
            #expect(info["duration_wrong"] == .bool(true))
            try Command.prepare(source.path, quality: "original", caps: "android", scratch: "cli-mvhd-original") { r, out in
                #expect(r.status == 0, "\(r.stdout.prefix(400)) \(r.stderr.prefix(400))")
                let plan = try Command.json(r)["plan"]
                #expect(plan?["delivery_format"]?.string == "remux" && "\(plan?["reasons"] ?? .null)".contains("container_duration_wrong"),
                        "\(name): \(plan?["reasons"] ?? .null)")
                #expect(abs(try FFprobe(out).formatDuration - 4) < 0.2)
            }
        }
    }

    @Test("an MP4 whose sound starts 3 s after its pictures (an edit list) is as long as its movie header says, 13 s, and goes as it is: its tracks' own 10 s had been taken for its length (found by a helper's MPEG-TS audit, in Kiln's own output)")
    func trackStartingLate() throws {
        let source = try Media.generated("sound-3s-late.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                                              "-itsoffset", "3", "-f", "lavfi", "-i", "sine=duration=10",
                                                              "-map", "0", "-map", "1", "-c:v", "libx264", "-preset", "ultrafast",
                                                              "-c:a", "aac", "-movflags", "+faststart"])
        let info = try Command.probed(source)
        #expect(abs((info["duration_seconds"]?.double ?? 0) - 13) < 0.1, "\(info["duration_seconds"] ?? .null)")
        #expect(info["duration_wrong"] == nil)
        let plan = try Command.planned([source, "--quality", "original", "--caps", "android", "--json"])
        #expect(plan["delivery_format"]?.string == "original", "\(plan["reasons"] ?? .null)")
    }

    @Test("an MP4 with its index at the end, cut short inside it, is refused as cut short (source_corrupt), not as a codec Kiln does not know")
    func movieBoxCutShort() throws {
        let whole = try Media.generated("moov-at-end-4s.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                              "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast",
                                                              "-c:a", "aac"])
        let dir = Media.scratch("cli-moov-cut")
        defer { try? FileManager.default.removeItem(at: dir) }
        for cut in [1000, 1800] {
            let source = try damagedCopy(ofFile: whole, in: dir, as: "cut-\(cut).mp4") { bytes in bytes.removeLast(cut) }
            try SourceDamageTests.expectSourceCorrupt(source.path, quality: "1mbps", caps: "web", in: dir, saying: "cut short")
        }
        // Cut in its last metadata only, it still opens: its streams are remuxed, never sent as the damaged file.
        let slightly = try damagedCopy(ofFile: whole, in: dir, as: "cut-50.mp4") { bytes in bytes.removeLast(50) }
        try Command.prepare(slightly.path, quality: "original", caps: "ios", scratch: "cli-moov-cut-50") { r, out in
            let delivery = r.status == 0 ? try Command.json(r)["plan"]?["delivery_format"]?.string : nil
            #expect(delivery == "remux", "\(r.stdout.prefix(300))")
            let length = try FFprobe(out).duration("video") ?? 0
            #expect(abs(length - 4) < 0.2, "\(length)")
        }
    }

    @Test("an MP4 whose picture track's handler says sound (a damaged hdlr box) is refused as a damaged header, for the file as it is and an encode; its pictures were left out quietly, exit 0 with sound alone")
    func pictureTrackDeclaredAsSound() throws {
        let dir = Media.scratch("cli-handler-flipped")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: Media.shared("ax_hlg10-color-test.mp4"), in: dir, as: "flipped.mp4") { bytes in
            // hdlr, version and flags, pre_defined, then the handler type.
            let handler = Array("hdlr".utf8) + [UInt8](repeating: 0, count: 8) + Array("vide".utf8)
            let i = try #require(bytes.firstRange(of: handler)).lowerBound
            bytes.replaceSubrange(i + 12..<i + 16, with: Array("soun".utf8))
        }
        let damage = try Command.probed(source.path)["index_damage"]?.string
        #expect(damage?.contains("declares it sound, but its sample entry (hvc1) holds hevc pictures") == true, "\(String(describing: damage))")
        for quality in ["original", "1mbps"] {
            try SourceDamageTests.expectSourceCorrupt(source.path, quality: quality, in: dir, saying: "the header is damaged")
        }
    }

    @Test("an MP4 whose movie header's size is damaged is refused as a damaged index: one that swallowed the sound track had gone out with its pictures alone (exit 0), one past the index had answered quality_unavailable")
    func movieHeaderSizeDamaged() throws {
        let dir = Media.scratch("cli-mvhd-size")
        defer { try? FileManager.default.removeItem(at: dir) }
        for declared in [200, 0x7fff_ffff] {
            let source = try damagedCopy(ofFile: Media.shared("ax_hlg10-color-test.mp4"), in: dir, as: "mvhd-\(declared).mp4") { bytes in
                let i = try #require(bytes.firstRange(of: Array("mvhd".utf8))).lowerBound - 4
                bytes.replaceSubrange(i..<i + 4, with: [UInt8(declared >> 24), UInt8(declared >> 16 & 0xff), UInt8(declared >> 8 & 0xff), UInt8(declared & 0xff)])
            }
            for quality in ["original", "1mbps"] {
                try SourceDamageTests.expectSourceCorrupt(source.path, quality: quality, in: dir, saying: "The source's index is damaged")
            }
        }
    }

    @Test("an MP4, whole or fragmented, whose sound track's header (tkhd) or media header (mdhd) size is damaged is refused as a damaged index: the box swallowed the handler and sample tables after it, libavformat made the track a data stream, and the film went out without its sound, exit 0")
    func trackHeaderSizeDamaged() throws {
        let dir = Media.scratch("cli-track-header-size")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, flags) in [("whole", "+faststart"), ("fragmented", "frag_keyframe+empty_moov")] {
            let source = try soundAndPictures3s(name, movflags: flags)
            for (box, size) in [("tkhd", 0xffff), ("mdhd", 33)] {
                let damaged = try damagedCopy(ofFile: source, in: dir, as: "\(name)-\(box)-\(size).mp4") { bytes throws in
                    // The second track's (the sound's) box: its 32-bit size before its type.
                    let found = typeOffsets(of: box, in: bytes)
                    try #require(found.count == 2)
                    bytes.replaceSubrange(found[1] - 4..<found[1], with: [0, 0, UInt8(size >> 8), UInt8(size & 0xff)])
                }.path
                let types = try FFprobe(damaged).streams.compactMap { $0["codec_type"]?.string }
                #expect(types == ["video", "data"], "\(name), \(box): the source is what the test needs: \(types)")
                for (quality, caps) in [("original", "ios"), ("2mbps", "android")] {
                    try SourceDamageTests.expectSourceCorrupt(damaged, quality: quality, caps: caps, in: dir, saying: "The source's index is damaged")
                }
            }
        }
    }

    @Test("MP4 index layouts the format allows are not damage: a track's trak and mdia boxes with 64-bit sizes (their children start 16 bytes in), a QuickTime box type beginning with ©, and zeros padding the movie box's end")
    func indexLayoutsAllowed() throws {
        // The index at the end: it can grow without moving a sample.
        let source = try Media.generated("index-at-end-h264-aac-3s.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                                                        "-f", "lavfi", "-i", "sine=duration=3", "-c:v", "libx264",
                                                                        "-preset", "ultrafast", "-c:a", "aac"])
        let dir = Media.scratch("cli-index-layouts")
        defer { try? FileManager.default.removeItem(at: dir) }
        func be32(_ b: [UInt8], _ i: Int) -> Int { Int(b[i]) << 24 | Int(b[i + 1]) << 16 | Int(b[i + 2]) << 8 | Int(b[i + 3]) }
        func put32(_ b: inout [UInt8], _ i: Int, _ v: Int) { for k in 0..<4 { b[i + k] = UInt8(truncatingIfNeeded: v >> (24 - 8 * k)) } }
        func box(_ b: [UInt8], _ type: String, nth: Int = 0) throws -> Int {
            let found = typeOffsets(of: type, in: b)
            try #require(found.count > nth)
            return found[nth] - 4
        }
        /// Grows the boxes holding `at` (their 32-bit sizes) by `by` bytes.
        func grow(_ b: inout [UInt8], around at: Int, by: Int, _ parents: [String]) throws {
            for parent in parents {
                let p = try #require(typeOffsets(of: parent, in: b).last { $0 < at }) - 4
                put32(&b, p, be32(b, p) + by)
            }
        }
        let variants: [(String, (inout [UInt8]) throws -> Void)] = [
            ("trak-and-mdia-64-bit.mp4", { b in
                for type in ["mdia", "trak"] {
                    let at = try box(b, type, nth: 1)
                    let size = be32(b, at)
                    b.replaceSubrange(at..<at + 8, with: [0, 0, 0, 1] + Array(type.utf8) + [0, 0, 0, 0] + [0, 0, 0, 0])
                    put32(&b, at + 12, size + 8)
                    if type == "mdia" { put32(&b, try box(b, "trak", nth: 1), be32(b, try box(b, "trak", nth: 1)) + 8) }
                    put32(&b, try box(b, "moov"), be32(b, try box(b, "moov")) + 8)
                }
            }),
            ("copyright-box-in-trak.mp4", { b in
                let trak = try box(b, "trak", nth: 1)
                let end = trak + be32(b, trak)
                b.insert(contentsOf: [0, 0, 0, 16, 0xA9] + Array("xyz".utf8) + Array("kiln-mp4".utf8), at: end)
                try grow(&b, around: end - 1, by: 16, ["trak", "moov"])
            }),
            ("zeros-after-index.mp4", { b in
                let moov = try box(b, "moov")
                let end = moov + be32(b, moov)
                b.insert(contentsOf: [UInt8](repeating: 0, count: 12), at: end)
                put32(&b, moov, be32(b, moov) + 12)
            }),
        ]
        for (name, change) in variants {
            let file = try damagedCopy(ofFile: source, in: dir, as: name, change).path
            let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", file, "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "\(name): the variant is what the test needs: \(decode.stderr.prefix(300))")
            let probe = try Command.run(["probe", file, "--json"])
            #expect(probe.status == 0, "\(name): \(probe.stdout.prefix(300))")
            try Command.prepare(file, quality: "2mbps", caps: "android", scratch: "cli-index-layouts-\(name)") { r, out in
                #expect(r.status == 0, "\(name): \(r.stdout.prefix(300))")
                let streams = try FFprobe(out).streams.count
                #expect(streams == 2, "\(name)")
            }
        }
    }

    @Test("an MP4 whose picture track's sample count is damaged (one sample of 250) is refused as a damaged index, not delivered as one picture beside 10 s of sound (exit 0); a clip trimmed by an edit list and a still shown for 10 s go through")
    func sampleCountDamaged() throws {
        let whole = try Media.generated("stsz-10s.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=10",
                                                        "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                                        "-c:a", "aac", "-movflags", "+faststart"])
        let dir = Media.scratch("cli-stsz-count")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "one-sample.mp4") { bytes in
            let i = try #require(bytes.firstRange(of: Array("stsz".utf8))).lowerBound   // the first track's: the pictures'
            #expect(Array(bytes[i + 12..<i + 16]) == [0, 0, 0, 250])
            bytes.replaceSubrange(i + 12..<i + 16, with: [0, 0, 0, 1])
        }
        for quality in ["original", "1mbps"] {
            try SourceDamageTests.expectSourceCorrupt(source.path, quality: quality, in: dir, saying: "its sample tables give 1 of its 250 samples")
        }
        let trimmed = try Media.generated("stsz-10s-trimmed.mp4", ["-ss", "2.3", "-t", "5", "-i", whole, "-c", "copy"])
        let still = try Media.generated("still-10s.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=1/10:duration=10",
                                                          "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                                          "-c:a", "aac", "-shortest"])
        for path in [trimmed, still] {
            #expect(try Command.run(["probe", path]).status == 0, "\(path)")
        }
    }

    @Test("a Matroska recording kept on its capture clock (its first block at an hour, its Duration the last time) is 6 s long at its real bitrate: transcoded for a rung it is above, remuxed whole for original (it was read as 3606 s, gone to a 1 Mbit/s device as it was, and refused as cut short)")
    func matroskaStartingLate() throws {
        let source = try Media.generated("late-clock-6s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=6",
                                                               "-f", "lavfi", "-i", "sine=duration=6", "-c:v", "libx264", "-preset", "ultrafast",
                                                               "-b:v", "3M", "-c:a", "aac", "-output_ts_offset", "3600"])
        let info = try Command.probed(source)
        let seconds = try #require(info["duration_seconds"]?.double), kbps = (info["bit_rate"]?.double ?? 0) / 1000
        #expect(abs(seconds - 6) < 0.2 && kbps > 2000, "\(seconds) s, \(kbps) kbit/s")
        try Command.prepare(source, quality: "1mbps", caps: "android", scratch: "cli-late-clock-rung") { r, out in
            let format = try Command.json(r)["plan"]?["delivery_format"]?.string
            #expect(r.status == 0 && format == "transcode", "\(r.stdout.prefix(400))")
            let length = try FFprobe(out).duration("video") ?? 0
            #expect(abs(length - 6) < 0.2, "\(length)")
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-late-clock-original") { r, out in
            #expect(r.status == 0, "\(r.stdout.prefix(400)) \(r.stderr.suffix(300))")
            let length = try FFprobe(out).duration("video") ?? 0
            #expect(abs(length - 6) < 0.2, "\(length)")
        }
    }

    @Test("an MP4 whose tracks drift apart in time (the pictures' timescale rewritten: 250 pictures in a third of a second beside 10 s of sound, or stretched to 200 s) is refused as source_corrupt, as it is and at a rung; the intact file is not, nor one whose pictures pause for 15 s")
    func trackTimingDamaged() throws {
        let whole = try Media.generated("drift-10s.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=10",
                                                         "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
        // The first track's media header (the pictures'): version, flags, two times, then the timescale.
        let mdhd = try #require(Data(bytes).range(of: Data("mdhd".utf8))).lowerBound
        let at = mdhd + 8 + (bytes[mdhd + 4] == 1 ? 16 : 8)
        let timescale = bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
        let dir = Media.scratch("cli-drift")
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try Command.probed(whole)["timing_damage"] == nil)
        // Nor pictures that pause for 15 s (a variable-rate recording holding a still), the
        // sound going on: it had read as 12 s of drift, and the file was refused.
        let paused = try Media.generated("drift-none-15s-pause.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=20",
                                                                      "-f", "lavfi", "-i", "sine=duration=20", "-vf", "select='lt(t,3)+gte(t,17.96)'",
                                                                      "-vsync", "vfr", "-c:v", "libx264", "-bf", "3", "-pix_fmt", "yuv420p", "-c:a", "aac"])
        #expect(try Command.probed(paused)["timing_damage"] == nil)
        for (name, scaled) in [("squeezed", timescale * 30), ("stretched", timescale / 20)] {
            for k in 0..<4 { bytes[at + k] = UInt8(truncatingIfNeeded: scaled >> (24 - 8 * UInt32(k))) }
            let damaged = dir.appendingPathComponent("\(name).mp4").path
            try Data(bytes).write(to: URL(fileURLWithPath: damaged))
            let damage = try Command.probed(damaged)["timing_damage"]?.string
            #expect(damage?.contains("stream 1's times drift") == true, "\(name): \(String(describing: damage))")
            for quality in ["original", "2mbps"] {
                try SourceDamageTests.expectSourceCorrupt(damaged, quality: quality, in: dir, saying: "do not keep time together")
            }
        }
    }

    @Test("CEA-708 captions only (no CEA-608 text, which libavcodec cannot read): a track for each service with text, with its captions at their times; a service of spaces and commands gives none")
    func dtvccCaptions() throws {
        let source = try ClosedCaptionSample.recording(.h264, dtvcc: true)
        // ffmpeg's reading finds no CEA-608 captions in it.
        #expect(try Command.cues(source, filter: "movie=\(source)[out0+subcc]").isEmpty)
        let video = try #require(try Command.probedStreams(source).first)
        #expect(video["closed_captions"] == .bool(true) && video["caption_services"] == .array([.string("SERVICE1"), .string("SERVICE2")]), "\(video)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-cc-dtvcc") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            guard case .array(let planned)? = try Command.json(r)["plan"]?["subtitles"] else { Issue.record("no subtitles planned: \(r.stdout)"); return }
            #expect(planned.map { $0["caption_service"]?.string } == ["SERVICE1", "SERVICE2"])
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.map { $0["tags"]?["handler_name"]?.string } == ["Closed captions", "Closed captions (SERVICE2)"])
            let first = try FFprobe.packetTimes(out, "v:0").min() ?? 0
            let end = try #require(FFprobe(out).duration("video"))
            let picture = { (t: Double) in first + (t * 30000 / 1001).rounded() * 1001 / 30000 }
            for (k, expected) in [DTVCCSample.service1, DTVCCSample.service2].enumerated() {
                let cues = try Command.cues(out, "0:s:\(k)")
                #expect(cues.map(\.text) == expected.map(\.text))
                for (cue, shown) in zip(cues, expected) {
                    #expect(abs(cue.start - picture(shown.start)) < 0.02 && abs(cue.end - (shown.end.map(picture) ?? end)) < 0.05, "\(cue) against \(shown)")
                }
            }
            // The first caption's pen is underlined (and only its): the style reaches the track.
            let srt = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:0", "-f", "srt", "-"]).stdout
            #expect(srt.components(separatedBy: "<u>").count == 2 && srt.contains("<u>HELLO FROM 708</u>"), "\(srt)")
        }
    }

    @Test("paint-on captions show from their first character, not from the erase before them: ffmpeg's own reading has them seconds early")
    func paintOnCaptions() throws {
        let source = try ClosedCaptionSample.recording(.h264, paintOn: true)
        let painted = ClosedCaptionSample.paintOn
        let theirs = try Command.cues(source, filter: "movie=\(source)[out0+subcc]")
        #expect(theirs.map(\.text) == painted.map(\.text))
        if theirs.count == painted.count {
            // From the erase 2.5 s before (and the first from the recording's start).
            #expect(theirs[1].start < painted[1].start - 2 && theirs[2].start < painted[2].start - 2, "\(theirs)")
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-cc-painton") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let first = try FFprobe.packetTimes(out, "v:0").min() ?? 0
            let picture = { (t: Double) in first + (t * 30000 / 1001).rounded() * 1001 / 30000 }
            let cues = try Command.cues(out)
            #expect(cues.map(\.text) == painted.map(\.text))
            for (cue, shown) in zip(cues, painted) {
                #expect(abs(cue.start - picture(shown.start)) < 0.02 && abs(cue.end - picture(shown.end)) < 0.02, "\(cue) against \(shown)")
            }
        }
    }

    @Test("a QuickTime caption track (c608) becomes mov_text, and the same captions in its pictures do not make a second one")
    func quickTimeCaptionTrack() throws {
        let source = try ClosedCaptionSample.quickTimeTrack()
        #expect(try FFprobe(source).streams("subtitle").first?["codec_name"]?.string == "eia_608")
        try Command.prepare(source, quality: "original", caps: "android", scratch: "cli-c608") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"]?.string == "remux")
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.map { $0["codec_name"]?.string } == ["mov_text"])
            #expect(try Command.cues(out).map(\.text) == Self.sampleCaptionTexts)
        }
    }

    @Test("a file that is not media exits 3 every time: the fingerprint's thread never outlives the failed probe")
    func unreadableWhileFingerprinting() throws {
        // The fingerprint is read beside the analysis. A file libavformat rejects at once
        // fails the probe while the fingerprint's thread is still starting libcrypto; the
        // probe must wait for it, or the exit tears libcrypto down under it (a crash).
        let out = Media.scratch("cli-garbage").appendingPathComponent("out.mp4").path
        defer { try? FileManager.default.removeItem(atPath: (out as NSString).deletingLastPathComponent) }
        for _ in 0..<24 {
            let r = try Command.run(["prepare", Media.shared("vd_empty.mp4"), "--quality", "original", "--caps", "web",
                                     "--output", out, "--json"])
            #expect(r.status == 3, "\(r.stderr.prefix(300))")
        }
    }

    @Test("damaged headers say so, not what libavformat's words suggest (out of memory, a missing feature); a stream naming no codec is unsupported, not a quality to try another of (found by fuzzing)")
    func damagedHeaderWords() throws {
        let whole = try Media.generated("cut-faststart-10s.mp4", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=10",
                                                                 "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                                                 "-c:a", "aac", "-movflags", "+faststart"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
        let dir = Media.scratch("cli-damaged-words")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The first time-to-sample table says it has 2^32 - 1 entries.
        let stts = try #require(Data(bytes).range(of: Data("stts".utf8))).lowerBound
        var counted = bytes
        for k in 8..<12 { counted[stts + k] = 0xff }
        let huge = dir.appendingPathComponent("stts.mp4").path
        try Data(counted).write(to: URL(fileURLWithPath: huge))
        let r = try Command.run(["probe", huge])
        #expect(r.status == 3 && r.stderr.contains("source_unreadable") && r.stderr.contains("damaged") && !r.stderr.contains("Cannot allocate memory"),
                "\(r.stderr)")
        // The picture's sample entry (not the brand in ftyp) renamed to a fourcc nobody knows.
        let stsd = try #require(Data(bytes).range(of: Data("stsd".utf8))).lowerBound
        let avc1 = try #require(Data(bytes).range(of: Data("avc1".utf8), in: stsd..<bytes.count)).lowerBound
        bytes.replaceSubrange(avc1..<(avc1 + 4), with: Array("zzzz".utf8))
        let unknown = dir.appendingPathComponent("unknown.mp4").path
        try Data(bytes).write(to: URL(fileURLWithPath: unknown))
        for quality in ["original", "1mbps"] {
            let run = try Command.run(["prepare", unknown, "--quality", quality, "--caps", "ios", "--output", dir.appendingPathComponent("out.mp4").path, "--json"])
            #expect(run.status == 3, "\(run.stdout)")
            let code = try Command.json(run)["error"]?["code"]?.string
            #expect(code == "source_unsupported", "\(quality): \(run.stdout)")
        }
    }

    @Test("presets lists the ladder and every named device")
    func presets() throws {
        let r = try Command.run(["presets", "--json"])
        let ok = try JSONValue.parse(Array(r.stdout.utf8))["ok"]
        #expect(r.status == 0 && ok == .bool(true))
        let text = r.stdout
        for name in ["ios", "apple-tv-4k", "android", "android-tv", "web"] { #expect(text.contains("\"\(name)\"")) }
        for q in ["20mbps", "10mbps", "5mbps", "2mbps", "1mbps"] { #expect(text.contains(q)) }
    }

    static let runs: [(String, String, String)] = Media.sharedFiles.flatMap { [($0, "original", "ios"), ($0, "2mbps", "web")] }

    @Test("every shared file prepares to a verified artifact for a device, or exits 3 with a reason", arguments: runs)
    func prepare(_ run: (String, String, String)) throws {
        let (name, quality, device) = run
        let dir = Media.scratch("cli")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", Media.shared(name), "--quality", quality, "--caps", device, "--output", out, "--json"])
        let j = try Command.json(r)
        switch r.status {
        case 0:
            #expect(j["ok"] == .bool(true))
            let o = try #require(j["output"])
            #expect(o["path"] == .string(out))
            let bytes = try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int
            #expect(o["bytes"]?.int == bytes)
            let probe = try FFprobe(out)
            if let v = o["video"], v != .null {
                #expect(probe.streams("video").first?["codec_name"]?.string == v["codec"]?.string)
                #expect(probe.streams("video").first?["width"]?.int == v["width"]?.int)
            }
            if let a = o["audio"], a != .null {
                // Remuxes and transcodes carry exactly one audio track; `original` is the file as it is.
                if j["plan"]?["delivery_format"] != .string("original") { #expect(probe.streams("audio").count == 1) }
                #expect(probe.streams("audio").first?["codec_name"]?.string == a["codec"]?.string)
            }
            #expect(j["plan"]?["artifact_key"]?.string?.count == 64)
            #expect(j["stats"]?["wall_seconds"] != nil)
            // The sha256 in the answer is the file's.
            let sha = try Run.command("sha256sum", [out]).stdout.prefix(64)
            #expect(o["sha256"]?.string == String(sha))
        case 3:
            #expect(j["ok"] == .bool(false))
            let code = j["error"]?["code"]?.string ?? ""
            #expect(["source_unreadable", "source_unsupported", "quality_unavailable", "source_corrupt", "plan_unsupported"].contains(code),
                    "\(name): \(code)")
            #expect(!FileManager.default.fileExists(atPath: out))
        default:
            Issue.record("\(name) \(quality) \(device): exit \(r.status): \(r.stdout) \(r.stderr)")
        }
        let left = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0 != "out.mp4" }
        #expect(left.isEmpty, "temporary files left: \(left)")
    }

    @Test("SIGINT during a transcode exits 5 and leaves nothing; progress arrives as JSON lines")
    func interrupt() throws {
        let source = try Media.generated("cli-long-720p.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
            "-t", "60", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        let (p, stdout, dir, line) = try Self.stopped(source, ["--quality", "1mbps"], label: "cli-int", by: SIGINT)
        defer { try? FileManager.default.removeItem(at: dir) }
        let progress = try JSONValue.parse(Array(line.utf8))
        #expect(progress["event"] == .string("progress"))
        #expect(progress["progress"]?["duration_seconds"]?.int == 60)
        #expect(p.terminationReason == .exit && p.terminationStatus == 5)
        let result = try JSONValue.parse(Array(stdout.fileHandleForReading.readDataToEndOfFile()))
        #expect(result["error"]?["code"] == .string("canceled"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    /// 60 s whose transcode reports progress twice a second for some seconds.
    static func progressingSource() throws -> String {
        // MPEG-2 video, which no device's caps take: re-encoded at every rung.
        try Media.generated("cli-60s-240p-mpeg2.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=440",
                                                       "-t", "60", "-c:v", "mpeg2video", "-c:a", "aac"])
    }

    /// `prepare` of `source` with `arguments` into a scratch folder of its own, progress as
    /// JSON lines, stopped by `signal` once its first progress line comes: the ended
    /// process, its standard output, the folder (the caller removes it) and that line.
    static func stopped(_ source: String, _ arguments: [String], label: String,
                        by signal: Int32) throws -> (process: Process, stdout: Pipe, dir: URL, line: String) {
        let dir = Media.scratch(label)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Command.binary)
        p.arguments = ["prepare", source] + arguments + ["--output", dir.appendingPathComponent("out.mp4").path, "--json", "--progress-json"]
        let stdout = Pipe(), stderr = Pipe()
        p.standardOutput = stdout
        p.standardError = stderr
        try p.run()
        var seen = Data()
        while !seen.contains(UInt8(ascii: "\n")) {
            let chunk = stderr.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        kill(p.processIdentifier, signal)
        p.waitUntilExit()
        return (p, stdout, dir, String(decoding: seen, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? "")
    }

    @Test("SIGHUP (the terminal or SSH session closed) and SIGXCPU (a CPU time limit) cancel as SIGINT does: exit 5, a canceled answer naming the signal, nothing left (they killed the command with its temporary output left and no answer)",
          arguments: [SIGHUP, SIGXCPU])
    func hangUp(_ signal: Int32) throws {
        let (p, stdout, dir, _) = try Self.stopped(try Self.progressingSource(), ["--quality", "2mbps", "--caps", "web"],
                                                   label: "cli-signal-\(signal)", by: signal)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(p.terminationReason == .exit && p.terminationStatus == 5)
        let result = try JSONValue.parse(Array(stdout.fileHandleForReading.readDataToEndOfFile()))
        #expect(result["error"]?["code"] == .string("canceled"))
        #expect(result["error"]?["message"]?.string?.contains(signal == SIGHUP ? "SIGHUP" : "SIGXCPU") == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test("a machine short of threads (a pids limit: the decoder's, filters' or x264's threads cannot start) fails as resource_limit, exit 4, worth retrying: the file is fine (it failed for good as source_unsupported, \"cannot be decoded\", or as internal_error from libx264's \"generic error\")",
          arguments: ["h264", "rawvideo"])
    func threadsRunOut(_ codec: String) throws {
        // H.264 above the rung (lossless), whose decoder starts a thread per core at open;
        // raw pictures, whose decoder starts none: the encoder's are the first wanted.
        let source = codec == "h264"
            ? try Media.generated("cli-4s-240p-h264-lossless.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "4",
                                                                    "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0"])
            : try Media.generated("cli-2s-160p-raw.mkv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "2",
                                                          "-c:v", "rawvideo", "-pix_fmt", "yuv420p"])
        let dir = Media.scratch("cli-threads-\(codec)")
        defer { try? FileManager.default.removeItem(at: dir) }
        // As nobody, whose processes and threads are counted against the limit (root's are not).
        try FileManager.default.setAttributes([.ownerAccountID: 65534], ofItemAtPath: dir.path)
        let r = try Run.command("/usr/bin/prlimit", ["--nproc=3", "--", "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                                      Command.binary, "prepare", source, "--quality", "1mbps", "--caps", "web",
                                                      "--output", dir.appendingPathComponent("out.mp4").path, "--json"])
        #expect(r.status == 4, "\(r.stdout) \(r.stderr.suffix(300))")
        let result = try JSONValue.parse(Array(r.stdout.utf8))
        #expect(result["error"]?["code"] == .string("resource_limit"))
        #expect(result["error"]?["retryable"] == .bool(true))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test("under an address-space limit (ulimit -v) anywhere from 200 MB to 900 MB a transcode is done or answers resource_limit, exit 4, nothing left: it crashed in libav or Swift, or said internal_error when libavfilter could not be mapped", .timeLimit(.minutes(3)))
    func addressSpaceLimits() throws {
        let source = try Media.generated("cli-4s-240p-h264-lossless.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "4",
                                                                           "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0"])
        let dir = Media.scratch("cli-address-space")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        var answers: Set<String> = []
        for megabytes in stride(from: 200, through: 900, by: 25) {
            let r = try Run.command("/usr/bin/prlimit", ["--as=\(megabytes << 20)", "--", Command.binary, "prepare", source,
                                                          "--quality", "1mbps", "--caps", "web", "--output", out, "--json"])
            // The dynamic loader's own refusal, before any of Kiln's code runs.
            if r.status == 127 && r.stderr.contains("error while loading shared libraries") { continue }
            let answer = try? JSONValue.parse(Array(r.stdout.utf8))
            if r.status == 0 {
                #expect(answer?["ok"] == .bool(true))
                try FileManager.default.removeItem(atPath: out)
            } else {
                #expect(r.status == 4 && answer?["error"]?["code"] == .string("resource_limit"),
                        "\(megabytes) MB: \(r.status) \(r.stdout) \(r.stderr.suffix(300))")
            }
            answers.insert(r.status == 0 ? "done" : "short")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "\(megabytes) MB: left behind")
        }
        #expect(answers == ["done", "short"], "the limits tried are all too low or all enough: \(answers)")
    }

    @Test("a progress reader that goes away (`--progress-json 2>&1 | head`) does not end the run: it completes, exit 0, its output whole (SIGPIPE killed it half-way, its temporary output left)")
    func progressReaderGone() throws {
        let source = try Self.progressingSource()
        let dir = Media.scratch("cli-sigpipe")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path, answer = dir.path + "/answer.json"
        // The shell's pipe to `head`, which reads one byte and leaves.
        let script = "'\(Command.binary)' prepare '\(source)' --quality 2mbps --caps web --output '\(out)' --json --progress-json"
            + " 2>&1 >'\(answer)' | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}"
        let r = try Run.command("bash", ["-c", script])
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        let result = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: answer))))
        #expect(result["ok"] == .bool(true))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["answer.json", "out.mp4"])
    }

    @Test("an answer that cannot reach standard output (a full disk, a closed stream) is exit 4, not success")
    func answerLost() throws {
        let source = Media.shared("sp_bear-640x360-ec3.mp4")
        let dir = Media.scratch("cli-answer-lost")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let script = "'\(Command.binary)' probe '\(source)' --json >/dev/full; echo $?;"
            + " '\(Command.binary)' prepare '\(source)' --quality original --caps ios --output '\(out)' --json >&- 2>/dev/null; echo $?"
        let r = try Run.command("bash", ["-c", script])
        #expect(r.stdout.split(separator: "\n") == ["4", "4"], "\(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains("io_error: The answer cannot be written to standard output (No space left on device)."), "\(r.stderr)")
        // The output itself is whole: asked again, the caller gets its answer.
        #expect(try Run.command("ffprobe", ["-v", "error", out]).status == 0)
    }
}

@Suite("memory does not grow with the file")
struct MemoryTests {
    /// The same picture and sound, 10 s and 80 s long.
    static func clip(_ seconds: Int) throws -> String {
        try Media.generated("mem-\(seconds)s.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", String(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "ac3", "-b:a", "192k"])
    }

    @Test("the media child loads neither Foundation nor Dispatch, nor the concurrency and regex runtimes (~5 MB of resident memory in every job)")
    func leanChild() throws {
        // What the dynamic loader would map for the binary, as ldd asks it.
        let r = try Run.command("LD_TRACE_LOADED_OBJECTS=1", [Command.binary])
        #expect(r.status == 0 && r.stdout.contains("libavformat"), "\(r.stdout) \(r.stderr)")
        for library in ["libFoundation", "lib_FoundationICU", "libdispatch", "libswiftDispatch", "libswift_Concurrency",
                        "libswift_StringProcessing", "libswift_RegexParser"] {
            #expect(!r.stdout.contains(library + "."), "prep-artifact loads \(library)")
        }
    }

    @Test("a remux's peak memory is the same for a file eight times longer")
    func remuxIsFlat() throws {
        let dir = Media.scratch("mem")
        defer { try? FileManager.default.removeItem(at: dir) }
        var peaks: [Int] = []
        for seconds in [10, 80] {
            let r = try Run.peakMemory(Command.binary, ["prepare", try Self.clip(seconds), "--quality", "original", "--caps", "web",
                                                          "--output", dir.appendingPathComponent("r\(seconds).mp4").path])
            #expect(r.status == 0)
            peaks.append(r.maxRSSKiB)
        }
        #expect(Double(peaks[1]) < Double(peaks[0]) * 1.15 + 4096, "peak RSS \(peaks[0]) KiB for 10 s, \(peaks[1]) KiB for 80 s")
    }

    /// 30 s of 720p at 16 Mb/s (noise keeps the encoder at its rate) with and without a
    /// SubRip track that says two lines, at 1 s and at 25 s.
    static func sparseSubtitles() throws -> (with: String, without: String) {
        let video = ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25,noise=alls=30:allf=t", "-f", "lavfi", "-i",
                     "sine=frequency=440:sample_rate=48000", "-t", "30", "-c:v", "libx264", "-preset", "ultrafast",
                     "-b:v", "16M", "-minrate", "16M", "-maxrate", "16M", "-bufsize", "8M", "-c:a", "aac"]
        let without = try Media.generated("sparse-subs-none.mkv", video)
        let with = try Media.generated("sparse-subs.mkv") { tmp in
            let srt = tmp + ".srt"
            defer { try? FileManager.default.removeItem(atPath: srt) }
            try "1\n00:00:01,000 --> 00:00:03,000\nHello\n\n2\n00:00:25,000 --> 00:00:27,000\nGoodbye\n"
                .write(toFile: srt, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", without, "-i", srt,
                                                "-map", "0", "-map", "1", "-c", "copy", "-c:s", "srt", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not add subtitles: \(r.stderr)") }
        }
        return (with, without)
    }

    @Test("a subtitle track silent for half a minute does not make a remux hold the pictures meanwhile")
    func sparseSubtitlesHoldNothing() throws {
        let (with, without) = try Self.sparseSubtitles()
        let dir = Media.scratch("mem-subs")
        defer { try? FileManager.default.removeItem(at: dir) }
        var peaks: [Int] = []
        for (name, source) in [("without", without), ("with", with)] {
            let r = try Run.peakMemory(Command.binary, ["prepare", source, "--quality", "original", "--caps", "web",
                                                          "--output", dir.appendingPathComponent("\(name).mp4").path])
            #expect(r.status == 0)
            peaks.append(r.maxRSSKiB)
        }
        // The muxer's interleaver waited up to 10 s (20 MB here) for the silent track's next cue.
        #expect(peaks[1] < peaks[0] + 8192, "peak RSS \(peaks[0]) KiB without subtitles, \(peaks[1]) KiB with")
    }

    @Test("a transcode's peak memory is bounded, not proportional to length")
    func transcodeIsBounded() throws {
        let dir = Media.scratch("mem-tx")
        defer { try? FileManager.default.removeItem(at: dir) }
        var peaks: [Int] = []
        for seconds in [10, 80] {
            let r = try Run.peakMemory(Command.binary, ["prepare", try Self.clip(seconds), "--quality", "1mbps", "--caps", "web",
                                                          "--output", dir.appendingPathComponent("t\(seconds).mp4").path])
            #expect(r.status == 0)
            peaks.append(r.maxRSSKiB)
        }
        #expect(Double(peaks[1]) < Double(peaks[0]) * 1.15 + 8192, "peak RSS \(peaks[0]) KiB for 10 s, \(peaks[1]) KiB for 80 s")
    }
}

@Suite("damaged inputs never crash or hang the command")
struct DamagedInputTests {
    /// Real files with bytes overwritten at random places (headers, index and payload alike),
    /// cut short, or with their middle zeroed: every run ends in 0 (a verified output,
    /// damage concealed or carried) or 3 (a permanent reason), never a signal or 4 (a
    /// transient failure the farm would retry on a file that fails the same way every
    /// time), and leaves no temporary file.
    @Test("corrupted copies of real files", arguments: ["sp_bear-640x360-ec3.mp4", "ax_sample_with_srt.mkv", "ax_bbb_2500ms.ts",
                                                       "sp_bear-640x360-hevc-hdr10.mp4", "mb_rotate-buck-bunny.mp4", "ax_sample.avi"])
    func corrupted(_ name: String) throws {
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Media.shared(name))))
        let dir = Media.scratch("damaged")
        defer { try? FileManager.default.removeItem(at: dir) }
        var rng = SplitMix(seed: UInt64(name.utf8.reduce(7) { $0 &* 31 &+ UInt64($1) }))
        for variant in 0..<8 {
            var bytes = original
            switch variant % 4 {
            case 0:   // scattered byte damage
                for _ in 0..<max(8, bytes.count / 2000) { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
            case 1:   // cut short somewhere
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count))))
            case 2:   // a zeroed stretch in the middle
                let start = Int(rng.next() % UInt64(bytes.count)), length = min(bytes.count - start, 4096 + Int(rng.next() % 65536))
                for i in start..<start + length { bytes[i] = 0 }
            default:  // damage concentrated in the first kilobytes (container headers)
                for _ in 0..<16 { bytes[Int(rng.next() % UInt64(min(bytes.count, 4096)))] ^= 0xff }
            }
            let ext = (name as NSString).pathExtension
            let source = dir.appendingPathComponent("v\(variant).\(ext)")
            try Data(bytes).write(to: source)
            let out = dir.appendingPathComponent("out\(variant).mp4")
            for quality in ["original", "1mbps"] {
                let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", "web", "--output", out.path, "--json"])
                #expect([0, 3].contains(r.status), "\(name) variant \(variant) \(quality): exit \(r.status) \(r.stdout.suffix(300))")
                if r.status != 0 { #expect(!FileManager.default.fileExists(atPath: out.path)) }
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".kiln-tmp-") }
                #expect(leftovers.isEmpty, "\(leftovers)")
                try? FileManager.default.removeItem(at: out)
            }
        }
    }
}

/// A damaged source is the source's fault, said at once: exit 3 and `source_corrupt`, which
/// the farm does not retry (exit 4, `verify_failed`, is for a write that went wrong). A few
/// damaged packets in a copied track are carried, counted, as a transcode conceals them.
@Suite("damage in the source is told from a failed write")
struct SourceDamageTests {
    @Test("an MPEG-TS whose pictures go on in HEVC on the PID the programme map gave H.264 is refused, for a copy and an encode, not delivered with half its pictures undecodable or missing (both exited 0)")
    func pictureCodecChangesOnOnePID() throws {
        let h264 = try Media.generated("switch-h264-4s.ts", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=4",
                                                            "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                                                            "-c:a", "aac", "-f", "mpegts"])
        let hevc = try Media.generated("switch-hevc-4s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                            "-f", "lavfi", "-i", "sine=f=880:duration=4", "-c:v", "libx265", "-preset", "ultrafast",
                                                            "-x265-params", "log-level=error", "-pix_fmt", "yuv420p", "-c:a", "aac",
                                                            "-output_ts_offset", "4", "-f", "mpegts"])
        let dir = Media.scratch("codec-switch-ts")
        defer { try? FileManager.default.removeItem(at: dir) }
        let joined = dir.appendingPathComponent("joined.ts")
        try (try Data(contentsOf: URL(fileURLWithPath: h264)) + (try Data(contentsOf: URL(fileURLWithPath: hevc)))).write(to: joined)
        // A copy (the remux to MP4), and an encode (a frame-rate limit forces one).
        let copied = try Self.expectSourceCorrupt(joined.path, quality: "original", in: dir, saying: "another codec")
        #expect(copied?["stage"] == .string("decode"), "the copy stopped and its encode refused the rest: \(String(describing: copied))")
        let limited = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["aac"],"max_frame_rate":12}"#
        try Self.expectSourceCorrupt(joined.path, quality: "1mbps", caps: limited, in: dir, saying: "gives no picture for its last")
        // Each part alone goes through.
        let out = dir.appendingPathComponent("alone.mp4").path
        #expect(try Command.run(["prepare", h264, "--quality", "original", "--caps", "ios", "--output", out]).status == 0)
    }

    @Test("a recording with 160 kB zeroed (no sync byte for more than libavformat's 64 kB resync) is read on past it: delivered, not a retryable io_error every time (found by fuzzing)", arguments: ["original", "1mbps"])
    func zeroedStretchInTS(_ quality: String) throws {
        let dir = Media.scratch("zeroed-ts-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Media.shared("ax_bbb_2500ms.ts"))))
        for i in 157_164..<316_890 { bytes[i] = 0 }
        let source = dir.appendingPathComponent("zeroed.ts")
        try Data(bytes).write(to: source)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", "web", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout)")
        #expect(abs((try FFprobe(out).duration("video") ?? 0) - 2.5) < 0.1)
        #expect(try FFprobe.packetCount(out, "v") > 40, "the pictures after the zeroed stretch are kept")
    }

    @Test("an MPEG-TS recording whose first sound PES has a damaged PTS (its frames hours on) starts its sound with its pictures: the sound went out hours after them (found by fuzzing)", arguments: ["original", "1mbps"])
    func damagedFirstSoundTime(_ quality: String) throws {
        // As a DVB recording is: MPEG-2 pictures and MPEG audio, whose first PES (two frames)
        // comes first in the file.
        let whole = try Media.generated("mpeg2-mp2-4s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                           "-f", "lavfi", "-i", "sine=duration=4:sample_rate=48000",
                                                           "-c:v", "mpeg2video", "-b:v", "2M", "-c:a", "mp2", "-b:a", "384k"])
        let dir = Media.scratch("first-pes-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "damaged.ts") { bytes throws in
            // The first TS packet of the sound's PID (0x101) that starts a PES.
            var found: Int? = nil
            for i in stride(from: 0, to: bytes.count - 188, by: 188) where found == nil {
                let pid: Int = Int(bytes[i + 1] & 0x1F) << 8 | Int(bytes[i + 2])
                if bytes[i] == 0x47 && bytes[i + 1] & 0x40 != 0 && pid == 0x101 { found = i }
            }
            let at: Int = try #require(found)
            let adaptation: Int = bytes[at + 3] & 0x20 != 0 ? 1 + Int(bytes[at + 4]) : 0
            let payload: Int = at + 4 + adaptation
            try #require(bytes[payload..<payload + 3] == [0, 0, 1] && bytes[payload + 7] & 0x80 != 0, "a PES with a PTS")
            // Bits 32 and 30 of its PTS set: 16.6 hours on, past half the 26.5-hour PTS clock, so
            // libavformat takes the file's length from the rest.
            try #require(bytes[payload + 9] & 0x0A == 0)
            bytes[payload + 9] |= 0x0A
        }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout.prefix(300))")
        let probe = try FFprobe(out)
        let video = probe.startTime("video") ?? -1, audio = probe.startTime("audio") ?? -1
        // The damaged PES's frames are left out: the sound starts at its next one's time.
        #expect(abs(video - audio) < 0.3, "pictures from \(video) s, sound from \(audio) s")
        #expect(abs(audio + (probe.duration("audio") ?? 0) - 4) < 0.2, "sound to \(audio + (probe.duration("audio") ?? 0)) s")
    }

    /// The PES headers (offset of their first flags byte) starting in TS packets of `pid`
    /// that carry a presentation time and, with `decodeTime`, a decode time too, in file order.
    static func timedPES(_ bytes: [UInt8], pid: Int, decodeTime: Bool = true) -> [Int] {
        stride(from: 0, to: bytes.count - 188 + 1, by: 188).compactMap { i in
            guard bytes[i] == 0x47, bytes[i + 1] & 0x40 != 0, Int(bytes[i + 1] & 0x1F) << 8 | Int(bytes[i + 2]) == pid else { return nil }
            let payload = i + 4 + (bytes[i + 3] & 0x20 != 0 ? 1 + Int(bytes[i + 4]) : 0)
            let flags: UInt8 = decodeTime ? 0xC0 : 0x80
            guard payload + 19 <= i + 188, bytes[payload..<payload + 3] == [0, 0, 1], bytes[payload + 7] & flags == flags else { return nil }
            return payload + 6
        }
    }

    /// Writes a 33-bit PES timestamp (`which`: 0 the presentation time, 1 the decode time)
    /// into the header whose flags begin at `flags`.
    static func setPESTime(_ bytes: inout [UInt8], flags: Int, _ which: Int, to ts: Int64) {
        let at = flags + 3 + 5 * which
        let prefix = bytes[at] & 0xF0
        bytes[at] = prefix | UInt8((ts >> 29) & 0x0E) | 1
        bytes[at + 1] = UInt8((ts >> 22) & 0xFF)
        bytes[at + 2] = UInt8((ts >> 14) & 0xFE) | 1
        bytes[at + 3] = UInt8((ts >> 7) & 0xFF)
        bytes[at + 4] = UInt8((ts << 1) & 0xFE) | 1
    }

    @Test("a recording whose pictures have a few damaged PES times (a decode time hours back beside a right presentation time; a presentation time hours on, then the next picture's decode time hours on) keeps all its pictures: a transcode had dropped every picture after the first such, 1.7 s of 10 kept, exit 0, and a remux of H.264 had been refused (found by a helper's MPEG-TS audit)",
          arguments: ["mpeg2video", "libx264"])
    func damagedPESTimes(_ codec: String) throws {
        let whole = try Media.generated("bframes-\(codec)-6s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                                                  "-f", "lavfi", "-i", "sine=duration=6:sample_rate=48000",
                                                                  "-c:v", codec, "-bf", "2", "-g", "12", "-b:v", "1M", "-c:a", "mp2", "-f", "mpegts"])
        let dir = Media.scratch("damaged-pes-times-\(codec)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "damaged.ts") { bytes throws in
            let pes = Self.timedPES(bytes, pid: 0x100)
            try #require(pes.count >= 40, "pictures with both times: \(pes.count)")
            let hours = Int64(90_000 * 3600)
            Self.setPESTime(&bytes, flags: pes[10], 1, to: 1)                          // decode time hours back
            Self.setPESTime(&bytes, flags: pes[25], 0, to: 5 * hours)                  // shown hours on
            Self.setPESTime(&bytes, flags: pes[26], 1, to: 7 * hours)                  // and the next decoded hours on
        }
        for (quality, caps) in [("original", "ios"), ("1mbps", "web")] {
            let out = dir.appendingPathComponent("out-\(quality).mp4").path
            let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", caps, "--output", out, "--json"])
            #expect(r.status == 0, "\(quality): \(r.stdout.prefix(300))")
            guard r.status == 0 else { continue }
            let probe = try FFprobe(out)
            #expect(abs((probe.duration("video") ?? 0) - 6) < 0.2, "\(quality): \(probe.duration("video") ?? 0) s of pictures")
            #expect(try FFprobe.packetCount(out, "v") >= 145, "\(quality): pictures kept")
        }
    }

    @Test("a recording cut after its first 100 TS packets, whose only sound decodes to frames of no rate, is source_corrupt (the sound is damaged), not source_unsupported (found by a helper's MPEG-TS audit)")
    func soundCutToNothing() throws {
        let whole = try Media.generated("hevc-ac3-51-8s.ts", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30:duration=8",
                                                             "-f", "lavfi", "-i", "sine=frequency=300:sample_rate=48000:duration=8",
                                                             "-filter_complex", "[1:a]pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0[a]",
                                                             "-map", "0:v", "-map", "[a]", "-c:v", "libx265", "-preset", "ultrafast",
                                                             "-x265-params", "log-level=error:keyint=30", "-pix_fmt", "yuv420p",
                                                             "-c:a", "ac3", "-b:a", "384k", "-f", "mpegts"])
        let dir = Media.scratch("sound-cut-to-nothing")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "cut.ts") { bytes in bytes = Array(bytes.prefix(100 * 188)) }
        let error = try Self.expectSourceCorrupt(source.path, quality: "original", caps: "android", in: dir, saying: "damaged")
        #expect(error?["message"]?.string?.contains("0 Hz") == true, "\(String(describing: error))")
    }

    /// 10 s of H.264 with B-frames and AAC in MPEG-TS, as a broadcast recording is.
    static func bframesRecording10s() throws -> String {
        try Media.generated("bframes-h264-aac-10s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                                       "-f", "lavfi", "-i", "sine=duration=10:sample_rate=48000",
                                                       "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-g", "50",
                                                       "-c:a", "aac", "-f", "mpegts"])
    }

    @Test("a recording whose pictures all have one time (every video PES given the same PTS and DTS) is refused as damaged timing: its copy had put 250 pictures in 43 ms, a 10 s film sent as a still, exit 0 (found by a helper's MPEG-TS audit)")
    func picturesTimedAlike() throws {
        let whole = try Self.bframesRecording10s()
        let dir = Media.scratch("pictures-timed-alike")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "alike.ts") { bytes throws in
            let pes = Self.timedPES(bytes, pid: 0x100, decodeTime: false)
            try #require(pes.count >= 200, "pictures timed: \(pes.count)")
            for flags in pes {
                Self.setPESTime(&bytes, flags: flags, 0, to: 126_000)
                if bytes[flags + 1] & 0x40 != 0 { Self.setPESTime(&bytes, flags: flags, 1, to: 126_000) }
            }
        }
        #expect(try Command.probed(source.path)["timing_damage"]?.string?.contains("stand still") == true)
        try SourceDamageTests.expectSourceCorrupt(source.path, quality: "original", caps: "android", in: dir, saying: "stand still")
    }

    @Test("a recording that starts writing again from its middle (its TS packets to three quarters, then from half on: the packet being written cut) leaves out the stretch written twice from both pictures and sound: its pictures' copy had been kept, moved on 2.5 s, and the sound left 2.5 s ahead of them (found by a helper's MPEG-TS audit)")
    func recordingWrittenAgain() throws {
        let whole = try Self.bframesRecording10s()
        let dir = Media.scratch("written-again")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "again.ts") { bytes in
            let packets = bytes.count / 188
            bytes = Array(bytes[0..<(3 * packets / 4) * 188] + bytes[(packets / 2) * 188..<packets * 188])
        }
        try Command.prepare(source.path, quality: "original", caps: "android", scratch: "written-again-out") { r, out in
            #expect(r.status == 0, "\(r.stdout.prefix(300))")
            let probe = try FFprobe(out)
            let video = probe.duration("video") ?? 0, audio = probe.duration("audio") ?? 0
            #expect(abs(video - 10) < 0.2 && abs(audio - 10) < 0.2, "\(video) s of pictures, \(audio) s of sound")
            // The whole packet the restart cut comes again at the cut one's time: left out, no
            // two pictures share a time.
            let times = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts", "-of", "csv=p=0", out])
                .stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            #expect(Set(times).count == times.count, "\(times.count - Set(times).count) pictures share a time")
        }
    }

    /// A copy of the recording at `path` in `dir` whose video PES (PID 0x100) carry no
    /// times: the time flags of each that had one (at least `count`) cleared.
    static func untimedPictures(_ path: String, in dir: URL, atLeast count: Int) throws -> URL {
        try damagedCopy(ofFile: path, in: dir, as: "untimed.ts") { bytes throws in
            let pes = Self.timedPES(bytes, pid: 0x100, decodeTime: false)
            try #require(pes.count >= count, "pictures timed: \(pes.count)")
            for flags in pes { bytes[flags + 1] &= 0x3F }
        }
    }

    @Test("a recording whose video PES carry no times at all (their flags cleared) shows its B-frames in order, copied or re-encoded: its copy had placed each picture a frame after the last in decode order, so players showed pictures back and forth (found by a helper's MPEG-TS audit)")
    func picturesWithoutTimes() throws {
        let whole = try Self.bframesRecording10s()
        let dir = Media.scratch("pictures-without-times")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.untimedPictures(whole, in: dir, atLeast: 200)
        for (quality, caps) in [("original", "android"), ("1mbps", "web")] {
            try Command.prepare(source.path, quality: quality, caps: caps, scratch: "pictures-without-times-\(quality)") { r, out in
                #expect(r.status == 0, "\(quality): \(r.stdout.prefix(300))")
                // In the order the decoder gives pictures (display order), their times rise.
                let times = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts", "-of", "csv=p=0", out])
                    .stdout.split(separator: "\n").compactMap { Int64($0.trimmingCharacters(in: CharacterSet(charactersIn: ", "))) }
                #expect(abs(times.count - 250) <= 1, "\(quality): \(times.count) pictures")
                let back = zip(times, times.dropFirst()).filter { $1 <= $0 }.count
                #expect(back == 0, "\(quality): \(back) pictures shown before the one decoded ahead of them")
                let probe = try FFprobe(out)
                #expect(abs((probe.startTime("video") ?? 9) - (probe.startTime("audio") ?? 0)) < 0.1)
            }
        }
    }

    @Test("a recording whose pictures go scrambled 5 s in (its pay-TV decryption lost) while the sound stays clear is refused once the sound is 30 s past the last picture, MPEG-2 re-encoded or H.264 copied: libavformat's parser had held the rest of the file in memory, and the output had 5 s of pictures beside 45 s of sound, exit 0",
          arguments: ["mpeg2video", "libx264"])
    func picturesScrambled(_ codec: String) throws {
        let whole = try Media.generated("\(codec)-mp2-45s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=45",
                                                                "-f", "lavfi", "-i", "sine=duration=45:sample_rate=48000",
                                                                "-c:v", codec, "-g", "25", "-b:v", "1M", "-c:a", "mp2", "-f", "mpegts"])
        let dir = Media.scratch("pictures-scrambled-\(codec)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "scrambled.ts") { bytes in
            // Every video TS packet from the ninth of the file on: scrambled (its control bits
            // set), its payload past any PES header noise.
            var noise: UInt64 = 0x9E3779B97F4A7C15
            for at in stride(from: bytes.count / 9 / 188 * 188, to: bytes.count - 187, by: 188) {
                guard bytes[at] == 0x47, Int(bytes[at + 1] & 0x1F) << 8 | Int(bytes[at + 2]) == 0x100, bytes[at + 3] & 0x10 != 0 else { continue }
                var payload = at + 4 + (bytes[at + 3] & 0x20 != 0 ? 1 + Int(bytes[at + 4]) : 0)
                if bytes[at + 1] & 0x40 != 0, payload + 9 <= at + 188, bytes[payload..<payload + 3] == [0, 0, 1] { payload += 9 + Int(bytes[payload + 8]) }
                bytes[at + 3] |= 0x80
                for i in payload..<min(at + 188, bytes.count) {
                    noise = noise &* 6364136223846793005 &+ 1442695040888963407
                    bytes[i] = UInt8(truncatingIfNeeded: noise >> 33)
                }
            }
        }
        let error = try SourceDamageTests.expectSourceCorrupt(source.path, quality: "original", caps: "android", in: dir, saying: "pictures stop")
        #expect(error?["stage"]?.string == "demux", "\(String(describing: error))")
    }

    @Test("a 45 s recording whose video PES carry no times at all is not taken for pictures that stop: its pictures, timed later from their order counts, come all along (found by a helper's regression audit)")
    func untimedPicturesGoOn() throws {
        let whole = try Media.generated("libx264-mp2-45s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=45",
                                                              "-f", "lavfi", "-i", "sine=duration=45:sample_rate=48000",
                                                              "-c:v", "libx264", "-g", "25", "-b:v", "1M", "-c:a", "mp2", "-f", "mpegts"])
        let dir = Media.scratch("untimed-pictures-go-on")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.untimedPictures(whole, in: dir, atLeast: 1000)
        try Command.prepare(source.path, quality: "original", caps: "android", scratch: "untimed-pictures-go-on-out") { r, out in
            #expect(r.status == 0, "\(r.stdout.prefix(300))")
            let pictures = try FFprobe(out).duration("video") ?? 0
            #expect(abs(pictures - 45) < 0.5, "\(pictures) s of pictures")
        }
    }

    @Test("a recording whose video PID goes on in H.264 after 6 s of MPEG-2 is refused with a reason once its sound is 30 s past the last picture: it had been delivered with 6 s of pictures beside 46 s of sound, exit 0, or failed as canceled (`lookStoppedInsideHeldBytes`)")
    func picturesChangeCodec() throws {
        // 40 MB of H.264 after the change: the probe's look at the end stops at its ceiling
        // inside what the MPEG-2 parser holds.
        let source = try Media.mpeg2ThenH264()
        let dir = Media.scratch("pictures-change-codec")
        defer { try? FileManager.default.removeItem(at: dir) }
        try SourceDamageTests.expectSourceCorrupt(source, quality: "original", caps: "android", in: dir, saying: "pictures stop")
    }

    @Test("a Matroska file whose first picture block is timed 30 s late keeps that keyframe, just before the next picture: left out, no picture after it decoded (found by fuzzing)")
    func firstKeyframeTimedLate() throws {
        let whole = try Media.generated("first-block-4s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                              "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast",
                                                              "-g", "250", "-c:a", "aac"])
        let dir = Media.scratch("first-block")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: whole, in: dir, as: "late.mkv") { bytes throws in
            // The first SimpleBlock (A3) of track 1, the pictures, after the first Cluster: its
            // 16-bit time from the cluster's set to 30,000 ms.
            var cluster: Int? = nil
            for i in 0..<bytes.count - 4 where cluster == nil && bytes[i..<i + 4] == [0x1F, 0x43, 0xB6, 0x75] { cluster = i }
            var block: Int? = nil
            for i in try #require(cluster)..<bytes.count - 12 where block == nil && bytes[i] == 0xA3 {
                let length = bytes[i + 1].leadingZeroBitCount + 1
                if length <= 8, bytes[i + 1 + length] == 0x81, bytes[i + 4 + length] & 0x80 != 0 { block = i + 2 + length }
            }
            let at = try #require(block)
            bytes[at] = 0x75
            bytes[at + 1] = 0x30
        }
        let late = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time", "-of", "csv=p=0", source.path])
        #expect(late.stdout.split(whereSeparator: \.isNewline).first.flatMap { Double($0) }.map { $0 > 29 } == true, "the source is what the test needs")
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", "1mbps", "--caps", "web", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout.prefix(300))")
        #expect(try FFprobe.packetCount(out, "v") >= 99, "every picture decodes and is kept")
        let decode = try Run.command("ffmpeg", ["-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
    }

    @Test("sound re-encoded from a 96 kHz or 88.2 kHz master comes out at 48 or 44.1 kHz, the most every AAC decoder must take")
    func highSampleRates() throws {
        for rate in [96000, 88200] {
            let source = try Media.generated("pcm-\(rate).mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                                                 "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=\(rate)", "-t", "3",
                                                                 "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s24le"])
            try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-\(rate)") { r, out in
                #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
                let audio = try #require(try FFprobe(out).streams("audio").first)
                #expect(audio["codec_name"]?.string == "aac" && audio["sample_rate"]?.string == (rate == 96000 ? "48000" : "44100"), "\(audio)")
                #expect(abs((try FFprobe(out).duration("audio") ?? 0) - 3) < 0.1)
            }
        }
    }

    static func source() throws -> String {
        try Media.generated("damage-src-10s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25",
                                                   "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "10",
                                                   "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac", "-b:a", "128k"])
    }

    /// Prepares `source` into `dir` and expects exit 3, a `source_corrupt` error that is not
    /// retried, whose message says `words`, and no output. Returns the error.
    @discardableResult
    static func expectSourceCorrupt(_ source: String, quality: String = "original", caps: String = "ios", in dir: URL,
                                    saying words: String) throws -> JSONValue? {
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", quality, "--caps", caps, "--output", out, "--json"])
        let error = try Command.json(r)["error"]
        #expect(r.status == 3, "\(quality): \(r.stdout) \(r.stderr.suffix(300))")
        #expect(error?["code"] == .string("source_corrupt") && error?["retryable"] == .bool(false), "\(quality): \(r.stdout)")
        #expect(error?["message"]?.string?.contains(words) == true, "\(quality): \(r.stdout)")
        #expect(!FileManager.default.fileExists(atPath: out), "\(quality): nothing written")
        return error
    }

    @Test("a Matroska file whose sound's header (CodecPrivate) is zeroed, AAC or Opus, is refused as source_corrupt for a device that plays it as it is: it had gone to Android as it was, a file no player opens; iOS's remux says the same (found by a helper's Matroska audit)",
          arguments: [("mkv", "aac"), ("webm", "libopus")])
    func soundHeaderZeroed(_ container: String, _ codec: String) throws {
        let whole = try Media.generated("sound-header-\(codec)-3s.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                                                             "-f", "lavfi", "-i", "sine=duration=3:sample_rate=48000",
                                                                             "-c:v", container == "webm" ? "libvpx-vp9" : "libx264",
                                                                             "-c:a", codec])
        let dir = Media.scratch("sound-header-zeroed-\(codec)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "zeroed.\(container)") { bytes throws in
            // The sound's CodecPrivate (63A2): AAC's 2-byte AudioSpecificConfig, or Opus's OpusHead.
            var at = 0, found = false
            while let p = firstOffset(of: [0x63, 0xA2], in: bytes, from: at) {
                let size = Int(bytes[p + 2] & 0x7F)
                if bytes[p + 2] & 0x80 != 0, codec == "aac" ? size <= 5 : bytes[p + 3..<p + 11] == Array("OpusHead".utf8)[...] {
                    for i in p + 3..<p + 3 + size { bytes[i] = 0 }
                    found = true
                    break
                }
                at = p + 2
            }
            try #require(found, "no sound CodecPrivate")
        }
        for caps in ["android", "ios"] {
            try Self.expectSourceCorrupt(damaged.path, quality: "original", caps: caps, in: dir, saying: "header is damaged")
        }
    }

    @Test("a file that would go as it is but whose planned sound gives nothing at its start (an MP4 sound track whose sample size box was lost) is refused as source_corrupt, nothing written: it went out as it was, exit 0, with sound no player reads; the same file whole goes as it is")
    func unreadableOriginal() throws {
        let whole = try Media.generated("original-h264-aac-4s.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-f", "lavfi",
                                                                    "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
                                                                    "-movflags", "+faststart"])
        let dir = Media.scratch("cli-unreadable-original")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "no-sound-sizes.mp4") { bytes throws in
            // The second track's (the sound's) stsz says it is 0 bytes long.
            let found = typeOffsets(of: "stsz", in: bytes)
            try #require(found.count == 2)
            bytes.replaceSubrange(found[1] - 4..<found[1], with: [0, 0, 0, 0])
        }.path
        let packets = try Run.command("ffprobe", ["-v", "error", "-count_packets", "-select_streams", "a", "-show_entries", "stream=nb_read_packets",
                                                  "-of", "csv=p=0", damaged]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(packets == "0" || packets == "N/A" || packets.isEmpty, "the source is what the test needs: \(packets)")
        try Self.expectSourceCorrupt(damaged, quality: "original", caps: "ios", in: dir, saying: "audio stream 1 gives nothing to play")
        try Command.prepare(whole, quality: "original", caps: "ios", scratch: "cli-readable-original") { r, _ in
            #expect(r.status == 0 && (try? Command.json(r))?["plan"]?["delivery_format"] == .string("original"), "\(r.stdout.prefix(400))")
        }
    }

    @Test("an MP4, fragmented or not, whose sound's media header gives no timescale (mdhd says 0: libavformat counts one tick a second) is refused as source_corrupt for any plan that keeps the sound: a fragmented film's sound was remuxed 26 hours long, exit 0")
    func soundWithoutTimescale() throws {
        let dir = Media.scratch("cli-no-timescale")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, flags) in [("fragmented", "frag_keyframe+empty_moov"), ("whole", "+faststart")] {
            let source = try soundAndPictures3s(name, movflags: flags)
            let damaged = try damagedCopy(ofFile: source, in: dir, as: "\(name)-mdhd-timescale-0.mp4") { bytes throws in
                // The second track's (the sound's) mdhd, version 0: after its size, type,
                // version and flags, creation and modification times comes the timescale.
                let found = typeOffsets(of: "mdhd", in: bytes)
                try #require(found.count == 2 && bytes[found[1] + 4] == 0)
                bytes.replaceSubrange(found[1] + 16..<found[1] + 20, with: [0, 0, 0, 0])
            }.path
            for (quality, caps) in [("original", "ios"), ("2mbps", "android")] {
                try Self.expectSourceCorrupt(damaged, quality: quality, caps: caps, in: dir, saying: "stream 1's media header gives it no usable timescale")
            }
        }
    }

    @Test("a Matroska file whose track list's size is damaged lists no stream at all and is source_corrupt (it was quality_unavailable, as if another rung or device could play it)")
    func noStreamsAtAll() throws {
        let whole = try matroska2s()
        let dir = Media.scratch("cli-no-streams")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "tracks-size-1.mkv") { bytes throws in
            // Tracks' size, a variable-length integer, says 1 byte.
            let at = try #require(matroskaTracks(in: bytes)) + 4
            let length = bytes[at].leadingZeroBitCount + 1
            try #require(length <= 8)
            bytes.replaceSubrange(at..<at + length, with: [UInt8(0x80 >> (length - 1))] + [UInt8](repeating: 0, count: length - 1))
            bytes[at + length - 1] |= 1
        }.path
        #expect(try Command.probedStreams(damaged).isEmpty)
        for (quality, caps) in [("original", "ios"), ("2mbps", "android")] {
            try Self.expectSourceCorrupt(damaged, quality: quality, caps: caps, in: dir, saying: "no stream at all")
        }
    }

    @Test("a Matroska film whose video track's type byte is damaged, whose sound track lost its CodecID, or whose video track's number is 0 is source_corrupt (libavformat passed the track over, or read none of its blocks, and the film went out without it, exit 0)")
    func videoTrackTypeDamaged() throws {
        let whole = try matroska2s()
        let dir = Media.scratch("cli-track-type")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "track-type-9.mkv") { bytes throws in
            // The first TrackEntry (AE) after Tracks (16 54 AE 6B), the video's: its TrackType
            // (83, one byte: 81) 1 becomes 9, a type Matroska does not define.
            let tracks = try #require(matroskaTracks(in: bytes))
            let type = try #require(firstOffset(of: [0x83, 0x81, 0x01], in: bytes, from: tracks))
            bytes[type + 2] = 9
        }.path
        #expect(try FFprobe(damaged).streams.compactMap { $0["codec_type"]?.string } == ["audio"])
        for (quality, caps) in [("original", "ios"), ("2mbps", "android")] {
            try Self.expectSourceCorrupt(damaged, quality: quality, caps: caps, in: dir, saying: "track 1 holds pictures (V_MPEG4/ISO/AVC) but its type says 9")
        }
        // The sound's CodecID (86) made an element of no meaning (87): libavformat passes the
        // entry over, and the film had gone out without its sound, as it was to Android.
        let noCodec = try damagedCopy(ofFile: whole, in: dir, as: "sound-no-codec.mkv") { bytes throws in
            // (Its size, 85, then the five letters.)
            let at = try #require(firstOffset(of: [0x86, 0x85] + Array("A_AAC".utf8), in: bytes))
            bytes[at] = 0x87
        }.path
        #expect(try FFprobe(noCodec).streams.compactMap { $0["codec_type"]?.string } == ["video"])
        // The video's TrackNumber (D7 81 01) 0: no block names the track, and its stream has
        // no packet; Android had been sent the file as it was.
        let numberless = try damagedCopy(ofFile: whole, in: dir, as: "track-number-0.mkv") { bytes throws in
            let tracks = try #require(matroskaTracks(in: bytes))
            let number = try #require(firstOffset(of: [0xD7, 0x81, 0x01], in: bytes, from: tracks))
            bytes[number + 2] = 0
        }.path
        for (file, words) in [(noCodec, "track 2, of sound, names no codec"), (numberless, "a track of pictures has no track number (0)")] {
            for (quality, caps) in [("original", "ios"), ("original", "android")] {
                try Self.expectSourceCorrupt(file, quality: quality, caps: caps, in: dir, saying: words)
            }
        }
    }

    @Test("a Matroska film whose TimestampScale is damaged (its size one byte more: times 256 times too long; its value 1: a million times too short) is source_corrupt, its sound timed at a pace its frames deny: a 2 s film had gone out 8.6 minutes long, exit 0; where the muxer meets the stretch first it is source_corrupt too, not a retryable io_error")
    func timestampScaleDamaged() throws {
        let whole = try matroska2s()
        let hevc = try Media.generated("hevc-ac3-4s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-f", "lavfi",
                                                          "-i", "sine=frequency=440:sample_rate=48000:duration=4", "-c:v", "libx265", "-preset", "ultrafast",
                                                          "-x265-params", "log-level=error", "-g", "25", "-pix_fmt", "yuv420p", "-c:a", "ac3", "-b:a", "128k", "-ac", "2"])
        let dir = Media.scratch("cli-timestamp-scale")
        defer { try? FileManager.default.removeItem(at: dir) }
        /// TimestampScale (2A D7 B1, its size 83: three bytes, 1,000,000) changed by `change`.
        func damaged(_ file: String, _ name: String, _ change: @escaping (inout [UInt8], Int) -> Void) throws -> String {
            try damagedCopy(ofFile: file, in: dir, as: name) { bytes throws in
                let at = try #require(firstOffset(of: [0x2A, 0xD7, 0xB1, 0x83, 0x0F, 0x42, 0x40], in: bytes))
                change(&bytes, at)
            }.path
        }
        let stretched = try damaged(whole, "scale-size.mkv") { bytes, at in bytes[at + 3] = 0x84 }
        let shrunk = try damaged(whole, "scale-1.mkv") { bytes, at in bytes.replaceSubrange(at + 4..<at + 7, with: [0, 0, 1]) }
        for (file, words) in [(stretched, "times run 254 times as long as its frames last"), (shrunk, "times shorter than its frames last")] {
            for (quality, caps) in [("original", "ios"), ("original", "android"), ("2mbps", "android")] {
                try Self.expectSourceCorrupt(file, quality: quality, caps: caps, in: dir, saying: words)
            }
        }
        let muxed = try damaged(hevc, "hevc-scale-size.mkv") { bytes, at in bytes[at + 3] = 0x84 }
        try Self.expectSourceCorrupt(muxed, quality: "original", caps: "ios", in: dir, saying: "source")
    }

    @Test("a file cut short (its header still declaring the whole length) exits 3 with source_corrupt, for a remux and a transcode")
    func cutShort() throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try Self.source()))
        let dir = Media.scratch("cut-short")
        defer { try? FileManager.default.removeItem(at: dir) }
        let cut = dir.appendingPathComponent("cut.mkv")
        try bytes.prefix(bytes.count / 2).write(to: cut)
        for (quality, caps) in [("original", "ios"), ("1mbps", "web")] {
            try Self.expectSourceCorrupt(cut.path, quality: quality, caps: caps, in: dir, saying: "cut short")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["cut.mkv"], "nothing written")
        }
    }

    @Test("an AVI with a stretch of its data repeated runs past its declared length: exit 3, source_corrupt")
    func runsPast() throws {
        // 57 KB of the file's own frames written again further on (found by fuzzing): the
        // AVI demuxer counts them as more frames.
        let dir = Media.scratch("runs-past")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(of: "ax_sample.avi", bytes: 334_534, in: dir, as: "repeated.avi") {
            $0 = Array($0[..<263_474]) + Array($0[120_735..<179_413]) + Array($0[263_474...])
        }
        try Self.expectSourceCorrupt(source.path, in: dir, saying: "past")
    }

    @Test("an AVI whose repeated frames end half a second and one frame past its declared length: exit 3, source_corrupt (the last packet's start was within the tolerance, so it was verify_failed, retried in vain)")
    func runsPastByItsLastFrame() throws {
        let source = try Media.generated("h264-intra-10s.avi", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                                               "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-bf", "0"])
        let dir = Media.scratch("runs-past-frame")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: source, in: dir, as: "repeated.avi") { bytes throws in
            // The frames' chunks in the movi list, each an id, a little-endian size and the data.
            var chunks: [Int] = []
            var at = try #require(bytes.firstRange(of: Array("movi".utf8))).upperBound
            while at + 8 <= bytes.count, bytes[at..<at + 4].elementsEqual("00dc".utf8) {
                chunks.append(at)
                let size = bytes[at + 4..<at + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
                at += 8 + size + (size & 1)
            }
            try #require(chunks.count == 250, "\(chunks.count) frames")
            // 13 frames (0.52 s at 25 fps) written again: the demuxer counts 263.
            bytes.insert(contentsOf: bytes[chunks[100]..<chunks[113]], at: chunks[113])
        }
        try Self.expectSourceCorrupt(damaged.path, in: dir, saying: "past")
    }

    @Test("a video-only recording cut in the middle of a 4-second GOP (its first keyframe 1.4 s in) is remuxed with its pictures starting at that keyframe, and says so (video_starts_late), as one with sound is (it was source_corrupt, and before that verify_failed, retried in vain)")
    func lateFirstKeyframe() throws {
        let whole = try Media.generated("h264-gop4s-8s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                                             "-c:v", "libx264", "-preset", "ultrafast", "-g", "100",
                                                             "-keyint_min", "100", "-sc_threshold", "0"])
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let dir = Media.scratch("late-keyframe")
        defer { try? FileManager.default.removeItem(at: dir) }
        let cut = dir.appendingPathComponent("cut.ts")
        // 30 % in, on a TS packet boundary: 2.4 s into the first GOP.
        try bytes.suffix(from: bytes.count * 3 / 10 / 188 * 188).write(to: cut)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", cut.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout)")
        let adjustments = "\(try Command.json(r)["stats"]?["adjustments"] ?? .null)"
        #expect(adjustments.contains("video_starts_late") && adjustments.contains("no keyframe in its first 1."), "\(adjustments)")
        // (1.44 s from the first packet's time, the first pictures in display order.)
        let start = try #require(try FFprobe(out).startTime("video"))
        #expect(start > 1.3 && start < 1.7, "the pictures start at the first keyframe: \(start) s")
        #expect(try FFprobe.decodeErrors(out).isEmpty)
    }

    /// Four seconds of 320x240 H.264 without B-frames and `audio` in AVI, with one byte of it
    /// changed at `offset(bytes)`.
    static func damagedShortAVI(audio: String, in dir: URL, at offset: ([UInt8]) throws -> Int, to value: UInt8) throws -> String {
        try damagedAVI("h264-\(audio)-4s.avi", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                               "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=4",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-bf", "0", "-g", "25",
                                               "-c:a", audio, "-shortest"], in: dir, at: offset, to: value)
    }

    /// An AVI generated for these tests with one byte of it changed at `offset(bytes)`.
    static func damagedAVI(_ name: String, _ ffmpegArgs: [String], in dir: URL,
                           at offset: ([UInt8]) throws -> Int, to value: UInt8) throws -> String {
        try damagedCopy(ofFile: try Media.generated(name, ffmpegArgs), in: dir, as: "damaged-" + name) { $0[try offset($0)] = value }.path
    }

    /// H.264 and AC-3 in AVI, one x264 thread (the same bytes on every run, so the same
    /// chunk is damaged), with byte `sizeByte` of the size of audio chunk `audioChunk` in
    /// its index (idx1's entries: chunk id, flags, offset, size, little-endian) set to `value`.
    static func hrdAVI(in dir: URL, audioChunk: Int, sizeByte: Int, to value: UInt8) throws -> String {
        try damagedAVI("h264-ac3-hrd-8s.avi", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=8",
                                               "-f", "lavfi", "-i", "sine=duration=8", "-c:a", "ac3", "-shortest",
                                               "-c:v", "libx264", "-threads", "1", "-bf", "3", "-b:v", "1M", "-maxrate", "1M",
                                               "-bufsize", "2M", "-x264-params", "nal-hrd=cbr", "-g", "50"], in: dir, at: { bytes in
            let index = try #require(bytes.lastRange(of: Array("idx1".utf8))).upperBound + 4
            let audio = stride(from: index, to: bytes.count - 15, by: 16).filter { bytes[$0..<$0 + 4].elementsEqual("01wb".utf8) }
            return try #require(audio.dropFirst(audioChunk).first) + 12 + sizeByte
        }, to: value)
    }

    @Test("an AVI whose index makes one AC-3 chunk 1.3 GB puts the audio after it hours on: the re-encode follows on instead of filling the gap with silence (it filled the FIFO with 1.6 GB, then failed as internal_error)")
    func audioTimePastTheEnd() throws {
        let dir = Media.scratch("audio-past-end")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.hrdAVI(in: dir, audioChunk: 5, sizeByte: 3, to: 0x4d)
        let out = dir.appendingPathComponent("out.mp4").path
        // Against the same job on the undamaged file (a spawned child's peak counts the
        // parent's memory it shared until exec, so only the two together say anything).
        let whole = try Media.generated("h264-ac3-hrd-8s.avi") { _ in throw TestFailure("generated by hrdAVI") }
        let baseline = try Run.peakMemory(Command.binary, ["prepare", whole, "--quality", "original", "--caps", "android",
                                                           "--output", dir.appendingPathComponent("whole.mp4").path])
        let r = try Run.peakMemory(Command.binary, ["prepare", source, "--quality", "original", "--caps", "android", "--output", out])
        #expect(baseline.status == 0 && r.status == 0)
        #expect(Double(r.maxRSSKiB) < Double(baseline.maxRSSKiB) * 1.15 + 8192,
                "peak \(r.maxRSSKiB) KiB, \(baseline.maxRSSKiB) KiB for the whole file")
        let audio = try #require(try FFprobe(out).duration("audio"))
        #expect(abs(audio - 8) < 0.2, "\(audio) s")
    }

    @Test("an AVI whose audio stream header declares a year is refused at once as source_corrupt, for a remux and a transcode (the remux worked toward that length: a damaged audio time within it was filled with days of silence, a job that never ended)")
    func implausibleDuration() throws {
        let dir = Media.scratch("implausible-duration")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.damagedShortAVI(audio: "ac3", in: dir, at: { bytes in
            // The audio's strh: its dwLength (after type, handler, flags, priority, language,
            // initial frames, scale, rate and start) gets a high byte.
            let video = try #require(bytes.firstRange(of: Array("strh".utf8)))
            let audio = try #require(bytes[video.upperBound...].firstRange(of: Array("strh".utf8)))
            return audio.upperBound + 4 + 32 + 3
        }, to: 0x40)
        for (quality, caps) in [("original", "web"), ("1mbps", "ios")] {
            let error = try Self.expectSourceCorrupt(source, quality: quality, caps: caps, in: dir, saying: "its header's duration is damaged")
            #expect(error?["stage"] == .string("probe"), "\(quality)")
        }
    }

    @Test("FLAC and AIFF cut in half (a rip or download that did not finish; their headers count the samples) are refused by the probe as cut short, also where the file would go as it is (it had, its player stopping at the cut); whole, they go as they are",
          arguments: ["flac", "aiff"])
    func soundCutShort(_ format: String) throws {
        let whole = try Media.generated("tone-20s.\(format)", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=20", "-ac", "2"])
        let dir = Media.scratch("cut-short-\(format)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let half = dir.appendingPathComponent("half.\(format)").path
        try bytes.prefix(bytes.count / 2).write(to: URL(fileURLWithPath: half))
        let caps = #"{"codecs_audio": ["flac", "pcm_s16be", "pcm_s16le"], "containers": ["flac", "aiff"]}"#
        let kept = try Command.run(["plan", whole, "--quality", "original", "--caps", caps, "--json"])
        #expect(kept.status == 0 && kept.stdout.contains("\"delivery_format\" : \"original\""), "\(kept.stdout.prefix(400))")
        let probe = try Command.run(["probe", half, "--json"])
        #expect(probe.status == 3 && probe.stdout.contains("of the 20.00 s its header counts: the file is cut short"), "\(probe.stdout)")
        _ = try Self.expectSourceCorrupt(half, quality: "original", caps: caps, in: dir, saying: "the file is cut short")
    }

    @Test("an audiobook (AAC in MP4) whose header declares 47 hours and lists no sample sizes (its tables damaged, its sound 5 s) is refused by the probe as source_corrupt, also where it would go as it is: it had gone to iOS as it was, exit 0, saying 47 hours, a file no player plays")
    func implausibleDurationSentAsIs() throws {
        let dir = Media.scratch("implausible-as-is")
        defer { try? FileManager.default.removeItem(at: dir) }
        let book = try Media.generated("book-aac-22k-5s.m4a", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=22050:duration=5",
                                                               "-c:a", "aac", "-b:a", "64k"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: book)))
        func put(_ box: String, _ offset: Int, _ value: UInt32) throws {
            let at = try #require(bytes.firstRange(of: Array(box.utf8))).upperBound + offset
            bytes.replaceSubrange(at..<at + 4, with: withUnsafeBytes(of: value.bigEndian, Array.init))
        }
        // Version 0 boxes, offsets after the type: stts's first entry's count, mdhd's and
        // mvhd's duration (22.05 kHz and 1 kHz), tkhd's, elst's first segment's; stsz's count.
        try put("stts", 8, 3_639_600)
        try put("mdhd", 16, 3_639_600 * 1024 + 682)
        try put("mvhd", 16, 169_022_694)
        try put("tkhd", 20, 169_022_694)
        try put("elst", 8, 169_022_694)
        try put("stsz", 8, 0)
        let source = dir.appendingPathComponent("book-47h.m4a").path
        try Data(bytes).write(to: URL(fileURLWithPath: source))
        let probe = try Command.run(["probe", source, "--json"])
        #expect(probe.status == 3 && probe.stdout.contains("its header's duration is damaged"), "\(probe.stdout)")
        for (quality, caps) in [("original", "ios"), ("1mbps", "android")] {
            _ = try Self.expectSourceCorrupt(source, quality: quality, caps: caps, in: dir, saying: "declares 169023 s for")
        }
    }

    @Test("H.264 with B-frames in AVI (decode times only) is re-encoded with each picture at its time, as its copy is: a picture flashed at 1 s is at 1 s, not two frames later (the decoder's times, the packet that pushed each picture out), and the pictures start with the sound",
          arguments: ["1mbps", "original"])
    func reorderedAVITranscode(quality: String) throws {
        let source = try Media.generated("h264-bframes-qp5-flash-at-1s.avi", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3,drawbox=c=white:t=fill:enable='between(t,1,1.036)'",
            "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=3", "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-qp", "5", "-c:a", "pcm_s16le"])
        // A remux copies the pictures (their order gives their times); the rung re-encodes
        // them (1.1 Mbit/s at a fixed quantiser; lossless would leave out B-frames).
        try Command.prepare(source, quality: quality, caps: quality == "original" ? "apple-tv-4k" : "ios", scratch: "reordered-avi-\(quality)") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let action = try Command.json(r)["plan"]?["video"]?["action"]
            #expect(action == .string(quality == "original" ? "copy" : "transcode"), "\(String(describing: action))")
            let flash = try #require(try FFprobe.firstFlash(out))
            #expect(abs(flash - 1) < 0.02, "the flash is at \(flash) s")
            let probe = try FFprobe(out)
            #expect(abs((try probe.startTime("video") ?? 1) - (try probe.startTime("audio") ?? 0)) < 0.01)
        }
    }

    /// H.264 with B-frames (a flash at 1 s) whose every picture's two times are its decode
    /// time, as libavformat reads them: "mxf" as ffmpeg's MXF muxer writes it, "mp4" an MP4
    /// whose composition offsets (`ctts`) were lost (its decode times start two frames before
    /// zero, where its edit list starts the film).
    static func decodeTimesTwice(_ container: String) throws -> String {
        let args = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3,drawbox=c=white:t=fill:enable='between(t,1,1.036)'",
                    "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=3", "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-qp", "5"]
        guard container == "mp4" else { return try Media.generated("h264-bframes-qp5-flash-at-1s.mxf", args + ["-c:a", "pcm_s16le"]) }
        let made = try Media.generated("h264-bframes-qp5-flash-at-1s.mp4", args + ["-c:a", "aac"])
        return try Media.generated("h264-bframes-qp5-flash-at-1s-ctts-lost.mp4") { tmp in
            var b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: made)))
            let ctts = try #require(b.firstRange(of: Array("ctts".utf8)))
            b.replaceSubrange(ctts, with: Array("free".utf8))
            try Data(b).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("reordered H.264 whose two times are both the decode time (ffmpeg's MXF; an MP4 that lost its composition offsets) is copied and re-encoded with each picture at its time: the copy had played its pictures in decode order (the flash two frames off) or was sent as it is, the re-encode lost pictures",
          arguments: ["mxf", "mp4"], ["original", "1mbps"])
    func decodeTimesAsPresentationTimes(container: String, quality: String) throws {
        let source = try Self.decodeTimesTwice(container)
        let packets = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts,dts", "-of", "csv=p=0", source])
        let pairs = packets.stdout.split(whereSeparator: \.isNewline).map { $0.split(separator: ",") }
        #expect(pairs.count == 75 && pairs.allSatisfy { $0.count == 2 && $0[0] == $0[1] }, "libavformat reads both times the same")
        try Command.prepare(source, quality: quality, caps: quality == "original" ? "apple-tv-4k" : "ios", scratch: "decode-times-\(container)-\(quality)") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let plan = try Command.json(r)["plan"]
            #expect(plan?["video"]?["action"] == .string(quality == "original" ? "copy" : "transcode"), "\(String(describing: plan))")
            if container == "mp4", quality == "original" {
                #expect(plan?["delivery_format"] == .string("remux") && plan?["reasons"] == .array([.string("video_timestamps_missing")]),
                        "\(String(describing: plan))")
            }
            let flash = try #require(try FFprobe.firstFlash(out))
            #expect(abs(flash - 1) < 0.02, "the flash is at \(flash) s")
            #expect(try FFprobe.packetCount(out, "v:0") == 75, "every picture kept")
            let probe = try FFprobe(out)
            #expect(abs((try probe.startTime("video") ?? 1) - (try probe.startTime("audio") ?? 0)) < 0.01)
        }
    }

    @Test("MPEG-4 Part 2 with B-frames in AVI (Xvid packed bitstream, libavcodec's own) is re-encoded with each picture at its time on the file's frame clock: the decoder's times (the packet that pushed each picture out) had them 40-120 ms behind the sound, as the ffmpeg command has them",
          arguments: [["-c:v", "libxvid", "-bf", "2"], ["-c:v", "mpeg4", "-bf", "2"]])
    func reorderedMPEG4AVI(encoder: [String]) throws {
        let source = try Media.generated("\(encoder[1])-bf2-flash-at-1s.avi", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3,drawbox=c=white:t=fill:enable='between(t,1,1.036)'",
            "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=3"] + encoder + ["-c:a", "pcm_s16le"])
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "reordered-\(encoder[1])-avi") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let flash = try #require(try FFprobe.firstFlash(out))
            #expect(abs(flash - 1) < 0.02, "the flash is at \(flash) s")
            let probe = try FFprobe(out)
            #expect(abs((try probe.startTime("video") ?? 1) - (try probe.startTime("audio") ?? 0)) < 0.01)
            #expect(try FFprobe.packetCount(out, "v:0") == FFprobe.packetCount(source, "v:0"), "every picture kept")
        }
    }

    @Test("an AVI whose video stream header's rate is damaged (dwScale 1 → 223: 0.11 fps) takes its main header's 25 fps, which makes its 100 pictures last as long as its 4 s of sound: a remux and a transcode last 4 s (the remux went out exit 0 with 100 pictures over 892 s); PCM's length is its stream header's (libavformat gives it none)",
          arguments: ["ac3", "pcm_s16le"])
    func damagedStreamRate(audio: String) throws {
        let dir = Media.scratch("damaged-stream-rate")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.damagedShortAVI(audio: audio, in: dir, at: { bytes in
            // The video's strh: the low byte of its dwScale (after type, handler, flags,
            // priority, language and initial frames).
            try #require(bytes.firstRange(of: Array("strh".utf8))).upperBound + 4 + 20
        }, to: 0xdf)
        #expect(try FFprobe(source).duration("video").map { $0 > 800 } == true, "libavformat reads the damaged rate")
        let video = try Command.probedStreams(source).first
        #expect(video?["frame_rate"] == .number(25), "\(String(describing: video))")
        for (quality, caps) in [("original", "web"), ("1mbps", "ios")] {
            try Command.prepare(source, quality: quality, caps: caps, scratch: "damaged-stream-rate-\(audio)-\(quality)") { r, out in
                #expect(r.status == 0, "\(r.stdout)")
                let probe = try FFprobe(out)
                #expect(abs((try probe.duration("video") ?? 0) - 4) < 0.1 && abs((try probe.duration("audio") ?? 0) - 4) < 0.1,
                        "\(quality): \(String(describing: try probe.duration("video")))")
                #expect(try FFprobe.packetCount(out, "v:0") == 100, "\(quality)")
            }
        }
    }

    @Test("a QuickTime file without a sync sample table (ffmpeg's copy of pictures that are all I-frames, only some IDR, flags each a keyframe) is copied with the IDR pictures as its keyframes: it had been refused as not decoding near its end, and its copy's index said every picture was one")
    func everySampleSyncCopy() throws {
        // Temporal noise makes every picture a scene cut: x264 codes each as an I picture, an
        // IDR every 25 at most; libavformat flags all of them, and the copy leaves out `stss`.
        let noise = "color=c=black:s=160x120:r=30,format=yuv420p,geq=lum='40+mod(T*2\\,160)':cb='40+mod(T*24\\,160)':cr=128,noise=alls=30:allf=t"
        let encoded = try Media.generated("all-i-pictures-20s.mov", ["-t", "20", "-f", "lavfi", "-i", noise, "-t", "20", "-f", "lavfi", "-i", "sine=f=440:r=48000",
                                                                      "-c:v", "libx264", "-bf", "0", "-preset", "veryfast", "-b:v", "1M", "-c:a", "aac"])
        let source = try Media.generated("all-i-pictures-20s-copied.mov", ["-i", encoded, "-c", "copy"])
        func syncSamples(_ path: String) throws -> Int? {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            guard let box = bytes.firstRange(of: Array("stss".utf8)) else { return nil }
            return bytes[box.upperBound + 4..<box.upperBound + 8].reduce(0) { $0 << 8 | Int($1) }
        }
        #expect(try syncSamples(encoded).map { $0 > 1 && $0 < 600 } == true && syncSamples(source) == nil, "the source has no sync sample table")
        try Command.prepare(source, quality: "20mbps", caps: "web", scratch: "every-sample-sync") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let plan = try Command.json(r)["plan"], synced = try syncSamples(out), expected = try syncSamples(encoded)
            #expect(plan?["video"]?["action"]?.string == "copy")
            #expect(synced != nil && synced == expected, "the IDR pictures are the copy's sync samples: \(String(describing: synced)) of 600, \(String(describing: expected)) in the encode")
        }
    }

    @Test("a Matroska file whose keyframes are I-pictures, most not IDR (x264's scene cuts, which ffmpeg flags as keyframes), is copied: verification decoded only IDR pictures alone, found none near the end, and encoded the film instead")
    func intraKeyframesCopy() throws {
        let noise = "color=c=black:s=160x120:r=30,format=yuv420p,geq=lum='40+mod(T*2\\,160)':cb='40+mod(T*24\\,160)':cr=128,noise=alls=30:allf=t"
        let source = try Media.generated("all-i-pictures-10s.mkv", ["-t", "10", "-f", "lavfi", "-i", noise, "-t", "10", "-f", "lavfi", "-i", "sine=f=440:r=48000",
                                                                     "-c:v", "libx264", "-bf", "0", "-preset", "veryfast", "-b:v", "1M", "-c:a", "aac"])
        try Command.prepare(source, quality: "20mbps", caps: "web", scratch: "intra-keyframes") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["action"]?.string == "copy")
            #expect(json["executed_plan"] == nil && json["stats"]?["adjustments"] == nil, "copied as planned: \(String(describing: json["stats"]?["adjustments"]))")
            #expect(try FFprobe.packetCount(out, "v:0") == 300)
        }
    }

    @Test("x264 with periodic intra refresh (its keyframes after the first are P-pictures with a recovery point) copies from Matroska and MPEG-TS: verification decoded a keyframe alone, got no picture, and refused the file as damaged", arguments: ["mkv", "ts"])
    func intraRefreshCopy(container: String) throws {
        let source = try Media.generated("intra-refresh-8s.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                                                          "-f", "lavfi", "-i", "sine=f=440:r=48000", "-t", "8",
                                                                          "-c:v", "libx264", "-preset", "veryfast", "-b:v", "1M", "-bf", "3",
                                                                          "-x264-params", "intra-refresh=1:keyint=50", "-c:a", "aac"])
        try Command.prepare(source, quality: "20mbps", caps: "ios", scratch: "intra-refresh-\(container)") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["action"]?.string == "copy")
            #expect(json["executed_plan"] == nil, "copied as planned")
            #expect(try FFprobe.packetCount(out, "v:0") == 200)
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("a slideshow of a plain picture a minute (five minutes in 1.7 kB, 45 bit/s) remuxes from Matroska: its packets reach the length it declares, which had been refused as a damaged header")
    func slowPlainSlideshow() throws {
        let source = try Media.generated("plain-picture-a-minute.mkv", ["-f", "lavfi", "-i", "color=c=blue:size=320x240:rate=1/60:duration=300",
                                                                        "-c:v", "libx264", "-bf", "0", "-pix_fmt", "yuv420p"])
        #expect((try FileManager.default.attributesOfItem(atPath: source)[.size] as? Int ?? 0) < 2500)
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "plain-slideshow") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            let plan = try Command.json(r)["plan"], times = try FFprobe.packetTimes(out, "v:0"), length = try FFprobe(out).duration("video")
            #expect(plan?["delivery_format"]?.string == "remux", "a remux, not the file as it is")
            #expect(times == [0, 60, 120, 180, 240] && abs((length ?? 0) - 300) < 1, "\(times) \(String(describing: length))")
        }
    }

    @Test("a Matroska file whose VobSub track (the ffmpeg command's, from PGS) makes the segment 49 days long prepares from its pictures' and sound's own stated lengths: that track is left out anyway")
    func implausibleSubtitleDuration() throws {
        let dir = Media.scratch("vobsub-duration")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("vobsub.mkv").path
        let made = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", Media.sharedFolder.appendingPathComponent("ax_sample_with_pgs_subtitles.mkv").path,
                                              "-map", "0", "-c:v", "copy", "-c:a", "copy", "-c:s", "dvdsub", source])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(try FFprobe(source).formatDuration > 1_000_000, "the source must declare the subtitle's length")
        for (quality, caps) in [("original", "web"), ("1mbps", "ios")] {
            try Command.prepare(source, quality: quality, caps: caps, scratch: "vobsub-\(quality)") { r, out in
                #expect(r.status == 0, "\(quality): \(r.stdout)")
                let length = try FFprobe(out).formatDuration, errors = try FFprobe.decodeErrors(out)
                #expect(length < 2 && errors == "", "\(length) s, \(errors)")
            }
        }
    }

    @Test("an AVI whose video header claims 4 kB of codec data (its strf size damaged) copies into an MP4 that does not decode, where the source does: the video is re-encoded from the source, with the reason (it was verify_failed, retried in vain)")
    func copyThatDoesNotDecode() throws {
        let dir = Media.scratch("undecodable-copy")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.damagedShortAVI(audio: "aac", in: dir,
                                              at: { try #require($0.firstRange(of: Array("strf".utf8))).lowerBound + 7 }, to: 0x66)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "android", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout)")
        let json = try Command.json(r)
        #expect(json["plan"]?["video"]?["action"] == .string("copy"))
        guard case .array(let adjustments)? = json["stats"]?["adjustments"] else { Issue.record("no adjustments: \(r.stdout)"); return }
        #expect(adjustments.map(\.string) == ["video_reencoded: the copied video does not decode from the MP4 where the source does "
                                               + "(the output's stream 0 does not decode near 0 s (0 frames, 0 errors))"])
        let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
        #expect(try FFprobe(out).streams("video").first?["nb_frames"] == .string("100"))
    }

    @Test("an AVI whose index gives one AC-3 chunk 15 MB (one byte of its size damaged): the MP4 muxer refuses the packet; the audio is re-encoded from the source and the video still copied (it was source_corrupt, or io_error when the trailer refused)")
    func muxerRefusesAudio() throws {
        let dir = Media.scratch("refused-audio")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The 101st audio chunk's size gets a third byte.
        let source = try Self.hrdAVI(in: dir, audioChunk: 100, sizeByte: 2, to: 0xe9)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout)")
        let json = try Command.json(r)
        guard case .array(let adjustments)? = json["stats"]?["adjustments"] else { Issue.record("no adjustments: \(r.stdout)"); return }
        #expect(adjustments.count == 1 && adjustments.first?.string?.hasPrefix("audio_reencoded: the MP4 muxer refuses") == true,
                "\(adjustments)")
        #expect(json["output"]?["audio"]?["codec"] == .string("aac") && json["output"]?["video"]?["codec"] == .string("h264"))
        // The plan asked for a copy; what was carried out says the sound was encoded (the daemon answers with it).
        #expect(json["plan"]?["audio"]?["action"] == .string("copy"))
        #expect(json["executed_plan"]?["audio"]?["action"] == .string("transcode") && json["executed_plan"]?["audio"]?["codec"] == .string("aac"))
        #expect(json["executed_plan"]?["video"]?["action"] == .string("copy"))
        let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0, "\(decode.stderr.prefix(300))")
    }

    @Test("a copy the MP4 muxer refuses is replaced by the plan's audio fallback (the device's rules) where the plan has one, not the engine's own AAC")
    func refusedAudioTakesThePlansFallback() throws {
        let dir = Media.scratch("refused-audio-fallback")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try Self.hrdAVI(in: dir, audioChunk: 100, sizeByte: 2, to: 0xe9)
        let planned = try Command.run(["plan", source, "--quality", "original", "--caps", "ios", "--json"])
        guard case .object(var plan)? = try JSONValue.parse(Array(planned.stdout.utf8))["plan"], case .object(let audio)? = plan["audio"],
              audio["action"] == .string("copy") else { throw TestFailure("no copied sound in \(planned.stdout.prefix(400))") }
        // The engine's own would be AAC at 96 kbit/s; the plan's says 40.
        plan["audio_fallback"] = .object(["source_index": audio["source_index"] ?? .null, "action": .string("transcode"), "codec": .string("aac"),
                                          "channels": .number(1), "bitrate_kbps": .number(40)])
        let planFile = dir.appendingPathComponent("plan.json").path
        try JSON.string(JSONValue.object(plan)).write(toFile: planFile, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["run", source, "--plan", planFile, "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout.prefix(400))")
        let executed = try Command.json(r)["executed_plan"]?["audio"]
        #expect(executed?["codec"] == .string("aac") && executed?["bitrate_kbps"]?.int == 40, "\(String(describing: executed))")
        let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "stream=codec_name,bit_rate", "-of", "csv=p=0", out])
        let kbps = (Int(probe.stdout.split(separator: ",").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0) / 1000
        #expect(probe.stdout.hasPrefix("aac") && kbps > 20 && kbps < 60, "\(probe.stdout)")
    }

    @Test("a damaged sample size that libavformat cannot allocate (ENOMEM) ends the readable data, not the job as out of memory")
    func impossibleSampleSize() throws {
        // One byte of an MP4 sample table changed (found by fuzzing): reading that sample
        // asks for more than libavutil allocates.
        let dir = Media.scratch("enomem")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(of: "mi_many_tracks.mp4", bytes: 208_534, in: dir, as: "damaged.mp4") { $0[167_710] = 60 }
        for (quality, caps) in [("original", "android"), ("1mbps", "web")] {
            let out = dir.appendingPathComponent("\(quality).mp4").path
            let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", caps, "--output", out, "--json"])
            #expect([0, 3].contains(r.status), "\(quality): \(r.stdout)")
            #expect(!r.stdout.contains("resource_limit"), "\(quality): \(r.stdout)")
        }
    }

    @Test("a copied AAC track with a few damaged packets is delivered, verified, with them counted")
    func damagedPacketsCarried() throws {
        let source = try Self.source()
        let r0 = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=pos,size",
                                             "-of", "csv=p=0", source])
        let packets = r0.stdout.split(separator: "\n").compactMap { line -> (Int, Int)? in
            let f = line.split(separator: ",").compactMap { Int($0) }
            return f.count == 2 ? (f[1], f[0]) : nil   // (pos, size)
        }
        try #require(packets.count > 100)
        // Four AAC frames in the first second get noise for the second half of their payload.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        var rng = SplitMix(seed: 42)
        for (pos, size) in packets[10..<14] {
            for i in (pos + size / 2)..<(pos + size) { bytes[i] = UInt8(truncatingIfNeeded: rng.next()) }
        }
        let dir = Media.scratch("aac-damage")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = dir.appendingPathComponent("damaged.mkv")
        try Data(bytes).write(to: damaged)
        #expect(try !FFprobe.decodeErrors(damaged.path, streams: [1]).isEmpty, "the source's audio really is damaged")

        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", damaged.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let json = try Command.json(r)
        #expect(json["plan"]?["delivery_format"] == .string("remux"))
        #expect(json["plan"]?["audio"]?["action"] == .string("copy"))
        #expect((json["stats"]?["corrupt_packets"]?.int ?? 0) > 0, "the carried damage is counted: \(r.stdout)")
        let probe = try FFprobe(out)
        #expect(probe.streams("audio").count == 1 && probe.streams("video").count == 1)
        #expect(abs(probe.formatDuration - 10) < 0.2)
        #expect(try FFprobe.decodeErrors(out, streams: [0]).isEmpty, "the video is whole")
    }

    @Test("a Matroska file cut in half is refused naming what it has: its sound alone stops, its pictures alone stop (it said \"audio and video\" for a file of one)", arguments: [
        ("sound", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10", "-c:a", "aac"], "audio stops at"),
        ("pictures", ["-f", "lavfi", "-i", "testsrc2=size=64x64:rate=5:duration=10", "-c:v", "libx264", "-an"], "video stops at"),
    ])
    func cutShortNamesWhatItHas(_ kind: String, _ make: [String], _ said: String) throws {
        let whole = try Media.generated("only-\(kind)-10s.mkv", make)
        let dir = Media.scratch("cut-\(kind)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let cut = dir.appendingPathComponent("cut.mkv")
        try bytes.prefix(bytes.count / 2).write(to: cut)
        let r = try Command.run(["prepare", cut.path, "--quality", "original", "--caps", "android",
                                 "--output", dir.appendingPathComponent("out.mp4").path, "--json"])
        #expect(r.status == 3)
        #expect(r.stdout.contains("the source's \(said)"), "\(r.stdout)")
    }
}

extension SourceDamageTests {
    @Test("a damaged MP3 frame in a copied track, a second before the end, with the picture re-encoded (other keyframes than the source's), is delivered")
    func damagedFrameAwayFromTheEnds() throws {
        let dir = Media.scratch("mp3-frame")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The MP3 frame at 2.16 s loses its header. The transcode's keyframe at 2 s lay
        // before the last second's check, and seeking the picture made that check decode the
        // sound from there, over the damaged frame, while the same check on the source
        // (its keyframes elsewhere) did not: verify_failed, retried, for the source's damage.
        let source = try damagedCopy(of: "ax_sample.avi", bytes: 334_534, in: dir, as: "damaged.avi") { b in
            #expect(b[191_328] == 0xff && b[191_329] == 0xfb, "the MP3 frame's sync word")
            for i in 191_328..<191_332 { b[i] = 0 }
        }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", "5mbps", "--caps", "apple-tv-4k", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let plan = try Command.json(r)["plan"]
        #expect(plan?["video"]?["action"] == .string("transcode") && plan?["audio"]?["action"] == .string("copy"))
    }
}

/// `ts` with bit 32 of the PTS (or of the DTS) flipped in the `nth` PES header (with one)
/// of `streamID`: the picture's presentation (decode) time moves 2^32 ticks (13 hours), the
/// other stays.
func flippingPTS(_ ts: [UInt8], streamID: UInt8, nth: Int, decodeTime: Bool = false) throws -> [UInt8] {
    var d = ts, seen = 0
    for off in stride(from: 0, to: d.count - 187, by: 188) where d[off] == 0x47 && d[off + 1] & 0x40 != 0 {
        let control = (d[off + 3] >> 4) & 3
        let at = off + (control == 3 ? 5 + Int(d[off + 4]) : 4)
        let flags: UInt8 = decodeTime ? 0xc0 : 0x80
        guard control != 2, at + 19 <= off + 188, d[at] == 0, d[at + 1] == 0, d[at + 2] == 1, d[at + 3] == streamID,
              d[at + 7] & flags == flags else { continue }
        seen += 1
        if seen == nth {
            d[at + (decodeTime ? 14 : 9)] ^= 0x08
            return d
        }
    }
    throw TestFailure("no PES \(nth) of stream \(streamID)")
}

extension SourceDamageTests {
    @Test("a TS picture whose PTS is 13 hours off its DTS (one flipped bit) is shown when decoded: remux and transcode keep every frame and the length")
    func presentationTimeFlipped() throws {
        let dir = Media.scratch("pts-flip")
        defer { try? FileManager.default.removeItem(at: dir) }
        let clean = try Media.generated("flip-h264.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                        "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-c:a", "aac"])
        let source = dir.appendingPathComponent("flipped.ts")
        try Data(try flippingPTS([UInt8](try Data(contentsOf: URL(fileURLWithPath: clean))), streamID: 0xe0, nth: 40)).write(to: source)
        // The probe measures the rate from the first packets: one of them 13 hours late
        // made it 0.003 fps.
        let streams = try Command.probedStreams(source.path)
        #expect(streams.first?["frame_rate"] == .number(25))
        for quality in ["original", "1mbps"] {
            let out = dir.appendingPathComponent("\(quality).mp4").path
            let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
            #expect(r.status == 0, "\(quality): \(r.stdout) \(r.stderr.suffix(300))")
            guard r.status == 0 else { continue }
            let probe = try FFprobe(out)
            #expect(abs(probe.formatDuration - 4) < 0.2, "\(quality): lasts \(probe.formatDuration) s")
            #expect(probe.streams("video")[0]["nb_frames"]?.int == 100, "\(quality): every picture kept")
        }
    }

    @Test("a copied sound nine frames in ten of which do not decode is refused as mostly damaged, not delivered as a few frames among noise (found by fuzzing)", arguments: ["original", "1mbps"])
    func soundMostlyDamaged(quality: String) throws {
        let source = try Media.generated("sound-mostly-damaged.mkv") { tmp in
            let adts = tmp + ".aac"
            defer { unlink(adts) }
            let tone = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                  "-c:a", "aac", "-f", "adts", adts])
            guard tone.status == 0 else { throw TestFailure(tone.stderr) }
            // Every ADTS frame's payload but each tenth's scrambled, its header kept.
            var d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: adts)))
            var at = 0, frame = 0
            while at + 7 <= d.count, d[at] == 0xff, d[at + 1] & 0xf0 == 0xf0 {
                let length = Int(d[at + 3] & 3) << 11 | Int(d[at + 4]) << 3 | Int(d[at + 5]) >> 5
                guard length > 7, at + length <= d.count else { break }
                if frame % 10 != 0 { for j in (at + 7)..<(at + length) { d[j] = d[j] &* 7 &+ 13 } }
                at += length
                frame += 1
            }
            try Data(d).write(to: URL(fileURLWithPath: adts))
            let mux = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                 "-i", adts, "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "copy", "-shortest", tmp])
            guard mux.status == 0 else { throw TestFailure(mux.stderr) }
        }
        let dir = Media.scratch("sound-damaged-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.expectSourceCorrupt(source, quality: quality, in: dir, saying: "mostly damaged")
    }

    @Test("a Matroska file whose reading stops at a block naming no track (libavformat then searches to the end for nothing) is refused as cut short, though its one subtitle cue reaches its declared end (found by fuzzing)", arguments: ["original", "1mbps"])
    func readingStopsMidFile(quality: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Media.shared("ax_sample_with_srt.mkv"))))
        #expect(bytes[62_443] == 0x82, "the byte the fuzzer changed (a block's track number)")
        bytes[62_443] = 0x40
        let dir = Media.scratch("reading-stops-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("stops.mkv")
        try Data(bytes).write(to: source)
        try Self.expectSourceCorrupt(source.path, quality: quality, in: dir, saying: "cut short or damaged")
    }

    @Test("a TS recording whose first picture's DTS is 13 hours off its PTS (found by fuzzing): the decode time is the damaged one; delivered in sync, not refused as a retryable verify_failed", arguments: ["original", "1mbps"])
    func decodeTimeFlipped(quality: String) throws {
        let dir = Media.scratch("dts-flip-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let clean = try Media.generated("flip-h264.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                        "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                        "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-c:a", "aac"])
        let source = dir.appendingPathComponent("flipped.ts")
        try Data(try flippingPTS([UInt8](try Data(contentsOf: URL(fileURLWithPath: clean))), streamID: 0xe0, nth: 1, decodeTime: true))
            .write(to: source)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        guard r.status == 0 else { return }
        let probe = try FFprobe(out)
        #expect(abs(probe.formatDuration - 4) < 0.2, "lasts \(probe.formatDuration) s")
        #expect(abs((probe.startTime("video") ?? 99) - (probe.startTime("audio") ?? -99)) < 0.1, "pictures and sound start together")
        #expect(try FFprobe.decodeErrors(out) == "")
    }
}

@Suite("aspect ratios the container sets")
struct ContainerAspectTests {
    @Test("a Matroska display size that overrides the picture's own aspect ratio remuxes with the container's (the MP4 header was refused, io_error)")
    func displaySizeOverride() throws {
        let plain = try Media.generated("square-h264.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2",
                                                           "-c:v", "libx264", "-preset", "ultrafast"])
        let source = try Media.generated("display-4x3.mkv") { tmp in
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", plain, "-c", "copy", "-aspect", "4:3", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
        let streams = try Command.probedStreams(source)
        #expect(streams.first?["sample_aspect_ratio"]?["num"] == .number(3) && streams.first?["sample_aspect_ratio"]?["den"] == .number(4))
        let dir = Media.scratch("display-size")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let v = try FFprobe(out).streams("video")[0]
        #expect(v["display_aspect_ratio"]?.string == "4:3")
    }
}

@Suite("re-encoded audio stays on its timestamps")
struct AudioGapTests {
    @Test("two seconds missing from copied sound become frames of silence in its own codec, the copy kept (AAC from Matroska, MOV and MPEG-TS's ADTS, AC-3); MP3, which no such frame can stand in for, is re-encoded; sound without a gap is copied as it is (ExoPlayer had jumped its clock at the gap, dropping the pictures)", arguments: [
        ("aac.mkv", ["-c:a", "aac", "-b:a", "128k"], "web", "5mbps", "aac"),
        ("aac.ts", ["-c:a", "aac", "-b:a", "128k", "-f", "mpegts"], "web", "5mbps", "aac"),
        // MOV's sample table gives the frame before the gap the gap's length too.
        ("aac.mov", ["-c:a", "aac", "-b:a", "128k"], "android", "original", "aac"),
        ("ac3.mkv", ["-c:a", "ac3", "-b:a", "192k"], "apple-tv-4k", "20mbps", "ac3"),
        ("mp3.mkv", ["-c:a", "libmp3lame", "-b:a", "128k"], "web", "5mbps", "mp3"),
    ])
    func gapInCopyFilled(name: String, codec: [String], caps: String, quality: String, sourceCodec: String) throws {
        let picture = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000",
                       "-t", "8", "-c:v", "libx264", "-preset", "ultrafast"]
        let source = try Media.generated("copy-gap-" + name, picture + ["-af", "aselect='not(between(t,3,5))'"] + codec)
        let filled = sourceCodec != "mp3"
        try Command.prepare(source, quality: quality, caps: caps, scratch: "audio-gap-copy-" + name) { r, out in
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("copy"), "\(r.stdout.prefix(400))")
            var said: [String] = []
            if case .array(let lines)? = json["stats"]?["adjustments"] { said = lines.compactMap(\.string) }
            if filled {
                #expect(json["stats"]?["audio_gaps_filled"]?.int == 1, "\(r.stdout.suffix(600))")
                #expect(said.isEmpty, "\(said)")
            } else {
                #expect(said.contains { $0.hasPrefix("audio_reencoded:") && $0.contains("stops for 2.00 s") }, "\(said)")
            }
            let audio = try #require(try FFprobe(out).streams("audio").first)
            #expect(audio["codec_name"] == .string(filled ? sourceCodec : "aac"))
            // Every frame follows the last: no step as long as two and a half frames (the
            // last frame of silence also lasts what is left of one).
            let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=pts_time",
                                                    "-of", "csv=p=0", out])
            let times = probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            let steps = zip(times.dropFirst(), times).map { $0 - $1 }
            let frame = steps.isEmpty ? 0 : steps.sorted()[steps.count / 2]
            #expect(times.count > 200 && (steps.max() ?? 9) < 2.5 * frame, "\(times.count) frames, longest step \(steps.max() ?? 0) s")
            let marks = try Self.silences(out)
            #expect(marks.count == 2 && abs(marks[0] - 3) < 0.1 && abs(marks[1] - 5) < 0.1, "one silence where the gap was: \(marks)")
        }
        let whole = try Media.generated("copy-whole-" + name, picture + codec)
        try Command.prepare(whole, quality: quality, caps: caps, scratch: "audio-whole-" + name) { r, out in
            let json = try Command.json(r)
            #expect(json["stats"]?["audio_gaps_filled"] == nil && !r.stdout.contains("audio_reencoded"), "\(r.stdout.suffix(400))")
            #expect(try FFprobe(out).streams("audio").first?["codec_name"] == .string(sourceCodec))
            #expect(try Self.silences(out).isEmpty)
        }
    }

    @Test("copied 6.1 AAC (a program config element, no channel configuration) with a gap is re-encoded as 5.1 (as 6.1 its track read 0 channels and verification failed, again on every retry)")
    func gapInSixPointOne() throws {
        let source = try Media.generated("copy-gap-aac-7ch.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi",
                                                                  "-i", "sine=frequency=1000:sample_rate=48000", "-t", "8",
                                                                  "-c:v", "libx264", "-preset", "ultrafast",
                                                                  "-af", "aselect='not(between(t,3,4))'", "-ac", "7", "-c:a", "aac", "-aac_pce", "1"])
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "copy-gap-7ch") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(r.stdout.contains("audio_reencoded"), "\(r.stdout.suffix(500))")
            #expect(try FFprobe(out).streams("audio").first?["channels"]?.int == 6)
        }
    }

    /// Where silences of half a second or more start and end in `path`'s sound, in order.
    static func silences(_ path: String) throws -> [Double] {
        let detect = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-i", path, "-map", "0:a",
                                                "-af", "silencedetect=d=0.5", "-f", "null", "-"])
        return detect.stderr.split(separator: "\n").compactMap { line -> Double? in
            guard let r = line.range(of: "silence_start: ") ?? line.range(of: "silence_end: ") else { return nil }
            return Double(line[r.upperBound...].prefix { $0 != " " })
        }
    }

    @Test("a second missing from the source's audio becomes a second of silence, not everything after it a second early")
    func gapFilled() throws {
        // A steady tone with 3–4 s cut out, timestamps kept: a dropout in a recording.
        let source = try Media.generated("audio-gap-ac3.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                                               "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000",
                                                               "-t", "10", "-c:v", "libx264", "-preset", "ultrafast",
                                                               "-af", "aselect='not(between(t,3,4))'", "-c:a", "ac3", "-b:a", "192k"])
        let dir = Media.scratch("audio-gap")
        defer { try? FileManager.default.removeItem(at: dir) }
        for quality in ["original", "1mbps"] {
            let out = dir.appendingPathComponent("\(quality).mp4").path
            let r = try Command.run(["prepare", source, "--quality", quality, "--caps", "web", "--output", out, "--json"])
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("transcode"))
            #expect(json["stats"]?["audio_gaps_filled"]?.int == 1, "\(quality): \(r.stdout.suffix(400))")
            let audio = try #require(try FFprobe(out).duration("audio"))
            #expect(abs(audio - 10) < 0.1, "\(quality): the audio lasts \(audio) s")
            let marks = try Self.silences(out)
            #expect(marks.count == 2, "\(quality): one silence: \(marks)")
            if marks.count == 2 {
                #expect(abs(marks[0] - 3) < 0.1 && abs(marks[1] - 4) < 0.1, "\(quality): the silence is where the gap was: \(marks)")
            }
        }
    }
}

extension AudioGapTests {
    @Test("a broadcast recording that lost 2 % of its TS packets is delivered, the loss counted and the sound as long as the picture")
    func lostTransportPackets() throws {
        let source = try Media.generated("recording-10s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25",
                                                              "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000",
                                                              "-t", "10", "-c:v", "mpeg2video", "-b:v", "2M", "-c:a", "mp2", "-b:a", "192k",
                                                              "-f", "mpegts"])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        var rng = SplitMix(seed: 7)
        var kept: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: 188) where rng.next() % 100 >= 2 {
            kept += bytes[start..<min(start + 188, bytes.count)]
        }
        let dir = Media.scratch("ts-loss")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = dir.appendingPathComponent("lossy.ts")
        try Data(kept).write(to: damaged)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", damaged.path, "--quality", "1mbps", "--caps", "web", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let json = try Command.json(r)
        #expect((json["stats"]?["corrupt_packets"]?.int ?? 0) > 0, "\(r.stdout.suffix(400))")
        #expect((json["stats"]?["audio_gaps_filled"]?.int ?? 0) > 0, "\(r.stdout.suffix(400))")
        let probe = try FFprobe(out)
        let audio = try #require(probe.duration("audio")), video = try #require(probe.duration("video"))
        #expect(abs(audio - video) < 0.2, "the sound lasts \(audio) s, the picture \(video) s")
    }
}

extension AudioGapTests {
    @Test("a gap in the sound after a splice that steps back 3 s is filled with silence: the re-encoded sound after it stays in sync (libavformat says 9 s for the 12 s recording, and the gap's end, past 10 s, was taken for damage: not filled, the rest 1.3 s early)")
    func gapAfterSplice() throws {
        let first = try Splice.recording("testsrc2", offset: 10), second = try Splice.recording("testsrc", offset: 13)
        let source = try Media.generated("spliced-13-sound-gap.ts") { tmp in
            // The second recording's sound PES packets 10 to 14 (3.2 to 4.5 s in) are lost.
            let b = try Splice.packets(second)
            let starts = b.indices.filter { Splice.pid(b[$0]) == Splice.audioPID && b[$0][1] & 0x40 != 0 }
            let lost = starts[10]..<starts[14]
            let kept = b.indices.filter { !lost.contains($0) || Splice.pid(b[$0]) != Splice.audioPID }.map { b[$0] }
            try (Data(contentsOf: URL(fileURLWithPath: first)) + Data(kept.joined())).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "gap-after-splice") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["stats"]?["audio_gaps_filled"]?.int == 1, "\(r.stdout.suffix(400))")
            let (apart, sourceApart) = try (FFprobe.endsApart(out), FFprobe.endsApart(second))
            #expect(abs(apart - sourceApart) < 0.05, "the ends are \(apart) s apart in the output, \(sourceApart) s in the source")
        }
    }
}

@Suite("sound that starts before the picture")
struct LateVideoTests {
    @Test("Matroska audio that starts 2 s before the first video keyframe is all kept: going back to the start after the probe must not seek past it")
    func audioBeforeFirstKeyframe() throws {
        let source = try Media.generated("late-video.mkv", ["-itsoffset", "2", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                                           "-f", "lavfi", "-i", "sine=frequency=1000:sample_rate=48000:duration=10",
                                                           "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        let dir = Media.scratch("late-video")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["plan"]?["delivery_format"] == .string("remux"))
        let probe = try FFprobe(out)
        #expect(abs((probe.startTime("audio") ?? -1) - 0) < 0.05, "the sound starts at the start")
        #expect(abs((probe.duration("audio") ?? 0) - 10) < 0.1)
        #expect(abs((probe.startTime("video") ?? 0) - 2) < 0.1, "the picture keeps its 2 s offset")
    }

    @Test("Matroska whose first block is laced sound 1 ms before the picture: the remux keeps every sound frame, in sync")
    func lacedSoundJustBeforePicture() throws {
        let source = try Media.lacedEarlySound()
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "laced-early-sound") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["delivery_format"] == .string("remux"))
            #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(source, "a"))
            let probe = try FFprobe(out)
            #expect(abs((probe.startTime("audio") ?? -1) - (probe.startTime("video") ?? 1)) < 0.01, "sound and picture start together, as in the source")
        }
    }

    @Test("Matroska laced sound whose DefaultDuration is doubled or halved (a muxer's mistake) comes out whole and as the right file's, remuxed and transcoded: half of it was dropped as times running back, or choppy with silence between its blocks", arguments: [2.0, 0.5])
    func lacedSoundWrongDefaultDuration(factor: Double) throws {
        let source = try Media.lacedEarlySound()
        // mkvmerge wrote 21.333 ms for AAC's 1024 frames at 48 kHz; mkvpropedit changes it alone.
        let damaged = try Media.generated("early-sound-laced-defdur-x\(factor).mkv") { tmp in
            try FileManager.default.copyItem(atPath: source, toPath: tmp)
            let r = try Run.command("mkvpropedit", ["-q", tmp, "--edit", "track:a1", "--set", "default-duration=\(Int(21_333_333 * factor))"])
            guard r.status == 0 || r.status == 1 else { throw TestFailure("mkvpropedit (mkvtoolnix, installed by make deps) failed: \(r.stderr)") }
        }
        // What the right file's sound decodes to, and how many frames it has.
        func decodedSound(_ path: String) throws -> String {
            try Run.command("ffmpeg", ["-v", "error", "-i", path, "-map", "0:a", "-f", "md5", "-"]).stdout
        }
        var right = ""
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "defdur-right-\(factor)") { (r, out) throws in
            #expect(r.status == 0)
            right = try decodedSound(out)
        }
        let frames = try FFprobe.packetCount(source, "a")
        // Android plays Matroska: as it is, ExoPlayer would space the frames by the wrong
        // length too; it is remuxed, saying why.
        for (quality, caps) in [("original", "ios"), ("original", "android"), ("1mbps", "web")] {
            try Command.prepare(damaged, quality: quality, caps: caps, scratch: "defdur-\(factor)-\(quality)-\(caps)") { (r, out) throws in
                #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
                let stats = try Command.json(r)["stats"]
                #expect(stats?["corrupt_packets"] == .number(0) && stats?["audio_gaps_filled"] == nil, "\(r.stdout)")
                #expect(try FFprobe.packetCount(out, "a") == frames, "every sound frame, nothing added")
                if quality == "original" { #expect(try decodedSound(out) == right, "the right file's sound") }
                if caps == "android" {
                    #expect(try Command.json(r)["plan"]?["reasons"] == .array([.string("container_audio_lacing_wrong")]), "\(r.stdout)")
                }
            }
        }
    }

    @Test("Matroska with laced sound whose TimecodeScale is ten times too small is refused as damaged, as it is without lacing: its sound was packed into a tenth of its time (most of it dropped), exit 0, and went to Android as it was")
    func lacedSoundScaleDamaged() throws {
        let source = try Media.lacedEarlySound()
        let damaged = try Media.generated("early-sound-laced-scale-tenth.mkv") { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
            // TimestampScale (2A D7 B1), three bytes long: 1,000,000 ns becomes 100,000.
            guard let at = firstOffset(of: [0x2A, 0xD7, 0xB1, 0x83, 0x0F, 0x42, 0x40], in: bytes) else {
                throw TestFailure("no TimestampScale of 1 ms in \(source)")
            }
            bytes.replaceSubrange(at + 4..<at + 7, with: [0x01, 0x86, 0xA0])
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
        for caps in ["ios", "android"] {
            try Command.prepare(damaged, quality: "original", caps: caps, scratch: "laced-scale-\(caps)") { (r, out) throws in
                #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
                let error = try Command.json(r)["error"]
                #expect(error?["code"] == .string("source_corrupt") && error?["message"]?.string?.contains("a timescale damaged") == true, "\(r.stdout)")
                #expect(!FileManager.default.fileExists(atPath: out))
            }
        }
    }
}

extension DamagedInputTests {
    @Test("a file whose streams cannot be analysed exits 3, not with a double free (found by fuzzing)")
    func analysisFails() throws {
        // One byte of the Dolby Vision sample's header changed: libavformat opens the file
        // but avformat_find_stream_info fails. The context was closed twice (signal 11).
        let dir = Media.scratch("analysis-fails")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(of: "sp_sparks_dovi_8.mp4", bytes: 563_484, in: dir, as: "damaged.mp4") { $0[556] = 40 }
        let probe = try Command.run(["probe", source.path, "--json"])
        #expect(probe.status == 3, "\(probe.stdout) \(probe.stderr.suffix(300))")
        #expect(try Command.json(probe)["error"]?["code"] == .string("source_unreadable"))
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
    }
}

/// A shared sample with `change` applied, written into `dir` as `name`: the reproductions
/// of what fuzzing found. The sample's size is checked first, so the offsets still point
/// where they did.
func damagedCopy(of sample: String, bytes expected: Int, in dir: URL, as name: String,
                 _ change: (inout [UInt8]) throws -> Void) throws -> URL {
    try damagedCopy(ofFile: Media.shared(sample), in: dir, as: name) { bytes throws in
        try #require(bytes.count == expected, "\(sample) is not the sample the offsets were taken from")
        try change(&bytes)
    }
}

/// The file at `path` with `change` applied, written into `dir` as `name`.
/// A 3 s H.264 and AAC MP4 laid out by `movflags` (`name` tells the layouts apart in the
/// generated media's cache), for tests that damage one of its boxes.
func soundAndPictures3s(_ name: String, movflags: String) throws -> String {
    try Media.generated("h264-aac-3s-\(name).mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-f", "lavfi",
                                                     "-i", "sine=duration=3", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
                                                     "-movflags", movflags])
}

/// Where a four-character box type stands in `bytes` (its box starts 4 bytes before), in order.
/// Where `pattern` first lies in `bytes` at `from` or after, nil where it does not.
func firstOffset(of pattern: [UInt8], in bytes: [UInt8], from: Int = 0) -> Int? {
    guard !pattern.isEmpty, bytes.count >= pattern.count, from <= bytes.count - pattern.count else { return nil }
    return (from...(bytes.count - pattern.count)).first { bytes[$0..<$0 + pattern.count].elementsEqual(pattern) }
}

/// Where a Matroska file's Tracks element (16 54 AE 6B) starts: not the SeekHead's SeekID
/// (53 AB 84) naming it.
func matroskaTracks(in bytes: [UInt8]) -> Int? {
    var from = 0
    while let at = firstOffset(of: [0x16, 0x54, 0xAE, 0x6B], in: bytes, from: from) {
        if at < 3 || !bytes[at - 3..<at].elementsEqual([0x53, 0xAB, 0x84]) { return at }
        from = at + 1
    }
    return nil
}

/// A 2 s H.264 and AAC Matroska film, for tests that damage its header.
func matroska2s() throws -> String {
    try Media.generated("tracks-2s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=2", "-f", "lavfi",
                                          "-i", "sine=duration=2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
}

func typeOffsets(of type: String, in bytes: [UInt8]) -> [Int] {
    let t = Array(type.utf8)
    return (4..<max(4, bytes.count - 4)).filter { Array(bytes[$0..<$0 + 4]) == t }
}

func damagedCopy(ofFile path: String, in dir: URL, as name: String, _ change: (inout [UInt8]) throws -> Void) throws -> URL {
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    try change(&bytes)
    let url = dir.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url
}

@Suite("H.264 and HEVC sample entries as Apple's players need them")
struct SampleEntryTests {
    /// Decodes the output's video with every parameter set in the stream removed: it
    /// decodes only if the sample entry (avcC/hvcC) lists them, as avc1 and hvc1 promise.
    func decodesFromSampleEntry(_ out: String, removing types: String, in dir: URL) throws {
        let bare = dir.appendingPathComponent("bare.mp4").path
        let strip = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:v", "-c", "copy",
                                               "-bsf:v", "filter_units=remove_types=\(types)", "-y", bare])
        #expect(strip.status == 0, "\(strip.stderr)")
        let decoded = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", bare, "-f", "null", "-"])
        #expect(decoded.status == 0 && decoded.stderr.isEmpty, "\(decoded.stderr)")
    }

    /// Prepares `source` for `caps` (a remux), checks the output's tag and that its
    /// sample entry alone carries the parameter sets.
    func remuxed(_ source: String, caps: String, tag: String, removing types: String, in dir: URL) throws -> JSONValue {
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", caps, "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try FFprobe(out).streams("video")[0]["codec_tag_string"]?.string == tag)
        #expect(try FFprobe.decodeErrors(out).isEmpty)
        try decodesFromSampleEntry(out, removing: types, in: dir)
        return try Command.json(r)
    }

    /// A copy of `source` with `change` applied to the bytes after the first `box` type.
    func patched(_ source: String, box: String, in dir: URL, as name: String, _ change: (inout [UInt8], Int) -> Void) throws -> String {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let tag = Array(box.utf8)
        let at = try #require((0..<(bytes.count - 4)).first { Array(bytes[$0..<$0 + 4]) == tag }, "no \(box) box")
        change(&bytes, at + 4)
        let url = dir.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url.path
    }

    @Test("hev1 whose hvcC lists no parameter sets (they travel in the stream) comes out hvc1 listing them")
    func hvccFromStream() throws {
        let source = try Media.generated("hevc-hev1-inband.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=3",
                                                                 "-c:v", "libx265", "-preset", "ultrafast",
                                                                 "-x265-params", "log-level=error:repeat-headers=1", "-tag:v", "hev1"])
        let dir = Media.scratch("hvcc-inband")
        defer { try? FileManager.default.removeItem(at: dir) }
        // Every unit the hvcC lists becomes filler data (type 38), in the array and in the
        // unit's own header: the record then names no VPS, SPS or PPS.
        let bare = try patched(source, box: "hvcC", in: dir, as: "bare-hvcc.mp4") { d, body in
            var at = body + 23
            for _ in 0..<Int(d[body + 22]) {
                d[at] = (d[at] & 0xc0) | 38
                let count = Int(d[at + 1]) << 8 | Int(d[at + 2])
                at += 3
                for _ in 0..<count {
                    let length = Int(d[at]) << 8 | Int(d[at + 1])
                    d[at + 2] = (d[at + 2] & 0x81) | (38 << 1)
                    at += 2 + length
                }
            }
        }
        _ = try remuxed(bare, caps: "apple-tv-4k", tag: "hvc1", removing: "32|33|34", in: dir)
    }

    @Test("an hvcC whose first parameter set runs past its end: exit 3, source_corrupt, not a failed write (found by fuzzing)")
    func damagedRecord() throws {
        let source = try Media.generated("hevc-hev1.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=3",
                                                          "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
                                                          "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error",
                                                          "-tag:v", "hev1", "-c:a", "aac"])
        let dir = Media.scratch("hvcc-damaged")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The first unit's 16-bit length (after the 23-byte header and the array's 3 bytes).
        let damaged = try patched(source, box: "hvcC", in: dir, as: "damaged.mp4") { d, body in
            d[body + 26] = 0xff
            d[body + 27] = 0xff
        }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", damaged, "--quality", "original", "--caps", "apple-tv-4k", "--output", out, "--json"])
        #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["error"]?["code"] == .string("source_corrupt"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["damaged.mp4"])
    }

    @Test("avc3 whose avcC lists no SPS or PPS comes out avc1 listing them")
    func avccFromStream() throws {
        let source = try Media.generated("h264-avc3-inband.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=3",
                                                                 "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
                                                                 "-c:v", "libx264", "-preset", "ultrafast", "-x264-params", "repeat-headers=1",
                                                                 "-tag:v", "avc3", "-c:a", "flac", "-strict", "-2"])
        let dir = Media.scratch("avcc-inband")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The record keeps its size: no SPS, no PPS, then zeros nobody reads.
        let bare = try patched(source, box: "avcC", in: dir, as: "bare-avcc.mp4") { d, body in
            let size = Int(d[body - 8]) << 24 | Int(d[body - 7]) << 16 | Int(d[body - 6]) << 8 | Int(d[body - 5])
            let record: [UInt8] = [1, d[body + 1], d[body + 2], d[body + 3], 0xff, 0xe0, 0x00]
            d.replaceSubrange(body..<body - 8 + size, with: record + [UInt8](repeating: 0, count: size - 8 - record.count))
        }
        // A device without FLAC: the audio is re-encoded, the picture copied.
        let caps = dir.appendingPathComponent("caps.json")
        try Data(#"{"containers": ["mp4"], "codecs_video": ["h264"], "codecs_audio": ["aac"]}"#.utf8).write(to: caps)
        let result = try remuxed(bare, caps: caps.path, tag: "avc1", removing: "7|8", in: dir)
        #expect(result["plan"]?["video"]?["action"] == .string("copy"))
    }

    @Test("an MP4 whose HEVC is tagged hev1 is remuxed for a device, and comes out hvc1 with its parameter sets in the sample entry")
    func hev1BecomesHvc1() throws {
        let source = try Media.generated("hevc-hev1.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=3",
                                                          "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
                                                          "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error",
                                                          "-tag:v", "hev1", "-c:a", "aac"])
        let streams = try Command.probedStreams(source)
        #expect(streams.first?["codec_tag"] == .string("hev1"))
        #expect(try Command.run(["probe", source]).stdout.contains("video hevc (hev1) Main"))
        let dir = Media.scratch("hev1")
        defer { try? FileManager.default.removeItem(at: dir) }
        let plan = try remuxed(source, caps: "apple-tv-4k", tag: "hvc1", removing: "32|33|34", in: dir)["plan"]
        #expect(plan?["delivery_format"] == .string("remux"))
        #expect(plan?["video"]?["action"] == .string("copy"))
        guard case .array(let reasons)? = plan?["reasons"] else { throw TestFailure("the plan has no reasons") }
        #expect(reasons.contains(.string("video_tag_unsupported")))
    }
}

/// A 512 KiB tmpfs mounted for one test, where the machine lets root mount one (nil
/// elsewhere: a container without the capability, where the test is skipped and says so).
func smallFileSystem(_ label: String) -> URL? {
    let dir = Media.scratch(label)
    guard geteuid() == 0, (try? Run.command("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", dir.path]))?.status == 0 else {
        try? FileManager.default.removeItem(at: dir)
        return nil
    }
    return dir
}

@Suite("a full disk")
struct DiskFullTests {
    static let folder = smallFileSystem("disk-full")

    @Test("an output that does not fit fails as disk_full (retryable, exit 4) and leaves nothing, for a remux and a transcode",
          .enabled(if: folder != nil, "this machine does not let root mount a small tmpfs"))
    func diskFull() throws {
        let dir = try #require(Self.folder)
        defer {
            _ = try? Run.command("umount", [dir.path])
            try? FileManager.default.removeItem(at: dir)
        }
        // 3 MB of picture: a remux writes all of it, a 1 Mbps transcode about 750 KB.
        let source = try Media.generated("disk-full-source.mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=6",
                                                                 "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                                                                 "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "4M", "-c:a", "aac"])
        for (quality, caps) in [("original", "ios"), ("1mbps", "ios")] {
            let out = dir.appendingPathComponent("out.mp4").path
            let r = try Command.run(["prepare", source, "--quality", quality, "--caps", caps, "--output", out, "--json"])
            #expect(r.status == 4, "\(quality): \(r.stdout) \(r.stderr.suffix(300))")
            let error = try Command.json(r)["error"]
            #expect(error?["code"] == .string("disk_full"), "\(quality)")
            #expect(error?["retryable"] == .bool(true))
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "nothing left behind")
        }
    }
}

@Suite("file names")
struct FileNameTests {
    @Test("an output that is the source itself (the same path, or a link to it) is refused: the file was replaced by what was made from it")
    func outputIsSource() throws {
        let dir = Media.scratch("same-file")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("film.mkv").path
        try FileManager.default.copyItem(atPath: Media.shared("ax_sample_with_srt.mkv"), toPath: source)
        let link = dir.appendingPathComponent("link.mkv").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: source)
        let before = try Data(contentsOf: URL(fileURLWithPath: source))
        for output in [source, link] {
            let r = try Command.run(["prepare", source, "--quality", "1mbps", "--caps", "ios", "--output", output, "--json"])
            #expect(r.status == 2, "\(output): \(r.stdout)")
            #expect(try Command.json(r)["error"]?["field"] == .string("output"), "\(r.stdout)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: source)) == before, "the source is untouched")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["film.mkv", "link.mkv"])
    }

    @Test("a named pipe or a device is refused at once (exit 3, source_unreadable), not waited on or read forever",
          arguments: ["pipe", "/dev/zero"])
    func notARegularFile(_ kind: String) throws {
        let dir = Media.scratch("not-regular")
        defer { try? FileManager.default.removeItem(at: dir) }
        var source = kind
        if kind == "pipe" {
            source = dir.appendingPathComponent("movie.mkv").path
            try #require(mkfifo(source, 0o644) == 0)
        }
        let out = dir.appendingPathComponent("out.mp4").path
        // Killed after a minute if it waits: a hang fails the test instead of stalling it.
        for args in [["probe", source, "--json"], ["prepare", source, "--quality", "1mbps", "--caps", "ios", "--output", out, "--json"]] {
            let r = try Run.command("timeout", ["-s", "KILL", "60", Command.binary] + args)
            #expect(r.status == 3, "\(args[0]): \(r.stdout) \(r.stderr.suffix(300))")
            #expect(r.stdout.contains("source_unreadable"), "\(r.stdout)")
        }
    }

    @Test("an output name near the file system's 255-byte limit is written: the temporary beside it is shortened to fit")
    func longOutputName() throws {
        let dir = Media.scratch("long-name")
        defer { try? FileManager.default.removeItem(at: dir) }
        let name = String(repeating: "é", count: 120) + "-episode.mp4"   // 252 bytes
        let out = dir.appendingPathComponent(name).path
        let r = try Command.run(["prepare", Media.shared("ax_sample_with_srt.mkv"), "--quality", "original", "--caps", "ios",
                                 "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == [name])
    }

    @Test("a prepare removes the temporaries that killed runs for the same output left (a PID that is gone), not those of a run still going or of another output")
    func abandonedTemporaries() throws {
        let dir = Media.scratch("abandoned")
        defer { try? FileManager.default.removeItem(at: dir) }
        // A PID that was a process's and is gone.
        let gone = try #require(Int32(try Run.command("/bin/sh", ["-c", "echo $$"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)))
        let live = ProcessInfo.processInfo.processIdentifier
        let left = [".out.mp4.kiln-tmp-\(gone)-17", ".out.mp4.kiln-tmp-\(gone)-17.faststart"]
        let kept = [".out.mp4.kiln-tmp-\(live)-18", ".other.mp4.kiln-tmp-\(gone)-19"]
        for name in left + kept { try Data(repeating: 7, count: 4096).write(to: dir.appendingPathComponent(name)) }
        let r = try Command.run(["prepare", Media.shared("ax_sample_with_srt.mkv"), "--quality", "original", "--caps", "ios",
                                 "--output", dir.appendingPathComponent("out.mp4").path, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: dir.path)) == Set(kept + ["out.mp4"]))
    }

    @Test("a name with a colon, given relative to the working folder, is a file, not a URL (\"Alien: Covenant.mkv\")",
          arguments: ["Alien: Covenant (2017).mkv", "http:clip.mkv"])
    func colonInName(_ name: String) throws {
        let dir = Media.scratch("colon")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.copyItem(atPath: Media.shared("ax_sample_with_srt.mkv"), toPath: dir.appendingPathComponent(name).path)
        func quoted(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let command = "cd \(quoted(dir.path)) && exec \(quoted(Command.binary)) prepare \(quoted(name)) --quality 1mbps --caps ios "
            + "--output \(quoted("out: " + name + ".mp4")) --json"
        let r = try Run.command("/bin/sh", ["-c", command])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("out: \(name).mp4").path))
    }
}

@Suite("sources whose packets do not go into MP4 as they are: format changes, LATM, missing times, encryption")
struct FormatChangeTests {
    @Test("MPEG-1 Layer II in MP4 (one code for every layer, which libavformat calls MP3) is probed as mp2 and re-encoded for a device that plays MP3 (it was copied as MP3); real MP3 is still copied")
    func layerTwoInMP4() throws {
        for (codec, probed) in [("mp2", "mp2"), ("libmp3lame", "mp3")] {
            let source = try Media.generated("mpeg-audio-\(codec).mp4", [
                "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                "-t", "3", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", codec, "-b:a", "192k"])
            let info = try Command.probed(source)
            guard case .array(let streams)? = info["streams"] else { Issue.record("no streams"); continue }
            #expect(streams.contains { $0["type"] == .string("audio") && $0["codec"] == .string(probed) }, "\(streams)")
            try Command.prepare(source, quality: "original", caps: "ios", scratch: "layer-\(codec)") { (r, out) throws in
                #expect(r.status == 0, "\(r.stdout)")
                let audio = try Command.json(r)["plan"]?["audio"]
                #expect(audio?["action"] == .string(probed == "mp2" ? "transcode" : "copy"))
                #expect(try FFprobe(out).streams("audio").first?["codec_name"]?.string == (probed == "mp2" ? "aac" : "mp3"))
                #expect(try FFprobe.decodeErrors(out) == "")
                // The tone is mono, and the answer says so (an MP3's MP4 sample entry says 2).
                let channels = try Command.json(r)["output"]?["audio"]?["channels"]?.int
                let probedChannels = try FFprobe(out).streams("audio").first?["channels"]?.int
                #expect(channels == 1 && probedChannels == 1, "\(String(describing: channels))")
            }
        }
        // A mono MP3 file copied into MP4 is said to be mono (the MP4 index says 2).
        let mono = try Media.generated("mono-8k.mp3", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000", "-t", "3", "-c:a", "libmp3lame"])
        try Command.prepare(mono, quality: "original", caps: "ios", scratch: "mono-mp3") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout)")
            let channels = try Command.json(r)["output"]?["audio"]?["channels"]?.int
            let probedChannels = try FFprobe(out).streams("audio").first?["channels"]?.int
            #expect(channels == 1 && probedChannels == 1, "\(String(describing: channels))")
        }
        // Without pictures too (the probe's packet scan was the video's).
        let sound = try Media.generated("mpeg-audio-mp2-only.m4a", [
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "3", "-c:a", "mp2", "-b:a", "192k", "-f", "mp4"])
        let info = try Command.probed(sound)
        guard case .array(let streams)? = info["streams"] else { Issue.record("no streams: \(info)"); return }
        #expect(streams.first?["codec"] == .string("mp2"), "\(streams)")
    }

    /// Five seconds of 4:3 SD with stereo AAC, then five of 16:9 HD with 5.1 AAC, in one
    /// transport stream: a recording that runs from adverts into a film.
    static func recording() throws -> String {
        try Media.concatenatedTS("sd-stereo-then-hd-surround.ts", parts: [("640x480", 2, "0"), ("1280x720", 6, "5")].map { size, channels, offset in
            ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=5",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=5",
             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac", "-ac", "\(channels)",
             "-output_ts_offset", offset]
        })
    }

    /// Three seconds of stereo 48 kHz AC-3, then three of 5.1 at 44.1 kHz: the change
    /// falls inside what the probe reads.
    static func earlyAC3Change() throws -> String {
        try Media.concatenatedTS("ac3-stereo-then-surround.ts", parts: [(2, 48000, "0"), (6, 44100, "3")].map { channels, rate, offset in
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=\(rate):duration=3",
             "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "ac3", "-ac", "\(channels)",
             "-output_ts_offset", offset]
        })
    }

    /// The display times ffprobe gives the decoded video frames of `path`, in output order.
    static func displayTimes(_ path: String) throws -> [Int] {
        let frames = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "frame=pts", "-of", "json", path])
        guard case .array(let list)? = try JSONValue.parse(Array(frames.stdout.utf8))["frames"] else {
            throw TestFailure("ffprobe listed no frames: \(frames.stderr)")
        }
        return list.compactMap { $0["pts"]?.int }
    }

    @Test("AAC in MPEG-TS whose rate doubles along the recording (22.05 kHz, then 48: implicitly signalled HE-AAC is read as 24 then 48) is probed and encoded at its largest rate, continuous: the demuxer timed each PES's later frames at the first rate's frame length, and the sound came out chopped by 30 filled gaps and as many left-out overlaps, at 22.05 kHz")
    func aacRateChangeInTransportStream() throws {
        let video = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=5"], encode = ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-ac", "2"]
        let source = try Media.concatenatedTS("aac-rate-22050-then-48000.ts", parts: [
            video + ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=22050:duration=5"] + encode + ["-mpegts_copyts", "1"],
            video + ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=5"] + encode + ["-output_ts_offset", "5", "-mpegts_copyts", "1"],
        ])
        let sound = try #require(try Command.probedStreams(source).first { $0["type"] == .string("audio") }, "no audio probed")
        #expect(sound["sample_rate"]?.int == 48000 && sound["format_changes"] == .bool(true), "\(sound)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "aac-rate-change") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["stats"]?["audio_gaps_filled"] == nil, "\(r.stdout.suffix(600))")
            let audio = try FFprobe(out).streams("audio")
            #expect(audio.count == 1 && audio.first?["sample_rate"]?.string == "48000", "\(audio)")
            #expect(try FFprobe(out).duration("audio").map { abs($0 - 10) < 0.15 } == true)
            // The tone plays throughout: no stretch of silence (there were 34 of 20-60 ms).
            let quiet = try Run.command("ffmpeg", ["-nostdin", "-hide_banner", "-i", out, "-map", "0:a", "-af", "silencedetect=n=-50dB:d=0.01", "-f", "null", "-"])
            let silences = quiet.stderr.components(separatedBy: "silence_start").count - 1
            #expect(silences <= 4, "\(silences) silences")
        }
    }

    @Test("an MP4 of sound whose sample times all stand still (a damaged stts: every delta 0) is re-encoded whole, its frames following on: libavformat marked every frame as priming before the edit list's start, and 4 s of AC-3 came out as 0.06 s and was refused")
    func soundTimesStandingStill() throws {
        let whole = try Media.generated("ac3-edit-list-4s.mp4", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                                 "-c:a", "ac3", "-ac", "2", "-movflags", "+faststart"])
        let dir = Media.scratch("cli-still-sound-times")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "stts-delta-0.mp4") { bytes throws in
            // The stts's first entry's delta (after its size, type, version and flags, entry
            // count and sample count) becomes 0.
            let found = typeOffsets(of: "stts", in: bytes)
            try #require(found.count == 1)
            bytes.replaceSubrange(found[0] + 16..<found[0] + 20, with: [0, 0, 0, 0])
        }.path
        let times = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=dts", "-of", "csv=p=0", damaged])
            .stdout.split(separator: "\n").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ", ")) }.filter { !$0.isEmpty }
        #expect(times.count > 100 && Set(times).count == 1, "the source is what the test needs: \(Set(times))")
        try Command.prepare(damaged, quality: "2mbps", caps: "android", scratch: "cli-still-sound-times-out") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["audio"]?["action"] == .string("transcode"), "\(r.stdout.prefix(400))")
            let sound = try FFprobe(out).duration("audio")
            #expect(sound.map { abs($0 - 4) < 0.1 } == true, "\(String(describing: sound)) s of sound")
        }
    }

    @Test("AC-3 that goes from stereo adverts to a 5.1 film (an ATSC or DVB recording) is probed by its largest layout, its format said to change, and encoded once at 5.1 (it was copied from the stereo start, stopped at the change and the whole run made again in stereo); a stereo device gets stereo; a recording that stays 5.1 is still copied",
          arguments: ["ac3", "eac3"])
    func dolbyDigitalLayoutChange(codec: String) throws {
        let changing = try Media.soundRecording(codec, channels: [2, 6])
        let steady = try Media.soundRecording(codec, channels: [6, 6])
        let sound = try #require(try Command.probedStreams(changing).first { $0["type"] == .string("audio") }, "no audio probed")
        #expect(sound["channels"]?.int == 6 && sound["format_changes"] == .bool(true), "\(sound)")
        try Command.prepare(changing, quality: "original", caps: "ios", scratch: "dd-change-\(codec)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("transcode"), "\(r.stdout.prefix(600))")
            #expect("\(json["plan"]?["reasons"] ?? .null)".contains("audio_format_changes"), "\(r.stdout.prefix(600))")
            #expect(json["stats"]?["adjustments"] == nil && json["executed_plan"] == nil, "encoded once: \(r.stdout.suffix(600))")
            let audio = try FFprobe(out).streams("audio")
            #expect(audio.count == 1 && audio.first?["channels"]?.int == 6, "\(audio)")
            #expect(try FFprobe(out).duration("audio").map { abs($0 - 16) < 0.2 } == true)
            let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:a", "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
        }
        let stereo = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["aac","ac3","eac3"],"max_audio_channels":2}"#
        try Command.prepare(changing, quality: "original", caps: stereo, scratch: "dd-change-stereo-\(codec)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let audio = try FFprobe(out).streams("audio")
            #expect(audio.count == 1 && audio.first?["channels"]?.int == 2 && audio.first?["codec_name"] == .string("aac"), "\(audio)")
        }
        try Command.prepare(steady, quality: "original", caps: "ios", scratch: "dd-steady-\(codec)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["executed_plan"] == nil && json["stats"]?["adjustments"] == nil, "\(r.stdout.suffix(600))")
            #expect(try FFprobe(out).streams("audio").first?["codec_name"]?.string == codec)
        }
    }

    @Test("AC-3 that turns 5.1 at 44.1 kHz within the probe's reach is re-encoded at the first frames' rate (48 kHz; the probe's packet scan left the later rate behind) and its largest layout where the device takes it (5.1 for iOS, stereo for a browser)")
    func formatAsItStarts() throws {
        let source = try Self.earlyAC3Change()
        let dir = Media.scratch("early-change")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (caps, channels) in [("ios", 6), ("web", 2)] {
            let out = dir.appendingPathComponent("\(caps).mp4").path
            let r = try Command.run(["prepare", source, "--quality", "original", "--caps", caps, "--output", out, "--json"])
            #expect(r.status == 0, "\(caps): \(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("transcode"), "\(caps): \(r.stdout.prefix(400))")
            // The output's own sample entry (read without decoding).
            #expect(json["output"]?["audio"]?["sample_rate"]?.int == 48000, "\(caps): \(r.stdout.suffix(500))")
            #expect(json["output"]?["audio"]?["channels"]?.int == channels, "\(caps): \(r.stdout.suffix(500))")
        }
    }

    @Test("a Matroska recording written live (no duration in its header) is measured from its last packets (it probed as 0 s)")
    func liveMatroskaDuration() throws {
        let source = try Media.generated("live-8s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                                        "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8",
                                                        "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-live", "1", "-f", "matroska"])
        #expect(try FFprobe(source).formatDuration == 0, "the header says no duration")
        let probe = try Command.probed(source)
        guard case .number(let duration)? = probe["duration_seconds"] else { Issue.record("no duration"); return }
        #expect(abs(duration - 8) < 0.1, "measured \(duration) s")
        guard case .array(let warnings)? = probe["warnings"] else { Issue.record("no warnings"); return }
        #expect(warnings.contains(.string("duration_measured")))
        let dir = Media.scratch("live-mkv")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let video = try #require(try FFprobe(out).duration("video"))
        #expect(abs(video - 8) < 0.1, "the remux keeps all 8 s from the start: \(video)")
        let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
    }

    @Test("H.264 with B-frames from AVI (decode times only) is remuxed with display times from its pictures' order: every frame as the source decodes it, at evenly rising times (it was re-encoded; a plain copy shows frames in decode order)",
          arguments: [("h264-bframes.avi", ["-bf", "3"]),
                      ("h264-pyramid-open-gop.avi", ["-bf", "3", "-x264-params", "b-pyramid=normal:open-gop=1:keyint=20:min-keyint=20"])])
    func aviWithoutPresentationTimes(name: String, x264: [String]) throws {
        let source = try Media.generated(name, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                                "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=3",
                                                "-c:v", "libx264", "-preset", "fast"] + x264 + ["-c:a", "mp3"])
        #expect(try Command.probedStreams(source).first?["presentation_times_missing"] == .bool(true))
        let dir = Media.scratch("avi-bframes")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"), "\(r.stdout.prefix(300))")
        try Self.expectSameFrames(out, as: source, count: 75)
        let video = try #require(try FFprobe(out).duration("video"))
        #expect(abs(video - 3) < 0.05, "\(video) s")
    }

    /// `out`'s video decodes to `count` frames, the same as `source`'s in the same order,
    /// shown at evenly rising times from zero.
    static func expectSameFrames(_ out: String, as source: String, count: Int) throws {
        let made = try frameDigests(out)
        #expect(made.count == count, "\(made.count) frames")
        #expect(made == (try frameDigests(source)), "the copy shows the source's pictures in its order")
        let pts = try displayTimes(out)
        #expect(pts.first == 0, "starts at zero: \(pts.prefix(3))")
        #expect(Set(zip(pts, pts.dropFirst()).map { $1 - $0 }).count == 1, "display times rise evenly: \(pts.prefix(12))")
    }

    /// The MD5 of each picture `path`'s first video stream decodes to, in the order shown;
    /// `passthrough`: every picture the decoder gives, none dropped or repeated to keep a
    /// frame rate (which a source's wrong times would make ffmpeg do).
    static func frameDigests(_ path: String, passthrough: Bool = false) throws -> [Substring] {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v:0"]
                                + (passthrough ? ["-fps_mode", "passthrough"] : []) + ["-f", "framemd5", "-"])
        return r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last }
    }

    /// How many of `source`'s video packets have no presentation time.
    static func untimedPictures(_ source: String) throws -> Int {
        try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts", "-of", "csv=p=0", source])
            .stdout.split(separator: "\n").filter { $0 == "N/A" }.count
    }

    @Test("H.264 with B-frames in an MPEG program stream, where a PES packet that begins two pictures times only the first: the second is shown at its place (two frames traded places, as ffmpeg -c copy writes them)")
    func programStreamUntimedPictures() throws {
        let source = try Media.generated("h264-bframes.mpg", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-f", "lavfi",
                                                             "-i", "sine=sample_rate=48000", "-t", "6", "-c:v", "libx264",
                                                             "-preset", "veryfast", "-bf", "3", "-b:v", "1M", "-c:a", "mp2", "-f", "mpeg"])
        let untimed = try Self.untimedPictures(source)
        #expect(untimed > 0, "the source has pictures without a time")
        let dir = Media.scratch("ps-untimed")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"), "\(r.stdout.prefix(300))")
        #expect(try Command.json(r)["stats"]?["repaired_timestamps"]?.int == untimed)
        // Every picture one frame after the one before it: no two share a time (the video
        // starts a frame's fraction late, where its first picture does against the sound).
        let pts = try Self.displayTimes(out)
        #expect(pts.count == 150)
        #expect(Set(zip(pts, pts.dropFirst()).map { $1 - $0 }) == [3600], "display times rise evenly: \(pts.prefix(12))")
        #expect(try Self.frameDigests(out) == (try Self.frameDigests(source)), "the copy shows the source's pictures in its order")
    }

    @Test("a bare HEVC stream with B-frames (decode times only) is remuxed with display times from its pictures' order: every frame as the source decodes it, at evenly rising times (it was re-encoded)",
          arguments: [("hevc-bframes.hevc", "bframes=3:keyint=50"), ("hevc-pyramid-open-gop.hevc", "bframes=4:b-pyramid=1:keyint=25:open-gop=1")])
    func bareHEVC(name: String, x265: String) throws {
        let source = try Media.generated(name, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                "-c:v", "libx265", "-x265-params", "log-level=error:" + x265, "-f", "hevc"])
        #expect(try Command.probedStreams(source).first?["presentation_times_missing"] == .bool(true))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "hevc-bare") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"), "\(r.stdout.prefix(300))")
            try Self.expectSameFrames(out, as: source, count: 100)
        }
    }

    @Test("HEVC with B-frames in an MPEG program stream whose PES packets begin several pictures: the untimed ones are shown at their places (frames were shown out of order, several at one time)")
    func programStreamUntimedHEVC() throws {
        let source = try Media.generated("hevc-bframes-100k.mpg", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=6",
                                                                  "-c:v", "libx265", "-x265-params", "log-level=error:bframes=3",
                                                                  "-b:v", "100k", "-f", "mpeg"])
        let untimed = try Self.untimedPictures(source)
        #expect(untimed > 50, "most pictures of the source have no time: \(untimed)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "ps-untimed-hevc") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"), "\(r.stdout.prefix(300))")
            #expect((try Command.json(r)["stats"]?["repaired_timestamps"]?.int ?? 0) >= untimed)
            // Every picture one frame after the one before it (a picture the demuxer gave its
            // neighbour's time is moved back to its own, which came without it).
            let pts = try Self.displayTimes(out)
            #expect(pts.count == 150)
            #expect(Set(zip(pts, pts.dropFirst()).map { $1 - $0 }) == [3600], "display times rise evenly: \(pts.prefix(12))")
            // The source's pictures as its decoder shows them (its own times, wrong, would make
            // ffmpeg drop and repeat frames to keep a rate).
            #expect(try Self.frameDigests(out, passthrough: true) == (try Self.frameDigests(source, passthrough: true)),
                    "the copy shows the source's pictures in its order")
        }
    }

    @Test("a bare H.264 elementary stream (no times at all) is remuxed at its frame rate, with B-frames in its pictures' order (it failed verification: its first pictures were placed before zero)")
    func elementaryStream() throws {
        let dir = Media.scratch("elementary")
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, bframes) in [("plain.h264", "0"), ("bframes.h264", "3")] {
            let source = try Media.generated(name, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                    "-c:v", "libx264", "-preset", "fast", "-bf", bframes, "-f", "h264"])
            let out = dir.appendingPathComponent("\(name).mp4").path
            let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
            #expect(r.status == 0, "\(name): \(r.stdout) \(r.stderr.suffix(300))")
            // Pictures decoded out of order get times from their order count.
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"), "\(name): \(r.stdout.prefix(300))")
            try Self.expectSameFrames(out, as: source, count: 100)
            let video = try #require(try FFprobe(out).duration("video"))
            #expect(abs(video - 4) < 0.1, "\(name): \(video) s")
        }
    }

    @Test("an encrypted (CENC) MP4 is delivered as it is where it plays, and refused with a reason where it would have to be decoded (it failed as source_corrupt)")
    func encryptedSource() throws {
        let source = try Media.generated("cenc-3mbps.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2",
                                                      "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=2",
                                                      "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-c:a", "aac",
                                                      "-encryption_scheme", "cenc-aes-ctr",
                                                      "-encryption_key", "76a6c65c5ea762046bd749a2e632ccbb",
                                                      "-encryption_kid", "a7e61c373e219033c21091fa607bf3b8"])
        #expect(try Command.probedStreams(source).allSatisfy { $0["encrypted"] == .bool(true) })
        let dir = Media.scratch("cenc")
        defer { try? FileManager.default.removeItem(at: dir) }
        _ = try deliveredAsIs(source, in: dir)
        try refusedAsEncrypted(source, quality: "1mbps", in: dir)
    }

    /// `source` prepared as `original` for iOS: delivered as the file it is. Returns the output.
    private func deliveredAsIs(_ source: String, in dir: URL) throws -> String {
        let asIs = dir.appendingPathComponent("original" + (source.hasSuffix(".m4v") ? ".m4v" : ".mp4")).path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", asIs, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        #expect(try Command.json(r)["plan"]?["delivery_format"] == .string("original"))
        return asIs
    }

    /// `source` prepared at `quality` for iOS: exit 3, `source_unsupported` because it is
    /// encrypted, and no output.
    private func refusedAsEncrypted(_ source: String, quality: String, in dir: URL) throws {
        let out = dir.appendingPathComponent("\(quality).mp4").path
        let refused = try Command.run(["prepare", source, "--quality", quality, "--caps", "ios", "--output", out, "--json"])
        #expect(refused.status == 3, "\(refused.stdout)")
        let error = try Command.json(refused)["error"]
        #expect(error?["code"] == .string("source_unsupported") && error?["message"]?.string?.contains("encrypted") == true,
                "\(refused.stdout)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test("an iTunes purchase (FairPlay: drmi/drms sample entries, no encryption side data) is marked encrypted: delivered as it is, refused with a reason otherwise (it failed at decode as codec \"none\")")
    func fairPlaySource() throws {
        let source = try Media.fairPlayLike()
        let streams = try Command.probedStreams(source)
        #expect(streams.allSatisfy { $0["encrypted"] == .bool(true) }, "\(streams)")
        #expect(streams.first?["codec"] == .string("h264"), "the wrapped codec, from its avcC record")
        let dir = Media.scratch("fairplay")
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(FileManager.default.contentsEqual(atPath: try deliveredAsIs(source, in: dir), andPath: source))
        try refusedAsEncrypted(source, quality: "1mbps", in: dir)
    }

    @Test("a Windows Media file with DRM (a content encryption object in its header) is marked encrypted and refused with that reason, not decoded into garbage")
    func windowsMediaDRM() throws {
        let source = try Media.windowsMediaDRM()
        let streams = try Command.probedStreams(source)
        #expect(streams.count == 2 && streams.allSatisfy { $0["encrypted"] == .bool(true) }, "\(streams)")
        #expect(try Command.probedStreams(try Media.generated("wm-plain.wmv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=1",
                                                                              "-c:v", "wmv2"])).allSatisfy { $0["encrypted"] == nil })
        let dir = Media.scratch("wmdrm")
        defer { try? FileManager.default.removeItem(at: dir) }
        try refusedAsEncrypted(source, quality: "5mbps", in: dir)
    }

    @Test("a recording that lost its only keyframe, or whose keyframe does not decode, ends with exit 3 and a reason, not a retryable verify_failed (found by fuzzing)")
    func noKeyframe() throws {
        // No keyframe at all: the copy stops, and the plan's encode finds nothing to decode
        // either. A keyframe that does not decode: the source shows the same damage.
        for source in [try Media.withoutKeyframe(), try Media.undecodableKeyframe()] {
            let dir = Media.scratch("no-keyframe-cli")
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out.mp4").path
            let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
            let json = try Command.json(r)
            #expect(r.status == 3, "\(source): \(r.stdout)")
            #expect(json["error"]?["retryable"] == .bool(false) && json["error"]?["code"] != .string("verify_failed"), "\(r.stdout)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
        }
    }

    @Test("Dolby Vision profile 7 (UHD Blu-ray, enhancement layer in the stream) is remuxed as its HDR10 base layer, without a configuration record MP4 players would refuse")
    func dolbyVisionProfile7() throws {
        // The profile 8 sample's record rewritten to say profile 7 (base, enhancement and RPU,
        // HDR10-compatible), then carried into Matroska as a UHD Blu-ray remux would be.
        let mp4 = try Media.generated("dv7-record.mp4") { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Media.shared("sp_sparks_dovi_8.mp4"))))
            guard let at = (0..<(bytes.count - 9)).first(where: { bytes[$0..<$0 + 4].elementsEqual("dvvC".utf8) }) else {
                throw TestFailure("no dvvC box")
            }
            let p = at + 4, level = (Int(bytes[p + 2] & 1) << 5) | Int(bytes[p + 3] >> 3)
            bytes.replaceSubrange(at..<at + 4, with: Array("dvcC".utf8))
            bytes[p + 2] = UInt8(7 << 1 | (level >> 5) & 1)
            bytes[p + 3] = UInt8((level & 0x1F) << 3 | 0b111)
            bytes[p + 4] = 6 << 4 | (bytes[p + 4] & 0x0F)
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
        let source = try Media.generated("dv7.mkv", ["-i", mp4, "-c", "copy", "-strict", "unofficial"])
        let streams = try Command.probedStreams(source)
        #expect(streams.first?["dolby_vision"]?["profile"]?.int == 7, "\(streams.first ?? .null)")
        let dir = Media.scratch("dv7")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "apple-tv-4k", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_streams", "-of", "json", out])
        guard case .array(let list)? = try JSONValue.parse(Array(probe.stdout.utf8))["streams"], let v = list.first else {
            Issue.record("no video stream: \(probe.stderr)")
            return
        }
        #expect(v["codec_tag_string"] == .string("hvc1") && v["color_transfer"] == .string("smpte2084"))
        #expect(!probe.stdout.contains("DOVI configuration record"), "no Dolby Vision record in the MP4")
        // Nor its RPUs (and enhancement layer): the source has an RPU in every access unit.
        func rpus(_ path: String) throws -> Int {
            let raw = dir.appendingPathComponent("video.hevc").path
            #expect(try Run.command("ffmpeg", ["-v", "error", "-y", "-i", path, "-map", "0:v:0", "-c", "copy", "-f", "hevc", raw]).status == 0)
            let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
            return (0..<max(0, b.count - 3)).filter { b[$0] == 0 && b[$0 + 1] == 0 && b[$0 + 2] == 1 && Int(b[$0 + 3] >> 1) & 0x3f == 62 }.count
        }
        #expect(try rpus(source) > 0)
        #expect(try rpus(out) == 0)
        guard case .array(let equivalent)? = try Command.json(r)["stats"]?["ffmpeg_equivalent"] else {
            Issue.record("no ffmpeg_equivalent")
            return
        }
        #expect(equivalent.contains(.string("filter_units=remove_types=62|63")), "\(equivalent)")
    }

    @Test("an MP4's subtitle tracks (HandBrake's) keep their names and the forced flag of their sample description; of two default subtitle tracks only the first stays default, so players keep them as one choice")
    func subtitleTrackMetadata() throws {
        let dir = Media.scratch("cli-subtitle-meta")
        defer { try? FileManager.default.removeItem(at: dir) }
        var inputs: [String] = []
        for (k, text) in ["Hello", "Bonjour"].enumerated() {
            let srt = dir.appendingPathComponent("\(k).srt")
            try Data("1\n00:00:01,000 --> 00:00:02,500\n\(text)\n".utf8).write(to: srt)
            inputs += ["-i", srt.path]
        }
        let av = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=4"]
        let maps = ["-map", "0:v", "-map", "1:a", "-map", "2:s", "-map", "3:s", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "ac3"]
        // An MP4 whose track names are handler names, its French track forced only in its
        // sample description's display flags (0xC0000000), as HandBrake writes it.
        let mp4 = dir.appendingPathComponent("hb.mp4").path
        var r = try Run.command("ffmpeg", ["-nostdin", "-v", "error"] + av + inputs + maps + ["-c:s", "mov_text",
            "-metadata:s:a:0", "handler_name=Stereo mix", "-metadata:s:s:0", "handler_name=English (styled)", "-metadata:s:s:1", "handler_name=Français forcé",
            "-metadata:s:s:1", "language=fra", mp4])
        #expect(r.status == 0, "\(r.stderr)")
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: mp4)))
        let tx3g = Array("tx3g".utf8)
        let entries = (0..<(bytes.count - 4)).filter { Array(bytes[$0..<($0 + 4)]) == tx3g }
        try #require(entries.count == 2)
        bytes[entries[1] + 12] = 0xC0   // after the type: six reserved bytes, the data reference index, then the flags
        try Data(bytes).write(to: URL(fileURLWithPath: mp4))
        // A Matroska file whose English and English forced tracks are both marked default.
        let mkv = dir.appendingPathComponent("twodefaults.mkv").path
        r = try Run.command("ffmpeg", ["-nostdin", "-v", "error"] + av + inputs + maps + ["-c:s", "srt", "-disposition:s:0", "default",
            "-disposition:s:1", "default+forced", mkv])
        #expect(r.status == 0, "\(r.stderr)")

        for (source, names, forced) in [(mp4, ["Stereo mix", "English (styled)", "Français forcé"], [false, true]),
                                        (mkv, ["SoundHandler", "SubtitleHandler", "SubtitleHandler"], [false, true])] {
            let out = dir.appendingPathComponent("out.mp4").path
            r = try Command.run(["prepare", source, "--quality", "original", "--caps", "web", "--output", out, "--json"])
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            guard case .array(let planned)? = try Command.json(r)["plan"]?["subtitles"] else { Issue.record("no subtitles: \(r.stdout)"); continue }
            #expect(planned.map { $0["forced"] } == forced.map { .bool($0) }, "\(source)")
            let probe = try FFprobe(out)
            let tracks = probe.streams("audio") + probe.streams("subtitle")
            #expect(tracks.map { $0["tags"]?["handler_name"]?.string } == names.map { Optional($0) }, "\(source)")
            let subtitles = probe.streams("subtitle")
            #expect(subtitles.map { $0["disposition"]?["forced"] } == forced.map { .number($0 ? 1 : 0) }, "\(source)")
            #expect(subtitles.map { $0["disposition"]?["default"] } == [.number(1), .number(0)], "one default (enabled) subtitle track: \(source)")
            try? FileManager.default.removeItem(atPath: out)
        }
    }

    @Test("styles inside styles, resets and colours reach the mov_text track as the source has them (libavcodec's encoder alone ended the outer style, ignored resets and \\c; a reset left the colour on)")
    func nestedStyles() throws {
        let dir = Media.scratch("cli-styles")
        defer { try? FileManager.default.removeItem(at: dir) }
        let ass = dir.appendingPathComponent("styles.ass")
        try Data(("[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, Bold, Italic, Underline\n"
                  + "Style: Default,Arial,20,&H00FFFFFF,0,0,0\n\n[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
                  + "Dialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,{\\b1}bold {\\i1}both{\\i0} bold{\\b0} plain\n"
                  + "Dialogue: 0,0:00:03.00,0:00:04.00,Default,,0,0,0,,{\\i1}Italic{\\r} then normal\n"
                  + "Dialogue: 0,0:00:05.00,0:00:06.00,Default,,0,0,0,,{\\c&H0000FF&}red{\\c} plain\n"
                  + "Dialogue: 0,0:00:06.20,0:00:06.80,Default,,0,0,0,,{\\c&H0000FF&}rouge{\\r} normal\n").utf8).write(to: ass)
        let source = dir.appendingPathComponent("styles.mkv").path
        var r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=7", "-f", "lavfi",
                                           "-i", "sine=sample_rate=48000:duration=7", "-i", ass.path, "-c:v", "libx264", "-preset", "ultrafast",
                                           "-c:a", "ac3", "-c:s", "ass", source])
        #expect(r.status == 0, "\(r.stderr)")
        let out = dir.appendingPathComponent("out.mp4").path
        r = try Command.run(["prepare", source, "--quality", "original", "--caps", "web", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
        // As libavcodec's mov_text decoder gives the style records back ({\r} ends a record).
        let text = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:0", "-f", "ass", "-"]).stdout
        let lines = text.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("Dialogue:") }.map { String($0.split(separator: ",", maxSplits: 9).last ?? "") }
        #expect(lines == ["{\\b1}bold {\\r}{\\b1}{\\i1}both{\\r}{\\b1} bold{\\r} plain", "{\\i1}Italic{\\r} then normal",
                          "{\\1c&HFF&}red{\\r} plain", "{\\1c&HFF&}rouge{\\r} normal"], "\(lines) \(text)")
    }

    @Test("a karaoke line drawn a syllable per event (each placed by \\pos, lit up in turn, with a glow layer a pixel off) reads as one line, left to right, its spaces where the gaps are, beside the dialogue under it: it was listed a syllable per line, reshuffled as each lit up")
    func karaokeLineOnce() throws {
        let dir = Media.scratch("cli-karaoke")
        defer { try? FileManager.default.removeItem(at: dir) }
        // An effect template's output: each syllable waits, lights up (with a glow under it),
        // then stays, centred where the style's font (Arial at size 46: 40 px an em) lays it out in the line
        // "Kimi no namae wa", to the pixel.
        let advance: [Character: Double] = ["K": 0.667, "i": 0.222, "m": 0.833, "n": 0.556, "o": 0.556, "a": 0.556, "e": 0.556, "w": 0.722, " ": 0.278]
        func width(_ s: String) -> Double { s.reduce(0) { $0 + 40 * (advance[$1] ?? 0.556) } }
        var events: [String] = []
        var x = 300.0
        for (i, syllable) in ["Ki", "mi ", "no ", "na", "ma", "e ", "wa"].enumerated() {
            let text = syllable.trimmingCharacters(in: .whitespaces), centre = Int((x + width(text) / 2).rounded())
            let lit = String(format: "0:00:%05.2f", 1.0 + 0.4 * Double(i)), out = String(format: "0:00:%05.2f", 1.4 + 0.4 * Double(i))
            events += ["Dialogue: 0,0:00:01.00,\(lit),OP,,0,0,0,fx,{\\an5\\pos(\(centre),50)\\fad(200,0)}\(text)",
                       "Dialogue: 2,\(lit),\(out),OP,,0,0,0,fx,{\\an5\\pos(\(centre),50)\\t(\\fscx120)}\(text)",
                       "Dialogue: 1,\(lit),\(out),OP,,0,0,0,fx,{\\an5\\pos(\(centre + 1),51)\\blur4}\(text)",
                       "Dialogue: 0,\(out),0:00:05.00,OP,,0,0,0,fx,{\\an5\\pos(\(centre),50)}\(text)"]
            x += width(syllable)
        }
        events.append("Dialogue: 0,0:00:02.00,0:00:04.00,Default,,0,0,0,,Your name is...")
        let ass = dir.appendingPathComponent("karaoke.ass")
        try Data(("[Script Info]\nScriptType: v4.00+\nPlayResX: 1280\nPlayResY: 720\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, Alignment\n"
                  + "Style: Default,Arial,40,2\nStyle: OP,Arial,46,8\n\n[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
                  + events.joined(separator: "\n") + "\n").utf8).write(to: ass)
        let source = dir.appendingPathComponent("karaoke.mkv").path
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                           "-i", ass.path, "-c:v", "libx264", "-preset", "ultrafast", "-c:s", "ass", source])
        #expect(r.status == 0, "\(r.stderr)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "cli-karaoke-out") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let cues = try Command.cues(out)
            let texts = Set(cues.map(\.text))
            #expect(texts == ["Kimi no namae wa", "Kimi no namae wa Your name is..."], "\(cues)")
            #expect(cues.first.map { abs($0.start - 1) < 0.05 } == true && cues.last.map { abs($0.end - 5) < 0.05 } == true, "\(cues)")
        }
    }

    @Test("AAC in LATM framing (DVB, ISDB-Tb recordings) is copied into the MP4 as AAC, its frames taken out of LATM (it was re-encoded; before that its copy failed at the MP4 header as a retryable io_error)")
    func latmAudio() throws {
        let source = try Media.generated("latm-aac.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                                         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
                                                         "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-b:a", "96k",
                                                         "-mpegts_flags", "latm", "-f", "mpegts"])
        #expect(try Command.probedStreams(source).contains { $0["codec"] == .string("aac_latm") })
        let dir = Media.scratch("latm")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let json = try Command.json(r)
        #expect(json["plan"]?["audio"]?["action"] == .string("copy") && json["plan"]?["audio"]?["codec"] == .string("aac"))
        #expect(json["plan"]?["video"]?["action"] == .string("copy"))
        let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
        #expect(try FFprobe(out).streams("audio").first?["codec_name"] == .string("aac"))
    }

    @Test("sound whose times stand still (every packet at 0) is timed by its samples: RealAudio 1.0 from ffmpeg's RealMedia muxer, re-encoded, keeps its 12 s (it came out 0.06 s), and AAC in Matroska, copied, its 6 s (27 ms, as ffmpeg's copy has it); the probe's bitrate of that AAC is its bytes over those seconds (it read 19.9 Mbit/s)")
    func soundTimesStandStill() throws {
        let real = try Media.generated("rv20-ra144-12s.rm", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15:duration=12",
                                                            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=8000:duration=12",
                                                            "-c:v", "rv20", "-b:v", "400k", "-c:a", "real_144", "-ac", "1"])
        let still = try Media.generated("aac-times-at-0.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                                              "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                                                              "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-b:a", "96k",
                                                              "-bsf:a", "setts=ts=0"])
        let sound = try #require(try Command.probedStreams(still).first { $0["type"] == .string("audio") })
        #expect((80_000...120_000).contains(sound["bit_rate"]?.int ?? 0), "\(sound)")
        for (source, seconds, action) in [(real, 12.0, "transcode"), (still, 6.0, "copy")] {
            try Command.prepare(source, quality: "original", caps: "ios", scratch: "times-stand-still") { r, out in
                #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
                #expect(try Command.json(r)["plan"]?["audio"]?["action"] == .string(action))
                let audio = try FFprobe(out).duration("audio") ?? 0
                #expect(abs(audio - seconds) < 0.15, "\(source): \(audio) s of sound")
            }
        }
    }

    @Test("a sound-only M4A whose chapters run 5 s past its 30 s of sound (an audiobook's, a podcast's) is re-encoded whole for a browser, and a second language copied whole: the probe's look at its end had become the reader's start, and 0.1 s came out, verified")
    func soundOnlyLongerHeader() throws {
        let source = try Media.generated("alac-and-aac-chapters-past-the-sound.m4a") { tmp in
            let chapters = tmp + ".txt"
            defer { try? FileManager.default.removeItem(atPath: chapters) }
            try Data((";FFMETADATA1\n" + [(0, 10_000), (10_000, 20_000), (20_000, 35_000)].enumerated().map { i, c in
                "[CHAPTER]\nTIMEBASE=1/1000\nSTART=\(c.0)\nEND=\(c.1)\ntitle=Part \(i + 1)\n"
            }.joined()).utf8).write(to: URL(fileURLWithPath: chapters))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=30",
                                               "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=44100:duration=30", "-i", chapters,
                                               "-map", "0:a", "-map", "1:a", "-map_chapters", "2", "-c:a:0", "alac", "-c:a:1", "aac",
                                               "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=fra", "-disposition:a:1", "0",
                                               "-f", "mp4", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
        for (caps, language) in [("web", nil), ("ios", "fra")] as [(String, String?)] {
            let dir = Media.scratch("sound-only-longer-header")
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out.mp4").path
            let r = try Command.run(["prepare", source, "--quality", "original", "--caps", caps, "--output", out, "--json"]
                                    + (language.map { ["--audio-language", $0] } ?? []))
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let seconds = try FFprobe(out).duration("audio") ?? 0
            #expect(abs(seconds - 30) < 0.2, "\(caps): \(seconds) s of sound")
        }
    }

    @Test("one ADTS header damaged by a reception error is a damaged frame, not a format change: the AAC is still copied")
    func glitchedHeaderIsNoChange() throws {
        let clean = try Media.generated("stereo-aac-6s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                                             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                                                             "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-ac", "2",
                                                             "-f", "mpegts"])
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: clean)))
        // The 100th stereo 48 kHz LC header (FF F1 4C 80) made to say 5.1 (4D 80), 2 s in.
        var seen = 0, flipped = false
        for i in 0..<(bytes.count - 4) where bytes[i] == 0xFF && bytes[i + 1] == 0xF1 && bytes[i + 2] == 0x4C && bytes[i + 3] == 0x80 {
            seen += 1
            if seen == 100 { bytes[i + 2] = 0x4D; flipped = true; break }
        }
        #expect(flipped)
        let dir = Media.scratch("adts-glitch")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("glitch.ts")
        try Data(bytes).write(to: source)
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source.path, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let json = try Command.json(r)
        #expect(json["stats"]?["adjustments"] == nil, "\(r.stdout.suffix(400))")
        #expect(json["plan"]?["audio"]?["action"] == .string("copy"))
    }

    @Test("HLS renditions switched for one segment (MPEG-TS segments joined: 640x360, then 2 s at 480x270 with one keyframe, then 640x360): the copy stops at the new size and the picture is re-encoded; it needed two keyframes in a row at the new size and went out under the first size's sample entry (found by a helper's audit)")
    func renditionSwitchedForOneSegment() throws {
        let segments = try [(640, 360, 0), (480, 270, 2), (640, 360, 4)].map { w, h, start in
            try Media.generated("rendition-\(w)x\(h)-at\(start).ts", ["-f", "lavfi", "-i", "testsrc2=size=\(w)x\(h):rate=30:duration=2",
                                                                        "-c:v", "libx264", "-g", "300", "-output_ts_offset", "\(start)", "-f", "mpegts"])
        }
        let joined = try Media.generated("renditions-joined.ts") { tmp in
            try Data(segments.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(joined, quality: "original", caps: "android", scratch: "rendition-switch") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let adjustments = try Command.json(run)["stats"]?["adjustments"]?.elements?.compactMap(\.string) ?? []
            #expect(adjustments.contains { $0.hasPrefix("video_reencoded: the source's picture changes from 640x360 to 480x270") }, "\(adjustments)")
            #expect(try FFprobe.decodeErrors(out) == "")
            #expect(try abs((FFprobe(out).duration("video") ?? 0) - 6) < 0.2)
        }
    }

    @Test("a recording whose AAC goes from stereo to 5.1 and whose H.264 goes from SD to HD mid-stream: the sound, seen changing by the probe, is encoded at 5.1 from the start, and the picture's copy stops at the change and is re-encoded (one MP4 sample entry described only the first picture size)")
    func formatChangesInCopy() throws {
        let source = try Self.recording()
        let dir = Media.scratch("format-change")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("remux.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "original", "--caps", "ios", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let json = try Command.json(r)
        #expect(json["plan"]?["audio"]?["action"] == .string("transcode"), "the probe's samples saw the sound change")
        #expect(json["plan"]?["video"]?["action"] == .string("copy"), "the plan, made from the file's start, copies the picture")
        #expect(json["plan"]?["video_fallback"]?["action"] == .string("transcode"))
        guard case .array(let adjustments)? = json["stats"]?["adjustments"] else {
            Issue.record("no adjustment reported: \(r.stdout.suffix(400))")
            return
        }
        #expect(adjustments.count == 1, "\(adjustments)")
        #expect(adjustments.contains { $0.string?.hasPrefix("video_reencoded: the source's picture changes from 640x480 to 1280x720") == true },
                "\(adjustments)")
        // The plan as carried out, as the daemon stores it: a transcode at the rung of the
        // picture's encode, with the sound's encode, both said in its reasons.
        let executed = try #require(json["executed_plan"], "no executed_plan: \(r.stdout.suffix(400))")
        #expect(executed["delivery_format"] == .string("transcode"))
        #expect(executed["video"]?["action"] == .string("transcode") && executed["video_fallback"] == nil)
        #expect(executed["video"]?["bitrate_kbps"]?.int ?? .max <= executed["target_bitrate_kbps"]?.int ?? 0, "\(executed)")
        #expect(executed["effective_quality"] != json["plan"]?["effective_quality"], "a rung of the ladder, not original: \(executed)")
        #expect(executed["audio"]?["action"] == .string("transcode"))
        let reasons = executed["reasons"].map { "\($0)" } ?? ""
        #expect(reasons.contains("video_reencoded") && reasons.contains("audio_format_changes"), "\(reasons)")
        #expect(json["output"]?["audio"]?["codec"] == executed["audio"]?["codec"] && json["output"]?["audio"]?["channels"]?.int == 6,
                "\(json["output"] ?? .null)")
        let decodeAudio = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:a", "-f", "null", "-"])
        #expect(decodeAudio.status == 0 && decodeAudio.stderr.isEmpty, "the sound decodes to the end: \(decodeAudio.stderr.prefix(300))")
        let audio = try #require(try FFprobe(out).duration("audio"))
        #expect(audio > 9.5, "the sound lasts \(audio) s of 10")
        let v = try FFprobe(out).streams("video")[0]
        #expect(v["width"]?.int == 640 && v["height"]?.int == 480, "the frame is the first picture's: \(v)")
        let crop = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-ss", "8", "-i", out, "-frames:v", "10",
                                              "-vf", "cropdetect=round=2:reset=1", "-f", "null", "-"])
        #expect(crop.stderr.contains("crop=640:360:"), "the HD part is letterboxed: \(crop.stderr.suffix(200))")
        let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
    }

    @Test("a 16:9 programme after a 4:3 one is letterboxed in the transcode's frame, not squeezed into it")
    func pictureShapeChange() throws {
        let source = try Self.recording()
        let dir = Media.scratch("shape-change")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("1mbps.mp4").path
        let r = try Command.run(["prepare", source, "--quality", "1mbps", "--caps", "web", "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let v = try FFprobe(out).streams("video")[0]
        let width = try #require(v["width"]?.int), height = try #require(v["height"]?.int)
        #expect(abs(Double(width) / Double(height) - 4.0 / 3) < 0.02, "the frame keeps the first picture's shape: \(width)x\(height)")
        func picture(from seconds: Int) throws -> (Int, Int)? {
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-ss", "\(seconds)", "-i", out, "-frames:v", "10",
                                               "-vf", "cropdetect=round=2:reset=1", "-f", "null", "-"])
            guard let line = r.stderr.split(separator: "\n").last(where: { $0.contains("crop=") }),
                  let range = line.range(of: "crop=") else { return nil }
            let parts = line[range.upperBound...].prefix { $0 != " " }.split(separator: ":").compactMap { Int($0) }
            return parts.count == 4 ? (parts[0], parts[1]) : nil
        }
        let first = try #require(try picture(from: 1)), second = try #require(try picture(from: 8))
        #expect(first == (width, height), "the 4:3 part fills the frame: \(first)")
        #expect(second.0 == width && abs(Double(second.0) / Double(second.1) - 16.0 / 9) < 0.03,
                "the 16:9 part keeps its shape inside the frame: \(second) in \(width)x\(height)")
    }
}

/// Times that jump far ahead and come back (`TimelineOutliers`): a stretch of a recording
/// written twice, further back than where it belongs.
@Suite("a stretch of a recording written twice")
struct RepeatedStretchTests {
    /// 4 s of H.264 (2.5 Mbit/s, above the lowest rung) and AAC in MPEG-TS.
    static func clean() throws -> String {
        try Media.generated("stretch-clean.ts", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=4",
                                                 "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                 "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "2500k",
                                                 "-c:a", "aac", "-f", "mpegts"])
    }

    /// A tenth of `clean` (whole 188-byte packets) from 75 % of the file written again at
    /// 30 %: pictures and sound 2 s ahead of their neighbours, then the file goes on.
    /// `late`: from 30 % written again at 75 %, 2 s behind.
    static func repeated(late: Bool) throws -> String {
        let source = try clean()
        return try Media.generated(late ? "stretch-repeated-late.ts" : "stretch-repeated.ts") { tmp in
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
            let early = bytes.count * 3 / 10 / 188 * 188, later = bytes.count * 3 / 4 / 188 * 188
            let at = late ? later : early, from = late ? early : later
            try Data(bytes[..<at] + bytes[from..<from + bytes.count / 10 / 188 * 188] + bytes[at...]).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// `clean` with three pictures from 1.04 s earlier (26 frames) written again after the
    /// 60th: a run just over the outlier filter's jump, whose return is within that jump
    /// of both where it left and where the run stood.
    static func repeatedPictures() throws -> String {
        let source = try clean()
        return try Media.generated("stretch-three-pictures.ts") { tmp in
            let packets = try Splice.packets(source)
            // ffmpeg's muxer writes each picture as one PES, its first TS packet marked as a
            // unit start.
            let isVideo = { (p: [UInt8]) in Splice.pid(p) == Splice.videoPID }
            let starts = packets.indices.filter { isVideo(packets[$0]) && packets[$0][1] & 0x40 != 0 }
            let copied = packets[starts[34]..<starts[37]].filter(isVideo)
            try Data((packets[..<starts[61]] + copied + packets[starts[61]...]).joined()).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("three pictures written again 1.04 s late are left out, counted: remux and transcode keep every picture once (the return, 1 s after the run, was taken for the run going on: three pictures too many and a 1 s hole)",
          arguments: ["original", "1mbps"])
    func threePictures(_ quality: String) throws {
        let source = try Self.repeatedPictures(), clean = try Self.clean()
        try Command.prepare(source, quality: quality, caps: "web", scratch: "three-pictures-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            // The three left out; a copy counts the one before them too, which the transport's
            // continuity counters mark as damaged (a re-encode counts what its decoder rejects).
            #expect(try Command.json(r)["stats"]?["corrupt_packets"] == .number(quality == "original" ? 4 : 3))
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(clean, "v"))
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 4) < 0.1)
        }
    }

    /// `clean` with a stretch cut out: a real jump, which goes on from its new time.
    static func cut() throws -> String {
        let source = try clean()
        return try Media.generated("stretch-cut.ts") { tmp in
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
            let at = bytes.count * 3 / 10 / 188 * 188
            try Data(bytes[..<at] + bytes[(at + bytes.count / 10 / 188 * 188)...]).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("the repeated stretch is left out, counted as damage: remux and transcode keep the whole 4 s, every picture and sound frame once, in sync (written early, the transcode came out 0.3 s long and the remux squeezed 4 s of sound into 0.2; written late, it was taken for a splice and the rest of the file moved 2 s on)",
          arguments: [("original", false), ("1mbps", false), ("original", true), ("1mbps", true)])
    func leftOut(_ quality: String, late: Bool) throws {
        let source = try Self.repeated(late: late), clean = try Self.clean()
        try Command.prepare(source, quality: quality, caps: "web", scratch: "stretch-\(quality)-\(late)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"] == .string(quality == "original" ? "remux" : "transcode"))
            if case .number(let n)? = json["stats"]?["corrupt_packets"] { #expect(n > 0) } else { Issue.record("no corrupt_packets") }
            let probe = try FFprobe(out)
            #expect(abs((probe.duration("video") ?? 0) - 4) < 0.1)
            #expect(abs((probe.duration("audio") ?? 0) - 4) < 0.1)
            #expect(abs((probe.startTime("audio") ?? -1) - (probe.startTime("video") ?? 1)) < 0.05)
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(clean, "v"))
            // AAC re-encoded from the same sound may differ by a frame at the end.
            #expect(abs(try FFprobe.packetCount(out, "a") - FFprobe.packetCount(clean, "a")) <= 1)
        }
    }

    /// 4 s of H.264 with B-frames (so pictures carry decode times of their own) and AAC in
    /// MPEG-TS, a keyframe every 2 s.
    static func reordered() throws -> String {
        try Media.generated("stretch-reordered.ts", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=4",
                                                     "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                     "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", "50", "-b:v", "2500k",
                                                     "-c:a", "aac", "-f", "mpegts"])
    }

    /// Where a flipped bit put a time 3 s late.
    enum Damage: String, CaseIterable, Sendable {
        /// The 30th picture's decode time alone, and a sound PES's time.
        case decodeTime
        /// Both of the 30th picture's times, and a sound PES's time.
        case bothTimes
        /// The first picture's presentation time alone.
        case firstPresentationTime
        /// Both of the second picture's times: the stream's step not yet seen.
        case secondPictureTimes
    }

    /// `reordered` with PES header times damaged as `damage` says.
    static func damagedTimes(_ damage: Damage) throws -> String {
        let source = try reordered()
        return try Media.generated("stretch-damaged-\(damage.rawValue).ts") { tmp in
            var packets = try Splice.packets(source)
            let shift: Int64 = 3 * 90000
            let pictures = packets.indices.filter { Splice.pid(packets[$0]) == Splice.videoPID && packets[$0][1] & 0x40 != 0 }
            if damage == .firstPresentationTime {
                _ = Splice.shiftTimes(&packets[pictures[0]], pts: shift, dts: 0)
            } else if damage == .secondPictureTimes {
                _ = Splice.shiftTimes(&packets[pictures[1]], pts: shift, dts: shift)
            } else {
                // The 30th picture with a decode time of its own: a reference picture (P) in
                // the middle of the first 2 s, which the B-frames around it and every picture
                // to the next keyframe need.
                var withDTS = 0
                for i in pictures {
                    var copy = packets[i]
                    guard Splice.shiftTimes(&copy, pts: 0, dts: 0) == true else { continue }
                    withDTS += 1
                    guard withDTS == 30 else { continue }
                    _ = Splice.shiftTimes(&packets[i], pts: damage == .bothTimes ? shift : 0, dts: shift)
                    break
                }
                guard withDTS == 30 else { throw TestFailure("only \(withDTS) pictures with decode times") }
                let sounds = packets.indices.filter { Splice.pid(packets[$0]) == Splice.audioPID && packets[$0][1] & 0x40 != 0 }
                _ = Splice.shiftTimes(&packets[sounds[sounds.count / 3]], pts: shift, dts: shift)
            }
            try Data(packets.joined()).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("a picture whose decode time alone, or both of whose times, are damaged 3 s late, a sound 3 s late, a first picture shown 3 s late and a second picture 3 s late keep their place: the copy decodes to the undamaged file's pictures, and remux and transcode keep every picture and sound (they were left out: the pictures to the next keyframe lost their reference, a gap of silence was filled; the late first picture was taken for the start, and the first 3 s were lost)",
          arguments: Damage.allCases, ["original", "1mbps"])
    func damagedTimesRepaired(damage: Damage, quality: String) throws {
        let source = try Self.damagedTimes(damage), clean = try Self.reordered()
        try Command.prepare(source, quality: quality, caps: "web", scratch: "damaged-times-\(damage.rawValue)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let stats = try Command.json(r)["stats"]
            #expect(stats?["corrupt_packets"] == .number(0))
            #expect(stats?["repaired_timestamps"]?.int ?? 0 >= ([.firstPresentationTime, .secondPictureTimes].contains(damage) ? 1 : 2))
            #expect(stats?["audio_gaps_filled"]?.int ?? 0 == 0)
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(clean, "v"))
            #expect(abs(try FFprobe.packetCount(out, "a") - FFprobe.packetCount(clean, "a")) <= 1)
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 4) < 0.1)
            if quality == "original" {
                #expect(try FormatChangeTests.frameDigests(out) == FormatChangeTests.frameDigests(clean))
            }
        }
    }

    @Test("a second of a recording written again right after itself (more sound frames than a splice is judged by) is left out: remux and transcode last 4 s, every picture and sound frame once (taken for a splice back, it played twice: 5 s)",
          arguments: ["original", "1mbps"])
    func secondWrittenAgain(_ quality: String) throws {
        let clean = try Self.reordered()
        let source = try Media.generated("stretch-second-again.ts") { tmp in
            let packets = try Splice.packets(clean)
            // The 188-byte packets of the second second, again after themselves.
            let from = packets.count / 4, to = packets.count / 2
            try Data((packets[..<to] + packets[from..<to] + packets[to...]).joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: quality, caps: "web", scratch: "second-again-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            if case .number(let n)? = try Command.json(r)["stats"]?["corrupt_packets"] { #expect(n > 40) } else { Issue.record("no corrupt_packets") }
            let probe = try FFprobe(out)
            #expect(abs((probe.duration("video") ?? 0) - 4) < 0.1)
            #expect(abs((probe.duration("audio") ?? 0) - 4) < 0.1)
            // The picture the repeat cut in two is one more (its first part).
            #expect(abs(try FFprobe.packetCount(out, "v") - FFprobe.packetCount(clean, "v")) <= 1)
            #expect(abs(try FFprobe.packetCount(out, "a") - FFprobe.packetCount(clean, "a")) <= 1)
        }
    }

    /// 4 s of H.264 and AAC in Matroska, whose blocks carry one time each.
    static func matroska() throws -> String {
        try Media.generated("stretch-blocks.mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=4",
                                                   "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                   "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-c:a", "aac"])
    }

    @Test("a Matroska block timed a fraction of a second off, a picture's or a sound's, early or late, keeps its place: the copy decodes to the undamaged file's pictures, every sound frame kept (the picture was shown there, displacing the 11 after it; 24 sound frames were dropped)",
          arguments: [(1, 30, 500), (1, 30, -300), (1, 30, 150), (2, 40, 500), (2, 40, -400)])
    func blockTimeRepaired(track: Int, nth: Int, milliseconds: Int) throws {
        let clean = try Self.matroska()
        let source = try Media.generated("stretch-block-\(track)-\(nth)-\(milliseconds).mkv") { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: clean)))
            // The 31st picture is in the first 2 s of a 2 s GOP.
            guard Matroska.shiftBlock(&bytes, track: track, nth: nth, milliseconds: milliseconds) else {
                throw TestFailure("no such block")
            }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "original", caps: "web", scratch: "block-\(track)-\(nth)-\(milliseconds)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let stats = try Command.json(r)["stats"]
            #expect(stats?["corrupt_packets"] == .number(0))
            #expect(stats?["repaired_timestamps"] == .number(1))
            #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(clean, "a"))
            #expect(try FormatChangeTests.frameDigests(out) == FormatChangeTests.frameDigests(clean))
            let probe = try FFprobe(out)
            #expect(abs((probe.startTime("video") ?? 1) - (probe.startTime("audio") ?? 0)) < 0.05)
        }
    }

    @Test("a stretch cut out is a real jump: nothing after it is left out")
    func cutKept() throws {
        let source = try Self.cut()
        try Command.prepare(source, quality: "original", caps: "web", scratch: "stretch-cut") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            // The cut breaks the transport's continuity counters: the packet it ends is counted
            // as damaged (it may have lost its tail), and kept.
            #expect(json["stats"]?["corrupt_packets"] == .number(1))
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            // Every sound frame, and frames of silence where the stretch was.
            #expect(json["stats"]?["audio_gaps_filled"]?.int == 1)
            #expect(try FFprobe.packetCount(out, "a") > FFprobe.packetCount(source, "a"))
        }
    }
}

@Suite("a recording whose time steps back at a splice")
struct BackwardSpliceTests {
    /// Two 6-second MPEG-TS recordings back to back, the second timed from 3 s before the
    /// first one's end (a broadcast's programme change).
    static func spliced() throws -> String { try Splice.spliced(secondOffset: 13) }

    @Test("remux and transcode play the second recording after the first: 12 s, every picture and sound frame (3 s of each were squeezed into nothing or dropped)",
          arguments: ["original", "1mbps"])
    func continuous(_ quality: String) throws {
        let source = try Self.spliced()
        try Command.prepare(source, quality: quality, caps: "web", scratch: "splice-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["delivery_format"] == .string(quality == "original" ? "remux" : "transcode"))
            let probe = try FFprobe(out)
            #expect(abs((probe.duration("video") ?? 0) - 12) < 0.1)
            #expect(abs((probe.duration("audio") ?? 0) - 12) < 0.1)
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            #expect(abs(try FFprobe.packetCount(out, "a") - FFprobe.packetCount(source, "a")) <= 1)
        }
    }
}

@Suite("a broadcast splice each stream crosses at its own place")
struct CrossedSpliceTests {
    @Test("remux and transcode last 12 s with every picture and sound frame, the second recording in its own sync (one correction for the file, changed by whichever stream jumped, left a 3 s hole in the stream still on the old time: 15 s)",
          arguments: [Splice.Crossing.picturesFirst, .soundFirst], ["original", "1mbps"])
    func continuous(_ crossing: Splice.Crossing, _ quality: String) throws {
        let source = try Splice.spliced(secondOffset: 13, crossing: crossing)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "crossed-\(crossing)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["stats"]?["corrupt_packets"] == .number(0))
            let probe = try FFprobe(out)
            #expect(abs((probe.duration("video") ?? 0) - 12) < 0.15)
            #expect(abs((probe.duration("audio") ?? 0) - 12) < 0.15)
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            #expect(abs(try FFprobe.packetCount(out, "a") - FFprobe.packetCount(source, "a")) <= 1)
            guard quality == "original" else { return }
            // The second recording's first picture and sound frame, and three seconds on its
            // 75th and 141st, are as far apart as in that recording. (The new time the
            // pictures opened was moved on 38 ms when the sound crossed, overlapping its old
            // end: the pictures given before were 38 ms early.)
            let first = try Splice.recording("testsrc2", offset: 10), second = try Splice.recording("testsrc", offset: 13)
            let (pictures, sounds) = try (FFprobe.packetTimes(out, "v"), FFprobe.packetTimes(out, "a"))
            let (sourcePictures, sourceSounds) = try (FFprobe.packetTimes(second, "v"), FFprobe.packetTimes(second, "a"))
            let (nv, na) = try (FFprobe.packetCount(first, "v"), FFprobe.packetCount(first, "a"))
            for (picture, sound) in [(0, 0), (75, 141)] {
                let apart = sounds[na + sound] - pictures[nv + picture], sourceApart = sourceSounds[sound] - sourcePictures[picture]
                #expect(abs(apart - sourceApart) < 0.002, "picture \(picture): \(apart) s in the output, \(sourceApart) s in the source")
            }
        }
    }

    @Test("a splice 1.06 s back whose sound, starting 0.48 s after its pictures, steps back only 0.61 s, crossing after or before the pictures: remux and transcode keep every picture (26 were dropped as a stretch written twice when the new time passed the old one's end) and the new programme's sync (the sound stayed on the old time, 0.48 s out; crossing first, 1.1 s out)",
          arguments: [Splice.Crossing.together, .soundFirst], ["original", "1mbps"])
    func soundStepsLess(_ crossing: Splice.Crossing, _ quality: String) throws {
        // The 0.6 s of sound that crosses first comes out behind its own time, and is left out.
        let source = try Splice.spliced(secondOffset: 14.9, soundDelay: 0.5, crossing: crossing)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "sound-steps-less-\(crossing)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            if crossing == .together { #expect(try Command.json(r)["stats"]?["corrupt_packets"] == .number(0)) }
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.1)
            guard quality == "original" else { return }
            // The second recording's last picture and sound frame are as far apart as there.
            let second = try Splice.recording("testsrc", offset: 14.9, soundDelay: 0.5)
            let (apart, sourceApart) = try (FFprobe.endsApart(out), FFprobe.endsApart(second))
            #expect(abs(apart - sourceApart) < 0.002, "\(apart) s in the output, \(sourceApart) s in the source")
        }
    }

    @Test("""
          a new programme whose sound starts 1.9 s after its pictures: remux and transcode keep its sync, from its first \
          sound frame. Timed 3 s back \
          (13), the sound steps back a second on the old time and is 1.9 s on on the pictures' new one: it stayed on the old \
          time, or opened its own, 1.9 s early. Timed 1.1 s back (14.9), the sound steps 0.8 s forward on the old time: it \
          stayed there, 1.1 s early. Timed 0.46 s back (15.5), the pictures step back too little to be a jump and the \
          sound steps 1.4 s forward: 12 pictures were squeezed. Timed 9 s on (25, a gap kept), the sound jumps 10.9 s: \
          closed up as a splice, it was 10.9 s early. The sound crossing first, by a step forward before the pictures \
          step back (14.9, 15.5): it stayed on the old time, 1.1 s early, or 12 pictures were squeezed.
          """,
          arguments: [(13.0, Splice.Crossing.together, 1.9), (13, .picturesFirst, 1.9), (14.9, .together, 1.9),
                      (15.5, .picturesFirst, 1.9), (25, .together, 1.9), (14.9, .soundFirst, 1.9), (15.5, .soundFirst, 1.9)],
          ["original", "1mbps"])
    func soundStartsLate(_ splice: (Double, Splice.Crossing, Double), _ quality: String) throws {
        let (offset, crossing, delay) = splice
        let source = try Splice.spliced(secondOffset: offset, soundDelay: delay, crossing: crossing)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "sound-starts-late-\(offset)-\(crossing)-\(delay)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            // The second recording's last picture and sound frame are as far apart as there.
            let second = try Splice.recording("testsrc", offset: offset, soundDelay: delay)
            let (pictures, sounds) = try (FFprobe.packetTimes(out, "v"), FFprobe.packetTimes(out, "a"))
            #expect(zip(pictures, pictures.dropFirst()).filter { $1 - $0 < 0.03 }.count == 0, "no picture squeezed")
            // No sound of the second programme before its place: none between the first
            // one's end and where the second's starts.
            // (A copy fills the gap before it with frames of silence: those come first.)
            let filled = max(0, sounds.count - (try FFprobe.packetCount(source, "a")))
            let firstEnd = try FFprobe.packetTimes(try Splice.recording("testsrc2", offset: 10), "a").count + filled
            if quality == "original", sounds.count > firstEnd {
                #expect(sounds[firstEnd] > 6 + delay - 0.1, "the second programme's sound starts at \(sounds[firstEnd]) s")
            }
            let (apart, sourceApart) = try (FFprobe.endsApart(out), FFprobe.endsApart(second))
            #expect(abs(apart - sourceApart) < 0.03, "\(apart) s in the output, \(sourceApart) s in the source")
        }
    }

    @Test("a splice that overlaps the first recording's end by 0.46 s, both streams stepping back less than a jump (the sound by 0.46 s, or by 37 ms when it starts 0.5 s after the pictures), whichever crosses first: remux and transcode keep every picture, none squeezed (12 were squeezed into a millisecond, or dropped; crossing first, the pictures' first 12 still were)",
          arguments: [(Splice.Crossing.together, 0.0), (.picturesFirst, 0), (.soundFirst, 0.5)], ["original", "1mbps"])
    func overlapBySmallSteps(_ crossing: (Splice.Crossing, Double), _ quality: String) throws {
        let source = try Splice.spliced(secondOffset: 15.5, soundDelay: crossing.1, crossing: crossing.0)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "overlap-small-steps-\(crossing.0)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let pictures = try FFprobe.packetTimes(out, "v")
            #expect(pictures.count == (try FFprobe.packetCount(source, "v")))
            #expect(zip(pictures, pictures.dropFirst()).filter { $1 - $0 < 0.03 }.count == 0)
            #expect(abs(pictures.last! - pictures.first! - 11.96) < 0.05)
        }
    }
}

@Suite("the length of a recording whose clock jumps")
struct SplicedLengthTests {
    @Test("probe gives what the recordings last, 12 s, whether the clock stepped back 3 s (libavformat: 9 s) or on 11 hours (libavformat: 40 000 s)",
          arguments: [13.0, 40_000])
    func probed(_ secondOffset: Double) throws {
        let info = try Command.probed(try Splice.spliced(secondOffset: secondOffset))
        guard case .number(let seconds)? = info["duration_seconds"] else { Issue.record("no duration: \(info)"); return }
        #expect(abs(seconds - 12) < 0.15)
        #expect(info["warnings"] == .array([.string("timestamps_jump")]))
    }

    @Test("DVD cells put back to back, the second timed from 2 s: probe says 25 fps, constant, and 12 s (the two timelines' pictures sorted together read 50 fps, variable), and a transcode lasts 12 s")
    func dvdCells() throws {
        let source = try Splice.dvdCells()
        let info = try Command.probed(source)
        guard case .number(let seconds)? = info["duration_seconds"], case .array(let streams)? = info["streams"],
              let video = streams.first(where: { $0["type"] == .string("video") }) else { Issue.record("no duration or video: \(info)"); return }
        #expect(abs(seconds - 12) < 0.15)
        #expect(video["frame_rate"] == .number(25))
        #expect(video["variable_frame_rate"] == .bool(false))
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "dvd-cells") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.15)
        }
    }

    @Test("a stretch written twice is no splice: probe keeps the recording's 4 s (read as jumps ahead and back, it made 6.2 s)",
          arguments: [false, true])
    func repeatedStretch(_ late: Bool) throws {
        let info = try Command.probed(try RepeatedStretchTests.repeated(late: late))
        guard case .number(let seconds)? = info["duration_seconds"] else { Issue.record("no duration: \(info)"); return }
        #expect(abs(seconds - 4.02) < 0.01)
        #expect(info["warnings"] == .array([]))
    }

    @Test("a recording whose clock jumped 11 hours on is transcoded at 1 Mbit/s (it was refused: its 3 MB over 40 000 s looked like a damaged header)")
    func transcoded() throws {
        let source = try Splice.spliced(secondOffset: 40_000)
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "clock-jump") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["delivery_format"] == .string("transcode"))
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.15)
        }
    }

    @Test("a recording whose bitrate falls a hundredfold for a minute (black) keeps libavformat's length: its times do not jump")
    func cheapStretch() throws {
        let source = try Splice.blackMinute()
        let info = try Command.probed(source)
        guard case .number(let seconds)? = info["duration_seconds"] else { Issue.record("no duration: \(info)"); return }
        #expect(abs(seconds - (try FFprobe(source).formatDuration)) < 0.001)
        #expect(info["warnings"] == .array([]))
    }
}

@Suite("a video most of whose pictures do not decode")
struct MostlyDamagedTests {
    /// 4 s of MJPEG (each picture a JPEG the decoder rejects outright when it is zeros) and
    /// AAC in AVI, pictures 20 to 99 zeroed.
    static func mostlyZeroed() throws -> String {
        let clean = try Media.generated("mjpeg-aac.avi", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                          "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                          "-c:v", "mjpeg", "-c:a", "aac"])
        return try Media.generated("mjpeg-mostly-zeroed.avi") { tmp in
            let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pos,size",
                                                "-of", "default=nw=1", clean])
            var pictures: [(pos: Int, size: Int)] = []
            var size = 0
            for line in r.stdout.split(separator: "\n") {
                let field = line.split(separator: "=")
                guard field.count == 2, let value = Int(field[1]) else { continue }
                if field[0] == "size" { size = value } else if field[0] == "pos" { pictures.append((value, size)) }
            }
            guard pictures.count == 100 else { throw TestFailure("\(pictures.count) pictures: \(r.stderr)") }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: clean)))
            for p in pictures[20...] { bytes.replaceSubrange(p.pos..<p.pos + p.size, with: repeatElement(0, count: p.size)) }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("80 of 100 pictures rejected by the decoder: exit 3, source_corrupt, saying so, and nothing written (it was delivered as 0.8 s of pictures held for 4 s, ok)",
          arguments: ["original", "1mbps"])
    func refused(_ quality: String) throws {
        try Command.prepare(try Self.mostlyZeroed(), quality: quality, caps: "web", scratch: "mostly-zeroed-\(quality)") { (r, out) throws in
            #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
            let error = try Command.json(r)["error"]
            #expect(error?["code"] == .string("source_corrupt"))
            #expect(error?["message"]?.string?.contains("mostly damaged: 80 of 100") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }
}

@Suite("damaged AV1 in a remux")
struct DamagedAV1Tests {
    /// 4 s of AV1 and Opus in Matroska with one picture's first OBU header broken (its
    /// forbidden bit set), the container intact.
    static func damaged() throws -> String {
        let clean = try Media.generated("av1-clean.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                          "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                          "-c:v", "libsvtav1", "-preset", "12", "-g", "50", "-c:a", "libopus"])
        return try Media.generated("av1-broken-obu.mkv") { tmp in
            // The 30th picture's block: Matroska gives its position; the data follows the
            // track number, time and flags (4 bytes in ffmpeg's SimpleBlocks).
            let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pos",
                                                "-of", "csv=p=0", "-read_intervals", "%+#30", clean])
            guard let pos = r.stdout.split(separator: "\n").compactMap({ Int($0.trimmingCharacters(in: .whitespaces)) }).last else {
                throw TestFailure("no packet positions: \(r.stderr)")
            }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: clean)))
            bytes[pos + 4] |= 0x80
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("a picture whose OBUs do not parse stops the copy and the video is re-encoded (the MP4 muxer wrote a corrupt file: exit 1, internal_error)")
    func reencoded() throws {
        let source = try Self.damaged()
        try Command.prepare(source, quality: "original", caps: "web", scratch: "av1-damaged") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"] == .string("remux"))
            #expect("\(json["stats"]?["adjustments"] ?? .null)".contains("video_reencoded"))
            let probe = try FFprobe(out)
            #expect(probe.streams("video").first?["codec_name"] == .string("h264"))
            #expect(abs((probe.duration("video") ?? 0) - 4) < 0.1)
        }
    }
}

@Suite("a copied stream whose times run back")
struct TimesRunBackTests {
    /// 4 s of H.264 (no B-frames) and AAC in Matroska, remuxed by mkvmerge with the times of
    /// track `track` running back from 1.9 s to 0.5 s halfway (a damaged file's times).
    static func source(track: Int) throws -> String {
        let plain = try Media.generated("runback-plain.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                              "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                              "-c:v", "libx264", "-preset", "ultrafast", "-bf", "0", "-g", "25", "-c:a", "aac"])
        return try Media.generated("runback-track\(track).mkv") { tmp in
            // Format v4 allows times out of order; milliseconds, one line per frame.
            let step: Double = track == 0 ? 40 : 1024.0 / 48
            let count = track == 0 ? 100 : 188, half = count / 2
            let times: [Int] = (0..<count).map { i in
                let ms: Double = i < half ? Double(i) * step : 500 + Double(i - half) * step
                return Int(ms.rounded())
            }
            let file = tmp + ".times.txt"
            defer { try? FileManager.default.removeItem(atPath: file) }
            try ("# timestamp format v4\n" + times.map(String.init).joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            let r = try Run.command("mkvmerge", ["-q", "-o", tmp, "--timestamps", "\(track):\(file)", plain])
            guard r.status == 0 || r.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(r.stderr)") }
        }
    }

    /// The shortest step between consecutive times of the output's `stream` (v or a),
    /// leaving out its last packet.
    static func shortestStep(_ path: String, _ stream: String) throws -> Double {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", stream, "-show_entries", "packet=pts_time",
                                            "-of", "csv=p=0", path])
        let times = r.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: CharacterSet(charactersIn: ", "))) }.sorted()
        return zip(times.dropFirst(), times).dropLast().map { $0 - $1 }.min() ?? 0
    }

    @Test("pictures: the copy stops and the video is re-encoded, without the pictures before the old time squeezed into milliseconds")
    func pictures() throws {
        let source = try Self.source(track: 0)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "runback-video") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect("\(try Command.json(r)["stats"]?["adjustments"] ?? .null)".contains("video_reencoded"))
            #expect(try Self.shortestStep(out, "v") > 0.03)
        }
    }

    @Test("sound: the frames behind are left out, counted, and the rest is copied without a squeezed burst")
    func sound() throws {
        let source = try Self.source(track: 1)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "runback-audio") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"] == .string("remux"))
            if case .number(let n)? = json["stats"]?["corrupt_packets"] { #expect(n > 0) } else { Issue.record("no corrupt_packets") }
            #expect(try Self.shortestStep(out, "a") > 0.005)
        }
    }

    @Test("a Matroska cluster written twice (times 0.96 s back, under the second that counted before): no second of pictures and sound squeezed into a millisecond, and the pictures still copied (its packets are known for the same bytes at the same times)")
    func clusterWrittenTwice() throws {
        let source = try Media.generated("runback-cluster-twice.mkv") { tmp in
            let plain = tmp + ".plain.mkv"
            defer { try? FileManager.default.removeItem(atPath: plain) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac",
                                               "-cluster_time_limit", "1000", plain])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
            var clusters: [Int] = []
            var from = bytes.startIndex
            while let found = bytes[from...].firstRange(of: [0x1F, 0x43, 0xB6, 0x75]) {
                clusters.append(found.lowerBound)
                from = found.upperBound
            }
            guard clusters.count > 6 else { throw TestFailure("\(clusters.count) clusters") }
            let twice = clusters[4]..<clusters[5]
            try Data(bytes[..<twice.upperBound] + bytes[twice] + bytes[twice.upperBound...]).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "5mbps", caps: "web", scratch: "runback-cluster") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let stats = try Command.json(r)["stats"]
            // Left out whole, the repeat leaves the copy nothing to stop on (its pictures had
            // been re-encoded when their decode times ran back).
            let adjustments = "\(stats?["adjustments"] ?? .null)"
            #expect(adjustments.contains("video_reencoded") == false, "\(adjustments)")
            if case .number(let n)? = stats?["corrupt_packets"] { #expect(n > 40) } else { Issue.record("no corrupt_packets") }
            #expect(try FFprobe.packetCount(out, "v") == 250)
            #expect(abs(try FFprobe.packetCount(out, "a") - 470) <= 2)
            #expect(try Self.shortestStep(out, "v") > 0.03)
            #expect(try Self.shortestStep(out, "a") > 0.015)
        }
    }
}

/// A broadcast recording whose sound moves to another audio stream mid-file
/// (`StreamSuccession`): the output had the first stream's sound only, silence after it.
@Suite("sound and pictures that move to another stream")
struct StreamSuccessionTests {
    /// The output's sound: its length, the tone's frequency in its first and last seconds
    /// (zero crossings per second), and the adjustments the result reports.
    private static func sound(_ out: String) throws -> (length: Double, first: Double, last: Double) {
        let length = try #require(try FFprobe(out).duration("audio"))
        func tone(from start: Double) throws -> Double {
            let raw = out + ".raw"
            defer { try? FileManager.default.removeItem(atPath: raw) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-ss", "\(start)", "-t", "1", "-i", out, "-map", "0:a:0",
                                               "-ac", "1", "-ar", "48000", "-f", "s16le", "-acodec", "pcm_s16le", raw])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not decode \(out): \(r.stderr)") }
            let data = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
            let samples = stride(from: 0, to: data.count - 1, by: 2).map { Int16(bitPattern: UInt16(data[$0]) | UInt16(data[$0 + 1]) << 8) }
            let crossings = zip(samples, samples.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
            return Double(crossings) / 2 / (Double(samples.count) / 48000)
        }
        return (length, try tone(from: 1), try tone(from: length - 1.5))
    }

    private static func adjustments(_ r: Run.Result) throws -> [String] {
        guard case .array(let a)? = try Command.json(r)["stats"]?["adjustments"] else { return [] }
        return a.compactMap(\.string)
    }

    /// Where the result says the sound went on in stream 2, in output seconds.
    private static func continued(_ r: Run.Result) throws -> Double? {
        let prefix = "audio_continued: the sound goes on in the source's stream 2 at "
        return try adjustments(r).first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count).prefix { $0 != " " }) }
    }

    @Test("a programme change that moves the sound to a new PID: remux and transcode carry the second programme's sound on, in its own sync, none squeezed (the output's sound ended after 6 s of 12)",
          arguments: ["original", "1mbps"])
    func newPID(_ quality: String) throws {
        let source = try Succession.pidChange()
        try Command.prepare(source, quality: quality, caps: "web", scratch: "succession-pid-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let s = try Self.sound(out)
            #expect(abs(s.length - 12) < 0.15, "the sound lasts \(s.length) s")
            #expect(abs(s.first - 440) < 10 && abs(s.last - 880) < 10, "tones \(s.first) Hz, then \(s.last) Hz")
            #expect(abs((try Self.continued(r) ?? 0) - 6) < 0.1, "\(r.stdout)")
            #expect(try FFprobe.decodeErrors(out).isEmpty)
            // (The new stream's first frame may begin a few milliseconds before the old one's
            // last ends: that one is then cut short.)
            let sounds = try FFprobe.packetTimes(out, "a")
            #expect(zip(sounds, sounds.dropFirst()).filter { $1 - $0 < 0.002 }.count == 0, "no sound frame squeezed")
            // The second programme's last picture and sound frame are as far apart as there.
            let second = try Succession.recording("testsrc", offset: 16, codec: "aac", audioPID: 0x102, language: "eng", frequency: 880)
            let (apart, sourceApart) = try (FFprobe.endsApart(out), FFprobe.endsApart(second))
            #expect(abs(apart - sourceApart) < 0.03, "\(apart) s in the output, \(sourceApart) s in the source")
        }
    }

    @Test("a programme change that moves the pictures to a new PID: remux and transcode carry them on to 12 s (the output's pictures ended after 6 s of 12); at another size the copy stops and the pictures are re-encoded, fitted in the frame",
          arguments: ["640x360", "1280x720"], ["original", "1mbps"])
    func newVideoPID(_ size: String, _ quality: String) throws {
        let source = try Succession.videoPIDChange(size: size)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "succession-video-\(size)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let adjustments = try Self.adjustments(r)
            #expect(adjustments.contains { $0.hasPrefix("video_continued: the pictures go on in the source's stream 2 at 6.0") }, "\(adjustments)")
            #expect(adjustments.contains { $0.hasPrefix("video_reencoded") } == (size != "640x360" && quality == "original"), "\(adjustments)")
            let pictures = try FFprobe.packetTimes(out, "v")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.1)
            // The old stream's last two pictures come out of libavformat only at the end of
            // the file (an MPEG-TS video PES ends when the next one begins), after the new
            // stream's: they are left out.
            #expect(pictures.count >= 298, "\(pictures.count) pictures of 300")
            #expect(zip(pictures, pictures.dropFirst()).allSatisfy { $1 - $0 > 0.03 && $1 - $0 < 0.2 }, "no picture squeezed, no gap")
            #expect(try FFprobe.decodeErrors(out).isEmpty)
            #expect(try FFprobe(out).streams("video").first?["width"]?.int == 640, "the frame the plan made for the first stream")
        }
    }

    @Test("a new video PID that begins in the middle of a GOP goes on from its first keyframe: the pictures before it, which nothing decodes, are left out", arguments: ["original", "1mbps"])
    func newVideoPIDMidGOP(_ quality: String) throws {
        let source = try Succession.videoPIDChange(midGOP: true)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "succession-video-mid-gop-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try FFprobe.decodeErrors(out).isEmpty)
            let pictures = try FFprobe.packetTimes(out, "v")
            // 150 of the first stream (less its last two), then the new one's from its
            // second keyframe, one second in: 125.
            #expect((273...275).contains(pictures.count), "\(pictures.count) pictures")
            let gaps = zip(pictures, pictures.dropFirst()).filter { $1 - $0 > 0.05 }
            #expect(gaps.count == 1 && abs(gaps[0].1 - 7) < 0.05, "the new stream's pictures go on from 7 s: \(gaps)")
        }
    }

    @Test("the new PID's sound comes before the programme map that lists it (found by fuzzing: the stream was judged outside the programme at its first packet, for good)",
          arguments: ["original", "1mbps"])
    func soundBeforeMap(_ quality: String) throws {
        let source = try Succession.pidChange(lateMap: true)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "succession-late-map-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let s = try Self.sound(out)
            #expect(abs(s.length - 12) < 0.15 && abs(s.last - 880) < 10, "\(s)")
        }
    }

    @Test("the new PID carries AC-3 where the copy was AAC: the sound is re-encoded and goes on (one MP4 track cannot carry both)")
    func newCodec() throws {
        let source = try Succession.pidChange(codec: "ac3")
        try Command.prepare(source, quality: "original", caps: "web", scratch: "succession-ac3") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let adjustments = try Self.adjustments(r)
            #expect(adjustments.contains { $0.hasPrefix("audio_reencoded: the source's sound goes on from stream 1 (aac, 2 channels) in stream 2 (ac3") })
            #expect(adjustments.contains { $0.hasPrefix("audio_continued:") })
            let s = try Self.sound(out)
            #expect(abs(s.length - 12) < 0.15 && abs(s.last - 880) < 10, "\(s)")
        }
    }

    @Test("a programme change with a new PID and a clock 11 hours on (another channel): the sound goes on after the splice")
    func newPIDAcrossSplice() throws {
        let source = try Succession.pidChange(secondOffset: 40000)
        try Command.prepare(source, quality: "original", caps: "web", scratch: "succession-splice") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let s = try Self.sound(out)
            #expect(abs(s.length - 12) < 0.15 && abs(s.last - 880) < 10, "\(s)")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.15)
        }
    }

    @Test("a stream beside the chosen one carries the sound on when the chosen one ends, if it is in the same language; one in another language does not",
          arguments: [("eng", true), ("fra", false)])
    func beside(_ language: (String, Bool)) throws {
        let source = try Succession.parallel(language: language.0)
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "succession-beside-\(language.0)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["audio"]?["source_index"]?.int == 1)
            let s = try Self.sound(out)
            #expect(abs(s.first - 440) < 10)
            if language.1 {
                #expect(abs(s.length - 12) < 0.15 && abs(s.last - 880) < 10, "\(s)")
                #expect(abs((try Self.continued(r) ?? 0) - 6) < 0.1, "\(r.stdout)")
            } else {
                #expect(abs(s.length - 6) < 0.15, "\(s)")
                #expect(try Self.adjustments(r).isEmpty)
            }
        }
    }
}

extension StreamSuccessionTests {
    @Test("an audio stream found without a format (its packets begin past libavformat's analysis) is probed as its first frame decodes, and a request for its language gets it whole: copied at original, from where it starts (it was probed 0 channels, 0 Hz, planned mono at a rung, and refused as damaged at original)",
          arguments: ["original", "2mbps"])
    func foundWithoutFormat(_ quality: String) throws {
        let source = try Succession.pidChange(language: "fra")
        let probe = try Command.probed(source)
        guard case .array(let streams)? = probe["streams"] else { throw TestFailure("no streams: \(probe)") }
        let french = try #require(streams.first { $0["language"] == .string("fra") })
        #expect(french["channels"]?.int == 2 && french["sample_rate"]?.int == 48000, "\(french)")
        let dir = Media.scratch("succession-french-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let r = try Command.run(["prepare", source, "--quality", quality, "--caps", "web", "--audio-language", "fra",
                                 "--output", out, "--json"])
        #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
        let plan = try Command.json(r)["plan"]?["audio"]
        #expect(plan?["source_index"]?.int == 2 && plan?["channels"]?.int == 2, "\(String(describing: plan))")
        if quality == "original" { #expect(plan?["action"] == .string("copy")) }
        let probed = try FFprobe(out)
        #expect(probed.streams("audio").first?["channels"]?.int == 2)
        // The French sound starts with the second programme, 6 s in, and runs to its end.
        let sounds = try FFprobe.packetTimes(out, "a")
        #expect(abs((sounds.first ?? 0) - 6) < 0.1 && abs((sounds.last ?? 0) - 11.98) < 0.1, "\(sounds.first ?? -1)…\(sounds.last ?? -1)")
        #expect(zip(sounds, sounds.dropFirst()).filter { $1 - $0 < 0.002 }.count == 0, "no sound frame squeezed")
        #expect(try FFprobe.decodeErrors(out).isEmpty)
    }
}

/// A transcode times its frames on a grid of the source's rate; on a grid of the wrong
/// rate, frames that find their slot taken are dropped.
@Suite("the frames a transcode keeps")
struct TranscodeFrameRateTests {
    @Test("every frame of a clip with holes or dropped frames is kept, on its own rate's grid (the average rate had been the grid: half the frames of 30 fps with a 3 s hole went, 5 of a phone clip's 175)",
          arguments: [("hole", "select='not(between(t\\,1\\,4))'", 30), ("drops", "select='not(eq(mod(n\\,37)\\,5))'", 30)])
    func holesAndDrops(name: String, select: String, rate: Int) throws {
        let source = try Media.generated("frames-\(name).mp4", ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=\(rate):duration=6",
                                                              "-f", "lavfi", "-i", "sine=duration=6", "-vf", select, "-fps_mode", "vfr",
                                                              "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        try Command.prepare(source, quality: "1mbps", caps: "android", scratch: "frames-\(name)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("transcode"))
            #expect(try FFprobe.packetCount(out, "v") == FFprobe.packetCount(source, "v"))
            let stream = try #require(try FFprobe(out).streams("video").first)
            #expect(stream["r_frame_rate"] == .string("\(rate)/1"))
        }
    }

    @Test("a phone clip at 30 fps that slows to 24 keeps every frame at its own time and a keyframe every 2 s, from MP4 and from Matroska (on the average's grid one frame in six of the 30 fps stretch went; Matroska's declared 120 fps put keyframes 10 s apart)",
          arguments: ["mp4", "mkv"])
    func variableRate(_ container: String) throws {
        let source = try Media.generated("frames-30-then-24.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=120:duration=6",
                                                                   "-f", "lavfi", "-i", "sine=duration=6",
                                                                   "-vf", "select='if(lt(t\\,2)\\,not(mod(n\\,4))\\,not(mod(n\\,5)))'",
                                                                   "-fps_mode", "vfr", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        try Command.prepare(source, quality: "1mbps", caps: "android", scratch: "frames-30-then-24-\(container)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("transcode"))
            func times(_ path: String) throws -> [Double] {
                let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time",
                                                        "-of", "csv=p=0", path])
                return probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
            }
            let (before, after) = (try times(source), try times(out))
            #expect(before.count > 150 && after.count == before.count, "\(after.count) frames of \(before.count)")
            if after.count == before.count {
                let shifted = zip(before, after).map { abs($0 - $1 - (before[0] - after[0])) }.max() ?? 1
                #expect(shifted < 0.002, "a frame moved \(shifted) s")
            }
            let keyTimes = try FFprobe.keyframeTimes(out)
            let apart = zip(keyTimes.dropFirst(), keyTimes).map { $0 - $1 }.max() ?? 99
            #expect(keyTimes.count >= 3 && apart <= 2.1, "keyframes \(keyTimes)")
        }
    }

    @Test("a slideshow at a picture every 3 s (B-frames shown 12 s after they are decoded) keeps every picture for its 3 s (the last one had been taken for damage and left out, and each shown for 0.04 s)")
    func slideshow() throws {
        let source = try Media.generated("frames-slideshow-b.mp4", ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=1/3:duration=12",
                                                                 "-f", "lavfi", "-i", "sine=duration=12", "-c:v", "libx264",
                                                                 "-x264-params", "b-adapt=0", "-c:a", "aac"])
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "frames-slideshow") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("transcode"))
            let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time",
                                                    "-of", "csv=p=0", out])
            let times = probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
            #expect(times == [0, 3, 6, 9], "\(times)")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 12) < 0.1)
            // A decoder shows four different pictures, one per 3 s.
            let frames = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:v", "-vf", "fps=1",
                                                    "-f", "framemd5", "-"])
            let hashes = frames.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last }
            #expect(hashes.count == 12 && Set(hashes).count == 4, "\(hashes.count) seconds, \(Set(hashes).count) pictures")
        }
    }

    @Test("a slideshow cut from a 30 fps clip (a picture every 2.5 s, each packet saying 1/30 s, B-frames decoded 5 s early) keeps every picture at its time, copied or re-encoded (its times were \"repaired\" out of order, and in MPEG-TS one picture was left out as damage)",
          arguments: ["ts", "mkv"], ["original", "1mbps"])
    func slideshowCutFromClip(container: String, quality: String) throws {
        let source = try Media.generated("slideshow-cut-30fps.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30",
                                                                              "-f", "lavfi", "-i", "sine=sample_rate=48000", "-t", "12",
                                                                              "-vf", "select='not(mod(n,75))',setpts=N*2.5/TB", "-fps_mode", "vfr",
                                                                              "-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"])
        try Command.prepare(source, quality: quality, caps: "web", scratch: "slideshow-cut-\(container)-\(quality)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time",
                                                    "-of", "csv=p=0", out])
            let times = probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
            let apart = zip(times.dropFirst(), times).map { ($0 - $1) * 10 }.map { $0.rounded() / 10 }
            #expect(times.count == 5 && apart == [2.5, 2.5, 2.5, 2.5], "\(times)")
            #expect(try Command.json(r)["stats"]?["repaired_timestamps"] == .number(0))
        }
    }

    @Test("an MPEG-TS slideshow whose last picture runs past its sound (0.4 fps for 12 s, with and without B-frames), and one of three pictures cut from a clip, are copied with every picture at its time: the last picture's 2.5 s past the 0.5 s libavformat guessed had it refused as verify_failed or cut short",
          arguments: [("0.4fps-12s", 5, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=0.4", "-f", "lavfi", "-i", "sine=sample_rate=48000", "-t", "12"]),
                      ("0.4fps-12s-nob", 5, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=0.4", "-f", "lavfi", "-i", "sine=sample_rate=48000", "-t", "12",
                                             "-bf", "0"]),
                      ("three-cut", 3, ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30", "-f", "lavfi", "-i", "sine=sample_rate=48000", "-t", "7",
                                        "-vf", "select='not(mod(n,75))',setpts=N*2.5/TB", "-fps_mode", "vfr"])])
    func slideshowPastItsSound(name: String, pictures: Int, generate: [String]) throws {
        let source = try Media.generated("slideshow-\(name).ts", generate + ["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"])
        try Command.prepare(source, quality: "original", caps: "web", scratch: "slideshow-\(name)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time",
                                                    "-of", "csv=p=0", out])
            let times = probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
            let apart = zip(times.dropFirst(), times).map { (($0 - $1) * 10).rounded() / 10 }
            #expect(times.count == pictures && apart == Array(repeating: 2.5, count: pictures - 1), "\(times)")
        }
    }

    @Test("Theora whose unchanged pictures are no packets (a black screen flashing white each second) is encoded whole: its last picture, shown half a second to the end, reaches it (it failed verification as cut short, retryable, every time)")
    func sparseTheora() throws {
        let source = try Media.generated("theora-flashes.ogv", ["-f", "lavfi", "-i", "color=black:size=320x240:rate=25:duration=8,drawbox=c=white:t=fill:enable='lt(mod(t,1),0.03)'",
                                                               "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8", "-c:v", "libtheora", "-c:a", "libvorbis"])
        try Command.prepare(source, quality: "original", caps: "web", scratch: "theora-flashes") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("transcode"))
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - 8) < 0.1)
            let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.suffix(300))")
        }
    }

    @Test("a Theora header with a damaged byte is source_corrupt, said as invalid data (libtheora's bare -1 read as EPERM: source_unsupported, \"Operation not permitted\"; found by fuzzing)")
    func damagedTheoraHeader() throws {
        let clean = try Media.generated("theora-2s.ogv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2", "-c:v", "libtheora"])
        let source = try Media.generated("theora-2s-header-byte-202.ogv") { tmp in
            var bytes = try Data(contentsOf: URL(fileURLWithPath: clean))
            bytes[202] ^= 0x2D   // inside the Theora identification header's page
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "theora-header-damaged") { (r, out) throws in
            #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
            let error = try Command.json(r)["error"]
            #expect(error?["code"] == .string("source_corrupt"), "\(String(describing: error))")
            let message = error?["message"]?.string ?? ""
            #expect(message.contains("invalid data") && !message.contains("not permitted"), "\(message)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("Ogg Vorbis with 4 kB zeroed halfway is source_corrupt, for good: the last page read before the damage gave its packet the 4.1 s to the declared end, which hid that the sound stops (it was a retryable verify_failed, every time; found by fuzzing)")
    func oggVorbisZeroedHalfway() throws {
        let clean = try Media.generated("vorbis-6s.ogg", ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=6", "-c:a", "libvorbis"])
        let source = try Media.generated("vorbis-6s-zeroed-halfway.ogg") { tmp in
            var bytes = try Data(contentsOf: URL(fileURLWithPath: clean))
            let at = bytes.count / 2
            bytes.replaceSubrange(at..<at + 4096, with: Data(count: 4096))
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "vorbis-zeroed") { (r, out) throws in
            #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["error"]?["code"] == .string("source_corrupt"), "\(r.stdout)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("a Matroska slideshow at a picture every 30 s is copied with every picture at its time: with B-frames and no sound (its start had been taken 60 s late, the first picture lost, the rest shown early), and with its sound under one keyframe (verification had given up reading before the video's end: refused as cut short; interleaved as muxers do), and with B-frames and sound, all the sound written before each late picture (libavformat, whose analysis had seen one picture, took the second one's presentation time for its decode time: one picture was lost, others shown at the wrong time, exit 0)",
          arguments: [("b-no-sound", ["-bf", "3", "-g", "10"]),
                      ("b-sound", ["-f", "lavfi", "-i", "sine=sample_rate=48000:duration=600", "-bf", "3", "-c:a", "aac"]),
                      ("one-keyframe-sound", ["-f", "lavfi", "-i", "sine=sample_rate=48000:duration=600", "-g", "30", "-c:a", "aac",
                                               "-max_interleave_delta", "0"])])
    func slowMatroskaSlideshow(name: String, generate: [String]) throws {
        let pictures = 20
        let source = try Media.generated("slideshow-30s-\(name).mkv", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=1/30:duration=\(pictures * 30)"]
                                          + generate + ["-c:v", "libx264"])
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "slideshow-30s-\(name)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("copy"))
            // The copy's pixel format is the source's (the output, read without decoding, says none).
            #expect(try Command.json(r)["output"]?["video"]?["pixel_format"] == .string("yuv420p"))
            let probe = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time",
                                                    "-of", "csv=p=0", out])
            let times = probe.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }.sorted()
            #expect(times.count == pictures && times.enumerated().allSatisfy { abs($1 - Double($0 * 30)) < 0.1 }, "\(times)")
            #expect(abs((try FFprobe(out).duration("video") ?? 0) - Double(pictures * 30)) < 0.1)
        }
    }
}

@Suite("the colours a transcode writes")
struct TranscodeColourTests {
    @Test("SDR in BT.2020's primaries (10-bit HEVC) becomes BT.709: tagged so, its colours moved there (left in BT.2020, a player taking the primaries for BT.709's showed them washed out)")
    func wideGamutSDR() throws {
        let colour = "0x40A020"
        let source = try Media.generated("bt2020-sdr.mp4", ["-f", "lavfi", "-i", "color=c=\(colour):size=1280x720:rate=25:duration=3",
                                                          "-f", "lavfi", "-i", "sine=duration=3",
                                                          "-vf", "format=gbrp,zscale=tin=709:pin=709:rin=full:t=709:p=2020:m=2020_ncl:r=limited,format=yuv420p10le",
                                                          "-c:v", "libx265", "-x265-params", "log-level=error", "-tag:v", "hvc1",
                                                          "-color_primaries", "bt2020", "-color_trc", "bt2020-10", "-colorspace", "bt2020nc", "-c:a", "aac"])
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "bt2020-sdr") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["action"] == .string("transcode"))
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["color_primaries"] == .string("bt709") && video["color_space"] == .string("bt709"), "\(video)")
            let rgb = try Self.firstPictureRGB(out)
            let expected = [0x40, 0xA0, 0x20]
            #expect(zip(rgb, expected).allSatisfy { abs($0 - $1) <= 4 }, "\(rgb) for \(expected)")
        }
    }

    @Test("HD from JPEG's BT.601 YCbCr (an MJPEG camera's 720p) becomes BT.709's: a player that takes HD for BT.709 without reading the tag shows its colours (the BT.601 matrix had been kept, tagged)")
    func jpegMatrixMadeHD() throws {
        let source = try Media.generated("mjpeg-720p.mov", ["-f", "lavfi", "-i", "color=c=0x40A020:size=1280x720:rate=25:duration=3",
                                                          "-f", "lavfi", "-i", "sine=duration=3", "-c:v", "mjpeg", "-pix_fmt", "yuvj420p",
                                                          "-q:v", "2", "-c:a", "pcm_s16le"])
        try Command.prepare(source, quality: "5mbps", caps: "web", scratch: "mjpeg-720p") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["color_space"] == .string("bt709") && video["color_range"] == .string("tv"), "\(video)")
            let expected = [0x40, 0xA0, 0x20]
            for matrix in ["auto", "bt709"] {
                let rgb = try Self.firstPictureRGB(out, matrix: matrix)
                #expect(zip(rgb, expected).allSatisfy { abs($0 - $1) <= 6 }, "\(matrix): \(rgb) for \(expected)")
            }
        }
    }

    @Test("HDR10 is tone-mapped toward its own peak, read from the pictures' SEI or the Matroska track (where their SEI says 0, unknown): a 1,000-nit grey is SDR white from a film mastered to 1,000 nits and stays below it from one mastered to 4,000, leaving room for its brighter highlights", arguments: [
        (1000, false, 252...255), (4000, false, 241...251), (1000, true, 252...255),
    ])
    func toneCurveEndsAtContentPeak(peak: Int, inContainer: Bool, white: ClosedRange<Int>) throws {
        // 723: the 10-bit limited-range PQ code of 1,000 cd/m².
        // In the container, the pictures' SEI says "unknown" (0), as some encoders write it.
        let signalled = inContainer ? ":max-cll=0,0" : ":master-display=G(13250,34500)B(7500,3000)R(34000,16000)WP(15635,16450)L(\(peak * 10000),1):max-cll=\(peak),400"
        let name = "hdr10-grey1000-peak\(peak)\(inContainer ? "-track-v3" : "").mkv"
        var source = try Media.generated(name.replacingOccurrences(of: ".mkv", with: "-bare.mkv"), [
            "-f", "lavfi", "-i", "color=c=black:size=640x360:rate=25:duration=2", "-f", "lavfi", "-i", "sine=duration=2",
            "-vf", "format=yuv420p10le,geq=lum=723:cb=512:cr=512", "-c:v", "libx265",
            "-x265-params", "log-level=error:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:range=limited" + signalled,
            "-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc", "-c:a", "aac"])
        if inContainer {
            // The light levels only in the track's colour elements, as mkvmerge writes them:
            // MaxCLL `peak`, under a 4,000-nit mastering display.
            let bare = source
            source = try Media.generated(name) { tmp in
                try FileManager.default.copyItem(atPath: bare, toPath: tmp)
                let r = try Run.command("mkvpropedit", ["-q", tmp, "--edit", "track:v1", "--set", "max-content-light=\(peak)",
                                                         "--set", "max-frame-light=400", "--set", "max-luminance=4000",
                                                         "--set", "min-luminance=0.005"])
                guard r.status == 0 else { throw TestFailure("mkvpropedit: \(r.stderr)") }
            }
        }
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "hdr10-peak\(peak)-\(inContainer)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["tone_map"] == .bool(true))
            let rgb = try Self.firstPictureRGB(out)
            #expect(rgb.allSatisfy { white.contains($0) }, "\(rgb), want \(white)")
        }
    }

    @Test("HDR that states BT.709's primaries and matrix (HLG or PQ, as Sony, Panasonic and DJI cameras record BT.709 colour) is tone-mapped from them: a green stays that green (read as BT.2020, it came out pure green, red and blue clipped to 0)",
          arguments: ["arib-std-b67", "smpte2084"])
    func hdrInBT709Colour(transfer: String) throws {
        let source = try Self.greenHDR("green-\(transfer)-bt709.mp4", transfer: transfer, zscale: "p=709:m=709", tags: [
            "-color_primaries", "bt709", "-color_trc", transfer, "-colorspace", "bt709"])
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "green-\(transfer)-bt709") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["tone_map"] == .bool(true))
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["color_primaries"] == .string("bt709") && video["color_transfer"] == .string("bt709"), "\(video)")
            let rgb = try Self.firstPictureRGB(out)
            #expect(Self.toneMappedGreen(rgb), "\(rgb)")
        }
    }

    /// A green (40, 200, 60) as SDR would show it, made HDR at reference white's scale
    /// (`transfer`) in the primaries and matrix `zscale` names, 10-bit HEVC with `tags`.
    static func greenHDR(_ name: String, transfer: String, zscale: String, filters: String = "", tags: [String]) throws -> String {
        try Media.generated(name, [
            "-f", "lavfi", "-i", "color=c=0x28C83C:size=640x360:rate=25:duration=2,format=gbrp", "-f", "lavfi", "-i", "sine=duration=2",
            "-vf", "zscale=min=gbr:rin=full:pin=709:tin=709:t=\(transfer):\(zscale):r=limited:npl=203,format=yuv420p10le" + filters,
            "-c:v", "libx265", "-x265-params", "log-level=error", "-crf", "8", "-tag:v", "hvc1"]
            + tags + ["-color_range", "tv", "-c:a", "aac"])
    }

    /// Whether a tone-mapped picture of `greenHDR` is that green: a little darker by the
    /// highlights' roll-off, its red and blue kept (read in the wrong primaries, they clip).
    static func toneMappedGreen(_ rgb: [Int]) -> Bool {
        (25...55).contains(rgb[0]) && (170...205).contains(rgb[1]) && (40...75).contains(rgb[2])
    }

    @Test("HLG that states its transfer alone (no primaries, no matrix) is tone-mapped as BT.2020's: the transcode had failed inside zscale (\"no path between colorspaces\")")
    func hlgWithoutPrimaries() throws {
        let source = try Self.greenHDR("green-hlg-untagged-primaries-v2.mp4", transfer: "arib-std-b67", zscale: "p=2020:m=2020_ncl",
                                       filters: ",setparams=color_primaries=unknown:colorspace=unknown", tags: ["-color_trc", "arib-std-b67"])
        let video = try #require(try FFprobe(source).streams("video").first)
        #expect(video["color_primaries"] == nil && video["color_space"] == nil, "the source states neither: \(video)")
        try Command.prepare(source, quality: "2mbps", caps: "ios", scratch: "green-hlg-untagged") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["tone_map"] == .bool(true))
            let rgb = try Self.firstPictureRGB(out)
            #expect(Self.toneMappedGreen(rgb), "\(rgb)")
        }
    }

    @Test("SDR in P3's primaries (a ProRes master) becomes BT.709: tagged so, its colours moved there (its P3 tags had been kept: a player taking them for BT.709's, as most do, showed the green washed out)")
    func p3SDR() throws {
        let source = try Media.generated("green-p3.mov", [
            "-f", "lavfi", "-i", "color=c=0x28C83C:size=1280x720:rate=25:duration=2,format=gbrp", "-f", "lavfi", "-i", "sine=duration=2",
            "-vf", "zscale=min=gbr:rin=full:pin=709:tin=709:p=smpte432:t=709:m=709:r=limited,format=yuv422p10le",
            "-c:v", "prores_ks", "-profile:v", "3", "-color_primaries", "smpte432", "-color_trc", "bt709", "-colorspace", "bt709",
            "-color_range", "tv", "-c:a", "pcm_s16le"])
        try Command.prepare(source, quality: "5mbps", caps: "web", scratch: "green-p3") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["color_primaries"] == .string("bt709"), "\(video)")
            let rgb = try Self.firstPictureRGB(out)
            let expected = [0x28, 0xC8, 0x3C]
            #expect(zip(rgb, expected).allSatisfy { abs($0 - $1) <= 4 }, "\(rgb) for \(expected)")
        }
    }

    @Test("HD in a matrix players do not take for HD (BT.601's, SMPTE 240M's) becomes BT.709's without a tint: a dark grey stays grey (libswscale's fast path made it green by up to three levels), a green stays that green",
          arguments: [("smpte170m", "bt601", "0x101010"), ("smpte170m", "bt601", "0xB4B4B4"), ("smpte240m", "smpte240m", "0x28C83C")])
    func hdMatrixConverted(tag: String, matrix: String, colour: String) throws {
        let source = try Media.generated("hd-\(tag)-\(colour).mkv", [
            "-f", "lavfi", "-i", "color=c=\(colour):size=1280x720:rate=25:duration=2", "-f", "lavfi", "-i", "sine=duration=2",
            "-vf", "scale=out_color_matrix=\(matrix):out_range=tv,format=yuv420p", "-c:v", "ffv1",
            "-colorspace", tag, "-color_primaries", "smpte170m", "-color_trc", "smpte170m", "-color_range", "tv", "-c:a", "aac"])
        try Command.prepare(source, quality: "5mbps", caps: "web", scratch: "hd-\(tag)-\(colour)") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["color_space"] == .string("bt709"), "\(video)")
            // As a player shows the source, reading its tags.
            let expected = try Self.firstPictureRGB(source)
            let rgb = try Self.firstPictureRGB(out)
            #expect(zip(rgb, expected).allSatisfy { abs($0 - $1) <= 1 }, "\(rgb) for \(expected)")
        }
    }

    /// The mean R, G, B of `path`'s first picture, decoded with the matrix its tags name
    /// (`auto`) or the one given.
    static func firstPictureRGB(_ path: String, matrix: String = "auto") throws -> [Int] {
        let raw = path + ".rgb"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-frames:v", "1",
                                           "-vf", "scale=in_color_matrix=\(matrix),format=rgb24", "-f", "rawvideo", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        let n = max(1, bytes.count / 3)
        return (0..<3).map { c in stride(from: c, to: bytes.count, by: 3).reduce(0) { $0 + Int(bytes[$1]) } / n }
    }
}

@Suite("field order from the bitstream")
struct DVFieldOrderTests {
    @Test("PAL DV in MOV is bottom field first, as its bitstream says, and the plan says it is deinterlaced (the MOV's fiel box said progressive: the engine deinterlaced, the plan did not say so)")
    func dvInMOV() throws {
        let source = try Media.generated("dv-pal-169.mov", ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25:duration=2",
                                                          "-f", "lavfi", "-i", "sine=duration=2", "-c:v", "dvvideo", "-pix_fmt", "yuv420p",
                                                          "-aspect", "16:9", "-c:a", "pcm_s16le"])
        let video = try #require(try Command.probedStreams(source).first { $0["type"] == .string("video") })
        #expect(video["field_order"] == .string("bb"), "\(video)")
        let plan = try Command.planned([source, "--quality", "original", "--caps", "ios", "--json"])
        #expect(plan["video"]?["deinterlace"] == .bool(true), "\(plan)")
    }

    @Test("interlaced H.264 (MBAFF) in a Matroska file flagged progressive, as ffmpeg's muxer flags it, is interlaced as its bitstream says: it had been copied as it was to devices that decode no field-coded pictures; a progressive H.264, and progressive MPEG-2 coded as fields, stay progressive")
    func interlacedInProgressiveMatroska() throws {
        func encoded(_ name: String, _ x264: [String]) throws -> String {
            try Media.generated(name, ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25:duration=2", "-f", "lavfi", "-i", "sine=duration=2",
                                       "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"] + x264 + ["-c:a", "aac"])
        }
        let interlaced = try encoded("mbaff-flagged-progressive.mkv", ["-x264-params", "interlaced=1:tff=1"])
        let progressive = try encoded("h264-progressive.mkv", [])
        // The container says progressive for both (the independent check).
        let flagged = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "stream=field_order", "-of", "csv=p=0", interlaced])
        #expect(flagged.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "progressive")
        #expect(try TelecineTests.videoField(interlaced, "field_order") == .string("tt"))
        #expect(try TelecineTests.videoField(progressive, "field_order") == .string("progressive"))
        // MPEG-2 marks progressive pictures field-coded (+ildct: progressive_frame 0), and
        // every MPEG-2 decoder takes that: the container's word stands.
        let mpeg2 = try Media.generated("mpeg2-ildct-progressive.mkv", ["-f", "lavfi", "-i", "testsrc2=size=720x576:rate=25:duration=2",
                                                                        "-c:v", "mpeg2video", "-b:v", "6M", "-flags", "+ildct"])
        #expect(try TelecineTests.videoField(mpeg2, "field_order") == .string("progressive"))
        func plan(_ path: String) throws -> JSONValue {
            try Command.planned([path, "--quality", "original", "--caps", "ios", "--json"])
        }
        let refused = try plan(interlaced)
        #expect(refused["video"]?["action"] != .string("copy"), "\(refused)")
        guard case .array(let reasons)? = refused["reasons"] else { throw TestFailure("no reasons: \(refused)") }
        #expect(reasons.contains(.string("interlaced_unsupported")), "\(reasons)")
        #expect(try plan(progressive)["video"]?["action"] == .string("copy"))
    }
}

@Suite("pictures the field filters cannot take")
struct OddFieldPicturesTests {
    @Test("an interlaced picture too small for the field filters (2 lines, or 4x8 with 2x4 chroma) is transcoded as progressive: bwdif had refused it, an internal_error", arguments: ["720x2", "4x8"])
    func tinyInterlaced(_ size: String) throws {
        let source = try Media.generated("interlaced-tiny-\(size).mkv", ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=2",
                                                                       "-c:v", "rawvideo", "-pix_fmt", "yuv420p", "-field_order", "tt"])
        #expect(try TelecineTests.videoField(source, "field_order") == .string("tt"))
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "tiny-\(size)") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["deinterlace"] == .bool(false))
            #expect(try FFprobe.decodeErrors(out) == "")
            #expect(try FFprobe(out).streams("video").first?["nb_frames"] == .string("50"))
        }
    }

    /// Raw packed 4:1:1 (uyyvyy411: 6 bytes for 4 pixels) flagged interlaced, 16384x32, six
    /// pictures of noise.
    static func packed411() throws -> String {
        try Media.generated("uyyvyy411-16384x32-tt.mkv") { tmp in
            let raw = tmp + ".raw"
            defer { try? FileManager.default.removeItem(atPath: raw) }
            var random = SplitMix(seed: 411)
            let bytes = (0..<(16384 * 32 * 3 / 2 * 6)).map { _ in UInt8.random(in: 0...255, using: &random) }
            try Data(bytes).write(to: URL(fileURLWithPath: raw))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "uyyvyy411", "-s", "16384x32",
                                               "-framerate", "25", "-i", raw, "-c:v", "copy", "-field_order", "tt", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not write packed 4:1:1: \(r.stderr)") }
        }
    }

    @Test("packed 4:1:1 pictures (uyyvyy411) are described without the field survey reading past their rows (a 16384-wide one crashed the probe), and their transcode is refused as source_unsupported, which libswscale cannot read (it was an internal_error)")
    func packed411Refused() throws {
        let source = try Self.packed411()
        let probe = try Command.run(["probe", source, "--json"])
        #expect(probe.status == 0, "\(probe.stderr.suffix(300))")
        guard case .array(let streams)? = try JSONValue.parse(Array(probe.stdout.utf8))["media"]?["streams"] else { throw TestFailure("no streams: \(probe.stdout)") }
        #expect(streams.first { $0["type"] == .string("video") }?["pixel_format"] == .string("uyyvyy411"))
        try Command.prepare(source, quality: "2mbps", caps: "web", scratch: "packed411") { (r, out) throws in
            #expect(r.status == 3, "\(r.stdout) \(r.stderr.suffix(300))")
            let error = try Command.json(r)["error"]
            #expect(error?["code"] == .string("source_unsupported"))
            #expect(error?["message"]?.string?.contains("uyyvyy411") == true, "\(String(describing: error))")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }
}

@Suite("progressive pictures stored interlaced")
struct StoredInterlacedTests {
    /// 6 s of progressive 25 fps pictures as a camera makes them: drawn at twice the size
    /// and shrunk, so no detail is finer than a line pair (a 1-line edge of a test card
    /// combs like interlacing, whichever way it is stored), stored losslessly.
    static func progressive() throws -> String {
        try Media.generated("progressive-25-576.mkv", ["-f", "lavfi", "-i", "testsrc2=size=1440x1152:rate=25:duration=6",
                                                         "-vf", "scale=720:576:flags=lanczos", "-c:v", "ffv1"])
    }

    /// `progressive` stored as interlaced MPEG-2 pictures (PAL's 25PsF, as DVB and PAL DVDs
    /// carry most films and series), with AC-3 sound.
    static func psf() throws -> String {
        try Media.generated("progressive-25psf-mpeg2.ts", ["-i", try progressive(), "-f", "lavfi", "-i", "sine=duration=6",
                                                           "-vf", "setfield=tff", "-flags", "+ilme+ildct", "-top", "1",
                                                           "-c:v", "mpeg2video", "-b:v", "8M", "-c:a", "ac3", "-f", "mpegts"])
    }

    /// `progressive` in 2:2 shifted by a field: each stored picture's top field is the
    /// picture before's (a PAL DVD mastered with the wrong field dominance).
    static func shifted() throws -> String {
        try Media.generated("progressive-25psf-shifted-mpeg2.ts", ["-i", try progressive(), "-vf", "phase=t,setfield=tff",
                                                                   "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video",
                                                                   "-b:v", "8M", "-f", "mpegts"])
    }

    /// Video shot interlaced where only a small part moves: a white box crossing still
    /// colour bars, 50 moments a second in 25 interlaced pictures.
    static func smallMotion() throws -> String {
        try Media.generated("interlaced-small-motion-mpeg2.ts", ["-f", "lavfi", "-i", "smptehdbars=size=720x576:rate=50:duration=6",
                                                                 "-f", "lavfi", "-i", "color=c=white:size=64x48:rate=50:duration=6",
                                                                 "-filter_complex", "[0][1]overlay=x='100+t*200':y='200+50*sin(t*3)',interlace=scan=tff",
                                                                 "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M",
                                                                 "-f", "mpegts"])
    }

    /// Video shot interlaced tilting down a still card by exactly a line a field: each
    /// picture's own fields weave without combing, into lines each equal to the one below.
    static func tilt() throws -> String {
        try Media.generated("interlaced-tilt-line-a-field-mpeg2.ts", ["-f", "lavfi", "-i",
            "testsrc2=size=1440x1800:rate=50,trim=end_frame=1,loop=loop=300:size=1,setpts=N/50/TB", "-t", "6",
            "-vf", "crop=1440:1152:0:'n*2',scale=720:576:flags=lanczos,tinterlace=mode=interleave_top,setfield=tff",
            "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M", "-f", "mpegts"])
    }

    /// Uncompressed packed 4:2:2 (UYVY, a capture card's) in MOV, 3 s at 352x288: video
    /// shot interlaced (`progressive` false) or progressive pictures stored interlaced.
    static func packed(progressive: Bool) throws -> String {
        let source = progressive
            ? ["-f", "lavfi", "-i", "testsrc2=size=704x576:rate=25:duration=3", "-vf", "scale=352:288:flags=lanczos,setfield=tff"]
            : ["-f", "lavfi", "-i", "testsrc2=size=352x288:rate=50:duration=3", "-vf", "interlace=scan=tff"]
        return try Media.generated("uyvy-\(progressive ? "psf" : "interlaced").mov",
                                   source + ["-pix_fmt", "uyvy422", "-c:v", "rawvideo", "-field_order", "tt"])
    }

    @Test("the probe finds progressive pictures in interlaced ones, 2:2 shifted by a field, film in 3:2 pulldown and packed UYVY too; video shot interlaced is not, even where only a small part of the picture moves, where it tilts a line a field (whose own fields weave without combing: it had been matched into line-doubled pictures, 3 dB below deinterlacing), or in UYVY (whose chroma bytes had been read as luma: it read progressive)")
    func probe() throws {
        func progressiveFrames(_ path: String) throws -> JSONValue? { try TelecineTests.videoField(path, "progressive_frames") }
        #expect(try progressiveFrames(Self.psf()) == .bool(true))
        #expect(try progressiveFrames(Self.shifted()) == .bool(true))
        #expect(try progressiveFrames(TelecineTests.telecined()) == .bool(true))
        #expect(try progressiveFrames(TelecineTests.interlacedVideo()) == .bool(false))
        #expect(try progressiveFrames(Self.smallMotion()) == .bool(false))
        #expect(try progressiveFrames(Self.tilt()) == .bool(false))
        #expect(try progressiveFrames(Self.packed(progressive: false)) == .bool(false))
        #expect(try progressiveFrames(Self.packed(progressive: true)) == .bool(true))
        #expect(try progressiveFrames(Self.progressive()) == nil)
    }

    @Test("pictures larger than 2K flagged interlaced are not surveyed (no format stores them so, and 150 UHD pictures a window cost seconds of probing): they are deinterlaced, as any interlaced picture the survey cannot judge")
    func largePicturesUnsurveyed() throws {
        // Progressive pictures that a survey finds whole at 1080 lines, as the probe()
        // sources; only their size keeps them out of it.
        func card(_ size: String) throws -> String {
            try Media.generated("progressive-stored-interlaced-\(size).ts", ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=2",
                                                                            "-c:v", "libx264", "-preset", "ultrafast", "-x264-params", "interlaced=1:tff=1",
                                                                            "-f", "mpegts"])
        }
        let hd = try card("1920x1080"), large = try card("2560x1440")
        #expect(try TelecineTests.videoField(hd, "progressive_frames") == .bool(true))
        #expect(try TelecineTests.videoField(large, "field_order") == .string("tt"))
        #expect(try TelecineTests.videoField(large, "progressive_frames") == nil)
        let plan = try Command.planned([large, "--quality", "10mbps", "--caps", "web", "--json"])
        #expect(plan["video"]?["deinterlace"] == .bool(true), "\(plan)")
        #expect(plan["video"]?["field_match"] == nil, "\(plan)")
    }

    @Test("25PsF is matched whole, every picture at full height (deinterlaced, each was rebuilt from half its lines: the worst 38 dB from the original's)")
    func matchedWhole() throws {
        let original = try Self.progressive()
        try Command.prepare(try Self.psf(), quality: "10mbps", caps: "web", scratch: "psf") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["field_match"] == .bool(true))
            #expect(json["plan"]?["video"]?["inverse_telecine"] == nil)
            guard case .array(let reasons)? = json["plan"]?["reasons"] else { throw TestFailure("no reasons") }
            #expect(reasons.contains(.string("field_matched")) && !reasons.contains(.string("deinterlaced")))
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["avg_frame_rate"] == .string("25/1"), "\(video)")
            let made = try TelecineTests.lumaFrames(out, width: 720, height: 576)
            let source = try TelecineTests.lumaFrames(original, width: 720, height: 576)
            #expect(made.count == source.count, "\(made.count) pictures for the original's \(source.count)")
            let worst = zip(made, source).map { TelecineTests.psnr($0, $1) }.min() ?? 0
            #expect(worst > 42, "the worst picture is \(worst) dB from the original's")
        }
    }

    @Test("2:2 shifted by a field is matched whole too: every picture the original's at its place")
    func shiftedMatchedWhole() throws {
        let source = try TelecineTests.lumaFrames(try Self.progressive(), width: 720, height: 576)
        try Command.prepare(try Self.shifted(), quality: "10mbps", caps: "web", scratch: "psf-shifted") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            #expect(try Command.json(r)["plan"]?["video"]?["field_match"] == .bool(true))
            let made = try TelecineTests.lumaFrames(out, width: 720, height: 576)
            #expect(made.count == source.count, "\(made.count) pictures for the original's \(source.count)")
            // Each the original's at its place, but the last: the file holds only one field
            // of it (its other one went with the picture before), so it is deinterlaced.
            let worst = zip(made.dropLast(), source).map { TelecineTests.psnr($0, $1) }.min() ?? 0
            #expect(worst > 42, "the worst picture is \(worst) dB from the original's")
        }
    }
}

@Suite("film in 3:2 pulldown")
struct TelecineTests {
    static let size = "720x480"

    /// 6 s of film: moving pictures at 23.976, stored losslessly.
    static func film() throws -> String {
        try Media.generated("film-23.976.mkv", ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=24000/1001:duration=6", "-c:v", "ffv1"])
    }

    /// `film` with 3:2 pulldown baked into 29.97 interlaced MPEG-2 pictures (hard telecine),
    /// as a US broadcast or a DVD carries film, with AC-3 sound.
    static func telecined() throws -> String {
        try Media.generated("film-telecined-mpeg2.ts", ["-i", try film(), "-f", "lavfi", "-i", "sine=duration=6",
                                                        "-vf", "telecine=first_field=top:pattern=23,setfield=tff", "-flags", "+ilme+ildct",
                                                        "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M", "-c:a", "ac3", "-f", "mpegts"])
    }

    /// 6 s of video shot interlaced: 59.94 moments a second, one per field, in 29.97
    /// interlaced MPEG-2 pictures.
    static func interlacedVideo() throws -> String {
        try Media.generated("video-interlaced-mpeg2.ts", ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=60000/1001:duration=6",
                                                          "-f", "lavfi", "-i", "sine=duration=6", "-vf", "interlace=scan=tff",
                                                          "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M",
                                                          "-c:a", "ac3", "-f", "mpegts"])
    }

    /// `film` in 3:2 pulldown with noise on every picture after it (an analogue capture's):
    /// its repeated fields differ by that noise.
    static func noisyTelecined() throws -> String {
        try Media.generated("film-noisy-telecined-mpeg2-v2.ts", ["-i", try film(), "-vf",
                                                                 "telecine=first_field=top:pattern=23,setfield=tff,noise=alls=8:allf=t:all_seed=7",
                                                                 "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M",
                                                              "-f", "mpegts"])
    }

    /// 6 s of a still picture, then `film`, in 3:2 pulldown.
    static func stillOpeningTelecined() throws -> String {
        try Media.generated("still-then-film-telecined-mpeg2.ts", ["-i", try film(), "-filter_complex",
            "[0:v]split[a][b];[a]trim=end_frame=1,loop=loop=143:size=1,setpts=N/(24000/1001)/TB[s];[b]setpts=PTS-STARTPTS[f];"
                + "[s][f]concat=n=2:v=1:a=0,telecine=first_field=top:pattern=23,setfield=tff[v]",
            "-map", "[v]", "-flags", "+ilme+ildct", "-top", "1", "-c:v", "mpeg2video", "-b:v", "8M", "-f", "mpegts"])
    }

    @Test("the probe tells film in 3:2 pulldown from video shot interlaced, noisy film and film after a still opening too, and leaves progressive pictures alone (noise hid every repeated field from a test of each picture; a still opening of 180 pictures left the film undecided)")
    func probe() throws {
        func telecined(_ path: String) throws -> JSONValue? { try Self.videoField(path, "telecined") }
        #expect(try telecined(Self.telecined()) == .bool(true))
        #expect(try telecined(Self.noisyTelecined()) == .bool(true))
        #expect(try telecined(Self.stillOpeningTelecined()) == .bool(true))
        #expect(try telecined(Self.interlacedVideo()) == .bool(false))
        #expect(try telecined(Self.film()) == nil)
    }

    @Test("film in 3:2 pulldown is matched back into its frames: 23.976 progressive, every film frame once and whole (deinterlaced at 29.97, a frame in five was shown twice and others were made of two film frames' fields)")
    func inverseTelecined() throws {
        let film = try Self.film()
        try Command.prepare(try Self.telecined(), quality: "5mbps", caps: "web", scratch: "telecined") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["inverse_telecine"] == .bool(true))
            guard case .array(let reasons)? = json["plan"]?["reasons"] else { throw TestFailure("no reasons") }
            #expect(reasons.contains(.string("inverse_telecined")))
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["avg_frame_rate"] == .string("24000/1001"), "\(video)")
            let made = try Self.lumaFrames(out), source = try Self.lumaFrames(film)
            #expect(made.count == source.count, "\(made.count) frames for the film's \(source.count)")
            // Frame by frame, the film's own picture: a frame of two film frames' fields, a
            // repeat or a frame left out puts every picture after it against another one.
            let worst = zip(made, source).map { Self.psnr($0, $1) }.min() ?? 0
            #expect(worst > 35, "the worst frame is \(worst) dB from its film frame")
        }
    }

    /// `film` in 3:2 pulldown re-encoded as progressive H.264 at 29.97 (a DVD ripped
    /// without taking the pulldown out: two pictures in five combed), with AAC.
    static func progressiveTelecined() throws -> String {
        try Media.generated("film-telecined-progressive-h264-v2.mkv", ["-i", try film(), "-f", "lavfi", "-i", "sine=duration=6",
                                                                      "-vf", "telecine=first_field=top:pattern=23", "-c:v", "libx264",
                                                                      "-preset", "veryfast", "-crf", "16", "-c:a", "aac"])
    }

    @Test("film in 3:2 pulldown in interlaced H.264 whose first repeated picture is its first is matched back with its pictures at their times: decimate timed them from the first it kept, one 29.97 frame (33 ms) behind the sound")
    func inverseTelecinedOnTime() throws {
        let source = try Media.generated("film-flash-at-1s-telecined-h264.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=640x480:rate=24000/1001:duration=5,drawbox=c=white:t=fill:enable='between(t,1,1.0375)',telecine=first_field=t:pattern=23",
            "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=5",
            "-c:v", "libx264", "-preset", "veryfast", "-flags", "+ildct+ilme", "-top", "1", "-x264-params", "tff=1", "-c:a", "aac"])
        let flashed = try #require(try FFprobe.firstFlash(source))
        try Command.prepare(source, quality: "original", caps: "apple-tv-4k", scratch: "telecined-h264-on-time") { r, out in
            #expect(r.status == 0, "\(r.stdout)")
            #expect("\(try Command.json(r)["plan"]?["reasons"] ?? .null)".contains("inverse_telecined"), "\(r.stdout.prefix(400))")
            let flash = try #require(try FFprobe.firstFlash(out))
            #expect(abs(flash - flashed) < 0.01, "the flash is at \(flash) s, at \(flashed) s in the source")
            let probe = try FFprobe(out)
            #expect(abs((try probe.startTime("video") ?? 1) - (try probe.startTime("audio") ?? 0)) < 0.01)
        }
    }

    @Test("film in 3:2 pulldown in pictures flagged progressive is found and matched back into its 23.976 frames when re-encoded; progressive video at 29.97 is not (it was never surveyed: 2 pictures in 5 stayed combed)")
    func progressiveTelecined() throws {
        func telecined(_ path: String) throws -> JSONValue? { try Self.videoField(path, "telecined") }
        let video = try Media.generated("video-29.97-progressive-h264.mkv", ["-f", "lavfi", "-i", "testsrc2=size=\(Self.size):rate=30000/1001:duration=6",
                                                                           "-c:v", "libx264", "-preset", "veryfast"])
        #expect(try telecined(video) == .bool(false))
        #expect(try telecined(Self.progressiveTelecined()) == .bool(true))
        let film = try Self.film()
        try Command.prepare(try Self.progressiveTelecined(), quality: "1mbps", caps: "web", scratch: "telecined-progressive") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["inverse_telecine"] == .bool(true))
            let stream = try #require(try FFprobe(out).streams("video").first)
            #expect(stream["avg_frame_rate"] == .string("24000/1001"), "\(stream)")
            let made = try Self.lumaFrames(out), source = try Self.lumaFrames(film)
            #expect(made.count == source.count, "\(made.count) frames for the film's \(source.count)")
            let worst = zip(made, source).map { Self.psnr($0, $1) }.min() ?? 0
            #expect(worst > 30, "the worst frame is \(worst) dB from its film frame")
        }
    }

    @Test("video shot interlaced is deinterlaced at its own 29.97, every picture kept")
    func interlacedVideoKept() throws {
        try Command.prepare(try Self.interlacedVideo(), quality: "5mbps", caps: "web", scratch: "interlaced-video") { (r, out) throws in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["inverse_telecine"] == nil)
            #expect(json["plan"]?["video"]?["deinterlace"] == .bool(true))
            let video = try #require(try FFprobe(out).streams("video").first)
            #expect(video["avg_frame_rate"] == .string("30000/1001"), "\(video)")
            #expect(try FFprobe.packetCount(out, "v") == 180)
        }
    }

    /// What the probe says of a file's first video stream under `key`.
    static func videoField(_ path: String, _ key: String) throws -> JSONValue? {
        try Command.probedStreams(path).first { $0["type"] == .string("video") }?[key]
    }

    /// Each picture's luma at `width`×`height` (by default a quarter of this suite's area).
    static func lumaFrames(_ path: String, width: Int = 360, height: Int = 240) throws -> [[UInt8]] {
        // Its own name: tests read the same source at once.
        let raw = NSTemporaryDirectory() + "/kiln-luma-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        // Every picture once: the rawvideo muxer's constant rate would repeat the first to
        // fill a late start.
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-map", "0:v:0", "-vf", "scale=\(width):\(height)",
                                           "-fps_mode", "passthrough", "-pix_fmt", "gray", "-f", "rawvideo", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw))), plane = width * height
        return stride(from: 0, to: bytes.count - plane + 1, by: plane).map { Array(bytes[$0..<$0 + plane]) }
    }

    static func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
        let squared = zip(a, b).reduce(0) { $0 + (Int($1.0) - Int($1.1)) * (Int($1.0) - Int($1.1)) }
        let mse = Double(squared) / Double(max(1, a.count))
        return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
    }
}


@Suite("a Matroska file without Cues")
struct MatroskaWithoutCuesTests {
    @Test("a Matroska recording written live (no Cues: a recorder stopped abruptly, a pipe) is remuxed for Android, whose player cannot seek in it, into a whole MP4; the same film with its Cues goes as it is")
    func remuxedForAndroid() throws {
        func film(live: Bool) throws -> String {
            try Media.generated("film-\(live ? "live" : "cues").mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                                                     "-f", "lavfi", "-i", "sine=duration=8", "-c:v", "libx264", "-preset", "ultrafast",
                                                                     "-c:a", "aac", "-f", "matroska"] + (live ? ["-live", "1"] : []))
        }
        let (live, indexed) = (try film(live: true), try film(live: false))
        #expect(try Command.probed(live)["unindexed"] == .bool(true))
        #expect(try Command.probed(indexed)["unindexed"] == nil)
        #expect(try Command.planned([indexed, "--quality", "original", "--caps", "android", "--json"])["delivery_format"] == .string("original"))
        try Command.prepare(live, quality: "original", caps: "android", scratch: "matroska-without-cues") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"] == .string("remux") && "\(json["plan"]?["reasons"] ?? .null)".contains("container_unindexed"),
                    "\(json["plan"] ?? .null)")
            #expect(try FFprobe.moovBeforeMdat(out))
            #expect(abs(try FFprobe(out).formatDuration - 8) < 0.2)
        }
    }
}

@Suite("what Matroska's track entries say beyond libavformat")
struct MatroskaTrackEntryTests {
    /// 6 s of H.264 and three AAC tracks, remuxed by mkvmerge: Portuguese as spoken in
    /// Portugal, as spoken in Brazil (its blocks zlib-compressed), and as spoken in Brazil
    /// again but disabled (FlagEnabled 0).
    static func film() throws -> String {
        try Media.generated("portuguese-variants-zlib-disabled.mkv") { tmp in
            let plain = tmp + ".plain.mkv"
            defer { unlink(plain) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                               "-f", "lavfi", "-i", "sine=frequency=440:duration=6", "-f", "lavfi", "-i", "sine=frequency=660:duration=6",
                                               "-f", "lavfi", "-i", "sine=frequency=880:duration=6", "-map", "0", "-map", "1", "-map", "2", "-map", "3",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-f", "matroska", plain])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            let m = try Run.command("mkvmerge", ["-q", "-o", tmp, "--language", "1:pt-PT", "--language", "2:pt-BR", "--compression", "2:zlib",
                                                 "--language", "3:pt-BR", "--track-enabled-flag", "3:0", plain])
            guard m.status == 0 || m.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(m.stderr)") }
        }
    }

    @Test("the probe reads each track's BCP 47 language, enabled flag and compression; asked for pt-BR, the Brazilian dub goes, not the Portuguese one first in the file (both are \"por\") nor the disabled one; a zlib-compressed track makes Android's copy a remux (ExoPlayer plays zlib's bytes as they are), whose sound decodes cleanly")
    func variantsCompressionAndDisabled() throws {
        let source = try Self.film()
        let streams = try Command.probedStreams(source)
        #expect(streams.map { $0["language_tag"]?.string } == [nil, "pt-PT", "pt-BR", "pt-BR"], "\(streams)")
        #expect(streams.map { $0["compression"]?.string } == [nil, nil, "zlib", nil])
        #expect(streams.map { $0["disabled"] == .bool(true) } == [false, false, false, true])
        let portugal = try Command.planned([source, "--quality", "original", "--caps", "android", "--audio-language", "pt-PT", "--json"])
        #expect(portugal["audio"]?["source_index"]?.int == 1)
        try Command.prepare(source, quality: "original", caps: "android", scratch: "portuguese-variants", extra: ["--audio-language", "pt-BR"]) { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let plan = try Command.json(run)["plan"] ?? .null
            #expect(plan["audio"]?["source_index"]?.int == 2, "\(plan)")
            #expect(plan["delivery_format"] == .string("remux") && "\(plan["reasons"] ?? .null)".contains("container_compressed_tracks"), "\(plan)")
            #expect(try FFprobe.decodeErrors(out).isEmpty)
            #expect(abs((try FFprobe(out).duration("audio") ?? 0) - 6) < 0.2)
        }
    }
}

extension MatroskaTrackEntryTests {
    @Test("mkvmerge's WebVTT track (S_TEXT/WEBVTT, which libavformat 5.1 has no codec for) is read as WebVTT: its cues go to iOS as mov_text at their times, markup and cue settings left out, and every picture with them (given the codec, the demuxer had taken the blocks for WebM's older layout, refused them and left the rest of their clusters unread)")
    func webVTTTrack() throws {
        let source = try Media.generated("webvtt-by-mkvmerge.mkv") { tmp in
            let (film, vtt) = (tmp + ".film.mp4", tmp + ".vtt")
            defer { unlink(film); unlink(vtt) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                               "-f", "lavfi", "-i", "sine=duration=6", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", film])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            try Data("WEBVTT\n\n00:00:00.500 --> 00:00:02.000 align:start line:0\nHello <b>world</b>\n\nsecond-cue\n00:00:02.500 --> 00:00:04.000\nSecond cue\nline two\n".utf8)
                .write(to: URL(fileURLWithPath: vtt))
            let m = try Run.command("mkvmerge", ["-q", "-o", tmp, film, "--language", "0:fr", vtt])
            guard m.status == 0 || m.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(m.stderr)") }
        }
        let streams = try Command.probedStreams(source)
        #expect(streams.map { $0["codec"]?.string } == ["h264", "aac", "webvtt"], "\(streams)")
        #expect(streams.last?["text_subtitle"] == .bool(true))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "webvtt-track") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            #expect(try FFprobe.packetCount(out, "v:0") == 150)
            let cues = try Command.cues(out)
            #expect(cues.map(\.text) == ["Hello world", "Second cue line two"], "\(cues)")
            #expect(cues.map(\.start) == [0.5, 2.5] && cues.map(\.end) == [2, 4], "\(cues)")
            guard case .array(let written)? = try FFprobe(out).json["streams"] else { throw TestFailure("ffprobe lists no streams") }
            let subtitles = written.filter { $0["codec_type"]?.string == "subtitle" }
            #expect(subtitles.map { $0["codec_name"]?.string } == ["mov_text"] && subtitles.first?["tags"]?["language"]?.string == "fra")
        }
    }
}

@Suite("subtitle text as its track has it")
struct SubtitleTrackTextTests {
    @Test("a GB18030 track whose third cue is also valid UTF-8 (谢谢 is D0 BB D0 BB, UTF-8's \"лл\") is read in GB18030 throughout; in a UTF-8 track a cue with a stray Windows-1252 apostrophe, or three curly quotes, keeps its UTF-8; SubRip's braces are text (\"{laughs}\" had been taken for an ASS block and left out) and its HTML character references the characters they name (\"Tom &amp; Jerry\" had gone as written)")
    func trackDecides() throws {
        let source = try Media.generated("subtitles-gb18030-stray-bytes-entities.mkv") { tmp in
            let (film, chinese, english) = (tmp + ".film.mkv", tmp + ".zh.srt", tmp + ".en.srt")
            defer { unlink(film); unlink(chinese); unlink(english) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", film])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            let zh = "1\n00:00:01,000 --> 00:00:03,000\n你好，你今天怎么样\n\n2\n00:00:04,000 --> 00:00:06,000\n简体中文字幕测试\n\n3\n00:00:07,000 --> 00:00:09,000\n<i>谢谢</i>\n"
            let gb = try Run.command("iconv", ["-f", "UTF-8", "-t", "GB18030", "-o", chinese], stdin: Data(zh.utf8))
            guard gb.status == 0 else { throw TestFailure("iconv: \(gb.stderr)") }
            let en: [UInt8] = Array("1\n00:00:01,000 --> 00:00:02,000\nPlain line\n\n2\n00:00:03,000 --> 00:00:04,000\nIt".utf8) + [0x92]
                + Array("s café — mixed\n\n3\n00:00:05,000 --> 00:00:06,000\n{laughs} I know\n\n4\n00:00:07,000 --> 00:00:08,000\nTom &amp; Jerry&#39;s &lt;b&gt; AT&T\n".utf8)
                + Array("\n5\n00:00:08,500 --> 00:00:09,500\nDon".utf8) + [0x92] + Array("t say ".utf8) + [0x93] + Array("never".utf8) + [0x94]
                + Array(" in the café.\n".utf8)
            try Data(en).write(to: URL(fileURLWithPath: english))
            // ffmpeg copies the SubRip files' bytes as they are (mkvmerge would re-encode them).
            let m = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", film, "-i", chinese, "-i", english, "-map", "0", "-map", "1", "-map", "2",
                                               "-c", "copy", "-metadata:s:s:0", "language=chi", "-metadata:s:s:1", "language=eng", "-f", "matroska", tmp])
            guard m.status == 0 else { throw TestFailure("ffmpeg: \(m.stderr)") }
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "subtitle-track-text") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let chinese = try Command.cues(out, "0:s:0").map(\.text), english = try Command.cues(out, "0:s:1").map(\.text)
            #expect(chinese == ["你好，你今天怎么样", "简体中文字幕测试", "谢谢"], "\(chinese)")
            #expect(english.prefix(2) == ["Plain line", "It’s café — mixed"], "\(english)")
            // Three Windows-1252 quotes beside one UTF-8 "é", in a UTF-8 track: the quotes alone
            // are the code page's (the cue had been read whole in it: "cafÃ©").
            #expect(english.last == "Don’t say “never” in the café.", "\(english)")
            // (`cues` leaves out what is in braces, as markup.)
            let raw = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:1", "-f", "srt", "-"]).stdout
            #expect(raw.contains("{laughs} I know") && raw.contains("Tom & Jerry's <b> AT&T"), "\(raw)")
        }
    }
}

extension SubtitleTrackTextTests {
    @Test("a Korean SubRip track in CP949 that names no language is read as Korean (it had come out as Windows-1252's \"Á¤¸» °í¸¶\"), its first line too, though it holds a UTF-8 character by chance and had been taken for UTF-8 with a stray byte; a Chinese line ending in a UTF-8 character by chance is read in its track's GB18030")
    func koreanWithoutTag() throws {
        let lines = ["정말 고마워요. 당신이 없었으면 어떻게 했을지 모르겠어요.", "지금 어디 가는 거야?", "경찰에 신고해야 돼요.", "네"]
        let chinese = ["你到底想要什么？", "为什么？", "嘘！", "好的。"]
        let source = try Media.generated("subtitles-cp949-gb18030-untagged-2.mkv") { tmp in
            let (film, korean, simplified) = (tmp + ".film.mkv", tmp + ".ko.srt", tmp + ".zh.srt")
            defer { unlink(film); unlink(korean); unlink(simplified) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", film])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            func srt(_ lines: [String]) -> Data {
                Data(lines.enumerated().map { "\($0 + 1)\n00:00:0\(2 * $0 + 1),000 --> 00:00:0\(2 * $0 + 2),000\n\($1)\n" }.joined(separator: "\n").utf8)
            }
            for (text, page, file) in [(lines, "CP949", korean), (chinese, "GB18030", simplified)] {
                let r = try Run.command("iconv", ["-f", "UTF-8", "-t", page, "-o", file], stdin: srt(text))
                guard r.status == 0 else { throw TestFailure("iconv: \(r.stderr)") }
            }
            let m = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", film, "-i", korean, "-i", simplified, "-map", "0", "-map", "1",
                                               "-map", "2", "-c", "copy", "-f", "matroska", tmp])
            guard m.status == 0 else { throw TestFailure("ffmpeg: \(m.stderr)") }
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "subtitle-korean") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let cues = try Command.cues(out, "0:s:0").map(\.text)
            #expect(cues == lines, "\(cues)")
            // "嘘！" in GB18030 (D0 EA A3 A1) ends in a UTF-8 character: in a track already
            // read as GB18030 it is GB18030's too (it had come out "Ð꣡").
            let simplified = try Command.cues(out, "0:s:1").map(\.text)
            #expect(simplified == chinese, "\(simplified)")
        }
    }

    @Test("an ASS track whose header (its CodecPrivate) is lost or damaged goes on libavcodec's default styles, its lines whole (the run had failed as internal_error: \"Cannot open the mov_text encoder\")")
    func assHeaderLost() throws {
        let source = try Media.generated("subtitles-ass-2s.mkv") { tmp in
            let ass = tmp + ".ass"
            defer { unlink(ass) }
            let script = "[Script Info]\nScriptType: v4.00+\nPlayResX: 320\nPlayResY: 240\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, "
                + "SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, "
                + "Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\nStyle: Default,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,"
                + "100,100,0,0,1,2,0,2,10,10,10,1\n\n[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
                + "Dialogue: 0,0:00:00.50,0:00:01.50,Default,,0,0,0,,Bonjour\n"
            try script.write(toFile: ass, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                                               "-f", "lavfi", "-i", "sine=duration=2", "-i", ass, "-map", "0", "-map", "1", "-map", "2",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:s", "copy", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        let dir = Media.scratch("ass-header-lost")
        defer { try? FileManager.default.removeItem(at: dir) }
        // The ASS track's CodecPrivate (63 A2, after its CodecID S_TEXT/ASS) becomes an
        // element of no meaning (63 A3): the header is gone. Its size one byte larger
        // instead swallows what follows, a header damaged.
        func damaged(_ name: String, _ change: @escaping (inout [UInt8], Int) -> Void) throws -> String {
            try damagedCopy(ofFile: source, in: dir, as: name) { bytes throws in
                let codec = try #require(firstOffset(of: Array("S_TEXT/ASS".utf8), in: bytes))
                change(&bytes, try #require(firstOffset(of: [0x63, 0xA2], in: bytes, from: codec)))
            }.path
        }
        let lost = try damaged("ass-header-lost.mkv") { bytes, at in bytes[at + 1] = 0xA3 }
        let swallowing = try damaged("ass-header-size.mkv") { bytes, at in
            let length = bytes[at + 2].leadingZeroBitCount + 1
            bytes[at + 2 + length - 1] &+= 1
        }
        for file in [lost, swallowing] {
            try Command.prepare(file, quality: "original", caps: "ios", scratch: "ass-header-lost-run") { run, out in
                #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
                let cues = try Command.cues(out, "0:s:0").map(\.text)
                #expect(cues == ["Bonjour"], "\(file)")
            }
        }
    }

    @Test("an ASS track whose header defines no style (no [V4+ Styles]) styles its first line as the rest, white at the default size: it had come out at font size 0 in transparent black, which Apple's players do not show")
    func assWithoutStyles() throws {
        let source = try Media.generated("subtitles-ass-unstyled-3s.mkv") { tmp in
            let ass = tmp + ".ass"
            defer { unlink(ass) }
            let script = "[Script Info]\nScriptType: v4.00+\nPlayResX: 320\nPlayResY: 240\n\n"
                + "[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
                + "Dialogue: 0,0:00:00.50,0:00:01.50,Default,,0,0,0,,Hello {\\b1}there{\\b0}\n"
                + "Dialogue: 0,0:00:02.00,0:00:02.50,Default,,0,0,0,,Good {\\i1}bye{\\i0}\n"
            try script.write(toFile: ass, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                               "-f", "lavfi", "-i", "sine=duration=3", "-i", ass, "-map", "0", "-map", "1", "-map", "2",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:s", "ass", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "ass-unstyled") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            #expect(try Command.cues(out, "0:s:0").map(\.text) == ["Hello there", "Good bye"])
            // Each sample's style records (its `styl` box: start, end, font, face, size, RGBA).
            let sizes = try Run.command("ffprobe", ["-v", "error", "-select_streams", "s", "-show_entries", "packet=size", "-of", "csv=p=0", out])
            let samples = out + ".samples"
            defer { unlink(samples) }
            _ = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:0", "-c", "copy", "-f", "data", samples])
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: samples)))[...], records: [(size: UInt8, alpha: UInt8)] = []
            for size in sizes.stdout.split(separator: "\n").compactMap({ Int($0) }) {
                let sample = Array(bytes.prefix(size))
                bytes = bytes.dropFirst(size)
                guard sample.count > 2 else { continue }
                var at = 2 + (Int(sample[0]) << 8 | Int(sample[1]))
                while at + 8 <= sample.count {
                    let boxSize = sample[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
                    if String(decoding: sample[at + 4..<at + 8], as: UTF8.self) == "styl" {
                        for r in stride(from: at + 10, to: at + boxSize, by: 12) where r + 12 <= sample.count {
                            records.append((sample[r + 7], sample[r + 11]))
                        }
                    }
                    at += max(8, boxSize)
                }
            }
            #expect(records.count >= 2, "\(records)")
            #expect(records.allSatisfy { $0.size > 0 && $0.alpha > 0 }, "every run visible: \(records)")
        }
    }

    @Test("a text track that gives no text to show (an ASS track of drawings only, marked default) is left out and said to be (`subtitle_empty`): it had been a track of one blank sample, listed and shown by default; the SubRip track beside it goes as before")
    func emptyTrackLeftOut() throws {
        let source = try Media.generated("subtitles-drawings-only-and-srt.mkv") { tmp in
            let (ass, srt) = (tmp + ".ass", tmp + ".srt")
            defer { unlink(ass); unlink(srt) }
            let header = "[Script Info]\nScriptType: v4.00+\nPlayResX: 320\nPlayResY: 240\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, "
                + "SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, Spacing, Angle, BorderStyle, Outline, "
                + "Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\nStyle: Default,Arial,20,&H00FFFFFF,&H000000FF,&H00000000,&H00000000,0,0,0,0,"
                + "100,100,0,0,1,2,0,2,10,10,10,1\n\n[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
            let drawings = (1...3).map { "Dialogue: 0,0:00:0\($0).00,0:00:0\($0 + 1).00,Default,,0,0,0,,{\\p1}m 0 0 l 100 0 100 100{\\p0}\n" }.joined()
            try (header + drawings).write(toFile: ass, atomically: true, encoding: .utf8)
            try "1\n00:00:01,000 --> 00:00:02,000\nHello\n".write(toFile: srt, atomically: true, encoding: .utf8)
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=5",
                                               "-f", "lavfi", "-i", "sine=duration=5", "-i", ass, "-i", srt, "-map", "0", "-map", "1", "-map", "2", "-map", "3",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-c:s", "copy",
                                               "-metadata:s:s:0", "language=eng", "-disposition:s:0", "default", "-metadata:s:s:1", "language=fre",
                                               "-disposition:s:1", "0", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "empty-text-track") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let result = try Command.json(run)
            guard case .array(let subtitles)? = result["output"]?["subtitles"], case .array(let dropped)? = result["output"]?["dropped"],
                  case .array(let reasons)? = result["executed_plan"]?["reasons"] else { throw TestFailure("\(run.stdout)") }
            #expect(subtitles.map { $0["language"]?.string } == ["fra"], "\(subtitles)")
            #expect(dropped.contains { $0["source_index"] == .number(2) && $0["reason"]?.string == "subtitle_empty" && $0["codec"]?.string == "ass" }, "\(dropped)")
            #expect(reasons.contains(.string("subtitle_empty")))
            let subs = try FFprobe(out).streams("subtitle")
            #expect(subs.map { $0["codec_name"]?.string } == ["mov_text"], "\(subs)")
            #expect(try Command.cues(out, "0:s:0").map(\.text) == ["Hello"])
        }
    }
}

@Suite("a container is what the file says it is, not its name")
struct ContainerBrandTests {
    @Test("a Matroska file named .webm that holds H.264 and AAC (DocType matroska) is mkv and is remuxed for a browser that takes only MP4 and WebM (it went as it was); a real WebM named .mkv is webm and goes as it is (as does a .webm of WebM's codecs that ffmpeg marked matroska); a QuickTime file named .mp4 (brand qt) is mov")
    func brandOverName() throws {
        let film = try Media.generated("brand-film-h264-aac.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-f", "lavfi", "-i", "sine=duration=3",
                                                                   "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        let matroska = try Media.generated("h264-in-matroska-named.webm", ["-i", film, "-c", "copy", "-f", "matroska"])
        #expect(try Command.probed(matroska)["container"]?.string == "mkv")
        let plan = try Command.planned([matroska, "--quality", "original", "--caps", "web", "--json"])
        #expect(plan["delivery_format"]?.string == "remux" && "\(plan["reasons"] ?? .null)".contains("container_unsupported"), "\(plan)")
        let webm = try Media.generated("vp9-opus-webm-named.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-f", "lavfi", "-i", "sine=duration=3",
                                                                   "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-c:a", "libopus", "-f", "webm"])
        #expect(try Command.probed(webm)["container"]?.string == "webm")
        #expect(try Command.planned([webm, "--quality", "original", "--caps", "web", "--json"])["delivery_format"]?.string == "original")
        // ffmpeg's `-f matroska` writes DocType "matroska" for WebM's codecs too: named .webm, it is WebM.
        let matroskaWebM = try Media.generated("vp9-opus-doctype-matroska.webm", ["-i", webm, "-c", "copy", "-f", "matroska"])
        #expect(try Command.probed(matroskaWebM)["container"]?.string == "webm")
        let quickTime = try Media.generated("quicktime-named.mp4", ["-i", film, "-c", "copy", "-f", "mov"])
        #expect(try Command.probed(quickTime)["container"]?.string == "mov")
    }
}

@Suite("colours a container states where the bitstream states none")
struct ContainerColourTests {
    /// 4 s of 10-bit HEVC whose bitstream states no colours, muxed by mkvmerge with HDR10's
    /// in Matroska's Colour element (and light levels), or copied from that into an MP4 whose
    /// `colr` box states them.
    static func source(_ container: String) throws -> String {
        let mkv = try Media.generated("hdr10-in-matroska-colour-only.mkv") { tmp in
            let hevc = tmp + ".hevc"
            defer { unlink(hevc) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=4",
                                               "-pix_fmt", "yuv420p10le", "-c:v", "libx265", "-x265-params", "log-level=error", "-f", "hevc", hevc])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            let m = try Run.command("mkvmerge", ["-q", "-o", tmp, "--colour-matrix-coefficients", "0:9", "--colour-transfer-characteristics", "0:16",
                                                 "--colour-primaries", "0:9", "--max-content-light", "0:1000", "--max-frame-light", "0:400", hevc])
            guard m.status == 0 || m.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(m.stderr)") }
        }
        guard container == "mp4" else { return mkv }
        return try Media.generated("hdr10-in-mp4-colr-only.mp4", ["-i", mkv, "-c", "copy", "-tag:v", "hvc1", "-color_primaries", "bt2020",
                                                                  "-color_trc", "smpte2084", "-colorspace", "bt2020nc"])
    }

    @Test("HDR10 that only the container states (Matroska's Colour element, an MP4's colr box; the HEVC bitstream states no colours) is HDR10: tone-mapped to BT.709 for Android, whose caps have no HDR, and copied for Apple TV 4K with its colour box saying PQ and BT.2020 (it had been taken for SDR, its decoder resetting the colours to unspecified)",
          arguments: ["mkv", "mp4"])
    func colourOnlyInTheContainer(container: String) throws {
        let source = try Self.source(container)
        let video = try Command.probedStreams(source).first
        #expect(video?["hdr"]?.string == "hdr10" && video?["color_transfer"]?.string == "smpte2084", "\(video ?? .null)")
        try Command.prepare(source, quality: "original", caps: "android", scratch: "container-colour-android-\(container)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let plan = try Command.json(run)["plan"] ?? .null
            #expect(plan["video"]?["tone_map"] == .bool(true) && "\(plan["reasons"] ?? .null)".contains("hdr_tone_mapped"), "\(plan)")
        }
        try Command.prepare(source, quality: "original", caps: "apple-tv-4k", scratch: "container-colour-apple-\(container)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            // The MP4's nclx colour box: primaries 9 (BT.2020), transfer 16 (PQ), matrix 9.
            let bytes = try Data(contentsOf: URL(fileURLWithPath: out))
            let colr = bytes.range(of: Data("colrnclx".utf8)).map { Array(bytes[$0.upperBound..<$0.upperBound + 6]) }
            #expect(colr == [0, 9, 0, 16, 0, 9], "\(colr ?? [])")
        }
    }
}

@Suite("a Matroska file's chapters are its default edition's, as a player shows them")
struct MatroskaEditionTests {
    /// 6 s of H.264 and AAC, remuxed by mkvmerge with the chapters `xml` (an XML chapter
    /// file's editions), its segment's UID 11 22 … FF 00.
    static func film(_ name: String, editions xml: String) throws -> String {
        try Media.generated(name) { tmp in
            let (film, chapters) = (tmp + ".film.mp4", tmp + ".xml")
            defer { unlink(film); unlink(chapters) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                               "-f", "lavfi", "-i", "sine=duration=6", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", film])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            try Data("<?xml version=\"1.0\"?><Chapters>\(xml)</Chapters>".utf8).write(to: URL(fileURLWithPath: chapters))
            let m = try Run.command("mkvmerge", ["-q", "-o", tmp, "--segment-uid", "0x112233445566778899aabbccddeeff00", "--chapters", chapters, film])
            guard m.status == 0 || m.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(m.stderr)") }
        }
    }

    static func atom(_ uid: Int, _ title: String, from start: Int, to end: Int? = nil, _ extra: String = "") -> String {
        "<ChapterAtom><ChapterUID>\(uid)</ChapterUID><ChapterTimeStart>00:00:0\(start).000</ChapterTimeStart>"
            + (end.map { "<ChapterTimeEnd>00:00:0\($0).000</ChapterTimeEnd>" } ?? "") + extra
            + "<ChapterDisplay><ChapterString>\(title)</ChapterString></ChapterDisplay></ChapterAtom>"
    }

    /// The chapters of `path` as ffprobe reads them: title, start and end in seconds (to a tenth).
    static func chapters(_ path: String) throws -> [String] {
        guard case .array(let list)? = try FFprobe(path).json["chapters"] else { return [] }
        func tenths(_ t: JSONValue?) -> Double { ((t?.double ?? -1) * 10).rounded() / 10 }
        return list.map { "\($0["tags"]?["title"]?.string ?? "-") \(tenths($0["start_time"]))-\(tenths($0["end_time"]))" }
    }

    @Test("of two editions, the second marked default, its chapters go to the MP4, less a hidden and a disabled one (libavformat gave the first edition's with the second's last after them)")
    func defaultEdition() throws {
        let source = try Self.film("two-chapter-editions.mkv", editions: """
            <EditionEntry><EditionUID>1</EditionUID>\(Self.atom(1, "A-one", from: 0))\(Self.atom(2, "A-two", from: 3))</EditionEntry>
            <EditionEntry><EditionUID>2</EditionUID><EditionFlagDefault>1</EditionFlagDefault>\(Self.atom(3, "B-one", from: 0))\(Self.atom(4, "B-two", from: 2))\(Self.atom(5, "B-hidden", from: 3, "<ChapterFlagHidden>1</ChapterFlagHidden>"))\(Self.atom(6, "B-disabled", from: 4, "<ChapterFlagEnabled>0</ChapterFlagEnabled>"))\(Self.atom(7, "B-three", from: 5))</EditionEntry>
            """)
        let probe = try Command.probed(source)
        guard case .array(let listed)? = probe["chapters"] else { throw TestFailure("the probe lists no chapters: \(probe)") }
        #expect(listed.map { $0["title"]?.string } == ["B-one", "B-two", "B-three"], "\(listed)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "chapter-editions") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let chapters = try Self.chapters(out)
            #expect(chapters == ["B-one 0.0-2.0", "B-two 2.0-5.0", "B-three 5.0-6.0"], "\(chapters)")
        }
    }

    @Test("an ordered edition whose first part is another file's (linked segments): the probe says both, its own visible chapters go with the file's whole 6 s (one naming this file's own segment too), the other file's part (timed in that file) does not")
    func orderedEdition() throws {
        let source = try Self.film("ordered-chapters-linked.mkv", editions: """
            <EditionEntry><EditionUID>3</EditionUID><EditionFlagDefault>1</EditionFlagDefault><EditionFlagOrdered>1</EditionFlagOrdered>\(Self.atom(11, "Opening", from: 0, to: 5, "<ChapterSegmentUID format=\"hex\">0102030405060708090a0b0c0d0e0f10</ChapterSegmentUID>"))\(Self.atom(12, "Part A", from: 0, to: 4))\(Self.atom(13, "Part B", from: 4, to: 6, "<ChapterSegmentUID format=\"hex\">112233445566778899aabbccddeeff00</ChapterSegmentUID>"))</EditionEntry>
            """)
        let probe = try Command.probed(source)
        #expect(probe["warnings"] == .array([.string("ordered_chapters"), .string("linked_segments")]), "\(probe["warnings"] ?? .null)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "ordered-chapters") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let chapters = try Self.chapters(out), length = try FFprobe(out).formatDuration
            #expect(chapters == ["Part A 0.0-4.0", "Part B 4.0-6.0"], "\(chapters)")
            #expect(abs(length - 6) < 0.1)
        }
    }
}

@Suite("a Matroska film's bitrate is its pictures' and sound's")
struct MatroskaBitrateTests {
    /// 10 s of 640x360 H.264 at about 3 Mbit/s with AAC, and a SubRip track whose last cue
    /// ends at `lastEnd` (a subtitle file whose last cue's end is wrong).
    static func film(lastEnd: String) throws -> String {
        try Media.generated("subtitle-past-film-\(lastEnd.filter(\.isNumber)).mkv") { tmp in
            let srt = tmp + ".srt"
            defer { unlink(srt) }
            try Data("1\n00:00:01,000 --> 00:00:03,000\nfirst\n\n2\n00:00:05,000 --> \(lastEnd)\nlast, its end a typo\n".utf8)
                .write(to: URL(fileURLWithPath: srt))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=duration=10", "-i", srt, "-map", "0", "-map", "1", "-map", "2",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-c:a", "aac", "-c:s", "srt", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
    }

    @Test("a subtitle cue ending ten minutes after a 10 s film (Matroska's duration counts it) leaves the film at its own bitrate, so a 1 Mbit/s device gets it re-encoded, 10 s long, not the 3 Mbit/s file as it is (its bitrate had read 50 kbit/s)")
    func subtitlePastTheFilm() throws {
        let source = try Self.film(lastEnd: "00:10:00,000")
        try Self.expectFilmRate(source, scratch: "subtitle-past-film")
    }

    /// The 10 s, 3 Mbit/s film probed at its pictures' and sound's rate (from the tail:
    /// `warning`), and re-encoded for a 1 Mbit/s device into its 10 s.
    static func expectFilmRate(_ source: String, warning: String = "bitrate_from_tracks", scratch: String) throws {
        let probe = try Command.probed(source)
        #expect((probe["bit_rate"]?.double ?? 0) > 2_000_000, "\(probe["bit_rate"] ?? .null)")
        #expect("\(probe["warnings"] ?? .null)".contains(warning))
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: scratch) { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == "transcode", "\(json["plan"]?["reasons"] ?? .null)")
            #expect(abs(try FFprobe(out).formatDuration - 10) < 0.2)
        }
    }

    @Test("a Duration patched to 600 s, or to 1 s, in a 10 s film without subtitles (a header left from an edit) is the film's 10 s by its last cluster: re-encoded for a 1 Mbit/s device, not sent as the 3 Mbit/s file it is (its bitrate had read 50 kbit/s); remuxed for a device that plays Matroska, which had been given the file with that length to show; remuxed for iOS, where a tenth had been refused as damaged",
          arguments: [600.0, 1.0])
    func wrongDuration(_ declared: Double) throws {
        let source = try Media.generated("film-duration-patched-\(Int(declared))s.mkv") { tmp in
            let made = tmp + ".mkv"
            defer { unlink(made) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=duration=10", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M",
                                               "-c:a", "aac", "-f", "matroska", made])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            // The Segment Info's Duration (0x4489), an 8-byte float in milliseconds.
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: made)))
            guard let at = (0..<(bytes.count - 11)).first(where: { bytes[$0] == 0x44 && bytes[$0 + 1] == 0x89 && bytes[$0 + 2] == 0x88 }) else {
                throw TestFailure("no 8-byte Duration in \(made)")
            }
            withUnsafeBytes(of: (declared * 1000).bitPattern.bigEndian) { bytes.replaceSubrange(at + 3..<at + 11, with: $0) }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
        let probe = try Command.probed(source)
        #expect(abs((probe["duration_seconds"]?.double ?? 0) - 10) < 0.2, "\(probe["duration_seconds"] ?? .null)")
        #expect(probe["duration_wrong"] == .bool(true))
        try Self.expectFilmRate(source, warning: "duration_from_tracks", scratch: "duration-patched")
        for caps in ["android", "ios"] {
            try Command.prepare(source, quality: "original", caps: caps, scratch: "duration-patched-\(caps)") { run, out in
                #expect(run.status == 0, "\(run.stdout.suffix(300)) \(run.stderr.suffix(300))")
                let json = try Command.json(run)
                #expect(json["plan"]?["delivery_format"]?.string == "remux", "\(json["plan"]?["reasons"] ?? .null)")
                #expect(abs(try FFprobe(out).formatDuration - 10) < 0.2)
                #expect(abs((json["output"]?["duration_seconds"]?.double ?? 0) - 10) < 0.2)
            }
        }
    }

    @Test("a Matroska film whose last cluster's timestamp is damaged (a flipped bit puts it 16 s early, before the cluster ahead of it) keeps its header's right length and is remuxed whole: the probe had taken the damaged cluster for the film's end, 2.7 s of 20, and the remux was refused as too long (found by a helper's Matroska audit)")
    func lastClusterTimeDamaged() throws {
        let whole = try Media.generated("clusters-1s-20s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=20",
                                                               "-f", "lavfi", "-i", "sine=duration=20", "-c:v", "libx264", "-preset", "ultrafast",
                                                               "-c:a", "aac", "-cluster_time_limit", "1000", "-f", "matroska"])
        let dir = Media.scratch("last-cluster-time-damaged")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "last-cluster-time.mkv") { bytes throws in
            // The last cluster's Timestamp (E7), two bytes: bit 14 (16.384 s) flipped.
            var cluster = bytes.count - 4
            while cluster > 0, bytes[cluster..<cluster + 4] != [0x1F, 0x43, 0xB6, 0x75] { cluster -= 1 }
            let time = try #require(firstOffset(of: [0xE7, 0x82], in: bytes, from: cluster + 4))
            try #require(time < cluster + 24 && bytes[time + 2] & 0x40 != 0, "a two-byte timestamp past 16.4 s")
            bytes[time + 2] ^= 0x40
        }
        let probe = try Command.probed(damaged.path)
        #expect(abs((probe["duration_seconds"]?.double ?? 0) - 20) < 0.2, "\(probe["duration_seconds"] ?? .null)")
        #expect(probe["duration_wrong"] == nil || probe["duration_wrong"] == .bool(false))
        try Command.prepare(damaged.path, quality: "original", caps: "ios", scratch: "last-cluster-time-damaged-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300))")
            let length = try FFprobe(out).formatDuration
            #expect(abs(length - 20) < 1.2, "\(length) s")
        }
    }

    @Test("a cluster amid a Matroska film whose timestamp is damaged (4 s or 30 s late, 6 s early), clusters begun at keyframes or mid-GOP, is put back in the room its blocks left: the remux is the undamaged file's pictures frame for frame and all its sound, copied (4 s of pictures after a cluster 4 s late had been lost, exit 0, the video re-encoded; one 6 s early was left out) (found by a helper's Matroska audit)",
          arguments: [4000, 30000, -6000], [true, false])
    func middleClusterTimeDamaged(_ shift: Int, atKeyframes: Bool) throws {
        // B-frames (libavformat derives their decode times from the presentation times), a
        // keyframe a second, and a cluster from each keyframe, or a cluster a second begun
        // wherever the second ends (ffmpeg's `-cluster_time_limit`).
        let whole = atKeyframes
            ? try Media.generated("clusters-gop-20s-bframes.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=20",
                                                                   "-f", "lavfi", "-i", "sine=duration=20", "-c:v", "libx264", "-preset", "veryfast",
                                                                   "-g", "25", "-c:a", "aac", "-cluster_time_limit", "5000", "-f", "matroska"])
            : try Media.generated("clusters-1s-20s-bframes.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=20",
                                                                  "-f", "lavfi", "-i", "sine=duration=20", "-c:v", "libx264", "-preset", "veryfast",
                                                                  "-c:a", "aac", "-cluster_time_limit", "1000", "-f", "matroska"])
        let dir = Media.scratch("middle-cluster-time-\(shift)-\(atKeyframes)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "middle-cluster-time.mkv") { bytes throws in
            // The first cluster from 10 s: its Timestamp (E7), two bytes.
            var from = 0
            while let cluster = firstOffset(of: [0x1F, 0x43, 0xB6, 0x75], in: bytes, from: from) {
                from = cluster + 4
                guard let time = firstOffset(of: [0xE7, 0x82], in: bytes, from: cluster + 4), time < cluster + 24 else { continue }
                let value = Int(bytes[time + 2]) << 8 | Int(bytes[time + 3])
                guard value >= 10000 else { continue }
                bytes[time + 2] = UInt8((value + shift) >> 8)
                bytes[time + 3] = UInt8((value + shift) & 0xFF)
                return
            }
            throw TestFailure("no cluster from 10 s with a two-byte timestamp")
        }
        let clean = dir.appendingPathComponent("clean.mp4").path
        let made = try Command.run(["prepare", whole, "--quality", "original", "--caps", "ios", "--output", clean, "--json"])
        try #require(made.status == 0, "\(made.stdout.suffix(300))")
        try Command.prepare(damaged.path, quality: "original", caps: "ios", scratch: "middle-cluster-time-\(shift)-\(atKeyframes)-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(300))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == "remux")
            #expect(json["stats"]?["adjustments"] == nil, "\(json["stats"]?["adjustments"] ?? .null)")
            #expect(try FormatChangeTests.frameDigests(out) == FormatChangeTests.frameDigests(clean))
            #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(clean, "a"))
            let probe = try FFprobe(out)
            #expect(abs((probe.startTime("video") ?? 1) - (probe.startTime("audio") ?? 0)) < 0.05)
        }
    }

    @Test("a Matroska sound whose frames all lie seconds apart (a damaged TimestampScale: its size one byte longer) is no run of damaged times that fits its room: every frame is copied where it stands, none retimed (taken for such runs, half of them were moved and the copy refused as too long) (found by a regression audit)")
    func everyStepLong() throws {
        let whole = try Media.generated("eac3-10s.mkv", ["-f", "lavfi", "-i", "sine=duration=10:sample_rate=48000", "-c:a", "eac3", "-f", "matroska"])
        let dir = Media.scratch("timestamp-scale-size")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: whole, in: dir, as: "timestamp-scale-size.mkv") { bytes throws in
            // TimestampScale (2AD7B1), 3 bytes of 1,000,000: made 4, taking the next byte in.
            let scale = try #require(firstOffset(of: [0x2A, 0xD7, 0xB1, 0x83], in: bytes))
            bytes[scale + 3] = 0x84
        }
        try Command.prepare(damaged.path, quality: "original", caps: "ios", scratch: "timestamp-scale-size-out") { (run, out) throws in
            #expect(run.status == 0, "\(run.stdout.suffix(300))")
            let repaired = try Command.json(run)["stats"]?["repaired_timestamps"]
            #expect(repaired == .number(0))
            let copied = try FFprobe.packetCount(out, "a"), source = try FFprobe.packetCount(damaged.path, "a")
            #expect(copied == source)
        }
    }

    @Test("a Matroska sound file whose one cluster's first block has a damaged size (the rest of the cluster unreadable) is refused as cut short or damaged: its last cluster, read only to that block, is no end of the film, and its 0.02 s had been delivered as the whole")
    func lastClusterUnreadable() throws {
        let source = try Media.generated("sound-only-4s.mkv", ["-f", "lavfi", "-i", "sine=duration=4:sample_rate=48000", "-c:a", "aac", "-f", "matroska"])
        let dir = Media.scratch("last-cluster-unreadable")
        defer { try? FileManager.default.removeItem(at: dir) }
        let damaged = try damagedCopy(ofFile: source, in: dir, as: "block-size.mkv") { bytes throws in
            // The cluster's first SimpleBlock (A3) and its two-byte size, made the largest.
            let cluster = try #require(firstOffset(of: [0x1F, 0x43, 0xB6, 0x75], in: bytes))
            let block = try #require(firstOffset(of: [0xA3], in: bytes, from: cluster + 8))
            try #require(bytes[block + 1] & 0xC0 == 0x40, "a two-byte size")
            bytes[block + 1] = 0x7F
            bytes[block + 2] = 0xFE
        }.path
        #expect(try Command.probed(damaged)["duration_wrong"] == nil)
        try SourceDamageTests.expectSourceCorrupt(damaged, in: dir, saying: "cut short or damaged")
    }
}
