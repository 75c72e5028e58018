import CCrypto
#if canImport(Glibc)
import Glibc
#endif

/// SHA-256 through OpenSSL's libcrypto, which uses the CPU's SHA instructions (about
/// 2 GB/s here, against ~200 MB/s for portable Swift): output checksums, source
/// fingerprints and artifact keys all hash with it. Owns its `SHA256_CTX` (the low-level
/// interface: see CCrypto's shim for why not EVP).
public final class SHA256 {
    private let context: UnsafeMutablePointer<SHA256_CTX>

    public init() {
        context = .allocate(capacity: 1)
        SHA256_Init(context)
    }

    deinit { context.deallocate() }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        SHA256_Update(context, base, bytes.count)
    }

    public func update<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        Array(bytes).withUnsafeBytes { update($0) }
    }

    public func update(_ string: String) { update(Array(string.utf8)) }

    /// The digest; the hasher is spent afterwards.
    public func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        SHA256_Final(&out, context)
        return out
    }

    public func hexDigest() -> String { finalize().hex }

    public static func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
        let s = SHA256(); s.update(bytes); return s.hexDigest()
    }

    public static func hex(_ string: String) -> String { hex(Array(string.utf8)) }

    /// The digest of `bytes`.
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        let s = SHA256(); bytes.withUnsafeBytes { s.update($0) }; return s.finalize()
    }
}

extension SHA256 {
    /// How much of a file `update(file:)` maps at a time. Mapped pages count in the
    /// process's resident memory while mapped: a megabyte hashes as fast as more.
    public static let mappedWindow: Int64 = 1 << 20

    /// Hashes `count` bytes of the open file `fd` from `offset`, mapped rather than read:
    /// the hash reads the page cache where it lies, without the copy into a buffer that a
    /// read makes (a tenth of hashing a film's remux). The bytes must be in the file and stay
    /// there while they are hashed, since a mapped page past the file's end is a SIGBUS:
    /// callers hash what they know is written and that nothing cuts off meanwhile. A file
    /// that cannot be mapped (procfs, some FUSE file systems) is read instead, and a read
    /// that fails says why.
    public func update(file fd: Int32, offset: Int64, count: Int64) throws(SystemCallError) {
        let page = Int64(sysconf(Int32(_SC_PAGESIZE)))
        var position = offset
        let end = offset + count
        while position < end {
            let start = position / page * page
            let length = min(end - start, Self.mappedWindow)
            guard let map = mmap(nil, Int(length), PROT_READ, MAP_SHARED, fd, off_t(start)), map != MAP_FAILED else {
                return try update(reading: fd, offset: position, count: end - position)
            }
            // Read ahead of the hash when the file is no longer in the page cache.
            _ = madvise(map, Int(length), MADV_SEQUENTIAL)
            update(UnsafeRawBufferPointer(start: map + Int(position - start), count: Int(start + length - position)))
            munmap(map, Int(length))
            position = start + length
        }
    }

    /// The same through reads into a buffer.
    func update(reading fd: Int32, offset: Int64, count: Int64) throws(SystemCallError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(Self.mappedWindow), alignment: 64)
        defer { buffer.deallocate() }
        var position = offset
        let end = offset + count
        while position < end {
            let n = try systemCall("cannot read the file") {
                pread(fd, buffer.baseAddress, Int(min(end - position, Int64(buffer.count))), off_t(position))
            }
            guard n > 0 else { throw SystemCallError("the file ends early", errno: EIO) }
            update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            position += Int64(n)
        }
    }
}

extension Sequence where Element == UInt8 {
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for b in self { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }
}

/// HMAC-SHA256 (RFC 2104) through libcrypto: the webhook's `X-Kiln-Signature`.
public enum HMACSHA256 {
    public static func hex(key: [UInt8], message: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        key.withUnsafeBufferPointer { k in
            message.withUnsafeBufferPointer { m in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress, m.count, &out, &length)
            }
        }
        return out.prefix(Int(length)).hex
    }
}
