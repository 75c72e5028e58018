import Glibc
import KilnCore

/// Reads a text subtitle that is not UTF-8 in the code page its language was written in.
///
/// Matroska and MP4 want UTF-8, but SubRip files from the years before it were written in
/// their language's Windows (or East Asian) code page, and muxing tools copy them as they
/// are. libavcodec refuses a cue that is not UTF-8 ("Invalid UTF-8 in decoded subtitles
/// text"), so every cue with an accented letter vanished from the output. A cue that is
/// valid UTF-8 is never touched: only the ones that are not are converted, from the code
/// page of the stream's language (Windows-1252 when it names none or one without its own).
///
/// Chinese has two: GB18030 (simplified, the mainland's) and Big5 (traditional, Taiwan's and
/// Hong Kong's), and a track tagged `chi` says which of neither. Each cue is read in both
/// and the reading that makes sense is kept: fewer bytes neither can read, then more of
/// the most common characters (read in the wrong one, Chinese is rare characters and
/// kana: 我們今天 in Big5 read as GB18030 is "иさぱ"). A track that names no language is read
/// in Windows-1252 or -1251, or in GB18030, Big5, Shift-JIS or CP949 where a cue reads as
/// Chinese, Japanese or Korean (`familiarity`).
final class SubtitleCharset {
    private let converters: [(name: String, cd: iconv_t)]
    /// Cues read in each code page.
    private var used: [Int]
    /// Per code page, the familiar characters and the letters (`familiarity`) of the cues it
    /// read whole: whether an East Asian page is the track's.
    private var evidence: [(familiar: Int, letters: Int)]

    /// The iconv name of the code page the cues are read in (the one most of them were).
    var name: String { converters[used.indices.max { used[$0] < used[$1] } ?? 0].name }

    init?(language: String?) {
        var opened: [(name: String, cd: iconv_t)] = []
        for page in SubtitleCharset.codePages(language: language) {
            guard let cd = iconv_open("UTF-8", page), Int(bitPattern: cd) != -1 else { continue }
            opened.append((page, cd))
        }
        guard !opened.isEmpty else { return nil }
        converters = opened
        used = Array(repeating: 0, count: opened.count)
        evidence = Array(repeating: (0, 0), count: opened.count)
    }

    deinit { for c in converters { iconv_close(c.cd) } }

    /// The code pages text in `language` may have been written in, the likelier first. A
    /// track that names no language (`und`, none) may be Western or, as often, Cyrillic
    /// (Russian releases' SubRip files were Windows-1251): both are tried.
    static func codePages(language: String?) -> [String] {
        let page = codePage(language: language)
        if page == "GB18030" { return ["GB18030", "BIG5-HKSCS"] }
        // Central Europe's older files are as often ISO 8859-2 as Windows-1250, which put
        // ž, ť, Š at other bytes: read in the wrong one, "Příliš žluťoučký" is
        // "Přílią ľlu»oučký".
        if page == "CP1250" { return ["CP1250", "ISO-8859-2"] }
        // A tag that names no language ("xx", "russian") says as little as none. Such a
        // track is tried in the East Asian code pages too, which are taken only where they
        // read as their language (`familiarity`).
        return LanguageCode.terminologic(language) == nil ? ["CP1252", "CP1251"] + eastAsian : [page]
    }

    /// The code pages of Chinese (simplified, traditional), Japanese and Korean, for a track
    /// that names no language. Chinese GB18030 text read as Korean's CP949 is Hangul
    /// throughout, but seldom Korean's common syllables (`hangul`): about one letter in ten
    /// against nine in ten of Korean's own.
    static let eastAsian = ["GB18030", "BIG5-HKSCS", "CP932", "CP949"]

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

    /// The length of the UTF-8 sequence at `i` when it is one (overlong forms and
    /// surrogates are not), else nil.
    static func utf8Sequence(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Int? {
        let lead = bytes[i]
        if lead < 0x80 { return 1 }
        let (length, low, high): (Int, UInt8, UInt8) = switch lead {
        case 0xC2...0xDF: (2, 0x80, 0xBF)
        case 0xE0: (3, 0xA0, 0xBF)
        case 0xED: (3, 0x80, 0x9F)
        case 0xE1...0xEF: (3, 0x80, 0xBF)
        case 0xF0: (4, 0x90, 0xBF)
        case 0xF1...0xF3: (4, 0x80, 0xBF)
        case 0xF4: (4, 0x80, 0x8F)
        default: (0, 0, 0)
        }
        guard length > 0, i + length <= bytes.count, (low...high).contains(bytes[i + 1]) else { return nil }
        for k in 2..<max(2, length) where !(0x80...0xBF).contains(bytes[i + k]) { return nil }
        return length
    }

    /// One walk over `bytes`: whether they are UTF-8 throughout (`valid`), and whether they
    /// are UTF-8 with a stray byte or two in it (`mixed`, an SRT edited in a Windows tool):
    /// not valid, yet holding a UTF-8 sequence of three bytes or more (a dash, a curly
    /// quote, CJK), and more of their bytes past ASCII in UTF-8 sequences than outside them.
    /// A single-byte code page's text almost never makes a long sequence by chance (a
    /// lowercase Cyrillic letter of Windows-1251 followed by two of its punctuation marks),
    /// where two-byte ones come up (Ukrainian "Сі" is "ѳ"). A two-byte code page's line does
    /// now and then (Korean "모르" then "겠" in CP949 is B8 F0 B8 A3 B0, whose middle four are
    /// a UTF-8 character), but then nearly all its other bytes are outside any sequence.
    static func utf8Shape(_ bytes: UnsafeBufferPointer<UInt8>) -> (valid: Bool, mixed: Bool) {
        var long = false
        var inSequences = 0, stray = 0
        var i = 0
        while i < bytes.count {
            if let n = utf8Sequence(bytes, at: i) {
                long = long || n >= 3
                if n > 1 { inSequences += n }
                i += n
            } else {
                stray += 1
                i += 1
            }
        }
        return (stray == 0, stray > 0 && long && inSequences > stray)
    }

    static func isUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { utf8Shape(bytes).valid }
    static func isMixedUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool { utf8Shape(bytes).mixed }

    /// `bytes` as UTF-8 where they are, each byte that is not read in the code page: nil
    /// for a code page of two-byte characters, whose pairs a stray byte would shift.
    func mixedUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let page = converters.first, Self.singleByte(page.name) else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if let n = Self.utf8Sequence(bytes, at: i) {
                out += bytes[i..<i + n]
                i += n
            } else {
                out += Self.convert(UnsafeBufferPointer(rebasing: bytes[i..<i + 1]), with: page.cd).text
                i += 1
            }
        }
        used[0] += 1
        return out
    }

    /// Whether `bytes` read whole, no byte left unread, as the language of one of the
    /// track's East Asian code pages (`readsAsItsLanguage`). False for a track with none (a
    /// tagged Western one).
    func readsAsEastAsian(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        converters.contains { page in
            guard !Self.singleByte(page.name) else { return false }
            let reading = Self.convert(bytes, with: page.cd)
            guard reading.unreadable == 0 else { return false }
            return Self.readsAsItsLanguage(Self.familiarity(reading.text, page: page.name))
        }
    }

    /// Whether text read in an East Asian code page is that page's language: three familiar
    /// letters and more (`familiarity`), and at least three in ten of its letters.
    static func readsAsItsLanguage(_ known: (familiar: Int, letters: Int)) -> Bool {
        known.familiar >= 3 && known.familiar * 10 >= known.letters * 3
    }

    /// Whether a code page has a character for every byte alone (Windows', ISO 8859's).
    static func singleByte(_ page: String) -> Bool { page.hasPrefix("CP125") || page == "CP874" || page.hasPrefix("ISO-8859") }

    /// `bytes` in UTF-8. A byte the code page has no character for becomes U+FFFD.
    func utf8(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        guard converters.count > 1 else {
            used[0] += 1
            return Self.convert(bytes, with: converters[0].cd).text
        }
        let readings = converters.map { Self.convert(bytes, with: $0.cd) }
        let familiar = readings.indices.map { Self.familiarity(readings[$0].text, page: converters[$0].name) }
        func score(_ i: Int) -> (Int, Int, Int, Int) {
            (-readings[i].unreadable, -SubtitleCharset.implausibleWords(readings[i].text) - SubtitleCharset.misplacedSymbols(readings[i].text),
             familiar[i].familiar, used[i])
        }
        var candidates = Array(readings.indices)
        let wide = candidates.filter { !Self.singleByte(converters[$0].name) }
        if !wide.isEmpty && wide.count < candidates.count {
            // A track that names no language, tried in Western and East Asian code pages: many
            // bytes are two-byte characters of some East Asian page too (Cyrillic's letters in
            // pairs are GB18030's characters, one in twenty a common one). The track decides:
            // an East Asian page is taken for a cue it reads whole once, over the cues it read
            // whole so far, this one included, three familiar characters and more have come,
            // and at least three in ten of the letters were familiar. Chinese, even a
            // program's messages, is about half its most common characters; Cyrillic,
            // Western text or another East Asian page's read in it a few in a hundred.
            for i in wide where readings[i].unreadable == 0 {
                evidence[i].familiar += familiar[i].familiar
                evidence[i].letters += familiar[i].letters
            }
            let fitting = wide.filter {
                readings[$0].unreadable == 0 && Self.readsAsItsLanguage(evidence[$0])
            }
            if fitting.isEmpty { candidates.removeAll { wide.contains($0) } } else { candidates = fitting }
        }
        // Among equals, the code page most cues were read in so far (a cue that reads alike
        // in both follows its track), then the likelier one.
        var best = candidates[0]
        for i in candidates.dropFirst() where score(i) > score(best) { best = i }
        used[best] += 1
        return readings[best].text
    }

    /// How many of `utf8`'s letters are familiar in text of the code page `page` was made for
    /// (Chinese's most common characters; for Japanese's CP932 those and kana; for Korean's
    /// CP949 Korean's most common syllables), and how many letters it holds in all. Kana do
    /// not count for the Chinese pages: Big5's common characters read as GB18030 are kana
    /// ("我們今天" is "иさぱ").
    static func familiarity(_ utf8: [UInt8], page: String) -> (familiar: Int, letters: Int) {
        let japanese = page == "CP932", korean = page == "CP949"
        var familiar = 0, letters = 0
        for scalar in String(decoding: utf8, as: UTF8.self).unicodeScalars where scalar.properties.isAlphabetic {
            letters += 1
            let known = korean ? hangul.contains(scalar) : common.contains(scalar) || (japanese && (0x3041...0x30FA).contains(scalar.value))
            if known { familiar += 1 }
        }
        return (familiar, letters)
    }

    /// Words no language writes: Latin and Cyrillic letters mixed in one word (Western
    /// text read as Windows-1251: "Cafй"), or two letters and more all accented Latin ones
    /// (Cyrillic read as Windows-1252: "Ïðèâåò"; a Western word has plain letters beside
    /// its accents).
    static func implausibleWords(_ utf8: [UInt8]) -> Int {
        var count = 0
        var latin = 0, accented = 0, cyrillic = 0
        func endWord() {
            if (latin > 0 && cyrillic > 0) || (accented >= 2 && accented == latin) { count += 1 }
            latin = 0; accented = 0; cyrillic = 0
        }
        for scalar in String(decoding: utf8, as: UTF8.self).unicodeScalars {
            switch scalar.value {
            case 0x41...0x5A, 0x61...0x7A: latin += 1
            case 0xC0...0xD6, 0xD8...0xF6, 0xF8...0xFF: latin += 1; accented += 1
            case 0x400...0x4FF: cyrillic += 1
            default: if !scalar.properties.isAlphabetic { endWord() }
            }
        }
        endWord()
        return count
    }

    /// Characters no text has where they stand: C1 controls (U+0080–U+009F: Windows-1250's
    /// š, ž, ť read as ISO 8859-2), and Latin-1's signs (© « ± » ¾ …) inside a word, between
    /// letters or before one after another sign (ISO 8859-2's Š, ť, ž read as
    /// Windows-1250: "©»astný", "lu»oučký").
    static func misplacedSymbols(_ utf8: [UInt8]) -> Int {
        let scalars = Array(String(decoding: utf8, as: UTF8.self).unicodeScalars)
        func sign(_ s: Unicode.Scalar) -> Bool { (0xA1...0xBF).contains(s.value) && !s.properties.isAlphabetic }
        var count = 0
        for (k, s) in scalars.enumerated() {
            if (0x80...0x9F).contains(s.value) { count += 1; continue }
            guard sign(s), k + 1 < scalars.count, scalars[k + 1].properties.isAlphabetic, k > 0 else { continue }
            if scalars[k - 1].properties.isAlphabetic || sign(scalars[k - 1]) { count += 1 }
        }
        return count
    }

    /// Chinese's most common characters, simplified and traditional.
    private static let common = Set("的一是不了人我在有他这這中大来來上国國个個到说說们們为為子和你地出道也时時年得就那要下以生会會自着著去之过過家学學对對可她里裡后後小么麼心多天而能好都然没沒日于於起还還发發成事只作当當想看文无無开開手十用主行方又如前所本见見经經头頭面公同三已老从從动動两兩长長知民样樣现現分将將外但身些与與高意进進把法此实實回二理美点點月明其种種声聲全工己话話儿兒者向情部正名定女问問力机機给給等几幾很业業最间間新什打便位因重被走电電四第门門相次东東政海口使教西再平真听聽世气氣信北少关關并並内內加化由却卻代军軍产產入先山五太水万萬市眼体體别別处處总總才场場师師书書比住员員九笑性通目华華报報立马馬命张張活难難神数數件安表原车車白应應路期叫死常提感金何更反合放做系计計或司利受光王果亲親界及今京务務制解各任至清物台象记記边邊共风風战戰干接它许許八特觉覺望直服毛林题題建南度统統色字请請交爱愛让讓认認算论論百吃义義科怎元社术術结結六功指思非流每青管夫连連远遠资資队隊跟带帶花快条條院变變联聯言权權往展该該领領传傳近留红紅治决決周保达達办辦运運武半候七必城父强強步完革深区區即求品士转轉量空甚众眾技轻輕程告江语語英基派满滿式李息写寫呢识識极極令黄黃德收脸臉钱錢党黨倒未持取设設始版双雙历歷越史商千片容研像找友孩站广廣改议議形委早房音火际際则則首单單据據导導影失拿网網香似斯专專石若兵弟谁誰校读讀志飞飛观觀争爭究包组組造落视視济濟喜离離虽雖坐集编編宝寶谈談府拉黑且随隨格尽盡剑劍讲講布杀殺微怕母调調局根曾准準团團段终終乐樂切级級克精哪官示冷域吗嗎啊吧呀哦嗯".unicodeScalars)

    /// Korean's most common syllables, about 280 of the 2,350 CP949 has in its main table:
    /// nine in ten of a Korean line's letters, one in ten of a Chinese line read as CP949
    /// (its characters land on syllables evenly, few of them common ones).
    private static let hangul = Set("이다는의에가고하을지서한로기도를사리어나수시대자아인일적정게해것있으라여국주장보부전제들그면상우성간동만요문공구소학내비신세회선거경미물생위관화원조방식연실유발말데했없중과되금야히치무개마모불할람님네까니뭐왜안잘좀응저너난넌건걸줘봐알겠습죠진짜빨괜찮왔감랑엄빠오늘디언얼래군때더못같좋싶많씨또계받살집돈애얘뭔된될봤먹갈갔올와줄준드든린분번본볼척처친판편후혹희힘행현형호확황효명목몰몸밖반밤백법변병복색석설손속순술쉬쓰씩앞약양업역열영옆외용운울움월음입잊잠잡재절점접죽즘직질차참찾책청체초최추출충취칠커케크큰키타태터테토통투트특파퍼페포표프피필함합항허헤혼".unicodeScalars)

    /// `bytes` read in `encoding` (an iconv name, as an XML declaration gives it), nil
    /// when iconv knows no such encoding.
    static func utf8(_ bytes: [UInt8], from encoding: String) -> [UInt8]? {
        guard let cd = iconv_open("UTF-8", encoding), Int(bitPattern: cd) != -1 else { return nil }
        defer { iconv_close(cd) }
        return bytes.withUnsafeBufferPointer { convert($0, with: cd).text }
    }

    /// `bytes` read with `converter`, and how many of them it could not read.
    private static func convert(_ bytes: UnsafeBufferPointer<UInt8>, with converter: iconv_t) -> (text: [UInt8], unreadable: Int) {
        var unreadable = 0
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
                    unreadable += 1
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
        return (out, unreadable)
    }
}
