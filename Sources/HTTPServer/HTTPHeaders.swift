/// HTTP header fields in the order they were received or added. Names compare
/// case-insensitively (RFC 9110 section 5.1); each field keeps the spelling it was given.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public private(set) var fields: [Field] = []

    public init() {}

    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the named field, or nil. Setting replaces every field of that name.
    public subscript(name: String) -> String? {
        get { fields.first { Self.same($0.name, name) }?.value }
        set {
            if let newValue { set(name, newValue) } else { remove(name) }
        }
    }

    /// Every value of the named field, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.same($0.name, name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { Self.same($0.name, name) }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append(Field(name: name, value: value))
    }

    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { Self.same($0.name, name) }
    }

    public func makeIterator() -> IndexingIterator<[Field]> {
        fields.makeIterator()
    }

    public var count: Int { fields.count }

    static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}
