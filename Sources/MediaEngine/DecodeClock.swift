import CFFmpeg

/// Decode times for a reordered picture stream whose container stores presentation times
/// only (Matroska). libavformat derives them: it keeps the stream's last few presentation
/// times (one more than the reorder depth), sorted, and the smallest is each packet's
/// decode time. A time that jumps back past all of them (a cluster whose timestamp was
/// damaged 4 s late, and the film coming back after it) leaves the kept ones ahead, and
/// every packet's decode time is then its own presentation time, back and forth, until
/// the stream passes them again: 4 s of pictures whose times ran back, which a copy
/// cannot write (the video was re-encoded, and the lanes dropped them as behind).
///
/// This clock derives them the same way, and starts over at such a jump as libavformat
/// does at a stream's start, with the packets before it a frame apart. It takes over only
/// from its first such start; until then it checks that it agrees with libavformat
/// packet by packet, and once it does not (a depth libavformat learnt otherwise) it
/// stays out.
struct DecodeClock {
    /// The latest presentation times, sorted; `noPTS` before the stream fills them.
    private var kept: [Int64]
    /// How far back a presentation time must jump past every kept one to start over
    /// (the stream's time base).
    private let jump: Int64
    /// A frame's length where the packet does not say (the stream's time base).
    private let frameLength: Int64
    private var ownTimes = false
    private var agrees = true
    /// What was kept before the last start-over, until the next packet shows whether the
    /// stream stayed there: one that comes back among the times before it was a single
    /// damaged time (a flipped bit), and the start-over is undone, as libavformat, which
    /// kept them, has them.
    private var before: (kept: [Int64], ownTimes: Bool)?

    /// `depth`: the stream's reorder depth (`video_delay`).
    init(depth: Int, jump: Int64, frameLength: Int64) {
        kept = Array(repeating: noPTS, count: depth + 1)
        self.jump = jump
        self.frameLength = max(1, frameLength)
    }

    /// The decode time the packet just timed would have had if the stream had not jumped
    /// but the times before its start-over had lain `shift` earlier (the stream's time
    /// base): where a cluster timed late comes back to the film, that is its decode time
    /// among the cluster's times put back. nil unless that packet started over.
    func time(ofLast pts: Int64, keptShiftedBy shift: Int64) -> Int64? {
        guard let saved = before, !saved.kept.contains(noPTS) else { return nil }
        return Self.smallest(of: saved.kept.map { $0 - shift }, with: pts)
    }

    /// Takes the times before the start-over, moved by `shift`, as the stream's (with the
    /// last packet's `pts`): `time(ofLast:keptShiftedBy:)` made so.
    mutating func resume(_ pts: Int64, keptShiftedBy shift: Int64) {
        guard let saved = before else { return }
        kept = saved.kept.map { $0 - shift }
        _ = Self.insert(pts, into: &kept)
        before = nil
        ownTimes = true
    }

    /// Puts `pts` in the place of the smallest kept time, keeps them sorted, and returns
    /// the smallest: the decode time.
    private static func insert(_ pts: Int64, into kept: inout [Int64]) -> Int64 {
        kept[0] = pts
        var i = 0
        while i + 1 < kept.count, kept[i] > kept[i + 1] {
            kept.swapAt(i, i + 1)
            i += 1
        }
        return kept[0]
    }

    private static func smallest(of kept: [Int64], with pts: Int64) -> Int64 {
        var copy = kept
        return insert(pts, into: &copy)
    }

    mutating func time(_ p: inout AVPacket) {
        guard agrees, p.pts != noPTS else { return }
        if let saved = before {
            before = nil
            if p.pts >= saved.kept[0] - jump { (kept, ownTimes) = saved }
        }
        if kept[0] != noPTS, p.pts < kept[0] - jump {
            // Started over, as at the stream's start: decoded the depth's frames before it
            // is shown, as a keyframe there is.
            before = (kept, ownTimes)
            for i in kept.indices { kept[i] = noPTS }
            ownTimes = true
        }
        let length = p.duration > 0 ? p.duration : frameLength
        // libavformat's start: the packets before the stream's first taken as a frame apart.
        for i in 1..<kept.count where kept[i] == noPTS { kept[i] = p.pts - Int64(kept.count - i) * length }
        _ = Self.insert(p.pts, into: &kept)
        if ownTimes {
            if kept[0] != noPTS { p.dts = kept[0] }
        } else if p.dts != noPTS, p.dts != kept[0] {
            agrees = false
        }
    }
}
