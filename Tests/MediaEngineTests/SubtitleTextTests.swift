import Foundation
import Testing
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

    @Test("ASS drawings are left out; positioned signs, karaoke and styles stay")
    func drawings() {
        let head = "3,0,Default,,0,0,0,,"
        #expect(AssEvent.readable(head + "{\\p1}m 0 0 l 100 0 100 100 0 100{\\p0}") == nil)
        #expect(AssEvent.readable(head + "{\\an8\\p2}m 0 0 l 10 0{\\p0}Sign text") == head + "{\\an8\\p2}{\\p0}Sign text")
        #expect(AssEvent.readable(head + "{\\pos(320,50)\\pbo5}SIGN") == head + "{\\pos(320,50)\\pbo5}SIGN")
        #expect(AssEvent.readable(head + "{\\k20}ka{\\k20}ra") == head + "{\\k20}ka{\\k20}ra")
        #expect(AssEvent.readable(head + "Hello, world\\Nline two") == head + "Hello, world\\Nline two")
        #expect(AssEvent.readable(head + "{\\i1}\\N \\h{\\i0}") == nil)
        #expect(AssEvent.readable("not an event") == nil)
        #expect(AssEvent.stacked(["a", "b", "c"]) == ["a\\N", "b\\N", "c"])
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
    }
}
