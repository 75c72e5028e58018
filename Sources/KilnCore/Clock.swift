#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One clock for everything time-based, so backoff, leases and retention can be tested
/// with an injected clock instead of sleeping.
public protocol Clock: Sendable {
    /// Wall time in milliseconds since the Unix epoch.
    func nowMillis() -> Int64
    /// Monotonic seconds, for measuring durations.
    func monotonicSeconds() -> Double
}

public struct SystemClock: Clock {
    public init() {}
    public func nowMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
    public func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
