#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// The probe's bounded read of a source's first packets: what the headers do not say.
extension Prober {
    /// Reads the first packets of the main video stream (a bounded number) to learn what
    /// the headers do not say reliably: the real frame rate and whether it varies (MKV's
    /// default durations and r_frame_rate are often wrong), and Dolby Vision signalled
    /// only in the bitstream (HEVC RPU NAL units, type 62, and an enhancement layer, type
    /// 63, with no dvcC/dvvC record), whose profile is inferred from the base layer;
    /// and what every stream's first packets tell (`FirstPackets`), in files without
    /// video too.
    /// Returns each stream's share of the bytes read (`FirstPackets.shares`).
    /// `video`: the picture stream to read (an index into `streams`; nil: the first).
    static func scanPackets(_ demuxer: Demuxer, _ streams: inout [StreamInfo], _ warnings: inout [String],
                            video chosen: Int? = nil) throws(KilnError) -> FirstPackets.Read {
        guard let vi = chosen ?? streams.firstIndex(where: { $0.type == .video && !$0.disposition.attachedPicture }) else {
            // No pictures (a radio recording, an album): only what the sound streams' first
            // packets tell, read until each has told it.
            var first = FirstPackets()
            guard !first.settled(streams) || !first.measured(streams) else { return FirstPackets.Read() }
            let packet = try Packet()
            defer { _ = try? demuxer.rewind() }
            var reads = 0
            while !first.settled(streams) || !first.measured(streams), reads < scanPacketLimit * 4 {
                reads += 1
                guard try demuxer.read(into: packet) else { first.readToEnd = true; break }
                defer { packet.unref() }
                first.observe(packet, demuxer, &streams)
            }
            first.measureBitRates(&streams)
            return first.result(streams)
        }
        let target = Int32(streams[vi].index)
        let st = demuxer.stream(Int(target))
        let scanDV = streams[vi].codec == "hevc" && streams[vi].dolbyVision == nil
        let lengthSize = NALScanner.lengthSize(st)
        let packet = try Packet()
        // The stream's packets' presentation and decode times, in the order read, since its
        // decode times last jumped (a splice); and the longest run before that. Two
        // timelines sorted together (DVD cells put back to back, the second timed from 2 s)
        // made 25 fps read 50, variable.
        var pts: [Int64] = [], dts: [Int64] = []
        var longest: (pts: [Int64], dts: [Int64]) = ([], [])
        var rpu = false, el = false, reads = 0, scanned = 0, decodeTimesOnly = 0
        // Packets with both times, and how many of those have the same two, rising: decode
        // times given as presentation times too (ffmpeg's MXF muxer writes H.264's so);
        // and whether the pictures' order counts say they are shown out of decode order
        // (read while every packet so far has its two times the same).
        var timedTwice = 0, sameTimes = 0, lastSame = Int64.min, sameRising = true
        let delay = Int(st.pointee.codecpar.pointee.video_delay)
        let orders = delay > 0 ? HeaderParser(stream: st, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC]) : nil
        var lastOrder: Int32?, reordered = false
        var first = FirstPackets()
        defer { first.measureBitRates(&streams) }
        // Closed captions in the pictures (`ClosedCaptions`): looked for until some text is
        // found. Their bytes alone are not enough: stations send padding all along, through
        // programmes no one captioned, and a track of nothing would only disappoint.
        let codecID = st.pointee.codecpar.pointee.codec_id
        var captions = [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC, AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_MPEG1VIDEO].contains(codecID)
            ? CaptionSurvey() : nil
        let captionsIn = { (p: AVPacket) -> [UInt8] in
            guard let data = p.data else { return [] }
            return ClosedCaptions.triplets(in: UnsafeBufferPointer(start: data, count: Int(p.size)), codec: codecID, lengthSize: lengthSize)
        }
        // Elementary streams (raw H.264, HEVC, MPEG video) carry no times at all.
        let untimed = Prober.elementaryStreamFormats.contains(demuxer.formatName)
        // Field order is only in the bitstream for many H.264 and MPEG-2 files. libavcodec's
        // parser reads it from the first keyframe's headers (slice header and picture
        // timing, picture coding extension) in microseconds; where it cannot say, the
        // keyframe is decoded (one thread, drained at once rather than after the reorder
        // delay's worth of pictures) and the picture asked.
        var fieldParser: HeaderParser? = nil
        var fieldDecoder: Decoder? = nil
        // DV's is always its bitstream's: a MOV's `fiel` box (ffmpeg's muxer writes one)
        // said progressive for PAL DV, which the decoder flags interlaced.
        let containerUnsure = streams[vi].fieldOrder == nil || streams[vi].fieldOrder == .unknown || streams[vi].codec == "dvvideo"
        // An H.264 stream in a container that says progressive is asked the bitstream's word
        // too (the parser gives it for nothing): field-coded H.264 (MBAFF, PAFF) in a Matroska
        // file flagged progressive (ffmpeg's muxer writes the flag of the pictures it was
        // given) went as it was to devices whose decoders take no field-coded H.264. The
        // bitstream wins only where it says interlaced. Not MPEG-2: every decoder of it
        // decodes field-coded pictures, and encoders mark progressive film so (`+ildct`,
        // progressive_frame 0), which the container's word then rightly overrules.
        let containerProgressive = streams[vi].fieldOrder == .progressive && streams[vi].codec == "h264"
        if containerUnsure || containerProgressive, Prober.interlaceCapableCodecs.contains(streams[vi].codec) {
            fieldParser = HeaderParser(stream: st, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_MPEG1VIDEO])
            if fieldParser == nil && containerUnsure { fieldDecoder = try? Decoder(stream: st, threads: 1, sharedPicture: true) }
        }
        // No seek first: the packets find_stream_info read are still buffered and come
        // back first (unless `H264Analysis` already went back to the start). Afterwards
        // the demuxer is rewound for the pipeline.
        defer { _ = try? demuxer.rewind() }
        // Counted in the stream's packets, timed or not: AVI's have no presentation times,
        // and waiting for them read the whole file.
        let pictureStreams = Set(streams.filter { $0.type == .video && !$0.disposition.attachedPicture }.map { Int32($0.index) })
        var picturePackets: [Int32: Int] = [:]
        while scanned < scanPacketLimit, reads < scanPacketLimit * 32 {
            reads += 1
            guard try demuxer.read(into: packet) else { first.readToEnd = true; break }
            defer { packet.unref() }
            first.observe(packet, demuxer, &streams)
            if pictureStreams.contains(packet.streamIndex) { picturePackets[packet.streamIndex, default: 0] += 1 }
            guard packet.streamIndex == target else { continue }
            let p = packet.pointer.pointee
            scanned += 1
            if p.dts != noPTS, let last = dts.last,
               SpliceTimeline.isJump(rescale(p.dts - last, from: st.pointee.time_base, to: kiln_time_base_q())) {
                if dts.count > longest.dts.count { longest = (pts, dts) }
                (pts, dts) = ([], [])
            }
            if p.dts != noPTS { dts.append(p.dts) }
            if p.pts != noPTS { pts.append(p.pts) } else if p.dts != noPTS || untimed { decodeTimesOnly += 1 }
            if p.pts != noPTS, p.dts != noPTS {
                timedTwice += 1
                if p.pts == p.dts {
                    sameTimes += 1
                    if p.dts <= lastSame { sameRising = false }
                    lastSame = p.dts
                }
            }
            if let orders, !reordered, sameTimes == timedTwice, sameRising, let order = orders.pictureOrder(packet) {
                // A keyframe may restart the count (an IDR picture).
                if !orders.keyFrame, let last = lastOrder, order < last { reordered = true }
                lastOrder = order
            }
            if let parser = fieldParser, p.flags & AV_PKT_FLAG_KEY != 0 {
                parser.parse(packet)
                if let order = parser.fieldOrder {
                    if containerUnsure || order.isInterlaced { streams[vi].fieldOrder = order }
                } else if containerUnsure {
                    fieldDecoder = try? Decoder(stream: st, threads: 1, sharedPicture: true)
                }
                fieldParser = nil
            }
            if let decoder = fieldDecoder, p.flags & AV_PKT_FLAG_KEY != 0 {
                var order: FieldOrder? = nil
                let look = { (frame: Frame) throws(KilnError) in
                    guard order == nil else { return }
                    let f = frame.pointer.pointee
                    order = f.interlaced_frame == 0 ? .progressive : (f.top_field_first != 0 ? .tt : .bb)
                }
                try? decoder.decode(packet, look)
                try? decoder.decode(nil, look)
                if let order { streams[vi].fieldOrder = order }
                fieldDecoder = nil
            }
            if captions?.complete == false { captions?.read(captionsIn(p), at: p.pts != noPTS ? p.pts : nil) }
            if scanDV, let data = p.data {
                let types = NALScanner.nalTypes(UnsafeBufferPointer(start: data, count: Int(p.size)), lengthSize: lengthSize)
                if types.contains(62) { rpu = true }
                if types.contains(63) { el = true }
            }
        }
        // No packet of this stream in all that was read, where another picture stream has
        // them: an ASF file of several bitrates (Windows Media's multiple bitrate encoding)
        // holds the one it recorded, the others are declared and empty. Those are marked
        // (`StreamInfo.packetless`, which the planner passes over) and the one with packets
        // read instead: the plan had chosen the first, and the run failed "no readable
        // packets" on a file ffmpeg plays.
        // (On evidence enough: the whole file read, or a second of the other's pictures.)
        if scanned == 0, chosen == nil,
           let best = picturePackets.filter({ $0.value > 0 }).max(by: { ($0.value, -$0.key) < ($1.value, -$1.key) }),
           first.readToEnd || best.value >= 24, let bi = streams.firstIndex(where: { $0.index == Int(best.key) }) {
            for i in streams.indices where pictureStreams.contains(Int32(streams[i].index)) && picturePackets[Int32(streams[i].index)] == nil {
                streams[i].packetless = true
            }
            try demuxer.rewind()
            return try scanPackets(demuxer, &streams, &warnings, video: bi)
        }
        // Caption padding and no text yet (a programme that opens on music): the pictures
        // are read on for the first caption, and nothing else, up to `captionScanLimit`.
        // (Only for a first caption: a second service found late is not worth reading on for.)
        captions?.finish()
        if let survey = captions, survey.found.isEmpty, survey.padding {
            var more = 0
            while more < Prober.captionScanLimit, reads < Prober.captionScanLimit * 32 {
                reads += 1
                guard try demuxer.read(into: packet) else { break }
                defer { packet.unref() }
                guard packet.streamIndex == target else { continue }
                more += 1
                let p = packet.pointer.pointee
                captions?.read(captionsIn(p), at: p.pts != noPTS ? p.pts : nil)
                if captions?.found.isEmpty == false { break }
            }
            captions?.finish()
        }
        if let found = captions?.found, !found.isEmpty {
            streams[vi].closedCaptions = true
            streams[vi].captionServices = found
        }
        // Reordered pictures (B-frames) with decode times only: a copy would show them in
        // decode order on players that take the container's times (Apple's).
        // Reordered pictures with no times at all (a recorder that cleared every video PES's
        // time flags): each was placed one frame after the last, in decode order, and a copy
        // showed the B-frames out of order. Like an elementary stream's, their times are
        // their order counts'. (Where only some go untimed, the timed ones place them:
        // `CopyLane.placeByOrder`.)
        let timeless = scanned >= 8 && pts.isEmpty && dts.isEmpty && longest.dts.isEmpty
        if decodeTimesOnly > 0 || timeless, delay > 0 { streams[vi].presentationTimesMissing = true }
        // Pictures shown out of decode order (their order counts say so) are each shown after
        // their decode time: where every picture's two times are the same and rise in decode
        // order, they are decode times (a stream's own presentation times given as both
        // would go back at each B-frame). Copied, such a file played its pictures in decode
        // order; re-encoded, the pictures took the times of the packets that pushed them out
        // of the decoder, and two fell on taken times and were lost. Only where the order
        // counts give the times back (`PictureOrderTimes`, H.264 and HEVC); a stream whose
        // headers allow reordering but whose pictures come in order (a phone's encoder
        // without B-frames) has its times right, and goes as it is.
        if reordered, timedTwice >= max(8, 2 * (delay + 1)), sameTimes == timedTwice, sameRising {
            streams[vi].presentationTimesMissing = true
        }
        // Where some pictures have no presentation time (MPEG-4 Part 2 in AVI gives its
        // B-frames one), the rest's are no frame clock: the decode times are.
        if longest.dts.count > dts.count { (pts, dts) = longest }
        if let (fps, variable) = frameRate(pts: decodeTimesOnly > 0 ? dts : pts, timeBase: st.pointee.time_base) {
            streams[vi].frameRate = reportedRate(fps)
            streams[vi].variableFrameRate = variable
        }
        let questions = FieldSurvey.questions(for: streams[vi])
        if questions.any {
            let found = FieldSurvey.survey(demuxer, stream: Int(target), asking: questions)
            streams[vi].telecined = found.telecined
            streams[vi].progressiveFrames = found.progressiveFrames
        }
        // Pictures whose times stand still (every PES of a recording given one PTS): a copy
        // put 250 pictures in 43 ms and a 10 s film went out as a still, exit 0.
        var read = first.result(streams)
        read.onePicture = scanned == 1 && first.readToEnd
        if read.clockDamage == nil, let still = picturesStandStill(decodeTimesOnly > 0 ? dts : pts, st.pointee.time_base) {
            read.clockDamage = (Int(target), still)
        }
        guard rpu else { return read }
        let base = streams[vi].hdr ?? .sdr
        let profile: Int, compat: Int
        if el { profile = 7; compat = 6 }
        else {
            switch base {
            case .hdr10: profile = 8; compat = 1
            case .hlg: profile = 8; compat = 4
            default:
                // No PQ/HLG signalling on the base layer: the IPTPQc2 colour of profile 5
                // (or an SDR-compatible 8.2 with BT.709 tags).
                if streams[vi].colorPrimaries == "bt709" { profile = 8; compat = 2 } else { profile = 5; compat = 0 }
            }
        }
        streams[vi].dolbyVision = DolbyVision(profile: profile, level: 0, rpuPresent: true, elPresent: el, blPresent: true,
                                              blCompatibilityId: compat, signalledIn: "bitstream")
        streams[vi].hdr = .dolbyVision
        warnings.append("dolby_vision_inferred_from_bitstream")
        return read
    }

    /// Why pictures timed `times` (a scan's, at least 32) cannot be timed so: most of them
    /// share their time with another (fewer than a quarter of the times differ); nil where
    /// they can. (A clip at 1,000 fps in Matroska's milliseconds has a time for each.)
    static func picturesStandStill(_ times: [Int64], _ timeBase: AVRational) -> String? {
        guard times.count >= 32, case let distinct = Set(times).count, distinct * 4 < times.count,
              let low = times.min(), let high = times.max(), let span = seconds(high - low, timeBase) else { return nil }
        return "its pictures' times stand still: \(times.count) pictures at \(distinct == 1 ? "one time" : "\(distinct) times") within \(Format.fixed(span, decimals: 3)) s"
    }

    static let scanPacketLimit = 240
    /// How many more pictures the scan reads for a first caption where it met only their
    /// padding: half a minute at 30 frames a second.
    static let captionScanLimit = 900

    /// What a stream's first packets tell the probe beyond libavformat's analysis: that they
    /// are encrypted; an audio stream's format where it was found without one (MPEG-TS: its
    /// packets begin past the analysis), as its first frame decodes; and MPEG-1 audio's
    /// layer (`mpegAudioLayer`).
    struct FirstPackets {
        private var tries: [Int: Int] = [:]
        private var layerRead: Set<Int> = []
        private var modeRead: Set<Int> = []
        static let formatTries = 16
        /// A sound stream's packets read: their bytes and the time they span (seconds).
        private struct Heard {
            var bytes = 0, packets = 0
            var first: Double, end: Double
            /// The packets timed as the one before them, and the time all packets say they
            /// last: a sound whose times stand still (at 0) spans that, not its times' span.
            var still = 0, lasting = 0.0, latest: Double
            var span: Double { still * 2 > packets ? lasting : end - first }
            /// The time the packets since the last timed one say they last (laced Matroska
            /// frames and Ogg pages time one packet of several), and each gap between two
            /// timed packets over that: the sound's clock against its samples.
            var pending = 0.0, lastTimed = Double.nan
            var paces: [Double] = []
            /// Enough to measure a bitrate by: at least two seconds.
            var enough: Bool { packets >= 20 && span >= 2 }
        }
        private var read: [Int: Heard] = [:]
        /// Every stream's bytes among the packets read, by position in the streams.
        private var carried: [Int: Int] = [:]
        /// The scan read the file to its end: what it heard of a stream is all of it, so a
        /// clip shorter than `Heard.enough` is measured too (AAC in a 1 s Matroska clip was
        /// re-encoded for want of a bitrate).
        var readToEnd = false

        mutating func observe(_ packet: Packet, _ demuxer: Demuxer, _ streams: inout [StreamInfo]) {
            guard let i = streams.firstIndex(where: { $0.index == Int(packet.streamIndex) }) else { return }
            carried[i, default: 0] += max(0, Int(packet.pointer.pointee.size))
            if packet.isEncrypted { streams[i].encrypted = true }
            if streams[i].codec == "ttml" { return observeTTML(packet, i, &streams[i]) }
            guard streams[i].type == .audio else { return }
            let st = demuxer.stream(Int(packet.streamIndex))
            let p = packet.pointer.pointee
            let lasts = max(0, seconds(p.duration, st.pointee.time_base) ?? 0)
            // A frame's length where the container's time base is too coarse to hold it
            // (a damaged TimestampScale's quarter-second ticks made every duration 0).
            let par = st.pointee.codecpar.pointee
            let frame = lasts > 0 ? lasts : par.frame_size > 0 && par.sample_rate > 0 ? Double(par.frame_size) / Double(par.sample_rate) : 0
            if packet.time == noPTS {
                read[i]?.pending += frame
            } else if let t = seconds(packet.time, st.pointee.time_base) {
                var heard = read[i] ?? Heard(first: t, end: t + lasts, latest: .nan)
                if heard.pending > 0, t > heard.lastTimed, heard.paces.count < Self.paceSamples {
                    heard.paces.append((t - heard.lastTimed) / heard.pending)
                }
                (heard.lastTimed, heard.pending) = (t, frame)
                heard.bytes += Int(p.size)
                heard.packets += 1
                heard.first = min(heard.first, t)
                heard.end = max(heard.end, t + lasts)
                if t == heard.latest { heard.still += 1 }
                heard.latest = t
                heard.lasting += lasts
                read[i] = heard
            }
            if streams[i].sampleRate == nil, tries[i, default: 0] < Self.formatTries {
                tries[i, default: 0] += 1
                if let learnt = CodecParameters.audioFormat(of: st, from: packet) {
                    Prober.describeFormat(learnt.pointer.pointee, into: &streams[i])
                }
            }
            if streams[i].codec == "mp3", !layerRead.contains(i) {
                layerRead.insert(i)
                if let codec = Prober.mpegAudioLayer(packet) { streams[i].codec = codec }
            }
            // The first frame with a header says whether it is two mono programmes.
            if !modeRead.contains(i), let data = p.data,
               let h = SoundFrameHeader(UnsafeBufferPointer(start: data, count: Int(p.size)), at: 0), let dualMono = h.dualMono {
                modeRead.insert(i)
                if dualMono { streams[i].dualMono = true }
            }
        }

        /// A TTML track's first documents: one of pictures and no text (IMSC's image profile)
        /// makes the track a picture subtitle, which the planner leaves out as it does
        /// PGS; it would have become an empty text track. Read until one shows something,
        /// `formatTries` at most (a track may open with empty documents).
        private mutating func observeTTML(_ packet: Packet, _ i: Int, _ stream: inout StreamInfo) {
            let p = packet.pointer.pointee
            guard let data = p.data, p.size > 0, tries[i, default: 0] < Self.formatTries else { return }
            tries[i, default: 0] += 1
            switch TTMLCues.shown(Array(UnsafeBufferPointer(start: data, count: Int(p.size)))) {
            case .text: tries[i] = Self.formatTries
            case .images:
                stream.textSubtitle = false
                tries[i] = Self.formatTries
            case .nothing: break
            }
        }

        static let paceSamples = 256

        /// A sound stream whose times run several times faster or slower than its frames
        /// last, between most of the packets read (the median: a gap in a broadcast's sound
        /// is a few of them): a Matroska TimestampScale damaged stretched a 2 s film's times
        /// 256 times, and it went out 8.6 minutes long, exit 0, its pictures and sound
        /// crawling together. Frames' lengths come from the codec (1,024 samples of AAC at
        /// its rate), or a container's own durations; a frame length read twice or half
        /// (HE-AAC's core rate) is not damage.
        func soundClockDamage(_ streams: [StreamInfo]) -> (stream: Int, why: String)? {
            for (i, heard) in read.sorted(by: { $0.key < $1.key }) where heard.paces.count >= 8 {
                let median = heard.paces.sorted()[heard.paces.count / 2]
                guard median > Self.paceLimit || median < 1 / Self.paceLimit else { continue }
                let pace = Format.times(median) + (median > 1 ? " as long as" : " shorter than")
                return (streams[i].index, "stream \(streams[i].index): its sound's times run \(pace) its frames last (a timescale damaged)")
            }
            return nil
        }
        static let paceLimit = 3.5

        /// A bitrate for each sound stream whose container and headers give none (Matroska
        /// and MPEG-TS carry no bitrate for AAC, Opus or Vorbis, whose frames vary), from
        /// the packets the scan read: at least two seconds of them. Without one the planner
        /// cannot tell whether the sound fits a rung, and re-encodes it.
        func measureBitRates(_ streams: inout [StreamInfo]) {
            for (i, r) in read where streams[i].bitRate == nil && (r.enough || readToEnd && r.packets >= 2 && r.span > 0) {
                streams[i].bitRate = Int((Double(r.bytes) * 8 / r.span).rounded())
            }
        }

        /// What the scan measured beyond each stream's own description.
        struct Read {
            /// Each stream's share of the bytes read, by stream index.
            var shares: [Int: Double] = [:]
            /// A stream timed at a pace its packets deny: sound (`soundClockDamage`), or
            /// pictures whose times stand still (`picturesStandStill`).
            var clockDamage: (stream: Int, why: String)?
            /// The file's pictures are one (the main picture stream's only packet, the file
            /// read to its end): a still picture in a video container (an icon, a GIF of
            /// one frame, an MP4 of one picture).
            var onePicture = false
        }
        func result(_ streams: [StreamInfo]) -> Read {
            Read(shares: shares(streams), clockDamage: soundClockDamage(streams))
        }

        /// Each stream's share of the bytes read, by stream index: read from one place in the
        /// file, a multiplex's channels' shares of its rate (`StreamInfo.multiplexBitRate`).
        func shares(_ streams: [StreamInfo]) -> [Int: Double] {
            let total = carried.values.reduce(0, +)
            guard total > 0 else { return [:] }
            return Dictionary(uniqueKeysWithValues: carried.map { (streams[$0.key].index, Double($0.value) / Double(total)) })
        }

        /// Whether every sound stream without a bitrate has had enough packets read to
        /// measure one (a file of sound only is read on for them, within the scan's cap).
        func measured(_ streams: [StreamInfo]) -> Bool {
            streams.indices.allSatisfy { i in streams[i].type != .audio || streams[i].bitRate != nil || read[i]?.enough == true }
        }

        /// Whether every sound stream has told what it can.
        func settled(_ streams: [StreamInfo]) -> Bool {
            streams.indices.allSatisfy { i in
                if streams[i].codec == "ttml" { return tries[i, default: 0] >= Self.formatTries }
                return streams[i].type != .audio
                    || ((streams[i].sampleRate != nil || tries[i, default: 0] >= Self.formatTries)
                        && (streams[i].codec != "mp3" || layerRead.contains(i)))
            }
        }
    }
}
