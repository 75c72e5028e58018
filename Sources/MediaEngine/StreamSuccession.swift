import CFFmpeg
import KilnCore

/// Follows a broadcast recording's sound, or its pictures, from the stream the plan chose
/// to the one that carries it on when that stream ends mid-file.
///
/// A transport stream's programme map may change mid-recording: the next programme's sound
/// comes on a new PID (libavformat adds a stream when it meets it), or a stream that ran
/// beside the chosen one goes on after it (the 5.1 track of a film ends with the film, the
/// stereo track goes on). The output kept the chosen stream only: a recording whose sound
/// moved to a new PID after 10 s came out with 10 s of sound and silence after it, and
/// answered `ok`. The pictures too may move to a new PID at a programme change: a 12 s
/// recording came out with 6 s of them.
///
/// So each packet of a stream that could succeed the chosen one (`eligible`: another stream
/// of its type and programme, the same language, the same kind: not an audio description
/// or commentary unless the chosen one is) is held back from the current stream's last packet
/// on. A packet of the current stream lets them go (it goes on: they are not needed). When
/// a candidate has covered `handover` of its time without one, the current stream has ended:
/// the candidate becomes current, and what it gave since the old stream's last packet goes
/// to the lane first, less what overlaps the old stream's end (and, for pictures, what
/// comes before the new stream's first keyframe, which nothing decodes). A broadcast
/// interleaves each stream within a second of its neighbours, so 3 s without a packet is
/// an end, not a late packet; a dropout of every stream (lost reception) holds every
/// candidate back too.
///
/// The followed packets take the plan's stream index, so the splice timeline, the lane and
/// the delivery counts see one stream. Only in containers whose streams can come and go
/// (MPEG-TS and program streams: `Demuxer.hasDiscontinuousTimestamps`), and only between
/// streams with the same time base (the lane reads times in its stream's).
struct StreamSuccession {
    /// The plan's stream: every followed packet takes its index.
    let lane: Int32
    /// Whether it is the pictures' (else the sound's).
    let video: Bool
    /// Pictures of the new current stream still to be left out until its first keyframe.
    private var awaitingKeyframe = false
    /// The stream whose packets feed the lane now.
    private(set) var current: Int32
    /// Time a candidate covers, with no packet of the current stream, that ends it.
    static let handover = 3 * Int64(kiln_time_base())
    /// Packets held per candidate at most (about 20 s of AAC): older ones are let go, so a
    /// stream without durations or times cannot hold memory without bound.
    static let holdPackets = 1024

    private struct Held {
        var packets: [Packet] = []
        /// Sound covered, in AV_TIME_BASE units: the packets' durations, or their steps.
        var covered: Int64 = 0
        var lastDTS: Int64?
    }
    private var held: [Int32: Held] = [:]
    /// Where the current stream's latest packet ends (source time, AV_TIME_BASE units).
    private var currentEnd: Int64?
    /// Whether a stream could succeed the plan's by its kind (decided once per stream), and
    /// whether it is in the plan's stream's programme now (asked at each packet: a stream
    /// can come before the programme map that lists it).
    private var eligibility: [Int32: Bool] = [:]
    private let eligible: (Int32) -> Bool
    private let inProgramme: (Int32) -> Bool

    /// A succession that happened: from which stream to which.
    struct Handover: Equatable {
        /// The plan's stream, whose lane goes on.
        let lane: Int32
        let from: Int32
        let to: Int32
        let video: Bool
    }
    private(set) var handovers: [Handover] = []

    /// `eligible(stream)`: whether a stream could carry on the plan's stream `lane` by its
    /// kind (`succeeds`); `inProgramme(stream)`: whether it is in that stream's programme
    /// (`shareProgramme`).
    init(lane: Int32, video: Bool, eligible: @escaping (Int32) -> Bool, inProgramme: @escaping (Int32) -> Bool) {
        self.lane = lane
        self.video = video
        current = lane
        self.eligible = eligible
        self.inProgramme = inProgramme
    }

    enum Admission {
        /// The packet feeds the lane (its index is now the lane's).
        case current
        /// Held as a candidate's, or left out (a picture before the new stream's first
        /// keyframe): the caller's packet is emptied.
        case held
        /// Not a stream this follows: the caller goes on as before.
        case other
        /// The current stream ended: these packets (the new current stream's, in file
        /// order, already given the lane's index) go to the lane before anything else.
        case handover([Packet])
    }

    /// Sorts one packet read from the file, from `stream`.
    mutating func admit(_ packet: Packet, stream: UnsafeMutablePointer<AVStream>) throws(KilnError) -> Admission {
        let index = packet.streamIndex
        let timeBase = stream.pointee.time_base
        if !video, index == current || isEligible(index) { fillTimes(packet, stream) }
        let start = Self.start(packet, timeBase), duration = Self.length(packet, timeBase)
        if index == current, awaitingKeyframe {
            guard packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 else {
                packet.unref()
                return .held
            }
            awaitingKeyframe = false
        }
        if index == current {
            if let start { currentEnd = start + duration }
            held.removeAll(keepingCapacity: true)
            packet.streamIndex = lane
            return .current
        }
        guard isEligible(index) else { return .other }
        var h = held[index, default: Held()]
        let kept = try Packet()
        kept.take(packet)
        h.packets.append(kept)
        if h.packets.count > Self.holdPackets { h.packets.removeFirst(h.packets.count - Self.holdPackets) }
        if duration > 0 {
            h.covered += duration
        } else if let start, let last = h.lastDTS, start > last, start - last < Int64(kiln_time_base()) {
            h.covered += start - last
        }
        if let start { h.lastDTS = start }
        guard h.covered >= Self.handover else {
            held[index] = h
            return .held
        }
        // The current stream has ended: this one carries the sound or pictures on.
        held.removeAll()
        var packets = h.packets[...]
        // What the new stream gave before the old one's end (their interleaving) is what
        // the output already has; only within a jump, so a splice's new times are kept.
        if let end = currentEnd {
            while let first = packets.first, let t = Self.start(first, timeBase),
                  t + Self.length(first, timeBase) <= end, end - t < TimelineOutliers.jump {
                packets.removeFirst()
            }
        }
        if video {
            while let first = packets.first, first.pointer.pointee.flags & AV_PKT_FLAG_KEY == 0 { packets.removeFirst() }
            awaitingKeyframe = packets.isEmpty
        }
        for kept in packets { kept.streamIndex = lane }
        handovers.append(Handover(lane: lane, from: current, to: index, video: video))
        current = index
        if let last = packets.last, let t = Self.start(last, timeBase) { currentEnd = t + Self.length(last, timeBase) }
        return .handover(Array(packets))
    }

    /// Where each followed or candidate stream's next packet begins (its time base).
    private var next: [Int32: Int64] = [:]

    /// What a stream libavformat met mid-file is (`CodecParameters.audioFormat`), and
    /// decodes tried.
    private var formats: [Int32: CodecParameters] = [:]
    private var tries: [Int32: Int] = [:]

    /// Gives a packet without a time or length the ones its stream's last packet implies.
    /// A stream libavformat met mid-file has no sample rate in its parameters (its probe
    /// window is long past; one filled in is put back to nothing at its next PES packet),
    /// so its parser gives no packet a length, and of the several frames in a PES packet
    /// only the first a time: copied so, the new programme's sound was squeezed into
    /// microseconds a PES packet at a time. The lengths come from the stream's format as
    /// its first frame says (`CodecParameters.audioFormat`).
    private mutating func fillTimes(_ packet: Packet, _ stream: UnsafeMutablePointer<AVStream>) {
        let p = packet.pointer
        let index = packet.streamIndex
        var par = UnsafePointer(stream.pointee.codecpar!)
        if par.pointee.sample_rate <= 0 {
            if formats[index] == nil, tries[index, default: 0] < 16 {
                tries[index, default: 0] += 1
                formats[index] = CodecParameters.audioFormat(of: stream, from: packet)
            }
            if let learnt = formats[index] { par = UnsafePointer(learnt.pointer) }
        }
        if p.pointee.duration <= 0, par.pointee.sample_rate > 0 {
            let samples = av_get_audio_frame_duration2(UnsafeMutablePointer(mutating: par), p.pointee.size)
            if samples > 0 {
                p.pointee.duration = rescale(Int64(samples), from: AVRational(num: 1, den: par.pointee.sample_rate), to: stream.pointee.time_base)
            }
        }
        if p.pointee.dts == noPTS, p.pointee.pts == noPTS, let t = next[index] {
            p.pointee.dts = t
            p.pointee.pts = t
        }
        let t = p.pointee.dts != noPTS ? p.pointee.dts : p.pointee.pts
        next[index] = t == noPTS || p.pointee.duration <= 0 ? nil : t + p.pointee.duration
    }

    private mutating func isEligible(_ index: Int32) -> Bool {
        if index == lane { return true }
        let kind: Bool
        if let known = eligibility[index] { kind = known } else { kind = eligible(index); eligibility[index] = kind }
        return kind && inProgramme(index)
    }

    private static func start(_ packet: Packet, _ tb: AVRational) -> Int64? {
        let p = packet.pointer.pointee
        let t = p.dts != noPTS ? p.dts : p.pts
        return t == noPTS ? nil : rescale(t, from: tb, to: kiln_time_base_q())
    }

    private static func length(_ packet: Packet, _ tb: AVRational) -> Int64 {
        let d = packet.pointer.pointee.duration
        return d > 0 ? rescale(d, from: tb, to: kiln_time_base_q()) : 0
    }
}

extension StreamSuccession {
    /// Whether `candidate` could carry on the sound or pictures of the plan's `chosen` stream
    /// by its kind: another stream of its type with a decoder, the same time base, of the
    /// same kind (audio description, commentary, for the hard of hearing; no cover art), not
    /// in another language (when both say).
    static func succeeds(_ candidate: Int32, _ chosen: Int32, in demuxer: Demuxer) -> Bool {
        guard candidate != chosen, candidate >= 0, Int(candidate) < demuxer.streamCount else { return false }
        let a = demuxer.stream(Int(chosen)), b = demuxer.stream(Int(candidate))
        let par = b.pointee.codecpar.pointee
        let type = a.pointee.codecpar.pointee.codec_type
        guard type == AVMEDIA_TYPE_AUDIO || type == AVMEDIA_TYPE_VIDEO, par.codec_type == type,
              avcodec_find_decoder(par.codec_id) != nil,
              av_cmp_q(a.pointee.time_base, b.pointee.time_base) == 0 else { return false }
        let kinds = AV_DISPOSITION_VISUAL_IMPAIRED | AV_DISPOSITION_COMMENT | AV_DISPOSITION_HEARING_IMPAIRED | AV_DISPOSITION_ATTACHED_PIC
        guard a.pointee.disposition & kinds == b.pointee.disposition & kinds else { return false }
        func language(_ s: UnsafeMutablePointer<AVStream>) -> String? {
            guard let l = dictValue(s.pointee.metadata, "language")?.lowercased(), !l.isEmpty, l != "und" else { return nil }
            return l
        }
        if let la = language(a), let lb = language(b), la != lb { return false }
        return true
    }

    /// Whether `candidate` is in one of `programmes` (the chosen stream's at the start,
    /// `programmes(of:in:)`) now, or in none at all: a new programme map lists the streams
    /// it brings and drops those it ends, and a stream's packets can come before the map
    /// that lists it (a recording cut or written twice there). Any stream when the chosen
    /// one is in no programme (program streams have none).
    static func shareProgramme(_ candidate: Int32, _ programmes: Set<Int32>, in demuxer: Demuxer) -> Bool {
        let own = Self.programmes(of: candidate, in: demuxer)
        return programmes.isEmpty || own.isEmpty || !programmes.isDisjoint(with: own)
    }

    /// The ids of the programmes (MPEG-TS services) that list `stream` now.
    static func programmes(of stream: Int32, in demuxer: Demuxer) -> Set<Int32> {
        let ctx = demuxer.context.pointee
        var ids: Set<Int32> = []
        for i in 0..<Int(ctx.nb_programs) {
            guard let program = ctx.programs[i] else { continue }
            let members = UnsafeBufferPointer(start: program.pointee.stream_index, count: Int(program.pointee.nb_stream_indexes))
            if members.contains(UInt32(stream)) { ids.insert(program.pointee.id) }
        }
        return ids
    }
}
