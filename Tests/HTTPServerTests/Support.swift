import Foundation
import Synchronization
@testable import HTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// A started server on a free loopback port; stopped by the caller.
func startServer(
    _ adjust: (inout HTTPServer.Configuration) -> Void = { _ in },
    routes: (HTTPServer) -> Void
) throws -> HTTPServer {
    var configuration = HTTPServer.Configuration(host: "127.0.0.1", port: 0)
    adjust(&configuration)
    let server = HTTPServer(configuration: configuration)
    routes(server)
    try server.start()
    return server
}

struct CurlResult {
    var status: Int32
    var output: String
    var error: String
}

/// Runs /usr/bin/curl (a real, independent HTTP client) and waits for it.
func curl(_ arguments: [String]) throws -> CurlResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["--silent", "--show-error", "--max-time", "60"] + arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let output = out.fileHandleForReading.readDataToEndOfFile()
    let error = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CurlResult(
        status: process.terminationStatus, output: String(decoding: output, as: UTF8.self),
        error: String(decoding: error, as: UTF8.self))
}

/// A curl started in the background (for streams); `finish()` waits for it to exit.
final class BackgroundCurl: @unchecked Sendable {
    // @unchecked: the Process and pipe are used from the test's thread only.
    let process = Process()
    private let out = Pipe()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--silent", "--no-buffer", "--max-time", "60"] + arguments
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    func finish() -> String {
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}

/// A plain TCP client for what curl will not do: malformed requests, not reading.
final class RawClient {
    let fd: Int32

    init(port: UInt16, host: String = "127.0.0.1", receiveBuffer: Int32? = nil) throws {
        let isV6 = host.contains(":")
        fd = socket(isV6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        let result: Int32
        if isV6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    /// Reads until the server closes the connection (or 30 s pass without data).
    func readToEnd() -> String {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            data += buffer[0..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// True when the server closes the connection (read returns end of file) within
    /// 30 s; data that arrives first is skipped.
    func waitForClose() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    /// Reads until `marker` has been seen; returns everything read.
    func read(until marker: String) -> String {
        var text = ""
        var byte: UInt8 = 0
        while !text.hasSuffix(marker) {
            guard recv(fd, &byte, 1, 0) == 1 else { break }
            text.unicodeScalars.append(UnicodeScalar(byte))
        }
        return text
    }
}

/// Polls `condition` every 10 ms for up to `seconds` (a generous bound, not a timing claim).
func eventually(_ seconds: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// A temporary file with known bytes, removed by the caller.
func makeTemporaryFile(bytes: [UInt8]) throws -> String {
    let path = NSTemporaryDirectory() + "kiln-http-\(UUID().uuidString)"
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

struct Fetched {
    var status: Int
    var headers: HTTPHeaders
    var body: String
}

/// One request with curl, answer split into status, headers and body (curl -i).
func fetch(_ url: String, _ extra: [String] = []) throws -> Fetched {
    let result = try curl(["-i"] + extra + [url])
    guard result.status == 0 || result.status == 22 else {
        throw CurlFailure(message: "curl exit \(result.status): \(result.error)")
    }
    return parseResponse(result.output)
}

struct CurlFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

func parseResponse(_ text: String) -> Fetched {
    var rest = Substring(text)
    // Skip interim answers (100 Continue).
    while rest.hasPrefix("HTTP/1.1 100") || rest.hasPrefix("HTTP/1.0 100") {
        guard let end = rest.range(of: "\r\n\r\n") else { break }
        rest = rest[end.upperBound...]
    }
    let head: Substring, body: Substring
    if let end = rest.range(of: "\r\n\r\n") {
        head = rest[..<end.lowerBound]
        body = rest[end.upperBound...]
    } else {
        head = rest
        body = ""
    }
    var lines = head.components(separatedBy: "\r\n")
    let statusLine = lines.removeFirst()
    let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
    var headers = HTTPHeaders()
    for line in lines {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers.add(String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
    }
    return Fetched(status: status, headers: headers, body: String(body))
}
