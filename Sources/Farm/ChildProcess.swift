#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import KilnCore

/// One child process with its pipes: spawned in its own process group with a clean signal
/// state, standard output collected, standard error read line by line, reaped by a waiter
/// thread. Used for job attempts and for probes.
///
/// Sendable by its lock: every mutable field is guarded by `state` (an NSCondition that
/// also wakes `wait`).
final class ChildProcess: @unchecked Sendable {
    struct Ended {
        var termination: Termination
        var stdout: Data
        var logTail: [String]
    }

    /// How many log lines are kept for the attempt's error.
    static let logTailLines = 20

    let pid: Int32
    private let state = NSCondition()
    private var termination: Termination?
    private var exitedAt: Date?
    private var stdoutOpen = true
    private var stderrOpen = true
    private var stdoutData = Data()
    private var logTail: [String] = []
    private var killScheduled = false

    private init(pid: Int32) { self.pid = pid }

    private static let spawnLock = NSLock()

    /// Spawns `executable` with `arguments`; the environment is the daemon's, less the names
    /// `withholding` matches, plus `environment`.
    /// `onStderrLine` sees each standard-error line and answers whether to keep it as log.
    /// - Parameter startThread: starts a thread, false when none can be had (tests stand in
    ///   for a machine short of threads).
    static func spawn(executable: String, arguments: [String], environment: [String: String],
                      withholding: (String) -> Bool = { _ in false }, stdin: Data?,
                      startThread: (@escaping @Sendable () -> Void) -> Bool = Threads.tryStart,
                      onStderrLine: @escaping @Sendable (String) -> Bool) throws(KilnError) -> ChildProcess {
        // Writing the plan into a pipe whose reader died must be an error, not a signal that
        // kills the daemon. The child gets its default handlers back (POSIX_SPAWN_SETSIGDEF).
        signal(SIGPIPE, SIG_IGN)

        // Close-on-exec on every end: a sibling spawned at the same moment must not inherit
        // our pipes, or this child's readers would not see end-of-file until the sibling
        // exits. Glibc's pipe2 is not visible to Swift, so pipe + FD_CLOEXEC under one lock
        // that every spawn of the farm takes.
        spawnLock.lock()
        defer { spawnLock.unlock() }
        var inPipe: [Int32] = [-1, -1], outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        guard pipe(&inPipe) == 0 else { throw spawnError("pipe", errno) }
        guard pipe(&outPipe) == 0 else {
            close(inPipe[0]); close(inPipe[1]); throw spawnError("pipe", errno)
        }
        guard pipe(&errPipe) == 0 else {
            for fd in inPipe + outPipe { close(fd) }; throw spawnError("pipe", errno)
        }
        for fd in inPipe + outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)

        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        // Its own process group, so stopping it reaches anything it starts; no blocked
        // signals and default handlers, whatever the daemon's threads had.
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attr, 0)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)

        var env = ProcessInfo.processInfo.environment.filter { !withholding($0.key) }
        for (k, v) in environment { env[k] = v }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in argv { free(p) }; for p in envp { free(p) } }

        var pid: pid_t = 0
        var rc: Int32 = 0
        // ETXTBSY: the executable is open for writing somewhere. Mostly a moment's matter: a
        // file written while another thread forks stays open in that child until it execs
        // (a script a test just wrote, a binary being replaced). Half a second of retries.
        for _ in 0..<50 {
            rc = posix_spawn(&pid, executable, &actions, &attr, argv, envp)
            guard rc == ETXTBSY else { break }
            usleep(10_000)
        }
        close(inPipe[0]); close(outPipe[1]); close(errPipe[1])
        guard rc == 0 else {
            close(inPipe[1]); close(outPipe[0]); close(errPipe[0])
            throw spawnError("\(executable)", rc)
        }

        let child = ChildProcess(pid: pid)
        let stdinFD = inPipe[1], stdoutFD = outPipe[0], stderrFD = errPipe[0]
        let input = stdin ?? Data()
        // Each thread owns its descriptor and closes it. One that cannot start (a pids
        // limit, an address-space limit: each thread reserves its stack) would leave the
        // child unfed, unread or unreaped, and its caller waiting for the whole timeout
        // beside a zombie: the child is stopped and reaped here instead, and the caller
        // told at once that the machine is short.
        let reaping = startThread { child.reap() }
        let started = [
            (startThread { ChildProcess.writeAll(input, to: stdinFD); close(stdinFD) }, stdinFD),
            (startThread { child.readStdout(stdoutFD) }, stdoutFD),
            (startThread { child.readStderr(stderrFD, onLine: onStderrLine) }, stderrFD),
        ]
        guard reaping, started.allSatisfy(\.0) else {
            kill(-pid, SIGKILL)
            for (running, fd) in started where !running { close(fd) }
            if !reaping {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
            throw KilnError(.resourceLimit, stage: .open, "cannot start \(executable): no thread can be started to watch it (the process, user or address-space limit is reached)")
        }
        return child
    }

    /// A child that cannot start because the machine is short (no descriptor for a pipe,
    /// no process or memory for the fork) is worth trying again; anything else is Kiln's.
    private static func spawnError(_ what: String, _ code: Int32) -> KilnError {
        let short = [EMFILE, ENFILE, EAGAIN, ENOMEM].contains(code)
        return KilnError(short ? .resourceLimit : .internalError, stage: .open, underlying: code,
                         "cannot start \(what): \(String(cString: strerror(code)))")
    }

    private static func writeAll(_ data: Data, to fd: Int32) {
        data.withUnsafeBytes { (buf: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buf.count {
                let n = write(fd, buf.baseAddress! + offset, buf.count - offset)
                if n < 0 { if errno == EINTR { continue }; return }
                offset += n
            }
        }
    }

    private func readStdout(_ fd: Int32) {
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            state.lock(); stdoutData.append(contentsOf: buf[0..<n]); state.unlock()
        }
        close(fd)
        state.lock(); stdoutOpen = false; state.broadcast(); state.unlock()
    }

    private func readStderr(_ fd: Int32, onLine: @Sendable (String) -> Bool) {
        var buf = [UInt8](repeating: 0, count: 16384)
        var pending: [UInt8] = []
        func emit(_ bytes: ArraySlice<UInt8>) {
            var line = String(decoding: bytes, as: UTF8.self)
            if line.hasSuffix("\r") { line.removeLast() }
            guard !line.isEmpty, onLine(line) else { return }
            if line.count > 500 { line = String(line.prefix(500)) + "…" }
            state.lock()
            logTail.append(line)
            if logTail.count > Self.logTailLines { logTail.removeFirst(logTail.count - Self.logTailLines) }
            state.unlock()
        }
        while true {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            pending.append(contentsOf: buf[0..<n])
            while let nl = pending.firstIndex(of: 10) {
                emit(pending[0..<nl])
                pending.removeSubrange(0...nl)
            }
            // A runaway line without a newline must not grow without bound.
            if pending.count > 1 << 20 { emit(pending[...]); pending.removeAll() }
        }
        if !pending.isEmpty { emit(pending[...]) }
        close(fd)
        state.lock(); stderrOpen = false; state.broadcast(); state.unlock()
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            if errno == EINTR { continue }
            status = -1
            break
        }
        let t: Termination
        if status == -1 { t = .exited(-1) }
        else if status & 0x7f == 0 { t = .exited((status >> 8) & 0xff) }
        else { t = .signaled(status & 0x7f) }
        state.lock(); termination = t; exitedAt = Date(); state.broadcast(); state.unlock()
    }

    /// The outcome once the process has been reaped and its pipes drained (or, if something
    /// it left behind still holds a pipe, two seconds after it exited).
    func wait(timeout: Double) -> Ended? {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout))
        state.lock()
        defer { state.unlock() }
        while true {
            if let termination, let exitedAt {
                let drained = !stdoutOpen && !stderrOpen
                if drained || Date().timeIntervalSince(exitedAt) > 2 {
                    return Ended(termination: termination, stdout: stdoutData, logTail: logTail)
                }
                let limit = min(deadline, exitedAt.addingTimeInterval(2.01))
                if !state.wait(until: limit) && limit == deadline { return nil }
            } else if !state.wait(until: deadline) {
                if termination == nil { return nil }
            }
        }
    }

    var hasExited: Bool { state.lock(); defer { state.unlock() }; return termination != nil }

    /// SIGTERM to the process group now, SIGKILL after `killAfter` seconds if it is still there.
    func terminate(killAfter: Double) {
        state.lock()
        let running = termination == nil
        let first = !killScheduled
        killScheduled = true
        state.unlock()
        guard running else { return }
        kill(-pid, SIGTERM)
        guard first else { return }
        Thread.detachNewThread { [self] in
            let deadline = Date(timeIntervalSinceNow: killAfter)
            state.lock()
            while termination == nil && state.wait(until: deadline) {}
            let stillRunning = termination == nil
            state.unlock()
            // Still unreaped, so the group id cannot have been reused yet.
            if stillRunning { kill(-pid, SIGKILL) }
        }
    }

    /// SIGKILL to the group at once.
    func kill9() {
        state.lock(); let running = termination == nil; state.unlock()
        if running { kill(-pid, SIGKILL) }
    }
}
