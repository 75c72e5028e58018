import Foundation
import KilnCore
import Testing
@testable import Planner

@Suite("presets")
struct PresetsTests {
    @Test("the shipped ladder has every rung, within its cap")
    func ladder() {
        #expect(!presets.version.isEmpty)
        #expect(presets.rungs.map(\.quality) == [.mbps20, .mbps10, .mbps5, .mbps2, .mbps1])
        for r in presets.rungs {
            #expect(r.videoKbps + r.maxAudioKbps <= r.capKbps)
            #expect(r.audio.bitrateKbps * 10 <= r.capKbps + r.capKbps / 20, "audio stays near 10 % of \(r.quality)")
            #expect(r.notes?.isEmpty == false, "every rung says why")
        }
        #expect(!presets.notes.isEmpty)
    }

    @Test("the five named devices ship", arguments: ["ios", "apple-tv-4k", "android", "android-tv", "web"])
    func devices(_ name: String) {
        let caps = presets.deviceCaps(named: name)
        #expect(caps != nil)
        #expect(caps?.codecsVideo?.contains("h264") == true, "every device plays what Kiln encodes")
        #expect(caps?.codecsAudio?.contains("aac") == true)
        #expect(caps?.containers?.contains("mp4") == true)
        #expect(caps?.maxResolution != nil && caps?.hdr != nil)
        #expect(presets.deviceNotes[name]?.isEmpty == false)
        #expect(presets.deviceCaps(named: name.uppercased()) == caps)
    }

    @Test("the iOS profile is the client guide's section 10.4 caps, extended")
    func iosMatchesGuide() {
        let caps = device("ios")
        #expect(Set(caps.codecsVideo!) == ["h264", "hevc"])
        #expect(Set(["aac", "ac3", "eac3"]).isSubset(of: Set(caps.codecsAudio!)))
        #expect(Set(caps.audioPassthroughCodecs!) == ["ac3", "eac3"])
        #expect(Set(caps.containers!) == ["mp4", "mov", "m4v"])
        #expect(caps.maxResolution == .p1080 && caps.hdr == false)
    }

    @Test("caps as the downloads request carries them, {\"caps\": {…}} (the key in any case), are the caps inside (they were the baseline device: 1080p for a 720p phone); a caps object with fields of its own beside them is refused, naming the wrapper (its own had won, the device's 720p silently dropped)")
    func wrappedCaps() throws {
        let wrapped = try DeviceCaps.parse(Array(#"{"caps": {"codecs_video": ["h264"], "containers": ["mp4"], "max_resolution": "720p"}}"#.utf8))
        #expect(wrapped.codecsVideo == ["h264"] && wrapped.maxResolution == .p720)
        let capitalised = try DeviceCaps.parse(Array(#"{"Caps": {"codecs_video": ["h264"], "max_resolution": "720p"}}"#.utf8))
        #expect(capitalised.maxResolution == .p720)
        do { _ = try DeviceCaps.parse(Array(#"{"hdr": false, "caps": {"max_resolution": "720p"}}"#.utf8)); Issue.record("took one of two caps") } catch {
            #expect(error.code == .invalidCaps && error.field == "caps", "\(error)")
        }
        do { _ = try DeviceCaps.parse(Array(#"{"caps": {"max_resolution": "huge"}}"#.utf8)); Issue.record("parsed a bad size inside") } catch {
            #expect(error.code == .invalidCaps && error.field == "max_resolution")
        }
    }

    @Test("caps field names as clients vary them (maxResolution, Max-Resolution) are the fields; one a letter or two off (codec_video) names itself and the field it misses, as does a field given twice; a field Kiln does not know is kept aside and listed in the plan")
    func fieldSpellings() throws {
        for name in deviceNames { #expect(device(name).ignoredFields == nil, "\(name): its notes are the profile's, not unknown caps") }
        let camel = try DeviceCaps.parse(Array(#"{"codecsVideo": ["h264"], "maxResolution": "720p", "Max-Audio-Channels": 2, "HDR": false}"#.utf8))
        #expect(camel.codecsVideo == ["h264"] && camel.maxResolution == .p720 && camel.maxAudioChannels == 2 && camel.hdr == false)
        #expect(camel.ignoredFields == nil)
        for (bad, field, meant) in [(#"{"codec_video": ["h264"]}"#, "codec_video", "codecs_video"),
                                    (#"{"max_resolutoin": "720p"}"#, "max_resolutoin", "max_resolution"),
                                    (#"{"hdrs": true}"#, "hdrs", "hdr"),
                                    (#"{"max_resolution": "720p", "maxResolution": "480p"}"#, "max_resolution", "max_resolution")] {
            do { _ = try DeviceCaps.parse(Array(bad.utf8)); Issue.record("parsed \(bad)") } catch {
                #expect(error.code == .invalidCaps && error.field == field && error.message.contains(meant), "\(bad): \(error)")
            }
        }
        let unknown = try DeviceCaps.parse(Array(#"{"hdr_support": false, "codecs_subtitle": ["srt"], "max_resolution": "720p"}"#.utf8))
        #expect(unknown.maxResolution == .p720 && unknown.ignoredFields == ["codecs_subtitle", "hdr_support"])
        let source = media("mp4", kbps: 4000, video("h264", 1920, 1080, profile: "High", level: 40), audio("aac", ch: 2, index: 1, lang: "eng", isDefault: true))
        let limited = try Planner.plan(source: source, quality: .original, caps: unknown, presets: presets)
        #expect(limited.video?.height == 720 && limited.ignoredCaps == ["codecs_subtitle", "hdr_support"], "\(limited)")
    }

    @Test("caps as clients write them: names in any case with stray spaces, 4K as 2160p or uhd, a height; an empty name or an unknown size names the field")
    func lenientCaps() throws {
        let caps = try DeviceCaps.parse(Array(#"{"codecs_video": [" H264 ", "hevc\r\n"], "containers": ["MP4"], "max_resolution": " 2160P"}"#.utf8))
        #expect(caps.codecsVideo == ["h264", "hevc"] && caps.containers == ["mp4"] && caps.maxResolution == .uhd4k)
        #expect(try DeviceCaps.parse(Array(#"{"max_resolution": "UHD"}"#.utf8)).maxResolution == .uhd4k)
        // A height means the largest class no taller: an 8K TV plays 4K, a 1080i set 1080p.
        for (text, cls) in [(#""8k""#, ResolutionClass.uhd4k), (#""4320p""#, .uhd4k), (#""1080i""#, .p1080), ("1080", .p1080),
                            (#""1200""#, .p1080), ("480", .p480)] {
            #expect(try DeviceCaps.parse(Array(#"{"max_resolution": \#(text)}"#.utf8)).maxResolution == cls, "\(text)")
        }
        for bad in [#"{"codecs_audio": ["  "]}"#, #"{"max_resolution": "360p"}"#, #"{"max_resolution": "fourk"}"#,
                    #"{"max_resolution": ""}"#, #"{"max_resolution": 1080.5}"#] {
            do { _ = try DeviceCaps.parse(Array(bad.utf8)); Issue.record("parsed \(bad)") } catch {
                #expect(error.code == .invalidCaps && error.field != nil, "\(bad)")
            }
        }
    }

    @Test("the finer caps: an H.264 level as \"4.1\", 4.1 or 41; a bit depth, for every codec or by codec; HDR formats by their usual names; a channel count; a frame rate as a number, \"59.94\" or \"60000/1001\"; anything else names the field")
    func finerCaps() throws {
        for (text, idc) in [(#""4.1""#, 41), ("4.1", 41), ("41", 41), (#""41""#, 41), ("5", 50), (#""3.0""#, 30), (#""1b""#, 9)] {
            #expect(try DeviceCaps.parse(Array(#"{"max_h264_level": \#(text)}"#.utf8)).maxH264Level == idc, "\(text)")
        }
        let caps = try DeviceCaps.parse(Array(#"{"max_video_bit_depth": 10, "hdr_formats": ["HDR10+", "Dolby-Vision", "hlg"], "max_audio_channels": "2", "max_frame_rate": 30}"#.utf8))
        #expect(caps.maxVideoBitDepth == 10 && caps.hdrFormats == ["hdr10", "dolby_vision", "hlg"] && caps.maxAudioChannels == 2 && caps.maxFrameRate == 30)
        for (text, rate) in [("59.94", 59.94), (#"" 60000/1001 ""#, 60000.0 / 1001), (#""24""#, 24.0), ("120", 120.0)] {
            #expect(try DeviceCaps.parse(Array(#"{"max_frame_rate": \#(text)}"#.utf8)).maxFrameRate == rate, "\(text)")
        }
        // A depth for each codec, kept as an object when the caps are stored and read back.
        let byCodec = try DeviceCaps.parse(Array(#"{"max_video_bit_depth": {"H264": 8, "hevc": "10"}}"#.utf8))
        #expect(byCodec.maxVideoBitDepth == BitDepthCap(byCodec: ["h264": 8, "hevc": 10]))
        let stored = try JSONEncoder().encode(byCodec)
        #expect(String(decoding: stored, as: UTF8.self).contains(#""max_video_bit_depth":{"#))
        #expect(try JSONDecoder().decode(DeviceCaps.self, from: stored) == byCodec)
        #expect(try JSONDecoder().decode(DeviceCaps.self, from: JSONEncoder().encode(caps)) == caps)
        for (bad, field) in [(#"{"max_h264_level": "high"}"#, "max_h264_level"), (#"{"max_h264_level": 7.5}"#, "max_h264_level"), (#"{"max_h264_level": 1e300}"#, "max_h264_level"), (#"{"max_h264_level": 35}"#, "max_h264_level"),
                             (#"{"max_video_bit_depth": 9.5}"#, "max_video_bit_depth"), (#"{"max_video_bit_depth": {"hevc": 7}}"#, "max_video_bit_depth"),
                             (#"{"max_video_bit_depth": {"hevc": true}}"#, "max_video_bit_depth"), (#"{"max_video_bit_depth": [10]}"#, "max_video_bit_depth"),
                             ("{\"max_video_bit_depth\": {" + (0..<65).map { "\"c\($0)\": 8" }.joined(separator: ", ") + "}}", "max_video_bit_depth"),
                             (#"{"max_audio_channels": 0}"#, "max_audio_channels"),
                             (#"{"max_frame_rate": 0}"#, "max_frame_rate"), (#"{"max_frame_rate": "fast"}"#, "max_frame_rate"),
                             (#"{"max_frame_rate": "60/0"}"#, "max_frame_rate"), (#"{"max_frame_rate": 1e9}"#, "max_frame_rate"),
                             (#"{"max_frame_rate": true}"#, "max_frame_rate"),
                             (#"{"hdr_formats": ["hdr11"]}"#, "hdr_formats"), (#"{"hdr_formats": "hdr10"}"#, "hdr_formats")] {
            do { _ = try DeviceCaps.parse(Array(bad.utf8)); Issue.record("parsed \(bad)") } catch {
                #expect(error.code == .invalidCaps && error.field == field, "\(bad)")
            }
        }
    }

    @Test("caps say whether interlaced video plays: a boolean or absent (no), anything else names the field")
    func interlacedCap() throws {
        #expect(try DeviceCaps.parse(Array(#"{"interlaced": true}"#.utf8)).interlaced == true)
        #expect(try DeviceCaps.parse(Array(#"{"hdr": false}"#.utf8)).interlaced == nil)
        do { _ = try DeviceCaps.parse(Array(#"{"interlaced": "yes"}"#.utf8)); Issue.record("parsed") } catch {
            #expect(error.code == .invalidCaps && error.field == "interlaced")
        }
        // Only the TV box deinterlaces among the shipped profiles.
        #expect(device("android-tv").interlaced == true)
        #expect(["ios", "apple-tv-4k", "android", "web"].allSatisfy { device($0).interlaced != true })
    }

    func scratch(_ ladder: String, device: String? = nil) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-presets-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("devices"), withIntermediateDirectories: true)
        try ladder.write(to: dir.appendingPathComponent("ladder.json"), atomically: true, encoding: .utf8)
        if let device { try device.write(to: dir.appendingPathComponent("devices/odd.json"), atomically: true, encoding: .utf8) }
        return dir
    }

    func shippedLadder() throws -> String {
        try String(contentsOf: repoRoot.appendingPathComponent("Presets/ladder.json"), encoding: .utf8)
    }

    @Test("a rung whose audio and video exceed its cap is refused")
    func overCap() throws {
        let dir = try scratch(try shippedLadder().replacingOccurrences(of: "\"video_kbps\": 4700", with: "\"video_kbps\": 4900"))
        defer { try? FileManager.default.removeItem(at: dir) }
        do { _ = try Presets.load(directory: dir.path); Issue.record("loaded") } catch {
            #expect(error.code == .internalError && error.message.contains("5mbps"))
        }
    }

    @Test("a missing rung is refused")
    func missingRung() throws {
        let dir = try scratch(try shippedLadder().replacingOccurrences(of: "\"quality\": \"2mbps\"", with: "\"quality\": \"1mbps\""))
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: KilnError.self) { _ = try Presets.load(directory: dir.path) }
    }

    @Test("a broken device profile names its file and field")
    func brokenDevice() throws {
        let dir = try scratch(try shippedLadder(), device: #"{"codecs_video": "h264"}"#)
        defer { try? FileManager.default.removeItem(at: dir) }
        do { _ = try Presets.load(directory: dir.path); Issue.record("loaded") } catch {
            #expect(error.code == .invalidCaps && error.field == "codecs_video" && error.message.contains("odd.json"))
        }
    }

    @Test("a missing folder is a clear error")
    func missingFolder() {
        do { _ = try Presets.load(directory: "/nonexistent/Presets"); Issue.record("loaded") } catch {
            #expect(error.code == .internalError && error.message.contains("ladder.json"))
        }
    }

    @Test("locate finds the repository's Presets from the test binary's folder")
    func locate() {
        // The test runner lives under .build (or the scratch path); when that is outside the
        // checkout the current directory (the package root under `swift test`) still finds it.
        let found = Presets.locate()
        #expect(found != nil)
        if let found { #expect(FileManager.default.fileExists(atPath: found + "/ladder.json")) }
    }

    @Test("the presets listing names every rung and device")
    func listing() {
        let text = renderPresets(presets)
        for q in Quality.allCases where q != .original { #expect(text.contains(q.rawValue)) }
        for d in deviceNames { #expect(text.contains(d)) }
        #expect(text.contains(presets.version))
        let json = JSON.string(presets)
        #expect(json.contains("\"video_kbps\":19000") && json.contains("\"apple-tv-4k\""))
    }
}
