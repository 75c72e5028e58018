import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// Checks an output the way a user's player would meet it, with ffprobe and a full
/// ffmpeg decode as the independent judge.
func checkOutput(_ path: String, plan: Plan, source: MediaInfo, sourcePath: String, lasting: Double? = nil) throws {
    let probe = try FFprobe(path)
    let video = probe.streams("video"), audio = probe.streams("audio"), subs = probe.streams("subtitle")
    #expect(video.count == (plan.video == nil ? 0 : 1), "video streams in \(sourcePath)")
    #expect(audio.count == (plan.audio == nil ? 0 : 1), "exactly one audio track in \(sourcePath)")
    #expect(subs.count == plan.subtitles.filter { $0.action == .convert }.count, "subtitle streams in \(sourcePath)")
    if let v = plan.video { #expect(video.first?["codec_name"]?.string == v.codec) }
    if let a = plan.audio { #expect(audio.first?["codec_name"]?.string == a.codec) }
    for s in subs { #expect(s["codec_name"]?.string == "mov_text") }
    // Nothing else but the chapter track (a QuickTime text track): no timecode track.
    let others = probe.streams.filter { !["video", "audio", "subtitle"].contains($0["codec_type"]?.string ?? "") }
    #expect(others.allSatisfy { $0["codec_tag_string"]?.string == "text" } && others.count <= 1,
            "no other track in \(sourcePath)'s output: \(others.compactMap { $0["codec_tag_string"]?.string })")
    #expect(try FFprobe.moovBeforeMdat(path), "index first in \(path)")
    // A clean full decode, unless the source's own streams already fail to decode cleanly
    // (then the output may carry the same damage, but no more).
    let decodeErrors = try FFprobe.decodeErrors(path)
    let kept = [plan.video?.sourceIndex, plan.audio?.sourceIndex].compactMap { $0 }
    let sourceErrors = try FFprobe.decodeErrors(sourcePath, streams: kept)
    #expect(decodeErrors.split(separator: "\n").count <= sourceErrors.split(separator: "\n").count,
            "clean decode of \(sourcePath)'s output: \(decodeErrors)")
    // Duration: the longest kept stream of the source (or what the test knows it to be),
    // within half a second or 2 %.
    let expected = lasting ?? Preparer.expectedDuration(info: source, plan: plan)
    let got = [probe.duration("video"), probe.duration("audio")].compactMap { $0 }.max() ?? probe.formatDuration
    #expect(abs(got - expected) <= max(0.5, expected * 0.02), "duration \(got) vs source \(expected) for \(sourcePath)")
    // The output starts at zero, and audio keeps its offset to video.
    let starts = [probe.startTime("video"), probe.startTime("audio")].compactMap { $0 }
    if let first = starts.min() { #expect(abs(first) < 0.1, "output of \(sourcePath) starts at \(first)") }
    if let ov = probe.startTime("video"), let oa = probe.startTime("audio"),
       let sv = try FFprobe(sourcePath).streams("video").first?["start_time"]?.string.flatMap(Double.init),
       let sa = try FFprobe(sourcePath).streams("audio").first?["start_time"]?.string.flatMap(Double.init) {
        #expect(abs((oa - ov) - (sa - sv)) < 0.1, "A/V offset kept for \(sourcePath): source \(sa - sv), output \(oa - ov)")
    }
}

@Suite("media engine on every shared file", .serialized)
struct SharedMediaTests {
    static let unreadable: Set<String> = ["vd_empty.mp4"]

    @Test("every file probes, or fails with source_unreadable", arguments: Media.sharedFiles)
    func probe(_ name: String) throws {
        let path = Media.shared(name)
        if Self.unreadable.contains(name) {
            #expect { try Prober.probe(path: path) } throws: { ($0 as? KilnError)?.code == .sourceUnreadable }
            return
        }
        let info = try Prober.probe(path: path)
        let ff = try FFprobe(path)
        #expect(info.streams.count == ff.streams.count)
        for (mine, theirs) in zip(info.streams, ff.streams) {
            #expect(mine.codec == theirs["codec_name"]?.string, "\(name) stream \(mine.index)")
            if mine.type == .video {
                #expect(mine.width == theirs["width"]?.int)
                #expect(mine.height == theirs["height"]?.int)
            }
            if mine.type == .audio { #expect(mine.channels == theirs["channels"]?.int) }
        }
        #expect(abs(info.durationSeconds - ff.formatDuration) < 0.05)
        #expect(info.fingerprint?.hasPrefix("fp1-") == true)
    }

    @Test("every file remuxes into a valid MP4, or is refused cleanly", arguments: Media.sharedFiles)
    func remux(_ name: String) throws {
        guard !Self.unreadable.contains(name) else { return }
        let path = Media.shared(name)
        let info = try Prober.probe(path: path)
        guard let plan = EnginePlans.remux(info) else { return }   // video MP4 cannot carry: transcode only
        let dir = Media.scratch("remux")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        #expect(result.output.bytes > 0)
        #expect(result.output.sha256.count == 64)
        try checkOutput(out, plan: plan, source: info, sourcePath: path)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["out.mp4"], "no temporary file left")
    }

    @Test("every file transcodes to H.264/AAC", arguments: Media.sharedFiles)
    func transcode(_ name: String) throws {
        guard !Self.unreadable.contains(name) else { return }
        let path = Media.shared(name)
        let info = try Prober.probe(path: path)
        guard let plan = EnginePlans.transcode(info) else { return }
        let dir = Media.scratch("transcode")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        try checkOutput(out, plan: plan, source: info, sourcePath: path)
        if let v = plan.video {
            let s = try FFprobe(out).streams("video")[0]
            #expect(s["width"]?.int == v.width && s["height"]?.int == v.height)
            #expect(s["pix_fmt"]?.string == "yuv420p")
            if v.toneMap { #expect(s["color_transfer"]?.string == "bt709") }
        }
    }
}

@Suite("remux keeps what players need")
struct RemuxMetadataTests {
    func remux(_ name: String, adjust: (inout Plan) -> Void = { _ in }) throws -> (String, URL) {
        let path = Media.shared(name)
        let info = try Prober.probe(path: path)
        var plan = try #require(EnginePlans.remux(info))
        adjust(&plan)
        let dir = Media.scratch("meta")
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        return (out, dir)
    }

    func sideData(_ path: String) throws -> String {
        try Run.command("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_streams", path]).stdout
    }

    @Test("streams the MP4 muxer refuses at its header are the source's limit (source_unsupported), not a write to retry")
    func refusedAtHeader() throws {
        let path = try Media.generated("pcm-in-mkv.mkv", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=1",
                                                          "-f", "lavfi", "-i", "sine=sample_rate=48000:duration=1",
                                                          "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "pcm_s16le"])
        let info = try Prober.probe(path: path)
        var plan = try #require(EnginePlans.remux(info))
        let a = try #require(info.audioStreams.first)
        // A plan no planner makes (PCM has no MP4 sample entry ffmpeg writes), as a stale or
        // hand-written one could be.
        plan.audio = AudioPlan(sourceIndex: a.index, action: .copy, codec: a.codec, channels: 1, bitrateKbps: 0)
        // source_unsupported is final: the farm does not retry it.
        #expect(!KilnError(.sourceUnsupported, stage: .mux, "").retryable)
        try expectRefused(path, plan: plan, info: info, .sourceUnsupported, saying: "cannot be written to MP4")
    }

    @Test("encrypted samples are refused by the engine too, whatever a plan says (no garbage decoded, nothing left)")
    func encryptedRefused() throws {
        let path = try Media.generated("cenc-engine.mp4", ["-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25:duration=1",
                                                           "-c:v", "libx264", "-preset", "ultrafast",
                                                           "-encryption_scheme", "cenc-aes-ctr",
                                                           "-encryption_key", "76a6c65c5ea762046bd749a2e632ccbb",
                                                           "-encryption_kid", "a7e61c373e219033c21091fa607bf3b8"])
        // FairPlay and Windows Media DRM mark no packet: a sample entry, a header object say it.
        for path in [path, try Media.fairPlayLike(), try Media.windowsMediaDRM()] {
            let info = try Prober.probe(path: path)
            #expect(info.videoStreams.first?.encrypted == true)
            for plan in [EnginePlans.remux(info), EnginePlans.transcode(info)].compactMap({ $0 }) {
                try expectRefused(path, plan: plan, info: info, .sourceUnsupported, saying: "encrypted")
            }
        }
    }

    /// Prepares `path` with `plan` into a scratch folder and expects the engine to refuse
    /// it with `code` and a message containing `saying`, leaving nothing behind.
    private func expectRefused(_ path: String, plan: Plan, info: MediaInfo, _ code: KilnError.Code, saying: String) throws {
        let dir = Media.scratch("refused")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            _ = try Preparer.prepare(source: path, plan: plan, info: info, output: dir.appendingPathComponent("out.mp4").path)
            Issue.record("\(path): \(plan.deliveryFormat) wrote a file")
        } catch {
            #expect(error.code == code && error.message.contains(saying), "\(path): \(error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test("a copied video without a single keyframe stops with that reason (it wrote an MP4 without video that failed verification as a retryable write error)")
    func noKeyframeToCopy() throws {
        let path = try Media.withoutKeyframe()
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        #expect(plan.videoFallback == nil)
        try expectRefused(path, plan: plan, info: info, .sourceCorrupt, saying: "no keyframe")
    }

    @Test("Dolby Vision profile 8 keeps its configuration record and the hvc1 tag")
    func dolbyVision() throws {
        let (out, dir) = try remux("sp_sparks_dovi_8.mp4")
        defer { try? FileManager.default.removeItem(at: dir) }
        let s = try sideData(out)
        #expect(s.contains("codec_tag_string=hvc1"))
        #expect(s.contains("DOVI configuration record"))
        #expect(s.contains("dv_profile=8"))
        #expect(try Prober.probe(path: out).videoStreams.first?.dolbyVision?.profile == 8)
    }

    @Test("a rotated phone video keeps its display matrix")
    func rotation() throws {
        let (out, dir) = try remux("mb_rotate-buck-bunny.mp4")
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try sideData(out).contains("rotation=-90"))
        #expect(try Prober.probe(path: out).videoStreams.first?.rotation == 90)
    }

    @Test("chapters and their titles are carried")
    func chapters() throws {
        let (out, dir) = try remux("ax_sample_with_chapters.mkv")
        defer { try? FileManager.default.removeItem(at: dir) }
        let info = try Prober.probe(path: out)
        #expect(info.chapters.map(\.title) == ["Chapter 1", "Chapter 2"])
        #expect(abs((info.chapters.last?.startSeconds ?? 0) - 2) < 0.05)
    }

    /// The display flags of the first `tx3g` sample description in an MP4: after its type,
    /// six reserved bytes and a data reference index.
    static func textDisplayFlags(_ path: String) throws -> UInt32? {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let tag = Array("tx3g".utf8)
        guard let at = (0..<(bytes.count - 16)).first(where: { Array(bytes[$0..<($0 + 4)]) == tag }) else { return nil }
        return bytes[(at + 12)..<(at + 16)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    @Test("SubRip becomes mov_text with its language, title and forced flag (in the disposition, and as Apple's players read it: all samples forced); PGS is dropped and reported")
    func subtitles() throws {
        let (out, dir) = try remux("ax_sample_with_srt.mkv") { plan in plan.subtitles[0].forced = true }
        defer { try? FileManager.default.removeItem(at: dir) }
        let subs = try FFprobe(out).streams("subtitle")
        #expect(subs.count == 1)
        #expect(subs.first?["codec_name"]?.string == "mov_text")
        #expect(subs.first?["tags"]?["language"]?.string == "eng")
        #expect(subs.first?["disposition"]?["forced"]?.int == 1)
        #expect(try Self.textDisplayFlags(out) == 0xC000_0000)
        let (plain, plainDir) = try remux("ax_sample_with_srt.mkv") { _ in }
        defer { try? FileManager.default.removeItem(at: plainDir) }
        #expect(try Self.textDisplayFlags(plain) == 0)
        let text = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", out, "-map", "0:s:0", "-f", "srt", "-"]).stdout
        #expect(!text.isEmpty, "the cues survive as text")

        let pgs = Media.shared("ax_sample_with_pgs_subtitles.mkv")
        let info = try Prober.probe(path: pgs)
        let plan = try #require(EnginePlans.remux(info))
        let dir2 = Media.scratch("pgs")
        defer { try? FileManager.default.removeItem(at: dir2) }
        let result = try Preparer.prepare(source: pgs, plan: plan, info: info, output: dir2.appendingPathComponent("o.mp4").path)
        #expect(result.output.subtitles.isEmpty)
        #expect(result.output.dropped.contains { $0.type == "subtitle" && $0.codec == "hdmv_pgs_subtitle" && $0.reason == "subtitle_bitmap" })
    }
}

@Suite("broadcast sound whose format changes")
struct SoundFormatChangeTests {
    @Test("the probe's samples through a recording find the 5.1 after its stereo start, in MPEG-TS and remuxed into Matroska (sampled by time through its cues): the sound is described by its largest layout and said to change (it probed as stereo from its first frames); a steady one is not",
          arguments: ["ts", "mkv"])
    func surveyed(container: String) throws {
        // Matroska is surveyed from a minute (`SoundFormatSurvey.shortestMatroska`).
        let source = container == "ts" ? try Media.soundRecording("ac3", channels: [2, 6])
            : try Media.generated("ac3-stereo-then-5.1-70s.mkv", ["-i", try Media.soundRecording("ac3", channels: [2, 6], seconds: 35), "-c", "copy"])
        let info = try Prober.probe(path: source)
        let sound = try #require(info.audioStreams.first)
        #expect(sound.channels == 6 && sound.formatChanges == true, "\(sound)")
        #expect(sound.sampleRate == 48000)
        let steady = try Media.generated("ac3-stereo-steady-70s.\(container)", ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=70",
                                                                             "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=70",
                                                                             "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "ac3", "-ac", "2"])
        let steadySound = try #require(try Prober.probe(path: steady).audioStreams.first)
        #expect(steadySound.channels == 2 && steadySound.formatChanges == nil, "\(steadySound)")
    }

    @Test("a copy of a sound whose change the probe did not foresee (a plan that copies it anyway) stops at the change, and the sound is re-encoded at the plan's channels, 5.1 from the probe's samples, said in the adjustments")
    func copyStopsAtChange() throws {
        let path = try Media.soundRecording("ac3", channels: [2, 6])
        let info = try Prober.probe(path: path)
        let plan = try #require(EnginePlans.remux(info))
        #expect(plan.audio?.action == .copy && plan.audio?.channels == 6)
        let dir = Media.scratch("sound-change")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: plan, info: info, output: out)
        let said = result.stats.adjustments ?? []
        #expect(said.contains { $0.hasPrefix("audio_reencoded:") && $0.contains("changes from stereo 48000 Hz to 5.1 48000 Hz") }, "\(said)")
        let audio = try FFprobe(out).streams("audio")
        #expect(audio.count == 1 && audio.first?["codec_name"] == .string("aac") && audio.first?["channels"]?.int == 6, "\(audio)")
        #expect(try FFprobe(out).duration("audio").map { abs($0 - 16) < 0.2 } == true)
    }
}

@Suite("copied sound is timed in its samples")
struct CopiedSoundTimesTests {
    /// Each audio packet's (time in seconds, length in samples), in file order.
    static func soundPackets(_ path: String) throws -> [(time: Double, samples: Int)] {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "a:0", "-show_entries", "packet=pts_time,duration_time",
                                            "-of", "csv=p=0", path])
        guard r.status == 0 else { throw TestFailure("ffprobe failed on \(path): \(r.stderr)") }
        return r.stdout.split(separator: "\n").compactMap { line in
            let f = line.split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
            return f.count == 2 ? (f[0], Int((f[1] * 48_000).rounded())) : nil
        }
    }

    @Test("AAC copied from Matroska's millisecond clock runs on in 1,024-sample frames, a few time-to-sample entries instead of one a frame (21 or 22 ms apart, 1,008 or 1,056 samples each), and each frame stays within half a millisecond of its source time, across a gap of half a second too")
    func millisecondClock() throws {
        // Made in MP4 (Matroska's muxer takes no times from setts) and copied into Matroska.
        let source = try Media.generated("aac-48k-gap-ms-clock.mkv") { tmp in
            let mp4 = tmp + ".mp4"
            defer { try? FileManager.default.removeItem(atPath: mp4) }
            for args in [["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=12", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=12",
                          "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-b:a", "96k", "-bsf:a", "setts=ts=TS+gte(TS*TB\\,6)*0.5/TB", mp4],
                         ["-i", mp4, "-c", "copy", "-f", "matroska", tmp]] {
                let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y"] + args)
                guard r.status == 0 else { throw TestFailure(r.stderr) }
            }
        }
        let times = try FFprobe.packetTimes(source, "a:0")
        let gaps = zip(times, times.dropFirst()).filter { $1 - $0 > 0.4 }
        #expect(gaps.count == 1, "the source's gaps: \(gaps)")
        let info = try Prober.probe(path: source)
        let plan = try #require(EnginePlans.remux(info))
        #expect(plan.audio?.action == .copy)
        let dir = Media.scratch("sample-times")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        _ = try Preparer.prepare(source: source, plan: plan, info: info, output: out)
        let copied = try Self.soundPackets(out), original = try Self.soundPackets(source)
        #expect(copied.count >= original.count && original.count > 500)
        // Where a stated time cannot be where the frame before ends (a millisecond rounded
        // down), the frame before is shortened to it, at most by its rounding, and the last
        // frame filling the gap lasts to its end: the frames run on again after each.
        let lengths = Dictionary(grouping: copied.dropLast(), by: \.samples).mapValues(\.count)
        let off = lengths.filter { $0.key != 1024 }
        #expect(off.values.reduce(0, +) <= 3 && off.keys.allSatisfy { (1024 - 48)..<2048 ~= $0 }, "frame lengths in samples: \(lengths)")
        // The gap is there, filled or not: every source frame has its copy within half a millisecond.
        let start = try #require(copied.first?.time) - (try #require(original.first?.time))
        var k = 0
        for frame in original {
            while k < copied.count, copied[k].time - start < frame.time - 0.0006 { k += 1 }
            guard k < copied.count, abs(copied[k].time - start - frame.time) <= 0.0006 else {
                Issue.record("the frame at \(frame.time) s has no copy within half a millisecond (nearest \(k < copied.count ? copied[k].time - start : -1))")
                return
            }
        }
    }
}
