import Foundation
import MediaEngine
import KilnCore

/// Turns SIGINT and SIGTERM into cancellation: the pipeline stops at its next packet (or
/// at once inside libav, through the interrupt callback) and removes its temporary file.
final class SignalWatcher: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let lock = NSLock()
    private var name: String?

    var received: String? { lock.lock(); defer { lock.unlock() }; return name }

    init(cancellation: Cancellation) {
        for (sig, label) in [(SIGINT, "SIGINT"), (SIGTERM, "SIGTERM")] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [weak self] in
                self?.lock.lock(); self?.name = label; self?.lock.unlock()
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
            FileHandle.standardError.write(Data((JSONLine.progress(p) + "\n").utf8))
        }
        if terminal {
            let width = 30
            let filled = Int(p.fraction * Double(width))
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            let eta = p.etaSeconds.map { String(format: "ETA %02d:%02d", Int($0) / 60, Int($0) % 60) } ?? ""
            let line = String(format: "\r%@ %5.1f%%  %.1fx  %@  ", bar, p.fraction * 100, p.speed, eta)
            FileHandle.standardError.write(Data(line.utf8))
            drawn = true
        }
    }

    func clear() {
        if drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)); drawn = false }
    }
}
