/// The frame rates cameras, broadcasters and encoders use. A measured rate close to one of
/// them is that rate with timestamp rounding on top (Matroska's milliseconds make 30 fps
/// read as 30.001), so the planner sizes H.264 levels and the engine times its encode on it.
public enum StandardFrameRate {
    public static let rates: [(num: Int, den: Int)] = [
        (24000, 1001), (24, 1), (25, 1), (30000, 1001), (30, 1), (48, 1), (50, 1), (60000, 1001), (60, 1), (120, 1), (240, 1),
    ]

    /// The fastest rate a stream's number is believed at: high-speed cameras and phones'
    /// slow motion record 240 to 500 pictures a second (a clip at 300 fps had been taken for
    /// one of unknown rate, and encoded at 300 fps with a level for 30 and keyframes every
    /// 50 pictures). Above, the number is most likely a time base's, not the pictures':
    /// QuickTime's 600 ticks a second, Matroska's 1,000.
    public static let fastestBelievable = 500.0

    /// The standard rate nearest `fps`, when within `tolerance` of it (relative: 0.2 % by
    /// default, a fifth of the 0.1 % between 30 and 29.97).
    public static func nearest(_ fps: Double, within tolerance: Double = 0.002) -> (num: Int, den: Int)? {
        guard fps.isFinite, fps > 0 else { return nil }
        let off = { (r: (num: Int, den: Int)) in abs(Double(r.num) / Double(r.den) / fps - 1) }
        guard let best = rates.min(by: { off($0) < off($1) }), off(best) < tolerance else { return nil }
        return best
    }
}

/// How an encode keeps within a frame-rate limit: it shows every n-th picture, for the
/// smallest whole n that brings the rate within the limit (120 → 60, 100 → 50, 240 → 60
/// for 60), so motion keeps an even cadence (dropping one picture in five of a 75 fps
/// stream would judder). A rate at most 10 % above the limit (a variable screen recording
/// at 62 fps) is shown at the limit instead, a picture left out now and then, where
/// halving it would lose the smoothness it has. So is one whose every n-th picture would
/// fall below film's rate where the limit is not (30 fps for a 25 fps device: 25, not 15;
/// a judder now and then is less harm than motion at half its pictures). A rate within
/// 0.2 % of the limit is within it: 60 fps plays on a device that says 59.94.
public enum FrameRateLimit {
    /// The slowest rate motion keeps its smoothness at: film's 23.976, with room for
    /// rounding (a level's limit halves 48 and 50 fps to 24 and 25, not 30 to 15).
    public static let leastSmoothRate = 23.9

    /// The rate an encode of a stream at `fps` shows within `most`; nil when it is within
    /// it or either is unknown.
    public static func rate(_ fps: Double, within most: Double) -> Double? {
        guard fps.isFinite, most.isFinite, fps > 0, most > 0, fps > most * 1.002 else { return nil }
        if fps <= most * 1.1 { return most }
        let everyNth = fps / (fps / (most * 1.002)).rounded(.up)
        return everyNth >= min(most, leastSmoothRate) * 0.999 ? everyNth : most
    }
}
