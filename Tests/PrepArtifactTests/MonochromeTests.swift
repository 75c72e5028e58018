import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A monochrome H.264 stream (4:0:0, legal in High profile: x264's `i400`, some scanners'
/// and surveillance recorders' output) decodes in libavcodec as 4:2:0 with grey chroma,
/// while phones' and TVs' hardware decoders refuse it. Only its SPS tells.
@Suite("monochrome H.264")
struct MonochromeTests {
    static func source(_ container: String) throws -> String {
        try Media.generated("h264-gray-2s.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2",
                                                         "-pix_fmt", "gray", "-c:v", "libx264", "-preset", "ultrafast"])
    }

    /// The chroma_format_idc of every SPS in `path`'s first video stream, as libavcodec's
    /// bitstream tracer reads it.
    static func chromaFormats(_ path: String) throws -> [Int] {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "trace", "-i", path, "-map", "0:v:0", "-c", "copy",
                                           "-bsf:v", "trace_headers", "-f", "null", "-"])
        return r.stderr.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: "chroma_format_idc") else { return nil }
            return line[range.upperBound...].split(separator: "=").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    @Test("is probed as 4:0:0 and re-encoded as 4:2:0 for devices, in MP4 and MPEG-TS", arguments: ["mp4", "ts"])
    func reencoded(_ container: String) throws {
        let source = try Self.source(container)
        #expect(try Self.chromaFormats(source).first == 0)
        let video = try #require(try Command.probedStreams(source).first)
        #expect(video["chroma"]?.int == 400)
        try Command.prepare(source, quality: "original", caps: "android", scratch: "mono-\(container)") { run, out in
            #expect(run.status == 0, "\(run.stderr)")
            let result = try Command.json(run)
            #expect(result["plan"]?["delivery_format"]?.string == "transcode")
            let formats = try Self.chromaFormats(out)
            #expect(!formats.isEmpty && formats.allSatisfy { $0 == 1 }, "\(formats)")
            #expect(try FFprobe.packetCount(out, "v") == 50)
        }
        // A colour H.264 stream of the same shape still goes as it is.
        let colour = try Media.generated("h264-colour-2s.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25", "-t", "2",
                                                                       "-pix_fmt", "yuv420p", "-c:v", "libx264", "-preset", "ultrafast"])
        #expect(try Command.probedStreams(colour).first?["chroma"]?.int == 420)
        #expect(try Command.planned([colour, "--quality", "original", "--caps", "android", "--json"])["delivery_format"]?.string != "transcode")
    }
}
