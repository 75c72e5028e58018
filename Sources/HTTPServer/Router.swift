/// Method + path pattern → handler. Patterns are literal segments, `:name` parameters
/// (one segment) and an optional final `*name` (the rest of the path, may be empty).
/// The first registered route that matches wins. `HEAD` falls back to a `GET` route
/// (libmicrohttpd sends the headers without the body).
struct Router: Sendable {
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case rest(String)
    }

    struct Route: Sendable {
        var method: String
        var segments: [Segment]
        var handler: HTTPServer.Handler
    }

    enum Match {
        case found(HTTPServer.Handler, [String: String])
        /// The path exists with other methods (for 405 and its `Allow` header).
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private(set) var routes: [Route] = []

    mutating func add(method: String, pattern: String, handler: @escaping HTTPServer.Handler) {
        let segments = Self.split(pattern).map { text -> Segment in
            if text.hasPrefix(":") { return .parameter(String(text.dropFirst())) }
            if text.hasPrefix("*") { return .rest(String(text.dropFirst())) }
            return .literal(text)
        }
        precondition(
            !segments.dropLast().contains { if case .rest = $0 { true } else { false } },
            "a *rest segment must come last in \(pattern)")
        routes.append(Route(method: method.uppercased(), segments: segments, handler: handler))
    }

    /// `rawPath` still has its percent-escapes: segments are split first and decoded
    /// after, so an escaped slash (`%2F`) stays inside its parameter.
    func match(method: String, rawPath: String) -> Match {
        let raw = Self.split(rawPath)
        let decoded = raw.map { PercentDecoding.decode($0, plusIsSpace: false) ?? $0 }
        var allowed: [String] = []
        var getFallback: (HTTPServer.Handler, [String: String])?
        for route in routes {
            guard let parameters = Self.bind(route.segments, to: decoded, raw: raw) else { continue }
            if route.method == method { return .found(route.handler, parameters) }
            if method == "HEAD", route.method == "GET", getFallback == nil { getFallback = (route.handler, parameters) }
            allowed.append(route.method)
            if route.method == "GET" { allowed.append("HEAD") }
        }
        if let (handler, parameters) = getFallback { return .found(handler, parameters) }
        if allowed.isEmpty { return .notFound }
        var seen = Set<String>()
        return .methodNotAllowed(allowed: allowed.filter { seen.insert($0).inserted })
    }

    private static func bind(_ pattern: [Segment], to path: [String], raw: [String]) -> [String: String]? {
        var parameters: [String: String] = [:]
        for (index, segment) in pattern.enumerated() {
            switch segment {
            case .rest(let name):
                guard index <= path.count else { return nil }
                let rest = raw[index...].joined(separator: "/")
                parameters[name] = PercentDecoding.decode(rest, plusIsSpace: false) ?? rest
                return parameters
            case .literal(let text):
                guard index < path.count, path[index] == text else { return nil }
            case .parameter(let name):
                guard index < path.count, !path[index].isEmpty else { return nil }
                parameters[name] = path[index]
            }
        }
        return pattern.count == path.count ? parameters : nil
    }

    /// "/" → [], "/a/b" → ["a", "b"], "/a/" → ["a", ""] (a trailing slash is a different path).
    static func split(_ path: String) -> [String] {
        var text = Substring(path)
        if text.hasPrefix("/") { text = text.dropFirst() }
        if text.isEmpty { return [] }
        return text.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    }
}
