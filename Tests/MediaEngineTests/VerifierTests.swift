import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("Verification")
struct VerifierTests {
    /// Open-GOP HEVC: every keyframe after the first is a CRA whose reference set names
    /// pictures before it, which a decoder started there has to stand in for.
    static func openGOPHEVC() throws -> String {
        try Media.generated("open-gop-hevc-25.mkv", [
            // 25 fps: Matroska's millisecond timestamps stay exact (the checks compare them).
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=25", ] + Generated.tone + [
            "-t", "4", "-pix_fmt", "yuv420p10le", "-c:v", "libx265", "-preset", "ultrafast",
            "-x265-params", "log-level=error:open-gop=1:keyint=25:min-keyint=25:bframes=3",
            "-c:a", "aac", "-b:a", "96k"])
    }

    /// `path` remuxed by the engine (verified as it always is) into a scratch folder.
    private func remuxed(_ path: String, _ label: String) throws -> (MediaInfo, Plan, String, URL) {
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        let dir = Media.scratch(label)
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        return (info, plan, out, dir)
    }

    /// Cuts the file at 60 %: its index, at the front, still promises the rest.
    private func cutShort(_ out: String) throws {
        let size = try #require(try FileManager.default.attributesOfItem(atPath: out)[.size] as? Int)
        #expect(truncate(out, off_t(size * 6 / 10)) == 0)
    }

    @Test("after the probe's packet scan, codec parameters go back to what the analysis said, unless it left them incomplete")
    func parametersKept() throws {
        let path = Media.shared("ax_sample_ac3_aac.mp4")
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let audio = try #require((0..<demuxer.streamCount).first {
            demuxer.stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO })
        let par = demuxer.stream(audio).pointee.codecpar!
        let rate = par.pointee.sample_rate
        // What a parser does to a stream that changes format during the scan: put back.
        try demuxer.keepingParameters { () throws(KilnError) in par.pointee.sample_rate = 44_100 + (rate == 44_100 ? 1 : 0) }
        #expect(par.pointee.sample_rate == rate)
        // A stream the analysis could not complete keeps what the scan learnt.
        par.pointee.sample_rate = 0
        try demuxer.keepingParameters { () throws(KilnError) in par.pointee.sample_rate = 32_000 }
        #expect(par.pointee.sample_rate == 32_000)
    }

    @Test("a source check that reaches no keyframe is no evidence of damage (a TS seek near the end of a long GOP)")
    func noKeyframeIsNoEvidence() throws {
        // One keyframe, at the start of 6 s: MPEG-TS seeks by timestamp to any packet, so
        // the last second holds only pictures that need the ones before them.
        let path = try Media.generated("one-gop-6s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=6",
                                                         "-c:v", "libx264", "-preset", "ultrafast", "-g", "1000", "-f", "mpegts"])
        let cancellation = Cancellation()
        let demuxer = try Demuxer(path: path, cancellation: cancellation)
        let st = demuxer.stream(0)
        let start = seconds(st.pointee.start_time, st.pointee.time_base) ?? 0
        let second = try Verifier.decodeSecond(demuxer, stream: 0, from: start + 5, streamEnd: start + 6, cancellation: cancellation)
        #expect(second.frames == 0 && second.errors == 0, "the check found no keyframe to decode: \(second)")
        #expect(Preparer.damagedSecond(demuxer, stream: 0, from: start + 5, streamEnd: start + 6, cancellation: cancellation) == nil)
        // Where a keyframe is reached, a clean decode is not damage either.
        #expect(Preparer.damagedSecond(demuxer, stream: 0, from: start, streamEnd: start + 6, cancellation: cancellation) == nil)
    }

    @Test("an open-GOP HEVC remux verifies: the keyframes at both ends decode into one shared picture")
    func openGOPVerifies() throws {
        let path = try Self.openGOPHEVC()
        let (info, plan, out, dir) = try remuxed(path, "verify-open-gop")
        defer { try? FileManager.default.removeItem(at: dir) }
        // Straight from the verifier too, so the test does not hang on what prepare does.
        let seen = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation())
        #expect(seen.videoStreams.first?.pixelFormat == "yuv420p10le", "the end's picture was decoded")
        // The independent decoder agrees the file decodes in full.
        #expect(try FFprobe.decodeErrors(out).isEmpty)
    }

    @Test("an output cut short fails verification: the index promises pictures the file does not hold")
    func truncatedFails() throws {
        let path = try Self.openGOPHEVC()
        let (info, plan, out, dir) = try remuxed(path, "verify-truncated")
        defer { try? FileManager.default.removeItem(at: dir) }
        try cutShort(out)
        #expect {
            try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation())
        } throws: { ($0 as? KilnError)?.code == .verifyFailed }
    }

    /// A witness fed the source's video keyframes as the copy lane feeds them (`indexed`:
    /// told where they are first, as a copy from an indexed source does).
    /// (`deferred`: decodes wait for the copying thread, as while an index forecast runs.)
    private func witness(for path: String, duration: Double, indexed: Bool = false, deferred: Bool = false) throws -> KeyframeWitness {
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let index = demuxer.firstVideoStream
        let witness = try KeyframeWitness(stream: demuxer.stream(index), durationSeconds: duration)
        if deferred { witness.deferDecodes() }
        if indexed {
            // Matroska reads its cues at the first seek, as the probe's rewind does before a copy.
            try demuxer.rewind()
            witness.expectKeyframes(of: demuxer.stream(index), shift: 0)
        }
        let packet = try Packet()
        while try demuxer.read(into: packet) {
            defer { packet.unref() }
            if packet.streamIndex == Int32(index), packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 { try witness.offer(packet) }
        }
        return witness
    }

    @Test("keyframes decoded during the copy stand in for the output's identical ones: verification decodes no picture itself")
    func witnessedKeyframes() throws {
        let path = try Self.openGOPHEVC()
        let (info, plan, out, dir) = try remuxed(path, "verify-witness")
        defer { try? FileManager.default.removeItem(at: dir) }
        let w = try witness(for: path, duration: info.durationSeconds)
        let seen = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation(),
                                       witness: w)
        #expect(w.matches == 2, "the first keyframe and the last second's were both witnessed")
        #expect(seen.videoStreams.first?.pixelFormat == nil || seen.videoStreams.first?.pixelFormat == "yuv420p10le")

        // The output cut short still fails: the witness vouches for pictures, not for the
        // packets reaching the end.
        try cutShort(out)
        #expect {
            try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation(),
                                witness: try witness(for: path, duration: info.durationSeconds))
        } throws: { ($0 as? KilnError)?.code == .verifyFailed }
    }

    /// A keyframe every second for 14 s: ten of them fall in the 10 s before the last second.
    static func keyframeEverySecond() throws -> String {
        try Media.generated("gop-1s-14s.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=14",
            "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0"])
    }

    @Test("with the source's index, the witness decodes only keyframes that can be the last second's, not every one before")
    func indexSparesDecodes() throws {
        let path = try Self.keyframeEverySecond()
        let (info, plan, out, dir) = try remuxed(path, "verify-witness-index")
        defer { try? FileManager.default.removeItem(at: dir) }
        let blind = try witness(for: path, duration: info.durationSeconds)
        let told = try witness(for: path, duration: info.durationSeconds, indexed: true)
        #expect(blind.queued >= 10, "without the index each newer keyframe is queued: \(blind.queued)")
        // The first, and those within half a second of the last second's start.
        #expect(told.queued <= 3, "queued \(told.queued)")
        // And those it decoded are still the ones verification asks about.
        _ = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation(),
                                witness: told)
        #expect(told.matches == 2)
    }

    @Test("while a forecast holds the second core the witness decodes nothing beside the copy; verification then decodes only the keyframes it asks about, once")
    func deferredWitness() throws {
        let path = try Self.keyframeEverySecond()
        let (info, plan, out, dir) = try remuxed(path, "verify-witness-deferred")
        defer { try? FileManager.default.removeItem(at: dir) }
        let eager = try witness(for: path, duration: info.durationSeconds)
        let deferred = try witness(for: path, duration: info.durationSeconds, deferred: true)
        // A worker decodes as keyframes come (on a loaded machine it may start only after the
        // read: given time, it has, while the deferred witness below never does on its own).
        let deadline = Date(timeIntervalSinceNow: 60)
        while eager.waiting == eager.entries.count && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(eager.waiting < eager.entries.count, "a worker decodes as keyframes come")
        // Each newer keyframe before the last second replaced the one still waiting.
        #expect(deferred.waiting == deferred.entries.count && deferred.entries.count <= 3,
                "\(deferred.waiting) waiting of \(deferred.entries.count) (\(deferred.queued) queued)")
        _ = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation(),
                                witness: deferred)
        #expect(deferred.matches == 2 && deferred.waiting == 0)
    }

    @Test("no witness where the MP4 copy rewrites the samples (H.264/HEVC in Annex B: MPEG-TS), whose decodes verification could never take")
    func noWitnessForAnnexB() throws {
        let mkv = try Self.openGOPHEVC()
        let ts = try Media.generated("open-gop-hevc-25.ts", ["-i", mkv, "-c", "copy", "-f", "mpegts"])
        let mpeg2 = try Media.generated("mpeg2-1s.ts", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=1",
                                                        "-c:v", "mpeg2video", "-f", "mpegts"])
        for (path, keeps) in [(mkv, true), (ts, false), (Media.shared("sp_bear-1280x720-hevc.mp4"), true), (mpeg2, true)] {
            let demuxer = try Demuxer(path: path, cancellation: Cancellation())
            #expect(KeyframeWitness.copyKeepsSamples(demuxer.stream(demuxer.firstVideoStream)) == keeps, "\(path)")
        }
        // And indeed: the TS's remux verifies without taking any keyframe from a witness of
        // the source's packets.
        let (info, plan, out, dir) = try remuxed(ts, "verify-witness-ts")
        defer { try? FileManager.default.removeItem(at: dir) }
        let w = try witness(for: ts, duration: info.durationSeconds)
        _ = try Verifier.verify(path: out, plan: plan, expectedDuration: info.durationSeconds, cancellation: Cancellation(), witness: w)
        #expect(w.matches == 0)
    }

    @Test("a witness is not believed for another stream's parameters or other bytes")
    func witnessOnlyForTheSameBytes() throws {
        let hevc = try Self.openGOPHEVC()
        let other = Media.shared("ax_sample_with_srt.mkv")
        let (info, _, out, dir) = try remuxed(other, "verify-witness-other")
        defer { try? FileManager.default.removeItem(at: dir) }
        let stranger = try witness(for: hevc, duration: info.durationSeconds)
        let demuxer = try Demuxer(path: out, cancellation: Cancellation(), analyze: false)
        let v = demuxer.firstVideoStream
        #expect(!Verifier.sameParameters(demuxer.stream(v), stranger))
        // Even handed to the decode loop, it matches no packet of this file: the file's own
        // keyframes are decoded.
        try Verifier.decodes(demuxer, stream: v, from: 0, streamEnd: info.durationSeconds, cancellation: Cancellation(),
                             witness: stranger)
        #expect(stranger.matches == 0)
    }

    @Test("a failed verification of a source whose timestamps the pipeline had to repair is the source's damage (permanent), not a retryable write failure; without that evidence it stays verify_failed")
    func repairedTimesBlameTheSource() throws {
        let path = Media.shared("sp_bear-640x360-ec3.mp4")
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let info = try Prober.probe(path: path, fingerprint: false)
        let failed = KilnError(.verifyFailed, stage: .verify, "the output lasts 6.20 s but the source 34.11 s")
        let blamed = Preparer.blameSource(failed, delivered: [:], lanes: [], demuxer: demuxer, info: info, expected: info.durationSeconds,
                                          timelineRepairs: 5, cancellation: Cancellation())
        #expect(blamed.code == .sourceCorrupt && blamed.message.contains("timestamps are damaged (5 packets"), "\(blamed)")
        let unblamed = Preparer.blameSource(failed, delivered: [:], lanes: [], demuxer: demuxer, info: info, expected: info.durationSeconds,
                                            cancellation: Cancellation())
        #expect(unblamed.code == .verifyFailed, "\(unblamed)")
    }
}
