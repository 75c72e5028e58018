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

    @Test("a missing file and a file that is not media exit 3 with a one-line reason")
    func unreadable() throws {
        let missing = try Command.run(["probe", "/nonexistent/file.mkv", "--json"])
        #expect(missing.status == 3)
        #expect(try Command.json(missing)["error"]?["code"] == .string("source_not_found"))
        let dir = Media.scratch("cli-bad")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
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

    @Test("presets lists the ladder and every named device")
    func presets() throws {
        let r = try Command.run(["presets", "--json"])
        #expect(r.status == 0)
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
        let dir = Media.scratch("cli-int")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Command.binary)
        p.arguments = ["prepare", source, "--quality", "1mbps", "--output", out, "--json", "--progress-json"]
        let stdout = Pipe(), stderr = Pipe()
        p.standardOutput = stdout
        p.standardError = stderr
        try p.run()
        // Wait for the first progress line, then interrupt.
        var seen = Data()
        while !seen.contains(UInt8(ascii: "\n")) {
            let chunk = stderr.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen.append(chunk)
        }
        let line = String(decoding: seen, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        let progress = try JSONValue.parse(Array(line.utf8))
        #expect(progress["event"] == .string("progress"))
        #expect(progress["progress"]?["duration_seconds"]?.int == 60)
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        #expect(p.terminationReason == .exit && p.terminationStatus == 5)
        let result = try JSONValue.parse(Array(stdout.fileHandleForReading.readDataToEndOfFile()))
        #expect(result["error"]?["code"] == .string("canceled"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
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
    /// cut short, or with their middle zeroed: every run ends with an exit status of the
    /// contract (0, 3 or 4), never a signal, and leaves no temporary file.
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
                #expect([0, 3, 4].contains(r.status), "\(name) variant \(variant) \(quality): exit \(r.status) \(r.stderr.suffix(300))")
                if r.status != 0 { #expect(!FileManager.default.fileExists(atPath: out.path)) }
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains(".kiln-tmp-") }
                #expect(leftovers.isEmpty, "\(leftovers)")
                try? FileManager.default.removeItem(at: out)
            }
        }
    }
}

/// A small deterministic generator, so a failing variant can be reproduced.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E3779B97F4A7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58476D1CE4E5B9
        z = (z ^ (z >> 27)) &* 0x94D049BB133111EB
        return z ^ (z >> 31)
    }
}
