import Foundation
import KilnCore
#if canImport(Glibc)
import Glibc
#endif

/// Decides whether a source path may be prepared: it must be absolute, resolve (symlinks
/// followed) inside one of the media roots, and be a regular readable file. A path
/// outside the roots is `source_forbidden` whether it exists or not, so answers never
/// reveal anything about files outside them; `source_not_found` is only said inside.
public struct SourceGate: Sendable {
    public let roots: [String]

    /// Roots are resolved once (they may themselves be symlinks).
    public init(roots: [String]) {
        self.roots = roots.compactMap { SourceGate.resolve($0) ?? ($0.hasPrefix("/") ? SourceGate.normalize($0) : nil) }
    }

    public static let forbidden = APIError(403, "source_forbidden", "The source is not inside a configured media root.", field: "source.path")
    public static let notFound = APIError(404, "source_not_found", "The source file does not exist.", field: "source.path")

    /// The resolved path of an allowed source.
    public func check(_ path: String) throws(APIError) -> String {
        guard path.hasPrefix("/"), !path.contains("\0") else {
            throw APIError(400, "bad_request", "source.path must be an absolute path.", field: "source.path")
        }
        guard !roots.isEmpty else { throw SourceGate.forbidden }
        guard let real = SourceGate.resolve(path) else {
            let e = errno
            // Missing: only admit that when the path, taken literally, lies inside a root.
            guard inside(SourceGate.normalize(path)) else { throw SourceGate.forbidden }
            // A symlink loop or an unsearchable folder is there and cannot be read.
            guard e == ENOENT || e == ENOTDIR else {
                throw APIError(422, "source_unreadable", "The source path cannot be followed to a file (\(String(cString: strerror(e)))).",
                               field: "source.path")
            }
            throw SourceGate.notFound
        }
        guard inside(real) else { throw SourceGate.forbidden }
        var st = stat()
        guard stat(real, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, access(real, R_OK) == 0 else {
            throw APIError(403, "source_forbidden", "The source is not a regular readable file.", field: "source.path")
        }
        return real
    }

    func inside(_ path: String) -> Bool {
        roots.contains { root in path == root || path.hasPrefix(root == "/" ? "/" : root + "/") }
    }

    static func resolve(_ path: String) -> String? { Path.resolved(path) }

    /// `.` and `..` removed lexically, for paths that do not exist.
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for c in path.split(separator: "/") {
            if c == "." || c.isEmpty { continue }
            if c == ".." { _ = parts.popLast() } else { parts.append(c) }
        }
        return "/" + parts.joined(separator: "/")
    }
}

/// Compares a presented bearer token with the configured one in time that does not
/// depend on where they differ.
public func tokensMatch(_ presented: String, _ expected: String) -> Bool {
    let a = Array(presented.utf8), b = Array(expected.utf8)
    var diff = UInt8(a.count == b.count ? 0 : 1)
    for i in 0..<max(a.count, b.count) {
        diff |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
    }
    return diff == 0
}
