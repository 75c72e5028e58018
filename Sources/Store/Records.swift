import KilnCore

// The farm's durable vocabulary. These types say what is stored, not how: the SQLite
// store (the embedded default) and a later PostgreSQL store implement `ArtifactStore`
// with the same records.

/// Who a job serves first: a person waiting on a phone, or a background sync.
public enum Priority: String, Codable, Sendable, CaseIterable {
    case interactive, background
    /// Claim order: smaller first.
    public var rank: Int { self == .interactive ? 0 : 1 }
}

/// Which pool of worker slots a job needs.
public enum JobKind: String, Codable, Sendable, CaseIterable {
    case transcode, remux
    public init(deliveryFormat: DeliveryFormat) { self = deliveryFormat == .transcode ? .transcode : .remux }
}

/// A job's states. Each says which component moves it on:
/// - `queued`: waiting for a slot (the scheduler claims it → running);
/// - `running`: a child works on it under a lease (the runner → succeeded, retrying,
///   failed or queued at shutdown; the rescuer → retrying when the lease expired);
/// - `retrying`: waiting for `run_after` after a transient failure (the scheduler claims
///   it like a queued job once due);
/// - `succeeded`, `failed`, `canceled`: final (an operator's retry or a new request for a
///   failed artifact → queued with fresh attempts).
public enum JobState: String, Codable, Sendable, CaseIterable {
    case queued, running, retrying, succeeded, failed, canceled
    public var isFinal: Bool { self == .succeeded || self == .failed || self == .canceled }
}

/// An artifact's states, as callers see them (`status` in the API is derived:
/// pending → "preparing").
/// - `pending`: its job is queued, running or retrying;
/// - `ready`: the file is complete and verified;
/// - `failed`: its job gave up (a new request or an operator retry queues it again);
/// - `canceled`: no reference held it before it was made, or an operator canceled it;
/// - `deleting`: garbage collection has begun removing its file (start-up finishes it).
public enum ArtifactState: String, Codable, Sendable, CaseIterable {
    case pending, ready, failed, canceled, deleting

    /// The word the media server's API uses.
    public var status: String {
        switch self {
        case .pending: "preparing"
        case .ready: "ready"
        case .failed: "failed"
        case .canceled: "canceled"
        case .deleting: "deleted"
        }
    }
}

/// What a caller asked for, kept with its reference so the same request again is
/// recognised and answered without new work.
public struct PrepareRequest: Codable, Sendable, Equatable {
    public var reference: String
    public var sourcePath: String
    public var quality: Quality
    public var caps: DeviceCaps?
    public var priority: Priority
    public var audioLanguage: String?
    /// False when the caller's user may not have files transcoded (the media server's
    /// per-user permission): a plan that needs one is refused as `transcode_disabled`.
    /// Nil (absent) allows what the server allows.
    public var transcodeAllowed: Bool?

    public init(reference: String, sourcePath: String, quality: Quality, caps: DeviceCaps? = nil,
                priority: Priority = .interactive, audioLanguage: String? = nil, transcodeAllowed: Bool? = nil) {
        self.reference = reference
        self.sourcePath = sourcePath
        self.quality = quality
        self.caps = caps
        self.priority = priority
        self.audioLanguage = audioLanguage
        self.transcodeAllowed = transcodeAllowed
    }

    enum CodingKeys: String, CodingKey {
        case reference, sourcePath = "source_path", quality, caps, priority, audioLanguage = "audio_language"
        case transcodeAllowed = "transcode_allowed"
    }
}

/// The source as the farm identified it when planning.
public struct SourceRecord: Codable, Sendable, Equatable {
    public var path: String
    public var fingerprint: String
    public var durationSeconds: Double
    public var sizeBytes: Int64

    public init(path: String, fingerprint: String, durationSeconds: Double, sizeBytes: Int64) {
        self.path = path
        self.fingerprint = fingerprint
        self.durationSeconds = durationSeconds
        self.sizeBytes = sizeBytes
    }

    enum CodingKeys: String, CodingKey {
        case path, fingerprint, durationSeconds = "duration_seconds", sizeBytes = "size_bytes"
    }
}

/// A finished file in the artifact store.
public struct FileRecord: Codable, Sendable, Equatable {
    /// Absolute path. For `original` deliveries it is the source itself, which Kiln never deletes.
    public var path: String
    public var bytes: Int64
    public var sha256: String?
    /// Whether Kiln wrote the file and may delete it (false for `original`: the source).
    public var owned: Bool
    /// The ffmpeg command that makes the same file from the source (the engine's
    /// `ffmpeg_equivalent`, writing to `path`), for a file Kiln made: the encode's every
    /// setting, as the plan made before it cannot know them all (the rate the pictures
    /// come at, the colour the source states). nil for an original and before it was kept.
    public var ffmpegEquivalent: [String]?
    /// What the engine says of the file it made (the child's `output` less its path, size
    /// and hash): its length, the streams it carries and those it left out (`dropped`),
    /// so the API server can describe the download as it is. nil for an original and
    /// before it was kept.
    public var description: JSONValue?

    public init(path: String, bytes: Int64, sha256: String?, owned: Bool, ffmpegEquivalent: [String]? = nil,
                description: JSONValue? = nil) {
        self.path = path
        self.bytes = bytes
        self.sha256 = sha256
        self.owned = owned
        self.ffmpegEquivalent = ffmpegEquivalent
        self.description = description
    }
}

/// What one failed attempt left behind, kept for operators.
public struct AttemptError: Codable, Sendable, Equatable {
    public var attempt: Int
    public var code: String
    public var stage: String
    public var message: String
    /// The child's exit status, when it exited.
    public var exitStatus: Int32?
    /// The signal that ended the child, when one did.
    public var signal: Int32?
    /// The last lines the child wrote to standard error.
    public var logTail: [String]
    public var at: Int64

    public init(attempt: Int, code: String, stage: String, message: String, exitStatus: Int32? = nil,
                signal: Int32? = nil, logTail: [String] = [], at: Int64) {
        self.attempt = attempt
        self.code = code
        self.stage = stage
        self.message = message
        self.exitStatus = exitStatus
        self.signal = signal
        self.logTail = logTail
        self.at = at
    }

    enum CodingKeys: String, CodingKey {
        case attempt, code, stage, message, exitStatus = "exit_status", signal, logTail = "log_tail", at
    }
}

extension AttemptError {
    /// Whether asking again later may succeed: the failure says nothing against the source
    /// or the request. The engine's transient codes (`KilnError.retryable`: I/O, space,
    /// resources, a verification that may pass on another try) and the farm's own (a lost
    /// lease, a daemon stopped mid-job, a child that could not start, stalled, ran out of
    /// time or was killed by a signal, as the OOM killer does) are; what the source or the
    /// request cannot do, a cancel and a bug are not. A caller re-asking failed rows goes
    /// by it.
    public var retryable: Bool {
        KilnError.Code(rawValue: code)?.retryable ?? Self.transientFarmCodes.contains(code)
    }

    static let transientFarmCodes: Set<String> = ["lease_expired", "interrupted", "launch_failed", "stalled", "timeout", "crashed"]

    /// What an original whose file changed since it was asked for answers, found at `at`.
    public static func originalChanged(at: Int64) -> AttemptError {
        AttemptError(attempt: 0, code: "source_changed", stage: "open",
                     message: "the file changed since it was asked for; ask again for its new content", at: at)
    }
}

/// An artifact as the API shows it.
public struct ArtifactRecord: Codable, Sendable, Equatable {
    public var id: String
    public var key: String
    public var state: ArtifactState
    public var plan: Plan
    public var source: SourceRecord
    public var file: FileRecord?
    public var references: [String]
    /// Bytes the output is expected to take (bitrate × duration + margin), for disk admission.
    public var estimatedBytes: Int64
    public var job: JobRecord?
    public var errors: [AttemptError]
    public var createdAt: Int64
    public var updatedAt: Int64
    public var readyAt: Int64?
    /// Last time a request bound or re-read it; least recently used goes first under pressure.
    public var lastUsedAt: Int64
    /// When the last reference let go; nil while held.
    public var unreferencedSince: Int64?

    public init(id: String, key: String, state: ArtifactState, plan: Plan, source: SourceRecord, file: FileRecord?,
                references: [String], estimatedBytes: Int64, job: JobRecord?, errors: [AttemptError], createdAt: Int64,
                updatedAt: Int64, readyAt: Int64?, lastUsedAt: Int64, unreferencedSince: Int64?) {
        self.id = id
        self.key = key
        self.state = state
        self.plan = plan
        self.source = source
        self.file = file
        self.references = references
        self.estimatedBytes = estimatedBytes
        self.job = job
        self.errors = errors
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.readyAt = readyAt
        self.lastUsedAt = lastUsedAt
        self.unreferencedSince = unreferencedSince
    }

    enum CodingKeys: String, CodingKey {
        case id, key, state, plan, source, file, references, estimatedBytes = "estimated_bytes", job, errors
        case createdAt = "created_at", updatedAt = "updated_at", readyAt = "ready_at", lastUsedAt = "last_used_at"
        case unreferencedSince = "unreferenced_since"
    }
}

/// The job that makes an artifact.
public struct JobRecord: Codable, Sendable, Equatable {
    public var id: Int64
    public var artifactID: String
    public var kind: JobKind
    public var state: JobState
    public var priority: Priority
    /// Attempts started so far (a shutdown requeue gives its attempt back).
    public var attempt: Int
    public var maxAttempts: Int
    /// Not claimable before this time (backoff after a transient failure).
    public var runAfter: Int64
    public var leaseOwner: String?
    public var leaseExpiresAt: Int64?
    public var progress: JobProgress?
    /// Why a claimable job is not running (e.g. "waiting_for_disk"), for the status endpoint.
    public var waitingReason: String?
    /// Its place in line: when it was queued, or raised to a higher priority (then at that
    /// line's back).
    public var queuedAt: Int64
    public var startedAt: Int64?
    public var finishedAt: Int64?
    /// When its work was asked for (queued afresh); a promotion leaves it.
    public var askedAt: Int64

    public init(id: Int64, artifactID: String, kind: JobKind, state: JobState, priority: Priority, attempt: Int,
                maxAttempts: Int, runAfter: Int64, leaseOwner: String?, leaseExpiresAt: Int64?, progress: JobProgress?,
                waitingReason: String?, queuedAt: Int64, startedAt: Int64?, finishedAt: Int64?, askedAt: Int64? = nil) {
        self.askedAt = askedAt ?? queuedAt
        self.id = id
        self.artifactID = artifactID
        self.kind = kind
        self.state = state
        self.priority = priority
        self.attempt = attempt
        self.maxAttempts = maxAttempts
        self.runAfter = runAfter
        self.leaseOwner = leaseOwner
        self.leaseExpiresAt = leaseExpiresAt
        self.progress = progress
        self.waitingReason = waitingReason
        self.queuedAt = queuedAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
    }

    enum CodingKeys: String, CodingKey {
        case id, artifactID = "artifact_id", kind, state, priority, attempt, maxAttempts = "max_attempts"
        case runAfter = "run_after", leaseOwner = "lease_owner", leaseExpiresAt = "lease_expires_at", progress
        case waitingReason = "waiting_reason", queuedAt = "queued_at", startedAt = "started_at", finishedAt = "finished_at"
        case askedAt = "asked_at"
    }
}

/// A reference (a caller's download row) and the artifact it holds.
public struct ReferenceRecord: Codable, Sendable, Equatable {
    public var request: PrepareRequest
    public var artifactID: String
    /// Increments each time the reference moves to a different artifact.
    public var revision: Int
    public var createdAt: Int64
    public var updatedAt: Int64
    /// The plan this reference's own request made (the same output as the artifact's, but
    /// its own audio pick and reasons); nil for rows written before it was kept.
    public var plan: Plan?

    public init(request: PrepareRequest, artifactID: String, revision: Int, createdAt: Int64, updatedAt: Int64, plan: Plan? = nil) {
        self.request = request
        self.artifactID = artifactID
        self.revision = revision
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.plan = plan
    }

    enum CodingKeys: String, CodingKey {
        case request, artifactID = "artifact_id", revision, createdAt = "created_at", updatedAt = "updated_at", plan
    }
}

/// What `bind` did, so the caller knows whether to wake the scheduler.
public struct Binding: Sendable, Equatable {
    public var reference: ReferenceRecord
    public var artifact: ArtifactRecord
    /// A job was created or queued again by this call.
    public var enqueued: Bool
    /// The reference moved from this artifact (now possibly unreferenced).
    public var movedFrom: String?

    public init(reference: ReferenceRecord, artifact: ArtifactRecord, enqueued: Bool, movedFrom: String?) {
        self.reference = reference
        self.artifact = artifact
        self.enqueued = enqueued
        self.movedFrom = movedFrom
    }
}

/// A job handed to a runner by `claim`, with everything needed to run it.
public struct ClaimedJob: Sendable, Equatable {
    public var job: JobRecord
    public var plan: Plan
    public var source: SourceRecord
    public var estimatedBytes: Int64

    public init(job: JobRecord, plan: Plan, source: SourceRecord, estimatedBytes: Int64) {
        self.job = job
        self.plan = plan
        self.source = source
        self.estimatedBytes = estimatedBytes
    }
}

/// Persisted event types (`artifact.progress` is live only and never stored).
public enum EventType: String, Codable, Sendable, CaseIterable {
    case ready = "artifact.ready"
    case failed = "artifact.failed"
    case canceled = "artifact.canceled"
    case deleted = "artifact.deleted"
    case progress = "artifact.progress"
}

/// One event row: written in the same transaction as the state change it announces.
public struct EventRecord: Codable, Sendable, Equatable {
    public var seq: Int64
    public var type: EventType
    public var artifactID: String
    public var status: String
    public var deliveryFormat: DeliveryFormat
    public var references: [String]
    public var error: AttemptError?
    public var progress: JobProgress?
    public var at: Int64

    public init(seq: Int64, type: EventType, artifactID: String, status: String, deliveryFormat: DeliveryFormat,
                references: [String], error: AttemptError? = nil, progress: JobProgress? = nil, at: Int64) {
        self.seq = seq
        self.type = type
        self.artifactID = artifactID
        self.status = status
        self.deliveryFormat = deliveryFormat
        self.references = references
        self.error = error
        self.progress = progress
        self.at = at
    }

    enum CodingKeys: String, CodingKey {
        case seq, type, artifactID = "artifact_id", status, deliveryFormat = "delivery_format", references, error, progress, at
    }
}

/// The status endpoint's view of the queue.
public struct QueueSnapshot: Codable, Sendable, Equatable {
    public var jobsByState: [String: Int]
    public var artifactsByState: [String: Int]
    public var running: [JobRecord]
    /// Claimable jobs in claim order (interactive first, then by time queued).
    public var queued: [JobRecord]
    public var recentFailures: [ArtifactRecord]
    public var storedBytes: Int64
    public var unreferencedBytes: Int64
    /// The source path of each running and queued job's artifact, by artifact id.
    public var sources: [String: String] = [:]

    public init(jobsByState: [String: Int], artifactsByState: [String: Int], running: [JobRecord], queued: [JobRecord],
                recentFailures: [ArtifactRecord], storedBytes: Int64, unreferencedBytes: Int64) {
        self.jobsByState = jobsByState
        self.artifactsByState = artifactsByState
        self.running = running
        self.queued = queued
        self.recentFailures = recentFailures
        self.storedBytes = storedBytes
        self.unreferencedBytes = unreferencedBytes
    }

    enum CodingKeys: String, CodingKey {
        case jobsByState = "jobs_by_state", artifactsByState = "artifacts_by_state", running, queued
        case recentFailures = "recent_failures", storedBytes = "stored_bytes", unreferencedBytes = "unreferenced_bytes"
    }
}
