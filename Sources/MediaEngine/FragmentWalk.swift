#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore
import Synchronization

/// A fragmented MP4's fragments as stored, walked once a file: which are stored out of the
/// order of their times, where a second recording begins after the first, and how to read
/// them in the order of their times, one recording after the other.
extension Prober {
    /// A movie fragment stored after a later one of its track: `time`, its `tfdt`, lies
    /// before `after`, the latest of the track's fragments stored before it (both in the
    /// track's timescale), and no fragment before it began there.
    struct FragmentDisorder: Equatable {
        let track: UInt32
        let time: UInt64
        let after: UInt64
        /// Where its `moof` begins.
        let offset: Int64
    }

    /// A fragmented MP4's fragments as stored (`fragmentWalk`).
    struct FragmentWalk {
        /// The first fragment stored out of the order of its times; nil if none.
        var disorder: FragmentDisorder?
        /// Each fragment: where its `moof` begins (it runs to the next one's, or the file's
        /// end), its earliest track fragment's time in seconds (nil: one not timed), and the
        /// recording it belongs to (0: the first; see `recordings`).
        var fragments: [(offset: Int64, seconds: Double?, recording: Int)] = []
        /// Whether every track fragment finds its samples from its own `moof` (no
        /// `base_data_offset`, which is a place in the file): a fragment may then be read
        /// from elsewhere.
        var movable = true
        /// Where each `sidx` and `mfra` begins: they give fragments' places in the file.
        var placed: [Int64] = []
        /// Each `sidx`: where it begins and its size.
        var segmentIndexes: [(offset: Int64, size: Int64)] = []
        /// Whether every track fragment that places its samples by an offset in the file
        /// (`base_data_offset`) gives its `moof`'s place before the `sidx` boxes stored ahead
        /// of it were put in: the file as written with them left out. ffmpeg 5.1's
        /// `global_sidx` does so (the offsets written first, the index inserted after): read
        /// as stored, every fragment's samples were taken from the bytes before them (25 of
        /// 500 pictures decoded) and the file went out as it was.
        var indexInsertedAfter = false
        let size: Int64
        /// How many recordings the fragments hold: after one header (`moov`), a recording's
        /// fragments laid after another's, their times starting again (a capture appended to
        /// an earlier one, segments of two sessions downloaded into one file). 1: one.
        var recordings = 1
        /// Where the first fragment of the second recording begins.
        var secondRecording: Int64?
        /// A header (`moov`) after the first whose track is coded otherwise (`Coding`: its
        /// parameter sets, size, channels): a recording laid after another with its own
        /// header (two captures joined with `cat`, a download that kept each part's init
        /// segment). libavformat reads the first header only, so that track's later
        /// samples were decoded with the first's parameter sets: pictures broken from the
        /// join on, exit 0. The track and where that header lies; nil if none.
        var codingChange: (track: UInt32, offset: Int64)? {
            for header in laterHeaders {
                if let track = header.codings.keys.sorted().first(where: { t in firstCodings[t].map { $0 != header.codings[t] } ?? false }) {
                    return (track, header.offset)
                }
            }
            return nil
        }
        /// The first header's picture and sound tracks' codings and timescales, and each
        /// later header's (`LaterHeader`), in the order stored.
        var firstCodings: [UInt32: Coding] = [:]
        var firstTimescales: [UInt32: UInt32] = [:]
        var laterHeaders: [LaterHeader] = []
        /// Each track fragment read under a later header that times its track in another
        /// timescale than the first (sound at 44.1 kHz after 48 kHz: its `mdhd` timescale
        /// is its rate), which libavformat reads in the first's: its moof's place, its track,
        /// its time put in the first's timescale (which its `tfdt` is patched to), its
        /// recording, and the two timescales (the first's, its own).
        var rescaled: [(fragment: Int64, track: UInt32, time: UInt64, recording: Int, scale: (first: UInt32, own: UInt32))] = []
        /// The `tfdt` of each track fragment of the recordings after the first: where its
        /// time lies in the file, whether in 64 bits, the time, its track and recording.
        var retimed: [(at: Int64, wide: Bool, time: UInt64, track: UInt32, recording: Int)] = []
        /// Per track, per recording, the earliest time a fragment begins and the latest one
        /// ends (in the track's timescale).
        var spans: [UInt32: [Int: (start: UInt64, end: UInt64)]] = [:]
        /// Each track's time base, as libavformat gives it (one over its timescale).
        var timeBases: [UInt32: AVRational] = [:]
        /// The first fragment of a recording after the first whose samples are placed by an
        /// offset in the file (`base_data_offset`) that is not its own `moof`'s: the offset
        /// its writer gave before the recording was laid after another.
        var strayOffset: Int64?

        /// The file's bytes in the order of its fragments' times, one recording after the
        /// other, as `(from, length)` pieces laid end to end (the head first; fragments of
        /// one time in their stored order: one written twice stays beside itself); the boxes
        /// giving places in the file (`placed`) read as `free`, so that libavformat looks for
        /// the fragments where they are read; and each recording after the first timed to
        /// follow the one before (`joinedTimes`). Nil where the fragments cannot be moved
        /// or the recordings cannot be joined (`joinProblem`).
        func rewrite() -> ReadOrder? {
            guard !fragments.isEmpty else { return nil }
            if indexInsertedAfter {
                // The file as written before its `sidx` boxes went in (they index the
                // fragments where they lie, which nothing needs once read so); an `mfra`
                // read as free. Out of order or appended as well: not moved.
                guard disorder == nil, recordings == 1 else { return nil }
                var pieces: [ReadOrder.Piece] = [], from: Int64 = 0
                var patches: [ReadOrder.Patch] = []
                for index in segmentIndexes.sorted(by: { $0.offset < $1.offset }) {
                    if index.offset > from { pieces.append(ReadOrder.Piece(from: from, length: index.offset - from)) }
                    from = index.offset + index.size
                }
                if from < size { pieces.append(ReadOrder.Piece(from: from, length: size - from)) }
                for box in placed where !segmentIndexes.contains(where: { $0.offset == box }) {
                    let before = segmentIndexes.filter { $0.offset < box }.reduce(Int64(0)) { $0 + $1.size }
                    patches.append(ReadOrder.Patch(at: box - before + 4, bytes: Array("free".utf8)))
                }
                return ReadOrder(pieces: pieces, patches: patches.sorted { $0.at < $1.at })
            }
            var order = Array(fragments.indices)
            if disorder != nil {
                guard movable, fragments.allSatisfy({ $0.seconds != nil }) else { return nil }
                order.sort { (fragments[$0].recording, fragments[$0].seconds!, $0) < (fragments[$1].recording, fragments[$1].seconds!, $1) }
            }
            // A fragment runs to the next one's `moof`, the last to the file's end;
            // `readAt` is where a byte of the file is read.
            let spans = fragments.indices.map { k in fragments[k].offset..<(k + 1 < fragments.count ? fragments[k + 1].offset : size) }
            var (laid, readAt) = ReadOrder.laying(spans, in: order, size: size)
            // A box's type is 4 bytes on from its start.
            var patches = placed.map { ReadOrder.Patch(at: readAt($0 + 4), bytes: Array("free".utf8)) }
            if recordings > 1 || !rescaled.isEmpty {
                let joined = joinedTimes()
                guard joined.problem == nil else { return nil }
                // A value's `length` bytes, big-endian, as the box holds it.
                func bytes(_ value: UInt64, _ length: Int) -> [UInt8] { (0..<length).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(length - 1 - $0))) } }
                patches += joined.times.map { ReadOrder.Patch(at: readAt($0.at), bytes: bytes($0.value, $0.length)) }
            }
            laid.patches = patches.sorted { $0.at < $1.at }
            return laid
        }

        /// The most channels a sound track has in any header (nil where none says).
        func mostChannels(_ track: UInt32) -> Int? {
            ([firstCodings[track]] + laterHeaders.map { $0.codings[track] }).compactMap { $0?.channels }.max()
        }

        /// Each track whose coding a later header changes (`codingChange`), with the coding
        /// each header gives it: from the first fragment stored after that header on
        /// (`from`; 0 for the first header's), the decoder configuration a decoder must be
        /// given there (`AV_PKT_DATA_NEW_EXTRADATA`: `avcC`, `hvcC`, the AudioSpecificConfig;
        /// nil for sound that describes itself frame by frame, AC-3 and E-AC-3). Or why the
        /// change cannot be followed by a decoder: another codec, a coding whose
        /// configuration Kiln does not know how to hand over, another timescale in a fragment
        /// that gives no time of its own (`rescaled`).
        func codingSwitches() -> (tracks: [UInt32: [(from: Int64, config: [UInt8]?)]], problem: String?) {
            var tracks: [UInt32: [(from: Int64, config: [UInt8]?)]] = [:]
            let stored = fragments.map(\.offset)
            for (track, first) in firstCodings.sorted(by: { $0.key < $1.key })
            where laterHeaders.contains(where: { $0.codings[track].map { $0 != first } ?? false }) {
                var list: [(from: Int64, config: [UInt8]?)] = [(0, first.config)]
                for header in laterHeaders {
                    guard let coding = header.codings[track] else { continue }
                    if let problem = Self.switchProblem(track: track, from: first, to: coding) { return ([:], problem) }
                    // Its coding holds from the first fragment stored after it.
                    guard let next = stored.first(where: { $0 > header.offset }) else { continue }
                    list.append((next, coding.config))
                }
                tracks[track] = list
            }
            // Times in another timescale are followed only where each fragment gives its time.
            if !rescaled.isEmpty, let untimed = fragments.first(where: { $0.seconds == nil }) {
                return ([:], "the fragment at byte \(untimed.offset) gives no time of its own (tfdt), and a track's timescale changes")
            }
            return (tracks, nil)
        }

        /// A recording's move in seconds (`recordingShifts`), in track `track`'s ticks, as
        /// `joinedTimes` moves its `tfdt`s.
        func shiftTicks(_ shifts: [Double], track: UInt32, recording: Int) -> Int64 {
            guard recordings > 1, recording < shifts.count, let base = timeBases[track], base.num > 0, base.den > 0 else { return 0 }
            return Int64((shifts[recording] * Double(base.den) / Double(base.num)).rounded())
        }

        /// Why a decoder set up for `first` cannot go on with `later`'s samples; nil where
        /// it can, given `later.config` at the switch.
        static func switchProblem(track: UInt32, from first: Coding, to later: Coding) -> String? {
            let family = { (type: String) -> String in ["avc1": "avc", "avc3": "avc", "hvc1": "hevc", "hev1": "hevc"][type] ?? type }
            guard family(first.type) == family(later.type) else {
                return "track \(track) goes on in another codec (\(first.type), then \(later.type))"
            }
            let selfDescribing: Set<String> = ["ac-3", "ec-3"]
            guard later.config != nil || selfDescribing.contains(later.type),
                  ["avc", "hevc", "mp4a"].contains(family(later.type)) || selfDescribing.contains(later.type) else {
                return "track \(track)'s coding (\(later.type)) changes in a way a decoder cannot be told of"
            }
            return nil
        }

        /// Why the recordings cannot be read one after the other, in a sentence's end; nil
        /// where they can (or there is one).
        var joinProblem: String? { recordings > 1 ? joinedTimes().problem : nil }

        /// The new `tfdt` of every track fragment of the recordings after the first: each
        /// recording moved as one, all its tracks by the same time, so that it begins where
        /// the recordings before it end (the latest of their tracks' ends), as a
        /// concatenation does. Its sound keeps its place against its pictures; the track that
        /// ended first has the difference as a gap, at most a frame's length most often.
        /// (Moving each track to its own end instead shifted sound against pictures by that
        /// difference at every join, adding up over many.)
        /// Each recording's move, in seconds: from its earliest start to the latest end before it.
        func recordingShifts() -> [Double] {
            func seconds(_ track: UInt32, _ time: UInt64) -> Double? { timeBases[track].map { Double(time) * $0.seconds } }
            var shift = [Double](repeating: 0, count: recordings)
            var reach: Double?
            for r in 0..<recordings {
                let mine = spans.compactMap { track, per in per[r].map { (track, $0) } }
                if r > 0, let reach, let start = mine.compactMap({ seconds($0.0, $0.1.start) }).min() { shift[r] = reach - start }
                for (track, span) in mine {
                    if let end = seconds(track, span.end) { reach = max(reach ?? end + shift[r], end + shift[r]) }
                }
            }
            return shift
        }

        func joinedTimes() -> (times: [(at: Int64, length: Int, value: UInt64)], problem: String?) {
            if let strayOffset {
                return ([], "the fragment at byte \(strayOffset) finds its samples by an offset in the file (base_data_offset) that is not its own, as its writer placed it before the recordings were laid end to end")
            }
            let shift = recordingShifts()
            var times: [(at: Int64, length: Int, value: UInt64)] = []
            times.reserveCapacity(retimed.count)
            for t in retimed {
                guard timeBases[t.track].map({ $0.num > 0 && $0.den > 0 }) == true else {
                    return ([], "track \(t.track) is not one the file's header declares")
                }
                let ticks = shiftTicks(shift, track: t.track, recording: t.recording)
                let (moved, overflow) = Int64(clamping: t.time).addingReportingOverflow(ticks)
                guard !overflow, moved >= 0, t.wide || moved <= Int64(UInt32.max) else {
                    return ([], "track \(t.track)'s time at byte \(t.at) cannot hold the joined time in its \(t.wide ? 64 : 32) bits")
                }
                times.append((t.at, t.wide ? 8 : 4, UInt64(moved)))
            }
            return (times, nil)
        }
    }

    /// The fragments of a fragmented MP4 as stored: the first stored out of the order of
    /// its times (a segment downloader that writes segments as they arrive, several fetched
    /// at once), and where a new recording begins. libavformat reads fragments as stored
    /// and marks the late one's packets not shown: a copy lost its second, a transcode two,
    /// each exit 0 with a gap of silence; and a second recording appended after the first
    /// was lost whole, exit 0. A fragment written again (its time and samples those of one
    /// before) is no disorder, nor a time skipped (one missing). A time that comes back to
    /// where no fragment of its recording lay is a disorder; one that comes back into the
    /// time its recording's fragments already cover (judged at its middle: a fragment's
    /// last sample may overrun the next by a few ticks), or whose sequence number (`mfhd`)
    /// that recording's fragments already used, begins a new recording. Every top-level
    /// box header, the `moov` and every `moof` is read (one read a fragment, most often);
    /// what is kept is a few numbers a fragment, as libavformat's own fragment index keeps.
    /// The walk ends at a damaged box; a `traf` without `tfdt` is timed by its order.
    /// `timeBase` gives a track's time base (nil: a track libavformat lacks).
    static func fragmentWalk(_ path: String, timeBase: (UInt32) -> AVRational? = { _ in nil }) -> FragmentWalk? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
        var st = stat()
        guard fstat(file.rawValue, &st) == 0 else { return nil }
        // A probe and a run open the file a dozen times: it is walked once (the same file:
        // path, inode, size and modification time).
        let identity = WalkedFile(path: path, st)
        if let last = lastWalk.withLock({ $0 }), last.file == identity { return last.walk }
        let walk = walkFragments(file, fileSize: identity.size, timeBase: timeBase)
        lastWalk.withLock { $0 = (identity, walk) }
        return walk
    }

    /// A file as walked: the same path, inode, size and modification time is the same file.
    struct WalkedFile: Equatable {
        let path: String, inode: UInt64, size: Int64, modified: Int64

        init(path: String, _ st: stat) {
            self.path = path
            inode = UInt64(st.st_ino)
            size = Int64(st.st_size)
            modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        }
    }
    private static let lastWalk = Mutex<(file: WalkedFile, walk: FragmentWalk)?>(nil)

    /// What the walk keeps of a track within its current recording.
    private struct TrackState {
        var recording: Int
        /// The latest time a fragment of the recording began at.
        var latest: UInt64?
        /// The times its fragments cover, by start; and each start's samples (a fragment
        /// written again has the same).
        var covered: [(start: UInt64, end: UInt64)] = []
        var begun: [UInt64: Samples] = [:]

        init(recording: Int) { self.recording = recording }

        /// Whether a fragment of the recording covers `time` (or begins there).
        func covers(_ time: UInt64) -> Bool {
            var lo = 0, hi = covered.count
            while lo < hi {  // the first starting past `time`
                let mid = (lo + hi) / 2
                if covered[mid].start <= time { lo = mid + 1 } else { hi = mid }
            }
            // The two before it: fragments of a recording may overlap by a few ticks.
            return covered[max(0, lo - 2)..<lo].contains { $0.start == time || time < $0.end }
        }

        mutating func cover(_ start: UInt64, _ end: UInt64) {
            if let last = covered.last, last.start > start {
                let k = covered.firstIndex { $0.start > start } ?? covered.count
                covered.insert((start, end), at: k)
            } else {
                covered.append((start, end))
            }
        }
    }

    /// A track fragment's samples: how many, their time together (in the track's
    /// timescale) and their bytes together.
    private struct Samples: Equatable {
        var count: UInt64 = 0, duration: UInt64 = 0, bytes: UInt64 = 0
    }

    /// A track fragment, as its `moof` gives it (`trackFragments`).
    private struct TrackFragment {
        var track: UInt32 = 0
        /// Its `tfdt` (nil if none), where that time lies in the file, and whether in 64 bits.
        var time: UInt64?
        var timeAt: Int64 = 0
        var wide = false
        /// Its `tfhd`'s `base_data_offset`: its samples' place in the file (nil: found from its `moof`).
        var base: UInt64?
        var samples = Samples()
    }

    /// A track's sample defaults (its `trex`), which a `tfhd` may leave to it.
    private struct SampleDefaults {
        var duration: UInt32 = 0, size: UInt32 = 0
    }

    private static func walkFragments(_ file: FileDescriptor, fileSize: Int64, timeBase: (UInt32) -> AVRational?) -> FragmentWalk {
        var walk = FragmentWalk(size: fileSize)
        var tracks: [UInt32: TrackState] = [:]
        var defaults: [UInt32: SampleDefaults] = [:]
        // Whether the first header was read (the later ones are `laterHeaders`).
        var firstHeaderRead = false
        // Per recording, the sequence numbers its fragments used, while no two were the same
        // (nil: its writer does not number them apart).
        var numbers: [Set<UInt32>?] = [[]]
        var offset: Int64 = 0
        // The sizes of the `sidx` boxes stored so far, and the track fragments placed by an
        // offset in the file: how many, and how many give their `moof`'s place less those.
        var indexBytes: Int64 = 0, placedTrafs = 0, shiftedTrafs = 0
        // The tracks the last header times in another timescale than the first: the first's, its own.
        var scales: [UInt32: (first: UInt32, own: UInt32)] = [:]
        while offset + 8 <= fileSize {
            // A box's header alone (16 bytes with a 64-bit size), then a `moof` whole: read 4 kB
            // at a time, a file with a fragment a picture cost 212 MB of reads a walk.
            guard let head = try? file.read(upTo: Int(min(16, fileSize - offset)), at: offset), head.count >= 8 else { break }
            var boxSize = Int64(FastStart.be32(head, 0))
            if boxSize == 1 {
                guard head.count >= 16 else { break }
                boxSize = Int64(bitPattern: FastStart.be64(head, 8))
            } else if boxSize == 0 {
                boxSize = fileSize - offset
            }
            guard boxSize >= 8, boxSize <= fileSize - offset else { break }
            let type = head[4..<8], headerLength = head[0..<4].elementsEqual([0, 0, 0, 1]) ? 16 : 8
            if type.elementsEqual("sidx".utf8) || type.elementsEqual("mfra".utf8) { walk.placed.append(offset) }
            if type.elementsEqual("sidx".utf8) {
                walk.segmentIndexes.append((offset, boxSize))
                indexBytes += boxSize
            }
            if type.elementsEqual("moov".utf8), boxSize <= 1 << 24, let moov = try? file.read(upTo: Int(boxSize), at: offset),
               moov.count == Int(boxSize) {
                let header = movieHeader(moov, from: headerLength)
                defaults = header.defaults
                if firstHeaderRead {
                    walk.laterHeaders.append(LaterHeader(offset: offset, codings: header.codings, timescales: header.timescales))
                    scales = [:]
                    for (track, own) in header.timescales {
                        if let first = walk.firstTimescales[track], first > 0, own > 0, first != own { scales[track] = (first, own) }
                    }
                } else {
                    firstHeaderRead = true
                    walk.firstCodings = header.codings
                    walk.firstTimescales = header.timescales
                }
                // Samples in the `moov` itself (a fragmented file whose first fragment is
                // there) cover the track's time from zero, before its first `moof`.
                for (track, end) in header.sampleEnds where end > 0 {
                    var state = TrackState(recording: 0)
                    state.latest = 0
                    state.cover(0, end)
                    tracks[track] = state
                    walk.spans[track, default: [:]][0] = (0, end)
                }
            }
            if type.elementsEqual("moof".utf8) {
                var earliest: Double?
                let moof = boxSize > 1 << 24 ? nil : try? file.read(upTo: Int(boxSize), at: offset)
                let read = moof.flatMap { $0.count == Int(boxSize) ? trackFragments($0, from: headerLength, at: offset, defaults: defaults) : nil }
                let trafs = read?.trafs ?? []
                let current = walk.fragments.last?.recording ?? 0
                var recording: Int?
                if trafs.isEmpty { walk.movable = false }
                for var traf in trafs {
                    // Put in the first header's timescale, as every other time here is.
                    let scale = scales[traf.track]
                    if let scale, let own = traf.time {
                        traf.time = Self.inFirstTimescale(own, scale)
                        traf.samples.duration = Self.inFirstTimescale(traf.samples.duration, scale)
                    }
                    if let base = traf.base {
                        walk.movable = false
                        placedTrafs += 1
                        if indexBytes > 0, Int64(bitPattern: base) == offset - indexBytes { shiftedTrafs += 1 }
                    }
                    guard let time = traf.time else { walk.movable = false; continue }
                    if walk.timeBases[traf.track] == nil, let base = timeBase(traf.track) { walk.timeBases[traf.track] = base }
                    if let base = walk.timeBases[traf.track] {
                        let s = Double(time) * base.seconds
                        earliest = min(earliest ?? s, s)
                    } else {
                        walk.movable = false
                    }
                    // Taken out while changed: a copy left in `tracks` would have each change
                    // copy its tables, a fragment at a time (quadratic: 15 s on 30k fragments).
                    var state = tracks.removeValue(forKey: traf.track) ?? TrackState(recording: current)
                    if let last = state.latest, time <= last, state.begun[time] != traf.samples {
                        let middle = time + traf.samples.duration / 2
                        // (Two numbers at least: a downloader's segments may each number
                        // their one fragment 1, and the first two be swapped.)
                        let renumbered = read?.number.map { n in numbers[state.recording].map { $0.count >= 2 && $0.contains(n) } == true } ?? false
                        if state.covers(middle) || renumbered {
                            state = TrackState(recording: state.recording + 1)
                            if walk.recordings <= state.recording {
                                walk.recordings = state.recording + 1
                                numbers.append([])
                                if walk.secondRecording == nil { walk.secondRecording = offset }
                            }
                        } else if walk.disorder == nil, time < last {
                            walk.disorder = FragmentDisorder(track: traf.track, time: time, after: last, offset: offset)
                        }
                    }
                    state.latest = max(state.latest ?? time, time)
                    if state.begun[time] == nil { state.begun[time] = traf.samples }
                    let sum = time.addingReportingOverflow(traf.samples.duration), end = sum.overflow ? UInt64.max : sum.partialValue
                    state.cover(time, end)
                    let span = walk.spans[traf.track]?[state.recording]
                    walk.spans[traf.track, default: [:]][state.recording] = (min(span?.start ?? time, time), max(span?.end ?? end, end))
                    if state.recording > 0 || scale != nil {
                        walk.retimed.append((traf.timeAt, traf.wide, time, traf.track, state.recording))
                        if walk.strayOffset == nil, let base = traf.base, base != UInt64(offset) { walk.strayOffset = offset }
                    }
                    if let scale { walk.rescaled.append((offset, traf.track, time, state.recording, scale)) }
                    recording = max(recording ?? state.recording, state.recording)
                    tracks[traf.track] = state
                }
                let mine = recording ?? current
                if let number = read?.number, numbers[mine] != nil {
                    if numbers[mine]!.insert(number).inserted == false { numbers[mine] = nil }
                }
                walk.fragments.append((offset, earliest, mine))
            }
            offset += boxSize
        }
        walk.indexInsertedAfter = placedTrafs > 0 && shiftedTrafs == placedTrafs
        return walk
    }

    /// `time` in a track's `own` timescale put in its `first` one.
    static func inFirstTimescale(_ time: UInt64, _ scale: (first: UInt32, own: UInt32)) -> UInt64 {
        let (high, low) = time.multipliedFullWidth(by: UInt64(scale.first))
        guard high < UInt64(scale.own) else { return .max }
        return UInt64(scale.own).dividingFullWidth((high, low)).quotient
    }

    /// The children (type, start of payload, end) of `bytes` from `start` to `end`; nil
    /// where a box runs past `end`. (32-bit sizes: `moov` and `moof` children have them.)
    private static func children(_ bytes: [UInt8], _ start: Int, _ end: Int) -> [(type: ArraySlice<UInt8>, at: Int, end: Int)]? {
        var found: [(ArraySlice<UInt8>, Int, Int)] = []
        var at = start
        while at + 8 <= end {
            let size = Int(FastStart.be32(bytes, at))
            guard size >= 8, size <= end - at else { return nil }
            found.append((bytes[at + 4..<at + 8], at + 8, at + size))
            at += size
        }
        return found
    }

    /// What a decoder of a track is set up with, from its sample entry: the entry's type,
    /// its picture size or channels and rate, and its decoder configuration (`avcC`,
    /// `hvcC`, `dac3`…; in `esds` only the AudioSpecificConfig: the bitrates beside it
    /// differ from one encode to the next). Boxes that only describe (`btrt`, `pasp`,
    /// `colr`) are left out: two recordings made alike have equal codings.
    struct Coding: Equatable {
        var entry: [UInt8]
        /// The sample entry's type (`avc1`, `mp4a`…).
        var type: String
        /// What a decoder is opened with (its extradata): the `avcC` or `hvcC` box's payload,
        /// the `esds`'s AudioSpecificConfig; nil for other entries.
        var config: [UInt8]?
        /// A sound entry's channel count.
        var channels: Int?

        /// Alike where a decoder is set up alike (`entry`).
        static func == (a: Coding, b: Coding) -> Bool { a.entry == b.entry }
    }

    /// A header (`moov`) after the first: where it lies, and its picture and sound tracks'
    /// codings and timescales (`mdhd`).
    struct LaterHeader {
        let offset: Int64
        let codings: [UInt32: Coding]
        let timescales: [UInt32: UInt32]
    }

    /// The `Coding` of a sample entry (`stsd`'s first) of a picture or sound track.
    private static func coding(_ moov: [UInt8], stsd: (at: Int, end: Int), sound: Bool) -> Coding? {
        // stsd: version and flags, entry count; then the entry: size, type, then for
        // pictures 78 bytes (width and height at 24…28) before its children, for sound 28
        // (its version at 8, channels and sample size at 16…20, the rate at 24…28; 16 more
        // in version 1, 36 in version 2).
        let at = stsd.at + 8
        guard at + 8 <= stsd.end else { return nil }
        let end = min(stsd.end, at + Int(FastStart.be32(moov, at)))
        let body = at + 8
        var fixed = sound ? 28 : 78
        if sound, body + 10 <= end {
            let version = Int(moov[body + 8]) << 8 | Int(moov[body + 9])
            fixed += version == 1 ? 16 : version == 2 ? 36 : 0
        }
        guard body + fixed <= end else { return nil }
        var entry = Array(moov[at + 4..<at + 8])
        entry += sound ? moov[body + 16..<body + 20] + moov[body + 24..<body + 28] : moov[body + 24..<body + 28]
        var config: [UInt8]?
        for child in children(moov, body + fixed, end) ?? [] {
            let type = String(decoding: child.type, as: UTF8.self)
            if type == "esds" {
                let specific = audioSpecificConfig(moov[child.at..<child.end])
                config = specific
                entry += specific ?? Array(moov[child.at..<child.end])
            } else if !["btrt", "pasp", "colr", "clap", "fiel", "chan", "sgpd"].contains(type) {
                if type == "avcC" || type == "hvcC" { config = Array(moov[child.at..<child.end]) }
                entry += Array(child.type) + moov[child.at..<child.end]
            }
        }
        let type = String(decoding: moov[at + 4..<at + 8], as: UTF8.self)
        // AAC's own channel configuration before the entry's count, which many writers set to 2 whatever the sound.
        let channels = sound ? (type == "mp4a" ? config.flatMap(aacChannels) : nil) ?? (Int(moov[body + 16]) << 8 | Int(moov[body + 17])) : nil
        return Coding(entry: entry, type: type, config: config, channels: channels)
    }

    /// The channels an AudioSpecificConfig's channel configuration (1–7) says: after the
    /// object type (5 bits, 31 escaping to 6 more) and the rate's index (4 bits, 15
    /// followed by 24 bits of rate). Nil for 0 (a layout given in the stream) or past the end.
    static func aacChannels(_ config: [UInt8]) -> Int? {
        var bit = 0
        func take(_ n: Int) -> Int? {
            guard bit + n <= config.count * 8 else { return nil }
            var v = 0
            for _ in 0..<n { v = v << 1 | Int(config[bit / 8] >> (7 - UInt8(bit % 8)) & 1); bit += 1 }
            return v
        }
        guard let object = take(5), object != 31 || take(6) != nil, let rate = take(4), rate != 15 || take(24) != nil,
              let layout = take(4), (1...7).contains(layout) else { return nil }
        return layout == 7 ? 8 : layout
    }

    /// The DecoderSpecificInfo (tag 5) in an `esds` box's payload: its descriptors are
    /// each a tag, a size of 1–4 bytes (7 bits each) and their content.
    private static func audioSpecificConfig(_ esds: ArraySlice<UInt8>) -> [UInt8]? {
        var at = esds.startIndex + 4  // version and flags
        while at < esds.endIndex {
            let tag = esds[at]
            at += 1
            var size = 0
            for _ in 0..<4 where at < esds.endIndex {
                let b = esds[at]
                at += 1
                size = size << 7 | Int(b & 0x7F)
                if b & 0x80 == 0 { break }
            }
            switch tag {
            case 3:  // ES_Descriptor: ES_ID, flags, then what they say is there
                guard at + 3 <= esds.endIndex else { return nil }
                let flags = esds[at + 2]
                at += 3
                if flags & 0x80 != 0 { at += 2 }
                if flags & 0x40 != 0, at < esds.endIndex { at += 1 + Int(esds[at]) }
                if flags & 0x20 != 0 { at += 2 }
            case 4:  // DecoderConfigDescriptor: object type, stream type, buffer size, rates
                at += 13
            case 5:
                guard at + size <= esds.endIndex else { return nil }
                return Array(esds[at..<at + size])
            default:
                at += size
            }
        }
        return nil
    }

    /// From a `moov`'s bytes (its children from `start`): each track's sample defaults
    /// (`mvex`'s `trex`), where the samples the `moov` itself lists end (the sum of
    /// its `stts` durations; 0 where it lists none, as fragmented files' most often do),
    /// and each picture or sound track's `Coding`.
    private static func movieHeader(_ moov: [UInt8], from start: Int)
        -> (defaults: [UInt32: SampleDefaults], sampleEnds: [UInt32: UInt64], codings: [UInt32: Coding], timescales: [UInt32: UInt32]) {
        var defaults: [UInt32: SampleDefaults] = [:], ends: [UInt32: UInt64] = [:], codings: [UInt32: Coding] = [:]
        var timescales: [UInt32: UInt32] = [:]
        func first(_ type: String, in box: (type: ArraySlice<UInt8>, at: Int, end: Int)?) -> (type: ArraySlice<UInt8>, at: Int, end: Int)? {
            box.flatMap { children(moov, $0.at, $0.end)?.first { $0.type.elementsEqual(type.utf8) } }
        }
        for box in children(moov, start, moov.count) ?? [] {
            if box.type.elementsEqual("mvex".utf8) {
                // trex: version and flags, track ID, sample description index, then the
                // default duration, size and flags.
                for trex in children(moov, box.at, box.end) ?? [] where trex.type.elementsEqual("trex".utf8) && trex.end - trex.at >= 20 {
                    defaults[FastStart.be32(moov, trex.at + 4)] = SampleDefaults(duration: FastStart.be32(moov, trex.at + 12),
                                                                                 size: FastStart.be32(moov, trex.at + 16))
                }
            } else if box.type.elementsEqual("trak".utf8) {
                guard let tkhd = first("tkhd", in: box), tkhd.end - tkhd.at >= 24 else { continue }
                let track = FastStart.be32(moov, tkhd.at + (moov[tkhd.at] == 1 ? 20 : 12))
                let mdia = first("mdia", in: box), stbl = first("stbl", in: first("minf", in: mdia))
                // mdhd: version and flags, two dates (4 or 8 bytes each), then the timescale.
                if let mdhd = first("mdhd", in: mdia), mdhd.end - mdhd.at >= 24 {
                    timescales[track] = FastStart.be32(moov, mdhd.at + (moov[mdhd.at] == 1 ? 20 : 12))
                }
                // hdlr: version and flags, predefined, then the handler type.
                if let hdlr = first("hdlr", in: mdia), hdlr.end - hdlr.at >= 12, let stsd = first("stsd", in: stbl) {
                    let handler = moov[hdlr.at + 8..<hdlr.at + 12]
                    if handler.elementsEqual("vide".utf8) || handler.elementsEqual("soun".utf8) {
                        codings[track] = coding(moov, stsd: (stsd.at, stsd.end), sound: handler.elementsEqual("soun".utf8))
                    }
                }
                guard let stts = first("stts", in: stbl), stts.end - stts.at >= 8 else { continue }
                let count = min(Int(FastStart.be32(moov, stts.at + 4)), (stts.end - stts.at - 8) / 8)
                var end: UInt64 = 0
                for k in 0..<count {
                    end &+= UInt64(FastStart.be32(moov, stts.at + 8 + 8 * k)) &* UInt64(FastStart.be32(moov, stts.at + 12 + 8 * k))
                }
                ends[track] = end
            }
        }
        return (defaults, ends, codings, timescales)
    }

    /// A `moof`'s sequence number (`mfhd`) and each track fragment in its bytes (its
    /// children from `start`; the `moof` at `offset` in the file): its track, `tfdt`, data
    /// placement and samples (`trun`s, with the `tfhd`'s or `trex`'s defaults). Nil where a
    /// box is damaged.
    private static func trackFragments(_ moof: [UInt8], from start: Int, at offset: Int64,
                                       defaults: [UInt32: SampleDefaults]) -> (number: UInt32?, trafs: [TrackFragment])? {
        var fragments: [TrackFragment] = [], number: UInt32?
        guard let boxes = children(moof, start, moof.count) else { return nil }
        for box in boxes where box.type.elementsEqual("mfhd".utf8) && box.end - box.at >= 8 {
            number = FastStart.be32(moof, box.at + 4)
        }
        for traf in boxes where traf.type.elementsEqual("traf".utf8) {
            var fragment = TrackFragment(), found = false
            var duration: UInt32?, size: UInt32?
            guard let inner = children(moof, traf.at, traf.end) else { return nil }
            for box in inner {
                if box.type.elementsEqual("tfhd".utf8), box.end - box.at >= 8 {
                    // Version and flags, track ID, then what the flags say is there: a base
                    // data offset (1), a sample description index (2), a default sample
                    // duration (8) and size (0x10).
                    let flags = FastStart.be32(moof, box.at) & 0xFF_FFFF
                    fragment.track = FastStart.be32(moof, box.at + 4)
                    found = true
                    var at = box.at + 8
                    if flags & 1 != 0, at + 8 <= box.end { fragment.base = FastStart.be64(moof, at) }
                    if flags & 1 != 0 { at += 8 }
                    if flags & 2 != 0 { at += 4 }
                    if flags & 8 != 0, at + 4 <= box.end { duration = FastStart.be32(moof, at) }
                    if flags & 8 != 0 { at += 4 }
                    if flags & 0x10 != 0, at + 4 <= box.end { size = FastStart.be32(moof, at) }
                } else if box.type.elementsEqual("tfdt".utf8), box.end - box.at >= 8 {
                    fragment.timeAt = offset + Int64(box.at + 4)
                    if moof[box.at] == 1 {
                        if box.end - box.at >= 12 { fragment.time = FastStart.be64(moof, box.at + 4); fragment.wide = true }
                    } else {
                        fragment.time = UInt64(FastStart.be32(moof, box.at + 4))
                    }
                }
            }
            guard found else { return nil }
            let otherwise = defaults[fragment.track]
            // trun: version and flags, sample count, a data offset (1) and first sample's
            // flags (4), then per sample what the flags say: duration (0x100), size
            // (0x200), flags (0x400), composition offset (0x800).
            for trun in inner where trun.type.elementsEqual("trun".utf8) && trun.end - trun.at >= 8 {
                let flags = FastStart.be32(moof, trun.at) & 0xFF_FFFF
                let count = Int(FastStart.be32(moof, trun.at + 4))
                var at = trun.at + 8 + (flags & 1 != 0 ? 4 : 0) + (flags & 4 != 0 ? 4 : 0)
                let each = [0x100, 0x200, 0x400, 0x800].filter { flags & UInt32($0) != 0 }.count * 4
                guard count >= 0, each == 0 || count <= (trun.end - at) / each else { return nil }
                fragment.samples.count += UInt64(count)
                let fixedDuration = UInt64(duration ?? otherwise?.duration ?? 0), fixedSize = UInt64(size ?? otherwise?.size ?? 0)
                if flags & 0x100 == 0 { fragment.samples.duration &+= fixedDuration &* UInt64(count) }
                if flags & 0x200 == 0 { fragment.samples.bytes &+= fixedSize &* UInt64(count) }
                guard flags & 0x300 != 0 else { continue }
                for _ in 0..<count {
                    if flags & 0x100 != 0 { fragment.samples.duration &+= UInt64(FastStart.be32(moof, at)); at += 4 }
                    if flags & 0x200 != 0 { fragment.samples.bytes &+= UInt64(FastStart.be32(moof, at)); at += 4 }
                    at += (flags & 0x400 != 0 ? 4 : 0) + (flags & 0x800 != 0 ? 4 : 0)
                }
            }
            fragments.append(fragment)
        }
        return (number, fragments)
    }
}
