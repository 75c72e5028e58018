import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A fragmented MP4 whose fragments are not laid in the order of their times: a segment
/// downloader that writes each segment as it arrives, with several fetched at once.
@Suite("fragments stored out of order")
struct FragmentOrderTests {
    /// 8 s in 1 s fragments (a moof at each keyframe, no `mfra`) at 1.5 Mbit/s (above the
    /// 1 Mbit/s rung: re-encoded there), its fragments laid in `order` (indices into the 8
    /// as ffmpeg wrote them). Their samples are found from their own moof, or, `placed`,
    /// at a place in the file (`base_data_offset`, ffmpeg's default), moved with them.
    static func fragments(_ name: String, order: [Int], placed: Bool = false) throws -> String {
        try Media.generated("fragments-\(name).mp4") { tmp in
            let whole = tmp + ".whole.mp4"
            defer { try? FileManager.default.removeItem(atPath: whole) }
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8",
                                               "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
                                               "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-qp", "8", "-c:a", "aac",
                                               "-movflags", placed ? "frag_keyframe+empty_moov" : "frag_keyframe+empty_moov+default_base_moof", whole])
            guard r.status == 0 else { throw TestFailure(r.stderr) }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: whole)))
            var head: [UInt8] = [], fragments: [(at: Int, bytes: [UInt8])] = []
            for box in boxes(bytes, 0..<bytes.count) {
                switch box.type {
                case "moof": fragments.append((box.range.lowerBound, Array(bytes[box.range])))
                case "mdat": fragments[fragments.count - 1].bytes += bytes[box.range]
                case "mfra": break  // its offsets are where ffmpeg laid the fragments; a downloader writes none
                default: head += bytes[box.range]
                }
            }
            guard fragments.count == 8 else { throw TestFailure("ffmpeg wrote \(fragments.count) fragments, not 8") }
            var out = head
            for k in order {
                var fragment = fragments[k].bytes
                if placed { moveData(&fragment, by: out.count - fragments[k].at) }
                out += fragment
            }
            try Data(out).write(to: URL(fileURLWithPath: tmp))
        }
    }

    /// The boxes (32-bit sizes) within `range` of `bytes`.
    static func boxes(_ bytes: [UInt8], _ range: Range<Int>) -> [(type: String, range: Range<Int>)] {
        var found: [(String, Range<Int>)] = []
        var at = range.lowerBound
        while at + 8 <= range.upperBound {
            let size = bytes[at..<at + 4].reduce(0) { $0 << 8 | Int($1) }
            guard size >= 8, at + size <= range.upperBound else { break }
            found.append((String(decoding: bytes[at + 4..<at + 8], as: UTF8.self), at..<at + size))
            at += size
        }
        return found
    }

    /// Each track fragment's `base_data_offset` (its `tfhd`'s 64 bits after the track ID)
    /// moved by `delta`, as the fragment is.
    static func moveData(_ fragment: inout [UInt8], by delta: Int) {
        let moof = boxes(fragment, 0..<fragment.count)[0].range
        for traf in boxes(fragment, moof.lowerBound + 8..<moof.upperBound) where traf.type == "traf" {
            for tfhd in boxes(fragment, traf.range.lowerBound + 8..<traf.range.upperBound) where tfhd.type == "tfhd" && fragment[tfhd.range.lowerBound + 11] & 1 != 0 {
                let at = tfhd.range.lowerBound + 16
                let moved = UInt64(bitPattern: Int64(fragment[at..<at + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }) + Int64(delta))
                for i in 0..<8 { fragment[at + i] = UInt8(truncatingIfNeeded: moved >> (56 - 8 * i)) }
            }
        }
    }

    /// Each decoded picture's checksum, in the order shown.
    static func pictures(_ path: String) throws -> [String] {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:v", "-f", "framemd5", "-"])
        guard r.status == 0 else { throw TestFailure(r.stderr) }
        return r.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last.map(String.init) }
    }

    @Test("two fragments swapped are read in the order of their times, and the whole film goes out, remuxed or re-encoded: every picture at its time, the remux's pictures those of the file stored in order, all its sound (read as stored, libavformat marked the late fragment's packets not shown, and the copy lost its second, 175 of 200 pictures, the transcode two, 150, each exit 0 with a gap of silence) (found by a helper's fragmented-MP4 audit)",
          arguments: [("original", "ios"), ("1mbps", "web")])
    func swapped(quality: String, caps: String) throws {
        let source = try Self.fragments("4-5-swapped", order: [0, 1, 2, 3, 5, 4, 6, 7])
        let inOrder = try Self.fragments("in-order", order: Array(0..<8))
        let times = try FFprobe.packetTimes(inOrder, "v:0"), sound = try FFprobe(inOrder).duration("audio") ?? 0
        try Command.prepare(source, quality: quality, caps: caps, scratch: "fragments-swapped-\(quality)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == (quality == "original" ? "remux" : "transcode"))
            #expect(json["stats"]?["corrupt_packets"]?.double ?? 0 == 0)
            let output = try FFprobe.packetTimes(out, "v:0")
            #expect(output.count == 200)
            #expect(output.count == times.count && zip(output, times).allSatisfy { abs($0 - $1) < 0.005 })
            #expect(abs((try FFprobe(out).duration("audio") ?? 0) - sound) < 0.05)
            #expect(try FFprobe.decodeErrors(out) == "")
            if quality == "original" { #expect(try Self.pictures(out) == Self.pictures(inOrder)) }
        }
    }

    @Test("an MP4 whose fragments' offsets were written before its index (sidx) went in ahead of them, as ffmpeg 5.1's global_sidx writes it, is read as written and goes out remuxed, every picture (read as stored, each fragment's samples came from the bytes before them: 25 of 200 pictures decoded, and the file went out as it was, or was refused as mostly damaged)",
          arguments: [("original", "ios"), ("1mbps", "web")])
    func indexInsertedAfterOffsets(quality: String, caps: String) throws {
        let source = try Media.generated("fragments-global-sidx.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
            "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-qp", "8", "-c:a", "aac", "-movflags", "frag_keyframe+global_sidx"])
        let written = try Media.generated("fragments-global-sidx-reference.mp4", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=8", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=8",
            "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-qp", "8", "-c:a", "aac", "-movflags", "frag_keyframe"])
        try Command.prepare(source, quality: quality, caps: caps, scratch: "fragments-global-sidx-\(quality)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let json = try Command.json(run)
            #expect(json["plan"]?["delivery_format"]?.string == (quality == "original" ? "remux" : "transcode"), "\(json["plan"] ?? .null)")
            #expect(try FFprobe.packetTimes(out, "v:0").count == 200)
            #expect(try FFprobe.decodeErrors(out) == "")
            #expect(abs((try FFprobe(out).duration("audio") ?? 0) - 8) < 0.1)
            if quality == "original" { #expect(try Self.pictures(out) == Self.pictures(written)) }
        }
        let probe = try Command.run(["probe", source, "--json"])
        #expect(probe.stdout.contains("fragment_offsets_shifted"), "\(probe.stdout.prefix(600))")
    }

    /// An HLS download of 8 s: its init segment, then its 1 s fMP4 segments (each with a
    /// `sidx` of its own) laid end to end in `order`.
    static func segments(_ name: String, order: [Int]) throws -> String {
        try Media.hlsSegments("hls-segments-\(name).mp4", seconds: 8, order: order)
    }

    @Test("an HLS download whose segments were written as they arrived, two by two, each segment's index (sidx) giving its own place, is remuxed whole: the pictures of the download written in order, all its sound")
    func segmentsAsTheyArrived() throws {
        let source = try Self.segments("pairs-swapped", order: [1, 0, 3, 2, 5, 4, 7, 6])
        let inOrder = try Self.segments("in-order", order: Array(0..<8))
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "segments-swapped") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let pictures = try Self.pictures(out), expected = try Self.pictures(inOrder)
            #expect(pictures.count == 200 && pictures == expected)
            // (libavformat's stream duration of the download is its first fragments'.)
            let sound = try FFprobe.packetCount(out, "a"), expectedSound = try FFprobe.packetCount(inOrder, "a")
            #expect(sound == expectedSound)
            #expect(try FFprobe.decodeErrors(out) == "")
        }
    }

    @Test("fragments swapped whose samples are placed by their offset in the file (base_data_offset: ffmpeg's default fragments) cannot be read from elsewhere, and are refused as damaged, exit 3, naming the disorder, before any work")
    func swappedPlaced() throws {
        let source = try Self.fragments("4-5-swapped-placed", order: [0, 1, 2, 3, 5, 4, 6, 7], placed: true)
        // The file is whole: ffmpeg reads every picture of it, at their places.
        #expect(try FFprobe.packetCount(source, "v") == 200)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "fragments-swapped-placed") { run, out in
            #expect(run.status == 3, "\(run.stdout.suffix(400))")
            let error = try Command.json(run)["error"]
            #expect(error?["code"] == .string("source_corrupt"))
            #expect(error?["message"]?.string?.contains("out of order") == true, "\(error ?? .null)")
            #expect(!FileManager.default.fileExists(atPath: out))
        }
    }

    @Test("a fragment missing, or one written again after the next, is no disorder: remuxed as before, the missing second a gap, the repeat left out",
          arguments: [("4-missing", [0, 1, 2, 3, 5, 6, 7], 175), ("4-repeated-late", [0, 1, 2, 3, 4, 5, 4, 6, 7], 200)])
    func missingOrRepeated(name: String, order: [Int], pictures: Int) throws {
        let source = try Self.fragments(name, order: order)
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "fragments-\(name)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let count = try FFprobe.packetCount(out, "v")
            #expect(count == pictures)
        }
    }
}
