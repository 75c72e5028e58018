#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// Puts a finished MP4's index (`moov`) in front of its media data, for players that start
/// before the whole file has arrived.
///
/// libavformat's `+faststart` does it by rewriting the file: after writing every byte once
/// it reads them all back and writes them all again, shifted by the index's size. For a
/// 40 GB remux that is two more passes over the disk than the copy itself. Kiln's muxer
/// instead starts writing `room` bytes into the file (`IndexRoom`: an estimate of the
/// index's size from the streams' sample counts), so the index is written into the room
/// left in front and nothing moves: the file stays in the page cache for hashing and
/// verification. If the index outgrew the room, the file system makes more:
/// `fallocate(FALLOC_FL_INSERT_RANGE)` inserts whole blocks at the start without moving
/// data (ext4, XFS), and every chunk offset in the index moves by the inserted length.
/// Where the file system cannot insert, the file is rewritten once.
///
/// The result: `ftyp`, `moov`, a `free` box filling the room (and covering the muxer's own
/// `ftyp`), then the media data exactly as the muxer wrote it.
enum FastStart {
    enum Method: Equatable { case alreadyFirst, inRoom, inserted, rewritten }

    struct Box: Equatable {
        var type: String
        var offset: Int64
        var size: Int64
    }

    /// An index larger than this is not an MP4 Kiln wrote (a 3-hour film's is a few MB).
    static let maxIndexBytes: Int64 = 1 << 30

    /// Every byte of a finished file before the muxer's own: ftyp, the index and the
    /// header of a free box, then zeros. The zeros are never written: the room and any
    /// inserted blocks are holes, which read as zeros.
    struct Head: Equatable {
        /// ftyp, the index and the free box's header.
        var bytes: [UInt8]
        /// The whole head, zeros after `bytes` included.
        var length: Int64
        /// How much of it was inserted in front (0: the index fitted its room).
        var inserted: Int64

        /// What identifies the head once it is written: its bytes' SHA-256 and its sizes.
        /// Kept instead of the bytes (a film's index is hundreds of kB, and the forecast's
        /// and the index move's copies would otherwise both live to the end of the run).
        var mark: Mark { Mark(sha256: SHA256.digest(bytes), length: length, inserted: inserted) }

        struct Mark: Equatable {
            var sha256: [UInt8]
            var length: Int64
            var inserted: Int64
        }
    }

    /// What `apply` did: how, and for an index written into the room or inserted blocks,
    /// the head's mark (the muxer's bytes follow the head unchanged, from `room` up to
    /// `dataEnd`, where the old index began).
    struct Outcome: Equatable {
        var method: Method
        var head: Head.Mark? = nil
        var dataEnd: Int64 = 0
    }

    /// - Parameter room: where the muxer's first byte (its `ftyp`) is; the bytes before it
    ///   were left for the index.
    static func apply(path: String, room: Int64 = 0, cancellation: Cancellation = Cancellation()) throws(KilnError) -> Outcome {
        let file: FileDescriptor
        do { file = try FileDescriptor(path: path, flags: O_RDWR) } catch { throw ioError(error) }
        let fd = file.rawValue
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw ioError(errno, "cannot stat the output") }
        let boxes = try topLevelBoxes(file, from: room, fileSize: Int64(st.st_size))
        guard let ftyp = boxes.first, ftyp.type == "ftyp",
              let moovIndex = boxes.firstIndex(where: { $0.type == "moov" }),
              let mdatIndex = boxes.firstIndex(where: { $0.type == "mdat" }) else {
            throw KilnError(.internalError, stage: .mux, "the output has no ftyp, moov or mdat box: \(boxes.map(\.type))")
        }
        if moovIndex < mdatIndex, room == 0 { return Outcome(method: .alreadyFirst) }
        let moovBox = boxes[moovIndex]
        guard moovIndex == boxes.count - 1, moovBox.size <= maxIndexBytes else {
            throw KilnError(.internalError, stage: .mux, "the output's index is not its last box: \(boxes.map(\.type))")
        }
        // The index as it goes in front: the muxer's, with the track roles Apple's players read.
        let moov = try TrackCharacteristics.tagged(moov: read(file, at: moovBox.offset, count: Int(moovBox.size)))
        let ftypBytes = try read(file, at: ftyp.offset, count: Int(ftyp.size))
        let head = try self.head(ftyp: ftypBytes, moov: moov, room: room, blockSize: blockSize(st))
        if head.inserted == 0 {
            try write(file, head.bytes, at: 0)
            guard ftruncate(fd, off_t(moovBox.offset)) == 0 else { throw ioError(errno, "cannot cut the old index off") }
            return Outcome(method: .inRoom, head: head.mark, dataEnd: moovBox.offset)
        }
        if kiln_insert_range(fd, 0, head.inserted) == 0 {
            try write(file, head.bytes, at: 0)
            // The muxer's ftyp, now at the head's end, lies inside the free box: its bytes are padding.
            guard ftruncate(fd, off_t(head.inserted + moovBox.offset)) == 0 else {
                throw ioError(errno, "cannot cut the old index off")
            }
            return Outcome(method: .inserted, head: head.mark, dataEnd: moovBox.offset)
        }
        let e = errno
        guard e == EOPNOTSUPP || e == EINVAL || e == ENOSYS || e == EPERM else {
            throw ioError(e, "cannot make room for the index")
        }
        try rewrite(path: path, file: file, ftyp: ftypBytes, moov: moov, dataStart: ftyp.offset + ftyp.size, dataEnd: moovBox.offset,
                    cancellation: cancellation)
        return Outcome(method: .rewritten)
    }

    /// The head of a file whose muxer wrote `ftyp` first (at `room`) and `moov` last, and
    /// how many bytes must be inserted for it (0 when the index fits the room): ftyp, the
    /// index (its chunk offsets moved by the inserted length) and a free box reaching over
    /// the muxer's ftyp. A pure function of its inputs, so the index forecast can know it
    /// before the file exists. The index grows if an offset moved past 4 GiB needs 64-bit
    /// entries, so an inserted length is settled by iteration.
    static func head(ftyp: [UInt8], moov: [UInt8], room: Int64 = 0, blockSize block: Int64) throws(KilnError) -> Head {
        func needed(_ index: [UInt8]) -> Int64 { headBytes(ftyp: ftyp, moov: index) }
        var inserted: Int64 = 0
        var moved = moov
        while needed(moved) > room + inserted {
            inserted = roundUp(needed(moved) - room, block)
            moved = try relocated(moov: moov, by: inserted)
        }
        let total = room + inserted
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(needed(moved)))
        bytes += ftyp
        bytes += moved
        bytes += freeHeader(size: total - Int64(moved.count))  // from after the index to the muxer's ftyp's end
        return Head(bytes: bytes, length: total, inserted: inserted)
    }

    /// The unit an insert works in: the file system's block.
    static func blockSize(_ st: stat) -> Int64 { Int64(max(st.st_blksize, 4096)) }

    /// The fallback: a new file with the index in front, the media data copied once
    /// (copy_file_range, so the kernel moves it), renamed over the old one.
    private static func rewrite(path: String, file: FileDescriptor, ftyp: [UInt8], moov: [UInt8], dataStart: Int64, dataEnd: Int64,
                                cancellation: Cancellation) throws(KilnError) {
        // The media data moves from `dataStart` to just after ftyp and the index: by the
        // index's size less the room it leaves behind (negative if the room was bigger).
        func shift(_ index: [UInt8]) -> Int64 { Int64(ftyp.count + index.count) - dataStart }
        var moved = moov
        while true {
            let next = try relocated(moov: moov, by: shift(moved))
            defer { moved = next }
            if next.count == moved.count { break }
        }
        let tmp = path + ".faststart"
        let out: FileDescriptor
        do { out = try FileDescriptor(path: tmp, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644) } catch { throw ioError(error) }
        var ok = false
        defer { if !ok { unlink(tmp) } }
        try write(out, ftyp + moved, at: 0)
        var inOffset = dataStart, outOffset = Int64(ftyp.count + moved.count)
        var kernelCopies = true
        while inOffset < dataEnd {
            // 64 MB at a time, so a cancellation is heard within a second on any disk.
            try cancellation.check(.mux)
            let want = min(dataEnd - inOffset, 64 << 20)
            if kernelCopies {
                let n = kiln_copy_file_range(file.rawValue, &inOffset, out.rawValue, &outOffset, want)
                if n > 0 { continue }
                if n == 0 { throw KilnError(.ioError, stage: .mux, "the output shrank while its index was moved") }
                if errno == EINTR { continue }
                guard [ENOSYS, EXDEV, EOPNOTSUPP, EINVAL].contains(errno) else { throw ioError(errno, "cannot copy the media data") }
                kernelCopies = false  // then through user space
            }
            let chunk = try read(file, at: inOffset, count: Int(min(want, 4 << 20)))
            guard !chunk.isEmpty else { throw KilnError(.ioError, stage: .mux, "the output shrank while its index was moved") }
            try write(out, chunk, at: outOffset)
            inOffset += Int64(chunk.count)
            outOffset += Int64(chunk.count)
        }
        guard rename(tmp, path) == 0 else { throw ioError(errno, "cannot replace the output") }
        ok = true
    }

    // MARK: Boxes

    /// The file's top-level boxes in order (also what verification reads to find the
    /// index in front), the first `limit` of them; from `start` to `fileSize`, which for a
    /// box's children is its payload and its end.
    /// `upToDamage`: a box that runs past the end (a file cut short) ends the list instead
    /// of failing it.
    static func topLevelBoxes(_ file: FileDescriptor, from start: Int64 = 0, fileSize: Int64, limit: Int = .max,
                              upToDamage: Bool = false) throws(KilnError) -> [Box] {
        try topLevelBoxes(from: start, size: fileSize, limit: limit, upToDamage: upToDamage) { (offset, count) throws(KilnError) in
            try read(file, at: offset, count: count)
        }
    }

    /// The same over any `size` bytes that `read(offset, count)` returns (the index
    /// forecast's recorder, which kept only some of them, throws for the rest).
    static func topLevelBoxes(from start: Int64 = 0, size fileSize: Int64, limit: Int = .max, upToDamage: Bool = false,
                              read: (Int64, Int) throws(KilnError) -> [UInt8]) throws(KilnError) -> [Box] {
        var boxes: [Box] = []
        var offset = start
        while offset + 8 <= fileSize, boxes.count < limit {
            let head = try read(offset, Int(min(16, fileSize - offset)))
            var size = Int64(be32(head, 0))
            let type = String(decoding: head[4..<8], as: UTF8.self)
            if size == 1 {
                guard head.count >= 16 else { break }
                size = Int64(bitPattern: be64(head, 8))
            } else if size == 0 {
                size = fileSize - offset
            }
            // (Compared as what is left: a damaged 64-bit size near 2^63 would overflow a sum.)
            guard size >= 8, size <= fileSize - offset else {
                if upToDamage { break }
                throw KilnError(.internalError, stage: .mux, "the output's \(type) box at \(offset) is malformed")
            }
            boxes.append(Box(type: type, offset: offset, size: size))
            offset += size
        }
        return boxes
    }

    /// The `moov` box with every chunk offset (`stco`, `co64`) moved by `delta`; a 32-bit
    /// table whose offsets no longer fit becomes a 64-bit one, and the boxes around it
    /// grow with it.
    static func relocated(moov: [UInt8], by delta: Int64) throws(KilnError) -> [UInt8] {
        try rewriteBoxes(moov[...], delta: delta)
    }

    /// Boxes whose children hold the sample tables.
    private static let containers: Set<String> = ["moov", "trak", "mdia", "minf", "stbl"]

    private static func rewriteBoxes(_ bytes: ArraySlice<UInt8>, delta: Int64) throws(KilnError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 64)
        for child in try children(bytes) {
            switch child.type {
            case _ where containers.contains(child.type):
                out += box(child.type, try rewriteBoxes(bytes[child.body], delta: delta))
            case "stco", "co64":
                out += try chunkOffsets(bytes[child.body], wide: child.type == "co64", delta: delta)
            default:
                out += bytes[child.box]
            }
        }
        return out
    }

    /// One box inside an index: its type, where the whole box is and where its payload is.
    struct Child {
        var type: String
        var box: Range<Int>
        var body: Range<Int>
    }

    /// The boxes `bytes` holds one after the other (a box's payload, or a whole box),
    /// each checked to lie inside them.
    static func children(_ bytes: ArraySlice<UInt8>) throws(KilnError) -> [Child] {
        var found: [Child] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            guard bytes.endIndex - i >= 8 else { throw malformed("a box header is cut short") }
            var size = Int(be32(bytes, i))
            var header = 8
            if size == 1 {
                guard bytes.endIndex - i >= 16 else { throw malformed("a 64-bit box header is cut short") }
                // (Compared as what is left: a damaged 64-bit size near 2^64 must not overflow a sum.)
                let wide = be64(bytes, i + 8)
                guard wide <= UInt64(bytes.endIndex - i) else { throw malformed("a box overruns its parent") }
                size = Int(wide)
                header = 16
            } else if size == 0 {
                size = bytes.endIndex - i
            }
            guard size >= header, size <= bytes.endIndex - i else { throw malformed("a box overruns its parent") }
            found.append(Child(type: String(decoding: bytes[(i + 4)..<(i + 8)], as: UTF8.self), box: i..<(i + size),
                               body: (i + header)..<(i + size)))
            i += size
        }
        return found
    }

    private static func chunkOffsets(_ body: ArraySlice<UInt8>, wide: Bool, delta: Int64) throws(KilnError) -> [UInt8] {
        guard body.count >= 8 else { throw malformed("a chunk offset table is cut short") }
        let count = Int(be32(body, body.startIndex + 4))
        let width = wide ? 8 : 4
        guard body.count >= 8 + count * width else { throw malformed("a chunk offset table is cut short") }
        var offsets: [UInt64] = []
        offsets.reserveCapacity(count)
        for k in 0..<count {
            let at = body.startIndex + 8 + k * width
            let old = wide ? be64(body, at) : UInt64(be32(body, at))
            offsets.append(old &+ UInt64(bitPattern: delta))  // a negative delta wraps back
        }
        let needsWide = wide || offsets.contains { $0 > UInt64(UInt32.max) }
        var payload = [UInt8](body[body.startIndex..<(body.startIndex + 8)])  // version, flags, count
        payload.reserveCapacity(8 + count * (needsWide ? 8 : 4))
        for o in offsets {
            if needsWide { append64(&payload, o) } else { append32(&payload, UInt32(o)) }
        }
        return box(needsWide ? "co64" : "stco", payload)
    }

    // MARK: Bytes

    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        let size = payload.count + 8
        if size <= Int(UInt32.max) {
            append32(&out, UInt32(size))
            out += Array(type.utf8)
        } else {
            append32(&out, 1)
            out += Array(type.utf8)
            append64(&out, UInt64(size + 8))
        }
        return out + payload
    }

    /// The bytes a head writes: ftyp, the index and the free box's header. An index whose
    /// head fits its room goes there (`apply` writes nothing else).
    static func headBytes(ftyp: [UInt8], moov: [UInt8]) -> Int64 { Int64(ftyp.count + moov.count) + 8 }

    private static func freeHeader(size: Int64) -> [UInt8] {
        var out: [UInt8] = []
        append32(&out, UInt32(size))
        return out + Array("free".utf8)
    }

    static func be32<C: RandomAccessCollection>(_ b: C, _ i: C.Index) -> UInt32 where C.Element == UInt8, C.Index == Int {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    static func be64<C: RandomAccessCollection>(_ b: C, _ i: C.Index) -> UInt64 where C.Element == UInt8, C.Index == Int {
        UInt64(be32(b, i)) << 32 | UInt64(be32(b, i + 4))
    }

    private static func append32(_ out: inout [UInt8], _ v: UInt32) {
        out += [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)]
    }

    private static func append64(_ out: inout [UInt8], _ v: UInt64) {
        append32(&out, UInt32(v >> 32))
        append32(&out, UInt32(v & 0xffff_ffff))
    }

    private static func roundUp(_ n: Int64, _ to: Int64) -> Int64 { (n + to - 1) / to * to }

    private static func read(_ file: FileDescriptor, at offset: Int64, count: Int) throws(KilnError) -> [UInt8] {
        do { return try file.read(upTo: count, at: offset) } catch { throw ioError(error) }
    }

    private static func write(_ file: FileDescriptor, _ bytes: [UInt8], at offset: Int64) throws(KilnError) {
        do { try file.write(bytes, at: offset) } catch { throw ioError(error) }
    }

    private static func ioError(_ e: Int32, _ what: String) -> KilnError { AtomicOutput.error(e, what, stage: .mux) }
    private static func ioError(_ e: SystemCallError) -> KilnError { ioError(e.errno, e.operation) }

    private static func malformed(_ why: String) -> KilnError {
        KilnError(.internalError, stage: .mux, "the output's index is malformed: \(why)")
    }
}
