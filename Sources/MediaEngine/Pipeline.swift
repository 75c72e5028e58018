import CFFmpeg
import KilnCore

/// The one demux loop for remuxes and transcodes: reads each packet once, moves the
/// timeline so the output starts at zero, repairs timestamp jumps, and hands each packet
/// to the lane that owns its stream. Packets of streams no lane wants are never read
/// past the demuxer (`AVDISCARD_ALL`).
final class Pipeline {
    let demuxer: Demuxer
    let lanes: [Lane]
    /// The lanes that own their stream's packets: each stream's first (a copy lane takes
    /// them). Other lanes on the same stream (the captions read from the pictures, a
    /// teletext stream's other pages) watch it (`watchers`, by owner): they see each
    /// packet, on its output time, just before the owner does.
    private let owners: [Lane]
    private let watchers: [ObjectIdentifier: [SubtitleLane]]
    let muxer: Muxer
    let durationSeconds: Double
    let cancellation: Cancellation
    let onProgress: (JobProgress) -> Void
    /// The source, looked at with each progress report: one still being written is given
    /// up on at once, not read to an end it will have moved past.
    let watch: SourceWatch?

    /// A jump bigger than this between consecutive timestamps of a stream in a container
    /// that allows discontinuities (MPEG-TS) is a splice or a broadcast wrap, not content.
    static let discontinuityThreshold: Int64 = 10 * Int64(kiln_time_base())
    /// How far a packet lasting `duration` (Kiln's time base; 0 or less: unknown) may be
    /// shown from when it is decoded before one of its two times is taken for damage.
    /// H.264's deepest reordering is 16 frames: 16 of the packet's own lengths, which is
    /// seconds where pictures last seconds (a slideshow's B-frames at a picture every 3 s
    /// are shown 12 s after they are decoded), but never less than a second. A packet of
    /// unknown length gets `discontinuityThreshold`. A first picture whose presentation time
    /// alone a flipped bit put 3 s late (a 10 s bound for every packet let it through) had
    /// been taken for the stream's start: the copy lost its first 3 s.
    static func reorderBound(duration: Int64) -> Int64 {
        duration > 0 ? max(Int64(kiln_time_base()), 16 * duration) : discontinuityThreshold
    }
    /// A step back bigger than this is a splice too: a recording's time never runs back,
    /// and left as it is the muxer would squeeze everything until the old time is passed
    /// again into nothing (a copy) or the lanes would drop it (a transcode). Smaller steps
    /// back are a stream's interleaving, left to the muxer. The jump `TimelineOutliers`
    /// judges by: it has already left out steps back that return.
    static let backwardThreshold = TimelineOutliers.jump

    /// `frameLengths`: how long each video stream's pictures last (Kiln's time base), from
    /// the rate the probe measured (`frameLengths(of:)`).
    init(demuxer: Demuxer, lanes: [Lane], muxer: Muxer, durationSeconds: Double, cancellation: Cancellation,
         watch: SourceWatch? = nil, frameLengths: [Int32: Int64] = [:], onProgress: @escaping (JobProgress) -> Void) {
        self.watch = watch
        self.frameLengths = frameLengths
        self.demuxer = demuxer
        self.lanes = lanes
        var owned = Set<Int32>(), owners: [Lane] = [], watchers = [ObjectIdentifier: [SubtitleLane]]()
        for lane in lanes {
            if owned.insert(lane.inputIndex).inserted {
                owners.append(lane)
            } else if let watcher = lane as? SubtitleLane, let owner = owners.first(where: { $0.inputIndex == lane.inputIndex }) {
                watchers[ObjectIdentifier(owner), default: []].append(watcher)
            }
        }
        self.owners = owners
        self.watchers = watchers
        self.muxer = muxer
        self.durationSeconds = durationSeconds
        self.cancellation = cancellation
        self.onProgress = onProgress
    }

    /// The earliest start among the audio and video streams we keep, in AV_TIME_BASE
    /// units. Subtracting it makes the output start at zero while keeping the streams'
    /// relative offsets (A/V sync). Subtitles do not count: their first cue may be late.
    func startOffset() -> Int64 {
        var best: Int64? = nil
        for index in timedInputs {
            let st = demuxer.stream(Int(index))
            guard st.pointee.start_time != noPTS else { continue }
            let t = rescale(st.pointee.start_time, from: st.pointee.time_base, to: kiln_time_base_q())
            best = min(best ?? t, t)
        }
        if let best { return best }
        let s = demuxer.context.pointee.start_time
        return s == noPTS ? 0 : s
    }

    /// Every input stream an owner takes (a merged sound's streams each).
    private var ownedInputs: [Int32] { owners.flatMap(\.inputIndices) }

    /// The kept input streams that are audio or video (not subtitles).
    private var timedInputs: [Int32] {
        ownedInputs.filter {
            let type = demuxer.stream(Int($0)).pointee.codecpar.pointee.codec_type
            return type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO
        }
    }

    /// What the source gave each kept input stream: its packet count, its first timestamp
    /// and where its last packet ends, in seconds from the output's start. Evidence when a
    /// finished output does not match the source's declared length (`Preparer.blameSource`).
    struct Delivered: Equatable {
        var packets = 0
        var firstSeconds = Double.infinity
        var endSeconds = -Double.infinity
        /// Where its last packet starts.
        var lastStartSeconds = -Double.infinity
        /// The time its packets cover.
        var span: Double { packets > 0 ? max(0, endSeconds - firstSeconds) : 0 }

        /// Counts a packet at `seconds` that lasts `lasting` (its end is the stream's end
        /// if it is the last).
        mutating func count(at seconds: Double?, lasting: Double = 0) {
            packets += 1
            if let seconds {
                firstSeconds = min(firstSeconds, seconds)
                endSeconds = max(endSeconds, seconds + max(0, lasting))
                lastStartSeconds = max(lastStartSeconds, seconds)
            }
        }
    }
    private(set) var delivered: [Int32: Delivered] = [:]

    /// What the source gave `lane`, over all its streams (a merged sound's streams
    /// together: from the first one's first packet to the last one's end).
    static func delivered(to lane: Lane, from delivered: [Int32: Delivered]) -> Delivered? {
        let parts = lane.inputIndices.compactMap { delivered[$0] }
        guard var whole = parts.first else { return nil }
        for d in parts.dropFirst() {
            whole.packets += d.packets
            whole.firstSeconds = min(whole.firstSeconds, d.firstSeconds)
            whole.endSeconds = max(whole.endSeconds, d.endSeconds)
            whole.lastStartSeconds = max(whole.lastStartSeconds, d.lastStartSeconds)
        }
        return whole
    }
    /// Where the kept audio and video end (seconds, output time), once all is read; no
    /// subtitle cue goes on past it.
    private(set) var picturesAndSoundEnd: Double?
    /// Where the source's subtitle cues end (seconds, output time), once all is read: the
    /// kept ones' and, in Matroska, the dropped ones' (nil without any).
    private(set) var cueReach: Double?
    /// Packets whose presentation time was repaired here (see `run`).
    private(set) var repairedTimestamps = 0
    /// Each kept stream's last decode time (its own time base), where it is.
    private var lastDTS: [Int32: Int64] = [:]
    private let frameLengths: [Int32: Int64]

    /// The length of each video stream's pictures at the rate the probe measured. A
    /// packet's own length can be a tick of its encoder's clock: a slideshow cut from a
    /// 30 fps clip (a picture every 2.5 s, B-frames shown 5 s after they are decoded)
    /// says 1/30 s, which put its reordering past `reorderBound` and its times were
    /// "repaired" into the wrong order.
    static func frameLengths(of info: MediaInfo) -> [Int32: Int64] {
        var lengths: [Int32: Int64] = [:]
        for s in info.streams where s.type == .video {
            guard let fps = s.frameRate, fps > 0, fps.isFinite else { continue }
            lengths[Int32(s.index)] = Int64((Double(kiln_time_base()) / fps).rounded())
        }
        return lengths
    }

    /// A packet's length for judging its times: its own, or its stream's picture length
    /// (`frameLengths`) where that is longer; its own (0 or less: unknown) where it says none.
    static func length(ofPacket own: Int64, picture: Int64) -> Int64 { own > 0 ? max(own, picture) : own }
    /// Times made continuous across a splice (see `run`): the source's declared duration
    /// then says nothing about the output's.
    private(set) var splices = 0
    /// The median start of the audio and video streams other than `index`, in `tb`; nil
    /// where there are none.
    private func otherStreamsStart(than index: Int32, in tb: AVRational) -> Int64? {
        let starts = timedInputs.filter { $0 != index }.compactMap { i -> Int64? in
            let st = demuxer.stream(Int(i))
            return st.pointee.start_time == noPTS ? nil : rescale(st.pointee.start_time, from: st.pointee.time_base, to: tb)
        }.sorted()
        return starts.isEmpty ? nil : starts[starts.count / 2]
    }

    /// Packets left out as damage: runs of times far off that jumped back (`TimelineOutliers`).
    private(set) var outliers = 0
    /// Where the sound or pictures went on in another stream (`StreamSuccession`), and the
    /// output time (seconds) of the first packet that stream gave the lane (nil if it gave
    /// none).
    private(set) var continued: [(handover: StreamSuccession.Handover, at: Double?)] = []

    func run() throws(KilnError) {
        var laneFor = [Int32: Lane]()
        for lane in owners { for index in lane.inputIndices { laneFor[index] = lane } }
        // The one audio lane and the one video lane of a recording whose streams come and
        // go follow their sound and pictures from stream to stream (`StreamSuccession`):
        // the streams that could carry them on are read too.
        var successions: [StreamSuccession] = []
        var followers: [(Int32) -> Bool] = []
        for type in [AVMEDIA_TYPE_AUDIO, AVMEDIA_TYPE_VIDEO] where demuxer.hasDiscontinuousTimestamps {
            let ofType = owners.filter { demuxer.stream(Int($0.inputIndex)).pointee.codecpar.pointee.codec_type == type }
            // A sound made of several streams keeps to them.
            guard ofType.count == 1, ofType[0].inputIndices.count == 1 else { continue }
            let chosen = ofType[0].inputIndex
            let programmes = StreamSuccession.programmes(of: chosen, in: demuxer)
            let eligible = { [demuxer] (i: Int32) in StreamSuccession.succeeds(i, chosen, in: demuxer) }
            let inProgramme = { [demuxer] (i: Int32) in StreamSuccession.shareProgramme(i, programmes, in: demuxer) }
            successions.append(StreamSuccession(lane: chosen, video: type == AVMEDIA_TYPE_VIDEO, eligible: eligible, inProgramme: inProgramme))
            // Streams another programme lists now are another service's: left unread.
            followers.append { eligible($0) && inProgramme($0) }
        }
        let mayFollow = { (i: Int32) in followers.contains { $0(i) } }
        // Lanes whose next packet is the first a followed stream gave.
        var followedFirst: Set<Int32> = []
        // Matroska's declared length counts subtitle tracks, the dropped ones too (a bitmap
        // track whose last picture outlasts the film): their packets' times are read, for
        // `cueReach`, and nothing else.
        let matroska = demuxer.isMatroska
        let timesOnly: Set<Int32> = matroska ? Set((0..<Int32(demuxer.streamCount)).filter {
            laneFor[$0] == nil && demuxer.stream(Int($0)).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_SUBTITLE
        }) : []
        for i in 0..<demuxer.streamCount where laneFor[Int32(i)] == nil && !mayFollow(Int32(i)) && !timesOnly.contains(Int32(i)) {
            demuxer.stream(i).pointee.discard = AVDISCARD_ALL
        }
        // The lane whose position is the progress: video if there is one.
        let progressIndex = lanes.first { demuxer.stream(Int($0.inputIndex)).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO }?.inputIndex
            ?? lanes.first?.inputIndex ?? -1
        for lane in lanes { try lane.prepare(muxer: muxer) }
        try check(kiln_copy_chapters(muxer.context, demuxer.context, startOffset()), .mux, "cannot copy chapters")
        copyGlobalMetadata()
        try muxer.writeHeader()

        var timeline = SpliceTimeline(startCorrection: -startOffset(), allowsJumps: demuxer.hasDiscontinuousTimestamps)
        defer { splices = timeline.splices }
        var pacer = ProgressPacer()
        var position = 0.0
        let packet = try Packet()
        let timed = Set(timedInputs)
        let sounds = Set(ownedInputs.filter { demuxer.stream(Int($0)).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO })
        // The kept subtitle streams (converted or burnt in): where their cues end.
        let texts = Set(ownedInputs.filter { SubtitleLane.isText(demuxer.stream(Int($0)).pointee.codecpar.pointee) })
        /// For each lane of several streams (a merged sound), the timed streams it does not own.
        var othersOfMerged: [ObjectIdentifier: [Int32]] = [:]
        for lane in owners where lane.inputIndices.count > 1 {
            othersOfMerged[ObjectIdentifier(lane)] = timed.filter { !lane.inputIndices.contains($0) }
        }
        /// How far the kept audio and video have come (seconds, output time).
        func reach() -> Double? { timed.compactMap { delivered[$0]?.endSeconds }.filter(\.isFinite).max() }
        let reader = TimelineOutliers(demuxer: demuxer, judged: timed, frameLengths: frameLengths)
        defer {
            outliers = reader.dropped
            repairedTimestamps += reader.retimed
        }
        var held: [(packet: Packet, timeline: Int, seq: Int)] = []
        var heldBytes = 0

        let startSeconds = Double(startOffset()) / Double(kiln_time_base())
        /// Notes where a dropped subtitle packet ends (Matroska has no splices to place it across).
        func reachOfDropped(_ packet: Packet) {
            let tb = demuxer.stream(Int(packet.streamIndex)).pointee.time_base
            guard let t = seconds(packet.time, tb) else { return }
            let end = t + max(0, seconds(packet.pointer.pointee.duration, tb) ?? 0) - startSeconds
            cueReach = max(cueReach ?? end, end)
        }

        // Where libavformat cuts pictures out of PES bytes, pictures that stop coming while
        // the sound goes on are bytes held by its parser (`PictureStall`).
        let keepsPictures = owners.contains { demuxer.stream(Int($0.inputIndex)).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO }
        var stall = ["mpegts", "mpeg"].contains(demuxer.formatName) && keepsPictures ? PictureStall() : nil

        /// Moves the packet's times by `correction` and hands it to its lane.
        func deliver(_ packet: Packet, lane: Lane, correction: Int64) throws(KilnError) {
            let index = packet.streamIndex
            let tb = demuxer.stream(Int(index)).pointee.time_base
            let p = packet.pointer
            let shift = rescale(correction, from: kiln_time_base_q(), to: tb)
            if p.pointee.pts != noPTS { p.pointee.pts += shift }
            if p.pointee.dts != noPTS { p.pointee.dts += shift }
            let t = seconds(p.pointee.dts != noPTS ? p.pointee.dts : p.pointee.pts, tb)
            if index == progressIndex, let t { position = max(position, t) }
            delivered[index, default: Delivered()].count(at: t, lasting: seconds(p.pointee.duration, tb) ?? 0)
            if stall != nil {
                switch demuxer.stream(Int(index)).pointee.codecpar.pointee.codec_type {
                case AVMEDIA_TYPE_VIDEO: stall?.picture(at: t)
                case AVMEDIA_TYPE_AUDIO: if let t { try stall?.sound(at: t) }
                default: break
                }
            }
            if texts.contains(index), let subtitles = lane as? SubtitleLane {
                subtitles.picturesAndSoundReach = reach()
                subtitles.timesMoved = shift
            }
            // A merged sound judges its streams' times against where the file's others are.
            if let others = othersOfMerged[ObjectIdentifier(lane)], let sound = lane as? AudioTranscodeLane {
                sound.othersReach = others.compactMap { delivered[$0]?.endSeconds }.filter(\.isFinite).max()
            }
            if followedFirst.contains(index), let k = continued.lastIndex(where: { $0.handover.lane == index }) {
                continued[k].at = t
                followedFirst.remove(index)
            }
            for watcher in watchers[ObjectIdentifier(lane)] ?? [] {
                watcher.picturesAndSoundReach = reach()
                try watcher.consume(packet, muxer: muxer)
            }
            try lane.consume(packet, muxer: muxer)
            if let progress = pacer.due(position: position, duration: durationSeconds) {
                try watch?.check(.demux)
                onProgress(progress)
            }
        }
        /// Hands out what is held, each on its timeline as it has settled.
        func release() throws(KilnError) {
            defer { held = []; heldBytes = 0 }
            for h in held {
                let index = h.packet.streamIndex
                guard let lane = laneFor[index] else { continue }
                let t = timeline.timeline(of: index, placedAt: h.seq, on: h.timeline)
                try deliver(h.packet, lane: lane, correction: timeline.corrections[t])
                h.packet.unref()
            }
        }

        /// Repairs, places and hands out (or holds) one packet of a kept stream.
        func take(_ packet: Packet, lane: Lane) throws(KilnError) {
            let index = packet.streamIndex
            // Encrypted samples decode to garbage and copy into a file without their keys'
            // boxes: only the source file itself can go (the planner plans nothing else).
            if packet.isEncrypted {
                throw KilnError(.sourceUnsupported, stage: .demux,
                                "the source's stream \(index) is encrypted (DRM): it can only be delivered as the file it is")
            }
            let tb = demuxer.stream(Int(index)).pointee.time_base
            let p = packet.pointer
            // Reordering shows a picture a few frames after it is decoded (`reorderBound`),
            // never seconds: a presentation time further from the decode time is damage (a
            // flipped bit in a TS packet's PTS put one picture 13 hours late, and a copy then
            // failed in the muxer, a transcode dropped everything after it). The one far from
            // where the stream is (its last decode time; for its first packet, its start) is
            // the damaged one: a damaged presentation time becomes the decode time and the
            // stream's reordering delay; a damaged decode time is dropped, and the copy
            // derives it from its neighbours (a first picture's decode time 26 hours early,
            // taken as the stream's start, left an output whose sound did not decode at its
            // start).
            // A packet of unknown length keeps `reorderBound`'s wide bound.
            let length = Pipeline.length(ofPacket: rescale(p.pointee.duration, from: tb, to: kiln_time_base_q()), picture: frameLengths[index] ?? 0)
            // A picture that is shown seconds later, the stream's own way (a pause in a
            // variable-rate stream), is vouched for by the reader, which saw the stream's
            // decode times come up to it (`TimelineOutliers.Ahead`).
            if p.pointee.pts != noPTS, p.pointee.dts != noPTS,
               abs(rescale(p.pointee.pts - p.pointee.dts, from: tb, to: kiln_time_base_q())) > Pipeline.reorderBound(duration: length),
               !reader.vouches(for: packet) {
                let st = demuxer.stream(Int(index))
                // A first packet's own stream start is its damaged time, whichever it is
                // (libavformat takes the start from the first presentation time): the other
                // streams' starts say where the file is.
                let reference = lastDTS[index] ?? otherStreamsStart(than: index, in: tb)
                    ?? (st.pointee.start_time != noPTS ? st.pointee.start_time : p.pointee.pts)
                if abs(p.pointee.dts - reference) > abs(p.pointee.pts - reference) {
                    p.pointee.dts = noPTS
                } else {
                    // Shown the stream's reordering delay after it is decoded: exactly a first
                    // keyframe's place (at its decode time it came out before the start, and
                    // was not shown).
                    p.pointee.pts = p.pointee.dts + Int64(st.pointee.codecpar.pointee.video_delay) * rescale(max(0, length), from: kiln_time_base_q(), to: tb)
                }
                repairedTimestamps += 1
            }
            if p.pointee.dts != noPTS { lastDTS[index] = p.pointee.dts }
            let placed = timeline.place(stream: index,
                                        dts: p.pointee.dts == noPTS ? nil : rescale(p.pointee.dts, from: tb, to: kiln_time_base_q()),
                                        step: max(rescale(p.pointee.duration, from: tb, to: kiln_time_base_q()), 1),
                                        sparse: !timed.contains(index),
                                        sound: sounds.contains(index))
            // While a stream is pending (`SpliceTimeline.isPending`), packets wait in file
            // order for their timelines to settle, as much as the outlier filter holds.
            if timeline.isPending || !held.isEmpty {
                let kept = try Packet()
                kept.take(packet)
                heldBytes += Int(kept.pointer.pointee.size)
                held.append((kept, placed, timeline.placed))
                if !timeline.isPending || held.count >= TimelineOutliers.holdPackets || heldBytes >= TimelineOutliers.holdBytes {
                    try release()
                }
                return
            }
            try deliver(packet, lane: lane, correction: timeline.corrections[placed])
        }

        while try reader.read(into: packet) {
            defer { packet.unref() }
            try cancellation.check(.demux)
            // A packet is one succession's at most (each follows streams of its own type):
            // the first that does not call it `.other` says whether the lane gets it.
            var admitted = true
            for k in successions.indices where admitted {
                let admission = try successions[k].admit(packet, stream: demuxer.stream(Int(packet.streamIndex)))
                let s = successions[k]
                switch admission {
                case .current: break
                case .other: continue
                case .held: admitted = false
                case .handover(let packets):
                    admitted = false
                    guard let lane = laneFor[s.lane], let handover = s.handovers.last else { continue }
                    continued.append((handover, nil))
                    followedFirst.insert(s.lane)
                    try lane.follow(demuxer.stream(Int(s.current)), muxer: muxer)
                    for followed in packets { try take(followed, lane: lane) }
                }
                break
            }
            guard admitted, let lane = laneFor[packet.streamIndex] else {
                if timesOnly.contains(packet.streamIndex) { reachOfDropped(packet) }
                continue
            }
            try take(packet, lane: lane)
        }
        try release()
        try cancellation.check(.demux)
        picturesAndSoundEnd = reach()
        cueReach = (texts.compactMap { delivered[$0]?.endSeconds } + [cueReach].compactMap { $0 }).filter(\.isFinite).max()
        for case let subtitles as SubtitleLane in lanes { subtitles.picturesAndSoundReach = picturesAndSoundEnd }
        for lane in lanes { try lane.finish(muxer: muxer) }
        try cancellation.check(.mux)
        try muxer.finish()
        onProgress(pacer.final(position: durationSeconds, duration: durationSeconds))
    }

    /// Carries the source's descriptive tags (title, show, episode, date, …) and its
    /// creation time (a phone video's "date taken", which the MP4 muxer writes into the
    /// movie and track headers), not the ones that describe the old file (brands, encoder).
    private func copyGlobalMetadata() {
        var e: UnsafeMutablePointer<AVDictionaryEntry>? = nil
        let skip: Set<String> = ["major_brand", "minor_version", "compatible_brands", "encoder", "duration"]
        while let entry = av_dict_get(demuxer.context.pointee.metadata, "", e, AV_DICT_IGNORE_SUFFIX) {
            e = entry
            guard let key = string(entry.pointee.key), !skip.contains(key.lowercased()) else { continue }
            av_dict_set(&muxer.context.pointee.metadata, key, entry.pointee.value, 0)
        }
    }
}

/// Pictures that stop coming while the sound goes on, in MPEG-TS and program streams.
///
/// There libavformat cuts pictures out of the PES bytes with the codec's parser, which holds
/// every byte until the next picture's start. Where a recording's video goes scrambled (a
/// pay-TV decryption lost mid-recording) or goes on in another codec on the same PID
/// (MPEG-2, then H.264), no such start comes again: the parser held the rest of the file
/// (544 MB of memory for four and a half minutes of MPEG-2) while the sound went on, and the
/// output had 30 s of pictures beside 300 s of sound, exit 0. A multiplex interleaves its
/// streams within a second or so; sound this far past the last picture is refused, which
/// bounds what the parser holds.
struct PictureStall {
    /// How far (seconds) the sound may run past the last picture.
    static let limit = 30.0
    private var lastPicture: Double?
    private var firstSound: Double?
    private var lastSound: Double?

    /// A picture came, at `t`; one with no time of its own (timed later from its order count
    /// or the frame rate) came where the sound is.
    mutating func picture(at t: Double?) {
        guard let t = t ?? lastSound ?? lastPicture else { return }
        lastPicture = max(lastPicture ?? t, t)
    }

    /// Throws where sound at `t` is `limit` past the last picture (before any, past the
    /// first sound).
    mutating func sound(at t: Double) throws(KilnError) {
        if firstSound == nil { firstSound = t }
        lastSound = max(lastSound ?? t, t)
        let since = lastPicture ?? firstSound ?? t
        guard t - since > Self.limit else { return }
        throw KilnError(.sourceCorrupt, stage: .demux,
                        (lastPicture == nil ? "the source's pictures never come" : "the source's pictures stop")
                        + " while its sound goes on \(Format.fixed(Self.limit, decimals: 0)) s past them, to \(Format.fixed(t, decimals: 1)) s: "
                        + "its video is scrambled, damaged or in another codec from there")
    }
}
