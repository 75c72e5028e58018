import CSQLite
import Foundation
import KilnCore

/// The embedded store: one SQLite file in WAL mode with `synchronous=FULL` (by default), so
/// a committed transition survives a power cut, and one connection that every call uses in
/// turn. Each call is one transaction and, with `.full`, one fsync of the log.
///
/// `@unchecked Sendable`: the connection and its statement cache are not thread-safe
/// (opened with SQLITE_OPEN_NOMUTEX); every access goes through `lock`, so at most one
/// thread touches them at a time. Calls block; callers run them on their own threads.
///
/// Decisions the interface leaves open:
/// - Artifact ids are "a_" + the first 24 hex digits of the artifact key, so equal outputs
///   share an id everywhere (logs, file names) and a lost reply is answered with the same id.
/// - `original` deliveries are stored `ready` at once with the source as their (not owned)
///   file; no job and no event (the media server has its answer synchronously). They never
///   enter garbage collection, having no file Kiln may delete.
/// - A re-queue (new request for a failed/canceled artifact, operator retry, request for an
///   artifact being deleted) resets the artifact's one job: attempt 0, new `queued_at`;
///   errors of earlier runs stay in `job_errors` and in `ArtifactRecord.errors`.
/// - `bind` on an artifact in `deleting` turns it back into a pending artifact with a
///   queued job (the reference wins over the collector); `finishDeleting` only acts on rows
///   still in `deleting`, so the collector's late call changes nothing. The collector must
///   delete exactly the file path it read before `beginDeleting`, and the farm should not
///   write a remade artifact to that same path before the collector is done with it.
/// - Binding an interactive request to an artifact whose job still waits as background
///   raises the job to interactive (a person is now waiting for it); it joins that line at
///   the back (its `queued_at` becomes the time it was raised, if later).
/// - `fail` records the error under the job's current attempt number, whatever the
///   caller put in `error.attempt`.
public final class SQLiteStore: ArtifactStore, @unchecked Sendable {
    private let db: Database
    private let lock = NSLock()
    /// Decoding plans' and sources' JSON is most of the CPU a claim or an answer costs;
    /// both are kept decoded, keyed by their text (a plan rewritten on delivery is another
    /// text), guarded by `lock` like the connection.
    private var plans = DecodedJSONCache<Plan>(capacity: 2048)
    private var sources = DecodedJSONCache<SourceRecord>(capacity: 2048)
    /// Requests as bound: `bind` answers with the reference it just wrote.
    private var requests = DecodedJSONCache<PrepareRequest>(capacity: 2048)
    /// Every request for a known source reads its probe back: a MediaInfo decode was a
    /// tenth of a request's CPU.
    private var probes = DecodedJSONCache<MediaInfo>(capacity: 1024)
    /// Writers that arrive while a commit is in flight share the next one (group commit):
    /// with `synchronous=FULL` each commit costs an fsync, so concurrent callers pay one
    /// between them instead of one each. A lone caller commits at once, as before.
    private let commits = GroupCommit()
    /// With `.full`: fsyncs the log after each batch, outside `lock`; nil with `.processCrash`.
    private let flusher: LogFlusher?
    public let path: String
    /// The database's folder with a trailing slash (nil in memory). Owned files below it
    /// are stored relative to it (`artifacts/<id>.mp4`), so a data directory that is moved,
    /// restored from a backup or copied serves and collects its own files, not those at
    /// the path it was first made at.
    private let fileBase: String?

    /// How far a committed transaction survives.
    public enum Durability: Sendable {
        /// Every commit is fsynced before the store answers, so it survives a power cut too.
        /// The fsync runs outside the connection (`LogFlusher`), so the next transactions
        /// proceed meanwhile and one fsync covers all of them.
        case full
        /// `synchronous=NORMAL` in WAL mode: a commit survives a killed process; a power
        /// cut may lose the last commits (never corrupts). About twice the throughput on
        /// disks with slow fsync (`KILN_SQLITE_SYNC=normal`).
        case processCrash
    }

    /// Opens (creating if needed) the store at `path`; ":memory:" for a throwaway store.
    public convenience init(path: String, durability: Durability = .full) throws(KilnError) {
        try self.init(path: path, durability: durability, logSync: { fdatasync($0) })
    }

    /// `logSync` stands in for fdatasync of the log (tests of the durability path).
    init(path: String, durability: Durability, logSync: @escaping @Sendable (Int32) -> Int32) throws(KilnError) {
        let db = try Database(path: path)
        try db.executeScript("PRAGMA foreign_keys = ON")
        guard try db.queryOne("PRAGMA foreign_keys", map: { $0.int(0) }) == 1 else {
            throw KilnError(.internalError, stage: .open, "SQLite refused to enforce foreign keys")
        }
        let mode = try db.queryOne("PRAGMA journal_mode = WAL", map: { $0.string(0).lowercased() })
        // An in-memory database has no file to keep a log beside; it answers "memory".
        if path != ":memory:" && mode != "wal" {
            throw KilnError(.ioError, stage: .open, "SQLite could not switch \(path) to WAL mode (journal_mode is \(mode ?? "unknown"))")
        }
        if path != ":memory:" { try Self.checkIntegrity(db, path: path) }
        // NORMAL in both cases: with `.full` the store fsyncs the log itself (LogFlusher).
        try db.executeScript("PRAGMA synchronous = NORMAL")
        // SQLite's default page cache is 2 MiB; a farm's working set (every live artifact,
        // reference and job, and the indexes over them) outgrows it at a few thousand
        // artifacts, and then every transaction reads its pages again.
        try db.executeScript("PRAGMA cache_size = -65536")
        try Schema.migrate(db)
        self.db = db
        self.path = path
        fileBase = path == ":memory:" ? nil
            : URL(fileURLWithPath: path).standardizedFileURL.deletingLastPathComponent().path + "/"
        let flusher = durability == .full && path != ":memory:" ? LogFlusher(databasePath: path, sync: logSync) : nil
        // Whatever the migration wrote, and the log's own name, are durable before any call.
        if let flusher { try flusher.waitDurable(flusher.committedOne()) }
        self.flusher = flusher
        // A database this user cannot write (its file read-only to it) opens and reads,
        // BEGIN and COMMIT pass, and every statement that writes fails: a daemon started on
        // one said it was ready and refused every request. Said here, at open, where an
        // operator looks. (A file system gone read-only later fails its commits: store_failing.)
        do throws(KilnError) {
            lock.lock()
            defer { lock.unlock() }
            try checkWritableLocked(now: SystemClock().nowMillis())
        } catch {
            throw KilnError(.ioError, stage: .open, underlying: error.underlying,
                            "the database \(path) cannot be written (\(error.message)): make it, its -wal and -shm files and its folder writable by this user")
        }
    }

    public var broken: KilnError? { flusher?.failed }

    /// The last transaction's failure (the file locked by another program past the busy
    /// timeout, a file system gone read-only, an I/O error), cleared by the next commit.
    /// Kept apart from `lock` so a readiness check never waits behind a transaction.
    private let health = NSLock()
    private var lastWriteFailure: KilnError?

    public var writeFailure: KilnError? { health.lock(); defer { health.unlock() }; return lastWriteFailure }

    private func wrote(_ failure: KilnError?) {
        health.lock()
        lastWriteFailure = failure
        health.unlock()
    }

    /// A check that waits for the connection held by another call (a claim waiting out the
    /// busy timeout behind another program's lock) no longer than this; a readiness write's
    /// own busy timeout is as short. A balancer's probe gives up after a second or two: an
    /// answer that took the 5 s busy timeout twice was no answer.
    static let readinessWait = 0.5

    public func readiness(now: Int64) -> StoreReadiness {
        guard lock.lock(before: Date(timeIntervalSinceNow: Self.readinessWait)) else {
            // Most likely that call is waiting for the same lock the last write failed on.
            return writeFailure.map { .failingWrites($0) } ?? .busy
        }
        defer { lock.unlock() }
        do throws(KilnError) {
            _ = try db.inTransaction(immediate: false) { () throws(KilnError) in
                try db.queryOne("SELECT count(*) FROM kv", map: { $0.int64(0) })
            }
        } catch {
            return .unreadable(error)
        }
        guard writeFailure != nil else { return .ready }
        do throws(KilnError) {
            try db.waitingForLocks(upTo: Int32(Self.readinessWait * 1000)) { () throws(KilnError) in
                try checkWritableLocked(now: now)
            }
        } catch {
            wrote(error)
            return .failingWrites(error)
        }
        wrote(nil)
        return .ready
    }

    /// The readiness write, with the connection held. Durable with the next commit's fsync:
    /// a crash may lose it, and nothing depends on it.
    private func checkWritableLocked(now: Int64) throws(KilnError) {
        try db.inTransaction { () throws(KilnError) in
            try db.execute("""
                INSERT INTO kv (name, value) VALUES ('write_checked_at', ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """, now)
        }
        _ = flusher?.committedOne()
    }

    /// A damaged page shows only when something reads it: a job's row weeks later, failing
    /// that job with a database error while the rest goes on. Checked at open (SQLite's
    /// quick check: every page and row, not the indexes' contents; about a second for a
    /// farm of tens of thousands of artifacts), the daemon does not start on it and says
    /// what to do.
    static func checkIntegrity(_ db: Database, path: String) throws(KilnError) {
        let problems: [String]
        do {
            // (Its lines say where: "*** in database main ***\nPage 14: …"; one line here.)
            problems = try db.query("PRAGMA quick_check(3)") { $0.string(0).split(separator: "\n").joined(separator: " ") }
        } catch { problems = [error.message] }
        guard problems != ["ok"] else { return }
        throw KilnError(.ioError, stage: .open, "the database \(path) is damaged (\(problems.joined(separator: "; "))): "
                        + "restore it from a backup, or move it and its -wal file aside to start with an empty one")
    }

    /// The id an artifact with this key has.
    public static func artifactID(forKey key: String) -> String { "a_" + key.prefix(24) }

    /// Whether `id` has the shape `artifactID(forKey:)` gives (`a_` and 24 hex digits):
    /// a file so named in the artifact folder is Kiln's, whatever the rows say.
    public static func isArtifactID(_ id: String) -> Bool {
        let digits = id.utf8.dropFirst(2)
        return id.hasPrefix("a_") && digits.count == 24 && digits.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// A file's path as its row holds it: relative to the database's folder when Kiln owns
    /// it and it lies below that folder; as given otherwise (a source delivered as it is).
    private func storedPath(_ path: String, owned: Bool) -> String {
        guard owned, let base = fileBase, path.hasPrefix(base), path.count > base.count else { return path }
        return String(path.dropFirst(base.count))
    }

    /// A row's path as callers use it: absolute, relative ones taken from the database's folder.
    private func resolvedPath(_ stored: String) -> String {
        guard !stored.hasPrefix("/"), let base = fileBase else { return stored }
        return base + stored
    }

    // MARK: Plumbing

    /// `durable: false` is for writes a crash may lose without anyone having been misled:
    /// what happens to a running job (claim, lease renewal, its outcome). The daemon that
    /// made them dies with its children, and after a restart the job is queued or rescued
    /// again, as if the crash had come a moment earlier. Their caller does not wait for the
    /// log's fsync; the next durable write's fsync covers them (the log is written in
    /// order). Nobody learns of them before they are durable: a read that sees them waits
    /// for that fsync, and events are only ever announced by reading them back.
    @discardableResult
    private func write<T>(durable: Bool = true, _ body: (Database) throws(KilnError) -> T) throws(KilnError) -> T {
        try withoutActuallyEscaping(body) { (body) throws(KilnError) -> T in
            let outcome = WriteOutcome<T>()
            let item = PendingWrite(durable: durable) { db in
                // Each write is its own savepoint inside the shared transaction, so one
                // that fails is undone alone and the others still commit.
                do throws(KilnError) {
                    try db.execute("SAVEPOINT kiln_write")
                    do throws(KilnError) {
                        outcome.result = .success(try body(db))
                        try db.execute("RELEASE kiln_write")
                    } catch {
                        _ = try? db.execute("ROLLBACK TO kiln_write")
                        _ = try? db.execute("RELEASE kiln_write")
                        throw error
                    }
                } catch {
                    outcome.result = .failure(error)
                }
            } failAll: { error in outcome.result = .failure(error) }
            commits.submit(item) { batch in self.commit(batch) }
            guard let result = outcome.result else {
                throw KilnError(.internalError, stage: .write, "a store write finished without a result")
            }
            return try result.get()
        }
    }

    /// Runs a batch of writes in one transaction: one commit for all of them. Returns what
    /// must happen before the batch may be told it is done — the fsync that makes it
    /// durable, which runs after the connection is free for the next batch — or nil when
    /// nothing must (no durable write in the batch, or no log to sync).
    private func commit(_ batch: [PendingWrite]) -> (() -> Void)? {
        let generation = commitLocked(batch)
        guard batch.contains(where: { $0.durable }), let generation, let flusher else { return nil }
        return {
            do throws(KilnError) {
                try flusher.waitDurable(generation)
            } catch {
                // Committed but not durable: nobody may be told it happened.
                for item in batch { item.failAll(error) }
            }
        }
    }

    /// The transaction itself, with the connection held; the commit's generation when it
    /// committed.
    private func commitLocked(_ batch: [PendingWrite]) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        // Each write's closure is released as soon as it has run (or cannot): its caller
        // returns the moment it is signalled, and the closure must not outlive that
        // (`withoutActuallyEscaping` checks).
        do {
            try db.execute("BEGIN IMMEDIATE")
        } catch {
            wrote(error)
            for item in batch { item.run = nil; item.failAll(error) }
            return nil
        }
        for item in batch {
            // Some errors (disk full, I/O) make SQLite roll the whole transaction back by
            // itself; then nothing of this batch is kept and every write must say so.
            guard sqlite3_get_autocommit(db.handle) == 0 else {
                let lost = KilnError(.ioError, stage: .write, "the store's transaction was rolled back; nothing was written")
                wrote(lost)
                for other in batch { other.run = nil; other.failAll(lost) }
                return nil
            }
            item.run?(db)
            item.run = nil
        }
        guard sqlite3_get_autocommit(db.handle) == 0 else {
            let lost = KilnError(.ioError, stage: .write, "the store's transaction was rolled back; nothing was written")
            wrote(lost)
            for item in batch { item.failAll(lost) }
            return nil
        }
        do {
            try db.execute("COMMIT")
        } catch {
            if sqlite3_get_autocommit(db.handle) == 0 { _ = try? db.execute("ROLLBACK") }
            wrote(error)
            for item in batch { item.failAll(error) }
            return nil
        }
        wrote(nil)
        return flusher?.committedOne()
    }

    /// Reads also run in one transaction, so a record's rows (artifact, references, job,
    /// errors) come from one snapshot even if another process writes.
    /// A read answers only once everything it could see is durable: it waits for the
    /// fsync in flight, if any (see `LogFlusher`).
    private func read<T>(_ body: (Database) throws(KilnError) -> T) throws(KilnError) -> T {
        lock.lock()
        let seen = flusher?.visible()
        let result: T
        do {
            result = try db.inTransaction(immediate: false) { () throws(KilnError) -> T in try body(db) }
        } catch {
            lock.unlock()
            throw error
        }
        lock.unlock()
        if let flusher, let seen { try flusher.waitDurable(seen) }
        return result
    }

    // MARK: Intake

    public func bind(request: PrepareRequest, plan: Plan, source: SourceRecord, estimatedBytes: Int64, maxAttempts: Int,
                     originalFile: FileRecord?, now: Int64) throws(KilnError) -> Binding {
        let isOriginal = plan.deliveryFormat == .original
        if isOriginal && originalFile == nil {
            throw KilnError(.internalError, stage: .request, "an original delivery is bound with its file, the source")
        }
        guard !request.reference.isEmpty else {
            throw KilnError(.usage, stage: .request, field: "reference", "reference must not be empty")
        }
        let requestJSON = try encodeJSON(request)
        let planJSON = try encodeJSON(plan)
        let sourceJSON = try encodeJSON(source)
        let file = isOriginal ? originalFile : nil
        let maxAttempts = max(1, maxAttempts)

        return try write { db throws(KilnError) -> Binding in
            // The text just encoded decodes to the values at hand: no need to parse it back.
            plans.remember(planJSON, plan)
            sources.remember(sourceJSON, source)
            requests.remember(requestJSON, request)
            var enqueued = false
            let found = try db.queryOne("SELECT id, state FROM artifacts WHERE key = ?", plan.artifactKey) { row throws(KilnError) in
                (row.string(0), try parse(ArtifactState.self, row.string(1)))
            }
            let artifactID = found?.0 ?? Self.artifactID(forKey: plan.artifactKey)
            switch found?.1 {
            case nil:
                try db.execute("""
                    INSERT INTO artifacts (id, key, state, delivery_format, plan, source, source_fingerprint, estimated_bytes,
                        file_path, file_bytes, file_sha256, file_owned, created_at, updated_at, ready_at, last_used_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, artifactID, plan.artifactKey, isOriginal ? "ready" : "pending", plan.deliveryFormat.rawValue,
                    planJSON, sourceJSON, source.fingerprint, estimatedBytes, file.map { storedPath($0.path, owned: $0.owned) },
                    file?.bytes, file?.sha256, file?.owned ?? false, now, now, isOriginal ? now : nil, now)
                if !isOriginal {
                    try requeueFresh(db, artifactID: artifactID, kind: JobKind(deliveryFormat: plan.deliveryFormat),
                                     priority: request.priority, maxAttempts: maxAttempts, now: now)
                    enqueued = true
                }
            case .pending?:
                // A person now waits for a job a background sync asked for: serve it first.
                // It joins the line of its new priority at the back: people who asked before
                // it was promoted are not passed by a job queued long ago in the background.
                try db.execute("""
                    UPDATE jobs SET priority = ?, priority_rank = ?, queued_at = MAX(queued_at, ?)
                    WHERE artifact_id = ? AND state IN ('queued', 'retrying') AND priority_rank > ?
                    """, request.priority.rawValue, request.priority.rank, now, artifactID, request.priority.rank)
                // The job reads the source where it was last asked for (the same content: the
                // key says so): the first caller's copy may have been renamed or deleted since.
                try db.execute("UPDATE artifacts SET source = ? WHERE id = ?", sourceJSON, artifactID)
            case .ready?:
                break
            case .failed?, .canceled?, .deleting?:
                // Made again from the request at hand (the source may have moved since).
                try db.execute("""
                    UPDATE artifacts SET plan = ?, delivery_format = ?, source = ?, source_fingerprint = ?, estimated_bytes = ?,
                        file_path = ?, file_bytes = ?, file_sha256 = ?, file_owned = ?, file_ffmpeg_equivalent = NULL, file_description = NULL, ready_at = ?,
                        state = ?, updated_at = ?
                    WHERE id = ?
                    """, planJSON, plan.deliveryFormat.rawValue, sourceJSON, source.fingerprint, estimatedBytes,
                    file.map { storedPath($0.path, owned: $0.owned) }, file?.bytes, file?.sha256, file?.owned ?? false,
                    isOriginal ? now : nil, isOriginal ? "ready" : "pending", now, artifactID)
                if !isOriginal {
                    try requeueFresh(db, artifactID: artifactID, kind: JobKind(deliveryFormat: plan.deliveryFormat),
                                     priority: request.priority, maxAttempts: maxAttempts, now: now)
                    enqueued = true
                }
            }

            var movedFrom: String?
            let previous = try db.queryOne("SELECT artifact_id, request FROM artifact_references WHERE reference = ?",
                                           request.reference) { row in (row.string(0), row.string(1)) }
            if let previous {
                if previous.0 != artifactID {
                    try db.execute("""
                        UPDATE artifact_references SET artifact_id = ?, request = ?, plan = ?, revision = revision + 1, updated_at = ?
                        WHERE reference = ?
                        """, artifactID, requestJSON, planJSON, now, request.reference)
                    movedFrom = previous.0
                    // The reference lives on, on the new artifact: the old one's cancel
                    // event names nobody (a caller mapping events to its rows by reference
                    // would mark a row failed that is preparing).
                    try lastReferenceMayBeGone(db, artifactID: previous.0, released: nil, now: now)
                } else if previous.1 != requestJSON {
                    try db.execute("UPDATE artifact_references SET request = ?, plan = ?, updated_at = ? WHERE reference = ?",
                                   requestJSON, planJSON, now, request.reference)
                }
            } else {
                try db.execute("""
                    INSERT INTO artifact_references (reference, artifact_id, request, plan, revision, created_at, updated_at)
                    VALUES (?, ?, ?, ?, 1, ?, ?)
                    """, request.reference, artifactID, requestJSON, planJSON, now, now)
            }
            try db.execute("""
                UPDATE artifacts SET last_used_at = MAX(last_used_at, ?), unreferenced_since = NULL WHERE id = ?
                """, now, artifactID)

            guard let reference = try loadReference(db, request.reference),
                  let artifact = try loadArtifact(db, id: artifactID) else {
                throw KilnError(.internalError, stage: .write, "the artifact \(artifactID) vanished while binding")
            }
            return Binding(reference: reference, artifact: artifact, enqueued: enqueued, movedFrom: movedFrom)
        }
    }

    public func reference(_ reference: String) throws(KilnError) -> ReferenceRecord? {
        try read { db throws(KilnError) in try loadReference(db, reference) }
    }

    public func release(reference: String, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            guard let artifactID = try db.queryOne("SELECT artifact_id FROM artifact_references WHERE reference = ?",
                                                   reference, map: { $0.string(0) }) else { return false }
            try db.execute("DELETE FROM artifact_references WHERE reference = ?", reference)
            try lastReferenceMayBeGone(db, artifactID: artifactID, released: reference, now: now)
            return true
        }
    }

    public func artifact(id: String) throws(KilnError) -> ArtifactRecord? {
        try read { db throws(KilnError) in try loadArtifact(db, id: id) }
    }

    public func references(of artifactID: String) throws(KilnError) -> [String] {
        try read { db throws(KilnError) in try currentReferences(db, artifactID) }
    }

    public func touch(artifactID: String, now: Int64) throws(KilnError) {
        try write { db throws(KilnError) in
            try db.execute("UPDATE artifacts SET last_used_at = MAX(last_used_at, ?) WHERE id = ?", now, artifactID)
        }
    }

    // MARK: Probe cache

    public func cachedProbe(fingerprint: String) throws(KilnError) -> MediaInfo? {
        try read { db throws(KilnError) -> MediaInfo? in
            let text = try db.queryOne("SELECT info FROM probe_cache WHERE fingerprint = ?", fingerprint) { $0.string(0) }
            return try text.map { t throws(KilnError) in try probes.decode(t) }
        }
    }

    public func cacheProbe(_ info: MediaInfo, fingerprint: String, now: Int64) throws(KilnError) {
        let text = try encodeJSON(info)
        try write { db throws(KilnError) in
            try db.execute("""
                INSERT INTO probe_cache (fingerprint, info, cached_at) VALUES (?, ?, ?)
                ON CONFLICT (fingerprint) DO UPDATE SET info = excluded.info, cached_at = excluded.cached_at
                """, fingerprint, text, now)
        }
    }

    // MARK: Scheduling

    /// - Parameter skipping: jobs left in line for now (waiting for disk space while those
    ///   behind them that fit go ahead).
    public func claim(kind: JobKind, limit: Int, owner: String, leaseUntil: Int64, now: Int64,
                      skipping: [Int64] = []) throws(KilnError) -> [ClaimedJob] {
        guard limit > 0 else { return [] }
        let skipped = "[" + skipping.map(String.init).joined(separator: ",") + "]"
        return try write(durable: false) { db throws(KilnError) -> [ClaimedJob] in
            // One statement: nothing can claim the same row in between. The redundant
            // `state IN (…)` term matches the partial index's condition so SQLite uses it.
            let jobs = try db.query("""
                UPDATE jobs SET state = 'running', lease_owner = ?, lease_expires_at = ?, attempt = attempt + 1,
                    started_at = ?, finished_at = NULL, progress = NULL, waiting_reason = NULL
                WHERE id IN (
                    SELECT id FROM jobs
                    WHERE kind = ? AND state IN ('queued', 'retrying') AND (state = 'queued' OR run_after <= ?)
                        AND id NOT IN (SELECT value FROM json_each(?))
                    ORDER BY priority_rank, queued_at, id LIMIT ?)
                RETURNING \(Self.jobColumns)
                """, owner, leaseUntil, now, kind.rawValue, now, skipped, limit, map: jobRecord)
            let ordered = jobs.sorted { ($0.priority.rank, $0.queuedAt, $0.id) < ($1.priority.rank, $1.queuedAt, $1.id) }
            var claimed: [ClaimedJob] = []
            for job in ordered {
                let parts = try db.queryOne("SELECT plan, source, estimated_bytes FROM artifacts WHERE id = ?",
                                            job.artifactID) { row throws(KilnError) in
                    (try plans.decode(row.string(0)), try sources.decode(row.string(1)), row.int64(2))
                }
                guard let parts else {
                    throw KilnError(.internalError, stage: .write, "job \(job.id) has no artifact \(job.artifactID)")
                }
                claimed.append(ClaimedJob(job: job, plan: parts.0, source: parts.1, estimatedBytes: parts.2))
            }
            return claimed
        }
    }

    public func heartbeat(jobID: Int64, owner: String, leaseUntil: Int64, progress: JobProgress?, now: Int64) throws(KilnError) -> Bool {
        let progressJSON = try progress.map { p throws(KilnError) in try encodeJSON(p) }
        return try write(durable: false) { db throws(KilnError) -> Bool in
            try db.execute("""
                UPDATE jobs SET lease_expires_at = ?, progress = COALESCE(?, progress)
                WHERE id = ? AND state = 'running' AND lease_owner = ?
                """, leaseUntil, progressJSON, jobID, owner) > 0
        }
    }

    public func complete(jobID: Int64, owner: String, file: FileRecord, deliveredPlan: Plan?, now: Int64) throws(KilnError) -> Bool {
        let deliveredJSON = try deliveredPlan.map { p throws(KilnError) in try encodeJSON(p) }
        let equivalentJSON = try file.ffmpegEquivalent.map { e throws(KilnError) in try encodeJSON(e) }
        let descriptionJSON = try file.description.map { d throws(KilnError) in try encodeJSON(d) }
        return try write(durable: false) { db throws(KilnError) -> Bool in
            guard let artifactID = try db.queryOne("""
                UPDATE jobs SET state = 'succeeded', lease_owner = NULL, lease_expires_at = NULL, finished_at = ?,
                    waiting_reason = NULL
                WHERE id = ? AND state = 'running' AND lease_owner = ?
                RETURNING artifact_id
                """, now, jobID, owner, map: { $0.string(0) }) else { return false }
            // A ready artifact that nobody holds (an operator retried it) starts its retention now.
            let changed = try db.execute("""
                UPDATE artifacts SET state = 'ready', file_path = ?, file_bytes = ?, file_sha256 = ?, file_owned = ?,
                    file_ffmpeg_equivalent = ?, file_description = ?, ready_at = ?, updated_at = ?, last_used_at = MAX(last_used_at, ?),
                    unreferenced_since = CASE WHEN EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = artifacts.id)
                                              THEN NULL ELSE ? END
                WHERE id = ? AND state = 'pending'
                """, storedPath(file.path, owned: file.owned), file.bytes, file.sha256, file.owned, equivalentJSON, descriptionJSON,
                now, now, now, now, artifactID)
            guard changed == 1 else {
                throw KilnError(.internalError, stage: .finalize, "job \(jobID) succeeded but its artifact \(artifactID) is not pending")
            }
            if let deliveredJSON {
                // The output is not what the plan said (a copy the engine had to re-encode):
                // the artifact says what it is, and its references answer with it.
                try db.execute("UPDATE artifacts SET plan = ?, delivery_format = ? WHERE id = ?",
                               deliveredJSON, deliveredPlan!.deliveryFormat.rawValue, artifactID)
                try db.execute("UPDATE artifact_references SET plan = NULL WHERE artifact_id = ?", artifactID)
            }
            try insertEvent(db, .ready, artifactID: artifactID, references: nil, error: nil, now: now)
            return true
        }
    }

    public func fail(jobID: Int64, owner: String, error: AttemptError, retryAt: Int64?, now: Int64) throws(KilnError) -> Bool {
        try write(durable: false) { db throws(KilnError) -> Bool in
            guard let (artifactID, attempt) = try db.queryOne("""
                SELECT artifact_id, attempt FROM jobs WHERE id = ? AND state = 'running' AND lease_owner = ?
                """, jobID, owner, map: { ($0.string(0), $0.int(1)) }) else { return false }
            var error = error
            error.attempt = attempt
            try insertError(db, jobID: jobID, error: error)
            if let retryAt {
                try db.execute("""
                    UPDATE jobs SET state = 'retrying', run_after = ?, lease_owner = NULL, lease_expires_at = NULL, progress = NULL
                    WHERE id = ?
                    """, retryAt, jobID)
            } else {
                try failJob(db, jobID: jobID, artifactID: artifactID, error: error, now: now)
            }
            return true
        }
    }

    public func requeue(jobID: Int64, owner: String, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            // queued_at is kept: the job goes back to its old place in line. Its next attempt
            // starts from nothing, so the last one's progress goes (a caller saw 28 % while
            // it waited).
            try db.execute("""
                UPDATE jobs SET state = 'queued', attempt = MAX(attempt - 1, 0), lease_owner = NULL, lease_expires_at = NULL,
                    started_at = NULL, run_after = ?, waiting_reason = NULL, progress = NULL
                WHERE id = ? AND state = 'running' AND lease_owner = ?
                """, now, jobID, owner) > 0
        }
    }

    public func rescueExpiredLeases(now: Int64) throws(KilnError) -> Int {
        try rescue(leasesBefore: now, now: now) { owner, expiredAt in
            ("lease_expired", "the lease of \(owner) expired at \(RFC3339.string(millis: expiredAt)) without a heartbeat")
        }
    }

    public func rescueInterruptedJobs(now: Int64) throws(KilnError) -> Int {
        try rescue(leasesBefore: Int64.max, now: now, givesBack: true) { owner, _ in
            ("interrupted", "the daemon running it (\(owner)) stopped before it finished")
        }
    }

    /// Running jobs whose lease ends before `cutoff` become `retrying` due now, or `failed`
    /// after their last attempt, each with the error `describe` gives (code, message).
    ///
    /// `givesBack`: the attempt is not counted. A daemon that stopped (a crash, the OOM
    /// killer, a power cut) says nothing of the job, which ran in its own child: counted,
    /// a farm restarted four times during a long encode failed it for good. A job is still
    /// failed after as many such stops in a row as it has attempts (the error rows of its
    /// current attempt since it was last queued afresh say so), so one that takes the
    /// machine down with it does not run for ever.
    private func rescue(leasesBefore cutoff: Int64, now: Int64, givesBack: Bool = false,
                        _ describe: (_ owner: String, _ expiredAt: Int64) -> (String, String)) throws(KilnError) -> Int {
        try write { db throws(KilnError) -> Int in
            let expired = try db.query("""
                SELECT id, artifact_id, attempt, max_attempts, lease_owner, lease_expires_at, COALESCE(asked_at, queued_at) FROM jobs
                WHERE state = 'running' AND lease_expires_at < ?
                ORDER BY id
                """, cutoff) { row in
                (id: row.int64(0), artifactID: row.string(1), attempt: row.int(2), maxAttempts: row.int(3),
                 owner: row.string(4), expiredAt: row.int64(5), askedAt: row.int64(6))
            }
            for job in expired {
                let (code, message) = describe(job.owner, job.expiredAt)
                let error = AttemptError(attempt: job.attempt, code: code, stage: "run", message: message, at: now)
                let stopsInARow = givesBack ? try db.queryOne("""
                    SELECT COUNT(*) FROM job_errors WHERE job_id = ? AND attempt = ? AND code = ? AND at >= ?
                    """, job.id, job.attempt, code, job.askedAt, map: { $0.int(0) }) ?? 0 : 0
                try insertError(db, jobID: job.id, error: error)
                let spent = givesBack ? stopsInARow + 1 >= job.maxAttempts : job.attempt >= job.maxAttempts
                if spent {
                    try failJob(db, jobID: job.id, artifactID: job.artifactID, error: error, now: now)
                } else {
                    try db.execute("""
                        UPDATE jobs SET state = 'retrying', run_after = ?, lease_owner = NULL, lease_expires_at = NULL, progress = NULL,
                            attempt = CASE WHEN ? THEN MAX(attempt - 1, 0) ELSE attempt END
                        WHERE id = ?
                        """, now, givesBack, job.id)
                }
            }
            return expired.count
        }
    }

    public func setWaiting(jobID: Int64, reason: String?) throws(KilnError) {
        try write { db throws(KilnError) in
            try db.execute("UPDATE jobs SET waiting_reason = ? WHERE id = ? AND state IN ('queued', 'retrying')", reason, jobID)
        }
    }

    public func cancel(artifactID: String, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            try cancelUnfinished(db, artifactID: artifactID, eventReferences: nil, now: now)
        }
    }

    public func retry(artifactID: String, maxAttempts: Int, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            guard let format = try db.queryOne("""
                SELECT delivery_format FROM artifacts WHERE id = ? AND state IN ('failed', 'canceled')
                """, artifactID, map: { $0.string(0) }) else { return false }
            let deliveryFormat = try parse(DeliveryFormat.self, format)
            let priority = try db.queryOne("SELECT priority FROM jobs WHERE artifact_id = ?", artifactID) { row throws(KilnError) in
                try parse(Priority.self, row.string(0))
            }
            try requeueFresh(db, artifactID: artifactID, kind: JobKind(deliveryFormat: deliveryFormat),
                             priority: priority ?? .interactive, maxAttempts: max(1, maxAttempts), now: now)
            try db.execute("UPDATE artifacts SET state = 'pending', updated_at = ? WHERE id = ?", now, artifactID)
            return true
        }
    }

    // MARK: Events

    public func events(after: Int64, limit: Int) throws(KilnError) -> [EventRecord] {
        guard limit > 0 else { return [] }
        return try read { db throws(KilnError) -> [EventRecord] in
            try db.query("""
                SELECT seq, type, artifact_id, status, delivery_format, refs, error, at FROM events
                WHERE seq > ? ORDER BY seq LIMIT ?
                """, after, limit) { row throws(KilnError) -> EventRecord in
                EventRecord(seq: row.int64(0), type: try parse(EventType.self, row.string(1)), artifactID: row.string(2),
                            status: row.string(3), deliveryFormat: try parse(DeliveryFormat.self, row.string(4)),
                            references: try decodeJSON([String].self, row.string(5)),
                            error: try row.optionalString(6).map { t throws(KilnError) in try decodeJSON(AttemptError.self, t) },
                            at: row.int64(7))
            }
        }
    }

    public func collectedAt(artifactID: String) throws(KilnError) -> Int64? {
        try read { db throws(KilnError) -> Int64? in
            try db.queryOne("""
                SELECT at FROM events WHERE artifact_id = ? AND type = 'artifact.deleted' ORDER BY seq DESC LIMIT 1
                """, artifactID) { $0.int64(0) }
        }
    }

    public func forgetUnheldArtifacts(before: Int64) throws(KilnError) -> Int {
        // Their jobs and job errors go with them (ON DELETE CASCADE).
        try deleteInBatches { db, batch throws(KilnError) in
            try db.execute("""
                DELETE FROM artifacts WHERE id IN (
                    SELECT id FROM artifacts a
                    WHERE (state IN ('failed', 'canceled') OR (state = 'ready' AND file_owned = 0))
                      AND MAX(COALESCE(unreferenced_since, last_used_at), updated_at) < ?
                      AND NOT EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = a.id)
                    LIMIT ?)
                """, before, batch)
        }
    }

    public func pruneEvents(before: Int64, deliveredUpTo: Int64?) throws(KilnError) -> Int {
        // Events are written in time order, so the old ones are the first by seq: each batch
        // reads at most a batch of the primary key, never the whole table.
        try deleteInBatches { db, batch throws(KilnError) in
            try db.execute("""
                DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE seq <= ? ORDER BY seq LIMIT ?) AND at < ?
                """, deliveredUpTo ?? Int64.max, batch, before)
        }
    }

    /// Runs `delete` (which removes at most the batch size it is given) until a batch comes
    /// back short, each batch its own transaction: the first pass after an upgrade may find
    /// years of rows, and one long write would hold back every bind and heartbeat. Returns
    /// how many rows went.
    private func deleteInBatches(_ delete: (Database, Int) throws(KilnError) -> Int) throws(KilnError) -> Int {
        var total = 0
        while true {
            let n = try write { db throws(KilnError) -> Int in try delete(db, Self.pruneBatch) }
            total += n
            if n < Self.pruneBatch { return total }
        }
    }

    static let pruneBatch = 5_000

    public func lastEventSeq() throws(KilnError) -> Int64 {
        try read { db throws(KilnError) -> Int64 in
            // sqlite_sequence holds the largest seq ever handed out, even if rows were removed.
            try db.queryOne("SELECT seq FROM sqlite_sequence WHERE name = 'events'", map: { $0.int64(0) }) ?? 0
        }
    }

    public func oldestEventSeq() throws(KilnError) -> Int64? {
        try read { db throws(KilnError) -> Int64? in
            try db.queryOne("SELECT seq FROM events ORDER BY seq LIMIT 1", map: { $0.int64(0) })
        }
    }

    public func webhookPosition() throws(KilnError) -> Int64 {
        try read { db throws(KilnError) -> Int64 in
            try db.queryOne("SELECT value FROM kv WHERE name = 'webhook_position'", map: { $0.int64(0) }) ?? 0
        }
    }

    public func setWebhookPosition(_ seq: Int64) throws(KilnError) {
        try write { db throws(KilnError) in
            try db.execute("""
                INSERT INTO kv (name, value) VALUES ('webhook_position', ?)
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """, seq)
        }
    }

    // MARK: Garbage collection

    public func unreferencedArtifacts(limit: Int) throws(KilnError) -> [ArtifactRecord] {
        guard limit > 0 else { return [] }
        return try read { db throws(KilnError) -> [ArtifactRecord] in
            let ids = try db.query("""
                SELECT id FROM artifacts a INDEXED BY artifacts_unreferenced
                WHERE state = 'ready' AND file_owned = 1 AND unreferenced_since IS NOT NULL
                  AND NOT EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = a.id)
                ORDER BY last_used_at, id LIMIT ?
                """, limit) { $0.string(0) }
            return try loadArtifacts(db, ids: ids)
        }
    }

    public func beginDeleting(artifactID: String, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            try db.execute("""
                UPDATE artifacts SET state = 'deleting', updated_at = ?
                WHERE id = ? AND state = 'ready' AND file_owned = 1
                  AND NOT EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = artifacts.id)
                """, now, artifactID) > 0
        }
    }

    public func finishDeleting(artifactID: String, now: Int64) throws(KilnError) {
        try write { db throws(KilnError) in
            // Only a row still being deleted: a reference that came back made it pending again.
            guard let format = try db.queryOne("SELECT delivery_format FROM artifacts WHERE id = ? AND state = 'deleting'",
                                               artifactID, map: { $0.string(0) }) else { return }
            try db.execute("DELETE FROM jobs WHERE artifact_id = ?", artifactID)
            try db.execute("DELETE FROM artifacts WHERE id = ?", artifactID)
            try insertEvent(db, .deleted, artifactID: artifactID, references: [], error: nil,
                            deliveryFormat: try parse(DeliveryFormat.self, format), now: now)
        }
    }

    public func artifactsBeingDeleted() throws(KilnError) -> [ArtifactRecord] {
        try read { db throws(KilnError) -> [ArtifactRecord] in
            // The redundant IN term lets SQLite see that the partial index covers the query.
            let ids = try db.query("""
                SELECT id FROM artifacts WHERE state = 'deleting' AND state IN ('failed', 'deleting') ORDER BY updated_at, id
                """) { $0.string(0) }
            return try loadArtifacts(db, ids: ids)
        }
    }

    public func ownedFilePaths() throws(KilnError) -> Set<String> {
        try read { db throws(KilnError) -> Set<String> in
            Set(try db.query("SELECT file_path FROM artifacts WHERE file_owned = 1 AND file_path IS NOT NULL") { resolvedPath($0.string(0)) })
        }
    }

    public func heldFiles(owned: Bool) throws(KilnError) -> [(artifactID: String, path: String, bytes: Int64)] {
        try read { db throws(KilnError) in
            try db.query("""
                SELECT id, file_path, file_bytes FROM artifacts
                WHERE state = 'ready' AND file_owned = ? AND unreferenced_since IS NULL
                """, owned) { (artifactID: $0.string(0), path: resolvedPath($0.string(1)), bytes: $0.int64(2)) }
        }
    }

    public func failChangedOriginal(artifactID: String, error: AttemptError, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            let changed = try db.execute("""
                UPDATE artifacts SET state = 'failed', updated_at = ?
                WHERE id = ? AND state = 'ready' AND delivery_format = 'original'
                """, now, artifactID)
            guard changed > 0 else { return false }
            try insertEvent(db, .failed, artifactID: artifactID, references: nil, error: error, now: now)
            return true
        }
    }

    public func requeueLost(artifactID: String, path: String, maxAttempts: Int, now: Int64) throws(KilnError) -> Bool {
        try write { db throws(KilnError) -> Bool in
            guard let format = try db.queryOne("""
                UPDATE artifacts SET state = 'pending', file_path = NULL, file_bytes = NULL, file_sha256 = NULL,
                    file_ffmpeg_equivalent = NULL, file_description = NULL, ready_at = NULL,
                    updated_at = ?
                WHERE id = ? AND state = 'ready' AND file_owned = 1 AND file_path = ? AND unreferenced_since IS NULL
                RETURNING delivery_format
                """, now, artifactID, storedPath(path, owned: true), map: { $0.string(0) }) else { return false }
            let priority = try db.queryOne("SELECT priority FROM jobs WHERE artifact_id = ?", artifactID) { row throws(KilnError) in
                try parse(Priority.self, row.string(0))
            }
            try requeueFresh(db, artifactID: artifactID, kind: JobKind(deliveryFormat: try parse(DeliveryFormat.self, format)),
                             priority: priority ?? .interactive, maxAttempts: max(1, maxAttempts), now: now)
            return true
        }
    }

    public func requestedSourcePaths(artifactID: String) throws(KilnError) -> [String] {
        try read { db throws(KilnError) in
            try db.query("""
                SELECT json_extract(request, '$.source_path') FROM artifact_references
                WHERE artifact_id = ? ORDER BY updated_at DESC, reference
                """, artifactID) { $0.string(0) }
        }
    }

    public func setSourcePath(artifactID: String, path: String) throws(KilnError) {
        try write { db throws(KilnError) in
            try db.execute("UPDATE artifacts SET source = json_set(source, '$.path', ?) WHERE id = ?", path, artifactID)
        }
    }

    public func storedBytes() throws(KilnError) -> (total: Int64, unreferenced: Int64) {
        try read { db throws(KilnError) in try storedBytes(db) }
    }

    // MARK: Status

    public func queueSnapshot(recentFailures: Int, queuedLimit: Int) throws(KilnError) -> QueueSnapshot {
        try read { db throws(KilnError) -> QueueSnapshot in
            var jobsByState: [String: Int] = [:]
            for state in JobState.allCases { jobsByState[state.rawValue] = 0 }
            for (state, count) in try db.query("SELECT state, COUNT(*) FROM jobs GROUP BY state", map: { ($0.string(0), $0.int(1)) }) {
                jobsByState[state] = count
            }
            var artifactsByState: [String: Int] = [:]
            for state in ArtifactState.allCases { artifactsByState[state.rawValue] = 0 }
            for (state, count) in try db.query("SELECT state, COUNT(*) FROM artifacts GROUP BY state", map: { ($0.string(0), $0.int(1)) }) {
                artifactsByState[state] = count
            }
            let running = try db.query("""
                SELECT \(Self.jobColumns) FROM jobs WHERE state = 'running' ORDER BY started_at, id
                """, map: jobRecord)
            // Claim order across kinds: the first `queuedLimit` of each kind (the claim index
            // reads them in order), merged.
            var queued: [JobRecord] = []
            for kind in JobKind.allCases {
                queued += try db.query("""
                    SELECT \(Self.jobColumns) FROM jobs WHERE kind = ? AND state IN ('queued', 'retrying')
                    ORDER BY priority_rank, queued_at, id LIMIT ?
                    """, kind.rawValue, max(0, queuedLimit), map: jobRecord)
            }
            queued.sort { ($0.priority.rank, $0.queuedAt, $0.id) < ($1.priority.rank, $1.queuedAt, $1.id) }
            queued = Array(queued.prefix(max(0, queuedLimit)))
            let failedIDs = try db.query("""
                SELECT id FROM artifacts WHERE state = 'failed' AND state IN ('failed', 'deleting')
                ORDER BY updated_at DESC, id LIMIT ?
                """, max(0, recentFailures)) { $0.string(0) }
            let bytes = try storedBytes(db)
            // Which film each job works on: an operator reading the queue knows films, not ids.
            var sourcePaths: [String: String] = [:]
            for id in Set((running + queued).map(\.artifactID)) {
                if let text = try db.queryOne("SELECT source FROM artifacts WHERE id = ?", id, map: { $0.string(0) }) {
                    sourcePaths[id] = try sources.decode(text).path
                }
            }
            var snapshot = QueueSnapshot(jobsByState: jobsByState, artifactsByState: artifactsByState, running: running,
                                         queued: queued, recentFailures: try loadArtifacts(db, ids: failedIDs),
                                         storedBytes: bytes.total, unreferencedBytes: bytes.unreferenced)
            snapshot.sources = sourcePaths
            return snapshot
        }
    }

    // MARK: Transitions shared by several calls (inside a transaction)

    /// Puts the artifact's one job in line with fresh attempts, creating it if needed.
    private func requeueFresh(_ db: Database, artifactID: String, kind: JobKind, priority: Priority, maxAttempts: Int,
                              now: Int64) throws(KilnError) {
        let changed = try db.execute("""
            UPDATE jobs SET kind = ?, state = 'queued', priority = ?, priority_rank = ?, attempt = 0, max_attempts = ?,
                run_after = ?, lease_owner = NULL, lease_expires_at = NULL, progress = NULL, waiting_reason = NULL,
                queued_at = ?, asked_at = ?, started_at = NULL, finished_at = NULL
            WHERE artifact_id = ?
            """, kind.rawValue, priority.rawValue, priority.rank, maxAttempts, now, now, now, artifactID)
        if changed == 0 {
            try db.execute("""
                INSERT INTO jobs (artifact_id, kind, state, priority, priority_rank, attempt, max_attempts, run_after, queued_at, asked_at)
                VALUES (?, ?, 'queued', ?, ?, 0, ?, ?, ?, ?)
                """, artifactID, kind.rawValue, priority.rawValue, priority.rank, maxAttempts, now, now, now)
        }
    }

    /// After a reference left `artifactID`: if none is left, an unfinished job is canceled
    /// (its event names `released`, the holder that let go, when it is gone; nobody when it
    /// moved to another artifact) and retention starts.
    private func lastReferenceMayBeGone(_ db: Database, artifactID: String, released: String?, now: Int64) throws(KilnError) {
        let remaining = try db.queryOne("SELECT COUNT(*) FROM artifact_references WHERE artifact_id = ?", artifactID) { $0.int(0) } ?? 0
        guard remaining == 0 else { return }
        _ = try cancelUnfinished(db, artifactID: artifactID, eventReferences: released.map { [$0] } ?? [], now: now)
        try db.execute("UPDATE artifacts SET unreferenced_since = ? WHERE id = ? AND unreferenced_since IS NULL", now, artifactID)
    }

    /// Cancels the artifact's job if it is not finished; `eventReferences` nil means the
    /// artifact's current references.
    private func cancelUnfinished(_ db: Database, artifactID: String, eventReferences: [String]?, now: Int64) throws(KilnError) -> Bool {
        let changed = try db.execute("""
            UPDATE jobs SET state = 'canceled', lease_owner = NULL, lease_expires_at = NULL, waiting_reason = NULL,
                finished_at = ?
            WHERE artifact_id = ? AND state IN ('queued', 'running', 'retrying')
            """, now, artifactID)
        guard changed > 0 else { return false }
        try db.execute("UPDATE artifacts SET state = 'canceled', updated_at = ? WHERE id = ? AND state = 'pending'", now, artifactID)
        try insertEvent(db, .canceled, artifactID: artifactID, references: eventReferences, error: nil, now: now)
        return true
    }

    private func failJob(_ db: Database, jobID: Int64, artifactID: String, error: AttemptError, now: Int64) throws(KilnError) {
        try db.execute("""
            UPDATE jobs SET state = 'failed', lease_owner = NULL, lease_expires_at = NULL, finished_at = ? WHERE id = ?
            """, now, jobID)
        try db.execute("UPDATE artifacts SET state = 'failed', updated_at = ? WHERE id = ? AND state = 'pending'", now, artifactID)
        try insertEvent(db, .failed, artifactID: artifactID, references: nil, error: error, now: now)
    }

    private func insertError(_ db: Database, jobID: Int64, error: AttemptError) throws(KilnError) {
        try db.execute("INSERT INTO job_errors (job_id, attempt, code, error, at) VALUES (?, ?, ?, ?, ?)",
                       jobID, error.attempt, error.code, try encodeJSON(error), error.at)
    }

    /// Writes an event in the caller's transaction; `references` nil means the artifact's current ones.
    private func insertEvent(_ db: Database, _ type: EventType, artifactID: String, references: [String]?, error: AttemptError?,
                             deliveryFormat: DeliveryFormat? = nil, now: Int64) throws(KilnError) {
        let refs: [String]
        if let references { refs = references } else { refs = try currentReferences(db, artifactID) }
        let format: DeliveryFormat
        if let deliveryFormat {
            format = deliveryFormat
        } else {
            guard let text = try db.queryOne("SELECT delivery_format FROM artifacts WHERE id = ?", artifactID, map: { $0.string(0) }) else {
                throw KilnError(.internalError, stage: .write, "event for unknown artifact \(artifactID)")
            }
            format = try parse(DeliveryFormat.self, text)
        }
        let status: String = switch type {
        case .ready: ArtifactState.ready.status
        case .failed: ArtifactState.failed.status
        case .canceled: ArtifactState.canceled.status
        case .deleted, .progress: ArtifactState.deleting.status
        }
        guard type != .progress else {
            throw KilnError(.internalError, stage: .write, "progress events are live only and never stored")
        }
        try db.execute("""
            INSERT INTO events (type, artifact_id, status, delivery_format, refs, error, at) VALUES (?, ?, ?, ?, ?, ?, ?)
            """, type.rawValue, artifactID, status, format.rawValue, try encodeJSON(refs),
            try error.map { e throws(KilnError) in try encodeJSON(e) }, now)
    }

    // MARK: Reading records (inside a transaction)

    static let jobColumns = """
        id, artifact_id, kind, state, priority, attempt, max_attempts, run_after, lease_owner, lease_expires_at, \
        progress, waiting_reason, queued_at, started_at, finished_at, COALESCE(asked_at, queued_at)
        """

    private func currentReferences(_ db: Database, _ artifactID: String) throws(KilnError) -> [String] {
        try db.query("SELECT reference FROM artifact_references WHERE artifact_id = ? ORDER BY reference", artifactID) { $0.string(0) }
    }

    private func loadReference(_ db: Database, _ reference: String) throws(KilnError) -> ReferenceRecord? {
        try db.queryOne("""
            SELECT request, artifact_id, revision, created_at, updated_at, plan FROM artifact_references WHERE reference = ?
            """, reference) { row throws(KilnError) -> ReferenceRecord in
            ReferenceRecord(request: try requests.decode(row.string(0)), artifactID: row.string(1),
                            revision: row.int(2), createdAt: row.int64(3), updatedAt: row.int64(4),
                            plan: try row.optionalString(5).map { json throws(KilnError) in try plans.decode(json) })
        }
    }

    private func loadArtifacts(_ db: Database, ids: [String]) throws(KilnError) -> [ArtifactRecord] {
        var out: [ArtifactRecord] = []
        for id in ids { if let a = try loadArtifact(db, id: id) { out.append(a) } }
        return out
    }

    private func loadArtifact(_ db: Database, id: String) throws(KilnError) -> ArtifactRecord? {
        let base = try db.queryOne("""
            SELECT id, key, state, plan, source, estimated_bytes, file_path, file_bytes, file_sha256, file_owned,
                created_at, updated_at, ready_at, last_used_at, unreferenced_since, file_ffmpeg_equivalent, file_description
            FROM artifacts WHERE id = ?
            """, id) { row throws(KilnError) -> ArtifactRecord in
            let equivalent = try row.optionalString(15).map { text throws(KilnError) in try decodeJSON([String].self, text) }
            let description = try row.optionalString(16).map { text throws(KilnError) in try decodeJSON(JSONValue.self, text) }
            let file = row.optionalString(6).map { path in
                FileRecord(path: resolvedPath(path), bytes: row.int64(7), sha256: row.optionalString(8), owned: row.bool(9),
                           ffmpegEquivalent: equivalent, description: description)
            }
            return ArtifactRecord(id: row.string(0), key: row.string(1), state: try parse(ArtifactState.self, row.string(2)),
                                  plan: try plans.decode(row.string(3)),
                                  source: try sources.decode(row.string(4)), file: file, references: [],
                                  estimatedBytes: row.int64(5), job: nil, errors: [], createdAt: row.int64(10),
                                  updatedAt: row.int64(11), readyAt: row.optionalInt64(12), lastUsedAt: row.int64(13),
                                  unreferencedSince: row.optionalInt64(14))
        }
        guard var artifact = base else { return nil }
        artifact.references = try currentReferences(db, id)
        artifact.job = try db.queryOne("SELECT \(Self.jobColumns) FROM jobs WHERE artifact_id = ?", id, map: jobRecord)
        if let job = artifact.job {
            artifact.errors = try db.query("SELECT error FROM job_errors WHERE job_id = ? ORDER BY id", job.id) { row throws(KilnError) in
                try decodeJSON(AttemptError.self, row.string(0))
            }
        }
        return artifact
    }

    private func storedBytes(_ db: Database) throws(KilnError) -> (total: Int64, unreferenced: Int64) {
        try db.queryOne("""
            SELECT COALESCE(SUM(file_bytes), 0),
                   COALESCE(SUM(CASE WHEN EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = a.id)
                                     THEN 0 ELSE file_bytes END), 0)
            FROM artifacts a WHERE state IN ('ready', 'deleting') AND file_owned = 1
            """) { row in (total: row.int64(0), unreferenced: row.int64(1)) } ?? (0, 0)
    }
}

// MARK: - Row decoding

private func jobRecord(_ row: Row) throws(KilnError) -> JobRecord {
    JobRecord(id: row.int64(0), artifactID: row.string(1), kind: try parse(JobKind.self, row.string(2)),
              state: try parse(JobState.self, row.string(3)), priority: try parse(Priority.self, row.string(4)),
              attempt: row.int(5), maxAttempts: row.int(6), runAfter: row.int64(7), leaseOwner: row.optionalString(8),
              leaseExpiresAt: row.optionalInt64(9),
              progress: try row.optionalString(10).map { t throws(KilnError) in try decodeJSON(JobProgress.self, t) },
              waitingReason: row.optionalString(11), queuedAt: row.int64(12), startedAt: row.optionalInt64(13),
              finishedAt: row.optionalInt64(14), askedAt: row.int64(15))
}

private func parse<T: RawRepresentable>(_ type: T.Type, _ text: String) throws(KilnError) -> T where T.RawValue == String {
    guard let value = T(rawValue: text) else {
        throw KilnError(.internalError, stage: .open, "the database holds \"\(text)\", not a \(T.self)")
    }
    return value
}

private func encodeJSON<T: Encodable>(_ value: T) throws(KilnError) -> String {
    do { return String(decoding: try JSON.encode(value), as: UTF8.self) } catch {
        throw KilnError(.internalError, stage: .write, "cannot encode \(T.self) for the store: \(error)")
    }
}

/// Decoded values of immutable JSON columns, by text; the oldest entry goes when full.
struct DecodedJSONCache<T: Decodable> {
    let capacity: Int
    private var values: [String: T] = [:]
    private var order: [String] = []
    private var next = 0

    init(capacity: Int) { self.capacity = capacity }

    mutating func decode(_ text: String) throws(KilnError) -> T {
        if let hit = values[text] { return hit }
        let value = try decodeJSON(T.self, text)
        remember(text, value)
        return value
    }

    /// Records that `text` decodes to `value` (it was encoded from it).
    mutating func remember(_ text: String, _ value: T) {
        guard values[text] == nil else { return }
        if order.count < capacity {
            order.append(text)
        } else {
            values[order[next]] = nil
            order[next] = text
            next = (next + 1) % capacity
        }
        values[text] = value
    }
}

private func decodeJSON<T: Decodable>(_ type: T.Type, _ text: String) throws(KilnError) -> T {
    do { return try JSON.decode(type, from: Array(text.utf8)) } catch {
        throw KilnError(.internalError, stage: .open, "the store holds a \(T.self) that does not decode: \(error)")
    }
}

// MARK: - Group commit

/// One write waiting for a commit: `run` executes it inside the batch's transaction and
/// records its result; `failAll` replaces that result when the batch as a whole fails.
final class PendingWrite: @unchecked Sendable {
    var run: ((Database) -> Void)?
    let failAll: (KilnError) -> Void
    let done = DispatchSemaphore(value: 0)
    /// Set when this waiter is asked to lead the next batch.
    var promoted = false
    /// Whether its caller must wait until the write is durable (see `SQLiteStore.write`).
    let durable: Bool

    init(durable: Bool, run: @escaping (Database) -> Void, failAll: @escaping (KilnError) -> Void) {
        self.durable = durable
        self.run = run
        self.failAll = failAll
    }
}

final class WriteOutcome<T>: @unchecked Sendable {
    var result: Result<T, KilnError>?
}

/// Leader/follower batching: the first writer to find no commit in flight leads; writers
/// that arrive meanwhile queue up and the leader's next batch takes them all. When the
/// leader's batch is done and others wait, it hands leadership to the first of them, so
/// no caller runs other people's batches indefinitely.
final class GroupCommit: @unchecked Sendable {
    private let lock = NSLock()
    private var queue: [PendingWrite] = []
    private var leading = false

    func submit(_ item: PendingWrite, commit: ([PendingWrite]) -> (() -> Void)?) {
        lock.lock()
        queue.append(item)
        if leading {
            lock.unlock()
            item.done.wait()
            // Woken either because our write is done, or to lead the next batch.
            guard item.promoted else { return }
        } else {
            leading = true
            lock.unlock()
        }
        // Our own write is in the batch we lead: the initial leader queued it first, a
        // promoted one is the head of the queue.
        lead(commit)
    }

    /// `commit` runs the batch's transaction and returns its settlement (the fsync that
    /// makes it durable), or nil when there is none: the next leader starts its batch
    /// before this one settles, so the disk's time overlaps the next batch's work.
    private func lead(_ commit: ([PendingWrite]) -> (() -> Void)?) {
        lock.lock()
        let batch = queue
        queue = []
        for item in batch { item.promoted = false }
        lock.unlock()
        let settle = commit(batch)
        lock.lock()
        if let next = queue.first {
            next.promoted = true
            lock.unlock()
            next.done.signal()
        } else {
            leading = false
            lock.unlock()
        }
        settle?()
        for item in batch { item.done.signal() }
    }
}
