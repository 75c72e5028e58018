import Foundation

/// Runs `body(0..<count)` on `count` threads of their own, released together, and returns
/// when all are done. `DispatchQueue.concurrentPerform` is no substitute: it runs as many
/// iterations at once as there are cores (two here), so "200 concurrent requests" would
/// be two at a time.
public enum Concurrently {
    public static func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let ready = DispatchGroup(), done = DispatchGroup()
        let gate = DispatchSemaphore(value: 0)
        for i in 0..<count {
            ready.enter()
            done.enter()
            let thread = Thread {
                ready.leave()
                gate.wait()
                body(i)
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        ready.wait()
        for _ in 0..<count { gate.signal() }
        done.wait()
    }
}
