import CFFmpeg
import KilnCore

/// Reads packets for the pipeline and leaves out runs of a stream's packets whose times
/// jump far from where the stream (or, for its first packets, ahead of where the file) was
/// and then jump back: a stretch of a recording written twice (a recorder that rewrote a
/// buffer), or a burst of damaged timestamps.
///
/// Left in, such a run is ruinous however short. A transcode's lanes keep to the latest
/// time they have seen, so after a run 4 s ahead they dropped every frame until the
/// source caught up (a 4-second recording came out 0.3 s long); a copy's muxer needs rising
/// decode times, so the 4 s of sound after the run were squeezed into 0.2 s.
///
/// A jump alone is no damage: a real gap (a dropout) or splice goes on from its new time.
/// So a stream that jumps is held back, with every packet read after it (the file's order
/// is kept), until it shows which it is: a jump back to within `jump` of where it was (the
/// run is dropped, counted in `dropped`), or `runPackets` packets on from the new time
/// (let through as it is; a splice back in MPEG-TS is then made continuous by the
/// pipeline). A stretch repeated late looked like such a splice: its 3 packets, timed
/// 3.4 s back, had the rest of the file moved 3.4 s on. A stream's opening packets (its
/// first `openingPackets`) are held too: where the stream jumps from them and goes on
/// `runPackets` from there, the opening was the outlier and is left out (one damaged byte
/// in an MPEG-TS file's first sound PTS, which times the PES's two frames, put its sound
/// 16 hours after its pictures: the opening is where a stream's time starts, so nothing
/// after it could come back to it).
/// A run that left exactly its own room behind is no outlier but the stream's own packets
/// with damaged times (a flipped bit in a PES header): they are timed into that room and
/// kept (`retimeRun`). Left out, a damaged reference picture's loss corrupted every picture
/// to the next keyframe, and a sound PES's left a gap of silence.
/// Holding is bounded (`holdPackets`, `holdBytes`); past that,
/// everything held goes through as it is. Only audio and video are judged: subtitles are
/// sparse by nature.
///
/// A picture shown far later than it is decoded (`Pipeline.reorderBound`) is held as well,
/// until the stream shows whether that is its own time (`Ahead`): the pipeline takes such
/// a presentation time for damage unless this reader vouches for it (`vouches`).
final class TimelineOutliers {
    /// How far a stream's time may move on at once without being suspected.
    static let jump = Int64(kiln_time_base())
    /// How far a packet may land from its stream's next step (`step` on from the last)
    /// unsuspected: 3 steps, and 50 ms. A Matroska block timed 0.5 s late (within `jump`)
    /// had been shown there, displacing the 11 pictures after it. Suspicion costs one
    /// packet held; only a stream whose time runs back is put back (`retimeRun`), which
    /// one whose time rises never does, however unevenly.
    static func nearStep(_ step: Int64) -> Int64 { max(3 * step, jump / 20) }
    /// Packets of a suspect stream on its new timeline that make the jump a real one.
    static let runPackets = 32
    /// Packets of a stream's opening, judged by what follows them.
    static let openingPackets = 16
    /// Accepted packets remembered per stream, to know one written again (`Run.known`):
    /// 8 to 20 s.
    static let rememberedPackets = 512
    /// What may be held back while waiting, at most.
    static let holdPackets = 256
    static let holdBytes = 16 << 20

    private struct Run {
        /// Where the stream, or the file, was before the jump; the latest time of the run.
        var from: Int64
        var latest: Int64
        var packets = 1
        /// The run jumped from the stream's opening: if the run goes on, the opening was
        /// the outlier.
        var fromOpening = false
        /// The run's first time.
        var first: Int64 = 0
        /// A single packet a little off the stream's step, not past `jump`: put back if the
        /// next one shows its room, else taken as the stream's move.
        var single = false
        /// Every packet of the run after its first (which the repeat's start may have cut
        /// short) is one already taken: the same bytes at the same time
        /// (`TimelineOutliers.identity`), a stretch written again (a recorder that sent a
        /// second of its buffer twice). Such a run is not taken for a real jump after
        /// `runPackets`: it is waited out (within `holdPackets`, `holdBytes`), and left out
        /// when the stream comes back. One of a second, more sound frames than
        /// `runPackets`, had been taken for a splice back and played twice. Two recordings
        /// joined with the same times bring other bytes, or outlast the hold, and are the
        /// splice they are.
        var known = false
    }
    private struct Held {
        var packet: Packet
        var stream: Int32
        /// In a suspect run of its stream: dropped if the run comes back.
        var inRun: Bool
        var dropped = false
        /// One of its stream's opening packets.
        var opening = false
    }

    /// A picture whose presentation time lies far ahead of its decode time. Reordered
    /// pictures are shown a few pictures after they are decoded, and where the stream's
    /// pictures stop for a while (a variable-rate screen recording holding a still), the
    /// first one after the pause is decoded before the pause and shown after it: seconds
    /// later. Its decode time is the stream's pace, and within a picture's reordering
    /// (`window`) the decode times come up to its presentation time, as they step to the
    /// pictures after the pause; a damaged presentation time (a flipped bit) sees them
    /// go on where they were. The stream's last pictures have none after them: theirs is
    /// their own time where it lies within the file's declared length (the pause before a
    /// still ending, 3 s of a 6 s clip, had been "repaired" onto the picture before it).
    private struct Ahead {
        var stream: Int
        var pts: Int64
        var dts: Int64
        /// Where the stream's decode times must come to, in its time base, and the latest
        /// that still stands for it: a decode time far past the picture is itself damaged
        /// (a random DTS hours on, in a recording whose PTS were damaged too, had vouched
        /// for a picture timed hours on, and a transcode dropped every picture after it).
        var reach: Int64
        var beyond: Int64
        /// Where the picture ends, in Kiln's time base (from the file's start).
        var end: Int64
        /// The stream's packets still to come that may show it.
        var window: Int
    }
    private var ahead: [Ahead] = []
    /// Pictures whose presentation time this reader vouches for: (stream, pts, dts).
    private var vouched: Set<[Int64]> = []
    /// Where the file declares it ends (Kiln's time base), if it does.
    private let declaredEnd: Int64?

    private let demuxer: Demuxer
    /// Per input stream (arrays: this runs for every packet of a film): whether it is
    /// judged, its time base, its latest accepted time (noPTS before any) and its run.
    private let judged: [Bool]
    private let timeBases: [AVRational]
    /// Per stream, its pictures' length at the measured rate (0: unknown, or sound).
    private let frameLengths: [Int64]
    private var position: [Int64]
    /// Per stream, the decode times of Matroska's reordered pictures (`DecodeClock`).
    private var clocks: [DecodeClock?]
    /// Matroska times a cluster's blocks from one timestamp: damaged, the cluster's every
    /// packet moves by as much, as long as the cluster lasts (seconds, hundreds of
    /// packets). A run there is waited on past `runPackets`, until it shows whether it left
    /// its room behind (`fits`).
    private let clustered: Bool
    /// Per stream, its first accepted time (noPTS before any).
    private var firstTimes: [Int64]
    /// Per stream, its last step forward between accepted times (0 before two).
    private var steps: [Int64]
    private var runs: [Run?]
    private var remembered: [Remembered]
    /// Per stream, the packets of its opening still to come (0: over).
    private var openingLeft: [Int]
    private var filePosition: Int64?
    private var held: [Held] = []
    private var heldBytes = 0
    private var released: [Packet] = []
    private var next = 0
    private var ended = false
    /// Packets left out as a run that jumped back.
    private(set) var dropped = 0
    /// Packets whose damaged times were put back in the room their stream left for them.
    private(set) var retimed = 0

    /// `judged`: the audio and video streams the pipeline keeps. `frameLengths`: how long
    /// video streams' pictures last at the rate the probe measured (`Pipeline.frameLengths`).
    init(demuxer: Demuxer, judged: Set<Int32>, frameLengths: [Int32: Int64] = [:]) {
        self.demuxer = demuxer
        let n = demuxer.streamCount
        self.judged = (0..<n).map { judged.contains(Int32($0)) }
        self.frameLengths = (0..<n).map { frameLengths[Int32($0)] ?? 0 }
        timeBases = (0..<n).map { demuxer.stream($0).pointee.time_base }
        position = Array(repeating: noPTS, count: n)
        firstTimes = Array(repeating: noPTS, count: n)
        steps = Array(repeating: 0, count: n)
        runs = Array(repeating: nil, count: n)
        remembered = Array(repeating: Remembered(), count: n)
        openingLeft = Array(repeating: Self.openingPackets, count: n)
        let ctx = demuxer.context.pointee
        declaredEnd = ctx.duration > 0 ? (ctx.start_time != noPTS ? ctx.start_time : 0) + ctx.duration : nil
        clustered = demuxer.isMatroska
        clocks = (0..<n).map { [clustered] s in
            let par = demuxer.stream(s).pointee.codecpar.pointee
            guard clustered, judged.contains(Int32(s)), par.codec_type == AVMEDIA_TYPE_VIDEO,
                  (1...16).contains(par.video_delay) else { return nil }
            let tb = demuxer.stream(s).pointee.time_base, kiln = kiln_time_base_q()
            return DecodeClock(depth: Int(par.video_delay), jump: rescale(Self.jump, from: kiln, to: tb),
                               frameLength: rescale(frameLengths[Int32(s)] ?? 0, from: kiln, to: tb))
        }
    }

    /// Reads the demuxer's next packet, its decode time from the stream's clock where it
    /// keeps one (`timeReturnToCluster` where the stream comes back to its room).
    private func readTimed(into packet: Packet) throws(KilnError) -> Bool {
        guard try demuxer.read(into: packet) else { return false }
        let s = Int(packet.pointer.pointee.stream_index)
        if s >= 0, s < clocks.count, clocks[s] != nil {
            clocks[s]!.time(&packet.pointer.pointee)
            timeReturnToCluster(packet, s)
        }
        return true
    }

    /// Whether the reader has seen the stream's decode times come up to this picture's
    /// presentation time, or the file end where it is shown (`Ahead`). Asked once per
    /// picture: the answer is forgotten.
    func vouches(for packet: Packet) -> Bool {
        let p = packet.pointer.pointee
        return vouched.remove([Int64(p.stream_index), p.pts, p.dts]) != nil
    }

    /// The next packet in file order, outliers left out. False at the end of the file.
    func read(into packet: Packet) throws(KilnError) -> Bool {
        while true {
            if next < released.count {
                packet.take(released[next])
                next += 1
                if next == released.count { released = []; next = 0 }
                return true
            }
            if ended { return false }
            if held.isEmpty {
                // Nothing suspect: packets go straight through.
                guard try readTimed(into: packet) else { ended = true; continue }
                let verdict = judge(packet)
                if verdict == .clear { return true }
                try hold(packet, verdict)
                continue
            }
            guard try readTimed(into: packet) else {
                ended = true
                release()
                continue
            }
            try hold(packet, judge(packet))
            let waiting = runs.contains(where: { $0 != nil }) || inOpening || !ahead.isEmpty
            if !waiting || held.count >= Self.holdPackets || heldBytes >= Self.holdBytes { release() }
        }
    }

    /// `ahead`: a picture shown far after it is decoded, held until the stream shows why
    /// (`Ahead`).
    /// `repeated`: a packet again at a time its stream already took, left out.
    private enum Verdict { case clear, inRun, opening, ahead, repeated }

    /// What tells a packet written twice: its decode time, size and bytes (the first 256
    /// and the last 64: two pictures or sound frames at one time and of one size differ
    /// there), hashed a word at a time. It is taken for every packet of a film's copy: a
    /// byte at a time over 2 kB had cost a 20-minute film a fifth of a second.
    private static func identity(_ p: AVPacket) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ value: UInt64) {
            h = (h ^ value) &* 0x100_0000_01b3
            h ^= h >> 29
        }
        mix(UInt64(bitPattern: p.dts))
        mix(UInt64(p.size))
        guard let data = p.data, p.size > 0 else { return h }
        let raw = UnsafeRawPointer(data), n = Int(p.size)
        func mix(from: Int, to: Int) {
            var i = from
            while i + 8 <= to { mix(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)); i += 8 }
            while i < to { mix(UInt64(data[i])); i += 1 }
        }
        let head = min(n, 256)
        mix(from: 0, to: head)
        mix(from: max(head, n - 64), to: n)
        return h
    }

    /// Per stream, the identities of its last `rememberedPackets` accepted packets.
    private struct Remembered {
        var ring: [UInt64] = []
        var next = 0
        var set: Set<UInt64> = []

        mutating func insert(_ key: UInt64) {
            guard set.insert(key).inserted else { return }
            if ring.count < TimelineOutliers.rememberedPackets {
                ring.append(key)
            } else {
                set.remove(ring[next])
                ring[next] = key
                next = (next + 1) % ring.count
            }
        }
    }

    /// Whether a stream that has begun is still in its opening.
    private var inOpening: Bool { position.indices.contains { position[$0] != noPTS && openingLeft[$0] > 0 } }

    /// Takes the packet's time into account: whether it starts or continues a suspect run,
    /// or is one of its stream's opening packets.
    private func judge(_ packet: Packet) -> Verdict {
        let p = packet.pointer.pointee
        let s = Int(p.stream_index)
        // Decode times, which rise: presentation times of reordered pictures at a low frame
        // rate may step back and forth by more than `jump`. A packet without one (Matroska's
        // first reordered pictures) is not judged.
        guard s >= 0, s < judged.count, judged[s], p.dts != noPTS else { return .clear }
        let suspect = watchAhead(p, s)
        // The same bytes at the same time as a packet already taken (`Run.known`).
        let identity = Self.identity(p)
        let verdict = judgeTime(p, s, known: remembered[s].set.contains(identity))
        if verdict != .inRun { remembered[s].insert(identity) }
        return verdict == .clear && suspect ? .ahead : verdict
    }

    /// Settles the pictures ahead of their stream (`Ahead`) that this packet shows, and
    /// whether the packet is one itself (to be held).
    private func watchAhead(_ p: AVPacket, _ s: Int) -> Bool {
        var k = 0
        while k < ahead.count {
            guard ahead[k].stream == s else { k += 1; continue }
            if p.dts >= ahead[k].reach, p.dts <= ahead[k].beyond {
                vouched.insert([Int64(s), ahead[k].pts, ahead[k].dts])
                ahead.remove(at: k)
                continue
            }
            ahead[k].window -= 1
            if ahead[k].window <= 0 { ahead.remove(at: k) } else { k += 1 }
        }
        let st = demuxer.stream(s)
        let tb = timeBases[s]
        // A stream's first picture has nothing before it to be ahead of (`Pipeline.take`
        // judges it against the other streams).
        guard p.pts != noPTS, position[s] != noPTS, st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO else { return false }
        let length = Pipeline.length(ofPacket: rescale(p.duration, from: tb, to: kiln_time_base_q()), picture: frameLengths[s])
        let bound = rescale(Pipeline.reorderBound(duration: length), from: kiln_time_base_q(), to: tb)
        guard p.pts - p.dts > bound else { return false }
        // Only a picture decoded at the stream's pace: one whose decode time is what jumped
        // (hours back, its presentation time right) is no picture ahead, and the pictures
        // after it, coming up to its presentation time as they do to any, had vouched for
        // its damaged decode time; the pipeline moved the picture hours on by it and a
        // transcode dropped every picture after (a recording of 10 s came out with 1.7 s).
        guard p.dts != noPTS, abs(rescale(p.dts, from: tb, to: kiln_time_base_q()) - position[s]) <= Self.jump else { return false }
        // A picture is shown once its decoder has taken in as many more as it holds back
        // (the reorder depth), which it may itself follow in display order by as many: the
        // decode time `2 × depth` packets on is the latest that can be its.
        let depth = Int(max(1, min(16, st.pointee.codecpar.pointee.video_delay)))
        // The decode times step to the presentation times of the pictures they stand for
        // (libavformat and encoders derive them so): within two pictures (or 0.1 s) of its
        // own, or the reordering bound where a picture's length is unknown.
        let near = length > 0 ? rescale(max(2 * length, Self.jump / 10), from: kiln_time_base_q(), to: tb) : bound
        ahead.append(Ahead(stream: s, pts: p.pts, dts: p.dts, reach: p.pts - near, beyond: p.pts + near,
                           end: rescale(p.pts + max(0, p.duration), from: tb, to: kiln_time_base_q()),
                           window: 2 * depth + 2))
        return true
    }

    /// The stream's pictures still ahead when the file ends (or the hold is full): theirs
    /// is their own time where the file's declared length reaches it (`Ahead`).
    private func settleAhead() {
        for a in ahead where a.end <= (declaredEnd ?? Int64.min) + Int64(kiln_time_base()) / 2 {
            vouched.insert([Int64(a.stream), a.pts, a.dts])
        }
        ahead = []
    }

    private func judgeTime(_ p: AVPacket, _ s: Int, known: Bool) -> Verdict {
        let t = rescale(p.dts, from: timeBases[s], to: kiln_time_base_q())
        // Until two times have been accepted, the packet's own length is the step, or the
        // measured rate's where that is longer (a slideshow cut from a 30 fps clip: its
        // packets say 1/30 s, its pictures come every 2.5 s).
        if steps[s] == 0 {
            steps[s] = max(0, Pipeline.length(ofPacket: rescale(p.duration, from: timeBases[s], to: kiln_time_base_q()), picture: frameLengths[s]))
        }
        let jump = self.jump(s)
        // Nor one whose presentation time is seconds from it: one of the two is damaged,
        // which the pipeline settles (`Pipeline.take`). Closer, a damaged decode time is
        // judged here (`retimeRun` puts it back exactly), a damaged presentation time in
        // the pipeline (`Pipeline.reorderBound`).
        // Its decode time still counts where it is the stream's next step: Matroska's
        // derived decode times lag a cluster's jump by the reorder depth (a cluster timed
        // 30 s late begins with two pictures decoded on the time before it and shown 30 s
        // on; the film after a cluster timed 10 s early, with two decoded on that cluster's
        // time), and those places are part of the run's room (`fits`).
        if p.pts != noPTS, abs(rescale(p.pts, from: timeBases[s], to: kiln_time_base_q()) - t) > Pipeline.discontinuityThreshold {
            guard steps[s] > 0 else { return .clear }
            if var run = runs[s] {
                guard !run.single, t > run.latest, t - run.latest <= Self.nearStep(steps[s]) else { return .clear }
                run.latest = t
                run.packets += 1
                run.known = false
                runs[s] = run
                return .inRun
            }
            if position[s] != noPTS, abs(t - position[s] - steps[s]) <= Self.nearStep(steps[s]) { accept(s, t) }
            return .clear
        }
        if var run = runs[s], run.single {
            // A packet already taken, behind where the stream was: the single packet began a
            // stretch written again (cut short at its start), which is waited out.
            if known, t < run.from {
                run.single = false
                run.known = true
                run.latest = t
                run.packets += 1
                runs[s] = run
                return .inRun
            }
            end(s)
            if retimeRun(s, run, returningAt: t) {
                accept(s, t)
                return .clear
            }
            // The stream moved there (a hole, a slower stretch): its packet stands, and this
            // one is judged from it.
            accept(s, run.latest)
        }
        if var run = runs[s] {
            // Back where it was, at once: the run was no part of the stream. A stretch written
            // again is back however short it was, when the stream goes on a step after where
            // it left, or at where it left: a recorder that started again cut the packet it
            // was writing, and the whole one comes again after the stretch (taken for the run
            // going on, the stretch's 2.5 s of pictures had been kept, moved on as a splice,
            // and the sound, whose stretch ended cleanly, left 2.5 s ahead of them).
            let cutAgain = run.known && !known && steps[s] > 0 && abs(t - run.from) * 2 <= steps[s]
            if Self.returns(t, from: run.from, last: run.latest) || cutAgain || (displaced(s, run) && fits(s, run, returningAt: t))
                || (run.known && !known && steps[s] > 0 && abs(t - run.from - steps[s]) * 2 <= steps[s]) {
                end(s)
                if !retimeRun(s, run, returningAt: t) {
                    // A picture stream's first keyframe is what every picture after it needs: it
                    // is put just before the stream's time, not left out (a Matroska file whose
                    // first block was timed 30 s late decoded to nothing).
                    leaveOut(s, keyframeBefore: position[s] == noPTS ? t : nil) { $0.inRun }
                }
                // The packet cut at the restart went through at this time already: the whole
                // one is left out too, so that the times rise (taken, two pictures shared one).
                if cutAgain { return .repeated }
                accept(s, t)
                return .clear
            }
            if abs(t - run.latest) <= jump {
                run.latest = t
                run.packets += 1
                run.known = run.known && known
                runs[s] = run
                // It goes on from there: a real jump, or, from a stream's opening, the
                // opening was astray. Not while it brings only packets already taken: a
                // stretch written again is waited out to its end, however long.
                if run.packets >= Self.runPackets, !run.known, run.fromOpening || !clustered {
                    if run.fromOpening, !openingAgrees(s) { dropOpening(s, before: run.first) }
                    end(s, accepting: true)
                }
                return .inRun
            }
            // Away from the run as well: its packets stand, and the stream went through them.
            end(s, accepting: true)
            accept(s, t)
            return .clear
        }
        // A stream's first packet is suspect only ahead of the file: one behind it is a
        // stream stored late (its time then rises toward the file's, which is no return).
        if position[s] != noPTS ? abs(t - position[s]) > jump : filePosition.map({ t - $0 > jump }) ?? false {
            let fromOpening = position[s] != noPTS && openingLeft[s] > 0
            runs[s] = Run(from: position[s] != noPTS ? position[s] : filePosition!, latest: t, fromOpening: fromOpening, first: t,
                          known: true)
            return .inRun
        }
        // A packet already taken, behind where the stream is: a stretch written again.
        if known, position[s] != noPTS, t < position[s] {
            runs[s] = Run(from: position[s], latest: t, first: t, known: true)
            return .inRun
        }
        // Closer, a step far off the stream's own (`nearStep`) may be one packet's damaged
        // time: it waits for the next packet, which shows whether it left its room.
        if position[s] != noPTS, steps[s] > 0, abs(t - position[s] - steps[s]) > Self.nearStep(steps[s]) {
            runs[s] = Run(from: position[s], latest: t, first: t, single: true)
            return .inRun
        }
        accept(s, t)
        guard openingLeft[s] > 0 else { return .clear }
        openingLeft[s] -= 1
        return .opening
    }

    /// Whether stream `s`'s opening starts where another stream of the file starts: then
    /// the stream paused after it (a variable-rate recording's first picture, held a
    /// second or more before the next), and the opening is no outlier. A damaged time
    /// lands anywhere (16 hours after the pictures), not on another stream's start.
    private func openingAgrees(_ s: Int) -> Bool {
        guard firstTimes[s] != noPTS else { return false }
        return firstTimes.indices.contains { $0 != s && firstTimes[$0] != noPTS && abs(firstTimes[$0] - firstTimes[s]) <= Self.jump / 2 }
    }

    /// Leaves out stream `s`'s opening packets still held (its first keyframe is put just
    /// before the run instead), and ends its opening.
    private func dropOpening(_ s: Int, before t: Int64) {
        openingLeft[s] = 0
        leaveOut(s, keyframeBefore: t) { $0.opening }
    }

    /// Leaves out stream `s`'s held packets that `picked` chooses; with `keyframeBefore`,
    /// the first video keyframe among them is kept, timed just before it (`retimedKeyframe`).
    private func leaveOut(_ s: Int, keyframeBefore t: Int64?, _ picked: (Held) -> Bool) {
        var keptKeyframe = false
        for i in held.indices where held[i].stream == Int32(s) && !held[i].dropped && picked(held[i]) {
            if !keptKeyframe, let t, retimedKeyframe(i, before: t) {
                keptKeyframe = true
                retimed += 1
                continue
            }
            held[i].dropped = true
            dropped += 1
        }
    }

    /// Whether held packet `i` is a video keyframe, then timed one frame before `t` (in
    /// Kiln's time base), its reordering kept, so it stays and the pictures after it decode.
    private func retimedKeyframe(_ i: Int, before t: Int64) -> Bool {
        let p = held[i].packet.pointer
        let s = Int(held[i].stream)
        guard p.pointee.flags & AV_PKT_FLAG_KEY != 0,
              demuxer.stream(s).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO else { return false }
        let reorder = p.pointee.pts != noPTS && p.pointee.dts != noPTS ? p.pointee.pts - p.pointee.dts : 0
        let dts = rescale(t, from: kiln_time_base_q(), to: timeBases[s]) - max(p.pointee.duration, 1)
        p.pointee.dts = dts
        p.pointee.pts = dts + reorder
        return true
    }

    /// Whether stream `s`'s `run`, now that the stream came back at `t`, was its own packets
    /// with damaged times, and if so times them evenly in the room they left. The stream came
    /// back as many of its steps after where it left as the run has packets, and one more
    /// (within half a step): that room is theirs. A stretch written twice leaves none (the
    /// stream goes on a step after it left). A presentation time moves with its decode time
    /// where that puts it nearer the new decode time (both were damaged: a Matroska block's
    /// one time), else it was undamaged and stays.
    ///
    /// Pictures decoded before the run and shown in it (a Matroska cluster's first ones,
    /// whose decode times libavformat derives from the times before the cluster's) move as
    /// far as the run's first packet did (`movePicturesShownIn`).
    private func retimeRun(_ s: Int, _ run: Run, returningAt t: Int64) -> Bool {
        guard fits(s, run, returningAt: t) else { return false }
        let slots = Int64(run.packets + 1), room = t - run.from
        movePicturesShownIn(s, run, by: run.from + room / slots - run.first)
        let tb = timeBases[s]
        var k: Int64 = 0
        for i in held.indices where held[i].stream == Int32(s) && !held[i].dropped && held[i].inRun {
            k += 1
            let p = held[i].packet.pointer
            let time = run.from + room * k / slots
            let dts = rescale(time, from: kiln_time_base_q(), to: tb)
            if p.pointee.pts != noPTS {
                // Moved with the decode time, or left: whichever lies nearer the new decode
                // time (reordering keeps the two within a few frames).
                let moved = p.pointee.pts + (dts - p.pointee.dts)
                if abs(moved - dts) < abs(p.pointee.pts - dts) { p.pointee.pts = moved }
            }
            p.pointee.dts = dts
            retimed += 1
        }
        // The stream stood at the run's last packet, a step before it came back.
        accept(s, run.from + room * Int64(run.packets) / slots)
        return true
    }

    /// Whether stream `s`'s `run` left exactly its room behind when the stream comes back at
    /// `t`: as many of its steps after where it left as the run has packets, and one more
    /// (within half a step). The run is then the stream's own packets with damaged times,
    /// however far they jumped and however long the run: a Matroska cluster whose timestamp
    /// was damaged moves its second (or its five) as a whole, and the film after it comes
    /// back one step past it.
    /// A long run is measured by its own pace where that is the stream's (within a tenth):
    /// times rounded to milliseconds step by 33 and 34 for 29.97 fps, and the last step
    /// misses 29 of them by more than half of one.
    private func fits(_ s: Int, _ run: Run, returningAt t: Int64) -> Bool {
        let step = steps[s], slots = Int64(run.packets + 1), room = t - run.from
        guard step > 0, run.from == position[s] else { return false }
        if abs(room - slots * step) * 2 <= step { return true }
        guard run.packets >= 8 else { return false }
        let pace = (run.latest - run.first) / Int64(run.packets - 1)
        return abs(pace - step) * 10 <= step && abs(room - slots * pace) * 2 <= pace
    }

    /// Where stream `s`, in Matroska, comes back with `packet` from a run of pictures its
    /// decode clock started over after (`DecodeClock`), into the room the run left: the
    /// start-over times a packet as a keyframe shown the reorder depth after it is decoded,
    /// and a P-picture with B-pictures shown before it (a cluster begun mid-GOP) is decoded
    /// earlier than that. Its decode time is derived again from the times before the
    /// start-over moved back by as far as the run jumped, where that fits the room, and the
    /// clock goes on from those times. Before the packet is judged.
    private func timeReturnToCluster(_ packet: Packet, _ s: Int) {
        guard let clock = clocks[s], let run = runs[s], !run.single, steps[s] > 0, displaced(s, run) else { return }
        let p = packet.pointer
        let tb = timeBases[s], kiln = kiln_time_base_q()
        let shift = rescale(run.first - run.from - steps[s], from: kiln, to: tb)
        guard let dts = clock.time(ofLast: p.pointee.pts, keptShiftedBy: shift), dts != p.pointee.dts,
              fits(s, run, returningAt: rescale(dts, from: tb, to: kiln)) else { return }
        clocks[s]!.resume(p.pointee.pts, keptShiftedBy: shift)
        p.pointee.dts = dts
    }

    /// Whether stream `s`'s `run` began a jump away from the stream's own step: a stream
    /// whose every step is longer than `jump` (a damaged TimestampScale put a sound's
    /// frames 8 s apart) moves on by its step, and each packet is no run that fits.
    private func displaced(_ s: Int, _ run: Run) -> Bool {
        abs(run.first - run.from - steps[s]) > jump(s)
    }

    /// Moves by `shift` (Kiln's time base) the presentation times of stream `s`'s held
    /// pictures that are decoded before `run` and shown among it: a Matroska cluster's first
    /// pictures, whose decode times libavformat derived from the times before the cluster
    /// (a keyframe shown 4 s after it was decoded). They no longer need this reader's word
    /// (`vouches`).
    private func movePicturesShownIn(_ s: Int, _ run: Run, by shift: Int64) {
        let tb = timeBases[s], kiln = kiln_time_base_q()
        for i in held.indices where held[i].stream == Int32(s) && !held[i].dropped && !held[i].inRun {
            let p = held[i].packet.pointer
            guard p.pointee.pts != noPTS, p.pointee.dts != noPTS else { continue }
            let pts = rescale(p.pointee.pts, from: tb, to: kiln), dts = rescale(p.pointee.dts, from: tb, to: kiln)
            guard pts - dts > Self.jump, pts >= run.first - Self.jump, pts <= run.latest + Self.jump else { continue }
            vouched.remove([Int64(s), p.pointee.pts, p.pointee.dts])
            p.pointee.pts += rescale(shift, from: kiln, to: tb)
            retimed += 1
        }
    }

    /// Whether a time `t` after a run that jumped away from `from` and last stood at `last`
    /// is the stream coming back (in any time unit): near where it left, and by a jump
    /// from the run, nearer there than to the run. Three DVD pictures written again 1.04 s
    /// late came back exactly `jump` after the run, and were taken for the run going on; a
    /// splice 1.06 s back comes within `jump` of where it left by its own steps, and is
    /// no return.
    static func returns<T: SignedNumeric & Comparable>(_ t: T, from: T, last: T, within jump: T) -> Bool {
        abs(t - from) <= jump && abs(t - from) < abs(t - last) && abs(t - last) * 2 > jump
    }
    private static func returns(_ t: Int64, from: Int64, last: Int64) -> Bool { returns(t, from: from, last: last, within: jump) }

    /// Ends stream `s`'s run; `accepting`: its new timeline is the stream's from now on.
    private func end(_ s: Int, accepting: Bool = false) {
        guard let run = runs[s] else { return }
        runs[s] = nil
        if accepting { accept(s, run.latest) }
    }

    /// How far stream `s`'s time may move on at once unsuspected: `jump`, or one of its
    /// pictures and half that where they last longer (a slideshow's every picture had been
    /// a jump; at two pictures, a damaged time 3 s late in a slideshow of a picture every
    /// 1.5 s went through, and its return was taken for a splice: 1.5 s out of sync).
    private func jump(_ s: Int) -> Int64 { max(Self.jump, frameLengths[s] + Self.jump / 2) }

    private func accept(_ s: Int, _ t: Int64) {
        if firstTimes[s] == noPTS { firstTimes[s] = t }
        if position[s] != noPTS, t > position[s] { steps[s] = t - position[s] }
        position[s] = t
        filePosition = max(filePosition ?? t, t)
    }

    /// Keeps `packet`'s contents (a packet of its own: the caller's is reused).
    private func hold(_ packet: Packet, _ verdict: Verdict) throws(KilnError) {
        let kept = try Packet()
        kept.take(packet)
        heldBytes += Int(kept.pointer.pointee.size)
        held.append(Held(packet: kept, stream: kept.streamIndex, inRun: verdict == .inRun, dropped: verdict == .repeated,
                         opening: verdict == .opening))
        if verdict == .repeated { dropped += 1 }
    }

    /// Hands out what is held, in file order, without the dropped runs; runs still open go
    /// through as real jumps.
    private func release() {
        // At the hold's limit, a picture still ahead whose stream has not gone on within its
        // window (ffmpeg's muxer wrote a still ending's last picture among the sound of its
        // pause, 27 s before its stream's next packets) is judged as at the file's end.
        settleAhead()
        for s in runs.indices { end(s, accepting: true) }
        for s in openingLeft.indices where position[s] != noPTS { openingLeft[s] = 0 }
        released += held.lazy.filter { !$0.dropped }.map(\.packet)
        held = []
        heldBytes = 0
    }
}
