/// JSON in, without Foundation: a strict RFC 8259 parser and a `Decoder` over what it
/// reads, so that the processes that only read and write JSON (the `prep-artifact` child
/// above all) need not load Foundation for it. Decoding follows Foundation's JSONDecoder
/// with its default strategies: the same values, and the same `DecodingError` cases for
/// missing keys, nulls, wrong types and numbers that do not fit.
///
/// Where it differs from Foundation: trailing commas are refused; a key written twice keeps
/// its last value (Foundation keeps the first); keys match byte for byte; an integer
/// written with a fraction or an exponent must be exactly that integer (Foundation rounds
/// through Double, so 1.0000000000000000001 was 1); only UTF-8 is read (Foundation also
/// guesses UTF-16 and UTF-32); `0e5` is read (Foundation refuses it, though not `0e-5`);
/// and a number that does not fit its type is reported at its own coding path
/// (Foundation reports it at the root).
///
/// Scope, as for `CompactJSON`: the types Kiln defines. Data, URL and Decimal, which
/// Foundation's decoder special-cases, fail with a type mismatch here instead of decoding
/// differently; Date decodes as Foundation's default strategy does (seconds since 2001).
public enum JSONReader {
    /// Input that is not JSON: one line for people, naming the byte where reading stopped.
    public struct SyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
        /// What is wrong, without the offset: "unexpected character 'x'".
        public let problem: String
        /// Offset in the input, from 0, of the byte the problem was found at.
        public let offset: Int
        public var description: String { "\(problem) at byte \(offset)" }
    }

    /// Bodies come from HTTP clients: deeper nesting is an error rather than a stack overflow.
    /// Foundation's decoder has the same limit.
    public static let maximumDepth = 512

    /// Decodes `type` from JSON text. Input that is not JSON throws
    /// `DecodingError.dataCorrupted` whose underlying error is a `SyntaxError`.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        let root: Node
        do { root = try parse(bytes, doublesOnly: false) } catch {
            throw DecodingError.dataCorrupted(DecodingError.Context(
                codingPath: [], debugDescription: "not valid JSON: \(error)", underlyingError: error))
        }
        return try Slot(node: root, parent: nil, key: nil).decode(type)
    }

    /// The untyped value of JSON text; numbers that a Double cannot hold (1e400) are refused.
    public static func value(_ bytes: [UInt8]) throws(SyntaxError) -> JSONValue {
        try parse(bytes, doublesOnly: true).jsonValue
    }

    // MARK: Tree

    /// What the parser reads. Numbers keep their text, so that integers beyond 2^53 decode
    /// exactly and each type can judge whether a number fits it.
    fileprivate enum Node {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([Node])
        /// Keys are unique (the last of a repeated key is kept), in the order first written.
        case object([(key: String, value: Node)])

        var jsonValue: JSONValue {
            switch self {
            case .null: .null
            case .bool(let b): .bool(b)
            // Parsed with `doublesOnly`, so the text is a number a Double holds.
            case .number(let text): .number(Double(text)!)
            case .string(let s): .string(s)
            case .array(let items): .array(items.map(\.jsonValue))
            case .object(let entries):
                .object(Dictionary(entries.lazy.map { ($0.key, $0.value.jsonValue) }, uniquingKeysWith: { $1 }))
            }
        }

        /// How Foundation names the kind of value in its type-mismatch messages.
        var kind: String {
            switch self {
            case .null: "null"
            case .bool: "bool"
            case .number: "number"
            case .string: "a string"
            case .array: "an array"
            case .object: "a dictionary"
            }
        }
    }

    fileprivate static func parse(_ bytes: [UInt8], doublesOnly: Bool) throws(SyntaxError) -> Node {
        try bytes.withUnsafeBufferPointer { (buffer) throws(SyntaxError) -> Node in
            var parser = Parser(bytes: buffer, doublesOnly: doublesOnly)
            return try parser.document()
        }
    }

    // MARK: Parser

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        /// Refuse numbers a Double cannot hold, at their offset (for `value(_:)`).
        let doublesOnly: Bool
        var i = 0
        /// Reused for strings with escapes.
        var scratch: [UInt8] = []

        init(bytes: UnsafeBufferPointer<UInt8>, doublesOnly: Bool) {
            self.bytes = bytes
            self.doublesOnly = doublesOnly
        }

        mutating func document() throws(SyntaxError) -> Node {
            // RFC 8259 lets a parser ignore a byte order mark; Foundation does.
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { i = 3 }
            skipWhitespace()
            let root = try value(depth: 0)
            skipWhitespace()
            if i < bytes.count { throw SyntaxError(problem: "unexpected \(describe(bytes[i])) after the value", offset: i) }
            return root
        }

        private func fail(_ problem: String) -> SyntaxError {
            SyntaxError(problem: "\(problem), found \(i < bytes.count ? describe(bytes[i]) : "end of input")", offset: i)
        }

        private mutating func skipWhitespace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x09, 0x0A, 0x0D: i += 1
                default: return
                }
            }
        }

        private mutating func value(depth: Int) throws(SyntaxError) -> Node {
            guard i < bytes.count else { throw SyntaxError(problem: "unexpected end of input", offset: i) }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw SyntaxError(problem: "unexpected \(describe(bytes[i]))", offset: i)
            }
        }

        private mutating func literal(_ word: StaticString) throws(SyntaxError) {
            for expected in UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount) {
                guard i < bytes.count, bytes[i] == expected else { throw fail("expected \(word)") }
                i += 1
            }
        }

        private mutating func array(depth: Int) throws(SyntaxError) -> Node {
            guard depth <= maximumDepth else { throw SyntaxError(problem: "nesting deeper than \(maximumDepth)", offset: i) }
            i += 1
            skipWhitespace()
            var items: [Node] = []
            if i < bytes.count && bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth))
                skipWhitespace()
                guard i < bytes.count else { throw fail("expected ',' or ']'") }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                guard bytes[i] == UInt8(ascii: ",") else { throw fail("expected ',' or ']'") }
                try separator(closing: UInt8(ascii: "]"))
            }
        }

        private mutating func object(depth: Int) throws(SyntaxError) -> Node {
            guard depth <= maximumDepth else { throw SyntaxError(problem: "nesting deeper than \(maximumDepth)", offset: i) }
            i += 1
            skipWhitespace()
            var entries: [(key: String, value: Node)] = []
            if i < bytes.count && bytes[i] == UInt8(ascii: "}") { i += 1; return .object(entries) }
            while true {
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try string()
                skipWhitespace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipWhitespace()
                entries.append((key, try value(depth: depth)))
                skipWhitespace()
                guard i < bytes.count else { throw fail("expected ',' or '}'") }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(Self.lastOfEachKey(entries)) }
                guard bytes[i] == UInt8(ascii: ",") else { throw fail("expected ',' or '}'") }
                try separator(closing: UInt8(ascii: "}"))
            }
        }

        /// Steps over a comma and the whitespace after it; a closing bracket next is a
        /// trailing comma, which JSON does not allow.
        private mutating func separator(closing: UInt8) throws(SyntaxError) {
            let comma = i
            i += 1
            skipWhitespace()
            if i < bytes.count && bytes[i] == closing { throw SyntaxError(problem: "trailing comma", offset: comma) }
        }

        private static func lastOfEachKey(_ entries: [(key: String, value: Node)]) -> [(key: String, value: Node)] {
            // Repeated keys are rare: look for one cheaply before building anything.
            let repeated: Bool
            if entries.count <= 16 {
                repeated = entries.indices.contains { i in entries[..<i].contains { RawKey.same($0.key, entries[i].key) } }
            } else {
                var seen = Set<RawKey>(minimumCapacity: entries.count)
                repeated = !entries.allSatisfy { seen.insert(RawKey(text: $0.key)).inserted }
            }
            guard repeated else { return entries }
            var position: [RawKey: Int] = [:]
            var unique: [(key: String, value: Node)] = []
            for entry in entries {
                if let p = position[RawKey(text: entry.key)] { unique[p].value = entry.value } else {
                    position[RawKey(text: entry.key)] = unique.count
                    unique.append(entry)
                }
            }
            return unique
        }

        // MARK: Numbers

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, returned as written.
        private mutating func number() throws(SyntaxError) -> String {
            let start = i
            if bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit") }
            if bytes[i] == UInt8(ascii: "0") {
                i += 1
                if i < bytes.count && isDigit(bytes[i]) { throw SyntaxError(problem: "number with a leading zero", offset: start) }
            } else {
                digits()
            }
            if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
                i += 1
                guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit after '.'") }
                digits()
            }
            if i < bytes.count && (bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E")) {
                i += 1
                if i < bytes.count && (bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-")) { i += 1 }
                guard i < bytes.count, isDigit(bytes[i]) else { throw fail("expected a digit in the exponent") }
                digits()
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            if doublesOnly && JSONReader.double(text) == nil {
                throw SyntaxError(problem: "number \(text) does not fit in a Double", offset: start)
            }
            return text
        }

        private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        private mutating func digits() { while i < bytes.count && isDigit(bytes[i]) { i += 1 } }

        // MARK: Strings

        private mutating func string() throws(SyntaxError) -> String {
            let open = i
            i += 1
            let start = i
            // Most strings have no escape: validate them and make the String in one copy.
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") {
                    i += 1
                    return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i - 1]), as: UTF8.self)
                }
                if b == UInt8(ascii: "\\") { break }
                if b >= 0x20 && b < 0x80 { i += 1 } else { try plainCharacter() }
            }
            guard i < bytes.count else { throw SyntaxError(problem: "unterminated string", offset: open) }
            scratch.removeAll(keepingCapacity: true)
            scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    i += 1
                    return String(decoding: scratch, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    try escape(stringStart: open)
                default:
                    let from = i
                    try plainCharacter()
                    scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[from..<i]))
                }
            }
            throw SyntaxError(problem: "unterminated string", offset: open)
        }

        /// Steps over one unescaped character in a string: control characters must be
        /// escaped, and the input must be well-formed UTF-8 (Unicode's table 3-7: no
        /// overlong forms, no surrogates, nothing above U+10FFFF).
        private mutating func plainCharacter() throws(SyntaxError) {
            let lead = bytes[i]
            if lead < 0x20 { throw SyntaxError(problem: "control character \(hex(lead)) in a string", offset: i) }
            if lead < 0x80 { i += 1; return }
            let second: ClosedRange<UInt8>
            let length: Int
            switch lead {
            case 0xC2...0xDF: (second, length) = (0x80...0xBF, 2)
            case 0xE0: (second, length) = (0xA0...0xBF, 3)
            case 0xE1...0xEC, 0xEE...0xEF: (second, length) = (0x80...0xBF, 3)
            case 0xED: (second, length) = (0x80...0x9F, 3)
            case 0xF0: (second, length) = (0x90...0xBF, 4)
            case 0xF1...0xF3: (second, length) = (0x80...0xBF, 4)
            case 0xF4: (second, length) = (0x80...0x8F, 4)
            default: throw SyntaxError(problem: "invalid UTF-8", offset: i)
            }
            guard i + length <= bytes.count, second.contains(bytes[i + 1]),
                  bytes[i + 2 ..< i + length].allSatisfy({ $0 & 0xC0 == 0x80 }) else {
                throw SyntaxError(problem: "invalid UTF-8", offset: i)
            }
            i += length
        }

        private mutating func escape(stringStart: Int) throws(SyntaxError) {
            let at = i
            guard i + 1 < bytes.count else { throw SyntaxError(problem: "unterminated string", offset: stringStart) }
            i += 2
            switch bytes[at + 1] {
            case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4(escapeAt: at)
                if (0xDC00...0xDFFF).contains(scalar) {
                    throw SyntaxError(problem: "lone surrogate \\u\(String(scalar, radix: 16))", offset: at)
                }
                if (0xD800...0xDBFF).contains(scalar) {
                    guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw SyntaxError(problem: "lone surrogate \\u\(String(scalar, radix: 16))", offset: at)
                    }
                    let lowAt = i
                    i += 2
                    let low = try hex4(escapeAt: lowAt)
                    guard (0xDC00...0xDFFF).contains(low) else {
                        throw SyntaxError(problem: "lone surrogate \\u\(String(scalar, radix: 16))", offset: at)
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                // Not a surrogate (checked above), so a scalar.
                scratch.append(contentsOf: Unicode.Scalar(scalar)!.utf8)
            default:
                throw SyntaxError(problem: "invalid escape \\\(printable(bytes[at + 1]))", offset: at)
            }
        }

        /// The four hex digits after `\u` (i is on the first), as a number.
        private mutating func hex4(escapeAt: Int) throws(SyntaxError) -> UInt32 {
            guard i + 4 <= bytes.count else { throw SyntaxError(problem: "unterminated \\u escape", offset: escapeAt) }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[i]
                let digit: UInt8
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
                default: throw SyntaxError(problem: "invalid \\u escape", offset: escapeAt)
                }
                value = value << 4 | UInt32(digit)
                i += 1
            }
            return value
        }

        private func describe(_ b: UInt8) -> String {
            (0x21...0x7E).contains(b) ? "character '\(printable(b))'" : "byte \(hex(b))"
        }
        private func printable(_ b: UInt8) -> String {
            (0x21...0x7E).contains(b) ? String(UnicodeScalar(b)) : hex(b)
        }
        private func hex(_ b: UInt8) -> String {
            let digits = Array("0123456789ABCDEF".utf8)
            return "0x" + String(decoding: [digits[Int(b >> 4)], digits[Int(b & 0xF)]], as: UTF8.self)
        }
    }

    /// A key as written, compared byte for byte: String's `==` would also match other
    /// spellings of the same accented letters (as Foundation's decoder does), and costs a
    /// quarter of a decode's time in the lookups.
    fileprivate struct RawKey: Hashable {
        let text: String

        static func same(_ a: String, _ b: String) -> Bool {
            a.utf8.count == b.utf8.count && a.utf8.elementsEqual(b.utf8)
        }
        static func == (a: RawKey, b: RawKey) -> Bool { same(a.text, b.text) }
        func hash(into hasher: inout Hasher) {
            for byte in text.utf8 { hasher.combine(byte) }
        }
    }

    // MARK: Numbers by type

    /// The Double a number's text stands for, or nil when it does not fit: too large, or
    /// so small it would read as zero (Foundation refuses both).
    fileprivate static func double(_ text: String) -> Double? { floatingPoint(text, as: Double.self) }

    fileprivate static func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ text: String, as: F.Type) -> F? {
        // The stdlib's parse rounds correctly; it reads every JSON number.
        guard let value = F(text), value.isFinite else { return nil }
        if value == 0 && text.utf8.prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") })
            .contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") }) { return nil }
        return value
    }

    /// The integer a number's text stands for, when it is exactly an integer that fits `I`:
    /// `1e3` and `1.0` are integers, `1.5` is not.
    fileprivate static func integer<I: FixedWidthInteger>(_ text: String, as: I.Type) -> I? {
        if let plain = I(text) { return plain }
        // Sign, then every digit of the mantissa with the exponent adjusted for the fraction.
        var negative = false
        var mantissa: [UInt8] = []
        var exponent = 0
        var exponentSign = 1
        var fractionDigits = 0
        var part = 0   // 0 integer part, 1 fraction, 2 exponent
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: "-"): if part == 0 { negative = true } else { exponentSign = -1 }
            case UInt8(ascii: "+"): break
            case UInt8(ascii: "."): part = 1
            case UInt8(ascii: "e"), UInt8(ascii: "E"): part = 2
            default:
                let digit = Int(b - UInt8(ascii: "0"))
                if part == 2 { exponent = min(exponent * 10 + digit, 1_000_000) } else {
                    mantissa.append(UInt8(digit))
                    if part == 1 { fractionDigits += 1 }
                }
            }
        }
        guard let first = mantissa.firstIndex(where: { $0 != 0 }) else { return 0 }
        let last = mantissa.lastIndex(where: { $0 != 0 })!
        // The value is digits[first...last] × 10^scale, and that last digit is not zero.
        let scale = exponentSign * exponent - fractionDigits + (mantissa.count - 1 - last)
        guard scale >= 0, last - first + 1 + scale <= 20 else { return nil }
        var magnitude: UInt64 = 0
        for digit in mantissa[first...last] + repeatElement(0, count: scale) {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(digit))
            if o1 || o2 { return nil }
            magnitude = sum
        }
        guard negative else { return I(exactly: magnitude) }
        // -magnitude, computed so that I.min (one more in magnitude than I.max) fits.
        guard I.isSigned, let lessOne = I(exactly: magnitude - 1) else { return nil }
        return 0 - lessOne - 1
    }

    // MARK: Decoder

    /// A coding path as a list from the innermost key back to the root, turned into an
    /// array only when asked for (errors, `codingPath`): most values never are.
    fileprivate final class PathNode {
        let parent: PathNode?
        let key: any CodingKey
        init(_ parent: PathNode?, _ key: any CodingKey) {
            self.parent = parent
            self.key = key
        }

        static func keys(_ node: PathNode?) -> [any CodingKey] {
            var keys: [any CodingKey] = []
            var n = node
            while let current = n { keys.append(current.key); n = current.parent }
            return keys.reversed()
        }
    }

    /// Foundation's key for an element of an array: "Index 3".
    fileprivate struct IndexKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(_ index: Int) { intValue = index }
        init?(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    /// The key `superDecoder()` reads, as in Foundation.
    fileprivate struct SuperKey: CodingKey {
        var stringValue: String { "super" }
        var intValue: Int? { nil }
        init() {}
        init?(stringValue: String) { guard stringValue == "super" else { return nil } }
        init?(intValue: Int) { nil }
    }

    /// One value and where it sits: its container's path and its own key (nil for the
    /// value a decoder itself stands for). Scalars are read from here directly; only
    /// nested types get a decoder.
    fileprivate struct Slot {
        let node: Node
        let parent: PathNode?
        let key: (any CodingKey)?

        var codingPath: [any CodingKey] { PathNode.keys(parent) + (key.map { [$0] } ?? []) }
        var decoder: Reader { Reader(node: node, path: key.map { PathNode(parent, $0) } ?? parent) }

        private func mismatch(_ type: Any.Type) -> DecodingError {
            if case .null = node {
                return .valueNotFound(type, .init(codingPath: codingPath,
                                                  debugDescription: "Cannot get value of type \(type) -- found null value instead"))
            }
            return .typeMismatch(type, .init(codingPath: codingPath,
                                             debugDescription: "Expected to decode \(type) but found \(node.kind) instead."))
        }

        private func doesNotFit(_ text: String, _ type: Any.Type) -> DecodingError {
            .dataCorrupted(.init(codingPath: codingPath, debugDescription: "Parsed JSON number <\(text)> does not fit in \(type)."))
        }

        func bool() throws -> Bool {
            guard case .bool(let b) = node else { throw mismatch(Bool.self) }
            return b
        }

        func string() throws -> String {
            guard case .string(let s) = node else { throw mismatch(String.self) }
            return s
        }

        func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
            guard case .number(let text) = node else { throw mismatch(I.self) }
            guard let value = JSONReader.integer(text, as: I.self) else { throw doesNotFit(text, I.self) }
            return value
        }

        func floatingPoint<F: BinaryFloatingPoint & LosslessStringConvertible>(_ type: F.Type) throws -> F {
            guard case .number(let text) = node else { throw mismatch(F.self) }
            guard let value = JSONReader.floatingPoint(text, as: F.self) else { throw doesNotFit(text, F.self) }
            return value
        }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            // Arrays of scalars decode each element through here: skip making a decoder.
            if T.self == String.self { return try string() as! T }
            if T.self == Int.self { return try integer(Int.self) as! T }
            if T.self == Double.self { return try floatingPoint(Double.self) as! T }
            if T.self == Bool.self { return try bool() as! T }
            return try T(from: decoder)
        }
    }

    fileprivate struct Reader: Decoder {
        let node: Node
        let path: PathNode?

        var codingPath: [any CodingKey] { PathNode.keys(path) }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard case .object(let entries) = node else { throw containerError([String: Any].self, "keyed") }
            return KeyedDecodingContainer(Keyed<Key>(entries: entries, path: path))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard case .array(let items) = node else { throw containerError([Any].self, "unkeyed") }
            return Unkeyed(items: items, path: path)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(slot: Slot(node: node, parent: path, key: nil)) }

        private func containerError(_ type: Any.Type, _ which: String) -> DecodingError {
            if case .null = node {
                return .valueNotFound(type, .init(codingPath: codingPath,
                                                  debugDescription: "Cannot get \(which) decoding container -- found null value instead"))
            }
            return .typeMismatch(type, .init(codingPath: codingPath,
                                             debugDescription: "Expected to decode \(type) but found \(node.kind) instead."))
        }
    }

    fileprivate struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let entries: [(key: String, value: Node)]
        let path: PathNode?
        /// Positions by key, for large objects (dictionaries); small ones are scanned.
        private let positions: [RawKey: Int]?

        init(entries: [(key: String, value: Node)], path: PathNode?) {
            self.entries = entries
            self.path = path
            positions = entries.count > 32
                ? Dictionary(uniqueKeysWithValues: entries.indices.map { (RawKey(text: entries[$0].key), $0) }) : nil
        }

        var codingPath: [any CodingKey] { PathNode.keys(path) }
        var allKeys: [Key] { entries.compactMap { Key(stringValue: $0.key) } }

        private func find(_ name: String) -> Node? {
            if let positions { return positions[RawKey(text: name)].map { entries[$0].value } }
            return entries.first { RawKey.same($0.key, name) }?.value
        }

        func contains(_ key: Key) -> Bool { find(key.stringValue) != nil }

        private func slot(_ key: any CodingKey) throws -> Slot {
            guard let node = find(key.stringValue) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath,
                                                           debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")."))
            }
            return Slot(node: node, parent: path, key: key)
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            if case .null = try slot(key).node { return true }
            return false
        }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try slot(key).bool() }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try slot(key).string() }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try slot(key).floatingPoint(type) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try slot(key).floatingPoint(type) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try slot(key).integer(type) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try slot(key).integer(type) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try slot(key).integer(type) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try slot(key).integer(type) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try slot(key).integer(type) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try slot(key).integer(type) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try slot(key).integer(type) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try slot(key).integer(type) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try slot(key).integer(type) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try slot(key).integer(type) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try slot(key).decode(type) }

        // One lookup instead of the three (contains, decodeNil, decode) of the defaults: Kiln's
        // records are mostly optionals.
        private func present(_ key: Key) -> Slot? {
            guard let node = find(key.stringValue) else { return nil }
            if case .null = node { return nil }
            return Slot(node: node, parent: path, key: key)
        }
        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key)?.bool() }
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try present(key)?.string() }
        func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key)?.floatingPoint(type) }
        func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try present(key)?.floatingPoint(type) }
        func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try present(key)?.integer(type) }
        func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try present(key)?.integer(type) }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? { try present(key)?.decode(type) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try slot(key).decoder.container(keyedBy: type)
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try slot(key).decoder.unkeyedContainer()
        }
        func superDecoder() throws -> any Decoder { superDecoder(SuperKey()) }
        func superDecoder(forKey key: Key) throws -> any Decoder { superDecoder(key) }

        /// As in Foundation, a missing key gives a decoder of null rather than an error.
        private func superDecoder(_ key: any CodingKey) -> any Decoder {
            Reader(node: find(key.stringValue) ?? .null, path: PathNode(path, key))
        }
    }

    fileprivate struct Unkeyed: UnkeyedDecodingContainer {
        let items: [Node]
        let path: PathNode?
        private(set) var currentIndex = 0

        init(items: [Node], path: PathNode?) {
            self.items = items
            self.path = path
        }

        var codingPath: [any CodingKey] { PathNode.keys(path) }
        var count: Int? { items.count }
        var isAtEnd: Bool { currentIndex >= items.count }

        /// Reads the next element; as in Foundation, the index moves on only when that succeeds.
        private mutating func next<R>(_ type: Any.Type, _ read: (Slot) throws -> R) throws -> R {
            let key = IndexKey(currentIndex)
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: codingPath + [key],
                                                              debugDescription: "Unkeyed container is at end."))
            }
            let result = try read(Slot(node: items[currentIndex], parent: path, key: key))
            currentIndex += 1
            return result
        }

        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(Any?.self, .init(codingPath: codingPath + [IndexKey(currentIndex)],
                                                                   debugDescription: "Unkeyed container is at end."))
            }
            guard case .null = items[currentIndex] else { return false }
            currentIndex += 1
            return true
        }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type) { try $0.bool() } }
        mutating func decode(_ type: String.Type) throws -> String { try next(type) { try $0.string() } }
        mutating func decode(_ type: Double.Type) throws -> Double { try next(type) { try $0.floatingPoint(type) } }
        mutating func decode(_ type: Float.Type) throws -> Float { try next(type) { try $0.floatingPoint(type) } }
        mutating func decode(_ type: Int.Type) throws -> Int { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type) { try $0.integer(type) } }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type) { try $0.integer(type) } }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type) { try $0.decode(type) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next(KeyedDecodingContainer<NestedKey>.self) { try $0.decoder.container(keyedBy: type) }
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try next((any UnkeyedDecodingContainer).self) { try $0.decoder.unkeyedContainer() }
        }
        mutating func superDecoder() throws -> any Decoder {
            try next((any Decoder).self) { $0.decoder }
        }
    }

    fileprivate struct Single: SingleValueDecodingContainer {
        let slot: Slot
        var codingPath: [any CodingKey] { slot.codingPath }

        func decodeNil() -> Bool {
            if case .null = slot.node { return true }
            return false
        }
        func decode(_ type: Bool.Type) throws -> Bool { try slot.bool() }
        func decode(_ type: String.Type) throws -> String { try slot.string() }
        func decode(_ type: Double.Type) throws -> Double { try slot.floatingPoint(type) }
        func decode(_ type: Float.Type) throws -> Float { try slot.floatingPoint(type) }
        func decode(_ type: Int.Type) throws -> Int { try slot.integer(type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try slot.integer(type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try slot.integer(type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try slot.integer(type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try slot.integer(type) }
        func decode(_ type: UInt.Type) throws -> UInt { try slot.integer(type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try slot.integer(type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try slot.integer(type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try slot.integer(type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try slot.integer(type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try slot.decode(type) }
    }
}
