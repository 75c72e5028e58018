import Foundation
import Testing
import Farm
import HTTPServer
import KilnCore
import KilnTestSupport
import Planner
import Store
import Synchronization
@testable import KilnAPI

/// A daemon in this process: real SQLite store in a temp folder, real farm running the
/// real `prep-artifact`, real HTTP server on a free port.
final class LinesLog: FarmLog, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return stored }
    func write(_ line: String) {
        StandardErrorLog().write(line)
        lock.lock(); stored.append(line); lock.unlock()
    }
}

final class Daemon: @unchecked Sendable {
    let dir: URL
    let farm: Farm
    let server: HTTPServer
    let store: SQLiteStore
    let media: URL
    /// What the daemon told its operator.
    let log = LinesLog()
    var port: UInt16 { server.port }

    init(token: String? = nil, retentionSeconds: Int64 = 259_200, mediaRoot: URL? = nil, space: any DiskSpace = FileSystemSpace(),
         eventHeartbeatSeconds: Double = 1, adjust: (inout FarmConfig) -> Void = { _ in }) throws {
        dir = Media.scratch("daemon")
        media = mediaRoot ?? Media.sharedFolder
        var config = FarmConfig()
        config.dataDir = dir.path
        config.retentionSeconds = retentionSeconds
        config.prepArtifactPath = Binaries.path("prep-artifact")
        config.minFreeBytes = 0
        adjust(&config)
        store = try SQLiteStore(path: dir.appendingPathComponent("kiln.db").path)
        let presets = try Presets.load(directory: Media.repoRoot.appendingPathComponent("Presets").path)
        farm = Farm(config: config, store: store, presets: presets, space: space, log: log)
        _ = try farm.start()
        var http = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        http.errorResponse = API.errorResponse
        server = HTTPServer(configuration: http)
        let metrics = Metrics()
        metrics.observe(farm)
        API(farm: farm, mediaRoots: [media.path], token: token, metrics: metrics, heartbeatSeconds: eventHeartbeatSeconds).register(on: server)
        try server.start()
    }

    func stop() {
        farm.shutdown(grace: 5)
        server.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    func prepare(_ reference: String, _ file: String, quality: String = "original", caps: String = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["aac"]}"#,
                 headers: [String: String] = [:]) throws -> RawHTTP.Response {
        let path = file.hasPrefix("/") ? file : media.appendingPathComponent(file).path
        return try RawHTTP.json(port: port, "POST", "/v1/prepare",
            #"{"reference":"\#(reference)","source":{"path":"\#(path)"},"quality":"\#(quality)","caps":\#(caps)}"#, headers: headers)
    }

    /// Waits (generously) until the reference's answer is not "preparing".
    func settle(_ reference: String, seconds: Double = 120) throws -> JSONValue {
        let deadline = Date(timeIntervalSinceNow: seconds)
        while Date() < deadline {
            let r = try RawHTTP.request(port: port, "GET", "/v1/references/\(reference)")
            let j = try JSONValue.parse(r.body)
            if j["status"] != .string("preparing") { return j }
            Thread.sleep(forTimeInterval: 0.2)
        }
        throw TestFailure("\(reference) still preparing after \(seconds) s")
    }
}

/// Whether a JSON value is a time as the API writes them (RFC 3339, e.g. 2026-12-02T05:10:00.123Z).
func isRFC3339(_ value: JSONValue?) -> Bool {
    guard case .string(let text)? = value else { return false }
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f.date(from: text) != nil
}

@Suite("kiln HTTP API", .serialized)
struct APITests {
    @Test("prepare → artifact.ready on the event stream → file with Range → release → GC → artifact.deleted")
    func lifecycle() throws {
        let d = try Daemon(retentionSeconds: 0)
        defer { d.stop() }
        let events = try RawHTTP.eventStream(port: d.port, path: "/v1/events?after=0")
        let first = try d.prepare("dl-1", "sp_bear-640x360-ec3.mp4", quality: "1mbps")
        #expect(first.status == 202)
        let answer = try JSONValue.parse(first.body)
        #expect(answer["status"] == .string("preparing"))
        // Every key of the contract's answer is there, null when empty.
        #expect(answer["file"] == .null && answer["error"] == .null && answer["progress"] != nil, "\(answer)")
        let id = try #require(answer["artifact_id"]?.string)

        var ready: SSEEvent?
        while let e = events.nextEvent() {
            if e.event == "artifact.ready" { ready = e; break }
        }
        let event = try JSONValue.parse(Array(try #require(ready).data.utf8))
        #expect(event["artifact_id"] == .string(id))
        #expect(event["references"] == .array([.string("dl-1")]))
        #expect(ready?.id == event["seq"]?.string.map { String(Int(Double($0)!)) })

        let done = try JSONValue.parse(try d.prepare("dl-1", "sp_bear-640x360-ec3.mp4", quality: "1mbps").body)
        #expect(done["status"] == .string("ready"), "the same request again answers ready, no new work")
        let file = try #require(done["file"])
        let bytes = try #require(file["bytes"]?.int)

        let full = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file")
        #expect(full.status == 200 && full.body.count == bytes)
        #expect(SHA256.hex(full.body) == file["sha256"]?.string)
        let range = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file", headers: ["Range": "bytes=100-199"])
        #expect(range.status == 206 && range.body == Array(full.body[100..<200]))
        #expect(range.headers["content-range"] == "bytes 100-199/\(bytes)")
        let head = try RawHTTP.request(port: d.port, "HEAD", "/v1/artifacts/\(id)/file")
        #expect(head.status == 200 && head.headers["content-length"] == String(bytes) && head.body.isEmpty)
        let etag = try #require(full.headers["etag"])
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file", headers: ["If-None-Match": etag]).status == 304)

        #expect(try RawHTTP.request(port: d.port, "DELETE", "/v1/references/dl-1").status == 204)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/references/dl-1").status == 404)
        _ = try d.farm.collectGarbage()
        var deleted: SSEEvent?
        while let e = events.nextEvent() {
            if e.event == "artifact.deleted" { deleted = e; break }
        }
        #expect(deleted != nil)
        // A download link kept past the collection says so (410, asking again makes it anew);
        // an id that never was is still a 404.
        for path in ["/v1/artifacts/\(id)/file", "/v1/artifacts/\(id)"] {
            let gone = try RawHTTP.request(port: d.port, "GET", path)
            let why = try JSONValue.parse(gone.body)
            #expect(gone.status == 410 && why["error"] == .string("artifact_collected"), "\(path): \(why)")
            #expect(why["message"]?.string?.contains("POST /v1/prepare") == true, "\(why)")
        }
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(String(repeating: "0", count: 64))/file").status == 404)
        #expect(!FileManager.default.fileExists(atPath: file["path"]?.string ?? "/"))
    }

    @Test("a job an operator canceled answers its references as failed, with the reason, as the contract's three states allow; asking again queues it again")
    func canceledReference() throws {
        let d = try Daemon { $0.maxTranscodes = 0 }   // nothing runs: the job waits in the queue
        defer { d.stop() }
        let answer = try JSONValue.parse(try d.prepare("c-1", "sp_bear-640x360-ec3.mp4", quality: "1mbps").body)
        let id = try #require(answer["artifact_id"]?.string)
        #expect(try RawHTTP.request(port: d.port, "POST", "/v1/artifacts/\(id)/cancel").status / 100 == 2)
        let after = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/c-1").body)
        #expect(after["status"] == .string("failed") && after["error"]?["code"] == .string("canceled") && after["file"] == .null, "\(after)")
        #expect(isRFC3339(after["error"]?["at"]), "an error's time is written like every other time: \(after)")
        #expect(after["error"]?["retryable"] == .bool(false), "a cancel is not a failure to try again: \(after)")
        let again = try JSONValue.parse(try d.prepare("c-1", "sp_bear-640x360-ec3.mp4", quality: "1mbps").body)
        #expect(again["status"] == .string("preparing"), "\(again)")
    }

    @Test("two callers of one artifact each get the plan of what they asked for (the audio track a player should pick in the original)")
    func ownPlan() throws {
        let media = Media.scratch("own-plan-media")
        defer { try? FileManager.default.removeItem(at: media) }
        try FileManager.default.copyItem(atPath: try Media.generated("two-languages.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-f", "lavfi", "-i", "sine=frequency=440", "-f", "lavfi", "-i", "sine=frequency=880",
            "-t", "2", "-map", "0", "-map", "1", "-map", "2", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
            "-metadata:s:a:0", "language=fra", "-metadata:s:a:1", "language=eng"]), toPath: media.appendingPathComponent("film.mkv").path)
        let d = try Daemon(mediaRoot: media)
        defer { d.stop() }
        func ask(_ reference: String, _ language: String) throws -> JSONValue {
            let path = media.appendingPathComponent("film.mkv").path
            return try JSONValue.parse(try RawHTTP.json(port: d.port, "POST", "/v1/prepare",
                #"{"reference":"\#(reference)","source":{"path":"\#(path)"},"quality":"original","audio_language":"\#(language)"}"#).body)
        }
        let french = try ask("fr", "fra"), english = try ask("en", "eng")
        #expect(french["artifact_id"] == english["artifact_id"], "the file as it is: one artifact")
        #expect(french["plan"]?["audio"]?["language"] == .string("fra") && english["plan"]?["audio"]?["language"] == .string("eng"), "\(english)")
        let again = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/en").body)
        #expect(again["plan"]?["audio"]?["language"] == .string("eng"))
        // The Matroska goes as what it is.
        let id = try #require(english["artifact_id"]?.string)
        #expect(try RawHTTP.request(port: d.port, "HEAD", "/v1/artifacts/\(id)/file").headers["content-type"] == "video/x-matroska")
    }

    @Test("a download of sound alone says so: audio/mp4 for FLAC re-encoded into MP4, audio/x-matroska for an E-AC-3 Matroska that goes as it is (both were video/…: a client picking its player by the type took them for films)")
    func soundAloneType() throws {
        let d = try Daemon()
        defer { d.stop() }
        let flac = try JSONValue.parse(try d.prepare("flac", "sp_bear-flac.mp4", quality: "1mbps", caps: #"{"containers":["mp4"],"codecs_audio":["aac"]}"#).body)
        let flacID = try #require(flac["artifact_id"]?.string, "\(flac)")
        #expect(try d.settle("flac")["status"] == .string("ready"))
        #expect(try RawHTTP.request(port: d.port, "HEAD", "/v1/artifacts/\(flacID)/file").headers["content-type"] == "audio/mp4")
        let eac3 = try JSONValue.parse(try d.prepare("eac3", "mb_eac3.mkv", caps: #"{"containers":["mkv"],"codecs_audio":["eac3"]}"#).body)
        let eac3ID = try #require(eac3["artifact_id"]?.string, "\(eac3)")
        #expect(eac3["delivery_format"] == .string("original"), "\(eac3)")
        #expect(try RawHTTP.request(port: d.port, "HEAD", "/v1/artifacts/\(eac3ID)/file").headers["content-type"] == "audio/x-matroska")
    }

    @Test("a caller whose user may not have files transcoded says so: a plan that needs one is 403 transcode_disabled, a remux still goes; the server's gate is a setting")
    func transcodePermission() throws {
        let d = try Daemon()
        defer { d.stop() }
        func ask(_ reference: String, _ file: String, _ quality: String, allowed: String) throws -> RawHTTP.Response {
            let path = d.media.appendingPathComponent(file).path
            return try RawHTTP.json(port: d.port, "POST", "/v1/prepare",
                #"{"reference":"\#(reference)","source":{"path":"\#(path)"},"quality":"\#(quality)","transcode_allowed":\#(allowed),"caps":{"codecs_video":["h264"],"codecs_audio":["aac"],"containers":["mp4"]}}"#)
        }
        let refused = try ask("t-1", "sp_bear-640x360-hevc-hdr10.mp4", "1mbps", allowed: "false")
        let refusal = try JSONValue.parse(refused.body)
        #expect(refused.status == 403 && refusal["error"] == .string("transcode_disabled"), "\(refused.text)")
        let remux = try ask("t-2", "sp_bear-640x360-ec3.mp4", "original", allowed: "false")
        let remuxAnswer = try JSONValue.parse(remux.body)
        #expect(remux.status == 202 && remuxAnswer["delivery_format"] == .string("remux"), "\(remux.text)")
        #expect(try ask("t-3", "sp_bear-640x360-hevc-hdr10.mp4", "1mbps", allowed: "true").status == 202)
        // The plan an allowed user made is known now; a user who may not is refused all the same.
        #expect(try ask("t-5", "sp_bear-640x360-hevc-hdr10.mp4", "1mbps", allowed: "false").status == 403)
        let bad = try ask("t-4", "sp_bear-640x360-ec3.mp4", "1mbps", allowed: "\"no\"")
        let badAnswer = try JSONValue.parse(bad.body)
        #expect(bad.status == 400 && badAnswer["field"] == .string("transcode_allowed"))

        let config = try DaemonConfig.load(environment: ["KILN_TRANSCODING": "off", "KILN_ALLOW_4K_OUTPUT": "true"], file: nil)
        #expect(!config.policy.transcodingAllowed && config.policy.allow4KOutput)
        #expect(try DaemonConfig.load(environment: [:], file: nil).policy == .standard)
        #expect(throws: KilnError.self) { _ = try DaemonConfig.load(environment: ["KILN_TRANSCODING": "maybe"], file: nil) }
        #expect(try DaemonConfig.load(environment: [:], file: nil).httpRequestDeadlineSeconds == 60)
        #expect(try DaemonConfig.load(environment: ["KILN_HTTP_REQUEST_DEADLINE_SECONDS": "0"], file: nil).httpRequestDeadlineSeconds == 0)
        #expect(throws: KilnError.self) { _ = try DaemonConfig.load(environment: ["KILN_HTTP_REQUEST_DEADLINE_SECONDS": "soon"], file: nil) }
        // The HTTP settings are read as the farm's are: spaces around a value are no error, a
        // value out of range is one that names the variable, its range and what it got.
        #expect(try DaemonConfig.load(environment: ["KILN_HTTP_THREADS": " 8 "], file: nil).httpThreads == 8)
        do {
            _ = try DaemonConfig.load(environment: ["KILN_HTTP_THREADS": "0"], file: nil)
            Issue.record("0 threads accepted")
        } catch {
            #expect(error.field == "KILN_HTTP_THREADS" && error.message.contains("1…256") && error.message.contains("\"0\""))
        }
        // So are the switches and choices: in any case, spaces around them no error, a word
        // outside them an error naming the words and the value.
        let spaced = try DaemonConfig.load(environment: ["KILN_TRANSCODING": " OFF ", "KILN_SQLITE_SYNC": "Normal "], file: nil)
        #expect(!spaced.policy.transcodingAllowed && spaced.durability == .processCrash)
        do {
            _ = try DaemonConfig.load(environment: ["KILN_SQLITE_SYNC": "extra"], file: nil)
            Issue.record("KILN_SQLITE_SYNC=extra accepted")
        } catch {
            #expect(error.field == "KILN_SQLITE_SYNC" && error.message.contains("full, normal") && error.message.contains("\"extra\""), "\(error.message)")
        }
    }

    @Test("a job whose attempt failed and waits to retry says why: waiting_reason retrying, retry_at, and that attempt's error as last_error, while the answer stays preparing with no error")
    func retryingShowsItsError() throws {
        let bin = Media.scratch("failing-child")
        defer { try? FileManager.default.removeItem(at: bin) }
        // A child that fails its runs as a failing disk's write does (transient, worth another
        // attempt), and probes as the real one.
        let child = bin.appendingPathComponent("prep-artifact")
        try Data(("#!/bin/sh\n[ \"$1\" = run ] || exec '\(Binaries.path("prep-artifact"))' \"$@\"\necho '{\"ok\": false, \"error\": {\"code\": \"io_error\", \"stage\": \"write\", "
                  + "\"message\": \"cannot write the output: Input/output error\", \"retryable\": true}}'\nexit 4\n").utf8).write(to: child)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: child.path)
        let d = try Daemon { $0.prepArtifactPath = child.path; $0.retry = RetryPolicy(baseSeconds: 600, capSeconds: 600) }
        defer { d.stop() }
        let first = try JSONValue.parse(try d.prepare("r-1", "sp_bear-640x360-ec3.mp4", quality: "1mbps").body)
        #expect(first["last_error"] == nil && first["retry_at"] == nil, "nothing failed yet: \(first)")
        var answer = first
        let deadline = Date(timeIntervalSinceNow: 60)
        while answer["waiting_reason"] != .string("retrying") && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.2)
            answer = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/r-1").body)
        }
        #expect(answer["status"] == .string("preparing") && answer["error"] == .null, "\(answer)")
        #expect(answer["waiting_reason"] == .string("retrying") && isRFC3339(answer["retry_at"]), "\(answer)")
        #expect(answer["last_error"]?["code"] == .string("io_error") && answer["last_error"]?["attempt"] == .number(1), "\(answer)")
        #expect(answer["last_error"]?["retryable"] == .bool(true), "an I/O error may pass on another try: \(answer)")
        // The child's clause, told as the contract's envelopes tell: one sentence.
        #expect(answer["last_error"]?["message"] == .string("Cannot write the output: Input/output error."), "\(answer)")
    }

    @Test("/readyz says not ready while the data directory's disk is full (every prepare would fail), ready again when there is room; not ready while the artifacts folder cannot be written; and not ready while the daemon drains")
    func readyWhenWritable() throws {
        final class Space: DiskSpace, @unchecked Sendable {
            let lock = NSLock()
            var free: Int64 = 1 << 40
            func freeBytes(at path: String) -> Int64? { lock.lock(); defer { lock.unlock() }; return free }
        }
        let space = Space()
        let d = try Daemon(space: space)
        defer { d.stop() }
        #expect(try RawHTTP.request(port: d.port, "GET", "/readyz").status == 200)
        space.lock.lock(); space.free = 4096; space.lock.unlock()
        let full = try RawHTTP.request(port: d.port, "GET", "/readyz")
        let answer = try JSONValue.parse(full.body)
        #expect(full.status == 503 && answer["error"] == .string("disk_full") && answer["retryable"] == .bool(true), "\(answer)")
        space.lock.lock(); space.free = 1 << 40; space.lock.unlock()
        #expect(try RawHTTP.request(port: d.port, "GET", "/readyz").status == 200)

        // The artifacts folder gone from under the daemon (a disk unmounted, a folder
        // removed by hand): every job would fail there, so it is not ready; back, it is.
        let artifacts = d.farm.config.artifactsDir
        try FileManager.default.moveItem(atPath: artifacts, toPath: artifacts + ".away")
        let gone = try RawHTTP.request(port: d.port, "GET", "/readyz")
        let goneWhy = try JSONValue.parse(gone.body)
        #expect(gone.status == 503 && goneWhy["error"] == .string("artifacts_unwritable"), "\(goneWhy)")
        #expect(d.log.lines.contains { $0.contains("/readyz") && $0.contains(artifacts) }, "\(d.log.lines)")
        try FileManager.default.moveItem(atPath: artifacts + ".away", toPath: artifacts)
        #expect(try RawHTTP.request(port: d.port, "GET", "/readyz").status == 200)

        // Alive, and which release: what an upgrade left running.
        let alive = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/healthz").body)
        #expect(alive["ok"] == .bool(true) && alive["version"] == .string(KilnVersion.number), "\(alive)")

        // Draining before exit: not ready, so a balancer sends new work elsewhere; alive all the same.
        d.farm.shutdown(grace: 0)
        let draining = try RawHTTP.request(port: d.port, "GET", "/readyz")
        let why = try JSONValue.parse(draining.body)
        #expect(draining.status == 503 && why["error"] == .string("shutting_down"), "\(why)")
        #expect(try RawHTTP.request(port: d.port, "GET", "/healthz").status == 200)
    }

    @Test("/readyz says not ready while the database's writes fail (an sqlite3 shell left holding its write lock), and ready again once they commit")
    func readyWhenStoreWrites() throws {
        let d = try Daemon()
        defer { d.stop() }
        #expect(try RawHTTP.request(port: d.port, "GET", "/readyz").status == 200)
        let lock = try HeldWriteLock(database: d.store.path)
        // Every write now waits out the busy timeout and fails.
        let refused = try d.prepare("locked", "sp_bear-640x360-ec3.mp4")
        #expect(refused.status >= 500, "\(refused.status)")
        // The caller learns what and a sentence; which file and which statement are the
        // operator's, in the daemon's log.
        let refusal = try JSONValue.parse(refused.body)
        let sentence = refusal["message"]?.string ?? ""
        #expect(refusal["error"] == .string("io_error") && sentence.contains("database is locked"), "\(refusal)")
        #expect(sentence.first?.isUppercase == true && sentence.hasSuffix("."), "\(sentence)")
        #expect(!sentence.contains(d.store.path) && !sentence.contains("INSERT") && !sentence.contains("BEGIN"), "\(sentence)")
        #expect(d.log.lines.contains { $0.contains("POST /v1/prepare") && $0.contains(d.store.path) }, "\(d.log.lines)")
        let failing = try RawHTTP.request(port: d.port, "GET", "/readyz")
        let why = try JSONValue.parse(failing.body)
        #expect(failing.status == 503 && why["error"] == .string("store_failing"), "\(why)")
        #expect(why["message"]?.string?.contains("locked") == true, "\(why)")
        #expect(why["message"]?.string?.contains(d.store.path) == false, "\(why)")
        // A write waiting out the busy timeout holds the connection for 5 s (the farm's
        // claims do this all the while the lock is held): the check does not wait behind it
        // and then take the busy timeout again itself, 10 s that a balancer's probe gives up
        // long before. It answers while that write still waits.
        let waitingWrite = Mutex<Bool?>(nil)
        let writer = Thread {
            let failed = (try? d.store.touch(artifactID: "a_none", now: 1)) == nil
            waitingWrite.withLock { $0 = failed }
        }
        writer.start()
        Thread.sleep(forTimeInterval: 0.3)
        let meanwhile = try RawHTTP.request(port: d.port, "GET", "/readyz")
        let stillWaiting = waitingWrite.withLock { $0 == nil }
        #expect(stillWaiting, "/readyz answered only after the write that held the store gave up")
        let meanwhileWhy = try JSONValue.parse(meanwhile.body)
        #expect(meanwhile.status == 503 && meanwhileWhy["error"] == .string("store_failing"), "\(meanwhileWhy)")
        while waitingWrite.withLock({ $0 == nil }) { Thread.sleep(forTimeInterval: 0.05) }
        #expect(waitingWrite.withLock { $0 } == true, "the write went through a held lock")
        // The shell leaves: the check's own write commits, and it is ready again.
        try lock.release()
        #expect(try RawHTTP.request(port: d.port, "GET", "/readyz").status == 200)
        #expect((200..<300).contains(try d.prepare("locked", "sp_bear-640x360-ec3.mp4").status))
    }

    @Test("the event stream resumes after a disconnect with Last-Event-ID, and ?after=")
    func resume() throws {
        let d = try Daemon()
        defer { d.stop() }
        for (i, name) in ["sp_bear-640x360-ec3.mp4", "sp_bear-640x360-trailing-moov.mp4"].enumerated() {
            _ = try d.prepare("r\(i)", name, quality: "1mbps")
            _ = try d.settle("r\(i)")
        }
        let all = try RawHTTP.eventStream(port: d.port, path: "/v1/events?after=0")
        let e1 = try #require(all.nextEvent()), e2 = try #require(all.nextEvent())
        #expect(Int(e1.id ?? "") ?? 0 < Int(e2.id ?? "") ?? 0)
        let resumed = try RawHTTP.eventStream(port: d.port, path: "/v1/events", headers: ["Last-Event-ID": e1.id ?? ""])
        #expect(resumed.nextEvent()?.id == e2.id, "resumes right after the last event seen")
        let byQuery = try RawHTTP.eventStream(port: d.port, path: "/v1/events?after=\(e1.id ?? "")")
        #expect(byQuery.nextEvent()?.id == e2.id)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/events?after=-3").status == 400)
        // A position past the last event is another event log's (the data directory was
        // replaced): every event of this one is news to that client.
        let beyond = try RawHTTP.eventStream(port: d.port, path: "/v1/events", headers: ["Last-Event-ID": "99999"])
        #expect(beyond.nextEvent()?.id == e1.id, "replays from the start")
        // Retention removed both: a listener resuming before them is told what it missed
        // (and so asks for its references' state); one that saw them all hears nothing of it.
        let pruned = try d.store.pruneEvents(before: Int64(Date().timeIntervalSince1970 * 1000) + 60_000, deliveredUpTo: nil)
        #expect(pruned == 2)
        let last = try #require(Int64(e2.id ?? ""))
        for (position, missed) in [(Int64(0), Int64(2)), (last - 1, 1)] {
            let late = try RawHTTP.eventStream(port: d.port, path: "/v1/events?after=\(position)")
            let gap = try #require(late.nextEvent(within: 15), "an events.gap first")
            #expect(gap.event == "events.gap" && gap.id == nil, "\(gap)")
            let body = try JSONValue.parse(Array(gap.data.utf8))
            #expect(body["after"]?.int == Int(position) && body["next_seq"]?.int == Int(last + 1) && body["missed"]?.int == Int(missed), "\(gap.data)")
        }
        let upToDate = try RawHTTP.eventStream(port: d.port, path: "/v1/events", headers: ["Last-Event-ID": String(last)])
        _ = try d.prepare("r9", "sp_bear-640x360-ec3.mp4", quality: "2mbps")
        var next = upToDate.nextEvent()
        while next?.event == "artifact.progress" { next = upToDate.nextEvent() }
        #expect(next?.event == "artifact.ready", "no gap before the next event: \(String(describing: next))")
    }

    @Test("an event listener that hangs up stops counting (and holding its thread) within seconds, not at the next heartbeat")
    func listenerGone() throws {
        // A heartbeat far away: only the hang-up can end the listener's wait.
        let d = try Daemon(eventHeartbeatSeconds: 600)
        defer { d.stop() }
        func listeners() throws -> Double? {
            let text = String(decoding: try RawHTTP.request(port: d.port, "GET", "/metrics").body, as: UTF8.self)
            return text.split(separator: "\n").first { $0.hasPrefix("kiln_event_stream_clients ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        /// The count once it is `value`, or what it is after a minute.
        func listeners(reaching value: Double) throws -> Double? {
            let deadline = Date(timeIntervalSinceNow: 60)
            var now = try listeners()
            while now != value, Date() < deadline {
                Thread.sleep(forTimeInterval: 0.1)
                now = try listeners()
            }
            return now
        }
        var listener: RawHTTP? = try RawHTTP.eventStream(port: d.port, path: "/v1/events")
        _ = listener
        // Counted by the listener's own thread, which may start after the client has the
        // response's head.
        let counted = try listeners(reaching: 1)
        #expect(counted == 1, "\(String(describing: counted))")
        listener = nil   // closes the socket
        let left = try listeners(reaching: 0)
        #expect(left == 0, "the listener is still counted after its client hung up: \(String(describing: left))")
    }

    @Test("a token guards every route but /healthz (and the page, which holds no data and asks for it), a wrong one is refused, the scheme's name in any case")
    func auth() throws {
        let d = try Daemon(token: "s3cret-token")
        defer { d.stop() }
        #expect(try RawHTTP.request(port: d.port, "GET", "/healthz").status == 200)
        for path in ["/v1/queue", "/metrics", "/v1/references/x", "/v1/events"] {
            let r = try RawHTTP.request(port: d.port, "GET", path)
            #expect(r.status == 401, "\(path)")
            #expect(try JSONValue.parse(r.body)["error"] == .string("unauthorized"))
            #expect(try RawHTTP.request(port: d.port, "GET", path, headers: ["Authorization": "Bearer s3cret-tokeN"]).status == 401)
        }
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/queue", headers: ["Authorization": "Bearer s3cret-token"]).status == 200)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/queue", headers: ["Authorization": "bearer s3cret-token"]).status == 200)
        for wrong in ["Bearer", "Bearer ", "Basic s3cret-token", "s3cret-token", "Bearers3cret-token"] {
            #expect(try RawHTTP.request(port: d.port, "GET", "/v1/queue", headers: ["Authorization": wrong]).status == 401, "\(wrong)")
        }
        #expect(try d.prepare("x", "sp_bear-flac.mp4").status == 401)
    }

    @Test("without a token, a request another site's web page makes (its Origin) or one addressed to a name that is not loopback (DNS rebinding: its Host) is refused; programs on the machine and the daemon's own page are answered")
    func foreignPagesRefusedWithoutToken() throws {
        let d = try Daemon()
        defer { d.stop() }
        func send(_ head: String, body: String = "") throws -> (Int, String?) {
            let c = try RawHTTP(port: d.port)
            try c.send(head + "Connection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
            let r = try c.readResponse()
            return (r.status, try JSONValue.parse(r.body)["error"]?.string)
        }
        let prepare = #"{"reference":"o","source":{"path":"\#(Media.shared("sp_bear-flac.mp4"))"},"quality":"1mbps"}"#
        #expect(try send("GET /v1/queue HTTP/1.1\r\nHost: evil.example:\(d.port)\r\n") == (403, "host_not_allowed"))
        #expect(try send("POST /v1/prepare HTTP/1.1\r\nHost: 127.0.0.1:\(d.port)\r\nOrigin: http://evil.example\r\nContent-Type: text/plain\r\n",
                         body: prepare) == (403, "origin_not_allowed"))
        #expect(try send("POST /v1/prepare HTTP/1.1\r\nHost: localhost:\(d.port)\r\nOrigin: null\r\n", body: prepare) == (403, "origin_not_allowed"))
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/references/o").status == 404, "nothing was prepared")
        #expect(try send("GET /v1/queue HTTP/1.1\r\nHost: [::1]:\(d.port)\r\n").0 == 200)
        #expect(try RawHTTP.request(port: d.port, "GET", "/").status == 200)
        #expect([200, 202].contains(try send("POST /v1/prepare HTTP/1.1\r\nHost: 127.0.0.1:\(d.port)\r\nOrigin: http://127.0.0.1:\(d.port)\r\n",
                                             body: prepare).0))
        // With a token the token decides, whatever the name.
        let guarded = try Daemon(token: "s3cret")
        defer { guarded.stop() }
        let c = try RawHTTP(port: guarded.port)
        try c.send("GET /v1/queue HTTP/1.1\r\nHost: kiln.example.com\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n")
        #expect(try c.readResponse().status == 200)
    }

    @Test("sources outside the media roots are forbidden without a hint; symlinks that escape are caught")
    func pathSafety() throws {
        let root = Media.scratch("roots")
        defer { try? FileManager.default.removeItem(at: root) }
        let inside = root.appendingPathComponent("movies")
        try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Media.shared("sp_bear-flac.mp4"), toPath: inside.appendingPathComponent("ok.mp4").path)
        try FileManager.default.createSymbolicLink(atPath: inside.appendingPathComponent("escape.mp4").path, withDestinationPath: "/etc/passwd")
        try FileManager.default.createSymbolicLink(atPath: inside.appendingPathComponent("dir-escape").path, withDestinationPath: "/etc")
        let d = try Daemon(mediaRoot: inside)
        defer { d.stop() }
        func code(_ path: String) throws -> (Int, String?) {
            let r = try d.prepare("p", path)
            return (r.status, try JSONValue.parse(r.body)["error"]?.string)
        }
        #expect([200, 202].contains(try code(inside.appendingPathComponent("ok.mp4").path).0))
        #expect(try code("/etc/passwd") == (403, "source_forbidden"))
        #expect(try code("/etc/does-not-exist") == (403, "source_forbidden"), "no hint that a file outside is missing")
        #expect(try code(inside.path + "/../../../etc/passwd") == (403, "source_forbidden"))
        #expect(try code(inside.appendingPathComponent("escape.mp4").path) == (403, "source_forbidden"))
        #expect(try code(inside.appendingPathComponent("dir-escape/passwd").path) == (403, "source_forbidden"))
        #expect(try code(inside.appendingPathComponent("missing.mkv").path) == (404, "source_not_found"))
        // A symlink loop is there and cannot be followed: not a missing file.
        try FileManager.default.createSymbolicLink(atPath: inside.appendingPathComponent("loop-a.mkv").path, withDestinationPath: "loop-b.mkv")
        try FileManager.default.createSymbolicLink(atPath: inside.appendingPathComponent("loop-b.mkv").path, withDestinationPath: "loop-a.mkv")
        #expect(try code(inside.appendingPathComponent("loop-a.mkv").path) == (422, "source_unreadable"))
        #expect(try code(inside.path) == (403, "source_forbidden"), "a folder is not a file")
        let relative = try RawHTTP.json(port: d.port, "POST", "/v1/prepare", #"{"reference":"p","source":{"path":"movies/a.mkv"}}"#)
        #expect(relative.status == 400)
    }

    @Test("an original's file replaced by a symlink to a file of the same size outside the media roots is changed (409), never served")
    func originalSwappedForSymlink() throws {
        let root = Media.scratch("swap-root"), outside = Media.scratch("swap-outside")
        defer { try? FileManager.default.removeItem(at: root); try? FileManager.default.removeItem(at: outside) }
        let film = root.appendingPathComponent("film.mp4").path
        try FileManager.default.copyItem(atPath: Media.shared("sp_bear-flac.mp4"), toPath: film)
        let d = try Daemon(mediaRoot: root)
        defer { d.stop() }
        let caps = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["flac"]}"#
        let answer = try JSONValue.parse(try d.prepare("s", film, caps: caps).body)
        #expect(answer["delivery_format"] == .string("original") && answer["status"] == .string("ready"), "\(answer)")
        let id = try #require(answer["artifact_id"]?.string)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file").status == 200)
        let size = try #require((try FileManager.default.attributesOfItem(atPath: film))[.size] as? Int)
        let secret = outside.appendingPathComponent("secret").path
        try Data(repeating: 0x53, count: size).write(to: URL(fileURLWithPath: secret))
        try FileManager.default.removeItem(atPath: film)
        try FileManager.default.createSymbolicLink(atPath: film, withDestinationPath: secret)
        let download = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file")
        let refused = try JSONValue.parse(download.body)
        #expect(download.status == 409 && refused["error"] == .string("source_changed"), "\(download.status)")
        let reference = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/s").body)
        #expect(reference["status"] == .string("failed") && reference["error"]?["code"] == .string("source_changed"), "\(reference)")
    }

    @Test("the same request again once its source is deleted answers as its reference does (a file Kiln made stays ready and downloads), where it answered 404 source_not_found; a new reference to the gone file is 404")
    func sameRequestSourceGone() throws {
        let root = Media.scratch("gone-root")
        defer { try? FileManager.default.removeItem(at: root) }
        let film = root.appendingPathComponent("film.mp4").path
        try FileManager.default.copyItem(atPath: Media.shared("sp_bear-640x360-ec3.mp4"), toPath: film)
        let d = try Daemon(mediaRoot: root)
        defer { d.stop() }
        _ = try d.prepare("kept", film, quality: "1mbps")
        let ready = try d.settle("kept")
        #expect(ready["status"] == .string("ready") && ready["delivery_format"] != .string("original"), "\(ready)")
        try FileManager.default.removeItem(atPath: film)
        let again = try d.prepare("kept", film, quality: "1mbps")
        let answer = try JSONValue.parse(again.body)
        #expect(again.status == 200 && answer["status"] == .string("ready"), "\(again.status) \(answer)")
        #expect(answer["artifact_id"] == ready["artifact_id"] && answer["file"] == ready["file"])
        let id = try #require(answer["artifact_id"]?.string)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file").status == 200)
        // The artifact says how to make the same file with the ffmpeg command: the encode's
        // every setting, written where the file is.
        let artifact = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)").body)
        guard case .array(let command)? = artifact["ffmpeg_equivalent"] else { Issue.record("no ffmpeg_equivalent: \(artifact)"); return }
        let words = command.compactMap(\.string)
        #expect(words.first == "ffmpeg" && words.contains("-c:1") && words.contains(film), "\(words)")
        #expect(words.last == ready["file"]?["path"]?.string, "\(words.suffix(2)) \(ready["file"] ?? .null)")
        // Not the same request: the gone file is not found.
        let other = try d.prepare("new", film, quality: "1mbps")
        let notFound = try JSONValue.parse(other.body)
        #expect(other.status == 404 && notFound["error"] == .string("source_not_found"), "\(notFound)")
        let otherQuality = try d.prepare("kept", film, quality: "2mbps")
        #expect(otherQuality.status == 404)
    }

    @Test("a ready artifact says what its file holds, as the engine that made it does: length, picture, the one sound and its language, and the source's other sound as left out with its language, read back from the store (the API server had to probe the file to describe the download)")
    func outputDescribed() throws {
        let root = Media.scratch("described-root")
        defer { try? FileManager.default.removeItem(at: root) }
        let film = root.appendingPathComponent("two-languages.mkv").path
        try FileManager.default.copyItem(atPath: try Media.generated("api-two-languages-3s.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3", "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
            "-f", "lavfi", "-i", "sine=frequency=660:duration=3", "-map", "0:v", "-map", "1:a", "-map", "2:a",
            "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=fre",
            "-disposition:a:0", "default", "-disposition:a:1", "0"]), toPath: film)
        let d = try Daemon(mediaRoot: root)
        defer { d.stop() }
        _ = try d.prepare("described", film, quality: "original")
        let ready = try d.settle("described")
        #expect(ready["status"] == .string("ready") && ready["delivery_format"] == .string("remux"), "\(ready)")
        let id = try #require(ready["artifact_id"]?.string)
        let artifact = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)").body)
        let output = try #require(artifact["output"], "no output: \(artifact)")
        #expect(abs((output["duration_seconds"]?.double ?? 0) - 3) < 0.2, "\(output)")
        #expect(output["container"] == .string("mp4") && output["video"]?["codec"] == .string("h264")
                && output["video"]?["width"]?.int == 320, "\(output)")
        #expect(output["audio"]?["codec"] == .string("aac") && output["audio"]?["language"] == .string("eng"), "\(output)")
        guard case .array(let dropped)? = output["dropped"] else { Issue.record("no dropped: \(output)"); return }
        #expect(dropped.count == 1 && dropped.first?["source_index"]?.int == 2 && dropped.first?["language"] == .string("fra")
                && dropped.first?["reason"] == .string("audio_track_not_chosen"), "\(dropped)")
        #expect(output["path"] == nil && output["sha256"] == nil, "the file's path and hash are the artifact's `file`: \(output)")
    }

    @Test("a download asked for while the collector deletes the artifact answers 410 artifact_collected, as it will once the row is gone, not 409 not ready yet")
    func downloadDuringCollection() throws {
        let d = try Daemon()
        defer { d.stop() }
        _ = try d.prepare("gc", "sp_bear-640x360-ec3.mp4")
        let ready = try d.settle("gc")
        let id = try #require(ready["artifact_id"]?.string)
        #expect(try RawHTTP.request(port: d.port, "DELETE", "/v1/references/gc").status == 204)
        #expect(try d.store.beginDeleting(artifactID: id, now: SystemClock().nowMillis()))
        let during = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file")
        let answer = try JSONValue.parse(during.body)
        #expect(during.status == 410 && answer["error"] == .string("artifact_collected"), "\(during.status) \(answer)")
    }

    @Test("a reference is taken whole: one with a NUL never names another's (it took the other over), nor does an id or a URL with %00; control characters and more than 256 code points are refused, however they are drawn")
    func referencesTakenWhole() throws {
        let d = try Daemon()
        defer { d.stop() }
        let first = try JSONValue.parse(try d.prepare("victim", "sp_bear-640x360-ec3.mp4").body)
        let id = try #require(first["artifact_id"]?.string)
        let nul = try RawHTTP.json(port: d.port, "POST", "/v1/prepare",
                                   #"{"reference":"victim\u0000attacker","source":{"path":"\#(Media.shared("sp_bear-flac.mp4"))"}}"#)
        let nulAnswer = try JSONValue.parse(nul.body)
        #expect(nul.status == 400 && nulAnswer["field"] == .string("reference"), "\(nul.text)")
        let accents = "g" + String(repeating: "\u{0301}", count: 300)
        #expect(accents.count == 1)
        let long = try RawHTTP.json(port: d.port, "POST", "/v1/prepare",
                                    #"{"reference":"\#(accents)","source":{"path":"\#(Media.shared("sp_bear-flac.mp4"))"}}"#)
        #expect(long.status == 400, "\(long.status)")
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/references/victim%00x").status == 404)
        #expect(try RawHTTP.request(port: d.port, "DELETE", "/v1/references/victim%00x").status == 404)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)%00junk").status == 404)
        let still = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/victim").body)
        #expect(still["artifact_id"]?.string == id && still["reference"] == .string("victim"), "\(still)")
    }

    @Test("a poll of a running job shows its child's latest progress, the same in the reference, the artifact and the queue: it showed the last heartbeat's (every 5 s; none at all for a job's first seconds) and answers disagreed")
    func pollsSeeLiveProgress() throws {
        // A heartbeat that never comes while the job runs: whatever progress a poll shows
        // is the child's own, as it reports it.
        let media = Media.scratch("live-progress-media")
        defer { try? FileManager.default.removeItem(at: media) }
        try FileManager.default.copyItem(atPath: try Media.generated("api-progress-8s-720p.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", "-t", "8", "-c:v", "libx264", "-preset", "ultrafast", "-g", "50"]),
                                         toPath: media.appendingPathComponent("film.mkv").path)
        let d = try Daemon(mediaRoot: media) { $0.heartbeatSeconds = 3600; $0.leaseSeconds = 7200 }
        defer { d.stop() }
        let answer = try JSONValue.parse(try d.prepare("live", "film.mkv", quality: "1mbps").body)
        let id = try #require(answer["artifact_id"]?.string, "\(answer)")
        var seen: (reference: Double?, artifact: Double?, queue: Double?) = (nil, nil, nil)
        let deadline = Date(timeIntervalSinceNow: 120)
        while Date() < deadline {
            let artifact = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)").body)
            if artifact["state"] != .string("pending") { break }
            if case .object(let fields) = artifact {
                #expect(fields.keys.contains("progress"), "progress is null when there is none, never left out: \(artifact)")
            }
            seen.artifact = seen.artifact ?? artifact["progress"]?["fraction"]?.double
            let reference = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/live").body)
            seen.reference = seen.reference ?? reference["progress"]?["fraction"]?.double
            let queue = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/queue").body)
            if case .array(let running)? = queue["running"], let job = running.first {
                seen.queue = seen.queue ?? job["progress"]?["fraction"]?.double
                // Which film it is: an operator reading the queue knows films, not ids.
                #expect(job["source"]?.string == media.appendingPathComponent("film.mkv").path, "\(job)")
            }
            if seen.reference != nil && seen.artifact != nil && seen.queue != nil { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(seen.reference != nil && seen.artifact != nil && seen.queue != nil, "\(seen)")
    }

    @Test("malformed, oversized and random bodies get a 4xx envelope naming the field, and the daemon stays healthy")
    func badBodies() throws {
        let d = try Daemon()
        defer { d.stop() }
        let cases: [(String, Int, String?)] = [
            ("", 400, nil), ("{", 400, nil), ("[]", 400, nil), ("null", 400, nil),
            (#"{"source":{"path":"/x"}}"#, 400, "reference"),
            (#"{"reference":"a"}"#, 400, "source"),
            (#"{"reference":"a","source":{"path":7}}"#, 400, "source.path"),
            (#"{"reference":"a","source":{"path":"/x"},"quality":"4k"}"#, 400, "quality"),
            (#"{"reference":"a","source":{"path":"/x"},"caps":{"hdr":"yes"}}"#, 400, "hdr"),
            (#"{"reference":"a","source":{"path":"/x"},"priority":"urgent"}"#, 400, "priority"),
            (#"{"reference":"a","source":{"path":"/x"},"audio_language":12}"#, 400, "audio_language"),
            // A field misspelt is refused as the caps' are: ignored, "qualty" was `original`.
            (#"{"reference":"a","source":{"path":"/x"},"qualty":"2mbps"}"#, 400, "qualty"),
            (#"{"reference":"a","source":{"path":"/x"},"Quality":"2mbps"}"#, 400, "Quality"),
            (#"{"reference":"a","source":{"path":"/x"},"audioLanguage":"fr"}"#, 400, "audioLanguage"),
        ]
        for (body, status, field) in cases {
            let r = try RawHTTP.json(port: d.port, "POST", "/v1/prepare", body)
            #expect(r.status == status, "\(body)")
            let j = try JSONValue.parse(r.body)
            #expect(j["error"]?.string != nil && j["message"]?.string != nil, "envelope for \(body)")
            if let field { #expect(j["field"]?.string == field || (j["message"]?.string ?? "").contains(field), "\(body)") }
        }
        // Errors of the request's values name their field too: the quality, the source file.
        let quality = try JSONValue.parse(try RawHTTP.json(port: d.port, "POST", "/v1/prepare",
                                                           #"{"reference":"q","source":{"path":"/x"},"quality":"4k"}"#).body)
        #expect(quality["error"] == .string("invalid_quality") && quality["field"] == .string("quality"), "\(quality)")
        #expect(quality["retryable"] == .bool(false), "a request's own fault is not worth asking again: \(quality)")
        let media = Media.scratch("not-media")
        defer { try? FileManager.default.removeItem(at: media) }
        try Data("not a film".utf8).write(to: media.appendingPathComponent("notes.mkv"))
        let text = try Daemon(mediaRoot: media)
        defer { text.stop() }
        let notMedia = try JSONValue.parse(try text.prepare("n", "notes.mkv").body)
        #expect(notMedia["error"]?.string?.hasPrefix("source_") == true && notMedia["field"] == .string("source.path"), "\(notMedia)")
        // A body announced over the limit is refused on its headers, before a byte of it is
        // read, and the connection closed: a client still sending the megabyte may find the
        // socket reset under it (a race the test lost on a busy machine), so this one sends
        // the headers alone.
        let big = try RawHTTP(port: d.port)
        try big.send("POST /v1/prepare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + "Content-Length: \((1 << 20) + 10)\r\n\r\n")
        #expect(try big.readResponse().status == 413)
        var rng = SystemRandomNumberGenerator()
        let pieces = ["{", "}", "[", "]", "\"reference\"", "\"source\"", "\"path\"", ":", ",", "\"/a\"", "1", "true", "null", "\"quality\"", "\"caps\"", "\u{0}", "\\", "\"\u{FFFF}\""]
        for _ in 0..<2000 {
            let body = (0..<Int.random(in: 0...24, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
            let r = try RawHTTP.json(port: d.port, "POST", "/v1/prepare", body)
            #expect((400..<500).contains(r.status), "\(body) → \(r.status)")
            #expect((try? JSONValue.parse(r.body))?["error"] != nil)
        }
        let garbage = try RawHTTP(port: d.port)
        try garbage.send("NOT A REQUEST\r\n\r\n")
        _ = try? garbage.readResponse()
        #expect(try RawHTTP.request(port: d.port, "GET", "/healthz").status == 200)
        #expect(try RawHTTP.request(port: d.port, "GET", "/v1/nope").status == 404)
        #expect(try RawHTTP.request(port: d.port, "PUT", "/v1/prepare").status == 405)
    }

    /// What a device that plays it gets for a copy of an E-AC-3 film in `media`, asked for as
    /// `reference` at original: a daemon serving `media`, the film, the first answer (ready).
    static let originalCaps = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["eac3"]}"#
    static func askedAsOriginal(_ reference: String, in media: URL) throws -> (Daemon, URL, JSONValue) {
        let film = media.appendingPathComponent("film.mp4")
        try FileManager.default.copyItem(atPath: Media.shared("sp_bear-640x360-ec3.mp4"), toPath: film.path)
        let d = try Daemon(mediaRoot: media)
        let first = try JSONValue.parse(try d.prepare(reference, film.path, quality: "original", caps: originalCaps).body)
        #expect(first["status"] == .string("ready") && first["delivery_format"] == .string("original"), "\(first)")
        // The contract's file object has its three keys; Kiln does not hash a source whole.
        #expect(first["file"]?["bytes"] != nil && first["file"]?["sha256"] == .null, "\(first)")
        return (d, film, first)
    }

    @Test("an original whose file is renamed over by another (one that needs a transcode) is answered failed with source_changed and its download refused, not ready with the old size and plan; asked again, it is planned anew")
    func originalReplaced() throws {
        let media = Media.scratch("original-replaced-media")
        defer { try? FileManager.default.removeItem(at: media) }
        let (d, film, first) = try Self.askedAsOriginal("o1", in: media)
        defer { d.stop() }
        let id = try #require(first["artifact_id"]?.string)
        // H.264 4:4:4 (no device decodes it) renamed over the file, as a library tool does.
        let other = try Media.generated("h264-444-2s.mp4", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=2",
                                                           "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv444p"])
        let staged = media.appendingPathComponent(".film.tmp")
        try FileManager.default.copyItem(atPath: other, toPath: staged.path)
        #expect(rename(staged.path, film.path) == 0)
        let after = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/o1").body)
        #expect(after["status"] == .string("failed") && after["error"]?["code"] == .string("source_changed") && after["file"] == .null, "\(after)")
        let download = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)/file")
        #expect(download.status == 409 && download.text.contains("source_changed"), "\(download.status) \(download.text.prefix(200))")
        let again = try JSONValue.parse(try d.prepare("o1", film.path, quality: "original", caps: Self.originalCaps).body)
        #expect(again["artifact_id"] != first["artifact_id"] && again["delivery_format"] == .string("transcode"), "\(again)")
    }

    @Test("an original whose file changes is failed by the maintenance pass with an artifact.failed event, counted in the metrics and timed when it was found (it went failed in answers alone, with no event, timed when it was asked for)")
    func originalChangedEvent() throws {
        let media = Media.scratch("original-changed-event")
        defer { try? FileManager.default.removeItem(at: media) }
        let (d, film, _) = try Self.askedAsOriginal("o2", in: media)
        defer { d.stop() }
        #expect(try d.farm.checkOriginals() == 0, "an unchanged original stays ready")
        // Appended to, as a recording still being written or a tool rewriting it in place.
        let changedAt = SystemClock().nowMillis()
        let handle = try FileHandle(forWritingTo: film)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 7, count: 4096))
        try handle.close()
        #expect(try d.farm.checkOriginals() == 1)
        #expect(try d.farm.checkOriginals() == 0, "failed once")
        let events = try RawHTTP.eventStream(port: d.port, path: "/v1/events?after=0")
        var failed: SSEEvent?
        while let e = events.nextEvent(within: 5) {
            if e.event == "artifact.failed" { failed = e; break }
        }
        let event = try JSONValue.parse(Array(try #require(failed, "no artifact.failed event").data.utf8))
        #expect(event["references"] == .array([.string("o2")]) && event["error"]?["code"] == .string("source_changed"), "\(event)")
        let answer = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/references/o2").body)
        #expect(answer["status"] == .string("failed") && answer["error"]?["code"] == .string("source_changed"), "\(answer)")
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let at = try #require(answer["error"]?["at"]?.string.flatMap { parser.date(from: $0) }, "\(answer)")
        #expect(Int64(at.timeIntervalSince1970 * 1000) >= changedAt, "\(answer)")
        // An operator's retry is no way to bring an original back: as a job it copied the
        // whole source into the artifacts folder and served the copy.
        let failedID = try #require(answer["artifact_id"]?.string)
        let retried = try RawHTTP.request(port: d.port, "POST", "/v1/artifacts/\(failedID)/retry")
        #expect(retried.status == 409 && retried.text.contains("POST /v1/prepare"), "\(retried.status) \(retried.text)")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try FileManager.default.contentsOfDirectory(atPath: d.dir.appendingPathComponent("artifacts").path).isEmpty)
        // The metrics count the event as another subscriber of the hub: soon, not
        // necessarily before the event stream has it (a loaded machine showed the gap).
        var metrics = ""
        let deadline = Date(timeIntervalSinceNow: 5)
        repeat {
            metrics = try RawHTTP.request(port: d.port, "GET", "/metrics").text
            if metrics.contains(#"kiln_failures_total{code="source_changed"} 1"#) { break }
            Thread.sleep(forTimeInterval: 0.05)
        } while Date() < deadline
        #expect(metrics.contains(#"kiln_failures_total{code="source_changed"} 1"#), "\(metrics.prefix(2000))")
        // The status endpoint's failures and the artifact say why too (they said nothing).
        let queue = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/queue").body)
        guard case .array(let failures)? = queue["recent_failures"], let first = failures.first else {
            Issue.record("no recent failure: \(queue)"); return
        }
        #expect(first["error"]?["code"] == .string("source_changed"), "\(first)")
        let id = try #require(answer["artifact_id"]?.string)
        let artifact = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(id)").body)
        guard case .array(let errors)? = artifact["errors"] else { Issue.record("no errors: \(artifact)"); return }
        #expect(errors.first?["code"] == .string("source_changed"), "\(artifact)")
    }

    @Test("the status endpoint, metrics and status page answer; the queue's times are RFC 3339; metrics count originals as requests, not as jobs made")
    func statusAndMetrics() throws {
        let d = try Daemon { $0.maxTranscodes = 0 }   // the transcode below stays queued
        defer { d.stop() }
        _ = try d.prepare("m1", "sp_bear-640x360-ec3.mp4", quality: "1mbps")
        _ = try d.settle("m1")
        let originalCaps = #"{"containers":["mp4"],"codecs_video":["h264"],"codecs_audio":["eac3"]}"#
        let original = try d.prepare("m0", "sp_bear-640x360-ec3.mp4", quality: "original", caps: originalCaps)
        #expect(try JSONValue.parse(original.body)["delivery_format"] == .string("original"))
        // The key prep-artifact prints for an original is the daemon's (the file's path in it).
        let cli = try Run.command(Binaries.path("prep-artifact"), ["plan", Media.shared("sp_bear-640x360-ec3.mp4"), "--quality", "original",
                                                                  "--caps", originalCaps, "--json"])
        let cliKey = try JSONValue.parse(Array(cli.stdout.utf8))["plan"]?["artifact_key"]
        let daemonKey = try JSONValue.parse(original.body)["plan"]?["artifact_key"]
        #expect(cliKey != nil && cliKey == daemonKey, "\(cli.stdout) \(original.text)")
        // The user's file has a validator too, so an interrupted download resumes (If-Range).
        let originalID = try #require(try JSONValue.parse(original.body)["artifact_id"]?.string)
        let head = try RawHTTP.request(port: d.port, "HEAD", "/v1/artifacts/\(originalID)/file")
        let tag = try #require(head.headers["etag"], "\(head.headers)")
        let resumed = try RawHTTP.request(port: d.port, "GET", "/v1/artifacts/\(originalID)/file", headers: ["Range": "bytes=10-19", "If-Range": tag])
        #expect(resumed.status == 206 && resumed.body.count == 10)
        let transcode = try d.prepare("m2", "sp_bear-640x360-hevc-hdr10.mp4", quality: "1mbps")
        #expect(try JSONValue.parse(transcode.body)["delivery_format"] == .string("transcode"))
        // While it waits, the answer gives the size to expect.
        #expect(try JSONValue.parse(transcode.body)["estimated_bytes"]?.int ?? 0 > 0, "\(transcode.text)")
        let q = try JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/v1/queue").body)
        #expect(q["counts"]?["succeeded"]?.int == 1)
        if case .array(let queued)? = q["queued"], let job = queued.first {
            #expect(isRFC3339(job["queued_at"]) && isRFC3339(job["run_after"]) && job["artifact_id"]?.string != nil, "\(job)")
        } else {
            Issue.record("a queued job is listed: \(q)")
        }
        #expect(q["slots"]?["transcode"]?["total"] != nil)
        #expect(q["storage"]?["stored_bytes"]?.int ?? 0 > 0)
        let metrics = try RawHTTP.request(port: d.port, "GET", "/metrics").text
        #expect(metrics.contains(#"kiln_jobs{state="succeeded"} 1"#))
        #expect(metrics.contains("kiln_job_duration_seconds_count"))
        #expect(metrics.contains(#"kiln_artifacts_completed_total{delivery_format="remux"} 1"#))
        #expect(!metrics.contains(#"kiln_artifacts_completed_total{delivery_format="original"}"#), "no job ever makes an original")
        #expect(metrics.contains(#"kiln_prepare_requests_total{result="existing",delivery_format="original"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"kiln_prepare_requests_total{result="enqueued",delivery_format="remux"} 1"#), "\(metrics)")
        let page = try RawHTTP.request(port: d.port, "GET", "/")
        #expect(page.status == 200 && page.text.contains("<title>Kiln</title>"))
    }
}

@Suite("webhook")
struct WebhookTests {
    /// A receiver that fails its first `failures` deliveries, then records bodies.
    final class Receiver: @unchecked Sendable {
        let server: HTTPServer
        let lock = NSLock()
        var attempts = 0
        var bodies: [(signature: String, body: [UInt8])] = []
        init(failures: Int) throws {
            server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0))
            server.route("POST", "/hook") { [self] req, _ in
                lock.lock(); defer { lock.unlock() }
                attempts += 1
                if attempts <= failures { return .empty(503) }
                bodies.append((req.headers["X-Kiln-Signature"] ?? "", req.body))
                return .empty(204)
            }
            try server.start()
        }

        /// The sequence numbers received so far, in arrival order, once there are at least
        /// `count` (or after a generous wait).
        func deliveredSeqs(atLeast count: Int) -> [Int] {
            let deadline = Date(timeIntervalSinceNow: 60)
            var seqs: [Int] = []
            while Date() < deadline {
                lock.lock()
                seqs = bodies.flatMap { b -> [Int] in
                    guard case .array(let events)? = (try? JSONValue.parse(b.body))?["events"] else { return [] }
                    return events.compactMap { $0["seq"]?.int }
                }
                lock.unlock()
                if seqs.count >= count { break }
                Thread.sleep(forTimeInterval: 0.1)
            }
            return seqs
        }
    }

    @Test("batches arrive in order, signed, after the receiver failed twice; the position survives a restart")
    func delivery() throws {
        let receiver = try Receiver(failures: 2)
        defer { receiver.server.stop() }
        let d = try Daemon()
        defer { d.stop() }
        let url = URL(string: "http://127.0.0.1:\(receiver.server.port)/hook")!
        final class Lines: @unchecked Sendable {
            let lock = NSLock()
            var all: [String] = []
            func add(_ line: String) { lock.lock(); all.append(line); lock.unlock() }
            var said: [String] { lock.lock(); defer { lock.unlock() }; return all }
        }
        let lines = Lines()
        let hook = WebhookDeliverer(url: url, secret: "shh", store: d.store, hub: d.farm.events, firstDelay: 0.05, maxDelay: 0.2,
                                    log: { lines.add($0) })
        let metrics = Metrics()
        metrics.webhookCounts = { (hook.delivered, hook.failures) }
        hook.start()
        for (i, name) in ["sp_bear-640x360-ec3.mp4", "sp_bear-640x360-trailing-moov.mp4"].enumerated() {
            _ = try d.prepare("w\(i)", name, quality: "1mbps")
            _ = try d.settle("w\(i)")
        }
        _ = receiver.deliveredSeqs(atLeast: 2)
        hook.stop()
        // Read once the deliverer has stopped: a batch in flight at the stop is in it too.
        let seqs = receiver.deliveredSeqs(atLeast: 2)
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count && seqs.count >= 2, "\(seqs)")
        receiver.lock.lock()
        #expect(receiver.attempts >= 3, "retried after two failures")
        for b in receiver.bodies {
            #expect(b.signature == "sha256=" + HMACSHA256.hex(key: Array("shh".utf8), message: b.body))
        }
        receiver.lock.unlock()
        #expect(try d.store.webhookPosition() == Int64(seqs.max() ?? 0))
        // The operator hears of the failing receiver once, and of its recovery once; /metrics counts both.
        #expect(lines.said.count == 2 && lines.said.first?.contains("HTTP 503") == true && lines.said.last?.contains("takes events again") == true,
                "\(lines.said)")
        let text = metrics.render(farm: d.farm)
        #expect(text.contains("kiln_webhook_failed_posts_total \(hook.failures)") && hook.failures >= 2, "\(text)")
        #expect(text.contains("kiln_webhook_events_delivered_total \(hook.delivered)") && hook.delivered == seqs.count, "\(text)")

        // A restarted deliverer starts from the stored position: nothing repeated, nothing skipped.
        _ = try d.prepare("w9", "ax_sample_with_srt.mkv", quality: "1mbps")
        _ = try d.settle("w9")
        let before = seqs.count
        let again = WebhookDeliverer(url: url, secret: "shh", store: d.store, hub: d.farm.events, firstDelay: 0.05, maxDelay: 0.2)
        again.start()
        defer { again.stop() }
        let after = receiver.deliveredSeqs(atLeast: before + 1)
        #expect(after.count == before + 1 && after == after.sorted() && Set(after).count == after.count, "\(after)")
    }

    @Test("a receiver that takes the connection and never answers costs one timeout per try, not a minute: the deliverer gives up and tries again")
    func hangingReceiver() throws {
        // A listening socket nobody accepts from: the kernel completes the connection, the
        // request is sent, no answer ever comes.
        let silent = DaemonProcess.loopbackSocket(listening: true)
        defer { close(silent.fd) }
        let d = try Daemon()
        defer { d.stop() }
        let url = URL(string: "http://127.0.0.1:\(silent.port)/hook")!
        let hook = WebhookDeliverer(url: url, secret: "shh", store: d.store, hub: d.farm.events, firstDelay: 0.05, maxDelay: 0.1, postTimeout: 1)
        hook.start()
        defer { hook.stop() }
        _ = try d.prepare("h0", "sp_bear-640x360-ec3.mp4", quality: "1mbps")
        _ = try d.settle("h0")
        let deadline = Date(timeIntervalSinceNow: 20)
        while hook.failures < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(hook.failures >= 2 && hook.delivered == 0, "\(hook.failures) failures")
    }

    @Test("HMAC-SHA256 matches RFC 4231 test case 2")
    func hmac() {
        #expect(HMACSHA256.hex(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}
