import KilnCore

/// A camera's microphone recorded as mono tracks: Sony XAVC and Canon Cinema EOS
/// (MXF) and pro cameras' MOV write CH1 and CH2 (the built-in microphone's left and right, or two
/// microphones on its inputs) as tracks of one channel each. A player plays the first
/// track alone, so a delivery made of it loses half the sound: the pair goes out as one
/// stereo sound (`AudioPlan.mergeSources`), the first track left, the second right, as
/// ffmpeg's `amerge` and editing tools make it.
///
/// Tracks pair up in order, two at a time (CH1+CH2, CH3+CH4), where both are uncompressed
/// (PCM: what cameras record; two coded mono tracks are more often two versions than one
/// microphone's sides), mono, at the same rate, and the same language and name; never a
/// commentary or description track.
struct MonoPairs {
    /// Each paired track's index → the pair (first, second).
    private var pairs: [Int: (first: StreamInfo, second: StreamInfo)] = [:]

    init(_ source: MediaInfo) {
        // A file whose index is damaged (a track's samples placed past its end) keeps to
        // one track, as before: a pair would fail with its damaged side.
        guard source.indexDamage == nil else { return }
        let audio = source.audioStreams
        var i = 0
        while i + 1 < audio.count {
            let (a, b) = (audio[i], audio[i + 1])
            // Nor is a track whose times drift from the pictures' (`timingDamage`) paired:
            // the first goes alone, where the pair would be refused.
            if Self.pairable(a, b), a.index != source.timingDamageStream, b.index != source.timingDamageStream {
                pairs[a.index] = (a, b)
                pairs[b.index] = (a, b)
                i += 2
            } else {
                i += 1
            }
        }
    }

    static func pairable(_ a: StreamInfo, _ b: StreamInfo) -> Bool {
        func mono(_ s: StreamInfo) -> Bool {
            s.channels == 1 && s.codec.hasPrefix("pcm_") && (s.sampleRate ?? 0) > 0 && s.formatChanges != true && s.encrypted != true
                && !AudioSelection.isSecondary(s)
        }
        return mono(a) && mono(b) && a.codec == b.codec && a.sampleRate == b.sampleRate
            && LanguageCode.terminologic(a.language) == LanguageCode.terminologic(b.language) && (a.title ?? "") == (b.title ?? "")
    }

    /// The stream whose channels follow `index`'s, where `index` begins a pair.
    func partner(of index: Int) -> Int? {
        guard let pair = pairs[index], pair.first.index == index else { return nil }
        return pair.second.index
    }

    /// Whether `index` is either track of a pair.
    func paired(_ index: Int) -> Bool { pairs[index] != nil }

    /// The sound `s` is part of, as the planner weighs it: the pair's first track with both
    /// tracks' channels and bitrate; `s` itself where it is in no pair.
    func sound(of s: StreamInfo) -> StreamInfo {
        guard let pair = pairs[s.index] else { return s }
        var merged = pair.first
        merged.channels = 2
        merged.channelLayout = "stereo"
        merged.bitRate = pair.first.bitRate.flatMap { a in pair.second.bitRate.map { a + $0 } }
        return merged
    }
}
