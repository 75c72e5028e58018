import Glibc
import KilnCore
import MediaEngine
import Synchronization

/// Turns SIGINT and SIGTERM into cancellation: the pipeline stops at its next packet (or
/// at once inside libav, through the interrupt callback) and removes its temporary file.
/// SIGHUP (the terminal or SSH session closed) and SIGXCPU (a CPU time limit reached, the
/// hard one's SIGKILL still to come) too: their default ended the process with its
/// temporary output left beside the destination and no answer.
///
/// The signals are blocked before any other thread exists (threads started later
/// inherit the mask), and one thread takes them with `sigwait`: cancelling is not
/// async-signal-safe, so it must not run in a handler. After `stop` they are still taken
/// and ignored, as a run that is finishing must not die half-way through its output.
final class SignalWatcher: @unchecked Sendable {
    private final class Shared: Sendable {
        let name = Mutex<String?>(nil)
        let stopped = Atomic<Bool>(false)
    }
    private let shared = Shared()

    var received: String? { shared.name.withLock { $0 } }

    /// The signals a watcher takes, by name.
    static let watched: [Int32: String] = [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP", SIGXCPU: "SIGXCPU"]

    /// The signals a watcher takes, blocked in the calling thread (and the threads it starts).
    @discardableResult
    static func holdUntilWatched() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for sig in watched.keys { sigaddset(&set, sig) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        return set
    }

    init(cancellation: Cancellation) {
        var set = Self.holdUntilWatched()
        let shared = self.shared, watched = set
        let started = Threads.tryStart {
            var set = watched
            while true {
                var sig: Int32 = 0
                guard sigwait(&set, &sig) == 0 else { continue }
                guard !shared.stopped.load(ordering: .acquiring) else { continue }
                shared.name.withLock { $0 = Self.watched[sig] ?? "signal \(sig)" }
                cancellation.cancel()
            }
        }
        // Without a thread to take them, the signals end the process as they would have.
        if !started { pthread_sigmask(SIG_UNBLOCK, &set, nil) }
    }

    func stop() { shared.stopped.store(true, ordering: .releasing) }

    /// `error` as the command answers it: a run a signal stopped (whatever failed as it
    /// stopped) is `canceled`, saying by what, with nothing written.
    func explain(_ error: KilnError, _ cancellation: Cancellation) -> KilnError {
        guard error.code == .canceled || cancellation.isCanceled else { return error }
        return KilnError(.canceled, stage: error.stage, "canceled by \(received ?? "request"); nothing was written")
    }
}

/// Progress for people (a bar on a terminal's standard error) and for the daemon (JSON
/// lines on standard error with `--progress-json`, so standard output keeps exactly one
/// JSON object).
final class ProgressReporter: @unchecked Sendable {
    let terminal: Bool
    let jsonLines: Bool
    private var drawn = false

    init(terminal: Bool, jsonLines: Bool) {
        self.terminal = terminal
        self.jsonLines = jsonLines
    }

    func report(_ p: JobProgress) {
        if jsonLines {
            FileIO.writeStandardError(JSONLine.progress(p) + "\n")
        }
        if terminal {
            let width = 30
            let filled = Int(p.fraction * Double(width))
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            let eta = p.etaSeconds.map {
                "ETA \(Format.zeroPadded(Int($0) / 60, width: 2)):\(Format.zeroPadded(Int($0) % 60, width: 2))"
            } ?? ""
            FileIO.writeStandardError("\r\(bar) \(Format.fixed(p.fraction * 100, decimals: 1, width: 5))%  "
                                      + "\(Format.fixed(p.speed, decimals: 1))x  \(eta)  ")
            drawn = true
        }
    }

    func clear() {
        if drawn { FileIO.writeStandardError("\r\u{1B}[K"); drawn = false }
    }
}
