/// One JSON setup for everything Kiln prints or stores: snake_case keys come from the
/// types' own `CodingKeys`, output is sorted so equal values print equal bytes. Kiln's own
/// writer (`CompactJSON`) and reader (`JSONReader`), not Foundation's, so that the media
/// child need not load Foundation; their output and answers are Foundation's (tests
/// compare them).
public enum JSON {
    public static func encode<T: Encodable>(_ value: T, pretty: Bool = false) throws -> [UInt8] {
        try CompactJSON.encode(value, pretty: pretty)
    }

    public static func string<T: Encodable>(_ value: T, pretty: Bool = false) -> String {
        guard let bytes = try? encode(value, pretty: pretty) else { return "null" }
        return String(decoding: bytes, as: UTF8.self)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONReader.decode(type, from: bytes)
    }
}

/// An untyped JSON value, for inputs whose every field must be checked by hand so that
/// an error can name the field (caps, HTTP bodies).
public enum JSONValue: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public struct ParseError: Error { public let message: String }

    public static func parse(_ bytes: [UInt8]) throws(ParseError) -> JSONValue {
        do { return try JSONReader.value(bytes) } catch { throw ParseError(message: error.description) }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }
}
