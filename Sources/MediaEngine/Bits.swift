/// Reads bits most significant first from a buffer, within a limit; nil past it.
struct Bits {
    private let bytes: UnsafeBufferPointer<UInt8>
    private(set) var position = 0
    private var end: Int

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        end = bytes.count * 8
    }

    mutating func limit(to bits: Int) { end = min(end, bits) }

    mutating func read(_ count: Int) -> Int? {
        guard count >= 0, count <= 32, position + count <= end else { return nil }
        var value = 0
        for _ in 0..<count {
            value = value << 1 | Int(bytes[position >> 3] >> (7 - UInt8(position & 7)) & 1)
            position += 1
        }
        return value
    }

    mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, position + count <= end else { return false }
        position += count
        return true
    }

    /// LatmGetValue: a count of bytes (2 bits) less one, then the value in that many bytes.
    mutating func latmValue() -> Int? {
        guard let n = read(2) else { return nil }
        var value = 0
        for _ in 0...n {
            guard let b = read(8) else { return nil }
            value = value << 8 | b
        }
        return value
    }

    /// The next `count` bytes' worth of bits, as bytes.
    mutating func bytes(_ count: Int) -> [UInt8]? {
        guard let out = copy(from: position, to: position + count * 8) else { return nil }
        position += count * 8
        return out
    }

    /// The bits from `start` to `stop` as bytes, the last zero-padded.
    func copy(from start: Int, to stop: Int) -> [UInt8]? {
        guard start >= 0, start <= stop, stop <= end else { return nil }
        let shift = start & 7
        var out = [UInt8](repeating: 0, count: (stop - start + 7) / 8)
        var at = start >> 3
        for i in out.indices {
            let high = bytes[at] << shift
            let low = shift > 0 && at + 1 < bytes.count ? bytes[at + 1] >> (8 - shift) : 0
            out[i] = high | low
            at += 1
        }
        let spare = out.count * 8 - (stop - start)
        if spare > 0, !out.isEmpty { out[out.count - 1] &= 0xFF << spare }
        return out
    }
}
