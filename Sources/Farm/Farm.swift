import Foundation
import KilnCore
import Planner
import Store

/// What start-up recovery found and did.
public struct RecoveryReport: Sendable, Equatable {
    /// Deletions a crash interrupted, now finished.
    public var finishedDeletions: [String] = []
    /// Temporary files of attempts a crash interrupted, and outputs one moved into place
    /// but never recorded, removed.
    public var removedTemporaries: [String] = []
    /// Jobs whose lease had expired, put back in line (or failed on their last attempt).
    public var rescuedJobs: Int = 0
    /// Ready artifacts whose file was gone or not its recorded size, queued again.
    public var requeuedLost: [String] = []
    public init() {}
}

/// The durable service around `prep-artifact`: intake (probe → plan → bind), a scheduler
/// with separate slots per job kind, a runner thread per attempt, retries, lease rescue,
/// garbage collection and event fan-out. All blocking work (SQLite, children, files) runs
/// on threads the farm owns, never on Swift's cooperative pool.
///
/// Lifecycle: `init` → `start()` (recovery, then the scheduler and maintenance threads)
/// → `shutdown(grace:)` (stop claiming, let running jobs finish within the grace period,
/// then stop them and queue them again with their attempt given back).
///
/// Sendable by its lock: the mutable fields below `state` are guarded by it; it is also
/// the condition the scheduler and maintenance threads sleep on.
public final class Farm: @unchecked Sendable {
    public let config: FarmConfig
    public let store: any ArtifactStore
    public let events: EventHub
    let clock: any KilnCore.Clock
    let presets: Presets
    let policy: ServerPolicy
    let launcher: any JobLauncher
    let prober: any SourceProber
    /// Fingerprints by file identity: a repeat request does not read the source again.
    private let fingerprints = SourceFingerprintCache()
    private let plans = PlanCache()
    let space: any DiskSpace
    /// The daemon's log, also the API's for what only an operator can act on.
    public let log: any FarmLog
    let folder: ArtifactFolder
    /// Taken while a finished file moves into place and while the collector deletes one.
    let fileLock = NSLock()
    /// Names this process in lease owners: `<host>:<pid>:<random>`.
    public let farmID: String
    private let collector: GarbageCollector

    private let state = NSCondition()
    private var started = false
    /// Set by `start(soleFarm:)`; read by collection passes.
    private var soleFarm = false
    private var stopping = false
    private var threadsRunning = 0
    private var wakeRequested = false
    private var gcRequested = false
    /// The runs going on, each its own: a job asked for again as its canceled run stops
    /// starts again beside it (keyed by job, the old run's end had erased the new one's
    /// entry, which no cancel, release or shutdown then reached).
    private var runners: [ObjectIdentifier: JobRunner] = [:]
    private var busy: [JobKind: Int] = [:]
    private var claims = 0
    /// The earliest retry this farm scheduled (clock ms), so the scheduler wakes for it.
    private var nextRetryAt: Int64?
    /// Jobs waiting for disk space, by job id: not claimed again before `until` (clock ms),
    /// while the jobs behind them that fit go ahead (one that could not fit, or whose
    /// source was gone, had held every job of its kind for as long as it waited). `needed`
    /// is what it needs free beyond `minFreeBytes` (its estimate and what the running jobs
    /// have still to write): the collector evicts unheld artifacts for the largest.
    private var diskWaiting: [Int64: (kind: JobKind, until: Int64, needed: Int64)] = [:]
    private var nextRescueAt: Int64 = 0
    /// When the last rescue pass ran (clock ms): one much later than due tells a pause.
    private var lastRescueAt: Int64?
    private var nextCollectionAt: Int64 = 0

    public init(config: FarmConfig, store: any ArtifactStore, clock: any KilnCore.Clock = SystemClock(), presets: Presets,
                policy: ServerPolicy = .standard, launcher: any JobLauncher, prober: any SourceProber,
                space: any DiskSpace = FileSystemSpace(), log: any FarmLog = StandardErrorLog()) {
        self.config = config
        self.store = store
        self.clock = clock
        self.presets = presets
        self.policy = policy
        self.launcher = launcher
        self.prober = prober
        self.space = space
        self.log = log
        self.folder = ArtifactFolder(path: config.artifactsDir)
        self.events = EventHub(store: store)
        let host = ProcessInfo.processInfo.hostName
        self.farmID = "\(host):\(getpid()):\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        self.collector = GarbageCollector(store: store, config: config, folder: folder, space: space, log: log, fileLock: fileLock)
    }

    /// The farm with the real child: `prep-artifact` from the config for jobs and probes.
    public convenience init(config: FarmConfig, store: any ArtifactStore, presets: Presets, policy: ServerPolicy = .standard,
                            space: any DiskSpace = FileSystemSpace(), log: any FarmLog = StandardErrorLog()) {
        self.init(config: config, store: store, presets: presets, policy: policy,
                  launcher: ChildProcessLauncher(config: config),
                  prober: ChildProcessProber(executable: config.prepArtifactPath), space: space, log: log)
    }

    /// Ends a `shutdown`'s grace now (a second SIGTERM or Ctrl-C): running jobs are stopped
    /// and queued again at once, without spending their attempt.
    public func hurry() {
        state.lock()
        hurried = true
        state.broadcast()
        state.unlock()
    }
    private var hurried = false

    /// True from `shutdown` on: the daemon is draining (its running jobs finish, none starts).
    public var isStopping: Bool { state.lock(); defer { state.unlock() }; return stopping }

    /// Whether the data directory's file system has room for the store to write (a
    /// request's commit needs a few pages): below a megabyte every prepare fails.
    public var canWrite: Bool { (space.freeBytes(at: config.absoluteDataDir) ?? Int64.max) >= 1 << 20 }

    /// Whether jobs can put files in the artifacts folder: not where it has gone (a disk
    /// unmounted under it, a folder removed by hand), its file system was remounted
    /// read-only after an error, or its owner or mode changed. Every job would fail there,
    /// retried until its attempts ran out. (`access` asks the kernel without writing: the
    /// question is asked by every readiness probe.)
    /// Nil where they can; otherwise the error number that says why.
    public var artifactsUnwritable: Int32? { access(config.artifactsDir, W_OK | X_OK) == 0 ? nil : errno }

    // MARK: Lifecycle

    /// Start-up recovery, then the scheduler and the maintenance thread (rescuer, collector).
    /// `soleFarm`: no other farm uses the store (the daemon holds its data directory's
    /// lock), so a job still marked running was left by one that stopped, and is rescued at
    /// once rather than when its lease runs out, up to a minute later.
    @discardableResult
    public func start(soleFarm: Bool = false) throws(KilnError) -> RecoveryReport {
        state.lock()
        guard !started else { state.unlock(); return RecoveryReport() }
        started = true
        self.soleFarm = soleFarm
        state.unlock()

        try folder.create()
        // A floor the file system cannot leave free admits no output ever: every job would
        // fail for good as quality_unavailable while /readyz said ready.
        if let capacity = space.capacityBytes(at: config.artifactsDir), config.minFreeBytes >= capacity {
            state.lock(); started = false; state.unlock()
            throw KilnError(.usage, stage: .request, field: "KILN_MIN_FREE_BYTES",
                            "KILN_MIN_FREE_BYTES (\(Format.bytes(config.minFreeBytes))) is not below what the artifacts folder's file system holds "
                                + "(\(Format.bytes(capacity))): no output could ever be written")
        }
        var report = RecoveryReport()
        let now = clock.nowMillis()
        report.finishedDeletions = try collector.finishInterrupted(now: now)
        report.removedTemporaries = folder.removeStaleTemporaries()
        // Only where no other farm shares the store: another's attempt may be between its
        // rename and its row right now.
        if soleFarm { report.removedTemporaries += try collector.removeUnrecordedOutputs() }
        report.rescuedJobs = try soleFarm ? store.rescueInterruptedJobs(now: now) : store.rescueExpiredLeases(now: now)
        for held in try store.heldFiles(owned: true) where try requeueIfLost(held.artifactID, path: held.path, bytes: held.bytes, now: now) {
            report.requeuedLost.append(held.artifactID)
        }
        // Leases of a previous run that have not lapsed yet: rescue right after they do.
        let held = try store.queueSnapshot(recentFailures: 0, queuedLimit: 0).running.compactMap(\.leaseExpiresAt)
        if !report.finishedDeletions.isEmpty || report.rescuedJobs > 0 || !report.requeuedLost.isEmpty { events.notify() }
        for line in describe(report) { log.write(line) }

        state.lock()
        nextRescueAt = min(now + Int64(config.rescueIntervalSeconds * 1000), (held.max() ?? Int64.max - 1) + 1)
        nextCollectionAt = now
        threadsRunning = 2
        state.unlock()
        spawn("kiln-scheduler") { [self] in schedule() }
        spawn("kiln-maintenance") { [self] in maintain() }
        return report
    }

    private func describe(_ r: RecoveryReport) -> [String] {
        var lines: [String] = []
        if !r.finishedDeletions.isEmpty { lines.append("start-up: finished deleting \(r.finishedDeletions.joined(separator: ", "))") }
        if !r.removedTemporaries.isEmpty { lines.append("start-up: removed \(r.removedTemporaries.count) file(s) of interrupted attempts") }
        if r.rescuedJobs > 0 { lines.append("start-up: rescued \(r.rescuedJobs) job(s) a stopped daemon left running") }
        if !r.requeuedLost.isEmpty {
            lines.append("start-up: preparing again \(r.requeuedLost.count) artifact(s) whose file is gone or not its recorded size: "
                         + r.requeuedLost.joined(separator: ", "))
        }
        return lines
    }

    private func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let t = Thread(block: body)
        t.name = name
        t.start()
    }

    /// Graceful shutdown: no more claims; running jobs get `grace` seconds (default
    /// `shutdownGraceSeconds`) to finish, then their children are stopped (TERM, then
    /// KILL) and the jobs queued again without spending the attempt. Returns when every
    /// thread of the farm has ended.
    public func shutdown(grace: Double? = nil) {
        let graceSeconds = grace ?? config.shutdownGraceSeconds
        state.lock()
        stopping = true
        state.broadcast()
        let deadline = Date(timeIntervalSinceNow: graceSeconds)
        while !runners.isEmpty && !hurried && state.wait(until: deadline) {}
        let remaining = Array(runners.values)
        state.unlock()
        for r in remaining { r.stop(.shutdown) }
        state.lock()
        while !runners.isEmpty || threadsRunning > 0 {
            // A runner the scheduler started while we were deciding is stopped too.
            let late = runners.values.filter { r in !remaining.contains { $0 === r } }
            if !late.isEmpty { state.unlock(); for r in late { r.stop(.shutdown) }; state.lock() }
            _ = state.wait(until: Date(timeIntervalSinceNow: 0.2))
        }
        state.unlock()
        events.close()
    }

    // MARK: Requests

    /// Probe (cached by the source's fingerprint) → plan → bind, in one call; the job, if
    /// one was created or queued again, starts as soon as a slot is free.
    public func prepare(_ request: PrepareRequest) throws(KilnError) -> Binding {
        guard !request.reference.isEmpty else {
            throw KilnError(.usage, stage: .request, field: "reference", "reference must not be empty")
        }
        let path = request.sourcePath
        let fingerprint = try fingerprints.fingerprint(path: path)
        let info: MediaInfo
        if let cached = try store.cachedProbe(fingerprint: MediaInfo.cacheKey(fingerprint: fingerprint)) {
            info = cached
        } else {
            var probed = try prober.probe(path: path)
            probed.fingerprint = fingerprint
            try store.cacheProbe(probed, fingerprint: MediaInfo.cacheKey(fingerprint: fingerprint), now: clock.nowMillis())
            info = probed
        }
        var plan = try plans.plan(fingerprint: fingerprint, request: request) { () throws(KilnError) -> Plan in
            try Planner.plan(source: info, quality: request.quality, caps: request.caps, policy: policy,
                             audioLanguage: request.audioLanguage, presets: presets)
        }
        // A user who may not have files transcoded is refused a transcode; the plan itself is
        // the server's, the same for every caller of the artifact (a remux keeps its
        // fallback encode for a picture the copy cannot carry on, whoever asked first).
        if request.transcodeAllowed == false, plan.deliveryFormat == .transcode {
            throw KilnError(.transcodeDisabled, stage: .plan,
                            "the source needs a transcode (\(plan.reasons.joined(separator: ", "))) and this user may not have files transcoded")
        }
        if plan.deliveryFormat == .original {
            // An original is the file at this path, not any file with its content: two copies
            // of a film in a library are two artifacts (the first one's path was answered for
            // both, and its bytes served for the second once it changed or went).
            plan.artifactKey = Plan.originalKey(plan.artifactKey, path: path)
        }
        let size = Self.fileSize(path) ?? info.sizeBytes
        let source = SourceRecord(path: path, fingerprint: fingerprint, durationSeconds: info.durationSeconds, sizeBytes: size)
        let original = plan.deliveryFormat == .original
            ? FileRecord(path: path, bytes: size, sha256: nil, owned: false) : nil
        var binding = try store.bind(request: request, plan: plan, source: source,
                                     estimatedBytes: Self.estimatedBytes(plan: plan, source: info),
                                     maxAttempts: config.maxAttempts, originalFile: original, now: clock.nowMillis())
        let checked = try checkingFile(binding.artifact)
        if checked.state != binding.artifact.state {
            binding.artifact = checked
            binding.enqueued = true
        }
        if binding.enqueued { wake() }
        if let previous = binding.movedFrom {
            events.notify()
            stopRunnersIfCanceled(artifactID: previous)
        }
        return binding
    }

    /// A running job's progress as its child last reported it, where this farm runs it:
    /// the store has it as of the last heartbeat (every 5 s), so a poller saw none for a
    /// job's first 5 s (most remuxes' whole run) and answers that disagreed by seconds.
    private func liveProgress(jobID: Int64) -> JobProgress? {
        state.lock()
        let runner = runners.values.first { $0.jobID == jobID }
        state.unlock()
        return runner?.progress
    }

    /// The job with its live progress (`liveProgress`) where it runs here.
    public func withLiveProgress(_ job: JobRecord) -> JobRecord {
        guard job.state == .running, let p = liveProgress(jobID: job.id) else { return job }
        var job = job
        job.progress = p
        return job
    }

    /// The record with its running job's live progress.
    public func withLiveProgress(_ a: ArtifactRecord) -> ArtifactRecord {
        var a = a
        a.job = a.job.map(withLiveProgress)
        return a
    }

    /// `a` as it stands once its file is checked: a ready artifact whose file Kiln made is
    /// gone or no longer its recorded size (deleted by hand, truncated, a disk restored from
    /// an older backup) is queued again, and answered as pending, not as a ready link to a
    /// 404 that nothing would ever mend. A `stat`, cheap enough for every answer.
    public func checkingFile(_ a: ArtifactRecord) throws(KilnError) -> ArtifactRecord {
        guard a.state == .ready, let f = a.file, f.owned, a.unreferencedSince == nil,
              try requeueIfLost(a.id, path: f.path, bytes: f.bytes, now: clock.nowMillis()) else { return a }
        log.write("artifact \(a.id): its file \(f.path) is gone or not the \(f.bytes) bytes it was; preparing it again")
        events.notify()
        wake()
        return try store.artifact(id: a.id) ?? a
    }

    /// Queues the artifact again if its file at `path` is gone or not `bytes` long (and it
    /// is still ready there and held); whether it did.
    private func requeueIfLost(_ artifactID: String, path: String, bytes: Int64, now: Int64) throws(KilnError) -> Bool {
        guard Self.fileSize(path) != bytes else { return false }
        return try store.requeueLost(artifactID: artifactID, path: path, maxAttempts: config.maxAttempts, now: now)
    }

    /// Where a job whose source path is gone can read the same content: another path a
    /// reference to its artifact asked with, holding a file of the same fingerprint (two
    /// copies of a film in a library, the one asked for last deleted). nil where none does.
    /// The artifact then reads it from there on.
    func sameContent(as claimed: ClaimedJob) -> String? {
        guard !FileManager.default.fileExists(atPath: claimed.source.path),
              let paths = try? store.requestedSourcePaths(artifactID: claimed.job.artifactID) else { return nil }
        for path in paths where path != claimed.source.path && FileManager.default.fileExists(atPath: path) {
            guard (try? fingerprints.fingerprint(path: path)) == claimed.source.fingerprint else { continue }
            try? store.setSourcePath(artifactID: claimed.job.artifactID, path: path)
            log.write("artifact \(claimed.job.artifactID): \(claimed.source.path) is gone; reading the same content from \(path)")
            return path
        }
        return nil
    }

    /// Drops a reference; if it was the last, an unfinished job is canceled (and its child stopped).
    @discardableResult
    public func release(reference: String) throws(KilnError) -> Bool {
        let held = try store.reference(reference)
        guard try store.release(reference: reference, now: clock.nowMillis()) else { return false }
        events.notify()
        if let held { stopRunnersIfCanceled(artifactID: held.artifactID) }
        return true
    }

    /// Operator cancel: the job and artifact become canceled; a running child is stopped.
    @discardableResult
    public func cancel(artifactID: String) throws(KilnError) -> Bool {
        guard try store.cancel(artifactID: artifactID, now: clock.nowMillis()) else { return false }
        events.notify()
        stopRunners(artifactID: artifactID, .canceled)
        return true
    }

    /// Operator retry: a failed or canceled artifact is queued again with fresh attempts.
    @discardableResult
    public func retry(artifactID: String) throws(KilnError) -> Bool {
        guard try store.retry(artifactID: artifactID, maxAttempts: config.maxAttempts, now: clock.nowMillis()) else { return false }
        wake()
        return true
    }

    /// Asks the scheduler to claim now (after an insert, a finished job, or a clock change).
    public func wake() {
        state.lock(); wakeRequested = true; state.broadcast(); state.unlock()
    }

    /// Rescues expired leases now (the maintenance thread also does, periodically).
    @discardableResult
    public func rescueExpiredLeases() throws(KilnError) -> Int {
        let now = clock.nowMillis()
        // A rescue due long ago means this process did not run meanwhile (SIGSTOP, a VM
        // or laptop suspended past the lease): its own runs could not renew their leases
        // either, and are alive. Renewed before anything is rescued: the daemon had woken
        // to take its own job's lease, killing the child with most of its work done and
        // spending an attempt. (A run that stops renewing while the process runs is still
        // rescued.)
        state.lock()
        let overdue = Int64((config.rescueIntervalSeconds + config.leaseSeconds / 2) * 1000)
        let late = lastRescueAt.map { now - $0 } ?? 0
        let slept = late > overdue
        lastRescueAt = now
        // So are runs that have ended and keep asking a store that could not write to record
        // their outcome (`JobRunner.awaitingStore`): its disk full, the rescue below fails
        // too, but the first pass after space comes back had written their disk_full off as
        // lease_expired.
        let own = runners.values.filter { slept || $0.awaitingStore }.map { ($0.jobID, $0.owner) }
        state.unlock()
        for (job, owner) in own {
            _ = try? store.heartbeat(jobID: job, owner: owner, leaseUntil: now + Int64(config.leaseSeconds * 1000), progress: nil, now: now)
        }
        if slept && !own.isEmpty { log.write("rescuer: \(late / 1000) s since the last pass (the process was paused): renewed the leases of its \(own.count) running job(s)") }
        let n = try store.rescueExpiredLeases(now: now)
        if n > 0 { events.notify(); wake() }
        return n
    }

    /// One garbage collection pass now (the maintenance thread also runs them).
    @discardableResult
    public func collectGarbage() throws(KilnError) -> GarbageReport {
        state.lock()
        let wanted = JobKind.allCases.reduce(Int64(0)) { sum, kind in
            sum + (diskWaiting.values.filter { $0.kind == kind }.map(\.needed).max() ?? 0)
        }
        let soleFarm = soleFarm
        state.unlock()
        let report = try collector.collect(now: clock.nowMillis(), wantedBytes: wanted, soleFarm: soleFarm)
        if !report.deleted.isEmpty {
            // A job waiting for the space just freed looks again now, not at its next recheck.
            state.lock()
            for id in diskWaiting.keys { diskWaiting[id]?.until = 0 }
            state.unlock()
            events.notify()
            wake()
        }
        return report
    }

    /// Whether an original's file at `path`, asked for at `bytes`, is gone or no longer that
    /// file: an original is the file at its path, keyed by its content then, and a file
    /// renamed over it may need another plan (a codec the device does not play). A `stat`,
    /// cheap enough for every answer; a same-size rewrite shows in the download's ETag.
    /// Its path was resolved inside a media root when it was asked for: one that no longer
    /// resolves to itself (the file, or a folder above it, replaced by a symlink) may lead
    /// anywhere, a file of the same size outside the roots included, and has changed too.
    public static func originalChanged(path: String, bytes: Int64) -> Bool {
        var st = stat()
        return lstat(path, &st) != 0 || (st.st_mode & S_IFMT) != S_IFREG || Int64(st.st_size) != bytes
            || Path.resolved(path) != path
    }

    /// Fails the held originals whose files changed (`originalChanged`), each with an
    /// `artifact.failed` event: answers and downloads say so at once, but a media server
    /// that follows the events asks nothing until a device finds its link dead. Run with
    /// each collection; the number failed.
    @discardableResult
    public func checkOriginals() throws(KilnError) -> Int {
        var failed = 0
        for held in try store.heldFiles(owned: false) where Self.originalChanged(path: held.path, bytes: held.bytes) {
            let now = clock.nowMillis()
            guard try store.failChangedOriginal(artifactID: held.artifactID, error: .originalChanged(at: now), now: now) else { continue }
            log.write("artifact \(held.artifactID): its original \(held.path) changed since it was asked for")
            failed += 1
        }
        if failed > 0 { events.notify() }
        return failed
    }

    /// Files in the artifact folder no row knows (reported, never deleted).
    public func unknownFiles() throws(KilnError) -> [String] { try collector.unknownFiles() }

    /// Slots per kind, and how many are busy.
    public var slots: [JobKind: (total: Int, busy: Int)] {
        state.lock(); defer { state.unlock() }
        return [.transcode: (config.maxTranscodes, busy[.transcode] ?? 0), .remux: (config.maxRemuxes, busy[.remux] ?? 0)]
    }

    /// Ids of jobs with a runner in this process.
    public var runningJobIDs: [Int64] { state.lock(); defer { state.unlock() }; return Set(runners.values.map(\.jobID)).sorted() }

    /// Free bytes where artifacts are written: the artifacts folder's file system, which an
    /// operator may mount apart from the data directory's (a disk for files, the database
    /// on another).
    public var freeBytes: Int64? { space.freeBytes(at: config.artifactsDir) }

    /// Bytes the output is expected to take: (video + audio bitrate) × duration × 1.1 plus
    /// a 16 MiB margin; a copied stream counts at the source's own bitrate. `original`
    /// writes nothing.
    public static func estimatedBytes(plan: Plan, source: MediaInfo) -> Int64 {
        guard plan.deliveryFormat != .original else { return 0 }
        func kbps(_ planned: Int, _ index: Int?) -> Double {
            if planned > 0 { return Double(planned) }
            if let i = index, let b = source.stream(i)?.bitRate, b > 0 { return Double(b) / 1000 }
            return 0
        }
        let file = Double(source.bitRate) / 1000
        let video = kbps(plan.video?.bitrateKbps ?? 0, plan.video?.sourceIndex)
        var audio = kbps(plan.audio?.bitrateKbps ?? 0, plan.audio?.sourceIndex)
        // Copied sound whose bitrate nobody states (the probe measures most): a generous
        // sound's, within the file's.
        if plan.audio?.action == .copy, audio == 0 { audio = min(file, 1536) }
        var total = video + audio
        // A copied picture whose bitrate nobody states (Matroska gives none per stream): the
        // whole file's, an upper bound the picture comes near. A 36 MB remux of an MKV was
        // counted as its 80 kbit/s of re-encoded sound, admitted on 30 MB free, and failed
        // three times as disk_full.
        if total == 0 || (plan.video?.action == .copy && video == 0) { total = max(total, file) }
        let seconds = max(0, source.durationSeconds)
        // The index grows with the film (a sample table entry per picture and per sound
        // frame, ~1 kB a second at most) and a small file has a floor of its own; a fixed
        // 16 MB on top had refused a 1 s clip (58 kB) on a 12 MB volume for good.
        let index = Double(1 << 20) + 2048 * seconds
        let bytes = total * 1000 / 8 * seconds * 1.1 + index
        return bytes.isFinite ? Int64(bytes) : 16 << 20
    }

    static func fileSize(_ path: String) -> Int64? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.size].flatMap { ($0 as? NSNumber)?.int64Value }
    }

    // MARK: Runners

    private func stopRunners(artifactID: String, _ reason: StopReason) {
        state.lock()
        let matching = runners.values.filter { $0.artifactID == artifactID }
        state.unlock()
        for r in matching { r.stop(reason) }
    }

    private func stopRunnersIfCanceled(artifactID: String) {
        state.lock()
        let any = runners.values.contains { $0.artifactID == artifactID }
        state.unlock()
        guard any, let a = try? store.artifact(id: artifactID), a.job?.state == .canceled else { return }
        stopRunners(artifactID: artifactID, .canceled)
    }

    func noteRetry(at time: Int64) {
        state.lock()
        nextRetryAt = min(nextRetryAt ?? time, time)
        state.broadcast()
        state.unlock()
    }

    /// A live progress event names the references holding the artifact, as stored events
    /// do: a media server maps events to its download rows by reference.
    func publishProgress(artifactID: String, format: DeliveryFormat, progress: JobProgress) {
        let references = (try? store.references(of: artifactID)) ?? []
        events.publishLive(EventRecord(seq: 0, type: .progress, artifactID: artifactID, status: ArtifactState.pending.status,
                                       deliveryFormat: format, references: references, progress: progress, at: clock.nowMillis()))
    }

    private func runnerEnded(_ runner: JobRunner) {
        state.lock()
        runners[ObjectIdentifier(runner)] = nil
        busy[runner.kind, default: 1] -= 1
        wakeRequested = true
        state.broadcast()
        state.unlock()
    }

    // MARK: Scheduler

    /// Claims as many due jobs as there are free slots of each kind, then sleeps until
    /// woken (insert, finished job, cancel), the next retry is due, or `idleClaimSeconds`.
    private func schedule() {
        while true {
            state.lock()
            wakeRequested = false
            if stopping { threadsRunning -= 1; state.broadcast(); state.unlock(); return }
            let now = clock.nowMillis()
            if let r = nextRetryAt, r <= now { nextRetryAt = nil }
            var wants: [(JobKind, Int)] = []
            for kind in JobKind.allCases {
                let total = kind == .transcode ? config.maxTranscodes : config.maxRemuxes
                let free = total - busy[kind, default: 0]
                if free > 0 { wants.append((kind, free)) }
            }
            state.unlock()

            var failed = false
            for (kind, free) in wants {
                do { try claimAndStart(kind: kind, limit: free) } catch {
                    log.write("scheduler: claiming \(kind.rawValue) jobs failed: \(error)")
                    failed = true
                }
            }

            state.lock()
            let now2 = clock.nowMillis()
            var wakeAt = now2 + Int64((failed ? 1 : config.idleClaimSeconds) * 1000)
            if let r = nextRetryAt { wakeAt = min(wakeAt, r) }
            for (_, waiting) in diskWaiting where waiting.until > now2 { wakeAt = min(wakeAt, waiting.until) }
            // The clock may be injected: never sleep longer than the idle period in real time.
            let seconds = min(config.idleClaimSeconds, max(0.001, Double(wakeAt - now2) / 1000))
            let deadline = Date(timeIntervalSinceNow: seconds)
            while !wakeRequested && !stopping && state.wait(until: deadline) {}
            state.unlock()
        }
    }

    private func claimAndStart(kind: JobKind, limit: Int) throws(KilnError) {
        state.lock()
        claims += 1
        let owner = "\(farmID)#\(claims)", claim = claims
        state.unlock()
        let now = clock.nowMillis()
        state.lock()
        // Those due again are looked at again by this claim (and forgotten if canceled).
        diskWaiting = diskWaiting.filter { $0.value.kind != kind || $0.value.until > now }
        let skipping = diskWaiting.filter { $0.value.kind == kind }.map(\.key)
        state.unlock()
        let jobs = try store.claim(kind: kind, limit: limit, owner: owner,
                                   leaseUntil: now + Int64(config.leaseSeconds * 1000), now: now, skipping: skipping)
        for claimed in jobs {
            if let refusal = neverFits(claimed, now: now) {
                // Waiting would be forever (the caller would see "preparing" for good):
                // the job fails now with the reason, and asking again queues it again.
                if try store.fail(jobID: claimed.job.id, owner: owner, error: refusal, retryAt: nil, now: now) {
                    log.write("artifact \(claimed.job.artifactID): \(refusal.code) (\(refusal.message)) (job \(claimed.job.id)) — failed")
                }
                events.notify()
                continue
            }
            if let needed = unadmitted(claimed) {
                // It keeps its place in line and is looked at again at the recheck (or as
                // soon as the collector frees something); the jobs behind it that fit go
                // ahead meanwhile, in the slot it leaves.
                _ = try? store.requeue(jobID: claimed.job.id, owner: owner, now: now)
                try store.setWaiting(jobID: claimed.job.id, reason: "waiting_for_disk")
                state.lock()
                let until = now + Int64(config.diskRecheckSeconds * 1000)
                diskWaiting[claimed.job.id] = (kind, until, needed)
                gcRequested = true
                // The slot it leaves goes to the next in line, now.
                if until > now { wakeRequested = true }
                state.broadcast()
                state.unlock()
                log.write("artifact \(claimed.job.artifactID) (job \(claimed.job.id)) waits for disk space (needs ~\(claimed.estimatedBytes) bytes, keeps \(config.minFreeBytes) free)")
                continue
            }
            let runner = JobRunner(claimed: claimed, owner: owner, claim: claim, farm: self)
            state.lock()
            runners[ObjectIdentifier(runner)] = runner
            busy[kind, default: 0] += 1
            state.unlock()
            let t = Thread { [self] in
                runner.run()
                runnerEnded(runner)
            }
            t.name = "kiln-job-\(claimed.job.id)"
            t.start()
        }
    }

    /// A job whose estimated output is more than the artifacts folder's file system could
    /// hold were it empty (less `minFreeBytes`) can never be admitted: its refusal.
    private func neverFits(_ claimed: ClaimedJob, now: Int64) -> AttemptError? {
        guard let capacity = space.capacityBytes(at: config.artifactsDir),
              claimed.estimatedBytes > capacity - config.minFreeBytes else { return nil }
        // Not disk_full, which says "worth retrying": asked again, it would fail again until
        // the file system grows. Permanent for the request; asking again queues it again.
        return AttemptError(attempt: claimed.job.attempt, code: KilnError.Code.qualityUnavailable.rawValue, stage: KilnError.Stage.write.rawValue,
                            message: "the output needs about \(Format.bytes(claimed.estimatedBytes)), more than the artifacts folder's file system "
                                + "holds (\(Format.bytes(capacity)), \(Format.bytes(config.minFreeBytes)) of it kept free)", at: now)
    }

    /// Disk admission: the job's estimated output must leave `minFreeBytes` free, after
    /// what the jobs already running have still to write (two transcodes admitted on the
    /// same free space together needed twice it). nil when it does; otherwise the bytes it
    /// needs free beyond the floor.
    private func unadmitted(_ claimed: ClaimedJob) -> Int64? {
        guard let free = freeBytes else { return nil }
        state.lock()
        let running = runners.values.filter { $0.jobID != claimed.job.id }
        state.unlock()
        let needed = running.reduce(Int64(0)) { $0 + $1.bytesToCome } + claimed.estimatedBytes
        return free - needed >= config.minFreeBytes ? nil : needed
    }

    // MARK: Maintenance

    /// Rescues expired leases and collects garbage on their intervals (and collects at
    /// once when the scheduler found disk space short).
    private func maintain() {
        // A failure that lasts (the disk full) is logged when it begins or changes, not on
        // every pass: the journal had the same line every few seconds.
        var failing: [String: String] = [:]
        func sayOnce(_ part: String, _ error: any Error) {
            let line = "\(part): \(error)"
            if failing[part] != line { log.write(line) }
            failing[part] = line
        }
        while true {
            state.lock()
            if stopping { threadsRunning -= 1; state.broadcast(); state.unlock(); return }
            let now = clock.nowMillis()
            let rescue = now >= nextRescueAt
            let collect = now >= nextCollectionAt || gcRequested
            if rescue { nextRescueAt = now + Int64(config.rescueIntervalSeconds * 1000) }
            if collect { nextCollectionAt = now + Int64(config.gcIntervalSeconds * 1000); gcRequested = false }
            state.unlock()

            if rescue {
                do { try rescueExpiredLeases(); failing["rescuer"] = nil } catch { sayOnce("rescuer", error) }
            }
            if collect {
                do {
                    let report = try collectGarbage()
                    failing["collector"] = nil
                    if !report.deleted.isEmpty {
                        log.write("collector: deleted \(report.deleted.count) artifact(s) no reference held, \(Format.bytes(report.freedBytes)) freed: "
                                  + report.deleted.joined(separator: ", "))
                    }
                } catch { sayOnce("collector", error) }
                do { try checkOriginals(); failing["originals"] = nil } catch { sayOnce("originals", error) }
            }

            state.lock()
            let now2 = clock.nowMillis()
            let next = min(nextRescueAt, nextCollectionAt)
            // Checked at least once a second in real time, so an injected clock is followed.
            let deadline = Date(timeIntervalSinceNow: min(1, max(0.01, Double(next - now2) / 1000)))
            while !stopping && !gcRequested && state.wait(until: deadline) {}
            state.unlock()
        }
    }
}
