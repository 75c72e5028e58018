/// A text subtitle's cues made into what `mov_text` carries: one sample at a time, each
/// showing every cue that is on screen then. Sources overlap their cues all the time (two
/// speakers, a sign over dialogue, a cue that lingers while the next begins); an MP4 text
/// track cannot, and the MP4 muxer pushed each overlapping cue past the end of the one
/// before it (a sign meant for 1–3 s showed at 2–4 s, and every later cue moved with it).
/// So the timeline is cut wherever a cue starts or ends, and each piece shows the cues on
/// screen in it, one under the other, in the order they began.
///
/// Times are milliseconds on the output's timeline. Cues come in the order of their starts
/// (how every container stores them); a piece is final once a cue starting after it has
/// come, so a cue is held only until the next one starts.
struct CueSchedule: Equatable {
    /// A cue as the decoder gave it: its ASS events (`ReadOrder,Layer,Style,…,Text`).
    struct Cue: Equatable {
        var start: Int64
        /// nil: the source did not say (it lasts until the next cue, `unknownLengthCap` at most).
        var end: Int64?
        var events: [String]
        var order: Int
    }

    /// One sample of the output's text track: `events` shown from `start` to `end`.
    struct Sample: Equatable {
        var start: Int64
        var end: Int64
        var events: [String]
    }

    /// How long a cue whose source gives no end stays, when no cue follows it sooner.
    static let unknownLengthCap: Int64 = 10_000
    /// The most cues on screen at once, nil for no limit (`SubtitleLane.mostOnScreen`):
    /// a pile past it is left at it (3,000 overlapping TTML paragraphs made a 114 MB track
    /// of samples holding all of them, every sample going over them all).
    var mostOnScreen: Int?

    /// The most cues held that start past where the pictures and sound have come (`add`'s
    /// `reach`): they wait for the pictures to reach them, or for the end, which cuts them
    /// where the pictures stop. A subtitle track that runs on long past a short film (a
    /// 30 s clip with half an hour of dense cues) had every one held to the end, memory
    /// growing with the track's length; real ones hold a film's cues stored ahead of it (an
    /// MP4 whose text track is one chunk at its start: a few thousand).
    static let mostHeldAhead = 20_000
    /// Cues left out for coming while `mostHeldAhead` were held past the pictures.
    private(set) var aheadCues = 0

    /// Cues on screen together are stacked in the order `add` was given (`rank`), not by
    /// their starts: TTML's paragraphs flow into their region in document order.
    var stackedByRank = false

    /// Every cue is the whole screen (closed captions): it ends the ones before it, which
    /// the caption decoder times to end where it starts, give or take a millisecond of
    /// rounding that must not stack two screens.
    var oneScreen = false

    private(set) var pending: [Cue] = []
    /// Everything before this time has been handed out as samples.
    private var final: Int64?
    private var arrivals = 0
    /// Cues that came after later ones had been written: cut to start where the track is.
    private(set) var lateCues = 0
    /// Cues left out for coming while `mostOnScreen` were on screen.
    private(set) var crowdedCues = 0

    /// Adds a cue (`events` already cleaned) and returns the samples that are
    /// now final: those before its start, and before `reach` (how far the pictures and sound
    /// have come), so that a cue running on past their end can still be cut there.
    mutating func add(start: Int64, end: Int64?, events: [String], reach: Int64? = nil, rank: Int? = nil) -> [Sample] {
        // A cue with nothing to show still ends the ones that had no end (teletext clears its
        // page this way).
        guard !events.isEmpty else {
            endOpenCues(at: start)
            return []
        }
        var start = start
        if let final, start < final {
            lateCues += 1
            if let end, end <= final { return [] }
            start = final
        }
        if let end, end <= start { return [] }
        endOpenCues(at: start)
        if oneScreen {
            pending.removeAll { $0.start >= start }
            for i in pending.indices where pending[i].end.map({ $0 > start }) ?? true { pending[i].end = start }
        }
        if let most = mostOnScreen, pending.lazy.filter({ $0.start <= start && ($0.end ?? .max) > start }).count >= most {
            crowdedCues += 1
            return []
        }
        if let reach, start > reach, pending.count >= Self.mostHeldAhead {
            aheadCues += 1
            return []
        }
        arrivals += 1
        pending.append(Cue(start: start, end: end, events: events, order: rank ?? arrivals))
        // A cue from where the pictures and sound have not reached changes nothing before
        // them: while they stay where they were, there is nothing new to hand out. Cues
        // past their end (a subtitle file longer than the film) had made every cue go over
        // all those held before it: 40,000 took 160 s.
        let limit = min(start, reach ?? start)
        if let emitted = emittedUpTo, limit <= emitted { return [] }
        emittedUpTo = limit
        return emit(upTo: limit)
    }

    /// The limit of the last `emit` from `add`.
    private var emittedUpTo: Int64?
    /// How many times the held cues were gone over (`emit`): what the schedule's work grows with.
    private(set) var passes = 0

    /// A cue without an end gives way to whatever comes at `time` after it.
    private mutating func endOpenCues(at time: Int64) {
        for i in pending.indices where pending[i].end == nil && pending[i].start < time {
            pending[i].end = min(time, pending[i].start + Self.unknownLengthCap)
        }
    }

    /// The samples still held, with every cue cut at `end` (where the pictures and sound
    /// stop, nil if unknown): a cue past them would only keep a frozen screen going.
    mutating func finish(at end: Int64?) -> [Sample] {
        for i in pending.indices {
            var cueEnd = pending[i].end ?? pending[i].start + Self.unknownLengthCap
            if let end { cueEnd = min(cueEnd, end) }
            pending[i].end = cueEnd
        }
        pending.removeAll { $0.end! <= $0.start }
        return emit(upTo: .max)
    }

    /// The pieces that end by `limit`: the timeline is cut at every pending cue's start and
    /// end. A cue whose end is not known yet starts at or after `limit` (`add` gives the
    /// others theirs), so no piece reaches into it.
    private mutating func emit(upTo limit: Int64) -> [Sample] {
        passes += 1
        var cuts = Set<Int64>()
        for cue in pending {
            cuts.insert(cue.start)
            if let end = cue.end { cuts.insert(end) }
        }
        if let final {
            cuts.insert(final)
            cuts = cuts.filter { $0 >= final }
        }
        let times = cuts.sorted()
        var samples: [Sample] = []
        for (from, to) in zip(times, times.dropFirst()) where to <= limit {
            let on = pending.filter { $0.start <= from && ($0.end ?? .max) >= to }
                .sorted { stackedByRank ? $0.order < $1.order : ($0.start, $0.order) < ($1.start, $1.order) }
            if !on.isEmpty { samples.append(Sample(start: from, end: to, events: on.flatMap(\.events))) }
            final = to
        }
        if let final { pending.removeAll { $0.end.map { $0 <= final } ?? false } }
        return samples
    }
}

/// What Kiln changes in an ASS event's text before `mov_text` gets it.
enum AssEvent {
    /// The text field: everything after the eighth comma (`ReadOrder,Layer,Style,Name,
    /// MarginL,MarginR,MarginV,Effect,Text`).
    static func textRange(_ event: String) -> Range<String.Index>? {
        var commas = 0
        for i in event.indices where event[i] == "," {
            commas += 1
            if commas == 8 { return event.index(after: i)..<event.endIndex }
        }
        return nil
    }

    /// The event without its vector drawings (`{\p1}m 0 0 l 100 0 …{\p0}`: shapes a
    /// renderer draws, which `mov_text` would show as their coordinates), or nil when
    /// nothing is left to read (only drawings, tags or blank lines). A hard space (`\h`)
    /// becomes a no-break space, which the `mov_text` encoder would otherwise write as the
    /// letters "\h"; a soft break (`\n`, a break only in wrapping style 2, which a text
    /// track has not) becomes a space, which it would otherwise write as a new line.
    ///
    /// Only `{\…}` is an override block (as libavcodec's ASS reader and the `mov_text`
    /// encoder take it): other braces are text in a SubRip or WebVTT cue ("{laughs} I know"
    /// had lost its first word), and in an ASS event (`comments`) a comment, which renderers
    /// hide and which is left out.
    ///
    /// A SubRip cue's HTML character references (`entities`: "Tom &amp; Jerry", "it&#39;s",
    /// which SubRip files converted from web captions carry) become the characters they
    /// name, as the players that read SubRip show them; libavcodec's SubRip decoder leaves
    /// them as written, and a `mov_text` track would show "&amp;".
    static func readable(_ event: String, comments: Bool = false, entities: Bool = false) -> String? {
        guard let range = textRange(event) else { return nil }
        let text = event[range]
        var kept = ""
        var visible = false
        var drawing = false
        var i = text.startIndex
        while i < text.endIndex {
            if let close = overrideBlock(text, at: i) {
                let block = text[i...close]
                if let scale = drawingScale(block) { drawing = scale > 0 }
                kept += block
                i = text.index(after: close)
                continue
            }
            if comments, text[i] == "{", let close = text[i...].firstIndex(of: "}") {
                i = text.index(after: close)
                continue
            }
            if text[i] == "\\", let next = text.index(i, offsetBy: 1, limitedBy: text.endIndex), next < text.endIndex,
               "Nnh".contains(text[next]) {
                // Line breaks and hard spaces are not something to read on their own.
                if !drawing {
                    switch text[next] {
                    case "h": kept.append("\u{00A0}")
                    case "n": kept.append(" ")
                    default: kept += text[i...next]
                    }
                }
                i = text.index(after: next)
                continue
            }
            if entities, text[i] == "&", let (character, end) = reference(text[i...]) {
                if !drawing {
                    kept.append(character)
                    if !character.isWhitespace { visible = true }
                }
                i = end
                continue
            }
            if !drawing {
                kept.append(text[i])
                if !text[i].isWhitespace { visible = true }
            }
            i = text.index(after: i)
        }
        return visible ? String(event[..<range.lowerBound]) + kept : nil
    }

    /// The character an HTML character reference at the start of `text` names (`&amp;`,
    /// `&#39;`, `&#x2019;`), and where the reference ends; nil for anything else (a lone
    /// "AT&T", an unknown name), and for what would be markup or a control character here
    /// (`&#123;` is "{", which would open an override block).
    static func reference(_ text: Substring) -> (Character, String.Index)? {
        guard let semicolon = text.prefix(12).firstIndex(of: ";") else { return nil }
        let name = text[text.index(after: text.startIndex)..<semicolon]
        let scalar: Unicode.Scalar?
        if name.hasPrefix("#x") || name.hasPrefix("#X") {
            scalar = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init)
        } else if name.hasPrefix("#") {
            scalar = UInt32(name.dropFirst(), radix: 10).flatMap(Unicode.Scalar.init)
        } else {
            scalar = namedReferences[String(name)]
        }
        guard let scalar, scalar.value >= 0x20, !(0x7F...0x9F).contains(scalar.value), !"{}\\".unicodeScalars.contains(scalar) else { return nil }
        return (Character(scalar), text.index(after: semicolon))
    }

    /// The named references SubRip files carry: XML's five, the no-break space and
    /// typography's.
    private static let namedReferences: [String: Unicode.Scalar] = [
        "amp": "&", "lt": "<", "gt": ">", "quot": "\"", "apos": "'", "nbsp": "\u{00A0}",
        "hellip": "\u{2026}", "mdash": "\u{2014}", "ndash": "\u{2013}", "lsquo": "\u{2018}", "rsquo": "\u{2019}",
        "ldquo": "\u{201C}", "rdquo": "\u{201D}", "laquo": "\u{00AB}", "raquo": "\u{00BB}", "copy": "\u{00A9}",
        "reg": "\u{00AE}", "trade": "\u{2122}", "deg": "\u{00B0}", "iexcl": "\u{00A1}", "iquest": "\u{00BF}",
    ]

    /// The event with its bold, italic and underline stated in full at every change, as
    /// libavcodec 5.1's `mov_text` encoder needs them: it keeps one style at a time, so a
    /// style begun inside another ended the outer one (`{\b1}bold {\i1}both{\i0} bold`
    /// came out with only "both" styled, and italic, not bold), `{\r}` (a reset, which its
    /// own decoder writes: every styled MP4 source) ended nothing, and colour only reached
    /// it spelt `\1c`, not `\c`. Each block that changes them ends with all three off and
    /// then those on; an event still styled at its end closes them, since the events of a
    /// sample run together.
    static func forMovText(_ event: String) -> String {
        guard let range = textRange(event), event[range].contains("{") else { return event }
        let text = event[range]
        var out = String(event[..<range.lowerBound])
        var state: Set<Character> = [], i = text.startIndex
        func full(_ s: Set<Character>) -> String { "\\b0\\i0\\u0" + ["b", "i", "u"].filter(s.contains).map { "\\\($0)1" }.joined() }
        while i < text.endIndex {
            guard let close = overrideBlock(text, at: i) else {
                out.append(text[i])
                i = text.index(after: i)
                continue
            }
            var kept = "", next = state
            for tag in text[text.index(after: i)..<close].split(separator: "\\", omittingEmptySubsequences: true) {
                let name = tag.first!, rest = tag.dropFirst()
                let number = rest.isEmpty || !rest.allSatisfy(\.isASCII) ? nil : Int(rest)
                switch name {
                case "b" where number != nil:
                    if number! == 1 || number! >= 600 { next.insert("b") } else { next.remove("b") }
                case "i" where number != nil, "u" where number != nil:
                    if number! != 0 { next.insert(name) } else { next.remove(name) }
                case "r":
                    // The encoder's reset puts back the style's colour, alpha and size;
                    // bold, italic and underline are stated in full below all the same.
                    next = []
                    kept += "\\" + tag
                case "c" where rest.isEmpty || rest.hasPrefix("&"):
                    kept += "\\1c" + rest
                default:
                    kept += "\\" + tag
                }
            }
            if next != state { kept += full(next) }
            state = next
            if !kept.isEmpty { out += "{" + kept + "}" }
            i = text.index(after: close)
        }
        if !state.isEmpty { out += "{" + full([]) + "}" }
        return out
    }

    /// Where the override block that opens at `i` (`{\…}`) closes; nil where none opens there.
    static func overrideBlock(_ text: Substring, at i: String.Index) -> String.Index? {
        guard text[i] == "{", text[i...].dropFirst().first == "\\" else { return nil }
        return text[i...].firstIndex(of: "}")
    }

    /// The contents of the override blocks in an event's text, in order (without braces).
    static func overrideBlocks(_ event: String) -> [Substring] {
        guard let range = textRange(event) else { return [] }
        let body = event[range]
        var blocks: [Substring] = []
        var i = body.startIndex
        while i < body.endIndex {
            guard let close = overrideBlock(body, at: i) else {
                i = body.index(after: i)
                continue
            }
            blocks.append(body[body.index(after: i)..<close])
            i = body.index(after: close)
        }
        return blocks
    }

    /// The last `\p<n>` in an override block: a drawing's scale, 0 to end it.
    private static func drawingScale(_ block: Substring) -> Int? {
        var scale: Int?
        var i = block.startIndex
        while let slash = block[i...].firstIndex(of: "\\") {
            var j = block.index(after: slash)
            guard j < block.endIndex else { break }
            if block[j] == "p" {
                j = block.index(after: j)
                let digits = block[j...].prefix { $0.isASCII && $0.isNumber }
                if !digits.isEmpty { scale = Int(digits) }
            }
            i = j
        }
        return scale
    }

    /// Events shown together, one under the other: `mov_text`'s encoder runs the events of
    /// a sample together, so each but the last ends with a line break. A text on screen
    /// twice at once is stacked once (`withoutRepeats`).
    static func stacked(_ events: [String], sizes: [Substring: Double] = [:]) -> [String] {
        let events = fewerSigns(withoutRepeats(joinedPieces(events, sizes: sizes)))
        return events.enumerated().map { i, event in i < events.count - 1 ? forMovText(event) + "\\N" : forMovText(event) }
    }

    /// At most `signsOnScreen` of the events an ASS script places on the picture (`\pos`,
    /// `\move`: a typesetter's signs, read where they stand) in one sample, the first to
    /// begin; every other event (the dialogue) stays. A text track shows a sample as one
    /// block of lines at the bottom: thirty signs at once (a title card's credits, a
    /// screen of labels) made a 31-line block over the whole picture, the dialogue lost
    /// in it.
    static func fewerSigns(_ events: [String]) -> [String] {
        var signs = 0
        return events.filter { event in
            guard placed(event) else { return true }
            signs += 1
            return signs <= signsOnScreen
        }
    }

    /// How many placed events (signs) one sample shows at most (`fewerSigns`).
    static let signsOnScreen = 4

    /// Whether an override block of the event places it on the picture (`\pos`, `\move`).
    static func placed(_ event: String) -> Bool {
        overrideBlocks(event).contains { Piece.end(of: "\\pos(", in: $0) != nil || Piece.end(of: "\\move(", in: $0) != nil }
    }

    /// The events with each text shown once: an ASS sign is drawn in layers of the same
    /// text (its border and blur on one, its fill over it on the next), which a renderer
    /// lays one over the other and a text track would list one under the other, and a
    /// SubRip file may hold a line twice. The one on the highest layer (the fill, its
    /// colour) stays, where the first stood.
    static func withoutRepeats(_ events: [String]) -> [String] {
        guard events.count > 1 else { return events }
        var firstAt: [String: Int] = [:]
        var kept: [String] = []
        for event in events {
            let key = visibleText(event)
            if let at = firstAt[key] {
                if layer(event) >= layer(kept[at]) { kept[at] = event }
            } else {
                firstAt[key] = kept.count
                kept.append(event)
            }
        }
        return kept
    }

    /// Events that are pieces of one line, put back together. A karaoke effect (an anime
    /// opening's or ending's sung line) draws its line as one event per syllable or letter,
    /// each placed by `\pos` where it stands in the line: a text track listed them one under
    /// the other, so the line read downwards a syllable at a time, reshuffled as each lit up.
    /// Events of one style placed at one height (`sameHeight`) are one line, read left to
    /// right; the same piece drawn twice at once (a border layer, a glow a pixel off) counts
    /// once, the highest layer's. The gaps are judged by the pieces' widths in a common
    /// sans-serif's proportions (`Piece.ems`), at the scale of the style's font (`sizes`,
    /// from the script's header, or the piece's `\fs`), or where neither says, the scale
    /// the line's own spacing gives (`spacing`, so at least `piecesOfALine` pieces): a gap
    /// of two thirds of a space or more is a space (never between Chinese, Japanese or Korean
    /// letters), and one wider than `apartEms`, or an overlap of more than half an em,
    /// parts two lines at one height (signs around the screen). Hebrew and Arabic read
    /// right to left. A piece of more than one line (`\N`) is no piece, and fewer than
    /// `piecesOfALine` pieces stay as they are.
    static func joinedPieces(_ events: [String], sizes: [Substring: Double] = [:]) -> [String] {
        guard events.count >= piecesOfALine else { return events }
        var styles: [Substring: [Piece]] = [:]
        for (i, event) in events.enumerated() {
            guard var piece = Piece(event, at: i) else { continue }
            piece.fontSize = piece.fontSize ?? sizes[piece.style]
            styles[piece.style, default: []].append(piece)
        }
        // One height: within `sameHeight` of the piece above (a shadow drawn a pixel lower).
        var groups: [[Piece]] = []
        for pieces in styles.values where pieces.count >= piecesOfALine {
            for piece in pieces.sorted(by: { $0.y < $1.y }) {
                if let last = groups.last?.last, last.style == piece.style, piece.y - last.y <= sameHeight {
                    groups[groups.count - 1].append(piece)
                } else {
                    groups.append([piece])
                }
            }
        }
        var joined: [Int: String] = [:]
        var absorbed = Set<Int>()
        for group in groups where group.count >= piecesOfALine {
            for line in lines(of: group) where line.count >= 2 {
                let members = line.map(\.index) + line.flatMap(\.copies)
                let first = members.min()!
                guard let range = textRange(events[first]) else { continue }
                // Read in the line's direction: right to left where its letters are.
                let rightToLeft = line.filter(\.rightToLeft).count * 2 > line.count
                var text = ""
                for k in rightToLeft ? Array(line.indices.reversed()) : Array(line.indices) {
                    if !text.isEmpty, line[rightToLeft ? k : k - 1].spaceAfter { text += " " }
                    let event = events[line[k].index]
                    text += event[textRange(event)!]
                }
                joined[first] = events[first][..<range.lowerBound] + text
                absorbed.formUnion(members.filter { $0 != first })
            }
        }
        guard !joined.isEmpty else { return events }
        return events.indices.compactMap { absorbed.contains($0) ? nil : joined[$0] ?? events[$0] }
    }

    /// The fewest pieces at one height that are taken for one line.
    static let piecesOfALine = 4
    /// Pieces this close in height (script pixels) are at one height: a shadow or glow a
    /// pixel or two off, never the next line down (a line is its font's size apart).
    static let sameHeight = 4.0
    /// A gap wider than this (ems: four letters or so) between two pieces at one height
    /// parts them, as does an overlap of more than `overlapEms`; one of `spaceEms` or
    /// more is a space (a space is 0.28 em; a font a sixth wider than Helvetica leaves
    /// 0.17 between two syllables that touch).
    static let apartEms = 2.0
    static let overlapEms = 0.5
    static let spaceEms = 0.18
    /// An ASS font size is the font's line height, ascent and descent: Arial's is 1.15 em.
    static let emPerFontSize = 0.87

    /// An event placed on its own (`\pos` or `\move`), as a piece of a line.
    struct Piece {
        var index: Int
        var style: Substring
        var x: Double
        var y: Double
        /// Where `x` is on the piece: 0 its left, 1 its centre, 2 its right (`\an`; centred
        /// where the event does not say, as most styles are).
        var anchor: Int
        var text: String
        /// Its width in ems (`ems`).
        var width: Double
        var wide: Bool
        var layer: Int
        /// Its font size: its own `\fs`, else its style's (set by `joinedPieces`).
        var fontSize: Double?
        /// Whether its letters read right to left (Hebrew, Arabic).
        var rightToLeft: Bool
        /// Set by `lines`: a space follows it in the line.
        var spaceAfter = false
        /// Set by `lines`: the events that drew it again (other layers), left out.
        var copies: [Int] = []

        init?(_ event: String, at index: Int) {
            guard AssEvent.textRange(event) != nil else { return nil }
            var position: (Double, Double)?, anchor: Int?, size: Double?
            for block in AssEvent.overrideBlocks(event) {
                // The first of each counts, as renderers take it.
                // A piece that moves (`\move(x1,y1,x2,y2)`) ends where it stands in the line.
                if position == nil { position = Piece.point(after: "\\pos(", in: block) ?? Piece.point(after: "\\move(", in: block, at: 2) }
                if anchor == nil, let an = Piece.end(of: "\\an", in: block), let digit = block[an...].first?.wholeNumberValue,
                   (1...9).contains(digit) {
                    anchor = (digit - 1) % 3
                }
                // `\fs40`, not `\fscx`, `\fscy` or `\fsp`.
                var from = block.startIndex
                while size == nil, let fs = Piece.end(of: "\\fs", in: block[from...]) {
                    if block[fs...].first?.isNumber == true { size = Double(String(block[fs...].prefix { $0.isNumber || $0 == "." })) }
                    from = fs
                }
            }
            let text = AssEvent.visibleText(event)
            // A block of lines is no piece of one.
            guard let (x, y) = position, !text.isEmpty, Piece.end(of: "\\N", in: Substring(text)) == nil else { return nil }
            self.index = index
            style = event.split(separator: ",", maxSplits: 3, omittingEmptySubsequences: false).dropFirst(2).first ?? ""
            self.x = x
            self.y = y
            self.anchor = anchor ?? 1
            self.text = text
            wide = text.unicodeScalars.contains(where: Piece.isWide)
            rightToLeft = text.unicodeScalars.contains { (0x0590...0x08FF).contains($0.value) || (0xFB1D...0xFEFF).contains($0.value) }
            fontSize = size.flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
            width = Piece.ems(text)
            layer = AssEvent.layer(event)
        }

        /// Two numbers after `tag`, from the `first` (`\pos(x,y)`, `\move(x1,y1,x2,y2)`).
        static func point(after tag: String, in block: Substring, at first: Int = 0) -> (Double, Double)? {
            guard let open = end(of: tag, in: block) else { return nil }
            let numbers = block[open...].prefix { $0 != ")" }.split(separator: ",")
                .map { Double(String($0.filter { !$0.isWhitespace })) }
            guard numbers.count >= first + 2, let x = numbers[first], let y = numbers[first + 1], x.isFinite, y.isFinite else { return nil }
            return (x, y)
        }

        /// Where the first `tag` in `block` ends.
        static func end(of tag: String, in block: Substring) -> Substring.Index? {
            block.occurrences(of: tag).first?.upperBound
        }

        /// Chinese, Japanese and Korean letters (kana, CJK ideographs, Hangul, full-width forms).
        static func isWide(_ u: Unicode.Scalar) -> Bool {
            switch u.value {
            case 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF, 0xFF00...0xFFEF: true
            default: false
            }
        }

        /// How far the next piece's `x` lies from this one's when they touch, in ems.
        func reach(to next: Piece) -> Double {
            switch anchor {
            case 0: width
            case 2: next.width
            default: (width + next.width) / 2
            }
        }

        /// A text's width in ems, its letters' advances in Helvetica's proportions (Arial's
        /// are the same), which sans-serif fonts roughly share: letter by letter, a piece's
        /// width varies from 0.22 em (i) to 0.94 (W), more than the 0.28 of a space, so a
        /// count of letters could not tell a space from a wide letter. Other letters count
        /// as an average one, Chinese, Japanese and Korean ones as a full em.
        static func ems(_ text: String) -> Double {
            text.unicodeScalars.reduce(0) { sum, u in
                let v = Int(u.value)
                let advance = v >= 0x20 && v < 0x7f ? asciiAdvances[v - 0x20] : isWide(u) ? 1000 : 556
                return sum + Double(advance) / 1000
            }
        }

        /// Helvetica's advances (thousandths of an em) for U+0020 to U+007E.
        static let asciiAdvances: [Int] = [
            278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
            556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
            1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
            667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
            333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
            556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
        ]
    }

    /// One height's pieces as lines, each left to right (`joinedPieces`); empty where the
    /// pieces give no spacing to judge by.
    static func lines(of group: [Piece]) -> [[Piece]] {
        let sorted = group.sorted { ($0.x, $0.layer) < ($1.x, $1.layer) }
        let drawn = spacing(sorted)
        var pieces: [Piece] = []
        for piece in sorted {
            // The same piece again, on another layer or a pixel or two off: once, on top.
            if let last = pieces.last, last.text == piece.text, piece.x - last.x < last.reach(to: piece) / 2 * drawn {
                if piece.layer >= last.layer {
                    pieces[pieces.count - 1] = piece
                    pieces[pieces.count - 1].copies = last.copies + [last.index]
                } else {
                    pieces[pieces.count - 1].copies.append(piece.index)
                }
                continue
            }
            pieces.append(piece)
        }
        guard pieces.count >= piecesOfALine else { return [] }
        // The font's em, where its size is known, else the line's own spacing. (The spacing
        // cannot tell a wider font from a line of words each followed by a space: both
        // place every piece further on.)
        let sizes = pieces.compactMap(\.fontSize).sorted()
        let em = sizes.isEmpty ? spacing(pieces) : sizes[sizes.count / 2] * emPerFontSize
        guard em > 0 else { return [] }
        var lines: [[Piece]] = [[pieces[0]]]
        for (a, b) in zip(pieces, pieces.dropFirst()) {
            let gap = b.x - a.x - a.reach(to: b) * em
            if gap > apartEms * em || gap < -overlapEms * em {
                lines.append([b])
                continue
            }
            lines[lines.count - 1][lines[lines.count - 1].count - 1].spaceAfter = gap >= spaceEms * em && !a.wide && !b.wide
            lines[lines.count - 1].append(b)
        }
        return lines
    }

    /// The size of an em along the pieces: each neighbour's distance by the ems between
    /// them, the lowest third's largest; 0 where they give none (pieces over each other).
    /// Not the median: a sung Japanese line in romaji has a space after nearly every other
    /// syllable ("ki|mi |no |na|ma|e |wa"), which took the median up by a space.
    static func spacing(_ pieces: [Piece]) -> Double {
        let each = zip(pieces, pieces.dropFirst()).compactMap { a, b -> Double? in
            let ems = a.reach(to: b)
            return ems > 0 && b.x > a.x ? (b.x - a.x) / ems : nil
        }.sorted()
        return each.isEmpty ? 0 : each[each.count / 3]
    }

    /// Each style's font size in an ASS header (`[V4+ Styles]`, `[V4 Styles]`), scaled by
    /// its width (`ScaleX`), keyed by name: what `joinedPieces` measures a line's pieces by.
    static func styleSizes(header: String) -> [Substring: Double] {
        var sizes: [Substring: Double] = [:]
        var inStyles = false
        var columns: [String] = []
        for raw in header.split(whereSeparator: \.isNewline) {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("[") {
                inStyles = line.lowercased().hasSuffix("styles]")
                continue
            }
            guard inStyles, let colon = line.firstIndex(of: ":") else { continue }
            let fields = line[line.index(after: colon)...].split(separator: ",", omittingEmptySubsequences: false)
                .map { String($0).trimmingSpaces }
            switch line[..<colon].lowercased() {
            case "format": columns = fields.map { $0.lowercased() }
            case "style":
                guard let name = columns.firstIndex(of: "name"), let size = columns.firstIndex(of: "fontsize"),
                      fields.count == columns.count, let points = Double(fields[size]), points > 0, points.isFinite else { continue }
                let scale = columns.firstIndex(of: "scalex").flatMap { Double(fields[$0]) }.map { $0 / 100 } ?? 1
                sizes[Substring(fields[name])] = points * (scale > 0 && scale.isFinite ? scale : 1)
            default: continue
            }
        }
        return sizes
    }

    /// An event's text without its override blocks, as it reads.
    static func visibleText(_ event: String) -> String {
        guard let range = textRange(event) else { return event }
        let body = event[range]
        var text = ""
        var i = body.startIndex
        while i < body.endIndex {
            if let close = overrideBlock(body, at: i) {
                i = body.index(after: close)
                continue
            }
            text.append(body[i])
            i = body.index(after: i)
        }
        return String(text.drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }

    /// An event's layer: its second field (`ReadOrder,Layer,…`).
    static func layer(_ event: String) -> Int {
        event.split(separator: ",", maxSplits: 2, omittingEmptySubsequences: false).dropFirst().first.flatMap { Int($0) } ?? 0
    }
}
