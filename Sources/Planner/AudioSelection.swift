import KilnCore

/// Picks the one audio track that goes out.
enum AudioSelection {
    /// The requested language if present, else the default track's language, else the
    /// first track's; among tracks of that language the first the device plays without
    /// re-encoding wins, then the default, then the lowest index. Commentary and audio
    /// description tracks are only chosen when there is nothing else.
    static func choose(from source: MediaInfo, language: String?,
                       playsWithoutReencode: (StreamInfo) -> Bool) -> (stream: StreamInfo, reasons: [String])? {
        let all = source.audioStreams
        guard !all.isEmpty else { return nil }
        let main = all.filter { !isSecondary($0) }
        let pool = main.isEmpty ? all : main
        var reasons: [String] = []
        var group: [StreamInfo] = []
        if let wanted = language.flatMap(LanguageCode.terminologic) {
            group = pool.filter { LanguageCode.terminologic($0.language) == wanted }
            reasons.append(group.isEmpty ? "audio_language_unavailable" : "audio_language_matched")
        }
        if group.isEmpty {
            let lead = pool.first { $0.disposition.isDefault } ?? pool[0]
            let leadLanguage = LanguageCode.terminologic(lead.language)
            group = pool.filter { LanguageCode.terminologic($0.language) == leadLanguage }
        }
        let best = group.enumerated().min { a, b in
            let ka = (playsWithoutReencode(a.element) ? 0 : 1, a.element.disposition.isDefault ? 0 : 1, a.offset)
            let kb = (playsWithoutReencode(b.element) ? 0 : 1, b.element.disposition.isDefault ? 0 : 1, b.offset)
            return ka < kb
        }!.element
        return (best, reasons)
    }

    /// Commentary or audio description, by disposition or, failing that, by title.
    static func isSecondary(_ s: StreamInfo) -> Bool {
        if s.disposition.commentary || s.disposition.visualImpaired { return true }
        let title = s.title?.lowercased() ?? ""
        return title.includes("commentary") || title.includes("audio description") || title.includes("descriptive")
    }
}
