import Foundation

/// What a handler answers. A value: the server turns it into a libmicrohttpd response
/// after the handler returns.
public struct HTTPResponse: Sendable {
    public enum Body: Sendable {
        /// Bytes held in memory (copied once into libmicrohttpd).
        case bytes([UInt8])
        /// `length` bytes of the file at `path` from `offset`, sent by libmicrohttpd
        /// straight from the file descriptor. The file is opened when the response is sent;
        /// with `identity` (the `stat` the headers were made from), a file replaced since
        /// then is not sent under them (503 `file_changed`).
        case file(path: String, offset: UInt64, length: UInt64, identity: FileIdentity? = nil)
        /// A response of unknown length (chunked) fed through a `ResponseStream`: the server
        /// creates the stream, then calls `start` on the worker thread; anyone may write to
        /// the stream from any thread until it is closed.
        case stream(start: @Sendable (ResponseStream) -> Void)
    }

    /// Which file a `stat` saw: device, inode, size and modification time to the nanosecond.
    public struct FileIdentity: Sendable, Equatable {
        let device: UInt64, inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int
        public init(_ info: stat) {
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            seconds = Int(info.st_mtim.tv_sec)
            nanoseconds = Int(info.st_mtim.tv_nsec)
        }
    }

    public var status: Int
    public var headers: HTTPHeaders
    public var body: Body

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// No body (204, 304, 202 …).
    public static func empty(_ status: Int, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers)
    }

    public static func text(
        _ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8"
    ) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: .bytes(Array(text.utf8)))
    }

    /// `value` as JSON with sorted keys (stable output for tests, caches and diffs).
    /// An unencodable value (a non-finite Double) yields a 500 rather than a crash.
    public static func json(status: Int = 200, _ value: some Encodable, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json")
        do {
            return HTTPResponse(status: status, headers: headers, body: .bytes(Array(try jsonEncoder().encode(value))))
        } catch {
            return defaultError(status: 500, code: "internal", message: "The response could not be encoded as JSON.")
        }
    }

    /// A Server-Sent Events response (`text/event-stream`, never cached, not buffered by
    /// proxies). See `ResponseStream.send(event:id:data:)`.
    public static func eventStream(
        headers: HTTPHeaders = HTTPHeaders(), start: @escaping @Sendable (ResponseStream) -> Void
    ) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "text/event-stream")
        headers.set("Cache-Control", "no-cache")
        headers.set("X-Accel-Buffering", "no")
        return HTTPResponse(status: 200, headers: headers, body: .stream(start: start))
    }

    /// The error envelope the server uses unless the configuration supplies another one:
    /// `{"error": code, "message": message}`.
    public static func defaultError(status: Int, code: String, message: String) -> HTTPResponse {
        let body = (try? jsonEncoder().encode(["error": code, "message": message])) ?? Data()
        return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: .bytes(Array(body)))
    }

    /// The body's bytes when it is held in memory (tests, logging).
    public var bodyBytes: [UInt8]? {
        if case .bytes(let bytes) = body { return bytes }
        return nil
    }

    private static func jsonEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
