#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import KilnCore

/// Every setting of the farm, with its default. `fromEnvironment` reads the `KILN_*`
/// variables of CONTRACT.md section 3; tests build one by hand.
public struct FarmConfig: Sendable, Equatable {
    /// Everything Kiln writes lives here: the database, and the artifacts under `artifacts/`.
    public var dataDir: String = "./var"
    /// Transcode slots: what the machine can feed (libx264 uses every core it gets).
    public var maxTranscodes: Int = FarmConfig.defaultMaxTranscodes
    /// Remux slots: remuxes are I/O-bound and short.
    public var maxRemuxes: Int = 2
    /// Attempts per job before it fails (a shutdown requeue does not spend one).
    public var maxAttempts: Int = 4
    /// How long a ready artifact no reference holds is kept (0: collected at the next pass).
    public var retentionSeconds: Int64 = 259_200
    public var gcIntervalSeconds: Double = 300
    /// How long stored events are kept for `?after=`/`Last-Event-ID` resumes (30 days);
    /// the collector removes older ones, so the database does not grow for ever.
    public var eventRetentionSeconds: Int64 = 2_592_000
    /// A webhook delivers from the store: events it has not delivered are kept whatever
    /// their age (`kiln serve` sets this when `KILN_WEBHOOK_URL` is set).
    public var eventsHeldForWebhook = false
    /// Total bytes of owned artifact files above which unreferenced ones are collected early.
    public var storageBudgetBytes: Int64? = nil
    /// Free space on the artifacts folder's file system that jobs must not eat into.
    public var minFreeBytes: Int64 = 1 << 30
    /// A claimed job's lease; renewed by the runner's heartbeat, rescued when it expires.
    public var leaseSeconds: Double = 60
    public var heartbeatSeconds: Double = 5
    /// A child that reports no progress for this long is stopped (transient `stalled`).
    public var stallTimeoutSeconds: Double = 300
    /// Overall limit of one attempt: `timeoutBaseSeconds + timeoutPerMediaSecond × duration`
    /// (a 2-hour film at 3 s per media second is 6 hours; a slow 2-core box encodes 1080p
    /// at ~1–2× real time).
    public var timeoutBaseSeconds: Double = 600
    public var timeoutPerMediaSecond: Double = 3
    /// How long shutdown lets running jobs finish before stopping them.
    public var shutdownGraceSeconds: Double = 30
    /// Between SIGTERM and SIGKILL when a child is stopped.
    public var killGraceSeconds: Double = 5
    /// How often expired leases are rescued while running (also done at start-up).
    public var rescueIntervalSeconds: Double = 30
    /// How often a job waiting for disk space is looked at again.
    public var diskRecheckSeconds: Double = 10
    /// The scheduler claims at least this often even without a wake-up, for retrying jobs
    /// it did not schedule itself (a previous run's) and writes by other processes.
    public var idleClaimSeconds: Double = 2
    /// The child binary: `prep-artifact` beside the running executable unless given.
    public var prepArtifactPath: String = FarmConfig.defaultPrepArtifactPath()
    /// Handed to the child as `KILN_PRESETS_DIR` when set.
    public var presetsDir: String? = nil
    /// The child's nice value (`KILN_NICE`): jobs yield the CPU to the API.
    public var childNice: Int32 = 10
    public var retry: RetryPolicy = RetryPolicy()

    public init() {}

    /// `max(1, cores / 2)`: one transcode on two cores leaves a core for the API, probes and remuxes.
    public static var defaultMaxTranscodes: Int { max(1, ProcessInfo.processInfo.activeProcessorCount / 2) }

    /// `prep-artifact` in the running executable's folder (found through /proc/self/exe,
    /// since argv[0] may be a bare name looked up in PATH).
    public static func defaultPrepArtifactPath() -> String {
        var exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        if exe.path == "/proc/self/exe" {
            exe = URL(fileURLWithPath: CommandLine.arguments.first ?? "prep-artifact").resolvingSymlinksInPath()
        }
        return exe.deletingLastPathComponent().appendingPathComponent("prep-artifact").path
    }

    /// The data directory as an absolute path (rows store absolute file paths).
    public var absoluteDataDir: String {
        URL(fileURLWithPath: dataDir, isDirectory: true).standardizedFileURL.path
    }
    /// Where finished artifact files live: `<dataDir>/artifacts/<artifactID>.mp4`.
    public var artifactsDir: String { absoluteDataDir + "/artifacts" }
    public func artifactPath(_ artifactID: String) -> String { artifactsDir + "/\(artifactID).mp4" }

    /// The overall time limit of one attempt on a source of `duration` seconds.
    public func attemptTimeout(durationSeconds: Double) -> Double {
        timeoutBaseSeconds + timeoutPerMediaSecond * max(0, durationSeconds)
    }

    /// Reads `KILN_*` settings; anything not set keeps its default. A value that does not
    /// parse or is out of range is a usage error naming the variable.
    public static func fromEnvironment(_ env: [String: String]) throws(KilnError) -> FarmConfig {
        var c = FarmConfig()
        let reader = EnvironmentReader(env: env)
        if let v = reader.string("KILN_DATA_DIR") { c.dataDir = v }
        if let v = try reader.int("KILN_MAX_TRANSCODES", min: 1) { c.maxTranscodes = v }
        if let v = try reader.int("KILN_MAX_REMUXES", min: 1) { c.maxRemuxes = v }
        if let v = try reader.int("KILN_MAX_ATTEMPTS", min: 1) { c.maxAttempts = v }
        if let v = try reader.int("KILN_RETENTION_SECONDS", min: 0) { c.retentionSeconds = Int64(v) }
        if let v = try reader.seconds("KILN_GC_INTERVAL_SECONDS") { c.gcIntervalSeconds = v }
        if let v = try reader.int("KILN_EVENT_RETENTION_SECONDS", min: 60) { c.eventRetentionSeconds = Int64(v) }
        if let v = try reader.int("KILN_STORAGE_BUDGET_BYTES", min: 1) { c.storageBudgetBytes = Int64(v) }
        if let v = try reader.int("KILN_MIN_FREE_BYTES", min: 0) { c.minFreeBytes = Int64(v) }
        if let v = try reader.seconds("KILN_LEASE_SECONDS") { c.leaseSeconds = v }
        if let v = try reader.seconds("KILN_HEARTBEAT_SECONDS") { c.heartbeatSeconds = v }
        if let v = try reader.seconds("KILN_STALL_TIMEOUT_SECONDS") { c.stallTimeoutSeconds = v }
        if let v = try reader.seconds("KILN_TIMEOUT_BASE_SECONDS") { c.timeoutBaseSeconds = v }
        if let v = try reader.seconds("KILN_TIMEOUT_PER_MEDIA_SECOND", allowZero: true) { c.timeoutPerMediaSecond = v }
        if let v = try reader.seconds("KILN_SHUTDOWN_GRACE_SECONDS", allowZero: true) { c.shutdownGraceSeconds = v }
        if let v = try reader.seconds("KILN_KILL_GRACE_SECONDS", allowZero: true) { c.killGraceSeconds = v }
        if let v = try reader.seconds("KILN_RESCUE_INTERVAL_SECONDS") { c.rescueIntervalSeconds = v }
        if let v = try reader.seconds("KILN_RETRY_BASE_SECONDS") { c.retry.baseSeconds = v }
        if let v = try reader.seconds("KILN_RETRY_CAP_SECONDS") { c.retry.capSeconds = v }
        if let v = reader.string("KILN_PREP_ARTIFACT") { c.prepArtifactPath = v }
        if let v = reader.string("KILN_PRESETS_DIR") { c.presetsDir = v }
        if let v = try reader.int("KILN_CHILD_NICE", in: 0...19) { c.childNice = Int32(v) }
        if c.heartbeatSeconds >= c.leaseSeconds {
            throw KilnError(.usage, stage: .request, field: "KILN_HEARTBEAT_SECONDS",
                            "KILN_HEARTBEAT_SECONDS (\(c.heartbeatSeconds)) must be shorter than KILN_LEASE_SECONDS (\(c.leaseSeconds))")
        }
        if c.retry.capSeconds < c.retry.baseSeconds {
            throw KilnError(.usage, stage: .request, field: "KILN_RETRY_CAP_SECONDS",
                            "KILN_RETRY_CAP_SECONDS must not be below KILN_RETRY_BASE_SECONDS")
        }
        return c
    }
}
