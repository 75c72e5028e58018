import KilnCore

/// The pages of a DVB teletext stream, as its map lists them: its teletext descriptor, which
/// libavformat gives as extradata (two bytes a page: the type in 5 bits, 2 subtitles and 5
/// subtitles for the deaf and hard of hearing, and the magazine in 3, 0 meaning 8; then the
/// page number in BCD), the languages as the stream's language tag, joined by commas in
/// the same order. Nordic broadcasts carry a page per language on one stream.
enum TeletextPages {
    /// Every page the map lists, with its type.
    static func entries(extradata: [UInt8], languages: String?) -> [(type: UInt8, page: String, language: String?)] {
        let names = languages.map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) } ?? []
        var entries: [(type: UInt8, page: String, language: String?)] = []
        for i in stride(from: 0, to: extradata.count - 1, by: 2) {
            let magazine = extradata[i] & 7
            let page = String(magazine == 0 ? 8 : Int(magazine)) + bcd(extradata[i + 1])
            let name = i / 2 < names.count ? names[i / 2].trimmingSpaces : ""
            entries.append((extradata[i] >> 3, page, name.isEmpty ? nil : name))
        }
        return entries
    }

    /// The subtitle pages (types 2 and 5), in the map's order.
    static func subtitlePages(extradata: [UInt8], languages: String?) -> [TeletextPage] {
        entries(extradata: extradata, languages: languages).filter { $0.type == 2 || $0.type == 5 }
            .map { TeletextPage(page: $0.page, language: $0.language, hearingImpaired: $0.type == 5) }
    }

    /// The page to read when a plan names none: the first subtitle page, the first for the
    /// hard of hearing only when there is no other.
    static func subtitles(extradata: [UInt8], languages: String?) -> (page: String, language: String?)? {
        let pages = subtitlePages(extradata: extradata, languages: languages)
        guard let chosen = pages.first(where: { !$0.hearingImpaired }) ?? pages.first else { return nil }
        return (chosen.page, chosen.language)
    }

    /// A page number's two BCD digits as written ("88").
    private static func bcd(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }
}

extension String {
    /// The string without the spaces at its ends (a fixed-width field's padding).
    var trimmingSpaces: String { String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
}
