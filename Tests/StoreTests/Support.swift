import Foundation
import KilnCore
import Store

/// A database path in its own temporary folder (the file not yet made), the folder
/// removed when the test ends.
final class TempDatabasePath {
    let directory: URL
    let path: String

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("kiln.sqlite").path
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

/// A store on a fresh file in its own temporary folder, removed when the test ends.
final class TempStore {
    let file: TempDatabasePath
    var path: String { file.path }
    var store: SQLiteStore

    init(durability: SQLiteStore.Durability = .full) throws {
        file = try TempDatabasePath()
        store = try SQLiteStore(path: file.path, durability: durability)
    }

    /// Opens the same file again with a new connection, as a restarted daemon would.
    func reopen() throws -> SQLiteStore { try SQLiteStore(path: path) }
}

/// The test's vocabulary: keys, plans, sources, requests.
enum Fixture {
    static func key(_ name: String) -> String { SHA256.hex(name) }

    static func plan(_ name: String, format: DeliveryFormat = .transcode) -> Plan {
        Plan(quality: format == .original ? .original : .mbps5, effectiveQuality: format == .original ? .original : .mbps5,
             deliveryFormat: format, targetBitrateKbps: format == .transcode ? 5_000 : 0,
             container: format == .original ? "mkv" : "mp4", video: nil, audio: nil, subtitles: [],
             reasons: ["test"], artifactKey: key(name))
    }

    static func source(_ name: String = "movie") -> SourceRecord {
        SourceRecord(path: "/media/\(name).mkv", fingerprint: SHA256.hex("source-\(name)"), durationSeconds: 60,
                     sizeBytes: 61_000_000)
    }

    static func request(_ reference: String, quality: Quality = .mbps5, priority: Priority = .interactive) -> PrepareRequest {
        PrepareRequest(reference: reference, sourcePath: "/media/movie.mkv", quality: quality, priority: priority)
    }

    static func file(_ name: String, bytes: Int64 = 1_000) -> FileRecord {
        FileRecord(path: "/var/kiln/artifacts/\(name).mp4", bytes: bytes, sha256: SHA256.hex(name), owned: true)
    }

    static func error(_ code: String = "io_error", at: Int64) -> AttemptError {
        AttemptError(attempt: 0, code: code, stage: "encode", message: "it broke", exitStatus: 4, logTail: ["last line"], at: at)
    }
}

extension SQLiteStore {
    /// Binds `reference` to the output named `name`.
    @discardableResult
    func bind(_ reference: String, to name: String, format: DeliveryFormat = .transcode, priority: Priority = .interactive,
              maxAttempts: Int = 4, now: Int64) throws -> Binding {
        let original = format == .original
            ? FileRecord(path: "/media/movie.mkv", bytes: 61_000_000, sha256: nil, owned: false) : nil
        return try bind(request: Fixture.request(reference, quality: original == nil ? .mbps5 : .original, priority: priority),
                        plan: Fixture.plan(name, format: format), source: Fixture.source(), estimatedBytes: 40_000_000,
                        maxAttempts: maxAttempts, originalFile: original, now: now)
    }

    /// Claims the one due job of `kind`, or nil.
    func claimOne(_ kind: JobKind = .transcode, owner: String = "runner-1", leaseUntil: Int64, now: Int64) throws -> ClaimedJob? {
        try claim(kind: kind, limit: 1, owner: owner, leaseUntil: leaseUntil, now: now).first
    }
}
