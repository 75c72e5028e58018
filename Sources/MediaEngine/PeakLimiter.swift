import Glibc

/// Keeps re-encoded sound below full scale. libswresample mixes 5.1 down to stereo with
/// BS.775's coefficients (left = L + 0.707 C + 0.707 Ls) and does not normalise them for
/// float output, as the ffmpeg command does not: a loud passage with the channels in phase
/// reaches 2.4 times full scale, and clips hard in the player (the AAC encoder's own clip
/// avoidance only pumps the level). Normalising the matrix instead would make every
/// downmix 7.6 dB quieter, dialogue included. So the mix keeps its levels and a look-ahead
/// limiter takes the rare peaks down to −2 dBTP and lets go over a tenth of a second.
///
/// True peak (ITU-R BS.1770-4 Annex 2): the sound a decoder reconstructs peaks between
/// samples as well, up to 3 dB above them, and an AAC encoder adds its own overshoot on
/// top. A master limited to −0.1 dBFS in samples is +1.1 dBTP; limited by its samples to
/// −1 dBFS it came out of AAC at +1.3 dBFS (96 kbit/s) and +0.8 (160), clipping in every
/// decoder that gives 16-bit samples (137 and 26 samples clipped in 8 s). Each sample's
/// need is taken from BS.1770's 4× interpolation of the sound around it, which `lag`
/// samples more of look-ahead allow. At −1 dBTP the encoder's own overshoot still clipped
/// 55 and 5 samples; −2 dBTP (what Spotify asks of masters louder than −14 LUFS, for
/// lossy encoding) left none, the loudest sample at −0.3 dBFS.
///
/// The gain for sample k must be at most `need[k]` (ceiling / peak across channels) without
/// a step: a sliding minimum of `need` over the look-ahead window, released exponentially,
/// then averaged over the same window, is at most `need[k]` for every sample of the window
/// after k, so the sample `window − 1` behind the newest need is scaled by it. The sound is
/// delayed by that many samples, and `lag` more, inside the limiter; re-encoded audio is timed by its count
/// of samples, not by when they arrive, so the delay moves nothing.
struct PeakLimiter {
    static let ceiling: Float = 0.794  // −2 dBTP
    /// BS.1770-4 Annex 2's interpolator, phases 1 to 3 (phase 0 is the sample itself, all
    /// but exactly), tap t on the sample t behind the newest of 12: the points a quarter, a
    /// half and three quarters of a sample after the one `lag` behind the newest.
    static let phases: [[Float]] = [
        [-0.0291748046875, 0.0292968750000, -0.0517578125000, 0.0891113281250, -0.1665039062500, 0.4650878906250,
         0.7797851562500, -0.2003173828125, 0.1015625000000, -0.0582275390625, 0.0330810546875, -0.0189208984375],
        [-0.0189208984375, 0.0330810546875, -0.0582275390625, 0.1015625000000, -0.2003173828125, 0.7797851562500,
         0.4650878906250, -0.1665039062500, 0.0891113281250, -0.0517578125000, 0.0292968750000, -0.0291748046875],
        [-0.0083007812500, 0.0148925781250, -0.0266113281250, 0.0476074218750, -0.1022949218750, 0.9721679687500,
         0.1373291015625, -0.0594482421875, 0.0332031250000, -0.0196533203125, 0.0109863281250, 0.0017089843750],
    ]
    /// The interpolator's centre: it speaks of the sample this far behind the newest.
    static let lag = 6
    static let taps = 12
    /// `phases` one after another, each oldest tap first, for a dot product with `history`.
    private static let oldestFirst: [Float] = phases.flatMap { $0.reversed() }
    /// Below this in 12 samples running, no interpolated point can reach the ceiling (the
    /// largest sum of a phase's taps' magnitudes is 2.02), and the interpolation is skipped.
    private static let quiet: Float = ceiling / phases.map { $0.reduce(0) { $0 + abs($1) } }.max()!
    let channels: Int
    private let window: Int
    private let release: Double
    /// The last `span` samples in (`window` + `lag`), channel after channel, as a ring
    /// (input sample n at n % span).
    private let span: Int
    private var delay: [Float]
    /// Each channel's newest `taps` samples, twice over (2 × `taps` per channel, sample n
    /// at n % taps and n % taps + taps), so those from `historyStart` on lie in order.
    private var history: [Float]
    private var historyStart = 0
    /// The last sample in with a magnitude of `quiet` or more (in any channel).
    private var lastLoud = Int.min / 2
    /// Samples stored (drain's silence included), and real ones taken in.
    private var input = 0
    private var taken = 0
    /// Samples whose need is known (`lag` behind `input`): the limiter's own clock.
    private var sample = 0
    /// Sliding minimum of `need`: (sample number, need), needs increasing from `minimaHead`.
    private var minima: [(Int, Double)] = []
    private var minimaHead = 0
    private var released = 1.0
    /// The released gains of the last `window` samples, as a ring, and their sum.
    private var gains: [Double]
    private var gainSum: Double

    init(channels: Int, sampleRate: Int32) {
        self.channels = channels
        window = max(1, Int(sampleRate) / 200)  // 5 ms
        release = 1 - exp(-1 / (0.1 * Double(max(sampleRate, 1))))
        span = window + Self.lag
        delay = Array(repeating: 0, count: span * channels)
        history = Array(repeating: 0, count: 2 * Self.taps * channels)
        gains = Array(repeating: 1, count: window)
        gainSum = Double(window)
    }

    /// Real samples taken in and not yet given out.
    var held: Int { taken - max(0, sample - (window - 1)) }

    /// Limits `count` samples of planar float sound in place: the samples that have left
    /// the look-ahead take the place of those that came in, from the start of each plane.
    /// Returns how many there are (`count` once the look-ahead is full, fewer before).
    mutating func process(_ planes: [UnsafeMutablePointer<Float>], count: Int) -> Int {
        var written = 0
        for i in 0..<count {
            store { planes[$0][i] }
            taken += 1
            // Written at or before i, which has been read.
            if advance(into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// Gives out what the look-ahead still holds (at most `lookAhead` samples: `planes`
    /// must have room for them), stepping on through silence. Returns how many.
    mutating func drain(into planes: [UnsafeMutablePointer<Float>]) -> Int {
        var written = 0
        while held > 0 {
            store { _ in 0 }
            if advance(into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// Room `drain` needs.
    var lookAhead: Int { window - 1 + Self.lag }

    /// Takes in one sample, `value(c)` in channel c.
    private mutating func store(_ value: (Int) -> Float) {
        let slot = (input % span) * channels, h = input % Self.taps
        for c in 0..<channels {
            let x = value(c)
            delay[slot + c] = x
            history[c * 2 * Self.taps + h] = x
            history[c * 2 * Self.taps + h + Self.taps] = x
            if abs(x) >= Self.quiet { lastLoud = input }
        }
        input += 1
        historyStart = input % Self.taps
    }

    /// The need of the sample `lag` behind the newest one in, once there is one: ceiling
    /// over its true peak across channels (its own magnitude, and the interpolated points
    /// after it). Then `step`.
    private mutating func advance(into planes: [UnsafeMutablePointer<Float>], at index: Int) -> Bool {
        guard input > Self.lag else { return false }
        let j = input - 1 - Self.lag
        var peak: Float = 0
        for c in 0..<channels { peak = max(peak, abs(delay[(j % span) * channels + c])) }
        if input - 1 - lastLoud < Self.taps {
            // Before the first sample, silence: the history starts zeroed.
            history.withUnsafeBufferPointer { h in
                Self.oldestFirst.withUnsafeBufferPointer { taps in
                    for c in 0..<channels {
                        let newest = h.baseAddress! + c * 2 * Self.taps + historyStart
                        for phase in 0..<Self.phases.count {
                            var y: Float = 0
                            for t in 0..<Self.taps { y += taps[phase * Self.taps + t] * newest[t] }
                            peak = max(peak, abs(y))
                        }
                    }
                }
            }
        }
        return step(need: peak > Self.ceiling ? Double(Self.ceiling / peak) : 1, into: planes, at: index)
    }

    /// One sample's need in, and out the one `window − 1` behind it, if real, to `planes`
    /// at `index`: whether there was one.
    private mutating func step(need: Double, into planes: [UnsafeMutablePointer<Float>], at index: Int) -> Bool {
        while minima.count > minimaHead, minima[minima.count - 1].1 >= need { minima.removeLast() }
        minima.append((sample, need))
        while minima[minimaHead].0 <= sample - window { minimaHead += 1 }
        if minimaHead > 4096 { minima.removeFirst(minimaHead); minimaHead = 0 }
        released = min(minima[minimaHead].1, released + (1 - released) * release)
        let ring = sample % window
        gainSum += released - gains[ring]
        gains[ring] = released
        let k = sample - (window - 1)
        sample += 1
        guard k >= 0, k < taken else { return false }
        let gain = Float(min(1, gainSum / Double(window)))
        let slot = (k % span) * channels
        for c in 0..<channels { planes[c][index] = delay[slot + c] * gain }
        return true
    }
}
