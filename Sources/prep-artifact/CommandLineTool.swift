#if canImport(Glibc)
import Glibc
#endif
import CProcess
import KilnCore
import MediaEngine

/// `prep-artifact`: the one-shot command of CONTRACT.md section 2.
enum CommandLineTool {
    static let usage = """
    usage: prep-artifact probe FILE [--json]
           prep-artifact plan FILE --quality Q [--caps FILE|NAME] [--audio-language LANG] [--json]
           prep-artifact prepare FILE --quality Q [--caps FILE|NAME] [--audio-language LANG] --output OUT [--json] [--progress-json]
           prep-artifact presets [--json]
           prep-artifact --version
           prep-artifact run FILE --plan FILE|- --output OUT [--fingerprint F] [--json] [--progress-json]   (the daemon's job child)
    """

    /// Runs a command and makes sure its answer reached standard output: a script reads
    /// exit 0 as "the answer is there", so an answer lost to a full disk (`> /dev/full`)
    /// or a closed standard output is an I/O error (exit 4), not success.
    static func main(_ args: [String]) -> Int32 {
        StandardStreams.keepClosedOnesClosed()
        let status = run(args)
        let failed = kiln_finish_stdout()
        guard failed != 0 else { return status }
        let lost = KilnError(.ioError, stage: .write, underlying: failed,
                             "the answer cannot be written to standard output (\(String(cString: strerror(failed))))")
        FileIO.writeStandardError("prep-artifact: \(lost.code.rawValue): \(lost.sentence)\n")
        return status == 0 ? lost.exitStatus : status
    }

    static func run(_ args: [String]) -> Int32 {
        // A command that answers SIGINT/SIGTERM holds them from its first step: sent before
        // its watcher started (the daemon stopping a job it just launched), they killed it
        // with no answer; held, the watcher takes them and it answers `canceled`.
        if ["prepare", "run"].contains(args.first) { SignalWatcher.holdUntilWatched() }
        // A file size limit (`ulimit -f`, systemd's LimitFSIZE) reached mid-write raises
        // SIGXFSZ, whose default ends the process with its temporary output left beside the
        // destination. Ignored, the write fails (EFBIG) and the run ends as any failed
        // write does: exit 4, nothing left behind.
        signal(SIGXFSZ, SIG_IGN)
        // A reader that goes away (`--progress-json … | head`, a closed pipe to the daemon)
        // raises SIGPIPE at the next write, whose default ended a run half-way with its
        // temporary output left behind. Ignored, the write fails and the run goes on.
        signal(SIGPIPE, SIG_IGN)
        if args == ["--version"] || args == ["version"] {
            print("prep-artifact \(KilnVersion.number) (media description \(MediaInfo.describerVersion); \(LibraryVersions.text))")
            return 0
        }
        ChildSetup.apply()
        EngineMemory.configure()
        guard let command = args.first else {
            FileIO.writeStandardError(usage + "\n")
            return 2
        }
        var parsed: Arguments
        do { parsed = try Arguments(Array(args.dropFirst())) } catch {
            return fail(error, json: args.contains("--json"))
        }
        EngineLog.capture(verbose: parsed.flag("--verbose"))
        // Under an address-space limit (`ulimit -v`) a few hundred megabytes above what is
        // mapped at start, allocations fail at random places, some in libav or Swift
        // where failing ends the process (a crash, no answer). Below that headroom the
        // command answers at once, as any shortage: resource_limit, exit 4.
        if ["probe", "plan", "prepare", "run"].contains(command), !Shortage.canAllocate(Self.memoryHeadroom) {
            return fail(KilnError(.resourceLimit, stage: .open,
                                  "memory is short: \(Self.memoryHeadroom >> 20) MB cannot be had (the address-space limit is reached)"),
                        json: parsed.flag("--json"))
        }
        do throws(KilnError) {
            switch command {
            case "probe": return try ProbeCommand.run(parsed)
            case "plan": return try PlanCommand.run(parsed)
            case "prepare": return try PrepareCommand.run(parsed)
            case "run": return try PrepareCommand.runPlan(parsed)
            case "presets": return try PresetsCommand.run(parsed)
            case "-h", "--help", "help":
                print(usage); return 0
            default:
                throw KilnError(.usage, stage: .request, "unknown command \"\(command)\"")
            }
        } catch {
            return fail(error, json: parsed.flag("--json"))
        }
    }

    /// What the media work may need beyond what is mapped at start: libavfilter and its
    /// libraries, loaded by a transcode's first graph, and the encoder's pictures.
    static let memoryHeadroom = 256 << 20

    /// Prints an error the way the contract asks (one JSON object with --json, one line
    /// otherwise) and returns its exit status.
    static func fail(_ error: KilnError, json: Bool) -> Int32 {
        if json {
            print(JSON.string(Failure(error: error)))
        } else {
            FileIO.writeStandardError("prep-artifact: \(error.code.rawValue): \(error.message)\n")
            if error.code == .usage { FileIO.writeStandardError(usage + "\n") }
        }
        return error.exitStatus
    }

    struct Failure: Encodable {
        let ok = false
        let error: KilnError
    }
}

/// Flags and positional arguments, checked up front so a typo is a usage error (exit 2).
struct Arguments {
    static let valueFlags: Set<String> = ["--quality", "--caps", "--output", "--audio-language", "--presets", "--plan", "--fingerprint"]
    static let booleanFlags: Set<String> = ["--json", "--progress-json", "--verbose", "--no-fingerprint"]

    var positional: [String] = []
    var values: [String: String] = [:]
    var flags: Set<String> = []

    init(_ args: [String]) throws(KilnError) {
        var i = 0
        while i < args.count {
            let a = args[i]
            if Arguments.valueFlags.contains(a) {
                guard i + 1 < args.count else { throw KilnError(.usage, stage: .request, "\(a) needs a value") }
                values[a] = args[i + 1]
                i += 2
            } else if let eq = a.firstIndex(of: "="), Arguments.valueFlags.contains(String(a[..<eq])) {
                values[String(a[..<eq])] = String(a[a.index(after: eq)...])
                i += 1
            } else if Arguments.booleanFlags.contains(a) {
                flags.insert(a)
                i += 1
            } else if a.hasPrefix("--") {
                throw KilnError(.usage, stage: .request, "unknown flag \(a)")
            } else {
                positional.append(a)
                i += 1
            }
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    func file() throws(KilnError) -> String {
        guard positional.count == 1 else {
            throw KilnError(.usage, stage: .request, positional.isEmpty ? "a FILE is required" : "exactly one FILE is expected")
        }
        return positional[0]
    }
}

/// What `--json` prints when a command succeeds (CONTRACT.md section 2): one object,
/// `{"ok": true, …}`, its answer under a name (`plan`, `media`, `presets`), as `prepare`
/// gives its plan and output, so that a script reads `ok` whatever the outcome.
struct Success<Body: Encodable>: Encodable {
    let name: String
    let body: Body

    init(_ name: String, _ body: Body) { self.name = name; self.body = body }

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ name: String) { stringValue = name }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(true, forKey: Key("ok"))
        try c.encode(body, forKey: Key(name))
    }
}

enum ProbeCommand {
    static func run(_ args: Arguments) throws(KilnError) -> Int32 {
        let info = try Prober.probe(path: try args.file(), fingerprint: !args.flag("--no-fingerprint"))
        if args.flag("--json") {
            print(JSON.string(Success("media", info), pretty: true))
        } else {
            print(MediaInfoText.render(info))
        }
        return 0
    }
}
