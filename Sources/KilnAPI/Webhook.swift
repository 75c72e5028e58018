import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Farm
import KilnCore
import Store

/// Delivers persisted events to `KILN_WEBHOOK_URL` in sequence order, as batches
/// `{"events": [...]}` signed with `X-Kiln-Signature: sha256=<hex HMAC-SHA256 of the body>`.
/// A batch is retried with backoff until the receiver answers 2xx; only then does the
/// stored position move, so a restart neither skips nor reorders (at least once).
public final class WebhookDeliverer: @unchecked Sendable {
    public let url: URL
    let secret: [UInt8]
    let store: any ArtifactStore
    let hub: EventHub
    let batchLimit: Int
    /// Backoff after a failed POST: doubling from `firstDelay` up to `maxDelay` seconds.
    let firstDelay: Double
    let maxDelay: Double
    private let lock = NSCondition()
    private var stopped = false
    private var thread: Thread?
    /// Signalled when the delivery thread has finished, so `stop` can wait for it.
    private let exited = DispatchSemaphore(value: 0)
    /// POSTs that failed so far, and events the receiver took (for metrics).
    public var failures: Int { lock.lock(); defer { lock.unlock() }; return failed }
    public var delivered: Int { lock.lock(); defer { lock.unlock() }; return taken }
    private var failed = 0
    private var taken = 0
    /// Where a failing receiver is said, once when it starts failing and once when it
    /// takes events again (not on every retry).
    let log: @Sendable (String) -> Void

    public init(url: URL, secret: String?, store: any ArtifactStore, hub: EventHub, batchLimit: Int = 100,
                firstDelay: Double = 1, maxDelay: Double = 60, postTimeout: Double = 15,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.postTimeout = postTimeout
        self.log = log
        self.url = url
        self.secret = Array((secret ?? "").utf8)
        self.store = store
        self.hub = hub
        self.batchLimit = batchLimit
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
    }

    public func start() {
        let t = Thread { [self] in run() }
        t.name = "kiln-webhook"
        thread = t
        t.start()
    }

    /// Stops delivering and waits (up to a POST's timeout) for a batch in flight to finish
    /// and its position to be stored: a batch the receiver took but whose position was
    /// not recorded would be sent again by the next deliverer.
    public func stop() {
        lock.lock(); stopped = true; lock.broadcast(); lock.unlock()
        if thread != nil {
            thread = nil   // a second stop has nothing to wait for
            _ = exited.wait(timeout: .now() + 20)
        }
    }

    private var isStopped: Bool { lock.lock(); defer { lock.unlock() }; return stopped }

    /// Sleeps up to `seconds`, waking early on stop.
    private func pause(_ seconds: Double) {
        lock.lock()
        if !stopped { _ = lock.wait(until: Date(timeIntervalSinceNow: seconds)) }
        lock.unlock()
    }

    private func run() {
        defer { exited.signal() }
        var start: Int64 = 0
        while !isStopped {
            do { start = try store.webhookPosition(); break } catch { pause(firstDelay) }
        }
        let cursor = hub.cursor(after: start)
        var failing = false
        while !isStopped {
            let batch: [EventRecord]
            do {
                batch = try cursor.next(timeout: 1, limit: batchLimit).filter { $0.type != .progress && $0.seq > 0 }
            } catch {
                pause(firstDelay); continue
            }
            guard let last = batch.last else { continue }
            var delay = firstDelay
            while !isStopped {
                let failure = post(batch)
                if failure == nil {
                    lock.lock(); taken += batch.count; lock.unlock()
                    if failing { log("webhook: \(Self.shown(url)) takes events again"); failing = false }
                    // Stored even when stopping meanwhile (once at least): the receiver has it.
                    repeat {
                        do { try store.setWebhookPosition(last.seq); break } catch { pause(firstDelay) }
                    } while !isStopped
                    break
                }
                lock.lock(); failed += 1; lock.unlock()
                if !failing {
                    log("webhook: POST to \(Self.shown(url)) failed (\(failure ?? "")); retrying with backoff, events kept in order")
                    failing = true
                }
                pause(delay * Double.random(in: 0.8...1.2))
                delay = min(delay * 2, maxDelay)
            }
        }
    }

    /// The URL as the log shows it: without the user and password or the query, where a
    /// receiver's credentials go (`https://user:pass@host/hook?token=…`), which the
    /// journal would keep for anyone who can read it.
    static func shown(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.host ?? "the webhook" }
        let hidden = parts.user != nil || parts.password != nil || parts.query != nil
        parts.user = nil
        parts.password = nil
        parts.query = nil
        parts.fragment = nil
        return (parts.string ?? url.host ?? "the webhook") + (hidden ? " (credentials not shown)" : "")
    }

    struct Batch: Encodable { let events: [EventView] }

    /// How long one POST may take, answer included. FoundationNetworking's request timeout
    /// is an idle one that a receiver which accepts and never answers did not end before a
    /// minute, holding every later event back.
    let postTimeout: Double

    /// One signed POST; nil on a 2xx answer within `postTimeout`, else why not.
    func post(_ events: [EventRecord]) -> String? {
        guard let body = try? Data(JSON.encode(Batch(events: events.map(EventView.init)))) else { return "the events could not be encoded" }
        var request = URLRequest(url: url, timeoutInterval: postTimeout)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("sha256=" + HMACSHA256.hex(key: secret, message: [UInt8](body)), forHTTPHeaderField: "X-Kiln-Signature")
        let done = DispatchSemaphore(value: 0)
        final class Outcome: @unchecked Sendable { var failure: String? = "no answer" }
        let outcome = Outcome()
        let task = URLSession.shared.dataTask(with: request) { _, response, error in
            if let error {
                outcome.failure = error.localizedDescription
            } else if let http = response as? HTTPURLResponse {
                outcome.failure = (200..<300).contains(http.statusCode) ? nil : "HTTP \(http.statusCode)"
            }
            done.signal()
        }
        task.resume()
        guard done.wait(timeout: .now() + postTimeout) == .success else {
            task.cancel()
            _ = done.wait(timeout: .now() + 5)   // the handler runs once, canceled
            return "no answer within \(Int(postTimeout)) s"
        }
        return outcome.failure
    }
}
