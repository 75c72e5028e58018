/// Language tags as MP4 wants them: ISO 639-2/T, three letters. Matroska stores ISO 639-2
/// bibliographic codes ("ger", "fre", "chi": what mkvmerge writes), some tools write ISO
/// 639-1 ("en") or BCP 47 ("en-US"). The MP4 muxer packs any three letters as they come
/// and turns two into "und", so a track tagged "en" lost its language, and one tagged
/// "ger" carried a code the format does not define.
public enum LanguageCode {
    /// The ISO 639-2/T code for `tag` ("en", "eng", "en-US", "ger" all give "eng" or
    /// "deu"); nil for absent or undetermined, and for a code that is not three letters once
    /// mapped (a two-letter one no table knows would be "und" in MP4 anyway). Other
    /// three-letter codes (ISO 639-3's "yue", "fil") are kept as they are. Of a list (a DVB
    /// ISO 639 descriptor naming several, which libavformat joins: "eng,deu"), the first:
    /// the list had tagged the output's track "und".
    public static func terminologic(_ tag: String?) -> String? {
        guard let first = listed(tag).first else { return nil }
        let base = first.lowercased().split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map(String.init) ?? ""
        if base.isEmpty || base == "und" || base == "mis" || base == "zxx" || base == "mul" { return nil }
        if let t = iso639_1[base] ?? withdrawn[base] { return t }
        if let t = bibliographic[base] { return t }
        return base.count == 3 && base.allSatisfy({ $0 >= "a" && $0 <= "z" }) ? base : nil
    }

    /// The languages a tag lists, in order ("eng,deu" is two; libavformat joins a DVB
    /// descriptor's so), as they are written, without spaces.
    public static func listed(_ tag: String?) -> [String] {
        (tag ?? "").split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }.filter { !$0.isEmpty }
    }

    /// Every ISO 639-1 code (184, "bh" included) with its ISO 639-2/T one.
    private static let iso639_1: [String: String] = [
        "aa": "aar", "ab": "abk", "ae": "ave", "af": "afr", "ak": "aka", "am": "amh", "an": "arg", "ar": "ara", "as": "asm", "av": "ava",
        "ay": "aym", "az": "aze", "ba": "bak", "be": "bel", "bg": "bul", "bh": "bih", "bi": "bis", "bm": "bam", "bn": "ben", "bo": "bod",
        "br": "bre", "bs": "bos", "ca": "cat", "ce": "che", "ch": "cha", "co": "cos", "cr": "cre", "cs": "ces", "cu": "chu", "cv": "chv",
        "cy": "cym", "da": "dan", "de": "deu", "dv": "div", "dz": "dzo", "ee": "ewe", "el": "ell", "en": "eng", "eo": "epo", "es": "spa",
        "et": "est", "eu": "eus", "fa": "fas", "ff": "ful", "fi": "fin", "fj": "fij", "fo": "fao", "fr": "fra", "fy": "fry", "ga": "gle",
        "gd": "gla", "gl": "glg", "gn": "grn", "gu": "guj", "gv": "glv", "ha": "hau", "he": "heb", "hi": "hin", "ho": "hmo", "hr": "hrv",
        "ht": "hat", "hu": "hun", "hy": "hye", "hz": "her", "ia": "ina", "id": "ind", "ie": "ile", "ig": "ibo", "ii": "iii", "ik": "ipk",
        "io": "ido", "is": "isl", "it": "ita", "iu": "iku", "ja": "jpn", "jv": "jav", "ka": "kat", "kg": "kon", "ki": "kik", "kj": "kua",
        "kk": "kaz", "kl": "kal", "km": "khm", "kn": "kan", "ko": "kor", "kr": "kau", "ks": "kas", "ku": "kur", "kv": "kom", "kw": "cor",
        "ky": "kir", "la": "lat", "lb": "ltz", "lg": "lug", "li": "lim", "ln": "lin", "lo": "lao", "lt": "lit", "lu": "lub", "lv": "lav",
        "mg": "mlg", "mh": "mah", "mi": "mri", "mk": "mkd", "ml": "mal", "mn": "mon", "mr": "mar", "ms": "msa", "mt": "mlt", "my": "mya",
        "na": "nau", "nb": "nob", "nd": "nde", "ne": "nep", "ng": "ndo", "nl": "nld", "nn": "nno", "no": "nor", "nr": "nbl", "nv": "nav",
        "ny": "nya", "oc": "oci", "oj": "oji", "om": "orm", "or": "ori", "os": "oss", "pa": "pan", "pi": "pli", "pl": "pol", "ps": "pus",
        "pt": "por", "qu": "que", "rm": "roh", "rn": "run", "ro": "ron", "ru": "rus", "rw": "kin", "sa": "san", "sc": "srd", "sd": "snd",
        "se": "sme", "sg": "sag", "si": "sin", "sk": "slk", "sl": "slv", "sm": "smo", "sn": "sna", "so": "som", "sq": "sqi", "sr": "srp",
        "ss": "ssw", "st": "sot", "su": "sun", "sv": "swe", "sw": "swa", "ta": "tam", "te": "tel", "tg": "tgk", "th": "tha", "ti": "tir",
        "tk": "tuk", "tl": "tgl", "tn": "tsn", "to": "ton", "tr": "tur", "ts": "tso", "tt": "tat", "tw": "twi", "ty": "tah", "ug": "uig",
        "uk": "ukr", "ur": "urd", "uz": "uzb", "ve": "ven", "vi": "vie", "vo": "vol", "wa": "wln", "wo": "wol", "xh": "xho", "yi": "yid",
        "yo": "yor", "za": "zha", "zh": "zho", "zu": "zul",
    ]
    /// Two-letter codes ISO 639-1 withdrew, which old files and Android (Java's Locale) still
    /// write. Serbo-Croatian has no ISO 639-2 code: ISO 639-3's "hbs" (MP4 packs any three letters).
    private static let withdrawn: [String: String] = ["iw": "heb", "in": "ind", "ji": "yid", "jw": "jav", "mo": "ron", "sh": "hbs"]
    /// ISO 639-2's twenty bibliographic codes (what mkvmerge writes) with their terminologic twins.
    private static let bibliographic: [String: String] = [
        "alb": "sqi", "arm": "hye", "baq": "eus", "bur": "mya", "chi": "zho", "cze": "ces", "dut": "nld", "fre": "fra", "geo": "kat", "ger": "deu",
        "gre": "ell", "ice": "isl", "mac": "mkd", "mao": "mri", "may": "msa", "per": "fas", "rum": "ron", "slo": "slk", "tib": "bod", "wel": "cym",
    ]
}
