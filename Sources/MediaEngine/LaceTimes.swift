import CFFmpeg

/// The times of a Matroska sound track's laced frames, where its DefaultDuration is not
/// its frames' length. libavformat times a block's first frame by the block and each next
/// one a DefaultDuration later; a muxer that wrote the duration doubled (or halved, taking
/// HE-AAC's output rate for its core's) spread every block's frames over twice its span,
/// the second half overlapping the next block, or crammed them into half of it. A copy
/// then dropped half the sound as times running back (377 of 705 AAC frames), or filled
/// the other half with silence (318 frames): choppy sound, exit 0.
///
/// The blocks themselves say how long their frames are: a block of n frames is followed by
/// the next one n frame lengths later. Where two blocks in a row agree on a length that is
/// not the DefaultDuration's, the track's laced frames are timed by it (`decide`). One gap
/// alone could be sound lost between blocks; two that agree are the frames' own length.
/// Tracks whose DefaultDuration is right, unlaced ones and ones with no DefaultDuration
/// (their lace's later frames have no time, which libavformat derives) are left as read.
struct LaceTimes {
    /// The frames' own length in the stream's time base: decided, where it differs from the
    /// DefaultDuration; nil otherwise.
    private(set) var frameLength: Double?
    /// Whether the track was judged (a laced block seen and the blocks after it read).
    private(set) var judged = false
    /// The block being read: where it is in the file (every frame of a lace gives it),
    /// when it begins, and how many of its frames came so far.
    private(set) var blockPosition: Int64 = -1
    private(set) var blockStart: Int64 = noPTS
    private(set) var framesInBlock = 0

    /// One block as the judgement sees it.
    struct Block: Equatable {
        var start: Int64
        var frames: Int
    }

    /// The frames' length two gaps between consecutive blocks agree on (their starts and
    /// frame counts; the last one's frames are not needed), within a tick or 2 %; nil where
    /// they disagree (sound lost between two blocks) or a block is not laced.
    static func agreedLength(_ blocks: [Block]) -> Double? {
        guard blocks.count >= 3 else { return nil }
        let lengths = (0..<2).compactMap { k -> Double? in
            let (a, b) = (blocks[k], blocks[k + 1])
            guard a.frames > 1, a.start != noPTS, b.start != noPTS, b.start > a.start else { return nil }
            return Double(b.start - a.start) / Double(a.frames)
        }
        guard lengths.count == 2, abs(lengths[0] - lengths[1]) <= tolerance(lengths[0]) else { return nil }
        return (lengths[0] + lengths[1]) / 2
    }

    static func tolerance(_ length: Double) -> Double { max(1, length * 0.02) }

    /// The length to time the frames by, where the blocks agree on one (`agreedLength`) that
    /// is not `lace`, the length libavformat spaced them by (frames laced a tick apart by
    /// rounding, 21 ms for 21.33, are no mistake). Only a length a muxer's mistake gives (a
    /// quarter to four times `lace`) that a sound frame can have (120 to 8,192 samples at
    /// `samplesPerTick`, where known): blocks ten times too close are a damaged
    /// TimecodeScale, which moves the pictures too and no frame length explains
    /// (`scaleDamage`).
    static func decide(_ blocks: [Block], lace: Int64, samplesPerTick: Double? = nil) -> Double? {
        guard lace > 0, let length = agreedLength(blocks), abs(length - Double(lace)) > tolerance(length) else { return nil }
        guard length >= Double(lace) / 4, length <= Double(lace) * 4 else { return nil }
        if let samplesPerTick, samplesPerTick > 0, !(120...8192).contains(length * samplesPerTick) { return nil }
        return length
    }

    /// How many times longer the frames last, by the blocks, than the DefaultDuration (an
    /// absolute length, in nanoseconds) says, where that is beyond any muxer's mistake:
    /// the blocks' times are scaled wrong (a damaged TimecodeScale), and every track's with
    /// them. nil otherwise.
    static func scaleDamage(_ blocks: [Block], lace: Int64) -> Double? {
        guard lace > 0, let length = agreedLength(blocks) else { return nil }
        let ratio = length / Double(lace)
        return ratio < 0.25 || ratio > 4 ? ratio : nil
    }

    mutating func settle(_ length: Double?) {
        judged = true
        frameLength = length
    }

    /// Forgets the block being read (after a seek).
    mutating func reset() {
        blockPosition = -1
        blockStart = noPTS
        framesInBlock = 0
    }

    /// Notes a frame read, and retimes it where the track's frames were found to have a
    /// length of their own: a lace's k-th frame is k lengths after its block's start.
    /// Returns whether this frame continues a laced block (the first such asks for a
    /// judgement).
    @discardableResult
    mutating func time(_ p: inout AVPacket) -> Bool {
        let continues = p.pos >= 0 && p.pos == blockPosition && blockStart != noPTS
        if continues {
            framesInBlock += 1
        } else {
            blockPosition = p.pos
            blockStart = p.pts
            framesInBlock = 1
        }
        retime(&p)
        return continues
    }

    /// The frame just noted (`time`), timed by the frames' own length where one was found.
    func retime(_ p: inout AVPacket) {
        guard let length = frameLength else { return }
        let k = Double(framesInBlock - 1)
        if framesInBlock > 1 {
            p.pts = blockStart + Int64((k * length).rounded())
            p.dts = p.pts
        }
        if p.duration > 0 { p.duration = Int64(((k + 1) * length).rounded()) - Int64((k * length).rounded()) }
    }
}
