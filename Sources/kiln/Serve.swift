import Foundation
import Farm
import HTTPServer
import KilnAPI
import KilnCore
import Planner
import Store

/// `kiln serve`: the store, the farm, the HTTP API, the webhook; SIGTERM or SIGINT shuts
/// down gracefully (stop claiming, let running jobs finish within the grace period, then
/// stop them and queue them again, attempt not spent).
enum Serve {
    /// Makes `path` and the folders above it where missing, saying why it cannot in the
    /// system's words (Foundation said "NSCocoaErrorDomain error 512" for a data directory
    /// that is a file).
    static func makeFolder(_ path: String) throws(KilnError) {
        if Path.exists(path) {
            guard Path.isDirectory(path) else { throw KilnError(.ioError, stage: .request, "\(path) is not a folder") }
            return
        }
        let parent = Path.directory(of: path)
        if parent != path { try makeFolder(parent) }
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            let e = errno
            throw KilnError(.ioError, stage: .request, underlying: e, "cannot create the folder \(path): \(String(cString: strerror(e)))")
        }
    }

    /// A file made and removed in `folder`: an artifacts folder this user cannot write had
    /// let the daemon start, say it was ready and spend every job's attempts on "Permission
    /// denied".
    static func checkWritable(_ folder: String) throws(KilnError) {
        let probe = folder + "/.kiln-write-check-\(getpid())"
        let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            let e = errno
            throw KilnError(.ioError, stage: .request, underlying: e, "cannot write in \(folder): \(String(cString: strerror(e)))")
        }
        close(fd)
        unlink(probe)
    }

    /// One daemon per data directory, held for the process's life by an exclusive lock on
    /// `kiln.lock` (closed on exec, so children do not keep it). A second daemon on the
    /// same folder would take the first one's running attempts for a crash's leftovers and
    /// delete their temporary files at start-up, then claim and run jobs beside it, past
    /// its transcode limit; the port is no guard (another one may be configured, or the
    /// same one shared).
    static func lockDataDir(_ dataDir: String) throws(KilnError) {
        let path = dataDir + "/kiln.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw KilnError(.ioError, stage: .request, "cannot open \(path): \(String(cString: strerror(errno)))") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
            close(fd)
            throw KilnError(.ioError, stage: .request,
                            "another kiln (pid \(holder.isEmpty ? "unknown" : holder)) is serving the data directory \(dataDir): stop it first")
        }
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        // The descriptor stays open until the process ends: that is the lock.
    }

    static func run(_ config: DaemonConfig) throws(KilnError) -> Int32 {
        // First, before any thread is started: a signal that comes while the daemon starts
        // waits for it (`ShutdownSignal`).
        let signal = ShutdownSignal()
        guard config.isLoopback || config.token != nil else {
            throw KilnError(.usage, stage: .request, field: "KILN_TOKEN",
                            "refusing to listen on \(config.host) without KILN_TOKEN: set a token or listen on 127.0.0.1")
        }
        // The command every job runs: missing, the daemon said it was ready and answered
        // every request with a 500.
        let command = config.farm.prepArtifactPath
        guard access(command, X_OK) == 0 else {
            let e = errno
            throw KilnError(.usage, stage: .request, field: "KILN_PREP_ARTIFACT", underlying: e,
                            "cannot run the job command \(command) (\(String(cString: strerror(e)))): install prep-artifact beside kiln or set KILN_PREP_ARTIFACT")
        }
        let dataDir = config.farm.absoluteDataDir
        for folder in [dataDir, config.farm.artifactsDir] {
            try makeFolder(folder)
            try checkWritable(folder)
        }
        try lockDataDir(dataDir)
        let store = try SQLiteStore(path: dataDir + "/kiln.db", durability: config.durability)
        let presetsDir = config.farm.presetsDir ?? Presets.locate()
        guard let presetsDir else { throw KilnError(.usage, stage: .request, field: "KILN_PRESETS_DIR", "cannot find the Presets folder; set KILN_PRESETS_DIR") }
        let presets = try Presets.load(directory: presetsDir)
        var farmConfig = config.farm
        farmConfig.eventsHeldForWebhook = config.webhookURL != nil
        let farm = Farm(config: farmConfig, store: store, presets: presets, policy: config.policy)
        let report = try farm.start(soleFarm: true)   // the data directory's lock is ours
        log("recovered: \(report.finishedDeletions.count) deletions finished, \(report.removedTemporaries.count) temporary files removed, \(report.rescuedJobs) jobs rescued")

        let metrics = Metrics()
        metrics.observe(farm)
        var webhook: WebhookDeliverer?
        if let url = config.webhookURL {
            let hook = WebhookDeliverer(url: url, secret: config.webhookSecret, store: store, hub: farm.events, log: { log($0) })
            metrics.webhookCounts = { [weak hook] in hook.map { ($0.delivered, $0.failures) } ?? (0, 0) }
            webhook = hook
            hook.start()
        }
        var http = HTTPServer.Configuration(host: config.host, port: config.port)
        http.threads = config.httpThreads
        http.requestDeadlineSeconds = config.httpRequestDeadlineSeconds
        http.errorResponse = API.errorResponse
        if let descriptors = DescriptorLimit.raise() {
            http.maxConnections = DescriptorLimit.connections(for: descriptors, configured: http.maxConnections, threads: http.threads)
            if http.maxConnections < HTTPServer.Configuration().maxConnections {
                log("warning: \(descriptors) file descriptors (the hard limit) carry \(http.maxConnections) connections at once")
            }
        }
        let server = HTTPServer(configuration: http)
        metrics.connectionsCut = { [weak server] in server?.deadlineCuts ?? 0 }
        API(farm: farm, mediaRoots: config.mediaRoots, token: config.token, metrics: metrics).register(on: server)
        do { try server.start() } catch {
            farm.shutdown(grace: 0)
            let reason: String
            if case .couldNotListen(_, _, let r) = error as? HTTPServer.StartError { reason = r } else { reason = "\(error)" }
            throw KilnError(.ioError, stage: .request, "cannot listen on \(config.host):\(config.port): \(reason)")
        }
        log("listening on http://\(config.host.contains(":") ? "[\(config.host)]" : config.host):\(server.port) (data in \(dataDir), media roots \(config.mediaRoots.joined(separator: ":")))")
        if config.mediaRoots.isEmpty { log("warning: KILN_MEDIA_ROOTS is empty, every prepare request will be refused") }
        // Not refused: a disk may be mounted after the daemon starts. But a typo or an
        // unmounted disk otherwise showed only as every request's source_not_found.
        for root in config.mediaRoots where !Path.isDirectory(root) {
            log("warning: the media root \(root) is not a folder kiln can see (a typo, or a disk not mounted yet): sources under it are not found")
        }

        // A store whose log could not be made durable refuses every call; exiting lets the
        // service manager restart the daemon, which recovers from what SQLite holds.
        let watch = DispatchSource.makeTimerSource(queue: .global())
        watch.schedule(deadline: .now() + 1, repeating: 1)
        watch.setEventHandler { [store] in
            if let broken = store.broken { signal.trigger("the store failed (\(broken))") }
        }
        watch.resume()
        let name = signal.wait()
        watch.cancel()
        log("\(name): stopping (running jobs get \(Int(config.farm.shutdownGraceSeconds)) s to finish; signal again to stop them now)")
        signal.onRepeat = { [farm] label in
            log("\(label) again: stopping running jobs now (queued again, no attempt spent)")
            farm.hurry()
        }
        farm.shutdown()
        webhook?.stop()
        metrics.stop()
        server.stop()
        log("stopped")
        return store.broken == nil ? 0 : 1
    }

    static func log(_ line: String) {
        FileHandle.standardError.write(Data("kiln: \(line)\n".utf8))
    }
}

/// Waits for SIGTERM, SIGINT or SIGHUP. The three are blocked in the thread that makes it,
/// before any other thread exists (threads started later inherit the mask), and one thread
/// takes them with `sigwait`: a signal that comes while the daemon starts stays pending
/// until then. (A Dispatch signal source, made once the server listened, with the signals
/// set to SIG_IGN so their default would not end the process, lost a SIGTERM sent as soon
/// as `/healthz` answered: the daemon never stopped.)
final class ShutdownSignal: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var name = ""
    private var repeated: (@Sendable (String) -> Void)?
    /// Called with the signal's name for each signal after the first (the first ends `wait`).
    var onRepeat: (@Sendable (String) -> Void)? {
        get { lock.lock(); defer { lock.unlock() }; return repeated }
        set { lock.lock(); repeated = newValue; lock.unlock() }
    }

    init() {
        // SIGHUP too (the terminal it was started from closed, `kill -HUP`): its default
        // ended the daemon at once, its jobs counted as interrupted, with no line said.
        var set = sigset_t()
        sigemptyset(&set)
        for sig in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, sig) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // A file size limit (systemd's LimitFSIZE) reached by the database or a log must fail
        // that write (EFBIG), not end the daemon mid-transaction as SIGXFSZ's default does.
        signal(SIGXFSZ, SIG_IGN)
        let watched = set
        let thread = Thread { [self] in
            var set = watched
            while true {
                var sig: Int32 = 0
                guard sigwait(&set, &sig) == 0 else { continue }
                self.received(sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "SIGHUP")
            }
        }
        thread.name = "kiln-signals"
        thread.start()
    }

    private func received(_ label: String) {
        if !trigger(label) { onRepeat?(label) }
    }

    /// Stops the daemon as a signal would, naming why; whether it was the first to.
    @discardableResult
    func trigger(_ why: String) -> Bool {
        lock.lock(); let first = name.isEmpty; if first { name = why }; lock.unlock()
        if first { done.signal() }
        return first
    }

    func wait() -> String {
        done.wait()
        lock.lock(); defer { lock.unlock() }
        return name
    }
}
