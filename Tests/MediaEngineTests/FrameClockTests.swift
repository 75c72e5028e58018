import Testing
@testable import MediaEngine

/// Presentation times on an AVI's frame clock for reordered MPEG-4 Part 2 (Xvid), whose
/// decoder times each picture by the packet that pushed it out.
@Suite("frame clock for pictures with decode times only")
struct FrameClockTests {
    func times(first: Int64, decoded: [Int64], step: Int64 = 1) -> [Int64?] {
        var clock = FrameClock(step: step)
        clock.start(first)
        return decoded.map { clock.time(decoded: $0) }
    }

    @Test("the k-th picture shown takes the k-th frame from the first packet's time, whatever the decoder's delay (three frames for Xvid's packed bitstream)")
    func onTheClock() {
        #expect(times(first: 0, decoded: [3, 4, 5, 6, 7]) == [0, 1, 2, 3, 4])
        #expect(times(first: 10, decoded: [11, 12, 13], step: 2) == [10, 12, 14])
    }

    @Test("a frame the file leaves out (an empty chunk) moves the clock on: later pictures are not pulled early")
    func leftOutFrame() {
        #expect(times(first: 0, decoded: [3, 4, 6, 7]) == [0, 1, 3, 4])
    }

    @Test("no time before the first packet's, or for a picture the decoder could not time")
    func untimed() {
        var clock = FrameClock(step: 1)
        #expect(clock.time(decoded: 5) == nil)
        clock.start(0)
        #expect(clock.time(decoded: noPTS) == nil)
        #expect(clock.time(decoded: 2) == 0)
    }
}
