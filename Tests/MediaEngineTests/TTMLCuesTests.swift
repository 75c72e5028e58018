import Testing
@testable import MediaEngine

@Suite("TTML documents as cues")
struct TTMLCuesTests {
    typealias Cue = TTMLCues.Cue

    static func cues(_ xml: String) -> [Cue] { TTMLCues.read(Array(xml.utf8)) }

    static func document(_ body: String, tt: String = "") -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!-- written by a packager -->
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:tts="http://www.w3.org/ns/ttml#styling"
            xmlns:ttp="http://www.w3.org/ns/ttml#parameter" xml:lang="en" \(tt)>
          <head><styling><style xml:id="it" tts:fontStyle="italic"/><style xml:id="bd" tts:fontWeight="bold" style="it"/></styling></head>
          <body>\(body)</body>
        </tt>
        """
    }

    @Test("clock times, offsets in h/m/s/ms, frames at the document's rate (with its multiplier and sub-frames), ticks at its tick rate")
    func timeExpressions() {
        let body = """
        <div>
          <p begin="00:00:01.250" end="00:00:02.5">a</p>
          <p begin="3s" end="3500ms">b</p>
          <p begin="0.1m" dur="0.001h">c</p>
          <p begin="00:00:10:12" end="300f">d</p>
          <p begin="20000000t" end="21000000t">e</p>
          <p begin="00:00:30:12.1" end="00:00:31:00">f</p>
        </div>
        """
        let got = Self.cues(Self.document(body, tt: #"ttp:frameRate="24" ttp:frameRateMultiplier="1000 1001" ttp:subFrameRate="2" ttp:tickRate="10000000""#))
        let fps = 24.0 * 1000 / 1001
        #expect(got.map(\.begin) == [1250, 3000, 6000, Int64(((10 + 12 / fps) * 1000).rounded()), 2000, Int64(((30 + 12.5 / fps) * 1000).rounded())])
        #expect(got.map(\.end) == [2500, 3500, 9600, Int64((300 / fps * 1000).rounded()), 2100, 31_000])
        #expect(got.map(\.text) == ["a", "b", "c", "d", "e", "f"])
    }

    @Test("frames without a tick rate count at the frame rate; the defaults are 30 fps and 1 tick a second")
    func defaultRates() {
        #expect(Self.cues(Self.document(#"<p begin="15f" end="2t">x</p>"#)).first.map { [$0.begin, $0.end ?? -1] } == [500, 2000])
        #expect(Self.cues(Self.document(#"<p begin="25f" end="50t">x</p>"#, tt: #"ttp:frameRate="25""#)).first.map { [$0.begin, $0.end ?? -1] } == [1000, 2000])
    }

    @Test("a child's times count from its parent's begin and end no later than its parent: body, div, p; dur ends a cue, no end leaves it open")
    func nestedTiming() {
        let body = """
        <div begin="10s" end="20s">
          <p begin="1s" end="2s">one</p>
          <p begin="5s" end="15s">cut at the div's end</p>
          <p begin="3s" dur="0.5s">short</p>
          <p begin="4s">open</p>
        </div>
        <div><p begin="1s" end="2s">other div</p></div>
        """
        let got = Self.cues(Self.document(body))
        #expect(got == [Cue(begin: 11_000, end: 12_000, text: "one"), Cue(begin: 15_000, end: 20_000, text: "cut at the div's end"),
                        Cue(begin: 13_000, end: 13_500, text: "short"), Cue(begin: 14_000, end: 20_000, text: "open"),
                        Cue(begin: 1000, end: 2000, text: "other div")])
        #expect(Self.cues(Self.document(#"<p begin="1s">no end</p>"#)) == [Cue(begin: 1000, end: nil, text: "no end")])
    }

    @Test("spans timed within a paragraph show only in their time (roll-up captions' words, a paragraph whose lines are timed): a cue for each stretch, the same text over consecutive stretches one cue")
    func timedSpans() {
        let rollUp = Self.cues(Self.document(#"<p begin="1s" end="5s">Hello <span begin="1s">big</span> <span begin="2s" end="3s">world</span></p>"#))
        #expect(rollUp == [Cue(begin: 1000, end: 2000, text: "Hello"), Cue(begin: 2000, end: 3000, text: "Hello big"),
                           Cue(begin: 3000, end: 4000, text: "Hello big world"), Cue(begin: 4000, end: 5000, text: "Hello big")])
        let lines = Self.cues(Self.document(#"<div><p><span begin="1s" end="2s">first</span><br/><span begin="3s" end="4s">second</span></p></div>"#))
        #expect(lines == [Cue(begin: 1000, end: 2000, text: "first"), Cue(begin: 3000, end: 4000, text: "second")])
        let same = Self.cues(Self.document(#"<p begin="0s" end="4s"><span begin="0s" end="2s">same</span><span begin="2s" end="4s">same</span></p>"#))
        #expect(same == [Cue(begin: 0, end: 4000, text: "same")])
    }

    @Test("text: spans joined, br a new line, white space collapsed as XML does (line breaks in the source are spaces), entities and character references decoded, CDATA kept, ASS markup neutralised")
    func text() {
        let body = """
        <p begin="1s" end="2s">
            Hello   <span>there</span>,
            friend<br/>  second &amp; last &lt;line&gt; &#233;&#x4E2D; <![CDATA[a < b]]>
        </p>
        <p begin="2s" end="3s">{\\an8}back\\slash</p>
        <p begin="3s" end="4s" xml:space="preserve">kept  two
        lines</p>
        <p begin="4s" end="5s">   </p>
        <p begin="5s" end="5s">empty span of time</p>
        """
        let got = Self.cues(Self.document(body))
        #expect(got.map(\.text) == ["Hello there, friend\\Nsecond & last <line> é中 a < b", "\u{FF5B}\u{FF3C}an8\u{FF5D}back\u{FF3C}slash",
                                    "kept  two\\Nlines"])
    }

    @Test("italic, bold and underline, on an element or by a referenced style (which may name another), as ASS tags closed at the cue's end")
    func styles() {
        let body = """
        <p begin="1s" end="2s">plain <span tts:fontStyle="italic">slanted</span> plain</p>
        <p begin="2s" end="3s" style="it">all italic</p>
        <p begin="3s" end="4s"><span style="bd">both</span> <span tts:textDecoration="underline">under</span></p>
        """
        let got = Self.cues(Self.document(body))
        #expect(got.map(\.text) == ["plain {\\i1}slanted{\\i0} plain", "{\\i1}all italic{\\i0}",
                                    "{\\i1}{\\b1}both{\\i0}{\\b0} {\\u1}under{\\u0}"])
    }

    @Test("prefixed elements (tt:p) and attributes in single quotes are read; comments, processing instructions and a DOCTYPE are skipped")
    func namespaces() {
        let xml = """
        <?xml version='1.0'?><!DOCTYPE tt><tt:tt xmlns:tt='http://www.w3.org/ns/ttml'><tt:body><!-- <tt:p begin='0s'>not this</tt:p> -->
        <tt:div><tt:p begin='00:00:01.000' end='00:00:02.000'>prefixed</tt:p></tt:div></tt:body></tt:tt>
        """
        #expect(Self.cues(xml) == [Cue(begin: 1000, end: 2000, text: "prefixed")])
    }

    @Test("a sample's cues: cut to the sample's span (before it, after it, across its end), on the track's clock; a document timed from its own sample's start, none of whose cues reaches the sample, is counted from it")
    func placedInSample() {
        let cues = [Cue(begin: 9_000, end: 11_000, text: "across the start"), Cue(begin: 12_000, end: 13_000, text: "inside"),
                    Cue(begin: 19_000, end: 25_000, text: "across the end"), Cue(begin: 30_000, end: 31_000, text: "after"),
                    Cue(begin: 1_000, end: 2_000, text: "before")]
        #expect(TTMLCues.placed(cues, sampleStart: 10_000, sampleEnd: 20_000)
                == [Cue(begin: 10_000, end: 11_000, text: "across the start"), Cue(begin: 12_000, end: 13_000, text: "inside"),
                    Cue(begin: 19_000, end: 20_000, text: "across the end")])
        // Timed from the sample's start (0.5 to 1.5 s into a sample at 600 s).
        #expect(TTMLCues.placed([Cue(begin: 500, end: 1_500, text: "relative")], sampleStart: 600_000, sampleEnd: 602_000)
                == [Cue(begin: 600_500, end: 601_500, text: "relative")])
        // An open cue lasts to the sample's end; with no end known, it stays open.
        #expect(TTMLCues.placed([Cue(begin: 4_000, end: nil, text: "open")], sampleStart: 0, sampleEnd: 6_000) == [Cue(begin: 4_000, end: 6_000, text: "open")])
        #expect(TTMLCues.placed([Cue(begin: 4_000, end: nil, text: "open")], sampleStart: 0, sampleEnd: nil) == [Cue(begin: 4_000, end: nil, text: "open")])
        // A sample that only repeats a cue that has ended is empty, not moved.
        #expect(TTMLCues.placed([Cue(begin: 1_000, end: 2_000, text: "old")], sampleStart: 600_000, sampleEnd: 600_500).isEmpty)
    }

    @Test("damaged documents give what they can and never trap: cut anywhere, bytes scrambled, times that are no times, tags never closed")
    func damaged() {
        let whole = Array(Self.document(#"<div><p begin="1s" end="2s">one <span>two</span></p><p begin="3s" end="4s">three</p></div>"#).utf8)
        for cut in stride(from: 0, through: whole.count, by: 7) { _ = TTMLCues.read(Array(whole[..<cut])) }
        var state: UInt64 = 7
        for _ in 0..<300 {
            var bytes = whole
            for _ in 0..<8 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                bytes[Int(state >> 33) % bytes.count] = UInt8(truncatingIfNeeded: state >> 17)
            }
            _ = TTMLCues.read(bytes)
        }
        #expect(Self.cues(Self.document(#"<p begin="soon" end="1e400s">x</p><p begin="-1s" end="99:99:99:99:99">y</p>"#)).map(\.begin) == [0, 0])
        #expect(Self.cues("<tt><body><p begin=\"1s\">never closed").isEmpty)
        #expect(TTMLCues.read([]).isEmpty && TTMLCues.read(Array("<<<>>>&&&;".utf8)).isEmpty)
        // 20,000 spans nested, each beginning 31 years after its parent: times held, no overflow.
        let deep = String(repeating: #"<span begin="999999999s">"#, count: 20_000) + "x"
        #expect(Self.cues(Self.document(#"<p begin="1s">"# + deep + "</p>")).map(\.begin) == [TTMLCues.latest])
    }

    @Test("what is not to be shown is not: display none (for all within), visibility hidden (unless made visible again), metadata (a description, the agent speaking); a time past any film is never, not from the parent's begin")
    func hidden() {
        let body = """
        <p begin="1s" end="2s">shown <span tts:display="none">gone <span tts:display="auto">still gone</span></span>shown</p>
        <p begin="2s" end="3s" tts:visibility="hidden">hidden <span tts:visibility="visible">back</span></p>
        <p begin="3s" end="4s"><metadata><ttm:desc xmlns:ttm="http://www.w3.org/ns/ttml#metadata">a description</ttm:desc></metadata>said</p>
        <p begin="4s" end="5s" tts:display="none">all gone</p>
        <p begin="10000000000000000000s">never</p>
        """
        let got = Self.cues(Self.document(body))
        #expect(got.map(\.text) == ["shown shown", "back", "said", "never"], "\(got)")
        #expect(got.last?.begin == TTMLCues.latest && got.last?.end == nil)
        #expect(TTMLCues.placed(got, sampleStart: 0, sampleEnd: 10_000).map(\.text) == ["shown shown", "back", "said"])
    }

    @Test("a document on the track's media clock whose zero an edit list or offset moved (ffmpeg's -output_ts_offset: the track's first sample at 10 s, its document timed from 0) is read from the track's start; ties go to the presentation clock")
    func mediaClock() {
        let cues = [Cue(begin: 100, end: 2_000, text: "a"), Cue(begin: 16_000, end: 17_950, text: "b")]
        #expect(TTMLCues.placed(cues, sampleStart: 10_000, sampleEnd: 27_950, trackStart: 10_000)
                == [Cue(begin: 10_100, end: 12_000, text: "a"), Cue(begin: 26_000, end: 27_950, text: "b")])
        // Written on the presentation clock, the same sample keeps its times.
        let absolute = [Cue(begin: 10_100, end: 12_000, text: "a"), Cue(begin: 26_000, end: 27_950, text: "b")]
        #expect(TTMLCues.placed(absolute, sampleStart: 10_000, sampleEnd: 27_950, trackStart: 10_000) == absolute)
    }

    @Test("bare ampersands, 100,000 of them in one paragraph, are text, read in one pass (each had searched the rest of the text for its semicolon: 40,000 took 32 s)")
    func bareAmpersands() {
        let got = Self.cues(Self.document(#"<p begin="1s" end="2s">"# + String(repeating: "& ", count: 100_000) + "&amp;</p>"))
        #expect(got.count == 1 && got.first?.text.filter { $0 == "&" }.count == 100_001)
    }

    @Test("a paragraph timing thousands of spans shows whole for its time rather than being read stretch by stretch (5,000 spans had made it quadratic)")
    func manyTimedSpans() {
        let spans = (0..<5_000).map { #"<span begin="\#($0)ms" end="\#($0 + 1)ms">w</span>"# }.joined()
        let got = Self.cues(Self.document(#"<p begin="1s" end="9s">"# + spans + "</p>"))
        #expect(got.count == 1 && got.first?.begin == 1000 && got.first?.end == 9000 && got.first?.text.count == 5_000)
    }

    @Test("the document is read in its encoding: UTF-16 by its byte order mark (or none), the encoding its declaration names (Latin-1 as Windows-1252), Windows-1252 when it names none and is not UTF-8; a UTF-8 byte order mark is dropped")
    func encodings() {
        let xml = Self.document(#"<p begin="1s" end="2s">Déjà vu — « café »</p>"#)
        let want = [Cue(begin: 1000, end: 2000, text: "Déjà vu — « café »")]
        let utf16 = Array(xml.utf16)
        let le = utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }, be = utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
        #expect(TTMLCues.read([0xFF, 0xFE] + le) == want)
        #expect(TTMLCues.read([0xFE, 0xFF] + be) == want)
        #expect(TTMLCues.read(be) == want)
        #expect(TTMLCues.read([0xEF, 0xBB, 0xBF] + Array(xml.utf8)) == want)
        // The same text in Windows-1252 (é E9, à E0, — 97, « AB, » BB), declared Latin-1, then undeclared.
        let western: [UInt8] = [0x44, 0xE9, 0x6A, 0xE0, 0x20, 0x76, 0x75, 0x20, 0x97, 0x20, 0xAB, 0x20, 0x63, 0x61, 0x66, 0xE9, 0x20, 0xBB]
        let body = Array(#"<tt xmlns="http://www.w3.org/ns/ttml"><body><p begin="1s" end="2s">"#.utf8) + western + Array("</p></body></tt>".utf8)
        #expect(TTMLCues.read(Array(#"<?xml version="1.0" encoding="ISO-8859-1"?>"#.utf8) + body) == want)
        #expect(TTMLCues.read(body) == want)
        // Named in single quotes, in another code page (Windows-1251: Cyrillic).
        let russian = Array(#"<?xml version='1.0' encoding='windows-1251'?><tt><body><p begin="1s" end="2s">"#.utf8)
            + [0xCF, 0xF0, 0xE8, 0xE2, 0xE5, 0xF2] + Array("</p></body></tt>".utf8)
        #expect(TTMLCues.read(russian).map(\.text) == ["Привет"])
    }

    @Test("a `<` that begins no tag is text, and an attribute whose quote is never closed ends at its tag's `>`: neither ends the document")
    func strayMarkup() {
        let body = #"<p begin="1s" end="2s">a < b, 1<2</p><p begin="2s" end="3s" title='it>next</p><p begin="3s" end="4s">last</p>"#
        #expect(Self.cues(Self.document(body)).map(\.text) == ["a < b, 1<2", "next", "last"])
    }

    @Test("elements of other vocabularies (a packager's notes, SMPTE's images, TTML's metadata) are not shown, nor are their attributes read as TTML's; a document that binds no namespace is read as TTML")
    func foreignVocabularies() {
        let body = """
        <p begin="1s" end="2s">said <x:note xmlns:x="urn:example:notes">not shown <span>nor this</span></x:note>aloud</p>
        <p begin="2s" end="3s" xmlns:x="urn:example:styles" x:fontStyle="italic" tts:fontWeight="bold">bold only</p>
        <p begin="3s" end="4s"><ttm:title xmlns:ttm="http://www.w3.org/ns/ttml#metadata">a title</ttm:title>text</p>
        <x:p xmlns:x="urn:example" begin="4s" end="5s">a foreign paragraph</x:p>
        """
        #expect(Self.cues(Self.document(body)).map(\.text) == ["said aloud", "{\\b1}bold only{\\b0}", "text"])
        #expect(Self.cues(#"<tt><body><p begin="1s" end="2s" tts:fontStyle="italic">bare</p></body></tt>"#).map(\.text) == ["{\\i1}bare{\\i0}"])
    }

    @Test("a region's styles (its own attributes, the styles it names, a style within it) style what is shown in it, beneath the element's own")
    func regionStyles() {
        let xml = """
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:tts="http://www.w3.org/ns/ttml#styling">
          <head><styling><style xml:id="b" tts:fontWeight="bold"/></styling>
            <layout><region xml:id="top" tts:fontStyle="italic"/><region xml:id="low" style="b"/>
              <region xml:id="under"><style tts:textDecoration="underline"/></region></layout></head>
          <body><div region="top"><p begin="1s" end="2s">in top</p></div>
            <p begin="2s" end="3s" region="low">in low</p>
            <p begin="3s" end="4s" region="under">in under</p>
            <p begin="4s" end="5s" region="top" tts:fontStyle="normal">upright</p>
            <p begin="5s" end="6s" region="nowhere">plain</p></body>
        </tt>
        """
        #expect(Self.cues(xml).map(\.text) == ["{\\i1}in top{\\i0}", "{\\b1}in low{\\b0}", "{\\u1}in under{\\u0}", "upright", "plain"])
    }

    @Test("a sequence (timeContainer seq): each child counts from the end of the one before; a child without a time lasts as long as what is timed within it, and a paragraph without one is not shown")
    func sequence() {
        let body = """
        <div timeContainer="seq" begin="10s">
          <p dur="2s">first</p>
          <p begin="1s" dur="2s">after a second's gap</p>
          <div><p dur="1s">in an untimed div</p><p begin="0.5s" end="1.5s">beside it</p></div>
          <p>no time: not shown</p>
          <p end="1s">last</p>
        </div>
        <p begin="1s" end="2s">outside</p>
        """
        let got = Self.cues(Self.document(body))
        #expect(got == [Cue(begin: 10_000, end: 12_000, text: "first"), Cue(begin: 13_000, end: 15_000, text: "after a second's gap"),
                        Cue(begin: 15_000, end: 16_000, text: "in an untimed div"), Cue(begin: 15_500, end: 16_500, text: "beside it"),
                        Cue(begin: 16_500, end: 17_500, text: "last"), Cue(begin: 1_000, end: 2_000, text: "outside")], "\(got)")
    }

    @Test("a document of pictures and no text (IMSC's image profile: a div's smpte:backgroundImage, IMSC 1.1's image) is told from one of text and from an empty one")
    func imageDocuments() {
        let smpte = """
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:smpte="http://www.smpte-ra.org/schemas/2052-1/2010/smpte-tt">
          <head><metadata><smpte:image xml:id="i1" imagetype="PNG" encoding="Base64">iVBORw0KGgo=</smpte:image></metadata></head>
          <body><div begin="1s" end="2s" smpte:backgroundImage="#i1"/></body></tt>
        """
        #expect(TTMLCues.shown(Array(smpte.utf8)) == .images)
        #expect(TTMLCues.read(Array(smpte.utf8)).isEmpty, "the image's Base64 is no text")
        #expect(TTMLCues.shown(Array(Self.document(##"<div begin="1s" end="2s"><image src="#i1"/></div>"##).utf8)) == .images)
        #expect(TTMLCues.shown(Array(Self.document(#"<p begin="1s" end="2s">words</p>"#).utf8)) == .text)
        #expect(TTMLCues.shown(Array(Self.document("").utf8)) == .nothing)
    }

    @Test("a sample's cues come in document order, which is the order TTML stacks them in on screen, not the order they start")
    func documentOrder() {
        let cues = [Cue(begin: 2_000, end: 5_000, text: "upper"), Cue(begin: 1_000, end: 4_000, text: "lower")]
        #expect(TTMLCues.placed(cues, sampleStart: 0, sampleEnd: 10_000) == cues)
    }

    @Test("end tags that close nothing are passed over without going over the open elements: 50,000 under 50,000 open spans (which took minutes) cost nothing; a hostile document's end tags go over each open element once")
    func unmatchedEndTags() {
        let spans = String(repeating: "<span>", count: 50_000)
        let doc = Self.document(#"<p begin="1s" end="2s">"# + spans + "x" + String(repeating: "</b>", count: 50_000) + "</p>")
        #expect(Self.cues(doc).map(\.text) == ["x"])
        #expect(TTMLCues.searchedElements(Array(doc.utf8)) <= 50_010)
    }
}
