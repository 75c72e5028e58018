#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Notices a source that changes while it is prepared: a recording still in progress, a
/// copy into the library not yet finished, a file rewritten in place or replaced. Read to
/// its end such a file looks damaged (packets past the length its header declared, an
/// index that stops short) or gives an artifact of a file that no longer exists, under the
/// key of the one that was asked for. It holds the file open and compares its size and
/// modification time, and what the path names (a file renamed over it, or removed: the
/// source is opened again by path, for a retry or a plain copy).
public final class SourceWatch: @unchecked Sendable {
    private let fd: Int32
    private let path: String
    private let first: FileIdentity

    /// nil when the path cannot be opened as a regular file (the probe says why).
    public init?(path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            return nil
        }
        self.fd = fd
        self.path = path
        first = FileIdentity(st)
    }

    deinit { close(fd) }

    /// Throws `source_changed` at `stage` if the file's size or modification time moved
    /// since the watch began, or the path now names another file or none.
    public func check(_ stage: KilnError.Stage) throws(KilnError) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return }
        let now = FileIdentity(st)
        let how: String
        if now.size != first.size || now.mtime != first.mtime {
            how = now.size > first.size ? "grew from \(first.size) to \(now.size) bytes"
                : now.size < first.size ? "shrank from \(first.size) to \(now.size) bytes" : "was rewritten"
        } else if let named = FileIdentity(path: path), named.device == first.device && named.inode == first.inode {
            return
        } else {
            how = FileIdentity(path: path) == nil ? "was removed" : "was replaced by another file"
        }
        throw KilnError(.sourceChanged, stage: stage,
                        "the source \(how) while it was read (a recording or copy still in progress?); ask again once it is complete")
    }
}
