#if canImport(Glibc)
import Glibc
#endif

/// File-system paths as plain strings, and what the media child asks of the file system,
/// without Foundation (whose library costs every `prep-artifact` process ~4 MB of resident
/// memory: docs/NOTES.md). Paths are handled lexically, as POSIX `dirname` does.
public enum Path {
    /// The folder part: "/a/b" → "/a", "b" → ".", "/b" → "/", "a/b/" → "a".
    public static func directory(of path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.hasSuffix("/") { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/") else { return "." }
        var dir = p[..<slash]
        while dir.count > 1, dir.hasSuffix("/") { dir = dir.dropLast() }
        return dir.isEmpty ? "/" : String(dir)
    }

    /// The last component: "/a/b" → "b", "a/b/" → "b".
    public static func lastComponent(of path: String) -> String {
        var p = Substring(path)
        while p.count > 1, p.hasSuffix("/") { p = p.dropLast() }
        guard let slash = p.lastIndex(of: "/"), p != "/" else { return String(p) }
        return String(p[p.index(after: slash)...])
    }

    /// `base` and `component` joined by one slash.
    public static func join(_ base: String, _ component: String) -> String {
        base.hasSuffix("/") ? base + component : base + "/" + component
    }

    /// `path` made absolute against the current directory, with "." and ".." and repeated
    /// slashes resolved lexically (symbolic links are not followed).
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : join(currentDirectory() ?? "/", path)
        var parts: [Substring] = []
        for part in full.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    public static func currentDirectory() -> String? {
        guard let cwd = getcwd(nil, 0) else { return nil }
        defer { free(cwd) }
        return String(cString: cwd)
    }

    /// The running executable's path, symbolic links resolved (nil where /proc is missing).
    public static func executable() -> String? { resolved("/proc/self/exe") }

    /// The path with every symbolic link, `.` and `..` resolved (realpath(3)); nil when it
    /// does not exist.
    public static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    /// The names in a folder (without "." and ".."), nil if it cannot be read.
    public static func entries(ofDirectory path: String) -> [String]? {
        guard let dir = opendir(path) else { return nil }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}

extension FileIO {
    /// The whole file at `path`.
    public static func contents(atPath path: String) throws(SystemCallError) -> [UInt8] {
        let file = try FileDescriptor(path: path, flags: O_RDONLY | O_CLOEXEC)
        return try readToEnd(fd: file.rawValue)
    }
}

/// The process's environment variables.
public enum Environment {
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
