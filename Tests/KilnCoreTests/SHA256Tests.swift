import Testing
import Foundation
@testable import KilnCore

@Suite("SHA-256 and source fingerprints")
struct SHA256Tests {
    @Test("digests match the FIPS 180-4 test vectors, whatever the chunking")
    func vectors() {
        #expect(SHA256.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        let chunked = SHA256()
        var i = 0
        for size in [1, 63, 64, 65, 1000, 4096].cycled() {
            guard i < million.count else { break }
            let n = min(size, million.count - i)
            million[i..<i + n].withUnsafeBytes { chunked.update($0) }
            i += n
        }
        #expect(chunked.hexDigest() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("a file's bytes hash the same mapped or read, from any offset, across mapping windows")
    func fileRanges() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-sha-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let window = Int(SHA256.mappedWindow)
        var bytes = [UInt8](repeating: 0, count: 2 * window + 12_345)
        for j in bytes.indices { bytes[j] = UInt8(truncatingIfNeeded: j &* 2654435761 >> 11) }
        let path = dir.appendingPathComponent("out.mp4").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        // Page-aligned or not, inside one window or across two or three, to the very end.
        for (offset, count) in [(0, bytes.count), (1, 100), (4095, window), (window - 3, 7), (12_345, bytes.count - 12_345), (bytes.count, 0)] {
            let expected = SHA256.hex(bytes[offset..<offset + count])
            let mapped = SHA256(), read = SHA256()
            try mapped.update(file: fd, offset: Int64(offset), count: Int64(count))
            try read.update(reading: fd, offset: Int64(offset), count: Int64(count))
            #expect(mapped.hexDigest() == expected, "mapped \(offset)+\(count)")
            #expect(read.hexDigest() == expected, "read \(offset)+\(count)")
        }
        #expect(throws: SystemCallError.self) { try SHA256().update(reading: fd, offset: Int64(bytes.count - 10), count: 20) }
        // A file system that cannot map files (procfs, as some FUSE ones) is read instead.
        let version = try Data(contentsOf: URL(fileURLWithPath: "/proc/version"))
        let proc = open("/proc/version", O_RDONLY)
        defer { close(proc) }
        let hash = SHA256()
        try hash.update(file: proc, offset: 0, count: Int64(version.count))
        #expect(hash.hexDigest() == SHA256.hex(version))
    }

    @Test("a fingerprint survives a rename and changes with the content")
    func fingerprint() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-fp-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var bytes = [UInt8](repeating: 0, count: 20 << 20)
        for j in bytes.indices { bytes[j] = UInt8(truncatingIfNeeded: j &* 2654435761 >> 13) }
        let a = dir.appendingPathComponent("a.mkv"), b = dir.appendingPathComponent("b.mkv")
        try Data(bytes).write(to: a)
        let first = try SourceFingerprint.compute(path: a.path)
        try FileManager.default.moveItem(at: a, to: b)
        #expect(try SourceFingerprint.compute(path: b.path) == first)
        bytes[bytes.count - 10] ^= 0xff   // the index at the end changes
        try Data(bytes).write(to: b)
        #expect(try SourceFingerprint.compute(path: b.path) != first)
        #expect(throws: KilnError.self) { try SourceFingerprint.compute(path: dir.appendingPathComponent("missing").path) }
    }

    @Test("the farm's fingerprint cache answers an unchanged file from memory and reads a rewritten one again, even with its old size and mtime")
    func fingerprintCache() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-fpc-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("movie.mkv").path
        var bytes = [UInt8](repeating: 7, count: 1 << 20)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var before = stat()
        #expect(stat(path, &before) == 0)

        let cache = SourceFingerprintCache(settleSeconds: 0)
        let first = try cache.fingerprint(path: path)
        #expect(try cache.fingerprint(path: path) == first)
        #expect(cache.computations == 1, "the repeat was read from disk again")
        #expect(first == (try SourceFingerprint.compute(path: path)))

        // Same size, same inode, mtime put back: only the ctime tells, and it must.
        bytes[1000] = 8
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let second = try cache.fingerprint(path: path)
        #expect(second != first)
        #expect(cache.computations == 2)
        #expect(throws: KilnError.self) { try cache.fingerprint(path: dir.appendingPathComponent("missing").path) }
    }

    @Test("a file written moments ago is fingerprinted but not remembered (a write in the same clock tick could go unseen)")
    func fingerprintCacheRacy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-fpr-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("fresh.mkv").path
        try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: path))
        let cache = SourceFingerprintCache(settleSeconds: 3600)
        let a = try cache.fingerprint(path: path)
        let b = try cache.fingerprint(path: path)
        #expect(a == b)
        #expect(cache.computations == 2)
    }
}

extension Array {
    func cycled() -> AnySequence<Element> {
        AnySequence { () -> AnyIterator<Element> in
            var i = 0
            return AnyIterator { defer { i += 1 }; return self[i % self.count] }
        }
    }
}
