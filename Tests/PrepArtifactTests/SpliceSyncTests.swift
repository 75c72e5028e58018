import Foundation
import Testing
import KilnCore
import KilnTestSupport

@Suite("re-encoded sound stays on its pictures across a recording's parts")
struct SpliceSyncTests {
    /// Twelve parts of 5 s laid end to end, as a recording's are: black pictures with one
    /// white one at each part's second 1.0, and silence with a 1 kHz beep starting there.
    /// Each part's AC-3 runs 24 ms past its pictures (whole 32 ms frames), so the sound of
    /// a part overlaps the next one's start while its pictures do not.
    static let parts = 12

    static func recording() throws -> String {
        try Media.concatenatedTS("flash-beep-12-parts-5s.ts", parts: (0..<parts).map { i in
            ["-f", "lavfi", "-i", "color=c=black:size=320x240:rate=25:duration=5,"
                + "drawbox=x=0:y=0:w=320:h=240:color=white:t=fill:enable='between(t,1,1.039)'",
             "-f", "lavfi", "-i", "aevalsrc='if(between(t,1,1.1),0.5*sin(2*PI*1000*t),0)':s=48000:d=5",
             "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-c:a", "ac3", "-ac", "2",
             "-output_ts_offset", String(i * 5)]
        })
    }

    /// When each part's flash and beep start in `path`, in seconds (ffmpeg's blackdetect and
    /// silencedetect, an independent reading; each also ends a black or silent stretch at
    /// the file's end, which is not counted).
    static func flashesAndBeeps(_ path: String) throws -> (flashes: [Double], beeps: [Double]) {
        func times(_ filter: String, stream: String, key: String) throws -> [Double] {
            let r = try Run.command("ffmpeg", ["-nostdin", "-v", "info", "-i", path, "-map", stream, filter.hasPrefix("black") ? "-vf" : "-af",
                                               filter, "-f", "null", "-"])
            return Array(r.stderr.components(separatedBy: key).dropFirst().compactMap { Double($0.prefix { "0123456789.".contains($0) }) }
                .prefix(parts))
        }
        return (try times("blackdetect=d=0.02:pix_th=0.5", stream: "0:v:0", key: "black_end:"),
                try times("silencedetect=n=-30dB:d=0.05", stream: "0:a:0", key: "silence_end: "))
    }

    @Test("a recording whose parts' sound overlaps the next part's start, its sound re-encoded: each beep within 45 ms of its flash (the sound fell up to 93 ms behind before a frame was dropped; it is now cut where it overlaps, past 40 ms)")
    func overlapsCut() throws {
        let source = try Self.recording()
        // A browser plays no AC-3: the sound is re-encoded, the pictures copied.
        try Command.prepare(source, quality: "original", caps: "web", scratch: "splice-sync") { r, out in
            #expect(r.status == 0, "\(r.stdout) \(r.stderr.suffix(300))")
            let json = try Command.json(r)
            #expect(json["plan"]?["audio"]?["action"] == .string("transcode") && json["plan"]?["video"]?["action"] == .string("copy"),
                    "\(r.stdout.prefix(500))")
            let (flashes, beeps) = try Self.flashesAndBeeps(out)
            #expect(flashes.count == Self.parts && beeps.count == Self.parts, "flashes \(flashes), beeps \(beeps)")
            let offsets = zip(flashes, beeps).map { Int((($1 - $0) * 1000).rounded()) }
            #expect(offsets.allSatisfy { abs($0) <= 45 }, "beep minus flash, ms: \(offsets)")
        }
        // The source's own, read the same way: the reading itself is right.
        let (sourceFlashes, sourceBeeps) = try Self.flashesAndBeeps(source)
        #expect(zip(sourceFlashes, sourceBeeps).allSatisfy { abs($1 - $0) < 0.01 }, "\(sourceFlashes) \(sourceBeeps)")
    }
}
