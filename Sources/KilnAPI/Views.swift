import Foundation
import KilnCore
import Store

/// The answer about one reference (CONTRACT.md section 3, `POST /v1/prepare` and
/// `GET /v1/references/{ref}`).
public struct ReferenceView: Encodable, Sendable {
    /// `sha256` is null for an original: the file is the source as it is, which Kiln does
    /// not read whole to answer (a film can be tens of GB); its fingerprint and the
    /// download's `ETag` identify it.
    public struct File: Encodable, Sendable {
        let path: String
        let bytes: Int64
        @Nullable var sha256: String?
    }
    let reference: String
    @Nullable var artifactID: String?
    let status: String
    let quality: String
    let effectiveQuality: String
    let deliveryFormat: String
    let targetBitrateKbps: Int
    let revision: Int
    let plan: Plan
    @Nullable var file: File?
    @Nullable var progress: JobProgress?
    /// Why a queued job is not running yet (`waiting_for_disk`), so a caller can say why.
    @Nullable var waitingReason: String?
    /// While preparing, the output's expected size (what disk admission reserves), so a
    /// caller can show a size before there is a file.
    @Nullable var estimatedBytes: Int64?
    @Nullable var error: AttemptErrorView?
    /// While a job that failed an attempt goes on (it waits to retry, or retries), that
    /// attempt's error: a download waiting minutes on a backoff says why.
    let lastError: AttemptErrorView?
    /// When a retrying job's next attempt may start.
    let retryAt: String?

    /// `originalChanged`: an original whose file is no longer the one it was asked for
    /// (`API.originalChanged`): failed with `source_changed`, so the caller asks again for
    /// the new content, which may need another plan.
    public init(reference: ReferenceRecord, artifact: ArtifactRecord, originalChanged: Bool = false) {
        self.reference = reference.request.reference
        artifactID = artifact.id
        // The contract's answer is ready, preparing or failed: a job an operator canceled
        // failed for this caller (asking again queues it again), with the reason.
        status = artifact.state == .canceled || originalChanged ? "failed" : artifact.state.status
        quality = reference.request.quality.rawValue
        effectiveQuality = artifact.plan.effectiveQuality.rawValue
        deliveryFormat = artifact.plan.deliveryFormat.rawValue
        targetBitrateKbps = artifact.plan.targetBitrateKbps
        revision = reference.revision
        // The plan as this caller asked for it: its own (its audio pick, its reasons) for the
        // artifact's output; the artifact's with its quality for rows from before it was kept.
        // (Its own only while it describes the artifact's output: not once the engine had to
        // deliver something else, a remux whose picture it re-encoded.)
        var plan = reference.plan.flatMap { own in
            own.artifactKey == artifact.plan.artifactKey && own.deliveryFormat == artifact.plan.deliveryFormat
                && own.video?.action == artifact.plan.video?.action ? own : nil
        } ?? artifact.plan
        plan.quality = reference.request.quality
        self.plan = plan
        file = artifact.state == .ready && !originalChanged ? artifact.file.map { File(path: $0.path, bytes: $0.bytes, sha256: $0.sha256) } : nil
        progress = artifact.state == .pending ? artifact.job?.progress : nil
        let retrying = artifact.state == .pending && artifact.job?.state == .retrying
        waitingReason = artifact.state == .pending ? artifact.job?.waitingReason ?? (retrying ? "retrying" : nil) : nil
        retryAt = retrying ? artifact.job.map { RFC3339.string(millis: $0.runAfter) } : nil
        // The current job's own failed attempts only: not those of a job that failed
        // before the file was asked for again.
        lastError = artifact.state == .pending ? artifact.job.flatMap { job in
            artifact.errors.last.flatMap { $0.attempt >= 1 && $0.attempt <= job.attempt && $0.at >= job.askedAt ? AttemptErrorView($0) : nil }
        } : nil
        estimatedBytes = artifact.state == .pending ? artifact.estimatedBytes : nil
        if originalChanged {
            // Found now; the maintenance pass records when (`Farm.checkOriginals`).
            error = AttemptErrorView(AttemptError.originalChanged(at: SystemClock().nowMillis()))
            return
        }
        switch artifact.state {
        case .failed: error = artifact.failure.map(AttemptErrorView.init)
        case .canceled:
            error = AttemptErrorView(artifact.errors.last.flatMap { $0.code == "canceled" ? $0 : nil }
                ?? AttemptError(attempt: artifact.job?.attempt ?? 0, code: "canceled", stage: "request",
                                message: "the job was canceled before it finished; ask again to prepare it", at: artifact.updatedAt))
        default: error = nil
        }
    }

    /// 200 when the file can be fetched now (ready, every original), 202 while preparing.
    public var httpStatus: Int { status == "preparing" ? 202 : 200 }

    enum CodingKeys: String, CodingKey {
        case reference, artifactID = "artifact_id", status, quality, effectiveQuality = "effective_quality"
        case deliveryFormat = "delivery_format", targetBitrateKbps = "target_bitrate_kbps", revision, plan, file, progress
        case waitingReason = "waiting_reason", estimatedBytes = "estimated_bytes", error
        case lastError = "last_error", retryAt = "retry_at"
    }
}

/// `GET /v1/artifacts/{id}`.
public struct ArtifactView: Encodable, Sendable {
    let artifactID: String
    let key: String
    let status: String
    let state: String
    let deliveryFormat: String
    let plan: Plan
    let source: SourceRecord
    let file: ReferenceView.File?
    /// The ffmpeg command that makes the same file from the source (`FileRecord.ffmpegEquivalent`):
    /// with the plan, every setting of the encode. nil for an original, or not ready.
    let ffmpegEquivalent: [String]?
    /// What the file holds, as the engine that made it says (`FileRecord.description`):
    /// its length, its video, audio and subtitle tracks, chapters and the source's streams
    /// it left out (`dropped`). nil for an original, or not ready.
    let output: JSONValue?
    let referenceCount: Int
    let references: [String]
    let job: JobView?
    let attempts: Int
    let errors: [AttemptErrorView]
    @Nullable var progress: JobProgress?
    let createdAt: String
    let updatedAt: String
    let readyAt: String?
    let lastUsedAt: String
    let unreferencedSince: String?

    public init(_ a: ArtifactRecord) {
        artifactID = a.id
        key = a.key
        status = a.state.status
        state = a.state.rawValue
        deliveryFormat = a.plan.deliveryFormat.rawValue
        plan = a.plan
        source = a.source
        file = a.state == .ready ? a.file.map { .init(path: $0.path, bytes: $0.bytes, sha256: $0.sha256) } : nil
        ffmpegEquivalent = a.state == .ready ? a.file?.ffmpegEquivalent : nil
        output = a.state == .ready ? a.file?.description : nil
        referenceCount = a.references.count
        references = a.references
        job = a.job.map { JobView($0) }
        attempts = a.job?.attempt ?? 0
        errors = (a.errors.isEmpty ? a.failure.map { [$0] } ?? [] : a.errors).map(AttemptErrorView.init)
        progress = a.state == .pending ? a.job?.progress : nil
        createdAt = RFC3339.string(millis: a.createdAt)
        updatedAt = RFC3339.string(millis: a.updatedAt)
        readyAt = a.readyAt.map(RFC3339.string)
        lastUsedAt = RFC3339.string(millis: a.lastUsedAt)
        unreferencedSince = a.unreferencedSince.map(RFC3339.string)
    }

    enum CodingKeys: String, CodingKey {
        case artifactID = "artifact_id", key, status, state, deliveryFormat = "delivery_format", plan, source, file
        case ffmpegEquivalent = "ffmpeg_equivalent", output
        case referenceCount = "reference_count", references, job, attempts, errors, progress
        case createdAt = "created_at", updatedAt = "updated_at", readyAt = "ready_at", lastUsedAt = "last_used_at"
        case unreferencedSince = "unreferenced_since"
    }
}

/// A job as the API shows it (the artifact's job, `/v1/queue`'s running and queued jobs),
/// its times in RFC 3339 like every other time the API gives.
public struct JobView: Encodable, Sendable {
    let id: Int64
    let artifactID: String
    let kind: String
    let state: String
    let priority: String
    let attempt: Int
    let maxAttempts: Int
    let runAfter: String
    let leaseOwner: String?
    let leaseExpiresAt: String?
    @Nullable var progress: JobProgress?
    let waitingReason: String?
    let queuedAt: String
    let startedAt: String?
    let finishedAt: String?
    /// The artifact's source path, in the queue's view (`GET /v1/queue`); absent elsewhere,
    /// where the artifact around the job says it.
    var source: String?

    enum CodingKeys: String, CodingKey {
        case id, artifactID = "artifact_id", kind, state, priority, attempt, maxAttempts = "max_attempts", runAfter = "run_after"
        case leaseOwner = "lease_owner", leaseExpiresAt = "lease_expires_at", progress
        case waitingReason = "waiting_reason", queuedAt = "queued_at", startedAt = "started_at", finishedAt = "finished_at", source
    }

    init(_ j: JobRecord, source: String? = nil) {
        self.source = source
        id = j.id; artifactID = j.artifactID; kind = j.kind.rawValue; state = j.state.rawValue; priority = j.priority.rawValue
        attempt = j.attempt; maxAttempts = j.maxAttempts; runAfter = RFC3339.string(millis: j.runAfter)
        // A finished job's last report is not progress (a ready artifact at "97 %").
        leaseOwner = j.leaseOwner; leaseExpiresAt = j.leaseExpiresAt.map(RFC3339.string); progress = j.state == .running ? j.progress : nil
        waitingReason = j.waitingReason; queuedAt = RFC3339.string(millis: j.queuedAt)
        startedAt = j.startedAt.map(RFC3339.string); finishedAt = j.finishedAt.map(RFC3339.string)
    }
}

extension ArtifactRecord {
    /// What failed it, for a failed artifact: its last attempt's error, or for an original
    /// (which fails only by its file changing, and has no job to record it) that change.
    var failure: AttemptError? {
        guard state == .failed else { return nil }
        return plan.deliveryFormat == .original ? errors.last ?? .originalChanged(at: updatedAt) : errors.last
    }
}

/// A failed attempt as the API shows it: the stored record (whose time is epoch
/// milliseconds, as the store keeps every time) with its time in RFC 3339.
public struct AttemptErrorView: Encodable, Sendable, Equatable {
    let attempt: Int
    let code: String
    let stage: String
    let message: String
    let exitStatus: Int32?
    let signal: Int32?
    let logTail: [String]
    let at: String
    /// As the contract's error object has it (`AttemptError.retryable`).
    let retryable: Bool

    enum CodingKeys: String, CodingKey {
        case attempt, code, stage, message, exitStatus = "exit_status", signal, logTail = "log_tail", at, retryable
    }

    init(_ e: AttemptError) {
        // The engine writes its messages as clauses (they are composed into one another);
        // the API's are sentences, as the contract's envelope says.
        attempt = e.attempt; code = e.code; stage = e.stage; message = KilnError.sentence(e.message)
        exitStatus = e.exitStatus; signal = e.signal; logTail = e.logTail; at = RFC3339.string(millis: e.at)
        retryable = e.retryable
    }
}
