/// Language tags as MP4 wants them: ISO 639-2/T, three letters. Matroska stores ISO 639-2
/// bibliographic codes ("ger", "fre", "chi": what mkvmerge writes), some tools write ISO
/// 639-1 ("en") or BCP 47 ("en-US"). The MP4 muxer packs any three letters as they come
/// and turns two into "und", so a track tagged "en" lost its language, and one tagged
/// "ger" carried a code the format does not define.
public enum LanguageCode {
    /// The ISO 639-2/T code for `tag` ("en", "eng", "en-US", "ger" all give "eng" or
    /// "deu"); nil for absent or undetermined. A code it does not know is returned as it is.
    public static func terminologic(_ tag: String?) -> String? {
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
