#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
        let fd = open(path, O_RDONLY | O_CLOEXEC)
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
        var buf = [UInt8](repeating: 0, count: max(edgeBytes, sliceBytes))
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
        return "\(version)-\(hash.hexDigest())"
    }
}
