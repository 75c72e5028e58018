import Testing
@testable import MediaEngine

@Suite("laced sound timed by its blocks")
struct LaceTimesTests {
    /// Blocks of eight AAC frames at 48 kHz in a 1 ms time base: 170 or 171 ms apart.
    static let blocks = [LaceTimes.Block(start: 0, frames: 8), .init(start: 171, frames: 8), .init(start: 341, frames: 8)]

    @Test("a DefaultDuration doubled or halved gives way to the length the blocks show; a right one (rounded to the tick) does not")
    func mistakes() throws {
        let doubled = try #require(LaceTimes.decide(Self.blocks, lace: 43, samplesPerTick: 48))
        #expect(abs(doubled - 21.31) < 0.05)
        #expect(LaceTimes.decide(Self.blocks, lace: 11, samplesPerTick: 48) != nil)
        #expect(LaceTimes.decide(Self.blocks, lace: 21, samplesPerTick: 48) == nil, "21 ms for 21.33 is the tick's rounding")
    }

    @Test("no length where the blocks disagree (sound lost between two), where a block is not laced, or where the length is no sound frame's: a TimecodeScale ten times too small moves the pictures too")
    func notJudged() {
        let lost = [LaceTimes.Block(start: 0, frames: 8), .init(start: 171, frames: 8), .init(start: 600, frames: 8)]
        #expect(LaceTimes.decide(lost, lace: 43, samplesPerTick: 48) == nil)
        let single = [LaceTimes.Block(start: 0, frames: 1), .init(start: 21, frames: 1), .init(start: 43, frames: 1)]
        #expect(LaceTimes.decide(single, lace: 43, samplesPerTick: 48) == nil)
        // 170 ticks of 0.1 ms for eight frames: 2.1 ms, 102 samples, a tenth of the lace.
        #expect(LaceTimes.decide(Self.blocks, lace: 213, samplesPerTick: 4.8) == nil)
        #expect(LaceTimes.decide(Array(Self.blocks.prefix(2)), lace: 43) == nil, "two gaps are needed")
    }

    @Test("blocks ten times closer or further apart than their frames last are a damaged scale, not a muxer's DefaultDuration")
    func scale() throws {
        let closer = try #require(LaceTimes.scaleDamage(Self.blocks, lace: 213))
        #expect(abs(closer - 0.1) < 0.01)
        #expect(LaceTimes.scaleDamage(Self.blocks, lace: 2) != nil)
        #expect(LaceTimes.scaleDamage(Self.blocks, lace: 43) == nil, "doubled: a mistake, timed by the blocks")
        #expect(LaceTimes.scaleDamage(Self.blocks, lace: 21) == nil)
    }
}
