import Foundation
import KilnCore
import KilnTestSupport
import Planner
import Store
@testable import Farm

/// A clock the test moves: wall time starts at a fixed instant and only moves on
/// `advance`; monotonic time is real (runner timers), unless `advanceMonotonic` is used.
final class TestClock: KilnCore.Clock, @unchecked Sendable {
    private let lock = NSLock()
    private var wall: Int64 = 1_800_000_000_000
    private var monoOffset = 0.0

    func nowMillis() -> Int64 { lock.lock(); defer { lock.unlock() }; return wall }
    func monotonicSeconds() -> Double {
        lock.lock(); defer { lock.unlock() }
        return SystemClock().monotonicSeconds() + monoOffset
    }
    func advance(seconds: Double) { lock.lock(); wall += Int64(seconds * 1000); lock.unlock() }
    func advanceMonotonic(seconds: Double) { lock.lock(); monoOffset += seconds; lock.unlock() }
}

/// Free space the test sets.
final class TestSpace: DiskSpace, @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: Int64? = 1 << 50
    var free: Int64? {
        get { lock.lock(); defer { lock.unlock() }; return bytes }
        set { lock.lock(); bytes = newValue; lock.unlock() }
    }
    private var size: Int64? = nil
    /// What the file system could hold were it empty (nil: unknown, as before).
    var capacity: Int64? {
        get { lock.lock(); defer { lock.unlock() }; return size }
        set { lock.lock(); size = newValue; lock.unlock() }
    }
    private var disk: (folder: String, bytes: Int64)?
    /// A file system of `bytes` holding only `folder`'s files: its free space is what they
    /// leave, so deleting one frees its size (`free` is then ignored).
    func holding(_ folder: String, bytes: Int64) { lock.lock(); disk = (folder, bytes); lock.unlock() }
    private var mounts: [String: Int64] = [:]
    /// A file system of its own at `folder`, with `bytes` free (`free` and `holding` are for
    /// every other path).
    func mount(_ folder: String, free bytes: Int64) { lock.lock(); mounts[folder] = bytes; lock.unlock() }
    func freeBytes(at path: String) -> Int64? {
        lock.lock()
        let disk = self.disk
        let mounted = mounts[path]
        lock.unlock()
        if let mounted { return mounted }
        guard let disk else { return free }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: disk.folder)) ?? []
        let used = names.reduce(Int64(0)) { sum, name in
            sum + ((try? FileManager.default.attributesOfItem(atPath: disk.folder + "/" + name)[.size] as? Int64) ?? 0)
        }
        return disk.bytes - used
    }
    func capacityBytes(at path: String) -> Int64? { capacity }
}

final class CollectingLog: FarmLog, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { lock.lock(); defer { lock.unlock() }; return stored }
    func write(_ line: String) { lock.lock(); stored.append(line); lock.unlock() }
}

/// A door a fake child waits behind until the test opens it.
final class Gate: @unchecked Sendable {
    private let cond = NSCondition()
    private var open = false
    func release() { cond.lock(); open = true; cond.broadcast(); cond.unlock() }
    /// True when opened; false when `stop` said to give up.
    func wait(orUntil stopped: () -> Bool) -> Bool {
        cond.lock(); defer { cond.unlock() }
        while !open {
            if stopped() { return false }
            _ = cond.wait(until: Date(timeIntervalSinceNow: 0.02))
        }
        return true
    }
}

/// What a fake attempt does.
indirect enum FakeScript: Sendable {
    /// Writes `bytes` bytes as the artifact, reports progress, exits 0.
    case succeed(bytes: Int)
    /// Exits with `status`, printing an error with `code` (like the real child).
    case exit(Int32, code: String)
    /// Dies by `signal`, leaving its temporary file behind (as a SIGKILLed child would).
    case crash(signal: Int32)
    /// Runs until stopped; honours SIGTERM by exiting 5, leaving nothing.
    case hang
    /// Runs until stopped, and once stopped takes until the gate opens to exit (a child
    /// finishing its write before it answers SIGTERM).
    case stopsLate(Gate)
    /// Waits for the gate (or a stop), then does `then`.
    case gated(Gate, then: FakeScript)
    /// Succeeds as `succeed` does, reporting that the copied picture had to be re-encoded.
    case succeedReencodingVideo(bytes: Int)
    /// Succeeds, reporting that the copied sound had to be re-encoded (AAC at 160 kbit/s).
    case succeedReencodingAudio(bytes: Int)
}

/// A launcher with scripted attempts, no media: each launch takes the next script (or
/// succeeds when none is left) and runs it on a thread of its own.
final class FakeLauncher: JobLauncher, @unchecked Sendable {
    private let lock = NSLock()
    private var scripts: [FakeScript]
    private var launchedSpecs: [JobSpec] = []
    private var handles: [FakeHandle] = []

    init(_ scripts: [FakeScript] = []) { self.scripts = scripts }

    func add(_ script: FakeScript) { lock.lock(); scripts.append(script); lock.unlock() }
    var launches: [JobSpec] { lock.lock(); defer { lock.unlock() }; return launchedSpecs }
    var allHandles: [FakeHandle] { lock.lock(); defer { lock.unlock() }; return handles }

    func launch(_ spec: JobSpec, onProgress: @escaping @Sendable (JobProgress) -> Void) throws(KilnError) -> any JobHandle {
        lock.lock()
        let script = scripts.isEmpty ? .succeed(bytes: 1000) : scripts.removeFirst()
        launchedSpecs.append(spec)
        let handle = FakeHandle()
        handles.append(handle)
        lock.unlock()
        Thread.detachNewThread { handle.perform(script, spec: spec, onProgress: onProgress) }
        return handle
    }
}

final class FakeHandle: JobHandle, @unchecked Sendable {
    private let cond = NSCondition()
    private var outcome: JobOutcome?
    private var terminatedFlag = false
    var pid: Int32? { nil }

    var wasTerminated: Bool { cond.lock(); defer { cond.unlock() }; return terminatedFlag }

    func wait(timeout: Double) -> JobOutcome? {
        cond.lock(); defer { cond.unlock() }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while outcome == nil { if !cond.wait(until: deadline) { break } }
        return outcome
    }

    func terminate(killAfter: Double) { cond.lock(); terminatedFlag = true; cond.broadcast(); cond.unlock() }

    private func end(_ o: JobOutcome) { cond.lock(); if outcome == nil { outcome = o }; cond.broadcast(); cond.unlock() }

    private func canceled() -> JobOutcome {
        JobOutcome(termination: .exited(5), report: ChildReport(ok: false, error: .init(code: "canceled", stage: "encode",
                   message: "canceled by SIGTERM; nothing was written", retryable: false)), logTail: ["stopping"])
    }

    /// Writes `bytes` bytes as the artifact and exits as the real child does, reporting
    /// where the engine departed from the plan (`adjustment`, `executed`), if it did.
    private func succeed(_ bytes: Int, _ spec: JobSpec, adjustment: String? = nil, executed: Plan? = nil) {
        let ok = FileManager.default.createFile(atPath: spec.outputPath, contents: Data(repeating: 7, count: bytes))
        end(JobOutcome(termination: .exited(ok ? 0 : 4),
                       report: ChildReport(ok: ok, output: .init(path: spec.outputPath, bytes: Int64(bytes), sha256: "fake"),
                                           stats: adjustment.map { .init(adjustments: [$0]) }, executedPlan: executed),
                       logTail: []))
    }

    func perform(_ script: FakeScript, spec: JobSpec, onProgress: @Sendable (JobProgress) -> Void) {
        switch script {
        case .succeed(let bytes):
            onProgress(JobProgress(encodedSeconds: 5, durationSeconds: 10, speed: 2))
            succeed(bytes, spec)
        case .succeedReencodingVideo(let bytes):
            succeed(bytes, spec, adjustment: "video_reencoded: the source's picture changes size")
        case .succeedReencodingAudio(let bytes):
            var executed = spec.plan
            if let copied = executed.audio {
                executed.audio = AudioPlan(sourceIndex: copied.sourceIndex, action: .transcode, codec: "aac", channels: 2,
                                           bitrateKbps: 160, language: copied.language)
            }
            succeed(bytes, spec, adjustment: "audio_reencoded: the MP4 muxer refuses a packet", executed: executed)
        case .exit(let status, let code):
            end(JobOutcome(termination: .exited(status),
                           report: ChildReport(ok: false, error: .init(code: code, stage: "decode", message: "scripted \(code)",
                                                                        retryable: status == 4)),
                           logTail: ["log line before \(code)"]))
        case .crash(let signal):
            let dir = (spec.outputPath as NSString).deletingLastPathComponent
            let name = (spec.outputPath as NSString).lastPathComponent
            FileManager.default.createFile(atPath: "\(dir)/.\(name).kiln-tmp-4242-1", contents: Data(count: 10))
            end(JobOutcome(termination: .signaled(signal), report: nil, logTail: ["half a line"]))
        case .hang:
            cond.lock()
            while !terminatedFlag { cond.wait() }
            cond.unlock()
            end(canceled())
        case .stopsLate(let gate):
            cond.lock()
            while !terminatedFlag { cond.wait() }
            cond.unlock()
            _ = gate.wait(orUntil: { false })
            end(canceled())
        case .gated(let gate, let then):
            if gate.wait(orUntil: { wasTerminated }) { perform(then, spec: spec, onProgress: onProgress) } else { end(canceled()) }
        }
    }
}

/// A prober that describes every file as a 10-second 1080p H.264 + AAC Matroska file.
final class FakeProber: SourceProber, @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var probes: Int { lock.lock(); defer { lock.unlock() }; return count }

    func probe(path: String) throws(KilnError) -> MediaInfo {
        lock.lock(); count += 1; lock.unlock()
        return MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 10, bitRate: 8_200_000,
                         sizeBytes: 10_250_000, streams: [
                            StreamInfo(index: 0, type: .video, codec: "h264", profile: "High", level: 40, bitRate: 8_000_000,
                                       width: 1920, height: 1080, pixelFormat: "yuv420p", bitDepth: 8, chroma: 420,
                                       frameRate: 24, hdr: .sdr),
                            StreamInfo(index: 1, type: .audio, codec: "aac", profile: "LC", bitRate: 192_000, language: "eng",
                                       channels: 2, channelLayout: "stereo", sampleRate: 48000),
                         ])
    }
}

enum TestPresets {
    static let shared: Presets = {
        do { return try Presets.load(directory: Media.repoRoot.appendingPathComponent("Presets").path) } catch {
            fatalError("presets: \(error)")
        }
    }()
}

/// One farm on a fresh data directory and SQLite file, with fakes around it.
final class Harness: @unchecked Sendable {
    let dir: URL
    let clock = TestClock()
    let space = TestSpace()
    let log = CollectingLog()
    let launcher: any JobLauncher
    let prober: any SourceProber
    var config: FarmConfig
    let store: SQLiteStore
    private(set) var farm: Farm
    /// Farms a restart replaced: a daemon that stopped without a word still has threads
    /// that would write into the folder after the test removed it.
    private var replaced: [Farm] = []
    private var sourceCount = 0

    init(_ label: String, launcher: any JobLauncher = FakeLauncher(), prober: any SourceProber = FakeProber(),
         configure: (inout FarmConfig) -> Void = { _ in }) throws {
        dir = Media.scratch("farm-\(label)")
        var c = FarmConfig()
        c.dataDir = dir.appendingPathComponent("var").path
        c.maxTranscodes = 1
        c.maxRemuxes = 2
        c.minFreeBytes = 1 << 20
        c.idleClaimSeconds = 0.5
        c.killGraceSeconds = 2
        c.shutdownGraceSeconds = 1
        configure(&c)
        config = c
        self.launcher = launcher
        self.prober = prober
        try FileManager.default.createDirectory(atPath: c.dataDir, withIntermediateDirectories: true)
        store = try SQLiteStore(path: c.dataDir + "/kiln.db")
        farm = Farm(config: c, store: store, clock: clock, presets: TestPresets.shared, policy: .standard,
                    launcher: launcher, prober: prober, space: space, log: log)
    }

    var fake: FakeLauncher { launcher as! FakeLauncher }

    /// A new farm on the same data directory and database, as after a restart.
    func restart() {
        replaced.append(farm)
        farm = Farm(config: config, store: store, clock: clock, presets: TestPresets.shared, policy: .standard,
                    launcher: launcher, prober: prober, space: space, log: log)
    }

    /// A small file with content of its own (so its own fingerprint).
    func source(_ name: String? = nil) throws -> String {
        sourceCount += 1
        let path = dir.appendingPathComponent(name ?? "source-\(sourceCount).mkv").path
        try Data("fake media \(sourceCount) \(UUID())".utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    func request(_ reference: String, _ source: String, _ quality: Quality = .mbps1, caps: DeviceCaps? = nil,
                 priority: Priority = .interactive) -> PrepareRequest {
        PrepareRequest(reference: reference, sourcePath: source, quality: quality, caps: caps, priority: priority)
    }

    func artifact(_ id: String) throws -> ArtifactRecord? { try store.artifact(id: id) }

    func tempFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: config.artifactsDir)) ?? []).filter { $0.contains(".kiln-tmp-") }
    }

    func cleanUp() {
        for f in replaced + [farm] { f.shutdown(grace: 0) }
        try? FileManager.default.removeItem(at: dir)
    }
}

/// Polls `condition` until it holds or `timeout` seconds pass (generous: these are not timing tests).
func eventually(timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date(timeIntervalSinceNow: timeout)
    while Date() < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}
