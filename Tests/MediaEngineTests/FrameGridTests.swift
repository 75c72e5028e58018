import Testing
@testable import MediaEngine

/// Where a transcode's frames go on a constant rate's grid (`FrameGrid`), at ten ticks a
/// frame: times in frames, as the source gives them, and the ticks that come out.
@Suite("a constant rate's frame grid")
struct FrameGridTests {
    /// The ticks for frames at `frames` (in frames; nil: no time), nil where one is dropped.
    static func ticks(_ frames: [Double?]) -> [Int64?] {
        var grid = FrameGrid(step: 10)
        return frames.map { grid.place($0.map { $0 * 10 }) }
    }

    @Test("millisecond-rounded times at 24 fps take their slots exactly, from a first frame between ticks")
    func roundedTimes() {
        // Matroska's milliseconds from 21 ms, in frames: 0.504, 1.512, 2.496, ...
        let frames: [Double?] = (0..<48).map { (n: Int) -> Double? in
            let ms: Double = (Double(n) * 1000 / 24 + 21).rounded()
            return ms * 24 / 1000
        }
        let ticks = Self.ticks(frames)
        #expect(ticks.compactMap { $0 } == (0..<48).map { Int64($0) * 10 + 5 })
    }

    @Test("one frame 0.4 of a frame late keeps its time, and the next goes back to its slot: it had shifted every frame after it")
    func oneLateFrame() {
        var frames = (0..<10).map { Double($0) as Double? }
        frames[4] = 4.4
        #expect(Self.ticks(frames) == [0, 10, 20, 30, 44, 50, 60, 70, 80, 90])
    }

    @Test("a late frame, then an early one, keeps both: the early one had been dropped as a duplicate")
    func lateThenEarly() {
        var frames = (0..<10).map { Double($0) as Double? }
        frames[3] = 3.5
        frames[6] = 5.85
        #expect(Self.ticks(frames) == [0, 10, 20, 35, 40, 50, 59, 70, 80, 90])
    }

    @Test("a stretch at 29.97 on 23.976's grid (0.8 of a frame apart) keeps every frame at its own time")
    func fasterStretch() {
        let frames: [Double?] = [0, 1, 2, 2.8, 3.6, 4.4, 5.2, 6, 7, 8]
        #expect(Self.ticks(frames) == [0, 10, 20, 28, 36, 44, 52, 60, 70, 80])
    }

    @Test("a faster stretch after a frame put on the grid from 0.1 of a frame early keeps its own times: judged against that slot, the next seemed too close, each after it was pushed a slot on, and one was dropped")
    func fasterStretchAfterAnEarlyFrame() {
        let frames: [Double?] = [0, 1, 2, 3, 3.9, 4.7, 5.5, 6.3, 7.1, 8.1]
        #expect(Self.ticks(frames) == [0, 10, 20, 30, 40, 47, 55, 63, 70, 80])
    }

    @Test("times shifted for good by 0.4 of a frame: the grid moves to them after three frames")
    func newPhase() {
        let frames: [Double?] = [0, 1, 2, 3.4, 4.4, 5.4, 6.42, 7.39, 8.4]
        // On the new grid, the last two (within a tenth of a frame) take its slots.
        #expect(Self.ticks(frames) == [0, 10, 20, 34, 44, 54, 64, 74, 84])
    }

    @Test("a gap keeps the grid; a frame half a frame past the last takes the next slot (not a 20 ms step); duplicates and frames behind are dropped")
    func gapsAndDuplicates() {
        let frames: [Double?] = [0, 1, 5, 5.5, 5.55, 3, 7, nil, 9]
        #expect(Self.ticks(frames) == [0, 10, 50, 60, nil, nil, 70, 80, 90])
    }
}
