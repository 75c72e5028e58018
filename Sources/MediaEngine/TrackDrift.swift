import CFFmpeg
import KilnCore

/// Whether the tracks of an MP4 or QuickTime file keep time with each other, judged from
/// the sample tables alone. A muxer writes the samples of its tracks interleaved, each
/// beside the others' of about the same time; so where a track's times drift away from
/// the pictures' across the file, its timing in the header is damaged (a media
/// timescale or an edit rewritten: 250 pictures in a third of a second beside ten seconds
/// of sound, or sound stretched to hours). No plan can put such a file right: a copy
/// keeps the wrong times and an encode follows them.
///
/// A constant offset is not drift (a sound that starts two seconds after the pictures
/// is placed beside them all along); only a change of offset between the first quarter
/// of the file and the last counts, and only beyond the few seconds by which muxers
/// interleave. Tracks that are not interleaved (one after the other, as some old
/// QuickTime files are) are not judged.
enum TrackDrift {
    /// Drift below both is taken as the interleave's own slack.
    static let toleratedSeconds = 2.0
    static let toleratedShare = 0.05
    /// Samples compared per track: enough for the quarters' medians, bounded for a
    /// two-hour film's hundreds of thousands.
    static let comparedSamples = 1024
    static let minimumCompared = 16

    struct Sample { var pos: Int64; var seconds: Double }

    /// Why a track's times cannot be the file's, or nil. Only non-fragmented MP4 and
    /// QuickTime files have sample tables complete enough to judge.
    static func judge(_ demuxer: Demuxer) -> (stream: Int, why: String)? {
        var tracks: [(index: Int, samples: [Sample])] = []
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            let type = st.pointee.codecpar.pointee.codec_type
            // Not a stream left unread (an unknown codec's, `Demuxer`): its samples may be
            // one per PCM sample, 48,000 a second, and copying them cost 16 bytes each.
            guard type == AVMEDIA_TYPE_VIDEO || type == AVMEDIA_TYPE_AUDIO, st.pointee.discard != AVDISCARD_ALL,
                  st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let samples = indexSamples(st)
            if samples.count >= minimumCompared { tracks.append((i, samples)) }
        }
        // The pictures are the reference a drifting sound is measured against (and the
        // first track where there are none).
        let referenceAt = tracks.firstIndex { demuxer.stream($0.index).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO } ?? 0
        guard tracks.count >= 2 else { return nil }
        let reference = tracks[referenceAt]
        let byPosition = reference.samples.sorted { $0.pos < $1.pos }
        for (k, track) in tracks.enumerated() where k != referenceAt {
            guard let drift = drift(of: track.samples, against: byPosition) else { continue }
            let spans = [span(reference.samples), span(track.samples)]
            if abs(drift) > max(toleratedSeconds, toleratedShare * (spans.max() ?? 0)) {
                return (track.index, "stream \(track.index)'s times drift \(format(abs(drift))) s from stream \(reference.index)'s across the file"
                    + " (\(format(spans[1])) s of samples beside \(format(spans[0])) s): its timing in the header is damaged")
            }
        }
        return nil
    }

    /// A sound track of an MP4 or QuickTime file, fragmented or not, whose media header
    /// gives no usable timescale (`mdhd` says 0, and libavformat then counts one tick a
    /// second, or says 1): its AAC frames, 1,024 ticks apart, lay 17 minutes apart, and a
    /// film's 1.9 s of sound was remuxed 26 hours long. No sound is timed in whole seconds,
    /// and nothing in the file says what its scale was.
    static func untimedSound(_ demuxer: Demuxer) -> (stream: Int, why: String)? {
        for i in 0..<demuxer.streamCount {
            let st = demuxer.stream(i)
            guard st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO, st.pointee.discard != AVDISCARD_ALL,
                  st.pointee.time_base.num == 1, st.pointee.time_base.den == 1 else { continue }
            return (i, "stream \(i)'s media header gives it no usable timescale (0 or 1: its times read as whole seconds): its timing in the header is damaged")
        }
        return nil
    }

    /// The change, from the file's first quarter to its last, of how far a track's
    /// samples lie in time from the reference's time where they are written: between the
    /// reference's samples around them, at the time their position is between those two.
    /// (The sample just before had been the reference: across a 15 s pause in a
    /// variable-rate recording's pictures, the sound written there lay up to 15 s from
    /// it, which read as 12 s of drift.) Only where the reference's samples lie close
    /// together in the file, as an interleaving muxer writes them: a picture written long
    /// after those around it in time is no measure of what lies between (ffmpeg's muxer
    /// wrote a recording's last picture, shown after a 27 s still, at the file's end,
    /// having had it from the encoder only there; its decode time is the pictures' before
    /// the still). nil where too few of its samples lie among the reference's to say.
    static func drift(of samples: [Sample], against reference: [Sample]) -> Double? {
        guard let first = reference.first?.pos, let last = reference.last?.pos else { return nil }
        let gaps = zip(reference.dropFirst(), reference).map { $0.pos - $1.pos }.sorted()
        let wideGap = max(16 * (gaps.isEmpty ? 0 : gaps[gaps.count / 2]), 4096)
        let step = max(1, samples.count / comparedSamples)
        var offsets: [(pos: Int64, seconds: Double)] = []
        for k in stride(from: 0, to: samples.count, by: step) {
            let s = samples[k]
            guard s.pos > first, s.pos < last else { continue }
            // The reference's last sample at or before this one in the file.
            guard let lo = reference.lastIndex(atOrBefore: s.pos, by: \.pos), lo + 1 < reference.count else { continue }
            let (a, b) = (reference[lo], reference[lo + 1])
            guard b.pos - a.pos <= wideGap else { continue }
            let at = a.seconds + (b.pos > a.pos ? (b.seconds - a.seconds) * Double(s.pos - a.pos) / Double(b.pos - a.pos) : 0)
            offsets.append((s.pos, s.seconds - at))
        }
        guard offsets.count >= minimumCompared else { return nil }
        offsets.sort { $0.pos < $1.pos }
        let quarter = offsets.count / 4
        return median(offsets.suffix(quarter).map(\.seconds)) - median(offsets.prefix(quarter).map(\.seconds))
    }

    static func indexSamples(_ st: UnsafeMutablePointer<AVStream>) -> [Sample] {
        let count = min(Int(avformat_index_get_entries_count(st)), 1 << 22)
        let tb = st.pointee.time_base
        guard tb.num > 0, tb.den > 0 else { return [] }
        var samples: [Sample] = []
        samples.reserveCapacity(count)
        for k in 0..<count {
            guard let e = avformat_index_get_entry(st, Int32(k)), e.pointee.pos >= 0,
                  let at = seconds(e.pointee.timestamp, tb) else { continue }
            samples.append(Sample(pos: e.pointee.pos, seconds: at))
        }
        return samples
    }

    static func span(_ samples: [Sample]) -> Double {
        guard let lo = samples.map(\.seconds).min(), let hi = samples.map(\.seconds).max() else { return 0 }
        return hi - lo
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    static func format(_ seconds: Double) -> String { Format.fixed(seconds, decimals: seconds >= 100 ? 0 : 2) }
}
