import CMicroHTTPD
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What libmicrohttpd's callbacks reach through their `void *` closure argument (a C
/// function pointer cannot capture context). Kept alive by `HTTPServer` for as long as
/// the daemon runs.
final class ServerCore: Sendable {
    let configuration: HTTPServer.Configuration
    let router = Mutex(Router())
    let streams = StreamRegistry()
    /// Request contexts not yet released (tests check nothing leaks).
    let liveRequests = Atomic<Int>(0)

    init(configuration: HTTPServer.Configuration) {
        self.configuration = configuration
    }

    /// libmicrohttpd's access handler. It calls it once when the headers are in, once per
    /// piece of body, and once more with no data when the body is complete; answering on
    /// that last call (never the first) keeps keep-alive working.
    func access(
        connection: OpaquePointer, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
        upload: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>,
        slot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let context: RequestContext
        if let raw = slot.pointee {
            context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
        } else {
            // Not expected (the URI logger makes one), but never answer without a context.
            context = RequestContext(target: "/")
            liveRequests.add(1, ordering: .relaxed)
            slot.pointee = Unmanaged.passRetained(context).toOpaque()
        }
        if !context.headersRead {
            context.headersRead = true
            context.method = method.map { String(cString: $0) } ?? "GET"
            context.version = version.map { String(cString: $0) } ?? "HTTP/1.1"
            context.headers = Self.headers(of: connection)
            // Refused on its head, before a byte of the body is read: libmicrohttpd then skips
            // the body and closes the connection.
            if let refusal = headRefusal(context.headers, version: context.version) {
                context.answered = true
                return queue(refusal, on: connection, context: context)
            }
            if let authority = context.authority { context.headers.set("Host", authority) }
            return .YES
        }
        if uploadSize.pointee > 0 {
            let count = uploadSize.pointee
            uploadSize.pointee = 0
            guard !context.answered else { return .YES }
            if context.bodyTooLarge || context.body.count + count > configuration.maxBodyBytes {
                // A chunked body of unannounced size. libmicrohttpd 0.9.75 refuses a
                // response queued mid-upload, so the rest is read and discarded and the
                // 413 goes out at the end — unless the client keeps sending far beyond
                // the limit, which only closing the connection stops.
                context.bodyTooLarge = true
                context.body = []
                context.discarded += count
                return context.discarded > Self.maxDiscardedBytes(limit: configuration.maxBodyBytes) ? .NO : .YES
            }
            if let upload {
                context.body.append(contentsOf: UnsafeRawBufferPointer(start: upload, count: count))
            }
            return .YES
        }
        guard !context.answered else { return .YES }
        context.answered = true
        if context.bodyTooLarge {
            return queue(tooLarge(), on: connection, context: context)
        }
        return queue(respond(to: context, connection: connection), on: connection, context: context)
    }

    private func respond(to context: RequestContext, connection: OpaquePointer) -> HTTPResponse {
        var address = [CChar](repeating: 0, count: 64)
        let remote = kiln_mhd_client_address(connection, &address, address.count) == 0
            ? String(decoding: address.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let request = HTTPRequest(
            method: context.method, target: context.target, headers: context.headers, body: context.body,
            remoteAddress: remote, version: context.version)
        context.body = []
        let rawPath = String(context.target.prefix { $0 != "?" && $0 != "#" })
        switch router.withLock({ $0.match(method: request.method, rawPath: rawPath) }) {
        case .found(let handler, let parameters):
            return handler(request, parameters)
        case .methodNotAllowed(let allowed):
            var response = configuration.errorResponse(
                405, "method_not_allowed", "\(request.method) is not allowed here; use \(allowed.joined(separator: ", ")).")
            response.headers.set("Allow", allowed.joined(separator: ", "))
            return response
        case .notFound:
            return configuration.errorResponse(404, "not_found", "There is nothing at \(request.path).")
        }
    }

    /// Why a request is answered on its head alone, or nil.
    private func headRefusal(_ headers: HTTPHeaders, version: String) -> HTTPResponse? {
        // Two lengths that disagree, or one that is no length, make the body's end
        // uncertain: behind a proxy that reads the other one, what is left over would be
        // taken as another request (RFC 9112 section 6.3: refuse, and close).
        let lengths = Set(headers.filter { HTTPHeaders.same($0.name, "Content-Length") }.map { $0.value.trimmingWhitespace })
        if lengths.count > 1 || lengths.contains(where: { $0.isEmpty || !$0.allSatisfy(\.isASCIIDigit) }) {
            return configuration.errorResponse(400, "bad_request", "The request's Content-Length is not one length in digits.")
        }
        // RFC 9112 section 3.2: an HTTP/1.1 request without exactly one Host is refused.
        if version == "HTTP/1.1" && headers.filter({ HTTPHeaders.same($0.name, "Host") }).count != 1 {
            return configuration.errorResponse(400, "bad_request", "An HTTP/1.1 request names its Host once.")
        }
        // A transfer coding other than chunked cannot be read (libmicrohttpd waited for
        // the request's deadline); chunked beside a Content-Length is the smuggling case
        // of RFC 9112 section 6.1.
        let codings = headers.filter { HTTPHeaders.same($0.name, "Transfer-Encoding") }
            .flatMap { $0.value.split(separator: ",").map { $0.trimmingWhitespace.lowercased() } }
        if !codings.isEmpty && codings != ["chunked"] {
            return configuration.errorResponse(501, "not_implemented", "Only the chunked transfer coding is understood.")
        }
        if !codings.isEmpty && !lengths.isEmpty {
            return configuration.errorResponse(400, "bad_request", "A request has a Content-Length or is chunked, not both.")
        }
        if let length = headers["Content-Length"].flatMap({ Int($0.trimmingWhitespace) }), length > configuration.maxBodyBytes {
            return tooLarge()
        }
        return nil
    }

    private static func maxDiscardedBytes(limit: Int) -> Int {
        max(64 << 20, limit.multipliedReportingOverflow(by: 16).overflow ? Int.max : limit * 16)
    }

    private func tooLarge() -> HTTPResponse {
        configuration.errorResponse(
            413, "payload_too_large", "The request body is larger than \(configuration.maxBodyBytes) bytes.")
    }

    /// Hands `response` to libmicrohttpd, which sends it once the handler returns.
    private func queue(_ response: HTTPResponse, on connection: OpaquePointer, context: RequestContext) -> MHD_Result {
        // HEAD of a stream: its headers alone. Started, it was sent chunked, and its closing
        // chunk went out as a body a keep-alive client then read as the next response's start.
        if context.method == "HEAD", case .stream = response.body {
            var headers = response.headers
            headers.remove("Transfer-Encoding")
            return queue(HTTPResponse(status: response.status, headers: headers, body: .bytes([])), on: connection, context: context)
        }
        var stream: ResponseStream?
        let made: OpaquePointer?
        switch response.body {
        case .bytes where response.status == 304:
            // No body, but the length a 200 would have (RFC 9110 section 8.6: a 304 that
            // names a length must name that one; libmicrohttpd takes the response's size).
            let length = response.headers["Content-Length"].flatMap { UInt64($0) } ?? 0
            made = MHD_create_response_from_callback(length, 1024, { _, _, _, _ in -2 }, nil, nil)
        case .bytes(let bytes):
            made = bytes.withUnsafeBytes { buffer in
                MHD_create_response_from_buffer(buffer.count, UnsafeMutableRawPointer(mutating: buffer.baseAddress), .RESPMEM_MUST_COPY)
            }
        case .file(let path, let offset, let length, let identity):
            switch openFile(path: path, offset: offset, length: length, identity: identity) {
            case .opened(let response): made = response
            case .changed:
                return queue(configuration.errorResponse(503, "file_changed", "The file changed while it was being answered; ask again."),
                             on: connection, context: context)
            case .unavailable:
                return queue(configuration.errorResponse(500, "file_unavailable", "The file could not be read."), on: connection, context: context)
            }
        case .stream:
            let created = ResponseStream(bufferLimit: configuration.streamBufferLimit, registry: streams)
            if !streams.add(created) { created.end(.serverStopped, discardBuffer: true) }
            created.bind(connection)
            stream = created
            // The response owns one reference to the stream until libmicrohttpd frees it.
            made = MHD_create_response_from_callback(
                UInt64.max,  // MHD_SIZE_UNKNOWN: chunked
                16 * 1024,
                { cls, _, buffer, capacity in
                    guard let cls, let buffer else { return -2 }
                    return Unmanaged<ResponseStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, capacity: capacity)
                },
                Unmanaged.passRetained(created).toOpaque(),
                { cls in
                    guard let cls else { return }
                    let stream = Unmanaged<ResponseStream>.fromOpaque(cls)
                    stream.takeUnretainedValue().detach()
                    stream.release()
                })
        }
        guard let made else {
            stream?.detach()
            return .NO
        }
        defer { MHD_destroy_response(made) }
        for field in response.headers {
            // libmicrohttpd computes Content-Length and Transfer-Encoding itself.
            if HTTPHeaders.same(field.name, "Content-Length") || HTTPHeaders.same(field.name, "Transfer-Encoding") { continue }
            if MHD_add_response_header(made, field.name, field.value) == .NO {
                configuration.logger?("HTTPServer: header \(field.name) refused by libmicrohttpd")
            }
        }
        let result = MHD_queue_response(connection, UInt32(clamping: response.status), made)
        if case .stream(let start) = response.body, let stream, result == .YES {
            start(stream)
        }
        return result
    }

    /// A response that libmicrohttpd sends from the file descriptor (which it closes).
    private enum Opened { case opened(OpaquePointer), changed, unavailable }

    /// The response for a file's bytes, from the descriptor opened here. The headers were
    /// made from an earlier `stat` (`identity`): a file renamed over or rewritten since is
    /// another representation, whose bytes must not go out under the old ETag and length.
    private func openFile(path: String, offset: UInt64, length: UInt64, identity: HTTPResponse.FileIdentity?) -> Opened {
        // Not through a symlink put where the file was: the paths served are resolved ones
        // (Kiln's own files, and originals resolved inside the media roots when asked for).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        // Gone since the stat (removed, or renamed over on a network file system): changed.
        // Anything else (no permission, no descriptors left) is no change.
        guard fd >= 0 else { return identity != nil && (errno == ENOENT || errno == ESTALE) ? .changed : .unavailable }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            return .unavailable
        }
        if let identity, HTTPResponse.FileIdentity(info) != identity {
            close(fd)
            return .changed
        }
        guard UInt64(info.st_size) >= offset, UInt64(info.st_size) - offset >= length else {
            close(fd)
            return .unavailable
        }
        // The response owns one reference to the body until libmicrohttpd frees it.
        let body = Unmanaged.passRetained(FileBody(fd: fd, offset: offset, length: length))
        guard let response = MHD_create_response_from_callback(
            length, FileBody.blockSize,
            { cls, position, buffer, capacity in
                guard let cls, let buffer else { return -2 }
                return Unmanaged<FileBody>.fromOpaque(cls).takeUnretainedValue().read(at: position, into: buffer, capacity: capacity)
            },
            body.toOpaque(),
            { cls in if let cls { Unmanaged<FileBody>.fromOpaque(cls).release() } })
        else {
            body.release()  // its deinit closes the descriptor
            return .unavailable
        }
        return .opened(response)
    }

    private static func headers(of connection: OpaquePointer) -> HTTPHeaders {
        var headers = HTTPHeaders()
        withUnsafeMutablePointer(to: &headers) { pointer in
            _ = MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, value in
                guard let cls, let key else { return .YES }
                cls.assumingMemoryBound(to: HTTPHeaders.self).pointee.add(
                    String(cString: key), value.map { String(cString: $0) } ?? "")
                return .YES
            }, pointer)
        }
        return headers
    }
}

/// One request while libmicrohttpd reads it. Touched only by the worker thread that owns
/// the connection; libmicrohttpd holds it (retained) in the request's context slot.
final class RequestContext {
    let target: String
    var method = "GET"
    var version = "HTTP/1.1"
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var headersRead = false
    var answered = false
    /// The body passed the limit while arriving in chunks; the rest is being discarded.
    var bodyTooLarge = false
    var discarded = 0

    /// The authority of an absolute-form target (`GET http://host:port/path`), which
    /// stands for the Host header (RFC 9112 section 3.2.2).
    let authority: String?

    init(target: String) {
        (self.target, authority) = Self.originForm(target)
    }

    /// An absolute-form target (what a client sends to a proxy, and a server must accept)
    /// as its path and query, and its authority; any other target as it is.
    static func originForm(_ target: String) -> (target: String, authority: String?) {
        let lower = target.prefix(8).lowercased()
        let scheme = lower.hasPrefix("http://") ? 7 : lower.hasPrefix("https://") ? 8 : 0
        guard scheme > 0 else { return (target, nil) }
        let rest = target.dropFirst(scheme)
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let path = rest[end...]
        return (path.hasPrefix("/") ? String(path) : "/" + path, String(rest[..<end]))
    }
}

/// A file's bytes for libmicrohttpd, read here rather than handed over as a descriptor.
/// Given the descriptor, libmicrohttpd's sendfile met a file that shrank mid-answer (a
/// source overwritten in place) with silence: the client waited out the connection's
/// 60 s timeout for bytes that would never come. Read here, a file that ends short of the
/// promised length aborts the answer at once, and the client can ask again. Owns the
/// descriptor, closed when libmicrohttpd frees the response.
final class FileBody {
    /// libmicrohttpd's buffer per answer: large enough that a read per block costs little
    /// beside the network, small enough for hundreds of downloads at once.
    static let blockSize = 256 << 10

    let fd: Int32, offset: UInt64, length: UInt64

    init(fd: Int32, offset: UInt64, length: UInt64) {
        self.fd = fd
        self.offset = offset
        self.length = length
    }

    deinit { close(fd) }

    /// Bytes copied, -1 once the answer is whole, -2 to abort it (the file ended early or
    /// cannot be read).
    func read(at position: UInt64, into buffer: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        guard position < length else { return -1 }
        let want = Int(min(UInt64(capacity), length - position))
        while true {
            let n = pread(fd, buffer, want, off_t(offset + position))
            if n < 0 && errno == EINTR { continue }
            return n > 0 ? n : -2
        }
    }
}
