import CFFmpeg
import KilnCore

/// A broadcast's sound whose codec changes on its PID: a DVB or ATSC channel's AAC or MPEG
/// audio stereo that goes on as AC-3 5.1 for a film, in the same elementary stream, the
/// programme map saying so by a new version.
///
/// libavformat 5.1 sets a stream's codec from the first programme map and never again, and
/// its parser for that codec cuts the new codec's bytes wherever they happen to hold that
/// codec's sync word. The bytes are all there, in order, but the packets are no frames:
/// the declared codec's decoder makes nothing of them (the run was refused: "no sound for
/// its last 10 s"), and a copy writes them into a track of the first codec.
///
/// Every packet the declared codec's parser cut is whole frames of that codec
/// (`SoundFrameHeader.tiles`), so one that is not is damage or another codec. Such packets'
/// bytes are gathered (`UnexplainedSound`) until three frames of another codec are found
/// end to end in them; from there the stream's bytes are cut into frames by their own headers
/// (`SoundFramer`), whichever codec each states. Only in containers libavformat parses
/// sound from (MPEG-TS and program streams), and for the codecs whose headers state their
/// length.
struct UnexplainedSound {
    let declared: SoundFrameHeader.Family
    /// Bytes of packets that were no frames of the declared codec, in order.
    private(set) var window: [UInt8] = []
    /// Where the next search starts: a run near the end could not be confirmed yet.
    private var searched = 0
    /// Whether a packet was whole frames of the declared codec. Until one is, a stream is
    /// not taken for one cut by sync words (raw AAC in another container, a free-format
    /// MP3), and its packets are not searched (`watchesFromStart` aside).
    private var framed: Bool
    /// The bytes kept to search: a few frames of any of the codecs (AC-3's longest is
    /// 3,840 bytes, ADTS's 8,191), so a run that starts across packets is found.
    static let windowBytes = 64 << 10

    /// - Parameter watchesFromStart: search from the first packet on (a survey's sample,
    ///   which may land where the other codec has begun).
    init?(codec: AVCodecID, watchesFromStart: Bool = false) {
        guard let family = SoundFrameHeader.family(of: codec) else { return nil }
        declared = family
        framed = watchesFromStart
    }

    enum Verdict {
        /// Whole frames of the declared codec.
        case frames
        /// Not, in a stream not known to be cut into frames: not searched.
        case unwatched
        /// Not, and gathered: damage, or the start of another codec.
        case unexplained
        /// The first frame of another codec that the next two confirm, by its offset in
        /// `window`.
        case otherCodec(offset: Int, header: SoundFrameHeader)
    }

    /// Takes a packet's bytes.
    mutating func observe(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        if SoundFrameHeader.tiles(bytes, as: declared) {
            framed = true
            clear()
            return .frames
        }
        guard framed else { return .unwatched }
        if window.count + bytes.count > Self.windowBytes {
            let drop = min(window.count, window.count + bytes.count - Self.windowBytes)
            window.removeFirst(drop)
            searched = max(0, searched - drop)
        }
        window.append(contentsOf: bytes)
        let found = window.withUnsafeBufferPointer { SoundFrameHeader.foreignRun(in: $0, from: searched, declared: declared) }
        // A run whose frames end past the window's end waits for more bytes.
        searched = max(searched, window.count - 3 * 8192 - 8)
        return found.map { .otherCodec(offset: $0.offset, header: $0.header) } ?? .unexplained
    }

    mutating func clear() {
        window.removeAll(keepingCapacity: true)
        searched = 0
    }
}

/// Cuts a sound's bytes into frames by the headers they carry (`SoundFrameHeader`), each
/// frame with the codec its header states and a time: the samples counted from the last
/// chunk's time that moved the count (`time(of:)`). An E-AC-3 frame takes its dependent
/// substreams with it, as a decoder wants. Bytes that start no frame whose successor
/// confirms it are left out (counted).
struct SoundFramer {
    let timeBase: AVRational
    private var bytes: [UInt8] = []
    /// The stream offset of `bytes[0]`.
    private var base: Int64 = 0
    /// Where chunks with a time began (stream offsets), oldest first.
    private var anchors: [(offset: Int64, pts: Int64)] = []
    /// The latest time taken from a chunk, and the samples counted on from it.
    private var clock: (pts: Int64, samples: Int64, rate: Int)?
    /// Whether the last frame ended where the next begins: a header there is in step with
    /// the frames before it and needs no confirming.
    private var inStep = false
    /// Bytes that were no frame, and the runs of them (each a damaged stretch, counted as
    /// one corrupt packet: verification tells the source's damage from its own by it).
    private(set) var skippedBytes = 0
    private(set) var skippedRuns = 0
    private var skipping = false

    init(timeBase: AVRational) { self.timeBase = timeBase }

    /// What the framer holds: bytes not yet cut, and chunk times not yet used.
    var held: (bytes: Int, times: Int) { (bytes.count, anchors.count) }

    /// E-AC-3's limit of dependent substreams to an independent one (A/52 annex E).
    static let mostDependents = 8

    struct Cut {
        /// The frame's codec and format; nil for a packet as the container cut it (the
        /// declared codec's frames before any change).
        var header: SoundFrameHeader?
        var packet: Packet
    }

    mutating func append(_ chunk: UnsafeBufferPointer<UInt8>, pts: Int64) {
        if pts != noPTS { anchors.append((base + Int64(bytes.count), pts)) }
        bytes.append(contentsOf: chunk)
    }

    /// The frames complete so far; `flushing` at the stream's end, where a last frame has
    /// no successor to confirm it.
    mutating func frames(streamIndex: Int32, flushing: Bool) throws(KilnError) -> [Cut] {
        var found: [(header: SoundFrameHeader, range: Range<Int>)] = []
        var at = 0
        bytes.withUnsafeBufferPointer { b in
            func header(_ i: Int) -> SoundFrameHeader? { SoundFrameHeader(b, at: i) }
            scan: while at < b.count {
                guard b.count - at >= 8 || flushing else { break }
                guard let h = header(at), !h.dependent else {
                    skip(1)
                    at += 1
                    inStep = false
                    continue
                }
                var end = at + h.length
                // The frame, the next header (or the substreams that extend it) must be here.
                guard end + 8 <= b.count || (flushing && end <= b.count) else {
                    if flushing { skip(b.count - at); at = b.count }
                    break
                }
                // E-AC-3 allows 8 dependent substreams a frame: a run of more is not followed
                // (a stream of nothing else would hold every byte, waiting for its end).
                var dependents = 0
                while h.family == .dolby, dependents < Self.mostDependents, let d = header(end), d.dependent {
                    dependents += 1
                    guard end + d.length + 8 <= b.count || (flushing && end + d.length <= b.count) else {
                        if flushing { break }
                        break scan
                    }
                    end += d.length
                }
                let next = header(end)
                guard inStep || next?.family == h.family || (flushing && end == b.count) else {
                    skip(1)
                    at += 1
                    continue
                }
                let hasDependents = end - at > h.length
                let codec = hasDependents ? AV_CODEC_ID_EAC3 : h.codec
                found.append((SoundFrameHeader(codec: codec, length: end - at, samples: h.samples, sampleRate: h.sampleRate,
                                               channels: h.channels, dependent: false), at..<end))
                inStep = true
                skipping = false
                at = end
            }
        }
        var cuts: [Cut] = []
        for (h, range) in found {
            let packet = try Packet()
            try check(av_new_packet(packet.pointer, Int32(range.count)), .demux, "cannot hold a packet", as: .resourceLimit)
            bytes.withUnsafeBufferPointer { packet.pointer.pointee.data.update(from: $0.baseAddress! + range.lowerBound, count: range.count) }
            let pts = time(of: base + Int64(range.lowerBound), h)
            let p = packet.pointer
            (p.pointee.pts, p.pointee.dts) = (pts, pts)
            p.pointee.duration = rescale(Int64(h.samples), from: AVRational(num: 1, den: Int32(h.sampleRate)), to: timeBase)
            p.pointee.flags = AV_PKT_FLAG_KEY
            p.pointee.stream_index = streamIndex
            cuts.append(Cut(header: h, packet: packet))
        }
        bytes.removeFirst(at)
        base += Int64(at)
        // Of the times of chunks that began in bytes left behind, only the latest can still
        // be the next frame's (a stream of bytes that are no frames would hold them all).
        if let keep = anchors.lastIndex(where: { $0.offset < base }), keep > 0 { anchors.removeFirst(keep) }
        return cuts
    }

    private mutating func skip(_ count: Int) {
        skippedBytes += count
        if !skipping { skippedRuns += 1 }
        skipping = true
    }

    /// The time of the frame at `offset`: the count from the latest chunk's time, unless a
    /// chunk that began since the last frame did (a PES's time is that of the first frame
    /// that begins in it) says otherwise by more than the chunks' uncertainty: the chunks a
    /// demuxer's parser of another codec cut carry the time of the PES they began in.
    private mutating func time(of offset: Int64, _ h: SoundFrameHeader) -> Int64 {
        var chunk: Int64?
        while let a = anchors.first, a.offset <= offset {
            chunk = a.pts
            anchors.removeFirst()
        }
        let rate = AVRational(num: 1, den: Int32(h.sampleRate))
        var counted: Int64?
        if let c = clock {
            counted = c.pts + rescale(c.samples, from: AVRational(num: 1, den: Int32(c.rate)), to: timeBase)
            if c.rate != h.sampleRate, let counted { clock = (counted, 0, h.sampleRate) }
        }
        let tolerance = max(rescale(3 * Int64(h.samples), from: rate, to: timeBase),
                            rescale(1, from: AVRational(num: 1, den: 10), to: timeBase))
        if let chunk, counted.map({ abs(chunk - $0) > tolerance }) ?? true {
            clock = (chunk, 0, h.sampleRate)
        }
        guard var c = clock else { return noPTS }
        let pts = c.pts + rescale(c.samples, from: AVRational(num: 1, den: Int32(c.rate)), to: timeBase)
        c.samples += Int64(h.samples)
        clock = c
        return pts
    }
}

/// The sound of one stream as frames a decoder takes: the container's packets while they
/// are frames of the declared codec, then, from the first frames of another codec, the
/// stream's bytes cut by their own headers (`SoundFramer`). Packets that are neither wait,
/// a few at most (`holdPackets`), to see whether another codec begins in them; damage goes
/// on to the declared codec's decoder, which conceals it.
struct SoundCodecFollower {
    private var unexplained: UnexplainedSound
    private var framer: SoundFramer?
    private var held: [Packet] = []
    private let streamIndex: Int32
    private let timeBase: AVRational
    /// Unexplained packets held at most.
    static let holdPackets = 16

    /// Nil where the stream's codec cannot change so: a container that cuts sound by its
    /// own index (MP4, Matroska), or a codec whose headers state no length.
    /// - Parameter laneIndex: the index the frames cut take (a followed stream's packets
    ///   take the plan's stream's, `StreamSuccession`).
    init?(stream: UnsafeMutablePointer<AVStream>, laneIndex: Int32, parsedByDemuxer: Bool) {
        guard parsedByDemuxer, let u = UnexplainedSound(codec: stream.pointee.codecpar.pointee.codec_id) else { return nil }
        unexplained = u
        streamIndex = laneIndex
        timeBase = stream.pointee.time_base
    }

    /// Damaged stretches the framer left out (`SoundFramer.skippedRuns`).
    var skippedRuns: Int { framer?.skippedRuns ?? 0 }

    mutating func take(_ packet: Packet) throws(KilnError) -> [SoundFramer.Cut] {
        let p = packet.pointer.pointee
        let bytes = UnsafeBufferPointer(start: p.data, count: p.data == nil ? 0 : Int(p.size))
        if framer != nil {
            framer!.append(bytes, pts: packet.time)
            return try framer!.frames(streamIndex: streamIndex, flushing: false)
        }
        let verdict = unexplained.observe(bytes)
        switch verdict {
        case .frames:
            let cut = SoundFramer.Cut(header: nil, packet: packet)
            guard !held.isEmpty else { return [cut] }
            defer { held.removeAll() }
            return held.map { SoundFramer.Cut(header: nil, packet: $0) } + [cut]
        case .unwatched:
            return [SoundFramer.Cut(header: nil, packet: packet)]
        case .unexplained, .otherCodec:
            let copy = try Packet()
            try check(av_packet_ref(copy.pointer, packet.pointer), .decode, "cannot hold a packet", as: .resourceLimit)
            held.append(copy)
        }
        if case .otherCodec(let offset, _) = verdict { return try change(at: offset) }
        guard held.count > Self.holdPackets else { return [] }
        // Damage, most likely: the oldest goes on to the decoder.
        return [SoundFramer.Cut(header: nil, packet: held.removeFirst())]
    }

    /// The held packets' bytes from `offset` of the window on go to a framer, which takes
    /// every byte after them.
    private mutating func change(at offset: Int) throws(KilnError) -> [SoundFramer.Cut] {
        var framer = SoundFramer(timeBase: timeBase)
        // The window holds the held packets' bytes, the latest last (older ones it let go).
        var skip = offset + held.reduce(0) { $0 + Int($1.pointer.pointee.size) } - unexplained.window.count
        var released: [SoundFramer.Cut] = []
        for packet in held {
            let p = packet.pointer.pointee
            let size = Int(p.size)
            if skip >= size {
                // Before the new codec's first frame: the old one's last bytes.
                released.append(SoundFramer.Cut(header: nil, packet: packet))
                skip -= size
                continue
            }
            framer.append(UnsafeBufferPointer(start: p.data + max(0, skip), count: size - max(0, skip)), pts: packet.time)
            skip = 0
        }
        held.removeAll()
        unexplained.clear()
        self.framer = framer
        return released + (try self.framer!.frames(streamIndex: streamIndex, flushing: false))
    }

    /// What is left at the stream's end.
    mutating func finish() throws(KilnError) -> [SoundFramer.Cut] {
        if framer != nil { return try framer!.frames(streamIndex: streamIndex, flushing: true) }
        defer { held.removeAll() }
        return held.map { SoundFramer.Cut(header: nil, packet: $0) }
    }

    /// A decoder for frames `header` describes (the stream's own parameters name another
    /// codec).
    static func decoder(for header: SoundFrameHeader, timeBase: AVRational, streamIndex: Int) throws(KilnError) -> Decoder {
        var owned = avcodec_parameters_alloc()
        defer { avcodec_parameters_free(&owned) }
        guard let par = owned else { throw KilnError(.resourceLimit, stage: .decode, "out of memory for a decoder") }
        par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        par.pointee.codec_id = header.codec
        par.pointee.sample_rate = Int32(header.sampleRate)
        if header.channels > 0 { ChannelLayouts.assumed(Int32(header.channels), into: &par.pointee.ch_layout) }
        return try Decoder(parameters: UnsafePointer(par), timeBase: timeBase, frameRate: AVRational(num: 0, den: 1), streamIndex: streamIndex, threads: 1)
    }
}
