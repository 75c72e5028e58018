/// The largest frame a device decodes, as clients name it (CONTRACT.md section 1).
public enum ResolutionClass: String, Codable, Sendable, CaseIterable, Comparable {
    case p480 = "480p"
    case p720 = "720p"
    case p1080 = "1080p"
    case p1440 = "1440p"
    case uhd4k = "4k"

    /// The bounding box of the class, landscape. A frame fits when its longer side fits the
    /// width and its shorter side fits the height, so portrait video is judged fairly.
    public var box: (width: Int, height: Int) {
        switch self {
        case .p480: (854, 480)
        case .p720: (1280, 720)
        case .p1080: (1920, 1080)
        case .p1440: (2560, 1440)
        case .uhd4k: (4096, 2160)
        }
    }

    public func fits(width: Int, height: Int) -> Bool {
        let long = max(width, height), short = min(width, height)
        return long <= box.width && short <= box.height
    }

    /// The class a client names: its raw value, in any case, or 4K's other names (2160p,
    /// uhd), which the contract's "4k" stands for; or a height in lines ("1080", "1080i",
    /// "4320p", "8k"), which means the largest class no taller (an 8K TV plays 4K). Below
    /// 480 lines there is no class: Kiln makes nothing smaller.
    public init?(name: String) {
        let s = name.trimmingWhitespace.lowercased()
        if let r = ResolutionClass(rawValue: ["2160p": "4k", "uhd": "4k"][s] ?? s) { self = r; return }
        let digits = s == "8k" ? "4320" : s.hasSuffix("p") || s.hasSuffix("i") ? String(s.dropLast()) : s
        guard let lines = Int(digits), lines >= 480, let r = ResolutionClass.allCases.last(where: { $0.box.height <= lines }) else {
            return nil
        }
        self = r
    }

    public static func < (a: ResolutionClass, b: ResolutionClass) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// A device's decoding capabilities (seed 000 section 4.1). Every field is optional:
/// an absent field means "unknown", not "nothing".
public struct DeviceCaps: Codable, Sendable, Equatable {
    public var codecsVideo: [String]?
    public var codecsAudio: [String]?
    public var audioPassthroughCodecs: [String]?
    public var containers: [String]?
    public var maxResolution: ResolutionClass?
    public var hdr: Bool?
    /// Whether the device shows interlaced video well (decodes field-coded pictures and
    /// deinterlaces them). Absent means no: phones, browsers and Apple's players show
    /// combing or fail, so interlaced sources are deinterlaced for them.
    public var interlaced: Bool?
    /// The highest H.264 level the device decodes, as `level_idc` (41 for 4.1). Absent: any
    /// (older TVs and sticks stop at 4.1; a source above it is re-encoded, an encode is
    /// kept within it).
    public var maxH264Level: Int?
    /// The deepest picture the device decodes, in bits (8, 10, 12), for every codec or for
    /// each it names (`BitDepthCap`). Absent: 10 for HEVC, VP9 and AV1, 8 for the rest
    /// (H.264 High 10 has almost no hardware decoder; a player that decodes in software,
    /// such as Kodi or VLC, can say 10).
    public var maxVideoBitDepth: BitDepthCap?
    /// The HDR formats the device shows (`hdr10`, `hlg`, `dolby_vision`) when `hdr` is
    /// true. Absent: every one (Dolby Vision without a base layer still needs
    /// `dolby_vision` here or in `codecs_video`); a source in another is tone-mapped.
    public var hdrFormats: [String]?
    /// The most channels the device plays of a sound it decodes itself (a codec it passes
    /// through to a receiver is the receiver's business). Absent: any.
    public var maxAudioChannels: Int?
    /// The most pictures a second the device shows (60 for most phones and TVs, 30 for
    /// older sticks). Absent: a copied stream keeps its rate, and an encode is kept within
    /// 60 fps (`Planner`). A source above it is re-encoded (`frame_rate_above_cap`).
    public var maxFrameRate: Double?
    /// Fields the caps held that Kiln does not know (a newer client's, another player's),
    /// as written, sorted: ignored, and listed in the plan (`Plan.ignoredCaps`) so that
    /// one that was meant (`hdr_support`) is seen rather than silently dropped. nil if none.
    public var ignoredFields: [String]?

    public init(codecsVideo: [String]? = nil, codecsAudio: [String]? = nil,
                audioPassthroughCodecs: [String]? = nil, containers: [String]? = nil,
                maxResolution: ResolutionClass? = nil, hdr: Bool? = nil, interlaced: Bool? = nil,
                maxH264Level: Int? = nil, maxVideoBitDepth: BitDepthCap? = nil, hdrFormats: [String]? = nil, maxAudioChannels: Int? = nil,
                maxFrameRate: Double? = nil) {
        self.codecsVideo = codecsVideo
        self.codecsAudio = codecsAudio
        self.audioPassthroughCodecs = audioPassthroughCodecs
        self.containers = containers
        self.maxResolution = maxResolution
        self.hdr = hdr
        self.interlaced = interlaced
        self.maxH264Level = maxH264Level
        self.maxVideoBitDepth = maxVideoBitDepth
        self.hdrFormats = hdrFormats
        self.maxAudioChannels = maxAudioChannels
        self.maxFrameRate = maxFrameRate
    }

    enum CodingKeys: String, CodingKey, CaseIterable {
        case codecsVideo = "codecs_video", codecsAudio = "codecs_audio"
        case audioPassthroughCodecs = "audio_passthrough_codecs", containers
        case maxResolution = "max_resolution", hdr, interlaced
        case maxH264Level = "max_h264_level", maxVideoBitDepth = "max_video_bit_depth", hdrFormats = "hdr_formats"
        case maxAudioChannels = "max_audio_channels", maxFrameRate = "max_frame_rate"
        case ignoredFields = "ignored_fields"
    }

    /// The fields a client may send (`ignored_fields` is Kiln's own note, not one of them).
    static let fieldNames = Set(CodingKeys.allCases.filter { $0 != .ignoredFields }.map(\.rawValue))

    /// A field name as clients vary it: any case, with or without `_` or `-`
    /// (`maxResolution`, `Max-Resolution` and `max_resolution` are one field).
    public static func canonical(_ key: String) -> String {
        String(key.lowercased().filter { $0 != "_" && $0 != "-" && $0 != " " })
    }

    static let fieldsByCanonical = Dictionary(uniqueKeysWithValues: fieldNames.map { (canonical($0), $0) })

    /// The caps object with each field under the name Kiln reads it by, and the fields it
    /// does not know. A name one or two letters from a field's (`codec_video`) is taken
    /// for a misspelling of it, and refused: read as unknown, the device would silently
    /// lose the limit it states. Two spellings of one field are refused too.
    static func normalized(_ o: [String: JSONValue]) throws(KilnError) -> (fields: [String: JSONValue], ignored: [String]) {
        var fields: [String: JSONValue] = [:], ignored: [String] = []
        var spelt: [String: String] = [:]
        for (key, value) in o.sorted(by: { $0.key < $1.key }) {
            let canon = canonical(key)
            if let field = fieldsByCanonical[canon] {
                if let other = spelt[field] {
                    throw KilnError(.invalidCaps, stage: .request, field: field,
                                    "caps give \(field) twice (as \"\(other)\" and \"\(key)\")")
                }
                spelt[field] = key
                fields[field] = value
            } else if let near = fieldsByCanonical.first(where: { isMisspelling(canon, of: $0.key) })?.value {
                throw KilnError(.invalidCaps, stage: .request, field: key, "caps.\(key) is not a caps field; did you mean \(near)?")
            } else {
                ignored.append(key)
            }
        }
        return (fields, ignored)
    }

    /// Whether `name` is within one edit (two for names of eight letters or more) of
    /// `field`, both canonical: a typo rather than another field.
    public static func isMisspelling(_ name: String, of field: String) -> Bool {
        let a = Array(name), b = Array(field)
        let allowed = b.count >= 8 ? 2 : 1
        guard abs(a.count - b.count) <= allowed, a.count >= 3, !b.isEmpty else { return false }
        var row = Array(0...b.count)
        for i in 1...a.count {
            var next = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                next[j] = min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            row = next
        }
        return row[b.count] <= allowed
    }

    /// The HDR format words `hdr_formats` takes (HDR10+ is HDR10 to a display without it).
    public static let hdrFormatNames: Set<String> = ["hdr10", "hlg", "dolby_vision"]

    /// A whole number in `range`, or one written as a string ("2"), as clients write counts
    /// and levels; nil for anything else.
    static func wholeNumber(_ value: JSONValue, in range: ClosedRange<Int>) -> Int? {
        let number: Double? = switch value {
        case .number(let n): n
        case .string(let s): Int(s.trimmingWhitespace).map(Double.init)
        default: nil
        }
        guard let n = number, n == n.rounded(), n >= Double(range.lowerBound), n <= Double(range.upperBound) else { return nil }
        return Int(n)
    }

    /// An H.264 level as clients write it: "4.1", 4.1 or level_idc 41 (also "41"); 1b is 1.1's
    /// neighbour "1b" (idc 9). Nil for anything else.
    public static func h264Level(_ value: JSONValue) -> Int? {
        let text: String
        switch value {
        case .string(let s): text = s.trimmingWhitespace.lowercased()
        case .number(let n) where n.isFinite && abs(n) < 1000: text = n == n.rounded() ? String(Int(n)) : String(n)
        default: return nil
        }
        if text == "1b" { return 9 }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let idc: Int?
        if parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]), (0...9).contains(minor) { idc = major * 10 + minor }
        else if parts.count == 1, let whole = Int(parts[0]) { idc = whole < 10 ? whole * 10 : whole }
        else { idc = nil }
        guard let idc, h264LevelIDCs.contains(idc) else { return nil }
        return idc
    }

    /// A rate as clients write it in text: "60", "59.94", "60000/1001"; nil otherwise.
    static func frameRate(_ text: String) -> Double? {
        let parts = text.trimmingWhitespace.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let num = Double(parts[0]) else { return nil }
        guard parts.count == 2 else { return num }
        guard let den = Double(parts[1]), den > 0 else { return nil }
        return num / den
    }

    /// The levels H.264 defines (Table A-1), as `level_idc`; 9 is 1b.
    static let h264LevelIDCs: Set<Int> = [9, 10, 11, 12, 13, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52, 60, 61, 62]

    /// Decodes caps from JSON, naming the offending field in `invalid_caps`.
    public static func parse(_ data: [UInt8]) throws(KilnError) -> DeviceCaps {
        let value: JSONValue
        do { value = try JSONValue.parse(data) } catch {
            throw KilnError(.invalidCaps, stage: .request, "caps are not valid JSON: \(error.message)")
        }
        return try parse(value)
    }

    public static func parse(_ value: JSONValue) throws(KilnError) -> DeviceCaps {
        guard case .object(let written) = value else {
            throw KilnError(.invalidCaps, stage: .request, "caps must be a JSON object")
        }
        let (o, ignored) = try normalized(written)
        // The caps as the media server's downloads request carries them, `{"caps": {…}}`
        // (seed 000), are the caps inside: read as caps, the wrapper says nothing, and the
        // device would silently be taken for the baseline one (1080p sent to a 720p phone).
        // The wrapper's name in any case, as every field's; beside fields of its own it is
        // refused, since which to follow cannot be known.
        if let wrapper = written.first(where: { $0.key.trimmingWhitespace.lowercased() == "caps" }), case .object = wrapper.value {
            guard o.isEmpty else {
                throw KilnError(.invalidCaps, stage: .request, field: wrapper.key,
                                "caps hold caps in \"\(wrapper.key)\" beside fields of their own (\(o.keys.sorted().joined(separator: ", "))): send one or the other")
            }
            return try parse(wrapper.value)
        }
        func list(_ key: String) throws(KilnError) -> [String]? {
            guard let v = o[key], v != .null else { return nil }
            guard case .array(let items) = v else {
                throw KilnError(.invalidCaps, stage: .request, field: key, "caps.\(key) must be an array of strings")
            }
            var out: [String] = []
            for item in items {
                // (Names as clients write them: " H264 " is h264.)
                guard case .string(let s) = item, case let name = s.trimmingWhitespace.lowercased(), !name.isEmpty else {
                    throw KilnError(.invalidCaps, stage: .request, field: key, "caps.\(key) must be an array of strings")
                }
                out.append(name)
            }
            return out
        }
        var caps = DeviceCaps()
        caps.ignoredFields = ignored.isEmpty ? nil : ignored
        caps.codecsVideo = try list("codecs_video")
        caps.codecsAudio = try list("codecs_audio")
        caps.audioPassthroughCodecs = try list("audio_passthrough_codecs")
        caps.containers = try list("containers")
        if let v = o["max_resolution"], v != .null {
            let name: String? = switch v {
            case .string(let s): s
            case .number(let n) where n == n.rounded() && abs(n) < 1e6: String(Int(n))
            default: nil
            }
            guard let name, let r = ResolutionClass(name: name) else {
                throw KilnError(.invalidCaps, stage: .request, field: "max_resolution",
                                "caps.max_resolution must be one of \(ResolutionClass.allCases.map(\.rawValue).joined(separator: ", ")) or a height of at least 480 lines")
            }
            caps.maxResolution = r
        }
        func flag(_ key: String) throws(KilnError) -> Bool? {
            guard let v = o[key], v != .null else { return nil }
            guard case .bool(let b) = v else {
                throw KilnError(.invalidCaps, stage: .request, field: key, "caps.\(key) must be true or false")
            }
            return b
        }
        caps.hdr = try flag("hdr")
        caps.interlaced = try flag("interlaced")
        if let v = o["max_h264_level"], v != .null {
            guard let idc = h264Level(v) else {
                throw KilnError(.invalidCaps, stage: .request, field: "max_h264_level",
                                "caps.max_h264_level must be an H.264 level such as \"4.1\" (or its level_idc, 41)")
            }
            caps.maxH264Level = idc
        }
        func count(_ key: String, _ range: ClosedRange<Int>) throws(KilnError) -> Int? {
            guard let v = o[key], v != .null else { return nil }
            guard let n = wholeNumber(v, in: range) else {
                throw KilnError(.invalidCaps, stage: .request, field: key,
                                "caps.\(key) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
        if case .object(let byCodec)? = o["max_video_bit_depth"] {
            // Each codec its own: {"h264": 8, "hevc": 10} (an HEVC Main 10 TV whose H.264
            // decoder is 8-bit, as nearly all are).
            guard byCodec.count <= BitDepthCap.mostCodecs else {
                throw KilnError(.invalidCaps, stage: .request, field: "max_video_bit_depth",
                                "caps.max_video_bit_depth names \(byCodec.count) codecs; at most \(BitDepthCap.mostCodecs)")
            }
            var depths: [String: Int] = [:]
            for (name, v) in byCodec {
                let codec = name.trimmingWhitespace.lowercased()
                guard !codec.isEmpty, let depth = wholeNumber(v, in: BitDepthCap.range) else {
                    throw KilnError(.invalidCaps, stage: .request, field: "max_video_bit_depth",
                                    "caps.max_video_bit_depth must be a whole number from 8 to 16, or an object of them by codec")
                }
                depths[codec] = depth
            }
            caps.maxVideoBitDepth = BitDepthCap(byCodec: depths)
        } else {
            caps.maxVideoBitDepth = try count("max_video_bit_depth", BitDepthCap.range).map { BitDepthCap(every: $0) }
        }
        caps.maxAudioChannels = try count("max_audio_channels", 1...32)
        if let v = o["max_frame_rate"], v != .null {
            // A number or a numeric string, fractional as rates are (59.94), or "60000/1001".
            let rate: Double? = switch v {
            case .number(let n): n
            case .string(let s): frameRate(s)
            default: nil
            }
            guard let rate, rate.isFinite, rate >= 10, rate <= 1000 else {
                throw KilnError(.invalidCaps, stage: .request, field: "max_frame_rate",
                                "caps.max_frame_rate must be a rate from 10 to 1000 pictures a second, such as 60 or 59.94")
            }
            caps.maxFrameRate = rate
        }
        let aliases = ["hdr10+": "hdr10", "hdr10plus": "hdr10", "dv": "dolby_vision", "dovi": "dolby_vision", "dolbyvision": "dolby_vision"]
        caps.hdrFormats = try list("hdr_formats")?.map { aliases[$0] ?? $0.replacingDash }
        if let unknown = caps.hdrFormats?.first(where: { !hdrFormatNames.contains($0) }) {
            throw KilnError(.invalidCaps, stage: .request, field: "hdr_formats",
                            "caps.hdr_formats names \"\(unknown)\"; known: \(hdrFormatNames.sorted().joined(separator: ", "))")
        }
        return caps
    }
}

/// `caps.max_video_bit_depth`: one depth for every codec (`10`), or a depth for each codec
/// named (`{"h264": 8, "hevc": 10}`); a codec not named keeps the default.
public struct BitDepthCap: Codable, Sendable, Equatable, ExpressibleByIntegerLiteral {
    public var every: Int?
    /// Depths by codec name as the client wrote it, lowercased (the planner canonicalises).
    public var byCodec: [String: Int]

    static let range = 8...16
    /// More codecs than any device decodes (a request's body may hold 60,000 of them).
    static let mostCodecs = 64

    public init(every: Int) { self.every = every; byCodec = [:] }
    public init(byCodec: [String: Int]) { every = nil; self.byCodec = byCodec }
    public init(integerLiteral value: Int) { self.init(every: value) }

    /// Written back as it was given: a number, or an object.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let n = try? c.decode(Int.self) { self.init(every: n) } else { self.init(byCodec: try c.decode([String: Int].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let every { try c.encode(every) } else { try c.encode(byCodec) }
    }
}

private extension String {
    /// "dolby-vision" as "dolby_vision".
    var replacingDash: String { String(map { $0 == "-" || $0 == " " ? "_" : $0 }) }

    /// The string without leading and trailing white space (spaces, tabs, line breaks, "\r\n").
    var trimmingWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
