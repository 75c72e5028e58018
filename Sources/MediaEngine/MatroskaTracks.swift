#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// What a Matroska file's track entries say that libavformat 5.1 does not pass on: the
/// track's language as a BCP 47 tag (`LanguageIETF`, which mkvmerge writes beside the ISO
/// 639-2 code: "pt-BR" and "pt-PT" are both "por" there), whether the track is enabled
/// (`FlagEnabled` 0: a player must not play it), and how its blocks are compressed
/// (`ContentCompAlgo`: zlib, which libavformat undoes and ExoPlayer does not).
///
/// Only the Tracks element's bytes are read (at most `tracksBytes`,
/// `Prober.MatroskaHead.element`).
struct MatroskaTracks {
    struct Entry: Equatable {
        var number: Int
        /// TrackType: 1 video, 2 audio, 0x11 subtitle, …
        var type = 0
        var languageTag: String?
        var enabled = true
        /// ContentCompAlgo of the track's compression: 0 zlib, 1 bzlib, 2 lzo1x, 3 header
        /// stripping; nil for none.
        var compression: Int?
        /// CodecID ("V_MPEGH/ISO/HEVC", "S_TEXT/WEBVTT").
        var codecID: String?
    }

    /// TrackType's numbers for the stream types libavformat makes of them.
    static let trackTypes: [AVMediaType: Int] = [AVMEDIA_TYPE_VIDEO: 1, AVMEDIA_TYPE_AUDIO: 2, AVMEDIA_TYPE_SUBTITLE: 0x11]

    /// Whether `entries` are the streams whose media types are `streams`, in order.
    /// libavformat keeps no track number: it makes a stream of each entry in order
    /// (attachments after them), so entries and streams are matched in order, and only
    /// where each entry's type is its stream's (a track libavformat passed over would shift
    /// every one after it).
    static func match(_ entries: [Entry], _ streams: [AVMediaType]) -> Bool {
        entries.count <= streams.count && zip(entries, streams).allSatisfy { entry, type in trackTypes[type] == entry.type }
    }

    /// Codecs libavcodec has for CodecIDs libavformat 5.1 does not know, which made a stream
    /// of no codec and so dropped the track: mkvmerge's WebVTT (`S_TEXT/WEBVTT`, the
    /// Matroska codec specification's; FFmpeg 6.1 reads it). Its blocks are the cue's text
    /// (its settings and identifier go in BlockAdditions), which is what libavcodec's WebVTT
    /// decoder reads.
    static let codecsLibavformatLacks: [String: AVCodecID] = ["S_TEXT/WEBVTT": AV_CODEC_ID_WEBVTT]

    /// Names, after the analysis, the codec of each track whose CodecID libavformat does not
    /// know and libavcodec can read (`codecsLibavformatLacks`), in the stream's metadata
    /// (`Demuxer.codecID`), and reads the stream from then on. Not in its parameters: the
    /// demuxer reads a block by its stream's codec, and takes a WebVTT block for WebM's
    /// older layout (an identifier line, a settings line, then the text), which mkvmerge's
    /// blocks are not: it refused them and left the rest of their cluster unread, pictures
    /// and all.
    static func nameLackingCodecs(_ ctx: UnsafeMutablePointer<AVFormatContext>, with entries: [Entry]) {
        let streams = (0..<Int(ctx.pointee.nb_streams)).compactMap { ctx.pointee.streams[$0] }
        guard match(entries, streams.map { $0.pointee.codecpar.pointee.codec_type }) else { return }
        for (entry, st) in zip(entries, streams) {
            if st.pointee.codecpar.pointee.codec_id == AV_CODEC_ID_NONE, let id = entry.codecID.flatMap({ codecsLibavformatLacks[$0] }) {
                av_dict_set(&st.pointee.metadata, Demuxer.namedCodecKey, avcodec_get_name(id), 0)
                // Left unread at open, as every unknown codec's stream is (`leaveUnknownCodecsUnread`).
                st.pointee.discard = AVDISCARD_DEFAULT
            }
        }
    }

    /// The first entry whose header cannot be what a muxer wrote, so that libavformat lost
    /// its track or its packets: a TrackType that hides what the CodecID says it carries
    /// (pictures `V_`, sound `A_`, subtitles `S_` under another type: libavformat goes by
    /// the type, and passes over one it does not read); a type of media with no CodecID
    /// (libavformat passes over such an entry); a TrackNumber of 0, which no block can
    /// name (the track's stream has no packets). A damaged byte made a film's video track
    /// type 9, and the film went out as its sound alone, exit 0.
    static func hiddenTrack(_ entries: [Entry]) -> String? {
        let kinds: [(prefix: String, type: Int, what: String)] = [("V_", 1, "pictures"), ("A_", 2, "sound"), ("S_", 0x11, "subtitles")]
        for entry in entries {
            if entry.number == 0, let kind = kinds.first(where: { $0.type == entry.type }) {
                return "a track of \(kind.what) has no track number (0), which no block can name"
            }
            if let codec = entry.codecID {
                guard let kind = kinds.first(where: { codec.hasPrefix($0.prefix) }), entry.type != kind.type else { continue }
                return "track \(entry.number) holds \(kind.what) (\(codec)) but its type says \(entry.type)"
            }
            if let kind = kinds.first(where: { $0.type == entry.type }) {
                return "track \(entry.number), of \(kind.what), names no codec"
            }
        }
        return nil
    }

    static let tracksBytes = 1 << 20

    /// The entries, nil where the file's Tracks cannot be found or read.
    static func read(head: Prober.MatroskaHead, path: String) -> [Entry]? {
        guard let tracks = head.element(0x1654_AE6B, path: path, limit: tracksBytes) else { return nil }
        return entries(tracks)
    }

    private static func entries(_ tracks: [UInt8]) -> [Entry] {
        EBML.children(tracks, 0..<tracks.count).filter { $0.id == 0xAE }.compactMap { entry in
            var e = Entry(number: 0)
            for child in EBML.children(tracks, entry.range) {
                switch child.id {
                case 0xD7: e.number = Int(clamping: EBML.unsigned(tracks, child.range) ?? 0)
                case 0x83: e.type = Int(clamping: EBML.unsigned(tracks, child.range) ?? 0)
                case 0xB9: e.enabled = EBML.unsigned(tracks, child.range) != 0
                case 0x22B59D: e.languageTag = EBML.string(tracks, child.range)
                case 0x86: e.codecID = EBML.string(tracks, child.range)
                case 0x6D80:
                    for encoding in EBML.children(tracks, child.range) where encoding.id == 0x6240 {
                        for part in EBML.children(tracks, encoding.range) where part.id == 0x5034 {
                            // ContentCompAlgo defaults to 0, zlib, and is often left out.
                            let algo = EBML.children(tracks, part.range).first { $0.id == 0x4254 }
                            e.compression = algo.flatMap { EBML.unsigned(tracks, $0.range) }.map { Int(clamping: $0) } ?? 0
                        }
                    }
                default: break
                }
            }
            // An entry with neither a number nor a type is no track's (a Void or an element
            // of no meaning read as one); a track of 0 is damage (`hiddenTrack`).
            return e.number > 0 || e.type > 0 ? e : nil
        }
    }
}

/// The few pieces of EBML (Matroska's element syntax) the readers of a file's head need.
enum EBML {
    /// An element at `at`: its ID (with its length marker), where its data starts, and
    /// its size (nil: unknown, all ones).
    static func element(_ bytes: [UInt8], _ at: Int) -> (id: UInt32, data: Int, size: Int?)? {
        guard at < bytes.count, bytes[at] != 0 else { return nil }
        let idLength = bytes[at].leadingZeroBitCount + 1
        guard idLength <= 4, at + idLength <= bytes.count else { return nil }
        let id = bytes[at..<at + idLength].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let s = at + idLength
        guard s < bytes.count, bytes[s] != 0 else { return nil }
        let length = bytes[s].leadingZeroBitCount + 1
        guard s + length <= bytes.count else { return nil }
        var value = UInt64(bytes[s] & (0xFF >> length))
        for k in 1..<length { value = value << 8 | UInt64(bytes[s + k]) }
        let unknown = value == (UInt64(1) << (7 * length)) - 1
        return (id, s + length, unknown ? nil : Int(clamping: value))
    }

    /// The elements inside `range`, each with its data's range (cut at the range's end).
    static func children(_ bytes: [UInt8], _ range: Range<Int>) -> [(id: UInt32, range: Range<Int>)] {
        var out: [(id: UInt32, range: Range<Int>)] = []
        var at = range.lowerBound
        while at < range.upperBound, let e = element(bytes, at), let size = e.size {
            let end = min(range.upperBound, e.data + size)
            guard e.data <= end else { break }
            out.append((e.id, e.data..<end))
            at = e.data + size
        }
        return out
    }

    /// A SeekHead's entries in `range`: each element's ID (SeekID) and its position from
    /// the Segment's data (SeekPosition).
    static func seekEntries(_ bytes: [UInt8], _ range: Range<Int>) -> [(id: UInt32, position: UInt64)] {
        children(bytes, range).filter { $0.id == 0x4DBB }.compactMap { seek in
            var id: UInt64?, position: UInt64?
            for child in children(bytes, seek.range) {
                if child.id == 0x53AB { id = unsigned(bytes, child.range) }
                if child.id == 0x53AC { position = unsigned(bytes, child.range) }
            }
            guard let id, id <= UInt64(UInt32.max), let position else { return nil }
            return (UInt32(id), position)
        }
    }

    /// A string element's value, up to its first zero byte; nil where it is empty.
    static func string(_ bytes: [UInt8], _ range: Range<Int>) -> String? {
        let text = String(decoding: bytes[range].prefix { $0 != 0 }, as: UTF8.self)
        return text.isEmpty ? nil : text
    }

    /// An unsigned integer element's value (at most 8 bytes).
    static func unsigned(_ bytes: [UInt8], _ range: Range<Int>) -> UInt64? {
        range.count <= 8 ? bytes[range].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : nil
    }
}
