import CFFmpeg
import KilnCore
#if canImport(Glibc)
import Glibc
#endif

/// An open input file: owns the `AVFormatContext`, reads packets.
final class Demuxer {
    /// How much of a file libavformat may read and analyse to learn its streams. The
    /// defaults (5 MB, 5 s) miss late-starting subtitle and audio streams in big remuxes;
    /// more than this buys nothing and lets a hostile file make the probe slow.
    static let probeSizeBytes = 32 << 20
    static let analyzeDurationMicroseconds = 30_000_000
    static let maxStreams = 512

    let context: UnsafeMutablePointer<AVFormatContext>
    let path: String
    /// The run's cancellation, held for as long as the context lives: libavformat's
    /// interrupt callback reads its flag, and lanes whose work is not bounded by a packet
    /// check it too.
    let cancellation: Cancellation
    /// The context's interrupt: the cancellation, and the ceiling of a look (`read(fromByte:)`).
    /// Freed after the context (deinit's order).
    private let guardian: ReadGuard
    /// Whether `rewind` (or the analysis, `H264Analysis`) sent it back to the start: a second
    /// reader that must see the same packets goes back the same way (`IndexForecast`).
    private(set) var wasRewound = false
    /// The furthest byte of the file a packet read so far came from (0: none said where).
    /// Subtitle packets count: 40,000 cues after a 10 s clip are most of its bytes, and
    /// the file is read to its end all the same.
    private(set) var furthestByte: Int64 = 0
    /// Whether the analysis learnt its H.264 streams' parameters without decoding a picture.
    private(set) var sparedH264Decode = false
    /// Each stream's first packet, as first read: where a rewind must land (`StartMarks`).
    private(set) var startMarks = StartMarks()
    /// Packets a rewind read to check where it landed, handed out before any new read.
    private var pending: [Packet] = []
    /// A Matroska file's head (EBML header, Segment, SeekHead), read once; nil where the
    /// file is no Matroska file or its head cannot be read.
    let matroskaHead: Prober.MatroskaHead?
    /// A Matroska file's track entries (`MatroskaTracks`), which also name the codecs
    /// libavformat does not know; nil where they cannot be read or the file is no Matroska file.
    let matroskaTracks: [MatroskaTracks.Entry]?
    /// A Matroska file's chapters as a player shows them, which replaced libavformat's
    /// (`MatroskaChapters`); nil where the file has none or is no Matroska file.
    let matroskaChapters: MatroskaChapters?
    /// The file the context reads through when it may skim (`skimmable`) or reads the file's
    /// fragments in another order; nil when it reads through libavformat's own file
    /// protocol. Freed after the context (deinit's order).
    private let skim: SkimReader?
    private let skimmable: Bool
    /// An MP4's first fragment stored out of the order of its times (`Prober.fragmentWalk`),
    /// and whether the context reads the fragments in the order of their times instead.
    private(set) var fragmentDisorder: Prober.FragmentDisorder?
    private(set) var fragmentsReordered = false
    /// A Matroska file's first cluster stored out of the order of its times
    /// (`Prober.clusterWalk`), and whether the context reads the clusters in that order.
    private(set) var clusterDisorder: Prober.ClusterDisorder?
    private(set) var clustersReordered = false
    /// Whether clusters of unknown size in a Segment of known size are read with their
    /// sizes written in (`Prober.ClusterWalk.sized`): players built on libavformat leave
    /// the first of them out, the film's first second or more.
    private(set) var clustersSized = false
    /// An MP4's recordings laid one after another after one header (`Prober.FragmentWalk.recordings`;
    /// 1: one), where the second begins, and whether the context reads them joined, each timed
    /// to follow the one before; else why they cannot be (`joinProblem`).
    private(set) var fragmentRecordings = 1
    private(set) var secondRecording: Int64?
    private(set) var recordingsJoined = false
    private(set) var recordingsJoinProblem: String?
    /// A later header's track coded otherwise than the first's (`FragmentWalk.codingChange`).
    private(set) var codingChange: (track: UInt32, offset: Int64)?
    /// Why a decoder cannot follow that change (`FragmentWalk.codingSwitches`); nil where it can.
    private(set) var codingSwitchProblem: String?
    /// Per stream whose coding a later header changes, where each coding is read
    /// (`CodingSwitch`); a decoder of it is handed the configuration at each change.
    private var codingSwitches: [Int: CodingSwitch] = [:]
    /// The streams whose coding changes along the file, and which a decoder can follow.
    var switchedStreams: [Int] { codingSwitches.keys.sorted() }
    /// The most channels a switched sound stream has in any of its codings.
    private(set) var switchedChannels: [Int: Int] = [:]
    /// Whether the container is one whose files are joined into chains of links (Ogg, and
    /// FLAC files joined with `cat`), and per stream its chained links' times (`LinkChain`).
    private lazy var chainsLinks = Self.chainedFormats.contains(formatName)
    static let chainedFormats: Set<String> = ["ogg", "flac"]
    /// A bare FLAC file, where a joined file's header lies between frames (`FLACJoin`); an
    /// Ogg FLAC link's header packets are `LinkChain`'s.
    private lazy var isBareFLAC = formatName == "flac"
    private var linkChains: [Int: LinkChain] = [:]
    /// Why a stream's chained links cannot be timed (`LinkChain.unfollowable`).
    private(set) var linksUnfollowable: String?
    /// Whether a stream read so far went on in a second chained link (`LinkChain`).
    private(set) var linksChained = false
    /// Per stream a later header times in another timescale, its fragments' times
    /// (`TimeScaling`): libavformat reads them in the first header's.
    private var timeScalings: [Int: TimeScaling] = [:]
    /// Whether the context reads the MP4 without the `sidx` boxes put in after its
    /// fragments' offsets were written (`Prober.FragmentWalk.indexInsertedAfter`).
    private(set) var fragmentOffsetsShifted = false

    /// - Parameter analyze: run `avformat_find_stream_info` (`analyse`). Verification of an
    ///   MP4 Kiln just wrote skips it: the index already holds codec, size, rate and
    ///   channels, and a 4K HEVC decoder's frames cost more than the rest of a remux.
    /// - Parameter h264Shortcut: let `H264Analysis` spare the analysis its H.264 decode
    ///   (tests compare both ways).
    /// - Parameter skimmable: read through a `SkimReader`, so that `skimPayloads` can later
    ///   spare the reads of what no one will look at (the index forecast's reader).
    init(path: String, cancellation: Cancellation, analyze: Bool = true, h264Shortcut: Bool = true,
         skimmable: Bool = false) throws(KilnError) {
        self.path = path
        self.cancellation = cancellation
        let guardian = try ReadGuard(cancellation)
        self.guardian = guardian
        // One stat answers all three questions.
        var st = stat()
        guard stat(path, &st) == 0 else { throw Demuxer.unreachable(errno) }
        guard st.st_mode & S_IFMT != S_IFDIR, access(path, R_OK) == 0 else {
            throw KilnError(.sourceUnreadable, stage: .open, "the source is not a readable file")
        }
        // Opening a named pipe blocks until something writes to it, and a device never
        // ends: neither is a media file, and either would hang the run.
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw KilnError(.sourceUnreadable, stage: .open, "the source is not a regular file (a pipe, socket or device)")
        }
        // (libavformat's word for it is "Invalid argument", as for a file it cannot read.)
        guard st.st_size > 0 else { throw KilnError(.sourceUnreadable, stage: .open, "the source is empty (0 bytes)") }
        var skim = skimmable ? try SkimReader(path: path) : nil
        var ctx: UnsafeMutablePointer<AVFormatContext>? = try Demuxer.open(path, guardian, through: skim)
        // Fragments stored out of the order of their times are read in that order, and a
        // recording appended after another (its times starting again) is read timed to
        // follow it: the file's bytes through a reader that lays them so and moves those
        // times (no byte held; a few numbers a fragment). Read as stored, libavformat marked
        // the late fragment's packets not shown (the film came out with a gap), and every
        // packet of a second recording (it was lost whole).
        var order: ReadOrder?
        let format = String(cString: ctx!.pointee.iformat.pointee.name)
        if format.hasPrefix("mov,"), Prober.fragmentLayout(path).fragments {
            let opened = ctx!
            let walk = Prober.fragmentWalk(path) { track in
                (0..<Int(opened.pointee.nb_streams)).lazy.compactMap { opened.pointee.streams[$0] }
                    .first { $0.pointee.id == Int32(bitPattern: track) }?.pointee.time_base
            }
            fragmentDisorder = walk?.disorder
            fragmentRecordings = walk?.recordings ?? 1
            secondRecording = walk?.secondRecording
            recordingsJoinProblem = walk?.joinProblem
            codingChange = walk?.codingChange
            if let walk, walk.disorder != nil || walk.recordings > 1 || walk.indexInsertedAfter || !walk.rescaled.isEmpty,
               let rewrite = walk.rewrite() {
                order = rewrite
                avformat_close_input(&ctx)
                skim = try SkimReader(path: path, order: rewrite)
                ctx = try Demuxer.open(path, guardian, through: skim)
                fragmentsReordered = walk.disorder != nil
                recordingsJoined = walk.recordings > 1
                fragmentOffsetsShifted = walk.indexInsertedAfter
            }
            // Where each fragment is read (in the order laid, where the fragments were moved),
            // for a file whose later headers change what a fragment holds.
            let followed = codingChange != nil || walk?.rescaled.isEmpty == false
            let stored = followed ? walk!.fragments.map(\.offset) : []
            let laid = order?.positions(ofStored: stored) ?? stored.map { $0 }
            if let walk, !walk.rescaled.isEmpty {
                if order == nil {
                    codingSwitchProblem = walk.joinProblem ?? "its fragments cannot be read in the first header's timescale"
                } else {
                    timeScalings = TimeScaling.read(walk, fragments: stored, laid: laid, context: ctx!)
                }
            }
            if let walk, followed, codingSwitchProblem == nil {
                let (tracks, problem) = walk.codingSwitches()
                codingSwitchProblem = problem
                if problem == nil {
                    codingSwitches = CodingSwitch.read(tracks, fragments: stored, laid: laid, context: ctx!)
                    for s in codingSwitches.keys {
                        if let most = walk.mostChannels(UInt32(bitPattern: ctx!.pointee.streams[s]!.pointee.id)) { switchedChannels[s] = most }
                    }
                }
            }
        }
        // Matroska clusters likewise (cluster for fragment): read as stored, pictures after a
        // late cluster came out of order or were dropped as times running back.
        if format.hasPrefix("matroska"), let head = Prober.MatroskaHead(path: path),
           let walk = Prober.clusterWalk(path, head: head), let disorder = walk.disorder {
            clusterDisorder = disorder
            if let reordered = walk.reordered() {
                order = reordered
                avformat_close_input(&ctx)
                skim = try SkimReader(path: path, order: reordered)
                ctx = try Demuxer.open(path, guardian, through: skim)
                clustersReordered = true
            }
        } else if format.hasPrefix("matroska"), let head = Prober.MatroskaHead(path: path),
                  let sized = Prober.clusterWalk(path, head: head)?.sized() {
            // Clusters of unknown size in a Segment of known size are read with their sizes
            // (`Prober.ClusterWalk.sized`): libavformat left the first of them out.
            order = sized
            avformat_close_input(&ctx)
            skim = try SkimReader(path: path, order: sized)
            ctx = try Demuxer.open(path, guardian, through: skim)
            clustersSized = true
        }
        do {
            if analyze {
                switch try Demuxer.analyse(ctx!, shortcut: h264Shortcut) {
                case .done(let spared, let landing):
                    sparedH264Decode = spared
                    if let landing {
                        wasRewound = true
                        startMarks = landing.marks
                        pending = landing.held
                    }
                case .retry:
                    avformat_close_input(&ctx)
                    // A reader of its own for the new context: the old one's position and
                    // buffer are the closed context's.
                    skim = skimmable || order != nil ? try SkimReader(path: path, order: order) : nil
                    ctx = try Demuxer.open(path, guardian, through: skim)
                    _ = try Demuxer.analyse(ctx!, shortcut: false)
                }
            }
        } catch {
            avformat_close_input(&ctx)
            throw error
        }
        // The analysis gives each stream the parameters of its decoder context, which
        // libavformat filled at open, before the data was dropped: drop it again.
        Demuxer.dropAttachmentData(ctx!)
        let head = String(cString: ctx!.pointee.iformat.pointee.name).hasPrefix("matroska") ? Prober.MatroskaHead(path: path) : nil
        matroskaHead = head
        matroskaTracks = head.flatMap { MatroskaTracks.read(head: $0, path: path) }
        if let matroskaTracks { MatroskaTracks.nameLackingCodecs(ctx!, with: matroskaTracks) }
        // libavformat ended its chapters (`compute_chapters_end`) in the analysis: these end
        // as it ends them.
        if let head, ctx!.pointee.nb_chapters > 0, let chapters = MatroskaChapters(head: head, path: path) {
            let start = ctx!.pointee.start_time == kiln_nopts_value() ? 0 : ctx!.pointee.start_time
            chapters.apply(to: ctx!, fileEnd: (max(0, ctx!.pointee.duration) + start) * 1000)
            matroskaChapters = chapters
        } else {
            matroskaChapters = nil
        }
        do {
            try TimeLimit.check(ctx!)
        } catch {
            avformat_close_input(&ctx)
            throw error
        }
        context = ctx!
        self.skim = skim
        self.skimmable = skimmable
    }

    /// Why a source path leads to no file. Only a missing name is "not found": a symlink
    /// loop, a path too long or a folder that cannot be searched name a file that is
    /// there, or may be, and cannot be read.
    static func unreachable(_ e: Int32) -> KilnError {
        if e == ENOENT || e == ENOTDIR {
            return KilnError(.sourceNotFound, stage: .open, underlying: e, "the source file does not exist")
        }
        return KilnError(.sourceUnreadable, stage: .open, underlying: e,
                         "the source path cannot be followed to a file (\(String(cString: strerror(e))))")
    }

    private static func open(_ path: String, _ guardian: ReadGuard,
                             through skim: SkimReader?) throws(KilnError) -> UnsafeMutablePointer<AVFormatContext> {
        if let refusal = playlist(path) { throw refusal }
        guard let ctx = avformat_alloc_context() else {
            throw KilnError(.resourceLimit, stage: .open, "out of memory opening the source")
        }
        guardian.install(on: ctx)
        // libavformat neither closes nor frees a context it was given (AVFMT_FLAG_CUSTOM_IO).
        if let skim { ctx.pointee.pb = skim.io }
        let options = Options([
            ("probesize", String(Demuxer.probeSizeBytes)),
            ("analyzeduration", String(Demuxer.analyzeDurationMicroseconds)),
            ("max_streams", String(Demuxer.maxStreams)),
            // Never let a playlist-like input make libavformat open other files: no network
            // at all, and no demuxer whose input names other files (`readers`).
            ("protocol_whitelist", "file"),
            ("format_whitelist", Demuxer.readers),
        ])
        var p: UnsafeMutablePointer<AVFormatContext>? = ctx
        let ret = avformat_open_input(&p, LibAVPath.file(path), nil, &options.dict)
        guard ret >= 0, let opened = p else {
            // avformat_open_input frees the context on failure.
            let e = classify(ret, .open, "cannot open the source", as: .sourceUnreadable)
            if e.code == .canceled { throw e }
            // libavformat's words for a damaged header read like the machine's trouble: a size
            // field asking for gigabytes is "Cannot allocate memory" (Linux would kill a process
            // really out of it first), a field it does not expect "Not yet implemented".
            let why = ret == kiln_averror_enomem() ? "a size in its header asks for more memory than a file's header needs: damaged"
                : ret == kiln_averror_patchwelcome() ? "its header uses something libavformat does not implement, or is damaged"
                : avErrorText(ret)
            if e.code == .sourceUnreadable, fragmentsWithoutHeader(path) {
                throw KilnError(.sourceUnreadable, stage: .open, underlying: ret, "the source is MP4 fragments without the header they need "
                                + "(an HLS or DASH init segment's moov): join the init segment in front of them")
            }
            throw KilnError(e.code == .sourceUnsupported ? .sourceUnsupported : .sourceUnreadable, stage: .open,
                            underlying: ret, "the source is not a media file libavformat can read (\(why))")
        }
        let format = String(cString: opened.pointee.iformat.pointee.name)
        if let refusal = notAFilm(format) {
            p = opened
            avformat_close_input(&p)
            throw refusal
        }
        if format == "avi" { AVIFrameRate.reconcile(opened, path: path) }
        dropAttachmentData(opened)
        leaveUnknownCodecsUnread(opened)
        return opened
    }

    /// Leaves unread (`AVDISCARD_ALL`, for the analysis, the probe's surveys and the run
    /// alike) each picture, sound or subtitle stream of an MP4/MOV or Matroska file whose
    /// codec libavformat does not know: nothing can decode, parse or copy it, and in these
    /// containers a stream's codec is its sample entry's or CodecID's, never learnt from its
    /// packets. Read, it cost memory that grew with the file's length: the analysis keeps
    /// every packet it reads until each stream's parameters are known, which an unknown
    /// codec's never are, so it read to its limits. A camera's PCM track whose handler was
    /// damaged from `soun` to `vide` is such a stream, of one 2-byte sample per packet:
    /// 30 s of them, 1.4 million packets, held 450 MB. The probe still lists the stream,
    /// from its header, and the plan leaves it out.
    private static func leaveUnknownCodecsUnread(_ ctx: UnsafeMutablePointer<AVFormatContext>) {
        let format = String(cString: ctx.pointee.iformat.pointee.name)
        guard format.hasPrefix("mov,") || format.hasPrefix("matroska") else { return }
        for i in 0..<Int(ctx.pointee.nb_streams) {
            guard let st = ctx.pointee.streams[i], let par = st.pointee.codecpar?.pointee,
                  par.codec_id == AV_CODEC_ID_NONE,
                  [AVMEDIA_TYPE_VIDEO, AVMEDIA_TYPE_AUDIO, AVMEDIA_TYPE_SUBTITLE].contains(par.codec_type) else { continue }
            st.pointee.discard = AVDISCARD_ALL
        }
    }

    /// The metadata key under which a stream's codec is named where libavformat knows none
    /// and the container's header says which it is (`MatroskaTracks.nameLackingCodecs`).
    static let namedCodecKey = "kiln_codec"

    /// A stream's codec: its parameters', or where they name none, the one Kiln named.
    static func codecID(_ st: UnsafeMutablePointer<AVStream>) -> AVCodecID {
        let id = st.pointee.codecpar.pointee.codec_id
        guard id == AV_CODEC_ID_NONE, let name = av_dict_get(st.pointee.metadata, namedCodecKey, nil, 0),
              let descriptor = avcodec_descriptor_get_by_name(name.pointee.value) else { return id }
        return descriptor.pointee.id
    }

    /// Frees what a Matroska file's attachments hold (fonts: anime releases carry tens of
    /// megabytes), before the analysis copies every stream's parameters into a decoder
    /// context of its own: no output carries attachments, and the demuxer keeps a copy of
    /// its own until it closes. 80 MB of fonts had cost a probe 400 MB. What each held is
    /// kept as its size (`attachedBytes`), which the probe leaves out of the file's rate.
    private static func dropAttachmentData(_ ctx: UnsafeMutablePointer<AVFormatContext>) {
        for i in 0..<Int(ctx.pointee.nb_streams) {
            guard let st = ctx.pointee.streams[i], let par = st.pointee.codecpar,
                  par.pointee.codec_type == AVMEDIA_TYPE_ATTACHMENT, par.pointee.extradata_size > 0 else { continue }
            av_dict_set(&st.pointee.metadata, attachedBytesKey, String(par.pointee.extradata_size), 0)
            av_freep(&par.pointee.extradata)
            par.pointee.extradata_size = 0
        }
    }

    /// The metadata key under which `dropAttachmentData` keeps an attachment's size.
    static let attachedBytesKey = "kiln_attached_bytes"

    /// What the file's attachments held, in bytes (their data is dropped at open).
    var attachedBytes: Int64 {
        (0..<streamCount).reduce(Int64(0)) { sum, i in
            let st = stream(i)
            guard st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_ATTACHMENT,
                  let value = av_dict_get(st.pointee.metadata, Demuxer.attachedBytesKey, nil, 0) else { return sum }
            return sum + (Int64(String(cString: value.pointee.value)) ?? 0)
        }
    }

    /// Demuxers whose input is a list of other files to read (an HLS or DASH playlist, an
    /// IMF composition, a concat script): with `protocol_whitelist=file` an HLS playlist still
    /// read local files by absolute path, anywhere the daemon may read, and delivered them
    /// as its own. A source is a recording, not a list of them.
    static let listReaders: Set<String> = ["hls", "dash", "imf", "concat", "webm_dash_manifest"]

    /// Every other demuxer libavformat has, as its `format_whitelist` takes them.
    static let readers: String = {
        var names: [String] = [], opaque: UnsafeMutableRawPointer? = nil
        while let f = av_demuxer_iterate(&opaque) {
            let name = String(cString: f.pointee.name)
            if !listReaders.contains(name) { names.append(name) }
        }
        return names.joined(separator: ",")
    }()

    /// A source that is a playlist (HLS's "#EXTM3U", DASH's MPD) refused by what it is: with
    /// its reader left out libavformat would take it for a text file.
    static func playlist(_ path: String) -> KilnError? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY), let head = try? file.read(upTo: 512, at: 0) else { return nil }
        let text = String(decoding: head, as: UTF8.self)
        guard text.hasPrefix("#EXTM3U") || text.hasPrefix("\u{FEFF}#EXTM3U") || !text[...].occurrences(of: "<MPD").isEmpty else { return nil }
        return KilnError(.sourceUnsupported, stage: .open,
                         "the source is a streaming playlist (HLS or DASH) naming other files, not a recording: prepare the recording itself")
    }

    /// Whether the file begins as an HLS or DASH media segment does (`styp`, `sidx` or
    /// `moof` first), which no MP4 reader can read without its init segment.
    static func fragmentsWithoutHeader(_ path: String) -> Bool {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY), let head = try? file.read(upTo: 8, at: 0), head.count == 8 else { return false }
        return [Array("styp".utf8), Array("sidx".utf8), Array("moof".utf8)].contains(Array(head[4..<8]))
    }

    /// libavformat reads more than films: a text file (a README, an .nfo) as text art
    /// rendered into pictures, a photo or poster as a one-picture video. Prepared, they came
    /// out as seconds of rendered text or a 0.04 s clip, reported ok.
    static func notAFilm(_ format: String) -> KilnError? {
        if ["tty", "bin", "xbin", "adf", "idf"].contains(format) {
            return KilnError(.sourceUnreadable, stage: .open, "the source is a text file (read as \(format) text art), not a media file")
        }
        if format == "image2" || format.hasSuffix("_pipe") {
            return KilnError(.sourceUnsupported, stage: .open, "the source is a still picture (\(format)), not a video or sound")
        }
        return nil
    }

    private enum Analysis {
        /// `spared`: the shortcut served every H.264 stream; `landing`: it read packets and
        /// went back to the start.
        case done(spared: Bool, landing: Landing?)
        /// The shortcut could not put the stream times right: open afresh, analyse in full.
        case retry
    }

    /// Runs `avformat_find_stream_info`, which decodes a few frames to learn what headers
    /// leave out, sparing H.264 keyframes where `H264Analysis` can (`shortcut`).
    private static func analyse(_ ctx: UnsafeMutablePointer<AVFormatContext>, shortcut: Bool) throws(KilnError) -> Analysis {
        let stated = StatedColours(ctx)
        defer { stated.fill(ctx) }
        let prefilled = shortcut ? H264Analysis.prefill(ctx) : H264Analysis.Prefilled()
        // Analysis decodes a few frames per stream to learn what headers leave out. With
        // one decoder thread the first frame comes out of the first packet; frame threads
        // would first fill a pipeline of several frames (2-3x the time on H.264 and HEVC).
        let count = Int(ctx.pointee.nb_streams)
        let streamOptions = UnsafeMutablePointer<OpaquePointer?>.allocate(capacity: max(count, 1))
        streamOptions.initialize(repeating: nil, count: max(count, 1))
        for i in 0..<count {
            av_dict_set(&streamOptions[i], "threads", "1", 0)
            // Analysis reads parameters off decoded pictures, never their pixels: the
            // deblocking filter (a quarter of H.264's and HEVC's decoding time) is skipped.
            av_dict_set(&streamOptions[i], "skip_loop_filter", "all", 0)
            if prefilled.streams.contains(i) { av_dict_set(&streamOptions[i], "skip_frame", "all", 0) }
        }
        defer {
            for i in 0..<count { av_dict_free(&streamOptions[i]) }
            streamOptions.deallocate()
        }
        let info = avformat_find_stream_info(ctx, count > 0 ? streamOptions : nil)
        if info < 0 { throw classify(info, .probe, "cannot read the source's streams", as: .sourceUnreadable) }
        guard prefilled.needsTimes, !prefilled.isEmpty else { return .done(spared: !prefilled.isEmpty, landing: nil) }
        var marks = StartMarks()
        guard H264Analysis.restoreTimes(ctx, prefilled, marking: &marks),
              let landing = land(ctx, atStartOf: marks) else { return .retry }
        return .done(spared: true, landing: landing)
    }

    /// The colours a container states for its picture streams (an MP4's `colr` box,
    /// Matroska's Colour element), as libavformat read them at open. The analysis gives each
    /// stream its decoder's parameters, and an HEVC or H.264 decoder resets what its
    /// sequence header leaves out to unspecified: HDR10 stated only by the container (x265
    /// run without colour flags, then muxed with them) was taken for SDR, copied as such to
    /// devices without HDR, remuxed without its colour box and re-encoded without tone
    /// mapping. What the analysis leaves unspecified is filled back from them; what the
    /// bitstream states wins.
    private struct StatedColours {
        private var streams: [(primaries: AVColorPrimaries, transfer: AVColorTransferCharacteristic, matrix: AVColorSpace)?] = []

        init(_ ctx: UnsafeMutablePointer<AVFormatContext>) {
            for i in 0..<Int(ctx.pointee.nb_streams) {
                guard let par = ctx.pointee.streams[i]?.pointee.codecpar?.pointee, par.codec_type == AVMEDIA_TYPE_VIDEO else {
                    streams.append(nil)
                    continue
                }
                streams.append((par.color_primaries, par.color_trc, par.color_space))
            }
        }

        func fill(_ ctx: UnsafeMutablePointer<AVFormatContext>) {
            for (i, stated) in streams.enumerated() where i < Int(ctx.pointee.nb_streams) {
                guard let stated, let par = ctx.pointee.streams[i]?.pointee.codecpar else { continue }
                // Never a reserved or unspecified code of the container's own.
                if par.pointee.color_primaries == AVCOL_PRI_UNSPECIFIED,
                   ![AVCOL_PRI_RESERVED0, AVCOL_PRI_RESERVED].contains(stated.primaries) {
                    par.pointee.color_primaries = stated.primaries
                }
                if par.pointee.color_trc == AVCOL_TRC_UNSPECIFIED, ![AVCOL_TRC_RESERVED0, AVCOL_TRC_RESERVED].contains(stated.transfer) {
                    par.pointee.color_trc = stated.transfer
                }
                // Nor RGB's identity matrix, which no YCbCr picture has (a damaged `colr`).
                if par.pointee.color_space == AVCOL_SPC_UNSPECIFIED, ![AVCOL_SPC_RESERVED, AVCOL_SPC_RGB].contains(stated.matrix) {
                    par.pointee.color_space = stated.matrix
                }
            }
        }
    }

    deinit {
        var c: UnsafeMutablePointer<AVFormatContext>? = context
        avformat_close_input(&c)
    }

    var streamCount: Int { Int(context.pointee.nb_streams) }

    /// Which payloads a skimming reader may leave unread past their first bytes.
    enum Skim: Equatable {
        /// Every payload longer than the buffer (MP4: one frame per sample).
        case all
        /// Matroska blocks without lacing (one frame each).
        case unlacedMatroskaBlocks
    }

    /// From here on, reads only the first `bytes` of the payloads `which` says and leaves
    /// the rest of the packet unread (`SkimReader`). For a reader whose packets nobody looks
    /// at past their first bytes. False if it cannot skim.
    @discardableResult
    func skimPayloads(keeping bytes: Int, _ which: Skim) -> Bool {
        guard skimmable, let skim else { return false }
        if which == .unlacedMatroskaBlocks { kiln_skim_reader_matroska(skim.reader) }
        kiln_skim_reader_keep(skim.reader, Int64(bytes))
        return true
    }

    /// Bytes of packets handed over unread since `skimPayloads`.
    var skippedBytes: Int64 { skim.map { kiln_skim_reader_skipped($0.reader) } ?? 0 }

    func stream(_ index: Int) -> UnsafeMutablePointer<AVStream> { context.pointee.streams[index]! }

    /// Reads the next packet. Returns false at end of file; an interrupted read is
    /// cancellation, not end of file.
    func read(into packet: Packet) throws(KilnError) -> Bool {
        if !pending.isEmpty {
            packet.take(pending.removeFirst())
            TimeLimit.clear(packet, in: stream(Int(packet.streamIndex)))
            deriveDecodeTime(packet)
            _ = laceTimed(packet)
            if followHeaders(packet) { return true }
            packet.unref()
            return try read(into: packet)
        }
        // A loop, not a call again: a damaged index may end thousands of samples inside the file's last bytes.
        while try readFrame(into: packet) {
            // Left out; counted with the samples the index places past the end (`samplesPastEnd`).
            if endsCutShort(packet.pointer.pointee) {
                packet.unref()
                continue
            }
            TimeLimit.clear(packet, in: stream(Int(packet.streamIndex)))
            deriveDecodeTime(packet)
            noted(packet)
            // Not judged yet, the frame is as libavformat timed it: a DefaultDuration after
            // the one before.
            let lace = packet.pointer.pointee.duration
            if laceTimed(packet) {
                let s = Int(packet.streamIndex)
                try judgeLaces(of: s, lace: lace)
                laces?[s]?.retime(&packet.pointer.pointee)
            }
            if followHeaders(packet) { return true }
            packet.unref()
        }
        return false
    }

    /// What a file's later headers change, applied to a packet as it is read: an Ogg link's
    /// times after the one before (`LinkChain`); a fragment's times in another timescale
    /// (`TimeScaling`); and for a stream whose coding changes, the configuration it is coded
    /// in (`AV_PKT_DATA_NEW_EXTRADATA`, which libavcodec's H.264, HEVC and AAC decoders take
    /// up) where it differs from the last one this demuxer handed over: at each change, and
    /// at the first packet after a seek (a decoder opened since has the first header's).
    /// False for a packet to leave out: a later link's headers, which are no sound.
    private func followHeaders(_ packet: Packet) -> Bool {
        let s = Int(packet.streamIndex)
        if chainsLinks {
            let st = stream(s).pointee
            var chain = linkChains[s] ?? LinkChain(first: LinkChain.identification(extradata: st.codecpar.pointee))
            defer { linkChains[s] = chain }
            if isBareFLAC, st.codecpar.pointee.codec_id == AV_CODEC_ID_FLAC, !splitJoinedFLAC(packet, &chain, st.codecpar.pointee) { return false }
            let kept = chain.follow(&packet.pointer.pointee, codec: st.codecpar.pointee.codec_id, timeBase: st.time_base)
            // Kept past a seek, which starts the chains again.
            linksChained = linksChained || chain.chained
            linksUnfollowable = linksUnfollowable ?? chain.unfollowable
            if !kept { return false }
        }
        if !timeScalings.isEmpty, let scaling = timeScalings[s] { scaling.retime(&packet.pointer.pointee) }
        guard !codingSwitches.isEmpty, var change = codingSwitches[s] else { return true }
        let coding = change.coding(at: packet.pointer.pointee.pos)
        guard coding != change.given else { return true }
        change.given = coding
        codingSwitches[s] = change
        guard let config = change.configs[coding], !config.isEmpty,
              let side = av_packet_new_side_data(packet.pointer, AV_PKT_DATA_NEW_EXTRADATA, config.count) else { return true }
        config.withUnsafeBufferPointer { side.update(from: $0.baseAddress!, count: config.count) }
        return true
    }

    /// A packet that holds a joined FLAC file's header (`FLACJoin`) becomes its frames, each
    /// timed (`LinkChain.place`): the first in `packet`, the rest handed out next. False
    /// where it holds no frame.
    private func splitJoinedFLAC(_ packet: Packet, _ chain: inout LinkChain, _ par: AVCodecParameters) -> Bool {
        let p = packet.pointer.pointee
        guard let data = p.data,
              let join = FLACJoin.frames(UnsafeBufferPointer(start: data, count: Int(p.size)),
                                         streamRate: Int(par.sample_rate), streamBits: Int(par.bits_per_raw_sample)) else { return true }
        let times = chain.place(join.frames, rate: join.rate)
        var pieces: [Packet] = []
        for (frame, time) in zip(join.frames, times) {
            guard let piece = try? Packet(), av_packet_ref(piece.pointer, packet.pointer) == 0 else { continue }
            piece.pointer.pointee.data = data + frame.range.lowerBound
            piece.pointer.pointee.size = Int32(frame.range.count)
            piece.pointer.pointee.pts = time
            piece.pointer.pointee.dts = time
            piece.pointer.pointee.duration = Int64(frame.samples)
            if p.pos >= 0 { piece.pointer.pointee.pos = p.pos + Int64(frame.range.lowerBound) }
            pieces.append(piece)
        }
        packet.unref()
        guard let first = pieces.first else { return false }
        packet.take(first)
        pending.insert(contentsOf: pieces.dropFirst(), at: 0)
        return true
    }

    /// After a seek: a decoder opened since has the first header's coding, and a chained
    /// link's times are counted again from the packets read.
    private func followFromStart() {
        for k in codingSwitches.keys { codingSwitches[k]!.given = nil }
        linkChains = [:]
    }

    /// Per stream, its laced frames' times (`LaceTimes`): Matroska sound tracks; nil for
    /// the rest, and until the first packet.
    private var laces: [LaceTimes?]?

    /// A sound track whose blocks come far closer or further apart than its frames last
    /// (`LaceTimes.scaleDamage`), and by how many times: its times, and the pictures', are
    /// scaled wrong.
    private(set) var laceScaleDamage: (stream: Int, ratio: Double)?

    /// Whether a sound track's laced frames were found to last other than its
    /// DefaultDuration says, and are timed by their own length.
    var lacesRetimed: Bool { laces?.contains { $0?.frameLength != nil } ?? false }

    /// Times a packet of a Matroska sound track by its block (`LaceTimes.time`); true when
    /// it continues a laced block of a track not judged yet.
    private func laceTimed(_ packet: Packet) -> Bool {
        guard isMatroska else { return false }
        if laces == nil {
            laces = (0..<streamCount).map { stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO ? LaceTimes() : nil }
        }
        let s = Int(packet.streamIndex)
        guard s >= 0, s < laces!.count, laces![s] != nil else { return false }
        let continues = laces![s]!.time(&packet.pointer.pointee)
        return continues && !laces![s]!.judged
    }

    /// Reads on until stream `s` has begun two more blocks after the laced one just read,
    /// and judges its frames' length from them (`LaceTimes.decide`) against `length`, the
    /// spacing libavformat gave its frames. The packets read on are handed out next, in file
    /// order, timed as any. Bounded: a track whose next blocks do not come within 4,096
    /// packets or 32 MB is left as read.
    private func judgeLaces(of s: Int, lace length: Int64) throws(KilnError) {
        guard var lace = laces?[s], pending.isEmpty else { return }
        var blocks = [LaceTimes.Block(start: lace.blockStart, frames: lace.framesInBlock)]
        var position = lace.blockPosition
        var ahead: [Packet] = []
        var bytes = 0
        while blocks.count < 3, ahead.count < 4096, bytes < 32 << 20 {
            let p = try Packet()
            guard try readFrame(into: p) else { break }
            if endsCutShort(p.pointer.pointee) { continue }
            noted(p)
            let q = p.pointer.pointee
            bytes += Int(max(q.size, 0))
            ahead.append(p)
            guard Int(q.stream_index) == s else { continue }
            if q.pos >= 0, q.pos == position { blocks[blocks.count - 1].frames += 1 } else {
                blocks.append(LaceTimes.Block(start: q.pts, frames: 1))
                position = q.pos
            }
        }
        pending = ahead
        // A look's ceiling stopped the reads: judged by a later read.
        guard !guardian.hit else { return }
        let st = stream(s).pointee
        let rate = Double(st.codecpar.pointee.sample_rate) * st.time_base.seconds
        lace.settle(LaceTimes.decide(blocks, lace: length, samplesPerTick: rate > 0 ? rate : nil))
        if laceScaleDamage == nil, let ratio = LaceTimes.scaleDamage(blocks, lace: length) { laceScaleDamage = (s, ratio) }
        laces?[s] = lace
    }


    /// libavformat's next packet; false at the end (or where damage ends what is readable).
    private func readFrame(into packet: Packet) throws(KilnError) -> Bool {
        var ret = av_read_frame(context, packet.pointer)
        // EAGAIN from a file is MPEG-TS giving up a resync after 64 kB without a sync byte
        // (a zeroed stretch): the next read goes on past it, as the ffmpeg command's does.
        // Read as an I/O error, a damaged recording failed as retryable, every time. Only
        // while the read position moves on, so nothing can spin.
        var position = avio_tell(context.pointee.pb)
        while ret == avErrorEAGAIN {
            ret = av_read_frame(context, packet.pointer)
            let now = avio_tell(context.pointee.pb)
            if ret == avErrorEAGAIN, now <= position { return false }
            position = now
        }
        if ret == avErrorEOF { return false }
        if ret < 0, guardian.hit {
            // A look's ceiling, not a cancellation: the file reads on from the next seek
            // (avio keeps an interrupted read's error and end until then).
            context.pointee.pb.pointee.error = 0
            context.pointee.pb.pointee.eof_reached = 0
            return false
        }
        if ret < 0 {
            // A read error past the point where the index said data exists: treat the
            // truncated tail as the end (what players do) unless it was a real I/O error.
            // ENOMEM here is a damaged size field asking for a packet past libavutil's
            // allocation limit, not a machine out of memory (Linux would kill us first):
            // the readable data ends there too, and verification judges what came before.
            if ret == kiln_averror_invaliddata() || ret == kiln_averror_enomem() { return false }
            // libavformat's Ogg reader replaces a stream at a new link only where the link has one.
            if ret == kiln_averror_patchwelcome(), chainsLinks, formatName == "ogg" {
                throw KilnError(.sourceUnsupported, stage: .demux, underlying: ret,
                                "the source is Ogg links chained one after another, each with more than one stream, which libavformat cannot read on")
            }
            throw classify(ret, .demux, "cannot read the source", as: .ioError)
        }
        return true
    }

    /// A packet just read from libavformat, noted: the streams' start marks and starts, and
    /// the furthest byte read.
    private func noted(_ packet: Packet) {
        let st = stream(Int(packet.streamIndex))
        let p = packet.pointer.pointee
        // libavformat sets a stream's start, where its analysis did not, when it learns a
        // packet's decode time: Matroska's H.264 with B-frames has none for its first
        // pictures, and a picture every 30 s outlasted the analysis, so the start became the
        // fourth picture's time, 60 s late, and the copy lost its first picture and showed
        // the rest early. The stream starts at its first packet read, as libavformat would
        // have said had the analysis read that far.
        if startMarks.note(p, of: st), st.pointee.start_time == noPTS, p.pts != noPTS { st.pointee.start_time = p.pts }
        if p.pos >= 0 { furthestByte = max(furthestByte, p.pos + Int64(max(p.size, 0))) }
    }

    /// How many of `stream`'s samples its MP4 index (as read so far: a fragmented file's
    /// fragments met) places past the file's end, wholly or in part: what a file cut short
    /// lost of it. Zero for other containers.
    func samplesPastEnd(stream index: Int) -> Int {
        guard indexesSampleSizes, fileBytes > 0, index >= 0, index < streamCount else { return 0 }
        let st = stream(index)
        let count = min(Int(avformat_index_get_entries_count(st)), 1 << 24)
        // Samples lie in file order within a stream: those past the end are its last ones.
        var lost = 0
        for k in stride(from: count - 1, through: 0, by: -1) {
            // (Compared as what is left: a damaged offset near 2^63 would overflow a sum.)
            guard let e = avformat_index_get_entry(st, Int32(k)), e.pointee.pos >= 0,
                  e.pointee.pos > fileBytes - Int64(max(e.pointee.size, 0)) else { break }
            lost += 1
        }
        return lost
    }
    private lazy var fileBytes: Int64 = FileIO.size(atPath: path).map { Int64($0) } ?? -1
    /// Whether the container's index gives every sample's size and place (MP4, QuickTime).
    private var indexesSampleSizes: Bool { formatName.hasPrefix("mov,") }

    /// Whether `p` ends where the file does, short of the size the MP4's index gives its
    /// sample: a download cut short inside its last sample (a fragment's index is whole
    /// before its data). libavformat hands over the bytes there are; a copy wrote the part
    /// of a picture, which decoders reported as damage at the output's end, counted nowhere.
    private func endsCutShort(_ p: AVPacket) -> Bool {
        guard p.pos >= 0, p.size >= 0, p.stream_index >= 0, p.stream_index < Int32(streamCount), fileBytes > 0,
              p.pos >= fileBytes - Int64(p.size), indexesSampleSizes else { return false }
        let st = stream(Int(p.stream_index))
        let count = avformat_index_get_entries_count(st)
        guard count > 0 else { return false }
        // The sample's entry, found by its position among those timed near it.
        let near = av_index_search_timestamp(st, p.dts, AVSEEK_FLAG_ANY | AVSEEK_FLAG_BACKWARD)
        let range = near >= 0 ? max(0, near - 8)...min(count - 1, near + 8) : max(0, count - 16)...(count - 1)
        for k in range {
            guard let e = avformat_index_get_entry(st, k), e.pointee.pos == p.pos else { continue }
            return Int(e.pointee.size) > Int(p.size)
        }
        return false
    }

    /// Per stream, its decode times' derivation (`DecodeTimes`), made at its first packet
    /// read; nil for every stream after a seek (the derivation starts again where the
    /// reading goes on), and for a stream whose times libavformat's are.
    private var decodeTimes: [DecodeTimes?] = []
    private var derivesDecodeTimes: [Bool]?

    private func deriveDecodeTime(_ packet: Packet) {
        let i = Int(packet.streamIndex)
        if derivesDecodeTimes == nil {
            derivesDecodeTimes = (0..<streamCount).map { DecodeTimes.applies(to: stream($0), in: context) }
            decodeTimes = Array(repeating: nil, count: streamCount)
        }
        guard let derives = derivesDecodeTimes, i >= 0, i < derives.count, derives[i] else { return }
        if decodeTimes[i] == nil { decodeTimes[i] = DecodeTimes.make(for: stream(i), firstDuration: packet.pointer.pointee.duration) }
        decodeTimes[i]!.time(&packet.pointer.pointee)
    }

    /// Whether the last `rewind` failed, or would have lost packets: the read position is
    /// then anywhere (a failed seek in a damaged index can leave it mid-file), so the
    /// demuxer must not be read on.
    private(set) var rewindFailed = false

    /// Whether this reader, sent back to the start, would read a fragment twice: an MP4 in
    /// movie fragments whose last fragment it has read (the probe's look at its end, or all
    /// of a short file). libavformat 5.1 then reads the last fragment again after the
    /// others: an HLS download of 2 s segments laid end to end gave its last 2 s twice, and
    /// the copy stopped at the times running back and re-encoded the picture. Set by the
    /// probe for any such file, whose run then opens it afresh.
    var readsFragmentsAgain = false
    /// Whether `rewind` sent this reader back while `readsFragmentsAgain`: it is not to be
    /// read from the start again (`ProbedSource.demuxer`).
    private(set) var rewoundThroughFragments = false

    /// Goes back to the first packet after the probe's packet scan, so the pipeline can
    /// reuse this demuxer instead of opening and analysing the file a second time. Checked,
    /// not assumed (`land`): a rewind that would skip or change a stream's first packet
    /// fails, and the caller opens the file afresh.
    /// - Parameter marks: where to land; by default where this demuxer's own reading
    ///   began. A second reader that has read nothing lands where the first one did.
    func rewind(to marks: StartMarks? = nil) throws(KilnError) {
        // Nothing read yet (the next read would be the first packet anyway): the first reads
        // say where to land. The seek still happens, for what it loads (Matroska's cues).
        if marks == nil && startMarks.isEmpty {
            let packet = try Packet()
            for _ in 0..<StartMarks.window where try read(into: packet) { packet.unref() }
        }
        let marks = marks ?? startMarks
        pending = []
        derivesDecodeTimes = nil
        followFromStart()
        guard let landing = Demuxer.land(context, atStartOf: marks) else {
            rewindFailed = true
            throw KilnError(.sourceUnreadable, stage: .demux, "cannot go back to the start of the source without losing its first packets")
        }
        rewindFailed = false
        rewoundThroughFragments = rewoundThroughFragments || readsFragmentsAgain
        pending = landing.held
        wasRewound = true
    }

    /// Whether the container can be read from any byte (demuxers find their next packet
    /// from there): the probe's looks at a file's end and across it.
    var readsFromAnyByte: Bool {
        context.pointee.pb != nil && context.pointee.iformat.pointee.flags & AVFMT_NO_BYTE_SEEK == 0
    }

    /// Seeks to byte `offset` and hands each packet read, in `packet`, to `body` until it
    /// says stop (false), the file ends, or `limit` packets were read. False if the seek
    /// failed. The packet is unreferenced after each call.
    /// Reads go no further than `bytes` past where they begin (`lookBytes`).
    @discardableResult
    func read(fromByte offset: Int64, limit: Int, bytes: Int64 = lookBytes, into packet: Packet, _ body: (Packet) -> Bool) -> Bool {
        // Where an earlier look read its whole share without a packet, a look from inside
        // that stretch finds none either: it is not read again (each of the surveys' many
        // looks into 200 MB of junk had read its 8 MB, 12 s of a probe's 30).
        if barren.contains(where: { offset >= $0.lowerBound && offset < $0.upperBound }) { return true }
        guard seek(stream: -1, to: offset, flags: AVSEEK_FLAG_BYTE | AVSEEK_FLAG_ANY) >= 0 else { return false }
        let look = readOn(limit: limit, bytes: bytes, into: packet, body)
        if look.reads == 0, look.atCeiling { barren.append(offset..<offset + bytes) }
        return true
    }

    /// Stretches of the file a look read through without finding a packet.
    private var barren: [Range<Int64>] = []

    /// The same from the last index entry at or before `seconds` (an indexed container).
    @discardableResult
    func read(fromSecond seconds: Double, limit: Int, into packet: Packet, _ body: (Packet) -> Bool) -> Bool {
        guard seek(stream: -1, to: Int64(seconds * Double(AV_TIME_BASE)), flags: AVSEEK_FLAG_BACKWARD) >= 0 else { return false }
        readOn(limit: limit, bytes: Self.lookBytes, into: packet, body)
        return true
    }

    /// How far past where a look begins its reads may go by default: a look wants a few
    /// packets there (the surveys stop at 8 MB of packets read). Every look into 30 MB of
    /// junk after a recording had read on through all of it (MPEG-TS finds a sync byte in
    /// random bytes every few hundred, and reads on in one call), and the probe ran out of
    /// time.
    static let lookBytes: Int64 = 8 << 20

    /// The time of the container's last index entry at or before `seconds` (Matroska's
    /// cues list one a cluster or a keyframe), in any stream's index: where a seek there
    /// reads from. An index built from what was read so far (a live-written file has no
    /// cues) holds the probe's first seconds and its last: a seek between reads on from the
    /// last entry before it, through the file.
    func indexEntry(atOrBefore seconds: Double) -> Double? {
        (0..<streamCount).compactMap { i -> Double? in
            let st = stream(i)
            let tb = st.pointee.time_base
            guard tb.num > 0, tb.den > 0 else { return nil }
            let found = av_index_search_timestamp(st, Int64(seconds * Double(tb.den) / Double(tb.num)), AVSEEK_FLAG_BACKWARD)
            guard found >= 0, let entry = avformat_index_get_entry(st, found)?.pointee else { return nil }
            return MediaEngine.seconds(entry.timestamp, tb)
        }.max()
    }

    /// The packets read (at most `limit`, at most `bytes` on from here), and whether the
    /// reads stopped at that ceiling.
    @discardableResult
    private func readOn(limit: Int, bytes: Int64, into packet: Packet, _ body: (Packet) -> Bool) -> (reads: Int, atCeiling: Bool) {
        if let pb = context.pointee.pb { guardian.set(ceiling: avio_tell(pb) + bytes) }
        defer {
            // The ceiling may have interrupted a read whose packet came out all the same (a
            // parser's flush): avio keeps that read's error, and the next read, a pipeline's,
            // returned it as a cancellation nobody asked for.
            if guardian.hit, let pb = context.pointee.pb { pb.pointee.error = 0; pb.pointee.eof_reached = 0 }
            guardian.set(ceiling: nil)
        }
        var reads = 0
        while reads < limit, (try? read(into: packet)) == true {
            reads += 1
            defer { packet.unref() }
            if !body(packet) { break }
        }
        return (reads, guardian.hit)
    }

    /// `av_seek_frame` on the context, dropping what a rewind held back: after a seek, the
    /// next read is wherever the seek went.
    ///
    /// The start's marks (`StartMarks`, where `rewind` goes back to) are the file's first
    /// packets: read before the first seek where nothing was read yet, and taken no further
    /// after it. A sound-only MP4 whose header outlasts its sound has its end looked at
    /// first (`Prober.presentedEnds`); its last packets became the marks, the rewind "went
    /// back" to them, and 30 s of sound came out as its last 0.1 s.
    func seek(stream: Int32, to timestamp: Int64, flags: Int32) -> Int32 {
        if startMarks.isEmpty, !wasRewound, let packet = try? Packet() {
            for _ in 0..<StartMarks.window where (try? read(into: packet)) == true { packet.unref() }
        }
        startMarks.seal()
        pending = []
        derivesDecodeTimes = nil
        followFromStart()
        if laces != nil { for i in laces!.indices { laces![i]?.reset() } }
        return av_seek_frame(context, stream, timestamp, flags)
    }

    /// Where a rewind landed: the packets it read to check, and what it checked against.
    private struct Landing {
        var marks: StartMarks
        var held: [Packet]
    }

    /// Seeks to the start, then reads until every stream `marks` knows has shown its first
    /// packet, which must be its mark (nil if one is not, or the seek fails). Containers
    /// with timestamp discontinuities (MPEG-TS/PS) go back by byte; indexed ones (MP4,
    /// Matroska) by time, to the earliest stream's first packet, through that stream's own
    /// index. A Matroska seek moves the one read position to an index entry and drops every
    /// block timed before that entry until a keyframe comes: through the video's index it
    /// lost a block of eight laced sound frames timed 1 ms before the first picture, and a
    /// sound frame stored after the first picture but timed before it. An MP4 seek to the
    /// file's start lost the AAC priming packet timed before zero.
    private static func land(_ ctx: UnsafeMutablePointer<AVFormatContext>, atStartOf marks: StartMarks) -> Landing? {
        guard !marks.isEmpty else { return nil }
        let ret: Int32
        if discontinuous(ctx) {
            ret = av_seek_frame(ctx, -1, 0, AVSEEK_FLAG_BYTE)
        } else if let lead = marks.lead {
            ret = avformat_seek_file(ctx, lead.stream, Int64.min, lead.time, lead.time, 0)
        } else {
            // No packet timed (raw streams): a seek by time to the file's start is what gives
            // the packets after it times, from the frame rate.
            let start = ctx.pointee.start_time == noPTS ? 0 : ctx.pointee.start_time
            ret = avformat_seek_file(ctx, -1, Int64.min, start, start, 0)
        }
        guard ret >= 0 else { return nil }
        var unseen = marks.first, held: [Packet] = []
        while !unseen.isEmpty {
            guard held.count < StartMarks.window * 4, let packet = try? Packet(), av_read_frame(ctx, packet.pointer) >= 0 else { return nil }
            let p = packet.pointer.pointee
            if let mark = unseen[p.stream_index] {
                guard mark == StartMarks.Mark(p) else { return nil }
                unseen[p.stream_index] = nil
            }
            held.append(packet)
        }
        return Landing(marks: marks, held: held)
    }

    /// Runs `body` (which reads packets), then puts every stream's codec parameters back as
    /// they were. libavformat's parsers rewrite them as packets go by: an AC-3 stream in a
    /// broadcast recording that turns 5.1 and 44.1 kHz a few seconds in leaves its new
    /// format there after the probe's packet scan, though the probe described, the plan
    /// chose and the rewound stream starts with the old one. A copy would then write a
    /// sample entry that does not match its first frames.
    func keepingParameters<T>(_ body: () throws(KilnError) -> T) throws(KilnError) -> T {
        var saved: [UnsafeMutablePointer<AVCodecParameters>?] = []
        for i in 0..<streamCount {
            let copy = avcodec_parameters_alloc()
            if let copy, avcodec_parameters_copy(copy, stream(i).pointee.codecpar) < 0 {
                var c: UnsafeMutablePointer<AVCodecParameters>? = copy
                avcodec_parameters_free(&c)
                saved.append(nil)
            } else {
                saved.append(copy)
            }
        }
        defer {
            // Streams the scan discovered (MPEG-TS adds them as they appear) have nothing to
            // restore, and parameters the analysis left incomplete (an audio stream that only
            // began past its window) keep what the scan learnt.
            for (i, copy) in saved.enumerated() {
                var c = copy
                if let copy, i < streamCount, Self.complete(copy.pointee) {
                    _ = avcodec_parameters_copy(stream(i).pointee.codecpar, copy)
                }
                avcodec_parameters_free(&c)
            }
        }
        return try body()
    }

    /// Whether codec parameters say what a copy needs: a picture size, or a sample rate and
    /// channel count.
    static func complete(_ par: AVCodecParameters) -> Bool {
        switch par.codec_type {
        case AVMEDIA_TYPE_VIDEO: return par.width > 0 && par.height > 0
        case AVMEDIA_TYPE_AUDIO: return par.sample_rate > 0 && par.ch_layout.nb_channels > 0
        default: return true
        }
    }

    /// Whether the container's timestamps may jump (MPEG-TS and friends).
    var hasDiscontinuousTimestamps: Bool { Demuxer.discontinuous(context) }

    /// libavformat's name for the container ("avi", "mpegts", "mov,mp4,m4a,3gp,3g2,mj2" …).
    var formatName: String { String(cString: context.pointee.iformat.pointee.name) }

    /// Whether the container is Matroska (or WebM, which libavformat reads as one).
    var isMatroska: Bool { formatName.hasPrefix("matroska") }

    /// Whether the container is a broadcast's or a disc's multiplex (MPEG-TS, program
    /// stream), whose sound libavformat cuts into frames with the declared codec's parser
    /// (`SoundCodecFollower`).
    var isMultiplex: Bool { ["mpegts", "mpeg"].contains(formatName) && hasDiscontinuousTimestamps }

    static func discontinuous(_ context: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        (context.pointee.iformat.pointee.flags & AVFMT_TS_DISCONT) != 0
    }
}

/// The first packet of each stream among a demuxer's first reads after it opens: what
/// going back to the start must find again, each first of its stream, or it skipped
/// something. Streams first seen later (a subtitle that starts minutes in) are not marked.
struct StartMarks {
    /// A packet as a rewind compares it. Not its decode time, which libavformat derives
    /// for some containers (Matroska) and may derive anew after a seek.
    struct Mark: Equatable {
        var pts: Int64
        var size: Int32
        var keyframe: Bool
        init(_ p: AVPacket) {
            pts = p.pts
            size = p.size
            keyframe = p.flags & AV_PKT_FLAG_KEY != 0
        }
    }
    /// Reads after opening that mark streams.
    static let window = 64
    private(set) var first: [Int32: Mark] = [:]
    /// Each marked stream's first time to seek to: its decode time where the container
    /// gives one, else its presentation time, in the stream's time base and in AV_TIME_BASE.
    private var times: [Int32: (own: Int64, common: Int64)] = [:]
    private var reads = 0

    var isEmpty: Bool { first.isEmpty }

    /// Notes nothing more (the reader has left the start).
    mutating func seal() { reads = Self.window }

    /// True where `p` is the first packet of its stream since the file was opened.
    @discardableResult
    mutating func note(_ p: AVPacket, of stream: UnsafeMutablePointer<AVStream>) -> Bool {
        guard reads < Self.window else { return false }
        reads += 1
        // An attached picture (cover art) is no part of the timeline: libavformat hands it
        // out again after every seek, timed then.
        guard first[p.stream_index] == nil, stream.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { return false }
        let timeBase = stream.pointee.time_base
        first[p.stream_index] = Mark(p)
        let t = p.dts != noPTS ? p.dts : p.pts
        if t != noPTS { times[p.stream_index] = (t, rescale(t, from: timeBase, to: kiln_time_base_q())) }
        return true
    }

    /// The stream that starts earliest, and its start in its own time base: a seek there,
    /// through that stream's own index, has nothing of any stream before it to drop.
    var lead: (stream: Int32, time: Int64)? {
        times.min { ($0.value.common, $0.key) < ($1.value.common, $1.key) }.map { ($0.key, $0.value.own) }
    }
}

/// A file opened for a demuxer that may later skim (skim_reader.c): a small buffer, so
/// that most of a video stream's bytes come as reads that skimming can spare.
final class SkimReader {
    let reader: OpaquePointer
    /// The structure (element and chunk headers) comes through the buffer; with 4 kB, a
    /// payload read past it is usually most of the packet.
    static let bufferBytes: Int32 = 4096

    /// - Parameter order: read the file as these pieces laid end to end, its patches read
    ///   as they say (`Prober.FragmentWalk.reordered`, `Prober.ClusterWalk.reordered`).
    init(path: String, order: ReadOrder? = nil) throws(KilnError) {
        var error: Int32 = 0
        guard let r = kiln_skim_reader_open(path, Self.bufferBytes, &error) else {
            throw KilnError(error == kiln_averror_enomem() ? .resourceLimit : .sourceUnreadable, stage: .open, underlying: error,
                            "cannot open the source (\(avErrorText(error)))")
        }
        reader = r
        if let order {
            let bytes = order.patches.flatMap { $0.bytes + Array(repeating: 0, count: 16 - $0.bytes.count) }
            if kiln_skim_reader_reorder(r, order.pieces.map(\.from), order.pieces.map(\.length), Int32(order.pieces.count),
                                        order.patches.map(\.at), bytes, order.patches.map { Int32($0.bytes.count) },
                                        Int32(order.patches.count)) < 0 {
                throw KilnError(.resourceLimit, stage: .open, "out of memory opening the source")
            }
        }
    }

    var io: UnsafeMutablePointer<AVIOContext> { kiln_skim_reader_io(reader) }

    deinit {
        var r: OpaquePointer? = reader
        kiln_skim_reader_free(&r)
    }
}

/// The range of times Kiln works with: ±2^62 (in microseconds, and in a stream's own ticks),
/// so that the sum or difference of any two (a start and a duration, a presentation and a
/// decode time) stays a 64-bit number. A time beyond it is no time.
///
/// libavformat passes on whatever a container says: a Matroska file whose clock starts
/// 292,000 years in (its times near 2^63 µs) made the run trap on `start + duration`. Real
/// recordings stay far inside: times counted from 1970 in microseconds are near 2^51.
enum TimeLimit {
    static let bound: Int64 = 1 << 62

    /// Whether `time` (in `timeBase`) is a time within the range, in its ticks and in µs.
    static func within(_ time: Int64, _ timeBase: AVRational) -> Bool {
        guard time != noPTS, (-bound...bound).contains(time) else { return false }
        let micro = rescale(time, from: timeBase, to: kiln_time_base_q())
        return micro != noPTS && (-bound...bound).contains(micro)
    }

    /// A packet's times beyond the range become no times (as a damaged packet's are read),
    /// a length beyond it none.
    static func clear(_ packet: Packet, in stream: UnsafeMutablePointer<AVStream>) {
        let tb = stream.pointee.time_base
        let p = packet.pointer
        if p.pointee.pts != noPTS, !within(p.pointee.pts, tb) { p.pointee.pts = noPTS }
        if p.pointee.dts != noPTS, !within(p.pointee.dts, tb) { p.pointee.dts = noPTS }
        if p.pointee.duration != 0, !within(p.pointee.duration, tb) || p.pointee.duration < 0 { p.pointee.duration = 0 }
    }

    /// Refuses a source whose streams start beyond the range (every time it has would be
    /// none), and forgets durations that end beyond it: a container's word on its length is
    /// only a hint, and its packets say where it ends.
    static func check(_ ctx: UnsafeMutablePointer<AVFormatContext>) throws(KilnError) {
        let micro = kiln_time_base_q()
        var starts = [(ctx.pointee.start_time, micro)]
        for i in 0..<Int(ctx.pointee.nb_streams) {
            guard let st = ctx.pointee.streams[i] else { continue }
            starts.append((st.pointee.start_time, st.pointee.time_base))
        }
        for (start, tb) in starts where start != noPTS && !within(start, tb) {
            // Within the range in µs: the stream's own ticks are past it.
            if within(rescale(start, from: tb, to: micro), micro) {
                throw KilnError(.sourceUnsupported, stage: .open,
                                "its times start at tick \(start) of a \(tb.num)/\(tb.den) s clock, beyond the ±2^62 ticks Kiln counts in")
            }
            let years = Double(start) * tb.seconds / (365.25 * 86_400)
            throw KilnError(.sourceUnsupported, stage: .open,
                            "its times start \(Int(years.rounded())) years in, beyond the ±146,000 years (2^62 µs) Kiln counts in")
        }
        ctx.pointee.duration = ending(ctx.pointee.duration, after: ctx.pointee.start_time, micro)
        for i in 0..<Int(ctx.pointee.nb_streams) {
            guard let st = ctx.pointee.streams[i] else { continue }
            st.pointee.duration = ending(st.pointee.duration, after: st.pointee.start_time, st.pointee.time_base)
        }
    }

    /// `duration`, or no time when it or the end it gives lies beyond the range.
    private static func ending(_ duration: Int64, after start: Int64, _ tb: AVRational) -> Int64 {
        guard duration != noPTS else { return duration }
        let (end, overflow) = (start == noPTS ? 0 : start).addingReportingOverflow(duration)
        return duration >= 0 && within(duration, tb) && !overflow && within(end, tb) ? duration : noPTS
    }
}

/// Where each coding of a stream whose coding changes along a fragmented MP4 is read
/// (`FragmentWalk.codingSwitches`): fragment by fragment, as the file is read (its
/// fragments may be read in another order than stored, `ReadOrder`).
struct CodingSwitch {
    /// Read positions where a run of fragments in one coding begins, ascending, and that
    /// coding (an index into `configs`).
    var starts: [Int64] = []
    var codings: [Int] = []
    /// Each header's decoder configuration for the stream (the first header's first).
    var configs: [[UInt8]?] = []
    /// The coding last handed to a decoder; nil before the first packet and after a seek.
    var given: Int?

    /// The coding of a packet read at `position` (the first header's where unknown).
    func coding(at position: Int64) -> Int {
        guard position >= 0, let k = starts.lastIndex(atOrBefore: position, by: { $0 }) else { return 0 }
        return codings[k]
    }

    /// Per stream of `context` whose track changes: `tracks` (each header's coding from
    /// which stored fragment on), the fragments' stored places and where each is read.
    static func read(_ tracks: [UInt32: [(from: Int64, config: [UInt8]?)]], fragments: [Int64], laid: [Int64?],
                     context: UnsafeMutablePointer<AVFormatContext>) -> [Int: CodingSwitch] {
        var found: [Int: CodingSwitch] = [:]
        for i in 0..<Int(context.pointee.nb_streams) {
            guard let st = context.pointee.streams[i], let list = tracks[UInt32(bitPattern: st.pointee.id)] else { continue }
            var change = CodingSwitch(configs: list.map(\.config))
            var runs: [(start: Int64, coding: Int)] = []
            for (k, stored) in fragments.enumerated() {
                guard let at = laid[k] else { continue }
                runs.append((at, list.lastIndex { $0.from <= stored } ?? 0))
            }
            runs.sort { $0.start < $1.start }
            for run in runs where change.codings.last != run.coding {
                change.starts.append(run.start)
                change.codings.append(run.coding)
            }
            found[i] = change
        }
        return found
    }
}

/// The times of a stream's fragments read under a header that times the track in another
/// timescale than the first (`FragmentWalk.rescaled`). libavformat reads every fragment in
/// the first header's timescale: each such fragment's `tfdt` is patched to its time in it
/// (`FragmentWalk.rewrite`), and its samples' times from there, which libavformat adds up
/// in the fragment's own ticks, are scaled here: 1,024 samples at 44.1 kHz had been read as
/// 1,024 ticks at 48 kHz, the sound 8 % short and out of step.
struct TimeScaling {
    /// Per fragment holding the stream's samples, in read order: where it is read, its
    /// time as read (in the first timescale), and the first timescale over its own (1/1
    /// for a fragment in the first's).
    var starts: [Int64] = []
    var bases: [Int64] = []
    var ratios: [(first: Int64, own: Int64)] = []

    func retime(_ p: inout AVPacket) {
        guard p.pos >= 0, let k = starts.lastIndex(atOrBefore: p.pos, by: { $0 }) else { return }
        let (num, den) = ratios[k], base = bases[k]
        guard num != den else { return }
        func scaled(_ t: Int64) -> Int64 { t == kiln_nopts_value() ? t : base + av_rescale(t - base, num, den) }
        p.pts = scaled(p.pts)
        p.dts = scaled(p.dts)
        if p.duration > 0 { p.duration = av_rescale(p.duration, num, den) }
    }

    /// `fragments`: the walk's fragments' stored places; `laid`: where each is read.
    static func read(_ walk: Prober.FragmentWalk, fragments stored: [Int64], laid: [Int64?],
                     context: UnsafeMutablePointer<AVFormatContext>) -> [Int: TimeScaling] {
        let shifts = walk.recordingShifts()
        var found: [Int: TimeScaling] = [:]
        for i in 0..<Int(context.pointee.nb_streams) {
            guard let st = context.pointee.streams[i] else { continue }
            let track = UInt32(bitPattern: st.pointee.id)
            let mine = walk.rescaled.filter { $0.track == track }
            guard !mine.isEmpty else { continue }
            let byFragment = Dictionary(mine.map { ($0.fragment, $0) }, uniquingKeysWith: { a, _ in a })
            var runs: [(start: Int64, base: Int64, ratio: (first: Int64, own: Int64))] = []
            for (k, offset) in stored.enumerated() {
                guard let at = laid[k] else { continue }
                if let r = byFragment[offset] {
                    let base = Int64(clamping: r.time) + walk.shiftTicks(shifts, track: track, recording: r.recording)
                    runs.append((at, base, (Int64(r.scale.first), Int64(r.scale.own))))
                } else {
                    runs.append((at, 0, (1, 1)))
                }
            }
            runs.sort { $0.start < $1.start }
            found[i] = TimeScaling(starts: runs.map(\.start), bases: runs.map(\.base), ratios: runs.map(\.ratio))
        }
        return found
    }
}

/// Files chained one after another: Ogg links (`cat a.ogg b.ogg`, a recording of an Icecast
/// stream whose every song is a link) and FLAC files joined with `cat`. Each link begins
/// with its own headers and times its packets from zero again, in its own rate. libavformat
/// hands the new link's times on as they are, going back: the pipeline left out everything
/// timed before what it had written, whole Vorbis songs among them (1.02 s of 1.56, exit 0),
/// an Ogg FLAC link at 48 kHz after one at 44.1 came out 9 % long, timed in the first link's
/// samples, and of two FLAC files joined 2.6 s of 5 came out (exit 0). Each link is put after
/// the one before, its times counted in the stream's time base from where that one ended.
///
/// A link begins where a packet's time runs back to its zero (or before it: an encoder's
/// priming, Opus's pre-skip) after the link before had gone past it. Its rate is its
/// headers': Vorbis's identification header and Ogg FLAC's STREAMINFO come as packets
/// timed at zero, a joined FLAC file's header glued to the end of the frame before it
/// (libavformat reads a new Opus link's headers itself; Opus is timed at 48 kHz whatever
/// its rate). Vorbis's headers go on to its decoder, which takes them up; FLAC's are left
/// out (`follow` says so, or cuts the frame they are glued to): neither a decoder nor an
/// MP4 track takes them as sound, and a copy wrote them as samples, 0.15 s of nothing at
/// every Ogg join and a frame that failed its CRC at every `cat` join.
struct LinkChain {
    /// The first link's rate and block sizes (a Vorbis identification header, from the
    /// stream's extradata); nil where unknown or not Vorbis.
    let first: (rate: Int, blocks: UInt8)?
    /// A later link in another rate or block sizes: libavformat's Vorbis parser goes on
    /// timing its packets by the first link's block sizes (a link at 22,050 Hz after one at
    /// 44,100 came out twice its length), so its times cannot be taken. Why; nil otherwise.
    private(set) var unfollowable: String?
    /// Where the packets read so far end (the stream's time base); nil before the first.
    var end: Int64?
    /// Where the current link's packets end in its own times; nil before its first timed one.
    private var linkEnd: Int64?
    /// Where the current link's time zero lies, and its rate over the stream's (a link at
    /// 11,025 Hz after one at 8,000 is timed in its own samples); nil in the first link.
    var link: (start: Int64, num: Int64, den: Int64)?
    /// An Ogg FLAC link's header packets are being read (between its STREAMINFO and its
    /// first frame).
    private var inFLACHeaders = false
    /// The rate of a joined FLAC file whose header was glued to the frames before its first
    /// (`FLACJoin`).
    private var nextRate: Int?

    init(first: (rate: Int, blocks: UInt8)?) { self.first = first }

    /// Retimes `p` into the chain; false for a packet to leave out (an Ogg FLAC link's headers).
    mutating func follow(_ p: inout AVPacket, codec: AVCodecID, timeBase: AVRational) -> Bool {
        // A link's last packet may state a length of four billion ticks (its end trimmed by
        // a granule before its start, read as unsigned): no length, then.
        if p.duration > 0, Double(p.duration) * timeBase.seconds > 10 { p.duration = 0 }
        guard let data = p.data else { return true }
        let bytes = UnsafeBufferPointer(start: data, count: Int(p.size))
        let time = p.pts != kiln_nopts_value() ? p.pts : p.dts
        let flacRate = codec == AV_CODEC_ID_FLAC ? Self.flacStreamRate(bytes) : nil
        if let end, time != kiln_nopts_value(), time <= 0, let linkEnd, linkEnd > 0, timeBase.num > 0 {
            // A new link: its time zero where the last one ended.
            let streamRate = Int64(timeBase.den) / Int64(timeBase.num)
            let vorbis = codec == AV_CODEC_ID_VORBIS ? Self.identification(bytes) : nil
            let rate = vorbis.map { Int64($0.rate) } ?? (flacRate ?? nextRate).map(Int64.init) ?? streamRate
            link = (end, streamRate, rate)
            self.linkEnd = nil
            nextRate = nil
            if unfollowable == nil, let first, let vorbis, first.rate != vorbis.rate || first.blocks != vorbis.blocks {
                unfollowable = "its Ogg Vorbis links are chained at another rate or block size (\(first.rate) Hz, then \(vorbis.rate) Hz), "
                    + "which libavformat does not time"
            }
        }
        if codec == AV_CODEC_ID_FLAC {
            // The STREAMINFO packet, then metadata blocks up to the first frame (its sync code).
            if flacRate != nil { inFLACHeaders = true }
            if inFLACHeaders, !FLACFrameHeader.beginsFrame(bytes) { return false }
            inFLACHeaders = false
        }
        if time != kiln_nopts_value() { linkEnd = max(linkEnd ?? time, time + max(0, p.duration)) }
        if let link {
            func moved(_ t: Int64) -> Int64 { t == kiln_nopts_value() ? t : link.start + av_rescale(t, link.num, link.den) }
            p.pts = moved(p.pts)
            p.dts = moved(p.dts)
            if p.duration > 0 { p.duration = av_rescale(p.duration, link.num, link.den) }
        }
        let moved = p.pts != kiln_nopts_value() ? p.pts : p.dts
        if moved != kiln_nopts_value() { end = max(end ?? moved, moved + max(0, p.duration)) }
        return true
    }

    /// The times of a joined FLAC file's pieces (`FLACJoin`), in their links' own ticks
    /// (samples): the first file's last frames where its packets end, the second's from
    /// zero, which begins the link at its STREAMINFO's rate.
    mutating func place(_ frames: [FLACJoin.Frame], rate: Int) -> [Int64] {
        nextRate = rate
        var before = linkEnd ?? 0, after: Int64 = 0
        return frames.map { f in
            defer { if f.nextFile { after += Int64(f.samples) } else { before += Int64(f.samples) } }
            return f.nextFile ? after : before
        }
    }

    /// Whether a second link has begun.
    var chained: Bool { link != nil }

    /// The rate and block sizes a Vorbis identification header states (`\x01vorbis`, its
    /// version, channels, rate little-endian at 12, three bit rates, the block sizes' byte
    /// at 28); nil for any other packet.
    static func identification(_ b: UnsafeBufferPointer<UInt8>) -> (rate: Int, blocks: UInt8)? {
        guard b.count >= 30, b[0] == 1, b[1] == 0x76, b[2] == 0x6F, b[3] == 0x72, b[4] == 0x62, b[5] == 0x69, b[6] == 0x73 else { return nil }
        let rate = Int(b[12]) | Int(b[13]) << 8 | Int(b[14]) << 16 | Int(b[15]) << 24
        return rate > 0 ? (rate, b[28]) : nil
    }

    /// The rate an Ogg FLAC stream's first header packet states: 0x7F "FLAC", the mapping's
    /// version and header count, then "fLaC" and STREAMINFO as a FLAC file begins
    /// (`FLACJoin.streamInfo`); nil for any other packet.
    static func flacStreamRate(_ b: UnsafeBufferPointer<UInt8>) -> Int? {
        guard b.count >= 13, b[0] == 0x7F, b[1] == 0x46, b[2] == 0x4C, b[3] == 0x41, b[4] == 0x43,
              let rate = FLACJoin.streamInfo(b, at: 9)?.rate else { return nil }
        return rate > 0 ? rate : nil
    }

    /// The first link's identification header, among the headers a Vorbis stream's
    /// extradata laces together (libavformat's Xiph lacing: a count, sizes, then the headers).
    static func identification(extradata par: AVCodecParameters) -> (rate: Int, blocks: UInt8)? {
        guard par.codec_id == AV_CODEC_ID_VORBIS, let data = par.extradata, par.extradata_size >= 30 else { return nil }
        let bytes = UnsafeBufferPointer(start: data, count: Int(par.extradata_size))
        for k in 0..<min(8, bytes.count - 30) where bytes[k] == 1 {
            if let found = identification(UnsafeBufferPointer(rebasing: bytes[k...])) { return found }
        }
        return nil
    }
}
