import CSQLite
import KilnCore

// A thin, honest SQLite layer (after GRDB): a connection that owns its handle, statements
// that finalize themselves, one switch over step results, transactions that roll back on
// throw. Nothing here is Sendable: the store guards the one connection with a lock.

/// A value bound to a statement parameter.
enum SQLValue {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
}

protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension Int64: SQLBindable { var sqlValue: SQLValue { .integer(self) } }
extension Int: SQLBindable { var sqlValue: SQLValue { .integer(Int64(self)) } }
extension Bool: SQLBindable { var sqlValue: SQLValue { .integer(self ? 1 : 0) } }
extension Double: SQLBindable { var sqlValue: SQLValue { .real(self) } }
extension String: SQLBindable { var sqlValue: SQLValue { .text(self) } }
extension Optional: SQLBindable where Wrapped: SQLBindable {
    var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

/// One SQLite connection. Statements are prepared once per SQL text and cached.
final class Database {
    let handle: OpaquePointer
    let path: String
    private var cache: [String: Statement] = [:]

    init(path: String) throws(KilnError) {
        var db: OpaquePointer?
        // NOMUTEX: the owner serialises every use of the connection with its own lock.
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw Database.error(code: rc, message: message, path: path, sql: "open")
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
        // A second process (an operator's sqlite3 shell, a second daemon by mistake) waits
        // for the write lock instead of failing at once.
        sqlite3_busy_timeout(db, Self.busyTimeoutMillis)
    }

    static let busyTimeoutMillis: Int32 = 5_000

    /// `body` with another busy timeout, the usual one restored after.
    func waitingForLocks<T>(upTo millis: Int32, _ body: () throws(KilnError) -> T) throws(KilnError) -> T {
        sqlite3_busy_timeout(handle, millis)
        defer { sqlite3_busy_timeout(handle, Self.busyTimeoutMillis) }
        return try body()
    }

    deinit {
        cache.removeAll()  // finalize every statement before the connection goes
        sqlite3_close_v2(handle)
    }

    /// Maps a result code to Kiln's error vocabulary: a full disk is `disk_full`, lock
    /// contention and I/O trouble are worth retrying (`io_error`), anything else (a
    /// constraint, misuse) is a bug.
    /// The detail names the database file (an operator must know which file is full,
    /// locked or damaged) and the statement's first line; the message only what SQLite
    /// said, which is all an API caller is told.
    static func error(code: Int32, message: String, path: String, sql: String) -> KilnError {
        let primary = code & 0xff
        let kind: KilnError.Code
        switch primary {
        case SQLITE_FULL: kind = .diskFull
        case SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_CORRUPT,
             SQLITE_NOTADB, SQLITE_PROTOCOL, SQLITE_NOLFS, SQLITE_PERM:
            kind = .ioError
        default: kind = .internalError
        }
        let statement = String((sql.split(separator: "\n").first ?? "").drop(while: { $0 == " " }))
        return KilnError(kind, stage: .write, underlying: code, detail: "\(path), in: \(statement)",
                         "the store's database says \"\(message)\" (SQLite error \(code))")
    }

    func lastError(_ code: Int32, sql: String) -> KilnError {
        Database.error(code: code, message: String(cString: sqlite3_errmsg(handle)), path: path, sql: sql)
    }

    /// A prepared statement for `sql`, reset with its parameters bound.
    func statement(_ sql: String, _ args: [SQLBindable?]) throws(KilnError) -> Statement {
        let stmt: Statement
        if let cached = cache[sql] {
            stmt = cached
        } else {
            stmt = try Statement(db: self, sql: sql)
            cache[sql] = stmt
        }
        try stmt.bind(args)
        return stmt
    }

    /// Runs a statement that returns no rows (or whose rows are ignored); returns the
    /// number of rows it changed.
    @discardableResult
    func execute(_ sql: String, _ args: SQLBindable?...) throws(KilnError) -> Int {
        let stmt = try statement(sql, args)
        defer { stmt.reset() }
        while try stmt.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs several statements without parameters (schema, pragmas).
    func executeScript(_ sql: String) throws(KilnError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            throw Database.error(code: rc, message: text, path: path, sql: sql)
        }
    }

    /// Every row, mapped while the statement is positioned on it.
    func query<T>(_ sql: String, _ args: SQLBindable?..., map: (Row) throws(KilnError) -> T) throws(KilnError) -> [T] {
        try query(sql, args: args, map: map)
    }

    func query<T>(_ sql: String, args: [SQLBindable?], map: (Row) throws(KilnError) -> T) throws(KilnError) -> [T] {
        let stmt = try statement(sql, args)
        defer { stmt.reset() }
        var out: [T] = []
        while try stmt.step() { out.append(try map(Row(stmt: stmt.handle))) }
        return out
    }

    func queryOne<T>(_ sql: String, _ args: SQLBindable?..., map: (Row) throws(KilnError) -> T) throws(KilnError) -> T? {
        let stmt = try statement(sql, args)
        defer { stmt.reset() }
        guard try stmt.step() else { return nil }
        return try map(Row(stmt: stmt.handle))
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// BEGIN IMMEDIATE takes the write lock up front, so a read-then-write transaction
    /// never fails half-way with SQLITE_BUSY on lock upgrade; ROLLBACK when `body` throws.
    /// `immediate: false` (BEGIN DEFERRED) is for reads: one snapshot, no write lock.
    func inTransaction<T>(immediate: Bool = true, _ body: () throws(KilnError) -> T) throws(KilnError) -> T {
        try execute(immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        let result: T
        do {
            result = try body()
        } catch {
            // The transaction may already be gone (SQLite rolls back by itself on some
            // errors); a failing ROLLBACK must not hide the original error.
            if sqlite3_get_autocommit(handle) == 0 { _ = try? execute("ROLLBACK") }
            throw error
        }
        do {
            try execute("COMMIT")
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { _ = try? execute("ROLLBACK") }
            throw error
        }
        return result
    }
}

/// A prepared statement; finalized when the last reference goes.
final class Statement {
    let handle: OpaquePointer
    let sql: String
    private unowned let db: Database

    init(db: Database, sql: String) throws(KilnError) {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw db.lastError(rc, sql: sql) }
        handle = stmt
        self.sql = sql
        self.db = db
    }

    deinit { sqlite3_finalize(handle) }

    func bind(_ args: [SQLBindable?]) throws(KilnError) {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard expected == args.count else {
            throw KilnError(.internalError, stage: .write, detail: sql, "a statement expects \(expected) parameters, got \(args.count)")
        }
        for (i, arg) in args.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch arg?.sqlValue ?? .null {
            case .null: rc = sqlite3_bind_null(handle, index)
            case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
            case .real(let v): rc = sqlite3_bind_double(handle, index, v)
            // By its byte length: a C string would end at the first NUL, and "victim\0x" would
            // be bound as "victim" (another holder's reference, taken over).
            case .text(let v):
                var text = v
                rc = text.withUTF8 { bytes in
                    guard let base = bytes.baseAddress else { return sqlite3_bind_text(handle, index, "", 0, kiln_sqlite_transient()) }
                    return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                        sqlite3_bind_text(handle, index, $0, Int32(clamping: bytes.count), kiln_sqlite_transient())
                    }
                }
            }
            if rc != SQLITE_OK { throw db.lastError(rc, sql: sql) }
        }
    }

    /// True when positioned on a row, false when done. Every result code passes here.
    func step() throws(KilnError) -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = db.lastError(rc, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }
}

/// The current row of a statement; valid only inside the mapping closure.
struct Row {
    let stmt: OpaquePointer

    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }
    func int64(_ i: Int32) -> Int64 { sqlite3_column_int64(stmt, i) }
    func int(_ i: Int32) -> Int { Int(sqlite3_column_int64(stmt, i)) }
    func bool(_ i: Int32) -> Bool { sqlite3_column_int64(stmt, i) != 0 }
    func double(_ i: Int32) -> Double { sqlite3_column_double(stmt, i) }
    /// By its byte length, as it was bound (a NUL inside is text, not its end).
    func string(_ i: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, i) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(stmt, i))), as: UTF8.self)
    }
    func optionalInt64(_ i: Int32) -> Int64? { isNull(i) ? nil : int64(i) }
    func optionalString(_ i: Int32) -> String? { isNull(i) ? nil : string(i) }
}
