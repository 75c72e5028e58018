import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// HDR recordings whose pictures change mid-stream: the tone-mapping filters (two graphs
/// with the engine's curve between them) are made again for the new pictures, and the
/// old ones give up what they still hold first.
@Suite("HDR pictures that change mid-stream")
struct HDRChangeTests {
    /// Three seconds of 640x360 HDR10 HEVC, then three of 1280x720, in one MPEG-TS stream.
    static func recording() throws -> String {
        try Media.concatenatedTS("hdr10-360p-then-720p.ts", parts: [("640x360", "0"), ("1280x720", "3")].map { size, offset in
            ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=3",
             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3",
             "-pix_fmt", "yuv420p10le", "-c:v", "libx265", "-preset", "ultrafast",
             "-x265-params", "log-level=error:keyint=25:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc:max-cll=1000,400",
             "-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc",
             "-c:a", "aac", "-output_ts_offset", offset]
        })
    }

    @Test("an HDR10 recording that goes from 360p to 720p is tone-mapped whole: every picture of both parts comes out once, the later part fitted in the first part's frame, the output SDR BT.709")
    func sizeChangeWhileToneMapping() throws {
        let source = try Self.recording()
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "hdr-size-change") { r, out in
            #expect(r.status == 0, "\(r.stdout.suffix(400)) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["video"]?["tone_map"] == .bool(true), "\(r.stdout.prefix(600))")
            let v = try #require(try FFprobe(out).streams("video").first)
            #expect(v["color_transfer"]?.string == "bt709" && v["color_primaries"]?.string == "bt709", "\(v)")
            #expect(v["width"]?.int == 640 && v["height"]?.int == 360, "the first part's frame: \(v)")
            // 75 pictures a part at 25 fps; none lost where the filters were made again.
            let count = try Run.command("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                                    "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", out])
            #expect(Int(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == 150, "\(count.stdout) \(count.stderr)")
            let decode = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr.prefix(300))")
            // The later part's pictures are tone-mapped too: testsrc2's white is not clipped
            // grey or left PQ-dark (a PQ code value read as BT.709 is far darker).
            let late = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-ss", "4.5", "-i", out, "-frames:v", "5",
                                                  "-vf", "signalstats,metadata=print:key=lavfi.signalstats.YMAX", "-f", "null", "-"])
            let maxima = late.stderr.split(separator: "\n").compactMap { $0.split(separator: "=").last.flatMap { Double($0) } }
            #expect(!maxima.isEmpty && maxima.allSatisfy { $0 > 180 }, "\(maxima)")
        }
    }
}
