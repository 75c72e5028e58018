/// A quality the client asks for, in ladder order (seed 000 section 1).
/// `remux` is a delivery format, never a quality.
public enum Quality: String, Codable, Sendable, CaseIterable, Comparable {
    case original
    case mbps20 = "20mbps"
    case mbps10 = "10mbps"
    case mbps5 = "5mbps"
    case mbps2 = "2mbps"
    case mbps1 = "1mbps"

    /// Parses a client's quality word; anything else is `invalid_quality`.
    public init(parsing text: String) throws(KilnError) {
        guard let q = Quality(rawValue: text) else {
            throw KilnError(.invalidQuality, stage: .request,
                            "quality must be one of \(Quality.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(text)\"")
        }
        self = q
    }

    /// The rung's total bitrate cap in kbit/s; nil for `original`.
    public var capKbps: Int? {
        switch self {
        case .original: nil
        case .mbps20: 20_000
        case .mbps10: 10_000
        case .mbps5: 5_000
        case .mbps2: 2_000
        case .mbps1: 1_000
        }
    }

    /// Ladder position: `original` is 0, `1mbps` is 5. Lower is better quality.
    public var ladderIndex: Int { Quality.allCases.firstIndex(of: self)! }

    public static func < (a: Quality, b: Quality) -> Bool { a.ladderIndex > b.ladderIndex }
}

/// What Kiln produced for a request (seed 000 section 1).
public enum DeliveryFormat: String, Codable, Sendable, CaseIterable {
    case original, remux, transcode
}
