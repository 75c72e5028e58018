#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore
import Synchronization

/// Learns a remux's index (`moov`) before the remux has written it, so its SHA-256 can be
/// computed while it is written (`StreamingDigest`).
///
/// A faststart MP4 starts with its index, which lists every packet and is only known once
/// the last one is written; a SHA-256 cannot start before its first bytes are known, so it
/// needs a second pass over the finished file (for a film, over a second of SHA-256 after
/// the copy, and a read from disk if the file no longer fits the page cache). Stream copies are
/// deterministic, though: the same packets through the same muxer make the same bytes.
/// The forecast reads the source a second time, on another core, and muxes the same
/// streams with the same lanes and muxer options into a recorder that keeps only the
/// first bytes and the index. Reading and muxing without writing runs several times faster
/// than the real copy, so the index is known early in it.
///
/// Nothing is taken on trust: the digest is used only if the real file's head (ftyp, the
/// index put in front and the bytes the muxer patches last) is byte for byte the forecast's and
/// its index starts at the same offset. Otherwise the file is hashed again, as before.
/// Plans that encode anything are not forecast: encoding twice costs more than one hash.
final class IndexForecast: @unchecked Sendable {
    /// The finished file as the forecast's muxer wrote it.
    struct Layout: Sendable {
        var ftyp: [UInt8]
        /// The index as it goes in front (with its tracks' roles, `TrackCharacteristics`).
        var moov: [UInt8]
        /// Where the muxer's bytes begin (`IndexRoom`).
        var room: Int64
        /// The muxer's first bytes as they end up (the media data box's size patched in);
        /// the muxer goes back over nothing after them.
        var prefix: [UInt8]
        /// Where the index begins: the media data ends there.
        var moovOffset: Int64
    }

    /// The bytes at the front of the file kept verbatim: ftyp and the media data box's
    /// header, which the MP4 muxer writes first and patches in its trailer.
    static let prefixBytes = 4096

    private let cancellation: Cancellation
    private let done = Latch()
    private let state = Mutex<(finished: Bool, layout: Layout?, skipped: Int64)>((false, nil, 0))

    /// What a skimming reader keeps of each payload it skims: more than the headers any
    /// lane or the MP4 muxer reads (`Lane.readsOnlyPacketHeads`), two E-AC-3 frames.
    static let skimKeepBytes = 8192

    /// What a reader of this container may skim, nil for nothing: the one place that says
    /// which containers skim. MP4 holds one frame per sample. Matroska laces audio frames
    /// into one block and libavformat's parser reads every frame's header, so there laced
    /// blocks are read in full; an unlaced one holds one frame, and the lanes' audio frames
    /// are shorter than what skimming keeps. Other containers are read in full: AVI's audio
    /// chunks hold many frames, which the parser splits, and MPEG-TS and PS bring their
    /// small packets through the buffer, which a skimming reader's small one would only
    /// refill more often.
    static func skimming(_ demuxer: Demuxer) -> Demuxer.Skim? {
        if demuxer.formatName.hasPrefix("mov,") { return .all }
        return demuxer.isMatroska ? .unlacedMatroskaBlocks : nil
    }

    /// What the forecast's reader may skim for these lanes, nil for nothing: every lane must
    /// copy its stream by looking at no more than its packets' first bytes; the copy's
    /// sizes, times and flags come from the container's structure, which is read in full.
    /// What a reader skimmed that mattered would only make the forecast differ from the
    /// file, which is then hashed afterwards.
    static func skim(for lanes: [Lane], reading demuxer: Demuxer) -> Demuxer.Skim? {
        guard lanes.allSatisfy(\.readsOnlyPacketHeads) else { return nil }
        return skimming(demuxer)
    }

    /// Bytes of the source the forecast handed on without reading them (it skimmed).
    var skippedBytes: Int64 { state.withLock { $0.skipped } }

    /// When a source's remux is hashed while it is written.
    ///
    /// Big enough: below a size the forecast costs more than it saves, even with its reader
    /// analysed during the probe: on two cores the forecast's reading and muxing plus the
    /// hash take longer than the copy they must keep up with, while hashing a few tens of
    /// MB afterwards runs beside verification. A reader that may skim (`SecondReader`) pays
    /// off from about 100 MB (a 1080p film's two minutes), one that reads everything
    /// (`skimming`) from 256.
    ///
    /// A core to itself: the forecast reads and muxes the whole source a second time, a
    /// third more CPU than the copy, and it pays for that only by hashing beside the copy
    /// on a core nothing else wants. Where other processes keep the machine busy (the
    /// farm's transcode, the media server's own), it takes its turn on the copy's core:
    /// a two-hour film's remux beside two busy threads took 9.5–10.3 s with it, 5.9–6.5 s
    /// hashing afterwards.
    ///
    /// Few enough samples: until the forecast ends, the MP4 muxer's table of every sample
    /// (about 64 bytes each) is held twice, the forecast's whole and the copy's growing
    /// one. For a two-hour film (510,000 samples) that was 58 MB of tables where the
    /// ffmpeg command holds 33, and the run's peak memory 1.14× the command's; hashed
    /// afterwards, 0.83×. A 45-minute episode's 190,000: 1.06× and 0.92×. Up to 120,000
    /// (a 28-minute film at 24 fps with 48 kHz AAC) the forecast's memory stays within
    /// what the command's own rewrite holds.
    struct Threshold: Sendable {
        var skimming: Int64
        var reading: Int64
        /// The cores other processes must leave idle over the probe (`SpareCores`): one,
        /// the forecast's. (Not more: the kernel's writeback of the run before, or of the
        /// ffmpeg command a benchmark ran just before, keeps part of a core busy for a
        /// second or two, and 1.5 turned a 20-minute film's forecast down one run in three.)
        var idleCores: Double
        /// The most samples the output may have (`IndexRoom.samples`).
        var samples: Double
        static let standard = Threshold(skimming: 96 << 20, reading: 256 << 20, idleCores: 1, samples: 120_000)
        /// Tests: every remux forecast, whatever its size and the machine's load.
        static let always = Threshold(skimming: 0, reading: 0, idleCores: 0, samples: .infinity)

        /// The smallest source worth forecasting for a reader that may skim or not.
        func bytes(skimmable: Bool) -> Int64 { skimmable ? skimming : reading }
    }

    /// Whether a second reader of this source may skim (`SecondReader`, `skimming`).
    static func skimmable(_ main: Demuxer) -> Bool { skimming(main) != nil }

    /// Whether a source of this size, read as `main` reads it, is worth forecasting: big
    /// enough (`threshold`), small enough to stay cached, on a machine with a core to spare
    /// (`idleCores`: what others left idle; nil where that is not known, taken as idle)
    /// and, once the plan is known, with few enough samples (`samples`).
    static func worthwhile(sourceBytes: Int64, main: Demuxer, from threshold: Threshold, idleCores: Double?,
                           samples: Double = 0) -> Bool {
        sourceBytes >= threshold.bytes(skimmable: skimmable(main)) && samples <= threshold.samples
            && (idleCores ?? .infinity) >= threshold.idleCores && staysCached(sourceBytes: sourceBytes)
    }

    /// Whether a source of this size stays in the page cache between the forecast's read and
    /// the copy's (at most half the memory available now). A bigger one would be read twice
    /// from its disk or network share, which costs more than hashing the output afterwards.
    static func staysCached(sourceBytes: Int64) -> Bool {
        guard let fd = try? FileDescriptor(path: "/proc/meminfo", flags: O_RDONLY),
              let bytes = try? FileIO.readToEnd(fd: fd.rawValue) else { return false }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("MemAvailable:") {
            guard let kib = line.split(separator: " ").dropFirst().first.flatMap({ Int64($0) }) else { return false }
            return sourceBytes <= kib * 1024 / 2
        }
        return false
    }

    /// Whether the plan's output can be forecast: every stream copied or converted
    /// (subtitles), none encoded.
    static func applies(to plan: Plan) -> Bool {
        plan.deliveryFormat != .original
            && plan.video.map { $0.action == .copy } != false && plan.audio.map { $0.action == .copy } != false
    }

    /// Starts the forecast on a thread of its own, reading from `reader`. `main` is the
    /// pipeline's demuxer: the second reader starts where it did (after a rewind, if it
    /// was rewound).
    /// `room`: where the real muxer starts writing, so the forecast's starts there too.
    init(reader: SecondReader, main: Demuxer, plan: Plan, info: MediaInfo, room: Int64) {
        // Where the first reader went back to, if it did: the second must land there too.
        let rewind = main.wasRewound ? main.startMarks : nil
        cancellation = reader.cancellation
        Threads.start { [self] in
            // Any failure only means no forecast: the file is then hashed afterwards.
            let layout = try? forecast(reader: reader, rewind: rewind, plan: plan, info: info, room: room)
            state.withLock { $0.finished = true; $0.layout = layout }
            done.open()
        }
    }

    deinit { abandon(); wait() }

    /// Whether the forecast has finished (with a layout or without).
    var isFinished: Bool { state.withLock { $0.finished } }

    /// Stops the forecast if it is still running; it then has no layout.
    func abandon() { cancellation.cancel() }

    /// The layout, once the forecast is done; nil if it failed, was abandoned or released.
    @discardableResult
    func wait() -> Layout? {
        done.wait()
        return state.withLock { $0.layout }
    }

    /// Frees the layout (its copy of the index) once its one reader has what it needs.
    func release() { state.withLock { $0.layout = nil } }

    private func forecast(reader second: SecondReader, rewind: StartMarks?, plan: Plan, info: MediaInfo,
                          room: Int64) throws(KilnError) -> Layout? {
        let recorder = try IndexRecorder(room: room, headBytes: Self.prefixBytes)
        do {
            guard let reader = try second.take() else { return nil }
            if let rewind { try reader.rewind(to: rewind) }
            // A picture size that changes stops the copy itself, which then has no use for
            // the forecast: the forecast does not watch for it (nor parse what it skims).
            let lanes = try Preparer.lanes(for: plan, demuxer: reader, info: info, watchingPictureSize: false)
            if let skim = Self.skim(for: lanes, reading: reader) { reader.skimPayloads(keeping: Self.skimKeepBytes, skim) }
            let muxer = try Muxer(recorder: recorder, room: room, cancellation: cancellation)
            try Pipeline(demuxer: reader, lanes: lanes, muxer: muxer, durationSeconds: 0, cancellation: cancellation,
                         frameLengths: Pipeline.frameLengths(of: info), onProgress: { _ in }).run()
            state.withLock { $0.skipped = reader.skippedBytes }
        }
        // The reader and the muxer (its sample tables) are freed before the layout is copied out.
        return recorder.layout()
    }
}

/// A second demuxer for a source, opened and analysed on a thread of its own: the index
/// forecast's reader. Opened as the pipeline's demuxer was (the same parameters, and the
/// same guesses for what the container leaves out, such as missing DTS). `Prober.open`
/// starts it as soon as the first one is analysed, so its own analysis (for H.264 tens of
/// ms: pictures are decoded to learn the reorder delay) runs on the other core while the
/// probe and the plan finish, instead of delaying the forecast, whose lead over the copy
/// is what lets the hash keep up.
final class SecondReader: @unchecked Sendable {
    /// Stops the opening, and the forecast that reads from it.
    let cancellation = Cancellation()
    /// What the opening thread leaves: written once, before `done` is signalled.
    private final class Slot: @unchecked Sendable {
        let done = Latch()
        var result: Result<Demuxer, KilnError>?
    }
    private let slot = Slot()
    private let taken = Atomic<Bool>(false)

    /// `skimmable`: the reader may skim (`Demuxer.skimPayloads`, `IndexForecast.skim`).
    init(path: String, skimmable: Bool) {
        // The thread holds the slot, not the reader: a reader dropped while opening is
        // canceled by its deinit rather than kept alive until the open ends.
        let slot = self.slot, cancellation = self.cancellation
        Threads.start {
            slot.result = Result { () throws(KilnError) in try Demuxer(path: path, cancellation: cancellation, skimmable: skimmable) }
            slot.done.open()
        }
    }

    /// Waits for the reader, which only the first caller gets (nil after that). It is
    /// handed over, not kept: it closes when its taker is done with it.
    func take() throws(KilnError) -> Demuxer? {
        guard !taken.exchange(true, ordering: .acquiringAndReleasing) else { return nil }
        slot.done.wait()
        defer { slot.result = nil }
        return try slot.result?.get()
    }

    /// Cancels an opening nobody took and waits for its thread, so no reader outlives it.
    deinit {
        guard !taken.load(ordering: .acquiring) else { return }
        cancellation.cancel()
        slot.done.wait()
        slot.result = nil
    }
}

/// The forecast muxer's output (index_recorder.c): the first bytes and the trailer's.
final class IndexRecorder {
    private var recorder: OpaquePointer?

    /// The muxer's bytes start at `room`; the first `headBytes` of them are kept.
    let room: Int64

    init(room: Int64 = 0, headBytes: Int) throws(KilnError) {
        guard let r = kiln_recorder_new(room, Int64(headBytes)) else {
            throw KilnError(.resourceLimit, stage: .mux, "out of memory for the index forecast")
        }
        recorder = r
        self.room = room
    }

    deinit { kiln_recorder_free(&recorder) }

    var io: UnsafeMutablePointer<AVIOContext> { kiln_recorder_io(recorder) }

    /// From here on everything written is kept (the trailer: the index).
    func keepFromEnd() { kiln_recorder_keep_from_end(recorder) }

    /// The layout the muxer wrote: ftyp first, the media data, the index last, and no
    /// byte between the head and the index written twice. Nil for anything else.
    func layout() -> IndexForecast.Layout? {
        let size = kiln_recorder_size(recorder)
        var headCount: Int64 = 0, tailFrom: Int64 = 0, tailCount: Int64 = 0
        let head = kiln_recorder_head(recorder, &headCount)!
        let tail = kiln_recorder_tail(recorder, &tailFrom, &tailCount)
        guard tailFrom >= 0, tailFrom + tailCount == size else { return nil }
        /// Bytes at `offset` if the recorder kept them all.
        func bytes(_ offset: Int64, _ count: Int64) -> [UInt8]? {
            guard offset >= 0, count >= 0, offset + count <= size else { return nil }
            if offset >= room, offset + count <= room + headCount {
                return Array(UnsafeBufferPointer(start: head + Int(offset - room), count: Int(count)))
            }
            if offset >= tailFrom, let tail { return Array(UnsafeBufferPointer(start: tail + Int(offset - tailFrom), count: Int(count))) }
            return nil
        }
        let boxes = try? FastStart.topLevelBoxes(from: room, size: size) { (offset, count) throws(KilnError) in
            guard let kept = bytes(offset, Int64(count)) else {
                throw KilnError(.internalError, stage: .mux, "a box header at \(offset) lies in the media data the recorder dropped")
            }
            return kept
        }
        guard let boxes, let ftyp = boxes.first, ftyp.type == "ftyp", let moov = boxes.last, moov.type == "moov",
              boxes.dropLast().contains(where: { $0.type == "mdat" }), !boxes.dropLast().contains(where: { $0.type == "moov" }),
              let ftypBytes = bytes(ftyp.offset, ftyp.size), let moovBytes = bytes(moov.offset, moov.size),
              let prefix = bytes(room, min(Int64(IndexForecast.prefixBytes), moov.offset - room)),
              kiln_recorder_lowest_rewrite(recorder) >= moov.offset,
              let index = try? TrackCharacteristics.tagged(moov: moovBytes) else { return nil }  // as `FastStart.apply` puts it in front
        return IndexForecast.Layout(ftyp: ftypBytes, moov: index, room: room, prefix: prefix, moovOffset: moov.offset)
    }
}

/// The output's SHA-256, computed while the output is written: the forecast's head first
/// (what the index move will put in front), then the muxer's bytes as they reach the file,
/// read back from the page cache behind the writer on a thread of its own.
///
/// Its answer is a claim about the finished file, which `Preparer` accepts only if the
/// real head and index offset are the forecast's (`matches`). The reader follows the file
/// by its size: the MP4 muxer writes front to back and afterwards goes back only to the
/// media data box's size, inside the prefix, which is re-read and compared at the end
/// (the forecast's recorder would have seen any other going back: `IndexRecorder.layout`).
final class StreamingDigest: @unchecked Sendable {
    struct Claim: Sendable {
        var sha256: String
        var bytes: Int64
        var head: FastStart.Head.Mark
        var dataEnd: Int64

        /// Whether the index move wrote what the forecast said it would, where it said.
        func matches(_ outcome: FastStart.Outcome?) -> Bool {
            guard let outcome, outcome.method == .inRoom || outcome.method == .inserted else { return false }
            return outcome.dataEnd == dataEnd && outcome.head == head
        }
    }

    private let done = Latch()
    /// Opened once the reader knows the head it hashes (or that there is none).
    private let headKnown = Latch()
    private let writerDone = Atomic<Bool>(false)
    private let abandoned = Atomic<Bool>(false)
    private var followed: Claim?
    /// Whether the forecast's head fits the room (written once, before `headKnown` opens).
    private var fitsRoom = false
    private let forecast: IndexForecast
    private let file: FileDescriptor
    private let cancellation: Cancellation

    /// Starts following `path`, which the muxer has created and is writing; stops, with no
    /// claim, when the run is canceled.
    init(path: String, forecast: IndexForecast, cancellation: Cancellation) throws(KilnError) {
        self.forecast = forecast
        self.cancellation = cancellation
        do { file = try FileDescriptor(path: path, flags: O_RDONLY) } catch {
            throw AtomicOutput.error(error.errno, "cannot read the output back", stage: .write)
        }
        Threads.start { [self] in
            followed = follow()
            headKnown.open()  // also where `follow` gave up before it knew the head
            done.open()
        }
    }

    deinit { abandon(); done.wait() }

    func abandon() {
        abandoned.store(true, ordering: .releasing)
        forecast.abandon()
    }

    /// The muxer's last byte is in the file (trailer written, file closed, index not yet
    /// moved). A forecast still running is abandoned unless `awaitingForecast` (hashing
    /// afterwards is then quicker than waiting). Returns whether the index may go in front
    /// while the reader goes on: it may when the forecast put it in its room, since the move
    /// then writes only the room, which the reader never reads (it hashes the forecast's
    /// head instead). An index inserted in front moves the data the reader reads: `claim`
    /// must come first.
    func writerFinished(awaitingForecast: Bool = false) -> Bool {
        if !awaitingForecast && !forecast.isFinished { forecast.abandon() }
        writerDone.store(true, ordering: .releasing)
        headKnown.wait()
        return fitsRoom
    }

    /// The digest once the reader has caught up with the finished file (`writerFinished`
    /// first); nil without a forecast or if the file is not what the forecast said.
    func claim() -> Claim? {
        done.wait()
        return followed
    }

    /// Where the hash of the forecast's file stands once its head is in: what the rest of
    /// the run needs of the forecast, without its index.
    private struct Start {
        var mark: FastStart.Head.Mark
        var prefix: [UInt8]
        var room: Int64
        var dataEnd: Int64
    }

    /// Hashes the head the forecast says the file will have, then frees the forecast's
    /// index: the head's mark is all that is compared later (a film's index is hundreds of
    /// kB, and the index move makes a copy of its own). Nil without a forecast.
    private func start(_ hash: SHA256) -> Start? {
        guard let layout = forecast.wait() else { return nil }
        var st = stat()
        guard fstat(file.rawValue, &st) == 0,
              let head = try? FastStart.head(ftyp: layout.ftyp, moov: layout.moov, room: layout.room,
                                             blockSize: FastStart.blockSize(st)) else {
            return nil
        }
        forecast.release()
        fitsRoom = head.inserted == 0
        headKnown.open()
        head.bytes.withUnsafeBytes { hash.update($0) }
        var zeros = head.length - Int64(head.bytes.count)
        let zero = [UInt8](repeating: 0, count: Int(min(zeros, 1 << 16)))
        while zeros > 0 {
            zero.withUnsafeBytes { hash.update(UnsafeRawBufferPointer(rebasing: $0[0..<Int(min(zeros, Int64(zero.count)))])) }
            zeros -= Int64(zero.count)
        }
        return Start(mark: head.mark, prefix: layout.prefix, room: layout.room, dataEnd: layout.moovOffset)
    }

    private func follow() -> Claim? {
        let hash = SHA256()
        guard let start = start(hash) else { return nil }
        let prefix = start.prefix, end = start.dataEnd
        prefix.withUnsafeBytes { hash.update($0) }
        var position = start.room + Int64(prefix.count)
        var st = stat()
        while position < end {
            if abandoned.load(ordering: .acquiring) || cancellation.isCanceled { return nil }
            // Read the flag before the size: a writer that finished after the size was taken
            // gets one more look.
            let finished = writerDone.load(ordering: .acquiring)
            guard fstat(file.rawValue, &st) == 0 else { return nil }
            let available = min(Int64(st.st_size), end) - position
            if available <= 0 {
                if finished { return nil }  // the file stopped short of the forecast's index
                usleep(500)
                continue
            }
            // Written bytes below the index, which nothing cuts off (FastStart truncates
            // only the old index at the end, after `finish`): safe to map.
            let n = min(available, SHA256.mappedWindow)
            guard (try? hash.update(file: file.rawValue, offset: position, count: n)) != nil else { return nil }
            position += n
        }
        // Wait for the writer: only then is the prefix final (the media data box's size).
        while !writerDone.load(ordering: .acquiring) {
            if abandoned.load(ordering: .acquiring) || cancellation.isCanceled { return nil }
            usleep(500)
        }
        guard (try? file.read(upTo: prefix.count, at: start.room)) == prefix else { return nil }
        return Claim(sha256: hash.hexDigest(), bytes: start.mark.length + end - start.room, head: start.mark, dataEnd: end)
    }
}
