import Foundation
import Testing
@testable import KilnCore
import KilnTestSupport

/// Kiln reads and pretty-prints JSON without Foundation (`JSONReader`, `CompactJSON`), and
/// must answer exactly what Foundation's JSONDecoder and `.prettyPrinted` JSONEncoder
/// answered before, so nothing a store, a child process or a client sees changes.
@Suite("JSON reader and pretty printer")
struct JSONReaderTests {
    // MARK: Helpers

    /// Foundation's encoder as Kiln configured it before it had its own.
    static func foundationEncoder(pretty: Bool) -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return e
    }

    static func foundation<T: Encodable>(_ value: T, pretty: Bool) throws -> [UInt8] {
        [UInt8](try foundationEncoder(pretty: pretty).encode(value))
    }

    /// Foundation's bytes for `value`, compact and pretty, decode with the reader to what
    /// JSONDecoder decodes (and to `value` itself), and Kiln's pretty output is Foundation's.
    private func same<T: Codable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for pretty in [false, true] {
            let bytes = try Self.foundation(value, pretty: pretty)
            let theirs = try JSONDecoder().decode(T.self, from: Data(bytes))
            let ours = try JSONReader.decode(T.self, from: bytes)
            #expect(ours == theirs, sourceLocation: sourceLocation)
            #expect(ours == value, sourceLocation: sourceLocation)
        }
        let kiln = String(decoding: try CompactJSON.encode(value, pretty: true), as: UTF8.self)
        #expect(kiln == String(decoding: try Self.foundation(value, pretty: true), as: UTF8.self), sourceLocation: sourceLocation)
    }

    /// The case of a decoding error and the path it names, e.g. "keyNotFound count at streams/Index 1".
    static func summary(_ error: any Error) -> String {
        func at(_ context: DecodingError.Context) -> String { context.codingPath.map(\.stringValue).joined(separator: "/") }
        switch error {
        case DecodingError.keyNotFound(let key, let c): return "keyNotFound \(key.stringValue) at \(at(c))"
        case DecodingError.valueNotFound(_, let c): return "valueNotFound at \(at(c))"
        case DecodingError.typeMismatch(_, let c): return "typeMismatch at \(at(c))"
        case DecodingError.dataCorrupted(let c): return "dataCorrupted at \(at(c))"
        default: return "not a DecodingError: \(error)"
        }
    }

    static func syntaxError(_ bytes: [UInt8]) -> String? {
        do { _ = try JSONReader.value(bytes); return nil } catch { return error.description }
    }

    // MARK: Values, against Foundation

    enum Kind: String, Codable { case alpha, beta = "the_beta" }
    enum Level: Int, Codable { case low = 1, high = 99 }

    struct Inner: Codable, Equatable {
        var label: String?
        var children: [Inner]?
        var weights: [String: Double] = [:]
    }

    struct Sample: Codable, Equatable {
        var name: String
        var count: Int
        var ratio: Double
        var tags: [String]
        var kind: Kind
        var level: Level
        var big: Int64
        var huge: UInt64
        var small: Int8
        var float: Float
        var flag: Bool?
        var inner: Inner?
        var byName: [String: Inner]
        var grid: [[Int]]
        var empty: [Int]
        var emptyMap: [String: [Int]]
        var optionals: [Int?]
        enum CodingKeys: String, CodingKey {
            case name, count, ratio, tags, kind, level, big, huge, small, float, flag, inner, grid, empty, optionals
            case byName = "by_name", emptyMap = "empty_map"
        }
    }

    static let awkward = ["", "plain", "quote \" and backslash \\", "slash / stays", "tab\tnew\nline\rcr",
                          "bell \u{07} nul \u{00} unit \u{1F} del \u{7F}", "ünïcödé ☃ 𝄞 家", "\u{2028}\u{2029}",
                          "emoji 👩‍👩‍👧 🇫🇷", "\u{0C}\u{08}", "{[\"a\" : 1, \"b\": [2]]}", "  , : ] } \\\" \\n ",
                          "e\u{301} vs é", "one \" quote, then: [brackets] {braces}"]

    static let sample = Sample(
        name: "sample", count: -42, ratio: 0.1, tags: awkward, kind: .beta, level: .high, big: .min, huge: .max, small: -128,
        float: 0.1, flag: nil,
        inner: Inner(label: nil, children: [Inner(label: "a", children: [], weights: [:]),
                                            Inner(label: "b", children: nil, weights: ["x": 1e-7, "y": -2.5])]),
        byName: ["z": Inner(), "a": Inner(label: "{}", children: [Inner()]), "": Inner(label: "")],
        grid: [[], [1], [2, 3], []], empty: [], emptyMap: ["none": [], "some": [1]], optionals: [nil, 1, nil])

    @Test("Codable values decode as JSONDecoder decodes them, and pretty-print as Foundation prints them")
    func codableValues() throws {
        try same(Self.sample)
        try same([Self.sample, Self.sample])
        try same(Inner())
        try same([Inner]())
        try same([String: Inner]())
        try same([[[String: [Int]]]]([[[:]], [], [["k": []]]]))
        try same(Self.awkward)
        try same(["key \"quoted\" {x}: [y], z": Self.awkward])
        try same([Int64.max, Int64.min, 0, -1])
        // A large object's keys (a request's caps may hold tens of thousands) in Foundation's order.
        try same(Dictionary(uniqueKeysWithValues: (0..<5000).map { ("\($0 * 7919 % 5000)-é\($0 % 3)", $0) }))
        try same([UInt64.max, 0])
        try same([Int8.min, Int8.max])
        try same([UInt8.max])
        try same(["b": 1, "a": 2, "B": 3, "é": 4, "aa": 5, "": 6])
        try same([Kind.alpha, .beta])
        try same([Level.low, .high])
        try same([true, false])
        try same([Optional<String>.none, "x"])
        // Scalars at the top level, as JSONDecoder allows.
        try same(17)
        try same("top")
        try same(true)
        try same(2.5)
    }

    @Test("doubles come back to the same bits, from the smallest subnormal to the largest finite")
    func doubles() throws {
        let doubles: [Double] = [0, -0.0, 1, -1, 0.1, 0.3, 23.976, 1e-7, 1.5e300, -1.5e-300, .leastNonzeroMagnitude, .leastNormalMagnitude,
                                 .greatestFiniteMagnitude, 9_007_199_254_740_992, 1e21, 123456789.125, 1 / 3.0, .pi]
        try same(doubles)
        let bytes = try Self.foundation(doubles, pretty: false)
        let ours = try JSONReader.decode([Double].self, from: bytes)
        let theirs = try JSONDecoder().decode([Double].self, from: Data(bytes))
        #expect(ours.map(\.bitPattern) == doubles.map(\.bitPattern))
        #expect(ours.map(\.bitPattern) == theirs.map(\.bitPattern))
        let floats: [Float] = [0.1, .leastNonzeroMagnitude, .greatestFiniteMagnitude, -0.0, 16_777_216, 1 / 3]
        #expect(try JSONReader.decode([Float].self, from: Self.foundation(floats, pretty: false)).map(\.bitPattern)
                == floats.map(\.bitPattern))
    }

    @Test("Kiln's own records (media descriptions, plans, caps, errors, progress) decode and pretty-print as with Foundation")
    func kilnTypes() throws {
        let video = StreamInfo(index: 0, type: .video, codec: "hevc", codecTag: "hvc1", profile: "Main 10", level: 153,
                               bitRate: 12_000_000, durationSeconds: 5400.042, language: "und", title: "Main {feature}",
                               disposition: Disposition(isDefault: true), width: 3840, height: 2160,
                               pixelFormat: "yuv420p10le", bitDepth: 10, chroma: 420, sampleAspectRatio: Rational(1, 1),
                               frameRate: 23.976023976023978, variableFrameRate: false, fieldOrder: .progressive,
                               rotation: 0, colorPrimaries: "bt2020", colorTransfer: "smpte2084", colorMatrix: "bt2020nc",
                               colorRange: "tv", hdr: .dolbyVision,
                               dolbyVision: DolbyVision(profile: 8, level: 6, blCompatibilityId: 1, signalledIn: "bitstream"))
        var audio = StreamInfo(index: 1, type: .audio, codec: "eac3", bitRate: 640_000, language: "fra", title: "Français 5.1",
                               disposition: Disposition(commentary: true), channels: 6, channelLayout: "5.1(side)",
                               sampleRate: 48000)
        audio.encrypted = true
        let subtitle = StreamInfo(index: 2, type: .subtitle, codec: "hdmv_pgs_subtitle", language: "eng",
                                  disposition: Disposition(forced: true, hearingImpaired: true), textSubtitle: false)
        let info = MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 5400.125, startSeconds: -0.007,
                             bitRate: 13_500_000, sizeBytes: 9_112_500_000, streams: [video, audio, subtitle],
                             chapters: [Chapter(startSeconds: 0, endSeconds: 600.5, title: "Opening: \"Night\""),
                                        Chapter(startSeconds: 600.5, endSeconds: 5400.125)],
                             fingerprint: "fp1-" + String(repeating: "0f", count: 32), warnings: ["truncated mdat at 0x1F"])
        try same(info)
        try same(MediaInfo(formatName: "mov,mp4,m4a,3gp,3g2,mj2", container: "mp4", durationSeconds: 0, bitRate: 0,
                           sizeBytes: 0, streams: []))

        var plan = SamplePlans.fullTranscode
        plan.videoFallback = VideoPlan(sourceIndex: 0, action: .copy, codec: "hevc", width: 3840, height: 2160, bitrateKbps: 0)
        try same(plan)
        try same(Plan(quality: .original, effectiveQuality: .original, deliveryFormat: .original, targetBitrateKbps: 0,
                      container: "mkv", video: nil, audio: nil, subtitles: [], reasons: [], artifactKey: ""))

        try same(DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: [], audioPassthroughCodecs: nil, containers: ["mp4"],
                            maxResolution: .uhd4k, hdr: true, interlaced: false))
        try same(DeviceCaps())
        // Both encode more than they decode (retryable; fraction and eta): extra keys are ignored.
        try same(KilnError(.invalidCaps, stage: .request, field: "codecs_video", underlying: -2, "caps.codecs_video must be an array."))
        try same(KilnError(.internalError, stage: .finalize, "No field, no code."))
        try same(JobProgress(encodedSeconds: 12.5, durationSeconds: 5400.125, speed: 3.25))
        try same(JobProgress(encodedSeconds: 0, durationSeconds: 0, speed: 0))
    }

    @Test("untyped values read as JSONDecoder read them into JSONValue, through the decoder or directly")
    func untypedValues() throws {
        let value: JSONValue = .object([
            "list": .array([.null, .bool(true), .bool(false), .number(2.5), .number(-0.0), .string("s/\"\u{1F}")]),
            "nested": .object(["k": .number(-3), "empty": .object([:]), "none": .array([])]),
            "big": .number(9_007_199_254_740_992), "tiny": .number(.leastNonzeroMagnitude)])
        for pretty in [false, true] {
            let bytes = try Self.foundation(value, pretty: pretty)
            let theirs = try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
            #expect(try JSONReader.value(bytes) == theirs)
            #expect(try JSONReader.decode(JSONValue.self, from: bytes) == theirs)
            #expect(try JSONReader.value(bytes) == value)
        }
        #expect(try JSONReader.value(Array("  [1e3, -0, 0.5E-1]\r\n".utf8)) == .array([.number(1000), .number(0), .number(0.05)]))
        #expect(try JSONReader.value(Array("\"top\"".utf8)) == .string("top"))
        #expect(try JSONReader.value(Array("null".utf8)) == .null)
    }

    @Test("random documents: decoded values and pretty output agree with Foundation's")
    func randomDocuments() throws {
        var random = SeededRandom(seed: 2024)
        for _ in 0..<300 {
            let value = random.jsonValue(depth: 0)
            try same(value)
            let bytes = try Self.foundation(value, pretty: false)
            #expect(try JSONReader.value(bytes) == value)
        }
    }

    // MARK: Pretty printing

    @Test("pretty output is Foundation's layout: two spaces, ' : ', empty containers on their own lines, strings untouched")
    func prettyLayout() throws {
        struct Doc: Codable {
            var list: [Int] = []
            var object: [String: Int] = [:]
            var rows: [[String: [Int]]] = [["a": []], [:]]
            var text = "{[\"x\" : 1, \"y\": [2]]}\\"
        }
        let expected = """
        {
          "list" : [

          ],
          "object" : {

          },
          "rows" : [
            {
              "a" : [

              ]
            },
            {

            }
          ],
          "text" : "{[\\"x\\" : 1, \\"y\\": [2]]}\\\\"
        }
        """
        #expect(try CompactJSON.string(Doc(), pretty: true) == expected)
        #expect(try CompactJSON.string(Doc(), pretty: true) == String(decoding: try Self.foundation(Doc(), pretty: true), as: UTF8.self))
        #expect(try CompactJSON.string([Int](), pretty: true) == "[\n\n]")
        #expect(try CompactJSON.string(["k": [String: Int]()], pretty: true) == "{\n  \"k\" : {\n\n  }\n}")
        #expect(try CompactJSON.string(7, pretty: true) == "7")
        // Input that is not CompactJSON's is re-indented as it comes, without crashing.
        #expect(String(decoding: CompactJSON.prettyPrinted(Array("}]".utf8)), as: UTF8.self) == "\n}\n]")
        // Compact output is unchanged by the new parameter.
        #expect(try CompactJSON.string(["b": [1, 2], "a": []]) == "{\"a\":[],\"b\":[1,2]}")
    }

    // MARK: Refusing what is not JSON

    /// Malformed input, with the message the reader gives, and whether Foundation takes it anyway.
    static let malformed: [(input: [UInt8], message: String, foundationAccepts: Bool)] = [
        (Array("".utf8), "unexpected end of input at byte 0", false),
        (Array("   ".utf8), "unexpected end of input at byte 3", false),
        (Array("{\"a\": [1, 2".utf8), "expected ',' or ']', found end of input at byte 11", false),
        (Array("{\"a\":".utf8), "unexpected end of input at byte 5", false),
        (Array("\"abc".utf8), "unterminated string at byte 0", false),
        (Array("[\"abc\\".utf8), "unterminated string at byte 1", false),
        (Array("tru".utf8), "expected true, found end of input at byte 3", false),
        (Array("[1,]".utf8), "trailing comma at byte 2", true),
        (Array("{\"a\":1 , }".utf8), "trailing comma at byte 7", true),
        (Array("[,1]".utf8), "unexpected character ',' at byte 1", false),
        (Array("01".utf8), "number with a leading zero at byte 0", false),
        (Array("[-01]".utf8), "number with a leading zero at byte 1", false),
        (Array("1.".utf8), "expected a digit after '.', found end of input at byte 2", false),
        (Array(".5".utf8), "unexpected character '.' at byte 0", false),
        (Array("+1".utf8), "unexpected character '+' at byte 0", false),
        (Array("1e".utf8), "expected a digit in the exponent, found end of input at byte 2", false),
        (Array("-".utf8), "expected a digit, found end of input at byte 1", false),
        (Array("0x10".utf8), "unexpected character 'x' after the value at byte 1", false),
        (Array("NaN".utf8), "unexpected character 'N' at byte 0", false),
        (Array("[Infinity]".utf8), "unexpected character 'I' at byte 1", false),
        (Array("-Infinity".utf8), "expected a digit, found character 'I' at byte 1", false),
        (Array("1e400".utf8), "number 1e400 does not fit in a Double at byte 0", false),
        (Array("[1e-400]".utf8), "number 1e-400 does not fit in a Double at byte 1", false),
        (Array("\"\\ud800\"".utf8), "lone surrogate \\ud800 at byte 1", false),
        (Array("\"\\udc00\\ud800\"".utf8), "lone surrogate \\udc00 at byte 1", false),
        (Array("\"\\ud800\\u0041\"".utf8), "lone surrogate \\ud800 at byte 1", false),
        (Array("\"\\u12G4\"".utf8), "invalid \\u escape at byte 1", false),
        (Array("\"\\x\"".utf8), "invalid escape \\x at byte 1", false),
        (Array("\"\\'\"".utf8), "invalid escape \\' at byte 1", false),
        ([0x22, 0xFF, 0x22], "invalid UTF-8 at byte 1", false),
        ([0x22, 0x61, 0xC3, 0x28, 0x22], "invalid UTF-8 at byte 2", false),
        ([0x22, 0xC0, 0xAF, 0x22], "invalid UTF-8 at byte 1", false),               // overlong '/'
        ([0x22, 0xE0, 0x80, 0xAF, 0x22], "invalid UTF-8 at byte 1", false),         // overlong '/' in three bytes
        ([0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], "invalid UTF-8 at byte 1", false),   // and in four
        ([0x22, 0xED, 0xA0, 0x80, 0x22], "invalid UTF-8 at byte 1", false),         // encoded surrogate
        ([0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "invalid UTF-8 at byte 1", false),   // above U+10FFFF
        ([0x22, 0xE2, 0x82, 0x22], "invalid UTF-8 at byte 1", false),               // cut short
        (Array("\"a\u{01}b\"".utf8), "control character 0x01 in a string at byte 2", false),
        (Array("[\"tab\there\"]".utf8), "control character 0x09 in a string at byte 5", false),
        (Array("{\"a\":1} x".utf8), "unexpected character 'x' after the value at byte 8", false),
        (Array("[1] [2]".utf8), "unexpected character '[' after the value at byte 4", false),
        (Array("{a:1}".utf8), "expected a string key, found character 'a' at byte 1", false),
        (Array("{\"a\" 1}".utf8), "expected ':', found character '1' at byte 5", false),
        (Array("[1 2]".utf8), "expected ',' or ']', found character '2' at byte 3", false),
        (Array("{\"a\":1 \"b\":2}".utf8), "expected ',' or '}', found character '\"' at byte 7", false),
        (Array("'a'".utf8), "unexpected character ''' at byte 0", false),
        (Array("\u{0C}1".utf8), "unexpected byte 0x0C at byte 0", false),
        (Array("[1]\u{00A0}".utf8), "unexpected byte 0xC2 after the value at byte 3", false),
        (String(repeating: "[", count: 600).utf8.map { $0 }, "nesting deeper than 512 at byte 512", false),
        ((String(repeating: "{\"a\":", count: 513) + "1" + String(repeating: "}", count: 513)).utf8.map { $0 },
         "nesting deeper than 512 at byte 2560", false),
    ]

    @Test("malformed input is refused with a message naming the byte, and Foundation refuses it too, trailing commas aside")
    func refusesMalformedInput() {
        for (input, message, foundationAccepts) in Self.malformed {
            let text = String(decoding: input, as: UTF8.self)
            #expect(Self.syntaxError(input) == message, "\(text.debugDescription)")
            #expect(throws: DecodingError.self, "\(text.debugDescription)") { try JSONReader.decode(JSONValue.self, from: input) }
            let foundation = (try? JSONDecoder().decode(JSONValue.self, from: Data(input))) != nil
            #expect(foundation == foundationAccepts, "\(text.debugDescription)")
        }
    }

    @Test("damaged documents: the reader accepts what Foundation accepts, with the same value, trailing commas aside")
    func damagedDocuments() throws {
        var random = SeededRandom(seed: 7)
        let bytes: [UInt8] = Array("{}[],:\"\\-+.eE0123456789tfnul \t\r\n/".utf8) + [0x00, 0x01, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC2,
                                                                                 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF]
        for _ in 0..<5000 {
            var document = try Self.foundation(random.jsonValue(depth: 0), pretty: random.below(3) == 0)
            for _ in 0...random.below(3) where !document.isEmpty {
                let at = random.below(document.count)
                switch random.below(4) {
                case 0: document[at] = bytes[random.below(bytes.count)]
                case 1: document.remove(at: at)
                case 2: document.insert(bytes[random.below(bytes.count)], at: at)
                default: document.removeSubrange(at...)
                }
            }
            let theirs = try? JSONDecoder().decode(JSONValue.self, from: Data(document))
            do {
                let ours = try JSONReader.value(document)
                #expect(ours == theirs, "\(String(decoding: document, as: UTF8.self).debugDescription)")
            } catch {
                // Foundation takes trailing commas, and reads input with a zero byte among its first
                // two as UTF-16 or UTF-32.
                if theirs != nil {
                    #expect(error.problem == "trailing comma" || document.prefix(2).contains(0), "\(error): \(String(decoding: document, as: UTF8.self).debugDescription)")
                }
            }
        }
    }

    @Test("random number texts: accepted, refused and rounded as JSONDecoder does for Double")
    func numberTexts() {
        var random = SeededRandom(seed: 11)
        let alphabet = Array("-+.eE0123456789000111999".utf8)
        for _ in 0..<20000 {
            let text = String(decoding: (0...random.below(12)).map { _ in alphabet[random.below(alphabet.count)] }, as: UTF8.self)
            let ours = try? JSONReader.decode(Double.self, from: Array(text.utf8))
            let theirs = try? JSONDecoder().decode(Double.self, from: Data(text.utf8))
            // Foundation refuses "0e1" and "0E5" (but takes "0e-1" and "-0e1"); JSON allows them.
            if theirs == nil && ours == 0 && text.range(of: #"^0[eE][0-9]+$"#, options: .regularExpression) != nil { continue }
            #expect(ours?.bitPattern == theirs?.bitPattern, "\(text)")
        }
    }

    @Test("input that is not JSON surfaces from decode as dataCorrupted, with the syntax error underneath")
    func syntaxErrorThroughDecode() {
        do {
            _ = try JSONReader.decode([Int].self, from: Array("[1, 2,]".utf8))
            Issue.record("a trailing comma was accepted")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(context.codingPath.isEmpty)
            #expect(context.underlyingError as? JSONReader.SyntaxError == JSONReader.SyntaxError(problem: "trailing comma", offset: 5))
            #expect(context.debugDescription == "not valid JSON: trailing comma at byte 5")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("nesting up to 512 levels reads; a very deep body fails fast instead of overflowing the stack")
    func nestingLimit() throws {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        var value = try JSONReader.value(Array(deepest.utf8))
        var depth = 1
        while case .array(let items) = value, let first = items.first { value = first; depth += 1 }
        #expect(depth == 512)
        let huge = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        #expect(Self.syntaxError(huge) == "nesting deeper than 512 at byte 512")
    }

    @Test("what JSON allows: whitespace of four kinds, escapes of every form, a byte order mark, scalars at the top")
    func acceptsValidInput() throws {
        #expect(try JSONReader.value(Array(" \t\r\n{ \"a\" \t:\r\n [ 1 , 2 ] } \n".utf8)) == .object(["a": .array([.number(1), .number(2)])]))
        let escaped = #""\"\\\/\b\f\n\r\t\u0000\u00e9\u00E9\uD83D\uDE00\u2028""#
        #expect(try JSONReader.decode(String.self, from: Array(escaped.utf8)) == "\"\\/\u{08}\u{0C}\n\r\t\u{00}éé😀\u{2028}")
        #expect(try JSONReader.decode(String.self, from: Array(escaped.utf8))
                == JSONDecoder().decode(String.self, from: Data(escaped.utf8)))
        // Escapes after a long plain run, and raw multi-byte characters around them.
        let mixed = "\"" + String(repeating: "é", count: 40) + "\\n" + "𝄞家" + "\""
        #expect(try JSONReader.decode(String.self, from: Array(mixed.utf8)) == String(repeating: "é", count: 40) + "\n𝄞家")
        #expect(try JSONReader.decode(String.self, from: [0xEF, 0xBB, 0xBF] + Array("\"bom\"".utf8)) == "bom")
        #expect(try JSONReader.decode(Bool.self, from: Array("false".utf8)) == false)
        #expect(try JSONReader.decode(Int?.self, from: Array("null".utf8)) == nil)
    }

    @Test("a key written twice keeps its last value (Foundation keeps the first), and keys match byte for byte")
    func repeatedKeys() throws {
        struct Accent: Decodable {
            var value: Int?
            enum CodingKeys: String, CodingKey { case value = "\u{E9}" }
        }
        #expect(try JSONReader.decode(Accent.self, from: Array("{\"\u{E9}\":1}".utf8)).value == 1)
        #expect(try JSONReader.decode(Accent.self, from: Array("{\"e\u{301}\":1}".utf8)).value == nil)
        #expect(try JSONReader.decode(Accent.self, from: Array("{\"\u{E8}\":1}".utf8)).value == nil)
        struct A: Decodable { var a: Int }
        #expect(try JSONReader.decode(A.self, from: Array("{\"a\":1,\"b\":0,\"a\":2}".utf8)).a == 2)
        #expect(try JSONReader.value(Array("{\"a\":1,\"a\":[2]}".utf8)) == .object(["a": .array([.number(2)])]))
        // Large objects take another path to find repeats.
        let keys = (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        let dictionary = try JSONReader.decode([String: Int].self, from: Array("{\(keys),\"k7\":700}".utf8))
        #expect(dictionary.count == 40)
        #expect(dictionary["k7"] == 700)
        #expect(dictionary["k39"] == 39)
    }

    // MARK: Numbers

    @Test("integers decode exactly beyond 2^53, from any notation that is exactly an integer")
    func integers() throws {
        func int64(_ text: String) throws -> Int64 { try JSONReader.decode(Int64.self, from: Array(text.utf8)) }
        #expect(try int64("9223372036854775807") == .max)
        #expect(try int64("-9223372036854775808") == .min)
        #expect(try int64("9007199254740993") == 9_007_199_254_740_993)
        #expect(try int64("9007199254740993.0") == 9_007_199_254_740_993)
        #expect(try int64("92233720368547758070e-1") == .max)
        #expect(try int64("-92233720368547758.08e2") == .min)
        #expect(try int64("1e3") == 1000)
        #expect(try int64("1E+3") == 1000)
        #expect(try int64("100e-2") == 1)
        #expect(try int64("0.000123e7") == 1230)
        #expect(try int64("-0") == 0)
        #expect(try int64("-0.0e-5") == 0)
        #expect(try int64("0e999999999999999999999") == 0)
        #expect(try JSONReader.decode(UInt64.self, from: Array("18446744073709551615".utf8)) == .max)
        #expect(try JSONReader.decode(UInt64.self, from: Array("1.8446744073709551615e19".utf8)) == .max)
        #expect(try JSONReader.decode(UInt8.self, from: Array("255".utf8)) == 255)
        #expect(try JSONReader.decode(Int8.self, from: Array("-128".utf8)) == -128)
        #expect(try JSONReader.decode(UInt.self, from: Array("-0".utf8)) == 0)
        // Foundation agrees wherever it answers exactly.
        for text in ["9223372036854775807", "-9223372036854775808", "9007199254740993.0", "1e3", "100e-2", "-0"] {
            #expect(try int64(text) == JSONDecoder().decode(Int64.self, from: Data(text.utf8)), "\(text)")
        }
    }

    @Test("numbers that are not exactly an integer of the type are dataCorrupted")
    func integersThatDoNotFit() {
        let cases: [(String, any Decodable.Type)] = [
            ("1.5", Int.self), ("1e-1", Int.self), ("1.000000000000000000001", Int.self), ("300", UInt8.self),
            ("-129", Int8.self), ("-1", UInt.self), ("-1e0", UInt64.self), ("9223372036854775808", Int64.self),
            ("18446744073709551616", UInt64.self), ("1e20", UInt64.self), ("1e999999999999", Int.self),
            ("123456789012345678901234567890", Int.self), ("-9223372036854775809", Int64.self), ("65536", UInt16.self),
            ("1e400", Double.self), ("1e-400", Double.self), ("1e39", Float.self), ("1e-50", Float.self),
        ]
        for (text, type) in cases {
            #expect(throws: DecodingError.self, "\(text) as \(type)") { try Self.decode(type, text) }
            #expect(Self.summary(Self.error(type, text)) == "dataCorrupted at ", "\(text) as \(type)")
        }
    }

    static func decode(_ type: any Decodable.Type, _ text: String) throws {
        _ = try JSONReader.decode(type, from: Array(text.utf8))
    }
    static func error(_ type: any Decodable.Type, _ text: String) -> any Error {
        do { try decode(type, text); return CancellationError() } catch { return error }
    }

    // MARK: Decoding errors, against Foundation

    struct Item: Decodable, Equatable {
        var count: Int
        var small: UInt8?
        var name: String?
    }
    struct Wrapper: Decodable, Equatable {
        var items: [Item]
    }

    @Test("missing keys, nulls, wrong types and numbers that do not fit are the DecodingError Foundation throws, at the same path")
    func decodingErrors() throws {
        let cases: [(String, String)] = [
            (#"{"items": [{"count": 1}, {"name": "x"}]}"#, "keyNotFound count at items/Index 1"),
            (#"{"items": [{"count": null}]}"#, "valueNotFound at items/Index 0/count"),
            (#"{"items": [{"count": 1.5}]}"#, "dataCorrupted at items/Index 0/count"),
            (#"{"items": [{"count": 1, "small": 300}]}"#, "dataCorrupted at items/Index 0/small"),
            (#"{"items": [{"count": "1"}]}"#, "typeMismatch at items/Index 0/count"),
            (#"{"items": [{"count": true}]}"#, "typeMismatch at items/Index 0/count"),
            (#"{"items": [{"count": 1, "name": 5}]}"#, "typeMismatch at items/Index 0/name"),
            (#"{"items": [{"count": 1}, null]}"#, "valueNotFound at items/Index 1"),
            (#"{"items": [{"count": 1}, []]}"#, "typeMismatch at items/Index 1"),
            (#"{"items": {"count": 1}}"#, "typeMismatch at items"),
            (#"{"items": null}"#, "valueNotFound at items"),
            (#"{}"#, "keyNotFound items at "),
            (#"[]"#, "typeMismatch at "),
            (#"null"#, "valueNotFound at "),
        ]
        for (text, expected) in cases {
            let ours: String
            do { _ = try JSONReader.decode(Wrapper.self, from: Array(text.utf8)); ours = "no error" } catch { ours = Self.summary(error) }
            let theirs: String
            do { _ = try JSONDecoder().decode(Wrapper.self, from: Data(text.utf8)); theirs = "no error" } catch { theirs = Self.summary(error) }
            #expect(ours == expected, "\(text)")
            // Foundation reports a number that does not fit as corrupt data at the root;
            // the reader names the field.
            if expected.hasPrefix("dataCorrupted") {
                #expect(theirs == "dataCorrupted at ", "\(text)")
            } else {
                #expect(ours == theirs, "\(text)")
            }
        }
        // Optionals: absent and null are nil, a value of the wrong type is still an error.
        let optional = #"{"items": [{"count": 1, "small": null}, {"count": 2, "small": 7, "name": "n"}]}"#
        #expect(try JSONReader.decode(Wrapper.self, from: Array(optional.utf8))
                == Wrapper(items: [Item(count: 1, small: nil, name: nil), Item(count: 2, small: 7, name: "n")]))
    }

    // MARK: Decoder API, against Foundation

    /// Exercises every container call a hand-written `init(from:)` can make, and writes down
    /// what each answered (values, errors as case and path), so two decoders can be compared.
    struct Probe: Decodable {
        var log: [String] = []

        enum Keys: String, CodingKey { case number, text, null, object, array, missing, `super`, nested, deep }
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            var lines: [String] = []
            defer { log = lines }
            func note<T>(_ label: String, _ body: () throws -> T) {
                do { lines.append("\(label): \(try body())") } catch { lines.append("\(label): \(JSONReaderTests.summary(error))") }
            }
            func path(_ keys: [any CodingKey]) -> String { keys.map(\.stringValue).joined(separator: "/") }
            note("root path") { path(decoder.codingPath) }
            let c = try decoder.container(keyedBy: Keys.self)
            note("all keys") { c.allKeys.map(\.stringValue).sorted() }
            note("any keys") { try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue).sorted() }
            for codingKey in [Keys.number, .text, .null, .missing] {
                let key = codingKey.stringValue
                note("contains \(key)") { c.contains(codingKey) }
                note("nil \(key)") { try c.decodeNil(forKey: codingKey) }
                note("int \(key)") { try c.decode(Int.self, forKey: codingKey) }
                note("int? \(key)") { try c.decodeIfPresent(Int.self, forKey: codingKey) as Any }
                note("string? \(key)") { try c.decodeIfPresent(String.self, forKey: codingKey) as Any }
                note("double \(key)") { try c.decode(Double.self, forKey: codingKey) }
                note("generic \(key)") { try c.decode([Int].self, forKey: codingKey) }
                note("keyed \(key)") { try c.nestedContainer(keyedBy: AnyKey.self, forKey: codingKey).codingPath.count }
                note("unkeyed \(key)") { try c.nestedUnkeyedContainer(forKey: codingKey).count as Any }
            }
            note("object") {
                let o = try c.nestedContainer(keyedBy: AnyKey.self, forKey: .object)
                let inner = try o.decode(Probe.Leaf.self, forKey: AnyKey(stringValue: "leaf"))
                return "\(path(o.codingPath)) \(o.allKeys.map(\.stringValue).sorted()) \(inner.path)"
            }
            note("super") {
                let s = try c.superDecoder()
                return "\(path(s.codingPath)) \(try s.singleValueContainer().decodeNil())"
            }
            note("super for key") {
                let s = try c.superDecoder(forKey: .object)
                return "\(path(s.codingPath)) \(try s.container(keyedBy: AnyKey.self).allKeys.count)"
            }
            note("super for missing key") {
                let s = try c.superDecoder(forKey: .missing)
                return "\(path(s.codingPath)) \(try s.singleValueContainer().decodeNil())"
            }
            note("nested type path") { try c.decode(Probe.Leaf.self, forKey: .nested).path }
            note("deep error") { try c.decode([[Probe.Leaf]].self, forKey: .deep).count }

            var u = try c.nestedUnkeyedContainer(forKey: .array)
            note("array path") { path(u.codingPath) }
            note("count") { u.count as Any }
            note("nil on a number") { try u.decodeNil() }
            note("index after") { u.currentIndex }
            note("string on a number") { try u.decode(String.self) }
            note("index after failure") { u.currentIndex }
            note("int") { try u.decode(Int.self) }
            note("int on null") { try u.decode(Int.self) }
            note("nil on null") { try u.decodeNil() }
            note("index after null") { u.currentIndex }
            note("int? on null") { try u.decodeIfPresent(Int.self) as Any }
            note("nested keyed") {
                let k = try u.nestedContainer(keyedBy: AnyKey.self)
                return "\(path(k.codingPath)) \(try k.decode(String.self, forKey: AnyKey(stringValue: "x")))"
            }
            note("nested unkeyed") {
                var n = try u.nestedUnkeyedContainer()
                return "\(path(n.codingPath)) \(try n.decode(Bool.self)) \(n.isAtEnd)"
            }
            note("leaf in array") { try u.decode(Probe.Leaf.self).path }
            note("super in array") { path(try u.superDecoder().codingPath) }
            note("at end") { u.isAtEnd }
            note("decode past end") { try u.decode(Int.self) }
            note("nil past end") { try u.decodeNil() }
            note("keyed past end") { try u.nestedContainer(keyedBy: AnyKey.self).codingPath.count }
            note("super past end") { try u.superDecoder().codingPath.count }
            note("single on object") { try decoder.singleValueContainer().decode(Int.self) }
            note("single nil on object") { try decoder.singleValueContainer().decodeNil() }
            note("unkeyed on object") { try decoder.unkeyedContainer().count as Any }
        }

        struct Leaf: Decodable {
            var path: String
            init(from decoder: any Decoder) throws {
                let single = try decoder.singleValueContainer()
                let here = decoder.codingPath.map(\.stringValue).joined(separator: "/")
                let there = single.codingPath.map(\.stringValue).joined(separator: "/")
                if single.decodeNil() {
                    path = "\(here) null"
                } else if let n = try? single.decode(Int.self) {
                    path = "\(here) \(there) \(n)"
                } else {
                    let c = try decoder.container(keyedBy: AnyKey.self)
                    path = "\(here) keyed \(try c.decode(Int.self, forKey: AnyKey(stringValue: "v")))"
                }
            }
        }
    }

    @Test("every container call answers as Foundation's does: values, errors, coding paths, indexes")
    func decoderAPI() throws {
        let text = """
        {"number": 42, "text": "forty-two", "null": null, "object": {"leaf": 3, "b": [], "super": 1},
         "array": [7, null, null, {"x": "y"}, [true], {"v": 5}, {}],
         "nested": {"v": 6}, "deep": [[1, {"v": 2}], [{"v": "three"}]]}
        """
        let ours = try JSONReader.decode(Probe.self, from: Array(text.utf8)).log
        let theirs = try JSONDecoder().decode(Probe.self, from: Data(text.utf8)).log
        #expect(ours.count == theirs.count)
        for (a, b) in zip(ours, theirs) { #expect(a == b) }
        // A few answers spelled out, so that agreeing with Foundation is not the only check.
        #expect(ours.contains("int number: 42"))
        #expect(ours.contains("int missing: keyNotFound missing at "))
        #expect(ours.contains("int null: valueNotFound at null"))
        #expect(ours.contains("object: object [\"b\", \"leaf\", \"super\"] object/leaf object/leaf 3"))
        #expect(ours.contains("deep error: typeMismatch at deep/Index 1/Index 0/v"))
        #expect(ours.contains("decode past end: valueNotFound at array/Index 7"))
    }

    /// A small deterministic generator (SplitMix64) of JSON values Foundation and Kiln both write.
    struct SeededRandom {
        var bits: SplitMix
        init(seed: UInt64) { bits = SplitMix(seed: seed) }

        mutating func next() -> UInt64 { bits.next() }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }

        static let pieces = ["a", "Z", "0", " ", "\"", "\\", "/", "{", "}", "[", "]", ":", ",", "\n", "\t", "\u{00}", "\u{1F}",
                             "é", "家", "😀", "\u{2028}", "null", "true", "1e5", "\\u0041"]

        mutating func string() -> String { (0..<below(6)).map { _ in Self.pieces[below(Self.pieces.count)] }.joined() }

        mutating func number() -> Double {
            switch below(5) {
            case 0: Double(below(2001)) - 1000
            case 1: Double(Int64(bitPattern: next()) >> below(64))
            case 2: Double(bitPattern: next() & 0x7FEF_FFFF_FFFF_FFFF) * (below(2) == 0 ? 1 : -1)
            case 3: Double(below(1_000_000)) / 1000
            default: [0.1, 1e-7, 1.5e300, .leastNonzeroMagnitude, -0.0, 2.5][below(6)]
            }
        }

        mutating func jsonValue(depth: Int) -> JSONValue {
            switch below(depth >= 4 ? 4 : 6) {
            case 0: return .null
            case 1: return .bool(below(2) == 0)
            case 2: return .number(number())
            case 3: return .string(string())
            case 4: return .array((0..<below(5)).map { _ in jsonValue(depth: depth + 1) })
            default:
                var object: [String: JSONValue] = [:]
                for _ in 0..<below(5) { object[string()] = jsonValue(depth: depth + 1) }
                return .object(object)
            }
        }
    }
}
