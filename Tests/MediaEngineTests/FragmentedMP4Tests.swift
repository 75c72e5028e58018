import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// MP4 in movie fragments as downloads and recorders write it: ffmpeg's fragmented output
/// (OBS, screen recorders), an HLS download's segments laid end to end, DASH with a segment
/// index, and a download cut short.
@Suite("fragmented MP4")
struct FragmentedMP4Tests {
    static func pictures(seconds: Int = 6) -> [String] {
        ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=30:duration=\(seconds)",
         "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(seconds)",
         "-c:v", "libx264", "-preset", "ultrafast", "-g", "30", "-c:a", "aac"]
    }

    /// ffmpeg's fragments (a moof a keyframe, no segment index): its pictures after the
    /// first are 21 ms on (the sound's priming), so the first lasts 55 ms.
    static func fragmented(seconds: Int = 6) throws -> String {
        try Media.generated(seconds == 6 ? "fragmented-30fps.mp4" : "fragmented-30fps-\(seconds)s.mp4",
                            pictures(seconds: seconds) + ["-movflags", "frag_keyframe+empty_moov+default_base_moof"])
    }

    /// An HLS download: its init segment and its 2 s fMP4 segments laid end to end, each
    /// segment with a `sidx` a track of its own 2 s.
    static func hlsDownload() throws -> String {
        try Media.generated("hls-fmp4-concatenated.mp4") { tmp in
            let dir = Media.scratch("hls")
            defer { try? FileManager.default.removeItem(at: dir) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + pictures()
                + ["-f", "hls", "-hls_time", "2", "-hls_segment_type", "fmp4", "-hls_playlist_type", "vod",
                   dir.appendingPathComponent("list.m3u8").path])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".m4s") }
                .sorted { $0.count != $1.count ? $0.count < $1.count : $0 < $1 }
            var bytes = try Data(contentsOf: dir.appendingPathComponent("init.mp4"))
            for s in segments { bytes += try Data(contentsOf: dir.appendingPathComponent(s)) }
            try bytes.write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("a fragmented MP4 whose first picture is held 55 ms is re-encoded at its 30 fps, every picture at its own time: at its average (29.89 fps over 6 s, 29.97 over 20) its pictures slid across the grid and the sound led them by up to 34 ms",
          arguments: [6, 20])
    func heldFirstPicture(seconds: Int) throws {
        let path = try Self.fragmented(seconds: seconds)
        let info = try Prober.probe(path: path)
        #expect(info.fragmented == true)
        let dir = Media.scratch("frag")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let plan = try #require(EnginePlans.transcode(info))
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        let rate = result.stats.ffmpegEquivalent.flatMap { args in args.firstIndex(of: "-r:0").map { args[$0 + 1] } }
        #expect(rate == "30/1")
        let source = try FFprobe.packetTimes(path, "v:0"), output = try FFprobe.packetTimes(out, "v:0")
        #expect(output.count == source.count)
        let offsets = zip(source, output).map { abs($0 - $1) }
        #expect(offsets.allSatisfy { $0 < 0.005 }, "\(offsets.max() ?? 0) s at most between a picture's time and its source's")
    }

    @Test("an HLS download (fMP4 segments laid end to end) is fragmented, its pictures' bitrate left to the file's size, and copied once through: read to its end by the probe and sent back, the reader gave its last segment again, and the copy stopped there and re-encoded the picture")
    func hlsSegmentsLaidEndToEnd() throws {
        let path = try Self.hlsDownload()
        let opened = try Prober.open(path: path)
        // Each segment's sidx indexes only its own 2 s: not an index of the file.
        #expect(opened.info.fragmented == true)
        // libavformat's figure counts the fragments it read at the start over the whole length.
        #expect(opened.info.videoStreams.first?.bitRate == nil)
        let dir = Media.scratch("hls")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let plan = try #require(EnginePlans.remux(opened.info))
        let result = try Preparer.prepare(source: opened, plan: plan, output: out)
        #expect(result.stats.adjustments == nil)
        #expect(result.executedPlan?.video?.action != .transcode)
        #expect(try FFprobe.packetCount(out, "v:0") == FFprobe.packetCount(path, "v:0"))
        #expect(abs(result.output.durationSeconds - 6) < 0.1)
    }

    @Test("a slideshow in fragments (120 s in 4 kB, under the 1 kbit/s at which the engine reads where its streams end before it believes the length) goes out whole: that read sent the run's reader back from the last fragment, and the copy was its last 30 s")
    func sparseSlideshow() throws {
        let path = try Media.generated("fragmented-slideshow-120s.mp4",
            ["-f", "lavfi", "-i", "color=c=blue:size=64x64:rate=1:duration=120", "-c:v", "libx264", "-preset", "ultrafast", "-g", "30",
             "-movflags", "frag_keyframe+empty_moov+default_base_moof"])
        let opened = try Prober.open(path: path)
        #expect(Double(opened.info.sizeBytes) * 8 / opened.info.durationSeconds < 1000)
        let dir = Media.scratch("slideshow")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let plan = try #require(EnginePlans.remux(opened.info))
        let result = try Preparer.prepare(source: opened, plan: plan, output: out)
        #expect(try FFprobe.packetCount(out, "v:0") == 120)
        #expect(abs(result.output.durationSeconds - 120) < 1.5, "\(result.output.durationSeconds) s")
    }

    @Test("fragments indexed by one segment index from the start (DASH on demand, ffmpeg's global_sidx) are not fragmented: players seek through it; its sound's bitrate is its samples' (libavformat's figure was a tenth of it, and a rung copied a sound it had no room for)")
    func globalSegmentIndex() throws {
        // Two minutes of SD at 29.97, which the probe's field survey reads at 30 % and 60 %
        // too: the sound's figure is its first samples' (over the span to the survey's, it
        // read a fraction of itself).
        let path = try Media.generated("fragmented-global-sidx-480p.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=854x480:rate=30000/1001:duration=120",
            "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=120",
            "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "300k", "-g", "60", "-c:a", "aac", "-b:a", "128k",
            "-movflags", "frag_keyframe+empty_moov+default_base_moof+global_sidx"])
        let info = try Prober.probe(path: path)
        #expect(info.fragmented == nil)
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a", "-show_entries", "packet=size", "-of", "csv=p=0", path])
        let bits = r.stdout.split(separator: "\n").compactMap { Int($0) }.reduce(0, +) * 8
        let measured = Double(bits) / info.durationSeconds
        let probed = Double(try #require(info.audioStreams.first?.bitRate))
        #expect(abs(probed / measured - 1) < 0.05, "probed \(probed) bit/s, the packets hold \(measured)")
    }

    @Test("a segment index is read in both versions and either header size, to where its references end; one that references others (a hierarchy), or too short for its fields, indexes nothing and traps nothing")
    func segmentIndexBoxes() throws {
        func be(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * (n - 1 - $0))) } }
        /// A sidx at byte 100 whose first offset is 10 and whose references are `sizes`.
        func sidx(version: UInt8, large: Bool, sizes: [Int]) -> [UInt8] {
            var body: [UInt8] = [version, 0, 0, 0] + be(1, 4) + be(1000, 4)
            body += version == 0 ? be(0, 4) + be(10, 4) : be(0, 8) + be(10, 8)
            body += be(0, 2) + be(sizes.count, 2)
            for s in sizes { body += be(s, 4) + be(1000, 4) + be(0x9000_0000, 4) }
            return large ? be(1, 4) + Array("sidx".utf8) + be(16 + body.count, 8) + body : be(8 + body.count, 4) + Array("sidx".utf8) + body
        }
        let dir = Media.scratch("sidx")
        defer { try? FileManager.default.removeItem(at: dir) }
        func end(_ box: [UInt8]) throws -> Int64? {
            let path = dir.appendingPathComponent("box").path
            try Data([UInt8](repeating: 0, count: 100) + box).write(to: URL(fileURLWithPath: path))
            let file = try FileDescriptor(path: path, flags: O_RDONLY)
            return Prober.indexedEnd(file, FastStart.Box(type: "sidx", offset: 100, size: Int64(box.count)))
        }
        for version: UInt8 in [0, 1] {
            for large in [false, true] {
                let box = sidx(version: version, large: large, sizes: [500, 700])
                #expect(try end(box) == Int64(100 + box.count + 10 + 1200), "version \(version), 64-bit size \(large)")
            }
        }
        #expect(try end(sidx(version: 0, large: false, sizes: [500, 0x8000_0000 | 700])) == nil)
        // Version 1 in 32 bytes: its offsets lie past the box.
        #expect(try end(be(32, 4) + Array("sidx".utf8) + [1, 0, 0, 0] + [UInt8](repeating: 0, count: 20)) == nil)
    }

    @Test("a fragmented download cut short inside a fragment's sample table (its moof), which libavformat does not open, is refused as cut short, not as a file that is no media")
    func cutInsideAFragmentHeader() throws {
        let whole = try Self.fragmented()
        let path = try Media.generated("fragmented-cut-in-moof.mp4") { tmp in
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
            // The third fragment's moof, cut inside its sample table (its last 40 bytes).
            var offset = 0, moofs = 0, size = 0
            while offset + 8 <= bytes.count {
                size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                if String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self) == "moof" {
                    moofs += 1
                    if moofs == 3 { break }
                }
                guard size >= 8 else { throw TestFailure("a box of \(size) bytes at \(offset)") }
                offset += size
            }
            try Data(bytes.prefix(offset + size - 40)).write(to: URL(fileURLWithPath: tmp))
        }
        let error = #expect(throws: KilnError.self) { _ = try Prober.probe(path: path) }
        #expect(error?.code == .sourceCorrupt && error?.message.contains("cut short: its moof box") == true, "\(String(describing: error))")
    }

    @Test("a fragmented download cut short inside a picture leaves that picture out, and counts it with every sample of the last fragment the file lost: the copy had written the picture's first bytes, which decoders report as damage, and the sound laid after the pictures went missing uncounted")
    func cutInsideItsLastSample() throws {
        let whole = try Self.fragmented()
        let bytes = try Data(contentsOf: URL(fileURLWithPath: whole))
        let cut = bytes.count * 6 / 10
        let path = try Media.generated("fragmented-cut-60pc.mp4") { tmp in try bytes.prefix(cut).write(to: URL(fileURLWithPath: tmp)) }
        let info = try Prober.probe(path: path)
        let dir = Media.scratch("cut")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: try #require(EnginePlans.remux(info)), info: info, output: out)
        #expect(try FFprobe.decodeErrors(out) == "")
        // The fragments the cut file still has list the whole file's samples before the
        // next fragment's start: those not in the output are the ones counted.
        var offset = 0, fragmentEnd = bytes.count
        while offset + 8 <= bytes.count {
            let size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            if offset >= cut, String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self) == "moof" { fragmentEnd = offset; break }
            guard size >= 8 else { break }
            offset += size
        }
        let r = try Run.command("ffprobe", ["-v", "error", "-show_entries", "packet=pos", "-of", "csv=p=0", whole])
        let listed = r.stdout.split(separator: "\n").compactMap { Int($0) }.filter { $0 < fragmentEnd }.count
        let written = try FFprobe.packetCount(out, "v:0") + FFprobe.packetCount(out, "a:0")
        #expect(written < listed && result.stats.corruptPackets == listed - written, "\(listed) listed, \(written) written, \(result.stats.corruptPackets) counted")
    }
}
