import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Where a transcode's chroma lands against its luma, read as players read an output that
/// says nothing of its siting (left: co-sited with the left column, midway down).
@Suite("chroma siting")
struct ChromaSitingTests {
    /// A 1280x720 clip of soft red/green edges: two upright ones in the top half (at 30 % and
    /// 70 % of the width), two level ones in the bottom half (at 65 % and 85 % of the
    /// height), its 4:2:0 chroma sited at `location` (and tagged so), turned `rotation`; HEVC,
    /// which the web profile's devices do not decode, so that every plan re-encodes it.
    static func edges(_ location: String, rotation: Int) throws -> String {
        let ramp = { (v: String, at: String) in "clip((\(v)-\(at))/6+0.5\\,0\\,1)" }
        let t = "if(lt(Y\\,H/2)\\,\(ramp("X", "0.3*W"))-\(ramp("X", "0.7*W"))\\,\(ramp("Y", "0.65*H"))-\(ramp("Y", "0.85*H")))"
        let type = ["left": 0, "center": 1, "topleft": 2][location]!
        let upright = try Media.generated("edges-720p-hevc-chroma-\(location).mp4", [
            "-f", "lavfi", "-i", "color=black:size=1280x720:rate=24:duration=1,format=gbrp,geq=r='255*\(t)':g='255-255*\(t)':b=0",
            "-vf", "zscale=m=bt709:r=tv:c=\(location),format=yuv420p", "-c:v", "libx265", "-preset", "ultrafast", "-crf", "8",
            "-x265-params", "log-level=error:chromaloc=\(type)", "-chroma_sample_location", location, "-colorspace", "bt709", "-color_range", "tv"])
        guard rotation != 0 else { return upright }
        // The muxer writes a display matrix for a stream it copies, not for one encoded.
        return try Media.generated("edges-720p-hevc-chroma-\(location)-rot\(rotation).mp4",
                                   ["-i", upright, "-c", "copy", "-metadata:s:v", "rotate=\(rotation)"])
    }

    /// How far the chroma edges of `path`'s sixth picture lie from its luma edges, across
    /// and down, in luma pixels, after turning it back by `undo` (its chroma placed at left
    /// siting first, in 4:4:4, so the turn moves nothing).
    static func offsets(_ path: String, undo: String?) throws -> (across: Double, down: Double) {
        let raw = path + ".yuv"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-vf",
                                           "select=eq(n\\,5),zscale=cin=left,format=yuv444p" + (undo.map { "," + $0 } ?? ""),
                                           "-frames:v", "1", "-f", "rawvideo", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        let probe = try FFprobe(path)
        let stored = (try #require(probe.streams("video").first?["width"]?.int), try #require(probe.streams("video").first?["height"]?.int))
        let (w, h) = bytes.count == stored.0 * stored.1 * 3 && undo?.hasPrefix("transpose") == true ? (stored.1, stored.0) : stored
        #expect(bytes.count == w * h * 3)
        func plane(_ p: Int, _ x: Int, _ y: Int) -> Double { Double(bytes[p * w * h + y * w + x]) }
        // The centroid of a profile's slope near `at`.
        func edge(_ profile: [Double], _ at: Double) -> Double {
            var weight = 0.0, sum = 0.0
            let sign: Double = profile[min(profile.count - 1, Int(at) + 8)] > profile[max(0, Int(at) - 8)] ? 1 : -1
            for i in max(0, Int(at) - 12)..<min(profile.count - 1, Int(at) + 12) {
                let slope = max(0, sign * (profile[i + 1] - profile[i]))
                weight += slope
                sum += slope * (Double(i) + 0.5)
            }
            return sum / weight
        }
        func across(_ p: Int) -> [Double] { (0..<w).map { x in stride(from: h / 20, to: h * 9 / 20, by: 1).reduce(0) { $0 + plane(p, x, $1) } } }
        func down(_ p: Int) -> [Double] { (0..<h).map { y in stride(from: w / 20, to: w * 19 / 20, by: 1).reduce(0) { $0 + plane(p, $1, y) } } }
        let (yAcross, crAcross, yDown, crDown) = (across(0), across(2), down(0), down(2))
        let dx = [0.3, 0.7].map { edge(crAcross, $0 * Double(w)) - edge(yAcross, $0 * Double(w)) }
        let dy = [0.65, 0.85].map { edge(crDown, $0 * Double(h)) - edge(yDown, $0 * Double(h)) }
        return ((dx[0] + dx[1]) / 2, (dy[0] + dy[1]) / 2)
    }

    @Test("a transcode's chroma sits with its luma as players read it (left), within 0.15 px, whatever the source's siting, size or rotation: a centre-sited source at its own size came out half a pixel left, a left-sited one shrunk to 480 lines 0.27 px left, a top-left one half a pixel low, a turned one half a pixel off",
          arguments: [("center", 0, "2mbps"), ("left", 0, "1mbps"), ("topleft", 0, "2mbps"), ("left", 90, "2mbps"), ("left", 180, "1mbps"), ("left", 270, "1mbps")])
    func sitedWithItsLuma(location: String, rotation: Int, quality: String) throws {
        let source = try Self.edges(location, rotation: rotation)
        try Command.prepare(source, quality: quality, caps: "web", scratch: "chroma-\(location)-\(rotation)-\(quality)") { r, out in
            let action = try Command.json(r)["plan"]?["video"]?["action"]
            #expect(r.status == 0 && action == .string("transcode"), "\(r.stdout)")
            // ffmpeg's rotate=90 is shown turned a quarter counter-clockwise.
            let undo = [90: "transpose=clock", 180: "hflip,vflip", 270: "transpose=cclock"][rotation]
            let (dx, dy) = try Self.offsets(out, undo: undo)
            #expect(abs(dx) < 0.15 && abs(dy) < 0.15, "chroma \(dx) px across, \(dy) px down from the luma")
        }
    }
}
