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
/// when its packet is not where its next one belongs and the new timeline puts it nearer,
/// so the new programme keeps its own sync, even for a stream whose own step at the splice
/// is too small to be a jump (pictures stepping back 1.16 s, sound 0.8 s: on the old
/// timeline it was 0.36 s out of sync).
///
/// A stream that crosses first by such a small step opens nothing (a damaged time looks
/// the same), but stays pending: when another stream then opens a timeline, it takes that
/// one too, from its crossing packet on, if that moves the packet on from behind its place
/// (sound crossing first by 0.64 s, pictures 1.14 s later in the file: the sound stayed
/// 0.48 s out of sync). When a second stream steps back while one is pending, both crossed
/// a splice by small steps (the new programme overlapping the old one's end by 0.46 s: a
/// copy squeezed 12 pictures into a millisecond, a transcode dropped them), and the first
/// opens the timeline. The pipeline holds packets back while a stream is pending
/// (`isPending`) and asks for each one's settled timeline as it lets it go.
///
/// A sound that steps *ahead* of its place by more than jitter and less than a jump is
/// held the same way (`ahead`): a gap in it, or the new programme's sound crossing first,
/// starting later after its pictures than the new programme overlaps the old one. When
/// another stream then opens a timeline, by a jump or by a small step back, it takes it from
/// its step on if the step went past where the opener left the old time (a 1.9 s late
/// sound, crossing before pictures stepping back 1.1 s, stayed 1.1 s early on the old
/// time; with pictures stepping back 0.46 s, 12 of them were squeezed). A gap resumes where
/// the pictures are, behind them in the file, and stays a gap. Only sound: pictures run
/// ahead of the sound in the file, past where it left the old time, whenever they step over
/// frames a broadcast dropped (taken for a crossing, the old programme's last pictures
/// would have gone onto the new time).
///
/// A stream that takes a later timeline on would start before its own last packet ends
/// (the old programme's sound ran on past its pictures): the timeline is moved on by that
/// much, so no stream runs back (a copied picture that did stopped the copy, a transcode's
/// lanes dropped what overlapped). The streams that crossed first get that little gap.
/// Subtitles, sparse by nature, take the timeline nearest where the sound and pictures are.
struct SpliceTimeline {
    /// The corrections of the timelines met so far, in file order, in AV_TIME_BASE units
    /// added to every timestamp; the first one moves the file's start to zero.
    private(set) var corrections: [Int64]
    /// Whether the container allows jumps (MPEG-TS): elsewhere the first timeline is all.
    let allowsJumps: Bool
    /// Per input stream: the timeline it is on, and its latest corrected decode time.
    private var timeline: [Int32: Int] = [:]
    private var lastDTS: [Int32: Int64] = [:]
    /// A stream's packet that fell behind its place by less than a jump: its decode time,
    /// the place, which packet it was (`placed`), and how many more of the stream's packets
    /// it waits for a timeline.
    private var pending: [Int32: Crossing] = [:]
    /// A stream's packet that stepped ahead of its place by more than jitter and less than
    /// a jump, the same way: a gap in it, or the new programme's sound crossing first, its
    /// pictures still to come (`adoptAhead`).
    private var ahead: [Int32: Crossing] = [:]
    typealias Crossing = (dts: Int64, place: Int64, since: Int, wait: Int)
    /// One more of its stream's packets placed: a crossing that has waited long enough is
    /// given up.
    private static func countDown(_ c: inout Crossing?) {
        if let w = c { c = w.wait > 1 ? (w.dts, w.place, w.since, w.wait - 1) : nil }
    }
    /// Packets a pending stream waits for another to open a timeline (about 2 s of sound).
    static let pendingPackets = 96
    /// Streams that took a timeline on after pending: from which packet, from and to which
    /// timeline (`timeline(of:placedAt:on:)`).
    private var crossed: [Int32: (since: Int, from: Int, to: Int)] = [:]
    /// Packets placed so far.
    private(set) var placed = 0

    init(startCorrection: Int64, allowsJumps: Bool) {
        corrections = [startCorrection]
        self.allowsJumps = allowsJumps
    }

    /// How many splices the times were made continuous across.
    var splices: Int { corrections.count - 1 }

    /// Whether a stream is pending: the timelines its latest packets were placed on may
    /// still change. The pipeline holds packets back meanwhile, so that those a stream gave
    /// between falling behind and taking a new timeline go out on it (12 pictures of an
    /// overlap by small steps were squeezed into a millisecond).
    var isPending: Bool { !pending.isEmpty || !ahead.isEmpty || !awaiting.isEmpty }
    /// Streams not yet on the newest timeline, whose crossing may still move it on (a
    /// stream that takes a timeline on moves it on rather than run back): until they
    /// cross, or for `awaitPackets` packets, the pipeline holds what the first ones gave
    /// on it. (Moved on after the fact, B-frames from x264 had one picture shown 3 ms
    /// after another and the new programme 38 ms out of sync until the sound crossed.)
    private var awaiting: Set<Int32> = []
    private var awaitLeft = 0
    static let awaitPackets = 2 * pendingPackets

    /// The correction for a packet of `stream` decoded at `dts` (AV_TIME_BASE units, as the
    /// source has it; nil if it has none) that lasts `step` (at least 1). `sparse`: a
    /// subtitle stream, whose times say nothing about splices.
    mutating func correction(stream: Int32, dts: Int64?, step: Int64, sparse: Bool = false, sound: Bool = false) -> Int64 {
        corrections[place(stream: stream, dts: dts, step: step, sparse: sparse, sound: sound)]
    }

    /// The timeline for that packet, as known now: its correction is `corrections[t]`, and
    /// may grow while a stream is pending.
    /// `sound`: an audio stream, which a broadcast sends behind the pictures (`ahead`).
    mutating func place(stream: Int32, dts: Int64?, step: Int64, sparse: Bool = false, sound: Bool = false) -> Int {
        placed += 1
        if !awaiting.isEmpty {
            awaitLeft -= 1
            if awaitLeft <= 0 { awaiting = [] }
        }
        guard let dts else { return timeline[stream] ?? corrections.count - 1 }
        if sparse { return nearest(dts) }
        let current = timeline[stream] ?? nearest(dts)
        var chosen = current
        Self.countDown(&pending[stream])
        Self.countDown(&ahead[stream])
        if allowsJumps, let last = lastDTS[stream] {
            // How far the packet is from where the stream's next one belongs, on a timeline.
            let next = last + step
            func off(_ t: Int) -> Int64 { dts + corrections[t] - next }
            let here = off(current)
            let newest = corrections.count - 1
            if newest > current, awaiting.contains(stream), let left = leftAt[newest], here > TimelineOutliers.jump / 4,
               dts + corrections[current] > left + Self.pastEnd, off(newest) >= -Self.slack {
                // Past where the stream that opened the newest timeline left the old one: no
                // sound of the old programme runs on that long after its pictures, so this is
                // the new programme's, starting later after its pictures than the old one
                // ran on (1.9 s against an overlap of 1.1 s: on the old time it was a step
                // forward, and 1.1 s early). Only at a step forward further than jitter: the
                // old sound going on evenly past pictures whose end was cut is the old
                // programme's (taken for the new, it was put 3 s on).
                chosen = newest
            } else if here > TimelineOutliers.jump / 4, let (first, p) = pending.first(where: { $0.key != stream }) {
                // A stream stepping forward further than any jitter while another is pending
                // after a small step back: a splice by small steps too, the new programme
                // overlapping the old end by less than its sound starts after its pictures
                // (pictures 0.46 s back, sound 1.4 s on: 12 pictures were squeezed). The one
                // that crossed first opens it; this one takes it if that moves it on.
                let opened = open(for: first, pending: p)
                if off(opened) > here { chosen = opened }
            } else if here < -Self.slack || here > TimelineOutliers.jump {
                // Not the stream's next packet on its own timeline: on one another stream
                // opened since, if that puts it nearer; or, stepping back further than any
                // jitter while the newest timeline awaits it, if that moves it on: it crossed
                // the same splice, and its new programme's sound may start well after its
                // pictures (the first 1.9 s of it cut out: 0.94 s behind on the old timeline,
                // 2 s ahead on the new, it stayed on the old one, 2 s early against its
                // pictures). A step back of a few hundredths is the old sound's jitter.
                let crossing = here < -TimelineOutliers.jump / 4 && awaiting.contains(stream)
                if let later = (current + 1..<corrections.count).filter({ !crossing || off($0) > here })
                       .min(by: { abs(off($0)) < abs(off($1)) }),
                   crossing || abs(off(later)) < abs(here) {
                    chosen = later
                    if off(later) < 0 { corrections[later] -= off(later) }
                } else if Self.isJump(dts + corrections[current] - last), !resumes(stream, at: dts + corrections[current]) {
                    chosen = openTimeline(correction: next - dts, leaving: next, by: stream)
                    adoptPending(opened: chosen, by: stream)
                } else if here < 0 {
                    pending[stream] = (dts, next, placed, Self.pendingPackets)
                    // A second stream stepping back while one is pending: a splice by small
                    // steps (the new programme overlaps the old one's end), which the one
                    // that crossed first opens, continuous for it. So is a step back after
                    // another stream stepped ahead past this one's place (the new sound
                    // crossing first, starting later after its pictures than the old one ran
                    // on): this one opens it, if it stepped back further than jitter (a
                    // sound's PES times wander by tens of milliseconds while pictures step
                    // ahead over frames a broadcast dropped).
                    if let (first, p) = pending.first(where: { $0.key != stream }) {
                        open(for: first, pending: p)
                        chosen = timeline[stream] ?? current
                    } else if here < -TimelineOutliers.jump / 4,
                              ahead.contains(where: { $0.key != stream && isPast($0.value, stream: $0.key, leaving: next) }) {
                        open(for: stream, pending: pending[stream]!)
                        chosen = timeline[stream] ?? current
                    }
                }
            }
            if sound, chosen == current, here > TimelineOutliers.jump / 4, !Self.isJump(dts + corrections[current] - last) {
                ahead[stream] = (dts, next, placed, Self.pendingPackets)
            }
        }
        if chosen != current { pending[stream] = nil; ahead[stream] = nil }
        if chosen == corrections.count - 1 { awaiting.remove(stream) }
        timeline[stream] = chosen
        lastDTS[stream] = dts + corrections[chosen]
        return chosen
    }

    /// Per timeline opened: where the stream that opened it left the timeline it was on
    /// (where its next packet belonged there, corrected).
    private var leftAt: [Int: Int64] = [:]
    /// How far past that a stream still on the old timeline is past the old programme's
    /// end: its sound ends with its pictures, give or take a frame (38 ms with x264's
    /// B-frames).
    static let pastEnd = Int64(kiln_time_base()) / 10

    /// Whether a stream's packet a jump ahead of its last lands where the file's other
    /// streams already are: the stream resumes after a gap of its own (a new programme's
    /// sound starting 1.9 s after its pictures, which came 9 s after the old programme's
    /// end, a gap kept), not a splice. Closed up as one, it was 10.9 s early.
    private func resumes(_ stream: Int32, at t: Int64) -> Bool {
        guard let others = lastDTS.filter({ $0.key != stream }).values.max(), t > lastDTS[stream] ?? t else { return false }
        return t <= others + TimelineOutliers.jump
    }

    /// The timeline of the `seq`th packet placed, of `stream`, placed on `recorded`: the one
    /// its stream took on since, if it was pending then.
    func timeline(of stream: Int32, placedAt seq: Int, on recorded: Int) -> Int {
        guard let c = crossed[stream], seq >= c.since, recorded == c.from else { return recorded }
        return c.to
    }

    /// Opens the timeline a splice by small steps puts `first` on, continuous for it from
    /// the packet it fell behind at (`p`), which it takes from there; the others pending
    /// take it too where it moves them on.
    @discardableResult
    private mutating func open(for first: Int32, pending p: Crossing) -> Int {
        let opened = openTimeline(correction: p.place - p.dts, leaving: p.place, by: first)
        cross(first, since: p.since, to: opened)
        adoptPending(opened: opened, by: first)
        return opened
    }

    /// Opens a timeline with `correction`, which `opener` takes, leaving the one it was on
    /// where its next packet belonged there (`place`); every other stream awaits it.
    private mutating func openTimeline(correction: Int64, leaving place: Int64, by opener: Int32) -> Int {
        leftAt[corrections.count] = place
        corrections.append(correction)
        awaitCrossing(opened: corrections.count - 1, by: opener)
        adoptAhead(opened: corrections.count - 1, by: opener)
        return corrections.count - 1
    }

    /// Whether a stream's step ahead (`a`) went past where `opener` leaves the old time
    /// (`place`): no sound of the old programme runs on that long after its pictures, so it
    /// is the new programme's, crossing first and starting later after its pictures than
    /// the old sound ran on (1.9 s against an overlap of 1.1 s: left on the old time, it
    /// was 1.1 s early). A gap in the sound resumes where the pictures are, behind them in
    /// the file.
    private func isPast(_ a: Crossing, stream: Int32, leaving place: Int64) -> Bool {
        a.dts + corrections[timeline[stream] ?? 0] > place + Self.pastEnd
    }

    /// Streams that stepped ahead past where `opener` left the old time take the timeline
    /// it opened, from their step on, unless that puts them behind their place.
    private mutating func adoptAhead(opened: Int, by opener: Int32) {
        guard let place = leftAt[opened] else { return }
        for (stream, a) in ahead where stream != opener && isPast(a, stream: stream, leaving: place)
            && a.dts + corrections[opened] >= a.place - Self.slack {
            // Its packets since its step move on with it, the last one too: the next is
            // where it belongs, not a step ahead again.
            if let last = lastDTS[stream] { lastDTS[stream] = last + corrections[opened] - corrections[timeline[stream] ?? 0] }
            cross(stream, since: a.since, to: opened)
        }
    }

    /// Streams pending when `opened` opens take it from their next packet, when it moves
    /// their crossing packet on from behind its place: they crossed too. Nearer is not the
    /// test: a new programme whose sound starts 0.5 s after its pictures puts the sound's
    /// crossing packet 0.5 s past its place, further than the 0.26 s behind it was.
    private mutating func adoptPending(opened: Int, by opener: Int32) {
        for (stream, p) in pending where stream != opener {
            let current = timeline[stream] ?? 0
            let there = p.dts + corrections[opened] - p.place, here = p.dts + corrections[current] - p.place
            guard there > here else { continue }
            if there < 0 { corrections[opened] -= there }
            cross(stream, since: p.since, to: opened)
        }
    }

    /// Every other stream seen awaits the timeline `opened` has just opened.
    private mutating func awaitCrossing(opened: Int, by opener: Int32) {
        awaiting = Set(timeline.keys.filter { $0 != opener && timeline[$0] != opened })
        awaitLeft = Self.awaitPackets
    }

    /// `stream`, pending since its `since`th packet, takes timeline `to`.
    private mutating func cross(_ stream: Int32, since: Int, to: Int) {
        crossed[stream] = (since, timeline[stream] ?? 0, to)
        timeline[stream] = to
        pending[stream] = nil
        ahead[stream] = nil
        if to == corrections.count - 1 { awaiting.remove(stream) }
    }

    /// How far a stream's packet may fall behind where its next one belongs and still be on
    /// its timeline: a decode time never runs back, but audio PES times jitter by a few ms
    /// against the frames' lengths. (A new programme's sound 37 ms behind the old one's end,
    /// under 0.1 s, stayed on the old time while its pictures, 0.46 s back, were squeezed.)
    static let slack = Int64(kiln_time_base()) / 100

    /// A step between a stream's consecutive decode times that is a splice by itself, even
    /// where nothing else says so: far ahead, or a second back.
    static func isJump(_ step: Int64) -> Bool {
        step > Pipeline.discontinuityThreshold || -step > Pipeline.backwardThreshold
    }

    /// The timeline that puts a packet nearest where the file's sound and pictures are (a
    /// stream that starts after a splice belongs to the new one).
    private func nearest(_ dts: Int64) -> Int {
        guard corrections.count > 1, let position = lastDTS.values.max() else { return 0 }
        return corrections.indices.min { abs(dts + corrections[$0] - position) < abs(dts + corrections[$1] - position) }!
    }
}
