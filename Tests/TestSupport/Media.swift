import Foundation
import KilnCore

/// Where the shared real media lives (../shared/media beside the repository), and
/// helpers that ask the ffmpeg command-line tools — an independent decoder — about outputs.
public enum Media {
    public static let repoRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no Package.swift above \(#filePath)")
    }()

    /// `KILN_SHARED_MEDIA`, else the nearest `shared/media` (with its INDEX.tsv) beside the
    /// repository or one of its parents — where the workspace puts it.
    public static let sharedFolder: URL = {
        if let env = ProcessInfo.processInfo.environment["KILN_SHARED_MEDIA"] { return URL(fileURLWithPath: env) }
        var dir = repoRoot
        while dir.path != "/" {
            dir.deleteLastPathComponent()
            let candidate = dir.appendingPathComponent("shared/media")
            if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("INDEX.tsv").path) { return candidate }
        }
        return repoRoot.deletingLastPathComponent().appendingPathComponent("shared/media")
    }()

    /// Every real file in ../shared/media (INDEX.tsv names them).
    public static var sharedFiles: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: sharedFolder.path)) ?? []
        return names.filter { !$0.hasSuffix(".tsv") && !$0.hasPrefix(".") }.sorted()
    }

    public static func shared(_ name: String) -> String { sharedFolder.appendingPathComponent(name).path }

    /// A fresh folder for one test's outputs.
    public static func scratch(_ label: String) -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-\(label)-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Files the test generates with the ffmpeg command for what the shared files lack,
    /// cached across runs in .build/test-media.
    public static func generated(_ name: String, _ ffmpegArgs: [String]) throws -> String {
        try generated(name) { tmp in
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + ffmpegArgs + [tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not generate \(name): \(r.stderr)") }
        }
    }

    /// A transport stream made of parts, each encoded by the ffmpeg command from `parts`'
    /// arguments and the bytes laid end to end, as a recording that runs across a change is.
    public static func concatenatedTS(_ name: String, parts: [[String]]) throws -> String {
        try generated(name) { tmp in
            var bytes = Data()
            for (i, args) in parts.enumerated() {
                let part = "\(tmp).\(i).ts"
                defer { try? FileManager.default.removeItem(atPath: part) }
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args + ["-f", "mpegts", part])
                guard r.status == 0 else { throw TestFailure(r.stderr) }
                bytes += try Data(contentsOf: URL(fileURLWithPath: part))
            }
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// An HLS download in fragmented MP4, as `name`: ffmpeg's `seconds` of 320x240 pictures
    /// and a tone in 1 s segments (each with a `sidx` of its own), the init segment and then
    /// the segments `order` names laid end to end.
    public static func hlsSegments(_ name: String, seconds: Int, order: [Int]) throws -> String {
        try generated(name) { tmp in
            let dir = scratch("hls-segments")
            defer { try? FileManager.default.removeItem(at: dir) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(seconds)",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(seconds)",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac",
                                               "-f", "hls", "-hls_segment_type", "fmp4", "-hls_time", "1", "-hls_playlist_type", "vod",
                                               "-hls_fmp4_init_filename", "init.mp4",
                                               "-hls_segment_filename", dir.appendingPathComponent("s%d.m4s").path,
                                               dir.appendingPathComponent("p.m3u8").path])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            var bytes = try Data(contentsOf: dir.appendingPathComponent("init.mp4"))
            for i in order { bytes += try Data(contentsOf: dir.appendingPathComponent("s\(i).m4s")) }
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// A recording whose video PID carries 6 s of MPEG-2 (320x240), then 40 s of H.264 at
    /// 720p and 8 Mbit/s (40 MB), timed straight on, with MP2 sound: libavformat's MPEG-2
    /// parser holds everything after the change, looking for a picture's start.
    public static func mpeg2ThenH264() throws -> String {
        try concatenatedTS("mpeg2-then-h264-720p-6s-40s.ts", parts: [("mpeg2video", "320x240", 6, "0"), ("libx264", "1280x720", 40, "6")].map {
            codec, size, seconds, offset in
            ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=\(seconds)", "-f", "lavfi", "-i", "sine=duration=\(seconds):sample_rate=48000",
             "-c:v", codec, "-preset", "ultrafast", "-b:v", codec == "libx264" ? "8M" : "1M", "-c:a", "mp2", "-output_ts_offset", offset]
        })
    }

    /// ISDB's bilingual sound: AAC in ADTS frames of channel configuration 0, each opening
    /// with a program config element of two single channel elements, then those two (a
    /// 440 Hz tone left, 880 Hz right), in a transport stream with pictures; the languages
    /// `languages` lists. libavcodec's encoder writes no such frames: each is put together
    /// from two mono encodes' (a frame's elements end at the last set bit, its END).
    public static func aacDualMono(seconds: Int = 6, languages: String = "jpn,eng") throws -> String {
        try generated("aac-dual-mono-\(seconds)s-\(languages).ts") { tmp in
            func tone(_ hz: Int) throws -> [UInt8] {
                let path = try generated("mono-\(hz)-\(seconds)s.aac", ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=48000:duration=\(seconds)",
                                                                     "-c:a", "aac", "-ac", "1", "-b:a", "96k", "-f", "adts"])
                return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            }
            func frames(_ d: [UInt8]) -> [ArraySlice<UInt8>] {
                var out: [ArraySlice<UInt8>] = [], i = 0
                while i + 7 <= d.count {
                    let length = Int(d[i + 3] & 3) << 11 | Int(d[i + 4]) << 3 | Int(d[i + 5] >> 5)
                    guard length >= 7, i + length <= d.count else { break }
                    out.append(d[i..<i + length])
                    i += length
                }
                return out
            }
            func bits(_ b: ArraySlice<UInt8>) -> [Bool] { b.flatMap { byte in (0..<8).map { byte >> (7 - $0) & 1 == 1 } } }
            func number(_ v: Int, _ n: Int) -> [Bool] { (0..<n).map { v >> (n - 1 - $0) & 1 == 1 } }
            func value(_ b: ArraySlice<Bool>) -> Int { b.reduce(0) { $0 << 1 | ($1 ? 1 : 0) } }
            // The single channel element of a mono frame, retagged.
            func element(_ frame: ArraySlice<UInt8>, tag: Int) throws -> [Bool] {
                var raw = bits(frame.dropFirst(7))[...]
                if value(raw.prefix(3)) == 6 {  // the encoder's fill element first
                    var count = value(raw.dropFirst(3).prefix(4)), at = 7
                    if count == 15 { count += value(raw.dropFirst(7).prefix(8)) - 1; at = 15 }
                    raw = raw.dropFirst(at + 8 * count)
                }
                guard let last = raw.lastIndex(of: true), value(raw[raw.startIndex..<last + 1].suffix(3)) == 7,
                      value(raw.prefix(3)) == 0 else { throw TestFailure("not a single channel element") }
                return number(0, 3) + number(tag, 4) + Array(raw[(raw.startIndex + 7)..<(last - 2)])
            }
            var stream: [UInt8] = []
            for (a, b) in zip(frames(try tone(440)), frames(try tone(880))) {
                // id 5, tag, LC, 48 kHz, two front elements, no others, no mixdowns; both single.
                var raw = number(5, 3) + number(0, 4) + number(1, 2) + number(3, 4) + number(2, 4) + number(0, 4 + 4 + 2 + 3 + 4 + 3)
                raw += number(0, 5) + number(1, 5)
                raw += [Bool](repeating: false, count: (8 - (56 + raw.count) % 8) % 8) + number(0, 8)  // aligned; no comment
                raw += try element(a, tag: 0) + element(b, tag: 1) + number(7, 3)
                raw += [Bool](repeating: false, count: (8 - raw.count % 8) % 8)
                let body = stride(from: 0, to: raw.count, by: 8).map { UInt8(value(raw[$0..<$0 + 8])) }
                var header = Array(a.prefix(7))
                let length = 7 + body.count
                header[2] &= 0xFE  // channel configuration 0
                header[3] = header[3] & 0x3C | UInt8(length >> 11 & 3)
                header[4] = UInt8(length >> 3 & 0xFF)
                header[5] = UInt8(length & 7) << 5 | header[5] & 0x1F
                stream += header + body
            }
            let adts = tmp + ".aac"
            defer { try? FileManager.default.removeItem(atPath: adts) }
            try Data(stream).write(to: URL(fileURLWithPath: adts))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(seconds)",
                                               "-i", adts, "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "copy",
                                               "-metadata:s:a:0", "language=\(languages)", "-f", "mpegts", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
    }

    /// A recording of `seconds`-long parts laid end to end, 320x240 pictures and a 48 kHz
    /// tone in `codec` at each part's channels: [2, 6] goes from stereo adverts into a 5.1
    /// film, as an ATSC or DVB recording does. `latm`: AAC in LATM framing, as DVB-T2 sends it.
    public static func soundRecording(_ codec: String, channels: [Int], seconds: Int = 8, latm: Bool = false) throws -> String {
        try concatenatedTS("\(codec)\(latm ? "-latm" : "")-\(channels.map(String.init).joined(separator: "-"))ch-\(seconds)s.ts",
                           parts: channels.enumerated().map { i, count in
            ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(seconds)",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(seconds)",
             "-c:v", "libx264", "-preset", "ultrafast", "-c:a", codec, "-ac", "\(count)", "-output_ts_offset", "\(i * seconds)"]
                + (latm ? ["-mpegts_flags", "latm"] : [])
        })
    }

    /// A generated file cached in .build/test-media: `make` writes it to the temporary path
    /// it is given (same folder, same extension), which then takes its name.
    public static func generated(_ name: String, make: (_ tmp: String) throws -> Void) throws -> String {
        let dir = repoRoot.appendingPathComponent(".build/test-media")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent(name).path
        if FileManager.default.fileExists(atPath: path) { return path }
        let tmp = dir.appendingPathComponent(".tmp-\(UUID().uuidString)-\(name)").path
        do { try make(tmp) } catch { try? FileManager.default.removeItem(atPath: tmp); throw error }
        // Tests run in parallel: another may have made the same file meanwhile, and may be
        // reading it. link(2) puts this one in place only if there is none, so a file in
        // use is never replaced (Kiln takes a source renamed over as changed).
        defer { unlink(tmp) }
        guard link(tmp, path) == 0 || errno == EEXIST else { throw TestFailure("cannot move \(tmp) into place") }
        return path
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

public enum Run {
    public struct Result { public let status: Int32; public let stdout: String; public let stderr: String }

    public static func command(_ name: String, _ args: [String], stdin: Data? = nil) throws -> Result {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = [name] + args
        let out = Pipe(), err = Pipe(), inp = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = inp
        try p.run()
        if let stdin { inp.fileHandleForWriting.write(stdin) }
        try? inp.fileHandleForWriting.close()
        // Read both pipes concurrently so a chatty child cannot block on a full pipe.
        final class Box: @unchecked Sendable { var data = Data() }
        let errBox = Box()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { errBox.data = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        let errData = errBox.data
        p.waitUntilExit()
        return Result(status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self))
    }
}

/// What ffprobe says about a file.
public struct FFprobe {
    public let json: JSONValue

    public init(_ path: String) throws {
        let r = try Run.command("ffprobe", ["-v", "error", "-print_format", "json", "-show_format", "-show_streams",
                                            "-show_chapters", path])
        guard r.status == 0 else { throw TestFailure("ffprobe failed on \(path): \(r.stderr)") }
        json = try JSONValue.parse(Array(r.stdout.utf8))
    }

    public var streams: [JSONValue] { if case .array(let a)? = json["streams"] { return a }; return [] }
    public func streams(_ type: String) -> [JSONValue] { streams.filter { $0["codec_type"] == .string(type) } }
    public var formatDuration: Double { Double(json["format"]?["duration"]?.string ?? "") ?? 0 }
    public var chapterCount: Int { if case .array(let a)? = json["chapters"] { return a.count }; return 0 }

    /// Start time of the first stream of a type, in seconds.
    public func startTime(_ type: String) -> Double? { streams(type).first?["start_time"]?.string.flatMap(Double.init) }
    public func duration(_ type: String) -> Double? { streams(type).first?["duration"]?.string.flatMap(Double.init) }

    /// How many packets the stream `select` picks (ffprobe's `-select_streams`: "v", "a:0")
    /// holds in `path`, read to the end.
    public static func packetCount(_ path: String, _ select: String) throws -> Int {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", select, "-count_packets", "-show_entries",
                                            "stream=nb_read_packets", "-of", "csv=p=0", path])
        // MPEG-TS lists its program too, after an empty line: the first line is the stream.
        guard let line = r.stdout.split(separator: "\n").first,
              let count = Int(line.trimmingCharacters(in: CharacterSet(charactersIn: ", "))) else {
            throw TestFailure("ffprobe counted no packets of \(select) in \(path): \(r.stdout) \(r.stderr)")
        }
        return count
    }

    /// The presentation times of the stream `select` picks, in seconds, sorted.
    public static func packetTimes(_ path: String, _ select: String) throws -> [Double] {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", select, "-show_entries", "packet=pts_time",
                                            "-of", "csv=p=0", path])
        guard r.status == 0 else { throw TestFailure("ffprobe failed on \(path): \(r.stderr)") }
        return r.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: CharacterSet(charactersIn: ", "))) }.sorted()
    }

    /// The presentation times of a file's video keyframes, ascending.
    public static func keyframeTimes(_ path: String) throws -> [Double] {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts_time,flags",
                                            "-of", "csv=p=0", path])
        guard r.status == 0 else { throw TestFailure("ffprobe failed on \(path): \(r.stderr)") }
        return r.stdout.split(separator: "\n").filter { $0.contains("K") }.compactMap { Double($0.split(separator: ",").first ?? "") }.sorted()
    }

    /// Each decoded picture's time and average luma (libavfilter's signalstats YAVG), in
    /// the order shown.
    public static func brightness(_ path: String) throws -> [(time: Double, luma: Double)] {
        let r = try Run.command("ffprobe", ["-v", "error", "-f", "lavfi", "-i", "movie=\(path),signalstats",
                                            "-show_entries", "frame=pts_time:frame_tags=lavfi.signalstats.YAVG", "-of", "csv=p=0"])
        guard r.status == 0 else { throw TestFailure("ffprobe failed on \(path): \(r.stderr)") }
        return r.stdout.split(whereSeparator: \.isNewline).compactMap { line in
            let fields: [Double] = line.split(separator: ",").compactMap { Double($0) }
            return fields.count == 2 ? (fields[0], fields[1]) : nil
        }
    }

    /// When a file's first bright picture (average luma over 190: a white flash on test
    /// pictures) is shown, in seconds; nil without one.
    public static func firstFlash(_ path: String) throws -> Double? {
        try brightness(path).first { $0.luma > 190 }?.time
    }

    /// How far the last sound frame starts after the last picture, in seconds: the sync
    /// at a recording's end.
    public static func endsApart(_ path: String) throws -> Double {
        let (pictures, sounds) = try (packetTimes(path, "v"), packetTimes(path, "a"))
        guard let picture = pictures.last, let sound = sounds.last else { throw TestFailure("\(path) lacks pictures or sound") }
        return sound - picture
    }

    /// Whether the index comes before the media data (faststart).
    public static func moovBeforeMdat(_ path: String) throws -> Bool {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var offset = 0
        while offset + 8 <= data.count {
            let size = data[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: data[offset + 4..<offset + 8], as: UTF8.self)
            if type == "moov" { return true }
            if type == "mdat" { return false }
            guard size >= 8 else { return false }
            offset += size
        }
        return false
    }

    /// Decodes the audio and video (or the given streams) in full; returns ffmpeg's error
    /// output (empty when clean). The decoded frames are timed for the null output in the
    /// stream's own time base (`-enc_time_base -1`): by default the command times them in
    /// frames of the rate its analysis guessed from the first pictures, and a later stretch
    /// at a faster rate (23.976 fps, then 29.97) collides there ("non monotonically
    /// increasing dts"), which is the command's rounding, not the file's.
    public static func decodeErrors(_ path: String, streams: [Int]? = nil) throws -> String {
        let maps = streams.map { $0.flatMap { ["-map", "0:\($0)"] } } ?? ["-map", "0:v?", "-map", "0:a?"]
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path] + maps + ["-enc_time_base", "-1", "-f", "null", "-"])
        return r.status == 0 ? r.stderr : "exit \(r.status): \(r.stderr)"
    }
}

extension JSONValue {
    public var string: String? { if case .string(let s) = self { return s }; if case .number(let n) = self { return String(n) }; return nil }
    public var int: Int? { if case .number(let n) = self { return Int(n) }; if case .string(let s) = self { return Int(s) }; return nil }
    public var double: Double? { if case .number(let n) = self { return n }; if case .string(let s) = self { return Double(s) }; return nil }
    public var elements: [JSONValue]? { if case .array(let a) = self { return a }; return nil }
}

/// The built `prep-artifact` beside the test bundle (swift test builds it, as the test
/// target depends on it).
public enum Binaries {
    public static func path(_ name: String) -> String {
        let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for dir in [bundleDir, Media.repoRoot.appendingPathComponent(".build/debug")] {
            let p = dir.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        return bundleDir.appendingPathComponent(name).path
    }
}

extension Run {
    /// Runs a command and returns its exit status and peak resident memory (KiB): its own
    /// image's high-water mark (`VmHWM`), read from /proc while it runs. wait4's
    /// `ru_maxrss` is not that: posix_spawn's child shares this test process's memory until
    /// it execs, and the kernel keeps that memory's high-water mark as the child's too
    /// (400 MB in a full test run, growing as the runner did: a transcode of 80 s then
    /// read 412 MB against 264 MB for 10 s). It stands only for a child too quick to be
    /// read.
    public static func peakMemory(_ path: String, _ args: [String]) throws -> (status: Int32, maxRSSKiB: Int) {
        var pid: pid_t = 0
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else { throw TestFailure("cannot start \(path): \(rc)") }
        var status: Int32 = 0
        var usage = rusage()
        var highWater: Int? = nil
        while true {
            // The image is the command's once its name is in /proc (after the exec).
            if let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
               text.contains("Name:\t\(URL(fileURLWithPath: path).lastPathComponent.prefix(15))"),
               let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
               let kib = Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") {
                highWater = max(highWater ?? 0, kib)
            }
            let r = wait4(pid, &status, WNOHANG, &usage)
            if r == pid { break }
            if r < 0 && errno != EINTR { throw TestFailure("cannot wait for \(path): \(errno)") }
            usleep(5_000)
        }
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exit, highWater ?? Int(usage.ru_maxrss))
    }
}

extension Media {
    /// Matroska as mkvmerge writes it when the sound was synced 300 ms earlier: the first
    /// block holds eight laced AAC frames, timed 1 ms before the first picture. A seek to
    /// the start through the video's index drops that whole block (170 ms of sound).
    public static func lacedEarlySound() throws -> String {
        let plain = try generated("early-sound-plain.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=24000/1001:duration=4",
                                                            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=4",
                                                            "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-c:a", "aac"])
        return try generated("early-sound-laced.mkv") { tmp in
            let r = try Run.command("mkvmerge", ["-q", "-o", tmp, "--sync", "1:-300", plain])
            // mkvmerge exits 1 for warnings.
            guard r.status == 0 || r.status == 1 else { throw TestFailure("mkvmerge (installed by make deps) failed: \(r.stderr)") }
        }
    }

    /// A camera's MOV of `seconds`: 320x240 pictures, then CH1 to CH4, mono 16-bit PCM tones
    /// at 440, 1000, 2000 and 3000 Hz. `ch2AsPictures`: CH2's handler (its `mdia` box's
    /// `hdlr`, the second saying `soun`) damaged to `vide`, as a fuzzer found it; libavformat
    /// then reads CH2 as pictures of no codec, each of its samples (2 bytes) a packet.
    public static func cameraTracks(seconds: Int, ch2AsPictures: Bool) throws -> String {
        let tone = { (hz: Int) in ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=48000:duration=\(seconds)"] }
        let args = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(seconds)"] + tone(440) + tone(1000) + tone(2000) + tone(3000)
            + (0..<5).flatMap { ["-map", "\($0)"] } + ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le", "-f", "mov"]
        let name = "camera-4ch-\(seconds)s\(ch2AsPictures ? "-ch2-vide" : "").mov"
        guard ch2AsPictures else { return try generated(name, args) }
        let plain = try cameraTracks(seconds: seconds, ch2AsPictures: false)
        return try generated(name) { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
            // A handler box's type follows its tag by 12 bytes (version and flags, then
            // QuickTime's component type).
            let tag = Array("hdlr".utf8), sound = Array("soun".utf8)
            let handlers = (0..<(bytes.count - 16)).filter {
                bytes[$0..<($0 + 4)].elementsEqual(tag) && bytes[($0 + 12)..<($0 + 16)].elementsEqual(sound)
            }
            guard handlers.count == 4 else { throw TestFailure("\(handlers.count) sound handlers in \(plain)") }
            bytes.replaceSubrange((handlers[1] + 12)..<(handlers[1] + 16), with: Array("vide".utf8))
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// What libavformat sees of an iTunes purchase (FairPlay): its sample entries `drmi` and
    /// `drms` wrap avc1 and mp4a. A plain file's entries renamed (its samples are not really
    /// encrypted, which changes nothing for the probe, the plan or the engine's refusal).
    public static func fairPlayLike() throws -> String {
        try generated("fairplay-like.m4v") { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: shared("mb_rotate-buck-bunny.mp4"))))
            for (from, to) in [("avc1", "drmi"), ("mp4a", "drms")] {
                let f = Array(from.utf8), t = Array(to.utf8)
                for i in 0..<(bytes.count - 4) where bytes[i] == f[0] && Array(bytes[i..<i + 4]) == f {
                    bytes.replaceSubrange(i..<i + 4, with: t)
                }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// A Windows Media file whose header says it is DRM-protected: a plain WMV with an ASF
    /// Content Encryption Object added to its header (the header object's size and count
    /// raised to match). Its packets are not really encrypted, which changes nothing for
    /// the probe, the plan or the engine's refusal.
    public static func windowsMediaDRM() throws -> String {
        try generated("wmdrm-like.wmv") { tmp in
            let plain = tmp + ".plain.wmv"
            defer { try? FileManager.default.removeItem(atPath: plain) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                                               "-f", "lavfi", "-i", "sine=duration=2", "-c:v", "wmv2", "-b:v", "500k", "-c:a", "wmav2", plain])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not make a WMV: \(r.stderr)") }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: plain)))
            func le(_ v: UInt64, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
            func field(_ s: String) -> [UInt8] { let b = Array(s.utf8) + [0]; return le(UInt64(b.count), 4) + b }
            // 2211B3FB-BD23-11D2-B4B7-00A0C955FC6E, as ASF stores GUIDs.
            let guid: [UInt8] = [0xFB, 0xB3, 0x11, 0x22, 0x23, 0xBD, 0xD2, 0x11, 0xB4, 0xB7, 0x00, 0xA0, 0xC9, 0x55, 0xFC, 0x6E]
            let body = le(6, 4) + Array("secret".utf8) + field("DRM") + field("key-id") + field("http://license.example/")
            let object = guid + le(UInt64(24 + body.count), 8) + body
            let size = (16..<24).reduce(UInt64(0)) { $0 | UInt64(bytes[$1]) << (8 * UInt64($1 - 16)) }
            let count = (24..<28).reduce(UInt64(0)) { $0 | UInt64(bytes[$1]) << (8 * UInt64($1 - 24)) }
            bytes.replaceSubrange(16..<24, with: le(size + UInt64(object.count), 8))
            bytes.replaceSubrange(24..<28, with: le(count + 1, 4))
            bytes.insert(contentsOf: object, at: 30)
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// An MPEG-TS recording whose only keyframe does not decode: its IDR slice's NAL unit
    /// header turned into a plain slice's (the transport stream still marks it as a random
    /// access point), as damage there would leave it.
    public static func undecodableKeyframe() throws -> String {
        try generated("undecodable-keyframe.ts") { tmp in
            var bytes = try oneGOP(format: "mpegts")
            guard let at = idrSlice(bytes) else { throw TestFailure("no IDR slice in the generated TS") }
            bytes[at + 3] = 0x61
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// A Matroska file whose video has not one keyframe: its only IDR picture taken out
    /// (the parameter sets kept), as a recording that lost its start.
    public static func withoutKeyframe() throws -> String {
        try generated("no-keyframe.mkv") { tmp in
            let bytes = try oneGOP(format: "h264")
            guard let at = idrSlice(bytes) else { throw TestFailure("no IDR slice in the generated stream") }
            // The IDR slice runs to the next start code (three or four bytes).
            var end = at + 4
            while end + 3 <= bytes.count, !(bytes[end] == 0 && bytes[end + 1] == 0 && bytes[end + 2] == 1) { end += 1 }
            if end > at + 4, bytes[end - 1] == 0 { end -= 1 }
            let raw = tmp + ".h264"
            defer { try? FileManager.default.removeItem(atPath: raw) }
            try Data(bytes[..<at] + bytes[end...]).write(to: URL(fileURLWithPath: raw))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-framerate", "25", "-f", "h264", "-i", raw,
                                               "-c", "copy", "-copyinkf", "-f", "matroska", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not make the MKV: \(r.stderr)") }
        }
    }

    /// 3 s of H.264 in one GOP (one IDR picture, then P pictures) in `format`'s bytes.
    private static func oneGOP(format: String) throws -> [UInt8] {
        let dir = scratch("one-gop")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("gop").path
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                           "-c:v", "libx264", "-preset", "ultrafast", "-g", "1000", "-f", format, out])
        guard r.status == 0 else { throw TestFailure("ffmpeg could not encode one GOP: \(r.stderr)") }
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
    }

    /// Where the first IDR slice's start code (00 00 01 65) is.
    private static func idrSlice(_ bytes: [UInt8]) -> Int? {
        (0..<max(0, bytes.count - 4)).first { bytes[$0] == 0 && bytes[$0 + 1] == 0 && bytes[$0 + 2] == 1 && bytes[$0 + 3] == 0x65 }
    }
}

/// MPEG-TS recordings spliced as broadcasts are: two 6-second recordings of 25 fps H.264
/// and AAC, the second timed from its own clock.
public enum Splice {
    /// Where each stream meets the second recording in the file.
    public enum Crossing: String, CaseIterable, Sendable {
        /// The first recording's bytes, then the second's.
        case together
        /// The second recording's first pictures come before the first one's last sound, as
        /// a broadcast sends them (pictures ahead of their time).
        case picturesFirst
        /// Its first sound comes before the first one's last pictures.
        case soundFirst
    }

    /// ffmpeg's MPEG-TS muxer numbers the elementary streams from 0x100 in output order.
    public static let videoPID = 0x100, audioPID = 0x101

    /// One recording, timed from `offset` seconds (plus the muxer's 1.4 s delay); its sound
    /// starts `soundDelay` seconds after its pictures.
    public static func recording(_ pattern: String, offset: Double, soundDelay: Double = 0) throws -> String {
        try Media.generated("splice-\(pattern)-\(offset)-\(soundDelay).ts",
                            ["-f", "lavfi", "-i", "\(pattern)=size=640x360:rate=25:duration=6",
                             "-itsoffset", "\(soundDelay)", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(6 - soundDelay)",
                             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "2500k",
                             "-c:a", "aac", "-output_ts_offset", "\(offset)", "-f", "mpegts"])
    }

    /// The recording from 10 s (testsrc2) followed by one from `secondOffset` s (testsrc)
    /// whose sound starts `soundDelay` s after its pictures, crossing as `crossing` says.
    public static func spliced(secondOffset: Double, soundDelay: Double = 0, crossing: Crossing = .together) throws -> String {
        let first = try recording("testsrc2", offset: 10), second = try recording("testsrc", offset: secondOffset, soundDelay: soundDelay)
        return try Media.generated("spliced-continued-\(secondOffset)-\(soundDelay)-\(crossing.rawValue).ts") { tmp in
            let a = try packets(first), b = try packets(second)
            // Moves the first recording's last TS packets of one stream after the second's
            // first ones of the other: about 0.8 s of sound, or 0.5 s of pictures.
            let moved: (tail: Int, count: Int, head: Int, after: Int)?
            switch crossing {
            case .together: moved = nil
            case .picturesFirst: moved = (audioPID, 40, videoPID, 1000)
            case .soundFirst: moved = (videoPID, 400, audioPID, 30)
            }
            var out: [[UInt8]]
            if let moved {
                let tail = Set(a.indices.filter { pid(a[$0]) == moved.tail }.suffix(moved.count))
                let head = Set(b.indices.filter { pid(b[$0]) == moved.head }.prefix(moved.after))
                out = a.indices.filter { !tail.contains($0) }.map { a[$0] } + head.sorted().map { b[$0] }
                    + tail.sorted().map { a[$0] } + b.indices.filter { !head.contains($0) }.map { b[$0] }
            } else {
                out = a + b
            }
            try Data(continued(out).joined()).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// `packets` with each PID's continuity counter counting on through them, as a
    /// broadcast's multiplexer keeps it across a splice: two files put back to back
    /// break it, which the demuxer marks as damage (packets lost in reception).
    public static func continued(_ packets: [[UInt8]]) -> [[UInt8]] {
        var last: [Int: UInt8] = [:]
        return packets.map { packet in
            var p = packet
            let id = pid(p)
            // A packet without payload (adaptation field only) repeats the counter.
            let counter = p[3] & 0x10 != 0 ? ((last[id] ?? 15) &+ 1) & 15 : last[id] ?? 0
            last[id] = counter
            p[3] = p[3] & 0xf0 | counter
            return p
        }
    }

    /// Two minutes of MPEG-TS whose second minute is black: its bitrate falls a
    /// hundredfold, and its time runs on with next to no bytes.
    public static func blackMinute() throws -> String {
        try Media.generated("black-minute.ts", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=40",
                                                "-f", "lavfi", "-i", "color=black:size=640x360:rate=25:duration=60",
                                                "-f", "lavfi", "-i", "sine=frequency=300:sample_rate=48000:duration=120",
                                                "-filter_complex", "[0]split[a][b];[b]trim=duration=20,setpts=PTS-STARTPTS[c];[a][1][c]concat=n=3:v=1:a=0[v]",
                                                "-map", "[v]", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast", "-qp", "0",
                                                "-c:a", "aac", "-f", "mpegts"])
    }

    /// Two 6-second MPEG-2 and AC-3 program streams put back to back as DVD cells are, the
    /// second timed from 2 s (before the first one's end).
    public static func dvdCells() throws -> String {
        let cell = { (pattern: String, offset: Int) throws -> String in
            try Media.generated("cell-\(pattern)-\(offset).vob", ["-f", "lavfi", "-i", "\(pattern)=size=720x576:rate=25:duration=6",
                                                                "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                                                                "-c:v", "mpeg2video", "-b:v", "5M", "-c:a", "ac3",
                                                                "-output_ts_offset", "\(offset)", "-f", "vob"])
        }
        let first = try cell("testsrc2", 0), second = try cell("testsrc", 2)
        return try Media.generated("cells.vob") { tmp in
            try (Data(contentsOf: URL(fileURLWithPath: first)) + Data(contentsOf: URL(fileURLWithPath: second)))
                .write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// An MPEG-TS file's 188-byte packets.
    public static func packets(_ path: String) throws -> [[UInt8]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        return stride(from: 0, to: bytes.count - 187, by: 188).map { Array(bytes[$0..<$0 + 188]) }
    }

    /// A TS packet's PID.
    public static func pid(_ packet: [UInt8]) -> Int { Int(packet[1] & 0x1f) << 8 | Int(packet[2]) }

    /// Moves the PES header times in a TS packet that starts a PES packet: its PTS by
    /// `pts` and its DTS (where it has one) by `dts`, in 90 kHz ticks. Whether the packet
    /// had a DTS; nil when it starts no PES packet.
    public static func shiftTimes(_ packet: inout [UInt8], pts: Int64, dts: Int64) -> Bool? {
        guard packet[1] & 0x40 != 0 else { return nil }
        let control = packet[3] >> 4 & 3
        let start = control & 2 != 0 ? 5 + Int(packet[4]) : 4
        guard start + 19 <= packet.count, packet[start] == 0, packet[start + 1] == 0, packet[start + 2] == 1 else { return nil }
        let flags = packet[start + 7] >> 6
        func shift(at i: Int, by delta: Int64) {
            let b = packet[i..<i + 5].map(Int64.init)
            let t = ((b[0] >> 1 & 7) << 30 | b[1] << 22 | (b[2] >> 1) << 15 | b[3] << 7 | b[4] >> 1) + delta
            packet[i] = packet[i] & 0xf1 | UInt8((t >> 30 & 7) << 1)
            packet[i + 1] = UInt8(t >> 22 & 0xff)
            packet[i + 2] = UInt8((t >> 15 & 0x7f) << 1 | 1)
            packet[i + 3] = UInt8(t >> 7 & 0xff)
            packet[i + 4] = UInt8((t & 0x7f) << 1 | 1)
        }
        if flags & 2 != 0 { shift(at: start + 9, by: pts) }
        if flags == 3 { shift(at: start + 14, by: dts) }
        return flags == 3
    }
}

/// Broadcast recordings whose sound moves to another audio stream mid-file.
public enum Succession {
    /// Six seconds of pictures and a tone (`frequency` Hz, `codec`, `language`) on
    /// `audioPID`, timed from `offset` seconds (plus the muxer's 1.4 s delay).
    public static func recording(_ pattern: String, offset: Double, codec: String, audioPID: Int, language: String,
                                 frequency: Int) throws -> String {
        try Media.generated("succession-\(pattern)-\(offset)-\(codec)-\(audioPID)-\(language).ts",
                            ["-f", "lavfi", "-i", "\(pattern)=size=640x360:rate=25:duration=6",
                             "-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=6",
                             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "2500k",
                             "-c:a", codec, "-ac", "2", "-metadata:s:a:0", "language=\(language)",
                             "-streamid", "0:\(Splice.videoPID)", "-streamid", "1:\(audioPID)",
                             "-output_ts_offset", "\(offset)", "-f", "mpegts"])
    }

    /// A programme change: six seconds whose English AAC is on PID 0x101, then six more
    /// (timed from `secondOffset` s: 16 goes straight on) whose sound, `codec` in
    /// `language`, is on PID 0x102, which the first programme's map does not list.
    /// With `lateMap`, the second programme's tables (PAT and PMT) before its 40th sound
    /// packet are left out: its sound comes before the map that lists it.
    public static func pidChange(codec: String = "aac", language: String = "eng", secondOffset: Double = 16,
                                 lateMap: Bool = false) throws -> String {
        let first = try recording("testsrc2", offset: 10, codec: "aac", audioPID: 0x101, language: "eng", frequency: 440)
        let second = try recording("testsrc", offset: secondOffset, codec: codec, audioPID: 0x102, language: language, frequency: 880)
        return try Media.generated("pid-change-\(codec)-\(language)-\(secondOffset)\(lateMap ? "-late-map" : "").ts") { tmp in
            var b = try Splice.packets(second)
            if lateMap, let fortieth = b.indices.filter({ Splice.pid(b[$0]) == 0x102 }).dropFirst(39).first {
                b = b.indices.filter { $0 >= fortieth || ![0, pmtPID].contains(Splice.pid(b[$0])) }.map { b[$0] }
            }
            try (Data(contentsOf: URL(fileURLWithPath: first)) + Data(b.joined())).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// A programme change that moves the pictures: six seconds of 640x360 H.264 on PID
    /// 0x100, then six more (`size`) on PID 0x110, timed straight on; the sound stays on
    /// PID 0x101.
    /// With `midGOP`, the new PID's first ten pictures are left out: it begins with pictures
    /// that need the keyframe before them.
    public static func videoPIDChange(size: String = "640x360", midGOP: Bool = false) throws -> String {
        let part = { (pattern: String, offset: Int, size: String, pid: Int) throws -> String in
            try Media.generated("video-pid-\(pattern)-\(offset)-\(size)-\(pid).ts",
                                ["-f", "lavfi", "-i", "\(pattern)=size=\(size):rate=25:duration=6",
                                 "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                                 "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "2500k", "-c:a", "aac", "-ac", "2",
                                 "-streamid", "0:\(pid)", "-streamid", "1:\(Splice.audioPID)",
                                 "-output_ts_offset", "\(offset)", "-f", "mpegts"])
        }
        let first = try part("testsrc2", 10, "640x360", Splice.videoPID), second = try part("testsrc", 16, size, 0x110)
        return try Media.generated("video-pid-change-\(size)\(midGOP ? "-mid-gop" : "").ts") { tmp in
            var b = try Splice.packets(second)
            if midGOP {
                // A TS packet that begins a PES packet (payload_unit_start) begins a picture.
                let starts = b.indices.filter { Splice.pid(b[$0]) == 0x110 && b[$0][1] & 0x40 != 0 }
                let eleventh = starts[10]
                b = b.indices.filter { $0 >= eleventh || Splice.pid(b[$0]) != 0x110 }.map { b[$0] }
            }
            try (Data(contentsOf: URL(fileURLWithPath: first)) + Data(b.joined())).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// ffmpeg's MPEG-TS muxer writes its first programme map on this PID.
    public static let pmtPID = 0x1000

    /// Twelve seconds with two AAC streams side by side: the first, English, ends after six
    /// seconds; the second, in `language`, runs to the end.
    public static func parallel(language: String) throws -> String {
        try Media.generated("parallel-sound-\(language).ts",
                            ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=12",
                             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=6",
                             "-f", "lavfi", "-i", "sine=frequency=880:sample_rate=48000:duration=12",
                             "-map", "0", "-map", "1", "-map", "2",
                             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-b:v", "2500k",
                             "-c:a", "aac", "-ac", "2", "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=\(language)",
                             "-f", "mpegts"])
    }
}

/// A broadcast recording with DVB teletext subtitles, as European channels send them: a
/// teletext stream whose map lists an information page (100, German) and the subtitle page
/// (888, English). Page 888 shows "Hello from page 888" from 1 s to 3 s and "Second
/// subtitle" from 4 s to 6 s after the first picture (each cleared by an empty page), and
/// page 100 carries a line that is not a subtitle. ffmpeg has no teletext encoder: the
/// packets are written here (ETS 300 706 pages in EN 300 472 PES packets) into an MPEG-TS
/// file the ffmpeg command made, each where the clock (PCR) reaches its time.
public enum Teletext {
    public static let pid = 0x120
    public static let cues: [(start: Double, end: Double, text: String)] = [(1, 3, "Hello from page 888"), (4, 6, "Second subtitle")]
    /// Page 877's (Finnish) and page 889's (English, for the hard of hearing).
    public static let finnish: [(start: Double, end: Double, text: String)] = [(2, 3.5, "Suomeksi sivulla 877")]
    public static let hardOfHearing: [(start: Double, end: Double, text: String)] = [(4.5, 5.5, "MUSIC PLAYS")]

    public static func recording() throws -> String {
        let av = try Media.generated("teletext-av.ts", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=10",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=10",
            "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "aac",
            "-streamid", "0:\(Splice.videoPID)", "-streamid", "1:\(Splice.audioPID)", "-f", "mpegts"])
        return try Media.generated("teletext-subtitles.ts") { tmp in
            var events: [(Double, [[UInt8]])] = []
            for (page, shown) in [(UInt8(0x88), cues), (0x77, finnish), (0x89, hardOfHearing)] {
                for cue in shown {
                    events.append((cue.start, [header(page: page, erase: true), row(22, cue.text), header(page: 0xFF, erase: false)]))
                    events.append((cue.end, [header(page: page, erase: true), header(page: 0xFF, erase: false)]))
                }
            }
            events.append((2, [header(page: 0x00, erase: true, subtitle: false), row(5, "Programme guide"), header(page: 0xFF, erase: false)]))
            events.sort { $0.0 < $1.0 }
            var out: [UInt8] = []
            var base: Int?
            var next = 0, continuity = 0
            for var packet in try Splice.packets(av) {
                let pid = Splice.pid(packet)
                if pid == Succession.pmtPID { packet = withTeletext(pmt: packet) }
                if pid == Splice.videoPID, packet[1] & 0x40 != 0, base == nil { base = pesPTS(packet) }
                out += packet
                guard let base, let pcr = pcr(packet) else { continue }
                while next < events.count, pcr >= base + Int(events[next].0 * 90_000) {
                    out += transportPackets(pes(pts: base + Int(events[next].0 * 90_000), units: events[next].1), continuity: &continuity)
                    next += 1
                }
            }
            try Data(out).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// Hamming 8/4 code words of the nibbles 0…15 (ETS 300 706, 8.2).
    static let hamming: [UInt8] = [0x15, 0x02, 0x49, 0x5E, 0x64, 0x73, 0x38, 0x2F, 0xD0, 0xC7, 0x8C, 0x9B, 0xA1, 0xB6, 0xFD, 0xEA]

    public static func oddParity(_ c: UInt8) -> UInt8 { c & 0x7F | (((c & 0x7F).nonzeroBitCount % 2 == 0) ? 0x80 : 0) }

    /// One EN 300 472 data unit (subtitle data) for a packet of magazine 8: its row address,
    /// then 40 bytes, each bit-reversed as sent.
    static func unit(row: Int, _ data: [UInt8]) -> [UInt8] {
        let payload = [hamming[(row & 1) << 3], hamming[row >> 1]] + data
        return [0x03, 0x2C, 0xE7, 0xE4] + payload.map(reversedBits)
    }

    static func reversedBits(_ b: UInt8) -> UInt8 {
        (0..<8).reduce(0) { r, i in r | ((b >> i) & 1) << (7 - i) }
    }

    /// A page header of magazine 8: page `page`, erase (C4) and subtitle (C6) flags, the
    /// header row suppressed (C7).
    static func header(page: UInt8, erase: Bool, subtitle: Bool = true) -> [UInt8] {
        let control = [hamming[Int(page & 15)], hamming[Int(page >> 4)], hamming[0], hamming[erase ? 8 : 0],
                       hamming[0], hamming[subtitle ? 8 : 0], hamming[1], hamming[0]]
        return unit(row: 0, control + [UInt8](repeating: oddParity(0x20), count: 32))
    }

    /// A row of boxed, double-height text.
    static func row(_ row: Int, _ text: String) -> [UInt8] {
        var chars: [UInt8] = [0x0D, 0x0B, 0x0B] + Array(text.utf8) + [0x0A, 0x0A]
        chars += [UInt8](repeating: 0x20, count: 40 - chars.count)
        return unit(row: row, chars.map(oddParity))
    }

    /// A teletext PES packet: the 45-byte header EN 300 472 asks for, then data units,
    /// filled with stuffing units to a whole number of TS packets.
    static func pes(pts: Int, units: [[UInt8]]) -> [UInt8] {
        var data: [UInt8] = [0x10] + units.joined()
        while (data.count + 45) % 184 != 0 { data += [0xFF, 0x2C] + [UInt8](repeating: 0xFF, count: 44) }
        let p = UInt64(pts)
        let ptsBytes: [UInt8] = [0x21 | UInt8((p >> 29) & 0x0E), UInt8((p >> 22) & 0xFF), UInt8((p >> 14) & 0xFE) | 1,
                                 UInt8((p >> 7) & 0xFF), UInt8((p << 1) & 0xFE) | 1]
        let body: [UInt8] = [0x84, 0x80, 0x24] + ptsBytes + [UInt8](repeating: 0xFF, count: 31) + data
        return [0, 0, 1, 0xBD, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    static func transportPackets(_ pes: [UInt8], continuity: inout Int) -> [UInt8] {
        var out: [UInt8] = []
        for (i, start) in stride(from: 0, to: pes.count, by: 184).enumerated() {
            out += [0x47, UInt8((i == 0 ? 0x40 : 0) | pid >> 8), UInt8(pid & 0xFF), UInt8(0x10 | continuity & 15)]
            out += pes[start..<start + 184]
            continuity += 1
        }
        return out
    }

    /// The programme map with the teletext stream added: its descriptor lists page 100
    /// (type 1, German), 888 (type 2, English), 877 (type 2, Finnish) and 889 (type 5,
    /// English for the hard of hearing).
    static func withTeletext(pmt packet: [UInt8]) -> [UInt8] {
        let offset = 4 + (packet[3] & 0x20 != 0 ? 1 + Int(packet[4]) : 0)
        let section = Array(packet[(offset + 1 + Int(packet[offset]))...])
        let length = Int(section[1] & 0x0F) << 8 | Int(section[2])
        let pages = Array("ger".utf8) + [1 << 3, 0x00] + Array("eng".utf8) + [2 << 3, 0x88]
            + Array("fin".utf8) + [2 << 3, 0x77] + Array("eng".utf8) + [5 << 3, 0x89]
        let descriptor: [UInt8] = [0x56, UInt8(pages.count)] + pages
        let stream: [UInt8] = [0x06, UInt8(0xE0 | pid >> 8), UInt8(pid & 0xFF), 0xF0, UInt8(descriptor.count)] + descriptor
        var rewritten = Array(section[0..<3 + length - 4]) + stream
        let total = rewritten.count + 4 - 3
        rewritten[1] = 0xB0 | UInt8(total >> 8)
        rewritten[2] = UInt8(total & 0xFF)
        let crc = DolbyVisionSample.crc32MPEG2(rewritten)
        rewritten += [UInt8(crc >> 24), UInt8((crc >> 16) & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8(crc & 0xFF)]
        let out = Array(packet[0..<offset]) + [0] + rewritten
        return out + [UInt8](repeating: 0xFF, count: 188 - out.count)
    }

    /// The PTS of the PES packet a TS packet begins.
    static func pesPTS(_ packet: [UInt8]) -> Int? {
        let offset = 4 + (packet[3] & 0x20 != 0 ? 1 + Int(packet[4]) : 0)
        let d = Array(packet[offset...])
        guard d.count > 14, d[0] == 0, d[1] == 0, d[2] == 1, d[7] & 0x80 != 0 else { return nil }
        return Int(d[9] & 0x0E) << 29 | ((Int(d[10]) << 8 | Int(d[11])) >> 1) << 15 | (Int(d[12]) << 8 | Int(d[13])) >> 1
    }

    /// The PCR base (90 kHz) a TS packet carries, if any.
    static func pcr(_ p: [UInt8]) -> Int? {
        guard p[3] & 0x20 != 0, p[4] > 0, p[5] & 0x10 != 0 else { return nil }
        return Int(p[6]) << 25 | Int(p[7]) << 17 | Int(p[8]) << 9 | Int(p[9]) << 1 | Int(p[10]) >> 7
    }
}

/// Matroska files edited in place, as damage would leave them.
public enum Matroska {
    /// Moves the timestamp of track `track`'s `nth` block (0-based; SimpleBlock or Block, in
    /// file order) by `milliseconds` (the file's default 1 ms timestamp scale). False when
    /// there is no such block.
    public static func shiftBlock(_ bytes: inout [UInt8], track: Int, nth: Int, milliseconds: Int) -> Bool {
        // An element ID keeps its length marker; a size does not.
        func number(at i: Int, keepMarker: Bool) -> (value: Int, length: Int)? {
            guard i < bytes.count, bytes[i] != 0 else { return nil }
            let length = bytes[i].leadingZeroBitCount + 1
            guard i + length <= bytes.count else { return nil }
            var value = keepMarker ? Int(bytes[i]) : Int(bytes[i]) & ((0x80 >> (length - 1)) - 1)
            for k in 1..<length { value = value << 8 | Int(bytes[i + k]) }
            return (value, length)
        }
        var seen = 0
        func walk(_ start: Int, _ end: Int) -> Bool {
            var i = start
            while i < end {
                guard let id = number(at: i, keepMarker: true), let size = number(at: i + id.length, keepMarker: false) else { return false }
                let data = i + id.length + size.length
                let unknown = size.value == (1 << (7 * size.length)) - 1
                let stop = unknown ? end : min(end, data + size.value)
                switch id.value {
                case 0x1853_8067, 0x1F43_B675, 0xA0:   // Segment, Cluster, BlockGroup
                    if walk(data, stop) { return true }
                case 0xA3, 0xA1:                         // SimpleBlock, Block
                    if let number = number(at: data, keepMarker: false), number.value == track {
                        if seen == nth {
                            let at = data + number.length
                            let t = Int(Int16(bitPattern: UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1]))) + milliseconds
                            let moved = UInt16(bitPattern: Int16(clamping: t))
                            bytes[at] = UInt8(moved >> 8)
                            bytes[at + 1] = UInt8(moved & 0xff)
                            return true
                        }
                        seen += 1
                    }
                default: break
                }
                i = stop
            }
            return false
        }
        return walk(0, bytes.count)
    }
}
