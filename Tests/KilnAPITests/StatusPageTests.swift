import Foundation
import Testing
import KilnCore
import KilnTestSupport

@Suite("status page in a real browser")
struct StatusPageTests {
    static var chromium: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test("headless Chromium shows a running job with its progress bar")
    func runningJobShowsProgress() throws {
        let browser = try #require(Self.chromium, "chromium is installed by make deps")
        let media = Media.scratch("page-media")
        defer { try? FileManager.default.removeItem(at: media) }
        try FileManager.default.copyItem(atPath: try Media.generated("page-720p-60s.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
            "-t", "60", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"]), toPath: media.appendingPathComponent("long.mkv").path)
        let d = try Daemon(mediaRoot: media) { $0.heartbeatSeconds = 0.5 }
        defer { d.stop() }
        let r = try d.prepare("page-1", "long.mkv", quality: "1mbps", caps: #"{"codecs_video":["h264"],"codecs_audio":["aac"],"containers":["mp4"],"max_resolution":"720p"}"#)
        let id = try #require(try JSONValue.parse(r.body)["artifact_id"]?.string)
        // Wait until the job reports progress, so the page has something to draw.
        let deadline = Date(timeIntervalSinceNow: 60)
        while Date() < deadline {
            let a = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)").body)
            if (a["progress"]?["fraction"]?.string).flatMap(Double.init) ?? 0 > 0 { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        // The event stream carries live progress for it (not stored, no id).
        let stream = try RawHTTP.eventStream(port: d.port, path: "/v1/events")
        var live: SSEEvent?
        while let e = stream.nextEvent() { if e.event == "artifact.progress" { live = e; break } }
        #expect(live?.id == nil)
        let progress = try JSONValue.parse(Array((live?.data ?? "{}").utf8))
        #expect(progress["artifact_id"] == .string(id))
        // It names who holds the artifact, as stored events do, and has no sequence number.
        #expect(progress["references"] == .array([.string("page-1")]) && progress["seq"] == .null, "\(progress)")
        #expect((progress["progress"]?["encoded_seconds"]?.string).flatMap(Double.init) ?? 0 > 0)

        // The child is paused while the browser renders: a browser's first start on a fresh
        // machine (its font cache) can take longer than the whole transcode.
        let children = processes(matching: media.appendingPathComponent("long.mkv").path)
        #expect(!children.isEmpty, "the job's child is running")
        for pid in children { kill(pid, SIGSTOP) }
        defer { for pid in children { kill(pid, SIGCONT) } }

        let profile = Media.scratch("chromium-profile")
        defer { try? FileManager.default.removeItem(at: profile) }
        let run = try Run.command(browser, ["--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)",
                                            "--virtual-time-budget=4000", "--dump-dom", "http://127.0.0.1:\(d.port)/"])
        let dom = run.stdout
        #expect(dom.contains("data-artifact=\"\(id)\""), "the running job is listed: \(dom.prefix(2000)) \(run.stderr.suffix(500))")
        let fractions = dom.components(separatedBy: "data-fraction=\"").dropFirst().compactMap { Double($0.prefix { $0 != "\"" }) }
        #expect(fractions.contains { $0 > 0 && $0 < 1 }, "a progress bar part-way: \(fractions)")
    }
}
