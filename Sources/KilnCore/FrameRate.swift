/// The frame rates cameras, broadcasters and encoders use. A measured rate close to one of
/// them is that rate with timestamp rounding on top (Matroska's milliseconds make 30 fps
/// read as 30.001), so the planner sizes H.264 levels and the engine times its encode on it.
public enum StandardFrameRate {
    public static let rates: [(num: Int, den: Int)] = [
        (24000, 1001), (24, 1), (25, 1), (30000, 1001), (30, 1), (48, 1), (50, 1), (60000, 1001), (60, 1), (120, 1), (240, 1),
    ]

    /// The standard rate nearest `fps`, when within `tolerance` of it (relative: 0.2 % by
    /// default, a fifth of the 0.1 % between 30 and 29.97).
    public static func nearest(_ fps: Double, within tolerance: Double = 0.002) -> (num: Int, den: Int)? {
        guard fps.isFinite, fps > 0 else { return nil }
        let off = { (r: (num: Int, den: Int)) in abs(Double(r.num) / Double(r.den) / fps - 1) }
        guard let best = rates.min(by: { off($0) < off($1) }), off(best) < tolerance else { return nil }
        return best
    }
}
