/// Every failure Kiln reports: a stable machine code, the stage that failed, one sentence
/// for people, and whether trying again could help. The exit status and the HTTP status
/// are derived from the code, so they cannot disagree (CONTRACT.md sections 2 and 3).
public struct KilnError: Error, Sendable, Equatable, Codable, CustomStringConvertible {
    public enum Code: String, Codable, Sendable, CaseIterable {
        // Requests (exit 2).
        case usage, invalidQuality = "invalid_quality", invalidCaps = "invalid_caps"
        // Policy and planning.
        case transcodeDisabled = "transcode_disabled", qualityUnavailable = "quality_unavailable"
        // The input cannot be prepared: permanent (exit 3).
        case sourceNotFound = "source_not_found", sourceUnreadable = "source_unreadable"
        case sourceUnsupported = "source_unsupported", sourceCorrupt = "source_corrupt"
        case planUnsupported = "plan_unsupported"
        // The source is still being written (a recording, a copy) or was replaced: the same
        // artifact cannot be made from it; asked for again, it is another artifact.
        case sourceChanged = "source_changed"
        // Worth retrying (exit 4).
        case ioError = "io_error", diskFull = "disk_full", resourceLimit = "resource_limit"
        case verifyFailed = "verify_failed"
        // Stopped on purpose (exit 5).
        case canceled
        // A bug (exit 1).
        case internalError = "internal_error"

        /// Whether trying again could help: the failure says nothing against the source or
        /// the request.
        public var retryable: Bool {
            switch self {
            case .ioError, .diskFull, .resourceLimit, .verifyFailed: true
            default: false
            }
        }
    }

    /// Where the failure happened; the farm stores it with each attempt.
    public enum Stage: String, Codable, Sendable {
        case request, probe, plan, open, demux, decode, filter, encode, mux, verify, write, finalize
    }

    public var code: Code
    public var stage: Stage
    public var message: String
    /// The caps or request field at fault, when there is one.
    public var field: String?
    /// The underlying library error number (an AVERROR, errno), when there is one.
    public var underlying: Int32?
    /// What only the operator can use (the database file, the statement that failed): in
    /// the daemon's log and `description`, never in an answer to a caller, who can do
    /// nothing with it.
    public var detail: String?

    public init(_ code: Code, stage: Stage, field: String? = nil, underlying: Int32? = nil, detail: String? = nil,
                _ message: String) {
        self.code = code
        self.stage = stage
        self.field = field
        self.underlying = underlying
        self.detail = detail
        self.message = message
    }

    /// The message as the contract's envelopes give it, one sentence: the first word
    /// capitalised (unless it is a name such as `libx264` or `caps.max_h264_level`, whose
    /// case matters) and a full stop at the end.
    public var sentence: String { KilnError.sentence(message) }

    public static func sentence(_ text: String) -> String {
        var s = Substring(text)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        guard let first = s.first else { return "" }
        let word = s.prefix { $0 != " " && $0 != ":" && $0 != "," }
        if first.isLowercase, word.allSatisfy({ $0.isLetter && $0.isLowercase }) {
            s = Substring(first.uppercased()) + s.dropFirst()
        }
        return ".!?".contains(s.last!) ? String(s) : s + "."
    }

    public var retryable: Bool { code.retryable }

    /// `prep-artifact`'s exit status for this error (CONTRACT.md section 2).
    public var exitStatus: Int32 {
        switch code {
        case .usage, .invalidQuality, .invalidCaps: 2
        case .transcodeDisabled, .qualityUnavailable, .sourceNotFound, .sourceUnreadable,
             .sourceUnsupported, .sourceCorrupt, .planUnsupported, .sourceChanged: 3
        case .ioError, .diskFull, .resourceLimit, .verifyFailed: 4
        case .canceled: 5
        case .internalError: 1
        }
    }

    public var description: String { "\(code.rawValue): \(message)" + (detail.map { " [\($0)]" } ?? "") }

    enum CodingKeys: String, CodingKey { case code, stage, message, field, underlying, retryable }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        code = try c.decode(Code.self, forKey: .code)
        stage = try c.decode(Stage.self, forKey: .stage)
        message = try c.decode(String.self, forKey: .message)
        field = try c.decodeIfPresent(String.self, forKey: .field)
        underlying = try c.decodeIfPresent(Int32.self, forKey: .underlying)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(code, forKey: .code)
        try c.encode(stage, forKey: .stage)
        // As the contract's JSON gives it (one sentence); the detail stays out, as in the API.
        try c.encode(sentence, forKey: .message)
        try c.encodeIfPresent(field, forKey: .field)
        try c.encodeIfPresent(underlying, forKey: .underlying)
        try c.encode(retryable, forKey: .retryable)
    }
}
