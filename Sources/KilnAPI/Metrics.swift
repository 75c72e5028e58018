import Foundation
import Farm
import KilnCore
import Store

/// Prometheus metrics (text format 0.0.4). Gauges are read from the store and the farm
/// when scraped; durations, bytes, failures and queue wait are observed from the event
/// stream (a ready or failed event → its artifact's job times), so they count what the
/// database holds.
public final class Metrics: @unchecked Sendable {
    private let lock = NSLock()
    private var durations = Histogram(bounds: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200])
    private var queueWait = Histogram(bounds: [0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600])
    private var outputBytes: Int64 = 0
    private var completed: [String: Int] = [:]        // by delivery format
    private var failures: [String: Int] = [:]         // by error code
    private var requests: [RequestKind: Int] = [:]
    struct RequestKind: Hashable { let result: String; let format: DeliveryFormat }
    private var sse = 0
    private var subscription: EventSubscription?
    /// The HTTP server's connections cut for a request not sent in time
    /// (`HTTPServer.deadlineCuts`); set once the server exists.
    public var connectionsCut: (@Sendable () -> Int)? {
        get { lock.lock(); defer { lock.unlock() }; return cutCounter }
        set { lock.lock(); cutCounter = newValue; lock.unlock() }
    }
    private var cutCounter: (@Sendable () -> Int)?
    /// The webhook's events delivered and POSTs failed (`WebhookDeliverer`); set when one is configured.
    public var webhookCounts: (@Sendable () -> (delivered: Int, failures: Int))? {
        get { lock.lock(); defer { lock.unlock() }; return webhookCounter }
        set { lock.lock(); webhookCounter = newValue; lock.unlock() }
    }
    private var webhookCounter: (@Sendable () -> (delivered: Int, failures: Int))?

    public init() {}

    /// Starts observing persisted events from now on.
    public func observe(_ farm: Farm) {
        let store = farm.store
        let after = (try? store.lastEventSeq()) ?? 0
        subscription = farm.events.subscribe(after: after) { [weak self] event in
            guard let self, event.type == .ready || event.type == .failed else { return }
            let artifact = try? store.artifact(id: event.artifactID)
            self.lock.lock(); defer { self.lock.unlock() }
            if event.type == .ready {
                self.completed[event.deliveryFormat.rawValue, default: 0] += 1
                self.outputBytes += artifact?.file?.bytes ?? 0
            } else {
                self.failures[event.error?.code ?? "unknown", default: 0] += 1
            }
            if let job = artifact?.job, let started = job.startedAt {
                if let finished = job.finishedAt { self.durations.observe(Double(finished - started) / 1000) }
                // From when the work was asked for: a promoted job's place in line moved, its wait did not start again.
                self.queueWait.observe(Double(max(0, started - job.askedAt)) / 1000)
            }
        }
    }

    public func stop() { subscription?.cancel() }

    func countRequest(enqueued: Bool, format: DeliveryFormat) {
        lock.lock(); requests[RequestKind(result: enqueued ? "enqueued" : "existing", format: format), default: 0] += 1; lock.unlock()
    }
    func sseClients(_ delta: Int) { lock.lock(); sse += delta; lock.unlock() }

    public func render(farm: Farm) -> String {
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) { out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n" }
        func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
            let l = labels.isEmpty ? "" : "{" + labels.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
            out += "\(name)\(l) \(format(value))\n"
        }
        let snap = try? farm.store.queueSnapshot(recentFailures: 0, queuedLimit: 0)
        family("kiln_jobs", "gauge", "Jobs by state.")
        for state in JobState.allCases { sample("kiln_jobs", [("state", state.rawValue)], Double(snap?.jobsByState[state.rawValue] ?? 0)) }
        family("kiln_artifacts", "gauge", "Artifacts by state.")
        for state in ArtifactState.allCases {
            sample("kiln_artifacts", [("state", state.rawValue)], Double(snap?.artifactsByState[state.rawValue] ?? 0))
        }
        family("kiln_worker_slots", "gauge", "Worker slots by job kind, total and busy.")
        for (kind, s) in farm.slots.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            sample("kiln_worker_slots", [("kind", kind.rawValue), ("use", "total")], Double(s.total))
            sample("kiln_worker_slots", [("kind", kind.rawValue), ("use", "busy")], Double(s.busy))
        }
        family("kiln_stored_bytes", "gauge", "Bytes of artifact files Kiln owns.")
        sample("kiln_stored_bytes", [("held", "all")], Double(snap?.storedBytes ?? 0))
        sample("kiln_stored_bytes", [("held", "unreferenced")], Double(snap?.unreferencedBytes ?? 0))
        if let free = farm.freeBytes {
            family("kiln_free_bytes", "gauge", "Free bytes on the artifacts folder's file system.")
            sample("kiln_free_bytes", [], Double(free))
        }
        if let cut = connectionsCut {
            family("kiln_http_connections_cut_total", "counter",
                   "Connections closed because a request's head or body did not arrive within KILN_HTTP_REQUEST_DEADLINE_SECONDS.")
            sample("kiln_http_connections_cut_total", [], Double(cut()))
        }
        if let webhook = webhookCounts?() {
            family("kiln_webhook_events_delivered_total", "counter", "Events the webhook's receiver took (a 2xx answer).")
            sample("kiln_webhook_events_delivered_total", [], Double(webhook.delivered))
            family("kiln_webhook_failed_posts_total", "counter",
                   "Webhook POSTs that failed (no 2xx answer in time); each is retried with backoff, events in order.")
            sample("kiln_webhook_failed_posts_total", [], Double(webhook.failures))
        }
        lock.lock(); defer { lock.unlock() }
        family("kiln_prepare_requests_total", "counter",
               "Prepare requests, by whether they queued work and by delivery format (an original is never queued: the file goes as it is).")
        for result in ["enqueued", "existing"] {
            for f in DeliveryFormat.allCases where !(result == "enqueued" && f == .original) {
                sample("kiln_prepare_requests_total", [("result", result), ("delivery_format", f.rawValue)],
                       Double(requests[RequestKind(result: result, format: f)] ?? 0))
            }
        }
        // Only jobs make artifacts ready: an original is ready when asked for (counted above).
        family("kiln_artifacts_completed_total", "counter", "Artifacts a job made ready, by delivery format (remux, transcode).")
        for f in DeliveryFormat.allCases where f != .original {
            sample("kiln_artifacts_completed_total", [("delivery_format", f.rawValue)], Double(completed[f.rawValue] ?? 0))
        }
        family("kiln_output_bytes_total", "counter", "Bytes of artifacts made ready.")
        sample("kiln_output_bytes_total", [], Double(outputBytes))
        family("kiln_failures_total", "counter", "Artifacts that failed, by error code.")
        for (code, n) in failures.sorted(by: { $0.key < $1.key }) { sample("kiln_failures_total", [("code", code)], Double(n)) }
        durations.render("kiln_job_duration_seconds", "Wall time of the successful or failed last attempt of a job.", into: &out)
        queueWait.render("kiln_queue_wait_seconds", "Time from queued to started.", into: &out)
        family("kiln_event_stream_clients", "gauge", "Open Server-Sent Events connections.")
        sample("kiln_event_stream_clients", [], Double(sse))
        return out
    }
}

struct Histogram {
    let bounds: [Double]
    var counts: [Int]
    var sum = 0.0
    var count = 0
    init(bounds: [Double]) { self.bounds = bounds; counts = Array(repeating: 0, count: bounds.count) }
    mutating func observe(_ v: Double) {
        for (i, b) in bounds.enumerated() where v <= b { counts[i] += 1 }
        sum += v
        count += 1
    }
    func render(_ name: String, _ help: String, into out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        for (i, b) in bounds.enumerated() { out += "\(name)_bucket{le=\"\(format(b))\"} \(counts[i])\n" }
        out += "\(name)_bucket{le=\"+Inf\"} \(count)\n\(name)_sum \(format(sum))\n\(name)_count \(count)\n"
    }
}

func format(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e15 ? String(Int64(v)) : String(v) }
func escape(_ s: String) -> String { s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") }
