/// The cues of a TTML document (W3C Timed Text Markup Language: IMSC, EBU-TT-D, SMPTE-TT),
/// as MP4 carries it (`stpp`, ISO 14496-30: a whole document a sample). libavformat 5.1
/// gives such a track as data and libavcodec has no decoder for it, so the subtitle lane
/// reads it here.
///
/// A cue is a paragraph (`p`) with its time: `begin`, `end` and `dur` on `body`, `div`, `p`
/// and `span`, each relative to its parent's begin (TTML's default `par` container) and
/// ending no later than the parent; clock times (`01:02:03.5`, `01:02:03:12` in frames)
/// and offsets (`3.5s`, `500ms`, `2m`, `1h`, `12f`, `900t`) with the document's
/// `ttp:frameRate`, `ttp:frameRateMultiplier`, `ttp:subFrameRate` and `ttp:tickRate`.
/// A `timeContainer="seq"` element's children follow one another: each counts from the end
/// of the one before, and one without a time of its own lasts as long as what is timed
/// within it (nothing: no time at all, as TTML says).
/// Spans timed within a paragraph show in their time (a cue for each stretch between their
/// times). Its text is its own and its spans' (`br` a new line, spaces collapsed as XML's default
/// space handling does); italic, bold and underline (`tts:fontStyle`, `tts:fontWeight`,
/// `tts:textDecoration`, on the element, a referenced `style` or the `region` it is shown
/// in) become ASS tags, which the `mov_text` encoder turns into its style records. Layout
/// and colours are not carried: mov_text players place text themselves. Elements of other
/// vocabularies (a packager's own metadata, SMPTE's images) are not TTML's text and are not
/// shown; a document that declares no namespace at all is read as TTML. The document is read
/// in the encoding it declares (or its byte order mark's, UTF-16), in Windows-1252 when it
/// declares none and is not UTF-8.
///
/// Malformed input never traps: what is not understood is skipped (a `<` that begins no tag
/// is text), and a document that cannot be read gives no cues.
struct TTMLCues {
    struct Cue: Equatable {
        /// Milliseconds on the document's timeline.
        var begin: Int64
        /// nil: until the document's end (the sample's).
        var end: Int64?
        /// ASS text: lines joined by `\N`, styles as override tags.
        var text: String
    }

    private struct Timing {
        var frameRate = 30.0
        var subFrameRate = 1.0
        var tickRate = 1.0
    }

    private struct Style: OptionSet {
        let rawValue: Int
        static let italic = Style(rawValue: 1), bold = Style(rawValue: 2), underline = Style(rawValue: 4)
        /// Not shown: `tts:display="none"` or metadata, for all within it.
        static let hidden = Style(rawValue: 8)
        /// `tts:visibility="hidden"`, which an element within may make visible again.
        static let invisible = Style(rawValue: 16)
    }

    /// An open element: its absolute begin and end (ms) and its style.
    private struct Frame {
        var name: String
        var id: String?
        var begin: Int64
        var end: Int64?
        /// The latest its content may end: its end, or the nearest ancestor's.
        var limit: Int64?
        var style: Style
        var preserveSpace: Bool
        /// The prefixes it binds (`xmlns:p="…"`; `xmlns` as ""), unbound when it closes.
        var bindings: [String]
        /// `timeContainer="seq"`: each child counts from where the one before it ended.
        var sequential = false
        /// In a sequence: where the next child's time counts from.
        var cursor: Int64 = 0
        /// The latest end of what is timed within it so far.
        var latest: Int64?
        /// In a sequence, with no time of its own: it lasts as long as what is timed within it.
        var implicitInSequence = false
    }

    /// The document's cues in document order.
    static func read(_ bytes: [UInt8]) -> [Cue] { reader(bytes).cues }

    enum Shown { case text, images, nothing }

    /// What the document shows: text, or pictures and no text (IMSC's image profile: a
    /// `div`'s `smpte:backgroundImage`, IMSC 1.1's `image`), which a text track cannot carry.
    static func shown(_ bytes: [UInt8]) -> Shown {
        let r = reader(bytes)
        return !r.cues.isEmpty ? .text : r.images > 0 ? .images : .nothing
    }

    /// How many open elements the document's end tags went over in all.
    static func searchedElements(_ bytes: [UInt8]) -> Int { reader(bytes).stackSteps }

    private static func reader(_ bytes: [UInt8]) -> TTMLCues {
        var reader = TTMLCues(bytes: utf8(bytes))
        reader.run()
        return reader
    }

    /// The document in UTF-8: as it is when it is UTF-8 (its byte order mark dropped); else
    /// converted from UTF-16 (by its byte order mark, or its first `<` in two bytes), from
    /// the encoding its XML declaration names (Latin-1 read as Windows-1252, as browsers
    /// do: its curly quotes and dashes are that code page's), or from Windows-1252 when it
    /// names none and is not UTF-8.
    static func utf8(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return Array(bytes.dropFirst(3)) }
        var body = bytes[...]
        let encoding: String?
        if bytes.starts(with: [0xFF, 0xFE]) { encoding = "UTF-16LE"; body = body.dropFirst(2) }
        else if bytes.starts(with: [0xFE, 0xFF]) { encoding = "UTF-16BE"; body = body.dropFirst(2) }
        else if bytes.starts(with: [0x3C, 0x00]) { encoding = "UTF-16LE" }
        else if bytes.starts(with: [0x00, 0x3C]) { encoding = "UTF-16BE" }
        else if let declared = declaredEncoding(bytes) {
            encoding = ["utf-8", "utf8"].contains(declared) ? nil
                : ["iso-8859-1", "iso_8859-1", "latin1", "l1", "us-ascii", "ascii"].contains(declared) ? "CP1252" : declared
        } else {
            encoding = bytes.withUnsafeBufferPointer(SubtitleCharset.isUTF8) ? nil : "CP1252"
        }
        guard let encoding, let converted = SubtitleCharset.utf8(Array(body), from: encoding) else { return bytes }
        return converted
    }

    /// The encoding an XML declaration names (`<?xml version="1.0" encoding="ISO-8859-1"?>`), lowercased.
    private static func declaredEncoding(_ bytes: [UInt8]) -> String? {
        guard bytes.starts(with: Array("<?xml".utf8)) else { return nil }
        let head = bytes.prefix(256)
        guard let close = head.indices.first(where: { head[$0] == UInt8(ascii: ">") }) else { return nil }
        let declaration = Array(head[..<close]), word = Array("encoding".utf8)
        guard let at = declaration.indices.first(where: { declaration[$0...].starts(with: word) }) else { return nil }
        let rest = String(decoding: declaration[(at + word.count)...], as: UTF8.self).drop { $0 == " " || $0 == "=" }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        let value = rest.dropFirst().prefix { $0 != quote }
        return value.isEmpty ? nil : value.lowercased()
    }

    /// A sample's cues (its document's, in milliseconds) where they show on the track's
    /// presentation clock, in document order (the order TTML stacks them in on screen). ISO
    /// 14496-30 times a document on the track's media clock, active for its sample's span: the cues are cut to that span (a
    /// cue that runs across samples is in each, cut at their boundary). Which clock a
    /// writer meant shows in where its cues fall: the document is read from the zero that
    /// puts most of its cue time inside its sample, of the presentation clock's, the
    /// track's first sample's (`trackStart`: an edit list or an offset moved the media
    /// clock's zero there, as ffmpeg's `-output_ts_offset` does), and the sample's own
    /// start (some DASH packagers time each document from its sample), in that order on a tie.
    static func placed(_ cues: [Cue], sampleStart start: Int64, sampleEnd end: Int64?, trackStart: Int64 = 0) -> [Cue] {
        func inside(_ shift: Int64) -> Int64 {
            cues.reduce(0) { sum, cue in
                let from = max(cue.begin + shift, start)
                let to = min((cue.end ?? cue.begin + 1) + shift, end ?? Int64.max)
                return sum + max(0, to - from)
            }
        }
        var shift: Int64 = 0, best = inside(0)
        for candidate in [trackStart, start] where candidate != 0 {
            let score = inside(candidate)
            if score > best { (shift, best) = (candidate, score) }
        }
        return cues.compactMap { cue in
            let from = max(cue.begin + shift, start)
            let to = [cue.end.map { $0 + shift }, end].compactMap { $0 }.min()
            if let to, to <= from { return nil }
            return Cue(begin: from, end: to, text: cue.text)
        }
    }

    /// The latest time a document can name (about 31,000 years, in ms).
    static let latest: Int64 = 1_000_000_000_000_000
    /// The most stretches one paragraph's timed spans make; past it the spans' times are
    /// not followed (the paragraph shows whole for its time), so a document that times
    /// thousands of spans in one paragraph cannot make the reading quadratic.
    static let stretchesPerParagraph = 256

    private let bytes: [UInt8]
    private var cues: [Cue] = []
    private var timing = Timing()
    private var styles: [String: Style] = [:]
    /// The styles each region gives what is shown in it.
    private var regions: [String: Style] = [:]
    /// Pictures the document shows (`showsOnlyImages`).
    private var images = 0
    private var stack: [Frame] = []
    /// How many elements of each name are open: an end tag that closes none is passed over
    /// without searching the stack (50,000 of them under 50,000 open spans took minutes).
    private var openNames: [String: Int] = [:]
    /// The open elements end tags went over to find theirs: what reading a document's end
    /// tags costs (`searchedElements`).
    private var stackSteps = 0
    /// Each prefix's namespaces, the innermost last (`Frame.bindings`).
    private var namespaces: [String: [String]] = [:]
    /// A run of a paragraph's text, with the style and the time its element gives it.
    private struct Segment {
        var text: String
        var style: Style
        var begin: Int64
        var end: Int64?
        var preserved: Bool
    }
    /// The paragraph being read: its frame's depth, its time and its text so far.
    private var paragraph: (depth: Int, begin: Int64, end: Int64?, segments: [Segment])?

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private mutating func run() {
        var i = 0
        let n = bytes.count
        while i < n {
            if bytes[i] == UInt8(ascii: "<") {
                if starts("<!--", at: i) { i = find("-->", from: i + 4).map { $0 + 3 } ?? n; continue }
                if starts("<![CDATA[", at: i) {
                    let close = find("]]>", from: i + 9) ?? n
                    text(decoded: String(decoding: bytes[(i + 9)..<close], as: UTF8.self))
                    i = min(n, close + 3)
                    continue
                }
                if starts("<?", at: i) { i = find("?>", from: i + 2).map { $0 + 2 } ?? n; continue }
                if starts("<!", at: i) { i = find(">", from: i + 2).map { $0 + 1 } ?? n; continue }
                // A `<` that begins no name ("a < b", which XML would have written `&lt;`) is text.
                guard i + 1 < n, Self.beginsName(bytes[i + 1]) || bytes[i + 1] == UInt8(ascii: "/") else {
                    text(decoded: "<")
                    i += 1
                    continue
                }
                guard let close = tagEnd(from: i + 1) else { return }
                tag(bytes[(i + 1)..<close])
                i = close + 1
            } else {
                let next = find("<", from: i) ?? n
                text(decoded: Self.entities(String(decoding: bytes[i..<next], as: UTF8.self)))
                i = next
            }
        }
    }

    // MARK: tags

    private mutating func tag(_ body: ArraySlice<UInt8>) {
        guard let first = body.first else { return }
        if first == UInt8(ascii: "/") {
            close(Self.localName(String(decoding: body.dropFirst(), as: UTF8.self).trimmed))
            return
        }
        let selfClosing = body.last == UInt8(ascii: "/")
        let (qualified, attributes) = Self.parse(selfClosing ? body.dropLast() : body)
        open(qualified, attributes)
        if selfClosing { close(Self.localName(qualified)) }
    }

    private mutating func open(_ qualified: String, _ declared: [(name: String, value: String)]) {
        let parent = stack.last
        var bindings: [String] = []
        for a in declared where a.name == "xmlns" || a.name.hasPrefix("xmlns:") {
            let prefix = a.name == "xmlns" ? "" : String(a.name.dropFirst(6))
            bindings.append(prefix)
            namespaces[prefix, default: []].append(a.value)
        }
        func namespace(_ prefix: Substring) -> String? { namespaces[String(prefix)]?.last }
        // TTML's attributes by local name (`tts:fontStyle`, `xml:id` and `ttp:frameRate`,
        // whatever prefix the document binds); another vocabulary's are not TTML's, even
        // where their names are alike. A prefix the document never bound is taken for TTML's.
        var attributes: [String: String] = [:]
        for a in declared where a.name != "xmlns" && !a.name.hasPrefix("xmlns:") {
            let prefix = Self.prefix(a.name), local = Self.localName(a.name)
            if local == "backgroundImage" { images += 1 }
            if prefix.isEmpty || prefix == "xml" || namespace(prefix).map(Self.isTTML) ?? true { attributes[local] = a.value }
        }
        let name = Self.localName(qualified)
        // An element of another vocabulary (and everything within it) is not shown.
        let foreign = namespace(Self.prefix(qualified)).map { !Self.isTTML($0) || $0.contains("#") } ?? false
        // Its unprefixed attributes are its own vocabulary's: not TTML's times or styles.
        if foreign { attributes = [:] }
        if name == "image" { images += 1 }
        if name == "tt" {
            if let rate = attributes["frameRate"].flatMap(Double.init), rate > 0 { timing.frameRate = rate }
            if let multiplier = attributes["frameRateMultiplier"] {
                let parts = multiplier.split(separator: " ").compactMap { Double($0) }
                if parts.count == 2, parts[0] > 0, parts[1] > 0 { timing.frameRate *= parts[0] / parts[1] }
            }
            if let rate = attributes["subFrameRate"].flatMap(Double.init), rate > 0 { timing.subFrameRate = rate }
            if let rate = attributes["tickRate"].flatMap(Double.init), rate > 0 { timing.tickRate = rate }
            else if attributes["frameRate"] != nil { timing.tickRate = timing.frameRate * timing.subFrameRate }
        }
        // The styles an element names (`style="s1 s2"`), then its own attributes over them.
        let referenced = (attributes["style"] ?? "").split(separator: " ").reduce(into: Style()) { $0.formUnion(styles[String($1)] ?? []) }
        // The region it is shown in styles it beneath its own and its parent's styles.
        let region = attributes["region"].flatMap { regions[$0] } ?? []
        var style = Self.styled((parent?.style ?? []).union(region).union(referenced), attributes)
        // Metadata (a description, the agent speaking) is about the text, not shown with it.
        if foreign || Self.metadata.contains(name) { style.insert(.hidden) }
        if !foreign, name == "style" || name == "region" {
            let defined = Self.styled(referenced, attributes)
            if name == "region", let id = attributes["id"] { regions[id] = defined }
            else if let id = attributes["id"] { styles[id] = defined }
            // A style within a region is the region's.
            if name == "style", parent?.name == "region", let id = parent?.id { regions[id, default: []].formUnion(defined) }
        }
        // Times nest by adding; each is under 10^12 ms and a sum is held under `Self.latest`,
        // so no nesting, however deep, overflows.
        let inSequence = parent?.sequential == true
        let base = inSequence ? parent!.cursor : (parent?.begin ?? 0)
        var begin = min(base + (attributes["begin"].flatMap(milliseconds) ?? 0), Self.latest)
        var end: Int64? = attributes["end"].flatMap(milliseconds).map { min(base + $0, Self.latest) }
        if let dur = attributes["dur"].flatMap(milliseconds) { end = min(end ?? Int64.max, begin + dur) }
        let implicit = inSequence && end == nil
        if let limit = parent?.limit {
            if !implicit { end = min(end ?? limit, limit) }
            begin = min(begin, limit)
        }
        let preserve = attributes["space"].map { $0 == "preserve" } ?? (parent?.preserveSpace ?? false)
        openNames[name, default: 0] += 1
        stack.append(Frame(name: name, id: attributes["id"], begin: begin, end: end, limit: end ?? parent?.limit, style: style,
                           preserveSpace: preserve, bindings: bindings, sequential: attributes["timeContainer"] == "seq",
                           cursor: begin, implicitInSequence: implicit))
        if foreign { return }
        if paragraph == nil, name == "p" {
            paragraph = (stack.count, begin, end, [])
        } else if name == "br", paragraph != nil {
            paragraph!.segments.append(Segment(text: "\\N", style: style, begin: begin, end: end, preserved: true))
        }
    }

    private mutating func close(_ name: String) {
        // An end tag closes the nearest open element of its name (and any left open inside it).
        guard openNames[name, default: 0] > 0, let at = stack.lastIndex(where: { stackSteps += 1; return $0.name == name }) else { return }
        while stack.count > at { finish(stack.removeLast()) }
    }

    /// An element closed: its end is its parent's to know (what a sequence's next child
    /// counts from, how long an untimed parent in a sequence lasts); a paragraph's cues are made.
    private mutating func finish(_ frame: Frame) {
        for prefix in frame.bindings { namespaces[prefix]?.removeLast() }
        openNames[frame.name, default: 1] -= 1
        var end = frame.end
        if frame.implicitInSequence { end = min(frame.latest ?? frame.begin, frame.limit ?? Int64.max) }
        if let end, !stack.isEmpty {
            let k = stack.count - 1
            stack[k].latest = max(stack[k].latest ?? end, end)
            if stack[k].sequential { stack[k].cursor = end }
        }
        if var p = paragraph, stack.count < p.depth {
            paragraph = nil
            if frame.implicitInSequence { p.end = end }
            if let end = p.end, end <= p.begin { return }
            // Spans timed within the paragraph (words of roll-up captions, a line that comes
            // later) show only in their time: a cue for each stretch between their times,
            // with the text showing then; consecutive stretches that show the same text are one.
            var times = Set([p.begin])
            for s in p.segments {
                if s.begin > p.begin { times.insert(s.begin) }
                if let e = s.end, e > p.begin, e < (p.end ?? Int64.max) { times.insert(e) }
            }
            var segments = p.segments
            if times.count > Self.stretchesPerParagraph {
                times = [p.begin]
                for i in segments.indices { segments[i].begin = p.begin; segments[i].end = p.end }
            }
            let sorted = times.sorted()
            var made: [Cue] = []
            for (k, t) in sorted.enumerated() {
                let until = k + 1 < sorted.count ? sorted[k + 1] : p.end
                let text = Self.assemble(segments.filter { $0.begin <= t && ($0.end ?? Int64.max) > t })
                guard !text.isEmpty else { continue }
                if let last = made.last, last.text == text, last.end == t { made[made.count - 1].end = until; continue }
                made.append(Cue(begin: t, end: until, text: text))
            }
            cues += made
        }
    }

    /// The text of the runs showing together: styles as ASS tags, closed at its end; spaces
    /// collapsed across runs; each line trimmed; empty when nothing visible is left.
    private static func assemble(_ segments: [Segment]) -> String {
        var text = ""
        var style: Style = []
        for s in segments where s.style.isDisjoint(with: [.hidden, .invisible]) {
            var run = s.text
            // Spaces collapse across elements too ("a <span>b</span>" beside "a <span> b</span>").
            if !s.preserved, run.hasPrefix(" "), text.isEmpty || text.hasSuffix(" ") || text.hasSuffix("\\N") { run.removeFirst() }
            guard !run.isEmpty else { continue }
            if s.style != style, run != "\\N" {
                text += tags(from: style, to: s.style)
                style = s.style
            }
            text += run
        }
        text += tags(from: style, to: [])
        return trimmedLines(text)
    }

    // MARK: text

    private mutating func text(decoded raw: String) {
        guard paragraph != nil, let frame = stack.last else { return }
        var text = raw
        if !frame.preserveSpace {
            // XML's default space handling as TTML applies it: runs of white space (line
            // breaks included) are one space.
            var collapsed = ""
            var spaced = false
            for c in text {
                if c == " " || c == "\n" || c == "\t" || c == "\r" {
                    if !spaced { collapsed.append(" ") }
                    spaced = true
                } else {
                    collapsed.append(c)
                    spaced = false
                }
            }
            text = collapsed
        }
        guard !text.isEmpty else { return }
        // ASS reads a backslash and braces as markup: the full-width ones stand in for them.
        text = String(text.map { c -> Character in c == "\\" ? "\u{FF3C}" : c == "{" ? "\u{FF5B}" : c == "}" ? "\u{FF5D}" : c })
        // Kept line breaks (`xml:space="preserve"`) are lines.
        if frame.preserveSpace { text = text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\N") }
        paragraph!.segments.append(Segment(text: text, style: frame.style, begin: frame.begin, end: frame.end, preserved: frame.preserveSpace))
    }

    private static func tags(from old: Style, to new: Style) -> String {
        var out = ""
        for (style, tag) in [(Style.italic, "i"), (.bold, "b"), (.underline, "u")] where old.contains(style) != new.contains(style) {
            out += "{\\\(tag)\(new.contains(style) ? 1 : 0)}"
        }
        return out
    }

    /// Each line without the spaces at its ends (collapsing leaves one beside a `br`), empty
    /// when there is no text at all.
    private static func trimmedLines(_ text: String) -> String {
        var kept = text.assLines.map { $0.trimmed }
        guard !kept.allSatisfy({ Self.visible($0).isEmpty }) else { return "" }
        // Lines with nothing to show at either end (a timed line not showing yet) go; the
        // tags they hold stay, with the line beside them.
        while Self.visible(kept[0]).isEmpty { kept[1] = kept[0] + kept[1]; kept.removeFirst() }
        while Self.visible(kept[kept.count - 1]).isEmpty { kept[kept.count - 2] += kept[kept.count - 1]; kept.removeLast() }
        return kept.joined(separator: "\\N")
    }

    /// The text without its ASS tags.
    private static func visible(_ s: String) -> String {
        var out = "", inTag = false
        for c in s {
            if c == "{" { inTag = true } else if c == "}" { inTag = false } else if !inTag { out.append(c) }
        }
        return out.trimmed
    }

    /// TTML's metadata vocabulary (`ttm:`) and its container.
    private static let metadata: Set<String> = ["metadata", "desc", "title", "agent", "name", "actor", "copyright"]

    private static func styled(_ base: Style, _ a: [String: String]) -> Style {
        var s = base
        // `display="none"` hides the element and all within it, whatever they say.
        if a["display"] == "none" { s.insert(.hidden) }
        if let v = a["visibility"] { if v == "hidden" { s.insert(.invisible) } else if v == "visible" { s.remove(.invisible) } }
        if let v = a["fontStyle"] { if v == "italic" || v == "oblique" { s.insert(.italic) } else if v == "normal" { s.remove(.italic) } }
        if let v = a["fontWeight"] { if v == "bold" { s.insert(.bold) } else if v == "normal" { s.remove(.bold) } }
        if let v = a["textDecoration"] {
            if v.includes("noUnderline") || v == "none" { s.remove(.underline) } else if v.includes("underline") { s.insert(.underline) }
        }
        return s
    }

    // MARK: time

    /// A time expression in milliseconds, nil when it is not one.
    private func milliseconds(_ raw: String) -> Int64? {
        let s = raw.trimmed
        guard !s.isEmpty else { return nil }
        let seconds: Double?
        if s.contains(":") {
            let parts = s.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3 || parts.count == 4, let h = Double(parts[0]), let m = Double(parts[1]),
                  let sec = Double(parts[2]), h >= 0, m >= 0, sec >= 0 else { return nil }
            var total = h * 3600 + m * 60 + sec
            if parts.count == 4 {
                // Frames, optionally with sub-frames after a dot.
                let f = parts[3].split(separator: ".").map(String.init)
                guard let frames = f.first.flatMap(Double.init), frames >= 0 else { return nil }
                let sub = f.count > 1 ? (Double(f[1]) ?? 0) : 0
                total += (frames + sub / timing.subFrameRate) / timing.frameRate
            }
            seconds = total
        } else {
            let units: [(String, Double)] = [("ms", 0.001), ("h", 3600), ("m", 60), ("s", 1),
                                            ("f", 1 / timing.frameRate), ("t", 1 / timing.tickRate)]
            guard let (suffix, scale) = units.first(where: { s.hasSuffix($0.0) }),
                  let count = Double(s.dropLast(suffix.count)), count >= 0 else { return nil }
            seconds = count * scale
        }
        guard let seconds, !seconds.isNaN else { return nil }
        // A time later than any film (10^19 s) is "never", not "no time" (which would show
        // the cue from its parent's begin).
        guard seconds < 1e9 else { return Self.latest }
        return Int64((seconds * 1000).rounded())
    }

    // MARK: XML pieces

    private func starts(_ s: String, at i: Int) -> Bool {
        let u = Array(s.utf8)
        return i + u.count <= bytes.count && bytes[i..<(i + u.count)].elementsEqual(u)
    }

    private func find(_ s: String, from start: Int) -> Int? {
        let u = Array(s.utf8)
        var i = start
        while i + u.count <= bytes.count {
            if bytes[i] == u[0], bytes[i..<(i + u.count)].elementsEqual(u) { return i }
            i += 1
        }
        return nil
    }

    /// The `>` that ends a tag begun before `start`, outside quoted attribute values; the
    /// first `>` when a quote is never closed (a stray apostrophe does not end the document).
    private func tagEnd(from start: Int) -> Int? {
        var quote: UInt8? = nil
        var first: Int? = nil
        var i = start
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: ">"), first == nil { first = i }
            if let q = quote { if b == q { quote = nil } }
            else if b == UInt8(ascii: "\"") || b == UInt8(ascii: "'") { quote = b }
            else if b == UInt8(ascii: ">") { return i }
            i += 1
        }
        return first
    }

    /// A tag's name and its attributes, as written (prefixes kept).
    private static func parse(_ body: ArraySlice<UInt8>) -> (String, [(name: String, value: String)]) {
        let s = String(decoding: body, as: UTF8.self)
        var chars = Substring(s)
        let name = String(chars.prefix { !$0.isWhitespace })
        chars = chars.dropFirst(name.count)
        var attributes: [(name: String, value: String)] = []
        while true {
            chars = chars.drop { $0.isWhitespace }
            guard let eq = chars.firstIndex(of: "=") else { break }
            let key = String(chars[..<eq]).trimmed
            chars = chars[chars.index(after: eq)...].drop { $0.isWhitespace }
            guard let q = chars.first, q == "\"" || q == "'" else { break }
            chars = chars.dropFirst()
            guard let end = chars.firstIndex(of: q) else { break }
            attributes.append((key, entities(String(chars[..<end]))))
            chars = chars[chars.index(after: end)...]
        }
        return (name, attributes)
    }

    private static func localName(_ qualified: String) -> String {
        qualified.split(separator: ":").last.map(String.init) ?? qualified
    }

    private static func prefix(_ qualified: String) -> Substring {
        qualified.firstIndex(of: ":").map { qualified[..<$0] } ?? ""
    }

    /// TTML's namespaces: W3C's (`…/ns/ttml`, with `#styling`, `#parameter`, `#metadata`)
    /// and the drafts' DFXP (`…/2006/10/ttaf1`), whose documents are still about.
    private static func isTTML(_ uri: String) -> Bool {
        uri.hasPrefix("http://www.w3.org/ns/ttml") || uri.includes("/ttaf1")
    }

    /// A byte that may begin an element's name: a letter, `_`, `:`, or any non-ASCII.
    private static func beginsName(_ b: UInt8) -> Bool {
        (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") || b == UInt8(ascii: "_") || b == UInt8(ascii: ":") || b >= 0x80
    }

    /// XML's five named entities and numeric character references.
    static func entities(_ s: String) -> String {
        guard s.contains("&") else { return s }
        var out = ""
        var rest = Substring(s)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            rest = rest[amp...]
            // A reference is short: the ';' is looked for among the next few characters only
            // (a text of bare '&'s had each search the rest of it).
            guard let semi = rest.prefix(12).firstIndex(of: ";") else {
                out.append("&")
                rest = rest.dropFirst()
                continue
            }
            let name = rest[rest.index(after: rest.startIndex)..<semi]
            var replacement: String?
            switch name {
            case "amp": replacement = "&"
            case "lt": replacement = "<"
            case "gt": replacement = ">"
            case "quot": replacement = "\""
            case "apos": replacement = "'"
            default:
                if name.hasPrefix("#x") || name.hasPrefix("#X") { replacement = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String(Character($0)) } }
                else if name.hasPrefix("#") { replacement = UInt32(name.dropFirst()).flatMap(Unicode.Scalar.init).map { String(Character($0)) } }
            }
            if let replacement {
                out += replacement
                rest = rest[rest.index(after: semi)...]
            } else {
                out.append("&")
                rest = rest.dropFirst()
            }
        }
        return out + rest
    }
}

private extension String {
    var trimmed: String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }

    /// The lines of ASS text (split at `\N`).
    var assLines: [String] {
        var lines: [String] = []
        var current = ""
        var i = startIndex
        while i < endIndex {
            if self[i] == "\\", index(after: i) < endIndex, self[index(after: i)] == "N" {
                lines.append(current)
                current = ""
                i = index(i, offsetBy: 2)
            } else {
                current.append(self[i])
                i = index(after: i)
            }
        }
        lines.append(current)
        return lines
    }
}
