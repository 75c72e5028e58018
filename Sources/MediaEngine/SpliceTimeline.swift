import CFFmpeg
import KilnCore

/// The corrections that make a recording's times continuous across splices (MPEG-TS: a
/// broadcast's programme change, recordings put back to back, a clock wrap), per stream.
///
/// Each stream crosses a splice at its own place in the file: a broadcast sends pictures
/// ahead of their time, so the new programme's first pictures come before the old one's
/// last sound. One correction for the whole file, changed by whichever stream jumped,
/// gave the sound still on the old timeline the new one's correction: a 3-second hole in
/// the sound, then another in the pictures when the sound crossed (a 12-second recording
/// came out 15 s long). So the timelines are kept apart: the first stream to jump opens a
/// new timeline, continuous for it; every other stream takes that timeline's correction
/// when it jumps too, so the new programme keeps its own sync.
///
/// A stream that takes a timeline on would start before its own last packet ends (the old
/// programme's sound ran on past its pictures): the timeline is moved on by that much, so
/// no stream ever runs back (a copied picture that did stopped the copy, a transcode's
/// lanes dropped what overlapped). The streams that crossed first get that little gap.
struct SpliceTimeline {
    /// The corrections of the timelines met so far, in file order, in AV_TIME_BASE units
    /// added to every timestamp; the first one moves the file's start to zero.
    private(set) var corrections: [Int64]
    /// Whether the container allows jumps (MPEG-TS): elsewhere the first timeline is all.
    let allowsJumps: Bool
    /// Per input stream: the timeline it is on, and its latest corrected decode time.
    private var timeline: [Int32: Int] = [:]
    private var lastDTS: [Int32: Int64] = [:]

    init(startCorrection: Int64, allowsJumps: Bool) {
        corrections = [startCorrection]
        self.allowsJumps = allowsJumps
    }

    /// How many splices the times were made continuous across.
    var splices: Int { corrections.count - 1 }

    /// The correction for a packet of `stream` decoded at `dts` (AV_TIME_BASE units, as the
    /// source has it; nil if it has none) that lasts `step` (at least 1).
    mutating func correction(stream: Int32, dts: Int64?, step: Int64) -> Int64 {
        guard let dts else { return corrections[timeline[stream] ?? corrections.count - 1] }
        let current = timeline[stream] ?? firstTimeline(dts)
        var chosen = current
        if allowsJumps, let last = lastDTS[stream] {
            // How far the packet is from where the stream's next one belongs, on a timeline.
            let next = last + step
            func off(_ t: Int) -> Int64 { dts + corrections[t] - next }
            let here = off(current)
            if here < -Self.slack || here > TimelineOutliers.jump {
                // Not the stream's next packet on its own timeline: on one another stream
                // opened since, if that puts it nearer (its own step at the splice may be
                // too small to be a jump: a 1.2 s step back for the pictures can be 0.8 s
                // for the sound, whose place on the old timeline would then be 1.2 s off).
                if let later = (current + 1..<corrections.count).min(by: { abs(off($0)) < abs(off($1)) }),
                   abs(off(later)) < abs(here) {
                    chosen = later
                    if off(later) < 0 { corrections[later] -= off(later) }
                } else if Self.isJump(dts + corrections[current] - last) {
                    corrections.append(next - dts)
                    chosen = corrections.count - 1
                }
            }
        }
        timeline[stream] = chosen
        lastDTS[stream] = dts + corrections[chosen]
        return corrections[chosen]
    }

    /// How far a stream's packet may fall behind where its next one belongs and still be
    /// on its timeline (rounding, a demuxer's guessed durations).
    static let slack = Int64(kiln_time_base()) / 10

    /// A step between a stream's consecutive decode times that is a splice: far ahead, or
    /// back (a recording's time never runs back; smaller steps back are interleaving).
    static func isJump(_ step: Int64) -> Bool {
        step > Pipeline.discontinuityThreshold || -step > Pipeline.backwardThreshold
    }

    /// The timeline of a stream's first packet: the one that puts it nearest where the
    /// file's streams are (a stream that starts after a splice belongs to the new one).
    private func firstTimeline(_ dts: Int64) -> Int {
        guard corrections.count > 1, let position = lastDTS.values.max() else { return 0 }
        return corrections.indices.min { abs(dts + corrections[$0] - position) < abs(dts + corrections[$1] - position) }!
    }
}
