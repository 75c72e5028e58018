/// Compact JSON with sorted keys, byte for byte what Foundation's JSONEncoder writes with
/// `.sortedKeys, .withoutEscapingSlashes` (and `.prettyPrinted`, for people) for Kiln's
/// own types, at a fraction of its cost. Foundation's encoder builds a dictionary of boxed values per
/// object and looks types up at run time; the store encodes a plan, a source and a
/// request on every intake, and that was a fifth of a store cycle's CPU.
///
/// Coding paths are not tracked (every container reports an empty one): building them
/// cost more than the rest of the encoding, and Kiln's types do not read them.
///
/// Scope: the types Kiln defines (structs, enums, arrays, dictionaries with string keys,
/// optionals, strings, integers, floating point, booleans). Types Foundation's encoder
/// special-cases (Date, Data, URL, Decimal) are refused rather than written differently;
/// KilnCore does not import Foundation (the media child must not load it), so they are
/// known by name.
public enum CompactJSON {
    private static let foundationSpecial: Set<String> = Set(
        ["Foundation", "FoundationEssentials"].flatMap { module in
            ["Date", "Data", "URL", "Decimal"].map { "\(module).\($0)" }
        })

    public struct EncodingError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Compact, or with `pretty` what Foundation adds for `.prettyPrinted` (for people).
    public static func encode<T: Encodable>(_ value: T, pretty: Bool = false) throws -> [UInt8] {
        let root = try nested(value)
        var out: [UInt8] = []
        out.reserveCapacity(512)
        try root.write(into: &out)
        return pretty ? prettyPrinted(out) : out
    }

    public static func string<T: Encodable>(_ value: T, pretty: Bool = false) throws -> String {
        String(decoding: try encode(value, pretty: pretty), as: UTF8.self)
    }

    /// Compact output re-indented as Foundation's `.prettyPrinted` writes it: two spaces a
    /// level, `"key" : value`, and an empty array or object as its opening bracket, an
    /// empty line, then its closing bracket at its own level (`[\n\n  ]`). Strings are
    /// copied untouched, so the brackets, commas and colons inside them stay where they are.
    /// Meant for CompactJSON's own output (no whitespace, keys in order); other input is
    /// re-indented as it is, not checked.
    public static func prettyPrinted(_ compact: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(compact.count * 2)
        var depth = 0
        var inString = false, escaped = false
        func newline() {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
        }
        var i = 0
        while i < compact.count {
            let byte = compact[i]
            i += 1
            if inString {
                out.append(byte)
                if escaped { escaped = false }
                else if byte == UInt8(ascii: "\\") { escaped = true }
                else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                out.append(byte)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                if i < compact.count && (compact[i] == UInt8(ascii: "}") || compact[i] == UInt8(ascii: "]")) {
                    out.append(UInt8(ascii: "\n"))
                    newline()
                    out.append(compact[i])
                    i += 1
                } else {
                    depth += 1
                    newline()
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth = max(0, depth - 1)   // unbalanced input must not crash
                newline()
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
            case UInt8(ascii: ":"):
                out.append(contentsOf: [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: " ")])
            default:
                out.append(byte)
            }
        }
        return out
    }

    // MARK: Tree

    /// A value being built. Scalars are kept as Swift strings (short ones need no heap
    /// allocation); objects and arrays are classes because nested containers keep writing
    /// into them after the call that made them has returned.
    fileprivate enum Node {
        case none
        case raw(String)        // a number, true, false or null, written as it is
        case text(String)       // a string, escaped when written
        case object(ObjectNode)
        case array(ArrayNode)
        case boxed(Box)         // filled in later (a super encoder's value)

        func write(into out: inout [UInt8]) throws {
            switch self {
            case .none:
                throw EncodingError(description: "a value encoded nothing")
            case .raw(let s):
                out.append(contentsOf: s.utf8)
            case .text(let s):
                appendString(s, to: &out)
            case .object(let object):
                out.append(UInt8(ascii: "{"))
                // Sorted by key, then by the order written, so a key encoded twice keeps its
                // order and the last one wins, as in Foundation. (An insertion sort took
                // minutes over a request's caps object of 50,000 keys.)
                let entries = object.entries
                let keys = entries.map { Array($0.key.utf8) }
                let order = entries.indices.sorted { a, b in keys[a] == keys[b] ? a < b : keys[a].lexicographicallyPrecedes(keys[b]) }
                var first = true
                for (i, index) in order.enumerated() {
                    if i + 1 < order.count && entries[order[i + 1]].key == entries[index].key { continue }
                    if !first { out.append(UInt8(ascii: ",")) }
                    first = false
                    appendString(entries[index].key, to: &out)
                    out.append(UInt8(ascii: ":"))
                    try entries[index].node.write(into: &out)
                }
                out.append(UInt8(ascii: "}"))
            case .boxed(let box):
                try box.node.write(into: &out)
            case .array(let array):
                out.append(UInt8(ascii: "["))
                for (i, node) in array.items.enumerated() {
                    if i > 0 { out.append(UInt8(ascii: ",")) }
                    try node.write(into: &out)
                }
                out.append(UInt8(ascii: "]"))
            }
        }
    }

    fileprivate final class Box { var node: Node = .none }
    fileprivate final class ObjectNode { var entries: [(key: String, node: Node)] = [] }
    fileprivate final class ArrayNode { var items: [Node] = [] }

    // MARK: Scalars

    fileprivate static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings (keys, codes, hashes, paths) need no escape: copy them whole.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: s.utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x08: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                        hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    fileprivate static func float<F: BinaryFloatingPoint & LosslessStringConvertible>(_ value: F) throws -> Node {
        guard value.isFinite else { throw EncodingError(description: "\(value) is not a JSON number") }
        // Foundation writes the shortest round-tripping form without a trailing ".0".
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .raw(text)
    }

    fileprivate static func integer<I: BinaryInteger>(_ value: I) -> Node { .raw(String(value)) }
    fileprivate static var null: Node { .raw("null") }
    fileprivate static func bool(_ b: Bool) -> Node { .raw(b ? "true" : "false") }

    /// Any other Encodable value, through its own `encode(to:)`.
    fileprivate static func nested<T: Encodable>(_ value: T) throws -> Node {
        // Foundation special-cases these; writing them its way is not worth the code.
        if foundationSpecial.contains(_typeName(T.self, qualified: true)) {
            throw EncodingError(description: "\(T.self) is written differently by Foundation's encoder; CompactJSON does not take it")
        }
        let box = Box()
        try value.encode(to: Writer(box: box))
        return box.node
    }

    // MARK: Encoder

    fileprivate struct Writer: Encoder {
        let box: Box
        var codingPath: [CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            let object: ObjectNode
            if case .object(let existing) = box.node { object = existing } else {
                object = ObjectNode()
                box.node = .object(object)
            }
            return KeyedEncodingContainer(Keyed<Key>(object: object))
        }

        func unkeyedContainer() -> UnkeyedEncodingContainer {
            let array: ArrayNode
            if case .array(let existing) = box.node { array = existing } else {
                array = ArrayNode()
                box.node = .array(array)
            }
            return Unkeyed(array: array)
        }

        func singleValueContainer() -> SingleValueEncodingContainer { Single(box: box) }
    }

    fileprivate struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let object: ObjectNode
        var codingPath: [CodingKey] { [] }

        private func put(_ node: Node, _ key: Key) { object.entries.append((key.stringValue, node)) }

        mutating func encodeNil(forKey key: Key) throws { put(CompactJSON.null, key) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { put(CompactJSON.bool(value), key) }
        mutating func encode(_ value: String, forKey key: Key) throws { put(.text(value), key) }
        mutating func encode(_ value: Double, forKey key: Key) throws { put(try CompactJSON.float(value), key) }
        mutating func encode(_ value: Float, forKey key: Key) throws { put(try CompactJSON.float(value), key) }
        mutating func encode(_ value: Int, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { put(CompactJSON.integer(value), key) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            put(try CompactJSON.nested(value), key)
        }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectNode()
            put(.object(nested), key)
            return KeyedEncodingContainer(Keyed<NestedKey>(object: nested))
        }
        mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
            let nested = ArrayNode()
            put(.array(nested), key)
            return Unkeyed(array: nested)
        }
        mutating func superEncoder() -> Encoder {
            let box = Box()
            object.entries.append(("super", .boxed(box)))
            return Writer(box: box)
        }
        mutating func superEncoder(forKey key: Key) -> Encoder {
            let box = Box()
            put(.boxed(box), key)
            return Writer(box: box)
        }
    }

    fileprivate struct Unkeyed: UnkeyedEncodingContainer {
        let array: ArrayNode
        var codingPath: [CodingKey] { [] }
        var count: Int { array.items.count }

        private func put(_ node: Node) { array.items.append(node) }

        mutating func encodeNil() throws { put(CompactJSON.null) }
        mutating func encode(_ value: Bool) throws { put(CompactJSON.bool(value)) }
        mutating func encode(_ value: String) throws { put(.text(value)) }
        mutating func encode(_ value: Double) throws { put(try CompactJSON.float(value)) }
        mutating func encode(_ value: Float) throws { put(try CompactJSON.float(value)) }
        mutating func encode(_ value: Int) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int8) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int16) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int32) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: Int64) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt8) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt16) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt32) throws { put(CompactJSON.integer(value)) }
        mutating func encode(_ value: UInt64) throws { put(CompactJSON.integer(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws { put(try CompactJSON.nested(value)) }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectNode()
            put(.object(nested))
            return KeyedEncodingContainer(Keyed<NestedKey>(object: nested))
        }
        mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
            let nested = ArrayNode()
            put(.array(nested))
            return Unkeyed(array: nested)
        }
        mutating func superEncoder() -> Encoder {
            let box = Box()
            put(.boxed(box))
            return Writer(box: box)
        }
    }

    fileprivate struct Single: SingleValueEncodingContainer {
        let box: Box
        var codingPath: [CodingKey] { [] }

        mutating func encodeNil() throws { box.node = CompactJSON.null }
        mutating func encode(_ value: Bool) throws { box.node = CompactJSON.bool(value) }
        mutating func encode(_ value: String) throws { box.node = .text(value) }
        mutating func encode(_ value: Double) throws { box.node = try CompactJSON.float(value) }
        mutating func encode(_ value: Float) throws { box.node = try CompactJSON.float(value) }
        mutating func encode(_ value: Int) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: Int8) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: Int16) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: Int32) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: Int64) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: UInt) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: UInt8) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: UInt16) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: UInt32) throws { box.node = CompactJSON.integer(value) }
        mutating func encode(_ value: UInt64) throws { box.node = CompactJSON.integer(value) }
        mutating func encode<T: Encodable>(_ value: T) throws { box.node = try CompactJSON.nested(value) }
    }
}
