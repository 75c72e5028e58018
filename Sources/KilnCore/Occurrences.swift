extension Substring {
    /// Where `needle` occurs in these characters' Unicode scalars, first to last, not
    /// overlapping. Kiln's targets leave the regex module out (each `prep-artifact`
    /// process would load it), and with it `ranges(of:)`.
    public func occurrences(of needle: String) -> [Range<Substring.Index>] {
        let needle = Array(needle.unicodeScalars), scalars = unicodeScalars
        guard !needle.isEmpty else { return [] }
        var found: [Range<Substring.Index>] = []
        var i = scalars.startIndex
        while i < scalars.endIndex {
            var j = i, k = 0
            while k < needle.count, j < scalars.endIndex, scalars[j] == needle[k] { j = scalars.index(after: j); k += 1 }
            if k == needle.count {
                found.append(i..<j)
                i = j
            } else {
                i = scalars.index(after: i)
            }
        }
        return found
    }
}
