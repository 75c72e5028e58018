import KilnCore
import Testing
@testable import Planner

@Suite("artifact identity")
struct ArtifactKeyTests {
    let dts = media("mkv", kbps: 30000, video("hevc", 3840, 2160, pix: "yuv420p10le", transfer: "smpte2084", hdr: .hdr10),
                    audio("dts", ch: 6, index: 1, lang: "eng", isDefault: true, kbps: 1509), subtitle("subrip", index: 2))

    func key(_ source: MediaInfo, _ q: Quality, _ caps: DeviceCaps?, policy: ServerPolicy = ServerPolicy(),
             language: String? = nil, presets p: Presets = presets) throws -> String {
        try Planner.plan(source: source, quality: q, caps: caps, policy: policy, audioLanguage: language, presets: p).artifactKey
    }

    @Test("reordered caps lists give the same key", arguments: Quality.allCases)
    func reorderedCaps(_ q: Quality) throws {
        for name in deviceNames {
            let caps = device(name)
            var shuffled = caps
            shuffled.codecsVideo = caps.codecsVideo?.reversed()
            shuffled.codecsAudio = caps.codecsAudio?.reversed()
            shuffled.audioPassthroughCodecs = caps.audioPassthroughCodecs?.reversed()
            shuffled.containers = caps.containers?.reversed()
            #expect(try key(dts, q, caps) == key(dts, q, shuffled), "\(name) \(q)")
        }
    }

    @Test("caps fields the plan did not use do not move the key")
    func unusedCaps() throws {
        let base = DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: .p1080, hdr: false)
        var extra = base
        extra.codecsVideo = ["h264", "mpeg4", "vp8"]
        extra.audioPassthroughCodecs = ["truehd"]
        extra.containers = ["mp4", "avi", "ts"]
        for q in Quality.allCases {
            #expect(try key(dts, q, base) == key(dts, q, extra), "\(q)")
        }
    }

    @Test("max_resolution and hdr do not move the key of a source they do not constrain")
    func unusedLimits() throws {
        let small = media("mkv", kbps: 9000, video("h264", 640, 360), aacEng)
        for q in Quality.allCases {
            let keys = try Set([ResolutionClass.p720, .p1080, .p1440, .uhd4k].flatMap { res in
                try [true, false].map { hdr in
                    try key(small, q, DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"], maxResolution: res, hdr: hdr))
                }
            })
            #expect(keys.count == 1, "\(q)")
        }
    }

    @Test("the requested quality label does not matter when the output is equal")
    func qualityLabel() throws {
        // A 3 Mbps 1080p 10-bit H.264 at `original` falls back to the 5 Mbps rung: same file as asking for 5 Mbps.
        let src = media("mp4", kbps: 3000, video("h264", 1920, 1080, pix: "yuv420p10le"), aacEng)
        let original = try Planner.plan(source: src, quality: .original, caps: ios, presets: presets)
        let five = try Planner.plan(source: src, quality: .mbps5, caps: ios, presets: presets)
        #expect(original.effectiveQuality == .mbps5 && five.effectiveQuality == .mbps5)
        #expect(original.artifactKey == five.artifactKey)
        // A source that fits every rung is the same original file whatever rung is asked.
        let small = media("mp4", kbps: 600, video("h264", 640, 360), audio("aac", kbps: 64))
        let keys = try Set(Quality.allCases.map { try key(small, $0, ios) })
        #expect(keys.count == 1)
        // Remuxes asked as 20 and 10 Mbps share a file when the audio target is equal.
        let mkv = media("mkv", kbps: 4000, h1080, aacEng)
        #expect(try key(mkv, .mbps20, ios) == key(mkv, .mbps10, ios))
    }

    @Test("any change to the output moves the key")
    func outputChanges() throws {
        let src = media("mkv", kbps: 30000, h1080, audio("ac3", ch: 6, kbps: 448), audio("aac", index: 2, lang: "fre", kbps: 128))
        var keys: [String: String] = [:]
        keys["20"] = try key(src, .mbps20, ios)
        keys["10"] = try key(src, .mbps10, ios)
        keys["5"] = try key(src, .mbps5, ios)
        keys["2"] = try key(src, .mbps2, ios)
        keys["1"] = try key(src, .mbps1, ios)
        keys["original"] = try key(src, .original, ios)
        keys["original-as-is"] = try key(src, .original, nil)
        keys["french"] = try key(src, .mbps20, ios, language: "fre")
        keys["android (stereo)"] = try key(src, .mbps20, android)
        keys["720p device"] = try key(src, .mbps20, DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"], maxResolution: .p720))
        var rotated = src
        rotated.streams[0].rotation = 90
        keys["rotated"] = try key(rotated, .mbps20, ios)
        var other = src
        other.fingerprint = "fp1-another-file"
        keys["other source"] = try key(other, .mbps20, ios)
        var bumped = presets
        bumped.version += "-next"
        keys["preset version"] = try key(src, .mbps20, ios, presets: bumped)
        var crf = presets
        crf.rungs[0].crf += 1
        crf.version += "-crf"
        keys["crf"] = try key(src, .mbps20, ios, presets: crf)
        // A device of 30 pictures a second: every second picture of a 60 fps source.
        var sixty = src
        sixty.streams[0].frameRate = 60
        sixty.fingerprint = "fp1-sixty"
        keys["60 fps"] = try key(sixty, .mbps20, ios)
        keys["60 fps at 30"] = try key(sixty, .mbps20, DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac", "ac3"], containers: ["mp4"], maxFrameRate: 30))
        #expect(Set(keys.values).count == keys.count, "\(Dictionary(grouping: keys.keys, by: { keys[$0]! }).values.filter { $0.count > 1 })")
    }

    @Test("reasons and labels are not hashed, the engine recipe is")
    func canonicalText() throws {
        let src = media("mkv", kbps: 30000, h1080, aacEng)
        var plan = try Planner.plan(source: src, quality: .mbps20, caps: ios, presets: presets)
        let text = ArtifactKey.canonical(plan: plan, source: src, presetsVersion: presets.version)
        #expect(text.contains("engine_recipe=\(EngineRecipe.version)\n"))
        #expect(text.contains("presets=\(presets.version)\n"))
        #expect(text.contains("source=\(src.fingerprint!)\n"))
        plan.reasons = ["something_else"]
        plan.quality = .original
        #expect(ArtifactKey.compute(plan: plan, source: src, presetsVersion: presets.version) == plan.artifactKey)
        plan.audio?.bitrateKbps += 1
        #expect(ArtifactKey.compute(plan: plan, source: src, presetsVersion: presets.version) != plan.artifactKey)
    }

    @Test("an original delivery has a key from the source alone")
    func originalKey() throws {
        let src = media("mkv", kbps: 30000, h1080, aacEng)
        let a = try Planner.plan(source: src, quality: .original, caps: nil, presets: presets)
        var bumped = presets
        bumped.version = "other"
        let b = try Planner.plan(source: src, quality: .original, caps: nil, presets: bumped)
        #expect(a.artifactKey == b.artifactKey)
        #expect(ArtifactKey.canonical(plan: a, source: src, presetsVersion: presets.version)
                == "kiln-artifact-key=1\nsource=\(src.fingerprint!)\ndelivery=original\n")
    }

    @Test("without a fingerprint the source is named by format, size and duration")
    func fallbackIdentity() {
        var src = media("mkv", kbps: 3000, h1080, aacEng)
        src.fingerprint = nil
        let id = ArtifactKey.sourceIdentity(src)
        #expect(id.hasPrefix("probe-"))
        var renamed = src
        renamed.warnings = ["irrelevant"]
        #expect(ArtifactKey.sourceIdentity(renamed) == id)
        var bigger = src
        bigger.sizeBytes += 1
        #expect(ArtifactKey.sourceIdentity(bigger) != id)
    }

    @Test("free text cannot forge a line of the canonical text")
    func escaping() {
        #expect(ArtifactKey.field("eng\naudio=x,y") == "eng%aaudio%3dx%2cy")
    }
}
