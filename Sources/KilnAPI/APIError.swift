import KilnCore

/// The error envelope of the media server's API (seed 000 section 12):
/// `{"error": "code", "message": "sentence"}` with the status code that fits.
public struct APIError: Error, Sendable, Equatable, Encodable {
    public let status: Int
    public let error: String
    public let message: String
    /// The request field at fault, when there is one.
    public let field: String?
    /// Whether the same request may succeed later, as a job's error says it (503s: a disk
    /// full, a store that cannot write, a daemon stopping); a request's own fault is not.
    public let retryable: Bool

    public init(_ status: Int, _ error: String, _ message: String, field: String? = nil) {
        self.status = status
        self.error = error
        self.message = message
        self.field = field
        retryable = status == 503
    }

    enum CodingKeys: String, CodingKey { case error, message, field, retryable }

    public static func badRequest(_ message: String, field: String? = nil) -> APIError {
        APIError(400, "bad_request", message, field: field)
    }
    public static let unauthorized = APIError(401, "unauthorized", "A valid bearer token is required.")
    public static let notFound = APIError(404, "not_found", "No such resource.")
    public static func notReady(_ id: String) -> APIError {
        APIError(409, "artifact_not_ready", "Artifact \(id) is not ready yet.")
    }

    /// How a failure inside Kiln is told to an HTTP caller.
    public init(_ e: KilnError) {
        let status: Int
        switch e.code {
        case .usage: status = 400
        case .invalidQuality, .invalidCaps: status = 400
        case .transcodeDisabled: status = 403
        case .qualityUnavailable, .planUnsupported: status = 501
        case .sourceNotFound: status = 404
        case .sourceUnreadable, .sourceUnsupported, .sourceCorrupt: status = 422
        case .ioError, .diskFull, .resourceLimit, .verifyFailed: status = 503
        case .canceled, .sourceChanged: status = 409
        case .internalError: status = 500
        }
        // The request field at fault, where the error names none: what a caller fixes.
        let field: String?
        switch e.code {
        case .invalidQuality: field = "quality"
        case .invalidCaps: field = "caps"
        case .sourceNotFound, .sourceUnreadable, .sourceUnsupported, .sourceCorrupt, .sourceChanged: field = "source.path"
        default: field = nil
        }
        // The sentence only: the error's detail (a database's path, a statement) is the
        // operator's, in the daemon's log (`API.route`).
        self.init(status, e.code == .usage ? "bad_request" : e.code.rawValue, e.sentence, field: e.field ?? field)
    }
}
