#if canImport(Glibc)
import Glibc
#endif
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

    /// The rung with the picture's budget what a sound of `audioKbps` leaves it beside the
    /// rung's largest sound (never more than its own), the buffer in proportion.
    func leaving(audioKbps: Int) -> Rung {
        var spent = self
        spent.videoKbps = min(videoKbps, videoKbps + maxAudioKbps - audioKbps)
        spent.bufsizeKbps = bufsizeKbps * spent.videoKbps / max(1, videoKbps)
        return spent
    }
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
    public static func load(directory: String) throws(KilnError) -> Presets {
        let ladderPath = Path.join(directory, ladderFile)
        let ladder: LadderFile
        do {
            ladder = try JSON.decode(LadderFile.self, from: try FileIO.contents(atPath: ladderPath))
        } catch {
            throw KilnError(.internalError, stage: .plan, "cannot read the ladder \(ladderPath): \(describe(error))")
        }
        var devices: [String: DeviceCaps] = [:]
        var deviceNotes: [String: String] = [:]
        let devicesPath = Path.join(directory, devicesFolder)
        let names = (Path.entries(ofDirectory: devicesPath) ?? []).filter { $0.hasSuffix(".json") }.sorted()
        for file in names {
            let path = Path.join(devicesPath, file)
            let name = String(file.dropLast(5)).lowercased()
            guard let data = try? FileIO.contents(atPath: path) else {
                throw KilnError(.internalError, stage: .plan, "cannot read the device profile \(path)")
            }
            do {
                var caps = try DeviceCaps.parse(data)
                // The profile's own description, not a caps field the device left to guess.
                caps.ignoredFields = caps.ignoredFields?.filter { $0 != "notes" }
                if caps.ignoredFields?.isEmpty == true { caps.ignoredFields = nil }
                devices[name] = caps
            } catch {
                throw KilnError(error.code, stage: error.stage, field: error.field, "device profile \(file): \(error.message)")
            }
            if let value = try? JSONValue.parse(data), case .string(let n)? = value["notes"] { deviceNotes[name] = n }
        }
        let presets = Presets(version: ladder.version, notes: ladder.notes ?? [], rungs: ladder.rungs,
                              compatibilityAudio: ladder.compatibilityAudio, devices: devices, deviceNotes: deviceNotes)
        try presets.validate(source: ladderPath)
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
    public static func locate() -> String? {
        if let env = Environment.value("KILN_PRESETS_DIR"), !env.isEmpty { return env }
        func holdsLadder(_ dir: String) -> Bool { Path.exists(Path.join(dir, ladderFile)) }
        var starts: [String] = []
        if let exe = Path.executable() ?? CommandLine.arguments.first.map(Path.absolute) {
            let dir = Path.directory(of: exe)
            for candidate in [Path.join(dir, "Presets"), Path.absolute(Path.join(dir, "../share/kiln/Presets"))]
            where holdsLadder(candidate) {
                return candidate
            }
            starts.append(dir)
        }
        if let cwd = Path.currentDirectory() { starts.append(cwd) }
        for start in starts {
            var dir = Path.absolute(start)
            while true {
                let candidate = Path.join(dir, "Presets")
                if holdsLadder(candidate) { return candidate }
                let parent = Path.directory(of: dir)
                if parent == dir { break }
                dir = parent
            }
        }
        return nil
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
