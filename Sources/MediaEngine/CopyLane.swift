import CFFmpeg
import KilnCore

/// Copies a stream's packets into the MP4 unchanged: the remux path for video, and for
/// audio the device can take as it is (subtitles go through `SubtitleLane`).
final class CopyLane: Lane {
    let inputIndex: Int32
    private(set) var outputIndex: Int32 = -1
    private let input: UnsafeMutablePointer<AVStream>
    let isVideo: Bool
    private var sawKeyframe = false
    /// The latest decode time copied, where that packet ends, and whether packets are being
    /// left out until the stream's time passes it again (`timesRunBack`).
    private var latestDTS = noPTS
    private var latestEnd = noPTS
    private var catchingUp = false
    /// The latest sound packet's decode time as the source gave it (`timesRunBack`).
    private var sourceDTS = noPTS
    /// Leading packets left out because no keyframe came before them, and the source time
    /// (stream time base, shifted) of the first packet kept.
    private(set) var skippedBeforeKeyframe = 0
    private(set) var firstKeptTime: Int64?
    private var counters = LaneStats()
    var stats: LaneStats {
        var s = counters
        s.repairedTimestamps += (pictureOrder?.repaired ?? 0) + timesFromOrder
        return s
    }
    /// Leading packets that came without a DTS (reordered H.264/HEVC from MKV: the
    /// demuxer only knows DTS once it has seen `video_delay` frames), held until the first
    /// packet that has one.
    private var pending: [Packet] = []
    private var sawDTS = false
    static let maxPending = 32

    /// Decodes the keyframes verification will check while the copy runs (video only).
    private let witness: KeyframeWitness?

    /// The source file, read again only to complete a sample entry (`ParameterSets`).
    private let path: String

    /// An audio stream's channels and sample rate as the probe learnt them from its first
    /// frame, where its parameters do not say (MPEG-TS: a stream whose packets begin past
    /// libavformat's analysis, `Prober.describeFormat`).
    private let probedFormat: (channels: Int32, sampleRate: Int32)?

    /// Why the copy stopped, when the source's format changed mid-stream (`Preparer` then
    /// re-encodes this stream).
    private(set) var formatChange: String?
    /// AAC in ADTS frames (MPEG-TS, .aac): each frame's configuration. The MP4 sample entry
    /// takes the first for the whole track; a new one counts once it holds for 8 frames in
    /// a row (about a sixth of a second): one header hit by a reception error is one
    /// damaged frame (as in the source), not a change.
    private var adts = ChangeWatch<ADTSConfiguration>(confirmations: 8)
    /// AC-3 and E-AC-3 frames' configuration, watched as ADTS's is (`DolbyDigitalConfiguration`).
    private var dolbyDigital = ChangeWatch<DolbyDigitalConfiguration>(confirmations: 8)
    /// MPEG audio frames' rate and channels, watched as ADTS's are: MP3 files joined with
    /// `cat` may change rate at a join (a chapter at 22,050 Hz among ones at 32,000), and
    /// copied under the first's sample entry their times ran back.
    private var mpegAudio = ChangeWatch<MPEGAudioFormat>(confirmations: 8)
    /// FLAC frames' rate, channels and sample size, watched as ADTS's are: chained Ogg FLAC
    /// links may change them at a join (48 kHz after 44.1), which an MP4 track's one
    /// STREAMINFO (`dfLa`) cannot say.
    private var flac = ChangeWatch<FLACFrameFormat>(confirmations: 8)
    /// A multiplex's sound that goes on in another codec on its PID (`UnexplainedSound`).
    private var codecWatch: UnexplainedSound?
    /// AAC in LATM framing, taken out of it frame by frame (`LATMFrames`), and its
    /// configuration, watched as ADTS's is (set up by `prepare`).
    private var latm: LATMFrames?
    private var latmConfiguration = ChangeWatch<LATMFrames.Configuration>(confirmations: 3)
    /// The output's stream, whose parameters (not the source's, where the copy changes the
    /// framing) a frame of silence is made for.
    private var output: UnsafeMutablePointer<AVStream>?
    /// H.264/HEVC keyframes' headers, when a change of picture size must stop the copy
    /// (the plan has an encode to fall back on). A size counts once two keyframes in a row
    /// have it, or one keyframe and the `sizedPictures` after it, or the last keyframe has
    /// it to the end. Freed by `finish`.
    private var sizeWatch: HeaderParser?
    private var pictureSize = ChangeWatch<PictureSize>(confirmations: 2)
    /// Pictures since the keyframe of a new size (`pictureSize.candidate`).
    private var picturesInNewSize = 0
    /// A keyframe's GOP of this many pictures in a new size is a change: HLS renditions
    /// switched for one 2 s segment (one keyframe at 480x270 between two at 640x360) went
    /// out under the first size's sample entry.
    static let sizedPictures = 12
    /// Dolby Vision profile 7 in one track (UHD Blu-ray remuxes): the length size of its
    /// NAL units, whose enhancement layer and RPUs are left out (`DolbyVisionLayers`);
    /// nil for any other stream.
    private let dolbyVisionLayers: Int?
    /// Presentation times from the pictures' order, for H.264 or HEVC whose container gives
    /// reordered pictures decode times only (AVI, bare streams); nil for any other stream.
    private let pictureOrder: PictureOrderTimes?
    /// The headers of reordered H.264 or HEVC from MPEG program and transport streams, which time
    /// PES packets, not pictures: a picture without a time gets the one its order count
    /// stands for (`OrderTimeLine`). nil for any other stream; freed by `finish`.
    private var untimedPictures: HeaderParser?
    private var orderTimeLine = OrderTimeLine()
    /// Pictures given a time that way.
    private var timesFromOrder = 0
    /// Whether a picture came without a time: the stream times PES packets that begin
    /// several pictures, and a timed picture may have a neighbour's time.
    private var sawUntimed = false
    /// The last DTS written, in the input's time base.
    private var lastDTS = noPTS
    /// Copied sound from a container whose clock is coarser than its samples, timed in its
    /// samples (`SampleTimes`); nil for pictures and for sound already timed so.
    private var sampleTimes: SampleTimes?
    /// H.264 (true) or HEVC (false) in Annex B form, whose packets are checked for a
    /// picture of that codec (`AnnexB.holdsPicture`); nil for any other stream. MPEG-TS
    /// and PS name a stream's codec once, in their programme map: pictures that go on in
    /// another codec on the same PID stay, for libavformat, the first codec's, and a copy
    /// wrote them into its track (exit 0, and no player could show the rest).
    private let annexBCodec: Bool?
    /// H.264 or HEVC (length-prefixed, `h264` saying which) from an MP4 or QuickTime file
    /// that marks every sample a keyframe (no sync sample table, as the ffmpeg command
    /// writes for a source whose packets it was given all flagged so), though its pictures
    /// are not all random access points: each packet is flagged by its picture units'
    /// types instead (IDR; HEVC's IRAP). Flagged as the file says, the copy's index
    /// said the same, a player seeking into it started on a P-picture, and verification,
    /// seeking the output's last second to one, decoded nothing and refused the file.
    private let keyframesFromPictures: (lengthSize: Int, h264: Bool)?
    /// Packets in a row without such a picture, and the time of the first of them.
    private var withoutPicture = 0
    private var withoutPictureFrom = noPTS
    /// Two seconds at 24 fps: damage that costs one picture or a few is the decoder's to
    /// conceal; this many in a row is not the stream the track says it is.
    static let picturelessRun = 48
    /// Copied sound: a gap before the packet being copied (where it begins and its length,
    /// in the stream's time base), noted by `timesRunBack` for `closeGap`.
    private var gap: (from: Int64, ticks: Int64)?
    /// The frame that fills gaps (`SilentFrame`), made at the first one; `.some(nil)` once
    /// none can be made.
    private var silence: SilentFrame??
    /// Whether the latest packet said how long it lasts: only then is a later start a gap
    /// (a packet of unknown length may hold several frames).
    private var latestEndKnown = false
    /// A frame's length (stream time base) where a packet is one frame whose stated length
    /// may be stretched over a gap: AAC, AC-3, E-AC-3 and MP3 samples in MP4/MOV, whose
    /// sample table gives the frame before a gap the gap's length too (no gap was seen);
    /// 0 elsewhere.
    private let sampleFrameTicks: Int64
    /// The source's length in seconds (nil when the probe could not say): a gap past it is
    /// damage (a flipped bit put one frame hours on), not filled, as an encode has it.
    private let sourceSeconds: Double?
    /// A gap that no frame of the codec can fill stops the copy from this long on, and the
    /// sound is re-encoded (which fills it): ExoPlayer's audio sink jumps its clock past
    /// 0.2 s of "timestamp discontinuity", dropping the pictures meanwhile.
    static let unfillableGap = 0.2
    /// How far a copied stream's decode time may step back (in `kiln_time_base`) before it
    /// counts as its time running back (`timesRunBack`).
    static let soundStepBack = TimelineOutliers.jump / 10
    static let picturesStepBack = TimelineOutliers.jump / 2

    /// - Parameter watchPictureSize: stop (with `formatChange`) when the picture's size
    ///   changes mid-stream, which one MP4 sample entry cannot describe.
    /// - Parameter derivePresentationTimes: the source gives the video's reordered
    ///   pictures decode times only (`StreamInfo.presentationTimesMissing`).
    init(demuxer: Demuxer, index: Int, witness: KeyframeWitness? = nil, watchPictureSize: Bool = false,
         derivePresentationTimes: Bool = false, probed: StreamInfo? = nil, sourceSeconds: Double? = nil) {
        inputIndex = Int32(index)
        self.sourceSeconds = sourceSeconds
        probedFormat = probed.flatMap { s in s.channels.flatMap { c in s.sampleRate.map { (Int32(c), Int32($0)) } } }
        input = demuxer.stream(index)
        path = demuxer.path
        isVideo = input.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
        let par = input.pointee.codecpar.pointee
        let format = demuxer.formatName
        let oneFrameSamples = format.hasPrefix("mov")
            && [AV_CODEC_ID_AAC, AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3, AV_CODEC_ID_MP3].contains(par.codec_id)
        sampleFrameTicks = !isVideo && oneFrameSamples && par.frame_size > 0 && par.sample_rate > 0
            ? rescale(Int64(par.frame_size), from: AVRational(num: 1, den: par.sample_rate), to: input.pointee.time_base) : 0
        self.witness = isVideo ? witness : nil
        sizeWatch = isVideo && watchPictureSize ? HeaderParser(stream: input, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC]) : nil
        let lengthSize = NALScanner.lengthSize(input)
        dolbyVisionLayers = isVideo && kiln_stream_dovi(input)?.pointee.dv_profile == 7 && lengthSize > 0 ? lengthSize : nil
        pictureOrder = isVideo && derivePresentationTimes ? PictureOrderTimes(stream: input, format: format) : nil
        let codec = input.pointee.codecpar.pointee.codec_id
        annexBCodec = isVideo && lengthSize == 0 && (codec == AV_CODEC_ID_H264 || codec == AV_CODEC_ID_HEVC) ? codec == AV_CODEC_ID_H264 : nil
        keyframesFromPictures = isVideo && lengthSize > 0 && (codec == AV_CODEC_ID_H264 || codec == AV_CODEC_ID_HEVC)
            && format.hasPrefix("mov") && Self.everySampleSync(input)
            ? (lengthSize, codec == AV_CODEC_ID_H264) : nil
        codecWatch = !isVideo && demuxer.isMultiplex ? UnexplainedSound(codec: codec) : nil
        let timesPackets = ["mpeg", "mpegts"].contains(format)
        untimedPictures = isVideo && pictureOrder == nil && timesPackets && input.pointee.codecpar.pointee.video_delay > 0
            ? HeaderParser(stream: input, codecs: [AV_CODEC_ID_H264, AV_CODEC_ID_HEVC]) : nil
    }

    /// Whether copying the stream into MP4 looks at no more of a packet than its first few
    /// kilobytes (`IndexForecast.skimKeepBytes`), so that a reader that skims the rest gives
    /// the same copy. Audio whose frames are shorter than that: AAC (its ADTS header is
    /// checked here), AC-3, E-AC-3 (the MP4 muxer parses each frame's header), Opus; not
    /// lossless audio, whose frames run to tens of kB, nor MP3, which demuxers parse again.
    /// Video only as H.264 or HEVC in length-prefixed form: libavformat's H.264 parser
    /// stops at the first slice header, HEVC has none, and the MP4 muxer writes both as
    /// they are. Not Annex B (rewritten
    /// unit by unit into length prefixes), not Dolby Vision profile 7 (its layers are taken
    /// out of every packet), not a picture size watch (HEVC's parser splits the whole
    /// packet), and no other codec (the muxer rewrites AV1 and VP9, parsers scan MPEG video).
    var readsOnlyPacketHeads: Bool {
        let codec = input.pointee.codecpar.pointee.codec_id
        guard isVideo else { return Self.shortFrames.contains(codec) }
        return (codec == AV_CODEC_ID_H264 || codec == AV_CODEC_ID_HEVC) && NALScanner.lengthSize(input) > 0
            && dolbyVisionLayers == nil && sizeWatch == nil
    }

    private static let shortFrames: Set<AVCodecID> = [AV_CODEC_ID_AAC, AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3, AV_CODEC_ID_OPUS]

    /// Where the copy starts in seconds from the output's start, when leading packets were
    /// left out for want of a keyframe (nil otherwise).
    var startsLate: (packets: Int, seconds: Double)? {
        guard skippedBeforeKeyframe > 0, let t = firstKeptTime, let s = seconds(t, input.pointee.time_base) else { return nil }
        return (skippedBeforeKeyframe, s)
    }

    var ffmpegEquivalent: [String] {
        let tag = input.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_HEVC ? ["-tag:\(outputIndex)", "hvc1"] : []
        let layers = dolbyVisionLayers != nil ? ["-bsf:\(outputIndex)", "filter_units=remove_types=62|63"] : []
        return ["-map", "0:\(inputIndex)", "-c:\(outputIndex)", "copy"] + tag + layers
    }

    func prepare(muxer: Muxer) throws(KilnError) {
        // The MP4 muxer refuses such a stream at its header (EINVAL, which would read as a
        // failed write): it is the source's header that is damaged.
        let source = input.pointee.codecpar.pointee
        let unstated = !isVideo && source.codec_type == AVMEDIA_TYPE_AUDIO && (source.sample_rate <= 0 || source.ch_layout.nb_channels <= 0)
        if isVideo ? (source.width <= 0 || source.height <= 0) : (unstated && probedFormat == nil) {
            throw KilnError(.sourceCorrupt, stage: .mux, "the source's \(isVideo ? "video" : "audio") stream \(inputIndex) has no "
                            + (isVideo ? "picture size" : "sample rate or channel count") + " in its header: it cannot be copied (damaged)")
        }
        var latmFirst: LATMFrames.Configuration?
        if source.codec_id == AV_CODEC_ID_AAC_LATM {
            switch LATMFrames.first(stream: Int(inputIndex), path: path) {
            case .success(let config): latmFirst = config
            case .failure(let refusal):
                formatChange = "the source's AAC in LATM framing cannot be taken out of it (\(refusal.why))"
                throw KilnError(.sourceUnsupported, stage: .mux, "\(formatChange!): one MP4 track takes raw AAC")
            }
        }
        let out = try muxer.addStream()
        output = out
        outputIndex = out.pointee.index
        try check(avcodec_parameters_copy(out.pointee.codecpar, input.pointee.codecpar), .mux, "cannot copy stream parameters")
        let par = out.pointee.codecpar!
        if unstated, let probedFormat {
            par.pointee.sample_rate = probedFormat.sampleRate
            ChannelLayouts.assumed(probedFormat.channels, into: &par.pointee.ch_layout)
        }
        if let latmFirst {
            // The same AAC, raw, its configuration in the sample entry.
            par.pointee.codec_id = AV_CODEC_ID_AAC
            try setExtradata(par, latmFirst.audioSpecificConfig)
            if par.pointee.sample_rate <= 0 { par.pointee.sample_rate = Int32(latmFirst.sampleRate) }
            if par.pointee.ch_layout.nb_channels <= 0 { ChannelLayouts.assumed(Int32(latmFirst.channels), into: &par.pointee.ch_layout) }
            latm = LATMFrames(configuration: latmFirst)
            _ = latmConfiguration.observe(latmFirst, at: 0)
        }
        // The source container's tag means nothing in MP4; let the muxer choose, except
        // HEVC, which Apple players only accept as hvc1 (parameter sets in the sample entry).
        par.pointee.codec_tag = par.pointee.codec_id == AV_CODEC_ID_HEVC ? UInt32(kiln_fftag(0x68, 0x76, 0x63, 0x31)) : 0
        // Those tags (and avc1) promise the parameter sets in the sample entry.
        if isVideo, let record = ParameterSets.completedRecord(for: input, path: path) {
            try setExtradata(par, record)
        }
        out.pointee.time_base = input.pointee.time_base
        out.pointee.avg_frame_rate = input.pointee.avg_frame_rate
        // One aspect ratio for the stream and its codec parameters, the container's first
        // (Matroska's display size, MP4's pasp) as the ffmpeg command does: libavformat
        // refuses a header where the two disagree (EINVAL), and they disagree whenever a
        // container overrides what the bitstream says.
        let sar = input.pointee.sample_aspect_ratio.num > 0 && input.pointee.sample_aspect_ratio.den > 0
            ? input.pointee.sample_aspect_ratio : par.pointee.sample_aspect_ratio
        out.pointee.sample_aspect_ratio = sar
        par.pointee.sample_aspect_ratio = sar
        // Display matrix (rotation), Dolby Vision configuration, mastering display and
        // content light levels travel as stream side data.
        // Dolby Vision profile 7 (UHD Blu-ray: a base layer plus an enhancement layer in the
        // same stream) has no single-track carriage in MP4, and Apple's players, which read
        // the configuration record, take profiles 5 and 8 only. Without the record (and the
        // enhancement layer and RPUs, `DolbyVisionLayers`) the file is the HDR10 base layer
        // it is built on.
        let skip = kiln_stream_dovi(input)?.pointee.dv_profile == 7 ? Int32(AV_PKT_DATA_DOVI_CONF.rawValue) : -1
        try check(kiln_copy_stream_side_data(out, input, skip), .mux, "cannot copy stream side data")
        copyStreamMetadata(from: input, to: out)
        if !isVideo { sampleTimes = SampleTimes(from: input.pointee.time_base, sampleRate: par.pointee.sample_rate) }
    }

    /// Whether the stream's index (two samples or more) marks every sample a keyframe.
    private static func everySampleSync(_ st: UnsafeMutablePointer<AVStream>) -> Bool {
        let n = avformat_index_get_entries_count(st)
        guard n >= 2 else { return false }
        for k in 0..<n {
            guard let e = avformat_index_get_entry(st, k), e.pointee.flags & AVINDEX_KEYFRAME != 0 else { return false }
        }
        return true
    }

    /// The picture units that begin a random access point: H.264's IDR, HEVC's IRAP.
    private static let h264RandomAccess: Set<Int> = [5]
    private static let hevcRandomAccess = Set(16...23)

    /// Whether the packet's picture is a random access point (`keyframesFromPictures`).
    private static func startsRandomAccess(_ packet: Packet, lengthSize: Int, h264: Bool) -> Bool {
        guard let data = packet.pointer.pointee.data, packet.pointer.pointee.size > 0 else { return false }
        return !NALScanner.nalTypes(UnsafeBufferPointer(start: data, count: Int(packet.pointer.pointee.size)), lengthSize: lengthSize, h264: h264)
            .isDisjoint(with: h264 ? h264RandomAccess : hevcRandomAccess)
    }

    /// Packets after the first shown one that libavformat says are not shown
    /// (`AV_PKT_FLAG_DISCARD`: past an edit list's end, kept to the next keyframe so that
    /// the pictures shown before that end decode), held until a shown packet follows them,
    /// which may need them. At the stream's end nothing does, and they are left out: a MOV
    /// trimmed to its first 10 s by its edit list had been copied with 11.04 s of pictures,
    /// and refused as running past its length.
    private var notShown: [Packet] = []
    private var notShownBytes = 0
    private var copiedShown = false
    /// What is held so, at most (a stretch a damaged file marks so goes through as it is).
    static let notShownPackets = 1024, notShownBytesLimit = 64 << 20

    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        counters.packetsIn += 1
        // A copy decodes nothing, so the container's own word is what it can count: MPEG-TS
        // marks a packet assembled across a continuity-counter break or a transport error
        // (a reception dropout). It is copied as it is, as a player would get it, and the
        // stats say the source was damaged (they said 0 for a recording missing a packet in
        // sixty of its video, which decodes with errors).
        if packet.pointer.pointee.flags & AV_PKT_FLAG_CORRUPT != 0 { counters.corruptPackets += 1 }
        if copiedShown, packet.pointer.pointee.flags & AV_PKT_FLAG_DISCARD != 0,
           notShown.count < Self.notShownPackets, notShownBytes < Self.notShownBytesLimit {
            let held = try Packet()
            held.take(packet)
            notShownBytes += Int(held.pointer.pointee.size)
            notShown.append(held)
            return
        }
        if packet.pointer.pointee.flags & AV_PKT_FLAG_DISCARD == 0 { copiedShown = true }
        let before = notShown
        notShown = []
        notShownBytes = 0
        for held in before { try copy(held, muxer: muxer) }
        try copy(packet, muxer: muxer)
    }

    private func copy(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        if latm != nil, try !unwrapLATM(packet) { return }
        if let k = keyframesFromPictures {
            let p = packet.pointer
            p.pointee.flags = Self.startsRandomAccess(packet, lengthSize: k.lengthSize, h264: k.h264)
                ? p.pointee.flags | AV_PKT_FLAG_KEY : p.pointee.flags & ~AV_PKT_FLAG_KEY
        }
        // A copied video must start on a keyframe: leading frames that reference
        // pictures before the cut would decode as garbage.
        if isVideo && !sawKeyframe {
            guard packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 else {
                skippedBeforeKeyframe += 1
                return
            }
            sawKeyframe = true
            firstKeptTime = packet.time == noPTS ? nil : packet.time
        }
        if !isVideo, SoundFrameHeader.family(of: input.pointee.codecpar.pointee.codec_id) == .mpeg, !trimToFrame(packet) {
            // Nothing of a frame in it: left out, counted (the gap it leaves is closed as any).
            counters.corruptPackets += 1
            return
        }
        if !isVideo, !wholeFrame(packet) {
            counters.corruptPackets += 1
            return
        }
        if try timesRunBack(packet) { return }
        if let gap {
            self.gap = nil
            try closeGap(gap, muxer: muxer)
        }
        if let lengthSize = dolbyVisionLayers { try DolbyVisionLayers.strip(packet, lengthSize: lengthSize) }
        if let sizeWatch {
            if packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 {
                picturesInNewSize = 0
                try checkPictureSize(packet, sizeWatch)
            } else if pictureSize.candidate != nil {
                picturesInNewSize += 1
                if picturesInNewSize >= Self.sizedPictures { try stopForNewSize() }
            }
        }
        if !isVideo { try checkSoundFormat(packet) }
        if isVideo, input.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_AV1 { try checkOBUs(packet) }
        if let annexBCodec { try checkHoldsPicture(packet, h264: annexBCodec) }
        if let untimedPictures { placeByOrder(packet, untimedPictures) }
        if let pictureOrder {
            // The witness matches keyframes by presentation time: offered once it is known.
            for ready in try pictureOrder.add(packet) { try emit(ready, muxer: muxer) }
            return
        }
        try offerKeyframe(packet)
        if isVideo && !sawDTS {
            // (A packet with no time at all, from an elementary stream, is not one of those:
            // the muxer places it one duration after the last.)
            if packet.pointer.pointee.dts == noPTS && packet.pointer.pointee.pts != noPTS && pending.count < CopyLane.maxPending {
                let held = try Packet()
                try check(av_packet_ref(held.pointer, packet.pointer), .mux, "cannot hold a packet", as: .resourceLimit)
                pending.append(held)
                return
            }
            sawDTS = true
            try flushPending(before: packet.pointer.pointee.dts, nextPTS: packet.pointer.pointee.pts, muxer: muxer)
        }
        try emit(packet, muxer: muxer)
    }

    /// Whether a sound packet holds its frame whole: an AC-3, E-AC-3, MPEG audio or ADTS
    /// frame no shorter than its header says, a FLAC frame whose CRC-16 (over the whole
    /// frame, its own at the end) holds. A file cut inside its last frame (a copy or download
    /// that stopped; an AVI's last AC-3 frame 741 bytes of 768) had that frame copied, and
    /// the output failed to decode at its end ("incomplete frame", "invalid residual"), with
    /// nothing counted. Such a frame is left out, counted.
    private func wholeFrame(_ packet: Packet) -> Bool {
        let p = packet.pointer.pointee
        guard let data = p.data, p.size > 0 else { return true }
        let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
        let codec = input.pointee.codecpar.pointee.codec_id
        if codec == AV_CODEC_ID_FLAC {
            // A frame begins with its sync code (0xFFF8 or 0xFFF9); anything else is not judged.
            guard bytes.count >= 4, FLACFrameHeader.beginsFrame(bytes) else { return true }
            return av_crc(av_crc_get_table(AV_CRC_16_ANSI), 0, data, Int(p.size)) == 0
        }
        guard SoundFrameHeader.family(of: codec) != nil, let header = SoundFrameHeader(bytes, at: 0) else { return true }
        return header.length <= bytes.count
    }

    /// An MPEG audio packet that begins with bytes of no frame: libavformat's MP3 parser
    /// glues what lies between two frames to the next one, an ID3 tag in the middle of MP3
    /// files joined with `cat` (an audiobook's chapters), or a stretch of zeros where a file
    /// was damaged. Copied so, each decodes as "Header missing" and its frame is lost. The
    /// packet is cut to the frame it ends with (a header whose length reaches its end);
    /// false where there is none. A tag is no damage; anything else is counted. A packet
    /// that begins with a frame is left as it is.
    private func trimToFrame(_ packet: Packet) -> Bool {
        let p = packet.pointer
        guard let data = p.pointee.data, p.pointee.size >= 7 else { return false }
        let size = Int(p.pointee.size), bytes = UnsafeBufferPointer(start: data, count: size)
        if SoundFrameHeader(bytes, at: 0)?.family == .mpeg { return true }
        for k in 1...(size - 7) {
            guard bytes[k] == 0xFF, let h = SoundFrameHeader(bytes, at: k), h.family == .mpeg, h.length == size - k else { continue }
            if !(bytes[0] == 0x49 && bytes[1] == 0x44 && bytes[2] == 0x33) { counters.corruptPackets += 1 }  // "ID3"
            p.pointee.data = data + k
            p.pointee.size = Int32(size - k)
            return true
        }
        return false
    }

    /// The sound or pictures go on in another stream (`StreamSuccession`). Its packets are
    /// copied on into the same track when they are of the same codec (AAC's configuration
    /// and H.264/HEVC picture sizes are then watched as ever; AC-3 and E-AC-3 frames describe
    /// themselves); another codec, or another rate, channel count or picture size where the
    /// stream's header says, is a format change: the copy stops and the stream is re-encoded
    /// from the source.
    func follow(_ stream: UnsafeMutablePointer<AVStream>, muxer: Muxer) throws(KilnError) {
        let from = input.pointee.codecpar.pointee, to = stream.pointee.codecpar.pointee
        func differ(_ a: Int32, _ b: Int32) -> Bool { a > 0 && b > 0 && a != b }
        let differs = to.codec_id != from.codec_id || differ(to.sample_rate, from.sample_rate)
            || differ(to.ch_layout.nb_channels, from.ch_layout.nb_channels)
            || differ(to.width, from.width) || differ(to.height, from.height)
        guard differs else { return }
        func describe(_ par: AVCodecParameters, _ index: Int32) -> String {
            let name = string(avcodec_get_name(par.codec_id)) ?? (isVideo ? "video" : "audio")
            let n = par.ch_layout.nb_channels
            if isVideo { return "stream \(index) (\(name)" + (par.width > 0 ? ", \(par.width)x\(par.height))" : ")") }
            return "stream \(index) (\(name)" + (n > 0 ? ", \(n) channel\(n == 1 ? "" : "s"))" : ")")
        }
        let at = seconds(latestEnd, input.pointee.time_base).map { " at \(Format.fixed($0, decimals: 1)) s" } ?? ""
        formatChange = "the source's \(isVideo ? "pictures go" : "sound goes") on from \(describe(from, inputIndex)) in \(describe(to, stream.pointee.index))\(at)"
        throw KilnError(.sourceUnsupported, stage: .mux, "\(formatChange!): one MP4 track cannot carry both as they are")
    }

    /// Broadcast sound may change its channels or sample rate mid-stream (a 5.1 film after
    /// stereo adverts): each frame's header says so, but an MP4 track has one sample entry.
    /// AAC's frames after the change would not decode from the output (the entry configures
    /// the decoder); AC-3's and E-AC-3's would, but players set their output up from the
    /// entry (`dac3`, `dec3`). The copy stops there, and the sound is re-encoded at one
    /// format (the plan's fallback).
    private func checkSoundFormat(_ packet: Packet) throws(KilnError) {
        let p = packet.pointer.pointee
        guard let data = p.data else { return }
        let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
        if case .otherCodec(_, let header) = codecWatch?.observe(bytes) {
            let name = string(avcodec_get_name(header.codec)) ?? "another codec"
            let at = seconds(packet.time, input.pointee.time_base).map { " at about \(Format.fixed($0, decimals: 1)) s" } ?? ""
            formatChange = "the source's sound goes on in \(name) (\(header.channels) channels, \(header.sampleRate) Hz)\(at)"
            throw KilnError(.sourceUnsupported, stage: .mux, "\(formatChange!): one MP4 track carries one codec")
        }
        func watch<Config>(_ watch: inout ChangeWatch<Config>, _ config: Config?, what: String, why: String) throws(KilnError) {
            guard let config, watch.observe(config, at: seconds(packet.time, input.pointee.time_base) ?? 0) else { return }
            try stop(watch, what: what, why: why)
        }
        switch input.pointee.codecpar.pointee.codec_id {
        case AV_CODEC_ID_AAC:
            try watch(&adts, ADTSConfiguration(bytes), what: "AAC audio", why: "one MP4 track cannot carry both as they are")
        case AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3:
            let config = DolbyDigitalConfiguration(bytes)
            try watch(&dolbyDigital, config, what: config?.enhanced == true ? "E-AC-3 audio" : "AC-3 audio", why: "one MP4 track states one layout")
        case AV_CODEC_ID_MP1, AV_CODEC_ID_MP2, AV_CODEC_ID_MP3:
            let format = SoundFrameHeader(bytes, at: 0).flatMap { $0.family == .mpeg ? MPEGAudioFormat(rate: $0.sampleRate, channels: $0.channels) : nil }
            try watch(&mpegAudio, format, what: "MPEG audio", why: "one MP4 track states one rate and layout")
        case AV_CODEC_ID_FLAC:
            let par = input.pointee.codecpar.pointee
            let format = FLACFrameHeader(bytes, streamRate: Int(par.sample_rate), streamBits: Int(par.bits_per_raw_sample))?.format
            try watch(&flac, format, what: "FLAC audio", why: "one MP4 track states one rate and layout")
        default:
            break
        }
    }

    /// Puts the packet's LATM frame's raw AAC in its place. False where the frame is
    /// damaged: it is left out (counted as corrupt), and silence fills the gap. A new
    /// configuration stops the copy as a new ADTS one does.
    private func unwrapLATM(_ packet: Packet) throws(KilnError) -> Bool {
        let p = packet.pointer
        guard let data = p.pointee.data, var frames = latm else { return true }
        let unwrapped = frames.unwrap(UnsafeBufferPointer(start: data, count: Int(p.pointee.size)))
        latm = frames
        switch unwrapped {
        case .frame(let raw, let config):
            if latmConfiguration.observe(config, at: seconds(packet.time, input.pointee.time_base) ?? 0) {
                try stop(latmConfiguration, what: "AAC audio", why: "one MP4 track cannot carry both as they are")
            }
            try check(av_packet_make_writable(p), .mux, "cannot hold a packet", as: .resourceLimit)
            raw.withUnsafeBufferPointer { p.pointee.data.update(from: $0.baseAddress!, count: $0.count) }
            av_shrink_packet(p, Int32(raw.count))
            return true
        case .unsupported(let why):
            let at = seconds(packet.time, input.pointee.time_base).map { " at \(Format.fixed($0, decimals: 1)) s" } ?? ""
            formatChange = "the source's AAC in LATM framing goes on in a layout that cannot be taken out of it (\(why))\(at)"
            throw KilnError(.sourceUnsupported, stage: .mux, "\(formatChange!): one MP4 track takes raw AAC")
        case .unconfigured, .damaged:
            counters.corruptPackets += 1
            return false
        }
    }

    /// Whether `packet` is left out because the source's times ran back. The muxer needs
    /// rising decode times and gives a packet that goes back a tick after the last, so a
    /// stream whose time runs back (damaged Matroska, an AVI's broken index; MPEG-TS splices
    /// the pipeline has made continuous) came out with everything until the old time is
    /// passed again squeezed into a few milliseconds: a flash of pictures, a burst of
    /// noise. Sound frames stand alone: those are left out until one starts where the last
    /// copied one ends (counted as corrupt). Pictures depend on each other: the copy stops
    /// there, and the video is re-encoded from the source (the plan's fallback), whose
    /// lanes drop what is behind the time they have reached.
    ///
    /// How far back counts (`soundStepBack`, `picturesStepBack`): sound never steps back,
    /// but timestamps rounded to milliseconds and audio PES times jitter by a few; pictures
    /// may, by their reordering, where a container gives presentation times for decode
    /// times (the muxer's one tick on is right for those). A Matroska cluster written twice
    /// stepped back 0.96 s, under the second that counted before, and its second of
    /// pictures and sound came out squeezed into a millisecond.
    ///
    /// A sound packet timed as the one before it says nothing of where it goes: it follows
    /// on where that one ends (a Matroska or RealMedia file whose sound's times stand still
    /// at 0 came out with its seconds of sound squeezed into 27 ms, as the ffmpeg command's
    /// copy has them).
    private func timesRunBack(_ packet: Packet) throws(KilnError) -> Bool {
        let p = packet.pointer
        guard p.pointee.dts != noPTS else { return false }
        if !isVideo {
            let own = p.pointee.dts
            defer { sourceDTS = own }
            if own == sourceDTS, latestEndKnown, latestEnd > own {
                let shift = latestEnd - own
                p.pointee.dts = latestEnd
                if p.pointee.pts != noPTS { p.pointee.pts += shift }
                counters.repairedTimestamps += 1
            }
        }
        let dts = p.pointee.dts
        if latestDTS != noPTS, dts < latestEnd {
            let back = rescale(latestDTS - dts, from: input.pointee.time_base, to: kiln_time_base_q())
            if catchingUp || back > (isVideo ? Self.picturesStepBack : Self.soundStepBack) {
                if isVideo {
                    try stopForDamage("the source's video times run back \(Format.fixed(Double(back) / Double(kiln_time_base()), decimals: 2)) s",
                                      at: latestDTS)
                }
                catchingUp = true
                counters.corruptPackets += 1
                return true
            }
        }
        catchingUp = false
        if !isVideo, latestEndKnown, dts > latestEnd { gap = (latestEnd, dts - latestEnd) }
        if dts >= latestDTS {
            latestDTS = dts
            let duration = packet.pointer.pointee.duration
            latestEnd = dts + (sampleFrameTicks > 0 ? (duration > 0 ? min(duration, sampleFrameTicks) : sampleFrameTicks) : max(0, duration))
            latestEndKnown = duration > 0 || sampleFrameTicks > 0
        }
        return false
    }

    /// Fills a gap in copied sound with frames of silence of its own codec (`SilentFrame`),
    /// as many whole frames as fit, each at the time its samples put it; what is left of a
    /// frame stays the last one's length. A codec no such frame can stand in for stops the
    /// copy at a gap of `unfillableGap` or more: the plan's encode then fills it.
    private func closeGap(_ gap: (from: Int64, ticks: Int64), muxer: Muxer) throws(KilnError) {
        let timeBase = input.pointee.time_base
        let par = (output ?? input).pointee.codecpar.pointee
        guard let length = seconds(gap.ticks, timeBase), let at = seconds(gap.from, timeBase), par.sample_rate > 0 else { return }
        if let sourceSeconds, at + length > sourceSeconds + 1 { return }
        if silence == nil { silence = SilentFrame.make(for: par, adts: adts.first) }
        guard let frame = silence ?? nil else {
            guard length >= Self.unfillableGap else { return }
            formatChange = "the source's sound stops for \(Format.fixed(length, decimals: 2)) s at \(Format.fixed(at, decimals: 2)) s, "
                + "and no frame of its codec can fill the gap in a copy"
            throw KilnError(.sourceUnsupported, stage: .mux, formatChange!)
        }
        let rate = AVRational(num: 1, den: par.sample_rate)
        let count = rescale(gap.ticks, from: timeBase, to: rate) / Int64(frame.samples)
        guard count >= 1 else { return }
        for i in 0..<count {
            let start = gap.from + rescale(i * Int64(frame.samples), from: rate, to: timeBase)
            let end = i == count - 1 ? gap.from + gap.ticks : gap.from + rescale((i + 1) * Int64(frame.samples), from: rate, to: timeBase)
            let packet = try Packet()
            try check(av_new_packet(packet.pointer, Int32(frame.bytes.count)), .mux, "cannot hold a packet", as: .resourceLimit)
            frame.bytes.withUnsafeBufferPointer { packet.pointer.pointee.data.update(from: $0.baseAddress!, count: $0.count) }
            packet.pointer.pointee.pts = start
            packet.pointer.pointee.dts = start
            packet.pointer.pointee.duration = end - start
            packet.pointer.pointee.flags = AV_PKT_FLAG_KEY
            try emit(packet, muxer: muxer)
        }
        counters.gapsFilled += 1
    }

    /// The MP4 muxer writes a damaged AV1 packet (OBUs that do not parse) as a corrupt file
    /// without saying so (`kiln_av1_obus_walk`): the copy stops there, as for a damaged
    /// E-AC-3 frame the muxer refuses, and the video is re-encoded from the source (the
    /// plan's fallback), whose decoder conceals the damage.
    private func checkOBUs(_ packet: Packet) throws(KilnError) {
        let p = packet.pointer.pointee
        guard kiln_av1_obus_walk(p.data, p.size) == 0 else { return }
        try stopForDamage("the source's AV1 video is damaged", at: packet.time, "a packet's OBUs do not parse")
    }

    /// A run of `picturelessRun` packets none of which holds a picture of the stream's codec
    /// stops the copy, as other damage does: the plan's encode, where it has one, decodes
    /// what it can, and a stream that never comes back is refused there (`Decoder`).
    private func checkHoldsPicture(_ packet: Packet, h264: Bool) throws(KilnError) {
        let p = packet.pointer.pointee
        guard let data = p.data, p.size > 0 else { return }
        if AnnexB.holdsPicture(UnsafeBufferPointer(start: data, count: Int(p.size)), h264: h264) {
            withoutPicture = 0
            return
        }
        if withoutPicture == 0 { withoutPictureFrom = packet.time }
        withoutPicture += 1
        if withoutPicture >= Self.picturelessRun {
            try stopForDamage("the source's \(h264 ? "H.264" : "HEVC") video holds no picture of its codec", at: withoutPictureFrom,
                              "\(Format.count(withoutPicture, "packet")) in a row (damage, or pictures that go on in another codec)")
        }
    }

    /// Stops the copy at damage the MP4 muxer would not take or would write wrongly, as the
    /// muxer's own refusals do (`Preparer.refusedCopy`): `formatChange` says what and where
    /// (`time` in the stream's time base), and the stream is re-encoded from the source.
    private func stopForDamage(_ what: String, at time: Int64, _ detail: String? = nil) throws(KilnError) -> Never {
        let at = seconds(time, input.pointee.time_base).map { " at \(Format.fixed($0, decimals: 2)) s" } ?? ""
        let description = what + at + (detail.map { ": " + $0 } ?? "")
        formatChange = description
        throw KilnError(.sourceCorrupt, stage: .mux, underlying: kiln_averror_invaliddata(), description)
    }

    /// A broadcast recording may switch from SD to HD (or 4:3 to 16:9) mid-stream: the new
    /// sequence parameter sets travel in band, but an `avc1`/`hvc1` sample entry describes
    /// one size, and players that read only it show the rest wrongly or not at all.
    private func checkPictureSize(_ packet: Packet, _ parser: HeaderParser) throws(KilnError) {
        parser.parse(packet)
        guard let size = parser.size else { return }
        if pictureSize.observe(size, at: seconds(packet.time, input.pointee.time_base) ?? 0) {
            try stopForNewSize()
        }
    }

    private func stopForNewSize() throws(KilnError) {
        try stop(pictureSize, what: "picture", why: "one MP4 sample entry cannot describe both")
    }

    /// Stops the copy at the change `watch` saw (`formatChange` says what changed, when).
    private func stop<Value>(_ watch: ChangeWatch<Value>, what: String, why: String) throws(KilnError) {
        guard let first = watch.first, let change = watch.candidate else { return }
        formatChange = "the source's \(what) changes from \(first) to \(change.value) at \(Format.fixed(change.at, decimals: 1)) s"
        throw KilnError(.sourceUnsupported, stage: .mux, "\(formatChange!): \(why)")
    }

    /// Gives a picture without a presentation time the one its order count stands for
    /// (`OrderTimeLine`), and a decode time one frame after the last when it has none and
    /// that is not after its presentation. Pictures with times only teach the time line.
    private func placeByOrder(_ packet: Packet, _ headers: HeaderParser) {
        let order = headers.pictureOrder(packet)
        // An IDR picture restarts the order count. The parser says so from the first slice
        // header (as it does for an H.264 recovery point or an HEVC CRA, where starting again
        // only costs the pictures already seen), where finding an IDR slice would scan the
        // whole packet.
        if headers.keyFrame { orderTimeLine.note(order: nil, idr: true, pts: noPTS) }
        let p = packet.pointer
        if p.pointee.pts == noPTS { sawUntimed = true }
        let given = p.pointee.pts
        if let order, let t = given == noPTS ? orderTimeLine.time(for: order)
            : sawUntimed ? orderTimeLine.corrected(order: order, pts: given) : nil {
            p.pointee.pts = t
            timesFromOrder += 1
            // One frame after the last decode time, if that is not after its presentation.
            // An untimed picture keeps a decode time it has; a corrected one's is its PES
            // packet's, as wrong as the presentation time, and at least must not follow it.
            let next = lastDTS == noPTS ? nil : lastDTS + frameStep([])
            if let next, next <= t, given != noPTS || p.pointee.dts == noPTS {
                p.pointee.dts = next
            } else if given != noPTS {
                p.pointee.dts = min(p.pointee.dts, t)
            }
        }
        orderTimeLine.note(order: order, idr: false, pts: p.pointee.pts)
    }

    private func offerKeyframe(_ packet: Packet) throws(KilnError) {
        if let witness, packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 { try witness.offer(packet) }
    }

    private func emit(_ packet: Packet, muxer: Muxer) throws(KilnError) {
        if pictureOrder != nil { try offerKeyframe(packet) }
        packet.streamIndex = outputIndex
        if packet.pointer.pointee.dts != noPTS { lastDTS = packet.pointer.pointee.dts }
        var timeBase = input.pointee.time_base
        if sampleTimes != nil, let par = output?.pointee.codecpar {
            timeBase = sampleTimes!.place(packet.pointer, frameSamples: av_get_audio_frame_duration2(par, packet.pointer.pointee.size))
        }
        try muxer.write(packet, from: timeBase)
        counters.packetsOut += 1
    }

    /// Gives the held packets the DTS the demuxer could not: one frame apart, ending one
    /// frame before `next` (the first known DTS), never after their own PTS — what the
    /// ffmpeg command synthesizes for the same files.
    private func flushPending(before next: Int64, nextPTS: Int64 = noPTS, muxer: Muxer) throws(KilnError) {
        guard !pending.isEmpty else { return }
        let sortedPTS = (pending.map(\.pointer.pointee.pts) + [nextPTS]).filter { $0 != noPTS }.sorted()
        let step = frameStep(sortedPTS)
        let end = next != noPTS ? next : (sortedPTS.last ?? 0) + step
        for (i, p) in pending.enumerated() {
            var dts = end - Int64(pending.count - i) * step
            if p.pointer.pointee.pts != noPTS { dts = min(dts, p.pointer.pointee.pts) }
            p.pointer.pointee.dts = dts
            try emit(p, muxer: muxer)
        }
        pending.removeAll()
    }

    /// One frame's duration in the stream's time base: the smallest step between the
    /// held frames' PTS (MKV's declared rates are often bogus), else the frame rate.
    private func frameStep(_ sortedPTS: [Int64]) -> Int64 {
        if let step = zip(sortedPTS.dropFirst(), sortedPTS).map({ $0 - $1 }).filter({ $0 > 0 }).min() { return step }
        let rate = input.pointee.avg_frame_rate.num > 0 ? input.pointee.avg_frame_rate : input.pointee.r_frame_rate
        guard rate.num > 0, rate.den > 0 else { return 1 }
        return max(1, rescale(1, from: AVRational(num: rate.den, den: rate.num), to: input.pointee.time_base))
    }

    func finish(muxer: Muxer) throws(KilnError) {
        // The lane lives on through verification: the parsers' tables (~320 kB for HEVC)
        // need not, at the run's peak of memory.
        defer { sizeWatch = nil; untimedPictures = nil }
        notShown = []
        // Not one keyframe in the whole stream (a damaged recording whose only IDR was hit,
        // a broadcast that marks none): the copy had nothing to start on, and an MP4 track
        // without samples is no track at all. The plan's encode decodes what it can.
        if isVideo && !sawKeyframe && counters.packetsIn > 0 {
            formatChange = "the source's video has no keyframe in its \(counters.packetsIn) packets"
            throw KilnError(.sourceCorrupt, stage: .mux, "\(formatChange!): a copy has no picture to start on")
        }
        // A new size on the last keyframe, kept to the end, is a change too.
        if pictureSize.candidate != nil { try stopForNewSize() }
        for ready in pictureOrder?.finish() ?? [] { try emit(ready, muxer: muxer) }
        try flushPending(before: noPTS, muxer: muxer)
    }
}

/// Copied sound's times in its own samples, where its container's clock is coarser: as
/// ffmpeg's stream copy does (`av_rescale_delta`), each frame starts where the one before
/// ended whenever that lies within the rounding of its own stated time, and at its stated
/// time otherwise (a gap, a step back, a frame of unknown length). Matroska's, FLV's and
/// ASF's milliseconds give AAC frames of 21.333 ms times 21 or 22 ms apart: copied as they
/// are, every MP4 sample had a length of its own (1,008 or 1,056 samples at 48 kHz, one
/// time-to-sample entry each: 1.8 MB more index for a two-hour film, which a download
/// fetches and the muxers hold), where the samples run on exactly. Never more than half a
/// tick of the source's clock from its stated time, so sync is as it was.
struct SampleTimes {
    let from: AVRational
    let samples: AVRational
    /// Where the frame after the latest ends, in samples (noPTS before any).
    private var next = noPTS

    /// nil where the clock is as fine as the samples or finer (MP4 counts them, MPEG-TS its 90 kHz) or
    /// the rate is unknown.
    init?(from: AVRational, sampleRate: Int32) {
        guard sampleRate > 0, from.num > 0, from.den > 0,
              Int64(from.num) * Int64(sampleRate) > Int64(from.den) else { return nil }
        self.from = from
        samples = AVRational(num: 1, den: sampleRate)
    }

    /// Puts the packet's times in samples (the time base returned); `frameSamples`: the
    /// frame's length in samples, 0 if unknown.
    mutating func place(_ p: UnsafeMutablePointer<AVPacket>, frameSamples: Int32) -> AVRational {
        let dts = p.pointee.dts, pts = p.pointee.pts
        // The packet's own length where it states one: only the last sample's length is
        // taken from it (the others' are the steps between times), and a last block said to
        // last seconds (mkvmerge's) is what the source's declared length counts.
        let duration = p.pointee.duration > 0 ? rescale(p.pointee.duration, from: from, to: samples) : Int64(max(0, frameSamples))
        if dts != noPTS {
            var last = next
            let placed = av_rescale_delta(from, dts, samples, max(0, frameSamples), &last, samples)
            next = frameSamples > 0 ? last : noPTS
            p.pointee.dts = placed
            if pts != noPTS { p.pointee.pts = placed + rescale(pts - dts, from: from, to: samples) }
        } else if pts != noPTS {
            p.pointee.pts = rescale(pts, from: from, to: samples)
            next = noPTS
        }
        p.pointee.duration = duration
        return samples
    }
}

/// A value a stream states again and again (an ADTS header's configuration, a keyframe's
/// picture size): the first one, and a different one in the making, which counts as a
/// change once seen `confirmations` times in a row.
struct ChangeWatch<Value: Equatable> {
    let confirmations: Int
    private(set) var first: Value?
    /// The different value, how many times in a row it came, and when it came first.
    private(set) var candidate: (value: Value, count: Int, at: Double)?

    init(confirmations: Int) { self.confirmations = confirmations }

    /// Records `value`, seen at `at` seconds; true once a change is confirmed.
    mutating func observe(_ value: Value, at: @autoclosure () -> Double) -> Bool {
        guard let first else { self.first = value; return false }
        guard value != first else { candidate = nil; return false }
        if let c = candidate, c.value == value { candidate!.count += 1 } else { candidate = (value, 1, at()) }
        return candidate!.count >= confirmations
    }
}

/// The rate and channels an MPEG audio frame header states.
struct MPEGAudioFormat: Equatable, CustomStringConvertible {
    let rate: Int
    let channels: Int
    var description: String { "\(rate) Hz, \(channels == 1 ? "mono" : "stereo")" }
}

/// The stream configuration an ADTS header carries (ISO/IEC 13818-7 / 14496-3): audio
/// object type, sampling frequency index and channel configuration.
struct ADTSConfiguration: Equatable, CustomStringConvertible {
    let profile: UInt8
    let frequencyIndex: UInt8
    let channelConfiguration: UInt8

    /// nil when the bytes do not start with an ADTS header (raw AAC from MP4 or Matroska).
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count >= 7, bytes[0] == 0xFF, bytes[1] & 0xF6 == 0xF0 else { return nil }
        profile = bytes[2] >> 6
        frequencyIndex = (bytes[2] >> 2) & 0x0F
        channelConfiguration = (bytes[2] & 1) << 2 | bytes[3] >> 6
    }

    static let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    var sampleRate: Int? { Int(frequencyIndex) < Self.rates.count ? Self.rates[Int(frequencyIndex)] : nil }

    /// nil for configuration 0 (the channels are set in the stream's own program config).
    var channels: Int? { Self.channels(configuration: Int(channelConfiguration)) }

    /// The channels of an MPEG-4 channel configuration (ADTS's, an AudioSpecificConfig's);
    /// nil for 0 and the reserved ones.
    static func channels(configuration: Int) -> Int? { [1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 8][configuration] }

    /// The 7-byte header (no CRC) of a frame of this configuration with `payloadBytes`.
    func header(payloadBytes: Int) -> [UInt8] {
        let length = 7 + payloadBytes  // 13 bits; an AAC frame is far shorter
        return [0xFF, 0xF1,
                profile << 6 | frequencyIndex << 2 | channelConfiguration >> 2,
                (channelConfiguration & 3) << 6 | UInt8((length >> 11) & 0x03),
                UInt8((length >> 3) & 0xFF),
                UInt8(length & 0x07) << 5 | 0x1F,  // buffer fullness 0x7FF: variable rate
                0xFC]
    }

    var description: String {
        let rate = sampleRate.map { "\($0) Hz" } ?? "rate #\(frequencyIndex)"
        let channels = [0: "channels set in the stream", 1: "mono", 2: "stereo", 6: "5.1", 7: "7.1"][Int(channelConfiguration)]
            ?? "\(channelConfiguration) channels"
        return "\(channels) \(rate)"
    }
}

/// The configuration an AC-3 or E-AC-3 frame's header states (ATSC A/52, section 5.4 and
/// annex E): which of the two, the sample rate, and the channels (`acmod`, the LFE). Read
/// from the packet's first frame: for E-AC-3 its independent substream, which a 7.1
/// stream's dependent one extends without changing.
struct DolbyDigitalConfiguration: Equatable, CustomStringConvertible {
    let enhanced: Bool
    /// `fscod`, or 3 + `fscod2` for E-AC-3's half rates.
    let rateCode: UInt8
    let acmod: UInt8
    let lfe: Bool

    /// nil when the bytes do not start with a frame header.
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count >= 8, bytes[0] == 0x0B, bytes[1] == 0x77 else { return nil }
        let bsid = bytes[5] >> 3
        if bsid <= 10 {
            enhanced = false
            rateCode = bytes[4] >> 6
            guard rateCode != 3 else { return nil }
            acmod = bytes[6] >> 5
            // After acmod, the mix levels and surround mode each layout has, then lfeon.
            var bit = 3
            if acmod & 1 != 0 && acmod != 1 { bit += 2 }
            if acmod & 4 != 0 { bit += 2 }
            if acmod == 2 { bit += 2 }
            let byte = 6 + bit / 8
            lfe = (bytes[byte] >> (7 - UInt8(bit % 8))) & 1 == 1
        } else if bsid <= 16 {
            enhanced = true
            let fscod = bytes[4] >> 6
            rateCode = fscod == 3 ? 3 + (bytes[4] >> 4) & 3 : fscod
            guard rateCode != 6 else { return nil }
            acmod = (bytes[4] >> 1) & 7
            lfe = bytes[4] & 1 == 1
        } else {
            return nil
        }
    }

    var sampleRate: Int { [48000, 44100, 32000, 24000, 22050, 16000][Int(rateCode)] }

    /// The full-bandwidth channels `acmod` names (1+1 is two mono programmes), and the LFE.
    var channels: Int { [2, 1, 2, 3, 3, 4, 4, 5][Int(acmod)] + (lfe ? 1 : 0) }

    var description: String {
        let main = ["1+1", "1.0", "2.0", "3.0", "2.1", "3.1", "2.2", "3.2"][Int(acmod)]
        let layout = ["2.0": "stereo", "1.0": "mono", "3.2 LFE": "5.1"][main + (lfe ? " LFE" : "")] ?? main + (lfe ? " with LFE" : "")
        return "\(layout) \(sampleRate) Hz"
    }
}

/// Dolby Vision profile 7 carries, in one HEVC track, an HDR10 base layer plus NAL units of
/// types HEVC leaves unspecified: 63 holds the enhancement layer, 62 the RPU (the metadata
/// that rebuilds the picture from both layers). MP4 has no carriage for profile 7, so the
/// copy is the base layer alone (its configuration record left out); decoders skip the
/// unspecified types, but they would still be downloaded (a full enhancement layer is
/// several Mb/s), and an RPU without its record is metadata for a picture the file no
/// longer holds. They are taken out of each packet; the base layer's units are untouched.
enum DolbyVisionLayers {
    static let rpu = 62, enhancementLayer = 63

    /// Rewrites `packet` without its type 62 and 63 NAL units (a packet with none, or
    /// whose lengths do not add up, stays as it is).
    static func strip(_ packet: Packet, lengthSize: Int) throws(KilnError) {
        let p = packet.pointer.pointee
        guard let data = p.data, p.size > 0 else { return }
        let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
        var kept: [Range<Int>] = [], dropped = false, covered = 0
        LengthPrefixed.forEachUnit(in: bytes, lengthSize: lengthSize) { unit in
            let start = UnsafeMutablePointer(mutating: unit.baseAddress!) - data
            covered = start + unit.count
            let type = Int(unit[0] >> 1) & 0x3f
            if type == rpu || type == enhancementLayer { dropped = true } else { kept.append(start - lengthSize..<start + unit.count) }
        }
        guard dropped, covered == bytes.count else { return }
        let stripped = try Packet()
        let size = kept.reduce(0) { $0 + $1.count }
        try check(av_new_packet(stripped.pointer, Int32(size)), .mux, "cannot hold a packet", as: .resourceLimit)
        var at = 0
        for range in kept {
            (stripped.pointer.pointee.data + at).update(from: data + range.lowerBound, count: range.count)
            at += range.count
        }
        try check(av_packet_copy_props(stripped.pointer, packet.pointer), .mux, "cannot copy packet properties", as: .resourceLimit)
        av_packet_unref(packet.pointer)
        packet.take(stripped)
    }
}
