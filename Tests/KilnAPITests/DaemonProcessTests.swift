import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// `kiln serve` started the way users start it: a real process, SQLite in its data
/// folder, `prep-artifact` children.
final class DaemonProcess: @unchecked Sendable {
    let process = Process()
    let port: UInt16
    let log: URL

    static func freePort() throws -> UInt16 {
        let socket = loopbackSocket()
        close(socket.fd)
        return socket.port
    }

    /// A TCP socket bound to a free loopback port, and listening when `listening` (a
    /// connection then waits in its backlog, never accepted): its descriptor, which the
    /// caller closes, and its port.
    static func loopbackSocket(listening: Bool = false) -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        if listening, listen(fd, 16) != 0 { Issue.record("cannot listen on a loopback socket") }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return (fd, UInt16(bigEndian: addr.sin_port))
    }

    /// `kiln serve` with `environment` over this process's (nil removes a variable),
    /// expected to exit: its status and standard error. One still running after `seconds`
    /// is recorded as an issue and stopped.
    /// The user "nobody", and the command that runs another as it: root writes whatever a
    /// file's mode says, so a test of what the daemon cannot write runs it as nobody.
    static let nobody = "65534"
    static let asNobody = ["/usr/bin/setpriv", "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups"]

    /// `runner`: a command it runs under (`asNobody` to run it as another user).
    static func serveExpectingExit(_ environment: [String: String?], within seconds: Double = 20,
                                   runner: [String] = []) throws -> (status: Int32, stderr: String) {
        let p = Process()
        let command = runner + [Binaries.path("kiln"), "serve"]
        p.executableURL = URL(fileURLWithPath: command[0])
        p.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        p.environment = env
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let deadline = Date(timeIntervalSinceNow: seconds)
        while p.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if p.isRunning {
            Issue.record("kiln serve kept running")
            p.terminate()
        }
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// `runner`: a command it runs under (`prlimit` with its options and `--`).
    init(dataDir: URL, mediaRoot: String, port: UInt16? = nil, extra: [String: String] = [:], runner: [String] = []) throws {
        self.port = try port ?? Self.freePort()
        log = dataDir.appendingPathComponent("daemon-\(UUID().uuidString.prefix(6)).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let command = runner + [Binaries.path("kiln"), "serve"]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var env = ProcessInfo.processInfo.environment
        env["KILN_DATA_DIR"] = dataDir.path
        env["KILN_LISTEN"] = "127.0.0.1:\(self.port)"
        env["KILN_MEDIA_ROOTS"] = mediaRoot
        env["KILN_PRESETS_DIR"] = Media.repoRoot.appendingPathComponent("Presets").path
        env["KILN_MIN_FREE_BYTES"] = "0"
        for (k, v) in extra { env[k] = v }
        process.environment = env
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        let deadline = Date(timeIntervalSinceNow: 30)
        while Date() < deadline {
            if (try? RawHTTP.request(port: self.port, "GET", "/healthz"))?.status == 200 { return }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw TestFailure("kiln serve did not come up: \(logText)")
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// A copy of a 40 s 720p clip under a name of its own in `folder`: a transcode long
    /// enough to interrupt, whose child's command line names it.
    static func longSource(in folder: URL) throws -> URL {
        let source = folder.appendingPathComponent("long-\(UUID().uuidString.prefix(6)).mkv")
        try FileManager.default.copyItem(atPath: try Media.generated("crash-720p-40s.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
            "-t", "40", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"]), toPath: source.path)
        return source
    }

    /// Asks for `source` at 1 Mbit/s for a 720p H.264/AAC device: a transcode.
    func transcode(reference: String, source: String) throws -> RawHTTP.Response {
        let body = #"{"reference":"\#(reference)","source":{"path":"\#(source)"},"quality":"1mbps","caps":{"codecs_video":["h264"],"codecs_audio":["aac"],"containers":["mp4"],"max_resolution":"720p"}}"#
        return try RawHTTP.json(port: port, "POST", "/v1/prepare", body)
    }

    /// Whether artifact `id`'s child is encoding (progress stored) within a minute.
    func encoding(_ id: String) throws -> Bool {
        let deadline = Date(timeIntervalSinceNow: 60)
        while Date() < deadline {
            let a = try JSONValue.parse(try RawHTTP.request(port: port, "GET", "/v1/artifacts/\(id)").body)
            if a["progress"]?["encoded_seconds"]?.int ?? 0 > 0 { return true }
            Thread.sleep(forTimeInterval: 0.2)
        }
        return false
    }

    func kill9() { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    /// SIGTERM, and the daemon's exit awaited; one still running after a minute (jobs get
    /// 30 s) is a failure, killed so that the run goes on.
    func terminate() {
        process.terminate()
        let deadline = Date(timeIntervalSinceNow: 60)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            Issue.record("kiln serve did not stop within a minute of SIGTERM: \(logText.suffix(500))")
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
    }
}

/// Processes whose command line mentions `needle`.
func processes(matching needle: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).filter { pid in
        guard let cmd = try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8) else { return false }
        return cmd.contains(needle)
    }
}

@Suite("kiln serve as a process", .serialized)
struct DaemonProcessTests {
    @Test("a client trickling its request's headers is cut off at KILN_HTTP_REQUEST_DEADLINE_SECONDS though it never goes idle, and /metrics counts it; others are answered meanwhile")
    func requestDeadline() throws {
        let data = Media.scratch("deadline-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let d = try DaemonProcess(dataDir: data, mediaRoot: data.path, extra: ["KILN_HTTP_REQUEST_DEADLINE_SECONDS": "1"])
        defer { d.terminate() }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = d.port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(connected == 0)
        func send(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } > 0 }
        _ = send("GET /healthz HTTP/1.1\r\nHost: x\r\n")
        var closed = false
        let start = Date()
        var buffer = [UInt8](repeating: 0, count: 1024)
        while !closed, Date().timeIntervalSince(start) < 20 {
            if !send("X-Slow: a\r\n") { closed = true; break }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 300) > 0 {
                let n = recv(fd, &buffer, buffer.count, 0)
                closed = n == 0 || (n < 0 && errno == ECONNRESET)
            }
            // Trickling, it holds its slot; the daemon answers everyone else.
            if Date().timeIntervalSince(start) < 0.5 { #expect(try RawHTTP.request(port: d.port, "GET", "/healthz").status == 200) }
        }
        #expect(closed, "the headers trickled on for 20 s and the connection stayed open")
        let metrics = try RawHTTP.request(port: d.port, "GET", "/metrics").text
        #expect(metrics.contains("kiln_http_connections_cut_total 1"), "\(metrics)")
    }

    @Test("kiln --version and --help answer whatever the settings say (a broken setting had made --help fail)")
    func versionAndHelp() throws {
        for (args, expected) in [(["--version"], "kiln \(KilnVersion.number)"), (["--help"], "usage: kiln serve")] {
            let r = try Run.command("env", ["KILN_MAX_TRANSCODES=many", Binaries.path("kiln")] + args)
            #expect(r.status == 0 && r.stdout.hasPrefix(expected), "\(args): \(r.status) \(r.stdout) \(r.stderr)")
        }
    }

    @Test("refuses a non-loopback listen address without a token")
    func refusesOpenListen() throws {
        let dir = Media.scratch("open")
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try DaemonProcess.serveExpectingExit(["KILN_LISTEN": "0.0.0.0:0", "KILN_TOKEN": nil, "KILN_DATA_DIR": dir.path])
        #expect(r.status == 2)
        #expect(r.stderr.contains("KILN_TOKEN"))
    }

    @Test("a daemon whose job command is missing does not start (it said it was ready, then answered every request with a 500); a settings error is one line, not buried under the usage text")
    func jobCommandMissing() throws {
        let dir = Media.scratch("no-child")
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try DaemonProcess.serveExpectingExit([
            "KILN_DATA_DIR": dir.path, "KILN_LISTEN": "127.0.0.1:\(try DaemonProcess.freePort())", "KILN_MEDIA_ROOTS": dir.path,
            "KILN_PREP_ARTIFACT": dir.appendingPathComponent("prep-artifact").path,
            "KILN_PRESETS_DIR": Media.repoRoot.appendingPathComponent("Presets").path,
        ])
        #expect(r.status == 2 && r.stderr.contains("cannot run the job command \(dir.path)/prep-artifact (No such file or directory)"), "\(r.stderr)")
        #expect(!r.stderr.contains("kiln serve [--config FILE]"), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("kiln.db").path), "nothing made before refusing")
    }

    @Test("kiln status reads the daemon's address and token from its settings file, says what a refused token means, and talks to the daemon directly whatever proxy the shell names")
    func statusWithSettingsFile() throws {
        let data = Media.scratch("status-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let d = try DaemonProcess(dataDir: data, mediaRoot: data.path, extra: ["KILN_TOKEN": "s3cret"])
        defer { d.terminate() }
        let settings = data.appendingPathComponent("kiln.env")
        try Data("KILN_LISTEN=127.0.0.1:\(d.port)\r\nKILN_TOKEN=s3cret\r\n".utf8).write(to: settings)
        func status(_ arguments: [String], _ extra: [String: String?]) throws -> (status: Int32, out: String, err: String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: Binaries.path("kiln"))
            p.arguments = ["status"] + arguments
            var env = ProcessInfo.processInfo.environment
            for (k, v) in extra { env[k] = v }
            p.environment = env
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try p.run()
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
                    String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
        let refused = try status([], ["KILN_LISTEN": "127.0.0.1:\(d.port)", "KILN_TOKEN": nil])
        #expect(refused.status == 2 && refused.err.contains("wants its token") && refused.err.contains("--config"), "\(refused)")
        let proxy: [String: String?] = ["HTTP_PROXY": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9", "KILN_LISTEN": nil, "KILN_TOKEN": nil]
        let table = try status(["--config", settings.path], proxy)
        #expect(table.status == 0 && table.out.contains("running") && table.out.contains("storage:"), "\(table)")
    }

    @Test("a second daemon on the same data directory exits at once with a line that says so (it deleted the first one's running attempts and ran jobs beside it); once the first has stopped, it starts")
    func oneDaemonPerDataDirectory() throws {
        let data = Media.scratch("lock-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let first = try DaemonProcess(dataDir: data, mediaRoot: data.path)
        // An attempt's temporary file, as a running job has one.
        let artifacts = data.appendingPathComponent("artifacts")
        let working = artifacts.appendingPathComponent(".a_0.mp4.kiln-tmp-job1-attempt1.kiln-tmp-1-1")
        _ = FileManager.default.createFile(atPath: working.path, contents: Data("x".utf8))
        let second = try DaemonProcess.serveExpectingExit([
            "KILN_DATA_DIR": data.path, "KILN_LISTEN": "127.0.0.1:\(try DaemonProcess.freePort())", "KILN_MEDIA_ROOTS": data.path,
            "KILN_PRESETS_DIR": Media.repoRoot.appendingPathComponent("Presets").path,
        ])
        #expect(second.status == 4 && second.stderr.contains("another kiln (pid \(first.process.processIdentifier))"), "\(second.stderr)")
        #expect(FileManager.default.fileExists(atPath: working.path), "the first daemon's work is left alone")
        #expect(try RawHTTP.request(port: first.port, "GET", "/healthz").status == 200)
        first.terminate()
        let third = try DaemonProcess(dataDir: data, mediaRoot: data.path)
        third.terminate()
    }

    @Test("a data directory whose kiln.db is empty (0 bytes) beside artifact files: the daemon starts, says their rows are lost, and removes those older than the retention at once; a newer one, and an operator's file, stay (they were left for good)")
    func emptiedDatabase() throws {
        let data = Media.scratch("emptied-db")
        defer { try? FileManager.default.removeItem(at: data) }
        let artifacts = data.appendingPathComponent("artifacts")
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: data.appendingPathComponent("kiln.db").path, contents: nil)
        let old = artifacts.appendingPathComponent("a_aaaaaaaaaaaaaaaaaaaaaaaa.mp4").path
        let recent = artifacts.appendingPathComponent("a_bbbbbbbbbbbbbbbbbbbbbbbb.mp4").path
        let mine = artifacts.appendingPathComponent("trailer.mp4").path
        for file in [old, recent, mine] { FileManager.default.createFile(atPath: file, contents: Data(count: 4096)) }
        let fourDaysAgo = Int(Date().timeIntervalSince1970) - 4 * 86_400
        var times = [timeval(tv_sec: fourDaysAgo, tv_usec: 0), timeval(tv_sec: fourDaysAgo, tv_usec: 0)]
        #expect(utimes(old, &times) == 0 && utimes(mine, &times) == 0)
        let daemon = try DaemonProcess(dataDir: data, mediaRoot: data.path)
        defer { daemon.terminate() }
        let deadline = Date(timeIntervalSinceNow: 10)
        while FileManager.default.fileExists(atPath: old) && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(!FileManager.default.fileExists(atPath: old), "\(daemon.logText)")
        #expect(FileManager.default.fileExists(atPath: recent) && FileManager.default.fileExists(atPath: mine))
        #expect(daemon.logText.contains("row was lost") && daemon.logText.contains("a_bbbbbbbbbbbbbbbbbbbbbbbb.mp4"), "\(daemon.logText)")
        #expect(daemon.logText.contains("left alone") && daemon.logText.contains("trailer.mp4"), "\(daemon.logText)")
    }

    @Test("a database its user cannot write (read-only to it): exit 4 naming the file at start; it had started, said it was ready and refused every request")
    func readOnlyDatabase() throws {
        let data = Media.scratch("readonly-data")
        defer { try? FileManager.default.removeItem(at: data) }
        try DaemonProcess(dataDir: data, mediaRoot: data.path).terminate()
        // The daemon runs as nobody, owning its folder, its database file read-only.
        let nobody = DaemonProcess.nobody
        #expect(try Run.command("chown", ["-R", "\(nobody):\(nobody)", data.path]).status == 0)
        let database = data.appendingPathComponent("kiln.db").path
        #expect(chmod(database, 0o444) == 0)
        let environment: [String: String?] = [
            "KILN_DATA_DIR": data.path, "KILN_LISTEN": "127.0.0.1:\(try DaemonProcess.freePort())", "KILN_MEDIA_ROOTS": data.path,
            "KILN_PRESETS_DIR": Media.repoRoot.appendingPathComponent("Presets").path,
        ]
        let r = try DaemonProcess.serveExpectingExit(environment, runner: DaemonProcess.asNobody)
        #expect(r.status == 4 && r.stderr.contains("\(database) cannot be written"), "\(r.stderr)")
        // Writable again (SQLite made its -wal and -shm files with the database's mode), the
        // same user starts.
        for file in [database, database + "-wal", database + "-shm"] where FileManager.default.fileExists(atPath: file) {
            #expect(chmod(file, 0o644) == 0)
        }
        let started = try DaemonProcess.serveExpectingExit(environment, within: 3, runner: DaemonProcess.asNobody + ["/usr/bin/timeout", "2"])
        #expect(started.status == 124, "still serving when stopped: \(started.stderr)")
    }

    @Test("an artifacts folder its user cannot write, or a data directory that is a file: exit 4 saying so at start; the first had started, said it was ready and spent every job's attempts on Permission denied")
    func unwritableFolders() throws {
        let data = Media.scratch("unwritable-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let artifacts = data.appendingPathComponent("artifacts")
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let nobody = DaemonProcess.nobody
        #expect(try Run.command("chown", ["\(nobody):\(nobody)", data.path]).status == 0)   // artifacts/ stays root's
        let presets = Media.repoRoot.appendingPathComponent("Presets").path
        let r = try DaemonProcess.serveExpectingExit([
            "KILN_DATA_DIR": data.path, "KILN_LISTEN": "127.0.0.1:\(try DaemonProcess.freePort())", "KILN_MEDIA_ROOTS": data.path,
            "KILN_PRESETS_DIR": presets,
        ], runner: DaemonProcess.asNobody)
        #expect(r.status == 4 && r.stderr.contains("cannot write in \(artifacts.path): Permission denied"), "\(r.stderr)")
        let file = data.appendingPathComponent("a-file")
        #expect(FileManager.default.createFile(atPath: file.path, contents: Data("x".utf8)))
        let onFile = try DaemonProcess.serveExpectingExit([
            "KILN_DATA_DIR": file.path, "KILN_LISTEN": "127.0.0.1:\(try DaemonProcess.freePort())", "KILN_PRESETS_DIR": presets,
        ])
        #expect(onFile.status == 4 && onFile.stderr.contains("\(file.path) is not a folder"), "\(onFile.stderr)")
    }

    @Test("a port another program holds: exit 4 with the system's reason, not a second listener on it")
    func portInUse() throws {
        let data = Media.scratch("port-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let taken = DaemonProcess.loopbackSocket(listening: true)
        defer { close(taken.fd) }
        let r = try DaemonProcess.serveExpectingExit([
            "KILN_DATA_DIR": data.path, "KILN_LISTEN": "127.0.0.1:\(taken.port)",
            "KILN_PRESETS_DIR": Media.repoRoot.appendingPathComponent("Presets").path,
        ])
        #expect(r.status == 4 && r.stderr.contains("Address already in use"), "\(r.stderr)")
    }

    @Test("SIGTERM drains (not ready, the running job keeps going); a second SIGTERM stops the job at once instead of waiting out the grace, and it is queued again unspent")
    func secondSignal() throws {
        let media = Media.scratch("drain-media")
        let data = Media.scratch("drain-data")
        defer { try? FileManager.default.removeItem(at: media); try? FileManager.default.removeItem(at: data) }
        let source = try DaemonProcess.longSource(in: media)
        let d = try DaemonProcess(dataDir: data, mediaRoot: media.path, extra: ["KILN_SHUTDOWN_GRACE_SECONDS": "600"])
        let answer = try d.transcode(reference: "drain-1", source: source.path)
        let id = try #require(try JSONValue.parse(answer.body)["artifact_id"]?.string)
        #expect(try d.encoding(id), "the transcode got going")

        kill(d.process.processIdentifier, SIGTERM)
        var draining: JSONValue = .null
        let drainDeadline = Date(timeIntervalSinceNow: 10)
        while Date() < drainDeadline, draining["error"] != .string("shutting_down") {
            draining = (try? JSONValue.parse(try RawHTTP.request(port: d.port, "GET", "/readyz").body)) ?? .null
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(draining["error"] == .string("shutting_down"), "\(draining)")
        let children = processes(matching: source.path)
        #expect(d.process.isRunning && !children.isEmpty, "the job goes on through the grace")
        // Held still, so it cannot finish within the grace by itself on a fast machine.
        for child in children { kill(child, SIGSTOP) }
        Thread.sleep(forTimeInterval: 1)
        #expect(d.process.isRunning, "the daemon waits for its job")

        kill(d.process.processIdentifier, SIGTERM)
        let exitDeadline = Date(timeIntervalSinceNow: 30)   // the grace is ten minutes
        while d.process.isRunning && Date() < exitDeadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(!d.process.isRunning, "a second SIGTERM ends the grace: \(d.logText)")
        if d.process.isRunning { d.kill9() } else { d.process.waitUntilExit() }
        #expect(d.process.terminationStatus == 0)
        #expect(processes(matching: source.path).isEmpty, "no child left")
        #expect(d.logText.contains("again: stopping running jobs now"), "\(d.logText)")

        // Started again, the job is in the line with no attempt spent on the stop.
        let again = try DaemonProcess(dataDir: data, mediaRoot: media.path, port: d.port, extra: ["KILN_SHUTDOWN_GRACE_SECONDS": "0"])
        defer { again.terminate() }
        let detail = try JSONValue.parse(try RawHTTP.request(port: again.port, "GET", "/v1/artifacts/\(id)").body)
        guard case .array(let errors)? = detail["errors"] else { Issue.record("no errors list: \(detail)"); return }
        #expect(errors.isEmpty, "the stop is no failed attempt: \(detail)")
    }

    @Test("SIGHUP (its terminal closed) stops the daemon as SIGTERM does, saying so, not at once with no word")
    func hangUp() throws {
        let data = Media.scratch("hangup-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let d = try DaemonProcess(dataDir: data, mediaRoot: data.path)
        kill(d.process.processIdentifier, SIGHUP)
        let deadline = Date(timeIntervalSinceNow: 30)
        while d.process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        // (A runner that ignores SIGHUP passes that on: unhandled, the daemon then never stops.)
        guard !d.process.isRunning else { d.kill9(); Issue.record("SIGHUP did not stop the daemon: \(d.logText)"); return }
        #expect(d.process.terminationReason == .exit && d.process.terminationStatus == 0, "\(d.process.terminationStatus) \(d.logText)")
        #expect(d.logText.contains("SIGHUP: stopping"), "\(d.logText)")
    }

    @Test("more event streams than its file descriptors allow (a soft and hard limit of 300) wait their turn with descriptors to spare: the daemon lives on and answers once they close (it accepted them until no descriptor was left, and libdispatch ended it with SIGILL)")
    func descriptorsRunOut() throws {
        let data = Media.scratch("descriptors-data")
        defer { try? FileManager.default.removeItem(at: data) }
        let d = try DaemonProcess(dataDir: data, mediaRoot: data.path, runner: ["/usr/bin/prlimit", "--nofile=300:300", "--"])
        defer { d.terminate() }
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        for _ in 0..<400 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { break }
            sockets.append(fd)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = d.port.bigEndian
            let connected = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else { break }
            let request = Array("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
            _ = send(fd, request, request.count, Int32(MSG_NOSIGNAL))
        }
        #expect(sockets.count > 300)
        Thread.sleep(forTimeInterval: 2)
        // Descriptors left for its store, its jobs and its runtime while the streams wait.
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(d.process.processIdentifier)/fd").count) ?? 300
        #expect(open < 250, "\(open) of 300 descriptors open")
        Thread.sleep(forTimeInterval: 1)
        for fd in sockets { close(fd) }
        sockets = []
        Thread.sleep(forTimeInterval: 1)
        #expect(d.process.isRunning, "\(d.logText.suffix(400))")
        guard d.process.isRunning else { return }
        #expect(try RawHTTP.request(port: d.port, "GET", "/healthz").status == 200)
    }

    @Test("SIGKILLed mid-transcode, the daemon restarts and finishes the job: one artifact, no orphan child, no temporary file")
    func crashMidTranscode() throws {
        let media = Media.scratch("crash-media")
        let data = Media.scratch("crash-data")
        defer { try? FileManager.default.removeItem(at: media); try? FileManager.default.removeItem(at: data) }
        let source = try DaemonProcess.longSource(in: media)
        let extra = ["KILN_LEASE_SECONDS": "3", "KILN_HEARTBEAT_SECONDS": "1", "KILN_RESCUE_INTERVAL_SECONDS": "1"]
        let first = try DaemonProcess(dataDir: data, mediaRoot: media.path, extra: extra)
        let answer = try first.transcode(reference: "crash-1", source: source.path)
        #expect(answer.status == 202)
        let id = try #require(try JSONValue.parse(answer.body)["artifact_id"]?.string)

        // Wait until the child is encoding (progress stored), then kill the daemon outright.
        #expect(try first.encoding(id), "the transcode got going")
        #expect(!processes(matching: source.path).isEmpty, "a child works on it")
        first.kill9()
        // The child dies with its daemon (PR_SET_PDEATHSIG): no orphan keeps encoding.
        let orphanDeadline = Date(timeIntervalSinceNow: 10)
        while Date() < orphanDeadline && !processes(matching: source.path).isEmpty { Thread.sleep(forTimeInterval: 0.1) }
        #expect(processes(matching: source.path).isEmpty, "no orphan child")

        let second = try DaemonProcess(dataDir: data, mediaRoot: media.path, port: first.port, extra: extra)
        defer { second.terminate() }
        var final: JSONValue = .null
        let finish = Date(timeIntervalSinceNow: 240)
        while Date() < finish {
            final = try JSONValue.parse(try RawHTTP.request(port: second.port, "GET", "/v1/references/crash-1").body)
            if final["status"] != .string("preparing") { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(final["status"] == .string("ready"), "\(final) \(second.logText)")
        let artifacts = try FileManager.default.contentsOfDirectory(atPath: data.appendingPathComponent("artifacts").path)
        #expect(artifacts == ["\(id).mp4"], "one artifact, no temporary file: \(artifacts)")
        #expect(try FFprobe.decodeErrors(data.appendingPathComponent("artifacts/\(id).mp4").path) == "")
        let detail = try JSONValue.parse(try RawHTTP.request(port: second.port, "GET", "/v1/artifacts/\(id)").body)
        // The daemon's crash is no fault of the job's: the attempt it cut short is given back.
        #expect(detail["attempts"]?.int == 1, "\(detail)")
        var codes: [String] = []
        if case .array(let errors)? = detail["errors"] { codes = errors.compactMap { $0["code"]?.string } }
        #expect(codes == ["interrupted"], "\(detail)")

        // `kiln status` shows the same daemon's queue as a table.
        let status = Process()
        status.executableURL = URL(fileURLWithPath: Binaries.path("kiln"))
        status.arguments = ["status"]
        var env = ProcessInfo.processInfo.environment
        env["KILN_LISTEN"] = "127.0.0.1:\(second.port)"
        status.environment = env
        let out = Pipe()
        status.standardOutput = out
        try status.run()
        status.waitUntilExit()
        let table = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(status.terminationStatus == 0)
        #expect(table.contains("succeeded 1") && table.contains("transcode 0/1"), "\(table)")
    }
}
