import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("text subtitles as mov_text carries them")
struct CueScheduleTests {
    typealias Sample = CueSchedule.Sample

    /// Adds (start, end, text) cues in order, the pictures and sound having come to `end`
    /// when they come (if known), and finishes at `end`; every sample made.
    static func samples(_ cues: [(Int64, Int64?, String)], end: Int64? = nil) -> [Sample] {
        var schedule = CueSchedule()
        var out: [Sample] = []
        for (start, stop, text) in cues { out += schedule.add(start: start, end: stop, events: [text], reach: end) }
        return out + schedule.finish(at: end)
    }

    @Test("every source's cues have a limit on screen: lines of dialogue (SubRip, WebVTT, TTML, MP4 text, teletext) 16, ASS typesetting 2,048; SubRip cues that never end (each two hours long, one a second) leave the schedule holding no more than that, and the rest are counted as left out")
    func neverEndingCues() {
        #expect(SubtitleLane.mostOnScreen(AV_CODEC_ID_SUBRIP) == SubtitleLane.linesOnScreen)
        #expect(SubtitleLane.mostOnScreen(AV_CODEC_ID_WEBVTT) == SubtitleLane.linesOnScreen)
        #expect(SubtitleLane.mostOnScreen(AV_CODEC_ID_MOV_TEXT) == SubtitleLane.linesOnScreen)
        #expect(SubtitleLane.mostOnScreen(AV_CODEC_ID_ASS) == SubtitleLane.typesetOnScreen)
        var schedule = CueSchedule()
        schedule.mostOnScreen = SubtitleLane.mostOnScreen(AV_CODEC_ID_SUBRIP)
        var most = 0, held = 0
        for i in 0..<2_000 {
            let t = Int64(i) * 1000
            most = max(most, schedule.add(start: t, end: t + 7_200_000, events: ["cue \(i)"], reach: t + 500).map(\.events.count).max() ?? 0)
            held = max(held, schedule.pending.count)
        }
        #expect(held <= SubtitleLane.linesOnScreen && most <= SubtitleLane.linesOnScreen, "held \(held), a sample \(most)")
        #expect(schedule.crowdedCues == 2_000 - SubtitleLane.linesOnScreen)
    }

    @Test("cues past where the pictures and sound have come are held up to a limit (a 30 s film with 100,000 dense cues after it had every one held to the end); those the pictures reach are shown")
    func heldAhead() {
        var schedule = CueSchedule()
        var samples: [Sample] = []
        for i in 0..<100_000 {
            let t = 30_000 + Int64(i) * 25
            samples += schedule.add(start: t, end: t + 20, events: ["cue \(i)"], reach: 1_000)
        }
        #expect(schedule.pending.count <= CueSchedule.mostHeldAhead, "\(schedule.pending.count)")
        #expect(schedule.aheadCues == 100_000 - CueSchedule.mostHeldAhead)
        samples += schedule.finish(at: 40_000)
        #expect(samples.first?.events == ["cue 0"] && samples.count == 400, "\(samples.count)")
    }

    @Test("where a limit is set (TTML's), at most that many cues are on screen at once: the rest of a pile of overlapping cues is left out (3,000 stacked TTML paragraphs made a 114 MB track), those after the pile are shown; without one every cue stays")
    func crowdedScreen() {
        var cues: [(Int64, Int64?, String)] = (0..<3_000).map { (Int64($0), Int64(10_000), "cue \($0)") }
        cues.append((20_000, 21_000, "after"))
        var schedule = CueSchedule()
        schedule.mostOnScreen = SubtitleLane.linesOnScreen
        var samples: [Sample] = []
        for (start, stop, text) in cues { samples += schedule.add(start: start, end: stop, events: [text], reach: 30_000) }
        samples += schedule.finish(at: 30_000)
        #expect(samples.allSatisfy { $0.events.count <= SubtitleLane.linesOnScreen }, "\(samples.map(\.events.count).max() ?? 0)")
        #expect(samples.last?.events == ["after"])
        #expect(samples.contains { $0.events.count == SubtitleLane.linesOnScreen })
        #expect(Self.samples(Array(cues.prefix(40)), end: 30_000).contains { $0.events.count == 40 })
    }

    @Test("stacked by rank (TTML's document order): the cue given first in its document is above one that started before it; by start otherwise")
    func stackedByRank() {
        for byRank in [true, false] {
            var schedule = CueSchedule()
            schedule.stackedByRank = byRank
            var samples = schedule.add(start: 1_000, end: 4_000, events: ["lower"], rank: 1)
            samples += schedule.add(start: 2_000, end: 5_000, events: ["upper"], rank: 0)
            samples += schedule.finish(at: 10_000)
            let both = samples.first { $0.start == 2_000 }?.events
            #expect(both == (byRank ? ["upper", "lower"] : ["lower", "upper"]), "\(samples)")
        }
    }

    @Test("closed captions are one screen: a cue ends the one before, a millisecond of rounding stacks nothing")
    func oneScreen() {
        var schedule = CueSchedule()
        schedule.oneScreen = true
        var out = schedule.add(start: 0, end: 1001, events: ["ROLL ONE"])
        out += schedule.add(start: 1000, end: 2000, events: ["ROLL ONE\\NROLL TWO"])
        out += schedule.add(start: 2000, end: nil, events: ["ROLL TWO\\NROLL THREE"])
        out += schedule.finish(at: 2500)
        #expect(out == [Sample(start: 0, end: 1000, events: ["ROLL ONE"]), Sample(start: 1000, end: 2000, events: ["ROLL ONE\\NROLL TWO"]),
                        Sample(start: 2000, end: 2500, events: ["ROLL TWO\\NROLL THREE"])])
    }

    @Test("overlapping cues share the time they overlap, each shown from its own start to its own end")
    func overlap() {
        #expect(Self.samples([(500, 2000, "a"), (1500, 3000, "b"), (4000, 5000, "c")]) == [
            Sample(start: 500, end: 1500, events: ["a"]), Sample(start: 1500, end: 2000, events: ["a", "b"]),
            Sample(start: 2000, end: 3000, events: ["b"]), Sample(start: 4000, end: 5000, events: ["c"]),
        ])
        // A long cue with two short ones inside it, one of them starting with it.
        #expect(Self.samples([(0, 6000, "sign"), (0, 1000, "x"), (2000, 3000, "y")]) == [
            Sample(start: 0, end: 1000, events: ["sign", "x"]), Sample(start: 1000, end: 2000, events: ["sign"]),
            Sample(start: 2000, end: 3000, events: ["sign", "y"]), Sample(start: 3000, end: 6000, events: ["sign"]),
        ])
    }

    @Test("cues from past where the pictures and sound reach are held without going over the others each time (40,000 after a 10 s film took 160 s), and none outlasts the film")
    func cuesPastTheEnd() {
        var schedule = CueSchedule()
        var out = schedule.add(start: 1000, end: 2000, events: ["in the film"], reach: 10_000)
        for k in 0..<2000 { out += schedule.add(start: 12_000 + Int64(k) * 20, end: 12_010 + Int64(k) * 20, events: ["after it"], reach: 10_000) }
        #expect(schedule.passes <= 3, "\(schedule.passes)")
        out += schedule.finish(at: 10_000)
        #expect(out == [Sample(start: 1000, end: 2000, events: ["in the film"])])
    }

    @Test("a cue is held only until the next one starts")
    func heldUntilNext() {
        var schedule = CueSchedule()
        #expect(schedule.add(start: 0, end: 5000, events: ["a"]).isEmpty)
        #expect(schedule.add(start: 2000, end: 3000, events: ["b"]) == [Sample(start: 0, end: 2000, events: ["a"])])
        #expect(schedule.add(start: 9000, end: 9500, events: ["c"]) == [
            Sample(start: 2000, end: 3000, events: ["a", "b"]), Sample(start: 3000, end: 5000, events: ["a"]),
        ])
        #expect(schedule.pending.map(\.events) == [["c"]])
    }

    @Test("a cue without an end lasts until the next one, ten seconds at most; none outlasts the pictures")
    func endsAndClipping() {
        #expect(Self.samples([(1000, nil, "a"), (3000, nil, "b")], end: 60_000) == [
            Sample(start: 1000, end: 3000, events: ["a"]), Sample(start: 3000, end: 13_000, events: ["b"]),
        ])
        #expect(Self.samples([(9000, 14_000, "credits"), (11_000, 12_000, "after")], end: 10_000) == [
            Sample(start: 9000, end: 10_000, events: ["credits"]),
        ])
        // Nothing is written past how far the pictures and sound have come.
        var schedule = CueSchedule()
        #expect(schedule.add(start: 0, end: 4000, events: ["a"]).isEmpty)
        #expect(schedule.add(start: 5000, end: 6000, events: ["b"], reach: 3000).isEmpty)
        #expect(schedule.add(start: 7000, end: 8000, events: ["c"], reach: 6500) == [
            Sample(start: 0, end: 4000, events: ["a"]), Sample(start: 5000, end: 6000, events: ["b"]),
        ])
    }

    @Test("a cue with nothing to show ends the cues that had no end (a teletext page cleared)")
    func clearedPage() {
        var schedule = CueSchedule()
        _ = schedule.add(start: 1000, end: nil, events: ["page"])
        #expect(schedule.add(start: 3000, end: nil, events: []).isEmpty)
        #expect(schedule.add(start: 4000, end: nil, events: ["next"]) == [Sample(start: 1000, end: 3000, events: ["page"])])
    }

    @Test("a teletext stream's subtitle page and its language come from the stream's map")
    func teletextPages() {
        // Page 100 (type 1, German), 888 (type 2, English), 777 (type 5, hard of hearing).
        let map: [UInt8] = [1 << 3 | 1, 0x00, 2 << 3 | 0, 0x88, 5 << 3 | 7, 0x77]
        #expect(TeletextPages.subtitles(extradata: map, languages: "ger,eng,eng")! == ("888", "eng"))
        #expect(TeletextPages.subtitles(extradata: Array(map[4...]), languages: "fin")! == ("777", "fin"))
        #expect(TeletextPages.subtitles(extradata: Array(map[0..<2]), languages: "ger") == nil)
        #expect(TeletextPages.subtitles(extradata: [], languages: nil) == nil)
        // Every subtitle page, in the map's order, for a track each.
        #expect(TeletextPages.subtitlePages(extradata: map, languages: "ger,eng,eng") == [
            TeletextPage(page: "888", language: "eng", hearingImpaired: false), TeletextPage(page: "777", language: "eng", hearingImpaired: true)])
        #expect(TeletextPages.subtitlePages(extradata: map, languages: "ger") == [
            TeletextPage(page: "888", language: nil, hearingImpaired: false), TeletextPage(page: "777", language: nil, hearingImpaired: true)])
    }

    @Test("a cue that comes after later ones were written starts where the track is")
    func lateCue() {
        var schedule = CueSchedule()
        _ = schedule.add(start: 0, end: 1000, events: ["a"])
        _ = schedule.add(start: 5000, end: 6000, events: ["b"])
        #expect(schedule.add(start: 4000, end: 5500, events: ["late"]).isEmpty)
        #expect(schedule.add(start: 2000, end: 3000, events: ["gone"]).isEmpty)
        #expect(schedule.finish(at: nil) == [
            Sample(start: 5000, end: 5500, events: ["b", "late"]), Sample(start: 5500, end: 6000, events: ["b"]),
        ])
        #expect(schedule.lateCues == 2)
    }

    @Test("ASS drawings are left out; positioned signs, karaoke and styles stay; a hard space is a no-break space and a soft break a space, not the letters \\h or a new line")
    func drawings() {
        let head = "3,0,Default,,0,0,0,,"
        #expect(AssEvent.readable(head + "{\\p1}m 0 0 l 100 0 100 100 0 100{\\p0}") == nil)
        #expect(AssEvent.readable(head + "{\\an8\\p2}m 0 0 l 10 0{\\p0}Sign text") == head + "{\\an8\\p2}{\\p0}Sign text")
        #expect(AssEvent.readable(head + "{\\pos(320,50)\\pbo5}SIGN") == head + "{\\pos(320,50)\\pbo5}SIGN")
        #expect(AssEvent.readable(head + "{\\k20}ka{\\k20}ra") == head + "{\\k20}ka{\\k20}ra")
        #expect(AssEvent.readable(head + "Hello, world\\Nline two") == head + "Hello, world\\Nline two")
        #expect(AssEvent.readable(head + "{\\i1}\\N \\h{\\i0}") == nil)
        #expect(AssEvent.readable(head + "Soft\\nbreak, hard\\Nbreak and\\hhard space") == head + "Soft break, hard\\Nbreak and\u{00A0}hard space")
        #expect(AssEvent.readable("not an event") == nil)
        // SubRip's character references; an unknown name, a lone ampersand and a brace stay as written.
        #expect(AssEvent.readable(head + "Tom &amp; Jerry&#39;s &#x2019;&lt;3&gt; &bogus; AT&T &#123;x&#125;", entities: true)
            == head + "Tom & Jerry's ’<3> &bogus; AT&T &#123;x&#125;")
        #expect(AssEvent.readable(head + "&nbsp;", entities: true) == nil)
        #expect(AssEvent.readable(head + "Tom &amp; Jerry") == head + "Tom &amp; Jerry")
        #expect(AssEvent.stacked(["a", "b", "c"]) == ["a\\N", "b\\N", "c"])
    }

    @Test("thirty signs placed on the picture at once (a screen of labels) stack as the first four and the dialogue, not a 31-line block over the picture; four or fewer stay, and lines that are not placed (dialogue, SubRip) all stay")
    func crowdedPlacedSigns() {
        let head = "0,0,Sign,,0,0,0,,"
        let signs = (0..<30).map { head + "{\\pos(\(20 * $0 + 10),\(15 * $0 + 10))\\fs20}Label \($0)" }
        let dialogue = "1,0,Default,,0,0,0,,Where is everyone?"
        let crowded = AssEvent.stacked(signs + [dialogue])
        #expect(crowded.count == 5, "\(crowded)")
        #expect(crowded.last?.hasSuffix("Where is everyone?") == true, "\(crowded)")
        #expect(crowded.dropLast().enumerated().allSatisfy { $1.contains("Label \($0)") }, "\(crowded)")
        // A moving sign counts as placed too.
        let moving = (0..<6).map { head + "{\\move(10,\(40 * $0),300,\(40 * $0))}Moving \($0)" }
        #expect(AssEvent.stacked(moving).count == 4)
        #expect(AssEvent.stacked(Array(signs.prefix(4)) + [dialogue]).count == 5)
        let lines = (0..<12).map { "0,0,Default,,0,0,0,,Line \($0)" }
        #expect(AssEvent.stacked(lines).count == 12)
    }

    @Test("a text on screen twice at once (an ASS sign drawn in layers, its border and then its fill over it; a SubRip line given twice) is stacked once, the highest layer's, where the first stood: it was listed once per layer")
    func layeredSignOnce() {
        let border = "1,0,Sign,,0,0,0,,{\\pos(320,40)\\bord4\\blur3\\c&H000000&}EXIT", fill = "2,1,Sign,,0,0,0,,{\\pos(320,40)\\c&HFFFFFF&}EXIT"
        let line = "3,0,Default,,0,0,0,,Let's go."
        #expect(AssEvent.withoutRepeats([border, line, fill]) == [fill, line])
        #expect(AssEvent.stacked([border, line, fill]).count == 2)
        #expect(AssEvent.withoutRepeats([line, "4,0,Default,,0,0,0,, Let's go. "]).count == 1)
        // Braces that are not an override block are text: these read differently.
        #expect(AssEvent.withoutRepeats(["5,0,Default,,0,0,0,,{laughs} I know", "6,0,Default,,0,0,0,,I know"]).count == 2)
    }

    @Test("pieces of one line (events of one style placed by \\pos at one height: karaoke syllables or letters) are joined left to right, a wider gap read as a space and a layer drawn again once; Japanese pieces without spaces; pieces far apart, or too few to judge the spacing by, stay as they are")
    func piecesOfALine() {
        func piece(_ order: Int, _ x: Double, _ text: String, y: Double = 40, layer: Int = 0, style: String = "OP", tags: String = "") -> String {
            "\(order),\(layer),\(style),,0,0,0,fx,{\\an5\\pos(\(x),\(y))\(tags)}\(text)"
        }
        // Letters laid out left to right (Helvetica's advances at 50 px an em), each piece's
        // centre rounded to the pixel.
        let advance: [Character: Double] = ["K": 0.667, "i": 0.222, "m": 0.833, "n": 0.556, "o": 0.556, "a": 0.556, "e": 0.556, " ": 0.278,
                                            "Y": 0.667, "s": 0.5, "t": 0.278, "r": 0.333, "d": 0.556, "y": 0.5, "g": 0.556, "l": 0.222, "k": 0.5, "h": 0.556]
        func laidOut(_ pieces: [String], from start: Double = 100) -> [(x: Double, text: String)] {
            var x = start
            return pieces.map { p in
                let text = p.trimmingCharacters(in: .whitespaces)
                let width = text.reduce(0) { $0 + 50 * (advance[$1] ?? 0.556) }
                defer { x += p.reduce(0) { $0 + 50 * (advance[$1] ?? 0.556) } }
                return ((x + width / 2).rounded(), text)
            }
        }
        // Syllables, shuffled; "ma" lit on a second layer and a glow a pixel off.
        let s = laidOut(["Ki", "mi ", "no ", "na", "ma", "e"])
        let line = [piece(1, s[4].x, "ma"), piece(2, s[0].x, "Ki"), piece(3, s[2].x, "no"), piece(4, s[1].x, "mi"), piece(5, s[4].x, "ma", layer: 2),
                    piece(6, s[4].x + 1, "ma", y: 41, layer: 1, tags: "\\blur3"), piece(7, s[5].x, "e"), piece(8, s[3].x, "na"),
                    "9,0,Default,,0,0,0,,Your name is..."]
        let joined = AssEvent.joinedPieces(line)
        #expect(joined.count == 2, "\(joined)")
        #expect(joined.first.map(AssEvent.visibleText) == "Kimi no namae", "\(joined)")
        #expect(joined.last == line.last)
        #expect(AssEvent.stacked(line).count == 2)
        // A letter an event, in English.
        let letters = laidOut("Yesterday is gone like the stars".map { String($0) }).filter { !$0.text.isEmpty }
        #expect(AssEvent.joinedPieces(letters.enumerated().map { piece($0.offset, $0.element.x, $0.element.text) }).map(AssEvent.visibleText)
                == ["Yesterday is gone like the stars"])
        // Japanese: no spaces, however the pieces are spaced.
        let kana = ["き", "み", "の", "な"].enumerated().map { piece($0.offset, 100 + 50 * Double($0.offset) + ($0.offset == 2 ? 20 : 0), $0.element) }
        #expect(AssEvent.joinedPieces(kana).map(AssEvent.visibleText) == ["きみのな"])
        // Two signs on either side of the screen at one height, each two pieces: two lines.
        let exit = laidOut(["EX", "IT"]), entry = laidOut(["EN", "TRY"], from: 1000)
        let signs = [piece(1, exit[0].x, "EX"), piece(2, exit[1].x, "IT"), piece(3, entry[0].x, "EN"), piece(4, entry[1].x, "TRY")]
        #expect(AssEvent.joinedPieces(signs).map(AssEvent.visibleText) == ["EXIT", "ENTRY"])
        // Measured by the style's font where the header gives it: the same words 100 px
        // apart are a line of words at size 46 (an em of 40 px), separate signs at size 20.
        let words = ["One", "two", "three", "four"].enumerated().map { piece($0.offset, 100 + 100 * Double($0.offset), $0.element, style: "W") }
        #expect(AssEvent.joinedPieces(words, sizes: ["W": 46]).map(AssEvent.visibleText) == ["One two three four"])
        #expect(AssEvent.joinedPieces(words, sizes: ["W": 20]) == words)
        #expect(AssEvent.styleSizes(header: "[Script Info]\nPlayResY: 720\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, ScaleX\n"
                                    + "Style: W,Arial,46,100\nStyle: Wide, Arial, 20, 150\n\n[Events]\nFormat: Layer, Start, End, Style, Text\n")
                == ["W": 46, "Wide": 30])
        // Pieces that fly in (\\move) are read where they land; a piece's own \\fs is its
        // size, whatever \\fscx comes before it.
        let landing = ["One", "two", "three", "four"].enumerated().map { i, word in
            "\(i),0,W,,0,0,0,fx,{\\an5\\move(\(640 - 200 * i),500,\(100 + 100 * Double(i)),40,0,300)}\(word)"
        }
        #expect(AssEvent.joinedPieces(landing, sizes: ["W": 46]).map(AssEvent.visibleText) == ["One two three four"])
        let sized = words.map { $0.replacingOccurrences(of: "\\an5", with: "\\an5\\t(\\fscx120)\\fs46") }
        #expect(AssEvent.joinedPieces(sized, sizes: ["W": 20]).map(AssEvent.visibleText) == ["One two three four"])
        // Hebrew reads right to left; a piece of two lines is no piece; a sign over another
        // parts them.
        var right = 600.0
        let hebrew = ["שלום", "עולם", "טוב", "מאוד"].enumerated().map { i, word -> String in
            let width = 50 * 0.556 * Double(word.count)
            defer { right -= width + 50 * 0.278 }
            return piece(i, (right - width / 2).rounded(), word)
        }
        #expect(AssEvent.joinedPieces(hebrew, sizes: ["OP": 50 / AssEvent.emPerFontSize]).map(AssEvent.visibleText) == ["שלום עולם טוב מאוד"])
        let twoLines = [piece(1, s[0].x, "Ki"), piece(2, s[1].x, "mi\\Nno"), piece(3, s[3].x, "na"), piece(4, s[4].x, "ma")]
        #expect(AssEvent.joinedPieces(twoLines) == twoLines)
        let over = [piece(1, 100, "Pharmacy"), piece(2, 160, "Bank"), piece(3, 190, "Bakery"), piece(4, 330, "Cafe")]
        #expect(AssEvent.joinedPieces(over, sizes: ["OP": 40]).map(AssEvent.visibleText) == ["Pharmacy", "Bank", "Bakery Cafe"])
        // Too few pieces, other styles, other heights, or no \pos: as they are.
        let few = [piece(1, 100, "Oh"), piece(2, 140, "yeah"), piece(3, 180, "!")]
        #expect(AssEvent.joinedPieces(few) == few)
        let apart = [piece(1, 100, "a", style: "A"), piece(2, 120, "b", style: "B"), piece(3, 140, "c", y: 80), piece(4, 160, "d", y: 120)]
        #expect(AssEvent.joinedPieces(apart) == apart)
        let unplaced = ["1,0,OP,,0,0,0,,one", "2,0,OP,,0,0,0,,two", "3,0,OP,,0,0,0,,three", "4,0,OP,,0,0,0,,four"]
        #expect(AssEvent.joinedPieces(unplaced) == unplaced)
    }

    @Test("bold, italic and underline are stated in full at every change (mov_text's encoder keeps one style at a time), a reset ends them and the colour, \\c is spelt \\1c, and an event still styled at its end closes them")
    func stylesForMovText() {
        let head = "3,0,Default,,0,0,0,,", off = "\\b0\\i0\\u0"
        #expect(AssEvent.forMovText(head + "{\\b1}bold {\\i1}both{\\i0} bold{\\b0} plain")
                == head + "{\(off)\\b1}bold {\(off)\\b1\\i1}both{\(off)\\b1} bold{\(off)} plain")
        #expect(AssEvent.forMovText(head + "{\\i1}Italic{\\r} then") == head + "{\(off)\\i1}Italic{\\r\(off)} then")
        // The reset reaches the encoder, which puts back the style's colour.
        #expect(AssEvent.forMovText(head + "{\\c&H0000FF&}red{\\r} plain") == head + "{\\1c&H0000FF&}red{\\r} plain")
        #expect(AssEvent.forMovText(head + "{\\c&H0000FF&\\an8}red{\\c}") == head + "{\\1c&H0000FF&\\an8}red{\\1c}")
        #expect(AssEvent.forMovText(head + "{\\u1}open") == head + "{\(off)\\u1}open{\(off)}")
        #expect(AssEvent.forMovText(head + "{\\b700}heavy{\\b400} normal") == head + "{\(off)\\b1}heavy{\(off)} normal")
        for same in ["plain", "{\\bord2\\blur1\\be1}sign", "{\\clip(0,0,10,10)}x", "a { b"] {
            #expect(AssEvent.forMovText(head + same) == head + same)
        }
    }

    @Test("cues that are not UTF-8 are read in their language's code page")
    func codePages() throws {
        #expect(SubtitleCharset.codePage(language: "rus") == "CP1251")
        #expect(SubtitleCharset.codePage(language: "pl") == "CP1250")
        #expect(SubtitleCharset.codePage(language: "pt-BR") == "CP1252")
        #expect(SubtitleCharset.codePage(language: nil) == "CP1252")
        let utf8 = Array("Привет, café".utf8)
        #expect(utf8.withUnsafeBufferPointer { SubtitleCharset.isUTF8($0) })
        let cyrillic: [UInt8] = [0xCF, 0xF0, 0xE8, 0xE2, 0xE5, 0xF2]   // "Привет" in Windows-1251
        #expect(!cyrillic.withUnsafeBufferPointer { SubtitleCharset.isUTF8($0) })
        let russian = try #require(SubtitleCharset(language: "rus"))
        #expect(String(decoding: cyrillic.withUnsafeBufferPointer { russian.utf8($0) }, as: UTF8.self) == "Привет")
        // A byte Windows-1252 has no character for stands in as U+FFFD; the rest goes on.
        let western = try #require(SubtitleCharset(language: "fre"))
        let odd: [UInt8] = [0x43, 0x61, 0x66, 0xE9, 0x81, 0x21]
        #expect(String(decoding: odd.withUnsafeBufferPointer { western.utf8($0) }, as: UTF8.self) == "Café\u{FFFD}!")
        // Code pages whose converter holds a letter back for a combining mark that may
        // follow: the cue's last letter still comes out, and the next cue starts afresh.
        // Chinese is read in GB18030 or Big5, whichever makes sense, cue by cue.
        let big5: [UInt8] = [167, 218, 173, 204, 164, 181, 164, 209, 165, 104, 172, 221, 185, 113, 188, 118, 161, 65, 167, 65, 173, 110, 164, 163,
                             173, 110, 164, 64, 176, 95, 168, 211, 161, 72]
        let gb: [UInt8] = [206, 210, 195, 199, 189, 241, 204, 236, 200, 165, 191, 180, 181, 231, 211, 176, 163, 172, 196, 227, 210, 170, 178, 187,
                           210, 170, 210, 187, 198, 240, 192, 180, 163, 191]
        let chinese = try #require(SubtitleCharset(language: "chi"))
        #expect(String(decoding: big5.withUnsafeBufferPointer { chinese.utf8($0) }, as: UTF8.self) == "我們今天去看電影，你要不要一起來？")
        #expect(String(decoding: gb.withUnsafeBufferPointer { chinese.utf8($0) }, as: UTF8.self) == "我们今天去看电影，你要不要一起来？")
        #expect(String(decoding: big5.withUnsafeBufferPointer { chinese.utf8($0) }, as: UTF8.self) == "我們今天去看電影，你要不要一起來？")
        #expect(chinese.name == "BIG5-HKSCS", "the code page most cues were read in")
        // A track that names no language is read in Windows-1252 or -1251, whichever makes
        // words: Cyrillic read as Western is all accents ("Ïðèâåò"), Western read as
        // Cyrillic mixes scripts in a word ("Cafй"). A cue that reads alike follows the track.
        for language in [nil, "und"] as [String?] {
            func read(_ text: String, _ page: String.Encoding, _ track: SubtitleCharset) -> String {
                let bytes = Array(text.data(using: page)!)
                return String(decoding: bytes.withUnsafeBufferPointer { track.utf8($0) }, as: UTF8.self)
            }
            let russianTrack = try #require(SubtitleCharset(language: language))
            #expect(read("Привет, как дела?", .windowsCP1251, russianTrack) == "Привет, как дела?")
            #expect(read("Да.", .windowsCP1251, russianTrack) == "Да.")
            #expect(read("Я", .windowsCP1251, russianTrack) == "Я", "one letter reads alike: the track's page")
            #expect(russianTrack.name == "CP1251")
            let frenchTrack = try #require(SubtitleCharset(language: language))
            #expect(read("Où? Ça va, très bien.", .windowsCP1252, frenchTrack) == "Où? Ça va, très bien.")
            #expect(read("Señor Müller", .windowsCP1252, frenchTrack) == "Señor Müller")
            #expect(read("À", .windowsCP1252, frenchTrack) == "À", "one letter reads alike: the track's page")
            #expect(frenchTrack.name == "CP1252")
        }
        let hebrew: [UInt8] = [0xF9, 0xEC, 0xE5, 0xED, 0x20, 0xF2, 0xE5, 0xEC, 0xED]   // Windows-1255
        let vietnamese: [UInt8] = [0x58, 0x69, 0x6E, 0x20, 0x63, 0x68, 0xE0, 0x6F]       // Windows-1258
        for (language, bytes, text) in [("heb", hebrew, "שלום עולם"), ("vie", vietnamese, "Xin chào")] {
            let charset = try #require(SubtitleCharset(language: language))
            for _ in 0..<2 {
                #expect(String(decoding: bytes.withUnsafeBufferPointer { charset.utf8($0) }, as: UTF8.self) == text)
            }
        }
    }
}

@Suite("code pages told apart")
struct CodePageChoiceTests {
    func read(_ bytes: [UInt8], _ track: SubtitleCharset) -> String {
        String(decoding: bytes.withUnsafeBufferPointer { track.utf8($0) }, as: UTF8.self)
    }

    @Test("Czech and Polish cues are read in ISO 8859-2 or Windows-1250, whichever makes words (ISO 8859-2's had come out as \"Přílią ľlu»oučký\"); a tag that names no language (\"xx\", \"russian\") is read as a track that names none (Cyrillic had come out as \"Ïðèâåò\")")
    func centralEuropeAndUnknownTags() throws {
        let czech = "Příliš žluťoučký kůň úpěl ďábelské ódy", polish = "Zażółć gęślą jaźń, Šťastný"
        for language in ["cze", "pol"] {
            let iso = try #require(SubtitleCharset(language: language)), windows = try #require(SubtitleCharset(language: language))
            for text in [czech, polish] {
                #expect(read(Array(text.data(using: .isoLatin2)!), iso) == text)
                #expect(read(Array(text.data(using: .windowsCP1250)!), windows) == text)
            }
        }
        for tag in ["xx", "russian", "english"] {
            let track = try #require(SubtitleCharset(language: tag))
            #expect(read(Array("Привет, как дела?".data(using: .windowsCP1251)!), track) == "Привет, как дела?", "\(tag)")
        }
    }

    /// `text` in the iconv code page `page`.
    func encoded(_ text: String, _ page: String) throws -> [UInt8] {
        let cd = iconv_open(page, "UTF-8")
        try #require(Int(bitPattern: cd) != -1)
        defer { iconv_close(cd) }
        var input = Array(text.utf8).map { CChar(bitPattern: $0) }, output = [CChar](repeating: 0, count: input.count * 4)
        let written: Int = input.withUnsafeMutableBufferPointer { inBuf in
            output.withUnsafeMutableBufferPointer { outBuf in
                var i = inBuf.baseAddress, o = outBuf.baseAddress
                var inLeft = inBuf.count, outLeft = outBuf.count
                return iconv(cd, &i, &inLeft, &o, &outLeft) == -1 || inLeft > 0 ? -1 : outBuf.count - outLeft
            }
        }
        try #require(written >= 0, "\(text) in \(page)")
        return output[0..<written].map { UInt8(bitPattern: $0) }
    }

    @Test("a track that names no language is read in GB18030, Big5, Shift-JIS or CP949 where its cues read as Chinese, Japanese or Korean (they had come out as Windows-1252's \"ÄãºÃ\", Korean as \"¾È³ç\"), a one-character cue and one with a Latin word following the track; Western and Russian tracks, whose pairs of letters are East Asian characters too, stay in their own")
    func eastAsianWithoutTag() throws {
        let chinese = ["你好，你今天怎么样", "我不知道他在说什么", "好", "我用iPhone", "谢谢你救了我的命"]
        let traditional = ["你好，你今天怎麼樣", "我們必須馬上離開這裡", "謝謝"]
        let japanese = ["こんにちは、元気ですか", "どうして本当のことを言わなかったの", "はい", "コンピューターが壊れた"]
        let korean = ["안녕하세요, 오늘 어때요?", "그게 무슨 말이에요?", "네", "내 iPhone 어디 있어?", "경찰에 신고해야 돼요"]
        for (cues, page) in [(chinese, "GB18030"), (traditional, "BIG5-HKSCS"), (japanese, "SHIFT-JIS"), (korean, "CP949")] {
            let track = try #require(SubtitleCharset(language: nil))
            for cue in cues { #expect(read(try encoded(cue, page), track) == cue, "\(page)") }
        }
        let russian = ["Да, да.", "Привет, как дела?", "Не надо!", "Он ушёл до утра", "Мы же не дети", "Всё, иди", "Где она?", "Ну да, ну да"]
        let western = ["Não, ação já.", "Café crème", "Où êtes-vous?", "Ça va, merci", "Grüße aus Köln", "Señor, ¿qué pasa?", "Déjà vu"]
        for (cues, page) in [(russian, "CP1251"), (western, "CP1252")] {
            let track = try #require(SubtitleCharset(language: nil))
            for cue in cues { #expect(read(try encoded(cue, page), track) == cue, "\(page)") }
        }
    }

    @Test("a cue of UTF-8 with a stray Windows-1252 byte keeps its UTF-8 and has only that byte read in the code page (it had all come out as \"cafÃ©\"); in a code page of two-byte characters it is read whole, and a Korean line holding a UTF-8 character by chance is no such cue")
    func strayByteInUTF8() throws {
        let bytes: [UInt8] = Array("It".utf8) + [0x92] + Array("s café — mixed".utf8)
        #expect(bytes.withUnsafeBufferPointer { SubtitleCharset.isMixedUTF8($0) && !SubtitleCharset.isUTF8($0) })
        let english = try #require(SubtitleCharset(language: "eng"))
        #expect(bytes.withUnsafeBufferPointer { english.mixedUTF8($0) }.map { String(decoding: $0, as: UTF8.self) } == "It’s café — mixed")
        let chinese = try #require(SubtitleCharset(language: "chi"))
        #expect(bytes.withUnsafeBufferPointer { chinese.mixedUTF8($0) } == nil)
        // Windows-1251's letters make two-byte UTF-8 now and then ("Сі" is D1 B3), never a longer one here.
        let ukrainian: [UInt8] = Array("Сільський вісник".data(using: .windowsCP1251)!)
        #expect(!ukrainian.withUnsafeBufferPointer { SubtitleCharset.isMixedUTF8($0) })
        // A Korean line in CP949 holds a UTF-8 character by chance ("모르겠" is B8 F0 B8 A3 B0):
        // the rest of it is no UTF-8, so the line is CP949's, not UTF-8 with a stray byte
        // (it had come out as "Á¤¸» °í¸¶¿ö¿ä").
        let korean = try encoded("정말 고마워요. 당신이 없었으면 어떻게 했을지 모르겠어요.", "CP949")
        #expect(!korean.withUnsafeBufferPointer { SubtitleCharset.isMixedUTF8($0) || SubtitleCharset.isUTF8($0) })
    }
}

@Suite("closed captions read from the pictures' user data")
struct ClosedCaptionReadingTests {
    /// cc_data with `triplets`, process flag set.
    static func ccData(_ triplets: [UInt8]) -> [UInt8] { [0xC0 | UInt8(triplets.count / 3), 0xFF] + triplets + [0xFF] }
    static let caption: [UInt8] = [0xFC, 0x94, 0x20, 0xFD, 0x80, 0x80]

    /// A valid CEA-608 triplet of `field` (its cc_type) with both bytes' odd parity.
    static func pair(_ hi: UInt8, _ lo: UInt8, field: UInt8 = 0) -> [UInt8] { [0xFC | field, Teletext.oddParity(hi), Teletext.oddParity(lo)] }

    static func triplets(_ bytes: [UInt8], _ codec: AVCodecID, lengthSize: Int = 0) -> [UInt8] {
        bytes.withUnsafeBufferPointer { ClosedCaptions.triplets(in: $0, codec: codec, lengthSize: lengthSize) }
    }

    /// An SEI message of type 4 with `body` after the country code, as a NAL unit's payload.
    static func sei(_ body: [UInt8]) -> [UInt8] {
        ClosedCaptionSample.preventingEmulation([4, UInt8(body.count + 1), 0xB5] + body + [0x80])
    }

    @Test("H.264 behind start codes (MPEG-TS) and HEVC behind length prefixes (MP4, Matroska)")
    func seiMessages() {
        let atsc = [0x00, 0x31] + Array("GA94".utf8) + [0x03] + Self.ccData(Self.caption)
        // An access unit delimiter, the SEI (after another SEI message, user data unregistered), a slice.
        let other: [UInt8] = [5, 3, 1, 2, 3]
        let annexB: [UInt8] = [0, 0, 0, 1, 0x09, 0xF0, 0, 0, 1, 0x06] + other + Self.sei(atsc) + [0, 0, 1, 0x65, 0x88, 0x84]
        #expect(Self.triplets(annexB, AV_CODEC_ID_H264) == Self.caption)
        // HEVC prefix SEI (type 39: header 0x4E 0x01) with a four-byte length.
        let unit: [UInt8] = [0x4E, 0x01] + Self.sei(atsc)
        let hevc: [UInt8] = [0, 0, 0, UInt8(unit.count)] + unit + [0, 0, 0, 3, 0x26, 0x01, 0xAF]
        #expect(Self.triplets(hevc, AV_CODEC_ID_HEVC, lengthSize: 4) == Self.caption)
        // DirecTV's provider code leaves the identifier out.
        #expect(Self.triplets([0, 0, 1, 0x06] + Self.sei([0x00, 0x2F, 0x03] + Self.ccData(Self.caption)), AV_CODEC_ID_H264) == Self.caption)
        // Another registered user's data (bar data, "DTG1") and a cleared process flag are
        // not captions.
        #expect(Self.triplets([0, 0, 1, 0x06] + Self.sei([0x00, 0x31] + Array("DTG1".utf8) + [0x41, 0xF8]), AV_CODEC_ID_H264).isEmpty)
        #expect(Self.triplets([0, 0, 1, 0x06] + Self.sei([0x00, 0x31] + Array("GA94".utf8) + [0x03, 0x82, 0xFF] + Self.caption), AV_CODEC_ID_H264).isEmpty)
        // A pair of field pictures in one packet: each field's SEI, in order.
        let second = [0x00, 0x31] + Array("GA94".utf8) + [0x03] + Self.ccData([0xFC, 0xC1, 0xC2])
        #expect(Self.triplets(annexB + [0, 0, 1, 0x06] + Self.sei(second) + [0, 0, 1, 0x01, 0x9A], AV_CODEC_ID_H264) == Self.caption + [0xFC, 0xC1, 0xC2])
    }

    @Test("emulation prevention bytes are taken out of an SEI before it is read")
    func emulationPrevention() {
        let zeros: [UInt8] = [0xFC, 0x94, 0x20, 0xFA, 0x00, 0x00, 0xFA, 0x00, 0x00]
        // em_data 0x00 and a cc_count that puts 00 00 before 0x03 and 0x01.
        let body = [0x00, 0x31] + Array("GA94".utf8) + [0x03, 0xC3, 0x00] + zeros + [0x00, 0x00, 0x01] + [0xFF]
        let escaped = Self.sei(body)
        #expect(escaped.count > body.count + 4, "the test's payload needs emulation prevention")
        #expect(Self.triplets([0, 0, 1, 0x06] + escaped, AV_CODEC_ID_H264) == zeros)
        #expect(ClosedCaptions.rbsp([0, 0, 3, 1, 0, 0, 3, 3, 7].withUnsafeBufferPointer { $0[...] }) == [0, 0, 1, 0, 0, 3, 7])
    }

    @Test("MPEG-2 user data: ATSC's GA94 after each picture header, nothing else")
    func mpeg2() {
        let picture: [UInt8] = [0, 0, 1, 0x00, 0x00, 0x0F, 0xFF, 0xF8, 0, 0, 1, 0xB5, 0x8F, 0xFF]
        let ga94: [UInt8] = [0, 0, 1, 0xB2] + Array("GA94".utf8) + [0x03] + Self.ccData(Self.caption)
        let slice: [UInt8] = [0, 0, 1, 0x01, 0x12, 0x34]
        #expect(Self.triplets(picture + ga94 + slice, AV_CODEC_ID_MPEG2VIDEO) == Self.caption)
        // A pair of field pictures in one packet: each one's user data, in order.
        let secondField: [UInt8] = [0, 0, 1, 0xB2] + Array("GA94".utf8) + [0x03] + Self.ccData([0xFD, 0x94, 0x2C])
        #expect(Self.triplets(picture + ga94 + slice + picture + secondField + slice, AV_CODEC_ID_MPEG2VIDEO) == Self.caption + [0xFD, 0x94, 0x2C])
        // Another user's data is no captions, nor is user data cut short.
        #expect(Self.triplets(picture + [0, 0, 1, 0xB2] + Array("DTG1".utf8) + [0x41, 0xF8] + slice, AV_CODEC_ID_MPEG2VIDEO).isEmpty)
        #expect(Self.triplets(picture + Array(ga94.prefix(14)), AV_CODEC_ID_MPEG2VIDEO).isEmpty)
    }

    @Test("SCTE 20's user data: fields counted in display order (field 1 first in a top-field-first frame, second in a bottom-first one), bytes sent least significant bit first; left aside where A/53's are there too")
    func scte20() {
        // Picture coding extension of a frame picture (structure 3), top_field_first set or not.
        func picture(topFirst: Bool) -> [UInt8] { [0, 0, 1, 0x00, 0x00, 0x0F, 0xFF, 0xF8, 0, 0, 1, 0xB5, 0x8F, 0xFF, 0xF3, topFirst ? 0x80 : 0x00] }
        let slice: [UInt8] = [0, 0, 1, 0x01, 0x12, 0x34]
        let data = ClosedCaptionSample.scte20([(1, (0x94, 0x2C)), (2, (0x80, 0x80)), (3, (0xC1, 0xC2))])
        #expect(Self.triplets(picture(topFirst: true) + data + slice, AV_CODEC_ID_MPEG2VIDEO)
                == [0xFC, 0x94, 0x2C, 0xFD, 0x80, 0x80, 0xFC, 0xC1, 0xC2])
        #expect(Self.triplets(picture(topFirst: false) + data + slice, AV_CODEC_ID_MPEG2VIDEO)
                == [0xFD, 0x94, 0x2C, 0xFC, 0x80, 0x80, 0xFD, 0xC1, 0xC2])
        // Field number 0 is forbidden: that pair is left out. A count past the data: what is there.
        #expect(Self.triplets(picture(topFirst: true) + ClosedCaptionSample.scte20([(0, (0x94, 0x2C)), (1, (0xC1, 0xC2))]) + slice,
                              AV_CODEC_ID_MPEG2VIDEO) == [0xFC, 0xC1, 0xC2])
        #expect(Self.triplets(picture(topFirst: true) + Array(data.prefix(12)), AV_CODEC_ID_MPEG2VIDEO) == [0xFC, 0x94, 0x2C])
        // The same captions in A/53's user data too (as some cable streams send them): read once, from A/53.
        let ga94: [UInt8] = [0, 0, 1, 0xB2] + Array("GA94".utf8) + [0x03] + Self.ccData([0xFC, 0x94, 0x2C])
        #expect(Self.triplets(picture(topFirst: true) + data + ga94 + slice, AV_CODEC_ID_MPEG2VIDEO) == [0xFC, 0x94, 0x2C])
        #expect(Self.triplets(picture(topFirst: true) + ga94 + data + slice, AV_CODEC_ID_MPEG2VIDEO) == [0xFC, 0x94, 0x2C])
        // A/53 user data with CEA-708 only: SCTE 20's are the CEA-608 to read.
        let dtvcc: [UInt8] = [0, 0, 1, 0xB2] + Array("GA94".utf8) + [0x03] + Self.ccData([0xFF, 0x02, 0x21])
        #expect(Self.triplets(picture(topFirst: true) + dtvcc + data + slice, AV_CODEC_ID_MPEG2VIDEO)
                == [0xFC, 0x94, 0x2C, 0xFD, 0x80, 0x80, 0xFC, 0xC1, 0xC2])
    }

    @Test("a blank screen's erase goes before the first character written on it in roll-up, paint-on and text modes, never in pop-on, never twice")
    func blankScreenMark() {
        let field1 = { (hi: UInt8, lo: UInt8) in Self.pair(hi, lo) }
        let edm = field1(0x14, 0x2C), rdc = field1(0x14, 0x29), rcl = field1(0x14, 0x20), eoc = field1(0x14, 0x2F)
        let pac = field1(0x14, 0x70), hi = field1(0x48, 0x49), cc2EDM: [UInt8] = [0xFC, 0x1C, 0x2C]
        var watch = CaptionScreenWatch()
        // The decoder starts in roll-up on a blank screen: the first characters are marked.
        #expect(watch.marked(hi) == edm + hi)
        #expect(watch.marked(hi + hi) == hi + hi)
        // Erased, painted on after a row address: marked once, before the first character.
        #expect(watch.marked(edm + edm) == edm + edm)
        #expect(watch.marked(rdc + rdc + pac + pac) == rdc + rdc + pac + pac)
        #expect(watch.marked(pac + hi) == pac + edm + hi)
        #expect(watch.marked(hi) == hi)
        // Loaded off screen (pop-on) and shown by an end of caption: left as it is.
        #expect(watch.marked(edm + rcl + pac + hi + eoc) == edm + rcl + pac + hi + eoc)
        #expect(watch.marked(rdc + hi) == rdc + hi)
        let rtd = field1(0x14, 0x2B)
        #expect(watch.marked(edm + rtd + hi) == edm + rtd + edm + hi)
        // Right after the decoder's last command, an erase it would skip as a repeat: the
        // other data channel's erase instead. Field 2 and pairs that fail their parity are
        // not the decoder's, so they neither write nor erase.
        var after = CaptionScreenWatch()
        _ = after.marked(hi + edm)
        #expect(after.marked([0xFD, 0xC8, 0x49] + [0xFC, 0xC8, 0x48] + hi) == [0xFD, 0xC8, 0x49] + [0xFC, 0xC8, 0x48] + cc2EDM + hi)
    }

    @Test("a DVD's captions: a GOP's frames at once, fields alternating from the one it names first, whatever each word's field bit says")
    func dvd() {
        let words: [UInt8] = [0xFF, 0x94, 0x20, 0xFF, 0x80, 0x80, 0xFF, 0x94, 0x2F, 0xFE, 0x80, 0x80, 0xFF, 0xC1, 0xC2]
        func frames(_ header: UInt8, _ words: [UInt8]) -> [[UInt8]] {
            ([0, 0, 1, 0xB8, 0, 8, 0, 0x40, 0, 0, 1, 0xB2, 0x43, 0x43, 0x01, 0xF8, header] + words + [0, 0, 1, 0x00, 0x00, 0x0F])
                .withUnsafeBufferPointer { ClosedCaptions.frames(in: $0, codec: AV_CODEC_ID_MPEG2VIDEO, lengthSize: 0) }
        }
        // Field 1 first, two blocks and the extra word: three frames.
        #expect(frames(0x80 | 2 << 1 | 1, words) == [[0xFC, 0x94, 0x20, 0xFD, 0x80, 0x80], [0xFC, 0x94, 0x2F, 0xFD, 0x80, 0x80], [0xFC, 0xC1, 0xC2]])
        // Field 2 first.
        #expect(frames(1 << 1, words).first == [0xFD, 0x94, 0x20, 0xFC, 0x80, 0x80])
        // A word without its marker ends them; so does the end of the data.
        #expect(frames(0x80 | 2 << 1, Array(words.prefix(6)) + [0x00, 0x94, 0x2F]) == [[0xFC, 0x94, 0x20, 0xFD, 0x80, 0x80]])
        #expect(frames(0x80 | 31 << 1, Array(words.prefix(7))) == [[0xFC, 0x94, 0x20, 0xFD, 0x80, 0x80]])
    }

    @Test("CEA-608 is a valid field 1 or 2 pair; padding and CEA-708's packets alone are not")
    func carries608() {
        #expect(ClosedCaptions.carry608(Self.caption))
        #expect(ClosedCaptions.carry608([0xFD, 0x94, 0x20]))
        #expect(!ClosedCaptions.carry608([0xF8, 0x80, 0x80, 0xFA, 0x00, 0x00]))
        #expect(!ClosedCaptions.carry608([0xFF, 0x02, 0x21, 0xFE, 0x41, 0x42]))
        #expect(!ClosedCaptions.carry608([]))
        // Text: characters of the service, not its commands or padding.
        func text(_ triplets: [UInt8], field: UInt8 = 0) -> Bool {
            var channel = CaptionChannel(field: field)
            return ClosedCaptions.carryText(channel.kept(triplets))
        }
        #expect(text([0xFC, 0x80, 0x80, 0xFC, 0xC8, 0x49]))
        #expect(!text([0xFC, 0x80, 0x80, 0xFC, 0x94, 0x20, 0xFD, 0xC8, 0x49, 0xF8, 0xC8, 0x49]))
        #expect(!text([0xFD, 0x01, 0x83, 0xFD, 0xC8, 0x49, 0xFF, 0x02, 0x21], field: 1))
    }

    @Test("a field's data channel 1 captions only: another channel's commands and characters, a text service and extended data become neutral pairs (so a repeated command after them is still a second one); pairs the decoder drops are left out")
    func captionChannel() {
        let rcl = Self.pair(0x14, 0x20), hi = Self.pair(0x48, 0x49), cc2RU2 = Self.pair(0x1C, 0x25), cc2CR = Self.pair(0x1C, 0x2D)
        let ho = Self.pair(0x48, 0x4F), tr = Self.pair(0x14, 0x2A), cc1RU2 = Self.pair(0x14, 0x25)
        let neutral: [UInt8] = [0xFC, 0x80, 0x01], neutral3: [UInt8] = [0xFD, 0x80, 0x01]
        var cc1 = CaptionChannel(field: 0)
        // Channel 2's commands and the characters after them; channel 1's again after its command.
        #expect(cc1.kept(rcl + hi + cc2RU2 + cc2CR + ho + rcl + hi) == rcl + hi + neutral + neutral + neutral + rcl + hi)
        // Channel 1's text service, from text restart to its return to captions (roll-up).
        #expect(cc1.kept(tr + ho + ho + cc1RU2 + hi) == neutral + neutral + neutral + cc1RU2 + hi)
        // Field 2 is not field 1's; padding and a second byte that fails its parity are
        // dropped; a first byte that fails its parity is a character (a solid block), not
        // another channel's command.
        #expect(cc1.kept(Self.pair(0x14, 0x2C, field: 1) + [0xFC, 0x80, 0x80] + [0xFC, 0x94, 0x2D]).isEmpty)
        #expect(cc1.kept([0xFC, 0x9C, 0x2C] + hi) == [0xFC, 0x9C, 0x2C] + hi)
        // Field 2: extended data from its start to its end code, then CC3 again; a caption
        // command interrupts it. A carriage return repeated after extended data stays two.
        var cc3 = CaptionChannel(field: 1)
        let start = Self.pair(0x01, 0x03, field: 1), end = Self.pair(0x0F, 0x2A, field: 1)
        let hi3 = Self.pair(0x48, 0x49, field: 1), ru3 = Self.pair(0x15, 0x25, field: 1), cr3 = Self.pair(0x15, 0x2D, field: 1)
        #expect(cc3.kept(ru3 + hi3 + start + hi3 + hi3 + end + hi3) == ru3 + hi3 + neutral3 + neutral3 + neutral3 + neutral3 + hi3)
        #expect(cc3.kept(start + hi3 + ru3 + hi3) == neutral3 + neutral3 + ru3 + hi3)
        #expect(cc3.kept(cr3 + start + end + cr3) == cr3 + neutral3 + neutral3 + cr3)
    }

    @Test("pictures' captions in decode order come out in display order")
    func presentationOrder() {
        var order = PresentationOrder<Int>()
        var out: [Int64] = []
        // An IPBB… pattern, three times as deep as the buffer, then what waits at the end.
        let decode: [Int64] = (0..<(3 * PresentationOrder<Int>.depth)).flatMap { g -> [Int64] in
            let b = Int64(g) * 3
            return [b + 2, b, b + 1]
        }
        for t in decode { out += order.add(Int(t), at: t).map(\.time) }
        #expect(out.count == decode.count - PresentationOrder<Int>.depth)
        out += order.drain().map(\.time)
        #expect(out == decode.sorted())
    }
}

@Suite("CEA-708 captions: packets, services, windows")
struct DTVCCTests {
    typealias Screen = DTVCCService.Screen

    /// `service`'s bytes at each time, read whole; every screen given, and the last ones.
    static func screens(_ runs: [(Int64, [UInt8])]) -> [Screen] {
        var service = DTVCCService()
        var out: [Screen] = []
        for (time, bytes) in runs { out += service.read(bytes[...], at: time) }
        return out + service.finish()
    }

    @Test("packets are put together across pictures and give each service its blocks; a packet cut short by the next start gives what it holds; triplets not valid, and data before any start, are not read")
    func packets() {
        // Service 1 (three bytes) and service 9 (extended header) in one packet.
        let packet: [UInt8] = [0x03 << 6 | 4, 1 << 5 | 3, 0x41, 0x42, 0x43, 7 << 5 | 1, 9, 0x44]
        let triplets = DTVCCSample.triplets(of: packet)
        var reader = DTVCCPackets()
        #expect(reader.read([0xFE, 0x41, 0x41]).isEmpty, "data before a start")
        #expect(reader.read(Array(triplets[0..<6]) + [0xFA, 0x00, 0x00]).isEmpty, "half a packet, and padding")
        let blocks = reader.read(Array(triplets[6...]))
        #expect(blocks.map(\.service) == [1, 9] && blocks.map { Array($0.data) } == [[0x41, 0x42, 0x43], [0x44]])
        // A start before the rest of a packet came: the blocks it had whole, then the new one.
        let cut = DTVCCSample.triplets(of: DTVCCSample.packet(service: 2, [0x45, 0x46], sequence: 1))
        let early = reader.read(Array(triplets[0..<9]) + cut)
        #expect(early.map(\.service) == [1, 2] && early.map { Array($0.data) } == [[0x41, 0x42, 0x43], [0x45, 0x46]])
    }

    @Test("pop-on: a hidden window's text shows when the window is shown and goes when it is deleted; styling parameters are not text; Latin-1, the music note and G2's marks are read")
    func popOn() {
        let spa: [UInt8] = [0x90, 0x05, 0x41], spc: [UInt8] = [0x91, 0x2A, 0x41, 0x42]
        let out = Self.screens([
            (0, DTVCCSample.window(1, visible: false, rows: 2, top: 80) + spa + spc + DTVCCSample.text("CAFÉ ♪") + [0x0D] + DTVCCSample.text("“HI” •")),
            (1000, [0x89, 0x02]),
            (3000, [0x8C, 0x02]),
        ])
        // The pen attributes (0x41) underline what follows.
        #expect(out == [Screen(time: 1000, lines: ["CAFÉ ♪", "“HI” •"], marked: ["{\\u1}CAFÉ ♪{\\u0}", "{\\u1}“HI” •{\\u0}"]), Screen(time: 3000, lines: [])])
    }

    @Test("the pen's italics and underline come out as ASS tags, italics running on across spaces between italic words, every tag closed at the line's end; a backslash is not read as a tag")
    func penStyles() {
        let italic: [UInt8] = [0x90, 0x05, 0x80], underline: [UInt8] = [0x90, 0x05, 0x40], plain: [UInt8] = [0x90, 0x05, 0x00]
        let out = Self.screens([(0, DTVCCSample.window(0, visible: false, rows: 2, top: 80) + DTVCCSample.text("SHE SAID ") + italic
                                    + DTVCCSample.text("NOT NOW") + plain + DTVCCSample.text(" OK") + [0x0D] + underline + DTVCCSample.text("A\\B") + italic
                                    + DTVCCSample.text(" ♪")),
                                (1000, [0x89, 0x01])])
        #expect(out.map(\.lines) == [["SHE SAID NOT NOW OK", "A\\B ♪"]])
        #expect(out.map(\.marked) == [["SHE SAID {\\i1}NOT NOW{\\i0} OK", "{\\u1}A\u{FF3C}B{\\u0} {\\i1}♪{\\i0}"]])
        // Defined again, with pen style 0 the pen stays italic; a predefined style (1) resets it.
        let again = DTVCCSample.window(0, visible: true, rows: 1, top: 80), reset = Array(again.dropLast()) + [0x01]
        let restyled = Self.screens([(0, again + italic + DTVCCSample.text("X") + [0x03]), (500, again + [0x0C] + DTVCCSample.text("Y") + [0x03]),
                                     (1000, reset + [0x0C] + DTVCCSample.text("Z") + [0x03])])
        #expect(restyled.map(\.marked) == [["{\\i1}X{\\i0}"], ["{\\i1}Y{\\i0}"], ["Z"]])
    }

    @Test("roll-up: a line shows from its first character once it is complete, the rows roll up at a carriage return on the last")
    func rollUp() {
        let out = Self.screens([
            (8000, DTVCCSample.window(0, visible: true, rows: 2, top: 90) + DTVCCSample.text("ONE")),
            (9000, [0x0D] + DTVCCSample.text("TWO")),
            (10000, [0x0D]),
            (10500, DTVCCSample.text("THREE")),
        ])
        #expect(out == [Screen(time: 8000, lines: ["ONE"]), Screen(time: 9000, lines: ["ONE", "TWO"]), Screen(time: 10000, lines: ["TWO"]),
                        Screen(time: 10500, lines: ["TWO", "THREE"])])
    }

    @Test("a command cut between two blocks is read whole; backspace, a row's erase and a form feed take text away at once; windows show top to bottom")
    func edits() {
        let window = DTVCCSample.window(0, visible: true, rows: 1, top: 50)
        var out = Self.screens([(0, Array(window[0..<3])), (100, Array(window[3...]) + DTVCCSample.text("ABX") + [0x08] + DTVCCSample.text("C") + [0x03]),
                                (200, DTVCCSample.text("D") + [0x08, 0x08] + [0x03])])
        #expect(out == [Screen(time: 100, lines: ["ABC"]), Screen(time: 200, lines: ["AB"])])
        out = Self.screens([(0, window + DTVCCSample.text("LINE") + [0x03]), (500, [0x0E]), (600, DTVCCSample.text("NEW") + [0x0C])])
        #expect(out == [Screen(time: 0, lines: ["LINE"]), Screen(time: 500, lines: []), Screen(time: 600, lines: [])])
        // Window 1 defined higher on the screen than window 0: its line first.
        out = Self.screens([(0, window + DTVCCSample.text("LOW") + DTVCCSample.window(1, visible: true, rows: 1, top: 10) + DTVCCSample.text("HIGH") + [0x03])])
        #expect(out.last?.lines == ["HIGH", "LOW"])
    }

    @Test("the probe reads CEA-708 in display order: a packet across three pictures that come in decode order (B-frames) is still whole")
    func surveyOrder() {
        let packet = DTVCCSample.packet(service: 1, DTVCCSample.window(0, visible: true, rows: 1, top: 90) + DTVCCSample.text("CAPTIONS READ IN DISPLAY ORDER"), sequence: 0)
        let all = DTVCCSample.triplets(of: packet)
        let pictures = stride(from: 0, to: all.count, by: 24).map { Array(all[$0..<min(all.count, $0 + 24)]) }
        #expect(pictures.count == 3)
        var survey = CaptionSurvey()
        // Decode order: the picture shown second comes first (a reference), then the first.
        for k in [1, 0, 2] { survey.read(pictures[k], at: Int64(k)) }
        survey.finish()
        #expect(survey.found == ["SERVICE1"])
    }

    @Test("damaged caption data never traps, and its screens still come in time order, each different from the one before")
    func damage() {
        var random = SplitMix(seed: 708)
        for _ in 0..<2000 {
            var reader = DTVCCPackets()
            var service = DTVCCService()
            var screens: [Screen] = []
            for picture in 0..<30 {
                // Valid packet starts and data more often than not, so that blocks get through.
                let triplets = (0..<Int.random(in: 0...10, using: &random)).flatMap { _ in
                    [0xFC | UInt8.random(in: 2...3, using: &random), UInt8.random(in: 0...255, using: &random), UInt8.random(in: 0...255, using: &random)]
                }
                for block in reader.read(triplets) { screens += service.read(block.data, at: Int64(picture)) }
            }
            screens += service.finish()
            #expect(zip(screens, screens.dropFirst()).allSatisfy { $0.time <= $1.time && $0.lines != $1.lines })
        }
    }
}
