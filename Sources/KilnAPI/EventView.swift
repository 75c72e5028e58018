import Foundation
import KilnCore
import Store

/// An event as the SSE stream and the webhook send it (CONTRACT.md section 3):
/// `{"seq", "type", "artifact_id", "status", "delivery_format", "references", "error"?,
/// "progress"?, "at"}` with `at` in RFC 3339. A live `artifact.progress` event is not
/// stored and has no sequence number: its `seq` is null (and its SSE message no `id:`),
/// so a client that resumes from the last `seq` it saw never resumes from a progress.
public struct EventView: Encodable, Sendable, Equatable {
    @Nullable public var seq: Int64?
    public let type: String
    public let artifactID: String
    public let status: String
    public let deliveryFormat: String
    public let references: [String]
    public let error: AttemptErrorView?
    public let progress: JobProgress?
    public let at: String

    public init(_ e: EventRecord) {
        seq = e.type == .progress ? nil : e.seq
        type = e.type.rawValue
        artifactID = e.artifactID
        status = e.status
        deliveryFormat = e.deliveryFormat.rawValue
        references = e.references
        error = e.error.map(AttemptErrorView.init)
        progress = e.progress
        at = RFC3339.string(millis: e.at)
    }

    enum CodingKeys: String, CodingKey {
        case seq, type, artifactID = "artifact_id", status, deliveryFormat = "delivery_format", references, error, progress, at
    }
}

