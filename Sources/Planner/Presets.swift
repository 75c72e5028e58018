import FoundationEssentials
import KilnCore

/// One rung of the bitrate ladder: everything that shapes its encodes. The numbers and
/// the reasons for them live in `Presets/ladder.json`.
public struct Rung: Codable, Sendable, Equatable {
    public var quality: Quality
    /// Largest frame class of the rung.
    public var maxResolution: ResolutionClass
    /// Largest frame class when the server allows 4K output and the device decodes it.
    public var maxResolution4K: ResolutionClass?
    /// Video budget = x264 maxrate.
    public var videoKbps: Int
    public var bufsizeKbps: Int
    public var crf: Double
    public var preset: String
    public var profile: String
    /// Lowest H.264 level signalled; raised when the frame size or rate needs more.
    public var level: String
    public var gopSeconds: Double
    public var audio: AudioTarget
    /// Multichannel audio for devices that list one of its codecs; nil keeps every source stereo.
    public var surround: SurroundTarget?
    public var notes: String?

    enum CodingKeys: String, CodingKey {
        case quality, maxResolution = "max_resolution", maxResolution4K = "max_resolution_4k"
        case videoKbps = "video_kbps", bufsizeKbps = "bufsize_kbps", crf, preset, profile, level
        case gopSeconds = "gop_seconds", audio, surround, notes
    }

    /// The rung's cap in kbit/s (video + audio never exceed it).
    public var capKbps: Int { quality.capKbps ?? 0 }
    /// The most audio this rung can spend.
    public var maxAudioKbps: Int { max(audio.bitrateKbps, surround?.bitrateKbps ?? 0) }
}

public struct AudioTarget: Codable, Sendable, Equatable {
    public var codec: String
    public var channels: Int
    public var bitrateKbps: Int
    enum CodingKeys: String, CodingKey { case codec, channels, bitrateKbps = "bitrate_kbps" }
}

public struct SurroundTarget: Codable, Sendable, Equatable {
    /// Preference order, first the device plays wins (never the order of the caps list).
    public var codecs: [String]
    public var channels: Int
    public var bitrateKbps: Int
    enum CodingKeys: String, CodingKey { case codecs, channels, bitrateKbps = "bitrate_kbps" }
}

/// Audio for a remux whose picture is kept but whose audio the device cannot play.
public struct CompatibilityAudio: Codable, Sendable, Equatable {
    public var stereo: AudioTarget
    public var surround: SurroundTarget?
}

/// The ladder and the named device profiles, loaded from the `Presets` folder.
public struct Presets: Sendable, Equatable, Encodable {
    /// Enters every artifact key: bump it whenever a number here changes the output.
    public var version: String
    public var notes: [String]
    /// Ladder order, 20mbps first.
    public var rungs: [Rung]
    public var compatibilityAudio: CompatibilityAudio
    public var devices: [String: DeviceCaps]
    public var deviceNotes: [String: String]

    public init(version: String, notes: [String] = [], rungs: [Rung], compatibilityAudio: CompatibilityAudio,
                devices: [String: DeviceCaps] = [:], deviceNotes: [String: String] = [:]) {
        self.version = version
        self.notes = notes
        self.rungs = rungs.sorted { $0.quality.ladderIndex < $1.quality.ladderIndex }
        self.compatibilityAudio = compatibilityAudio
        self.devices = devices
        self.deviceNotes = deviceNotes
    }

    enum CodingKeys: String, CodingKey {
        case version, notes, rungs, compatibilityAudio = "compatibility_audio", devices, deviceNotes = "device_notes"
    }

    public func rung(for quality: Quality) -> Rung? { rungs.first { $0.quality == quality } }
    public func deviceCaps(named name: String) -> DeviceCaps? { devices[name.lowercased()] }
    public var deviceNames: [String] { devices.keys.sorted() }

    public static let ladderFile = "ladder.json"
    public static let devicesFolder = "devices"

    private struct LadderFile: Decodable {
        var version: String
        var notes: [String]?
        var rungs: [Rung]
        var compatibilityAudio: CompatibilityAudio
        enum CodingKeys: String, CodingKey {
            case version, notes, rungs, compatibilityAudio = "compatibility_audio"
        }
    }

    /// Reads `ladder.json` and every `devices/*.json` (the file name is the profile name).
    /// A broken preset is a deployment fault, reported as `internal_error` naming the file;
    /// a broken device profile as `invalid_caps` naming the file and the field.
    public static func load(directory: URL) throws(KilnError) -> Presets {
        let ladderURL = directory.appendingPathComponent(ladderFile)
        let ladder: LadderFile
        do {
            let data = try Data(contentsOf: ladderURL)
            ladder = try JSONDecoder().decode(LadderFile.self, from: data)
        } catch {
            throw KilnError(.internalError, stage: .plan, "cannot read the ladder \(ladderURL.path): \(describe(error))")
        }
        var devices: [String: DeviceCaps] = [:]
        var deviceNotes: [String: String] = [:]
        let devicesURL = directory.appendingPathComponent(devicesFolder)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: devicesURL.path)) ?? [])
            .filter { $0.hasSuffix(".json") }.sorted()
        for file in names {
            let url = devicesURL.appendingPathComponent(file)
            let name = String(file.dropLast(5)).lowercased()
            guard let data = try? Data(contentsOf: url) else {
                throw KilnError(.internalError, stage: .plan, "cannot read the device profile \(url.path)")
            }
            do {
                devices[name] = try DeviceCaps.parse(Array(data))
            } catch {
                throw KilnError(error.code, stage: error.stage, field: error.field, "device profile \(file): \(error.message)")
            }
            if let value = try? JSONValue.parse(Array(data)), case .string(let n)? = value["notes"] { deviceNotes[name] = n }
        }
        let presets = Presets(version: ladder.version, notes: ladder.notes ?? [], rungs: ladder.rungs,
                              compatibilityAudio: ladder.compatibilityAudio, devices: devices, deviceNotes: deviceNotes)
        try presets.validate(source: ladderURL.path)
        return presets
    }

    /// Checks the promises the planner relies on, so a typo in the ladder fails at start-up
    /// instead of producing a file above its rung.
    public func validate(source: String = "presets") throws(KilnError) {
        func fail(_ why: String) -> KilnError { KilnError(.internalError, stage: .plan, "\(source): \(why)") }
        guard !version.isEmpty else { throw fail("version is empty") }
        for q in Quality.allCases where q != .original {
            let count = rungs.filter { $0.quality == q }.count
            guard count == 1 else { throw fail("expected one rung for \(q.rawValue), found \(count)") }
        }
        guard rung(for: .original) == nil else { throw fail("original is not a rung") }
        for r in rungs {
            let q = r.quality.rawValue
            guard r.videoKbps > 0, r.bufsizeKbps > 0, r.audio.bitrateKbps > 0, r.audio.channels > 0, r.gopSeconds > 0 else {
                throw fail("\(q): bitrates, channels and gop_seconds must be positive")
            }
            guard r.videoKbps + r.maxAudioKbps <= r.capKbps else {
                throw fail("\(q): video \(r.videoKbps) + audio \(r.maxAudioKbps) kbit/s exceed the rung's \(r.capKbps)")
            }
            guard H264Level(r.level) != nil else { throw fail("\(q): unknown H.264 level \(r.level)") }
            guard ["baseline", "main", "high"].contains(r.profile) else { throw fail("\(q): profile must be baseline, main or high") }
            guard (0...51).contains(r.crf) else { throw fail("\(q): crf outside 0...51") }
            if let s = r.surround, s.codecs.isEmpty || s.channels <= 2 { throw fail("\(q): surround needs codecs and more than 2 channels") }
        }
        if compatibilityAudio.stereo.bitrateKbps <= 0 { throw fail("compatibility_audio.stereo.bitrate_kbps must be positive") }
    }

    /// Finds the `Presets` folder: `KILN_PRESETS_DIR`; else `Presets` beside the running
    /// executable or `../share/kiln/Presets` from it (an installed layout); else the first
    /// ancestor of the executable's folder, then of the current directory, holding
    /// `Presets/ladder.json` (so `.build/release/prep-artifact` in a checkout finds the
    /// repository's folder). Nil when nothing is found.
    public static func locate() -> URL? {
        let fm = FileManager.default
        if let env = ProcessInfo.processInfo.environment["KILN_PRESETS_DIR"], !env.isEmpty {
            return URL(fileURLWithPath: env, isDirectory: true)
        }
        func holdsLadder(_ dir: URL) -> Bool { fm.fileExists(atPath: dir.appendingPathComponent(ladderFile).path) }
        var starts: [URL] = []
        if let exe = executableURL() {
            let dir = exe.deletingLastPathComponent()
            for candidate in [dir.appendingPathComponent("Presets"),
                              dir.appendingPathComponent("../share/kiln/Presets").standardizedFileURL]
            where holdsLadder(candidate) {
                return candidate
            }
            starts.append(dir)
        }
        starts.append(URL(fileURLWithPath: fm.currentDirectoryPath, isDirectory: true))
        for start in starts {
            var dir = start.standardizedFileURL
            while true {
                let candidate = dir.appendingPathComponent("Presets")
                if holdsLadder(candidate) { return candidate }
                let parent = dir.deletingLastPathComponent().standardizedFileURL
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }

    private static func executableURL() -> URL? {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return URL(fileURLWithPath: path)
        }
        #endif
        guard let arg0 = CommandLine.arguments.first, !arg0.isEmpty else { return nil }
        return URL(fileURLWithPath: arg0).resolvingSymlinksInPath()
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let ctx):
            return "missing field \((ctx.codingPath + [key]).map(\.stringValue).joined(separator: "."))"
        case DecodingError.typeMismatch(_, let ctx), DecodingError.valueNotFound(_, let ctx),
             DecodingError.dataCorrupted(let ctx):
            let path = ctx.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? ctx.debugDescription : "\(path): \(ctx.debugDescription)"
        default:
            return "\(error)"
        }
    }
}
