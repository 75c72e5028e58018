/// One request as the handler sees it: libmicrohttpd has parsed it and read the whole body.
public struct HTTPRequest: Sendable {
    public struct QueryItem: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// "GET", "POST", … exactly as the client sent it.
    public var method: String
    /// The path with percent-escapes decoded, without the query ("/v1/artifacts/a b").
    public var path: String
    /// The request target as received ("/v1/events?after=12").
    public var target: String
    /// Query items in order, percent-escapes and `+` decoded.
    public var query: [QueryItem]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The client's IP address ("127.0.0.1", "::1"), empty if libmicrohttpd did not know it.
    public var remoteAddress: String
    /// "HTTP/1.1" or "HTTP/1.0".
    public var version: String

    public init(
        method: String, target: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [],
        remoteAddress: String = "", version: String = "HTTP/1.1"
    ) {
        self.method = method
        self.target = target
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let rawPath = String(parts.first ?? "")
        self.path = PercentDecoding.decode(rawPath, plusIsSpace: false) ?? rawPath
        self.query = parts.count > 1 ? PercentDecoding.queryItems(String(parts[1])) : []
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.version = version
    }

    /// The first value of the named query item, or nil.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    /// The body as UTF-8 text (invalid sequences repaired).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

enum PercentDecoding {
    /// Decodes %XX escapes (and `+` as space in query strings); nil when an escape is
    /// malformed or the result is not UTF-8.
    static func decode(_ text: String, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func queryItems(_ query: String) -> [HTTPRequest.QueryItem] {
        query.split(separator: "&", omittingEmptySubsequences: true).map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            let value = parts.count > 1 ? String(parts[1]) : ""
            return HTTPRequest.QueryItem(
                name: decode(name, plusIsSpace: true) ?? name,
                value: decode(value, plusIsSpace: true) ?? value
            )
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
