#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore
import Synchronization

/// A fragmented MP4's fragments as stored, walked once a file: which are stored out of the
/// order of their times, and how to read them in that order.
extension Prober {
    /// A movie fragment stored after a later one of its track: `time`, its `tfdt`, lies
    /// before `after`, the latest of the track's fragments stored before it (both in the
    /// track's timescale), and no fragment before it began there.
    struct FragmentDisorder: Equatable {
        let track: UInt32
        let time: UInt64
        let after: UInt64
        /// Where its `moof` begins.
        let offset: Int64
    }

    /// A fragmented MP4's fragments as stored (`fragmentWalk`).
    struct FragmentWalk {
        /// The first fragment stored out of the order of its times; nil if none.
        var disorder: FragmentDisorder?
        /// Each fragment: where its `moof` begins (it runs to the next one's, or the file's
        /// end), and its earliest track fragment's time in seconds (nil: one not timed).
        var fragments: [(offset: Int64, seconds: Double?)] = []
        /// Whether every track fragment finds its samples from its own `moof` (no
        /// `base_data_offset`, which is a place in the file): a fragment may then be read
        /// from elsewhere.
        var movable = true
        /// Where each `sidx` and `mfra` begins: they give fragments' places in the file.
        var placed: [Int64] = []
        let size: Int64

        /// The file's bytes in the order of its fragments' times, as `(from, length)`
        /// pieces laid end to end (the head first; fragments of one time in their stored
        /// order: one written twice stays beside itself), and where the boxes giving places
        /// in the file (`placed`) then have their type, read as `free` so that libavformat
        /// looks for the fragments where they are read. Nil where the fragments cannot be moved.
        func reordered() -> (pieces: [(from: Int64, length: Int64)], freed: [Int64])? {
            guard movable, let first = fragments.first?.offset, fragments.allSatisfy({ $0.seconds != nil }) else { return nil }
            let order = fragments.indices.sorted { (fragments[$0].seconds!, $0) < (fragments[$1].seconds!, $1) }
            var pieces: [(from: Int64, length: Int64)] = []
            if first > 0 { pieces.append((from: Int64(0), length: first)) }
            var at: [Int64] = Array(repeating: 0, count: fragments.count)  // where each fragment is read from
            var read = first
            for k in order {
                let from = fragments[k].offset, to = k + 1 < fragments.count ? fragments[k + 1].offset : size
                at[k] = read
                read += to - from
                if let last = pieces.last, last.from + last.length == from { pieces[pieces.count - 1].length += to - from } else { pieces.append((from, to - from)) }
            }
            let freed = placed.map { offset -> Int64 in
                // Its type (4 bytes on) where it is read: in the head, or in the fragment
                // holding it (the last beginning at or before it).
                var lo = 0, hi = fragments.count - 1
                guard offset >= first else { return offset + 4 }
                while lo < hi {
                    let mid = (lo + hi + 1) / 2
                    if fragments[mid].offset <= offset { lo = mid } else { hi = mid - 1 }
                }
                return at[lo] + offset - fragments[lo].offset + 4
            }.sorted()
            return (pieces, freed)
        }
    }

    /// The fragments of a fragmented MP4 as stored, and the first stored out of the order
    /// of its times (a segment downloader that writes segments as they arrive, several
    /// fetched at once). libavformat reads fragments as stored and marks the late one's
    /// packets not shown: a copy lost its second, a transcode two, each exit 0 with a gap
    /// of silence. A fragment whose time comes again (one written twice) is no disorder,
    /// nor a time skipped (one missing): only a time that comes back to where no fragment
    /// began is. Every top-level box header and `moof` is read (one read a fragment, most
    /// often); what is kept is a few numbers a fragment, as libavformat's own fragment
    /// index keeps. The walk ends at a damaged box; a `traf` without `tfdt` is timed by its
    /// order. `seconds` turns a track's time into seconds (nil: a track libavformat lacks).
    static func fragmentWalk(_ path: String, seconds: (UInt32, UInt64) -> Double? = { _, _ in nil }) -> FragmentWalk? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
        var st = stat()
        guard fstat(file.rawValue, &st) == 0 else { return nil }
        // A probe and a run open the file a dozen times: it is walked once (the same file:
        // path, inode, size and modification time).
        let identity = WalkedFile(path: path, inode: UInt64(st.st_ino), size: Int64(st.st_size),
                                  modified: Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec))
        if let last = lastWalk.withLock({ $0 }), last.file == identity { return last.walk }
        let walk = walkFragments(file, fileSize: identity.size, seconds: seconds)
        lastWalk.withLock { $0 = (identity, walk) }
        return walk
    }

    private struct WalkedFile: Equatable {
        let path: String, inode: UInt64, size: Int64, modified: Int64
    }
    private static let lastWalk = Mutex<(file: WalkedFile, walk: FragmentWalk)?>(nil)

    private static func walkFragments(_ file: FileDescriptor, fileSize: Int64, seconds: (UInt32, UInt64) -> Double?) -> FragmentWalk {
        var walk = FragmentWalk(size: fileSize)
        var latest: [UInt32: UInt64] = [:], begun: [UInt32: Set<UInt64>] = [:]
        var offset: Int64 = 0
        while offset + 8 <= fileSize {
            // A box's header alone (16 bytes with a 64-bit size), then a `moof` whole: read 4 kB
            // at a time, a file with a fragment a picture cost 212 MB of reads a walk.
            guard let head = try? file.read(upTo: Int(min(16, fileSize - offset)), at: offset), head.count >= 8 else { break }
            var boxSize = Int64(FastStart.be32(head, 0))
            if boxSize == 1 {
                guard head.count >= 16 else { break }
                boxSize = Int64(bitPattern: FastStart.be64(head, 8))
            } else if boxSize == 0 {
                boxSize = fileSize - offset
            }
            guard boxSize >= 8, boxSize <= fileSize - offset else { break }
            let type = head[4..<8]
            if type.elementsEqual("sidx".utf8) || type.elementsEqual("mfra".utf8) { walk.placed.append(offset) }
            if type.elementsEqual("moof".utf8) {
                var earliest: Double?
                let moof = boxSize > 1 << 24 ? nil : try? file.read(upTo: Int(boxSize), at: offset)
                let trafs = moof.flatMap { $0.count == Int(boxSize) ? trackFragments($0, from: head[0..<4].elementsEqual([0, 0, 0, 1]) ? 16 : 8) : nil } ?? []
                if trafs.isEmpty { walk.movable = false }
                for traf in trafs {
                    if traf.placed { walk.movable = false }
                    guard let time = traf.time else { walk.movable = false; continue }
                    if let s = seconds(traf.track, time) { earliest = min(earliest ?? s, s) } else { walk.movable = false }
                    if let last = latest[traf.track] {
                        if walk.disorder == nil, time < last, begun[traf.track]?.contains(time) != true {
                            walk.disorder = FragmentDisorder(track: traf.track, time: time, after: last, offset: offset)
                        }
                        latest[traf.track] = max(last, time)
                    } else {
                        latest[traf.track] = time
                    }
                    begun[traf.track, default: []].insert(time)
                }
                walk.fragments.append((offset, earliest))
            }
            offset += boxSize
        }
        return walk
    }

    /// Each track fragment in a `moof`'s bytes (its children from `start`): its track, its
    /// `tfdt` (nil if none), and whether its `tfhd` places its data in the file
    /// (`base_data_offset`). Nil where a box is damaged.
    private static func trackFragments(_ moof: [UInt8], from start: Int) -> [(track: UInt32, time: UInt64?, placed: Bool)]? {
        /// The children (type, start of payload, end) of the bytes from `start` to `end`.
        func children(_ start: Int, _ end: Int) -> [(type: ArraySlice<UInt8>, at: Int, end: Int)]? {
            var found: [(ArraySlice<UInt8>, Int, Int)] = []
            var at = start
            while at + 8 <= end {
                let size = Int(FastStart.be32(moof, at))
                guard size >= 8, size <= end - at else { return nil }
                found.append((moof[at + 4..<at + 8], at + 8, at + size))
                at += size
            }
            return found
        }
        var fragments: [(UInt32, UInt64?, Bool)] = []
        guard let boxes = children(start, moof.count) else { return nil }
        for traf in boxes where traf.type.elementsEqual("traf".utf8) {
            var track: UInt32?, time: UInt64?, placed = false
            guard let inner = children(traf.at, traf.end) else { return nil }
            for box in inner {
                if box.type.elementsEqual("tfhd".utf8), box.end - box.at >= 8 {
                    placed = moof[box.at + 3] & 1 != 0
                    track = FastStart.be32(moof, box.at + 4)
                } else if box.type.elementsEqual("tfdt".utf8), box.end - box.at >= 8 {
                    if moof[box.at] == 1 {
                        if box.end - box.at >= 12 { time = FastStart.be64(moof, box.at + 4) }
                    } else {
                        time = UInt64(FastStart.be32(moof, box.at + 4))
                    }
                }
            }
            guard let track else { return nil }
            fragments.append((track, time, placed))
        }
        return fragments
    }
}
