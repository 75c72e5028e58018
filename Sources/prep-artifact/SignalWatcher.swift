import Dispatch
import Glibc
import KilnCore
import MediaEngine
import Synchronization

/// Turns SIGINT and SIGTERM into cancellation: the pipeline stops at its next packet (or
/// at once inside libav, through the interrupt callback) and removes its temporary file.
final class SignalWatcher: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let name = Mutex<String?>(nil)

    var received: String? { name.withLock { $0 } }

    init(cancellation: Cancellation) {
        for (sig, label) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [weak self] in
                self?.name.withLock { $0 = label }
                cancellation.cancel()
            }
            source.resume()
            sources.append(source)
        }
    }

    func stop() { for s in sources { s.cancel() } }
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
