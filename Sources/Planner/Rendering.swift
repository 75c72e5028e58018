import KilnCore

/// Text for people: what `prep-artifact plan` and `prep-artifact presets` print on a terminal.
public enum PlanTable {
    /// What happens to each source stream and why, then the reasons and the artifact key.
    public static func render(plan: Plan, source: MediaInfo) -> String {
        var out: [String] = []
        let delivered = plan.deliveryFormat == .transcode
            ? "\(plan.deliveryFormat.rawValue) at \(plan.effectiveQuality.rawValue) (cap \(plan.targetBitrateKbps) kbit/s)"
            : plan.deliveryFormat.rawValue
        out.append("requested  \(plan.quality.rawValue)")
        out.append("delivers   \(delivered), effective quality \(plan.effectiveQuality.rawValue), container \(plan.container)")
        out.append("source     \(source.container), \(seconds(source.durationSeconds)), \(source.bitRate > 0 ? "\(source.bitRate / 1000) kbit/s" : "bitrate unknown"), \(source.streams.count) stream(s)")
        out.append("")

        var rows: [[String]] = [["stream", "source", "action", "output", "why"]]
        let videoWhy = plan.reasons.filter { r in
            ["video_", "resolution_", "hdr_", "dolby_vision", "frame_rate", "interlaced_", "deinterlaced", "inverse_telecined", "field_matched", "anamorphic", "rotation", "bitrate_", "container_"]
                .contains { r.hasPrefix($0) }
        }
        let audioWhy = plan.reasons.filter { $0.hasPrefix("audio_") }
        for s in source.streams {
            let label = "\(s.type.rawValue) #\(s.index)"
            if let v = plan.video, v.sourceIndex == s.index, s.type == .video {
                rows.append([label, describe(s), v.action.rawValue, describe(v), videoWhy.joined(separator: " ")])
                for cc in plan.subtitles where cc.closedCaptions == true && cc.sourceIndex == s.index {
                    rows.append(["captions #\(s.index)", "closed captions (\(cc.captionService?.hasPrefix("SERVICE") == true ? "CEA-708" : "CEA-608") \(cc.captionService ?? "CC1"))", cc.action.rawValue,
                                 [cc.codec, cc.language].compactMap { $0 }.joined(separator: " "), "closed_captions_converted"])
                }
            } else if let a = plan.audio, a.sourceIndex == s.index, s.type == .audio {
                rows.append([label, describe(s), a.action.rawValue, describe(a), audioWhy.joined(separator: " ")])
            } else if let a = plan.audio, let k = a.mergeSources?.firstIndex(of: s.index), s.type == .audio {
                // Its channels follow the first stream's in the same sound.
                let into = a.channels > k + 1 ? "channel \(k + 2) of #\(a.sourceIndex)" : "mixed into #\(a.sourceIndex)"
                rows.append([label, describe(s), "merge", into, "audio_tracks_merged"])
            } else if plan.subtitles.contains(where: { $0.sourceIndex == s.index && $0.closedCaptions != true }) {
                // A teletext stream makes a track of each of its subtitle pages.
                for sub in plan.subtitles where sub.sourceIndex == s.index && sub.closedCaptions != true {
                    let output = switch sub.action {
                    case .convert: [sub.codec, sub.language, sub.forced ? "forced" : nil, sub.teletextPage.map { "page \($0)" }].compactMap { $0 }.joined(separator: " ")
                    case .burn: "into the picture"
                    case .drop: "-"
                    }
                    rows.append([label, describe(s), sub.action.rawValue, output, sub.reason ?? ""])
                }
            } else if plan.deliveryFormat == .original {
                rows.append([label, describe(s), "keep", "as in the source", ""])
            } else {
                let why: String
                switch s.type {
                case .video: why = s.disposition.attachedPicture ? "cover_art" : "one_video_track_out"
                case .audio: why = "one_audio_track_out"
                default: why = "not_carried"
                }
                rows.append([label, describe(s), "drop", "-", why])
            }
        }
        out += table(rows)
        out.append("")
        out.append("reasons    \(plan.reasons.joined(separator: " "))")
        out.append("artifact   \(plan.artifactKey)")
        return out.joined(separator: "\n") + "\n"
    }

    /// The ladder, one row per rung, then the device profiles.
    public static func render(presets: Presets) -> String {
        var out = ["presets \(presets.version)", ""]
        var rows: [[String]] = [["quality", "frame", "video", "x264", "audio", "surround"]]
        for r in presets.rungs {
            let frame = r.maxResolution.rawValue + (r.maxResolution4K.map { " (\($0.rawValue) if allowed)" } ?? "")
            rows.append([
                r.quality.rawValue, frame,
                "\(r.videoKbps) kbit/s, buf \(r.bufsizeKbps)",
                "\(r.preset) crf \(number(r.crf)) \(r.profile)@\(r.level) gop \(number(r.gopSeconds))s",
                "\(r.audio.codec) \(r.audio.channels)ch \(r.audio.bitrateKbps) kbit/s",
                r.surround.map { "\($0.codecs.joined(separator: "/")) \($0.channels)ch \($0.bitrateKbps) kbit/s" } ?? "-",
            ])
        }
        out += table(rows)
        out.append("")
        var devices: [[String]] = [["device", "video", "audio", "passthrough", "containers", "max", "hdr", "interlaced"]]
        for name in presets.deviceNames {
            let c = presets.devices[name]!
            devices.append([
                name, list(c.codecsVideo), list(c.codecsAudio), list(c.audioPassthroughCodecs), list(c.containers),
                c.maxResolution?.rawValue ?? "?", c.hdr.map { $0 ? "yes" : "no" } ?? "?", c.interlaced == true ? "yes" : "no",
            ])
        }
        out += table(devices)
        return out.joined(separator: "\n") + "\n"
    }

    static func describe(_ s: StreamInfo) -> String {
        var parts = [s.codec]
        if let p = s.profile, !p.isEmpty { parts.append(p) }
        switch s.type {
        case .video:
            if let w = s.width, let h = s.height { parts.append("\(w)x\(h)") }
            if let f = s.pixelFormat { parts.append(f) }
            if let r = Codecs.frameRate(s) { parts.append("\(number(r)) fps") }
            if Codecs.isHDR(s) { parts.append(s.dolbyVision.map { "DV p\($0.profile)" } ?? (s.hdr?.rawValue ?? "hdr")) }
            if Codecs.rotation(s) != 0 { parts.append("rot \(Codecs.rotation(s))") }
            if s.fieldOrder?.isInterlaced == true { parts.append("interlaced") }
            if s.closedCaptions == true { parts.append("closed captions" + (s.captionServices.map { " " + $0.joined(separator: "+") } ?? "")) }
        case .audio:
            if let c = s.channels { parts.append("\(c)ch") }
        default: break
        }
        if let l = s.language, l != "und" { parts.append(l) }
        if let b = s.bitRate, b > 0 { parts.append("\(b / 1000) kbit/s") }
        if s.disposition.isDefault { parts.append("default") }
        if s.disposition.forced { parts.append("forced") }
        if AudioSelection.isSecondary(s) && s.type == .audio { parts.append("commentary/AD") }
        return parts.joined(separator: " ")
    }

    static func describe(_ v: VideoPlan) -> String {
        if v.action == .copy { return "\(v.codec) \(v.width)x\(v.height)" + (v.rotation != 0 ? " rot \(v.rotation)" : "") }
        var s = "\(v.codec) \(v.width)x\(v.height)" + (v.maxFrameRate.map { " \(number($0)) fps" } ?? "") + " <= \(v.bitrateKbps) kbit/s"
        if let e = v.encoder { s += " \(e.name) \(e.preset) crf \(number(e.crf)) \(e.profile)@\(e.level) \(e.pixFmt)" }
        if v.toneMap { s += " tone-mapped" }
        if v.inverseTelecine == true { s += " inverse-telecined" } else if v.fieldMatch == true { s += " field-matched" } else if v.deinterlace { s += " deinterlaced" }
        return s
    }

    static func describe(_ a: AudioPlan) -> String {
        var s = "\(a.codec) \(a.channels)ch"
        if a.action == .transcode { s += " \(a.bitrateKbps) kbit/s" }
        if let l = a.language { s += " \(l)" }
        return s
    }

    static func table(_ rows: [[String]]) -> [String] {
        guard let columns = rows.map(\.count).max() else { return [] }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }
    }

    static func list(_ items: [String]?) -> String { items.map { $0.isEmpty ? "-" : $0.joined(separator: ",") } ?? "?" }

    static func number(_ x: Double) -> String {
        guard x.isFinite, abs(x) < 1e15 else { return "?" }
        return x == x.rounded() ? String(Int(x)) : String((x * 100).rounded() / 100)
    }

    static func seconds(_ s: Double) -> String {
        guard s.isFinite, s >= 0, s < 1e9 else { return "duration unknown" }
        let t = Int(s.rounded())
        return t >= 3600 ? "\(t / 3600)h\(String(format2(t / 60 % 60)))m" : (t >= 60 ? "\(t / 60)m\(format2(t % 60))s" : "\(number((s * 100).rounded() / 100)) s")
    }

    static func format2(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
}

/// Convenience spellings of the two renderers.
public func renderTable(plan: Plan, source: MediaInfo) -> String { PlanTable.render(plan: plan, source: source) }
public func renderPresets(_ presets: Presets) -> String { PlanTable.render(presets: presets) }

extension String {
    func trimmingTrailingSpaces() -> String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
