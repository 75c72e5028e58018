import Foundation
import Synchronization
import Testing
@testable import HTTPServer
#if canImport(Glibc)
import Glibc
#endif

/// The request deadline: libmicrohttpd's idle timeout restarts with every byte, so a client
/// that trickles its request would hold a connection (and a thousand of them every slot)
/// for as long as it likes.
@Suite("request deadline")
struct DeadlineTests {
    /// Sends `opening`, then `drip` every 300 ms until the server closes the connection or
    /// `limit` seconds pass; true when the server closed it.
    static func trickle(_ client: RawClient, opening: String, drip: String, limit: Double = 20) -> Bool {
        client.send(opening)
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(start) < limit {
            let bytes = Array(drip.utf8)
            if bytes.withUnsafeBytes({ Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) < 0 { return true }
            var ready = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 300) > 0 {
                let n = recv(client.fd, &buffer, buffer.count, 0)
                if n == 0 || (n < 0 && errno == ECONNRESET) { return true }
            }
        }
        return false
    }

    @Test("a client trickling its request line, its headers or its body a byte at a time is cut off at the deadline though it never goes idle", arguments: [
        ("request line", "GET /", "a"),
        ("headers", "GET /ok HTTP/1.1\r\nHost: x\r\n", "X-Slow: a\r\n"),
        ("body", "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", "a"),
    ])
    func trickleCutOff(_ part: String, _ opening: String, _ drip: String) throws {
        let server = try startServer({ $0.requestDeadlineSeconds = 2; $0.idleTimeoutSeconds = 60 }) { server in
            server.route("GET", "/ok") { _, _ in .text("ok") }
            server.route("POST", "/ok") { _, _ in .text("ok") }
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        #expect(Self.trickle(client, opening: opening, drip: drip), "the \(part) trickled on for 20 s and the connection stayed open")
        #expect(server.deadlineCuts == 1)
        // The server goes on answering everyone else.
        #expect(try curl(["http://127.0.0.1:\(server.port)/ok"]).output == "ok")
    }

    @Test("the deadline covers only what the client sends: a handler slower than it answers, a keep-alive connection's next request answers after it, and an open event stream stays open past it")
    func answeringIsExempt() throws {
        // The handler takes 3 s against a 2 s deadline. Each step the client takes (its next
        // request, its reading of an answer) must come inside the deadline, so the margin is
        // that wide; with 1 s, a loaded machine once let a second pass between an answer and
        // the client's close, and that connection was rightly cut as idle.
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer({ $0.requestDeadlineSeconds = 2; $0.idleTimeoutSeconds = 60 }) { server in
            server.route("GET", "/slow") { _, _ in
                usleep(3_000_000)
                return .text("slow")
            }
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in
                    stream.sendComment("hello")
                    streams.withLock { $0.append(stream) }
                }
            }
        }
        defer { server.stop() }
        do {
            let client = try RawClient(port: server.port)
            client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(client.read(until: "\r\n\r\nslow").hasPrefix("HTTP/1.1 200"))
            // The same connection, its head sent at once, well inside the deadline again.
            client.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(client.read(until: "\r\n\r\nslow").hasPrefix("HTTP/1.1 200"))
            // Counted while the connection is still open: once the client is done with it, it
            // is idle between requests, and a late close would be cut as a head overdue.
            #expect(server.deadlineCuts == 0)
        }
        let listener = try RawClient(port: server.port)
        listener.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(listener.read(until: ": hello\n\n").hasPrefix("HTTP/1.1 200"))
        sleep(4)
        let stream = try #require(streams.withLock { $0.first })
        #expect(stream.send(data: "late"))
        // A stream cut at the deadline would have closed before this arrives.
        #expect(listener.read(until: "data: late\n\n").hasSuffix("data: late\n\n"), "the open event stream was cut")
    }
}
