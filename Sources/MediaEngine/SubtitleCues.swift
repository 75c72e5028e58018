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
    static func stacked(_ events: [String]) -> [String] {
        let events = withoutRepeats(events)
        return events.enumerated().map { i, event in i < events.count - 1 ? forMovText(event) + "\\N" : forMovText(event) }
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
