import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("times across a splice")
struct SpliceTimelineTests {
    @Test("a run whose splices came out far longer than the recording's parts (twice, and a minute more: jumps left open as gaps) is refused as a timeline that cannot be followed; within that, and in files without splices, the run stands")
    func unfollowedSplices() {
        let recording = MediaInfo(formatName: "mpegts", container: "ts", durationSeconds: 240, bitRate: 1_000_000, sizeBytes: 30_000_000,
                                  streams: [], warnings: ["timestamps_jump"])
        #expect(throws: KilnError.self) { try Preparer.refuseUnfollowedSplices(end: 11_876, splices: 37, info: recording) }
        do {
            try Preparer.refuseUnfollowedSplices(end: 11_876, splices: 37, info: recording)
        } catch {
            #expect(error.code == .sourceCorrupt && error.message.contains("37 splices") && error.message.contains("240 s"), "\(error.message)")
        }
        for (end, splices) in [(250.0, 37), (470, 3), (11_876, 0)] {
            #expect(throws: Never.self) { try Preparer.refuseUnfollowedSplices(end: end, splices: splices, info: recording) }
        }
        var unsurveyed = recording
        unsurveyed.warnings = []
        #expect(throws: Never.self) { try Preparer.refuseUnfollowedSplices(end: 11_876, splices: 37, info: unsurveyed) }
    }

    static let second = Int64(kiln_time_base())

    /// Feeds (stream, time in seconds: 0 pictures, 1 sound) in file order, each lasting 40 ms; the corrected
    /// times as the pipeline gives them: at once, or, while a stream is pending, held and
    /// then on the timeline each settled on.
    static func corrected(_ packets: [(Int32, Double)], allowsJumps: Bool = true) -> [Double] {
        var timeline = SpliceTimeline(startCorrection: -10 * second, allowsJumps: allowsJumps)
        var out = [Double](repeating: .nan, count: packets.count)
        var held: [(at: Int, stream: Int32, dts: Int64, on: Int, seq: Int)] = []
        for (at, (stream, t)) in packets.enumerated() {
            let dts = Int64(t * Double(second))
            let on = timeline.place(stream: stream, dts: dts, step: second / 25, sound: stream == 1)
            if timeline.isPending || !held.isEmpty { held.append((at, stream, dts, on, timeline.placed)) }
            else { out[at] = Double(dts + timeline.corrections[on]) / Double(second) }
            if !timeline.isPending || at == packets.count - 1 {
                for h in held {
                    out[h.at] = Double(h.dts + timeline.corrections[timeline.timeline(of: h.stream, placedAt: h.seq, on: h.on)]) / Double(second)
                }
                held = []
            }
        }
        return out
    }

    @Test("a stream still on the old time keeps it while the other has crossed; crossing, it takes the new time the first one opened")
    func crossing() {
        // Pictures (0) cross from 17.36 to 14.40 first; sound (1) ends at 17.38, then crosses to 14.38.
        let out = Self.corrected([(0, 17.36), (1, 17.34), (0, 14.40), (1, 17.38), (0, 14.44), (1, 14.42), (0, 14.48)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.34, 7.40, 7.38, 7.44, 7.42, 7.48])
    }

    @Test("a stream that would start the new time before its own last packet ends moves it on: nothing runs back")
    func overlapMovesOn() {
        // Sound ends at 17.40 (+0.04); the new time puts its first packet at 7.38.
        let out = Self.corrected([(0, 17.36), (0, 14.40), (1, 17.40), (1, 14.38), (0, 14.44)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.40, 7.40, 7.44, 7.50])
    }

    @Test("a stream whose own step at the splice is too small to be a jump still takes the new time, keeping the new programme's sync")
    func smallStepCrosses() {
        // Pictures step back 1.16 s (a jump); the sound's first new packet, 0.38 s after the
        // first new picture, is only 0.8 s behind its last old one.
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 16.20), (1, 16.58), (0, 16.24), (1, 16.62)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 7.40, 7.78, 7.44, 7.82])
    }

    @Test("the sound crossing first by a step too small to be a jump takes the new time the pictures open after it, from its crossing packet on")
    func soundCrossesFirstBySmallStep() {
        let out = Self.corrected([(0, 17.36), (1, 17.34), (1, 17.38), (1, 16.78), (0, 17.40), (0, 16.30), (1, 16.82), (0, 16.34)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.34, 7.38, 7.92, 7.40, 7.44, 7.96, 7.48])
    }

    @Test("two streams stepping back less than a jump are a splice: the first to step opens the new time from its crossing packet on, moved on so the other does not run back, in the new programme's sync")
    func overlapBySmallSteps() {
        // Pictures step back 0.5 s, then sound 0.54 s; the new sound starts 20 ms before
        // the new pictures, and would start 40 ms before the old sound's end.
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 16.90), (0, 16.94), (1, 16.88), (0, 16.98), (1, 16.92)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 7.44, 7.48, 7.42, 7.52, 7.46])
    }

    @Test("a lone packet out of place, behind or ahead, moves nothing after it")
    func lonePackets() {
        let behind = Self.corrected([(1, 17.30), (1, 17.34), (1, 17.08), (1, 17.38), (1, 17.42)])
        #expect(behind.map { ($0 * 1000).rounded() / 1000 } == [7.30, 7.34, 7.08, 7.38, 7.42])
        let ahead = Self.corrected([(1, 17.30), (1, 17.34), (1, 17.64), (1, 17.38), (1, 17.42)])
        #expect(ahead.map { ($0 * 1000).rounded() / 1000 } == [7.30, 7.34, 7.64, 7.38, 7.42])
    }

    @Test("a small step back while another stream has crossed is interleaving, not a crossing")
    func jitterStays() {
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 14.40), (1, 17.37), (1, 17.40)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 7.40, 7.37, 7.40])
    }

    @Test("a stream still on the old time that steps past where the pictures left it, while the new time awaits it, is the new programme's sound, starting late: it takes the new time")
    func pastTheOldEnd() {
        // Pictures step back 1.1 s; the new sound starts 1.9 s after the new pictures, which
        // on the old time is a step 0.74 s forward.
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 16.26), (0, 16.30), (1, 18.16), (1, 18.18)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 7.40, 7.44, 9.30, 9.32])
    }

    @Test("a stream that jumps on to where the other streams already are resumes after a gap of its own: no splice")
    func resumesAfterItsGap() {
        // Pictures go on after a 9 s gap (kept); the sound 10.9 s on, where they are by then.
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 26.40), (0, 28.28), (1, 28.30), (0, 28.32)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 16.40, 18.28, 18.30, 18.32])
    }

    @Test("pictures stepping back less than a jump, then sound stepping forward further than jitter: a splice by small steps, the new programme's sound starting late, in its sync")
    func smallStepBackThenForward() {
        // Pictures step back 0.5 s; the new sound starts 1.9 s after the new pictures, 1.4 s
        // on from the old sound.
        let out = Self.corrected([(0, 17.36), (1, 17.38), (0, 16.90), (0, 16.94), (1, 18.80), (0, 16.98), (1, 18.82)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 7.40, 7.44, 9.30, 7.48, 9.32])
    }

    @Test("the new programme's sound crossing first by a step forward past where the old pictures end takes the new time the pictures open after it: in its sync, whether they step back by a jump or by less")
    func soundCrossesFirstAhead() {
        // The new sound starts 1.86 s after the new pictures; they step back 1.14 s (a
        // jump), the sound 0.74 s forward on the old time, before the old pictures' last.
        let jump = Self.corrected([(0, 17.36), (1, 17.38), (1, 18.16), (1, 18.20), (0, 17.40), (0, 16.30), (1, 18.24), (0, 16.34)])
        #expect(jump.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 9.30, 9.34, 7.40, 7.44, 9.38, 7.48])
        // Pictures stepping back 0.46 s, the sound 1.38 s forward.
        let small = Self.corrected([(0, 17.36), (1, 17.38), (1, 18.80), (1, 18.84), (0, 17.40), (0, 16.98), (1, 18.88), (0, 17.02)])
        #expect(small.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.38, 9.26, 9.30, 7.40, 7.44, 9.34, 7.48])
    }

    @Test("a gap in the sound, resuming where the pictures are, stays a gap when the pictures then cross a splice")
    func soundGapBeforeSplice() {
        let out = Self.corrected([(0, 17.36), (1, 17.00), (1, 17.34), (0, 17.40), (0, 14.40), (1, 17.38), (0, 14.44)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.00, 7.34, 7.40, 7.44, 7.38, 7.48])
    }

    @Test("pictures stepping ahead over dropped frames, then sound jittering back a few hundredths: no splice")
    func droppedFramesAndJitter() {
        let out = Self.corrected([(0, 17.36), (1, 17.00), (0, 17.70), (1, 17.04), (1, 17.05), (0, 17.74), (1, 17.09)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.00, 7.70, 7.04, 7.05, 7.74, 7.09])
    }

    @Test("pictures stepping ahead over dropped frames just before the sound crosses a splice by a jump stay on the old time: only a sound stepping ahead is a crossing")
    func droppedFramesBeforeSplice() {
        // The old pictures' last, 17.44, stays on the old time; the new time is moved on so
        // that the new pictures do not run back behind it.
        let out = Self.corrected([(0, 17.00), (1, 16.60), (0, 17.40), (1, 16.64), (1, 14.00), (0, 17.44), (1, 14.04), (0, 14.10)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.00, 6.60, 7.40, 6.64, 7.38, 7.44, 7.42, 7.48])
    }

    @Test("a subtitle, whose times say nothing of splices, takes the timeline that puts it nearest where the sound and pictures are")
    func sparseTakesNearest() {
        var timeline = SpliceTimeline(startCorrection: -10 * Self.second, allowsJumps: true)
        func at(_ t: Double) -> Int64 { Int64(t * Double(Self.second)) }
        for (stream, t) in [(Int32(0), 17.36), (1, 17.38), (0, 14.40), (1, 14.42), (0, 14.44)] {
            _ = timeline.place(stream: stream, dts: at(t), step: Self.second / 25, sound: stream == 1)
        }
        let new = timeline.correction(stream: 2, dts: at(14.50), step: Self.second, sparse: true)
        #expect(Double(at(14.50) + new) / Double(Self.second) == 7.50)
        let old = timeline.correction(stream: 2, dts: at(17.30), step: Self.second, sparse: true)
        #expect(Double(at(17.30) + old) / Double(Self.second) == 7.30)
    }

    @Test("a stream first seen after a splice takes the new time; outside MPEG-TS nothing is a splice")
    func newStreamAndOtherContainers() {
        let out = Self.corrected([(0, 17.36), (0, 5000.0), (0, 5000.04), (1, 5000.02)])
        #expect(out.map { ($0 * 1000).rounded() / 1000 } == [7.36, 7.40, 7.44, 7.42])
        #expect(Self.corrected([(0, 17.36), (0, 14.40)], allowsJumps: false) == [7.36, 4.40])
    }
}

@Suite("surveying a recording's length")
struct TimelineSurveyTests {
    static func surveyed(_ path: String, readBytes: Int64) throws -> Double? {
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        return TimelineSurvey.duration(demuxer, size: Int64(FileIO.size(atPath: path) ?? 0), readBytes: readBytes)
    }

    @Test("halving pins the jump down: 12 s for recordings 11 hours apart, read 32 KB at a time at most")
    func halved() throws {
        let seconds = try Self.surveyed(try Splice.spliced(secondOffset: 40_000), readBytes: 32 << 10)
        #expect(abs((seconds ?? 0) - 12) < 0.15)
    }

    @Test("a black minute halves to stretches that run on as they should: no jump")
    func cheapStretch() throws {
        #expect(try Self.surveyed(try Splice.blackMinute(), readBytes: 32 << 10) == nil)
    }
}
