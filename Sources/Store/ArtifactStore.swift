import KilnCore

/// The farm's durable state behind one interface that does not leak SQL: the embedded
/// SQLite store implements it today, a PostgreSQL store for several machines later.
///
/// Every method is one transaction. Every state change that callers must hear about
/// (ready, failed, canceled, deleted) writes its event row in the same transaction, so
/// nothing is announced that the database does not hold. Times are milliseconds since
/// the epoch, passed in by the caller (the farm's `Clock`), so time-based rules are
/// tested without sleeping. Writes by a runner are fenced by `owner` and state: a job
/// rescued from an expired lease cannot be overwritten by its late former owner.
public protocol ArtifactStore: AnyObject, Sendable {

    /// Set once the store can no longer vouch for what it holds (its log could not be
    /// made durable): every call fails from then on, and only a restart, recovering from
    /// what the database really holds, brings it back. The daemon exits when it sees it.
    var broken: KilnError? { get }

    /// Why the last write transaction failed (another program holding the database's
    /// write lock past the busy timeout, a file system gone read-only, an I/O error); nil
    /// once one commits. Unlike `broken`, the store may recover by itself.
    var writeFailure: KilnError? { get }

    /// Whether the store answers, within about a second whatever holds it: a read, and with
    /// a `writeFailure` standing a small write, which clears it when it commits (so a store
    /// that recovered while nothing wrote is seen to).
    func readiness(now: Int64) -> StoreReadiness

    // MARK: Intake

    /// The whole of `prepare` after planning, atomically: find or create the artifact by
    /// `plan.artifactKey`; bind `request.reference` to it (moving it from another artifact
    /// if it held one, bumping its revision); create the job if the artifact has none
    /// (`original` deliveries get none: they are ready at once, with `originalFile`);
    /// queue a failed or canceled artifact again with fresh attempts. The same request
    /// again changes nothing. Two callers binding the same key at once end with one
    /// artifact and one job.
    func bind(request: PrepareRequest, plan: Plan, source: SourceRecord, estimatedBytes: Int64, maxAttempts: Int,
              originalFile: FileRecord?, now: Int64) throws(KilnError) -> Binding

    func reference(_ reference: String) throws(KilnError) -> ReferenceRecord?

    /// Drops a reference. When it was the artifact's last: an unfinished job is canceled
    /// (event `artifact.canceled`), a ready artifact starts its retention time. Returns
    /// false when the reference did not exist.
    func release(reference: String, now: Int64) throws(KilnError) -> Bool

    func artifact(id: String) throws(KilnError) -> ArtifactRecord?
    /// The references holding an artifact (in name order), without the rest of its record.
    func references(of artifactID: String) throws(KilnError) -> [String]

    /// Marks an artifact used (a caller read it), for least-recently-used collection.
    func touch(artifactID: String, now: Int64) throws(KilnError)

    // MARK: Probe cache

    func cachedProbe(fingerprint: String) throws(KilnError) -> MediaInfo?
    func cacheProbe(_ info: MediaInfo, fingerprint: String, now: Int64) throws(KilnError)

    // MARK: Scheduling

    /// Claims up to `limit` due jobs of `kind` (queued, or retrying with `run_after <= now`),
    /// interactive before background, then first queued first; each becomes `running`
    /// with a lease to `owner` until `leaseUntil`, its attempt counted. Jobs in `skipping`
    /// keep their place in line and are passed over this time.
    func claim(kind: JobKind, limit: Int, owner: String, leaseUntil: Int64, now: Int64, skipping: [Int64]) throws(KilnError) -> [ClaimedJob]

    /// Renews a lease and stores progress. False when the lease is no longer `owner`'s
    /// (rescued, canceled): the runner must stop the child.
    func heartbeat(jobID: Int64, owner: String, leaseUntil: Int64, progress: JobProgress?, now: Int64) throws(KilnError) -> Bool

    /// The job succeeded: the artifact is ready with `file` (event `artifact.ready`).
    /// False when the lease was lost (the file must then be discarded by the caller).
    func complete(jobID: Int64, owner: String, file: FileRecord, deliveredPlan: Plan?, now: Int64) throws(KilnError) -> Bool

    /// The attempt failed: kept in the job's errors; with `retryAt` the job waits in
    /// `retrying`, without it the job and artifact are `failed` (event `artifact.failed`).
    func fail(jobID: Int64, owner: String, error: AttemptError, retryAt: Int64?, now: Int64) throws(KilnError) -> Bool

    /// Graceful shutdown: a running job goes back to `queued` and its attempt is given back.
    func requeue(jobID: Int64, owner: String, now: Int64) throws(KilnError) -> Bool

    /// Running jobs whose lease expired (a dead daemon, a hung runner) become `retrying`
    /// due now, with a `lease_expired` error for the attempt; or `failed` when that was
    /// the last attempt. Returns the number rescued.
    func rescueExpiredLeases(now: Int64) throws(KilnError) -> Int

    /// Every running job, whatever its lease, as `rescueExpiredLeases` does with expired
    /// ones but with an `interrupted` error that spends no attempt (unless the same attempt
    /// was interrupted `maxAttempts` times in a row): for a daemon starting on a data
    /// directory it alone serves, whose running jobs were left by one that stopped.
    func rescueInterruptedJobs(now: Int64) throws(KilnError) -> Int

    /// Records why a claimable job waits (nil clears it), e.g. "waiting_for_disk".
    func setWaiting(jobID: Int64, reason: String?) throws(KilnError)

    /// Operator cancel: an unfinished job and its artifact become `canceled` (event).
    func cancel(artifactID: String, now: Int64) throws(KilnError) -> Bool

    /// Operator retry: a failed or canceled artifact is queued again with fresh attempts.
    func retry(artifactID: String, maxAttempts: Int, now: Int64) throws(KilnError) -> Bool

    // MARK: Events

    /// Persisted events with `seq > after`, in order.
    func events(after: Int64, limit: Int) throws(KilnError) -> [EventRecord]

    /// When an artifact's file was collected (its last `artifact.deleted` event), while
    /// the event is kept; nil otherwise.
    func collectedAt(artifactID: String) throws(KilnError) -> Int64?
    func lastEventSeq() throws(KilnError) -> Int64
    /// The oldest stored event's `seq`; nil when none is kept (retention removes old ones).
    func oldestEventSeq() throws(KilnError) -> Int64?

    /// Where the webhook got to, so a restart neither skips nor repeats out of order.
    func webhookPosition() throws(KilnError) -> Int64
    func setWebhookPosition(_ seq: Int64) throws(KilnError)

    // MARK: Garbage collection

    /// Removes the rows of artifacts that have no file of Kiln's to collect (an original,
    /// a failed or canceled one) once no reference has held them since `before` (epoch
    /// ms): nothing a caller holds changes, and asked for again they are made anew. Returns
    /// how many went.
    func forgetUnheldArtifacts(before: Int64) throws(KilnError) -> Int

    /// Removes stored events older than `before` (epoch ms) and, when `deliveredUpTo` is
    /// given, only those up to it (a webhook's position); returns how many went. Sequence
    /// numbers are never reused.
    func pruneEvents(before: Int64, deliveredUpTo: Int64?) throws(KilnError) -> Int

    /// Ready artifacts with files Kiln owns that no reference holds, least recently used
    /// first (the candidates for retention expiry and storage pressure).
    func unreferencedArtifacts(limit: Int) throws(KilnError) -> [ArtifactRecord]

    /// Step one of deleting: marks the artifact `deleting` if it is still unreferenced.
    /// False when a reference came back meanwhile (it must not be deleted).
    func beginDeleting(artifactID: String, now: Int64) throws(KilnError) -> Bool

    /// Step three (after the file is gone): removes the rows and writes `artifact.deleted`.
    func finishDeleting(artifactID: String, now: Int64) throws(KilnError)

    /// Artifacts left in `deleting` by a crash, for start-up to finish.
    func artifactsBeingDeleted() throws(KilnError) -> [ArtifactRecord]

    /// Every file path Kiln owns according to the rows, to find files no row knows.
    func ownedFilePaths() throws(KilnError) -> Set<String>

    /// Ready artifacts some reference holds, with the path and size recorded: `owned`, the
    /// files Kiln made, for start-up to find those that went missing meanwhile; not owned,
    /// originals (the user's files as they were asked for), for the maintenance pass to
    /// find those that changed.
    func heldFiles(owned: Bool) throws(KilnError) -> [(artifactID: String, path: String, bytes: Int64)]

    /// A ready artifact whose file Kiln made is gone or no longer its recorded size (deleted
    /// by hand, a disk restored from an older backup, truncated): queued again with fresh
    /// attempts, its row back to pending. False unless it is still ready at `path` and a
    /// reference holds it (collection takes an unheld one).
    func requeueLost(artifactID: String, path: String, maxAttempts: Int, now: Int64) throws(KilnError) -> Bool

    /// An original whose file changed (`error`, `source_changed`): failed, and an
    /// `artifact.failed` event written with it, so followers of the events learn that its
    /// link is dead. False unless it is still a ready original.
    func failChangedOriginal(artifactID: String, error: AttemptError, now: Int64) throws(KilnError) -> Bool

    /// The source paths the references to `artifactID` asked with, the latest asked first.
    func requestedSourcePaths(artifactID: String) throws(KilnError) -> [String]

    /// Points the artifact's job at `path`: another file with the same content as its source.
    func setSourcePath(artifactID: String, path: String) throws(KilnError)

    /// Bytes of owned files: all, and those no reference holds.
    func storedBytes() throws(KilnError) -> (total: Int64, unreferenced: Int64)

    // MARK: Status

    func queueSnapshot(recentFailures: Int, queuedLimit: Int) throws(KilnError) -> QueueSnapshot
}

/// What a readiness check found (`ArtifactStore.readiness`).
public enum StoreReadiness: Sendable, Equatable {
    case ready
    /// A read failed: the database cannot be read at all.
    case unreadable(KilnError)
    /// Writes fail (the last one's error): another program holds the write lock, the file
    /// system went read-only.
    case failingWrites(KilnError)
    /// Another call has held the connection for over half a second, and no write has failed:
    /// requests wait at least that long too.
    case busy
}

extension ArtifactStore {
    /// A job whose output is what its plan said.
    public func complete(jobID: Int64, owner: String, file: FileRecord, now: Int64) throws(KilnError) -> Bool {
        try complete(jobID: jobID, owner: owner, file: file, deliveredPlan: nil, now: now)
    }
}
