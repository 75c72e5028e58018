import Foundation
import KilnCore

/// Learns what a source holds. The daemon never links libav: the real prober asks a
/// `prep-artifact probe` child, so a file that crashes a demuxer costs one child.
public protocol SourceProber: Sendable {
    func probe(path: String) throws(KilnError) -> MediaInfo
}

/// `prep-artifact probe FILE --json --no-fingerprint` (the farm fingerprints the file itself).
public struct ChildProcessProber: SourceProber {
    public var executable: String
    /// A probe reads headers and a few packets; a child that takes longer is stuck.
    public var timeoutSeconds: Double

    public init(executable: String, timeoutSeconds: Double = 120) {
        self.executable = executable
        self.timeoutSeconds = timeoutSeconds
    }

    private struct FailureReport: Decodable { let ok: Bool; let error: KilnError }
    private struct ProbeReport: Decodable { let ok: Bool; let media: MediaInfo }

    public func probe(path: String) throws(KilnError) -> MediaInfo {
        let child = try ChildProcess.spawn(executable: executable, arguments: ["probe", path, "--json", "--no-fingerprint"],
                                           environment: ["KILN_PARENT_PID": String(getpid())],
                                           withholding: ChildProcessLauncher.daemonsOwn, stdin: nil,
                                           onStderrLine: { _ in true })
        guard let ended = child.wait(timeout: timeoutSeconds) else {
            child.kill9()
            _ = child.wait(timeout: 10)
            throw KilnError(.resourceLimit, stage: .probe, "the probe took longer than \(Int(timeoutSeconds)) s")
        }
        if ended.termination == .exited(0) {
            do { return try JSONDecoder().decode(ProbeReport.self, from: ended.stdout).media } catch {
                throw KilnError(.internalError, stage: .probe, "the probe printed no media description: \(error)")
            }
        }
        if let failure = try? JSONDecoder().decode(FailureReport.self, from: ended.stdout) { throw failure.error }
        let tail = ended.logTail.suffix(3).joined(separator: " / ")
        // SIGKILL is sent from outside (the kernel's out-of-memory killer, an operator): the
        // machine's trouble, worth asking again, not a bug in Kiln.
        if ended.termination == .signaled(SIGKILL) {
            throw KilnError(.resourceLimit, stage: .probe, "the probe child was killed (out of memory, or by an operator); try again")
        }
        throw KilnError(.internalError, stage: .probe, "the probe child ended with \(ended.termination)\(tail.isEmpty ? "" : ": \(tail)")")
    }
}
