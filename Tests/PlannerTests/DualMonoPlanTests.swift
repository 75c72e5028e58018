import KilnCore
import Testing
@testable import Planner

@Suite("two mono programmes side by side (a bilingual broadcast's dual-mono sound)")
struct DualMonoPlanTests {
    /// AC-3 1+1, English left and German right, as a DVB descriptor lists them.
    static func bilingual(index: Int = 1) -> StreamInfo {
        var s = audio("ac3", ch: 2, index: index, lang: "eng,deu", isDefault: true, kbps: 192)
        s.dualMono = true
        return s
    }

    @Test("never copied (both languages would play at once, one a side): re-encoded to one channel, the first's by default, the asked language's when it is the second, the track saying that language; the key tells the two apart")
    func oneChannel() throws {
        let source = media("ts", kbps: 4000, seconds: 600, video("h264", 1280, 720), Self.bilingual())
        let english = try Planner.plan(source: source, quality: .original, caps: device("ios"), presets: presets)
        let a = try #require(english.audio)
        #expect(a.action == .transcode && a.channels == 1 && a.sourceChannel == 0 && a.language == "eng", "\(a)")
        #expect(english.reasons.contains("audio_dual_mono"), "\(english.reasons)")
        let german = try Planner.plan(source: source, quality: .original, caps: device("ios"), audioLanguage: "de", presets: presets)
        #expect(german.audio?.sourceChannel == 1 && german.audio?.language == "deu" && german.reasons.contains("audio_language_matched"),
                "\(String(describing: german.audio)) \(german.reasons)")
        #expect(german.artifactKey != english.artifactKey)
        let french = try Planner.plan(source: source, quality: .mbps2, caps: device("ios"), audioLanguage: "fra", presets: presets)
        #expect(french.audio?.sourceChannel == 0 && french.audio?.channels == 1)
    }

    @Test("a German track of its own beside the dual-mono one is chosen for German (it copies); without one, the dual-mono track's German side")
    func ownTrackFirst() throws {
        let beside = media("ts", kbps: 4000, seconds: 600, video("h264", 1280, 720), Self.bilingual(),
                           audio("ac3", ch: 2, index: 2, lang: "deu", kbps: 192))
        let plan = try Planner.plan(source: beside, quality: .original, caps: device("ios"), audioLanguage: "deu", presets: presets)
        #expect(plan.audio?.sourceIndex == 2 && plan.audio?.action == .copy && plan.audio?.sourceChannel == nil, "\(String(describing: plan.audio))")
    }

    @Test("a stream that lists two languages but is no dual mono (a stereo mix) is not split, nor chosen for its second language")
    func listedButStereo() throws {
        let source = media("ts", kbps: 4000, seconds: 600, video("h264", 1280, 720),
                           audio("ac3", ch: 2, index: 1, lang: "eng,deu", isDefault: true, kbps: 192))
        let plan = try Planner.plan(source: source, quality: .original, caps: device("ios"), audioLanguage: "deu", presets: presets)
        #expect(plan.audio?.action == .copy && plan.audio?.sourceChannel == nil && plan.reasons.contains("audio_language_unavailable"),
                "\(String(describing: plan.audio)) \(plan.reasons)")
    }
}
