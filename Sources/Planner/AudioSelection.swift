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
        if let wanted = language.flatMap(normalizeLanguage) {
            group = pool.filter { normalizeLanguage($0.language) == wanted }
            reasons.append(group.isEmpty ? "audio_language_unavailable" : "audio_language_matched")
        }
        if group.isEmpty {
            let lead = pool.first { $0.disposition.isDefault } ?? pool[0]
            let leadLanguage = normalizeLanguage(lead.language)
            group = pool.filter { normalizeLanguage($0.language) == leadLanguage }
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

    /// ISO 639-2/T code for a language tag ("en", "eng", "en-US", "ger" all compare as
    /// the same language); nil for absent or undetermined.
    static func normalizeLanguage(_ tag: String?) -> String? {
        guard let tag else { return nil }
        let base = tag.lowercased().split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map(String.init) ?? ""
        if base.isEmpty || base == "und" || base == "mis" || base == "zxx" || base == "mul" { return nil }
        if let t = iso639_1[base] { return t }
        if let t = bibliographic[base] { return t }
        return base
    }

    private static let iso639_1: [String: String] = [
        "en": "eng", "fr": "fra", "de": "deu", "es": "spa", "it": "ita", "pt": "por", "nl": "nld",
        "sv": "swe", "no": "nor", "nb": "nob", "nn": "nno", "da": "dan", "fi": "fin", "is": "isl",
        "pl": "pol", "cs": "ces", "sk": "slk", "sl": "slv", "hr": "hrv", "sr": "srp", "bs": "bos",
        "hu": "hun", "ro": "ron", "bg": "bul", "el": "ell", "tr": "tur", "ru": "rus", "uk": "ukr",
        "be": "bel", "et": "est", "lv": "lav", "lt": "lit", "ja": "jpn", "zh": "zho", "ko": "kor",
        "hi": "hin", "bn": "ben", "ta": "tam", "te": "tel", "th": "tha", "vi": "vie", "id": "ind",
        "ms": "msa", "tl": "tgl", "ar": "ara", "he": "heb", "fa": "fas", "ur": "urd", "ca": "cat",
        "eu": "eus", "gl": "glg", "ga": "gle", "cy": "cym", "sq": "sqi", "mk": "mkd", "ka": "kat",
        "hy": "hye", "af": "afr", "sw": "swa",
    ]
    private static let bibliographic: [String: String] = [
        "ger": "deu", "fre": "fra", "dut": "nld", "cze": "ces", "slo": "slk", "gre": "ell", "chi": "zho",
        "per": "fas", "rum": "ron", "ice": "isl", "mac": "mkd", "may": "msa", "wel": "cym", "arm": "hye",
        "baq": "eus", "bur": "mya", "geo": "kat", "alb": "sqi", "tib": "bod",
    ]
}
