import KilnCore

/// The identity of an artifact: equal outputs share it, any change to the output moves it.
///
/// It hashes a canonical text (one `key=value` line per field, fixed order, integers and
/// fixed-point numbers only, so no JSON or float formatting can change it) of:
/// the engine recipe version, the preset version, the source identity and the plan's
/// output-describing fields. Left out on purpose: the requested quality and the effective
/// quality label (two requests resolving to the same output share a file), the reasons
/// (explanations, not output), dropped subtitles (not in the output) and of course the key.
/// Caps never enter directly, only through the plan they shaped, so the order of caps
/// lists and caps fields the plan did not use cannot move the key.
///
/// An `original` is the file itself: the daemon and `prep-artifact` key it with its real
/// path as well (`Plan.originalKey`), so two copies of a film are two artifacts.
///
/// Source identity is `MediaInfo.fingerprint` (see `SourceFingerprint`: survives renames,
/// changes with content, reads at most ~6 MiB of a 60 GB file). A MediaInfo without one
/// (a caller that skipped fingerprinting) falls back to a hash of format name, size and
/// duration: it survives renames too but misses a same-size edit, so the probe should
/// always fill the fingerprint.
public enum ArtifactKey {
    /// Version of this canonical encoding; bump when its layout changes.
    public static let encodingVersion = 1

    public static func compute(plan: Plan, source: MediaInfo, presetsVersion: String) -> String {
        SHA256.hex(canonical(plan: plan, source: source, presetsVersion: presetsVersion))
    }

    public static func sourceIdentity(_ source: MediaInfo) -> String {
        if let fp = source.fingerprint, !fp.isEmpty { return fp }
        let d = source.durationSeconds * 1000
        let ms = d.isFinite && abs(d) < 9e18 ? Int64(d.rounded()) : -1
        return "probe-" + SHA256.hex("\(source.formatName)|\(source.sizeBytes)|\(ms)")
    }

    /// The exact text hashed, exposed for tests and for debugging a surprising key.
    public static func canonical(plan: Plan, source: MediaInfo, presetsVersion: String) -> String {
        var lines = ["kiln-artifact-key=\(encodingVersion)", "source=\(field(sourceIdentity(source)))"]
        if plan.deliveryFormat == .original {
            // Served byte for byte: no engine, no preset shapes it.
            lines.append("delivery=original")
            return lines.joined(separator: "\n") + "\n"
        }
        lines += [
            "engine_recipe=\(EngineRecipe.version)",
            "presets=\(field(presetsVersion))",
            "delivery=\(plan.deliveryFormat.rawValue)",
            "container=\(field(plan.container))",
            "target_kbps=\(plan.targetBitrateKbps)",
        ]
        if let v = plan.video {
            lines.append("video=\(v.sourceIndex),\(v.action.rawValue),\(field(v.codec)),\(v.width)x\(v.height),\(v.bitrateKbps),"
                + "tone_map=\(v.toneMap ? 1 : 0),deinterlace=\(v.deinterlace ? 1 : 0),rotation=\(v.rotation)"
                // Only where it limits, so every plan made before it keeps its key.
                + (v.maxFrameRate.map { ",max_fps=\(fixed($0))" } ?? "") + (v.inverseTelecine == true ? ",ivtc=1" : "")
                + (v.fieldMatch == true ? ",field_match=1" : "") + (v.mirrored == true ? ",mirrored=1" : ""))
            if let e = v.encoder {
                lines.append("encoder=\(field(e.name)),\(field(e.preset)),crf=\(fixed(e.crf)),maxrate=\(e.maxrateKbps),"
                    + "bufsize=\(e.bufsizeKbps),\(field(e.profile)),level=\(field(e.level)),gop=\(fixed(e.gopSeconds)),\(field(e.pixFmt))")
            }
        } else {
            lines.append("video=none")
        }
        if let a = plan.audio {
            lines.append("audio=\(a.sourceIndex),\(a.action.rawValue),\(field(a.codec)),\(a.channels),\(a.bitrateKbps),"
                + "lang=\(field(a.language ?? ""))"
                // Only for a merged sound or one channel of a dual-mono one, so every plan made
                // before them keeps its key.
                + (a.mergeSources.map { ",merge=" + $0.map(String.init).joined(separator: "+") } ?? "")
                + (a.sourceChannel.map { ",channel=\($0)" } ?? ""))
        } else {
            lines.append("audio=none")
        }
        for s in plan.subtitles where s.action == .convert {
            lines.append("subtitle=\(s.sourceIndex),\(field(s.codec)),lang=\(field(s.language ?? "")),forced=\(s.forced ? 1 : 0)")
        }
        for s in plan.subtitles where s.action == .burn {
            // A full track's forced display sets only: other pictures than the whole track's.
            lines.append("burn=\(s.sourceIndex),\(field(s.codec))" + (s.forcedOnly == true ? ",forced-only" : ""))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Thousandths as an integer: 18.5 → "18500".
    static func fixed(_ x: Double) -> String {
        let t = x * 1000
        return t.isFinite && abs(t) < 9e18 ? String(Int64(t.rounded())) : "nan"
    }

    /// Keeps a free-text value on its own line and away from the separators.
    static func field(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "%", ",", "=", "\n", "\r": out += "%" + String(u.value, radix: 16)
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }
}
