import KilnCore

/// The child-process line protocol the daemon reads from `prep-artifact prepare
/// --progress-json` on standard error: one JSON object per line, `{"event": "progress", …}`.
enum JSONLine {
    struct Line: Encodable {
        let event: String
        let progress: JobProgress
    }
    static func progress(_ p: JobProgress) -> String { JSON.string(Line(event: "progress", progress: p)) }
}
