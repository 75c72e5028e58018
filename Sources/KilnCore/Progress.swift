/// How far a run has got. The engine reports it at most twice a second; the child
/// process prints it as JSON lines and the farm stores it.
public struct JobProgress: Sendable, Codable, Equatable {
    public var encodedSeconds: Double
    public var durationSeconds: Double
    /// Media seconds per wall-clock second.
    public var speed: Double
    public var fraction: Double { durationSeconds > 0 ? min(1, max(0, encodedSeconds / durationSeconds)) : 0 }
    public var etaSeconds: Double? { speed > 0 ? max(0, (durationSeconds - encodedSeconds) / speed) : nil }

    enum CodingKeys: String, CodingKey {
        case encodedSeconds = "encoded_seconds", durationSeconds = "duration_seconds", speed, fraction, etaSeconds = "eta_seconds"
    }
    public init(encodedSeconds: Double, durationSeconds: Double, speed: Double) {
        self.encodedSeconds = encodedSeconds
        self.durationSeconds = durationSeconds
        self.speed = speed
    }
    public init(from decoder: any Swift.Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        encodedSeconds = try c.decode(Double.self, forKey: .encodedSeconds)
        durationSeconds = try c.decode(Double.self, forKey: .durationSeconds)
        speed = try c.decode(Double.self, forKey: .speed)
    }
    public func encode(to encoder: any Swift.Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(encodedSeconds, forKey: .encodedSeconds)
        try c.encode(durationSeconds, forKey: .durationSeconds)
        try c.encode(speed, forKey: .speed)
        try c.encode(fraction, forKey: .fraction)
        try c.encodeIfPresent(etaSeconds, forKey: .etaSeconds)
    }
}


/// Paces a run's progress to at most twice a second, with its speed since the start: the
/// one rule for every loop that reports (the demux loop, the copy of a file as it is).
public struct ProgressPacer {
    public static let interval = 0.5
    private let clock = SystemClock()
    private let started: Double
    private var last: Double

    public init() {
        started = clock.monotonicSeconds()
        last = started
    }

    /// The progress at `position` of `duration` seconds when a report is due, else nil.
    public mutating func due(position: Double, duration: Double) -> JobProgress? {
        let now = clock.monotonicSeconds()
        guard now - last >= Self.interval else { return nil }
        last = now
        return progress(position: position, duration: duration, at: now)
    }

    /// The progress at `position` now, due or not (the last report, at the end).
    public func final(position: Double, duration: Double) -> JobProgress {
        progress(position: position, duration: duration, at: clock.monotonicSeconds())
    }

    private func progress(position: Double, duration: Double, at now: Double) -> JobProgress {
        JobProgress(encodedSeconds: position, durationSeconds: duration, speed: position / max(now - started, 1e-3))
    }
}
