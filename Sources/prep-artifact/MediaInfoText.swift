import KilnCore

/// The human-readable form of `prep-artifact probe`.
enum MediaInfoText {
    static func render(_ m: MediaInfo) -> String {
        var lines: [String] = []
        lines.append("\(m.container) (\(m.formatName)), \(fmt(m.durationSeconds)) s, \(m.bitRate / 1000) kb/s, \(m.sizeBytes) bytes")
        for s in m.streams {
            var parts: [String] = ["#\(s.index)", s.type.rawValue, s.codec + (s.codecTag.map { " (\($0))" } ?? "")]
            if let p = s.profile { parts.append(p) }
            switch s.type {
            case .video:
                if let w = s.width, let h = s.height { parts.append("\(w)x\(h)") }
                if let pf = s.pixelFormat { parts.append(pf) }
                if let f = s.frameRate { parts.append("\(fmt(f)) fps\(s.variableFrameRate == true ? " (vfr)" : "")") }
                if let sar = s.sampleAspectRatio, sar != .one { parts.append("sar \(sar.num):\(sar.den)") }
                if let r = s.rotation, r != 0 { parts.append("rotate \(r)°") }
                if s.fieldOrder?.isInterlaced == true { parts.append("interlaced \(s.fieldOrder!.rawValue)") }
                if s.presentationTimesMissing == true { parts.append("decode times only") }
                if let hdr = s.hdr, hdr != .sdr { parts.append(hdr.rawValue) }
                if let dv = s.dolbyVision { parts.append("DV p\(dv.profile) compat \(dv.blCompatibilityId)") }
                if s.disposition.attachedPicture { parts.append("attached picture") }
                if s.closedCaptions == true { parts.append("closed captions" + (s.captionServices.map { " (" + $0.joined(separator: ", ") + ")" } ?? "")) }
            case .audio:
                if let l = s.channelLayout ?? s.channels.map({ "\($0) ch" }) { parts.append(l) }
                if let r = s.sampleRate { parts.append("\(r) Hz") }
            case .subtitle:
                parts.append(s.textSubtitle == true ? "text" : s.textSubtitle == false ? "bitmap" : "unknown kind")
                if let pages = s.teletextPages {
                    parts.append(pages.isEmpty ? "no subtitle pages"
                                 : "pages " + pages.map { [$0.page, $0.language, $0.hearingImpaired ? "sdh" : nil].compactMap { $0 }.joined(separator: " ") }.joined(separator: ", "))
                }
            default: break
            }
            if s.encrypted == true { parts.append("encrypted") }
            if let b = s.bitRate { parts.append("\(b / 1000) kb/s") }
            if let l = s.language { parts.append("[\(l)]") }
            if let t = s.title { parts.append("\"\(t)\"") }
            var flags: [String] = []
            if s.disposition.isDefault { flags.append("default") }
            if s.disposition.forced { flags.append("forced") }
            if s.disposition.hearingImpaired { flags.append("sdh") }
            if s.disposition.commentary { flags.append("commentary") }
            if !flags.isEmpty { parts.append("(\(flags.joined(separator: ", ")))") }
            lines.append("  " + parts.joined(separator: " "))
        }
        for (i, c) in m.chapters.enumerated() {
            lines.append("  chapter \(i + 1): \(fmt(c.startSeconds))–\(fmt(c.endSeconds)) s\(c.title.map { " \"\($0)\"" } ?? "")")
        }
        for w in m.warnings { lines.append("  warning: \(w)") }
        if let why = m.indexDamage { lines.append("  index damaged: \(why)") }
        if let why = m.timingDamage { lines.append("  timing damaged: \(why)") }
        return lines.joined(separator: "\n")
    }

    static func fmt(_ x: Double) -> String {
        let r = (x * 1000).rounded() / 1000
        return r == r.rounded() ? String(Int(r)) : String(r)
    }
}
