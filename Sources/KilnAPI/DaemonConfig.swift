import Foundation
import Farm
import KilnCore
import Planner
import Store

/// `kiln serve`'s settings: every one an environment variable (CONTRACT.md section 3),
/// optionally read from a file of `KEY=value` lines (`--config FILE`; the environment
/// wins, so a unit file can override a shipped default).
public struct DaemonConfig: Sendable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8480
    public var token: String?
    public var mediaRoots: [String] = []
    public var webhookURL: URL?
    public var webhookSecret: String?
    public var httpThreads = 8
    /// `KILN_HTTP_REQUEST_DEADLINE_SECONDS`: how long a client may take to send a request's
    /// head, then its body (`HTTPServer.Configuration.requestDeadlineSeconds`); 0: no limit.
    public var httpRequestDeadlineSeconds = 60
    /// `KILN_SQLITE_SYNC`: `full` (default; every commit survives a power cut) or `normal`
    /// (commits survive a killed process; a power cut may lose the last few).
    public var durability: SQLiteStore.Durability = .full
    public var farm = FarmConfig()
    /// `KILN_TRANSCODING` (`on`/`off`: the server's transcode-to-file gate) and
    /// `KILN_ALLOW_4K_OUTPUT` (`true`/`false`): what every plan may do. A request may still
    /// forbid a transcode for its user (`transcode_allowed: false`).
    public var policy = ServerPolicy.standard

    public init() {}

    /// Reads `KEY=value` lines (`#` comments, optional quotes) into a dictionary.
    public static func readFile(_ path: String) throws(KilnError) -> [String: String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw KilnError(.usage, stage: .request, field: "config", "cannot read the configuration file \(path)")
        }
        var values: [String: String] = [:]
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let f = value.first, f == value.last, f == "\"" || f == "'" { value = String(value.dropFirst().dropLast()) }
            values[key] = value
        }
        return values
    }

    public static func load(environment: [String: String], file: String?) throws(KilnError) -> DaemonConfig {
        var env = try file.map { (f) throws(KilnError) in try readFile(f) } ?? [:]
        env.merge(environment) { _, fromEnvironment in fromEnvironment }
        var c = DaemonConfig()
        c.farm = try FarmConfig.fromEnvironment(env)
        if let listen = env["KILN_LISTEN"] { (c.host, c.port) = try parseListen(listen) }
        c.token = env["KILN_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        c.mediaRoots = (env["KILN_MEDIA_ROOTS"] ?? "").split(separator: ":").map(String.init).filter { !$0.isEmpty }
        for root in c.mediaRoots where !root.hasPrefix("/") {
            throw KilnError(.usage, stage: .request, field: "KILN_MEDIA_ROOTS", "media roots must be absolute paths: \(root)")
        }
        if let u = env["KILN_WEBHOOK_URL"], !u.isEmpty {
            guard let url = URL(string: u), url.scheme == "http" || url.scheme == "https" else {
                throw KilnError(.usage, stage: .request, field: "KILN_WEBHOOK_URL", "KILN_WEBHOOK_URL must be an http(s) URL")
            }
            c.webhookURL = url
        }
        c.webhookSecret = env["KILN_WEBHOOK_SECRET"]
        let reader = EnvironmentReader(env: env)
        if let n = try reader.int("KILN_HTTP_THREADS", in: 1...256, meaning: "a number of threads") { c.httpThreads = n }
        if let n = try reader.int("KILN_HTTP_REQUEST_DEADLINE_SECONDS", in: 0...86_400, meaning: "a number of seconds (0: no limit)") {
            c.httpRequestDeadlineSeconds = n
        }
        if let on = try reader.flag("KILN_TRANSCODING") { c.policy.transcodingAllowed = on }
        if let on = try reader.flag("KILN_ALLOW_4K_OUTPUT") { c.policy.allow4KOutput = on }
        if let d = try reader.choice("KILN_SQLITE_SYNC", ["full": SQLiteStore.Durability.full, "normal": .processCrash]) { c.durability = d }
        return c
    }

    /// `host:port`, `[v6]:port` or `:port`.
    public static func parseListen(_ s: String) throws(KilnError) -> (String, UInt16) {
        let bad = KilnError(.usage, stage: .request, field: "KILN_LISTEN", "KILN_LISTEN must be host:port, e.g. 127.0.0.1:8480")
        guard let colon = s.lastIndex(of: ":"), let port = UInt16(s[s.index(after: colon)...]) else { throw bad }
        var host = String(s[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { host = "127.0.0.1" }
        return (host, port)
    }

    /// Whether the listen address only accepts connections from this machine.
    public var isLoopback: Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
