import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// The result's `output.dropped`: every source stream the download does not carry, with
/// why, so a user who finds the French sound, the second angle or the subtitles missing
/// offline can learn it from the answer.
@Suite("what a download leaves out is said")
struct DroppedStreamsTests {
    struct Left: Equatable, CustomStringConvertible {
        var index: Int, type: String, reason: String, language: String?
        var description: String { "#\(index) \(type) \(reason) \(language ?? "-")" }
    }

    static func dropped(_ json: JSONValue) -> [Left] {
        guard case .array(let items)? = json["output"]?["dropped"] else { return [] }
        return items.map {
            Left(index: $0["source_index"]?.int ?? -1, type: $0["type"]?.string ?? "", reason: $0["reason"]?.string ?? "",
                 language: $0["language"]?.string)
        }
    }

    /// A film with an English and a French sound (English the default) and a font attached.
    static func twoLanguages() throws -> String {
        try Media.generated("dropped-two-languages-font.mkv") { tmp in
            let font = tmp + ".ttf"
            defer { unlink(font) }
            try Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: URL(fileURLWithPath: font))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                               "-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-f", "lavfi", "-i", "sine=frequency=660:duration=3",
                                               "-map", "0:v", "-map", "1:a", "-map", "2:a", "-c:v", "libx264", "-preset", "ultrafast",
                                               "-c:a:0", "aac", "-c:a:1", "ac3", "-metadata:s:a:0", "language=eng", "-metadata:s:a:1", "language=fre",
                                               "-disposition:a:0", "default", "-disposition:a:1", "0",
                                               "-attach", font, "-metadata:s:t", "mimetype=application/x-truetype-font", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
    }

    @Test("the sound not chosen is listed with its language, in MP4's code (the French when the English goes, the English when French is asked for), beside the attached font; the output carries the one chosen (nothing said of the other sound before)")
    func otherLanguage() throws {
        let source = try Self.twoLanguages()
        for (language, kept, left) in [(nil, "eng", Left(index: 2, type: "audio", reason: "audio_track_not_chosen", language: "fra")),
                                       ("fre", "fra", Left(index: 1, type: "audio", reason: "audio_track_not_chosen", language: "eng"))] {
            let dir = Media.scratch("dropped-language")
            defer { try? FileManager.default.removeItem(at: dir) }
            let out = dir.appendingPathComponent("out.mp4").path
            let r = try Command.run(["prepare", source, "--quality", "1mbps", "--caps", "ios", "--output", out, "--json"]
                                    + (language.map { ["--audio-language", $0] } ?? []))
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(Self.dropped(json) == [left, Left(index: 3, type: "attachment", reason: "attachment_unsupported", language: nil)],
                    "\(Self.dropped(json))")
            let sounds = try FFprobe(out).streams("audio")
            #expect(sounds.count == 1 && sounds.first?["tags"]?["language"]?.string == kept, "\(sounds)")
            let human = try Command.run(["prepare", source, "--quality", "1mbps", "--caps", "ios", "--output", dir.appendingPathComponent("h.mp4").path]
                                        + (language.map { ["--audio-language", $0] } ?? []))
            #expect(human.stdout.contains("dropped #\(left.index) audio \(left.index == 2 ? "ac3" : "aac") [\(left.language ?? "")]: audio_track_not_chosen"),
                    "\(human.stdout)")
        }
    }

    @Test("a WebM with two pictures and two sounds: the Theora angle and the PCM sound are listed as not chosen, the SRT (converted) is not (only what MP4 cannot carry was listed)")
    func secondAngleAndSound() throws {
        try Command.prepare(Media.shared("sp_bear-320x240-multitrack.webm"), quality: "5mbps", caps: "ios", scratch: "dropped-angle") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(Self.dropped(json) == [Left(index: 3, type: "video", reason: "video_track_not_chosen", language: nil),
                                           Left(index: 4, type: "audio", reason: "audio_track_not_chosen", language: nil)], "\(Self.dropped(json))")
            let probed = try FFprobe(out)
            #expect(probed.streams("video").count == 1 && probed.streams("audio").count == 1 && probed.streams("subtitle").count == 1)
        }
    }

    @Test("a bitmap subtitle track is listed with its language and `subtitle_bitmap`; a file sent as it is lists nothing, as it carries everything")
    func bitmapSubtitles() throws {
        let source = Media.shared("ax_sample_with_pgs_subtitles.mkv")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "dropped-pgs") { r, _ in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(Self.dropped(json) == [Left(index: 2, type: "subtitle", reason: "subtitle_bitmap", language: "eng")], "\(Self.dropped(json))")
        }
        let asIs = try Media.generated("dropped-as-is-two-sounds.mp4", ["-i", try Self.twoLanguages(), "-map", "0:v", "-map", "0:a", "-c", "copy"])
        try Command.prepare(asIs, quality: "original", caps: "ios", scratch: "dropped-as-is") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["delivery_format"]?.string == "original")
            #expect(Self.dropped(json) == [])
            #expect(try FFprobe(out).streams("audio").count == 2)
        }
    }

    @Test("a data stream is listed with its language too (a QuickTime timecode track, English to the probe)")
    func dataWithLanguage() throws {
        let source = try Media.generated("dropped-timecode-3mbps.mov", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3",
                                                                        "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "3M", "-timecode", "01:00:00:00"])
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "dropped-timecode") { r, _ in
            #expect(r.status == 0, "\(r.stdout.suffix(300)) \(r.stderr.suffix(300))")
            let left = Self.dropped(try Command.json(r))
            #expect(left.contains { $0.type == "data" && $0.reason == "data_stream_unsupported" && $0.language == "eng" }, "\(left)")
        }
    }
}
