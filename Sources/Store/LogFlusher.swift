import Foundation
import KilnCore

/// Makes committed transactions durable outside the connection's lock.
///
/// With `synchronous=FULL`, SQLite fsyncs the write-ahead log inside COMMIT, while the one
/// connection is held: the next transaction's CPU work cannot start until the disk has
/// answered. Here the connection runs with `synchronous=NORMAL` (COMMIT writes the log,
/// no fsync; checkpoints still fsync the log before copying it into the database) and the
/// store fsyncs the log itself, after releasing the connection, before it tells anyone the
/// write happened. So the next batch runs while the disk works, and one fsync covers every
/// transaction committed before it began.
///
/// The guarantee callers see is the one FULL gives: a write returns only once it survives a
/// power cut, and a read returns only once everything it could have seen does (it waits
/// for the fsync in flight), so nothing the store says is lost to a crash. Only another
/// process reading the file directly (an operator's sqlite3 shell) can glimpse a commit a
/// few hundred microseconds before it is durable.
///
/// A failed fsync is not retried: after one, Linux may already have dropped the dirty
/// pages, so a later fsync can succeed without the data being on disk (the PostgreSQL
/// "fsyncgate" lesson). The flusher stays failed and every later call fails with it; the
/// daemon must restart and recover from what SQLite actually holds.
final class LogFlusher: @unchecked Sendable {
    private let condition = NSCondition()
    private let logPath: String
    private var log: FileDescriptor?
    /// Transactions committed so far, and how many of them are known durable.
    private var committed: UInt64 = 0
    private var durable: UInt64 = 0
    private var flushing = false
    private var failure: KilnError?

    /// The call that makes the log durable: fdatasync, or a stand-in in tests.
    private let sync: @Sendable (Int32) -> Int32

    init(databasePath: String, sync: @escaping @Sendable (Int32) -> Int32 = { fdatasync($0) }) {
        logPath = databasePath + "-wal"
        self.sync = sync
    }

    /// The failed fsync that stopped the store, if one did.
    var failed: KilnError? {
        condition.lock()
        defer { condition.unlock() }
        return failure
    }

    /// Called with the connection held, right after a COMMIT succeeded: the generation the
    /// caller must wait for.
    func committedOne() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        committed += 1
        return committed
    }

    /// Called with the connection held, before a read: the newest commit the read can see.
    func visible() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return committed
    }

    /// Returns once commit `generation` (and every one before it) is on disk. If no fsync is
    /// in flight the caller runs one; otherwise it waits for the one running and, if that
    /// began too early to cover `generation`, runs the next.
    func waitDurable(_ generation: UInt64) throws(KilnError) {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let failure { throw failure }
            if durable >= generation { return }
            if flushing {
                condition.wait()
                continue
            }
            flushing = true
            let target = committed
            condition.unlock()
            let outcome = flush()
            condition.lock()
            flushing = false
            if let outcome {
                failure = outcome
            } else {
                durable = max(durable, target)
            }
            condition.broadcast()
        }
    }

    /// One fdatasync of the log file; the first also syncs the folder, so the log's own
    /// name survives (SQLite does the same on its first sync of a new log).
    private func flush() -> KilnError? {
        if log == nil {
            do { log = try FileDescriptor(path: logPath, flags: O_RDONLY) } catch {
                return KilnError(.ioError, stage: .write, underlying: error.errno, detail: logPath,
                                 "the store's log cannot be opened to make it durable (\(String(cString: strerror(error.errno))))")
            }
            let folder = (logPath as NSString).deletingLastPathComponent
            if let dir = try? FileDescriptor(path: folder.isEmpty ? "." : folder, flags: O_RDONLY | O_DIRECTORY) {
                _ = fsync(dir.rawValue)
            }
        }
        guard let log, sync(log.rawValue) == 0 else {
            return KilnError(.ioError, stage: .write, underlying: errno,
                             "the store's log could not be made durable (fdatasync: \(String(cString: strerror(errno)))); restart the daemon")
        }
        return nil
    }
}
