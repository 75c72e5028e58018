#if canImport(Glibc)
import Glibc
#endif
import KilnCore
import Synchronization

/// A file read in another order than its bytes are stored (skim_reader.c): fragments or
/// clusters stored out of the order of their times, laid in that order.
struct ReadOrder: Equatable {
    struct Piece: Equatable {
        /// Where the piece's bytes are in the file, and how many.
        let from: Int64, length: Int64
    }
    /// Bytes read other than stored: `bytes` (at most 16) where they are read.
    struct Patch: Equatable {
        let at: Int64
        let bytes: [UInt8]
        /// Its bytes as one big-endian number (a time or an offset a box holds).
        var value: UInt64 { bytes.reduce(0) { $0 << 8 | UInt64($1) } }
    }
    /// Laid end to end, every byte of the file once.
    var pieces: [Piece]
    /// Ascending and apart: an index giving places in the file (MP4's `sidx` and `mfra`,
    /// Matroska's Cues) read as free space, since its places are where things were stored.
    var patches: [Patch]

    /// Where the bytes stored at `offsets` are read, in their order; nil for one no piece
    /// holds (left out).
    func positions(ofStored offsets: [Int64]) -> [Int64?] {
        var starts: [(from: Int64, length: Int64, read: Int64)] = []
        var read: Int64 = 0
        for p in pieces {
            starts.append((p.from, p.length, read))
            read += p.length
        }
        starts.sort { $0.from < $1.from }
        return offsets.map { offset in
            guard let k = starts.lastIndex(atOrBefore: offset, by: \.from) else { return nil }
            return offset < starts[k].from + starts[k].length ? starts[k].read + offset - starts[k].from : nil
        }
    }

    /// The pieces laid in `order` of `spans` (each `from..<to`, together tiling
    /// `first..<last` of a file of `size` bytes; the bytes before and after stay), and
    /// where a byte stored at `offset` is read: nil where no span holds it (it stays).
    static func laying(_ spans: [Range<Int64>], in order: [Int], size: Int64) -> (order: ReadOrder, moved: (Int64) -> Int64) {
        guard let first = spans.first?.lowerBound, let last = spans.last?.upperBound else {
            return (ReadOrder(pieces: [Piece(from: 0, length: size)], patches: []), { $0 })
        }
        var pieces: [Piece] = []
        if first > 0 { pieces.append(Piece(from: 0, length: first)) }
        var at = Array(repeating: Int64(0), count: spans.count)  // where each span is read from
        var read = first
        for k in order {
            at[k] = read
            read += Int64(spans[k].count)
            if let p = pieces.last, p.from + p.length == spans[k].lowerBound {
                pieces[pieces.count - 1] = Piece(from: p.from, length: p.length + Int64(spans[k].count))
            } else {
                pieces.append(Piece(from: spans[k].lowerBound, length: Int64(spans[k].count)))
            }
        }
        if last < size { pieces.append(Piece(from: last, length: size - last)) }
        let moved = { (offset: Int64) -> Int64 in
            // The last span beginning at or before it.
            guard offset < last, let k = spans.lastIndex(atOrBefore: offset, by: \.lowerBound) else { return offset }
            return at[k] + offset - spans[k].lowerBound
        }
        return (ReadOrder(pieces: pieces, patches: []), moved)
    }
}

extension Prober {
    /// A Matroska cluster stored after a later one: its Timestamp, in seconds, lies before
    /// `after`, the latest of the clusters stored before it.
    struct ClusterDisorder: Equatable {
        let time: Double
        let after: Double
        /// Where the cluster begins.
        let offset: Int64
    }

    /// A Matroska file's clusters as stored (`clusterWalk`).
    struct ClusterWalk {
        struct Cluster {
            /// Where the cluster begins, and where the element after it begins (an unknown
            /// size, as live muxers write, ends at the next top-level element).
            let offset: Int64, end: Int64
            /// Where its data (its children) begins.
            let data: Int64
            /// Its Timestamp, in the Segment's ticks; nil where none was found first in it.
            let time: Int64?
            /// Whether its size is unknown (all ones).
            let unsized: Bool
        }
        var clusters: [Cluster] = []
        /// Whether the Segment's size is known (nil: unknown, a live recording).
        var segmentSized = true
        /// Nanoseconds a tick (the Segment Info's TimestampScale).
        var scale: Int64 = 1_000_000
        /// Each Cues element (the index): where it begins, its header's length, its data's size.
        var cues: [(offset: Int64, header: Int, size: Int64)] = []
        /// Whether a top-level element other than a cluster, Cues or Void lies among the
        /// clusters (Tags, Chapters): moved with them, the SeekHead's place for it would
        /// be wrong.
        var interleaved = false
        /// The first cluster stored out of the order of its times, where laying the clusters
        /// in that order makes one seamless film (else the times are damaged, not the order:
        /// `DecodeClock` and the copy's checks deal with them); nil if none.
        var disorder: ClusterDisorder?
        /// The clusters' indices in the order of their times, where `disorder` is.
        var timeOrder: [Int]?
        let size: Int64

        /// The file's bytes with its clusters in the order of their times (what lies after
        /// a cluster up to the next, a Void or the Cues, going with it), the Cues read as
        /// Void: their positions are where the clusters were stored, and libavformat, seeking
        /// by them, would land in the wrong cluster. Nil where there is no disorder, or the
        /// clusters cannot be moved (`interleaved`).
        func reordered() -> ReadOrder? {
            guard disorder != nil, let timeOrder, !interleaved, let last = clusters.last else { return nil }
            let spans = clusters.indices.map { k in clusters[k].offset..<(k + 1 < clusters.count ? clusters[k + 1].offset : last.end) }
            var (order, moved) = ReadOrder.laying(spans, in: timeOrder, size: size)
            let voids = cues.compactMap { cue in
                ClusterWalk.void(header: cue.header, size: cue.size).map { ReadOrder.Patch(at: moved(cue.offset), bytes: $0) }
            }
            guard voids.count == cues.count else { return nil }
            order.patches = (voids + sizePatches(moved)).sorted { $0.at < $1.at }
            return order
        }

        /// The file as stored, each cluster of unknown size in a Segment of known size read
        /// with its size: libavformat (5.1) takes the first such cluster for damage ("inside
        /// parent with finite size") and leaves it out, a second of the film lost (a file
        /// remuxed by mkvmerge whose clusters a live muxer had written so). Nil where there
        /// is none, or a size does not fit its field.
        func sized() -> ReadOrder? {
            let patches = sizePatches { $0 }
            guard !patches.isEmpty, patches.count == clusters.filter({ segmentSized && $0.unsized }).count else { return nil }
            return ReadOrder(pieces: [.init(from: 0, length: size)], patches: patches)
        }

        /// The size fields of the clusters of unknown size in a Segment of known size, as
        /// their sizes (to the next top-level element), where `moved` says they are read;
        /// those whose field cannot hold it are left out.
        private func sizePatches(_ moved: (Int64) -> Int64) -> [ReadOrder.Patch] {
            guard segmentSized else { return [] }
            return clusters.filter(\.unsized).compactMap { c in
                // The ID is 4 bytes; the size field runs to the data.
                let field = Int(c.data - c.offset - 4), size = c.end - c.data
                guard (1...8).contains(field), size < (Int64(1) << (7 * field)) - 1 else { return nil }
                var bytes = (0..<field).reversed().map { UInt8(truncatingIfNeeded: size >> Int64(8 * $0)) }
                bytes[0] |= UInt8(0x80 >> (field - 1))
                return ReadOrder.Patch(at: moved(c.offset + 4), bytes: bytes)
            }
        }

        /// A header of `header` bytes for `size` bytes of data that makes them a Void (EC):
        /// as many empty Voids (EC 80) as needed, then one whose size takes the rest of the
        /// bytes (a size of more bytes than it needs is valid EBML). nil where none fits.
        static func void(header: Int, size: Int64) -> [UInt8]? {
            var empties = 0
            while header - 1 - 2 * empties > 8 { empties += 1 }
            let length = header - 1 - 2 * empties
            guard length >= 1, size >= 0, size < (Int64(1) << (7 * length)) - 1 else { return nil }
            var bytes: [UInt8] = []
            for _ in 0..<empties { bytes += [0xEC, 0x80] }
            bytes.append(0xEC)
            for k in (0..<length).reversed() { bytes.append(UInt8(truncatingIfNeeded: size >> Int64(8 * k))) }
            bytes[bytes.count - length] |= UInt8(0x80 >> (length - 1))
            return bytes
        }
    }

    /// Top-level elements of a Segment (the EBML header's too): where one begins, a cluster
    /// of unknown size ends.
    static let topLevelIDs: Set<UInt32> = [0x1F43_B675, 0x1C53_BB6B, 0x1254_C367, 0x1941_A469, 0x1043_A770,
                                            0x114D_9B74, 0x1549_A966, 0x1654_AE6B, 0x1A45_DFA3, 0x1853_8067]

    /// The clusters of a Matroska file as stored, and the first stored out of the order of
    /// its times (a muxer that flushed its clusters out of order, or two whole clusters
    /// swapped). libavformat reads clusters as stored: pictures after the late one came out
    /// of order or were dropped as times running back, exit 0. Each top-level element's
    /// header and a cluster's first bytes are read (one read a cluster; a child's header at
    /// a time through a cluster of unknown size); where the Timestamps go back, the blocks'
    /// times (a header each) of the clusters that would meet in time order, to judge
    /// whether that order is one seamless film. Once a process per file, as `fragmentWalk`.
    static func clusterWalk(_ path: String, head: MatroskaHead) -> ClusterWalk? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
        var st = stat()
        guard fstat(file.rawValue, &st) == 0 else { return nil }
        let identity = WalkedFile(path: path, st)
        if let last = lastClusterWalk.withLock({ $0 }), last.file == identity { return last.walk }
        var walk = walkClusters(file, head: head, fileSize: identity.size)
        if let info = head.element(0x1549_A966, path: path, limit: 1 << 16),
           let scale = EBML.children(info, 0..<info.count).first(where: { $0.id == 0x2AD7B1 }).flatMap({ EBML.unsigned(info, $0.range) }),
           scale > 0, scale < 1 << 40 {
            walk.scale = Int64(scale)
        }
        judgeOrder(&walk, file)
        lastClusterWalk.withLock { $0 = (identity, walk) }
        return walk
    }

    private static let lastClusterWalk = Mutex<(file: WalkedFile, walk: ClusterWalk)?>(nil)

    /// One element's header at `at` of the file (read with the next `extra` bytes): its ID,
    /// where its data begins, its size (nil: unknown), and the bytes read.
    private static func header(_ file: FileDescriptor, at: Int64, extra: Int = 0) -> (id: UInt32, data: Int64, size: Int64?, bytes: [UInt8])? {
        guard let bytes = try? file.read(upTo: 12 + extra, at: at), let e = EBML.element(bytes, 0) else { return nil }
        return (e.id, at + Int64(e.data), e.size.map(Int64.init), bytes)
    }

    private static func walkClusters(_ file: FileDescriptor, head: MatroskaHead, fileSize: Int64) -> ClusterWalk {
        var walk = ClusterWalk(size: fileSize)
        walk.segmentSized = head.segmentEnd != nil
        let end = min(head.segmentEnd ?? fileSize, fileSize)
        var at = head.segmentData
        var elements = 0
        var others: [Int64] = []  // top-level elements other than clusters, Cues and Voids after the first cluster
        while at + 2 <= end, elements < 1 << 24 {
            elements += 1
            guard let e = header(file, at: at, extra: 52) else { break }
            var next: Int64
            if let size = e.size {
                next = e.data + size
            } else if e.id == 0x1F43_B675 {
                // Its children, a header at a time, up to the next top-level element.
                next = e.data
                while next + 2 <= end, let child = header(file, at: next), !topLevelIDs.contains(child.id), let size = child.size {
                    next = child.data + size
                }
            } else {
                break
            }
            next = min(next, end)
            switch e.id {
            case 0x1F43_B675:
                // Its Timestamp (E7), first among its children after a CRC-32 or a Void.
                var time: Int64?
                var child = Int(e.data - at)
                while let c = EBML.element(e.bytes, child), let size = c.size, c.data + size <= e.bytes.count {
                    if c.id == 0xE7 { time = EBML.unsigned(e.bytes, c.data..<c.data + size).flatMap { $0 < 1 << 62 ? Int64($0) : nil }; break }
                    guard c.id == 0xBF || c.id == 0xEC else { break }
                    child = c.data + size
                }
                walk.clusters.append(.init(offset: at, end: next, data: e.data, time: time, unsized: e.size == nil))
            case 0x1C53_BB6B:
                if let size = e.size { walk.cues.append((at, Int(e.data - at), size)) }
            case 0xEC, 0xBF:
                break
            default:
                if !walk.clusters.isEmpty { others.append(at) }
            }
            at = next
        }
        // (Tags and the like after the last cluster are not among them.)
        if let last = walk.clusters.last { walk.interleaved = others.contains { $0 < last.offset } }
        return walk
    }

    /// Sets `disorder` and `timeOrder` where the clusters' Timestamps go back to a time no
    /// cluster before began at (a repeat is no disorder), and the clusters laid in the
    /// order of their times meet seamlessly wherever they meet anew: each one's first block
    /// within a frame or so of the last block before it (`seamless`). A cluster whose time
    /// alone is damaged (late or early) leaves a hole where it was and overlaps where it
    /// would go: not moved.
    private static func judgeOrder(_ walk: inout ClusterWalk, _ file: FileDescriptor) {
        var latest: Int64?, begun: Set<Int64> = []
        var first: (k: Int, after: Int64)?
        for (k, c) in walk.clusters.enumerated() {
            guard let time = c.time else { continue }
            if let l = latest, time < l, !begun.contains(time), first == nil { first = (k, l) }
            latest = max(latest ?? time, time)
            begun.insert(time)
        }
        guard let first, walk.clusters.allSatisfy({ $0.time != nil }) else { return }
        let order = walk.clusters.indices.sorted { (walk.clusters[$0].time!, $0) < (walk.clusters[$1].time!, $1) }
        var spans: [Int: (low: Int64, high: Int64)] = [:]
        func span(_ k: Int) -> (low: Int64, high: Int64)? {
            if let s = spans[k] { return s }
            let s = blockSpan(walk.clusters[k], file)
            spans[k] = s
            return s
        }
        let tolerance = 250_000_000 / walk.scale, least = 50_000_000 / walk.scale
        for i in 1..<order.count {
            let p = order[i - 1], q = order[i]
            guard q != p + 1 else { continue }  // stored so too: not judged
            guard let a = span(p), let b = span(q) else { return }
            let allowed = min(tolerance, max(least, (a.high - a.low + b.high - b.low) / 4))
            guard abs(b.low - a.high) <= allowed else { return }
        }
        let scale = Double(walk.scale)
        let seconds = { (t: Int64) in Double(t) * scale / 1e9 }
        walk.disorder = ClusterDisorder(time: seconds(walk.clusters[first.k].time!), after: seconds(first.after),
                                        offset: walk.clusters[first.k].offset)
        walk.timeOrder = order
    }

    /// The earliest and latest time (in ticks) of a cluster's blocks (SimpleBlock A3, a
    /// BlockGroup's Block A1): a header read a block. Nil where the cluster holds none or is
    /// damaged, or holds more than 1 << 16 blocks.
    private static func blockSpan(_ cluster: ClusterWalk.Cluster, _ file: FileDescriptor) -> (low: Int64, high: Int64)? {
        guard let base = cluster.time else { return nil }
        var low: Int64?, high: Int64?
        var at = cluster.data, n = 0
        func note(_ bytes: [UInt8], _ data: Int) {
            // Its track number (a variable-length integer), then a signed 16-bit time.
            guard data < bytes.count, bytes[data] != 0 else { return }
            let t = data + bytes[data].leadingZeroBitCount + 1
            guard t + 2 <= bytes.count else { return }
            let time = base + Int64(Int16(bitPattern: UInt16(bytes[t]) << 8 | UInt16(bytes[t + 1])))
            low = min(low ?? time, time)
            high = max(high ?? time, time)
        }
        while at + 2 <= cluster.end, n < 1 << 16 {
            n += 1
            guard let e = header(file, at: at, extra: 20), let size = e.size else { return nil }
            if e.id == 0xA3 {
                note(e.bytes, Int(e.data - at))
            } else if e.id == 0xA0 {
                // The group's children up to its Block (most often first).
                var child = e.data
                while child < e.data + size, let c = header(file, at: child, extra: 12), let s = c.size {
                    if c.id == 0xA1 { note(c.bytes, Int(c.data - child)); break }
                    child = c.data + s
                }
            }
            at = e.data + size
        }
        guard let low, let high else { return nil }
        return (low, high)
    }
}
