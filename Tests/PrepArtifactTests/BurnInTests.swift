import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Forced bitmap subtitles (the lines spoken in another language, signs) painted into a
/// transcode's pictures, judged on the pictures ffmpeg decodes from the output.
@Suite("forced bitmap subtitles burnt in")
struct BurnInTests {
    /// Black 960x540 (16:9, as the canvas) for 5 s with a tone, and the shared PGS sample's one display set ("This
    /// is the first subtitle.", white on a 1280x720 canvas) from 2.02 s to 3.26 s: its
    /// subtitle track `forced`, in PGS or (converted by ffmpeg, with its end time) DVD pictures.
    /// `size` is the picture's: a rip cropped to 2.4:1 is 960x400 under the same canvas.
    /// `offset`: the whole file's times start that many seconds late (a recording's clock).
    static func source(codec: String, forced: Bool, size: String = "960x540", offset: Int = 0) throws -> String {
        try Media.generated("burn-\(codec)-\(forced ? "forced" : "plain")-eng-\(size)-at\(offset).mkv") { tmp in
            let pgs = try Media.generated("burn-pgs-base-eng-\(size).mkv", [
                "-f", "lavfi", "-i", "color=black:size=\(size):rate=24", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                "-itsoffset", "2", "-i", Media.shared("ax_sample_with_pgs_subtitles.mkv"),
                "-map", "0:v", "-map", "1:a", "-map", "2:s", "-t", "5", "-c:v", "libx264", "-preset", "ultrafast",
                "-c:a", "aac", "-c:s", "copy", "-metadata:s:a:0", "language=eng", "-metadata:s:s:0", "language=eng"])
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-fix_sub_duration", "-i", pgs, "-map", "0",
                                               "-c:v", "copy", "-c:a", "copy", "-c:s", codec == "pgs" ? "copy" : "dvdsub",
                                               "-disposition:s:0", forced ? "forced" : "0", "-output_ts_offset", String(offset), tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
    }

    /// The luma plane of the output's picture at `seconds`, as ffmpeg decodes it.
    static func luma(_ path: String, at seconds: Double, in dir: URL) throws -> (width: Int, height: Int, pixels: [UInt8]) {
        let raw = dir.appendingPathComponent("frame-\(seconds).gray").path
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-ss", String(seconds), "-i", path, "-frames:v", "1",
                                           "-f", "rawvideo", "-pix_fmt", "gray", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg cannot decode \(path) at \(seconds) s: \(r.stderr)") }
        let size = try Command.probedStreams(path).first { $0["type"] == .string("video") }
        let w = size?["width"]?.int ?? 0, h = size?["height"]?.int ?? 0
        let pixels = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        guard w > 0, pixels.count == w * h else { throw TestFailure("a \(w)x\(h) picture, \(pixels.count) bytes") }
        return (w, h, pixels)
    }

    /// The bounds (x0, y0, x1, y1) of the pixels brighter than `above`; nil when there are none.
    static func bright(_ p: (width: Int, height: Int, pixels: [UInt8]), above: UInt8) -> (Int, Int, Int, Int)? {
        var box: (Int, Int, Int, Int)?
        for y in 0..<p.height {
            for x in 0..<p.width where p.pixels[y * p.width + x] > above {
                box = box.map { (min($0.0, x), min($0.1, y), max($0.2, x), max($0.3, y)) } ?? (x, y, x, y)
            }
        }
        return box
    }

    @Test("a forced PGS or DVD track is painted into a transcode's pictures while it is on screen, where the disc puts it (also in a file whose times start at 10 s); an unforced one, whose display set is not flagged forced, is not", arguments: [
        ("pgs", true, 0), ("dvd", true, 0), ("pgs", true, 10), ("pgs", false, 0),
    ])
    func forcedSubtitlesBurnt(_ codec: String, _ forced: Bool, _ offset: Int) throws {
        let source = try Self.source(codec: codec, forced: forced, offset: offset)
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "burn-\(codec)") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            let json = try Command.json(run)
            let plan = json["plan"]
            // 2.02 s to 3.26 s at 24 fps: 30 pictures painted.
            // The unforced track is the sound's full one: burnt for its forced display sets,
            // of which it has none.
            let painted = json["stats"]?["burned_subtitles"]?["pictures"]?.int
            #expect(painted == (forced ? 30 : 0), "\(String(describing: json["stats"]?["burned_subtitles"]))")
            guard case .array(let subtitles)? = plan?["subtitles"] else { throw TestFailure("the plan lists no subtitles") }
            #expect(subtitles.map { $0["action"] } == [.string("burn")])
            #expect(subtitles.map { $0["forced_only"] } == [forced ? nil : .bool(true)])
            // Painted in, not a track of its own: the MP4 has pictures and sound only.
            #expect(try Command.probedStreams(out).map { $0["type"]?.string ?? "" } == ["video", "audio"])
            let dir = URL(fileURLWithPath: out).deletingLastPathComponent()
            for t in [1.0, 4.2] {
                let lit = Self.bright(try Self.luma(out, at: t, in: dir), above: 40)
                #expect(lit == nil, "nothing is on screen at \(t) s")
            }
            let during = try Self.luma(out, at: 2.6, in: dir)
            let box = Self.bright(during, above: 150)
            guard forced else {
                #expect(box == nil, "an unforced bitmap track is not painted")
                return
            }
            let (x0, y0, x1, y1) = try #require(box, "the subtitle is on screen at 2.6 s")
            // The disc's canvas (1280x720) stands for the whole picture: its line, centred
            // low on the canvas, is centred low in the 854x480 output.
            let w = Double(during.width), h = Double(during.height)
            #expect(abs(Double(x0 + x1) / 2 - w / 2) < w * 0.03, "centred: \(x0)…\(x1) of \(during.width)")
            #expect(Double(y0) > h * 0.8 && Double(y1) < h * 0.98, "low in the picture: \(y0)…\(y1) of \(during.height)")
            #expect(Double(x1 - x0) > w * 0.45 && Double(x1 - x0) < w * 0.75, "as wide as on the canvas: \(x1 - x0)")
        }
    }

    @Test("a disc's canvas over a picture cropped to another shape (a 2.4:1 rip of a 16:9 disc) is fitted at one scale: its letters keep their shape and its line stays in the picture")
    func canvasFittedToCroppedPicture() throws {
        var boxes: [(width: Double, height: Double)] = []
        for size in ["960x540", "960x400"] {
            try Command.prepare(try Self.source(codec: "pgs", forced: true, size: size), quality: "1mbps", caps: "ios", scratch: "burn-fit") { run, out in
                #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
                let picture = try Self.luma(out, at: 2.6, in: URL(fileURLWithPath: out).deletingLastPathComponent())
                let box = Self.bright(picture, above: 150)
                let (x0, y0, x1, y1) = try #require(box, "the subtitle is on screen in the \(size) picture")
                #expect(y0 > picture.height / 2 && y1 < picture.height - 2, "low in the picture and inside it: \(y0)…\(y1) of \(picture.height)")
                boxes.append((Double(x1 - x0), Double(y1 - y0)))
            }
        }
        try #require(boxes.count == 2)
        // Stretched to the cropped picture the line would be 1.35 times as wide for its height.
        let shape = (boxes[1].width / boxes[1].height) / (boxes[0].width / boxes[0].height)
        #expect(shape > 0.85 && shape < 1.15, "the line's width over height in the cropped picture over the 16:9 one's: \(shape)")
        #expect(boxes[1].width < boxes[0].width * 0.85, "smaller in the cropped picture: \(boxes)")
    }

    /// A full subtitle track as discs make them: the shared sample's display set twice, at
    /// 1.0 s to 1.8 s not flagged forced, at 2.5 s to 3.5 s flagged forced (its composition
    /// object's forced-on-screen bit), over black 960x540 with a tone, English, in PGS or
    /// (converted by ffmpeg, which keeps the flag as a forced-start command) DVD pictures.
    static func fullTrackWithForcedLines(codec: String) throws -> String {
        try Media.generated("burn-full-\(codec)-forced-lines.mkv") { tmp in
            let sup = try Media.generated("burn-full-forced-lines.sup") { sup in
                let base = try Media.generated("burn-sample.sup", ["-i", Media.shared("ax_sample_with_pgs_subtitles.mkv"), "-map", "0:s",
                                                                   "-c", "copy", "-f", "sup"])
                let segments = try PGS.segments(Data(contentsOf: URL(fileURLWithPath: base)))
                // The sample: its display set (PCS, window, palette, object, end), then a clear.
                let show = Array(segments.prefix(5)), clear = Array(segments.dropFirst(5))
                guard show.first?.type == 0x16, clear.first?.type == 0x16 else { throw TestFailure("the sample's PGS is not a set and a clear") }
                var out = Data()
                for (group, at, forced) in [(show, 0.0, false), (clear, 0.8, false), (show, 1.5, true), (clear, 2.5, false)] {
                    for segment in group { out += segment.moved(to: at, forced: forced) }
                }
                try out.write(to: URL(fileURLWithPath: sup))
            }
            let pgs = try Media.generated("burn-full-pgs-base.mkv", [
                "-f", "lavfi", "-i", "color=black:size=960x540:rate=24", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                "-itsoffset", "1", "-i", sup, "-map", "0:v", "-map", "1:a", "-map", "2:s", "-t", "5", "-c:v", "libx264", "-preset", "ultrafast",
                "-c:a", "aac", "-c:s", "copy", "-metadata:s:a:0", "language=eng", "-metadata:s:s:0", "language=eng"])
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-fix_sub_duration", "-i", pgs, "-map", "0",
                                               "-c:v", "copy", "-c:a", "copy", "-c:s", codec == "pgs" ? "copy" : "dvdsub", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
    }

    @Test("a full PGS or DVD track (no forced track beside it) is burnt in for the display sets the disc flags forced, and only those", arguments: ["pgs", "dvd"])
    func forcedDisplaySetsOfFullTrack(_ codec: String) throws {
        try Command.prepare(try Self.fullTrackWithForcedLines(codec: codec), quality: "1mbps", caps: "ios", scratch: "burn-full-\(codec)") { run, out in
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            let json = try Command.json(run)
            guard case .array(let subtitles)? = json["plan"]?["subtitles"] else { throw TestFailure("the plan lists no subtitles") }
            #expect(subtitles.map { $0["action"] } == [.string("burn")])
            #expect(subtitles.map { $0["forced_only"] } == [.bool(true)])
            // 2.5 s to 3.5 s at 24 fps: 24 pictures; none of the unforced set's 19.
            let painted = json["stats"]?["burned_subtitles"]?["pictures"]?.int
            #expect(painted == 24, "\(String(describing: json["stats"]?["burned_subtitles"]))")
            let dir = URL(fileURLWithPath: out).deletingLastPathComponent()
            let unforced = Self.bright(try Self.luma(out, at: 1.4, in: dir), above: 40)
            #expect(unforced == nil, "the unforced display set is not painted")
            let forced = Self.bright(try Self.luma(out, at: 3.0, in: dir), above: 150)
            #expect(forced != nil, "the forced display set is on screen at 3.0 s")
            let after = Self.bright(try Self.luma(out, at: 4.0, in: dir), above: 40)
            #expect(after == nil, "nothing is on screen after the forced set ends")
        }
    }
}

/// Presentation Graphic Stream segments as a .sup file holds them ("PG", PTS, DTS, type, size).
enum PGS {
    struct Segment {
        var type: UInt8
        var payload: Data
        /// The segment at `seconds`; a composition's objects flagged forced or not (its
        /// number kept distinct by the time, as a disc's increase).
        func moved(to seconds: Double, forced: Bool) -> Data {
            var p = payload
            if type == 0x16, p.count >= 7 {
                let number = UInt16(seconds * 10)
                p[p.startIndex + 5] = UInt8(number >> 8); p[p.startIndex + 6] = UInt8(number & 0xff)
                // Each composition object: id (2), window (1), flags (0x40 forced on screen), x, y.
                var o = 11
                while p.count >= o + 8 {
                    let flags = p[p.startIndex + o + 3]
                    p[p.startIndex + o + 3] = forced ? flags | 0x40 : flags & ~0x40
                    o += flags & 0x80 != 0 ? 16 : 8
                }
            }
            let pts = UInt32(seconds * 90000)
            var d = Data("PG".utf8)
            for shift in stride(from: 24, through: 0, by: -8) { d.append(UInt8((pts >> UInt32(shift)) & 0xff)) }
            d += Data(repeating: 0, count: 4)
            d.append(type)
            d.append(UInt8(p.count >> 8)); d.append(UInt8(p.count & 0xff))
            return d + p
        }
    }

    static func segments(_ data: Data) throws -> [Segment] {
        let b = [UInt8](data)
        var out: [Segment] = []
        var i = 0
        while i + 13 <= b.count {
            guard b[i] == 0x50, b[i + 1] == 0x47 else { throw TestFailure("not a .sup segment at byte \(i)") }
            let size = Int(b[i + 11]) << 8 | Int(b[i + 12])
            guard i + 13 + size <= b.count else { throw TestFailure("a .sup segment past the end") }
            out.append(Segment(type: b[i + 10], payload: Data(b[(i + 13)..<(i + 13 + size)])))
            i += 13 + size
        }
        return out
    }
}
