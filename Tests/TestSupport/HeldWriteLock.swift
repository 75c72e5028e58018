import Foundation

/// Another program holding a SQLite database's write lock: an `sqlite3` shell left inside
/// `BEGIN IMMEDIATE`, as an operator's may be. Every write of the store then waits out its
/// busy timeout and fails, until `release()` (or the end of the test) lets the shell go.
public final class HeldWriteLock {
    private let shell = Process()
    private let input = Pipe(), output = Pipe()

    /// Returns once the shell holds the lock.
    public init(database path: String) throws {
        shell.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        shell.arguments = [path]
        shell.standardInput = input
        shell.standardOutput = output
        try shell.run()
        // The shell waits for the lock as the daemon's writes do (its own default is not
        // to wait): a daemon writing at that moment (a lease, a start-up record) made the
        // BEGIN fail, the SELECT answer all the same, and the test run with no lock held.
        input.fileHandleForWriting.write(Data(".timeout 10000\nBEGIN IMMEDIATE;\nSELECT 'held';\n".utf8))
        var said = Data()
        while !String(decoding: said, as: UTF8.self).contains("held") {
            let more = output.fileHandleForReading.availableData
            if more.isEmpty { break }
            said.append(more)
        }
    }

    /// The shell leaves (its transaction rolled back), and the lock with it.
    public func release() throws {
        guard shell.isRunning else { return }
        try input.fileHandleForWriting.close()
        shell.waitUntilExit()
    }

    deinit { if shell.isRunning { shell.terminate() } }
}
