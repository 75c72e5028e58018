import KilnCore
import Store

/// `POST /v1/prepare`'s body, checked field by field into a `PrepareRequest`: unknown
/// fields are ignored, a missing or mistyped field is a 400 that names it, and so is one
/// spelt a letter or two from a field's (`qualty`), as the caps' are: ignored, it changed
/// what was delivered (no quality is `original`).
public enum PrepareBody {
    static let maxReferenceLength = 256
    static let fields = ["reference", "source", "quality", "caps", "priority", "audio_language", "transcode_allowed"]

    public static func parse(_ bytes: [UInt8]) throws(APIError) -> PrepareRequest {
        let value: JSONValue
        do { value = try JSONValue.parse(bytes) } catch {
            throw APIError.badRequest("The body is not valid JSON.")
        }
        guard case .object(let o) = value else { throw APIError.badRequest("The body must be a JSON object.") }
        for key in o.keys.sorted() where !fields.contains(key) {
            let canon = DeviceCaps.canonical(key)
            if let near = fields.first(where: { DeviceCaps.isMisspelling(canon, of: DeviceCaps.canonical($0)) || canon == DeviceCaps.canonical($0) }) {
                throw APIError.badRequest("\(key) is not a request field; did you mean \(near)?", field: key)
            }
        }

        func string(_ key: String, in object: [String: JSONValue], name: String? = nil, required: Bool) throws(APIError) -> String? {
            let field = name ?? key
            guard let v = object[key], v != .null else {
                if required { throw APIError.badRequest("\(field) is required.", field: field) }
                return nil
            }
            guard case .string(let s) = v else { throw APIError.badRequest("\(field) must be a string.", field: field) }
            return s
        }

        // Counted in code points, not as characters are drawn: 100,000 combining accents on
        // one letter are one character, a 200 kB reference no URL could then address.
        // Control characters (NUL, newlines) name nothing a caller could write in a path.
        guard let reference = try string("reference", in: o, required: true), !reference.isEmpty,
              reference.unicodeScalars.count <= maxReferenceLength,
              !reference.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "/" }) else {
            throw APIError.badRequest("reference must be a non-empty string of at most \(maxReferenceLength) characters, "
                                      + "without '/' or control characters.", field: "reference")
        }
        guard let sourceValue = o["source"], case .object(let source) = sourceValue else {
            throw APIError.badRequest("source must be an object with a path.", field: "source")
        }
        guard let path = try string("path", in: source, name: "source.path", required: true), !path.isEmpty,
              !path.unicodeScalars.contains("\0") else {
            throw APIError.badRequest("source.path must be a non-empty path without NUL characters.", field: "source.path")
        }
        let qualityText = try string("quality", in: o, required: false) ?? Quality.original.rawValue
        let quality: Quality
        do { quality = try Quality(parsing: qualityText) } catch { throw APIError(error) }
        var caps: DeviceCaps? = nil
        if let c = o["caps"], c != .null {
            do { caps = try DeviceCaps.parse(c) } catch { throw APIError(error) }
        }
        var priority = Priority.interactive
        if let p = try string("priority", in: o, required: false) {
            guard let parsed = Priority(rawValue: p) else {
                throw APIError.badRequest("priority must be interactive or background.", field: "priority")
            }
            priority = parsed
        }
        let language = try string("audio_language", in: o, required: false)
        if let language, language.isEmpty || language.count > 16 || !language.allSatisfy({ $0.isLetter || $0 == "-" }) {
            throw APIError.badRequest("audio_language must be a language code such as \"eng\" or \"fr\".", field: "audio_language")
        }
        var transcodeAllowed: Bool?
        if let t = o["transcode_allowed"], t != .null {
            guard case .bool(let allowed) = t else {
                throw APIError.badRequest("transcode_allowed must be true or false.", field: "transcode_allowed")
            }
            transcodeAllowed = allowed
        }
        return PrepareRequest(reference: reference, sourcePath: path, quality: quality, caps: caps, priority: priority,
                              audioLanguage: language?.lowercased(), transcodeAllowed: transcodeAllowed)
    }
}
