import KilnCore
import Testing
@testable import Planner

@Suite("a whole multiplex recorded (several channels' programmes in one transport stream)")
struct MultiplexPlanTests {
    static func listed(_ s: StreamInfo, in programmes: Int...) -> StreamInfo {
        var s = s
        s.programs = programmes
        return s
    }

    /// Channel 1's 720p with 5.1 AC-3 at 384 kbit/s and English subtitles; channel 2's SD
    /// with stereo AC-3 at 192 kbit/s and its own English subtitles; a stream no programme
    /// lists.
    static func multiplex(programmes: Bool) -> MediaInfo {
        let streams = [
            (video("h264", 1280, 720, index: 0, isDefault: false), 1),
            (audio("ac3", ch: 6, index: 1, kbps: 384), 1),
            (subtitle("subrip", index: 2, text: true), 1),
            (video("h264", 640, 360, index: 3, isDefault: false), 2),
            (audio("ac3", ch: 2, index: 4, kbps: 192), 2),
            (subtitle("subrip", index: 5, text: true), 2),
        ].map { s, p in programmes ? listed(s, in: p) : s }
        return media("ts", kbps: 19_000, seconds: 600, streams[0], streams[1], streams[2], streams[3], streams[4], streams[5],
                     audio("mp2", index: 6, lang: "deu", kbps: 128))
    }

    @Test("the sound and subtitles are the chosen pictures' programme's, at every rung: at 2 and 1 Mbps the other channel's stereo, nearer the rung's budget, went with the first channel's pictures; a stream no programme lists may still be chosen",
          arguments: [Quality.original, .mbps5, .mbps2, .mbps1])
    func ownProgramme(_ quality: Quality) throws {
        let plan = try Planner.plan(source: Self.multiplex(programmes: true), quality: quality, caps: device("ios"), presets: presets)
        #expect(plan.video?.sourceIndex == 0)
        #expect(plan.audio?.sourceIndex == 1, "\(plan.audio.map { "\($0)" } ?? "no sound")")
        #expect(plan.subtitles.map(\.sourceIndex) == [2], "\(plan.subtitles)")
        let german = try Planner.plan(source: Self.multiplex(programmes: true), quality: quality, caps: device("ios"),
                                      audioLanguage: "deu", presets: presets)
        #expect(german.audio?.sourceIndex == 6)
    }

    @Test("a channel's rate is its streams' part of the multiplex's (the probe's multiplex_bit_rate): the 720p channel's 1.8 Mbit/s pictures and sound are copied at 5 and 2 Mbps (the whole multiplex's 19 Mbit/s had them re-encoded) and re-encoded at 1 Mbps",
          arguments: [(Quality.mbps5, StreamAction.copy), (.mbps2, .copy), (.mbps1, .transcode)])
    func channelRate(_ quality: Quality, _ action: StreamAction) throws {
        var source = Self.multiplex(programmes: true)
        for (i, kbps) in [1_300, 390, 10, 14_000, 200, 10, 130].enumerated() { source.streams[i].multiplexBitRate = kbps * 1000 }
        let plan = try Planner.plan(source: source, quality: quality, caps: device("ios"), presets: presets)
        #expect(plan.video?.sourceIndex == 0 && plan.video?.action == action, "\(plan.video.map { "\($0)" } ?? "no video")")
    }

    @Test("without programmes (one channel's file) the choice is as before: the track nearest a low rung's budget")
    func withoutProgrammes() throws {
        let plan = try Planner.plan(source: Self.multiplex(programmes: false), quality: .mbps1, caps: device("ios"), presets: presets)
        #expect(plan.audio?.sourceIndex == 4)
        #expect(plan.subtitles.map(\.sourceIndex) == [2, 5])
    }
}
