import Glibc

/// Keeps re-encoded sound below full scale. libswresample mixes 5.1 down to stereo with
/// BS.775's coefficients (left = L + 0.707 C + 0.707 Ls) and does not normalise them for
/// float output, as the ffmpeg command does not: a loud passage with the channels in phase
/// reaches 2.4 times full scale, and clips hard in the player (the AAC encoder's own clip
/// avoidance only pumps the level). Normalising the matrix instead would make every
/// downmix 7.6 dB quieter, dialogue included. So the mix keeps its levels and a look-ahead
/// limiter takes the rare peaks down to −1 dBFS (streaming's usual true-peak ceiling) and
/// lets go over a tenth of a second.
///
/// The gain for sample k must be at most `need[k]` (ceiling / peak across channels) without
/// a step: a sliding minimum of `need` over the look-ahead window, released exponentially,
/// then averaged over the same window, is at most `need[k]` for every sample of the window
/// after k, so the sample `window − 1` behind the newest one is scaled by it. The sound is
/// delayed by that many samples inside the limiter; re-encoded audio is timed by its count
/// of samples, not by when they arrive, so the delay moves nothing.
struct PeakLimiter {
    static let ceiling: Float = 0.891  // −1 dBFS
    let channels: Int
    private let window: Int
    private let release: Double
    /// The last `window` samples in, channel after channel, as a ring (sample n at n % window).
    private var delay: [Float]
    /// Samples stepped through (drain's silence included), and real ones taken in.
    private var sample = 0
    private var taken = 0
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
        delay = Array(repeating: 0, count: window * channels)
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
            var peak: Float = 0
            let slot = (sample % window) * channels
            for c in 0..<channels {
                let x = planes[c][i]
                peak = max(peak, abs(x))
                delay[slot + c] = x
            }
            taken += 1
            // Written at or before i, which has been read.
            if step(need: peak > Self.ceiling ? Double(Self.ceiling / peak) : 1, into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// Gives out what the look-ahead still holds (at most `window − 1` samples: `planes`
    /// must have room for them), stepping on through silence. Returns how many.
    mutating func drain(into planes: [UnsafeMutablePointer<Float>]) -> Int {
        var written = 0
        while held > 0 {
            let slot = (sample % window) * channels
            for c in 0..<channels { delay[slot + c] = 0 }
            if step(need: 1, into: planes, at: written) { written += 1 }
        }
        return written
    }

    /// Room `drain` needs.
    var lookAhead: Int { window - 1 }

    /// One sample in (already in `delay`), and out the one `window − 1` behind it, if real,
    /// to `planes` at `index`: whether there was one.
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
        let slot = (k % window) * channels
        for c in 0..<channels { planes[c][index] = delay[slot + c] * gain }
        return true
    }
}
