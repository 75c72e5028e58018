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
        // Any line ending: a file saved on Windows ends its lines in CRLF, one Character to
        // Swift, and split on "\n" the whole file was one line, a comment: the daemon
        // started on its defaults (another data folder, no token) without a word.
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, let f = value.first, f == value.last, f == "\"" || f == "'" { value = String(value.dropFirst().dropLast()) }
            values[key] = value
        }
        return values
    }

    /// Every setting `kiln serve` reads: its own, the farm's, and the child's it passes on.
    public static let settingNames: Set<String> = [
        "KILN_LISTEN", "KILN_DATA_DIR", "KILN_MEDIA_ROOTS", "KILN_TOKEN", "KILN_WEBHOOK_URL", "KILN_WEBHOOK_SECRET",
        "KILN_HTTP_THREADS", "KILN_HTTP_REQUEST_DEADLINE_SECONDS", "KILN_TRANSCODING", "KILN_ALLOW_4K_OUTPUT", "KILN_SQLITE_SYNC",
        "KILN_MAX_TRANSCODES", "KILN_MAX_REMUXES", "KILN_MAX_ATTEMPTS", "KILN_RETENTION_SECONDS", "KILN_GC_INTERVAL_SECONDS",
        "KILN_EVENT_RETENTION_SECONDS", "KILN_STORAGE_BUDGET_BYTES", "KILN_MIN_FREE_BYTES", "KILN_LEASE_SECONDS",
        "KILN_HEARTBEAT_SECONDS", "KILN_STALL_TIMEOUT_SECONDS", "KILN_TIMEOUT_BASE_SECONDS", "KILN_TIMEOUT_PER_MEDIA_SECOND",
        "KILN_SHUTDOWN_GRACE_SECONDS", "KILN_KILL_GRACE_SECONDS", "KILN_RESCUE_INTERVAL_SECONDS", "KILN_RETRY_BASE_SECONDS",
        "KILN_RETRY_CAP_SECONDS", "KILN_PREP_ARTIFACT", "KILN_PRESETS_DIR", "KILN_CHILD_NICE",
    ]

    /// Names the farm sets for its children itself, and what the daemon's own is.
    static let childNames = ["KILN_NICE": "KILN_CHILD_NICE", "KILN_PARENT_PID": nil as String?]

    /// A `KILN_` name the daemon does not read, which a setting was surely meant by: a
    /// typo (`KILN_MAX_TRANSCODE=4`) or a child's name had been ignored without a word and
    /// the default used. In the configuration file, every `KILN_` name must be a setting;
    /// in the environment, only one a letter or two from a setting, or a child's, is
    /// refused (a wrapper or a test may keep its own `KILN_` names there).
    static func checkNames(_ names: some Sequence<String>, everyOne: Bool, in place: String) throws(KilnError) {
        for name in names.sorted() where name.hasPrefix("KILN_") && !settingNames.contains(name) {
            if let own = childNames[name] {
                throw KilnError(.usage, stage: .request, field: name,
                                "\(name) in \(place) is set by kiln for its children" + (own.map { "; the setting is \($0)" } ?? ""))
            }
            let meant = settingNames.sorted().first { DeviceCaps.isMisspelling(name, of: $0) }
            guard everyOne || meant != nil else { continue }
            throw KilnError(.usage, stage: .request, field: name,
                            "\(name) in \(place) is not a kiln setting" + (meant.map { "; did you mean \($0)?" } ?? ""))
        }
    }

    public static func load(environment: [String: String], file: String?) throws(KilnError) -> DaemonConfig {
        var env = try file.map { (f) throws(KilnError) in try readFile(f) } ?? [:]
        if let file { try checkNames(env.keys, everyOne: true, in: file) }
        try checkNames(environment.keys, everyOne: false, in: "the environment")
        env.merge(environment) { _, fromEnvironment in fromEnvironment }
        var c = DaemonConfig()
        c.farm = try FarmConfig.fromEnvironment(env)
        if let listen = EnvironmentReader(env: env).string("KILN_LISTEN") { (c.host, c.port) = try parseListen(listen) }
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
        c.webhookSecret = env["KILN_WEBHOOK_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        // Unsigned, the events' signature was an HMAC with an empty key, which anyone can
        // make: a receiver checking it would take forged events for Kiln's.
        if c.webhookURL != nil, c.webhookSecret == nil {
            throw KilnError(.usage, stage: .request, field: "KILN_WEBHOOK_SECRET",
                            "KILN_WEBHOOK_URL is set without KILN_WEBHOOK_SECRET, the key its events are signed with")
        }
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
