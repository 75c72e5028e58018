/// Where a Matroska file's blocks end, read from its last bytes: the last cluster's
/// timestamp and its blocks' own.
///
/// The probe wants a Matroska file's end where its header's duration is missing (a file
/// written live, a recording cut off) or doubtful (a recording kept on its capture clock).
/// A byte seek does not take the Matroska demuxer there: it resyncs from where it last
/// parsed, the file's start, and reads every block on the way, so a 135 MB recording was
/// read whole by the probe and a film-length one measured at the 100,000th packet the
/// read stopped at. The last cluster holds the answer in a few kB.
enum MatroskaTail {
    private static let cluster: UInt32 = 0x1F43_B675
    private static let timestamp: UInt32 = 0xE7
    private static let simpleBlock: UInt32 = 0xA3
    private static let blockGroup: UInt32 = 0xA0
    private static let block: UInt32 = 0xA1
    private static let crc32: UInt32 = 0xBF

    /// A block's start, in the segment's timestamp units, and its track.
    struct Block: Equatable {
        var track: Int
        var time: Int64
    }

    /// A cluster as read: its blocks, its own timestamp, and whether it was read whole: every
    /// element's size known and the last ending where the cluster does, within `bytes`. A
    /// block whose size is damaged (huge) ends the walk early, its cluster's later blocks
    /// unread, and the end those give is no end of the film.
    struct Cluster: Equatable {
        var blocks: [Block]
        var time: Int64
        var whole: Bool
        /// The latest block time of the cluster before it in the bytes read (nil: none was
        /// found there): a film's clusters follow one another, so a last cluster whose own
        /// time is far from where the one before it ends has a damaged time.
        var before: Int64? = nil
    }

    /// The last cluster in `bytes` (a file's tail) that has blocks, nil if none can be read there.
    /// At most `candidates` places that look like a cluster are tried, last first: a
    /// file's own ID in its index (SeekHead, Cues) is one, and bytes that happen to look like
    /// one rarely also start with a timestamp. A damaged or hostile tail full of them is not
    /// walked through again and again.
    /// `wanted`: only a cluster holding such a block counts, and up to `clustersPassed`
    /// clusters of other blocks after it are passed over (a subtitle track running on past
    /// the pictures leaves clusters of its cues alone at the file's end).
    static func lastCluster(_ bytes: [UInt8], wanted: (Block) -> Bool = { _ in true }) -> Cluster? {
        guard var found = search(bytes, before: bytes.count, wanted: wanted) else { return nil }
        found.cluster.before = search(bytes, before: found.at, wanted: { _ in true })?.cluster.blocks.map(\.time).max()
        return found.cluster
    }

    /// `lastCluster`'s search from `start` back: the cluster found and where it begins.
    private static func search(_ bytes: [UInt8], before start: Int, wanted: (Block) -> Bool) -> (at: Int, cluster: Cluster)? {
        var before = start
        var tries = 0, passed = 0
        while tries < candidates {
            guard let at = lastCluster(bytes, before: before) else { return nil }
            if let read = cluster(at: at, bytes), !read.blocks.isEmpty {
                if read.blocks.contains(where: wanted) { return (at, read) }
                passed += 1
                if passed > clustersPassed { return nil }
            } else {
                tries += 1
            }
            before = at
        }
        return nil
    }

    static let candidates = 16
    static let clustersPassed = 1024

    /// The offset of the last cluster ID that starts before `before`.
    private static func lastCluster(_ bytes: [UInt8], before: Int) -> Int? {
        var i = min(before, bytes.count - 4) - 1
        while i >= 0 {
            if bytes[i] == 0x1F, bytes[i + 1] == 0x43, bytes[i + 2] == 0xB6, bytes[i + 3] == 0x75 { return i }
            i -= 1
        }
        return nil
    }

    /// An EBML element's header at `at`: its ID (length marker kept), where its data
    /// starts, and its size (nil: unknown, as a live writer leaves a cluster's).
    private static func header(_ bytes: [UInt8], at: Int) -> (id: UInt32, data: Int, size: Int?)? {
        guard at < bytes.count, bytes[at] != 0 else { return nil }
        let idLength = bytes[at].leadingZeroBitCount + 1
        guard idLength <= 4, at + idLength < bytes.count else { return nil }
        let id = bytes[at..<at + idLength].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let s = at + idLength
        guard bytes[s] != 0 else { return nil }
        let sizeLength = bytes[s].leadingZeroBitCount + 1
        guard s + sizeLength <= bytes.count else { return nil }
        var size = UInt64(bytes[s] & (0xFF >> sizeLength))
        var allOnes = size == UInt64(0xFF >> sizeLength)
        for b in bytes[s + 1..<s + sizeLength] {
            size = size << 8 | UInt64(b)
            allOnes = allOnes && b == 0xFF
        }
        return (id, s + sizeLength, allOnes || size > UInt64(Int.max / 2) ? nil : Int(size))
    }

    /// The cluster whose ID is at `at`, nil if it has no timestamp first (where muxers
    /// write it, after a CRC-32 where they write one: ffmpeg's does).
    private static func cluster(at: Int, _ bytes: [UInt8]) -> Cluster? {
        guard let c = header(bytes, at: at), c.id == cluster, var first = header(bytes, at: c.data) else { return nil }
        if first.id == crc32, let size = first.size, let next = header(bytes, at: first.data + size) { first = next }
        guard first.id == timestamp else { return nil }
        let end = c.size.map { min(bytes.count, c.data + $0) } ?? bytes.count
        var base: Int64?
        var found: [Block] = []
        /// Walks the elements from `from` to `to`, into block groups (which hold no
        /// others: a damaged one nested a million deep is not followed); true where each
        /// element's size is known and the last ends at `to`.
        func walk(_ from: Int, _ to: Int, inGroup: Bool = false) -> Bool {
            var p = from
            while p < to, let e = header(bytes, at: p) {
                switch e.id {
                case timestamp:
                    guard let size = e.size, size >= 1, size <= 8, e.data + size <= bytes.count else { return false }
                    base = bytes[e.data..<e.data + size].reduce(Int64(0)) { $0 << 8 | Int64($1) }
                case simpleBlock, block:
                    guard let base, let b = blockHeader(bytes, at: e.data) else { break }
                    found.append(Block(track: b.track, time: base &+ Int64(b.relative)))  // a damaged one may wrap
                case blockGroup where !inGroup:
                    guard let size = e.size, walk(e.data, min(to, e.data + size), inGroup: true) else { return false }
                case cluster:
                    return false  // the next cluster, where this one's size says it goes on
                default:
                    break
                }
                guard let size = e.size else { return false }  // no size: nothing past it is known
                p = e.data + size
            }
            return p == to
        }
        // A cluster of unknown size (a live writer's) ends where the next begins, or the file.
        let whole = walk(c.data, end) && (c.size.map { c.data + $0 <= bytes.count } ?? true)
        return base.map { Cluster(blocks: found, time: $0, whole: whole) }
    }

    /// A block's track number and its time relative to its cluster's.
    private static func blockHeader(_ bytes: [UInt8], at: Int) -> (track: Int, relative: Int16)? {
        guard at < bytes.count, bytes[at] != 0 else { return nil }
        let length = bytes[at].leadingZeroBitCount + 1
        guard length <= 8, at + length + 2 <= bytes.count else { return nil }
        let track = bytes[at + 1..<at + length].reduce(Int(bytes[at] & (0xFF >> length))) { $0 << 8 | Int($1) }
        let relative = Int16(bitPattern: UInt16(bytes[at + length]) << 8 | UInt16(bytes[at + length + 1]))
        return (track, relative)
    }
}
