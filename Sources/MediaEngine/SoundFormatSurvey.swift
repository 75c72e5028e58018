import CFFmpeg
import KilnCore

/// Whether a recording's sound changes its channels or rate along the file, and the most
/// channels it carries.
///
/// Broadcast sound changes format between programmes: an ATSC or DVB recording of a film
/// usually starts in an advert's or the previous programme's stereo and goes on in the
/// film's 5.1. The probe reads the first seconds, so such a recording read as stereo: its
/// transcodes were stereo, and its remux copied the stereo start until the copy met the
/// change (`CopyLane`), was thrown away and made again with the sound re-encoded, in stereo.
/// The survey reads each AC-3, E-AC-3, ADTS AAC and MPEG audio stream's frame headers at
/// evenly spaced places through the file (`Places`), and in a multiplex whether the sound
/// goes on in another codec (`SoundCodecFollower`): a format the samples disagree on is said
/// (`StreamInfo.formatChanges`) and the stream is described by its largest layout, so the
/// plan encodes the sound once, at the channels the film has and the device takes. A
/// change between two samples is still met by the copy's own watch.
enum SoundFormatSurvey {
    /// Samples through the file, its start the first.
    static let samples = 16
    /// How far past a sample's byte a stream's frames are looked for, in bytes and in
    /// packets (the bound where a container gives packets no position).
    static let sampleBytes: Int64 = 4 << 20
    static let samplePackets = 4096
    /// The shortest Matroska file surveyed, in seconds.
    static let shortestMatroska: Double = 60
    /// Packets of a stream a sample takes, all of one format: the first frame read after a
    /// jump into the file may be a damaged one (a reception error's header).
    static let agreeing = 2

    /// What a frame header says of the sound's format, and the codec it is in (a sound
    /// that goes on in another codec on its PID: `SoundCodecFollower`).
    struct Format: Hashable {
        var channels: Int
        var sampleRate: Int
        var codec: UInt32

        init(channels: Int, sampleRate: Int, codec: UInt32) {
            (self.channels, self.sampleRate, self.codec) = (channels, sampleRate, codec)
        }

        init(_ other: SoundFrameHeader) {
            (channels, sampleRate, codec) = (other.channels, other.sampleRate, other.family == .dolby ? AV_CODEC_ID_AC3.rawValue : other.codec.rawValue)
        }

        /// The format of the frame `bytes` begin with, a frame of `codec`'s family (nil for
        /// no such frame, or one that does not say its channels: ADTS's configuration 0
        /// without a program config element in the frame).
        init?(_ codec: AVCodecID, _ bytes: UnsafeBufferPointer<UInt8>) {
            guard let family = SoundFrameHeader.family(of: codec), let h = SoundFrameHeader(bytes, at: 0), h.family == family,
                  h.channels > 0 else { return nil }
            self.init(h)
        }
    }

    /// Where the samples are read: at bytes in the containers whose recordings are spliced
    /// (MPEG-TS and PS, whose demuxers find the next packet from any byte, as
    /// `TimelineSurvey` reads them); at times in Matroska with an index (recordings remuxed
    /// by MKVToolNix or ffmpeg, TVHeadend's profile), where a byte is no place to read from
    /// and, without cues, a seek reads the file to build them. Nil elsewhere.
    ///
    /// Matroska holds films from discs far more often than recordings, and a disc's sound
    /// does not change: there only AC-3 and E-AC-3 that start in stereo or fewer channels
    /// are surveyed (a film's 5.1 after a recording's stereo start is what the survey is
    /// for; a disc's 5.1 pays nothing). Its AAC has no ADTS headers to read.
    enum Places {
        case bytes(Int64)
        /// The index entries the places' seeks land on, each once.
        case seconds([Double])

        init?(_ demuxer: Demuxer, size: Int64, start: Double, duration: Double) {
            if demuxer.hasDiscontinuousTimestamps {
                guard size > 0, demuxer.readsFromAnyByte else { return nil }
                self = .bytes(size)
            } else if demuxer.isMatroska {
                // A recording is minutes long; a clip's places would each read a keyframe
                // (a UHD one is a megabyte) for a sound the packet scan has mostly heard.
                guard duration >= shortestMatroska else { return nil }
                // Each place near an entry of its cues (a file without, however short,
                // is not surveyed: the reads could be the file's); places that land on one
                // entry (a short file, sparse cues) read once.
                let slack = max(10, duration / Double(samples))
                var landings: [Double] = []
                for i in 0..<samples {
                    let t = start + duration * Double(i) / Double(samples)
                    guard let entry = demuxer.indexEntry(atOrBefore: t), t - entry <= slack else { return nil }
                    if landings.last != entry { landings.append(entry) }
                }
                self = .seconds(landings)
            } else {
                return nil
            }
        }

        var count: Int {
            switch self {
            case .bytes: return samples
            case .seconds(let landings): return landings.count
            }
        }

        /// Reads from the `i`-th place.
        func read(_ i: Int, _ demuxer: Demuxer, into packet: Packet, _ body: (Packet) -> Bool) {
            switch self {
            case .bytes(let size):
                let from = size * Int64(i) / Int64(samples)
                demuxer.read(fromByte: from, limit: samplePackets, into: packet) { packet in
                    let p = packet.pointer.pointee
                    return (p.pos < 0 || p.pos - from <= sampleBytes) && body(packet)
                }
            case .seconds(let landings):
                var first: Int64?
                demuxer.read(fromSecond: landings[i], limit: samplePackets, into: packet) { packet in
                    let p = packet.pointer.pointee
                    if p.pos >= 0, first == nil { first = p.pos }
                    return (p.pos < 0 || p.pos - (first ?? p.pos) <= sampleBytes) && body(packet)
                }
            }
        }

        /// Whether a stream's frames at these places can say its format: ADTS and LATM AAC
        /// and MPEG audio only in MPEG-TS and PS (elsewhere AAC is raw), and in Matroska only
        /// a sound that starts in stereo or less.
        func surveys(_ codec: AVCodecID, startingWith channels: Int?) -> Bool {
            switch self {
            case .bytes: return SoundFrameHeader.family(of: codec) != nil || codec == AV_CODEC_ID_AAC_LATM
            case .seconds: return [AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3].contains(codec) && (channels ?? 0) <= 2
            }
        }
    }

    /// Marks the streams whose samples disagree (`formatChanges`) and gives each its largest
    /// layout and rate where they are more than the header's. Returns whether it read: the read
    /// position is then anywhere, and the caller rewinds.
    static func survey(_ demuxer: Demuxer, size: Int64, start: Double, duration: Double, streams: inout [StreamInfo]) -> Bool {
        guard let places = Places(demuxer, size: size, start: start, duration: duration) else { return false }
        let surveyed: [Int32: AVCodecID] = Dictionary(uniqueKeysWithValues: streams.filter { $0.type == .audio }.compactMap { s in
            let codec = demuxer.stream(s.index).pointee.codecpar.pointee.codec_id
            return places.surveys(codec, startingWith: s.channels) ? (Int32(s.index), codec) : nil
        })
        guard !surveyed.isEmpty, let packet = try? Packet() else { return false }
        var seen: [Int32: Set<Format>] = [:]
        let multiplex = demuxer.isMultiplex
        for i in 0..<places.count {
            var runs: [Int32: (format: Format?, count: Int)] = [:]
            var settled = Set<Int32>()
            var unexplained: [Int32: UnexplainedSound] = [:]
            // LATM states its configuration now and then: a frame's is the last one stated.
            var latm: [Int32: LATMFrames] = [:]
            places.read(i, demuxer, into: packet) { packet in
                let p = packet.pointer.pointee
                guard let codec = surveyed[p.stream_index], !settled.contains(p.stream_index), let data = p.data else { return true }
                let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
                if multiplex, var watch = unexplained[p.stream_index] ?? UnexplainedSound(codec: codec, watchesFromStart: true) {
                    let verdict = watch.observe(bytes)
                    unexplained[p.stream_index] = watch
                    switch verdict {
                    case .frames: break
                    case .otherCodec(_, let header):
                        // Another codec's frames, three end to end, are agreement enough.
                        seen[p.stream_index, default: []].insert(Format(header))
                        settled.insert(p.stream_index)
                        return settled.count < surveyed.count
                    case .unwatched, .unexplained:
                        // The declared codec's parser cut these bytes anywhere: no header.
                        return true
                    }
                }
                var format = Format(codec, bytes)
                if codec == AV_CODEC_ID_AAC_LATM {
                    var frames = latm[p.stream_index] ?? LATMFrames()
                    if case .frame(_, let config) = frames.unwrap(bytes) {
                        format = Format(channels: config.channels, sampleRate: config.sampleRate, codec: codec.rawValue)
                    }
                    latm[p.stream_index] = frames
                }
                let run = runs[p.stream_index]
                let count = format != nil && run?.format == format ? (run?.count ?? 0) + 1 : 1
                runs[p.stream_index] = (format, count)
                if let format, count >= agreeing {
                    seen[p.stream_index, default: []].insert(format)
                    settled.insert(p.stream_index)
                }
                return settled.count < surveyed.count
            }
        }
        for k in streams.indices {
            guard let formats = seen[Int32(streams[k].index)], formats.count > 1,
                  let most = formats.map(\.channels).max() else { continue }
            streams[k].formatChanges = true
            // The largest rate too: the encoder's is the stream's, and a stream described by
            // its first seconds' 22.05 kHz was encoded at it, the film's 48 kHz resampled down.
            if let rate = formats.map(\.sampleRate).max(), rate > streams[k].sampleRate ?? 0 { streams[k].sampleRate = rate }
            if most > streams[k].channels ?? 0 {
                streams[k].channels = most
                var layout = AVChannelLayout()
                ChannelLayouts.assumed(Int32(most), into: &layout)
                defer { av_channel_layout_uninit(&layout) }
                streams[k].channelLayout = Prober.name(of: &layout)
            }
        }
        return true
    }
}
