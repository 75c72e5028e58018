import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// A display matrix that mirrors the picture (a front camera's selfie kept as the sensor
/// saw it), read as libavutil reads it: a turn, and a mirror beside it.
@Suite("mirrored display matrices")
struct DisplayMatrixTests {
    /// A 640x360 clip whose track header's matrix is [a b; c d] (16.16), at 6 Mbit/s so a
    /// 1 Mbps rung re-encodes it.
    static func matrixClip(_ name: String, _ m: (Int32, Int32, Int32, Int32)) throws -> String {
        let upright = try Media.generated("matrix-upright-640x360.mp4", ["-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=2",
                                                                          "-c:v", "libx264", "-b:v", "6M"])
        return try Media.generated("matrix-\(name).mp4") { tmp in
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: upright)))
            guard let at = bytes.firstRange(of: Array("tkhd".utf8))?.lowerBound else { throw TestFailure("no tkhd in \(upright)") }
            // Version 0: flags, times, track id, reserved, duration, reserved, layer,
            // alternate group, volume, reserved, then the matrix's nine 32-bit entries.
            let matrix = at + 4 + 4 + 20 + 16
            for (k, v) in [m.0, m.1, 0, m.2, m.3, 0, 0, 0, 0x4000_0000].enumerated() {
                for i in 0..<4 { bytes[matrix + 4 * k + i] = UInt8(truncatingIfNeeded: UInt32(bitPattern: v) >> (24 - 8 * UInt32(i))) }
            }
            try Data(bytes).write(to: URL(fileURLWithPath: tmp))
        }
    }

    @Test("a transcode shows a mirrored picture as players do: mirrored left to right, top to bottom, or across either diagonal (a left-to-right mirror, which libavutil reads as a turn of 180, came out upside down; found by a helper's audit); a copy keeps the matrix",
          arguments: [("hflip", (-0x10000, 0, 0, 0x10000), "hflip", 180), ("vflip", (0x10000, 0, 0, -0x10000), "vflip", 0),
                      ("transpose", (0, 0x10000, 0x10000, 0), "transpose=cclock_flip", 90),
                      ("antitranspose", (0, -0x10000, -0x10000, 0), "transpose=clock_flip", 270)] as [(String, (Int32, Int32, Int32, Int32), String, Int)])
    func mirrored(_ name: String, _ matrix: (Int32, Int32, Int32, Int32), _ shown: String, _ rotation: Int) throws {
        let source = try Self.matrixClip(name, matrix)
        let probed = try Command.probedStreams(source).first { $0["type"] == .string("video") }
        #expect(probed?["mirrored"] == .bool(true) && probed?["rotation"] == .number(Double(rotation)), "\(probed ?? .null)")
        try Command.prepare(source, quality: "1mbps", caps: "ios", scratch: "matrix-\(name)") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let plan = try Command.json(run)["plan"]?["video"]
            #expect(plan?["action"] == .string("transcode") && plan?["mirrored"] == .bool(true), "\(plan ?? .null)")
            let (w, h) = rotation % 180 == 0 ? (320, 180) : (180, 320)
            let output = try Self.luma(out, width: w, height: h, noAutorotate: false)
            let expected = try Self.luma(source, filter: shown, width: w, height: h)
            let turned = try Self.luma(source, filter: rotation % 180 == 0 ? "hflip,vflip" : "transpose=\(rotation == 90 ? "clock" : "cclock")", width: w, height: h)
            let right = TelecineTests.psnr(output, expected), wrong = TelecineTests.psnr(output, turned)
            #expect(right > 30 && right > wrong + 10, "\(name): \(right) dB as shown, \(wrong) dB as a turn")
        }
        try Command.prepare(source, quality: "original", caps: "ios", scratch: "matrix-\(name)-copy") { run, out in
            #expect(run.status == 0, "\(run.stdout.suffix(400))")
            let copied = try Command.probedStreams(out).first { $0["type"] == .string("video") }
            #expect(copied?["mirrored"] == .bool(true) && copied?["rotation"] == .number(Double(rotation)), "\(copied ?? .null)")
        }
    }

    /// The first picture's luma at `width`×`height`, `filter` applied to the stored picture
    /// (the source's matrix not applied).
    static func luma(_ path: String, filter: String? = nil, width: Int, height: Int, noAutorotate: Bool = true) throws -> [UInt8] {
        let raw = NSTemporaryDirectory() + "/kiln-matrix-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: raw) }
        let chain = (filter.map { [$0] } ?? []) + ["scale=\(width):\(height)"]
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + (noAutorotate ? ["-noautorotate"] : []) + ["-i", path, "-vf", chain.joined(separator: ","),
                                           "-frames:v", "1", "-pix_fmt", "gray", "-f", "rawvideo", raw])
        guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
    }
}
