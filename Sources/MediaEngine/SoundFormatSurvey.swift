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
/// The survey reads each AC-3, E-AC-3 and ADTS AAC stream's frame headers at evenly spaced
/// bytes through the file (as `TimelineSurvey` reads times), in the containers whose
/// recordings are spliced (MPEG-TS and PS): a format the samples disagree on is said
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
    /// Packets of a stream a sample takes, all of one format: the first frame read after a
    /// jump into the file may be a damaged one (a reception error's header).
    static let agreeing = 2

    /// What a frame header says of the sound's format.
    struct Format: Hashable {
        var channels: Int
        var sampleRate: Int

        init?(_ codec: AVCodecID, _ bytes: UnsafeBufferPointer<UInt8>) {
            switch codec {
            case AV_CODEC_ID_AAC:
                guard let c = ADTSConfiguration(bytes), let channels = c.channels, let rate = c.sampleRate else { return nil }
                (self.channels, sampleRate) = (channels, rate)
            case AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3:
                guard let c = DolbyDigitalConfiguration(bytes) else { return nil }
                (channels, sampleRate) = (c.channels, c.sampleRate)
            default:
                return nil
            }
        }
    }

    /// Marks the streams whose samples disagree (`formatChanges`) and gives each its largest
    /// layout where that is more than the header's. Leaves the read position anywhere: the
    /// caller rewinds.
    static func survey(_ demuxer: Demuxer, size: Int64, streams: inout [StreamInfo]) {
        guard size > 0, demuxer.readsFromAnyByte, let packet = try? Packet() else { return }
        let surveyed: [Int32: AVCodecID] = Dictionary(uniqueKeysWithValues: streams.filter { $0.type == .audio }.compactMap { s in
            let codec = demuxer.stream(s.index).pointee.codecpar.pointee.codec_id
            return [AV_CODEC_ID_AAC, AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3].contains(codec) ? (Int32(s.index), codec) : nil
        })
        guard !surveyed.isEmpty else { return }
        var seen: [Int32: Set<Format>] = [:]
        for i in 0..<samples {
            let from = size * Int64(i) / Int64(samples)
            var runs: [Int32: (format: Format?, count: Int)] = [:]
            var settled = Set<Int32>()
            demuxer.read(fromByte: from, limit: samplePackets, into: packet) { packet in
                let p = packet.pointer.pointee
                if p.pos >= 0, p.pos - from > sampleBytes { return false }
                guard let codec = surveyed[p.stream_index], !settled.contains(p.stream_index), let data = p.data else { return true }
                let format = Format(codec, UnsafeBufferPointer(start: data, count: Int(p.size)))
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
            if most > streams[k].channels ?? 0 {
                streams[k].channels = most
                var layout = AVChannelLayout()
                ChannelLayouts.assumed(Int32(most), into: &layout)
                defer { av_channel_layout_uninit(&layout) }
                streams[k].channelLayout = Prober.name(of: &layout)
            }
        }
    }
}
