import Foundation
import KilnCore
import KilnTestSupport
import Store
import Testing

/// CompactJSON must write exactly what Foundation's encoder (sorted keys, slashes as they
/// are: what Kiln used before it had its own) writes for the values the store keeps, so a
/// store written by either reads back the same and artifact keys never depend on which
/// encoder ran.
@Suite("compact JSON")
struct CompactJSONTests {
    private func same<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let foundation = String(decoding: try encoder.encode(value), as: UTF8.self)
        let compact = try CompactJSON.string(value)
        #expect(compact == foundation, sourceLocation: sourceLocation)
    }

    static let awkward = ["", "plain", "quote \" and backslash \\", "slash / stays", "tab\tnew\nline\rcr",
                          "bell \u{07} nul \u{00} unit \u{1F} del \u{7F}", "ünïcödé ☃ 𝄞 家", "\u{2028}\u{2029}",
                          "emoji 👩‍👩‍👧", "\u{0C}\u{08}"]

    @Test("the store's records, with every field set and with the optional ones missing")
    func records() throws {
        let caps = DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac", "ac3"], audioPassthroughCodecs: ["eac3"],
                              containers: ["mp4"], maxResolution: nil, hdr: true)
        for text in Self.awkward {
            try same(PrepareRequest(reference: text, sourcePath: "/media/\(text).mkv", quality: .mbps5, caps: caps,
                                    priority: .background, audioLanguage: text.isEmpty ? nil : "fra"))
            try same(SourceRecord(path: text, fingerprint: "fp", durationSeconds: 5400.125, sizeBytes: 8_000_000_000))
            try same(AttemptError(attempt: 3, code: "io_error", stage: "encode", message: text, exitStatus: nil, signal: 9,
                                  logTail: [text, "second"], at: 1_700_000_000_123))
            try same(FileRecord(path: text, bytes: 1, sha256: nil, owned: false))
        }
        try same(PrepareRequest(reference: "r", sourcePath: "/s", quality: .original))
    }

    @Test("plans with video, audio and subtitles")
    func plans() throws {
        let plan = SamplePlans.fullTranscode
        try same(plan)
        try same([plan, plan])
        try same(Plan(quality: .original, effectiveQuality: .original, deliveryFormat: .original, targetBitrateKbps: 0,
                      container: "mkv", video: nil, audio: nil, subtitles: [], reasons: [], artifactKey: ""))
    }

    @Test("numbers, nesting, dictionaries and untyped values")
    func values() throws {
        let doubles: [Double] = [0, -0.0, 1, -1, 0.1, 23.976, 1e-7, 1.5e300, 9_007_199_254_740_993, 1e21, 123456789.125, 0.3]
        try same(doubles)
        try same([Int64.max, Int64.min, 0])
        try same([UInt8.max])
        try same(["b": 1, "a": 2, "B": 3, "é": 4, "aa": 5, "": 6])
        try same(["outer": ["z": [1, 2], "y": []], "empty": [:]])
        try same([Optional<String>.none, "x"])
        let untyped: JSONValue = .object(["list": .array([.null, .bool(true), .number(2.5), .string("s/\"")]),
                                          "nested": .object(["k": .number(-3)])])
        try same(untyped)
    }

    @Test("what Foundation writes differently, or cannot write, is refused")
    func refused() {
        #expect(throws: (any Error).self) { try CompactJSON.encode([Double.nan]) }
        #expect(throws: (any Error).self) { try CompactJSON.encode(["when": Date()]) }
        #expect(throws: (any Error).self) { try CompactJSON.encode(URL(fileURLWithPath: "/x")) }
    }
}
