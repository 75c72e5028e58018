import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Lengths libavformat only estimates from a file's size and a bit rate (MP3 and ADTS
/// without a frame count, bare video streams): no declaration to hold a run to. And a
/// sound's rate measured from its first seconds alone.
@Suite("sound files and bare streams as found: estimated lengths and rates, chained links, a last frame cut")
struct EstimatedLengthTests {
    /// Part `k` of a book: a tone of `seconds` in 64 kbit/s MP3 at 32 kHz, without a frame
    /// count (no Xing header), after an ID3v2 tag of 4 kB (a long comment).
    static func chapter(_ k: Int, seconds: Int, rate: Int = 32000) throws -> String {
        try Media.generated("estimated-chapter-\(k)-\(seconds)\(rate == 32000 ? "" : "-\(rate)").mp3", [
            "-f", "lavfi", "-i", "sine=frequency=\(300 * k):sample_rate=\(rate):duration=\(seconds)", "-c:a", "libmp3lame", "-b:a", "64k",
            "-ac", "1", "-write_xing", "0", "-id3v2_version", "3", "-metadata", "comment=" + String(repeating: "x", count: 4000), "-f", "mp3",
        ])
    }

    @Test("MP3 chapters joined with cat (an audiobook's parts, each with its tag) are their sound's length, not the size over the bit rate that counts the tags as sound: probed at it, prepared whole (they were refused as cut short)")
    func joinedChapters() throws {
        let parts = try [(1, 3), (2, 4), (3, 5)].map { try Self.chapter($0.0, seconds: $0.1) }
        let book = try Media.generated("estimated-book.mp3") { tmp in
            try Data(parts.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        let whole = try parts.map { try FFprobe($0).formatDuration }.reduce(0, +)
        let estimate = try FFprobe(book).formatDuration
        #expect(estimate - whole > 0.5, "the source is what the test needs: libavformat estimates \(estimate) s for \(whole) s")
        let probed = try Command.probed(book)
        #expect(abs((probed["duration_seconds"]?.double ?? 0) - whole) < 0.1, "\(probed["duration_seconds"] ?? .null) s for \(whole) s")
        #expect(probed["warnings"]?.elements?.contains(.string("duration_measured")) == true, "\(probed["warnings"] ?? .null)")
        for (quality, caps) in [("original", "ios"), ("1mbps", "android")] {
            try Command.prepare(book, quality: quality, caps: caps, scratch: "estimated-book-\(quality)") { run, out in
                #expect(run.status == 0, "\(quality): \(run.stdout.suffix(400))")
                let json = try Command.json(run)
                let length = json["output"]?["duration_seconds"]?.double ?? 0
                #expect(abs(length - whole) < 0.1, "\(quality): \(length) s for \(whole) s")
                // The tags between the chapters are no sound, and no damage either: a copy
                // had carried each glued to the frame after it ("Header missing").
                #expect(try FFprobe.decodeErrors(out) == "")
                #expect(json["stats"]?["corrupt_packets"] == .number(0), "\(quality): \(json["stats"] ?? .null)")
            }
        }
        // A chapter at another rate (22,050 Hz among 32,000): one MP4 sample entry cannot say
        // both, and the copy's times ran back at the join; the sound is re-encoded instead.
        let files = [parts[0], try Self.chapter(2, seconds: 2, rate: 22050), parts[2]]
        let mixedLength = try files.map { try FFprobe($0).formatDuration }.reduce(0, +)
        let mixed = try Media.generated("estimated-book-mixed-rates.mp3") { tmp in
            try Data(files.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(mixed, quality: "original", caps: "ios", scratch: "estimated-mixed") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["stats"]?["adjustments"]?.elements?.contains { $0.string?.hasPrefix("audio_reencoded") == true } == true, "\(json["stats"] ?? .null)")
            #expect(try FFprobe.decodeErrors(out) == "")
            let length = json["output"]?["duration_seconds"]?.double ?? 0
            #expect(abs(length - mixedLength) < 0.1, "\(length) s for \(mixedLength) s")
        }
        // A stretch of zeros inside (a damaged copy): the frame after it is kept, the damage counted.
        let damaged = try Media.generated("estimated-chapter-zeroed.mp3") { tmp in
            var bytes = try Data(contentsOf: URL(fileURLWithPath: parts[1]))
            bytes.replaceSubrange(bytes.count / 2..<bytes.count / 2 + 2000, with: Data(count: 2000))
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(damaged, quality: "original", caps: "ios", scratch: "estimated-zeroed") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            #expect(try FFprobe.decodeErrors(out) == "")
            let stats = try Command.json(run)["stats"]
            #expect((stats?["corrupt_packets"]?.int ?? 0) >= 1, "\(stats ?? .null)")
        }
    }

    @Test("a bare MPEG-1 video stream whose header says its rate is variable (18 bits set, read as 104.9 Mbit/s) is its pictures' length with no rate: probed at 6 s, not 0.01 s, and transcoded whole (it was refused as running past its length)")
    func variableRateElementaryStream() throws {
        let raw = try Media.generated("estimated-vbr.m1v", ["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25:duration=6",
                                                           "-c:v", "mpeg1video", "-q:v", "4", "-f", "mpeg1video"])
        let stated = try FFprobe(raw).streams("video").first?["bit_rate"]?.int
        #expect(stated == 0x3FFFF * 400, "the source is what the test needs: \(stated ?? 0)")
        let probed = try Command.probed(raw)
        #expect(abs((probed["duration_seconds"]?.double ?? 0) - 6) < 0.1, "\(probed["duration_seconds"] ?? .null)")
        let video = try Command.probedStreams(raw).first
        #expect(video?["bit_rate"] == nil, "\(video ?? .null)")
        try Command.prepare(raw, quality: "1mbps", caps: "android", scratch: "estimated-vbr") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let length = try FFprobe(out).formatDuration
            #expect(abs(length - 6) < 0.1, "\(length) s")
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("a FLAC song with a quiet start is its whole file's rate, not its first seconds': at a 1 Mbit/s rung its 1.4 Mbit/s are re-encoded (measured 0.1 Mbit/s from the start, it was copied as fitting)")
    func losslessQuietStart() throws {
        // Two channels of their own noise, loud after 4 s of near silence.
        let song = try Media.generated("quiet-start-3.flac", ["-f", "lavfi", "-i", "aevalsrc=(random(0)*2-1)*0.8|(random(1)*2-1)*0.8:s=48000:d=30",
                                                             "-af", "volume=volume='if(lt(t,4),0.001,1)':eval=frame", "-c:a", "flac"])
        let probed = try Command.probed(song)
        let overall = probed["bit_rate"]?.double ?? 0, sound = try Command.probedStreams(song).first?["bit_rate"]?.double ?? 0
        #expect(overall > 1_000_000, "the source is what the test needs: \(overall) bit/s")
        #expect(sound > overall * 0.9, "the sound's rate \(sound) for the file's \(overall)")
        let plan = try Command.planned([song, "--quality", "1mbps", "--caps", "android", "--json"])
        #expect(plan["audio"]?["action"] == .string("transcode") && plan["reasons"]?.elements?.contains(.string("source_fits_target")) == false, "\(plan)")
    }

    @Test("Ogg Vorbis songs chained one after another (cat, an Icecast recording), each its own headers and times from zero: every song in order, the probe at their sum (the pipeline kept only what was timed after the first song, 1.02 s of 1.56, exit 0); links at another rate, which libavformat times wrongly, are refused")
    func chainedOggLinks() throws {
        func song(_ hz: Int, _ rate: Int, _ seconds: Int) throws -> String {
            try Media.generated("chained-\(hz)-\(rate)-\(seconds).ogg", ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=\(rate):duration=\(seconds)",
                                                                        "-c:a", "libvorbis", "-f", "ogg"])
        }
        func chain(_ name: String, _ songs: [String]) throws -> String {
            try Media.generated("chained-\(name).ogg") { tmp in
                try Data(songs.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
            }
        }
        let chained = try chain("three-44k", [try song(440, 44100, 2), try song(880, 44100, 1), try song(660, 44100, 2)])
        let probed = try Command.probed(chained)
        #expect(abs((probed["duration_seconds"]?.double ?? 0) - 5) < 0.1, "\(probed["duration_seconds"] ?? .null)")
        #expect(probed["warnings"]?.elements?.contains(.string("links_chained")) == true, "\(probed["warnings"] ?? .null)")
        for (quality, caps) in [("original", "ios"), ("1mbps", "android")] {
            try Command.prepare(chained, quality: quality, caps: caps, scratch: "chained-\(quality)") { run, out in
                #expect(run.status == 0, "\(quality): \(run.stdout.suffix(400))")
                #expect(try FFprobe.decodeErrors(out) == "")
                try CameraTracksTests.expectTones(out, lasting: 5, [(0.3, 1.7, 440.0), (2.2, 2.8, 880), (3.3, 4.7, 660)], quality)
            }
        }
        let rates = try chain("rates-44k-22k", [try song(440, 44100, 2), try song(660, 22050, 2)])
        try Command.prepare(rates, quality: "original", caps: "ios", scratch: "chained-rates") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_unsupported") && error?["message"]?.string?.contains("22050 Hz") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("Ogg Opus and Ogg FLAC links chained with `cat` probe at their sum (it was the last link's length); a FLAC link's headers are not copied as sound (two samples, 0.15 s of nothing at the join), and a link at another rate is re-encoded (it was copied under the first link's rate, 7 % long)")
    func chainedOpusAndFLACLinks() throws {
        func song(_ hz: Int, _ rate: Int, _ seconds: Int, _ codec: [String], _ ext: String) throws -> String {
            try Media.generated("chained-\(hz)-\(rate)-\(seconds).\(ext)", ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=\(rate):duration=\(seconds)"]
                                + codec + ["-f", "ogg"])
        }
        func chain(_ name: String, _ songs: [String]) throws -> String {
            try Media.generated("chained-\(name).ogg") { tmp in
                try Data(songs.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
            }
        }
        let opus = ["-c:a", "libopus", "-b:a", "64k"], flac = ["-c:a", "flac"]
        let opusSongs = [try song(440, 48000, 3, opus, "opus"), try song(660, 48000, 2, opus + ["-ac", "2"], "opus")]
        let flacSongs = [try song(440, 44100, 3, flac, "oga"), try song(660, 44100, 2, flac, "oga")]
        for (name, songs) in [("opus", opusSongs), ("flac", flacSongs)] {
            let chained = try chain("\(name)-two", songs)
            let probed = try Command.probed(chained)
            #expect(abs((probed["duration_seconds"]?.double ?? 0) - 5) < 0.1, "\(name): \(probed["duration_seconds"] ?? .null)")
            #expect(probed["warnings"]?.elements?.contains(.string("links_chained")) == true, "\(name): \(probed["warnings"] ?? .null)")
            try Command.prepare(chained, quality: "original", caps: "ios", scratch: "chained-\(name)") { run, out in
                #expect(run.status == 0, "\(name): \(run.stdout.suffix(400))")
                #expect(try FFprobe.decodeErrors(out) == "", "\(name)")
                try CameraTracksTests.expectTones(out, lasting: 5, [(0.3, 2.7, 440.0), (3.3, 4.7, 660)], name)
                if name == "flac" {
                    // A copy: every frame of both songs, and nothing else.
                    let frames = try songs.map { try FFprobe.packetCount($0, "a") }.reduce(0, +)
                    #expect(try FFprobe.packetCount(out, "a") == frames, "\(name)")
                }
            }
        }
        let rates = try chain("flac-44k-48k", [flacSongs[0], try song(660, 48000, 2, flac, "oga")])
        try Command.prepare(rates, quality: "original", caps: "ios", scratch: "chained-flac-rates") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["output"]?["audio"]?["codec"] == .string("aac"), "\(json["output"] ?? .null)")
            #expect(try FFprobe.decodeErrors(out) == "")
            try CameraTracksTests.expectTones(out, lasting: 5, [(0.3, 2.7, 440.0), (3.3, 4.7, 660)], "44.1 then 48 kHz")
        }
    }

    @Test("Ogg videos chained with `cat` (pictures and sound in each link), which libavformat cannot read on, are refused as source_unsupported and not retryable: it was an io_error the farm retried, every time")
    func chainedOggVideos() throws {
        let links = try [330, 660].map { hz in
            try Media.generated("chained-theora-\(hz).ogv", ["-f", "lavfi", "-i", "testsrc2=s=320x240:r=25:d=2", "-f", "lavfi", "-i", "sine=frequency=\(hz):duration=2",
                                                             "-c:v", "libtheora", "-q:v", "6", "-c:a", "libvorbis", "-f", "ogg"])
        }
        let chained = try Media.generated("chained-theora.ogv") { tmp in
            try Data(links.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
        }
        try Command.prepare(chained, quality: "1mbps", caps: "ios", scratch: "chained-theora") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_unsupported") && error?["retryable"] == .bool(false), "\(error ?? .null)")
            #expect(error?["message"]?.string?.contains("chained") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("FLAC files joined with `cat` (the second's header lies between two frames, which libavformat glues into one untimed packet): every frame of each, in order, the probe at their sum; a file at another rate is re-encoded. Before: 2.6 s of 5 came out, exit 0")
    func joinedFLACFiles() throws {
        func song(_ hz: Int, _ rate: Int, _ seconds: Int) throws -> String {
            try Media.generated("joined-\(hz)-\(rate)-\(seconds).flac", ["-f", "lavfi", "-i", "sine=frequency=\(hz):sample_rate=\(rate):duration=\(seconds)",
                                                                           "-c:a", "flac", "-f", "flac"])
        }
        let first = try song(440, 44100, 3)
        for (name, second) in [("44k", try song(660, 44100, 2)), ("48k", try song(660, 48000, 2))] {
            let joined = try Media.generated("joined-\(name).flac") { tmp in
                try (Data(contentsOf: URL(fileURLWithPath: first)) + Data(contentsOf: URL(fileURLWithPath: second))).write(to: URL(fileURLWithPath: tmp))
            }
            let probed = try Command.probed(joined)
            #expect(abs((probed["duration_seconds"]?.double ?? 0) - 5) < 0.1, "\(name): \(probed["duration_seconds"] ?? .null)")
            try Command.prepare(joined, quality: "original", caps: "ios", scratch: "joined-flac-\(name)") { run, out in
                #expect(run.status == 0, "\(name): \(run.stdout.suffix(400))")
                let json = try Command.json(run)
                #expect(json["stats"]?["corrupt_packets"] == .number(0), "\(name): \(json["stats"] ?? .null)")
                #expect(try FFprobe.decodeErrors(out) == "", "\(name)")
                try CameraTracksTests.expectTones(out, lasting: 5, [(0.3, 2.9, 440.0), (3.1, 4.9, 660)], name)
                if name == "44k" {
                    // A copy: every frame of both files.
                    let frames = try FFprobe.packetCount(first, "a") + FFprobe.packetCount(second, "a")
                    #expect(try FFprobe.packetCount(out, "a") == frames)
                } else {
                    #expect(json["output"]?["audio"]?["codec"] == .string("aac"), "\(json["output"] ?? .null)")
                }
            }
        }
    }

    @Test("FLAC files joined with `cat` past the probe's 64 MB read-through (an album's songs) probe at the sum of their headers' lengths and are copied whole; it was the first song's length, and a shorter last song of more than the probe's 4 MB tail had the album refused as the first 'cut short'")
    func joinedFLACAlbum() throws {
        func song(_ name: String, _ source: String, _ seconds: Int) throws -> String {
            try Media.generated("album-\(name)-\(seconds)s.flac", ["-f", "lavfi", "-i", "\(source):duration=\(seconds):sample_rate=96000",
                                                                      "-ac", "2", "-c:a", "flac", "-sample_fmt", "s32", "-f", "flac"])
        }
        // 96 kHz noise: about 70 MB in 250 s.
        let long = try song("noise", "anoisesrc=color=white:amplitude=0.5", 250)
        for (last, seconds) in [(try song("tone", "sine=frequency=440", 3), 3.0), (try song("noise", "anoisesrc=color=white:amplitude=0.5", 30), 30)] {
            let album = try Media.generated("album-joined-250s-\(Int(seconds))s.flac") { tmp in
                try (Data(contentsOf: URL(fileURLWithPath: long)) + Data(contentsOf: URL(fileURLWithPath: last))).write(to: URL(fileURLWithPath: tmp))
            }
            let size = (try FileManager.default.attributesOfItem(atPath: album)[.size] as? Int) ?? 0
            #expect(size > 64 << 20, "the album must pass the probe's read-through: \(size) bytes")
            let probed = try Command.probed(album)
            #expect(abs((probed["duration_seconds"]?.double ?? 0) - (250 + seconds)) < 0.1, "\(seconds): \(probed)")
            #expect(probed["warnings"]?.elements?.contains(.string("links_chained")) == true, "\(seconds): \(probed["warnings"] ?? .null)")
            try Command.prepare(album, quality: "original", caps: "ios", scratch: "joined-flac-album-\(Int(seconds))") { run, out in
                #expect(run.status == 0, "\(seconds): \(run.stdout.suffix(400))")
                #expect(try abs((FFprobe(out).duration("audio") ?? 0) - (250 + seconds)) < 0.1, "\(seconds)")
                let frames = try FFprobe.packetCount(long, "a") + FFprobe.packetCount(last, "a")
                #expect(try FFprobe.packetCount(out, "a") == frames, "\(seconds)")
            }
        }
    }

    @Test("AVI files joined with `cat` (a film's CD1 and CD2) are their sum, probed and prepared: libavformat reads the second file's packets on after the first's but states the first's length, and every run was refused as 'damaged'; past the 64 MB read-through the files' headers give the sum")
    func joinedAVIFiles() throws {
        func part(_ hz: Int, _ codec: [String], _ name: String) throws -> String {
            try Media.generated("joined-\(name)-\(hz).avi", ["-f", "lavfi", "-i", "testsrc2=s=320x240:r=25:duration=2", "-f", "lavfi", "-i", "sine=frequency=\(hz):duration=2"]
                                + codec + ["-c:a", "mp3", "-f", "avi"])
        }
        func joined(_ name: String, _ parts: [String]) throws -> String {
            try Media.generated("joined-\(name).avi") { tmp in
                try Data(parts.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }.joined()).write(to: URL(fileURLWithPath: tmp))
            }
        }
        let cd = try joined("cd1-cd2", [try part(330, ["-c:v", "mpeg4"], "mpeg4"), try part(660, ["-c:v", "mpeg4"], "mpeg4")])
        let probed = try Command.probed(cd)
        #expect(abs((probed["duration_seconds"]?.double ?? 0) - 4.08) < 0.1, "\(probed["duration_seconds"] ?? .null)")
        #expect(probed["warnings"]?.elements?.contains(.string("links_chained")) == true, "\(probed["warnings"] ?? .null)")
        try Command.prepare(cd, quality: "1mbps", caps: "ios", scratch: "joined-avi") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            #expect(try FFprobe.decodeErrors(out) == "")
            #expect(try abs((FFprobe(out).duration("video") ?? 0) - 4.08) < 0.1)
            try CameraTracksTests.expectTones(out, lasting: 4.08, [(0.3, 1.7, 330.0), (2.3, 3.7, 660)])
        }
        // Raw pictures: 35 MB a part, 105 MB joined.
        let raw = try part(440, ["-c:v", "rawvideo", "-pix_fmt", "yuv420p", "-t", "12", "-vf", "loop=loop=5:size=50"], "raw")
        let large = try joined("three-raw", [raw, raw, raw])
        let big = try Command.probed(large)
        #expect(abs((big["duration_seconds"]?.double ?? 0) - 3 * (try FFprobe(raw).duration("video") ?? 0)) < 0.2, "\(big["duration_seconds"] ?? .null)")
        #expect(big["warnings"]?.elements?.contains(.string("links_chained")) == true, "\(big["warnings"] ?? .null)")
    }

    @Test("a FLAC or AC-3 file cut inside its last frame is copied without that frame, counted (the frame went out and the output failed to decode at its end: 'invalid residual', 'incomplete frame')")
    func lastFrameCut() throws {
        for (name, args) in [("flac", ["-c:a", "flac", "-f", "flac"]), ("ac3", ["-c:a", "ac3", "-b:a", "192k", "-f", "ac3"])] {
            let whole = try Media.generated("last-frame-whole.\(name)", ["-f", "lavfi", "-i", "aevalsrc=(random(0)*2-1)*0.5|(random(1)*2-1)*0.5:s=48000:d=6"] + args)
            let cut = try Media.generated("last-frame-cut.\(name)") { tmp in
                let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
                try bytes.prefix(bytes.count - 300).write(to: URL(fileURLWithPath: tmp))
            }
            #expect(try !FFprobe.decodeErrors(cut).isEmpty, "\(name): the source is what the test needs")
            try Command.prepare(cut, quality: "original", caps: "ios", scratch: "last-frame-\(name)") { run, out in
                #expect(run.status == 0, "\(name): \(run.stdout.suffix(400))")
                let json = try Command.json(run)
                #expect(json["plan"]?["audio"]?["action"] == .string("copy"), "\(name): \(json["plan"] ?? .null)")
                #expect(try FFprobe.decodeErrors(out) == "", "\(name)")
                #expect(json["stats"]?["corrupt_packets"] == .number(1), "\(name): \(json["stats"] ?? .null)")
            }
        }
    }
}
