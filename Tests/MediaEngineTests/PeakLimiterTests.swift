import Foundation
import Testing
import KilnTestSupport
@testable import MediaEngine

@Suite("the peak limiter after a downmix")
struct PeakLimiterTests {
    /// Runs `input` (planar) through a limiter in blocks of random sizes, in place as the
    /// resampler does, then drains it.
    static func limited(_ input: [[Float]], rate: Int32 = 48000, seed: UInt64) -> [[Float]] {
        var limiter = PeakLimiter(channels: input.count, sampleRate: rate)
        var random = SplitMix(seed: seed)
        var out = Array(repeating: [Float](), count: input.count)
        var i = 0
        while i < input[0].count {
            let n = min(input[0].count - i, Int.random(in: 1...2000, using: &random))
            var block = input.map { Array($0[i..<(i + n)]) }
            let given = withPlanes(&block) { limiter.process($0, count: n) }
            for c in block.indices { out[c] += block[c].prefix(given) }
            i += n
        }
        var rest = Array(repeating: [Float](repeating: .nan, count: limiter.lookAhead), count: input.count)
        let given = withPlanes(&rest) { limiter.drain(into: $0) }
        for c in rest.indices { out[c] += rest[c].prefix(given) }
        #expect(limiter.held == 0)
        return out
    }

    /// `body` given one pointer per plane, into one buffer; the planes as it left them.
    static func withPlanes<R>(_ planes: inout [[Float]], _ body: ([UnsafeMutablePointer<Float>]) -> R) -> R {
        let n = planes.first?.count ?? 0
        var flat = planes.flatMap { $0 }
        let result = flat.withUnsafeMutableBufferPointer { b in body((0..<planes.count).map { b.baseAddress! + $0 * n }) }
        planes = (0..<planes.count).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
        return result
    }

    @Test("sound below the ceiling comes out sample for sample as it went in, none lost or added, however it is cut into blocks")
    func quietIsUntouched() {
        var random = SplitMix(seed: 1)
        // Noise peaks between its samples up to twice its samples' magnitude: 0.44 keeps it
        // under the ceiling everywhere.
        let input = (0..<2).map { _ in (0..<20_000).map { _ in Float.random(in: -0.44...0.44, using: &random) } }
        for seed in 0..<5 { #expect(Self.limited(input, seed: UInt64(seed)) == input) }
        // Shorter than the look-ahead: all of it comes out at the drain.
        #expect(Self.limited([[0.5, -0.25, 0.125]], seed: 9) == [[0.5, -0.25, 0.125]])
    }

    @Test("peaks are held under the ceiling with no step in the gain, the samples keep their order, and the gain comes back after them")
    func peaksAreLimited() {
        // A 1 kHz tone at 0.2 with a burst at 2.4 times full scale in the middle.
        let input = [(0..<48_000).map { i -> Float in
            let t = Float(i) / 48000
            return (i >= 12_000 && i < 24_000 ? 2.4 : 0.2) * sinf(2 * .pi * 1000 * t)
        }]
        let out = Self.limited(input, seed: 3)[0]
        #expect(out.count == input[0].count)
        #expect(out.map(abs).max()! <= PeakLimiter.ceiling + 1e-6)
        // The gain applied to each sample: never above 1, and it moves smoothly (no step
        // larger than a look-ahead's share of the way down).
        let gains = zip(out, input[0]).compactMap { abs($1) > 0.05 ? Double($0 / $1) : nil }
        #expect(gains.allSatisfy { $0 > 0 && $0 <= 1 + 1e-6 })
        #expect(zip(gains, gains.dropFirst()).map { abs($1 - $0) }.max()! < 0.03, "a step (an instant attack would drop 0.63 at once)")
        // Before the burst untouched; half a second after it (five release times) within 1 %.
        #expect(zip(out, input[0]).prefix(11_700).allSatisfy { $0 == $1 })
        #expect(gains.suffix(500).allSatisfy { $0 > 0.99 })
    }

    @Test("peaks between samples are held under the ceiling too: a tone at a quarter of the sample rate whose samples stay at 0.74 while the sound between them reaches 1.05 is brought down to the ceiling (its samples alone left it 2.4 dB over)")
    func truePeaksAreLimited() {
        // sin(πn/2 + π/4): every sample at ±0.707 of the tone's amplitude, the tone's peaks
        // halfway between them.
        let amplitude: Float = 1.05
        let input = [(0..<48_000).map { n in amplitude * sinf(Float.pi / 2 * Float(n) + Float.pi / 4) }]
        #expect(input[0].map(abs).max()! < PeakLimiter.ceiling)
        let out = Self.limited(input, seed: 4)[0]
        #expect(out.count == input[0].count)
        // Past the attack the gain is steady; the tone's own peak is its gain times its amplitude.
        let gains = zip(out, input[0]).dropFirst(1000).map { Double($0 / $1) }
        let truePeak = gains.max()! * Double(amplitude)
        #expect(truePeak <= Double(PeakLimiter.ceiling) * 1.005, "true peak \(truePeak)")
        #expect(truePeak >= Double(PeakLimiter.ceiling) * 0.97, "limited more than it needs: \(truePeak)")
    }
}
