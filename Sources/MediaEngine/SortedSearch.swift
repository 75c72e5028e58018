extension RandomAccessCollection where Index == Int {
    /// The last index whose `key` is at or before `value`, in a collection ascending by that
    /// key (a binary search); nil where it is empty or its first is after `value`. Where a
    /// byte of a file lies among pieces, fragments or samples sorted by their place.
    func lastIndex(atOrBefore value: Int64, by key: (Element) -> Int64) -> Int? {
        guard let first = self.first, key(first) <= value else { return nil }
        var lo = startIndex, hi = endIndex - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if key(self[mid]) <= value { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }
}
