import KilnCore

/// What a track is for, said so that Apple's players hear it.
///
/// libavformat states a track's role in the MPEG way: `kind` boxes with DASH roles
/// (`caption` for a subtitle track for the deaf and hard of hearing, `forced-subtitle`,
/// `description`, `commentary`, `dub`), written from the stream's disposition. AVFoundation
/// reads none of them: it knows a track's role from the QuickTime characteristics in
/// `tagc` boxes beside them in the track's `udta` (the same names as HLS's
/// `CHARACTERISTICS`). Without them an SDH track is offered as a plain one and a forced
/// track is not chosen by itself when the sound's language is the viewer's. The index
/// that goes in front carries both.
enum TrackCharacteristics {
    static let transcribesSpokenDialog = "public.accessibility.transcribes-spoken-dialog"
    static let describesMusicAndSound = "public.accessibility.describes-music-and-sound"
    static let forcedOnly = "public.subtitles.forced-only"
    static let describesVideo = "public.accessibility.describes-video"
    static let auxiliaryContent = "public.auxiliary-content"
    static let dubbed = "public.translation.dubbed"

    /// The DASH role scheme libavformat writes its `kind` boxes in.
    static let dashRoles = "urn:mpeg:dash:role:2011"

    /// The characteristics a DASH role gives a track of this handler type (`sbtl`, `text`
    /// and `subt` are subtitles, `soun` sound).
    static func characteristics(role: String, handler: String) -> [String] {
        let legible = ["sbtl", "text", "subt"].contains(handler)
        switch role {
        case "caption" where legible: return [transcribesSpokenDialog, describesMusicAndSound]
        case "forced-subtitle" where legible: return [forcedOnly]
        case "description" where handler == "soun": return [describesVideo]
        case "dub" where handler == "soun": return [dubbed]
        case "commentary": return [auxiliaryContent]
        default: return []
        }
    }

    /// The index (a whole `moov` box) with a `tagc` box for each characteristic its
    /// tracks' roles give; the index itself where they give none. Idempotent: a
    /// characteristic already stated is not stated again.
    static func tagged(moov: [UInt8]) throws(KilnError) -> [UInt8] {
        guard let top = try FastStart.children(moov[...]).first, top.type == "moov" else { return moov }
        var body: [UInt8] = []
        body.reserveCapacity(moov.count + 256)
        var changed = false
        for child in try FastStart.children(moov[top.body]) {
            if child.type == "trak", let trak = try tagged(trak: moov[child.body]) {
                body += FastStart.box("trak", trak)
                changed = true
            } else {
                body += moov[child.box]
            }
        }
        return changed ? FastStart.box("moov", body) : moov
    }

    /// A track's payload with its characteristics added to its `udta`; nil when there is
    /// nothing to add.
    private static func tagged(trak: ArraySlice<UInt8>) throws(KilnError) -> [UInt8]? {
        let children = try FastStart.children(trak)
        guard let udta = children.first(where: { $0.type == "udta" }) else { return nil }
        let handler = try handlerType(trak, children)
        var stated: Set<String> = []
        var roles: [String] = []
        for box in try FastStart.children(trak[udta.body]) {
            switch box.type {
            case "tagc": stated.insert(String(decoding: trak[box.body], as: UTF8.self))
            case "kind":
                // A full box: version and flags, then the scheme and the value, each ended by a NUL.
                let strings = trak[box.body].dropFirst(4).split(separator: 0, omittingEmptySubsequences: false)
                if strings.count >= 2, String(decoding: strings[0], as: UTF8.self) == dashRoles {
                    roles.append(String(decoding: strings[1], as: UTF8.self))
                }
            default: break
            }
        }
        var added: [String] = []
        for name in roles.flatMap({ characteristics(role: $0, handler: handler) }) where stated.insert(name).inserted {
            added.append(name)
        }
        guard !added.isEmpty else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(trak.count + added.count * 64)
        for child in children {
            if child.box == udta.box {
                out += FastStart.box("udta", Array(trak[udta.body]) + added.flatMap { FastStart.box("tagc", Array($0.utf8)) })
            } else {
                out += trak[child.box]
            }
        }
        return out
    }

    /// The track's handler type (`mdia`/`hdlr`), "" where it has none.
    private static func handlerType(_ trak: ArraySlice<UInt8>, _ children: [FastStart.Child]) throws(KilnError) -> String {
        guard let mdia = children.first(where: { $0.type == "mdia" }),
              let hdlr = try FastStart.children(trak[mdia.body]).first(where: { $0.type == "hdlr" }),
              hdlr.body.count >= 12 else { return "" }
        // Version and flags, pre_defined, then the handler type.
        let at = hdlr.body.lowerBound + 8
        return String(decoding: trak[at..<(at + 4)], as: UTF8.self)
    }
}
