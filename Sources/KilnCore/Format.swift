#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The printf conversions Kiln's messages use, without `String(format:)` (which lives in
/// the full Foundation). The C library's own `vsnprintf` does the work, so digits and
/// rounding are those `String(format:)` produced.
public enum Format {
    /// `%<width>.<decimals>f`: `fixed(x, decimals: 2)` is `%.2f`, `fixed(x, decimals: 1, width: 5)` is `%5.1f`.
    public static func fixed(_ value: Double, decimals: Int, width: Int = 0) -> String {
        printf("%*.*f", [Int32(width), Int32(decimals), value])
    }

    /// How many times larger or smaller a ratio is, for people: `10 times` for 10 or 0.1,
    /// `2.5 times` for 2.5 or 0.4 (a tenth kept below ten).
    public static func times(_ ratio: Double) -> String {
        let times = max(ratio, 1 / ratio)
        return "\(fixed(times, decimals: times < 10 ? 1 : 0)) times"
    }

    /// A size for people, in the unit that keeps it readable: `5.2 GB`, `480.0 MB`, `6.0 kB`
    /// (a small file system's "0.0 GB" told nothing).
    public static func bytes(_ n: Int64) -> String {
        let x = Double(n)
        if abs(x) >= 1e9 { return fixed(x / 1e9, decimals: 1) + " GB" }
        if abs(x) >= 1e6 { return fixed(x / 1e6, decimals: 1) + " MB" }
        return fixed(x / 1e3, decimals: 1) + " kB"
    }

    /// A number and its noun, singular for one: `count(1, "packet")` is `1 packet`,
    /// `count(3, "packet")` is `3 packets` ("1 packets" read as a typo in an error).
    public static func count(_ n: Int, _ noun: String) -> String {
        "\(n) \(noun)\(n == 1 ? "" : "s")"
    }

    /// `%0<width>d`: `zeroPadded(7, width: 2)` is `07`.
    public static func zeroPadded(_ value: Int, width: Int) -> String {
        printf("%0*ld", [Int32(width), value])
    }

    private static func printf(_ format: String, _ arguments: [CVarArg]) -> String {
        // A va_list is spent once read: one pass measures, a second writes.
        let length = withVaList(arguments) { vsnprintf(nil, 0, format, $0) }
        guard length > 0 else { return "" }
        var buffer = [CChar](repeating: 0, count: Int(length) + 1)
        _ = buffer.withUnsafeMutableBufferPointer { b in withVaList(arguments) { vsnprintf(b.baseAddress, b.count, format, $0) } }
        return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension StringProtocol {
    /// Whether `part` occurs in the text, compared as UTF-8 bytes: `contains` as it is where
    /// the regex runtime is loaded (the media child does without it: Package.swift), an
    /// empty `part` included (false).
    public func includes(_ part: some StringProtocol) -> Bool {
        let text = Array(utf8), needle = Array(part.utf8)
        guard !needle.isEmpty, needle.count <= text.count else { return false }
        for start in 0...(text.count - needle.count) where text[start] == needle[0] {
            if text[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}

/// Kiln's release, as `kiln --version` and `prep-artifact --version` say it. Raised with
/// every change a user or an operator would notice; the media description's own version
/// (`MediaInfo.describerVersion`) is what decides whether a cached probe is read again.
public enum KilnVersion {
    public static let number = "0.63.0"
}
