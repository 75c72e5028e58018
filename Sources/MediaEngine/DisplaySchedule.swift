import CFFmpeg
import KilnCore

/// Presentation times for a reordered video stream whose container stores decode times
/// only (H.264 with B-frames in AVI, bare H.264 and HEVC streams), derived from each
/// picture's order count.
///
/// AVI gives the n-th packet in decode order the n-th frame time and nothing else. Copied
/// into MP4 as they are, composition times equal decode times, so players that take the
/// container's times (Apple's) show the pictures in decode order. The display order is in
/// the bitstream: each slice header carries the picture order count (POC), which libavcodec's
/// H.264 and HEVC parsers compute (`output_picture_number`) without decoding.
///
/// The schedule keeps the frame times the source has and puts them in display order: the
/// k-th picture shown takes the k-th decode time (the source's frame clock, gaps and all),
/// and decode times move `depth` packets earlier (the first `depth` one frame step apart
/// before the first), as libavformat derives them for Matroska, which stores the other
/// half. Which picture is shown k-th comes from a decoder's output process: pictures wait
/// in a buffer of `depth` (the stream's reorder depth) and the one with the lowest
/// (sequence, POC) leaves whenever it overflows. So the k-th picture shown leaves when the
/// (k + depth)-th is decoded, and no picture is shown before its decode time: a picture
/// decoded i-th is shown k-th with k >= i - depth, so its presentation time is at least
/// the decode time it is given, whatever the stream's POCs say.
///
/// An MP4's decode times are decode times (ISO/IEC 14496-12: composition time = decode time
/// + offset), not a frame clock: where its composition offsets were lost, the k-th picture
/// shown takes the (k + `depth`)-th decode time and the packets keep theirs
/// (`decodeTimesLead`). Shown from the first decode time, the film began two pictures
/// early: its muxer had moved the decode times a reorder delay before the pictures' (an
/// edit list starting the film at 0 then cut two; without one, the sound ran two frames
/// behind). Elsewhere decode times before zero are no display slots either (at most
/// `depth` of them).
///
/// A sequence starts at each IDR picture (its POC restarts). A POC below one already shown
/// in the same sequence (a reset by memory management, or a stream that reorders deeper
/// than its headers say) starts one too, and counts as repaired: that picture is shown late.
/// Packets wait in decode order until their time is known; a picture no later one ever
/// passes (a damaged POC) is shown where it stands once `maxHeld` packets wait behind it,
/// so memory stays bounded whatever the stream says.
struct DisplaySchedule {
    /// A packet whose times are known, by its place in decode order (0 = the first added).
    struct Timed: Equatable {
        var index: Int
        var pts: Int64
        var dts: Int64
    }

    /// Pictures held back before the first is shown (the stream's `has_b_frames`).
    let depth: Int
    /// One frame's duration in the stream's time base: the spacing of the decode times
    /// that precede the first packet's.
    let step: Int64
    /// Packets that may wait for their presentation time, beyond `depth`.
    static let maxHeld = 64

    private struct Key: Comparable {
        var sequence: Int
        var order: Int32
        var index: Int
        static func < (a: Key, b: Key) -> Bool { (a.sequence, a.order, a.index) < (b.sequence, b.order, b.index) }
    }

    /// Decode times from decode index `firstTime` on.
    private var times: [Int64] = []
    private var firstTime = 0
    /// Pictures waiting to be shown (at most `depth` + 1 outside damage).
    private var waiting: [Key] = []
    /// The presentation times (once known) of the packets not yet handed out, from decode
    /// index `nextOut` on.
    private var held: [Int64?] = []
    /// Display slots skipped at the start: decode times before zero (decided when the
    /// first picture is shown).
    private var lead: Int?
    private var nextOut = 0
    /// Packets added; display slots given.
    private var added = 0
    private var shown = 0
    private var sequence = 0
    /// The last POC shown in the current sequence, and the last added.
    private var floor: Int32?
    private var lastOrder: Int32 = 0
    /// Pictures shown out of their POC order (see above).
    private(set) var repaired = 0

    init(depth: Int, step: Int64, decodeTimesLead: Bool = false) {
        self.depth = max(0, depth)
        self.step = max(1, step)
        if decodeTimesLead { lead = self.depth }
    }

    /// Adds the next packet in decode order: its decode time (nil: one step after the
    /// last), its picture order count (nil when the packet holds no picture: it stays just
    /// after the picture before it) and whether it starts a sequence (an IDR picture).
    /// Returns the packets, in decode order, whose times are now known.
    mutating func add(decodeTime: Int64?, order: Int32?, idr: Bool) -> [Timed] {
        let dts = decodeTime ?? (times.last.map { $0 + step } ?? 0)
        let index = added
        added += 1
        times.append(dts)
        held.append(nil)
        if let order {
            if idr || (floor.map { order < $0 } ?? false) {
                if !idr { repaired += 1 }
                sequence += 1
                floor = nil
            }
            lastOrder = order
        }
        waiting.append(Key(sequence: sequence, order: order ?? max(lastOrder, floor ?? lastOrder), index: index))
        while waiting.count > depth { showNext() }
        // A picture nothing ever passes: shown now, in the next slot.
        if held.count > depth + DisplaySchedule.maxHeld, held[0] == nil,
           let stuck = waiting.firstIndex(where: { $0.index == nextOut }) {
            waiting.remove(at: stuck)
            give(nextOut)
            repaired += 1
        }
        return release()
    }

    /// Shows every waiting picture: the end of the stream.
    mutating func finish() -> [Timed] {
        while !waiting.isEmpty { showNext() }
        return release()
    }

    /// The decode time of the packet at `index`; one step apart before the first and after
    /// the last.
    private func time(_ index: Int) -> Int64 {
        if index < 0 { return times[0] - Int64(-index) * step }
        if index >= added { return times[times.count - 1] + Int64(index - added + 1) * step }
        return times[index - firstTime]
    }

    /// The waiting picture with the lowest key takes the next display slot.
    private mutating func showNext() {
        guard let at = waiting.indices.min(by: { waiting[$0] < waiting[$1] }) else { return }
        let key = waiting.remove(at: at)
        if key.sequence == sequence { floor = key.order }
        give(key.index)
    }

    private mutating func give(_ index: Int) {
        if lead == nil {
            lead = times.prefix(depth).prefix { $0 < 0 }.count
        }
        held[index - nextOut] = time(shown + (lead ?? 0))
        shown += 1
    }

    /// Hands out the packets at the front whose presentation time is known, and forgets
    /// decode times no slot or shift will read again.
    private mutating func release() -> [Timed] {
        var out: [Timed] = []
        let lead = lead ?? 0
        while let first = held.first, let pts = first {
            // Decode times move `depth` packets earlier, less those already before zero (a
            // source clock that jumps back is put right by the muxer, as for any stream).
            out.append(Timed(index: nextOut, pts: pts, dts: time(nextOut - depth + lead)))
            held.removeFirst()
            nextOut += 1
        }
        let keep = min(shown, nextOut - depth) + lead
        if keep - firstTime > 256 {
            times.removeFirst(keep - firstTime)
            firstTime = keep
        }
        return out
    }
}

/// A copied H.264 or HEVC stream's packets with presentation times from their pictures'
/// order (`DisplaySchedule`): each packet is held until its time is known, then handed back
/// with it, in decode order.
final class PictureOrderTimes {
    /// NAL unit types of the pictures that restart the POC: H.264's IDR slice; HEVC's IDR
    /// and BLA pictures (not a CRA, after which the POC goes on and the leading pictures
    /// that precede it in display order come with lower ones).
    static let h264Restarts: Set<Int> = [5]
    static let hevcRestarts: Set<Int> = [16, 17, 18, 19, 20]
    private var schedule: DisplaySchedule
    private let parser: HeaderParser
    private let lengthSize: Int
    private let h264: Bool
    private var queue: [Packet] = []
    /// Where the stream starts (an edit list's start).
    private let start: Int64
    var repaired: Int { schedule.repaired }

    /// nil for a stream this cannot serve (neither H.264 nor HEVC). `format`: the
    /// demuxer's, whose decode times may be decode times (MP4) rather than a frame clock.
    init?(stream: UnsafeMutablePointer<AVStream>, format: String) {
        guard let parser = HeaderParser(stream: stream, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC]) else { return nil }
        self.parser = parser
        h264 = stream.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_H264
        lengthSize = NALScanner.lengthSize(stream)
        start = stream.pointee.start_time != noPTS ? stream.pointee.start_time : 0
        let rate = stream.pointee.avg_frame_rate.num > 0 ? stream.pointee.avg_frame_rate : stream.pointee.r_frame_rate
        let step = rate.num > 0 && rate.den > 0
            ? rescale(1, from: AVRational(num: rate.den, den: rate.num), to: stream.pointee.time_base) : 1
        // The reorder depth the analysis's decoder settled on (at least one: the stream
        // reorders, or it would not be here).
        schedule = DisplaySchedule(depth: max(1, Int(stream.pointee.codecpar.pointee.video_delay)), step: step,
                                   decodeTimesLead: format.hasPrefix("mov"))
    }

    /// Takes `packet`'s contents (leaving it blank) and returns the packets whose times are
    /// now known.
    func add(_ packet: Packet) throws(KilnError) -> [Packet] {
        let p = packet.pointer.pointee
        let order = parser.pictureOrder(packet)
        let restarts = h264 ? Self.h264Restarts : Self.hevcRestarts
        let idr = p.data.map {
            !NALScanner.nalTypes(UnsafeBufferPointer(start: $0, count: Int(p.size)), lengthSize: lengthSize, h264: h264)
                .isDisjoint(with: restarts)
        } ?? false
        let held = try Packet()
        held.take(packet)
        queue.append(held)
        return hand(schedule.add(decodeTime: p.dts == noPTS ? nil : p.dts, order: order, idr: idr))
    }

    /// The packets still held, with their times: the end of the stream.
    func finish() -> [Packet] { hand(schedule.finish()) }

    private func hand(_ timed: [DisplaySchedule.Timed]) -> [Packet] {
        let ready = queue.prefix(timed.count)
        for (packet, t) in zip(ready, timed) {
            packet.pointer.pointee.pts = t.pts
            packet.pointer.pointee.dts = t.dts
            // libavformat's word that a picture is shown before an edit list's start (to be
            // decoded and not shown) was judged from the times just replaced: a picture
            // now shown from the start on is shown (a transcode lost two such pictures).
            if t.pts >= start { packet.pointer.pointee.flags &= ~AV_PKT_FLAG_DISCARD }
        }
        queue.removeFirst(timed.count)
        return Array(ready)
    }
}

/// The presentation time a picture's order count stands for, for the odd picture of a
/// reordered stream that comes without one.
///
/// An MPEG program stream times a PES packet, not a picture: when one PES packet begins two
/// pictures, the second has neither a presentation nor a decode time. Copied as it is, the
/// picture would be shown at its decode time, out of its place (`ffmpeg -c copy` writes it
/// so): with B-frames, two frames trade places. Within one IDR period display times rise
/// with the picture order count (POC) at one rate, which the period's pictures with times
/// show: the missing time is where the nearest two of them put the picture's POC. A time
/// that is not a whole step of that rate, or that another picture already has, is no answer.
struct OrderTimeLine {
    /// The current IDR period's latest timed pictures, oldest first.
    private var timed: [(order: Int32, pts: Int64)] = []
    /// How many timed pictures are remembered: a few GOPs' worth of B-frame pyramids.
    static let kept = 48

    /// Records a picture in decode order: its POC (nil when the parser found none), whether
    /// it is an IDR picture (which restarts the POC), and its time (`noPTS` if it has none).
    mutating func note(order: Int32?, idr: Bool, pts: Int64) {
        if idr { timed.removeAll() }
        guard let order, pts != noPTS else { return }
        timed.append((order, pts))
        if timed.count > Self.kept { timed.removeFirst(timed.count - Self.kept) }
    }

    /// How many POC units away a neighbour whose time a picture took may be (H.264 counts
    /// two per frame): a PES packet that begins several pictures begins a few.
    static let neighbourhood: Int64 = 8

    /// The time a picture of POC `order` in the current period stands for; nil when the
    /// period has no two timed pictures of different POCs, they do not agree on one, or
    /// another picture has it.
    func time(for order: Int32) -> Int64? {
        guard let (t, _) = line(at: order), !timed.contains(where: { $0.pts == t }) else { return nil }
        return t
    }

    /// For a picture that came with time `pts` from a stream whose PES packets begin
    /// several pictures (it has untimed ones): the time its POC stands for, when `pts` is a
    /// near neighbour's on the period's line instead. The demuxer gives a PES packet's time
    /// to a picture that merely ends in it; the picture whose time it is then comes without
    /// one, or with the same. nil when `pts` is the picture's own, or off the line.
    func corrected(order: Int32, pts: Int64) -> Int64? {
        guard let (own, (orders, times)) = line(at: order), own != pts,
              !timed.contains(where: { $0.pts == own }) else { return nil }
        // pts - own = k POC units of the line, k a whole number within the neighbourhood.
        let (product, overflow) = (pts - own).multipliedReportingOverflow(by: orders)
        guard !overflow, product % times == 0, abs(product / times) <= Self.neighbourhood else { return nil }
        return own
    }

    /// Where the period's two timed pictures nearest to POC `order` put it, and the line's
    /// slope (POC units, time) between them; nil without two, or off a whole time.
    private func line(at order: Int32) -> (Int64, (Int64, Int64))? {
        let nearest = timed.sorted { abs(Int64($0.order) - Int64(order)) < abs(Int64($1.order) - Int64(order)) }
        guard let a = nearest.first, let b = nearest.first(where: { $0.order != a.order }) else { return nil }
        let orders = Int64(b.order) - Int64(a.order), times = b.pts - a.pts
        // Display times rise with the POC.
        guard (orders > 0) == (times > 0), times != 0 else { return nil }
        let offset = Int64(order) - Int64(a.order)
        let (product, overflow) = offset.multipliedReportingOverflow(by: times)
        guard !overflow, product % orders == 0 else { return nil }
        return (a.pts + product / orders, (orders, times))
    }
}
