/// Decides what follows a failed attempt: try again later, or give up. Pure (the random
/// draw for jitter is an argument), so the rules are tested without a clock.
///
/// Backoff is exponential with "equal jitter": the n-th retry waits between half and all
/// of `min(cap, base × 2^(n−1))`, so a burst of failures (a disk that filled up) does not
/// come back in lockstep, and no retry waits longer than the cap.
public struct RetryPolicy: Sendable, Equatable {
    public var baseSeconds: Double
    public var capSeconds: Double

    public init(baseSeconds: Double = 10, capSeconds: Double = 600) {
        self.baseSeconds = baseSeconds
        self.capSeconds = capSeconds
    }

    public enum Decision: Sendable, Equatable {
        /// Wait in `retrying` until this time (ms since the epoch).
        case retry(at: Int64)
        /// Give up: the job and its artifact become `failed`.
        case fail
    }

    /// - attempt: the attempt that just failed (1 for the first).
    /// - random: a draw in 0..<1.
    public func decide(permanent: Bool, attempt: Int, maxAttempts: Int, now: Int64, random: Double) -> Decision {
        if permanent || attempt >= maxAttempts { return .fail }
        return .retry(at: now + Int64((delaySeconds(afterAttempt: attempt, random: random) * 1000).rounded()))
    }

    /// The wait after the `attempt`-th failure.
    public func delaySeconds(afterAttempt attempt: Int, random: Double) -> Double {
        let exponent = Double(max(0, min(attempt - 1, 62)))
        let ceiling = min(capSeconds, baseSeconds * pow2(exponent))
        let r = min(max(random, 0), 1)
        return ceiling / 2 + ceiling / 2 * r
    }

    private func pow2(_ e: Double) -> Double {
        var v = 1.0
        var i = 0.0
        while i < e && v < 1e18 { v *= 2; i += 1 }
        return v
    }
}
