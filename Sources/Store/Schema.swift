import KilnCore

/// The schema, as numbered migrations. `PRAGMA user_version` says how many have run; each
/// runs in its own transaction together with the version bump, so a crash leaves the
/// database at one version or the next, never between.
enum Schema {
    /// A step: SQL, or code for what SQL alone cannot say.
    enum Migration: Sendable {
        case sql(String)
        case code(@Sendable (Database) throws(KilnError) -> Void)
    }

    static let migrations: [Migration] = [.sql(v1), .sql(v2), .code(v3), .sql(v4), .code(v5), .sql(v6), .sql(v7), .sql(v8), .code(v9), .code(v10)]

    static func migrate(_ db: Database) throws(KilnError) {
        let current = try db.queryOne("PRAGMA user_version") { row in row.int(0) } ?? 0
        guard current <= migrations.count else {
            throw KilnError(.internalError, stage: .open,
                            "the database \(db.path) has schema version \(current), newer than this Kiln knows (\(migrations.count))")
        }
        for (index, migration) in migrations.enumerated().dropFirst(current) {
            try db.inTransaction { () throws(KilnError) in
                switch migration {
                case .sql(let sql): try db.executeScript(sql)
                case .code(let run): try run(db)
                }
                try db.executeScript("PRAGMA user_version = \(index + 1)")
            }
        }
    }

    // Times are INTEGER milliseconds since the epoch, passed in by the caller's clock.
    // JSON columns hold KilnCore values encoded with `JSON` (plan, source, request, …).
    // Every state column lists its values in a CHECK, so a bug cannot invent a state.
    static let v1 = """
    CREATE TABLE artifacts (
        id                 TEXT PRIMARY KEY,
        key                TEXT NOT NULL UNIQUE,
        state              TEXT NOT NULL CHECK (state IN ('pending', 'ready', 'failed', 'canceled', 'deleting')),
        delivery_format    TEXT NOT NULL CHECK (delivery_format IN ('original', 'remux', 'transcode')),
        plan               TEXT NOT NULL,
        source             TEXT NOT NULL,
        source_fingerprint TEXT NOT NULL,
        estimated_bytes    INTEGER NOT NULL,
        file_path          TEXT,
        file_bytes         INTEGER,
        file_sha256        TEXT,
        file_owned         INTEGER NOT NULL DEFAULT 0 CHECK (file_owned IN (0, 1)),
        created_at         INTEGER NOT NULL,
        updated_at         INTEGER NOT NULL,
        ready_at           INTEGER,
        last_used_at       INTEGER NOT NULL,
        unreferenced_since INTEGER,
        CHECK (state NOT IN ('ready', 'deleting') OR (file_path IS NOT NULL AND file_bytes IS NOT NULL))
    ) STRICT;
    CREATE INDEX artifacts_by_state_updated ON artifacts (state, updated_at);
    -- Stored bytes without reading the rows (plans make them wide).
    CREATE INDEX artifacts_files ON artifacts (state, file_owned, id, file_bytes);
    -- Collection candidates, least recently used first.
    CREATE INDEX artifacts_unreferenced ON artifacts (last_used_at, id)
        WHERE state = 'ready' AND file_owned = 1 AND unreferenced_since IS NOT NULL;

    -- "references" is an SQL keyword; the table is named for what it holds.
    CREATE TABLE artifact_references (
        reference   TEXT PRIMARY KEY,
        artifact_id TEXT NOT NULL REFERENCES artifacts (id),
        request     TEXT NOT NULL,
        revision    INTEGER NOT NULL CHECK (revision >= 1),
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX references_by_artifact ON artifact_references (artifact_id, reference);

    -- One job per artifact, for the artifact's whole life: a re-queue resets it.
    CREATE TABLE jobs (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        artifact_id      TEXT NOT NULL UNIQUE REFERENCES artifacts (id) ON DELETE CASCADE,
        kind             TEXT NOT NULL CHECK (kind IN ('transcode', 'remux')),
        -- queued: the scheduler claims it; running: the runner (or the lease rescuer) moves
        -- it on; retrying: claimable again once run_after is due; the rest are final.
        state            TEXT NOT NULL CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'failed', 'canceled')),
        priority         TEXT NOT NULL CHECK (priority IN ('interactive', 'background')),
        priority_rank    INTEGER NOT NULL CHECK (priority_rank IN (0, 1)),
        attempt          INTEGER NOT NULL DEFAULT 0 CHECK (attempt >= 0),
        max_attempts     INTEGER NOT NULL CHECK (max_attempts >= 1),
        run_after        INTEGER NOT NULL,
        lease_owner      TEXT,
        lease_expires_at INTEGER,
        progress         TEXT,
        waiting_reason   TEXT,
        queued_at        INTEGER NOT NULL,
        started_at       INTEGER,
        finished_at      INTEGER,
        CHECK ((state = 'running') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL))
    ) STRICT;
    -- Claim order within a kind; only claimable rows are indexed, so the claim and the
    -- status page's queue read as many index entries as they return.
    CREATE INDEX jobs_claim ON jobs (kind, priority_rank, queued_at, id) WHERE state IN ('queued', 'retrying');
    CREATE INDEX jobs_claimable ON jobs (priority_rank, queued_at, id) WHERE state IN ('queued', 'retrying');
    CREATE INDEX jobs_running_lease ON jobs (lease_expires_at) WHERE state = 'running';
    CREATE INDEX jobs_by_state ON jobs (state);

    -- One row per failed attempt, kept across re-queues (history for operators).
    CREATE TABLE job_errors (
        id      INTEGER PRIMARY KEY,
        job_id  INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        code    TEXT NOT NULL,
        error   TEXT NOT NULL,
        at      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX job_errors_by_job ON job_errors (job_id, id);

    -- AUTOINCREMENT: a sequence number is never reused, even after the newest rows go.
    -- No foreign key: an artifact's events outlive the artifact.
    CREATE TABLE events (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        type            TEXT NOT NULL CHECK (type IN ('artifact.ready', 'artifact.failed', 'artifact.canceled', 'artifact.deleted')),
        artifact_id     TEXT NOT NULL,
        status          TEXT NOT NULL,
        delivery_format TEXT NOT NULL CHECK (delivery_format IN ('original', 'remux', 'transcode')),
        refs            TEXT NOT NULL,
        error           TEXT,
        at              INTEGER NOT NULL
    ) STRICT;

    CREATE TABLE probe_cache (
        fingerprint TEXT PRIMARY KEY,
        info        TEXT NOT NULL,
        cached_at   INTEGER NOT NULL
    ) STRICT;

    -- Small named values that must survive a restart (the webhook's position).
    CREATE TABLE kv (
        name  TEXT PRIMARY KEY,
        value INTEGER NOT NULL
    ) STRICT;
    """

    // Every index a row is in costs a page written (and fsynced) when the row changes. Two
    // were paid on every intake, claim and completion for lists that read a few rows:
    // - the status page's queue across kinds now merges the per-kind claim index
    //   (jobs_claim), which the claim needs anyway;
    // - the failed and deleting lists read only those states: pending and ready artifacts,
    //   nearly every transition, no longer touch their index. (Counts by state read
    //   artifacts_files, which holds every row's state.)
    static let v2 = """
    DROP INDEX jobs_claimable;
    DROP INDEX artifacts_by_state_updated;
    CREATE INDEX artifacts_failed_deleting ON artifacts (state, updated_at, id) WHERE state IN ('failed', 'deleting');
    """

    // SQLite evaluates `x IN (a, b, c)` with more than two values by building a temporary
    // b-tree of the list, every time the expression runs. The state CHECKs run on every
    // insert and update of an artifact, job or event: three or four such b-trees per
    // statement, a sixth of a store cycle's CPU. The same constraints written as `=` … `OR`
    // are plain comparisons. Rows are unchanged and already satisfy them, so SQLite's own
    // procedure for changing CHECK constraints applies: edit the schema's text and bump
    // schema_version, in one transaction (sqlite.org/lang_altertable.html, section 7).
    static let v3Rewrites: [(table: String, from: String, to: String)] = [
        ("artifacts", "CHECK (state IN ('pending', 'ready', 'failed', 'canceled', 'deleting'))",
         "CHECK (state = 'pending' OR state = 'ready' OR state = 'failed' OR state = 'canceled' OR state = 'deleting')"),
        ("artifacts", "CHECK (delivery_format IN ('original', 'remux', 'transcode'))",
         "CHECK (delivery_format = 'original' OR delivery_format = 'remux' OR delivery_format = 'transcode')"),
        ("jobs", "CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'failed', 'canceled'))",
         "CHECK (state = 'queued' OR state = 'running' OR state = 'retrying' OR state = 'succeeded' OR state = 'failed' OR state = 'canceled')"),
        ("events", "CHECK (type IN ('artifact.ready', 'artifact.failed', 'artifact.canceled', 'artifact.deleted'))",
         "CHECK (type = 'artifact.ready' OR type = 'artifact.failed' OR type = 'artifact.canceled' OR type = 'artifact.deleted')"),
        ("events", "CHECK (delivery_format IN ('original', 'remux', 'transcode'))",
         "CHECK (delivery_format = 'original' OR delivery_format = 'remux' OR delivery_format = 'transcode')"),
    ]

    static func v3(_ db: Database) throws(KilnError) {
        guard let version = try db.queryOne("PRAGMA schema_version", map: { $0.int(0) }) else {
            throw KilnError(.internalError, stage: .open, "SQLite reports no schema_version")
        }
        try db.executeScript("PRAGMA writable_schema = ON")
        for rewrite in v3Rewrites {
            let changed = try db.execute("""
                UPDATE sqlite_schema SET sql = replace(sql, ?, ?) WHERE type = 'table' AND name = ? AND instr(sql, ?) > 0
                """, rewrite.from, rewrite.to, rewrite.table, rewrite.from)
            guard changed == 1 else {
                throw KilnError(.internalError, stage: .open, "the \(rewrite.table) table's schema does not hold \(rewrite.from)")
            }
        }
        try db.executeScript("PRAGMA schema_version = \(version + 1)")
        try db.executeScript("PRAGMA writable_schema = OFF")
        guard try db.queryOne("PRAGMA quick_check", map: { $0.string(0) }) == "ok" else {
            throw KilnError(.internalError, stage: .open, "the database fails SQLite's quick_check after rewriting its CHECK constraints")
        }
    }

    // jobs_by_state served one query, the status page's count of jobs by state, and cost
    // two index pages written on every job transition (the old state's leaf and the new
    // one's): 5 % of a store cycle. The jobs table holds live artifacts' jobs only (they
    // go with their artifact), so counting it is a scan of a few hundred pages for 10,000
    // jobs, on a page operators open, not on the request path.
    static let v4 = """
    DROP INDEX jobs_by_state;
    """

    // Each reference's own plan: requests that make one artifact can differ in what the
    // plan says beside the output (the audio track a player should pick in an original,
    // the reasons), and a caller must get the plan of what it asked for. NULL in rows
    // written before: the artifact's plan stands in.
    // And an original's key now names its path (`Farm.prepare`): the originals already
    // stored are keyed so, keeping their ids, or every holder's next request would find
    // no row, make a new artifact and count as a move (a higher revision tells a device
    // to download the whole file again).
    static func v5(_ db: Database) throws(KilnError) {
        try db.executeScript("ALTER TABLE artifact_references ADD COLUMN plan TEXT")
        let originals = try db.query(
            "SELECT id, key, file_path FROM artifacts WHERE delivery_format = 'original' AND file_path IS NOT NULL") { row in
            (id: row.string(0), key: row.string(1), path: row.string(2))
        }
        for o in originals {
            try db.execute("UPDATE artifacts SET key = ? WHERE id = ?", Plan.originalKey(o.key, path: o.path), o.id)
        }
    }

    // When the job's work was asked for, apart from its place in line: a background job a
    // person then waits for joins the interactive line at the back (`queued_at` moves),
    // but it has waited since it was asked for (the queue-wait metric). Rows written
    // before: their place in line is the best there is.
    static let v6 = """
    ALTER TABLE jobs ADD COLUMN asked_at INTEGER;
    UPDATE jobs SET asked_at = queued_at;
    """

    /// An artifact's events by artifact: its download, asked for once it was collected,
    /// finds when (its row is gone; its events stay for the event retention).
    static let v7 = """
    CREATE INDEX IF NOT EXISTS events_by_artifact ON events (artifact_id, seq);
    """

    /// Owned files' paths relative to the database's folder (`SQLiteStore.fileBase`): rows
    /// written before held the absolute path the data directory had then, so a copy of it
    /// (a backup restored elsewhere, a volume mounted at a new path) served and deleted the
    /// original's files. Kiln's own layout is `<dataDir>/kiln.db` beside
    /// `<dataDir>/artifacts/<id>.mp4`; a path of that shape is rewritten whatever folder it
    /// names, so a directory copied before this version also comes to its own files.
    static let v8 = """
    UPDATE artifacts SET file_path = 'artifacts/' || id || '.mp4'
    WHERE file_owned = 1 AND file_path LIKE '/%'
      AND substr(file_path, -length('/artifacts/' || id || '.mp4')) = '/artifacts/' || id || '.mp4';
    """

    /// The ffmpeg command that makes a file Kiln made (`FileRecord.ffmpegEquivalent`), a
    /// JSON array of its arguments. NULL in rows written before and for originals. Added
    /// only where it is missing (SQLite has no ADD COLUMN IF NOT EXISTS): a database an
    /// earlier migration is run on again keeps the column it has.
    static func v9(_ db: Database) throws(KilnError) { try addArtifactsColumn(db, "file_ffmpeg_equivalent") }

    /// The engine's description of a file it made (`FileRecord.description`: its length,
    /// streams and what it left out), JSON. NULL in rows written before and for originals.
    /// Added only where it is missing, as v9's column.
    static func v10(_ db: Database) throws(KilnError) { try addArtifactsColumn(db, "file_description") }

    /// A TEXT column added to `artifacts` where it is missing (v9, v10).
    private static func addArtifactsColumn(_ db: Database, _ name: String) throws(KilnError) {
        let columns = try db.query("PRAGMA table_info(artifacts)") { row in row.string(1) }
        guard !columns.contains(name) else { return }
        try db.executeScript("ALTER TABLE artifacts ADD COLUMN \(name) TEXT")
    }
}
