#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import KilnCore

/// `<dataDir>/artifacts`: finished files as `<artifactID>.mp4`, and the hidden
/// temporaries of attempts in progress (every name carrying `.kiln-tmp-`, the marker the
/// child uses too), so a crash's leftovers are recognised at start-up.
struct ArtifactFolder: Sendable {
    static let marker = ".kiln-tmp-"
    let path: String

    func create() throws(KilnError) {
        do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
            throw KilnError(.ioError, stage: .write, "cannot create the artifact folder \(path): \(error)")
        }
    }

    func finalPath(_ artifactID: String) -> String { path + "/\(artifactID).mp4" }

    /// Where one attempt's child writes; the runner renames it to `finalPath` once the
    /// lease is confirmed, so a late child of a rescued attempt can never replace a file
    /// that a newer attempt already delivered. `claim` tells two runs of one attempt apart:
    /// a job asked for again as its canceled run stops starts again at the same attempt
    /// (both children had written to one path).
    func attemptPath(_ artifactID: String, jobID: Int64, attempt: Int, claim: Int) -> String {
        path + "/.\(artifactID).mp4\(Self.marker)job\(jobID)-attempt\(attempt)-claim\(claim)"
    }

    /// Removes what an attempt may have left: its output and the child's own temporary
    /// (`.<OUTNAME>.kiln-tmp-<pid>-<rand>`, left behind when the child was SIGKILLed).
    @discardableResult
    func removeAttemptFiles(_ attemptPath: String, keepOutput: Bool) -> [String] {
        let name = (attemptPath as NSString).lastPathComponent
        let childPrefix = "." + name + Self.marker
        var removed: [String] = []
        for entry in names() where entry.hasPrefix(childPrefix) || (!keepOutput && entry == name) {
            if unlink(path + "/" + entry) == 0 { removed.append(entry) }
        }
        return removed
    }

    /// At start-up (no attempt of ours runs yet): every temporary is a crash's leftover.
    func removeStaleTemporaries() -> [String] {
        var removed: [String] = []
        for entry in names() where entry.contains(Self.marker) {
            if unlink(path + "/" + entry) == 0 { removed.append(entry) }
        }
        return removed
    }

    func names() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] }

    /// rename(2) then fsync of the folder, so the new name survives a power cut.
    func moveIntoPlace(_ from: String, _ to: String) throws(KilnError) {
        guard rename(from, to) == 0 else {
            let e = errno
            throw KilnError(e == ENOSPC ? .diskFull : .ioError, stage: .finalize, underlying: e,
                            "cannot move \(from) to \(to): \(String(cString: strerror(e)))")
        }
        syncFolder()
    }

    /// Removes a file; a file already gone is fine.
    func remove(_ file: String) throws(KilnError) {
        if unlink(file) != 0 && errno != ENOENT {
            let e = errno
            throw KilnError(.ioError, stage: .write, underlying: e, "cannot delete \(file): \(String(cString: strerror(e)))")
        }
    }

    func syncFolder() {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}

/// Free space where the artifacts are written, for disk admission and collection under pressure.
public protocol DiskSpace: Sendable {
    /// Bytes an unprivileged writer can still use on the file system holding `path`; nil if unknown.
    func freeBytes(at path: String) -> Int64?
    /// Bytes an unprivileged writer could use were the file system empty (its size less
    /// the blocks reserved for root); nil if unknown.
    func capacityBytes(at path: String) -> Int64?
}

extension DiskSpace {
    public func capacityBytes(at path: String) -> Int64? { nil }
}

/// statvfs(3): available blocks × fragment size.
public struct FileSystemSpace: DiskSpace {
    public init() {}
    public func freeBytes(at path: String) -> Int64? {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return nil }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
    public func capacityBytes(at path: String) -> Int64? {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return nil }
        return (Int64(s.f_blocks) - (Int64(s.f_bfree) - Int64(s.f_bavail))) * Int64(s.f_frsize)
    }
}

/// Where the farm's log lines go (start-up recovery, unknown files, retries, failures).
public protocol FarmLog: Sendable {
    func write(_ line: String)
}

/// One line per message on standard error, prefixed so it can be told from the child's.
public struct StandardErrorLog: FarmLog {
    public init() {}
    public func write(_ line: String) {
        FileHandle.standardError.write(Data("kiln farm: \(line)\n".utf8))
    }
}
