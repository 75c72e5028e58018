import Glibc
import KilnCore
import MediaEngine
import Planner

/// Inputs shared by `plan` and `prepare`: the file, its probe, the presets and the plan.
struct PlanInputs {
    let file: String
    let source: ProbedSource
    var info: MediaInfo { source.info }
    let presets: Presets
    var plan: Plan

    /// - Parameter preparing: the source will be prepared (the probe may then open the
    ///   index forecast's reader too).
    init(_ args: Arguments, cancellation: Cancellation = Cancellation(), preparing: Bool = false) throws(KilnError) {
        file = try args.file()
        guard let q = args.values["--quality"] else { throw KilnError(.usage, stage: .request, "--quality is required") }
        let quality = try Quality(parsing: q)
        presets = try PresetsLocation.load(args.values["--presets"])
        let caps = try CapsArgument.resolve(args.values["--caps"], presets: presets)
        source = try Prober.open(path: file, cancellation: cancellation, fingerprint: !args.flag("--no-fingerprint"),
                                 preparing: preparing)
        plan = try Planner.plan(source: source.info, quality: quality, caps: caps, policy: .standard,
                                audioLanguage: args.values["--audio-language"], presets: presets)
        // An original is the file at its path: keyed as the daemon keys it (its real path,
        // symlinks followed), so the key printed here is the one the daemon answers with.
        if plan.deliveryFormat == .original, let real = Path.resolved(file) {
            plan.artifactKey = Plan.originalKey(plan.artifactKey, path: real)
        }
    }
}

enum PresetsLocation {
    static func load(_ explicit: String?) throws(KilnError) -> Presets {
        guard let directory = explicit ?? Presets.locate() else {
            throw KilnError(.internalError, stage: .plan, "cannot find the Presets folder; set KILN_PRESETS_DIR")
        }
        return try Presets.load(directory: directory)
    }
}

/// `--caps NAME` (a device profile under Presets/devices), `--caps FILE`, `--caps -`
/// (standard input) or `--caps '{…}'` (inline JSON).
enum CapsArgument {
    static func resolve(_ value: String?, presets: Presets) throws(KilnError) -> DeviceCaps? {
        guard let value else { return nil }
        if let named = presets.deviceCaps(named: value) { return named }
        let data: [UInt8]?
        if value == "-" { data = try? FileIO.readToEnd(fd: STDIN_FILENO) }
        else if value.hasPrefix("{") { data = Array(value.utf8) }   // inline JSON, handy in scripts
        else if Path.exists(value) { data = try? FileIO.contents(atPath: value) }
        else {
            throw KilnError(.invalidCaps, stage: .request, field: "caps",
                            "--caps \(value) is neither a device profile (\(presets.deviceNames.joined(separator: ", "))) nor a file")
        }
        guard let data else { throw KilnError(.invalidCaps, stage: .request, field: "caps", "cannot read the caps file") }
        return try DeviceCaps.parse(data)
    }
}

enum PlanCommand {
    static func run(_ args: Arguments) throws(KilnError) -> Int32 {
        let inputs = try PlanInputs(args)
        if args.flag("--json") { print(JSON.string(Success("plan", inputs.plan), pretty: true)) }
        else { print(renderTable(plan: inputs.plan, source: inputs.info)) }
        return 0
    }
}

enum PresetsCommand {
    static func run(_ args: Arguments) throws(KilnError) -> Int32 {
        let presets = try PresetsLocation.load(args.values["--presets"])
        if args.flag("--json") { print(JSON.string(Success("presets", presets), pretty: true)) }
        else { print(renderPresets(presets)) }
        return 0
    }
}

enum PrepareCommand {
    struct Success: Encodable {
        let ok = true
        let plan: Plan
        let output: OutputInfo
        let stats: PrepareStats
        /// What was carried out where the engine changed the plan (`stats.adjustments`); the
        /// daemon answers with it.
        let executedPlan: Plan?
        enum CodingKeys: String, CodingKey { case ok, plan, output, stats, executedPlan = "executed_plan" }
    }

    static func run(_ args: Arguments) throws(KilnError) -> Int32 {
        guard let output = args.values["--output"] else { throw KilnError(.usage, stage: .request, "--output is required") }
        let cancellation = Cancellation()
        let signals = SignalWatcher(cancellation: cancellation)
        defer { signals.stop() }
        let inputs: PlanInputs
        do { inputs = try PlanInputs(args, cancellation: cancellation, preparing: true) } catch { throw signals.explain(error, cancellation) }
        return try execute(source: inputs.source, plan: inputs.plan, output: output, args: args,
                           cancellation: cancellation, signals: signals, rungs: inputs.presets.rungs)
    }

    /// `prep-artifact run FILE --plan FILE|- --output OUT [--fingerprint F]`: carries out a
    /// plan made elsewhere (the daemon's), so the artifact is exactly the one its key names
    /// even if the presets on disk changed since. This is how the daemon runs each job.
    /// `--fingerprint`: the source's when the plan was made; a source that no longer has
    /// it (replaced, or still growing since) is refused, not prepared under that key.
    static func runPlan(_ args: Arguments) throws(KilnError) -> Int32 {
        guard let output = args.values["--output"] else { throw KilnError(.usage, stage: .request, "--output is required") }
        guard let planArg = args.values["--plan"] else { throw KilnError(.usage, stage: .request, "--plan is required") }
        let data = planArg == "-" ? try? FileIO.readToEnd(fd: STDIN_FILENO) : try? FileIO.contents(atPath: planArg)
        let plan: Plan
        do { plan = try JSON.decode(Plan.self, from: data ?? []) } catch {
            throw KilnError(.usage, stage: .request, "--plan is not a plan in JSON: \(error)")
        }
        let cancellation = Cancellation()
        let signals = SignalWatcher(cancellation: cancellation)
        defer { signals.stop() }
        let expected = args.values["--fingerprint"]
        let changed = KilnError(.sourceChanged, stage: .probe,
                                "the source changed after it was asked for (replaced, or still being written); ask again for its new content")
        let path = try args.file()
        let source: ProbedSource
        do {
            source = try Prober.open(path: path, cancellation: cancellation, fingerprint: expected != nil, preparing: true)
        } catch where expected != nil && [.sourceUnreadable, .sourceUnsupported, .sourceCorrupt].contains(error.code) {
            // A file that no longer reads may be one cut short or rewritten since it was
            // asked for: that is a change the caller mends by asking again, not damage that
            // fails the artifact for good.
            if let now = try? SourceFingerprint.compute(path: path), now != expected { throw changed }
            throw error
        } catch {
            throw signals.explain(error, cancellation)
        }
        if let expected, source.info.fingerprint != expected { throw changed }
        return try execute(source: source, plan: plan, output: output, args: args, cancellation: cancellation, signals: signals)
    }

    /// `rungs`: the ladder the plan was made on, to say which rung a picture the engine had
    /// to re-encode belongs to (`Planner.delivered`); nil for a plan made elsewhere, whose
    /// maker knows its own (the daemon's `run`: the engine's plan as carried out goes back).
    static func execute(source: ProbedSource, plan: Plan, output: String, args: Arguments, cancellation: Cancellation,
                        signals: SignalWatcher, rungs: [Rung]? = nil) throws(KilnError) -> Int32 {
        let reporter = ProgressReporter(terminal: isatty(2) != 0 && !args.flag("--json"), jsonLines: args.flag("--progress-json"))
        let result: PrepareResult
        do {
            result = try Preparer.prepare(source: source, plan: plan, output: output,
                                          cancellation: cancellation, progress: reporter.report)
        } catch {
            reporter.clear()
            throw signals.explain(error, cancellation)
        }
        reporter.clear()
        if args.flag("--json") {
            let executed = rungs.map { Planner.delivered(plan, executed: result.executedPlan, adjustments: result.stats.adjustments ?? [], rungs: $0) }
                ?? result.executedPlan
            print(JSON.string(Success(plan: plan, output: result.output, stats: result.stats, executedPlan: executed)))
        } else {
            let o = result.output
            print("\(plan.deliveryFormat.rawValue) → \(o.path)")
            print("  \(o.bytes) bytes, \(MediaInfoText.fmt(o.durationSeconds)) s, sha256 \(o.sha256)")
            if let v = o.video { print("  video \(v.codec) \(v.width)x\(v.height)\(v.rotation != 0 ? " rotate \(v.rotation)°" : "")") }
            if let a = o.audio { print("  audio \(a.codec) \(a.channels) ch \(a.sampleRate) Hz") }
            for s in o.subtitles { print("  subtitle \(s.codec)\(s.language.map { " [\($0)]" } ?? "")\(s.forced ? " forced" : "")") }
            for d in o.dropped { print("  dropped #\(d.sourceIndex) \(d.type) \(d.codec)\(d.language.map { " [\($0)]" } ?? ""): \(d.reason)") }
            print("  \(Format.fixed(result.stats.wallSeconds, decimals: 2)) s wall, \(Format.fixed(result.stats.speed, decimals: 1))x")
        }
        return 0
    }
}
