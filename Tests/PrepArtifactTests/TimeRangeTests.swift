import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Times near the ends of 64 bits, which a container can state and libavformat passes on.
@Suite("times at the ends of the range")
struct TimeRangeTests {
    /// A 3 s 640x360 clip (4 Mb/s, B-frames, AAC) in `container`, its times moved by
    /// `offset` seconds (`-output_ts_offset`), or with `setts` applied to its video packets.
    static func clip(_ container: String, offset: String? = nil, setts: (name: String, expression: String)? = nil,
                     timescale: String? = nil) throws -> String {
        let base = try Media.generated("noisy-640x360-4mbps-bf2-3s.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25,noise=alls=20:allf=t", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
            "-t", "3", "-c:v", "libx264", "-preset", "veryfast", "-b:v", "4M", "-bf", "2", "-g", "25", "-c:a", "aac"])
        if let offset {
            let clock = timescale.map { ["-video_track_timescale", $0] } ?? []
            return try Media.generated("noisy-640x360-from-\(offset)s\(timescale.map { "-timescale-\($0)" } ?? "").\(container)",
                                       ["-i", base, "-c", "copy", "-output_ts_offset", offset] + clock)
        }
        let setts = try #require(setts)
        return try Media.generated("noisy-640x360-\(setts.name).\(container)",
                                   ["-i", base, "-c", "copy", "-bsf:v", "setts=pts=\(setts.expression):dts=\(setts.expression)"])
    }

    @Test("a source whose times start 291,000 years in (near 2^63 µs), or 127 years in on a 1/2147483647 s clock (near 2^63 ticks), is refused at open with a reason, in the probe and in a remux and a transcode, leaving nothing behind: the run had trapped on its start plus its length (signal 4)",
          arguments: [("mkv", "9200000000000", nil), ("mp4", "9200000000000", nil), ("mp4", "4000000000", "2147483647")])
    func startBeyondTheRange(container: String, offset: String, timescale: String?) throws {
        let source = try Self.clip(container, offset: offset, timescale: timescale)
        let probe = try Command.run(["probe", source, "--json"])
        let refusal = try Command.json(probe)["error"]?["code"]
        #expect(probe.status == 3 && refusal == .string("source_unsupported"), "\(probe.stdout) \(probe.stderr)")
        for (quality, caps) in [("original", "ios"), ("1mbps", "ios")] {
            let dir = Media.scratch("time-range-\(container)-\(offset)-\(quality)")
            defer { try? FileManager.default.removeItem(at: dir) }
            let r = try Command.run(["prepare", source, "--quality", quality, "--caps", caps, "--output", dir.appendingPathComponent("out.mp4").path, "--json"])
            #expect(r.status == 3, "\(quality): \(r.stdout) \(r.stderr.prefix(400))")
            let error = try Command.json(r)["error"]
            #expect(error?["code"] == .string("source_unsupported") && error?["stage"] == .string("open")
                    && error?["message"]?.string?.contains(timescale == nil ? "years in" : "ticks") == true, "\(String(describing: error))")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "nothing left behind")
        }
    }

    @Test("a Matroska source whose times start 4,000,000,000,000 s in (within the range) is still remuxed and re-encoded from zero, 3 s long")
    func startWithinTheRange() throws {
        let source = try Self.clip("mkv", offset: "4000000000000")
        for quality in ["original", "1mbps"] {
            try Command.prepare(source, quality: quality, caps: "ios", scratch: "time-range-within-\(quality)") { r, out in
                #expect(r.status == 0, "\(quality): \(r.stdout)")
                let probe = try FFprobe(out)
                #expect(abs(probe.startTime("video") ?? 1) < 0.05 && abs(probe.startTime("audio") ?? 1) < 0.05)
                #expect(abs((probe.duration("video") ?? 0) - 3) < 0.1, "\(quality)")
            }
        }
    }

    @Test("a Matroska source with one picture, or every picture from the 41st, timed 4·10^18 ms on (a damaged block's time beyond 2^62 µs) is remuxed and re-encoded, 3 s long: the probe's packet scan had trapped on it (signal 4)",
          arguments: [("one-picture-far", "if(eq(N\\,40)\\,PTS+4000000000000000000\\,PTS)"),
                      ("rest-far", "if(gte(N\\,40)\\,PTS+9000000000000000000\\,PTS)")])
    func packetBeyondTheRange(name: String, expression: String) throws {
        let source = try Self.clip("mkv", setts: (name, expression))
        for quality in ["original", "1mbps"] {
            try Command.prepare(source, quality: quality, caps: "ios", scratch: "time-range-\(name)-\(quality)") { r, out in
                #expect(r.status == 0, "\(quality): \(r.stdout)")
                let probe = try FFprobe(out)
                #expect(abs((probe.duration("video") ?? 0) - 3) < 0.1, "\(quality)")
                #expect(try FFprobe.packetCount(out, "v:0") >= 70, "\(quality)")
            }
        }
    }
}
