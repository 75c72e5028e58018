import KilnCore

/// Picks the one audio track that goes out.
enum AudioSelection {
    /// The requested language if present (of its regional variant where it names one and a
    /// track is tagged so), else the default track's language, else the
    /// first track's; among tracks of that language, a mono track only where the default is
    /// mono or no track has more channels, then the best `fit` (0 best: a track
    /// the device plays without re-encoding, within the rung's budget where there is one),
    /// then the default, then the one whose channels are nearest the
    /// default's (else the first's), then the lowest index. Commentary and audio
    /// description tracks are only chosen when there is nothing else. The channels: a
    /// film's main sound the device cannot play (TrueHD or DTS-HD 5.1) comes with a
    /// compatible copy of the same mix (AC-3 5.1) and often a stereo one; the same mix is
    /// the one to stand in for it, whatever order the tracks are in.
    static func choose(from source: MediaInfo, language: String?,
                       fit: (_ track: StreamInfo, _ group: [StreamInfo]) -> Int) -> (stream: StreamInfo, reasons: [String])? {
        let all = enabledFirst(source.audioStreams)
        guard !all.isEmpty else { return nil }
        let main = all.filter { !isSecondary($0) }
        let pool = main.isEmpty ? all : main
        var reasons: [String] = []
        var group: [StreamInfo] = []
        if let language {
            // A code no language has ("xx") matches no track: said so, as for one the file lacks.
            let wanted = LanguageCode.terminologic(language)
            group = wanted.map { w in pool.filter { speaks($0, w) } } ?? []
            reasons.append(group.isEmpty ? "audio_language_unavailable" : "audio_language_matched")
        }
        if group.isEmpty {
            let lead = pool.first { $0.disposition.isDefault } ?? pool[0]
            let leadLanguage = LanguageCode.terminologic(lead.language)
            group = pool.filter { LanguageCode.terminologic($0.language) == leadLanguage }
        }
        // Asked for a regional variant ("pt-BR"), a track of that very variant first, whatever
        // it costs: the other variant is another dub ("pt-PT").
        let variant = language.flatMap { $0.contains("-") || $0.contains("_") ? String($0.lowercased().map { $0 == "_" ? "-" : $0 }) : nil }
        if let variant, group.contains(where: { $0.languageTag?.lowercased() == variant }) {
            group = group.filter { $0.languageTag?.lowercased() == variant }
        }
        let reference = (group.first { $0.disposition.isDefault } ?? group[0]).channels ?? 2
        // A mono track does not stand in for a film's stereo or surround sound, however well
        // the device plays it: a 5.1 re-encoded keeps both sides (an unflagged English mono
        // beside a DTS 5.1 had gone out in its place). Unless the author flagged the mono.
        let fullest = group.first { $0.disposition.isDefault }.map { $0.channels ?? 2 } ?? group.map { $0.channels ?? 2 }.max()!
        let ranked = group.enumerated().map { offset, s in
            (key: ((s.channels ?? 2) < min(fullest, 2) ? 1 : 0, fit(s, group), s.disposition.isDefault ? 0 : 1,
                   abs((s.channels ?? 2) - reference), offset), stream: s)
        }
        let best = ranked.min { $0.key < $1.key }!.stream
        return (best, reasons)
    }

    /// Whether `s` carries `language` (ISO 639-2/T): its own, or, for two mono programmes
    /// side by side, either channel's (`StreamInfo.dualMono`).
    static func speaks(_ s: StreamInfo, _ language: String) -> Bool {
        let listed = s.dualMono == true ? s.languages : Array(s.languages.prefix(1))
        return listed.contains { LanguageCode.terminologic($0) == language }
    }

    /// Which channel of a dual-mono stream is the sound: the one in `language` when the
    /// stream lists it, else the first (a bilingual broadcast's main language).
    static func dualMonoChannel(_ s: StreamInfo, language: String?) -> Int {
        guard let wanted = language.flatMap(LanguageCode.terminologic) else { return 0 }
        let listed = s.languages
        return listed.count >= 2 && LanguageCode.terminologic(listed[1]) == wanted && LanguageCode.terminologic(listed[0]) != wanted ? 1 : 0
    }

    /// The streams the container does not mark disabled (Matroska's FlagEnabled 0), or all
    /// where it marks them all: a track not to be played goes only where nothing else would.
    static func enabledFirst(_ streams: [StreamInfo]) -> [StreamInfo] {
        let enabled = streams.filter { $0.disabled != true }
        return enabled.isEmpty ? streams : enabled
    }

    /// Commentary or audio description, by disposition or, failing that, by title.
    static func isSecondary(_ s: StreamInfo) -> Bool {
        if s.disposition.commentary || s.disposition.visualImpaired { return true }
        let title = s.title?.lowercased() ?? ""
        return title.includes("commentary") || title.includes("audio description") || title.includes("descriptive")
    }
}
