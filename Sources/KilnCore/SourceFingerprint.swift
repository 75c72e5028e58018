#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// The identity of a source file's content, for artifact keys and the probe cache.
///
/// It must survive a rename (so no path, inode or mtime goes in) and change when the
/// content changes. Hashing a 60 GB remux in full would take minutes of disk time on every
/// request, so the cost is bounded: files up to 8 MiB are hashed whole; larger ones hash
/// their exact size, the first and last MiB (container headers, indexes, trailing moov)
/// and 64 slices of 64 KiB spread evenly between — at most 6 MiB read whatever the size.
/// An edit that keeps the size and touches none of those bytes goes unnoticed; media
/// edits (re-muxes, re-encodes, tag changes) move the index or the size and are caught.
public enum SourceFingerprint {
    public static let version = "fp1"
    static let wholeFileLimit: Int64 = 8 << 20
    static let edgeBytes = 1 << 20
    static let sliceBytes = 64 << 10
    static let sliceCount = 64

    public static func compute(path: String) throws(KilnError) -> String {
        try computeWithIdentity(path: path).fingerprint
    }

    /// The fingerprint and the identity of the file it was read from (taken from the open
    /// descriptor, so both describe the same file even if the path is replaced meanwhile).
    static func computeWithIdentity(path: String) throws(KilnError) -> (fingerprint: String, identity: FileIdentity) {
        // Non-blocking: opening a named pipe would otherwise wait for a writer (forever);
        // it is then refused below as not a regular file. Regular files ignore the flag.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            let e = errno
            let code: KilnError.Code = (e == ENOENT || e == ENOTDIR) ? .sourceNotFound : .sourceUnreadable
            throw KilnError(code, stage: .probe, underlying: e, "cannot open the source: \(String(cString: strerror(e)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            throw KilnError(.sourceUnreadable, stage: .probe, underlying: errno, "cannot stat the source")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            throw KilnError(.sourceUnreadable, stage: .probe, "the source is not a regular file")
        }
        let size = Int64(st.st_size)
        let hash = SHA256()
        hash.update("\(version):\(size):")
        var ranges: [(Int64, Int)] = []
        if size <= wholeFileLimit {
            ranges = [(0, Int(size))]
        } else {
            ranges.append((0, edgeBytes))
            let inner = size - Int64(2 * edgeBytes) - Int64(sliceBytes)
            for i in 0..<sliceCount {
                ranges.append((Int64(edgeBytes) + inner * Int64(i) / Int64(sliceCount - 1), sliceBytes))
            }
            ranges.append((size - Int64(edgeBytes), edgeBytes))
        }
        // No bigger than the file, and not zeroed first: a small file's fingerprint must
        // not cost a megabyte of memset.
        let capacity = Int(min(Int64(max(edgeBytes, sliceBytes)), max(size, 1)))
        var buf = [UInt8](unsafeUninitializedCapacity: capacity) { _, count in count = capacity }
        for (offset, length) in ranges {
            var done = 0
            while done < length {
                let want = min(length - done, buf.count)
                let n = buf.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset) + off_t(done)) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw KilnError(.sourceUnreadable, stage: .probe, underlying: errno,
                                    "cannot read the source: \(String(cString: strerror(errno)))")
                }
                if n == 0 { break } // shrank while we read; the size already in the hash tells
                buf.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                done += n
            }
        }
        return ("\(version)-\(hash.hexDigest())", FileIdentity(st))
    }
}

/// What changes whenever a file's content may have: device, inode, size, modification and
/// status-change times (ctime cannot be set back by a user, unlike mtime).
struct FileIdentity: Hashable, Sendable {
    let device: UInt64, inode: UInt64, size: Int64
    let mtime: Int64, ctime: Int64  // nanoseconds

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        mtime = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        ctime = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
    }

    /// nil when the path cannot be stat'ed (the computation then reports why).
    init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }
}

/// Remembers fingerprints by file identity, so the farm does not read up to 6 MiB of a
/// source again on every request for it (a cold read on a NAS's disks costs tens of
/// random seeks). A file whose times are within `settleNanoseconds` of the moment it was
/// read is not remembered: the kernel's timestamps are coarse, so a write in the same
/// tick could change the content without changing the identity (git's "racy" entries).
public final class SourceFingerprintCache: Sendable {
    private struct State {
        var entries: [FileIdentity: String] = [:]
        var computations = 0
    }
    private let state = Mutex(State())
    private let capacity: Int
    private let settleNanoseconds: Int64
    private let now: @Sendable () -> Int64

    public init(capacity: Int = 4096, settleSeconds: Double = 2,
                now: @escaping @Sendable () -> Int64 = { SourceFingerprintCache.realtimeNanoseconds() }) {
        self.capacity = capacity
        self.settleNanoseconds = Int64(settleSeconds * 1e9)
        self.now = now
    }

    public static func realtimeNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// How many fingerprints were read from disk (not answered from memory).
    public var computations: Int { state.withLock { $0.computations } }

    public func fingerprint(path: String) throws(KilnError) -> String {
        if let identity = FileIdentity(path: path), let known = state.withLock({ $0.entries[identity] }) {
            return known
        }
        let (fingerprint, identity) = try SourceFingerprint.computeWithIdentity(path: path)
        let settled = now() - max(identity.mtime, identity.ctime) >= settleNanoseconds
        state.withLock { s in
            s.computations += 1
            guard settled else { return }
            // Forgetting everything at once is crude but bounded; a library has far fewer
            // files in flight than `capacity`.
            if s.entries.count >= capacity { s.entries.removeAll(keepingCapacity: true) }
            s.entries[identity] = fingerprint
        }
        return fingerprint
    }
}
