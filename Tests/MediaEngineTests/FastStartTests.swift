import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("Moving the index to the front")
struct FastStartTests {
    /// An MP4 with its index at the end, as libavformat writes it without faststart.
    static func trailingIndexMP4(in dir: URL) throws -> String {
        let source = try Generated.vfrMKV()
        let out = dir.appendingPathComponent("trailing.mp4").path
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", source, "-map", "0", "-c", "copy", out])
        guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        #expect(try !FFprobe.moovBeforeMdat(out), "the fixture must start with its index at the end")
        return out
    }

    /// Every packet's stream, timestamps, size and checksum, as ffmpeg reads them.
    static func packets(_ path: String) throws -> [String] {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0", "-c", "copy", "-f", "framemd5", "-"])
        guard r.status == 0 else { throw TestFailure("ffmpeg framemd5: \(r.stderr)") }
        return r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }

    static func inode(_ path: String) -> UInt64 {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_ino) : 0
    }

    @Test("the index moves to the front in place (blocks inserted, media data untouched): same packets, same file")
    func insertsInPlace() throws {
        let dir = Media.scratch("faststart-insert")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = try Self.trailingIndexMP4(in: dir)
        let before = try Self.packets(path)
        let inode = Self.inode(path)
        #expect(try FastStart.apply(path: path).method == .inserted, "ext4 and XFS insert ranges")
        #expect(Self.inode(path) == inode, "the same file, not a rewritten copy")
        #expect(try FFprobe.moovBeforeMdat(path))
        #expect(try Self.packets(path) == before)
        #expect(try FFprobe.decodeErrors(path).isEmpty)
        #expect(try FastStart.apply(path: path).method == .alreadyFirst)
    }

    @Test("where the file system cannot insert (tmpfs), the file is rewritten once with the same packets")
    func rewritesWhereInsertFails() throws {
        guard FileManager.default.fileExists(atPath: "/dev/shm") else { return }
        let dir = URL(fileURLWithPath: "/dev/shm").appendingPathComponent("kiln-faststart-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = try Self.trailingIndexMP4(in: dir)
        let before = try Self.packets(path)
        #expect(try FastStart.apply(path: path).method == .rewritten)
        #expect(try FFprobe.moovBeforeMdat(path))
        #expect(try Self.packets(path) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["trailing.mp4"], "no leftover")
    }

    @Test("chunk offsets pushed past 4 GiB become 64-bit entries, and the boxes around them grow")
    func widensOffsets() throws {
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let n = UInt32(payload.count + 8)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + Array(type.utf8) + payload
        }
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        let stco = box("stco", [0, 0, 0, 0] + be32(2) + be32(100) + be32(UInt32.max - 10))
        let udta = box("udta", Array("untouched".utf8))
        let moov = box("moov", box("trak", box("mdia", box("minf", box("stbl", stco)))) + udta)

        let small = try FastStart.relocated(moov: moov, by: 4)
        #expect(small.count == moov.count, "offsets that still fit keep 32-bit entries")
        #expect(small.suffix(udta.count).elementsEqual(udta))

        let moved = try FastStart.relocated(moov: moov, by: 4096)
        #expect(moved.count == moov.count + 8, "two entries, four bytes wider each")
        #expect(Array(moved[4..<8]) == Array("moov".utf8))
        #expect(Array(moved[0..<4]) == be32(UInt32(moved.count)))
        guard let at = (0..<(moved.count - 4)).first(where: { Array(moved[$0..<($0 + 4)]) == Array("co64".utf8) }) else {
            Issue.record("no co64 box"); return
        }
        let entries = moved[(at + 12)..<(at + 28)]
        let first = entries.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let second = entries.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(first == 100 + 4096)
        #expect(second == UInt64(UInt32.max) - 10 + 4096)
        #expect(moved.suffix(udta.count).elementsEqual(udta))
    }
}

@Suite("output digest")
struct DigestTests {
    @Test("the SHA-256 of an output larger than one mapping window is sha256sum's")
    func digestAcrossWindows() throws {
        let dir = Media.scratch("digest")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("big.bin").path
        // 130 MB and a few bytes: two whole 64 MB windows and a ragged end.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        let file = try #require(FileHandle(forWritingAtPath: { FileManager.default.createFile(atPath: path, contents: nil); return path }()))
        for _ in 0..<130 {
            for i in 0..<chunk.count { state = state &* 6364136223846793005 &+ 1442695040888963407; chunk[i] = UInt8(truncatingIfNeeded: state >> 56) }
            file.write(Data(chunk))
        }
        file.write(Data([1, 2, 3, 4, 5, 6, 7]))
        try file.close()
        let (sha, bytes) = try AtomicOutput.digest(path: path)
        #expect(bytes == 130 * (1 << 20) + 7)
        let reference = try Run.command("sha256sum", [path]).stdout.prefix(64)
        #expect(sha == String(reference))
    }
}
