/// Presentation times on a container's frame clock for reordered pictures that come with
/// decode times only (`VideoTranscodeLane.frameClock`).
struct FrameClock {
    /// One frame in the stream's time base.
    let step: Int64
    /// The first packet's decode time: the first picture shown is at it.
    private var first = noPTS
    /// How much later than its time the decoder gave the first picture.
    private var delay: Int64?
    private var next = noPTS

    init(step: Int64) { self.step = step }

    mutating func start(_ dts: Int64) { if first == noPTS, dts != noPTS { first = dts } }

    /// The time of the next picture shown, which the decoder timed `decoded`.
    mutating func time(decoded: Int64) -> Int64? {
        guard first != noPTS, decoded != noPTS else { return nil }
        let delay = self.delay ?? max(0, decoded - first)
        self.delay = delay
        let at = next == noPTS ? first : max(next, decoded - delay)
        next = at + step
        return at
    }
}
