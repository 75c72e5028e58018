import Foundation
import Testing
@testable import HTTPServer

@Suite("File responses")
struct FileTests {
    /// 1000 bytes "0123456789" repeated, served at /file with ETag "abc123".
    static func fileServer() throws -> (HTTPServer, String, String) {
        let content = (0..<1000).map { UInt8(ascii: "0") + UInt8($0 % 10) }
        let path = try makeTemporaryFile(bytes: content)
        let server = try startServer { server in
            server.route("GET", "/file") { request, _ in
                .file(path: path, contentType: "video/mp4", etag: "abc123", request: request)
            }
            server.route("GET", "/missing") { request, _ in
                .file(path: path + ".gone", contentType: "video/mp4", etag: nil, request: request)
            }
        }
        return (server, path, "http://127.0.0.1:\(server.port)/file")
    }

    @Test("the whole file with Content-Length, Accept-Ranges and ETag")
    func whole() throws {
        let (server, path, url) = try Self.fileServer()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: path) }
        let answer = try fetch(url)
        #expect(answer.status == 200)
        #expect(answer.headers["content-length"] == "1000")
        #expect(answer.headers["accept-ranges"] == "bytes")
        #expect(answer.headers["etag"] == "\"abc123\"")
        #expect(answer.headers["content-type"] == "video/mp4")
        #expect(answer.body == String(repeating: "0123456789", count: 100))
        #expect(try fetch("http://127.0.0.1:\(server.port)/missing").status == 404)
    }

    @Test("a file replaced between the answer's headers and its bytes is not sent under the old ETag and length (503 file_changed; asked again, the new one)")
    func replacedWhileAnswered() throws {
        let path = try makeTemporaryFile(bytes: Array("old old old".utf8))
        let newer = try makeTemporaryFile(bytes: Array("new content, longer".utf8))
        defer { try? FileManager.default.removeItem(atPath: path); try? FileManager.default.removeItem(atPath: newer) }
        let replaceOnce = Once()
        let server = try startServer { server in
            server.route("GET", "/file") { request, _ in
                let answer = HTTPResponse.file(path: path, contentType: "video/mp4", etag: nil, request: request)
                // What an operator's rename does after the stat and before the open.
                if replaceOnce.first() { _ = rename(newer, path) }
                return answer
            }
        }
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)/file"
        let first = try fetch(url)
        #expect(first.status == 503, "\(first.status) \(first.body)")
        #expect(first.body.contains("file_changed"))
        let again = try fetch(url)
        #expect(again.status == 200 && again.body == "new content, longer", "\(again.status) \(again.body)")
    }

    @Test("a file that shrinks while it is sent (overwritten in place) ends the answer at once, the connection closed: the client waited out the 60 s connection timeout for bytes that never came")
    func shrunkWhileSent() throws {
        let path = try makeTemporaryFile(bytes: [UInt8](repeating: 7, count: 32 << 20))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let server = try startServer({ $0.idleTimeoutSeconds = 600 }) { server in
            server.route("GET", "/file") { request, _ in
                .file(path: path, contentType: "video/mp4", etag: nil, request: request)
            }
        }
        defer { server.stop() }
        // A slow reader: a small receive window, one megabyte read before the file shrinks.
        let client = try RawClient(port: server.port, receiveBuffer: 64 << 10)
        client.send("GET /file HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let head = client.read(until: "\r\n\r\n")
        #expect(head.hasPrefix("HTTP/1.1 200") && head.contains("33554432"), "\(head)")
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var got = 0
        while got < 1 << 20 {
            let n = recv(client.fd, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            got += n
        }
        #expect(truncate(path, 2 << 20) == 0)
        // Closed well before the client's 30 s wait ends, having sent less than it promised.
        #expect(client.waitForClose(), "the connection stayed open and silent")
    }

    @Test("Range a-b, a- and -n answer 206 with Content-Range and exactly those bytes")
    func ranges() throws {
        let (server, path, url) = try Self.fileServer()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: path) }
        let cases: [(String, String, String)] = [
            ("bytes=0-9", "bytes 0-9/1000", "0123456789"),
            ("bytes=995-", "bytes 995-999/1000", "56789"),
            ("bytes=-3", "bytes 997-999/1000", "789"),
            ("bytes=998-5000", "bytes 998-999/1000", "89"),
            ("bytes=-5000", "bytes 0-999/1000", String(repeating: "0123456789", count: 100)),
        ]
        for (range, contentRange, body) in cases {
            let answer = try fetch(url, ["-H", "Range: \(range)"])
            #expect(answer.status == 206, "\(range)")
            #expect(answer.headers["content-range"] == contentRange, "\(range)")
            #expect(answer.headers["content-length"] == String(body.utf8.count), "\(range)")
            #expect(answer.body == body, "\(range)")
        }
    }

    @Test("an unsatisfiable range is 416 with bytes */size; a malformed one is ignored")
    func unsatisfiable() throws {
        let (server, path, url) = try Self.fileServer()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: path) }
        for range in ["bytes=1000-", "bytes=5000-6000", "bytes=-0"] {
            let answer = try fetch(url, ["-H", "Range: \(range)"])
            #expect(answer.status == 416, "\(range)")
            #expect(answer.headers["content-range"] == "bytes */1000", "\(range)")
        }
        for range in ["bytes=9-3", "items=0-1", "bytes=a-b", "bytes=0-1,5-6"] {
            let answer = try fetch(url, ["-H", "Range: \(range)"])
            #expect(answer.status == 200, "\(range)")
            #expect(answer.body.utf8.count == 1000, "\(range)")
        }
    }

    @Test("HEAD has the same headers and no body, ranges included")
    func head() throws {
        let (server, path, url) = try Self.fileServer()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: path) }
        let answer = try fetch(url, ["--head"])
        #expect(answer.status == 200)
        #expect(answer.headers["content-length"] == "1000")
        #expect(answer.headers["etag"] == "\"abc123\"")
        #expect(answer.body.isEmpty)
        let partial = try fetch(url, ["--head", "-H", "Range: bytes=10-19"])
        #expect(partial.status == 206)
        #expect(partial.headers["content-length"] == "10")
        #expect(partial.headers["content-range"] == "bytes 10-19/1000")
        // A raw HEAD on a kept-alive connection: no body bytes follow, the next answer does.
        let client = try RawClient(port: server.port)
        client.send("HEAD /file HTTP/1.1\r\nHost: x\r\n\r\nGET /file HTTP/1.1\r\nHost: x\r\nRange: bytes=0-2\r\nConnection: close\r\n\r\n")
        let both = client.readToEnd()
        #expect(both.hasPrefix("HTTP/1.1 200"))
        #expect(both.components(separatedBy: "\r\n\r\n").count == 3)
        #expect(both.hasSuffix("\r\n\r\n012"))
    }

    @Test("If-None-Match with the ETag is 304; If-Range with another ETag sends the whole file; If-Match with another is 412")
    func conditional() throws {
        let (server, path, url) = try Self.fileServer()
        defer { server.stop(); try? FileManager.default.removeItem(atPath: path) }
        for header in ["\"abc123\"", "W/\"abc123\"", "\"x\", \"abc123\"", "*"] {
            let answer = try fetch(url, ["-H", "If-None-Match: \(header)"])
            #expect(answer.status == 304, "\(header)")
            #expect(answer.headers["etag"] == "\"abc123\"")
            // The length a 200 would have (a cache that took 0 would hold an empty file).
            #expect(answer.headers["content-length"] == "1000")
            #expect(answer.body.isEmpty)
        }
        // No body follows on a kept-alive connection: the next answer does.
        let client = try RawClient(port: server.port)
        client.send("GET /file HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"abc123\"\r\n\r\n"
                    + "GET /file HTTP/1.1\r\nHost: x\r\nRange: bytes=0-2\r\nConnection: close\r\n\r\n")
        let both = client.readToEnd()
        #expect(both.hasPrefix("HTTP/1.1 304") && both.hasSuffix("\r\n\r\n012"), "\(both)")
        #expect(try fetch(url, ["-H", "If-None-Match: \"other\""]).status == 200)
        #expect(try fetch(url, ["-H", "Range: bytes=0-1", "-H", "If-Range: \"abc123\""]).status == 206)
        let stale = try fetch(url, ["-H", "Range: bytes=0-1", "-H", "If-Range: \"old\""])
        #expect(stale.status == 200)
        #expect(stale.body.utf8.count == 1000)
        // If-Match: this file, or none of it (it was ignored: 200 for another version's tag).
        for header in ["\"abc123\"", "\"x\", \"abc123\"", "*"] {
            #expect(try fetch(url, ["-H", "If-Match: \(header)"]).status == 200, "\(header)")
        }
        for header in ["\"old\"", "W/\"abc123\""] {
            let refused = try fetch(url, ["-H", "If-Match: \(header)", "-H", "Range: bytes=0-1"])
            #expect(refused.status == 412 && refused.body.isEmpty, "\(header): \(refused.status)")
        }
    }

    @Test("range parsing edge cases", arguments: [
        ("bytes=0-0", 10, ByteRange.part(first: 0, last: 0)),
        ("bytes = 2-", 10, .whole),
        (" bytes=2-", 10, .part(first: 2, last: 9)),
        ("BYTES=-10", 10, .part(first: 0, last: 9)),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=-1", 0, .unsatisfiable),
        ("bytes=99999999999999999999999-", 10, .unsatisfiable),
        ("bytes=", 10, .whole),
        ("bytes=-", 10, .whole),
    ] as [(String, UInt64, ByteRange)])
    func rangeParsing(header: String, size: UInt64, expected: ByteRange) {
        #expect(ByteRange.parse(header, size: size) == expected)
    }
}

/// true the first time it is asked, from any thread.
final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func first() -> Bool {
        lock.lock(); defer { lock.unlock() }
        if done { return false }
        done = true
        return true
    }
}
