import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A fragmented MP4 holding several recordings after one header: a capture appended to an
/// earlier one, segments of two sessions downloaded into one file. The second recording's
/// fragments start their times again (at 0, or wherever its writer began).
@Suite("recordings appended after one header")
struct AppendedRecordingsTests {
    /// How a recording's fragments are laid: ffmpeg's `frag_keyframe+empty_moov` with
    /// `default_base_moof` (data found from its own moof), without it (`placed`: data
    /// placed by an offset in the file), DASH's (a moof a track, a sidx a track at the
    /// start), an HLS download (an init segment, then 1 s segments, each with a sidx), or
    /// ffmpeg's `frag_keyframe` alone (`inHeader`: the first fragment's samples in the moov).
    enum Layout: String {
        case fmp4, placed, dash, hls, inHeader
    }

    /// Recording `k` (each its own pictures and tone) of `seconds`, with sound or not, at
    /// 1.5 Mbit/s (above the 1 Mbit/s rung), laid out as `layout`: its header (ftyp, moov)
    /// and its fragments (moof and mdat, and the styp and sidx before them), as bytes.
    static func recording(_ k: Int, seconds: Int, audio: Bool, layout: Layout) throws -> (head: [UInt8], fragments: [[UInt8]]) {
        let pattern = ["testsrc2", "testsrc", "smptebars"][k % 3], tone = [440, 880, 660][k % 3]
        let dir = Media.scratch("appended-\(layout)-\(k)-\(seconds)-\(audio)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var args = ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "\(pattern)=size=320x240:rate=25:duration=\(seconds)"]
        if audio { args += ["-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=48000:duration=\(seconds)", "-c:a", "aac"] }
        args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast", "-g", "25", "-qp", "8"]
        let file = dir.appendingPathComponent("r.mp4").path
        switch layout {
        case .fmp4: args += ["-movflags", "frag_keyframe+empty_moov+default_base_moof", file]
        case .placed: args += ["-movflags", "frag_keyframe+empty_moov", file]
        case .inHeader: args += ["-movflags", "frag_keyframe+default_base_moof", file]
        case .dash: args += ["-movflags", "dash+separate_moof+global_sidx", file]
        case .hls:
            args += ["-f", "hls", "-hls_segment_type", "fmp4", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_fmp4_init_filename", "init.mp4",
                     "-hls_segment_filename", dir.appendingPathComponent("s%d.m4s").path, dir.appendingPathComponent("p.m3u8").path]
        }
        let r = try Run.command("ffmpeg", args)
        guard r.status == 0 else { throw TestFailure(r.stderr) }
        if layout == .hls {
            let head = [UInt8](try Data(contentsOf: dir.appendingPathComponent("init.mp4")))
            var segments: [[UInt8]] = []
            while let s = try? Data(contentsOf: dir.appendingPathComponent("s\(segments.count).m4s")) { segments.append([UInt8](s)) }
            return (head, segments)
        }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        var head: [UInt8] = [], fragments: [[UInt8]] = [], before: [UInt8] = []
        for box in FragmentOrderTests.boxes(bytes, 0..<bytes.count) {
            switch box.type {
            case "styp", "sidx": before += bytes[box.range]
            case "moof": fragments.append(before + bytes[box.range]); before = []
            case "mdat" where !fragments.isEmpty: fragments[fragments.count - 1] += bytes[box.range]
            case "mfra": break  // its offsets are where ffmpeg laid the fragments
            default: head += bytes[box.range]
            }
        }
        return (head, fragments)
    }

    /// The recordings of `seconds` laid after the first one's header, each moved to begin
    /// `starts` seconds in (its tracks' `tfdt`s; nil: where ffmpeg began it, at 0); the
    /// fragments' offsets in the file (`placed`) left as their writer gave them, or moved
    /// with them (`movedOffsets`); each recording's fragments laid in the order `orders`
    /// gives (indices into its fragments; nil: as written).
    static func appended(_ name: String, seconds: [Int], audio: Bool = true, layout: Layout, starts: [Double]? = nil,
                         movedOffsets: Bool = false, orders: [[Int]]? = nil) throws -> String {
        try Media.generated("appended-\(name).mp4") { tmp in
            var out: [UInt8] = []
            for (k, length) in seconds.enumerated() {
                let r = try recording(k, seconds: length, audio: audio, layout: layout)
                if k == 0 { out = r.head }
                let scales = timescales(r.head)
                var at = r.head.count  // where the fragment lay in its own file
                for var fragment in orders.map({ $0[k].map { r.fragments[$0] } }) ?? r.fragments {
                    if let starts { moveTimes(&fragment, by: starts[k], timescales: scales) }
                    if movedOffsets { FragmentOrderTests.moveData(&fragment, by: out.count - at) }
                    at += fragment.count
                    out += fragment
                }
            }
            try Data(out).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// Each track's timescale (`mdhd`), by track ID, from a header's bytes.
    static func timescales(_ head: [UInt8]) -> [UInt32: UInt64] {
        func be(_ at: Int, _ n: Int) -> UInt64 { head[at..<at + n].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } }
        var found: [UInt32: UInt64] = [:]
        let boxes = FragmentOrderTests.boxes
        guard let moov = boxes(head, 0..<head.count).first(where: { $0.type == "moov" }) else { return found }
        for trak in boxes(head, moov.range.lowerBound + 8..<moov.range.upperBound) where trak.type == "trak" {
            let inner = boxes(head, trak.range.lowerBound + 8..<trak.range.upperBound)
            guard let tkhd = inner.first(where: { $0.type == "tkhd" }), let mdia = inner.first(where: { $0.type == "mdia" }),
                  let mdhd = boxes(head, mdia.range.lowerBound + 8..<mdia.range.upperBound).first(where: { $0.type == "mdhd" }) else { continue }
            let v1 = head[tkhd.range.lowerBound + 8] == 1, m1 = head[mdhd.range.lowerBound + 8] == 1
            found[UInt32(be(tkhd.range.lowerBound + (v1 ? 28 : 20), 4))] = be(mdhd.range.lowerBound + (m1 ? 28 : 20), 4)
        }
        return found
    }

    /// A fragment's track fragments' `tfdt` (ffmpeg writes 64 bits) moved by `seconds`.
    static func moveTimes(_ fragment: inout [UInt8], by seconds: Double, timescales: [UInt32: UInt64]) {
        let boxes = FragmentOrderTests.boxes
        guard let moof = boxes(fragment, 0..<fragment.count).first(where: { $0.type == "moof" })?.range else { return }
        for traf in boxes(fragment, moof.lowerBound + 8..<moof.upperBound) where traf.type == "traf" {
            let inner = boxes(fragment, traf.range.lowerBound + 8..<traf.range.upperBound)
            guard let tfhd = inner.first(where: { $0.type == "tfhd" }), let tfdt = inner.first(where: { $0.type == "tfdt" }),
                  fragment[tfdt.range.lowerBound + 8] == 1 else { continue }
            let track = UInt32(fragment[tfhd.range.lowerBound + 12..<tfhd.range.lowerBound + 16].reduce(0) { $0 << 8 | UInt64($1) })
            let at = tfdt.range.lowerBound + 12
            let time = fragment[at..<at + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } + UInt64(seconds * Double(timescales[track] ?? 0))
            for i in 0..<8 { fragment[at + i] = UInt8(truncatingIfNeeded: time >> (56 - 8 * i)) }
        }
    }

    /// Recording `k` on its own, as ffmpeg wrote it (its own header): what the joined
    /// output's part should be.
    static func alone(_ k: Int, seconds: Int, audio: Bool = true, layout: Layout = .fmp4) throws -> String {
        try Media.generated("appended-alone-\(k)-\(seconds)-\(audio)-\(layout).mp4") { tmp in
            let r = try recording(k, seconds: seconds, audio: audio, layout: layout)
            try Data(r.head + r.fragments.joined()).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// Checks an output holding `parts` (recordings on their own) one after the other: its
    /// pictures and sound frames all there, its length their sum, each part's sound where
    /// it was against its pictures, and nothing ffmpeg cannot decode; for a copy, its
    /// pictures those of the parts.
    static func expectJoined(_ out: String, parts: [String], audio: Bool, copied: Bool) throws {
        let video = try parts.map { try FFprobe.packetTimes($0, "v:0") }
        let times = try FFprobe.packetTimes(out, "v:0")
        #expect(times.count == video.map(\.count).reduce(0, +), "pictures: \(times.count) of \(video.map(\.count))")
        let lengths = try parts.map { try FFprobe($0).formatDuration }
        let length = try FFprobe(out).formatDuration
        #expect(abs(length - lengths.reduce(0, +)) < 0.1 * Double(parts.count), "length \(length) for \(lengths)")
        // Each part begins after the ones before, its pictures spaced as on their own.
        var first = 0
        for k in video.indices where first + video[k].count <= times.count {
            let mine = Array(times[first..<first + video[k].count]).sorted(), own = video[k].sorted()
            let begin = mine[0] - own[0]
            // (A re-encode's times are in milliseconds.)
            #expect(zip(mine, own).allSatisfy { abs($0 - $1 - begin) < 0.005 }, "part \(k) is not spaced as on its own")
            if k > 0 { #expect(begin > times[..<first].max()! - own[0], "part \(k) begins at \(begin), inside the part before") }
            if audio {
                // Its sound begins where it did against its pictures (packet for packet).
                let sound = try FFprobe.packetTimes(out, "a:0"), ownSound = try FFprobe.packetTimes(parts[k], "a:0")
                let before = try parts[..<k].map { try FFprobe.packetCount($0, "a:0") }.reduce(0, +)
                if before < sound.count {
                    #expect(abs((sound[before] - begin) - ownSound[0]) < 0.03, "part \(k)'s sound begins \(sound[before] - begin - ownSound[0]) s off its pictures")
                }
            }
            first += video[k].count
        }
        if audio {
            let counts = try parts.map { try FFprobe.packetCount($0, "a:0") }
            // A re-encode may end each part's sound a frame longer (the encoder's priming).
            let count = try FFprobe.packetCount(out, "a:0")
            #expect(copied ? count == counts.reduce(0, +) : abs(count - counts.reduce(0, +)) <= parts.count, "sound frames: \(count) of \(counts)")
        }
        #expect(try FFprobe.decodeErrors(out) == "")
        if copied { #expect(try FragmentOrderTests.pictures(out) == parts.flatMap { try FragmentOrderTests.pictures($0) }) }
    }

    @Test("two recordings appended after one header, in each layout ffmpeg writes, are delivered one after the other, copied: every picture and sound frame of both, the length their sum, each recording's sound in step with its pictures (the second had been lost whole, exit 0)",
          arguments: [Layout.fmp4, .dash, .hls])
    func twoRecordings(layout: Layout) throws {
        let source = try Self.appended("two-\(layout)", seconds: [8, 5], layout: layout)
        let probed = try Command.probed(source)
        guard case .array(let warnings)? = probed["warnings"] else { Issue.record("no warnings: \(probed)"); return }
        #expect(warnings.contains(.string("recordings_appended")), "\(warnings)")
        #expect(probed["fragmented"] == .bool(true))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "appended-two-\(layout)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            #expect(try Command.json(run)["plan"]?["delivery_format"]?.string == "remux")
            let parts = [try Self.alone(0, seconds: 8, layout: layout), try Self.alone(1, seconds: 5, layout: layout)]
            try Self.expectJoined(out, parts: parts, audio: true, copied: true)
        }
    }

    @Test("two recordings appended, re-encoded at a lower rung, come out whole: both recordings' pictures and sound, the length their sum")
    func twoRecordingsTranscoded() throws {
        let source = try Self.appended("two-fmp4", seconds: [8, 5], layout: .fmp4)
        try Command.prepare(source, quality: "1mbps", caps: "web", scratch: "appended-two-transcoded") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            #expect(try Command.json(run)["plan"]?["delivery_format"]?.string == "transcode")
            try Self.expectJoined(out, parts: [Self.alone(0, seconds: 8), Self.alone(1, seconds: 5)], audio: true, copied: false)
        }
    }

    @Test("three recordings of pictures alone appended are delivered one after the other, whole")
    func threeRecordingsVideoOnly() throws {
        let source = try Self.appended("three-video", seconds: [4, 3, 5], audio: false, layout: .fmp4)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "appended-three-video") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let parts = try [(0, 4), (1, 3), (2, 5)].map { try Self.alone($0.0, seconds: $0.1, audio: false) }
            try Self.expectJoined(out, parts: parts, audio: false, copied: true)
        }
    }

    @Test("recordings whose times begin past zero (the second inside the first's time, or the first later than the second) are joined all the same: the second follows the first, the length their sum, no gap kept",
          arguments: [("second-at-3s", [0.0, 3.0]), ("first-at-10s", [10.0, 0.0])])
    func recordingsStartingLater(name: String, starts: [Double]) throws {
        let source = try Self.appended("two-\(name)", seconds: [8, 5], layout: .fmp4, starts: starts)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "appended-\(name)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            try Self.expectJoined(out, parts: [Self.alone(0, seconds: 8), Self.alone(1, seconds: 5)], audio: true, copied: true)
        }
    }

    @Test("recordings appended whose first fragment is in their header (ffmpeg's frag_keyframe without empty_moov: the first recording's first second listed in its moov, the second's gone with its own header) are joined: the first whole, then the fragments of the second (they had been read as fragments out of order and mixed into the first)")
    func firstFragmentInHeader() throws {
        let source = try Self.appended("two-in-header", seconds: [8, 5], layout: .inHeader)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "appended-in-header") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            // The second recording's first second (25 pictures) was in the header left out.
            let times = try FFprobe.packetTimes(out, "v:0").sorted()
            #expect(times.count == 200 + 100)
            #expect(times.count == 300 && times[199] < 8 && times[200] > 8 && times[200] < 8.1, "\(times.count) pictures")
            #expect(abs(try FFprobe(out).formatDuration - 12.02) < 0.1)
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("recordings appended, each with two fragments stored out of order, are read in order within each, one recording after the other: the pictures of both as written, all their sound")
    func appendedOutOfOrder() throws {
        let source = try Self.appended("two-swapped", seconds: [8, 5], layout: .fmp4, orders: [[0, 1, 2, 3, 5, 4, 6, 7], [0, 2, 1, 3, 4]])
        let probed = try Command.probed(source)
        guard case .array(let warnings)? = probed["warnings"] else { Issue.record("no warnings: \(probed)"); return }
        #expect(warnings.contains(.string("recordings_appended")) && warnings.contains(.string("fragments_reordered")), "\(warnings)")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "appended-two-swapped") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            try Self.expectJoined(out, parts: [Self.alone(0, seconds: 8), Self.alone(1, seconds: 5)], audio: true, copied: true)
        }
    }

    @Test("recordings appended whose samples are placed by offsets in the file as their writer gave them (base_data_offset, left pointing into the first recording) cannot be joined: refused as damaged, exit 3, saying so, before any work; with the offsets moved with them, they are joined")
    func placedOffsets() throws {
        let stray = try Self.appended("two-placed", seconds: [8, 5], layout: .placed)
        try Command.prepare(stray, quality: "original", caps: "ios", scratch: "appended-placed") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_corrupt"))
            #expect(error?["message"]?.string?.contains("recordings") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
        let moved = try Self.appended("two-placed-moved", seconds: [8, 5], layout: .placed, movedOffsets: true)
        try Command.prepare(moved, quality: "original", caps: "ios", scratch: "appended-placed-moved") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            try Self.expectJoined(out, parts: [Self.alone(0, seconds: 8), Self.alone(1, seconds: 5)], audio: true, copied: true)
        }
    }

    @Test("recordings laid one after another each with its own header (two captures joined with cat, a download that kept each part's init segment): coded alike, they are joined, every picture and sound frame; coded otherwise, the changed track is re-encoded with its decoder told of each header's parameter sets, so every picture and sound after a join is its own (they had gone out decoded with the first header's, broken from the join on, exit 0, and then been refused); sound in another timescale is refused before any work")
    func eachWithItsOwnHeader() throws {
        let first = try Self.alone(0, seconds: 8), alike = try Self.alone(1, seconds: 5)
        func joined(_ name: String, _ parts: [String]) throws -> String {
            try Media.generated("appended-own-headers-\(name).mp4") { tmp in
                try Data(parts.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
            }
        }
        try Command.prepare(try joined("alike", [first, alike]), quality: "original", caps: "ios", scratch: "appended-own-alike") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            try Self.expectJoined(out, parts: [first, alike], audio: true, copied: true)
        }
        // The first recording's pictures and sound but for one thing each (the first: 320x240,
        // a mono 440 Hz tone at 48 kHz).
        let other = { (name: String, video: String, sound: [String]) throws -> String in
            try Media.generated("appended-own-headers-part-\(name).mp4") { tmp in
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=\(video):rate=25:duration=5"]
                                        + sound + ["-c:a", "aac", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "ultrafast", "-g", "25", "-qp", "8",
                                                   "-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", tmp])
                guard r.status == 0 else { throw TestFailure(r.stderr) }
            }
        }
        let tone = { (hz: Int, rate: Int) in ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=\(rate):duration=5"] }
        // Sound at 44.1 kHz after 48 kHz: another AudioSpecificConfig, and its track timed in
        // another timescale (its rate), which libavformat reads in the first's: 5 s of it
        // read as 4.6 s. Re-encoded, 880 Hz from the join to the end, in step with its pictures.
        let slower = try other("sound", "320x240", tone(880, 44100))
        try Command.prepare(try joined("sound", [first, slower]), quality: "original", caps: "ios", scratch: "appended-own-sound") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let plan = try Command.json(run)["plan"]
            #expect(plan?["audio"]?["action"] == .string("transcode") && plan?["reasons"]?.elements?.contains(.string("audio_coding_changes")) == true,
                    "\(plan ?? .null)")
            #expect(try FFprobe.decodeErrors(out) == "")
            try CameraTracksTests.expectTones(out, lasting: 13, [(1.0, 7.5, 440.0), (8.5, 12.0, 880), (12.3, 12.9, 880)])
            let pictures = try FFprobe.packetTimes(out, "v:0"), tones = try FFprobe.packetTimes(out, "a:0")
            #expect(abs((pictures.max() ?? 0) - (tones.max() ?? 0)) < 0.1, "pictures end at \(pictures.max() ?? 0) s, sound at \(tones.max() ?? 0) s")
        }
        // Another codec after the join is refused before any work: no decoder goes on from one to the other.
        let hevc = try Media.generated("appended-own-headers-part-hevc.mp4") { tmp in
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=2",
                                               "-c:v", "libx265", "-x265-params", "log-level=error", "-tag:v", "hvc1", "-pix_fmt", "yuv420p", "-preset", "ultrafast",
                                               "-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
        try Command.prepare(try joined("codec", [try Self.alone(0, seconds: 8, audio: false), hevc]), quality: "original", caps: "ios",
                            scratch: "appended-own-codec") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_unsupported"), "\(error ?? .null)")
            let message = error?["message"]?.string ?? ""
            #expect(message.contains("track 1 is coded otherwise") && message.contains("another codec (avc1, then hvc1)"), "\(message)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
        // A larger picture (another SPS and PPS), then a recording coded as the first: the
        // decoder is told at each join, back to the first's parameter sets at the second.
        let larger = try other("size-4x3", "640x480", tone(880, 48000))
        let sized = try joined("size-then-alike", [first, larger, alike])
        #expect(try Command.probedStreams(sized).first?["coding_changes"] == .bool(true))
        for (quality, caps) in [("original", "ios"), ("1mbps", "android")] {
            try Command.prepare(sized, quality: quality, caps: caps, scratch: "appended-own-size-\(quality)") { run, out in
                #expect(run.status == 0, "\(quality): \(run.stdout.suffix(400))")
                let plan = try Command.json(run)["plan"]
                #expect(plan?["delivery_format"] == .string("transcode") && plan?["reasons"]?.elements?.contains(.string("video_coding_changes")) == true,
                        "\(quality): \(plan ?? .null)")
                #expect(try FFprobe.decodeErrors(out) == "")
                let made = try TelecineTests.lumaFrames(out, width: 160, height: 120)
                let own = try [first, larger, alike].flatMap { try TelecineTests.lumaFrames($0, width: 160, height: 120) }
                #expect(made.count == own.count, "\(quality): \(made.count) pictures of \(own.count)")
                // Picture for picture its own: one decoded with the other header's parameter sets is noise.
                let psnr = zip(made, own).map { TelecineTests.psnr($0, $1) }
                let worst = psnr.indices.min { psnr[$0] < psnr[$1] }
                #expect(worst.map { psnr[$0] > 25 } == true, "\(quality): picture \(worst ?? -1) is \(worst.map { psnr[$0] } ?? 0) dB from its own; below 25: \(psnr.indices.filter { psnr[$0] <= 25 })")
            }
        }
        // Stereo (another AudioSpecificConfig at the same rate: 880 Hz left, 1 kHz right): the
        // pictures are copied, the sound re-encoded in stereo, both tones after the join.
        let stereo = try other("channels", "320x240", tone(880, 48000) + tone(1000, 48000)
                               + ["-filter_complex", "[1:a][2:a]join=inputs=2:channel_layout=stereo[a]", "-map", "0:v", "-map", "[a]"])
        try Command.prepare(try joined("channels", [first, stereo]), quality: "original", caps: "ios", scratch: "appended-own-channels") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let plan = try Command.json(run)["plan"]
            #expect(plan?["delivery_format"] == .string("remux") && plan?["audio"]?["action"] == .string("transcode")
                    && plan?["audio"]?["channels"] == .number(2) && plan?["reasons"]?.elements?.contains(.string("audio_coding_changes")) == true,
                    "\(plan ?? .null)")
            #expect(try FFprobe.decodeErrors(out) == "")
            let left = try CameraTracksTests.channel(out, 0), right = try CameraTracksTests.channel(out, 1)
            #expect(abs(CameraTracksTests.frequency(left, from: 2, to: 6) - 440) < 10)
            #expect(abs(CameraTracksTests.frequency(left, from: 9, to: 12) - 880) < 10, "\(CameraTracksTests.frequency(left, from: 9, to: 12))")
            #expect(abs(CameraTracksTests.frequency(right, from: 9, to: 12) - 1000) < 10, "\(CameraTracksTests.frequency(right, from: 9, to: 12))")
        }
    }

    @Test("a recording appended to itself (the same fragments again) is a repeat, as one fragment written twice is: delivered once")
    func sameRecordingTwice() throws {
        let once = try Self.alone(0, seconds: 4)
        let twice = try Media.generated("appended-same-twice.mp4") { tmp in
            let r = try Self.recording(0, seconds: 4, audio: true, layout: .fmp4)
            try Data(r.head + r.fragments.joined() + r.fragments.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(twice, quality: "original", caps: "ios", scratch: "appended-same-twice") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let pictures = try FFprobe.packetCount(out, "v"), expected = try FFprobe.packetCount(once, "v")
            #expect(pictures == expected)
        }
    }
}
