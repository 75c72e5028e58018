import Foundation
import Synchronization
import Farm
import HTTPServer
import KilnCore
import Store

/// The daemon's HTTP API (CONTRACT.md section 3) over a `Farm`: routes, auth, the error
/// envelope, the event stream, the status endpoint, metrics and the status page.
public final class API: Sendable {
    public let farm: Farm
    let gate: SourceGate
    let token: String?
    let metrics: Metrics
    /// Seconds between SSE heartbeat comments.
    let heartbeatSeconds: Double
    /// Why the artifacts folder could not be written when a readiness probe last looked
    /// (an error number): the log says so when it begins or changes, not every probe.
    let artifactsProblem = Mutex<Int32?>(nil)

    public init(farm: Farm, mediaRoots: [String], token: String?, metrics: Metrics, heartbeatSeconds: Double = 15) {
        self.farm = farm
        self.gate = SourceGate(roots: mediaRoots)
        self.token = token?.isEmpty == true ? nil : token
        self.metrics = metrics
        self.heartbeatSeconds = heartbeatSeconds
    }

    var store: any ArtifactStore { farm.store }

    /// The envelope every error uses, also for the server's own 404/405/413/400.
    public static func errorResponse(status: Int, code: String, message: String) -> HTTPResponse {
        .json(status: status, APIError(status, code, message))
    }

    static func fail(_ e: APIError) -> HTTPResponse { .json(status: e.status, e) }

    public func register(on server: HTTPServer) {
        // The release answering, for an operator checking what an upgrade left running.
        server.route("GET", "/healthz") { _, _ in .json(JSONValue.object(["ok": .bool(true), "version": .string(KilnVersion.number)])) }
        route(server, "GET", "/readyz") { [self] _, _ in
            // Answered within about a second: a balancer's probe gives up sooner than the
            // store's busy timeout, and not ready said at once is what it needs to hear.
            let storeState = store.readiness(now: SystemClock().nowMillis())
            switch storeState {
            case .ready: break
            case .unreadable(let error):
                farm.log.write("GET /readyz: the store does not answer: \(error)")
                return API.fail(APIError(503, "unavailable", "The store is not answering."))
            case .busy:
                return API.fail(APIError(503, "store_busy", "The store has been busy for over half a second: requests are waiting for it."))
            case .failingWrites:
                break   // said below, once the disk's space is known
            }
            // Reading is not enough: with its disk full, every request that writes fails.
            guard farm.canWrite else { return API.fail(APIError(503, "disk_full", "The data directory's disk is full: requests cannot be recorded.")) }
            let problem = farm.artifactsUnwritable
            let changed = artifactsProblem.withLock { last in
                defer { last = problem }
                return last != problem
            }
            if changed, let problem {
                farm.log.write("GET /readyz: cannot write in the artifacts folder \(farm.config.artifactsDir): \(String(cString: strerror(problem)))")
            }
            if problem != nil {
                return API.fail(APIError(503, "artifacts_unwritable", "The artifacts folder cannot be written: no job could finish."))
            }
            // Nor when writes fail for another reason (another program holding the
            // database's write lock, a file system gone read-only): asked again each time, so
            // the answer turns ready once a write commits.
            if case .failingWrites(let error) = storeState {
                return API.fail(APIError(503, "store_failing", "The store cannot record requests: \(error.sentence)"))
            }
            // Draining before exit (up to KILN_SHUTDOWN_GRACE_SECONDS): a balancer or a health
            // check sends new work elsewhere. Requests are still taken (they are durable and
            // run after the restart).
            guard !farm.isStopping else { return API.fail(APIError(503, "shutting_down", "The daemon is stopping; it starts no new job until it is restarted.")) }
            return .json(["ready": true])
        }
        route(server, "POST", "/v1/prepare") { [self] req, _ in try prepare(req) }
        route(server, "GET", "/v1/references/:ref") { [self] _, p in try referenceAnswer(p["ref"] ?? "") }
        route(server, "DELETE", "/v1/references/:ref") { [self] _, p in
            guard try farm.release(reference: p["ref"] ?? "") else { throw APIError.notFound }
            return .empty(204)
        }
        route(server, "GET", "/v1/artifacts/:id") { [self] _, p in .json(ArtifactView(try artifact(p["id"] ?? ""))) }
        route(server, "GET", "/v1/artifacts/:id/file") { [self] req, p in try file(req, p["id"] ?? "") }
        route(server, "HEAD", "/v1/artifacts/:id/file") { [self] req, p in try file(req, p["id"] ?? "") }
        route(server, "POST", "/v1/artifacts/:id/cancel") { [self] _, p in
            let id = p["id"] ?? ""
            _ = try artifact(id)
            guard try farm.cancel(artifactID: id) else {
                throw APIError(409, "not_cancelable", "Only a pending artifact can be canceled.")
            }
            return .json(ArtifactView(try artifact(id)))
        }
        route(server, "POST", "/v1/artifacts/:id/retry") { [self] _, p in
            let id = p["id"] ?? ""
            // An original is the file at its path, never a job's output: retried as a job,
            // it copied the whole source into the artifacts folder (a film's size on disk)
            // and served the copy. The file as it is now may need another plan: asked for
            // again, it gets one.
            guard try artifact(id).plan.deliveryFormat != .original else {
                throw APIError(409, "not_retryable", "An original is the file at its path, not prepared: ask for it again (POST /v1/prepare) to have it checked as it is now.")
            }
            guard try farm.retry(artifactID: id) else {
                throw APIError(409, "not_retryable", "Only a failed or canceled artifact can be retried.")
            }
            return .json(status: 202, ArtifactView(try artifact(id)))
        }
        route(server, "GET", "/v1/queue") { [self] _, _ in .json(try queue()) }
        route(server, "GET", "/v1/events") { [self] req, _ in try events(req) }
        route(server, "GET", "/metrics") { [self] _, _ in
            .text(metrics.render(farm: farm), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        // The page holds no data (it asks for the token and calls the routes above).
        server.route("GET", "/") { _, _ in .text(StatusPage.html, contentType: "text/html; charset=utf-8") }
    }

    /// Registers a handler behind the bearer check, turning thrown errors into envelopes.
    private func route(_ server: HTTPServer, _ method: String, _ pattern: String,
                       _ handler: @escaping @Sendable (HTTPRequest, [String: String]) throws -> HTTPResponse) {
        server.route(method, pattern) { [self] req, params in
            if let token {
                let presented = req.headers["Authorization"] ?? ""
                // The scheme's name is case-insensitive (RFC 7235): "bearer" is "Bearer".
                guard presented.count > 7, presented.prefix(7).lowercased() == "bearer ",
                      tokensMatch(String(presented.dropFirst(7)), token) else {
                    var r = API.fail(.unauthorized)
                    r.headers.set("WWW-Authenticate", "Bearer")
                    return r
                }
            } else if let refused = Self.refusedWithoutToken(req) {
                return API.fail(refused)
            }
            do { return try handler(req, params) }
            catch let e as APIError { return API.fail(e) }
            catch let e as KilnError {
                let answer = APIError(e)
                // The caller is told the code and a sentence; what went wrong inside (which
                // file, which statement) is for the operator.
                if answer.status >= 500 { farm.log.write("\(req.method) \(req.path): \(e)") }
                return API.fail(answer)
            }
            catch {
                farm.log.write("\(req.method) \(req.path): unexpected \(error)")
                return API.fail(APIError(500, "internal_error", "Unexpected error."))
            }
        }
    }

    /// Without a token Kiln listens on loopback only, where any web page its operator opens
    /// can reach it too: a form posted from another site (its Origin says so), or a name
    /// of the attacker's that resolves to 127.0.0.1 (DNS rebinding: its Host says so). Such
    /// requests are refused; programs on the machine, the media server among them, send
    /// neither a foreign Host nor an Origin.
    static func refusedWithoutToken(_ req: HTTPRequest) -> APIError? {
        if let host = req.headers["Host"], !isLoopback(authority: host) {
            return APIError(403, "host_not_allowed", "Without KILN_TOKEN only requests addressed to this machine's loopback "
                            + "name are answered (this one named \(host.prefix(100))); set a token to serve other names.")
        }
        if let origin = req.headers["Origin"],
           !isLoopback(authority: origin.split(separator: "/", omittingEmptySubsequences: true).dropFirst().first.map(String.init) ?? "") {
            return APIError(403, "origin_not_allowed", "Without KILN_TOKEN requests from web pages of other sites are refused.")
        }
        return nil
    }

    /// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
    static func isLoopback(authority: String) -> Bool {
        var host = authority.lowercased()
        if host.hasPrefix("[") {
            guard let end = host.firstIndex(of: "]") else { return false }
            host = String(host[host.index(after: host.startIndex)..<end])
            return host == "::1"
        }
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    func artifact(_ id: String) throws -> ArtifactRecord {
        guard let a = try store.artifact(id: id) else {
            // A download link kept past the artifact's collection: gone, and asking again
            // makes it anew (a plain 404 read as a wrong link).
            if let at = try store.collectedAt(artifactID: id) { throw Self.collected(id, at: at) }
            throw APIError.notFound
        }
        return farm.withLiveProgress(try farm.checkingFile(a))
    }

    func prepare(_ req: HTTPRequest) throws -> HTTPResponse {
        var request = try PrepareBody.parse(req.body)
        let asked = request
        let binding: Binding
        do {
            request.sourcePath = try gate.check(request.sourcePath)
            binding = try farm.prepare(request)
        } catch let error where Self.isSourceGone(error) {
            // Same reference, same request: same answer, though the source has gone since (a
            // ready file stays ready; GET of the reference said so while this said 404).
            var same = asked
            same.sourcePath = SourceGate.normalize(asked.sourcePath)
            guard let stored = try store.reference(asked.reference), stored.request == same else { throw error }
            return try referenceAnswer(asked.reference)
        }
        let view = ReferenceView(reference: binding.reference, artifact: farm.withLiveProgress(binding.artifact))
        metrics.countRequest(enqueued: binding.enqueued, format: binding.artifact.plan.deliveryFormat)
        return .json(status: view.httpStatus, view)
    }

    static func isSourceGone(_ error: Error) -> Bool {
        (error as? APIError) == SourceGate.notFound || (error as? KilnError)?.code == .sourceNotFound
    }

    func referenceAnswer(_ ref: String) throws -> HTTPResponse {
        guard let r = try store.reference(ref), let stored = try store.artifact(id: r.artifactID) else { throw APIError.notFound }
        let a = farm.withLiveProgress(try farm.checkingFile(stored))
        let view = ReferenceView(reference: r, artifact: a, originalChanged: Self.originalChanged(a))
        return .json(status: view.httpStatus, view)
    }

    /// Whether a ready original's file changed (`Farm.originalChanged`): answered at once,
    /// before the maintenance pass fails it.
    static func originalChanged(_ a: ArtifactRecord) -> Bool {
        guard a.plan.deliveryFormat == .original, a.state == .ready, let f = a.file else { return false }
        return Farm.originalChanged(path: f.path, bytes: f.bytes)
    }

    func file(_ req: HTTPRequest, _ id: String) throws -> HTTPResponse {
        let a = try artifact(id)
        // Being collected: gone, as it will be once its row is (not "not ready yet").
        if a.state == .deleting { throw Self.collected(id, at: a.updatedAt) }
        guard a.state == .ready, let f = a.file else { throw APIError.notReady(id) }
        if Self.originalChanged(a) {
            throw Self.sourceChanged
        }
        try? store.touch(artifactID: id, now: SystemClock().nowMillis())
        let type = Self.mediaType(container: a.plan.container, hasVideo: a.plan.video != nil)
        // An original is the user's file, hashed by nobody: it is tagged by its identity.
        let response = HTTPResponse.file(path: f.path, contentType: type, etag: f.sha256, request: req)
        // The file went between the read above and the server's look at it: the collector
        // took it meanwhile (410), or it was lost or changed (the artifact's answer says so).
        if response.status == 404 {
            let now = try artifact(id)
            if now.state == .deleting { throw Self.collected(id, at: now.updatedAt) }
            if a.plan.deliveryFormat == .original {
                throw Self.sourceChanged
            }
            throw APIError.notReady(id)
        }
        return response
    }

    static let sourceChanged = APIError(409, "source_changed", "The file changed since it was asked for; ask again for its new content.")

    static func collected(_ id: String, at: Int64) -> APIError {
        APIError(410, "artifact_collected", "Artifact \(id) was collected at \(RFC3339.string(millis: at)) once "
                 + "no reference held it; ask for it again with POST /v1/prepare.")
    }

    /// What a browser or a phone's download manager needs to know the file by (an original
    /// is in its source's container).
    static let mediaTypes = ["mp4": "video/mp4", "m4v": "video/mp4", "mov": "video/quicktime", "3gp": "video/3gpp",
                             "mkv": "video/x-matroska", "webm": "video/webm", "ts": "video/mp2t", "avi": "video/x-msvideo",
                             "mp3": "audio/mpeg", "flac": "audio/flac", "ogg": "audio/ogg", "wav": "audio/wav", "aac": "audio/aac"]
    /// The same containers holding sound alone (a music video's audio, an audiobook): a
    /// client that picks its player by the type took `video/mp4` for pictures to show.
    static let soundTypes = ["mp4": "audio/mp4", "m4v": "audio/mp4", "mov": "audio/mp4", "3gp": "audio/3gpp",
                             "mkv": "audio/x-matroska", "webm": "audio/webm"]

    static func mediaType(container: String, hasVideo: Bool) -> String {
        (hasVideo ? nil : soundTypes[container]) ?? mediaTypes[container] ?? "application/octet-stream"
    }

    func events(_ req: HTTPRequest) throws -> HTTPResponse {
        let resumeText = req.headers["Last-Event-ID"] ?? req.queryValue("after")
        let after: Int64
        var gap: EventGap?
        if let resumeText {
            guard let n = Int64(resumeText), n >= 0 else {
                throw APIError.badRequest("after / Last-Event-ID must be a non-negative event sequence number.", field: "after")
            }
            // A position past the last event refers to another event log (the data
            // directory was replaced or restored): every event of this one is news to it.
            let last = try store.lastEventSeq()
            after = n > last ? 0 : n
            // Events after it that retention removed cannot be replayed: the listener is
            // told, so it asks for its references' state instead of waiting for news of them.
            let next = try store.oldestEventSeq() ?? last + 1
            if next > after + 1 { gap = EventGap(after: after, nextSeq: next) }
        } else {
            after = try store.lastEventSeq()   // a new listener hears what happens from now on
        }
        let hub = farm.events
        let heartbeat = heartbeatSeconds
        let missed = gap
        let metrics = self.metrics
        return .eventStream { stream in
            let cursor = hub.cursor(after: after)
            // A client gone (the server's hang-up watch ends its stream within a second)
            // wakes the wait for events: its thread and its count as a listener go now.
            stream.onTermination { _ in cursor.stop() }
            let thread = Thread {
                metrics.sseClients(+1)
                defer { metrics.sseClients(-1) }
                _ = stream.sendComment("kiln events after \(after)")
                if let missed, !stream.send(event: EventGap.type, data: JSON.string(missed)) { stream.close(); return }
                while stream.isOpen && !hub.isClosed {
                    let batch: [EventRecord]
                    do { batch = try cursor.next(timeout: heartbeat) } catch { Thread.sleep(forTimeInterval: 1); continue }
                    if batch.isEmpty {
                        if !stream.sendComment("heartbeat") { break }
                        continue
                    }
                    for e in batch {
                        let data = JSON.string(EventView(e))
                        let ok = e.type == .progress
                            ? stream.send(event: e.type.rawValue, data: data)
                            : stream.send(event: e.type.rawValue, id: String(e.seq), data: data)
                        if !ok { break }
                    }
                }
                stream.close()
            }
            thread.name = "kiln-sse"
            thread.start()
        }
    }

    /// Sent first to a listener resuming from a position whose next events are no longer
    /// stored (`KILN_EVENT_RETENTION_SECONDS`): `after` its position, the events up to
    /// `next_seq` were removed; what they said is in each reference's answer (`GET /v1/references/…`).
    struct EventGap: Encodable {
        static let type = "events.gap"
        let after: Int64
        let nextSeq: Int64
        let missed: Int64
        init(after: Int64, nextSeq: Int64) {
            self.after = after
            self.nextSeq = nextSeq
            missed = nextSeq - after - 1
        }
        enum CodingKeys: String, CodingKey { case after, nextSeq = "next_seq", missed }
    }

    struct QueueView: Encodable {
        struct Slot: Encodable { let total: Int; let busy: Int }
        struct Storage: Encodable {
            let storedBytes: Int64, unreferencedBytes: Int64, freeBytes: Int64?, budgetBytes: Int64?, minFreeBytes: Int64
            enum CodingKeys: String, CodingKey {
                case storedBytes = "stored_bytes", unreferencedBytes = "unreferenced_bytes", freeBytes = "free_bytes"
                case budgetBytes = "budget_bytes", minFreeBytes = "min_free_bytes"
            }
        }
        struct Failure: Encodable {
            let artifactID: String, deliveryFormat: String, source: String, error: AttemptErrorView?, at: String
            enum CodingKeys: String, CodingKey { case artifactID = "artifact_id", deliveryFormat = "delivery_format", source, error, at }
        }
        let counts: [String: Int]
        let artifacts: [String: Int]
        let running: [JobView]
        let queued: [JobView]
        let recentFailures: [Failure]
        let slots: [String: Slot]
        let storage: Storage
        let at: String
        enum CodingKeys: String, CodingKey {
            case counts, artifacts, running, queued, recentFailures = "recent_failures", slots, storage, at
        }
    }

    func queue() throws -> QueueView {
        let snap = try store.queueSnapshot(recentFailures: 20, queuedLimit: 100)
        var slots: [String: QueueView.Slot] = [:]
        for (kind, s) in farm.slots { slots[kind.rawValue] = .init(total: s.total, busy: s.busy) }
        return QueueView(
            counts: snap.jobsByState, artifacts: snap.artifactsByState, running: snap.running.map { JobView(farm.withLiveProgress($0), source: snap.sources[$0.artifactID]) },
            queued: snap.queued.map { JobView($0, source: snap.sources[$0.artifactID]) },
            recentFailures: snap.recentFailures.map {
                .init(artifactID: $0.id, deliveryFormat: $0.plan.deliveryFormat.rawValue, source: $0.source.path,
                      error: ($0.failure ?? $0.errors.last).map(AttemptErrorView.init), at: RFC3339.string(millis: $0.updatedAt))
            },
            slots: slots,
            storage: .init(storedBytes: snap.storedBytes, unreferencedBytes: snap.unreferencedBytes, freeBytes: farm.freeBytes,
                           budgetBytes: farm.config.storageBudgetBytes, minFreeBytes: farm.config.minFreeBytes),
            at: RFC3339.string(millis: SystemClock().nowMillis()))
    }
}
