import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("what the probe reads from the file system")
struct ProbeFileTests {
    @Test("a file's extension is read as NSString.pathExtension read it", arguments: [
        "a.mkv", "/x/y/a.MKV", "a", ".mkv", "a.", "..mkv", "a.b.c", "dir.d/file", "a.mkv/", "/", "", "a b.m p4", "ü.mkv",
        "a..mkv", "/x/.hidden.ts", ".", "..", "a.mkv//", "x/.."])
    func fileExtension(_ path: String) {
        #expect(Prober.fileExtension(path) == (path as NSString).pathExtension)
    }

    @Test("a symbolic link to a source probes with the size of the file it points to")
    func symlinkSize() throws {
        let dir = Media.scratch("probe-link")
        defer { try? FileManager.default.removeItem(at: dir) }
        let target = Media.shared("ax_sample.avi")
        let link = dir.appendingPathComponent("link.avi").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int)
        #expect(try Prober.probe(path: link, fingerprint: false).sizeBytes == Int64(size))
    }

    @Test("an MP4 in movie fragments is told apart: without a segment index (ExoPlayer cannot seek in it) it is fragmented, cut short too; with one, or flat, it is not; a box claiming 2^63 bytes ends the walk without a trap")
    func fragments() throws {
        let v = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25"]
        let fragmented = try Media.generated("frag-no-sidx.mp4", v + ["-movflags", "frag_keyframe+empty_moov"])
        // (With default_base_moof: without it, ffmpeg 5.1's global_sidx writes each fragment's
        // offset before the sidx goes in ahead of it, a file no player reads whole, which
        // Kiln remuxes: `indexInsertedAfterOffsets`.)
        let indexed = try Media.generated("frag-sidx-moof.mp4", v + ["-movflags", "frag_keyframe+empty_moov+default_base_moof+global_sidx"])
        let flat = try Media.generated("flat-320.mp4", v)
        #expect(try Prober.probe(path: fragmented, fingerprint: false).fragmented == true)
        #expect(try Prober.probe(path: indexed, fingerprint: false).fragmented == nil)
        #expect(try Prober.probe(path: flat, fingerprint: false).fragmented == nil)
        let dir = Media.scratch("probe-hostile-box")
        defer { try? FileManager.default.removeItem(at: dir) }
        let hostile = dir.appendingPathComponent("hostile.mp4")
        var bytes = try Data(contentsOf: URL(fileURLWithPath: flat))
        bytes += Data([0, 0, 0, 1] + Array("free".utf8) + [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
        try bytes.write(to: hostile)
        #expect(try Prober.probe(path: hostile.path, fingerprint: false).fragmented == nil)
        // Cut short inside its last fragment (a download that stopped), it is fragmented
        // still: the box that runs past the end ends the walk (it read as flat, and was
        // handed out as it was).
        let cut = dir.appendingPathComponent("frag-cut.mp4")
        let whole = try Data(contentsOf: URL(fileURLWithPath: fragmented))
        try whole.prefix(whole.count * 9 / 10).write(to: cut)
        #expect(try Prober.probe(path: cut.path, fingerprint: false).fragmented == true)
    }

    @Test("sound whose container and headers give no bitrate (AAC and Opus in Matroska, beside pictures or alone) is measured from the packets the scan reads: the planner can copy it instead of re-encoding it")
    func measuredAudioBitrate() throws {
        let source = try Media.generated("aac-opus-bitrates.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=12",
                                                                   "-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=48000:duration=12",
                                                                   "-map", "0:v", "-map", "1:a", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast",
                                                                   "-c:a:0", "aac", "-b:a:0", "128k", "-c:a:1", "libopus", "-b:a:1", "96k"])
        let info = try Prober.probe(path: source, fingerprint: false)
        let rates = info.audioStreams.map { $0.bitRate ?? 0 }
        // libavformat says nothing for either; the packets say about what they were made at.
        #expect(rates.count == 2 && abs(Double(rates[0]) / 128_000 - 1) < 0.15 && abs(Double(rates[1]) / 96_000 - 1) < 0.15, "\(rates)")
        // Sound alone is read on for it too.
        let soundOnly = try Media.generated("opus-only.mka", ["-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=48000:duration=12",
                                                             "-c:a", "libopus", "-b:a", "96k"])
        let rate = try Prober.probe(path: soundOnly, fingerprint: false).audioStreams.first?.bitRate ?? 0
        #expect(abs(Double(rate) / 96_000 - 1) < 0.15, "\(rate)")
        // A clip shorter than the two seconds a measure needs is read whole: measured all the same.
        let clip = try Media.generated("aac-1s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=1",
                                                     "-f", "lavfi", "-i", "anoisesrc=color=pink:sample_rate=48000:duration=1",
                                                     "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-b:a", "128k"])
        let short = try Prober.probe(path: clip, fingerprint: false).audioStreams.first?.bitRate ?? 0
        #expect(abs(Double(short) / 128_000 - 1) < 0.25, "\(short)")
    }

    /// A 6 s clip, and the same clip with a 400 kB font attached.
    static func fontAttached() throws -> (plain: String, withFont: String) {
        let plain = try Media.generated("font-plain-6s.mkv", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                                              "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "600k"])
        let withFont = try Media.generated("font-attached-6s.mkv") { tmp in
            let font = tmp + ".ttf"
            defer { unlink(font) }
            try Data((0..<400_000).map { UInt8(truncatingIfNeeded: $0 &* 7919) }).write(to: URL(fileURLWithPath: font))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", plain, "-c", "copy", "-attach", font,
                                               "-metadata:s:t", "mimetype=application/x-truetype-font", tmp])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
        }
        return (plain, withFont)
    }

    @Test("fonts attached to a Matroska file are no part of its rate: a 6 s clip with 400 kB of font reads at its streams' bitrate (it read 500 kbit/s more, and a rung it fitted re-encoded it)")
    func attachmentsLeftOutOfTheRate() throws {
        let (plain, withFont) = try Self.fontAttached()
        let a = try Prober.probe(path: plain, fingerprint: false), b = try Prober.probe(path: withFont, fingerprint: false)
        #expect(b.streams.contains { $0.type == .attachment })
        #expect(abs(Double(b.bitRate) / Double(a.bitRate) - 1) < 0.05, "\(a.bitRate) beside \(b.bitRate)")
    }

    @Test("an open source holds none of its attachments' data (80 MB of fonts had cost a probe 400 MB, held for the whole job), and still knows their size")
    func attachmentDataDropped() throws {
        let withFont = try Self.fontAttached().withFont
        let demuxer = try Demuxer(path: withFont, cancellation: Cancellation())
        let attachments = (0..<demuxer.streamCount).map { demuxer.stream($0).pointee.codecpar.pointee }
            .filter { $0.codec_type == AVMEDIA_TYPE_ATTACHMENT }
        #expect(attachments.count == 1)
        #expect(attachments.allSatisfy { $0.extradata == nil && $0.extradata_size == 0 })
        #expect(demuxer.attachedBytes == 400_000)
    }

    @Test("an MP4 whose chapter list runs 10 hours past its 10 s film lasts 10 s at its own bitrate (its chapter track made it 10 h at a 3,600th of its rate, and it went as it was to a rung it is twice)")
    func chapterTrackPastTheFilm() throws {
        let source = try Media.generated("chapters-10h-4mbps.mp4") { tmp in
            let meta = tmp + ".txt"
            defer { try? FileManager.default.removeItem(atPath: meta) }
            try Data(";FFMETADATA1\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=5000\ntitle=One\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=5000\nEND=36000000\ntitle=Credits\n".utf8)
                .write(to: URL(fileURLWithPath: meta))
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25:duration=10",
                                               "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=10", "-i", meta, "-map", "0:v", "-map", "1:a",
                                               "-map_chapters", "2", "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "4M", "-c:a", "aac", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
        #expect(try FFprobe(source).json["format"]?["duration"]?.string.flatMap(Double.init) ?? 0 > 30_000, "the header must declare the chapters' 10 h")
        let info = try Prober.probe(path: source)
        #expect(abs(info.durationSeconds - 10) < 0.2, "\(info.durationSeconds)")
        #expect(info.bitRate > 3_000_000, "\(info.bitRate)")
        #expect(info.chapters.count == 2)
    }

    @Test("a sound track whose handler says pictures (a camera's CH2 damaged from soun to vide: no codec, a 2-byte sample a packet) is listed from its header and none of its packets is read, by the analysis or after it (every one had been, 960,000 for 20 s, all held by the analysis); the other streams' all are")
    func unknownCodecLeftUnread() throws {
        let source = try Prober.open(path: try Media.cameraTracks(seconds: 20, ch2AsPictures: true), fingerprint: false)
        let streams = source.info.streams
        #expect(streams.map(\.type) == [.video, .audio, .video, .audio, .audio])
        #expect(streams.count == 5 && streams[2].codec == "none" && streams[2].durationSeconds == 20)
        let demuxer = try source.demuxer()
        let packet = try Packet()
        var counts: [Int32: Int] = [:]
        while try demuxer.read(into: packet) {
            counts[packet.streamIndex, default: 0] += 1
            packet.unref()
        }
        #expect(counts[2] == nil, "\(counts[2] ?? 0) packets of the stream of no codec read")
        #expect(counts[0] == 500 && [1, 3, 4].allSatisfy { counts[$0, default: 0] > 0 }, "\(counts)")
    }
}

@Suite("the probe's packet scan on decode-times-only video")
struct DecodeTimesScanTests {
    /// Bytes this thread has read so far (`rchar` of /proc/thread-self/io: the probe reads on
    /// the calling thread, and tests on other threads do not count).
    static func bytesRead() throws -> Int {
        let io = try String(contentsOfFile: "/proc/thread-self/io", encoding: .utf8)
        let line = try #require(io.split(separator: "\n").first { $0.hasPrefix("rchar:") })
        return try #require(Int(line.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)))
    }

    @Test("a long AVI whose H.264 has decode times only is scanned for its first packets, not read to the end (the scan counted presentation times, which never came)")
    func scanStops() throws {
        let source = try Media.generated("h264-bframes-90s.avi", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=90",
                                                                  "-c:v", "libx264", "-preset", "ultrafast", "-bf", "3", "-g", "50"])
        let size = try #require(try FileManager.default.attributesOfItem(atPath: source)[.size] as? Int)
        let before = try Self.bytesRead()
        let video = try #require(try Prober.probe(path: source, fingerprint: false).videoStreams.first)
        let read = try Self.bytesRead() - before
        #expect(video.presentationTimesMissing == true)
        #expect(read < size / 4, "read \(read) of \(size) bytes")
    }

    @Test("MPEG-4 Part 2 in AVI, whose B-frames alone have presentation times, is 25 fps and constant (the scattered times read as variable)")
    func partialTimes() throws {
        let source = try Media.generated("mpeg4-bframes.avi", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                                               "-c:v", "mpeg4", "-vtag", "XVID", "-bf", "2", "-q:v", "3"])
        let video = try #require(try Prober.probe(path: source, fingerprint: false).videoStreams.first)
        #expect(video.presentationTimesMissing == true)
        #expect(video.frameRate == 25)
        #expect(video.variableFrameRate == false)
    }
}

@Suite("frame rate from a stream's timestamps")
struct FrameRateTests {
    let ms = AVRational(num: 1, den: 1000)

    @Test("25 fps with two pictures that had no time of their own (MPEG-PS) is 25, constant (it read 24.75)")
    func missingTimes() throws {
        var pts = (0..<240).map { Int64($0) * 3600 }
        pts.remove(at: 150)
        pts.remove(at: 26)
        let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: AVRational(num: 1, den: 90000)))
        #expect(abs(fps - 25) < 0.001, "\(fps)")
        #expect(!variable)
    }

    @Test("29.97 fps rounded to milliseconds (Matroska's 33 and 34 ms steps) is 29.97, not 30.3")
    func roundedSteps() throws {
        let pts = (0..<240).map { Int64((Double($0) * 1001 / 30).rounded()) }
        let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
        #expect(abs(fps - 29.97) < 0.01, "\(fps)")
        #expect(!variable)
    }

    @Test("a rate is reported to a thousandth of a frame a second, and below one a second to a thousandth of itself: a picture a minute is not 0.017 fps, 2 % fast (its encode drifted 22 s from the sound over two hours)")
    func slowRatesKeepTheirPrecision() {
        #expect(Prober.reportedRate(30000.0 / 1001) == 29.97)
        #expect(Prober.reportedRate(0.5) == 0.5)
        for fps in [1.0 / 60, 1.0 / 7, 0.0012345] {
            #expect(abs(Prober.reportedRate(fps) / fps - 1) < 0.001, "\(fps): \(Prober.reportedRate(fps))")
        }
    }

    @Test("120 and 240 fps in milliseconds (steps of 8 and 9, 4 and 5 ms) are constant 120 and 240, not variable 125 and 250")
    func fastRoundedSteps() throws {
        for rate in [120.0, 240.0] {
            let pts = (0..<240).map { Int64((Double($0) * 1000 / rate).rounded()) }
            let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
            #expect(abs(fps - rate) < 0.1 && !variable, "\(rate): \(fps) \(variable)")
        }
    }

    @Test("300 and 500 fps in milliseconds (steps of 3 and 4, 2 ms) are constant 300 and 500, not variable 333; a rate that changes stays variable")
    func highSpeedRoundedSteps() throws {
        for rate in [300.0, 500.0] {
            let pts = (0..<240).map { Int64((Double($0) * 1000 / rate).rounded()) }
            let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
            #expect(abs(fps - rate) < 1 && !variable, "\(rate): \(fps) \(variable)")
        }
        // 300 fps with a second at 150 in the middle strays from any one line: variable.
        let kept = (0..<600).filter { $0 < 200 || $0 >= 500 || $0 % 2 == 0 }
        let (_, variable) = try #require(Prober.frameRate(pts: kept.map { Int64((Double($0) * 1000 / 300).rounded()) }, timeBase: ms))
        #expect(variable)
    }

    @Test("120 fps in milliseconds with a stretch at 60 (a variable phone clip in Matroska) is variable at 120, not the median step's 125")
    func fastVariable() throws {
        // A second at 60 fps in the middle: every other picture left out.
        let kept: [Int] = (0..<360).filter { (i: Int) -> Bool in i < 120 || i >= 240 || i % 2 == 0 }
        let pts: [Int64] = kept.map { (i: Int) -> Int64 in Int64((Double(i) * 1000 / 120).rounded()) }
        let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
        #expect(abs(fps - 120) < 0.5 && variable, "\(fps) \(variable)")
    }

    @Test("where a frame is a tick or two (AVI's 1/25 time base), a one-tick step is a real change: 25 fps with stretches at 12.5 is variable")
    func coarseTicks() throws {
        var t: Int64 = 0
        let pts = (0..<240).map { i -> Int64 in t += (i / 20) % 2 == 0 ? 1 : 2; return t }
        let (_, variable) = try #require(Prober.frameRate(pts: pts, timeBase: AVRational(num: 1, den: 25)))
        #expect(variable)
    }

    @Test("one damaged timestamp hours away does not drag the rate down")
    func damagedTimestamp() throws {
        var pts = (0..<240).map { Int64($0) * 40 }
        pts[100] = 13 * 3600 * 1000
        let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
        #expect(abs(fps - 25) < 0.001, "\(fps)")
        #expect(!variable)
    }

    @Test("23.976 fps VP9 in WebM, whose hidden frames come 1 ms after a shown one, is 23.976 (it read 25.7)")
    func hiddenFrames() throws {
        var pts = (0..<240).map { Int64((Double($0) * 1001 / 24).rounded()) }
        for i in stride(from: 230, to: 0, by: -12) { pts.insert(pts[i] + 1, at: i + 1) }
        let (fps, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
        #expect(abs(fps - 23.976) < 0.01, "\(fps)")
        #expect(!variable)
    }

    @Test("steps that wander (screen recordings, phone video) are variable")
    func variable() throws {
        var t: Int64 = 0
        let pts = (0..<240).map { i -> Int64 in t += [33, 50, 40, 66, 33][i % 5]; return t }
        let (_, variable) = try #require(Prober.frameRate(pts: pts, timeBase: ms))
        #expect(variable)
    }
}

@Suite("track names")
struct TrackTitleTests {
    @Test("a track's title, else its MP4 handler name unless a muxer's own for any track (SoundHandler, Android's SoundHandle, Core Media Audio)")
    func names() throws {
        var context = avformat_alloc_context()
        defer { avformat_free_context(context) }
        let st = try #require(avformat_new_stream(context, nil))
        func title(_ tags: [(String, String)]) -> String? {
            av_dict_free(&st.pointee.metadata)
            for (k, v) in tags { av_dict_set(&st.pointee.metadata, k, v, 0) }
            return trackTitle(st)
        }
        #expect(title([("title", "Commentary"), ("handler_name", "Stereo mix")]) == "Commentary")
        #expect(title([("handler_name", "Stereo mix")]) == "Stereo mix")
        for generic in ["SoundHandler", "SoundHandle", "VideoHandle", "Core Media Audio", "GPAC ISO Audio Handler", "  ", "ISO Media file produced by Google Inc."] {
            #expect(title([("handler_name", generic)]) == nil, "\(generic)")
        }
        _ = context
    }
}

@Suite("a Matroska file's end from its last cluster")
struct MatroskaTailTests {
    /// Eight seconds of pictures and AAC, written with cues or live (without).
    static func clip(live: Bool) throws -> String {
        try Media.generated("tail-\(live ? "live" : "cued").mkv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=8",
                                                                   "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=8",
                                                                   "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac",
                                                                   "-live", live ? "1" : "0", "-f", "matroska"])
    }

    @Test("the last cluster's blocks are read from the file's tail, with or without the cluster's size (a live writer leaves it unknown)",
          arguments: [false, true])
    func lastBlocks(live: Bool) throws {
        let source = try Self.clip(live: live)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: source)))
        let blocks = try #require(MatroskaTail.lastCluster(Array(bytes.suffix(Int(Prober.tailBytes))))?.blocks, "no cluster read")
        let last = try #require(blocks.map(\.time).max())
        // ffprobe's last packet times, in the file's milliseconds.
        let packets = try Run.command("ffprobe", ["-v", "error", "-show_entries", "packet=pts", "-of", "csv=p=0", source]).stdout
        let latest = packets.split(separator: "\n").compactMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.max()
        #expect(last == latest, "\(blocks.suffix(4))")
        #expect(Set(blocks.map(\.track)) == [1, 2], "\(blocks.suffix(4))")
        // A tail inside the last cluster holds none to read: the probe reads further back.
        #expect(MatroskaTail.lastCluster(Array(bytes.suffix(1000))) == nil)
        let info = try Prober.probe(path: source)
        #expect(abs(info.durationSeconds - 8) < 0.1, "\(info.durationSeconds)")
    }

    @Test("a film-length Matroska recording written live (no duration, no cues: 115,000 packets) is measured to its end, 1,600 s (the byte seek to its tail made the demuxer read from the start, and it was measured at the 100,000th packet, 1,392 s)")
    func longLiveRecording() throws {
        let source = try Media.generated("looped-200-live.mkv", ["-stream_loop", "199", "-i", try Self.clip(live: false), "-c", "copy",
                                                                 "-live", "1", "-f", "matroska"])
        let info = try Prober.probe(path: source)
        #expect(abs(info.durationSeconds - 1600) < 0.5, "\(info.durationSeconds)")
        #expect(info.warnings.contains("duration_measured"), "\(info.warnings)")
    }
}

@Suite("a damaged Matroska tail")
struct MatroskaTailDamageTests {
    @Test("a tail of block groups nested a million deep, or of clusters every 12 bytes each with a timestamp and no block, answers at once without a crash: no end")
    func hostileTails() {
        // A cluster of unknown size, its timestamp, then block groups nested, each as long
        // as the rest (an 8-byte size).
        var nested: [UInt8] = [0x1F, 0x43, 0xB6, 0x75, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xE7, 0x81, 0x05]
        for _ in 0..<1_000_000 { nested += [0xA0, 0x01, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] }
        #expect(MatroskaTail.lastCluster(nested) == nil)
        // Cluster (4 bytes long), its timestamp, a void element, over and over.
        let many = (0..<400_000).flatMap { _ in [0x1F, 0x43, 0xB6, 0x75, 0x84, 0xE7, 0x81, 0x00, 0xEC, 0x80, 0xEC, 0x80] as [UInt8] }
        #expect(MatroskaTail.lastCluster(many) == nil)
    }
}

@Suite("a look at one place in a file")
struct LookTests {
    /// A 4 s MPEG-TS recording followed by 24 MB of random bytes (a tail overwritten).
    static func recordingWithJunk() throws -> String {
        try Media.generated("ts-4s-junk-24mb.ts") { tmp in
            let made = tmp + ".ts"
            defer { unlink(made) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=4",
                                               "-f", "lavfi", "-i", "sine=duration=4", "-c:v", "libx264", "-preset", "ultrafast",
                                               "-c:a", "aac", "-f", "mpegts", made])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            var random = SystemRandomNumberGenerator()
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: made)))
            bytes += (0..<(24 << 20)).map { _ in UInt8.random(in: 0...255, using: &random) }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("a look into junk (MPEG-TS finds a sync byte in random bytes every few hundred and reads on in one call) stops a look's bytes past where it began, and the file reads on from the next look: every look had read to the end of 30 MB of junk, and the probe ran out of time")
    func lookIntoJunk() throws {
        let source = try Self.recordingWithJunk()
        let demuxer = try Demuxer(path: source, cancellation: Cancellation())
        let packet = try Packet()
        let size = Int64(try #require(FileIO.size(atPath: source)))
        let from = size - (20 << 20)
        var found = 0
        #expect(demuxer.read(fromByte: from, limit: 10, into: packet) { _ in found += 1; return true })
        #expect(found == 0)
        let reached = avio_tell(demuxer.context.pointee.pb)
        #expect(reached - from <= Demuxer.lookBytes + (1 << 20), "read to \(reached - from) bytes past the look's start")
        // A look from inside that stretch is not read again.
        #expect(demuxer.read(fromByte: from + (1 << 20), limit: 10, into: packet) { _ in found += 1; return true })
        #expect(found == 0 && avio_tell(demuxer.context.pointee.pb) == reached)
        // Not canceled, and the recording reads from its start again.
        #expect(!demuxer.cancellation.isCanceled)
        try demuxer.rewind()
        #expect(try demuxer.read(into: packet))
    }

    @Test("a look stopped at its ceiling while libavformat's parser hands out what it held (an MPEG-2 PID that goes on in H.264: the parser holds all of it) leaves no error behind: the next read, a run's, had failed as canceled, which nobody asked for")
    func lookStoppedInsideHeldBytes() throws {
        let source = try Media.mpeg2ThenH264()
        let demuxer = try Demuxer(path: source, cancellation: Cancellation())
        let packet = try Packet()
        let size = Int64(try #require(FileIO.size(atPath: source)))
        // A look for one picture: the one the parser hands out when the ceiling stops its read.
        #expect(demuxer.read(fromByte: size - 3 * Demuxer.lookBytes, limit: 100_000, into: packet) { p in
            demuxer.stream(Int(p.streamIndex)).pointee.codecpar.pointee.codec_type != AVMEDIA_TYPE_VIDEO
        })
        try demuxer.rewind()
        var read = 0
        while try demuxer.read(into: packet) { read += 1; packet.unref() }
        #expect(read > 1000, "\(read) packets")
    }
}
