import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 client over a plain socket, so tests control every byte (malformed
/// requests, streams read a line at a time) and depend on nothing but the kernel.
public final class RawHTTP {
    public struct Response {
        public let status: Int
        public let headers: [String: String]   // lower-cased names
        public let body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    public init(port: UInt16, host: String = "127.0.0.1", timeoutSeconds: Int = 30) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket() failed") }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else { close(fd); throw TestFailure("cannot connect to \(host):\(port)") }
    }

    deinit { close(fd) }

    public func send(_ bytes: [UInt8]) throws {
        var off = 0
        while off < bytes.count {
            let n = bytes[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send failed") }
            off += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads more bytes into the buffer; false at end of stream or timeout.
    func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return false }
        buffer += chunk[0..<n]
        return true
    }

    /// The next line (without CRLF), or nil at end of stream.
    public func readLine() -> String? {
        while true {
            if let i = buffer.firstIndex(of: 10) {
                var line = Array(buffer[..<i])
                buffer.removeFirst(i + 1)
                if line.last == 13 { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard fill() else { return nil }
        }
    }

    func read(count: Int) -> [UInt8]? {
        while buffer.count < count { guard fill() else { return nil } }
        let out = Array(buffer[..<count])
        buffer.removeFirst(count)
        return out
    }

    /// Reads the status line and headers.
    public func readHead() throws -> (status: Int, headers: [String: String]) {
        guard let statusLine = readLine() else { throw TestFailure("no response") }
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { throw TestFailure("bad status line \(statusLine)") }
        var headers: [String: String] = [:]
        while let line = readLine(), !line.isEmpty {
            if let c = line.firstIndex(of: ":") {
                headers[line[..<c].lowercased()] = line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return (status, headers)
    }

    /// Reads one whole response (Content-Length, chunked, or to end of stream).
    public func readResponse(head: Bool = false) throws -> Response {
        let (status, headers) = try readHead()
        if head || status == 204 || status == 304 { return Response(status: status, headers: headers, body: []) }
        var body: [UInt8] = []
        if let len = headers["content-length"].flatMap(Int.init) {
            guard let b = read(count: len) else { throw TestFailure("short body") }
            body = b
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while let sizeLine = readLine(), let size = Int(sizeLine.split(separator: ";")[0], radix: 16) {
                if size == 0 { _ = readLine(); break }
                guard let b = read(count: size) else { break }
                body += b
                _ = readLine()
            }
        } else {
            while fill() {}
            body = buffer
            buffer = []
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// One request on a fresh connection.
    public static func request(port: UInt16, _ method: String, _ path: String, headers: [String: String] = [:],
                               body: [UInt8] = []) throws -> Response {
        let c = try RawHTTP(port: port)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        try c.send(Array((head + "\r\n").utf8) + body)
        return try c.readResponse(head: method == "HEAD")
    }

    public static func json(port: UInt16, _ method: String, _ path: String, _ body: String, headers: [String: String] = [:]) throws -> Response {
        var h = headers
        h["Content-Type"] = "application/json"
        return try request(port: port, method, path, headers: h, body: Array(body.utf8))
    }
}

/// Server-Sent Events read from a `RawHTTP` connection.
public struct SSEEvent: Equatable {
    public var id: String?
    public var event: String?
    public var data: String
}

extension RawHTTP {
    /// Opens an event stream; the caller reads with `nextEvent`.
    public static func eventStream(port: UInt16, path: String, headers: [String: String] = [:]) throws -> RawHTTP {
        let c = try RawHTTP(port: port)
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        try c.send(head + "\r\n")
        let (status, _) = try c.readHead()
        guard status == 200 else { throw TestFailure("event stream answered \(status)") }
        return c
    }

    /// The next event (comments skipped), reading through chunked framing; nil at end, or
    /// when none has come within `seconds` (heartbeats keep the socket's own timeout away).
    public func nextEvent(within seconds: Double? = nil) -> SSEEvent? {
        var event = SSEEvent(id: nil, event: nil, data: "")
        var sawField = false
        let deadline = seconds.map { Date(timeIntervalSinceNow: $0) }
        while let line = readLine() {
            if let deadline, Date() > deadline { return nil }
            // Chunk-size lines and blank chunk trailers appear between event lines.
            if !line.isEmpty, line.allSatisfy({ $0.isHexDigit }), !line.contains(":") { continue }
            if line.isEmpty {
                if sawField { return event }
                continue
            }
            if line.hasPrefix(":") { continue }
            sawField = true
            if line.hasPrefix("id:") { event.id = line.dropFirst(3).trimmingCharacters(in: .whitespaces) }
            else if line.hasPrefix("event:") { event.event = line.dropFirst(6).trimmingCharacters(in: .whitespaces) }
            else if line.hasPrefix("data:") { event.data += (event.data.isEmpty ? "" : "\n") + line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
        }
        return nil
    }
}
