#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension HTTPResponse {
    /// A static file answer with everything a download client relies on:
    /// `Accept-Ranges`, `Content-Length` (set by libmicrohttpd), `ETag` and
    /// `If-None-Match` → 304 (naming the file's length, as a 200 would), one `Range`
    /// (`bytes=a-b`, `bytes=a-`, `bytes=-n`) → 206 with `Content-Range`, an unsatisfiable
    /// range → 416 with `Content-Range: bytes */size`, `If-Range`, `If-Match` → 412 when
    /// the file is not that one, and `HEAD`
    /// (libmicrohttpd sends the same headers and no body).
    ///
    /// `etag` is the caller's strong validator (a SHA-256, say); it is quoted if it is not
    /// already. Without one the tag is the file's identity (inode, size, modification time to
    /// the nanosecond), from the same `stat` that sizes the answer, so a download of a file
    /// nobody hashed can still resume (If-Range). A path that is not a regular file answers
    /// 404 with the default error body.
    public static func file(
        path: String, contentType: String, etag: String?, request: HTTPRequest,
        headers: HTTPHeaders = HTTPHeaders()
    ) -> HTTPResponse {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            return defaultError(status: 404, code: "not_found", message: "The file does not exist.")
        }
        let size = UInt64(info.st_size)
        var headers = headers
        headers.set("Accept-Ranges", "bytes")
        headers.set("Content-Type", contentType)
        // One identity for the untagged file's ETag and for the open that sends it.
        let identity = FileIdentity(info)
        let tag = etag.map(EntityTag.quoted) ?? EntityTag.identity(of: identity)
        headers.set("ETag", tag)

        let isRead = request.method == "GET" || request.method == "HEAD"
        // If-Match (strong comparison): a client holding another version of the file
        // (resuming its own way, or guarding a download) is told so rather than handed
        // this one (RFC 9110 section 13.1.1).
        let ifMatch = request.headers.values("If-Match")
        if !ifMatch.isEmpty, !EntityTag.list(ifMatch.joined(separator: ","), containsStrongly: tag) {
            headers.remove("Content-Type")
            return .empty(412, headers: headers)
        }
        let ifNoneMatch = request.headers.values("If-None-Match")
        if isRead, !ifNoneMatch.isEmpty, EntityTag.list(ifNoneMatch.joined(separator: ","), containsWeakly: tag) {
            headers.remove("Content-Type")
            headers.set("Content-Length", String(size))
            return .empty(304, headers: headers)
        }

        var rangeHeader = isRead ? request.headers["Range"] : nil
        // If-Range: the range only applies to the representation the client already holds.
        if rangeHeader != nil, let ifRange = request.headers["If-Range"] {
            if EntityTag.trimmed(ifRange) != tag { rangeHeader = nil }
        }
        switch ByteRange.parse(rangeHeader, size: size) {
        case .whole:
            return HTTPResponse(status: 200, headers: headers, body: size == 0 ? .bytes([]) : .file(path: path, offset: 0, length: size, identity: identity))
        case .part(let first, let last):
            headers.set("Content-Range", "bytes \(first)-\(last)/\(size)")
            return HTTPResponse(status: 206, headers: headers, body: .file(path: path, offset: first, length: last - first + 1, identity: identity))
        case .unsatisfiable:
            headers.set("Content-Range", "bytes */\(size)")
            headers.remove("Content-Type")
            return .empty(416, headers: headers)
        }
    }
}

/// One byte range of a representation of `size` bytes (RFC 9110 section 14).
enum ByteRange: Equatable {
    /// No Range, or one the server ignores (not bytes, malformed, several ranges).
    case whole
    /// Inclusive byte positions.
    case part(first: UInt64, last: UInt64)
    case unsatisfiable

    static func parse(_ header: String?, size: UInt64) -> ByteRange {
        guard let header else { return .whole }
        let text = header.trimmingWhitespace
        guard text.count > 6, text.prefix(6).lowercased() == "bytes=" else { return .whole }
        let spec = text.dropFirst(6).trimmingWhitespace
        // Several ranges would need multipart/byteranges; RFC 9110 lets a server ignore Range.
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let firstText = spec[..<dash], lastText = spec[spec.index(after: dash)...]
        guard firstText.allSatisfy(\.isASCIIDigit), lastText.allSatisfy(\.isASCIIDigit) else { return .whole }
        if firstText.isEmpty {
            // bytes=-n: the last n bytes.
            guard let count = UInt64(lastText) else { return .whole }
            guard count > 0, size > 0 else { return .unsatisfiable }
            return .part(first: size - min(count, size), last: size - 1)
        }
        guard let first = UInt64(firstText) else { return .unsatisfiable }  // beyond any file
        var last = size == 0 ? 0 : size - 1
        if !lastText.isEmpty {
            guard let requested = UInt64(lastText) else { return first < size ? .part(first: first, last: last) : .unsatisfiable }
            guard requested >= first else { return .whole }  // invalid: ignored
            last = min(requested, last)
        }
        return first < size ? .part(first: first, last: last) : .unsatisfiable
    }
}

enum EntityTag {
    /// A file's identity as a tag: inode, size and modification time to the nanosecond
    /// (it changes whenever the bytes may have).
    static func identity(of file: HTTPResponse.FileIdentity) -> String {
        let nanoseconds = String(file.nanoseconds)
        return "\"i\(file.inode)-\(file.size)-\(file.seconds)\(String(repeating: "0", count: max(0, 9 - nanoseconds.count)))\(nanoseconds)\""
    }

    static func quoted(_ tag: String) -> String {
        let tag = tag.trimmingWhitespace
        if tag.hasPrefix("\"") || tag.hasPrefix("W/\"") { return tag }
        return "\"\(tag)\""
    }

    static func trimmed(_ text: String) -> String { text.trimmingWhitespace }

    /// If-Match uses the strong comparison: a weak tag matches nothing, `*` any.
    static func list(_ header: String, containsStrongly tag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let candidate = String(candidate).trimmingWhitespace
            return candidate == "*" || (!candidate.hasPrefix("W/") && !tag.hasPrefix("W/") && candidate == tag)
        }
    }

    /// If-None-Match uses the weak comparison: `W/"x"` matches `"x"`, and `*` matches any.
    static func list(_ header: String, containsWeakly tag: String) -> Bool {
        let strip = { (t: String) in t.hasPrefix("W/") ? String(t.dropFirst(2)) : t }
        return header.split(separator: ",").contains { candidate in
            let candidate = String(candidate).trimmingWhitespace
            return candidate == "*" || strip(candidate) == strip(tag)
        }
    }
}

extension StringProtocol {
    var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
