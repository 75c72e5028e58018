import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// TTML subtitles in MP4 (`stpp`: IMSC and EBU-TT-D from broadcasters' and streaming
/// services' packagers), which libavformat 5.1 reads as data and libavcodec cannot decode.
@Suite("TTML subtitles in MP4")
struct TTMLSubtitleTests {
    /// A 10 s MP4 (3 Mbit/s H.264, AAC) whose French TTML track's one sample (0 to 9 s) is
    /// `document`: ffmpeg writes the track from a SubRip file, and its document is then
    /// replaced, byte for byte, by `document` padded with spaces (ffmpeg writes TTML from
    /// plain cues only, without styles or nested times).
    static func source(_ name: String, document: String, lastEnd: Int = 9000, title: String? = nil) throws -> String {
        try Media.generated(name) { tmp in
            let srt = tmp + ".srt"
            defer { unlink(srt) }
            // Room for the document: 60 cues of filler, the last ending at 9 s.
            let cues = (0..<60).map { i in
                let ms = 100 + i * 148
                func clock(_ t: Int) -> String { String(format: "00:00:%02d,%03d", t / 1000, t % 1000) }
                return "\(i + 1)\n\(clock(ms)) --> \(clock(i == 59 ? lastEnd : ms + 100))\nfiller text to make room for the document \(i)\n"
            }
            try Data(cues.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: srt))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=duration=10", "-i", srt, "-map", "0", "-map", "1", "-map", "2",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-c:a", "aac", "-c:s", "ttml",
                                               "-metadata:s:s:0", "language=fre"] + (title.map { ["-metadata:s:s:0", "handler_name=\($0)"] } ?? [])
                                               + ["-f", "mp4", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tmp)))
            let start = Array("<?xml".utf8), end = Array("</tt>".utf8)
            guard let from = (0..<(bytes.count - start.count)).first(where: { bytes[$0..<($0 + start.count)].elementsEqual(start) }),
                  let to = (from..<(bytes.count - end.count)).first(where: { bytes[$0..<($0 + end.count)].elementsEqual(end) }).map({ $0 + end.count })
            else { throw TestFailure("no TTML document in the file ffmpeg wrote") }
            let mine = Array(document.utf8)
            guard mine.count <= to - from else { throw TestFailure("the document is longer than the room (\(to - from) bytes)") }
            bytes.replaceSubrange(from..<to, with: mine + [UInt8](repeating: 0x20, count: to - from - mine.count))
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    static let document = """
    <?xml version="1.0" encoding="UTF-8"?>
    <tt xmlns="http://www.w3.org/ns/ttml" xmlns:tts="http://www.w3.org/ns/ttml#styling"
        xmlns:ttp="http://www.w3.org/ns/ttml#parameter" ttp:tickRate="10000000" xml:lang="fr">
      <head><styling><style xml:id="s1" tts:fontStyle="italic"/></styling></head>
      <body>
        <div>
          <p begin="10000000t" end="25000000t">Bonjour <span style="s1">là</span></p>
          <p begin="00:00:03.000" end="00:00:04.000">ligne un<br/>ligne deux &amp; trois</p>
        </div>
        <div begin="5s">
          <p begin="0.5s" end="1.5s">dans un div</p>
        </div>
        <div><p begin="8s" end="12s">coupé à la fin de l'échantillon</p></div>
      </body>
    </tt>
    """

    @Test("a TTML track becomes mov_text: each paragraph at its time (ticks, clock times, a div's offset), lines, entities and italics kept, the language kept, a cue cut where its sample ends; nothing dropped (the track was dropped as data)")
    func converted() throws {
        let source = try Self.source("ttml-styled-10s.mp4", document: Self.document)
        let streams = try Command.probedStreams(source)
        #expect(streams.contains { $0["codec"]?.string == "ttml" && $0["type"]?.string == "subtitle" }, "\(streams)")
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "ttml-converted") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect("\(json["plan"]?["subtitles"] ?? .null)".contains("mov_text"))
            #expect(DroppedStreamsTests.dropped(json).isEmpty, "\(DroppedStreamsTests.dropped(json))")
            let cues = try Command.cues(out)
            let expected: [(Double, Double, String)] = [(1, 2.5, "Bonjour là"), (3, 4, "ligne un ligne deux & trois"), (5.5, 6.5, "dans un div"),
                                                        (8, 9, "coupé à la fin de l'échantillon")]
            #expect(cues.count == expected.count, "\(cues)")
            for (got, want) in zip(cues, expected) {
                #expect(abs(got.start - want.0) < 0.002 && abs(got.end - want.1) < 0.002 && got.text == want.2, "\(got) against \(want)")
            }
            let srt = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:0", "-f", "srt", "-"]).stdout
            #expect(srt.contains("Bonjour <i>là</i>"), "\(srt)")
            let track = try FFprobe(out).streams("subtitle")
            #expect(track.count == 1 && track.first?["codec_name"]?.string == "mov_text" && track.first?["tags"]?["language"]?.string == "fra")
        }
    }

    @Test("a TTML track that outlasts the film (its sample runs 4 s past the pictures): the film keeps its length and no cue goes on past the pictures and sound; the track's name is its handler name, as other subtitles' (the name was lost: the track was taken for data)")
    func pastTheFilm() throws {
        let source = try Self.source("ttml-past-film-10s.mp4", document: """
        <?xml version="1.0"?><tt xmlns="http://www.w3.org/ns/ttml"><body><div>
        <p begin="00:00:02.000" end="00:00:03.000">deux</p><p begin="00:00:09.000" end="00:00:13.000">neuf</p>
        </div></body></tt>
        """, lastEnd: 14_000, title: "Français")
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "ttml-past-film") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let cues = try Command.cues(out)
            #expect(cues.map(\.text) == ["deux", "neuf"], "\(cues)")
            #expect((cues.last?.end ?? 99) <= 10.05, "\(cues)")
            let probed = try FFprobe(out)
            #expect(abs(probed.formatDuration - 10) < 0.2, "\(probed.formatDuration)")
            #expect(probed.streams("subtitle").first?["tags"]?["handler_name"]?.string == "Français", "\(probed.streams("subtitle"))")
        }
    }

    @Test("overlapping TTML paragraphs are stacked in document order, as TTML flows them into their region: the first paragraph is above one that began before it")
    func documentOrder() throws {
        let source = try Self.source("ttml-document-order-10s.mp4", document: """
        <?xml version="1.0"?><tt xmlns="http://www.w3.org/ns/ttml"><body><div>
        <p begin="2s" end="5s">upper</p><p begin="1s" end="4s">lower</p>
        </div></body></tt>
        """)
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "ttml-document-order") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let cues = try Command.cues(out)
            #expect(cues.map(\.text) == ["lower", "upper lower", "upper"], "\(cues)")
        }
    }

    @Test("a TTML track of pictures (IMSC's image profile: divs showing smpte:backgroundImage) is left out as a picture subtitle and said so in dropped; it had become an empty text track")
    func imageProfile() throws {
        let source = try Self.source("ttml-image-profile-10s.mp4", document: """
        <?xml version="1.0" encoding="UTF-8"?>
        <tt xmlns="http://www.w3.org/ns/ttml" xmlns:smpte="http://www.smpte-ra.org/schemas/2052-1/2010/smpte-tt"
            xmlns:ttp="http://www.w3.org/ns/ttml#parameter" ttp:profile="http://www.w3.org/ns/ttml/profile/imsc1/image">
          <head><metadata><smpte:image xml:id="i1" imagetype="PNG" encoding="Base64">iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==</smpte:image></metadata></head>
          <body><div begin="1s" end="3s" smpte:backgroundImage="#i1"/></body>
        </tt>
        """)
        let streams = try Command.probedStreams(source)
        #expect(streams.contains { $0["codec"]?.string == "ttml" && $0["text_subtitle"] == .bool(false) }, "\(streams)")
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "ttml-image-profile") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(DroppedStreamsTests.dropped(json).map(\.reason) == ["subtitle_bitmap"], "\(DroppedStreamsTests.dropped(json))")
            #expect(try FFprobe(out).streams("subtitle").isEmpty)
        }
    }
}
