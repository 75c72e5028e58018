#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// The probe's checks for a source whose header or index cannot be the file's (cut short,
/// a box or table damaged): such a file cannot go out as it is.
extension Prober {
    /// Why a header that declares far more time than the file's bytes could hold cannot be
    /// the file's (a damaged AVI stream header said six days for 1.2 MB; an audiobook's
    /// damaged sample sizes, 47 hours for 80 kB); nil where it can. A remux or transcode
    /// would work toward that length (a damaged audio time within it was filled with days of
    /// silence, a job that never ended), and the file as it is plays nothing of it. Under
    /// 1 kbit/s over more than a minute no real file goes (a cover image's video and speech
    /// audio are several times that). The length judged is `streams`' where the muxer
    /// stated theirs (Matroska's DURATION tags) and the container declares more.
    static func implausibleLength(_ info: MediaInfo, of streams: [Int], demuxer: Demuxer) -> String? {
        let kept = streams.filter { $0 < demuxer.streamCount }
        let stated = kept.compactMap { Prober.statedDuration(demuxer.stream($0)) }
        let length = !kept.isEmpty && stated.count == kept.count ? min(info.durationSeconds, stated.max() ?? 0) : info.durationSeconds
        guard length > 60, info.sizeBytes > 0 else { return nil }
        let bitsPerSecond = Double(info.sizeBytes) * 8 / length
        guard bitsPerSecond < 1000 else { return nil }
        // Unless a kept stream's last packets are there: a slideshow of a plain picture a
        // minute is a few hundred bytes a picture (five minutes in 1.7 kB were refused).
        // A damaged header's length is no packet's.
        if let reach = Prober.presentedEnds(demuxer, of: kept).values.max(), reach - info.startSeconds >= 0.9 * length - 60 { return nil }
        return "the source declares \(Format.fixed(length, decimals: 0)) s for \(info.sizeBytes) bytes "
            + "(\(Format.fixed(bitsPerSecond, decimals: 0)) bit/s): its header's duration is damaged"
    }

    /// The first stream whose index, as the demuxer read it from the file's header (MP4
    /// sample tables, Matroska cues, AVI's idx1), cannot be the file's: a sample lying
    /// past the file's end (a file cut short, a size or offset damaged), or a picture
    /// stream with no sample at all (its tables damaged: libavformat then keeps the
    /// stream and reads nothing of it). Such a file cannot go out as it is, however
    /// well its streams would play; the remux and its checks decide what it still holds.
    static func indexDamage(_ demuxer: Demuxer, size: Int64, fragmented: Bool) -> String? {
        let format = demuxer.formatName
        if let missing = demuxer.matroskaHead?.shortfall(size: size) {
            return "its Matroska segment declares \(missing) bytes past the file's end (\(size) bytes): the file is cut short"
        }
        let mp4 = format.hasPrefix("mov,")
        if let mislabelled = picturesDeclaredAsSound(demuxer) { return mislabelled }
        if mp4, let missing = movieBoxShortfall(demuxer.path, size: size) {
            return "its index (moov) declares \(missing) bytes past the file's end (\(size) bytes): the file is cut short"
        }
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            let type = st.pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO,
                  st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let count = min(Int(avformat_index_get_entries_count(st)), 1 << 22)
            if count == 0, type == AVMEDIA_TYPE_VIDEO, mp4, !fragmented {
                return "stream \(i)'s sample tables list no picture: the index is damaged"
            }
            for k in 0..<count {
                guard let e = avformat_index_get_entry(st, Int32(k)) else { continue }
                // (Compared as what is left: a damaged offset near 2^63 would overflow a sum.)
                if e.pointee.pos >= 0, e.pointee.pos > size - Int64(max(e.pointee.size, 0)) {
                    let end = e.pointee.pos.addingReportingOverflow(Int64(max(e.pointee.size, 0))).partialValue
                    return "stream \(i)'s index places a sample at bytes \(e.pointee.pos)–\(end), past the file's end (\(size) bytes): the file is cut short or its offsets are damaged"
                }
            }
        }
        return nil
    }

    /// A stream whose header declares it sound while its sample
    /// entry names a picture codec (an MP4 track's handler damaged from `vide` to `soun`):
    /// libavformat makes it a sound stream of no codec, and the pictures were left out
    /// quietly as an unknown sound track. MP4 and AVI's tables of picture tags say which.
    static func picturesDeclaredAsSound(_ demuxer: Demuxer) -> String? {
        for i in 0..<demuxer.streamCount {
            let par = demuxer.stream(i).pointee.codecpar.pointee
            // Sound only: data tracks of no codec legitimately carry `mp4s` (ISMA's object
            // descriptor and scene tracks), which the tables also list as MPEG-4 pictures.
            guard par.codec_id == AV_CODEC_ID_NONE, par.codec_type == AVMEDIA_TYPE_AUDIO, par.codec_tag != 0,
                  case let codec = kiln_picture_codec_for_tag(par.codec_tag), codec != AV_CODEC_ID_NONE else { continue }
            return "stream \(i)'s header declares it sound, but its sample entry (\(fourCC(par.codec_tag) ?? "?")) holds "
                + "\(string(avcodec_get_name(codec)) ?? "video") pictures: the header is damaged"
        }
        return nil
    }

    /// Nothing past a Matroska file's first 4 KB is read: its EBML header, the Segment's
    /// header and the SeekHead, which writers put first in the Segment.
    struct MatroskaHead {
        /// The EBML header's DocType: "webm" or "matroska".
        var docType: String?
        /// Where the Segment's data starts: the SeekHead's positions count from there.
        var segmentData: Int64
        /// The byte after the Segment, as its size declares (nil: unknown size, a live recording).
        var segmentEnd: Int64?
        /// Whether a SeekHead was read where writers put it, and the file positions its
        /// entries give, by element ID (Cues 1C 53 BB 6B, Tracks 16 54 AE 6B, a second
        /// SeekHead 11 4D 9B 74 with further entries at the file's end).
        var seekHeadRead = false
        var listed: Set<UInt32> = []
        var positions: [UInt32: Int64] = [:]
        /// Where the Cues (the index) begin: what lies from there on is index and tags, not
        /// media. nil where the SeekHead does not say (none, or one pointing to a second at
        /// the end).
        var cuesStart: Int64? { positions[0x1C53_BB6B] }
        var tracksStart: Int64? { positions[0x1654_AE6B] }
        var listsSeekHead: Bool { listed.contains(0x114D_9B74) }

        init?(path: String) {
            guard let file = try? FileDescriptor(path: path, flags: O_RDONLY),
                  let head = try? file.read(upTo: 4096, at: 0) else { return nil }
            // EBML header (1A 45 DF A3), then the Segment (18 53 80 67).
            guard let ebml = EBML.element(head, 0), ebml.id == 0x1A45_DFA3, let ebmlSize = ebml.size,
                  case let at = ebml.data + ebmlSize, let segment = EBML.element(head, at), segment.id == 0x1853_8067 else { return nil }
            docType = EBML.children(head, ebml.data..<at).first { $0.id == 0x4282 }.flatMap { EBML.string(head, $0.range) }
            segmentData = Int64(segment.data)
            segmentEnd = segment.size.map { Int64(segment.data) + Int64($0) }
            // The SeekHead (11 4D 9B 74), first in the Segment: Seek entries (4D BB) of a
            // SeekID (53 AB) and a SeekPosition (53 AC) from the Segment's data.
            guard let seekHead = EBML.element(head, segment.data), seekHead.id == 0x114D_9B74, let seekSize = seekHead.size,
                  seekHead.data + seekSize <= head.count else { return }
            seekHeadRead = true
            for (id, position) in EBML.seekEntries(head, seekHead.data..<seekHead.data + seekSize) {
                listed.insert(id)
                if position < 1 << 56 { positions[id] = Int64(segment.data) + Int64(position) }
            }
        }

        /// How many bytes the Segment declares beyond the file's end: a file cut short (a
        /// copy or download that stopped), whose Cues, at the end, went with it, so
        /// libavformat has no index to find past the end and reads what is there as the
        /// whole. nil where the Segment's size is unknown (a live recording) or fits.
        func shortfall(size: Int64) -> Int64? { segmentEnd.flatMap { $0 > size ? $0 - size : nil } }

        /// Whether the file has no Cues a player can find: its SeekHead, read whole at the
        /// Segment's start, lists neither Cues nor another SeekHead. (libavformat and
        /// ExoPlayer find Cues at the end only through the SeekHead.) False where no SeekHead
        /// is read there: nothing is known.
        var unindexed: Bool { seekHeadRead && cuesStart == nil && !listsSeekHead }

        /// Whether the file is whole, as its head says: its Cues begin within it and its
        /// Segment ends within it (or its size is unknown).
        func whole(size: Int64) -> Bool { cuesStart.map { $0 < size && (segmentEnd ?? 0) <= size } ?? false }

        /// The data of the top-level element `id` (Tracks, Chapters), found as libavformat
        /// finds it: through the SeekHead, or among the top-level elements before the first
        /// Cluster (where it may be without the SeekHead listing it). Nil where it is not
        /// found or holds more than `limit` bytes.
        func element(_ id: UInt32, path: String, limit: Int) -> [UInt8]? {
            guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
            func bytes(_ count: Int, at offset: Int64) -> [UInt8]? { try? file.read(upTo: count, at: offset) }
            func data(at: Int64) -> [UInt8]? {
                guard let header = bytes(16, at: at), let e = EBML.element(header, 0), e.id == id, let size = e.size,
                      size <= limit else { return nil }
                return bytes(size, at: at + Int64(e.data))
            }
            if let start = positions[id], let found = data(at: start) { return found }
            var at = segmentData
            for _ in 0..<64 {
                guard let header = bytes(16, at: at), let e = EBML.element(header, 0), let size = e.size else { return nil }
                if e.id == id { return data(at: at) }
                if e.id == 0x1F43_B675 { return nil }
                at += Int64(e.data) + Int64(size)
            }
            return nil
        }
    }

    /// How many bytes an MP4's `moov` box declares beyond the file's end: a file whose index
    /// is at its end (not made for streaming) and was cut short there. libavformat reads
    /// what is left of the index, streams whose sample entries went with the tail name no
    /// codec, and the file was refused as unsupported. Only the first 64 top-level box
    /// headers are read; nil where `moov` fits or is not found.
    static func movieBoxShortfall(_ path: String, size: Int64) -> Int64? {
        guard let cut = cutBox(path, size: size, through: "moov", boxes: 64), cut.type == "moov" else { return nil }
        return cut.missing
    }

    /// The first top-level box of an MP4 or QuickTime file that declares bytes past the
    /// file's end, and how many: where a file cut short stops. libavformat does not open a
    /// fragmented MP4 cut inside a `moof` (an interrupted download), nor one whose index
    /// was to come after its `mdat`, and said only that it was no media file it can read.
    /// Box headers are read (16 bytes each) up to `boxes` of them, or up to a box of type
    /// `through` that fits; nil where every box read fits, or, for any type, where the file
    /// does not start as MP4 does (random bytes would name a box).
    static func cutBox(_ path: String, size: Int64, through last: String? = nil,
                       boxes limit: Int = 1 << 20) -> (type: String, offset: Int64, missing: Int64)? {
        // Also asked of files that did not open: a named pipe must not be waited on here.
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              let file = try? FileDescriptor(path: path, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        var offset: Int64 = 0, n = 0
        while offset + 8 <= size, n < limit {
            defer { n += 1 }
            guard let head = try? file.read(upTo: 16, at: offset), head.count >= 8 else { return nil }
            var declared = Int64(FastStart.be32(head, 0))
            if declared == 1, head.count >= 16 { declared = head[8..<16].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
            let type = String(decoding: head[4..<8], as: UTF8.self)
            if n == 0, last == nil, !["ftyp", "styp", "moov", "mdat", "free", "skip", "wide"].contains(type) { return nil }
            guard declared >= 8 else { return nil }
            if declared > size - offset { return (type, offset, declared - (size - offset)) }
            if type == last { return nil }
            offset += declared
        }
        return nil
    }

    /// Damage in the movie box's own children, which libavformat reads in turn before any
    /// track, and in each track's boxes that say what it is (`trak`, `mdia`): a box's
    /// children must tile it (a size that runs past it, or lands inside a neighbour, has
    /// libavformat read what follows from the wrong place, or clamp the box over it), each
    /// of a readable four-character type, and the movie header one of its two sizes (108
    /// bytes, or 120 in version 1). An MP4 whose `mvhd` size was damaged lost its sound
    /// track, or every track, quietly: a remux came out with pictures alone. A track header
    /// (`tkhd`) or media header (`mdhd`) whose size was damaged swallowed the handler and
    /// the sample tables after it: libavformat made the track a data stream of no codec,
    /// and a film went out without its sound or its pictures, exit 0. Zeros may end a box
    /// (QuickTime's padding), and a box's size may be 64-bit (its header 16 bytes: its
    /// children start after it). Fragmented files are judged too: their tracks are declared
    /// here, their samples come later. nil where it is whole, or where there is no movie
    /// box to judge.
    static func movieBoxDamage(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG,
              let file = try? FileDescriptor(path: path, flags: O_RDONLY | O_NONBLOCK), let size = FileIO.size(atPath: path),
              let top = try? FastStart.topLevelBoxes(file, fileSize: size, limit: 64, upToDamage: true),
              let moov = top.first(where: { $0.type == "moov" }) else { return nil }
        return tilingDamage(of: moov, in: file)
    }

    /// A box's header length: 16 bytes where its size is 64-bit (its 32-bit size says 1),
    /// else 8; nil where it cannot be read.
    private static func headerLength(_ box: FastStart.Box, in file: FileDescriptor) -> Int64? {
        guard let size = try? file.read(upTo: 4, at: box.offset), size.count == 4 else { return nil }
        return size == [0, 0, 0, 1] ? 16 : 8
    }

    /// The boxes that hold a track's headers, which say what the track is (`tkhd`, `mdhd`,
    /// `hdlr`). Damage further in (`minf`, `stbl`) is left to the sample tables' own checks:
    /// libavformat reads each table by its entry count, and a size off by a byte at the
    /// tables' end loses nothing.
    private static let trackHeaders: Set<String> = ["trak", "mdia"]

    /// `movieBoxDamage` for one box and the track boxes within it.
    private static func tilingDamage(of container: FastStart.Box, in file: FileDescriptor) -> String? {
        let end = container.offset + container.size
        let within = container.type == "moov" ? "its index (moov)" : "its index's \(container.type) box at byte \(container.offset)"
        let reach = container.type == "moov" ? "the index's end" : "that box's end"
        guard let head = headerLength(container, in: file),
              var children = try? FastStart.topLevelBoxes(file, from: container.offset + head, fileSize: end, limit: 100_000, upToDamage: true)
        else { return nil }
        // Zeros to the end are padding, however many (a box of size 0 runs to its parent's end).
        if let last = children.last, last.type == "\0\0\0\0", let rest = try? file.read(upTo: Int(min(last.size, 1 << 20)), at: last.offset),
           rest.count == last.size, rest.allSatisfy({ $0 == 0 }) {
            children.removeLast()
        }
        // QuickTime's own types begin with "©" (0xA9, which the type's text cannot hold).
        let printable: (Int, UInt8) -> Bool = { at, byte in byte >= 0x20 && byte < 0x7f || at == 0 && byte == 0xA9 }
        for box in children {
            guard box.type.utf8.allSatisfy({ printable(1, $0) })
                    || (try? file.read(upTo: 4, at: box.offset + 4)).map({ $0.count == 4 && $0.enumerated().allSatisfy(printable) }) == true else {
                return "\(within) holds a box of no readable type at byte \(box.offset)"
            }
            if box.type == "mvhd", let header = headerLength(box, in: file), box.size - header != 100, box.size - header != 112 {
                return "its movie header (mvhd) declares \(box.size - header) bytes after its header, not 100 or 112"
            }
        }
        let offset = children.last.map { $0.offset + $0.size } ?? container.offset + head
        // What follows the last whole child, read once: zeros, or a box cut off.
        let rest = offset < end ? try? file.read(upTo: Int(min(end - offset, 1 << 20)), at: offset) : []
        if end - offset >= 8, rest?.allSatisfy({ $0 == 0 }) != true {
            return "\(within) holds a box at byte \(offset) whose size runs past \(reach)"
        }
        if let rest, rest.contains(where: { $0 != 0 }) {
            return "\(within) ends in \(end - offset) bytes that are no box"
        }
        for box in children where trackHeaders.contains(box.type) {
            if let damage = tilingDamage(of: box, in: file) { return damage }
        }
        return nil
    }

    /// A track whose sample tables give fewer samples than it holds, and cover far less
    /// time than its header declares: a sample count damaged in `stsz` (one sample of 250)
    /// leaves libavformat one picture to read, and a 10 s film came out as a single
    /// picture beside 10 s of sound, the sound's length passing for the output's. Both
    /// must hold: a track trimmed by an edit list also indexes fewer samples than it has,
    /// but covers the time it declares; a still picture shown for an hour is one sample.
    static func sampleTablesShortfall(_ demuxer: Demuxer) -> String? {
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            let type = st.pointee.codecpar.pointee.codec_type
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO,
                  st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let entries = Int(avformat_index_get_entries_count(st)), samples = Int(st.pointee.nb_frames)
            guard entries > 0, samples > entries, let declared = seconds(st.pointee.duration, st.pointee.time_base),
                  let first = avformat_index_get_entry(st, 0)?.pointee.timestamp,
                  let last = avformat_index_get_entry(st, Int32(entries - 1))?.pointee.timestamp else { continue }
            let step = entries > 1 ? (last - first) / Int64(entries - 1) : 0
            guard let span = seconds(last - first + step, st.pointee.time_base), declared - span > max(1, declared * 0.1) else { continue }
            return "stream \(i): its sample tables give \(entries) of its \(samples) samples, "
                + "\(Format.fixed(span, decimals: 2)) s of the \(Format.fixed(declared, decimals: 2)) s its track declares"
        }
        return nil
    }

    /// How an MP4 or QuickTime file is laid out in movie fragments: whether it has any
    /// (its `moov` holds an `mvex`, which announces them, or a `moof` follows), and whether
    /// a segment index says where all of them are: the first top-level `sidx`, the one
    /// players read (ExoPlayer builds its seek map from it alone), must reach the file's
    /// last fragment. A DASH or HLS download is its segments laid end to end, each with a
    /// `sidx` of its own 2 s: the first indexed only the first segment, and the file went
    /// out as it was, to players that could not seek in it. Only box headers are read (and
    /// the one `sidx`), of the first 64 top-level boxes and of `moov`'s children; a damaged
    /// box ends the walk.
    static func fragmentLayout(_ path: String) -> (fragments: Bool, indexed: Bool) {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY), let size = FileIO.size(atPath: path),
              // (A file cut short in its last fragment is fragmented all the same.)
              let top = try? FastStart.topLevelBoxes(file, fileSize: size, limit: 64, upToDamage: true) else { return (false, false) }
        var fragments = top.contains { $0.type == "moof" }
        if !fragments, let moov = top.first(where: { $0.type == "moov" }),
           let children = try? FastStart.topLevelBoxes(file, from: moov.offset + 8, fileSize: moov.offset + moov.size, limit: 64) {
            fragments = children.contains { $0.type == "mvex" }
        }
        guard let sidx = top.first(where: { $0.type == "sidx" }) else { return (fragments, false) }
        // A sidx without fragments (a damaged or odd file) indexes nothing to seek in: as before, not fragmented.
        guard fragments, let end = indexedEnd(file, sidx) else { return (fragments, !fragments) }
        if end >= Int64(size) { return (true, true) }
        // What follows the indexed fragments may be a fragment index (`mfra`) or free space, no fragment.
        let after = (try? FastStart.topLevelBoxes(file, from: end, fileSize: Int64(size), limit: 8, upToDamage: true)) ?? []
        return (true, !after.isEmpty && !after.contains { $0.type == "moof" || $0.type == "mdat" })
    }

    /// Where the fragments a `sidx` box references end: its anchor (the byte after it) plus
    /// its first offset and every reference's size. Nil where it references other `sidx`
    /// boxes (a hierarchy, which ExoPlayer refuses), or cannot be read.
    static func indexedEnd(_ file: FileDescriptor, _ sidx: FastStart.Box) -> Int64? {
        guard sidx.size >= 32, sidx.size <= 1 << 22, let b = try? file.read(upTo: Int(sidx.size), at: sidx.offset),
              b.count == Int(sidx.size) else { return nil }
        func be32(_ i: Int) -> Int64 { Int64(FastStart.be32(b, i)) }
        // Its header (8 bytes, 16 with a 64-bit size), version and flags, reference ID and
        // timescale; then the earliest time and the first offset, 32 or 64 bits each, 16
        // reserved bits and the count of 12-byte references.
        let h = be32(0) == 1 ? 16 : 8
        let version = b[h]
        let countAt = version == 0 ? h + 22 : h + 30
        guard countAt + 2 <= b.count else { return nil }
        let firstOffset = version == 0 ? be32(h + 16) : (be32(h + 20) << 32 | be32(h + 24))
        guard firstOffset >= 0, firstOffset < 1 << 52 else { return nil }
        let count = Int(b[countAt]) << 8 | Int(b[countAt + 1])
        var end = sidx.offset + sidx.size + firstOffset
        for k in 0..<count {
            let at = countAt + 2 + 12 * k
            guard at + 12 <= b.count else { return nil }
            let word = be32(at)
            guard word & 0x8000_0000 == 0 else { return nil }
            end += word
        }
        return end
    }
}
