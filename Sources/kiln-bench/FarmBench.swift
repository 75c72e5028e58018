import Foundation
import Farm
import HTTPServer
import KilnAPI
import KilnCore
import KilnTestSupport
import Planner
import Store

/// Measures what issues 4 and 5 set goals for, with a fake child (no media): store cycles
/// per second, the dedupe storm's latency, queue-to-start latency, `GET /v1/queue` with
/// 10,000 jobs, `POST /v1/prepare` for an existing artifact, and event delivery to 200
/// SSE clients. Prints one JSON object.
enum FarmBench {
    static func main(_ args: [String]) -> Int32 {
        let quick = args.contains("--quick")
        guard let presetsDir = Presets.locate(), let presets = try? Presets.load(directory: presetsDir) else {
            FileHandle.standardError.write(Data("kiln-bench: cannot load the presets\n".utf8)); return 1
        }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-bench-\(getpid())")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        var results: [String: JSONValue] = [:]
        // `--only NAME` measures one figure (for profiling).
        let only = args.firstIndex(of: "--only").flatMap { $0 + 1 < args.count ? args[$0 + 1] : nil }
        func measure(_ name: String, _ body: () throws -> JSONValue) rethrows {
            if let only, !name.hasPrefix(only) { return }
            let t = SystemClock().monotonicSeconds()
            results[name] = try body()
            FileHandle.standardError.write(Data(String(format: "kiln-bench: %@ took %.1f s\n", name, SystemClock().monotonicSeconds() - t).utf8))
        }
        do {
            try measure("store_cycles_full") { try storeCycles(root, presets: presets, durability: .full, count: quick ? 100 : 400) }
            try measure("store_cycles_process_crash") { try storeCycles(root, presets: presets, durability: .processCrash, count: quick ? 500 : 3000) }
            try measure("store_cycles_concurrent_full") { try concurrentCycles(root, presets: presets, count: quick ? 400 : 2000) }
            try measure("dedupe_storm") { try dedupeStorm(root, presets: presets) }
            try measure("queue_to_start") { try queueToStart(root, presets: presets, count: quick ? 20 : 60) }
            try measure("http") { try http(root, presets: presets, quick: quick) }
        } catch {
            FileHandle.standardError.write(Data("kiln-bench: \(error)\n".utf8)); return 1
        }
        print(JSON.string(JSONValue.object(results)))
        return 0
    }

    // MARK: Fakes

    /// A source every request can name: a real little file (the farm fingerprints it).
    static func source(_ dir: URL, _ n: Int) throws -> String {
        let path = dir.appendingPathComponent("source-\(n).mkv").path
        if !FileManager.default.fileExists(atPath: path) {
            try Data("kiln bench source \(n) \(String(repeating: "x", count: 4096))".utf8).write(to: URL(fileURLWithPath: path))
        }
        return path
    }

    static let info = MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 600, bitRate: 8_000_000,
        sizeBytes: 600_000_000, streams: [
            StreamInfo(index: 0, type: .video, codec: "h264", profile: "High", level: 41, bitRate: 7_500_000,
                       disposition: Disposition(isDefault: true), width: 1920, height: 1080, pixelFormat: "yuv420p", bitDepth: 8,
                       chroma: 420, sampleAspectRatio: .one, frameRate: 24, variableFrameRate: false, fieldOrder: .progressive,
                       rotation: 0, hdr: .sdr),
            StreamInfo(index: 1, type: .audio, codec: "ac3", bitRate: 448_000, language: "eng",
                       disposition: Disposition(isDefault: true), channels: 6, channelLayout: "5.1(side)", sampleRate: 48000),
        ])

    struct FakeProber: SourceProber {
        func probe(path: String) throws(KilnError) -> MediaInfo { FarmBench.info }
    }

    final class FakeHandle: JobHandle, @unchecked Sendable {
        let outcome: JobOutcome
        init(_ o: JobOutcome) { outcome = o }
        var pid: Int32? { nil }
        func wait(timeout: Double) -> JobOutcome? { outcome }
        func terminate(killAfter: Double) {}
    }

    /// Writes a tiny file and succeeds at once; records when each job was launched.
    final class FakeLauncher: JobLauncher, @unchecked Sendable {
        let lock = NSLock()
        var launched: [String: Double] = [:]
        func launch(_ spec: JobSpec, onProgress: @escaping @Sendable (JobProgress) -> Void) throws(KilnError) -> any JobHandle {
            let now = SystemClock().monotonicSeconds()
            lock.lock(); launched[spec.artifactID] = now; lock.unlock()
            let bytes = Array("fake artifact \(spec.artifactID)".utf8)
            _ = FileManager.default.createFile(atPath: spec.outputPath, contents: Data(bytes))
            let report = ChildReport(ok: true, output: .init(path: spec.outputPath, bytes: Int64(bytes.count), sha256: SHA256.hex(bytes)))
            return FakeHandle(JobOutcome(termination: .exited(0), report: report, logTail: []))
        }
    }

    static func farm(_ dir: URL, presets: Presets, launcher: FakeLauncher, durability: SQLiteStore.Durability = .full) throws -> Farm {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var config = FarmConfig()
        config.dataDir = dir.path
        config.minFreeBytes = 0
        config.maxTranscodes = 4
        config.maxRemuxes = 4
        let store = try SQLiteStore(path: dir.appendingPathComponent("kiln.db").path, durability: durability)
        return Farm(config: config, store: store, presets: presets, launcher: launcher, prober: FakeProber(),
                    log: QuietLog())
    }

    struct QuietLog: FarmLog { func write(_ line: String) {} }

    static let caps = DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p1080, hdr: false)

    // MARK: Figures

    static func stats(_ xs: [Double]) -> JSONValue {
        let s = xs.sorted()
        func q(_ p: Double) -> Double { s.isEmpty ? 0 : s[min(s.count - 1, Int(Double(s.count - 1) * p))] }
        return .object(["count": .number(Double(s.count)), "p50_ms": .number(q(0.5) * 1000), "p99_ms": .number(q(0.99) * 1000),
                        "max_ms": .number((s.last ?? 0) * 1000)])
    }

    /// bind → claim → complete on the store alone, as fast as it goes.
    static func storeCycles(_ root: URL, presets: Presets, durability: SQLiteStore.Durability, count: Int) throws -> JSONValue {
        let dir = root.appendingPathComponent("cycles-\(durability)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: dir.appendingPathComponent("kiln.db").path, durability: durability)
        let base = try Planner.plan(source: info, quality: .mbps5, caps: caps, policy: .standard, audioLanguage: nil, presets: presets)
        let clock = SystemClock()
        let start = clock.monotonicSeconds()
        for i in 0..<count {
            var plan = base
            plan.artifactKey = SHA256.hex("cycle-\(i)")
            let src = SourceRecord(path: "/media/\(i).mkv", fingerprint: "fp-\(i)", durationSeconds: 600, sizeBytes: 1)
            let now = clock.nowMillis()
            _ = try store.bind(request: PrepareRequest(reference: "ref-\(i)", sourcePath: src.path, quality: .mbps5, caps: caps),
                               plan: plan, source: src, estimatedBytes: 1, maxAttempts: 4, originalFile: nil, now: now)
            let claimed = try store.claim(kind: .transcode, limit: 1, owner: "bench", leaseUntil: now + 60_000, now: now)
            for c in claimed {
                _ = try store.complete(jobID: c.job.id, owner: "bench",
                                       file: FileRecord(path: "/tmp/\(i)", bytes: 1, sha256: nil, owned: true), now: now)
            }
        }
        let elapsed = clock.monotonicSeconds() - start
        return .object(["cycles": .number(Double(count)), "per_second": .number(Double(count) / elapsed), "goal_per_second": .number(2000)])
    }

    /// The same cycles from 8 threads at once, as a farm sees them (requests, scheduler and
    /// runners in parallel), at synchronous=FULL: writers that meet share a commit.
    static func concurrentCycles(_ root: URL, presets: Presets, count: Int) throws -> JSONValue {
        let dir = root.appendingPathComponent("cycles-concurrent")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let store = try SQLiteStore(path: dir.appendingPathComponent("kiln.db").path, durability: .full)
        let base = try Planner.plan(source: info, quality: .mbps5, caps: caps, policy: .standard, audioLanguage: nil, presets: presets)
        let threads = 8
        let completed = LockedArray()
        let clock = SystemClock()
        let start = clock.monotonicSeconds()
        Concurrently.run(threads) { t in
            for i in stride(from: t, to: count, by: threads) {
                var plan = base
                plan.artifactKey = SHA256.hex("concurrent-\(i)")
                let src = SourceRecord(path: "/media/c\(i).mkv", fingerprint: "fc-\(i)", durationSeconds: 600, sizeBytes: 1)
                let now = clock.nowMillis()
                do {
                    _ = try store.bind(request: PrepareRequest(reference: "c-\(i)", sourcePath: src.path, quality: .mbps5, caps: caps),
                                       plan: plan, source: src, estimatedBytes: 1, maxAttempts: 4, originalFile: nil, now: now)
                    for c in try store.claim(kind: .transcode, limit: 1, owner: "bench-\(t)", leaseUntil: now + 60_000, now: now) {
                        if try store.complete(jobID: c.job.id, owner: "bench-\(t)",
                                              file: FileRecord(path: "/tmp/c\(i)", bytes: 1, sha256: nil, owned: true), now: now) {
                            completed.append(1)
                        }
                    }
                } catch {}
            }
        }
        let elapsed = clock.monotonicSeconds() - start
        let done = completed.values.count
        return .object(["cycles": .number(Double(done)), "threads": .number(Double(threads)),
                        "per_second": .number(Double(done) / elapsed), "goal_per_second": .number(2000)])
    }

    /// 200 identical requests at once (200 references, one source and target): one job.
    static func dedupeStorm(_ root: URL, presets: Presets) throws -> JSONValue {
        let launcher = FakeLauncher()
        let farm = try farm(root.appendingPathComponent("storm"), presets: presets, launcher: launcher)
        let path = try source(root, 0)
        let latencies = LockedArray()
        Concurrently.run(200) { i in
            let t = SystemClock().monotonicSeconds()
            _ = try? farm.prepare(PrepareRequest(reference: "storm-\(i)", sourcePath: path, quality: .mbps5, caps: caps))
            latencies.append(SystemClock().monotonicSeconds() - t)
        }
        let snap = try farm.store.queueSnapshot(recentFailures: 0, queuedLimit: 0)
        var out = stats(latencies.values)
        if case .object(var o) = out {
            o["jobs"] = .number(Double(snap.jobsByState.values.reduce(0, +)))
            o["goal_p99_ms"] = .number(50)
            out = .object(o)
        }
        return out
    }

    /// Time from `prepare` to the child's launch, with free slots (wake on insert).
    static func queueToStart(_ root: URL, presets: Presets, count: Int) throws -> JSONValue {
        let launcher = FakeLauncher()
        let farm = try farm(root.appendingPathComponent("q2s"), presets: presets, launcher: launcher)
        _ = try farm.start()
        defer { farm.shutdown(grace: 1) }
        var latencies: [Double] = []
        for i in 0..<count {
            let path = try source(root, 1000 + i)
            let t = SystemClock().monotonicSeconds()
            let b = try farm.prepare(PrepareRequest(reference: "q-\(i)", sourcePath: path, quality: .mbps5, caps: caps))
            let deadline = t + 5
            while SystemClock().monotonicSeconds() < deadline {
                launcher.lock.lock(); let at = launcher.launched[b.artifact.id]; launcher.lock.unlock()
                if let at { latencies.append(at - t); break }
                usleep(200)
            }
        }
        var out = stats(latencies)
        if case .object(var o) = out { o["goal_median_ms"] = .number(100); out = .object(o) }
        return out
    }

    static func http(_ root: URL, presets: Presets, quick: Bool) throws -> JSONValue {
        let launcher = FakeLauncher()
        let dir = root.appendingPathComponent("http")
        let farm = try farm(dir, presets: presets, launcher: launcher, durability: .processCrash)
        // 10,000 queued jobs in the table (the farm is not started, so they stay queued).
        let base = try Planner.plan(source: info, quality: .mbps5, caps: caps, policy: .standard, audioLanguage: nil, presets: presets)
        let now = SystemClock().nowMillis()
        for i in 0..<10_000 {
            var plan = base
            plan.artifactKey = SHA256.hex("queued-\(i)")
            let src = SourceRecord(path: "/media/q\(i).mkv", fingerprint: "fq-\(i)", durationSeconds: 600, sizeBytes: 1)
            _ = try farm.store.bind(request: PrepareRequest(reference: "queued-\(i)", sourcePath: src.path, quality: .mbps5, caps: caps,
                                                           priority: i % 3 == 0 ? .interactive : .background),
                                    plan: plan, source: src, estimatedBytes: 1, maxAttempts: 4, originalFile: nil, now: now)
        }
        var config = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
        config.threads = 8
        config.errorResponse = API.errorResponse
        let server = HTTPServer(configuration: config)
        API(farm: farm, mediaRoots: [root.path], token: nil, metrics: Metrics()).register(on: server)
        try server.start()
        defer { server.stop() }
        let port = server.port

        var queue: [Double] = []
        for _ in 0..<(quick ? 50 : 300) {
            let t = SystemClock().monotonicSeconds()
            _ = try Client.request(port: port, "GET /v1/queue HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            queue.append(SystemClock().monotonicSeconds() - t)
        }

        // An existing artifact: the first prepare makes it, the rest find it.
        let path = try source(root, 7)
        let body = #"{"reference":"existing","source":{"path":"\#(path)"},"quality":"5mbps","caps":{"codecs_video":["h264"],"codecs_audio":["aac"],"containers":["mp4"]}}"#
        let request = "POST /v1/prepare HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        _ = try Client(port: port).keepAlive(request)
        let total = quick ? 400 : 2000, threads = 8
        let t0 = SystemClock().monotonicSeconds()
        Concurrently.run(threads) { _ in
            guard let c = try? Client(port: port) else { return }
            for _ in 0..<(total / threads) { _ = try? c.keepAlive(request) }
        }
        let rps = Double(total) / (SystemClock().monotonicSeconds() - t0)

        // 200 event-stream clients; one event; how long until each has it.
        let clients = (0..<200).compactMap { _ in try? Client(port: port) }
        for c in clients { try c.send("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); _ = c.readUntil(": kiln events") }
        let arrivals = LockedArray()
        let group = DispatchGroup()
        let sent = LockedArray()
        for c in clients {
            group.enter()
            Thread {
                if c.readUntil("event: artifact.canceled") { arrivals.append(SystemClock().monotonicSeconds()) }
                group.leave()
            }.start()
        }
        Thread.sleep(forTimeInterval: 0.3)
        sent.append(SystemClock().monotonicSeconds())
        _ = try farm.release(reference: "queued-1")   // cancels a queued job: one persisted event
        _ = group.wait(timeout: .now() + 30)
        let delivery = arrivals.values.map { $0 - (sent.values.first ?? 0) }
        var sse = stats(delivery)
        if case .object(var o) = sse { o["clients"] = .number(Double(clients.count)); sse = .object(o) }
        return .object(["queue_with_10000_jobs": stats(queue), "prepare_existing_per_second": .number(rps), "sse_200_clients": sse])
    }
}

final class LockedArray: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Double] = []
    func append(_ x: Double) { lock.lock(); items.append(x); lock.unlock() }
    var values: [Double] { lock.lock(); defer { lock.unlock() }; return items }
}

/// A tiny blocking HTTP client for the benchmark (one socket, keep-alive).
final class Client: @unchecked Sendable {
    let fd: Int32
    var buffer: [UInt8] = []

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { close(fd); throw KilnError(.ioError, stage: .request, "connect failed") }
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
    deinit { close(fd) }

    func send(_ s: String) throws {
        let bytes = Array(s.utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw KilnError(.ioError, stage: .request, "send failed") }
            off += n
        }
    }

    func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    /// Reads until `marker` has arrived; false if the stream ended first.
    func readUntil(_ marker: String) -> Bool {
        let m = Array(marker.utf8)
        while true {
            if let r = buffer.firstRange(of: m) { buffer.removeSubrange(..<r.upperBound); return true }
            guard fill() else { return false }
        }
    }

    /// One request on this connection; reads its Content-Length response whole and
    /// returns the status code.
    func keepAlive(_ request: String) throws -> Int {
        try send(request)
        let end = Array("\r\n\r\n".utf8)
        var headEnd: Range<Int>?
        while true {
            headEnd = buffer.firstRange(of: end)
            if headEnd != nil { break }
            guard fill() else { throw KilnError(.ioError, stage: .request, "no response") }
        }
        let head = String(decoding: buffer[..<headEnd!.lowerBound], as: UTF8.self)
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        while buffer.count < headEnd!.upperBound + length { guard fill() else { break } }
        buffer.removeSubrange(..<min(buffer.count, headEnd!.upperBound + length))
        return status
    }

    static func request(port: UInt16, _ request: String) throws -> Int {
        let c = try Client(port: port)
        try c.send(request)
        while c.fill() {}
        return c.buffer.count
    }
}
