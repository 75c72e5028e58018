import KilnCore

/// Where a transcode's frames go on a constant rate's grid, in the encoder's ticks
/// (`step` ticks a frame; `VideoTranscodeLane.gridTicks`).
///
/// Frames on the grid take their slots exactly, so millisecond-rounded times (Matroska:
/// 21, 63, 104 ms at 24 fps) neither jitter nor drift: a frame within a tenth of a frame of
/// a slot after the last frame takes it, however many slots on (a gap). A frame off the
/// grid at least 0.7 of a frame after the last keeps its own time, to a tick: a stretch
/// at a faster rate (29.97 fps on 23.976's grid is 0.8 of a frame, where the ffmpeg
/// command's variable-rate sync dropped one picture in five), or one late frame, after
/// which the next on the grid goes back to its slot (the grid is not moved by one frame:
/// a single frame 0.4 of a frame late had shifted every frame after it, and one early
/// frame after that was dropped). Three frames in a row a frame apart off the grid are a
/// new phase (the times shifted from there on): the grid moves to them. Closer to the last
/// frame than 0.7, as the ffmpeg command's sync does: within 0.6 of a frame of the slot
/// after the last, it takes that slot (a timeline that ran back half a frame is not
/// squeezed into a 20 ms step); further behind, it is a duplicate and is dropped (x264
/// needs strictly increasing timestamps).
struct FrameGrid {
    let step: Int64
    private var frame: Double { Double(step) }
    /// A slot of the grid: its place in the source's time (in unrounded ticks) and its tick.
    private var slot = 0.0
    private var slotTick: Int64 = 0
    /// The last frame placed: its tick, whether it took a slot (then it is at `slot`), and
    /// its own time (a slot's, where it took the slot after the frame before: `next`). The
    /// next frame is judged against its time, not its slot: a picture 0.2 of a frame early
    /// put on the grid, and the picture 0.8 of a frame after it (29.97 on 23.976's grid)
    /// had seemed too close to keep its own time, and those after it, each pushed a slot on,
    /// closer still, until one was dropped.
    private var lastTick = noPTS
    private var onGrid = true
    private var lastTime = 0.0
    /// Frames in a row kept at their own times, each a frame after the one before.
    private var phaseRun = 0
    /// How far the first frame's tick lies from its time: own times are shifted by as much,
    /// so that its rounding is not added to theirs.
    private var firstRounding = 0.0

    init(step: Int64) { self.step = max(1, step) }

    /// The tick for a frame at `time` (unrounded ticks; nil when it has none: the slot after
    /// the last frame), or nil to drop it.
    mutating func place(_ time: Double?) -> Int64? {
        guard lastTick != noPTS else {
            let t = time ?? 0
            firstRounding = t.rounded() - t
            slot = t
            slotTick = Int64(t.rounded())
            return placed(slotTick, onGrid: true, time: t)
        }
        guard let t = time else { return next() }
        let slots = ((t - slot) / frame).rounded()
        if slots >= 1, slots < 1e12, abs(t - (slot + slots * frame)) <= 0.1 * frame,
           case let tick = slotTick + Int64(slots) * step, tick > lastTick {
            slot += slots * frame
            slotTick = tick
            phaseRun = 0
            return placed(tick, onGrid: true, time: t)
        }
        if t >= lastTime + 0.7 * frame {
            let tick = max(lastTick + 1, Int64((t + firstRounding).rounded()))
            phaseRun = !onGrid && abs(t - lastTime - frame) <= 0.1 * frame ? phaseRun + 1 : 0
            guard phaseRun >= 2 else { return placed(tick, onGrid: false, time: t) }
            phaseRun = 0
            slot = t
            slotTick = tick
            return placed(tick, onGrid: true, time: t)
        }
        return t > lastTime + 0.4 * frame ? next() : nil
    }

    /// The slot a frame after the last frame.
    private mutating func next() -> Int64 {
        let tick = lastTick + step
        if onGrid {
            slot += frame
            slotTick = tick
        }
        return placed(tick, onGrid: onGrid, time: lastTime + frame)
    }

    private mutating func placed(_ tick: Int64, onGrid: Bool, time: Double) -> Int64 {
        lastTick = tick
        self.onGrid = onGrid
        lastTime = time
        return tick
    }
}
