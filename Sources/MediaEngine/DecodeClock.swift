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
        kept[0] = p.pts
        var i = 0
        while i + 1 < kept.count, kept[i] > kept[i + 1] {
            kept.swapAt(i, i + 1)
            i += 1
        }
        if ownTimes {
            if kept[0] != noPTS { p.dts = kept[0] }
        } else if p.dts != noPTS, p.dts != kept[0] {
            agrees = false
        }
    }
}
