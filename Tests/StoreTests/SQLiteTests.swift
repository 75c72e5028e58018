import Foundation
import KilnCore
@testable import Store
import Testing

@Suite("SQLite layer")
struct SQLiteTests {
    @Test("a transaction whose body throws leaves nothing behind")
    func rollbackOnThrow() throws {
        let db = try Database(path: ":memory:")
        try db.executeScript("CREATE TABLE t (x INTEGER NOT NULL)")
        #expect(throws: KilnError.self) {
            try db.inTransaction { () throws(KilnError) in
                try db.execute("INSERT INTO t (x) VALUES (?)", 1)
                throw KilnError(.internalError, stage: .write, "boom")
            }
        }
        #expect(try db.queryOne("SELECT COUNT(*) FROM t", map: { $0.int(0) }) == 0)
        try db.inTransaction { () throws(KilnError) in try db.execute("INSERT INTO t (x) VALUES (?)", 2) }
        #expect(try db.query("SELECT x FROM t", map: { $0.int(0) }) == [2])
    }

    @Test("a failing statement reports its result code, SQLite's message and the SQL")
    func errorsCarrySQL() throws {
        let db = try Database(path: ":memory:")
        try db.executeScript("CREATE TABLE t (x INTEGER NOT NULL CHECK (x > 0))")
        do {
            try db.execute("INSERT INTO t (x) VALUES (?)", 0)
            Issue.record("the CHECK constraint did not fire")
        } catch {
            #expect(error.code == .internalError)
            #expect(error.underlying == 275)  // SQLITE_CONSTRAINT_CHECK: extended codes are on
            #expect(error.message.contains("CHECK constraint failed"))
            // The statement and the file are the operator's (the log's), not a caller's.
            #expect(!error.message.contains("INSERT INTO t") && error.detail?.contains("INSERT INTO t") == true)
            #expect(error.detail?.hasPrefix(":memory:") == true && "\(error)".contains("INSERT INTO t"))
        }
        // The statement is usable again after the error.
        try db.execute("INSERT INTO t (x) VALUES (?)", 1)
        #expect(try db.queryOne("SELECT x FROM t", map: { $0.int(0) }) == 1)
    }

    @Test("a wrong number of parameters is a bug, reported before SQLite runs anything")
    func parameterCount() throws {
        let db = try Database(path: ":memory:")
        #expect(throws: KilnError.self) { try db.execute("SELECT ?, ?", 1) }
    }

    @Test("a database from a newer Kiln is refused")
    func newerSchemaRefused() throws {
        let temp = try TempDatabasePath()
        defer { withExtendedLifetime(temp) {} }   // its folder goes with it
        do {
            let db = try Database(path: temp.path)
            try db.executeScript("PRAGMA user_version = 99")
        }
        #expect(throws: KilnError.self) { try SQLiteStore(path: temp.path) }
    }

    @Test("the claim and the status queue read the claim indexes")
    func claimUsesIndex() throws {
        let db = try Database(path: ":memory:")
        try Schema.migrate(db)
        let claimPlan = try db.query("""
            EXPLAIN QUERY PLAN SELECT id FROM jobs
            WHERE kind = ? AND state IN ('queued', 'retrying') AND (state = 'queued' OR run_after <= ?)
            ORDER BY priority_rank, queued_at, id LIMIT ?
            """, "transcode", 0, 1) { $0.string(3) }
        #expect(claimPlan.contains { $0.contains("jobs_claim") })
        #expect(!claimPlan.contains { $0.contains("TEMP B-TREE") })
        let unreferencedPlan = try db.query("""
            EXPLAIN QUERY PLAN SELECT id FROM artifacts a INDEXED BY artifacts_unreferenced
            WHERE state = 'ready' AND file_owned = 1 AND unreferenced_since IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM artifact_references r WHERE r.artifact_id = a.id)
            ORDER BY last_used_at, id LIMIT ?
            """, 5) { $0.string(3) }
        #expect(unreferencedPlan.contains { $0.contains("artifacts_unreferenced") })
        // The failed and deleting lists read their partial index, not the wide rows.
        for state in ["failed", "deleting"] {
            let plan = try db.query("""
                EXPLAIN QUERY PLAN SELECT id FROM artifacts WHERE state = ? AND state IN ('failed', 'deleting')
                ORDER BY updated_at, id
                """, state) { $0.string(3) }
            #expect(plan.contains { $0.contains("artifacts_failed_deleting") }, "\(plan)")
        }
        // Counting by state reads an index that holds every row's state.
        let counts = try db.query("EXPLAIN QUERY PLAN SELECT state, COUNT(*) FROM artifacts GROUP BY state") { $0.string(3) }
        #expect(counts.contains { $0.contains("COVERING INDEX") }, "\(counts)")
    }

    @Test("a version 1 database is upgraded in place: fewer indexes, its rows kept")
    func upgradesFromV1() throws {
        let temp = try TempDatabasePath()
        defer { withExtendedLifetime(temp) {} }   // its folder goes with it
        do {
            let db = try Database(path: temp.path)
            try db.executeScript("PRAGMA journal_mode = WAL")
            try db.inTransaction { () throws(KilnError) in
                try db.executeScript(Schema.v1)
                try db.executeScript("PRAGMA user_version = 1")
            }
            try db.execute("""
                INSERT INTO artifacts (id, key, state, delivery_format, plan, source, source_fingerprint, estimated_bytes,
                    created_at, updated_at, last_used_at) VALUES ('a_1', 'k1', 'failed', 'transcode', '{}', '{}', 'fp', 1, 1, 2, 1)
                """)
        }
        let db = try Database(path: temp.path)
        try Schema.migrate(db)
        #expect(try db.queryOne("PRAGMA user_version", map: { $0.int(0) }) == Schema.migrations.count)
        let indexes = Set(try db.query("SELECT name FROM sqlite_master WHERE type = 'index'") { $0.string(0) })
        #expect(!indexes.contains("jobs_claimable") && !indexes.contains("artifacts_by_state_updated"))
        #expect(indexes.contains("artifacts_failed_deleting"))
        #expect(try db.query("SELECT id FROM artifacts WHERE state = 'failed' AND state IN ('failed', 'deleting')") { $0.string(0) } == ["a_1"])

        // Version 3: the state CHECKs still refuse what nobody defined, on this connection
        // and on a new one, and no longer build a temporary b-tree per statement.
        for connection in [db, try Database(path: temp.path)] {
            #expect(throws: KilnError.self) { try connection.execute("UPDATE artifacts SET state = 'sleeping'") }
            #expect(throws: KilnError.self) { try connection.execute("UPDATE artifacts SET delivery_format = 'fax'") }
            #expect(try connection.execute("UPDATE artifacts SET state = 'canceled', delivery_format = 'remux'") == 1)
            for statement in ["UPDATE artifacts SET state = 'pending', delivery_format = 'transcode'",
                              "UPDATE jobs SET state = 'running'",
                              "INSERT INTO events (type, artifact_id, status, delivery_format, refs, at) VALUES ('artifact.ready', 'a', 'ready', 'remux', '[]', 1)"] {
                let program = try connection.query("EXPLAIN \(statement)") { $0.string(1) }
                #expect(!program.contains("OpenEphemeral"), "\(statement)")
            }
        }
        #expect(try db.queryOne("PRAGMA integrity_check", map: { $0.string(0) }) == "ok")
    }
}
