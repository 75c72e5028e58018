import Glibc

/// Reads a text subtitle that is not UTF-8 in the code page its language was written in.
///
/// Matroska and MP4 want UTF-8, but SubRip files from the years before it were written in
/// their language's Windows (or East Asian) code page, and muxing tools copy them as they
/// are. libavcodec refuses a cue that is not UTF-8 ("Invalid UTF-8 in decoded subtitles
/// text"), so every cue with an accented letter vanished from the output. A cue that is
/// valid UTF-8 is never touched: only the ones that are not are converted, from the code
/// page of the stream's language (Windows-1252 when it names none or one without its own).
final class SubtitleCharset {
    /// The iconv name of the code page the cues are read in.
    let name: String
    private let converter: iconv_t

    init?(language: String?) {
        name = SubtitleCharset.codePage(language: language)
        guard let cd = iconv_open("UTF-8", name), Int(bitPattern: cd) != -1 else { return nil }
        converter = cd
    }

    deinit { iconv_close(converter) }

    /// The legacy code page text in `language` (ISO 639-1 or -2, as streams tag it) was
    /// most likely written in.
    static func codePage(language: String?) -> String {
        let code = language.map { String($0.lowercased().prefix { $0.isLetter }) } ?? ""
        for (page, languages) in pages where languages.contains(code) { return page }
        return "CP1252"
    }

    private static let pages: [(String, Set<String>)] = [
        ("CP1250", ["cs", "cze", "ces", "pl", "pol", "hu", "hun", "sk", "slo", "slk", "sl", "slv", "hr", "hrv",
                    "bs", "bos", "ro", "rum", "ron", "sq", "alb", "sqi"]),
        ("CP1251", ["ru", "rus", "uk", "ukr", "be", "bel", "bg", "bul", "mk", "mac", "mkd", "sr", "srp"]),
        ("CP1253", ["el", "gre", "ell"]),
        ("CP1254", ["tr", "tur", "az", "aze"]),
        ("CP1255", ["he", "heb"]),
        ("CP1256", ["ar", "ara", "fa", "per", "fas", "ur", "urd"]),
        ("CP1257", ["lt", "lit", "lv", "lav", "et", "est"]),
        ("CP1258", ["vi", "vie"]),
        ("CP874", ["th", "tha"]),
        ("CP932", ["ja", "jpn"]),
        ("GB18030", ["zh", "chi", "zho"]),
        ("CP949", ["ko", "kor"]),
    ]

    static func isUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var decoder = UTF8()
        var iterator = bytes.makeIterator()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }

    /// `bytes` in UTF-8. A byte the code page has no character for becomes U+FFFD.
    func utf8(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        iconv(converter, nil, nil, nil, nil)   // a fresh shift state for each cue
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        var chunk = [CChar](repeating: 0, count: 4096)
        var input = UnsafeMutablePointer(mutating: UnsafeRawPointer(bytes.baseAddress)?.assumingMemoryBound(to: CChar.self))
        var inLeft = bytes.count
        while inLeft > 0 {
            let (ret, written): (Int, Int) = chunk.withUnsafeMutableBufferPointer { buf in
                var output: UnsafeMutablePointer<CChar>? = buf.baseAddress
                var outLeft = buf.count
                let r = iconv(converter, &input, &inLeft, &output, &outLeft)
                return (r, buf.count - outLeft)
            }
            out += chunk[0..<written].map { UInt8(bitPattern: $0) }
            if ret == -1 {
                switch errno {
                case E2BIG: continue
                default:
                    // EILSEQ or EINVAL (a sequence cut short at the end): one byte it cannot read.
                    out += [0xEF, 0xBF, 0xBD]
                    input = input.map { $0 + 1 }
                    inLeft -= 1
                }
            }
        }
        // The end of the cue: what the converter holds back goes out. glibc's CP1255 and
        // CP1258 keep each letter until they see whether a combining mark follows, so
        // without this every cue ending in a letter lost it (Hebrew, Vietnamese).
        chunk.withUnsafeMutableBufferPointer { buf in
            var output: UnsafeMutablePointer<CChar>? = buf.baseAddress
            var outLeft = buf.count
            _ = iconv(converter, nil, nil, &output, &outLeft)
            out += buf[0..<(buf.count - outLeft)].map { UInt8(bitPattern: $0) }
        }
        return out
    }
}
