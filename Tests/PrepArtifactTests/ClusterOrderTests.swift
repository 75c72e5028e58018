import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A Matroska or WebM file whose clusters are not stored in the order of their times: a
/// muxer that flushed them out of order, or two whole clusters swapped.
@Suite("Matroska clusters stored out of order")
struct ClusterOrderTests {
    /// A film of `seconds` at 25 fps made by ffmpeg with `codecs`, a cluster from each
    /// keyframe (one a second), as `format`; `mkvmerge` (its arguments) writes it again.
    static func film(_ name: String, _ codecs: [String], format: String = "matroska", seconds: Int = 10,
                     mkvmerge: [String]? = nil) throws -> String {
        let ext = format == "webm" ? "webm" : "mkv"
        return try Media.generated("cluster-order-\(name).\(ext)") { tmp in
            let made = tmp + ".ffmpeg.\(ext)"
            defer { unlink(made) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=\(seconds)",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=\(seconds)", "-g", "25"]
                                    + codecs + ["-cluster_time_limit", "5000", "-f", format, made])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            if let mkvmerge {
                let m = try Run.command("mkvmerge", ["-q"] + mkvmerge + ["-o", tmp, made])
                guard m.status == 0 || m.status == 1 else { throw TestFailure("mkvmerge: \(m.stdout) \(m.stderr)") }
            } else {
                try FileManager.default.moveItem(atPath: made, toPath: tmp)
            }
        }
    }

    /// An EBML variable-length number at `at`: its value (the length marker kept for an
    /// ID), its length, and whether it is all ones (an unknown size).
    static func number(_ b: [UInt8], _ at: Int, marker: Bool = false) -> (value: Int, length: Int, unknown: Bool) {
        let length = b[at].leadingZeroBitCount + 1
        var value = Int(marker ? b[at] : b[at] & (0xFF >> length)), ones = b[at] & (0xFF >> length) == 0xFF >> length
        for k in 1..<length {
            value = value << 8 | Int(b[at + k])
            ones = ones && b[at + k] == 0xFF
        }
        return (value, length, ones)
    }

    static let topLevel: Set<Int> = [0x1F43_B675, 0x1C53_BB6B, 0x1254_C367, 0x1941_A469, 0x1043_A770, 0x114D_9B74, 0x1549_A966, 0x1654_AE6B]

    /// The Segment's top-level elements: ID, where it begins, where its size is, where the
    /// next begins (a cluster of unknown size ends at the next top-level element).
    static func elements(_ b: [UInt8]) -> [(id: Int, range: Range<Int>, size: Int)] {
        let ebmlID = number(b, 0, marker: true), ebmlSize = number(b, ebmlID.length)
        let segment = ebmlID.length + ebmlSize.length + ebmlSize.value
        let segmentSize = number(b, segment + 4)
        var at = segment + 4 + segmentSize.length
        var found: [(Int, Range<Int>, Int)] = []
        while at + 2 < b.count {
            let id = number(b, at, marker: true), size = number(b, at + id.length)
            let data = at + id.length + size.length
            var end = data + size.value
            if size.unknown {
                end = data
                while end + 2 < b.count, case let child = number(b, end, marker: true), !topLevel.contains(child.value) {
                    let s = number(b, end + child.length)
                    end += child.length + s.length + s.value
                }
            }
            found.append((id.value, at..<min(end, b.count), at + id.length))
            at = end
        }
        return found
    }

    static func clusters(_ b: [UInt8]) -> [Range<Int>] { elements(b).filter { $0.id == 0x1F43_B675 }.map(\.range) }

    /// `bytes` with clusters `k` and `k + 1` swapped.
    static func swap(_ bytes: inout [UInt8], _ k: Int) throws {
        let c = clusters(bytes)
        try #require(c.count > k + 1 && c[k].upperBound == c[k + 1].lowerBound)
        bytes.replaceSubrange(c[k].lowerBound..<c[k + 1].upperBound, with: Array(bytes[c[k + 1]]) + Array(bytes[c[k]]))
    }

    /// `bytes` with every cluster's size unknown (all ones), and the Segment's (`segment`),
    /// as a live muxer writes them (MediaRecorder, OBS).
    static func unknownSizes(_ bytes: inout [UInt8], segment: Bool = true) {
        let ebmlID = number(bytes, 0, marker: true), ebmlSize = number(bytes, ebmlID.length)
        var places = segment ? [ebmlID.length + ebmlSize.length + ebmlSize.value + 4] : []
        places += elements(bytes).filter { $0.id == 0x1F43_B675 }.map(\.size)
        for at in places {
            let length = number(bytes, at).length
            bytes[at] = 0xFF >> (length - 1)
            for k in 1..<length { bytes[at + k] = 0xFF }
        }
    }

    /// Each decoded picture's checksum, in the order shown.
    static func pictures(_ path: String) throws -> [String] { try FragmentOrderTests.pictures(path) }

    @Test("two clusters swapped (the 5th and 6th seconds) are read in the order of their times: the remux is the in-order file's pictures frame for frame and all its sound, in sync, and a transcode has every picture at its time (read as stored, 203 of 250 pictures came out, exit 0); the probe says clusters_reordered",
          arguments: [("original", "ios"), ("1mbps", "web")])
    func swapped(quality: String, caps: String) throws {
        let inOrder = try Self.film("h264-aac", ["-c:v", "libx264", "-preset", "veryfast", "-b:v", "2M", "-c:a", "aac"])
        let dir = Media.scratch("clusters-swapped-\(quality)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: inOrder, in: dir, as: "swapped.mkv") { try Self.swap(&$0, 4) }.path
        let probe = try Command.probed(source)
        #expect(probe["clusters_reordered"] == .bool(true))
        #expect("\(probe["warnings"] ?? .null)".contains("clusters_reordered"), "\(probe["warnings"] ?? .null)")
        let clean = dir.appendingPathComponent("clean.mp4").path
        let made = try Command.run(["prepare", inOrder, "--quality", quality, "--caps", caps, "--output", clean, "--json"])
        try #require(made.status == 0, "\(made.stdout.suffix(300))")
        try Command.prepare(source, quality: quality, caps: caps, scratch: "clusters-swapped-\(quality)-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == (quality == "original" ? "remux" : "transcode"))
            #expect("\(json["plan"]?["reasons"] ?? .null)".contains("container_clusters_reordered") == (quality == "original"),
                    "\(json["plan"]?["reasons"] ?? .null)")
            #expect(json["stats"]?["adjustments"] == nil, "\(json["stats"]?["adjustments"] ?? .null)")
            let times = try FFprobe.packetTimes(out, "v:0"), expected = try FFprobe.packetTimes(clean, "v:0")
            #expect(times.count == 250)
            #expect(times.count == expected.count && zip(times, expected).allSatisfy { abs($0 - $1) < 0.005 })
            #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(clean, "a"))
            #expect(try FFprobe.decodeErrors(out) == "")
            let probe = try FFprobe(out)
            #expect(abs((probe.startTime("video") ?? 1) - (probe.startTime("audio") ?? 0)) < 0.05)
            if quality == "original" { #expect(try Self.pictures(out) == Self.pictures(clean)) }
        }
    }

    @Test("clusters swapped in Matroska and WebM of other codecs and block layouts (HEVC and AC-3; VP9 and Opus; VP8 and Vorbis; H.264 and laced AAC in BlockGroups written by mkvmerge; clusters of unknown size as a live muxer writes them) never go to a device that plays Matroska as they are: remuxed, the pictures of the file in order and all its sound, or, where the pictures cannot go into MP4 (VP8), re-encoded with every picture",
          arguments: [("hevc-ac3", "android-tv"), ("vp9-opus", "android"), ("vp8-vorbis", "web"), ("mkvmerge-blockgroups", "android"), ("live-vp8-opus", "web")])
    func codecs(_ name: String, caps: String) throws {
        let inOrder: String
        switch name {
        case "hevc-ac3": inOrder = try Self.film(name, ["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error", "-c:a", "ac3"])
        case "vp9-opus": inOrder = try Self.film(name, ["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "500k", "-c:a", "libopus"], format: "webm", seconds: 6)
        case "vp8-vorbis", "live-vp8-opus":
            inOrder = try Self.film(name, ["-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "500k", "-c:a", name == "vp8-vorbis" ? "libvorbis" : "libopus"],
                                    format: "webm", seconds: 6)
        default: inOrder = try Self.film(name, ["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"],
                                         mkvmerge: ["--engage", "no_simpleblocks", "--cluster-length", "1000ms"])
        }
        let dir = Media.scratch("clusters-swapped-\(name)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let ext = (inOrder as NSString).pathExtension
        let live = name.hasPrefix("live")
        let stored = live ? try damagedCopy(ofFile: inOrder, in: dir, as: "in-order.\(ext)") { Self.unknownSizes(&$0) }.path : inOrder
        let source = try damagedCopy(ofFile: stored, in: dir, as: "swapped.\(ext)") { try Self.swap(&$0, 3) }.path
        let expected = try Self.pictures(stored), sound = try FFprobe.packetCount(stored, "a")
        try Command.prepare(source, quality: "original", caps: caps, scratch: "clusters-swapped-\(name)-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            let delivery = json["plan"]?["delivery_format"]?.string
            #expect(delivery == (name.contains("vp8") ? "transcode" : "remux"), "\(json["plan"] ?? .null)")
            #expect("\(json["plan"]?["reasons"] ?? .null)".contains("container_clusters_reordered"), "\(json["plan"]?["reasons"] ?? .null)")
            #expect(try FFprobe.decodeErrors(out) == "")
            if delivery == "remux" {
                #expect(try Self.pictures(out) == expected)
                #expect(try FFprobe.packetCount(out, "a") == sound)
            } else {
                // As the file in order is re-encoded.
                let clean = dir.appendingPathComponent("clean.mp4").path
                let made = try Command.run(["prepare", stored, "--quality", "original", "--caps", caps, "--output", clean, "--json"])
                try #require(made.status == 0, "\(made.stdout.suffix(300))")
                let times = try FFprobe.packetTimes(out, "v:0"), cleanTimes = try FFprobe.packetTimes(clean, "v:0")
                #expect(times.count == expected.count && times.count == cleanTimes.count && zip(times, cleanTimes).allSatisfy { abs($0 - $1) < 0.005 })
                #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(clean, "a"))
            }
        }
    }

    @Test("clusters swapped with a Tags element stored among them (Tags and Chapters are found by their place, which moving the clusters would change) cannot be moved, and the file is refused as damaged, exit 3, naming the disorder, before any work")
    func swappedAroundTags() throws {
        let inOrder = try Self.film("h264-aac-small", ["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"], seconds: 6)
        let dir = Media.scratch("clusters-swapped-tags")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: inOrder, in: dir, as: "swapped-tags.mkv") { bytes throws in
            try Self.swap(&bytes, 3)
            // The 2nd cluster without its CRC-32 (BF 84 and 4 bytes, ffmpeg's), and an empty
            // Tags element (12 54 C3 67, a 2-byte size of 0) in the 6 bytes that frees before
            // it: no other byte moves.
            let second = Self.clusters(bytes)[1], size = Self.number(bytes, second.lowerBound + 4)
            let data = second.lowerBound + 4 + size.length
            try #require(bytes[data] == 0xBF && bytes[data + 1] == 0x84, "a CRC-32 first in the cluster")
            var header: [UInt8] = [0x12, 0x54, 0xC3, 0x67, 0x40, 0x00, 0x1F, 0x43, 0xB6, 0x75]
            let smaller = size.value - 6
            header += (0..<size.length).reversed().map { UInt8(truncatingIfNeeded: smaller >> (8 * $0)) }
            header[10] |= UInt8(0x80 >> (size.length - 1))
            bytes.replaceSubrange(second.lowerBound..<data + 6, with: header)
        }.path
        #expect(try FFprobe.packetCount(source, "v") == 150)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "clusters-swapped-tags-out") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_corrupt"))
            #expect(error?["message"]?.string?.contains("out of order") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("clusters of unknown size (as a live muxer writes them) in a Segment of known size (the file remuxed by mkvmerge, which keeps them so) are read whole: libavformat took the first for damage and left it out, and the remux lost the film's first second, 225 of 250 pictures, exit 0",
          arguments: [false, true])
    func unknownSizedClusters(swapped: Bool) throws {
        let film = try Self.film("mkvmerge-blockgroups", ["-c:v", "libx264", "-preset", "veryfast", "-c:a", "aac"],
                                 mkvmerge: ["--engage", "no_simpleblocks", "--cluster-length", "1000ms"])
        let dir = Media.scratch("clusters-unknown-size-\(swapped)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try damagedCopy(ofFile: film, in: dir, as: "unknown-size.mkv") { bytes throws in
            Self.unknownSizes(&bytes, segment: false)
            if swapped { try Self.swap(&bytes, 3) }
        }.path
        if !swapped {
            // Not to a device that plays Matroska as it is either: its player may be built
            // on libavformat. The file in order, its sizes known, goes as it is.
            let probe = try Command.probed(source)
            #expect(probe["clusters_unsized"] == .bool(true))
            #expect("\(probe["warnings"] ?? .null)".contains("clusters_unsized"), "\(probe["warnings"] ?? .null)")
            for (file, expected) in [(source, "remux"), (film, "original")] {
                let plan = try JSONValue.parse(Array(try Command.run(["plan", file, "--quality", "original", "--caps", "android-tv", "--json"]).stdout.utf8))["plan"]
                #expect(plan?["delivery_format"] == .string(expected), "\(file): \(plan ?? .null)")
                #expect("\(plan?["reasons"] ?? .null)".contains("container_clusters_unsized") == (expected == "remux"), "\(plan?["reasons"] ?? .null)")
            }
        }
        let clean = dir.appendingPathComponent("clean.mp4").path
        let made = try Command.run(["prepare", film, "--quality", "original", "--caps", "ios", "--output", clean, "--json"])
        try #require(made.status == 0, "\(made.stdout.suffix(300))")
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "clusters-unknown-size-\(swapped)-out") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let pictures = try Self.pictures(out)
            #expect(pictures.count == 250)
            #expect(try pictures == Self.pictures(clean))
            #expect(try FFprobe.packetCount(out, "a") == FFprobe.packetCount(clean, "a"))
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }
}
