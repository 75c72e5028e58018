import CMicroHTTPD
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 server over libmicrohttpd, which parses requests, keeps connections
/// alive and enforces the connection limits; this type adds routing, whole-body requests,
/// file responses and bounded streams.
///
/// Handlers are synchronous and run on libmicrohttpd's worker threads (a fixed pool of
/// `Configuration.threads`), never on Swift's cooperative pool, so a handler may block
/// on SQLite for a moment. A handler that blocks long stalls the other connections of
/// its worker thread.
///
/// A class because it owns the daemon: `stop()` (or deinit) ends the event streams and
/// stops libmicrohttpd's threads before the memory they use is freed.
public final class HTTPServer: Sendable {
    public typealias Handler = @Sendable (HTTPRequest, _ parameters: [String: String]) -> HTTPResponse

    public struct Configuration: Sendable {
        /// An IPv4 or IPv6 literal ("127.0.0.1", "::1", "0.0.0.0", "::"), or "localhost".
        public var host: String
        /// 0 picks a free port; read it back from `HTTPServer.port`.
        public var port: UInt16
        /// Worker threads polling connections and running handlers.
        public var threads: Int = 4
        /// Bigger request bodies are refused with 413 (before reading them when the
        /// client announces the length).
        public var maxBodyBytes: Int = 1 << 20
        /// A connection with no traffic for this long is closed (keep-alive included; a
        /// stream waiting for data is not idle in this sense and stays open).
        public var idleTimeoutSeconds: Int = 60
        /// A request's head, then its body, must each arrive within this long (the head
        /// counted from the connection's start or the previous response's end), or the
        /// connection is closed: the idle timeout restarts with every byte, so a client
        /// trickling its headers would hold a connection for ever, and a thousand of them
        /// every slot. nginx's `client_header_timeout` default. 0: no deadline.
        public var requestDeadlineSeconds: Int = 60
        /// libmicrohttpd's per-connection memory pool. The request line and headers must
        /// fit in it (with room for the reply's headers); bigger requests get 431.
        public var connectionMemoryLimit: Int = 32 * 1024
        /// At most this many open connections (streams included); more wait in the kernel's
        /// listen backlog until one closes. libmicrohttpd divides the limit between the
        /// worker threads, so keep it a multiple of `threads`.
        public var maxConnections: Int = 1000
        /// The default `ResponseStream.bufferLimit`: how far a stream's client may fall behind.
        public var streamBufferLimit: Int = 1 << 20
        /// Builds the server's own error answers (404, 405, 413, 500) so the application can
        /// use its error envelope. Arguments: status, code, sentence.
        public var errorResponse: @Sendable (_ status: Int, _ code: String, _ message: String) -> HTTPResponse
        /// libmicrohttpd's error messages; nil keeps them quiet.
        public var logger: (@Sendable (String) -> Void)?

        public init(host: String = "127.0.0.1", port: UInt16 = 0) {
            self.host = host
            self.port = port
            self.errorResponse = { status, code, message in
                HTTPResponse.defaultError(status: status, code: code, message: message)
            }
        }
    }

    public enum StartError: Error, Equatable {
        case invalidHost(String)
        case alreadyStarted
        /// libmicrohttpd could not start (port in use, no permission, too many threads);
        /// `reason` is the system's word for it, when it left one.
        case couldNotListen(host: String, port: UInt16, reason: String)
    }

    let core: ServerCore
    private let daemon = Mutex<Daemon?>(nil)

    public init(configuration: Configuration = Configuration()) {
        core = ServerCore(configuration: configuration)
    }

    deinit {
        stop()
    }

    public var configuration: Configuration { core.configuration }

    /// Adds a route: `route("GET", "/v1/artifacts/:id/file") { request, parameters in … }`.
    /// Routes may be added before or after `start()`.
    public func route(_ method: String, _ pattern: String, _ handler: @escaping Handler) {
        core.router.withLock { $0.add(method: method, pattern: pattern, handler: handler) }
    }

    public func start() throws {
        try daemon.withLock { daemon in
            guard daemon == nil else { throw StartError.alreadyStarted }
            daemon = try Daemon(core: core)
        }
    }

    /// The bound port (the real one when the configuration asked for 0); 0 when stopped.
    public var port: UInt16 {
        daemon.withLock { $0.map { kiln_mhd_bound_port($0.handle) } ?? 0 }
    }

    /// Streams currently held by a connection.
    public var openStreamCount: Int { core.streams.count }

    /// Connections closed for sending a request's head or body past
    /// `Configuration.requestDeadlineSeconds`, since the server started; 0 when stopped.
    public var deadlineCuts: Int {
        daemon.withLock { $0.map { Int(kiln_mhd_deadline_cuts($0.options)) } ?? 0 }
    }

    /// Ends every stream (their clients see the connection end), waits for libmicrohttpd to
    /// let go of them, then stops its threads and closes the listening socket and every
    /// connection. Requests already inside a handler finish first. Idempotent; a stopped
    /// server cannot be started again.
    public func stop() {
        guard let running = daemon.withLock({ d -> Daemon? in defer { d = nil }; return d }) else { return }
        for stream in core.streams.beginStopping() {
            stream.end(.serverStopped, discardBuffer: true)
        }
        // libmicrohttpd forbids stopping while connections are suspended; a resumed one is
        // released on its worker's next pass, which takes milliseconds.
        var waited = 0
        while core.streams.all.contains(where: \.blocksDaemonStop), waited < 5_000 {
            usleep(1_000)
            waited += 1
        }
        running.stop()
    }
}

/// The running libmicrohttpd daemon and the C memory it reads: the options (its logger
/// gets a pointer to them) and the socket address.
private struct Daemon: @unchecked Sendable {
    // @unchecked: raw pointers, only touched under HTTPServer's mutex; the daemon itself is
    // thread-safe and the options are read-only after start.
    let handle: OpaquePointer
    let options: UnsafeMutablePointer<kiln_mhd_options>
    let address: UnsafeMutableRawPointer

    init(core: ServerCore) throws {
        let configuration = core.configuration
        guard let address = SocketAddress.make(host: configuration.host, port: configuration.port) else {
            throw HTTPServer.StartError.invalidHost(configuration.host)
        }
        let options = UnsafeMutablePointer<kiln_mhd_options>.allocate(capacity: 1)
        options.initialize(to: kiln_mhd_options())
        let cls = Unmanaged.passUnretained(core).toOpaque()
        options.pointee.address = UnsafePointer(address.assumingMemoryBound(to: sockaddr.self))
        options.pointee.thread_pool_size = UInt32(clamping: max(1, configuration.threads))
        options.pointee.connection_timeout_seconds = UInt32(clamping: max(0, configuration.idleTimeoutSeconds))
        options.pointee.connection_memory_limit = max(4096, configuration.connectionMemoryLimit)
        options.pointee.connection_limit = UInt32(clamping: max(1, configuration.maxConnections))
        options.pointee.request_deadline_seconds = UInt32(clamping: max(0, configuration.requestDeadlineSeconds))
        options.pointee.access_handler = { cls, connection, _, method, version, upload, uploadSize, slot in
            guard let cls, let connection, let uploadSize, let slot else { return .NO }
            return Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().access(
                connection: connection, method: method, version: version,
                upload: upload, uploadSize: uploadSize, slot: slot)
        }
        options.pointee.access_handler_cls = cls
        // The raw request target (escapes and query intact) is only seen here; this is also
        // where the per-request context is born. libmicrohttpd promises the completion
        // callback for every request whose URI was logged, which releases it.
        options.pointee.uri_log = { cls, uri, _ in
            if let cls { Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().liveRequests.add(1, ordering: .relaxed) }
            return Unmanaged.passRetained(RequestContext(target: uri.map { String(cString: $0) } ?? "/")).toOpaque()
        }
        options.pointee.uri_log_cls = cls
        options.pointee.request_completed = { cls, _, slot, _ in
            guard let slot, let context = slot.pointee else { return }
            slot.pointee = nil
            Unmanaged<RequestContext>.fromOpaque(context).release()
            if let cls { Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().liveRequests.subtract(1, ordering: .relaxed) }
        }
        options.pointee.request_completed_cls = cls
        if configuration.logger != nil {
            options.pointee.logger = { cls, message in
                guard let cls, let message else { return }
                Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue().configuration.logger?(String(cString: message))
            }
            options.pointee.logger_cls = cls
        }
        errno = 0
        guard let handle = kiln_mhd_start(options) else {
            // The bind's or listen's errno (EADDRINUSE: the port is taken) survives the failed start.
            let reason = errno != 0 ? String(cString: strerror(errno)) : "libmicrohttpd could not start"
            options.deallocate()
            address.deallocate()
            throw HTTPServer.StartError.couldNotListen(host: configuration.host, port: configuration.port, reason: reason)
        }
        self.handle = handle
        self.options = options
        self.address = address
    }

    func stop() {
        kiln_mhd_stop(handle, options)
        options.deallocate()
        address.deallocate()
    }
}

enum SocketAddress {
    /// A heap sockaddr_in/sockaddr_in6 for a numeric host (the caller deallocates it).
    static func make(host: String, port: UInt16) -> UnsafeMutableRawPointer? {
        var host = host
        if host == "localhost" { host = "127.0.0.1" }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            let memory = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<sockaddr_in>.size, alignment: 16)
            memory.storeBytes(of: address, as: sockaddr_in.self)
            return memory
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            let memory = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<sockaddr_in6>.size, alignment: 16)
            memory.storeBytes(of: address, as: sockaddr_in6.self)
            return memory
        }
        return nil
    }
}
