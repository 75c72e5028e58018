import CFFmpeg
import KilnCore

/// A Matroska file's chapters as a player shows them. libavformat 5.1 reads every
/// edition's chapters into one list and keeps each one that starts after the last it
/// kept: a file with a second edition (a director's cut beside the theatrical one, another
/// language's chapter names) got the first edition's chapters with the second's tail
/// after them, whichever edition is the default. It keeps hidden and disabled chapters,
/// and chapters that are parts of other files (linked segments), timed in those files.
///
/// Here the default edition's chapters go (the first edition's where none is marked), in
/// its top level (sub-chapters are points inside their chapter), less the hidden, the
/// disabled and other files' parts.
///
/// An ordered edition (`EditionFlagOrdered`) is a timeline of its own: its chapters are
/// played in their order, a part of this file or another's each. Kiln delivers the file's
/// whole timeline, as libavformat reads it (and as ffmpeg and the media server's own
/// players do); the probe says so (`ordered_chapters`, `linked_segments`).
struct MatroskaChapters {
    struct Chapter: Equatable {
        var uid: UInt64 = 0
        /// Nanoseconds, in the file's timeline.
        var start: Int64 = 0
        var end: Int64?
        var title: String?
        var hidden = false
        var enabled = true
        /// Another file's part (`ChapterSegmentUID` naming a segment not this file's).
        var linked = false
    }

    struct Edition: Equatable {
        var isDefault = false
        var ordered = false
        var chapters: [Chapter] = []
    }

    /// The chosen edition: the default one, else the first.
    let edition: Edition
    /// Whether the file holds more than one edition.
    let editions: Int

    static let chaptersBytes = 4 << 20

    init?(head: Prober.MatroskaHead, path: String) {
        guard let bytes = head.element(0x1043_A770, path: path, limit: Self.chaptersBytes) else { return nil }
        // The Info element's SegmentUID: a chapter may name this file's own segment.
        let info = head.element(0x1549_A966, path: path, limit: 1 << 16)
        let uid = info.flatMap { info in EBML.children(info, 0..<info.count).first { $0.id == 0x73A4 }.map { Array(info[$0.range]) } }
        self.init(chapters: bytes, segmentUID: uid)
    }

    /// From the Chapters element's data, in the segment `segmentUID`.
    init?(chapters bytes: [UInt8], segmentUID: [UInt8]?) {
        let all = EBML.children(bytes, 0..<bytes.count).filter { $0.id == 0x45B9 }.map { Self.edition(bytes, $0.range, segmentUID) }
        guard let chosen = all.first(where: \.isDefault) ?? all.first else { return nil }
        edition = chosen
        editions = all.count
    }

    private static func edition(_ bytes: [UInt8], _ range: Range<Int>, _ segmentUID: [UInt8]?) -> Edition {
        var e = Edition()
        for child in EBML.children(bytes, range) {
            switch child.id {
            case 0x45DB: e.isDefault = EBML.unsigned(bytes, child.range) == 1
            case 0x45DD: e.ordered = EBML.unsigned(bytes, child.range) == 1
            case 0xB6: e.chapters.append(chapter(bytes, child.range, segmentUID))
            default: break
            }
        }
        return e
    }

    private static func chapter(_ bytes: [UInt8], _ range: Range<Int>, _ segmentUID: [UInt8]?) -> Chapter {
        var c = Chapter()
        for child in EBML.children(bytes, range) {
            let value = EBML.unsigned(bytes, child.range)
            switch child.id {
            case 0x73C4: c.uid = value ?? 0
            case 0x91: c.start = Int64(clamping: value ?? 0)
            case 0x92: c.end = value.map { Int64(clamping: $0) }
            case 0x98: c.hidden = value == 1
            case 0x4598: c.enabled = value != 0
            case 0x6E67: c.linked = !child.range.isEmpty && Array(bytes[child.range]) != segmentUID
            case 0x80 where c.title == nil:
                c.title = EBML.children(bytes, child.range).first { $0.id == 0x85 }.flatMap { EBML.string(bytes, $0.range) }
            default: break
            }
        }
        return c
    }

    /// The chapters shown: the edition's, less the hidden, the disabled and other files'.
    var shown: [Chapter] { edition.chapters.filter { !$0.hidden && $0.enabled && !$0.linked } }

    /// Whether libavformat's list is not the one a player shows.
    var differsFromLibavformat: Bool {
        editions > 1 || shown.count != edition.chapters.count
    }

    /// Puts the shown chapters in place of libavformat's where they differ, each ending
    /// where it says, else where the next begins, else at `fileEnd` (nanoseconds), as
    /// libavformat ends its own.
    func apply(to ctx: UnsafeMutablePointer<AVFormatContext>, fileEnd: Int64) {
        guard differsFromLibavformat else { return }
        let chapters = shown.sorted { $0.start < $1.start }
        let ends = chapters.indices.map { k in
            chapters[k].end ?? chapters[(k + 1)...].first { $0.start > chapters[k].start }?.start ?? max(fileEnd, chapters[k].start)
        }
        let titles = chapters.map { $0.title.flatMap { strdup($0) } }
        defer { for t in titles { free(t) } }
        let constTitles = titles.map { UnsafePointer($0) }
        _ = kiln_replace_chapters(ctx, Int32(chapters.count), chapters.map { Int64(bitPattern: $0.uid) }, chapters.map(\.start), ends, constTitles)
    }
}
