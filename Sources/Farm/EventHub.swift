import Foundation
import KilnCore
import Store

/// In-process fan-out of events. Persisted events are only ever read back from the store
/// (`store.events(after:)`), so a subscriber hears nothing the database does not hold; the
/// hub only says "look again" (`notify`, called after every store call that may have
/// written an event). Live `artifact.progress` events are not stored: they are kept in a
/// small ring and handed to cursors that are listening, and may be missed.
///
/// Sendable by its lock: `generation`, `live`, `liveCounter` and `closed` are guarded by
/// `state`, which also wakes waiting cursors.
public final class EventHub: @unchecked Sendable {
    let store: any ArtifactStore
    private let state = NSCondition()
    private var generation: UInt64 = 0
    private var live: [(id: UInt64, event: EventRecord)] = []
    private var liveCounter: UInt64 = 0
    private var closed = false
    static let liveRing = 256

    init(store: any ArtifactStore) { self.store = store }

    /// Wakes every cursor to read the store again.
    public func notify() {
        state.lock(); generation &+= 1; state.broadcast(); state.unlock()
    }

    /// A live-only event (progress), never stored.
    func publishLive(_ event: EventRecord) {
        state.lock()
        liveCounter += 1
        live.append((liveCounter, event))
        if live.count > Self.liveRing { live.removeFirst(live.count - Self.liveRing) }
        generation &+= 1
        state.broadcast()
        state.unlock()
    }

    /// Ends every cursor's wait; `next` returns nothing from now on.
    func close() {
        state.lock(); closed = true; state.broadcast(); state.unlock()
    }

    public var isClosed: Bool { state.lock(); defer { state.unlock() }; return closed }

    /// A blocking reader of events with `seq > after` (and live events from now on).
    public func cursor(after seq: Int64) -> EventCursor {
        state.lock(); defer { state.unlock() }
        return EventCursor(hub: self, after: seq, liveSeen: liveCounter)
    }

    /// Calls `handler` for each event with `seq > after`, in order, on a thread of its own
    /// (so `handler` may block; it must not assume any actor).
    public func subscribe(after seq: Int64, _ handler: @escaping @Sendable (EventRecord) -> Void) -> EventSubscription {
        let subscription = EventSubscription(cursor: cursor(after: seq))
        let thread = Thread { subscription.run(handler) }
        thread.name = "kiln-events"
        thread.start()
        return subscription
    }

    /// What changed since a cursor last looked: the generation to wait on and new live events.
    fileprivate func snapshot(liveSeen: UInt64) -> (generation: UInt64, live: [EventRecord], liveSeen: UInt64, closed: Bool) {
        state.lock(); defer { state.unlock() }
        let fresh = live.filter { $0.id > liveSeen }.map(\.event)
        return (generation, fresh, liveCounter, closed)
    }

    /// Waits until the generation moves past `seen` or the hub closes (true), or until
    /// `cursor` is stopped or `deadline` (false: nothing more to read for it).
    fileprivate func wait(past seen: UInt64, until deadline: Date, for cursor: EventCursor) -> Bool {
        state.lock(); defer { state.unlock() }
        while generation == seen && !closed {
            if cursor.stopped || !state.wait(until: deadline) { return false }
        }
        return !cursor.stopped
    }

    /// Marks `cursor` stopped and wakes it (under the lock its wait reads the mark with).
    fileprivate func stop(_ cursor: EventCursor) {
        state.lock(); cursor.stopped = true; state.broadcast(); state.unlock()
    }
}

/// Reads events in order from a position. Not for sharing between threads, but for
/// `stop`, which any thread may call.
public final class EventCursor: @unchecked Sendable {
    let hub: EventHub
    /// The last persisted sequence number handed out.
    public private(set) var position: Int64
    private var liveSeen: UInt64
    /// Guarded by the hub's lock (`EventHub.stop`).
    fileprivate var stopped = false

    init(hub: EventHub, after: Int64, liveSeen: UInt64) {
        self.hub = hub
        self.position = after
        self.liveSeen = liveSeen
    }

    /// The next events (persisted ones first, in sequence order, then live progress), or
    /// an empty list when nothing came within `timeout` seconds or the hub closed.
    public func next(timeout: Double, limit: Int = 256) throws(KilnError) -> [EventRecord] {
        let deadline = Date(timeIntervalSinceNow: max(0, timeout))
        while true {
            // Generation first, then the store: a notify in between is not missed.
            let snap = hub.snapshot(liveSeen: liveSeen)
            liveSeen = snap.liveSeen
            let stored = try hub.store.events(after: position, limit: limit)
            if let last = stored.last { position = last.seq }
            if !stored.isEmpty || !snap.live.isEmpty { return stored + snap.live }
            if snap.closed { return [] }
            if !hub.wait(past: snap.generation, until: deadline, for: self) { return [] }
        }
    }

    /// Ends a wait in `next` at once, and every later one: whoever reads has gone (an event
    /// listener whose connection closed, which had waited out the heartbeat, holding its
    /// thread and counted as a listener, up to 15 s; a canceled subscription).
    public func stop() { hub.stop(self) }
}

/// A callback subscriber; `cancel` stops it (within about a second).
public final class EventSubscription: @unchecked Sendable {
    private let cursor: EventCursor
    private let lock = NSLock()
    private var canceled = false

    init(cursor: EventCursor) { self.cursor = cursor }

    public func cancel() {
        lock.lock(); canceled = true; lock.unlock()
        cursor.stop()
    }

    private var isCanceled: Bool { lock.lock(); defer { lock.unlock() }; return canceled }

    fileprivate func run(_ handler: @Sendable (EventRecord) -> Void) {
        while !isCanceled && !cursor.hub.isClosed {
            do {
                for event in try cursor.next(timeout: 1) where !isCanceled { handler(event) }
            } catch {
                Thread.sleep(forTimeInterval: 1)   // the store is busy or broken; try again
            }
        }
    }
}
