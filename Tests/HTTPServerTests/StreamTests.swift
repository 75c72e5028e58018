import Foundation
import Synchronization
import Testing
@testable import HTTPServer

@Suite("Streams (Server-Sent Events)")
struct StreamTests {
    @Test("several clients receive every event pushed from another thread, in order")
    func fanOut() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in streams.withLock { $0.append(stream) } }
            }
        }
        defer { server.stop() }
        let clients = try (0..<3).map { _ in try BackgroundCurl(["http://127.0.0.1:\(server.port)/events"]) }
        #expect(eventually { streams.withLock { $0.count } == 3 })
        let pusher = Thread {
            let all = streams.withLock { $0 }
            for seq in 1...200 {
                for stream in all {
                    stream.send(event: "artifact.progress", id: "\(seq)", data: "{\"seq\":\(seq)}\nsecond line")
                }
                if seq % 50 == 0 { usleep(5_000) }  // let some streams drain and suspend again
            }
            for stream in all { stream.close() }
        }
        pusher.start()
        let expected = (1...200).map { "id: \($0)\nevent: artifact.progress\ndata: {\"seq\":\($0)}\ndata: second line\n\n" }.joined()
        for client in clients {
            #expect(client.finish() == expected)
        }
        #expect(streams.withLock { $0.allSatisfy { $0.termination == .closed } })
        #expect(eventually { server.openStreamCount == 0 })
    }

    @Test("an idle stream stays open and delivers a late event")
    func idleThenEvent() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer({ $0.idleTimeoutSeconds = 1 }) { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in
                    stream.sendComment("hello")
                    streams.withLock { $0.append(stream) }
                }
            }
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        let head = client.read(until: ": hello\n\n")
        #expect(head.hasPrefix("HTTP/1.1 200"))
        #expect(head.lowercased().contains("content-type: text/event-stream"))
        #expect(head.lowercased().contains("transfer-encoding: chunked"))
        sleep(3)  // longer than the idle timeout: a suspended stream is not idle
        let stream = try #require(streams.withLock { $0.first })
        #expect(stream.isOpen)
        #expect(stream.send(data: "late"))
        #expect(client.read(until: "data: late\n\n").hasSuffix("data: late\n\n"))
    }

    @Test("a client that stops reading is dropped once its buffer passes the limit")
    func slowClientDropped() throws {
        let streams = Mutex<[ResponseStream]>([])
        let terminations = Mutex<[ResponseStream.Termination]>([])
        let limit = 256 * 1024
        let server = try startServer({
            $0.streamBufferLimit = limit
            $0.idleTimeoutSeconds = 2
        }) { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in
                    stream.onTermination { reason in terminations.withLock { $0.append(reason) } }
                    streams.withLock { $0.append(stream) }
                }
            }
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port, receiveBuffer: 4096)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(eventually { streams.withLock { $0.count } == 1 })
        let stream = try #require(streams.withLock { $0.first })
        let chunk = String(repeating: "x", count: 16 * 1024)
        var written = 0
        // The kernel's socket buffers take some megabytes; after that only our buffer grows.
        while stream.send(data: chunk) {
            written += chunk.utf8.count
            if written > 512 << 20 { break }
        }
        #expect(written < 512 << 20, "the stream was never dropped")
        #expect(stream.termination == .slowClient)
        #expect(stream.peakBufferedByteCount <= limit)
        #expect(stream.bufferedByteCount == 0)
        #expect(terminations.withLock { $0 } == [.slowClient])
        #expect(!stream.write("more"))
        // The connection itself goes once the idle timeout sees no progress.
        #expect(eventually(60) { server.openStreamCount == 0 })
        #expect(terminations.withLock { $0 } == [.slowClient])
    }

    @Test("one message larger than the buffer's limit goes whole to a client that has read everything before it, which stays connected (an event naming thousands of references had cut every listener, for good)")
    func messageLargerThanTheLimit() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer({ $0.streamBufferLimit = 8 * 1024 }) { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in streams.withLock { $0.append(stream) } }
            }
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(eventually { streams.withLock { $0.count } == 1 })
        let stream = try #require(streams.withLock { $0.first })
        let big = String(repeating: "r", count: 20 * 1024) + "END"
        #expect(stream.send(data: big))
        let got = client.read(until: "END\n\n")
        #expect(got.hasSuffix("data: \(big)\n\n"), "\(got.utf8.count) bytes")
        #expect(stream.isOpen)
        #expect(stream.send(data: "after"))
        #expect(client.read(until: "data: after\n\n").hasSuffix("data: after\n\n"))
    }

    @Test("HEAD of a stream answers its headers alone: a keep-alive client reads the next response from its start (a chunked end had come first)")
    func headOfAStream() throws {
        let started = Mutex(0)
        let server = try startServer { server in
            server.route("GET", "/events") { _, _ in .eventStream { _ in started.withLock { $0 += 1 } } }
            server.route("GET", "/plain") { _, _ in .text("hello") }
        }
        defer { server.stop() }
        let client = try RawClient(port: server.port)
        client.send("HEAD /events HTTP/1.1\r\nHost: x\r\n\r\nGET /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let text = client.read(until: "hello")
        let parts = text.components(separatedBy: "\r\n\r\n")
        #expect(parts.count == 3 && parts[0].hasPrefix("HTTP/1.1 200") && parts[1].hasPrefix("HTTP/1.1 200") && parts[2] == "hello", "\(text)")
        #expect(started.withLock { $0 } == 0, "no stream was started for a HEAD")
    }

    @Test("a client that disconnects is noticed on the next write")
    func clientGone() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in streams.withLock { $0.append(stream) } }
            }
        }
        defer { server.stop() }
        do {
            let client = try RawClient(port: server.port)
            client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = client.read(until: "\r\n\r\n")
        }  // closed here
        #expect(eventually { streams.withLock { $0.count } == 1 })
        let stream = try #require(streams.withLock { $0.first })
        #expect(eventually {
            stream.sendComment("heartbeat")
            return stream.termination == .clientGone
        })
        #expect(server.openStreamCount == 0)
    }

    @Test("a client that disconnects from a quiet stream is let go without waiting for a write (its slot had been held until the next heartbeat)")
    func quietClientGone() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in streams.withLock { $0.append(stream) } }
            }
        }
        defer { server.stop() }
        let staying = try RawClient(port: server.port)
        staying.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = staying.read(until: "\r\n\r\n")
        do {
            let client = try RawClient(port: server.port)
            client.send("GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = client.read(until: "\r\n\r\n")
        }  // closed here
        #expect(eventually { streams.withLock { $0.count } == 2 })
        // Nothing is written: only a look at the socket can tell.
        #expect(eventually { server.openStreamCount == 1 })
        let ended = streams.withLock { $0.map(\.termination) }
        #expect(ended == [nil, .clientGone])
        // The one still connected still hears what is sent.
        #expect(streams.withLock { $0[0].send(data: "still here") })
        #expect(staying.read(until: "still here").contains("data: still here"))
    }

    @Test("stop() ends open streams and their clients see the end")
    func stopEndsStreams() throws {
        let streams = Mutex<[ResponseStream]>([])
        let server = try startServer { server in
            server.route("GET", "/events") { _, _ in
                .eventStream { stream in
                    stream.send(data: "first")
                    streams.withLock { $0.append(stream) }
                }
            }
        }
        let clients = try (0..<4).map { _ in try BackgroundCurl(["http://127.0.0.1:\(server.port)/events"]) }
        #expect(eventually { streams.withLock { $0.count } == 4 })
        #expect(eventually { streams.withLock { $0.allSatisfy { $0.bufferedByteCount == 0 } } })
        server.stop()
        for client in clients {
            #expect(client.finish().hasPrefix("data: first\n\n"))
        }
        #expect(streams.withLock { $0.allSatisfy { $0.termination == .serverStopped } })
        #expect(server.openStreamCount == 0)
    }
}
