import CFFmpeg
import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("Hashing a remux while it is written")
struct IndexForecastTests {
    /// Files whose remux must be hashed while written: MKV with text subtitles and with
    /// chapters, MP4 with E-AC-3, with rotation, HEVC HDR10, an MP4 whose index is at the end.
    static let mustHold = ["ax_sample_with_srt.mkv", "ax_sample_with_chapters.mkv", "sp_bear-640x360-ec3.mp4",
                           "mb_rotate-buck-bunny.mp4", "sp_bear-640x360-hevc-hdr10.mp4", "sp_bear-640x360-trailing-moov.mp4"]

    /// Remuxes `path` as the one-shot command does (probe, rewind, prepare), forecasting
    /// whatever its size; returns the result and the output file's own SHA-256.
    /// `readerFromProbe`: the forecast reads from a second reader the probe opened beside
    /// its own (as `prepare` does), rather than one the remux opens.
    static func remux(_ path: String, forecast: Bool = true, readerFromProbe: Bool = true) throws -> (PrepareResult, String)? {
        let opened = try Prober.open(path: path, secondReaderFrom: forecast && readerFromProbe ? .always : nil)
        #expect((opened.secondReader != nil) == (forecast && readerFromProbe))
        guard let plan = EnginePlans.remux(opened.info) else { return nil }
        let dir = Media.scratch("forecast")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        // Waiting for the forecast: on files this small it is slower than the remux itself,
        // which would otherwise not wait and hash afterwards.
        let result = try Preparer.prepare(source: opened, plan: plan, output: out,
                                          forecastFrom: forecast ? .always : .standard,
                                          awaitForecast: true)
        #expect(opened.secondReader == nil, "the remux takes the probe's second reader, or closes it")
        let reference = try Run.command("sha256sum", [out]).stdout.prefix(64)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["out.mp4"], "no temporary file left")
        return (result, String(reference))
    }

    @Test("every remux's SHA-256 is sha256sum's, whether or not the forecast held", arguments: Media.sharedFiles)
    func digestIsTheFiles(_ name: String) throws {
        guard !SharedMediaTests.unreadable.contains(name) else { return }
        guard let (result, reference) = try Self.remux(Media.shared(name)) else { return }
        #expect(result.output.sha256 == reference, "\(name)")
        if Self.mustHold.contains(name) {
            #expect(result.stats.hashedWhileWriting, "\(name): the forecast should have held")
        }
        if let audio = EnginePlans.remux(try Prober.probe(path: Media.shared(name), fingerprint: false))?.audio,
           audio.action == .transcode {
            #expect(!result.stats.hashedWhileWriting, "\(name): encoding plans are hashed afterwards")
        }
    }

    /// A film's shape in a few seconds: 720p H.264 with B-frames at a film's bitrate
    /// (frames of tens of kB) and E-AC-3 5.1 (whose frames the MP4 muxer parses).
    static func film(_ ext: String) throws -> String {
        try Media.generated("forecast-film-720p.\(ext)", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=24,noise=alls=12:allf=t+u", "-f", "lavfi",
            "-i", "sine=frequency=300:sample_rate=48000", "-t", "4", "-af", "pan=5.1|FL=c0|FR=c0|FC=c0|LFE=c0|BL=c0|BR=c0",
            "-c:v", "libx264", "-preset", "veryfast", "-b:v", "12M", "-c:a", "eac3", "-b:a", "640k"])
    }

    /// `film` as mkvmerge muxes it (as most MKV files are): audio frames laced into blocks,
    /// which the forecast must read in full, since libavformat parses every frame's header.
    static func mkvmergeFilm() throws -> String {
        try Media.generated("forecast-film-720p-mkvmerge.mkv") { tmp in
            let r = try Run.command("mkvmerge", ["-q", "-o", tmp, try film("mkv")])
            // 1: done with warnings.
            guard r.status <= 1, FileManager.default.fileExists(atPath: tmp) else {
                throw TestFailure("mkvmerge (installed by make deps) failed: \(r.stderr)")
            }
        }
    }

    @Test("a film's forecast skims: most of the source is not read a second time, and the digest is the file's",
          arguments: ["mkv", "mp4", "mkvmerge"], [false, true])
    func forecastSkims(_ kind: String, withFallback: Bool) throws {
        let path = kind == "mkvmerge" ? try Self.mkvmergeFilm() : try Self.film(kind)
        let opened = try Prober.open(path: path, secondReaderFrom: .always)
        var plan = try #require(EnginePlans.remux(opened.info))
        // A planner's copy comes with a re-encode to fall back on, and then watches the
        // picture size, which the forecast does not.
        if withFallback { plan.videoFallback = plan.video.map { var v = $0; v.action = .transcode; return v } }
        let dir = Media.scratch("forecast-skim")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: opened, plan: plan, output: out, forecastFrom: .always, awaitForecast: true)
        #expect(result.output.sha256 == String(try Run.command("sha256sum", [out]).stdout.prefix(64)))
        #expect(result.stats.hashedWhileWriting, "the skimming forecast held")
        let size = try #require(FileIO.size(atPath: path))
        #expect(result.stats.forecastSkippedBytes > size / 2, "skipped \(result.stats.forecastSkippedBytes) of \(size) bytes")
    }

    @Test("damaged films, forecast forced: a remux fails with a reason or claims the file's own digest, and the forecast still holds",
          arguments: ["mkv", "mp4", "mkvmerge"])
    func damagedFilms(_ kind: String) throws {
        let path = kind == "mkvmerge" ? try Self.mkvmergeFilm() : try Self.film(kind)
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let dir = Media.scratch("forecast-damaged")
        defer { try? FileManager.default.removeItem(at: dir) }
        var rng = SplitMix(seed: UInt64(kind.utf8.reduce(11) { $0 &* 31 &+ UInt64($1) }))
        // Past the container's headers, in the media both readers go through.
        let from = min(original.count / 8, 64 << 10)
        var held = 0, failed = 0
        for variant in 0..<6 {
            var bytes = original
            let at = from + Int(rng.next() % UInt64(original.count - from))
            switch variant % 3 {
            case 0:   // scattered bit damage
                for _ in 0..<24 { bytes[from + Int(rng.next() % UInt64(bytes.count - from))] ^= UInt8(truncatingIfNeeded: rng.next() | 1) }
            case 1:   // a zeroed stretch
                for i in at..<min(bytes.count, at + 4096 + Int(rng.next() % 65536)) { bytes[i] = 0 }
            default:  // cut short
                bytes = Array(bytes.prefix(at))
            }
            let source = dir.appendingPathComponent("v\(variant).\((path as NSString).pathExtension)")
            try Data(bytes).write(to: source)
            do {
                guard let (result, reference) = try Self.remux(source.path) else { continue }
                #expect(result.output.sha256 == reference, "\(kind) variant \(variant)")
                if result.stats.hashedWhileWriting { held += 1 }
            } catch let error as KilnError {
                failed += 1
                #expect(error.code != .internalError, "\(kind) variant \(variant): \(error)")
            }
        }
        // Both readers meet the same damage, so the forecast is as right as on a whole file.
        #expect(held > 0, "\(kind): the forecast held on none of \(6 - failed) remuxes")
    }

    @Test("a forecast reads in full what the copy rewrites or might parse: Annex B H.264 from AVI and MPEG-TS, FLAC",
          arguments: ["avi", "ts", "mkv"])
    func forecastReadsRewrittenPackets(_ ext: String) throws {
        // The MP4 muxer rewrites every Annex B packet into length prefixes; FLAC's frames
        // (24-bit 5.1 here) run past what a skimming reader keeps.
        let audio = ext == "mkv" ? ["-af", "pan=5.1|FL=c0|FR=c0|FC=c0|LFE=c0|BL=c0|BR=c0", "-c:a", "flac", "-sample_fmt", "s32"]
                                 : ["-c:a", "ac3"]
        let path = try Media.generated("forecast-whole-720p.\(ext)", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=24,noise=alls=12:allf=t+u", "-f", "lavfi",
            "-i", "sine=frequency=300:sample_rate=48000", "-t", "3",
            "-c:v", "libx264", "-preset", "veryfast", "-b:v", "12M"] + audio)
        let (result, reference) = try #require(try Self.remux(path))
        #expect(result.output.sha256 == reference)
        #expect(result.stats.hashedWhileWriting)
        #expect(result.stats.forecastSkippedBytes == 0)
    }

    @Test("a small source is hashed after the remux by default, with the same digest")
    func smallSourcesHashAfterwards() throws {
        let name = "sp_bear-640x360-ec3.mp4"
        guard let (after, reference) = try Self.remux(Media.shared(name), forecast: false),
              let (streamed, _) = try Self.remux(Media.shared(name)) else {
            Issue.record("no remux plan"); return
        }
        #expect(!after.stats.hashedWhileWriting)
        #expect(streamed.stats.hashedWhileWriting)
        #expect(after.output.sha256 == reference)
        #expect(streamed.output.sha256 == reference, "remuxes are deterministic: the same bytes either way")
        // A source probed without a second reader (the library entry point) gets one from the remux.
        let (own, _) = try #require(try Self.remux(Media.shared(name), readerFromProbe: false))
        #expect(own.stats.hashedWhileWriting)
        #expect(own.output.sha256 == reference)
    }

    @Test("only a probe for a prepare opens the second reader, and only for a source worth forecasting")
    func probeOpensTheSecondReaderWhenItHelps() throws {
        let path = Media.shared("sp_bear-640x360-ec3.mp4")
        #expect(try Prober.open(path: path).secondReader == nil)
        #expect(try Prober.open(path: path, preparing: true).secondReader == nil, "a few MB: hashed afterwards")
        #expect(try Prober.open(path: path, secondReaderFrom: .always).secondReader != nil)
        // An encode never forecasts: the remux closes the reader instead of holding it.
        let opened = try Prober.open(path: path, secondReaderFrom: .always)
        var plan = try #require(EnginePlans.remux(opened.info))
        plan.audio = EnginePlans.audio(opened.info, forceTranscode: true)
        let dir = Media.scratch("forecast-encode")
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try Preparer.prepare(source: opened, plan: plan, output: dir.appendingPathComponent("out.mp4").path,
                                          forecastFrom: .always, awaitForecast: true)
        #expect(!result.stats.hashedWhileWriting)
        #expect(opened.secondReader == nil)
    }

    @Test("the recorder keeps the head and the index, and refuses a layout whose media data was written twice")
    func recorderLayout() throws {
        func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let n = UInt32(payload.count + 8)
            return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + Array(type.utf8) + payload
        }
        func write(_ io: UnsafeMutablePointer<AVIOContext>, _ bytes: [UInt8]) {
            bytes.withUnsafeBufferPointer { avio_write(io, $0.baseAddress, Int32($0.count)) }
        }
        let ftyp = box("ftyp", Array("isom\0\0\u{2}\0isommp41".utf8))
        let media = [UInt8](repeating: 7, count: 100_000)
        let moov = box("moov", box("mvhd", [UInt8](repeating: 1, count: 100)))
        for rewriteMedia in [false, true] {
            let recorder = try IndexRecorder(headBytes: IndexForecast.prefixBytes)
            let io = recorder.io
            write(io, ftyp)
            write(io, [0, 0, 0, 0] + Array("mdat".utf8))  // its size patched at the end
            write(io, media)
            if rewriteMedia {
                avio_seek(io, Int64(ftyp.count + 8 + 50_000), SEEK_SET)
                write(io, [9, 9, 9, 9])
                avio_seek(io, 0, SEEK_END)
            }
            recorder.keepFromEnd()
            write(io, moov)
            avio_seek(io, Int64(ftyp.count), SEEK_SET)
            write(io, Array(box("mdat", media).prefix(8)))  // the size patched last, inside the head
            avio_flush(io)
            let layout = recorder.layout()
            if rewriteMedia {
                #expect(layout == nil, "a reader following the file would have hashed the old bytes")
            } else {
                let l = try #require(layout)
                #expect(l.ftyp == ftyp)
                #expect(l.moov == moov)
                #expect(l.moovOffset == Int64(ftyp.count + 8 + media.count))
                #expect(l.prefix == Array((ftyp + box("mdat", media)).prefix(IndexForecast.prefixBytes)))
            }
        }
    }

    @Test("a remux is forecast by default only on a machine with a core to spare and for an index of few samples: not beside busy processes (a third more CPU, which then takes the copy's turn), not for a two-hour film's 510,000 samples (the muxer's table held twice)")
    func forecastNeedsASpareCoreAndASmallIndex() throws {
        let opened = try Prober.open(path: Media.shared("sp_bear-640x360-ec3.mp4"))
        let demuxer = try opened.demuxer()
        let film: Int64 = 3 << 30
        #expect(IndexForecast.worthwhile(sourceBytes: film, main: demuxer, from: .standard, idleCores: 2, samples: 60_000) == IndexForecast.staysCached(sourceBytes: film))
        #expect(IndexForecast.worthwhile(sourceBytes: 300 << 20, main: demuxer, from: .standard, idleCores: nil, samples: 60_000), "not known: taken as idle")
        #expect(!IndexForecast.worthwhile(sourceBytes: 300 << 20, main: demuxer, from: .standard, idleCores: 0.4, samples: 60_000))
        #expect(!IndexForecast.worthwhile(sourceBytes: 300 << 20, main: demuxer, from: .standard, idleCores: 2, samples: 510_000))
        #expect(!IndexForecast.worthwhile(sourceBytes: 20 << 20, main: demuxer, from: .standard, idleCores: 2, samples: 1_000))
        #expect(IndexForecast.worthwhile(sourceBytes: 300 << 20, main: demuxer, from: .always, idleCores: 0, samples: 510_000), "tests force it")
    }

    @Test("the forecast reads a source only when it stays in the page cache for the copy that follows")
    func onlyCachedSources() {
        #expect(IndexForecast.staysCached(sourceBytes: 300 << 20), "this machine has gigabytes free")
        #expect(!IndexForecast.staysCached(sourceBytes: 1 << 50), "a petabyte would be read from its disk twice")
    }

    @Test("a claim holds only for the head and index offset the index move really wrote")
    func claimMatching() {
        func head(_ bytes: [UInt8], length: Int64 = 4096, inserted: Int64 = 0) -> FastStart.Head.Mark {
            FastStart.Head(bytes: bytes, length: length, inserted: inserted).mark
        }
        let claim = StreamingDigest.Claim(sha256: "x", bytes: 10, head: head([1, 2, 3]), dataEnd: 100)
        #expect(claim.matches(FastStart.Outcome(method: .inRoom, head: head([1, 2, 3]), dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .inRoom, head: head([1, 2, 4]), dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .inRoom, head: head([1, 2, 3]), dataEnd: 101)))
        #expect(!claim.matches(FastStart.Outcome(method: .inRoom, head: head([1, 2, 3], length: 8192), dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .inserted, head: head([1, 2, 3], inserted: 4096), dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .rewritten)), "a rewritten file has another head")
        #expect(!claim.matches(nil))
    }
}

@Suite("Verification's one-row pictures")
struct OneRowPictureTests {
    /// Whether a keyframe decodes (frames, packets rejected) with `sharedPicture` or a
    /// whole picture of its own.
    static func outcome(_ demuxer: Demuxer, _ index: Int, _ packet: Packet, shared: Bool) throws -> (frames: Int, rejected: Int) {
        let decoder = try Decoder(stream: demuxer.stream(index), threads: 1, sharedPicture: shared)
        var frames = 0
        let count = { (frame: Frame) throws(KilnError) in
            frames += 1
            // One row per plane: every row of the picture is the same memory.
            #expect((frame.pointer.pointee.linesize.0 == 0) == shared)
        }
        do {
            try decoder.decode(packet, count)
            try decoder.decode(nil, count)
        } catch {
            return (frames, decoder.corruptPackets + 1)
        }
        return (frames, decoder.corruptPackets)
    }

    @Test("H.264 and HEVC keyframes, intact or damaged, decode into one row per plane with the outcome of a whole picture",
          arguments: ["sp_bear-640x360-ec3.mp4", "mb_rotate-buck-bunny.mp4", "sp_bear-640x360-hevc-hdr10.mp4", "ax_hlg10-color-test.mp4"])
    func sameOutcome(_ name: String) throws {
        let demuxer = try Demuxer(path: Media.shared(name), cancellation: Cancellation())
        let index = demuxer.firstVideoStream
        let packet = try Packet()
        var keyframes = 0, rejectedDamaged = 0
        while keyframes < 3, try demuxer.read(into: packet) {
            defer { packet.unref() }
            guard packet.streamIndex == Int32(index), packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 else { continue }
            keyframes += 1
            let intact = try Self.outcome(demuxer, index, packet, shared: true)
            #expect(intact.frames == 1 && intact.rejected == 0, "\(name): an intact keyframe decodes")
            #expect(try Self.outcome(demuxer, index, packet, shared: false) == intact)
            // Damage two ways: bits flipped in the slice data's second half (which the
            // decoders conceal: the verdicts must still agree), and a NAL unit length that
            // runs past the packet (which they reject).
            for damage in 0..<2 {
                let copy = try Packet()
                #expect(av_packet_ref(copy.pointer, packet.pointer) == 0 && av_packet_make_writable(copy.pointer) == 0)
                let data = copy.pointer.pointee.data!, size = Int(copy.pointer.pointee.size)
                if damage == 0 {
                    for i in stride(from: size / 2, to: size, by: 5) { data[i] ^= 0xA5 }
                } else {
                    data[0] = 0x7f; data[1] = 0xff
                }
                let damaged = try Self.outcome(demuxer, index, copy, shared: true)
                #expect(try Self.outcome(demuxer, index, copy, shared: false) == damaged, "\(name): the same verdict on damage \(damage)")
                if damage == 1, damaged.rejected > 0 || damaged.frames == 0 { rejectedDamaged += 1 }
            }
        }
        #expect(keyframes > 0)
        #expect(rejectedDamaged == keyframes, "\(name): a broken NAL unit is found, so the comparison means something")
    }
}
