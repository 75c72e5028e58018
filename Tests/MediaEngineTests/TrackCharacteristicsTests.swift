import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("track roles Apple's players read (tagc)")
struct TrackCharacteristicsTests {
    /// A film with three English text tracks (plain, forced, for the deaf and hard of
    /// hearing) and an audio-description sound track.
    static func film() throws -> String {
        try Media.generated("roles-three-subtitles.mkv") { tmp in
            let dir = Media.scratch("roles-srt")
            defer { try? FileManager.default.removeItem(at: dir) }
            let srt = dir.appendingPathComponent("cue.srt").path
            try "1\n00:00:00,500 --> 00:00:01,500\n[door creaks] Who is there?\n\n".write(toFile: srt, atomically: true, encoding: .utf8)
            var args = ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=2",
                        "-f", "lavfi", "-i", "sine=duration=2", "-i", srt, "-i", srt, "-i", srt,
                        "-map", "0", "-map", "1", "-map", "2", "-map", "3", "-map", "4",
                        "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-c:s", "srt",
                        "-disposition:a:0", "visual_impaired+descriptions",
                        "-disposition:s:0", "0", "-disposition:s:1", "forced", "-disposition:s:2", "hearing_impaired"]
            for k in 0..<3 { args += ["-metadata:s:s:\(k)", "language=eng"] }
            let r = try Run.command("ffmpeg", args + [tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg could not make the film: \(r.stderr)") }
        }
    }

    /// Each track's handler type and the characteristics its `tagc` boxes state, in track order.
    static func roles(_ path: String) throws -> [(handler: String, tags: [String])] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard let moov = try FastStart.children(bytes[...]).first(where: { $0.type == "moov" }) else {
            throw TestFailure("\(path) has no index")
        }
        func child(_ type: String, in range: Range<Int>) throws -> FastStart.Child? {
            try FastStart.children(bytes[range]).first { $0.type == type }
        }
        return try FastStart.children(bytes[moov.body]).filter { $0.type == "trak" }.map { trak in
            let hdlr = try child("mdia", in: trak.body).flatMap { try child("hdlr", in: $0.body) }
            let handler = hdlr.map { String(decoding: bytes[($0.body.lowerBound + 8)..<($0.body.lowerBound + 12)], as: UTF8.self) } ?? ""
            let tags = try child("udta", in: trak.body).map { udta in
                try FastStart.children(bytes[udta.body]).filter { $0.type == "tagc" }.map { String(decoding: bytes[$0.body], as: UTF8.self) }
            } ?? []
            return (handler, tags)
        }
    }

    @Test("an SDH track says it transcribes dialog and describes sound, a forced one that it is forced only, with or without the forecast",
          arguments: [false, true])
    func subtitleRoles(forecast: Bool) throws {
        let source = try Self.film()
        let opened = try Prober.open(path: source, secondReaderFrom: forecast ? .always : nil)
        let plan = try #require(EnginePlans.remux(opened.info))
        #expect(plan.subtitles.map(\.action) == [.convert, .convert, .convert])
        let dir = Media.scratch("roles")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: opened, plan: plan, output: out, forecastFrom: forecast ? .always : .standard,
                                          awaitForecast: true)
        // The forecast's head is the real one, characteristics and all, or the digest would be made afterwards.
        #expect(result.stats.hashedWhileWriting == forecast)
        #expect(result.output.sha256 == String(try Run.command("sha256sum", [out]).stdout.prefix(64)))

        let roles = try Self.roles(out)
        #expect(roles.map(\.handler) == ["vide", "soun", "sbtl", "sbtl", "sbtl"])
        #expect(roles.map(\.tags) == [[], [TrackCharacteristics.describesVideo], [], [TrackCharacteristics.forcedOnly],
                                      [TrackCharacteristics.transcribesSpokenDialog, TrackCharacteristics.describesMusicAndSound]])
        // The MPEG roles stay for everyone else's players.
        let probe = try Run.command("ffprobe", ["-v", "error", "-show_entries", "stream=codec_type:stream_disposition=forced,hearing_impaired,visual_impaired",
                                               "-of", "csv=p=0", out])
        #expect(probe.stdout.split(separator: "\n") == ["video,0,0,0", "audio,0,0,1", "subtitle,0,0,0", "subtitle,1,0,0", "subtitle,0,1,0"])
        #expect(try Run.command("ffmpeg", ["-v", "error", "-i", out, "-map", "0:v", "-map", "0:a", "-f", "null", "-"]).stderr.isEmpty)
    }

    @Test("roles are stated once: tagging a tagged index changes nothing; an index without roles is left as it is")
    func idempotent() throws {
        let kind = FastStart.box("kind", [0, 0, 0, 0] + Array("\(TrackCharacteristics.dashRoles)\u{0}caption\u{0}".utf8))
        let hdlr = FastStart.box("hdlr", [0, 0, 0, 0, 0, 0, 0, 0] + Array("sbtl".utf8) + [UInt8](repeating: 0, count: 13))
        let trak = FastStart.box("trak", FastStart.box("mdia", hdlr) + FastStart.box("udta", kind))
        let moov = FastStart.box("moov", FastStart.box("mvhd", [UInt8](repeating: 0, count: 100)) + trak)
        let once = try TrackCharacteristics.tagged(moov: moov)
        #expect(once.count == moov.count + 2 * 8 + TrackCharacteristics.transcribesSpokenDialog.utf8.count
                + TrackCharacteristics.describesMusicAndSound.utf8.count)
        #expect(try TrackCharacteristics.tagged(moov: once) == once)
        // A role that says nothing to Apple's players about a subtitle track (a dub) adds nothing.
        let dub = FastStart.box("kind", [0, 0, 0, 0] + Array("\(TrackCharacteristics.dashRoles)\u{0}dub\u{0}".utf8))
        let plain = FastStart.box("moov", FastStart.box("trak", FastStart.box("mdia", hdlr) + FastStart.box("udta", dub)))
        #expect(try TrackCharacteristics.tagged(moov: plain) == plain)
    }
}
