/// An optional field the contract writes as `…|null` (CONTRACT.md: the plan's `video`,
/// `audio` and `encoder`, the output's `video` and `audio`, an answer's `file`, `progress`
/// and `error`): its key is always there, with `null` when it has no value, rather than left
/// out as Swift's coding leaves a nil optional. Clients whose decoders require every
/// declared key (kotlinx.serialization, say) then read an audio-only plan. Reading takes
/// the key absent as well as null (plans stored before, other writers).
@propertyWrapper
public struct Nullable<Value> {
    public var wrappedValue: Value?

    public init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }
}

extension Nullable: Sendable where Value: Sendable {}
extension Nullable: Equatable where Value: Equatable {}

extension Nullable: Encodable where Value: Encodable {
    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        if let wrappedValue { try c.encode(wrappedValue) } else { try c.encodeNil() }
    }
}

extension Nullable: Decodable where Value: Decodable {
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        wrappedValue = c.decodeNil() ? nil : try c.decode(Value.self)
    }
}

extension KeyedDecodingContainer {
    /// A `Nullable` field whose key is missing reads as nil (the synthesized decoding would
    /// otherwise require the key).
    public func decode<Value: Decodable>(_ type: Nullable<Value>.Type, forKey key: Key) throws -> Nullable<Value> {
        try decodeIfPresent(type, forKey: key) ?? Nullable(wrappedValue: nil)
    }
}
