import Foundation
import KilnCore
import Testing
@testable import Planner

let mediaFolder = URL(fileURLWithPath: "/work/shared/media")
let mediaFiles: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: mediaFolder.path)) ?? [])
    .filter { !$0.hasSuffix(".tsv") && !$0.hasPrefix(".") }.sorted()
let unreadableFiles: Set<String> = ["vd_empty.mp4"]

/// Every file is probed once for the whole run.
final class ProbeCache: @unchecked Sendable {
    static let shared = ProbeCache()
    private let lock = NSLock()
    private var infos: [String: Result<MediaInfo, FFProbe.Failure>] = [:]
    func info(_ file: String) -> Result<MediaInfo, FFProbe.Failure> {
        lock.lock(); defer { lock.unlock() }
        if let r = infos[file] { return r }
        let r: Result<MediaInfo, FFProbe.Failure>
        do { r = .success(try FFProbe.mediaInfo(path: mediaFolder.appendingPathComponent(file).path)) }
        catch { r = .failure(FFProbe.Failure(description: "\(error)")) }
        infos[file] = r
        return r
    }
}

func probed(_ file: String) throws -> MediaInfo { try ProbeCache.shared.info(file).get() }

@Suite("every shared media file × every quality × every device")
struct MediaMatrixTests {
    @Test("the shared media folder is there") func folder() { #expect(mediaFiles.count >= 20) }

    @Test("a plan or a clean quality_unavailable, keeping every invariant", arguments: mediaFiles)
    func matrix(_ file: String) throws {
        if unreadableFiles.contains(file) {
            #expect(throws: FFProbe.Failure.self) { _ = try probed(file) }
            return
        }
        let source = try probed(file)
        let capsList: [(String, DeviceCaps?)] = [("none", nil)] + deviceNames.map { ($0, device($0)) }
        for policy in [ServerPolicy(), ServerPolicy(allow4KOutput: true), ServerPolicy(transcodingAllowed: false)] {
            for quality in Quality.allCases {
                for (name, caps) in capsList {
                    let plan: Plan
                    do {
                        plan = try Planner.plan(source: source, quality: quality, caps: caps, policy: policy, presets: presets)
                    } catch {
                        let allowed: Set<KilnError.Code> = policy.transcodingAllowed ? [.qualityUnavailable] : [.qualityUnavailable, .transcodeDisabled]
                        #expect(allowed.contains(error.code), "\(file) \(quality) \(name): \(error)")
                        #expect(!error.message.isEmpty)
                        continue
                    }
                    checkInvariants(plan, source: source, quality: quality, caps: caps)
                    if let caps {
                        var shuffled = caps
                        shuffled.codecsVideo = caps.codecsVideo?.reversed()
                        shuffled.codecsAudio = caps.codecsAudio?.reversed()
                        shuffled.audioPassthroughCodecs = caps.audioPassthroughCodecs?.reversed()
                        shuffled.containers = caps.containers?.reversed()
                        let again = try Planner.plan(source: source, quality: quality, caps: shuffled, policy: policy, presets: presets)
                        #expect(again == plan, "\(file) \(quality) \(name): reordered caps changed the plan")
                    }
                    // The table renders without trapping and mentions the key.
                    #expect(renderTable(plan: plan, source: source).contains(plan.artifactKey))
                }
            }
        }
    }

    func plan(_ file: String, _ q: Quality, _ caps: String?, policy: ServerPolicy = ServerPolicy()) throws -> Plan {
        try Planner.plan(source: try probed(file), quality: q, caps: caps.map(device), policy: policy, presets: presets)
    }

    @Test("H.264 + E-AC-3 in MP4 plays on iOS as it is")
    func ec3() throws {
        let p = try plan("sp_bear-640x360-ec3.mp4", .original, "ios")
        #expect(p.deliveryFormat == .original)
        #expect(try plan("sp_bear-640x360-ec3.mp4", .original, "android").deliveryFormat == .remux, "Android gets AAC")
    }

    @Test("H.264 High 4:4:4 in Matroska is transcoded for every device")
    func yuv444() throws {
        for d in deviceNames {
            let p = try plan("ax_sample_with_chapters.mkv", .original, d)
            #expect(p.deliveryFormat == .transcode && p.reasons.contains("video_profile_unsupported"), "\(d)")
            #expect(p.video?.width == 320 && p.video?.height == 240)
        }
    }

    @Test("H.264 High 10 is transcoded even with no audio")
    func high10() throws {
        let p = try plan("gr_test_yuv420p10le_x264.mp4", .original, "web")
        #expect(p.deliveryFormat == .transcode && p.audio == nil && p.reasons.contains("video_profile_unsupported"))
    }

    @Test("Dolby Vision 8 over PQ is tone-mapped for a phone and kept for Apple TV 4K")
    func dolbyVision8() throws {
        let phone = try plan("sp_sparks_dovi_8.mp4", .original, "ios")
        #expect(phone.deliveryFormat == .transcode && phone.video?.toneMap == true)
        #expect(phone.reasons.contains("frame_rate_above_30") == false, "640x360 has no class to step down from at its rung")
        let tv = try plan("sp_sparks_dovi_8.mp4", .original, "apple-tv-4k")
        #expect(tv.deliveryFormat == .original)
    }

    @Test("HDR10 and HLG are tone-mapped for SDR devices")
    func hdr() throws {
        for file in ["sp_bear-640x360-hevc-hdr10.mp4", "ax_hlg10-color-test.mp4"] {
            let p = try plan(file, .mbps5, "ios")
            #expect(p.video?.toneMap == true && p.reasons.contains("hdr_unsupported"), "\(file)")
            #expect(try plan(file, .original, "android-tv").deliveryFormat == .original, "\(file)")
        }
    }

    @Test("the rotated file is transcoded upright, or copied with its matrix")
    func rotated() throws {
        let t = try plan("mb_rotate-buck-bunny.mp4", .mbps1, "ios")
        #expect(t.video?.rotation == 90 && t.video?.width == 480 && t.video?.height == 854)
        // (ffprobe's description says nothing of fragments: Kiln's own probe makes this a remux.)
        let c = try plan("mb_rotate-buck-bunny.mp4", .original, "ios")
        #expect(c.deliveryFormat == .original && c.video?.rotation == 90 && c.video?.width == 1920)
    }

    @Test("audio-only DTS-HD MA becomes E-AC-3 5.1 for iOS, AAC stereo for Android")
    func dtsHD() throws {
        let ios = try plan("ax_sample_with_dts_hd_ma.mkv", .original, "ios")
        #expect(ios.deliveryFormat == .remux && ios.video == nil && ios.audio?.codec == "eac3" && ios.audio?.channels == 6)
        let android = try plan("ax_sample_with_dts_hd_ma.mkv", .original, "android")
        #expect(android.audio?.codec == "aac" && android.audio?.channels == 2)
        #expect(try plan("ax_sample_with_dts_hd_ma.mkv", .original, "android-tv").deliveryFormat == .original, "DTS passthrough, mkv")
    }

    @Test("a hundred mov_text tracks stay a hundred mov_text tracks")
    func manyTracks() throws {
        // At 165 kbit/s the file fits every rung and is delivered as it is, tracks and all.
        #expect(try plan("mi_many_tracks.mp4", .mbps1, "ios").deliveryFormat == .original)
        var heavy = try probed("mi_many_tracks.mp4")
        heavy.bitRate = 30_000_000
        let p = try Planner.plan(source: heavy, quality: .mbps1, caps: device("ios"), presets: presets)
        // Nothing is left behind (one audio track, every subtitle converted): no word says so.
        #expect(p.deliveryFormat == .remux && !p.reasons.contains("tracks_dropped_to_fit"), "the 150 kbit/s video still fits")
        #expect(p.subtitles.count == 100 && p.subtitles.allSatisfy { $0.action == .convert && $0.codec == "mov_text" })
    }

    @Test("PGS is dropped, SRT converted")
    func subtitles() throws {
        #expect(try plan("ax_sample_with_pgs_subtitles.mkv", .original, "ios").subtitles.map(\.reason) == ["subtitle_bitmap"])
        #expect(try plan("ax_sample_with_srt.mkv", .original, "ios").subtitles.map(\.action) == [.convert])
    }

    @Test("two audio tracks, undetermined language: a device without AC-3 gets the AAC one, alone (a browser would start with the AC-3)")
    func ac3aac() throws {
        let p = try plan("ax_sample_ac3_aac.mp4", .original, "web")
        #expect(p.deliveryFormat == .remux && p.audio?.codec == "aac" && p.audio?.action == .copy && p.reasons.contains("audio_track_not_default"))
        // With AC-3 playable, the default track is the one, and the file goes as it is.
        #expect(try plan("ax_sample_ac3_aac.mp4", .original, "ios").deliveryFormat == .original)
    }

    @Test("VP8 + Theora WebM: the first video, and a browser without VP8 gets H.264")
    func multitrack() throws {
        let p = try plan("sp_bear-320x240-multitrack.webm", .original, "web")
        #expect(p.video?.sourceIndex == 0 && p.deliveryFormat == .transcode)
        #expect(p.subtitles.map(\.action) == [.convert])
    }

    @Test("interlaced or not, MPEG-2 TS to iOS is H.264")
    func mpeg2() throws {
        let p = try plan("ax_bbb_2500ms.ts", .mbps5, "ios")
        #expect(p.video?.codec == "h264" && p.audio?.codec == "aac")
    }

    @Test("the probe helper reads rotation, Dolby Vision and fingerprints")
    func probeHelper() throws {
        let rot = try probed("mb_rotate-buck-bunny.mp4")
        #expect(rot.videoStreams.first?.rotation == 90)
        let dv = try probed("sp_sparks_dovi_8.mp4")
        #expect(dv.videoStreams.first?.dolbyVision?.profile == 8 && dv.videoStreams.first?.dolbyVision?.blCompatibilityId == 2)
        #expect(dv.fingerprint?.hasPrefix("fp1-") == true)
        #expect(try probed("ax_sample.avi").container == "avi")
    }
}
