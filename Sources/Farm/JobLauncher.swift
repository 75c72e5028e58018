import Foundation
import KilnCore

/// What one attempt is asked to do.
public struct JobSpec: Sendable, Equatable {
    public var jobID: Int64
    public var artifactID: String
    public var attempt: Int
    public var plan: Plan
    public var sourcePath: String
    public var sourceDurationSeconds: Double
    /// The source's fingerprint when it was asked for (what the artifact's key names): the
    /// child refuses a source that is no longer that file.
    public var sourceFingerprint: String?
    /// Where the child writes the finished file (the runner moves it into place).
    public var outputPath: String

    public init(jobID: Int64, artifactID: String, attempt: Int, plan: Plan, sourcePath: String,
                sourceDurationSeconds: Double, sourceFingerprint: String? = nil, outputPath: String) {
        self.sourceFingerprint = sourceFingerprint
        self.jobID = jobID
        self.artifactID = artifactID
        self.attempt = attempt
        self.plan = plan
        self.sourcePath = sourcePath
        self.sourceDurationSeconds = sourceDurationSeconds
        self.outputPath = outputPath
    }
}

/// How a child ended.
public enum Termination: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let s): "exit \(s)"
        case .signaled(let s): "signal \(s)"
        }
    }
}

/// The child's one JSON object on standard output (CONTRACT.md section 2), the parts the farm reads.
public struct ChildReport: Decodable, Sendable, Equatable {
    public struct Output: Decodable, Sendable, Equatable {
        public var path: String
        public var bytes: Int64
        public var sha256: String?
        /// The rest of the object as the engine wrote it (length, streams, `dropped`): kept
        /// with the file (`FileRecord.description`), as it is, for the API to answer with.
        public var description: JSONValue?
        public init(path: String, bytes: Int64, sha256: String?, description: JSONValue? = nil) {
            self.path = path; self.bytes = bytes; self.sha256 = sha256; self.description = description
        }
        enum CodingKeys: String, CodingKey { case path, bytes, sha256 }
        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            path = try c.decode(String.self, forKey: .path)
            bytes = try c.decode(Int64.self, forKey: .bytes)
            sha256 = try c.decodeIfPresent(String.self, forKey: .sha256)
            if case .object(var all)? = try? JSONValue(from: decoder) {
                for key in ["path", "bytes", "sha256"] { all[key] = nil }
                description = all.isEmpty ? nil : .object(all)
            }
        }
    }
    public struct Failure: Decodable, Sendable, Equatable {
        public var code: String
        public var stage: String?
        public var message: String
        public var retryable: Bool?
        public init(code: String, stage: String?, message: String, retryable: Bool?) {
            self.code = code; self.stage = stage; self.message = message; self.retryable = retryable
        }
    }
    public struct Stats: Decodable, Sendable, Equatable {
        /// What the engine changed from the plan to finish it (`video_reencoded: …`).
        public var adjustments: [String]?
        /// The ffmpeg command that makes the same output (its last argument the output's path).
        public var ffmpegEquivalent: [String]?
        public init(adjustments: [String]?, ffmpegEquivalent: [String]? = nil) {
            self.adjustments = adjustments
            self.ffmpegEquivalent = ffmpegEquivalent
        }
        enum CodingKeys: String, CodingKey { case adjustments, ffmpegEquivalent = "ffmpeg_equivalent" }
    }
    public var ok: Bool
    public var output: Output?
    public var error: Failure?
    public var stats: Stats?
    /// The plan as the engine carried it out, where it had to change it.
    public var executedPlan: Plan?

    public init(ok: Bool, output: Output? = nil, error: Failure? = nil, stats: Stats? = nil, executedPlan: Plan? = nil) {
        self.ok = ok; self.output = output; self.error = error; self.stats = stats; self.executedPlan = executedPlan
    }

    enum CodingKeys: String, CodingKey { case ok, output, error, stats, executedPlan = "executed_plan" }
}

/// Everything an attempt left behind once its child is gone.
public struct JobOutcome: Sendable, Equatable {
    public var termination: Termination
    /// The parsed standard-output object; nil when the child printed none (a crash).
    public var report: ChildReport?
    /// The last log lines of standard error (progress lines excluded).
    public var logTail: [String]

    public init(termination: Termination, report: ChildReport?, logTail: [String]) {
        self.termination = termination
        self.report = report
        self.logTail = logTail
    }
}

/// A running attempt.
public protocol JobHandle: AnyObject, Sendable {
    /// The child's process id (also its process group), when it is a process.
    var pid: Int32? { get }
    /// The outcome once the child has ended; nil if it is still running after `timeout` seconds.
    func wait(timeout: Double) -> JobOutcome?
    /// Asks the child to stop (SIGTERM to its group), then forces it (SIGKILL) after `killAfter` seconds.
    func terminate(killAfter: Double)
}

/// Starts attempts. The runner calls `launch` on its own thread and keeps that thread
/// alive until the child has ended (the child's parent-death signal is tied to it).
public protocol JobLauncher: Sendable {
    /// `onProgress` is called from another thread each time the child reports progress.
    func launch(_ spec: JobSpec, onProgress: @escaping @Sendable (JobProgress) -> Void) throws(KilnError) -> any JobHandle
}

/// Runs `prep-artifact run SOURCE --plan - --output OUT --json --progress-json
/// [--fingerprint F]` for each attempt.
public struct ChildProcessLauncher: JobLauncher {
    public var executable: String
    public var nice: Int32
    public var presetsDir: String?

    public init(executable: String, nice: Int32 = 10, presetsDir: String? = nil) {
        self.executable = executable
        self.nice = nice
        self.presetsDir = presetsDir
    }

    public init(config: FarmConfig) {
        self.init(executable: config.prepArtifactPath, nice: config.childNice, presetsDir: config.presetsDir)
    }

    /// The daemon's own settings (`KILN_`: its token, the webhook's secret and address
    /// among them) stay with the daemon: the child reads only what `launch` gives it, and
    /// a child's crash report, core file or a wrapper script in `KILN_PREP_ARTIFACT` that
    /// logs its environment would otherwise carry them.
    static func daemonsOwn(_ name: String) -> Bool { name.hasPrefix("KILN_") }

    public func launch(_ spec: JobSpec, onProgress: @escaping @Sendable (JobProgress) -> Void) throws(KilnError) -> any JobHandle {
        let plan: Data
        do { plan = Data(try JSON.encode(spec.plan)) } catch {
            throw KilnError(.internalError, stage: .plan, "cannot encode the plan: \(error)")
        }
        var extra = ["KILN_PARENT_PID": String(getpid()), "KILN_NICE": String(nice)]
        if let presetsDir { extra["KILN_PRESETS_DIR"] = presetsDir }
        let child = try ChildProcess.spawn(
            executable: executable,
            arguments: ["run", spec.sourcePath, "--plan", "-", "--output", spec.outputPath, "--json", "--progress-json"]
                + (spec.sourceFingerprint.map { ["--fingerprint", $0] } ?? []),
            environment: extra, withholding: Self.daemonsOwn, stdin: plan,
            onStderrLine: { line in
                if let p = ProgressLine.parse(line) { onProgress(p); return false }
                return true
            })
        return ChildJobHandle(child: child)
    }
}

/// `{"event":"progress","progress":{…}}` lines the child writes on standard error.
enum ProgressLine {
    private struct Line: Decodable { let event: String; let progress: JobProgress? }

    static func parse(_ line: String) -> JobProgress? {
        guard line.hasPrefix("{"), line.contains("\"progress\"") else { return nil }
        guard let l = try? JSONDecoder().decode(Line.self, from: Data(line.utf8)), l.event == "progress" else { return nil }
        return l.progress
    }
}

final class ChildJobHandle: JobHandle {
    let child: ChildProcess
    init(child: ChildProcess) { self.child = child }

    var pid: Int32? { child.pid }

    func wait(timeout: Double) -> JobOutcome? {
        guard let ended = child.wait(timeout: timeout) else { return nil }
        let report = ended.stdout.isEmpty ? nil : Self.parseReport(ended.stdout)
        return JobOutcome(termination: ended.termination, report: report, logTail: ended.logTail)
    }

    func terminate(killAfter: Double) { child.terminate(killAfter: killAfter) }

    /// The last line holding a JSON object (the child prints exactly one; be lenient).
    static func parseReport(_ data: Data) -> ChildReport? {
        let text = String(decoding: data, as: UTF8.self)
        for line in text.split(separator: "\n").reversed() where line.hasPrefix("{") {
            if let r = try? JSONDecoder().decode(ChildReport.self, from: Data(line.utf8)) { return r }
        }
        return try? JSONDecoder().decode(ChildReport.self, from: data)
    }
}
