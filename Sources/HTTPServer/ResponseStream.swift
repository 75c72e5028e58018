import CMicroHTTPD
import Foundation
import Synchronization

/// The writing end of a streamed (chunked) response, typically Server-Sent Events.
///
/// Writers on any thread append to a bounded buffer; libmicrohttpd pulls from it on its
/// worker thread as the socket accepts data. When the buffer is empty the connection is
/// suspended (no polling, no busy loop) and the next write resumes it. A client that reads
/// slower than the writers produce is dropped once the buffer would pass `bufferLimit`,
/// so one slow client can never grow the server's memory.
///
/// A class because it is shared, mutable state with identity: the server, libmicrohttpd's
/// callbacks and the application's subscriber list all hold the same stream.
public final class ResponseStream: Sendable {
    /// Why a stream stopped accepting writes.
    public enum Termination: Sendable, Equatable {
        /// `close()` was called; what was already buffered is still delivered.
        case closed
        /// The connection ended: the client went away or the idle timeout hit.
        case clientGone
        /// The client fell more than `bufferLimit` bytes behind; the buffer was discarded
        /// and the response ends with an error (the client sees a cut connection).
        case slowClient
        /// The server is stopping.
        case serverStopped
    }

    /// The most bytes waiting to be sent that the stream will hold.
    public let bufferLimit: Int

    private struct State {
        var buffer: [UInt8] = []
        var readIndex = 0
        var peak = 0
        var termination: Termination?
        /// The libmicrohttpd connection while it holds this stream's response, and its socket.
        var connection: Connection?
        var socket: Int32 = -1
        /// The connection is parked by `MHD_suspend_connection`: only a resume wakes it.
        var suspended = false
        /// Resumed, but libmicrohttpd has not pulled yet (stopping the daemon must wait).
        var resumePending = false
        var observers: [@Sendable (Termination) -> Void] = []

        var buffered: Int { buffer.count - readIndex }
    }

    private let state = Mutex(State())
    private let registry: StreamRegistry?

    init(bufferLimit: Int, registry: StreamRegistry?) {
        self.bufferLimit = max(1, bufferLimit)
        self.registry = registry
    }

    /// Appends bytes for the client. False when the stream no longer accepts writes
    /// (closed, client gone, dropped for being slow, server stopping) — also when this
    /// write is what pushed it over the limit with earlier bytes still unsent.
    @discardableResult
    public func write(_ bytes: some Collection<UInt8>) -> Bool {
        var accepted = false
        var ended: (Termination, [@Sendable (Termination) -> Void])?
        let wake = state.withLock { s -> Connection? in
            guard s.termination == nil else { return nil }
            // A client is behind only with bytes still waiting: one message larger than the
            // limit (an event naming thousands of references) goes to a client that has read
            // everything, or it, and every client resuming before it, was cut at it for good.
            if s.buffered > 0 && s.buffered + bytes.count > bufferLimit {
                s.buffer = []
                s.readIndex = 0
                ended = Self.terminate(&s, .slowClient)
            } else {
                s.buffer.append(contentsOf: bytes)
                s.peak = max(s.peak, s.buffered)
                accepted = true
            }
            return Self.takeResume(&s)
        }
        if let wake { MHD_resume_connection(wake.pointer) }
        if let (reason, observers) = ended { observers.forEach { $0(reason) } }
        return accepted
    }

    @discardableResult
    public func write(_ text: String) -> Bool {
        write(Array(text.utf8))
    }

    /// Writes one Server-Sent Event. `data` may span lines: each becomes a `data:` line.
    /// Line breaks in `event` and `id` are removed (they would end the field early).
    @discardableResult
    public func send(event: String? = nil, id: String? = nil, data: String) -> Bool {
        var text = ""
        if let id { text += "id: \(Self.singleLine(id))\n" }
        if let event { text += "event: \(Self.singleLine(event))\n" }
        let normalized = data.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
        for line in normalized.split(separator: "\n", omittingEmptySubsequences: false) {
            text += "data: \(line)\n"
        }
        text += "\n"
        return write(text)
    }

    /// Writes an SSE comment line (`: text`), e.g. a heartbeat that keeps proxies from
    /// closing an idle stream and lets the server notice a vanished client.
    @discardableResult
    public func sendComment(_ text: String = "") -> Bool {
        write(": \(Self.singleLine(text))\n\n")
    }

    /// Ends the stream after what is buffered has been sent. Idempotent.
    public func close() {
        end(.closed, discardBuffer: false)
    }

    /// Nil while the stream accepts writes.
    public var termination: Termination? { state.withLock { $0.termination } }

    public var isOpen: Bool { termination == nil }

    /// Bytes written but not yet handed to libmicrohttpd.
    public var bufferedByteCount: Int { state.withLock { $0.buffered } }

    /// The most bytes that were ever waiting at once (never above `bufferLimit`).
    public var peakBufferedByteCount: Int { state.withLock { $0.peak } }

    /// Calls `observer` once, on whichever thread ends the stream — at once if it has
    /// already ended. Lets a subscriber list forget streams whose clients left.
    public func onTermination(_ observer: @escaping @Sendable (Termination) -> Void) {
        let already = state.withLock { s -> Termination? in
            if s.termination == nil { s.observers.append(observer) }
            return s.termination
        }
        if let already { observer(already) }
    }

    // MARK: - Server side

    func end(_ reason: Termination, discardBuffer: Bool) {
        var ended: (Termination, [@Sendable (Termination) -> Void])?
        let wake = state.withLock { s -> Connection? in
            if s.termination == nil { ended = Self.terminate(&s, reason) }
            if discardBuffer {
                s.buffer = []
                s.readIndex = 0
            }
            return Self.takeResume(&s)
        }
        if let wake { MHD_resume_connection(wake.pointer) }
        if let (reason, observers) = ended { observers.forEach { $0(reason) } }
    }

    func bind(_ connection: OpaquePointer) {
        let socket = kiln_mhd_connection_fd(connection)
        let connection = Connection(pointer: connection)
        state.withLock { s in
            s.connection = connection
            s.socket = socket
        }
    }

    /// Whether the client closed its end while the stream waits for something to send.
    /// libmicrohttpd does not poll a suspended connection, so without asking only the next
    /// write (an event listener's heartbeat, seconds away) would find out, and the
    /// connection would hold its slot until then.
    func clientHungUp() -> Bool {
        state.withLock { s in
            s.termination == nil && s.suspended && s.socket >= 0 && kiln_socket_hung_up(s.socket) == 1
        }
    }

    /// libmicrohttpd's content reader: runs on the connection's worker thread.
    /// Returns bytes copied, 0 after suspending the connection, -1 at the end, -2 to abort.
    func read(into destination: UnsafeMutablePointer<CChar>, capacity: Int) -> Int {
        // libmicrohttpd's buffer, owned by the calling worker thread for this call only.
        nonisolated(unsafe) let destination = destination
        return state.withLock { s in
            s.resumePending = false
            if s.buffered > 0 {
                let count = min(capacity, s.buffered)
                s.buffer.withUnsafeBufferPointer { source in
                    UnsafeMutableRawPointer(destination).copyMemory(from: source.baseAddress! + s.readIndex, byteCount: count)
                }
                s.readIndex += count
                if s.readIndex == s.buffer.count {
                    // Drained: give back the memory a burst took, keep a small buffer.
                    s.buffer.removeAll(keepingCapacity: s.buffer.capacity <= 64 * 1024)
                    s.readIndex = 0
                } else if s.readIndex >= 64 * 1024 && s.readIndex * 2 >= s.buffer.count {
                    s.buffer.removeFirst(s.readIndex)
                    s.readIndex = 0
                }
                return count
            }
            switch s.termination {
            case nil:
                guard let connection = s.connection else { return 0 }
                // Suspend while holding the lock: a writer that sees `suspended` can only
                // resume after the suspension has really happened.
                s.suspended = true
                MHD_suspend_connection(connection.pointer)
                return 0
            case .closed?:
                return -1  // MHD_CONTENT_READER_END_OF_STREAM
            default:
                return -2  // MHD_CONTENT_READER_END_WITH_ERROR: the client sees a cut stream
            }
        }
    }

    /// libmicrohttpd destroyed the response: the connection is finished with this stream.
    func detach() {
        var ended: (Termination, [@Sendable (Termination) -> Void])?
        state.withLock { s in
            s.connection = nil
            s.socket = -1
            s.suspended = false
            s.resumePending = false
            s.buffer = []
            s.readIndex = 0
            if s.termination == nil { ended = Self.terminate(&s, .clientGone) }
        }
        registry?.remove(self)
        if let (reason, observers) = ended { observers.forEach { $0(reason) } }
    }

    /// True while libmicrohttpd still has to act on this stream before the daemon may stop.
    var blocksDaemonStop: Bool {
        state.withLock { $0.suspended || $0.resumePending }
    }

    private static func terminate(_ s: inout State, _ reason: Termination) -> (Termination, [@Sendable (Termination) -> Void]) {
        s.termination = reason
        let observers = s.observers
        s.observers = []
        return (reason, observers)
    }

    /// Claims the right to resume a suspended connection (exactly one caller gets it).
    private static func takeResume(_ s: inout State) -> Connection? {
        guard s.suspended, let connection = s.connection else { return nil }
        s.suspended = false
        s.resumePending = true
        return connection
    }

    private static func singleLine(_ text: String) -> String {
        text.filter { $0 != "\n" && $0 != "\r" && $0 != "\r\n" }
    }
}

/// A libmicrohttpd connection handle. @unchecked Sendable: MHD_resume_connection may be
/// called from any thread, and the stream only uses the pointer while libmicrohttpd holds
/// the stream's response (a suspended connection cannot be freed).
struct Connection: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The streams libmicrohttpd currently holds, so that stopping the server can end them
/// (a suspended connection must be resumed before MHD_stop_daemon).
final class StreamRegistry: Sendable {
    private struct State {
        var streams: [ObjectIdentifier: ResponseStream] = [:]
        var stopping = false
        var watching = false
    }

    private let state = Mutex(State())

    /// False when the server is stopping: the caller must end the stream at once.
    func add(_ stream: ResponseStream) -> Bool {
        let startWatch = state.withLock { s -> Bool? in
            guard !s.stopping else { return nil }
            s.streams[ObjectIdentifier(stream)] = stream
            defer { s.watching = true }
            return !s.watching
        }
        if startWatch == true {
            let thread = Thread { [self] in watchHangUps() }
            thread.name = "kiln-http-hangups"
            thread.start()
        }
        return startWatch != nil
    }

    /// Once a second until the server stops, ends the streams whose clients have gone
    /// (`ResponseStream.clientHungUp`): their connections close now, not at the next write.
    private func watchHangUps() {
        while true {
            usleep(1_000_000)
            guard let streams = state.withLock({ $0.stopping ? nil : Array($0.streams.values) }) else { return }
            for stream in streams where stream.clientHungUp() {
                stream.end(.clientGone, discardBuffer: true)
            }
        }
    }

    func remove(_ stream: ResponseStream) {
        _ = state.withLock { $0.streams.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// Refuses new streams and returns the live ones.
    func beginStopping() -> [ResponseStream] {
        state.withLock { s in
            s.stopping = true
            return Array(s.streams.values)
        }
    }

    var count: Int { state.withLock { $0.streams.count } }

    var all: [ResponseStream] { state.withLock { Array($0.streams.values) } }
}
