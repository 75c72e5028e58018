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

    /// A fresh folder on tmpfs (which cannot insert ranges), nil where there is none.
    static func tmpfsScratch(_ label: String) throws -> URL? {
        guard FileManager.default.fileExists(atPath: "/dev/shm") else { return nil }
        let dir = URL(fileURLWithPath: "/dev/shm").appendingPathComponent("kiln-\(label)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
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
        guard let dir = try Self.tmpfsScratch("faststart") else { return }
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
        let file = try #require(FileHandle(forWritingAtPath: { _ = FileManager.default.createFile(atPath: path, contents: nil); return path }()))
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

    @Test("hashing a finished output stops when the run is canceled, before it starts or midway")
    func digestCancels() throws {
        let dir = Media.scratch("digest-cancel")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("holes.bin").path
        // 4 GiB of holes: hashing all of it takes seconds.
        try #require(FileManager.default.createFile(atPath: path, contents: nil))
        try #require(truncate(path, 4 << 30) == 0)
        let canceled = Cancellation()
        canceled.cancel()
        #expect { _ = try AtomicOutput.digest(path: path, cancellation: canceled) } throws: { ($0 as? KilnError)?.code == .canceled }
        let midway = Cancellation()
        Threads.start { usleep(100_000); midway.cancel() }
        #expect { _ = try AtomicOutput.digest(path: path, cancellation: midway) } throws: { ($0 as? KilnError)?.code == .canceled }
    }
}

@Suite("Room for the index")
struct IndexRoomTests {
    /// The output's top-level boxes, through the same reader Kiln uses.
    static func boxes(_ path: String) throws -> [FastStart.Box] {
        let file = try FileDescriptor(path: path, flags: O_RDONLY)
        var st = stat()
        _ = fstat(file.rawValue, &st)
        return try FastStart.topLevelBoxes(file, fileSize: Int64(st.st_size))
    }

    /// Remuxes `name` with the index forecast forced on, leaving `room` (nil: the estimate)
    /// for the index, into `dir`.
    static func remux(_ path: String, room: Int64? = nil, in dir: URL) throws -> (PrepareResult, String, Int64)? {
        let opened = try Prober.open(path: path, secondReaderFrom: .always)
        guard let plan = EnginePlans.remux(opened.info) else { return nil }
        let estimate = IndexRoom.bytes(plan: plan, demuxer: try opened.demuxer(),
                                       durationSeconds: Preparer.expectedDuration(info: opened.info, plan: plan))
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: opened, plan: plan, output: out, forecastFrom: .always, awaitForecast: true,
                                          room: room)
        return (result, out, room ?? estimate)
    }

    /// Generated sources the shared files lack: VFR, MPEG-TS with interlacing and with a
    /// timestamp wrap, 10-bit HDR10 HEVC.
    static let generated: [String: @Sendable () throws -> String] = [
        "vfr.mkv": Generated.vfrMKV, "interlaced.ts": Generated.interlacedTS, "wrapping.ts": Generated.wrappingTS,
        "hdr10.mkv": Generated.hdr10HEVC,
    ]

    @Test("a remux's index is written into the room left for it: no media byte moves, little is left over",
          arguments: Media.sharedFiles + generated.keys.sorted())
    func indexFitsItsRoom(_ name: String) throws {
        guard !SharedMediaTests.unreadable.contains(name) else { return }
        let dir = Media.scratch("room")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = try Self.generated[name].map { try $0() } ?? Media.shared(name)
        guard let (result, out, room) = try Self.remux(path, in: dir) else { return }
        let boxes = try Self.boxes(out)
        try #require(boxes.count >= 4, "\(name): \(boxes.map(\.type))")
        let (ftyp, moov, free) = (boxes[0], boxes[1], boxes[2])
        #expect(ftyp.type == "ftyp" && moov.type == "moov" && free.type == "free", "\(name): \(boxes.map(\.type))")
        // The free box reaches over the muxer's own ftyp, which it began writing at `room`:
        // had blocks been inserted, it would reach further.
        #expect(free.offset + free.size == room + ftyp.size, "\(name): the index did not fit its room of \(room) bytes")
        #expect(free.size <= max(16 << 10, moov.size / 2), "\(name): \(free.size) bytes left over for a \(moov.size)-byte index")
        let reference = try Run.command("sha256sum", [out]).stdout.prefix(64)
        #expect(result.output.sha256 == String(reference), "\(name)")
    }

    @Test("a duration gone wrong cannot leave megabytes of room in a small file")
    func roomIsBounded() throws {
        let path = Media.shared("sp_bear-640x360-ec3.mp4")
        let opened = try Prober.open(path: path)
        let plan = try #require(EnginePlans.remux(opened.info))
        let size = try #require(FileIO.size(atPath: path))
        let sane = IndexRoom.bytes(plan: plan, demuxer: try opened.demuxer(), durationSeconds: opened.info.durationSeconds)
        for bogus in [1e9, .infinity, .nan, -5] {
            let room = IndexRoom.bytes(plan: plan, demuxer: try opened.demuxer(), durationSeconds: bogus)
            #expect(room > 0 && room <= size / 16 + (256 << 10) + IndexRoom.granule, "\(bogus): \(room)")
            #expect(room % IndexRoom.granule == 0)
        }
        #expect(sane <= size / 16 + (256 << 10) + IndexRoom.granule)
    }

    @Test("an index that outgrows its room gets blocks inserted in front; the forecast saw it coming")
    func outgrownRoomInserts() throws {
        let dir = Media.scratch("room-small")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = Media.shared("ax_sample_with_srt.mkv")
        let (fitted, fittedOut, _) = try #require(try Self.remux(source, in: dir))
        let before = try FastStartTests.packets(fittedOut)
        let (result, out, _) = try #require(try Self.remux(source, room: 4096, in: dir))
        #expect(result.stats.hashedWhileWriting)
        #expect(result.output.sha256 == String(try Run.command("sha256sum", [out]).stdout.prefix(64)))
        #expect(result.output.sha256 != fitted.output.sha256, "a different layout")
        #expect(try FFprobe.moovBeforeMdat(out))
        #expect(try FastStartTests.packets(out) == before, "the same packets either way")
        #expect(try FFprobe.decodeErrors(out).isEmpty)
    }

    @Test("where blocks cannot be inserted (tmpfs), an index a few bytes too big for its room moves the media data back")
    func outgrownRoomRewritesOnTmpfs() throws {
        guard let dir = try FastStartTests.tmpfsScratch("room") else { return }
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = Media.shared("ax_sample_with_srt.mkv")
        let (_, fittedOut, _) = try #require(try Self.remux(source, in: dir))
        let before = try FastStartTests.packets(fittedOut)
        let boxes = try Self.boxes(fittedOut)
        // ftyp, moov and a free header need 8 bytes more than this: the media data, which
        // starts after the room, moves back by the few bytes it leaves over.
        let tight = boxes[0].size + boxes[1].size + 7
        let (result, out, _) = try #require(try Self.remux(source, room: tight, in: dir))
        #expect(result.output.sha256 == String(try Run.command("sha256sum", [out]).stdout.prefix(64)))
        #expect(try FFprobe.moovBeforeMdat(out))
        #expect(try FastStartTests.packets(out) == before)
        #expect(try FFprobe.decodeErrors(out).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["out.mp4"], "no leftover")
    }
}
