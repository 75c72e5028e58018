import Testing
import KilnTestSupport
@testable import MediaEngine

@Suite("Display times from picture order counts")
struct DisplayScheduleTests {
    /// One picture of a made-up stream, in decode order.
    struct Picture {
        var order: Int32?
        var idr = false
        /// Where it is shown, counted over the whole stream (nil: no picture).
        var shown: Int?
    }

    /// Runs `pictures` through a schedule; the result in decode order, each packet once.
    func schedule(_ pictures: [Picture], depth: Int, times: [Int64]? = nil, decodeTimesLead: Bool = false) -> (timed: [DisplaySchedule.Timed], repaired: Int) {
        var s = DisplaySchedule(depth: depth, step: 1, decodeTimesLead: decodeTimesLead)
        var out: [DisplaySchedule.Timed] = []
        for (i, p) in pictures.enumerated() {
            out += s.add(decodeTime: times?[i] ?? Int64(i), order: p.order, idr: p.idr)
            // Packets never wait longer than the bound says.
            #expect(i + 1 - out.count <= depth + DisplaySchedule.maxHeld + 1, "packet \(i): \(i + 1 - out.count) held")
        }
        out += s.finish()
        return (out, s.repaired)
    }

    /// Sequences of closed GOPs as encoders write them: an IDR, then mini-GOPs of an anchor
    /// and the B-pictures before it (the middle one first: a pyramid). POCs count fields
    /// and may start anywhere after an IDR.
    func stream(seed: UInt64) -> (pictures: [Picture], depth: Int) {
        var rng = SplitMix(seed: seed)
        var pictures: [Picture] = []
        var shownBase = 0
        for _ in 0..<(1 + Int(rng.next() % 4)) {
            let pocBase = Int32(rng.next() % 3) * 2
            var decodeOrder = [0]
            var last = 0
            for _ in 0..<(2 + Int(rng.next() % 10)) {
                let gop = 1 + Int(rng.next() % 5)
                let anchor = last + gop
                var bs = Array(last + 1..<anchor)
                if bs.count > 2 { let mid = bs.remove(at: bs.count / 2); bs.insert(mid, at: 0) }
                decodeOrder += [anchor] + bs
                last = anchor
            }
            for (i, shown) in decodeOrder.enumerated() {
                pictures.append(Picture(order: pocBase + Int32(shown) * 2, idr: i == 0, shown: shownBase + shown))
            }
            shownBase += decodeOrder.count
        }
        return (pictures, Self.reorderDepth(pictures))
    }

    /// The most pictures any picture follows in decode order and precedes in display order.
    static func reorderDepth(_ pictures: [Picture]) -> Int {
        pictures.indices.map { i in pictures[..<i].filter { $0.shown! > pictures[i].shown! }.count }.max() ?? 0
    }

    @Test("a picture without a time gets the one its order count stands for, from the timed pictures of its IDR period")
    func timeFromOrder() {
        // x264's pyramid in decode order (POC 2 per frame), shown at 40 per frame from 1000.
        let orders: [Int32] = [0, 8, 4, 2, 6, 16, 12, 10, 14, 24, 20, 18, 22]
        let time = { (order: Int32) in 1000 + Int64(order / 2) * 40 }
        for missing in 2..<orders.count {
            var line = OrderTimeLine()
            for (i, order) in orders.enumerated() {
                if i == missing {
                    #expect(line.time(for: order) == time(order), "POC \(order), the \(i)th picture")
                    line.note(order: order, idr: false, pts: noPTS)
                } else {
                    line.note(order: order, idr: i == 0, pts: time(order))
                }
            }
        }
        // An IDR starts the count again: the pictures before it say nothing of the new period.
        var line = OrderTimeLine()
        for order: Int32 in [0, 8, 4] { line.note(order: order, idr: order == 0, pts: time(order)) }
        line.note(order: 0, idr: true, pts: 5000)
        #expect(line.time(for: 4) == nil, "one timed picture gives no rate")
        line.note(order: 8, idr: false, pts: 5160)
        #expect(line.time(for: 4) == 5080)
        // A time another picture has is no answer.
        #expect(line.time(for: 8) == nil)
        // A picture without an order count teaches nothing.
        line.note(order: nil, idr: false, pts: 9999)
        #expect(line.time(for: 2) == 5040)
        // Nor is a time that no whole step of the rate gives (150 over 8 fields), nor one
        // from times that fall as the order rises.
        var uneven = OrderTimeLine()
        uneven.note(order: 0, idr: true, pts: 5000)
        uneven.note(order: 8, idr: false, pts: 5150)
        #expect(uneven.time(for: 4) == 5075)
        #expect(uneven.time(for: 2) == nil)
        var falling = OrderTimeLine()
        falling.note(order: 0, idr: true, pts: 5000)
        falling.note(order: 8, idr: false, pts: 4840)
        #expect(falling.time(for: 4) == nil)
    }

    @Test("a picture with a near neighbour's time on its period's line gets its own back; its own time, one off the line or far away stays")
    func neighbourTimeCorrected() {
        // HEVC-like: one POC unit per frame, 3600 per frame from 90000.
        var line = OrderTimeLine()
        line.note(order: 0, idr: true, pts: 90000)
        line.note(order: 4, idr: false, pts: 104400)
        #expect(line.corrected(order: 2, pts: 100800) == 97200, "POC 2 came with POC 3's time")
        #expect(line.corrected(order: 2, pts: 97200) == nil, "its own time")
        #expect(line.corrected(order: 2, pts: 99000) == nil, "half a frame off: not another picture's time")
        #expect(line.corrected(order: 2, pts: 97200 + 9 * 3600) == nil, "nine frames away is no neighbour")
        line.note(order: 3, idr: false, pts: 100800)
        #expect(line.corrected(order: 4, pts: 100800) == nil, "POC 4's own time is taken")
        // Without two timed pictures there is no line.
        var fresh = OrderTimeLine()
        fresh.note(order: 0, idr: true, pts: 90000)
        #expect(fresh.corrected(order: 1, pts: 97200) == nil)
    }

    @Test("x264's B-pyramid (POCs as its parser reports them): shown in POC order on the source's frame clock, decode times two frames earlier")
    func pyramid() {
        let orders: [Int32] = [0, 8, 4, 2, 6, 16, 12, 10, 14, 24, 20, 18, 22]
        let (timed, repaired) = schedule(orders.map { Picture(order: $0) }, depth: 2)
        #expect(timed.map(\.index) == Array(0..<13))
        #expect(timed.map(\.pts) == orders.map { Int64($0 / 2) })
        #expect(timed.map(\.dts) == (0..<13).map { Int64($0 - 2) })
        #expect(repaired == 0)
    }

    @Test("decode times that start before zero (an MP4 whose muxer moved them a reorder delay earlier, then lost its composition offsets): the first picture is shown at zero and the packets keep their decode times")
    func decodeTimesBeforeZero() {
        let orders: [Int32] = [0, 8, 4, 2, 6, 16, 12, 10, 14, 24, 20, 18, 22]
        let (timed, _) = schedule(orders.map { Picture(order: $0) }, depth: 2, times: (0..<13).map { Int64($0 - 2) })
        #expect(timed.map(\.pts) == orders.map { Int64($0 / 2) }, "shown from zero, not two frames early")
        #expect(timed.map(\.dts) == (0..<13).map { Int64($0 - 2) })
        // Before zero for longer than the reorder delay (an edit that cuts the start): only
        // the delay's worth of slots is skipped.
        let (cut, _) = schedule(orders.map { Picture(order: $0) }, depth: 2, times: (0..<13).map { Int64($0 - 5) })
        #expect(cut.map(\.pts) == orders.map { Int64($0 / 2 - 3) })
        // An MP4's decode times are decode times: without an edit list they start at zero,
        // and the pictures two frames later, as they were before the offsets were lost.
        for (first, start) in [(Int64(0), Int64(2)), (-2, 0)] {
            let (mp4, _) = schedule(orders.map { Picture(order: $0) }, depth: 2, times: (0..<13).map { Int64($0) + first }, decodeTimesLead: true)
            #expect(mp4.map(\.pts) == orders.map { Int64($0 / 2) + start }, "decode times from \(first)")
            #expect(mp4.map(\.dts) == (0..<13).map { Int64($0) + first })
        }
    }

    @Test("generated GOP structures with IDRs whose POC does not start at zero: every picture at its display slot, never before its decode time", arguments: 0..<40)
    func generated(seed: UInt64) {
        let (pictures, depth) = stream(seed: seed)
        for extra in [0, 3] {  // a reorder depth the headers overstate changes decode times only
            let (timed, repaired) = schedule(pictures, depth: depth + extra)
            #expect(timed.map(\.index) == Array(pictures.indices))
            #expect(timed.map(\.pts) == pictures.map { Int64($0.shown!) }, "seed \(seed) depth \(depth)+\(extra)")
            #expect(timed.allSatisfy { $0.pts >= $0.dts })
            #expect(zip(timed, timed.dropFirst()).allSatisfy { $0.dts < $1.dts })
            #expect(repaired == 0)
        }
    }

    @Test("gaps in the source's frame clock (AVI's dropped frames) stay gaps: the display times are the decode times, reordered")
    func gaps() {
        let orders: [Int32] = [0, 6, 2, 4, 12, 8, 10]
        let times: [Int64] = [0, 1, 2, 7, 8, 9, 10]
        let (timed, _) = schedule(orders.map { Picture(order: $0) }, depth: 2, times: times)
        #expect(timed.map(\.pts) == [0, 7, 1, 2, 10, 8, 9])
        #expect(timed.allSatisfy { $0.pts >= $0.dts })
    }

    @Test("a stream that reorders deeper than its headers say, or resets its POC without an IDR: every packet once, each time used once and never before its decode time, repairs counted")
    func tooShallow() {
        let (pictures, depth) = stream(seed: 7)
        #expect(depth >= 2)
        let (timed, repaired) = schedule(pictures, depth: depth - 1)
        #expect(timed.map(\.index) == Array(pictures.indices))
        #expect(Set(timed.map(\.pts)) == Set((0..<Int64(pictures.count))))
        #expect(timed.allSatisfy { $0.pts >= $0.dts })
        #expect(repaired > 0)
    }

    @Test("a damaged POC that nothing ever passes does not hold every later packet: it is shown where it stands")
    func stuck() {
        var pictures = (0..<400).map { Picture(order: Int32($0) * 2) }
        pictures[10].order = 1_000_000
        let (timed, repaired) = schedule(pictures, depth: 2)
        #expect(timed.map(\.index) == Array(0..<400))
        #expect(Set(timed.map(\.pts)).count == 400)
        #expect(timed.allSatisfy { $0.pts >= $0.dts })
        #expect(repaired == 1)
    }

    @Test("packets with no picture (parameter sets alone) keep their place after the picture before them")
    func noPicture() {
        let pictures = [Picture(order: 0), Picture(order: nil), Picture(order: 4), Picture(order: 2), Picture(order: 6)]
        let (timed, _) = schedule(pictures, depth: 1)
        #expect(timed.map(\.pts) == [0, 1, 3, 2, 4])
    }
}
