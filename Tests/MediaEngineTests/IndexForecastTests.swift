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
    static func remux(_ path: String, forecast: Bool = true) throws -> (PrepareResult, String)? {
        let opened = try Prober.open(path: path)
        guard let plan = EnginePlans.remux(opened.info) else { return nil }
        let dir = Media.scratch("forecast")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        // Waiting for the forecast: on files this small it is slower than the remux itself,
        // which would otherwise not wait and hash afterwards.
        let result = try Preparer.prepare(source: opened, plan: plan, output: out,
                                          forecastFromBytes: forecast ? 0 : IndexForecast.minimumSourceBytes,
                                          awaitForecast: true)
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

    @Test("a claim holds only for the head and index offset the index move really wrote")
    func claimMatching() {
        let claim = StreamingDigest.Claim(sha256: "x", bytes: 10, head: [1, 2, 3], dataEnd: 100)
        #expect(claim.matches(FastStart.Outcome(method: .inserted, head: [1, 2, 3], dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .inserted, head: [1, 2, 4], dataEnd: 100)))
        #expect(!claim.matches(FastStart.Outcome(method: .inserted, head: [1, 2, 3], dataEnd: 101)))
        #expect(!claim.matches(FastStart.Outcome(method: .rewritten)), "a rewritten file has another head")
        #expect(!claim.matches(nil))
    }
}
