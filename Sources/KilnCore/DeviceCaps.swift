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

    public init(codecsVideo: [String]? = nil, codecsAudio: [String]? = nil,
                audioPassthroughCodecs: [String]? = nil, containers: [String]? = nil,
                maxResolution: ResolutionClass? = nil, hdr: Bool? = nil, interlaced: Bool? = nil) {
        self.codecsVideo = codecsVideo
        self.codecsAudio = codecsAudio
        self.audioPassthroughCodecs = audioPassthroughCodecs
        self.containers = containers
        self.maxResolution = maxResolution
        self.hdr = hdr
        self.interlaced = interlaced
    }

    enum CodingKeys: String, CodingKey {
        case codecsVideo = "codecs_video", codecsAudio = "codecs_audio"
        case audioPassthroughCodecs = "audio_passthrough_codecs", containers
        case maxResolution = "max_resolution", hdr, interlaced
    }

    /// Decodes caps from JSON, naming the offending field in `invalid_caps`.
    public static func parse(_ data: [UInt8]) throws(KilnError) -> DeviceCaps {
        let value: JSONValue
        do { value = try JSONValue.parse(data) } catch {
            throw KilnError(.invalidCaps, stage: .request, "caps are not valid JSON: \(error.message)")
        }
        return try parse(value)
    }

    public static func parse(_ value: JSONValue) throws(KilnError) -> DeviceCaps {
        guard case .object(let o) = value else {
            throw KilnError(.invalidCaps, stage: .request, "caps must be a JSON object")
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
        return caps
    }
}

private extension String {
    /// The string without leading and trailing white space (spaces, tabs, line breaks, "\r\n").
    var trimmingWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
