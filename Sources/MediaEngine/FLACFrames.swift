#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg
import KilnCore

/// The rate, channels and sample size a FLAC frame states.
struct FLACFrameFormat: Equatable, CustomStringConvertible {
    let rate: Int
    let channels: Int
    let bits: Int
    var description: String { "\(rate) Hz, \(channels) channel\(channels == 1 ? "" : "s"), \(bits)-bit" }
}

/// A FLAC frame's header (the FLAC format's FRAME_HEADER): the sync code, block size and
/// rate codes, channel assignment and sample size codes, the frame or sample number in
/// UTF-8's coding, the block size and rate where the codes say they follow, then a CRC-8 of
/// it all. A code that defers to STREAMINFO takes the stream's.
struct FLACFrameHeader {
    let format: FLACFrameFormat
    /// The frame's samples per channel.
    let samples: Int

    /// Whether a frame's sync code (0xFFF8, or 0xFFF9 for variable block sizes) is at `at`.
    static func beginsFrame(_ b: UnsafeBufferPointer<UInt8>, at i: Int = 0) -> Bool {
        b.count - i >= 2 && b[i] == 0xFF && b[i + 1] & 0xFE == 0xF8
    }

    /// `checked`: the header's CRC-8 must hold (finding frames among other bytes); a
    /// copy's watch reads headers libavformat's parser already found.
    init?(_ b: UnsafeBufferPointer<UInt8>, at start: Int = 0, streamRate: Int, streamBits: Int, checked: Bool = false) {
        guard b.count - start >= 6, Self.beginsFrame(b, at: start) else { return nil }
        let blockCode = Int(b[start + 2] >> 4), rateCode = Int(b[start + 2] & 0x0F)
        let assignment = Int(b[start + 3] >> 4), sizeCode = Int(b[start + 3] >> 1 & 0x07)
        guard blockCode != 0, assignment <= 10, rateCode != 15, sizeCode != 3 else { return nil }
        // The coded number: as many bytes as the first one's leading ones (one where none).
        var lead = 0
        while lead < 8, b[start + 4] & (0x80 >> lead) != 0 { lead += 1 }
        guard lead != 1, lead <= 7 else { return nil }
        var at = start + 4 + max(1, lead)
        func field(_ n: Int) -> Int? {
            guard at + n <= b.count else { return nil }
            defer { at += n }
            return (0..<n).reduce(0) { $0 << 8 | Int(b[at + $1]) }
        }
        switch blockCode {
        case 1: samples = 192
        case 2...5: samples = 576 << (blockCode - 2)
        case 6: guard let n = field(1) else { return nil }; samples = n + 1
        case 7: guard let n = field(2) else { return nil }; samples = n + 1
        default: samples = 256 << (blockCode - 8)
        }
        let fixedRates = [0, 88_200, 176_400, 192_000, 8_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000]
        let rate: Int
        switch rateCode {
        case 0: rate = streamRate
        case 12: guard let k = field(1) else { return nil }; rate = k * 1000
        case 13: guard let hz = field(2) else { return nil }; rate = hz
        case 14: guard let tens = field(2) else { return nil }; rate = tens * 10
        default: rate = fixedRates[rateCode]
        }
        guard rate > 0 else { return nil }
        if checked {
            guard at < b.count, av_crc(av_crc_get_table(AV_CRC_8_ATM), 0, b.baseAddress! + start, at - start) == UInt32(b[at]) else { return nil }
        }
        format = FLACFrameFormat(rate: rate, channels: assignment < 8 ? assignment + 1 : 2, bits: [streamBits, 8, 12, 0, 16, 20, 24, 32][sizeCode])
    }
}

/// FLAC files joined with `cat`: libavformat's FLAC parser, meeting the second file's
/// header ("fLaC" and its metadata blocks) between two frames, glues the last frames of the
/// first file and that header into one packet (four frames and 8 kB of padding, untimed).
/// Copied, it failed its CRC and was left out; decoded, one frame of four came out.
enum FLACJoin {
    /// A piece of such a packet: a frame, its samples, and whether it is the second file's.
    struct Frame: Equatable {
        var range: Range<Int>
        var samples: Int
        var nextFile: Bool
    }

    /// The frames of a packet that holds a joined file's header, and that file's rate (its
    /// STREAMINFO's); nil for a packet without one. A FLAC header is "fLaC" and a STREAMINFO
    /// block's header (type 0, the last-block bit either way, length 34); metadata blocks
    /// follow it up to the one marked last, and any bytes after them are frames.
    static func frames(_ b: UnsafeBufferPointer<UInt8>, streamRate: Int, streamBits: Int) -> (frames: [Frame], rate: Int)? {
        guard let k = header(b), let rate = streamInfo(b, at: k)?.rate else { return nil }
        var at = k + 4, last = false
        while !last, at + 4 <= b.count {
            last = b[at] & 0x80 != 0
            at += 4 + (Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3]))
        }
        let before = cut(b, 0..<k, streamRate: streamRate, streamBits: streamBits, nextFile: false)
        let after = last && at < b.count ? cut(b, at..<b.count, streamRate: rate, streamBits: streamBits, nextFile: true) : []
        return (before + after, rate)
    }

    /// What the STREAMINFO block after a "fLaC" marker at `k` states: the rate (the 20 bits
    /// after its first 10 bytes) and the samples (36 bits after the channels and sample
    /// size; 0 where the encoder did not count them). Nil where it is cut off.
    static func streamInfo(_ b: UnsafeBufferPointer<UInt8>, at k: Int) -> (rate: Int, samples: Int64)? {
        guard k >= 0, k + 26 <= b.count else { return nil }
        let s = k + 8
        let rate = Int(b[s + 10]) << 12 | Int(b[s + 11]) << 4 | Int(b[s + 12]) >> 4
        let samples = Int64(b[s + 13] & 0x0F) << 32 | Int64(b[s + 14]) << 24 | Int64(b[s + 15]) << 16 | Int64(b[s + 16]) << 8 | Int64(b[s + 17])
        return (rate, samples)
    }

    /// Where a FLAC file's header begins in `b`; nil where none does.
    static func header(_ b: UnsafeBufferPointer<UInt8>) -> Int? {
        guard b.count >= 22, let base = b.baseAddress else { return nil }
        var from = 0
        // memchr finds the candidates (an "f" in every 256 bytes of a frame) at memory speed.
        while from + 22 <= b.count, let hit = memchr(base + from, 0x66, b.count - 21 - from) {
            let k = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            if b[k + 1] == 0x4C, b[k + 2] == 0x61, b[k + 3] == 0x43,
               b[k + 4] & 0x7F == 0, b[k + 5] == 0, b[k + 6] == 0, b[k + 7] == 34 {
                return k
            }
            from = k + 1
        }
        return nil
    }

    /// The frames `range` holds end to end: each begins with a header whose CRC-8 holds and
    /// ends where the next such header begins and its own CRC-16 holds. Bytes that make no
    /// frame are left out.
    private static func cut(_ b: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, streamRate: Int, streamBits: Int, nextFile: Bool) -> [Frame] {
        let region = UnsafeBufferPointer(rebasing: b[range])
        func header(_ i: Int) -> FLACFrameHeader? { FLACFrameHeader(region, at: i, streamRate: streamRate, streamBits: streamBits, checked: true) }
        func whole(_ r: Range<Int>) -> Bool { av_crc(av_crc_get_table(AV_CRC_16_ANSI), 0, region.baseAddress! + r.lowerBound, r.count) == 0 }
        let starts = region.indices.filter { region[$0] == 0xFF && header($0) != nil }
        var frames: [Frame] = []
        var i = 0
        next: while i < starts.count {
            // The nearest later header that closes a whole frame (a sync code can lie inside one).
            for j in (i + 1)...starts.count {
                let end = j < starts.count ? starts[j] : region.count
                guard whole(starts[i]..<end), let h = header(starts[i]) else { continue }
                frames.append(Frame(range: (range.lowerBound + starts[i])..<(range.lowerBound + end), samples: h.samples, nextFile: nextFile))
                i = j
                continue next
            }
            i += 1
        }
        return frames
    }
}

extension FLACJoin {
    /// The length of a bare FLAC file that is files joined with `cat`: the sum of each
    /// one's STREAMINFO length (its samples over its rate), found by their headers in the
    /// file's bytes, read through up to `limit` of them. Nil for one file, or where a
    /// STREAMINFO does not count its samples (a stream's encoder may leave it 0).
    /// For files past the probe's read-through (an album's songs joined): their tail
    /// disagrees with the first file's header, which is what sends the probe here.
    static func joinedLength(path: String, limit: Int64 = 16 << 30) -> Double? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
        let chunk = 4 << 20, overlap = 26
        var offset: Int64 = 0, seconds = 0.0, files = 0
        while offset < limit, let bytes = try? file.read(upTo: chunk + overlap, at: offset), bytes.count > overlap {
            var ok = true
            bytes.withUnsafeBufferPointer { b in
                var from = 0
                // A header the overlap holds is the next chunk's.
                while from < min(chunk, b.count - overlap), let k = header(UnsafeBufferPointer(rebasing: b[from...])).map({ $0 + from }), k < chunk {
                    guard let (rate, samples) = streamInfo(b, at: k) else { break }
                    if rate == 0 || samples == 0 { ok = false }
                    seconds += rate > 0 ? Double(samples) / Double(rate) : 0
                    files += 1
                    from = k + 1
                }
            }
            guard ok else { return nil }
            if bytes.count < chunk + overlap { break }
            offset += Int64(chunk)
        }
        return files > 1 ? seconds : nil
    }
}
