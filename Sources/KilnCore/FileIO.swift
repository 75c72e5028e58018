#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A system call that failed: what was attempted and its `errno`.
public struct SystemCallError: Error, Sendable, CustomStringConvertible {
    public let operation: String
    public let errno: Int32
    public init(_ operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }
    public var description: String { "\(operation): \(String(cString: strerror(errno)))" }
}

/// Runs a system call, again after EINTR, and turns its -1 into a `SystemCallError`, so
/// no call site checks -1 by hand.
@discardableResult
public func systemCall<T: BinaryInteger>(_ operation: @autoclosure () -> String, _ call: () -> T) throws(SystemCallError) -> T {
    while true {
        let r = call()
        if r != -1 { return r }
        let e = errno
        if e != EINTR { throw SystemCallError(operation(), errno: e) }
    }
}

// The members below are called `read` and `write` too; these name the C functions.
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int { write(fd, buffer, count) }

/// An open file descriptor, closed when the value goes away: plain POSIX I/O for the job
/// child, which leaves the full Foundation (where `FileHandle` lives) unloaded.
public final class FileDescriptor {
    public let rawValue: Int32

    /// Opens `path` (`O_CLOEXEC` is added); a created file gets `mode` less the umask.
    public init(path: String, flags: Int32, mode: mode_t = 0o666) throws(SystemCallError) {
        rawValue = try systemCall("cannot open \(path)") { open(path, flags | O_CLOEXEC, mode) }
    }

    deinit { close(rawValue) }

    /// One `read(2)` into `buffer`; 0 at end of file.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try systemCall("cannot read") { posixRead(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Up to `count` bytes from `offset`, fewer only at end of file.
    public func read(upTo count: Int, at offset: Int64) throws(SystemCallError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = try systemCall("cannot read") {
                bytes.withUnsafeMutableBytes { pread(rawValue, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done)) }
            }
            if n == 0 { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    /// Writes all of `bytes`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
        try FileIO.write(bytes, to: rawValue)
    }

    /// Writes all of `bytes` at `offset` (pwrite: the file position stays where it is).
    public func write(_ bytes: [UInt8], at offset: Int64) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            done += try systemCall("cannot write") {
                bytes.withUnsafeBytes { pwrite(rawValue, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            }
        }
    }
}

/// Whole reads and writes on descriptors the process already has (standard input and error).
public enum FileIO {
    /// Writes all of `bytes` to `fd`.
    public static func write(_ bytes: UnsafeRawBufferPointer, to fd: Int32) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            done += try systemCall("cannot write") { posixWrite(fd, bytes.baseAddress! + done, bytes.count - done) }
        }
    }

    /// Writes `text` to standard error straight away (unbuffered, unlike `print`): error lines
    /// and progress lines must reach the daemon as they happen. Failures are ignored, as
    /// there is nowhere left to report them.
    public static func writeStandardError(_ text: String) {
        var text = text
        text.withUTF8 { try? write(UnsafeRawBufferPointer($0), to: STDERR_FILENO) }
    }

    /// Everything `fd` yields until end of file (standard input: `--plan -`, `--caps -`).
    public static func readToEnd(fd: Int32) throws(SystemCallError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = try systemCall("cannot read") { chunk.withUnsafeMutableBytes { posixRead(fd, $0.baseAddress, $0.count) } }
            if n == 0 { return result }
            result += chunk[0..<n]
        }
    }

    /// The size of the file at `path` (following symbolic links), nil if it cannot be stat'ed.
    public static func size(atPath path: String) -> Int64? {
        var st = stat()
        guard (try? systemCall("cannot stat \(path)") { stat(path, &st) }) != nil else { return nil }
        return Int64(st.st_size)
    }
}
