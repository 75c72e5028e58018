import KilnCore
import Planner
import Store
import Synchronization

/// Plans already made, by everything a plan depends on that varies per request: the
/// source's fingerprint, the quality, the device's caps and the audio language (policy
/// and presets are the farm's own, fixed for its life). The planner is pure, so a plan
/// made once is the plan; a library's clients ask for the same file the same way again
/// and again (a season downloaded to one phone, a retried request, a storm of identical
/// ones), and planning was the largest part of a request's CPU after the store.
final class PlanCache: Sendable {
    private let entries = Mutex<[String: Plan]>([:])
    private let capacity: Int

    init(capacity: Int = 2048) { self.capacity = capacity }

    func plan(fingerprint: String, request: PrepareRequest, make: () throws(KilnError) -> Plan) throws(KilnError) -> Plan {
        // Caps as canonical JSON (sorted keys): equal caps, equal key.
        let caps = request.caps.flatMap { try? CompactJSON.string($0) } ?? "null"
        let key = "\(fingerprint)|\(request.quality.rawValue)|\(request.audioLanguage ?? "")|\(caps)"
        if let known = entries.withLock({ $0[key] }) { return known }
        let plan = try make()
        entries.withLock { e in
            // Forgetting everything at once is crude but bounded.
            if e.count >= capacity { e.removeAll(keepingCapacity: true) }
            e[key] = plan
        }
        return plan
    }
}
