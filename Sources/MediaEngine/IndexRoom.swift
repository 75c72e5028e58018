import CFFmpeg
import KilnCore

/// How many bytes to leave free at the start of an output for its index (`moov`), which
/// the MP4 muxer only writes at the end: the index is then written into that room and no
/// media byte moves (`FastStart`). Moving them instead, even by inserting blocks in place,
/// drops the whole file from the page cache, and hashing and verifying it then read it
/// back from disk.
///
/// An index costs its fixed boxes plus a few bytes per sample (its size in `stsz`, its
/// duration and composition offset in `stts`/`ctts`, its chunk in `stco`/`stsc`), so the
/// room is estimated from each kept stream's sample count: exact where the source's index
/// lists them (MP4), else duration × rate with a margin, and never more than a sixteenth
/// of the source. Too little room only costs the blocks `FastStart` then inserts; too much
/// is a `free` box, about a thousandth of a film.
enum IndexRoom {
    /// Bytes per sample: libavformat's sample tables take 11–14 on interleaved audio and
    /// video (stsz 4; ctts 8 for video with B-frames; about one chunk offset per two
    /// samples), less where runs compress.
    static let bytesPerSample = 16.0
    /// Sample counts from a duration are stretched by this much (rates that drift, VFR).
    static let margin = 1.1
    /// The boxes every index has (movie, track and media headers, sample descriptions).
    static let fixedBytes: Int64 = 8 << 10
    /// The room is a whole number of these, so the media data starts page-aligned.
    static let granule: Int64 = 4096
    /// A subtitle track's roles for Apple's players (`TrackCharacteristics`): two `tagc` boxes at most.
    static let rolesBytes: Int64 = 128

    static func bytes(plan: Plan, demuxer: Demuxer, durationSeconds: Double) -> Int64 {
        let (samples, fixed) = estimate(plan: plan, demuxer: demuxer, durationSeconds: durationSeconds)
        let estimate = Double(fixed) + samples * bytesPerSample
        // An index is a small fraction of what it indexes: a duration or rate gone wrong
        // in a damaged header must not leave megabytes of zeros in a small file.
        let cap = Double(min((FileIO.size(atPath: demuxer.path) ?? 0) / 16 + (256 << 10), FastStart.maxIndexBytes))
        let room = estimate.isFinite ? Int64(min(estimate, cap)) : fixedBytes
        return (room + granule - 1) / granule * granule
    }

    /// The samples the output's index will list (with the margin), and the bytes of its
    /// boxes that do not grow with them.
    static func estimate(plan: Plan, demuxer: Demuxer, durationSeconds: Double) -> (samples: Double, fixedBytes: Int64) {
        let duration = durationSeconds.isFinite ? max(durationSeconds, 0) : 0
        var samples = 0.0
        var fixed = fixedBytes
        func stream(_ index: Int) -> UnsafeMutablePointer<AVStream>? {
            index >= 0 && index < demuxer.streamCount ? demuxer.stream(index) : nil
        }
        if let v = plan.video, let st = stream(v.sourceIndex) {
            let frames = st.pointee.nb_frames
            if v.action == .copy, frames > 0 {
                samples += Double(frames)
            } else {
                samples += duration * videoRate(st) * margin
            }
            fixed += Int64(st.pointee.codecpar.pointee.extradata_size)
        }
        if let a = plan.audio, let st = stream(a.sourceIndex) {
            let par = st.pointee.codecpar.pointee
            let frames = st.pointee.nb_frames
            if a.action == .copy, frames > 0 {
                samples += Double(frames)
            } else {
                let rate = Double(par.sample_rate > 0 ? par.sample_rate : 48_000)
                let perPacket = a.action == .copy ? samplesPerPacket(codec: par.codec_id, frameSize: par.frame_size)
                                                  : samplesPerPacket(encoder: a.codec)
                samples += duration * rate / perPacket * margin
            }
            fixed += Int64(par.extradata_size)
        }
        // A text cue is one sample and the gap before it another; where the source does not
        // count its cues, a cue a second is plenty. A text track's own boxes take ~500 bytes, its roles more (a teletext page's are known once read).
        // Captions (from the pictures, whose count says nothing of theirs) change a line at
        // a time: two samples a second.
        for sub in plan.subtitles where sub.action == .convert {
            if sub.closedCaptions == true {
                samples += 2 * duration
                fixed += 512 + rolesBytes
                continue
            }
            let st = stream(sub.sourceIndex)
            // A TTML sample is a document of any number of cues: its count says nothing of theirs.
            let cues = st.map { SubtitleLane.isTTML($0.pointee.codecpar.pointee) } == true ? 0 : st?.pointee.nb_frames ?? 0
            samples += cues > 0 ? Double(2 * cues + 1) : duration
            let hearingImpaired = (st?.pointee.disposition ?? 0) & (AV_DISPOSITION_HEARING_IMPAIRED | AV_DISPOSITION_CAPTIONS) != 0
            fixed += 512 + (sub.forced || hearingImpaired || sub.teletextPage != nil ? rolesBytes : 0)
        }
        // Chapters ride in a text track of their own: a sample (and a title) each.
        fixed += Int64(demuxer.context.pointee.nb_chapters) * 256
        fixed += metadataBytes(demuxer.context.pointee.metadata)
        return (samples, fixed)
    }

    /// Frames per second to expect: the larger of the average and the container's base
    /// rate, within reason (a VFR file's base rate can be its time base, 1000/s in MKV).
    static func videoRate(_ st: UnsafeMutablePointer<AVStream>) -> Double {
        let rates = [st.pointee.avg_frame_rate, st.pointee.r_frame_rate].map { $0.den > 0 ? Double($0.num) / Double($0.den) : 0 }
        let plausible = rates.filter { $0 > 0 && $0 <= 120 }
        return plausible.max() ?? 60
    }

    /// Audio samples per packet of a copied stream: the codec's frame where libavcodec
    /// knows it, else the shortest frame its codec allows.
    static func samplesPerPacket(codec: AVCodecID, frameSize: Int32) -> Double {
        if frameSize > 0 { return Double(frameSize) }
        switch codec {
        case AV_CODEC_ID_AAC: return 1024
        case AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3: return 1536  // the MP4 muxer joins E-AC-3 blocks into 6-block samples
        case AV_CODEC_ID_MP3, AV_CODEC_ID_MP2: return 576
        case AV_CODEC_ID_OPUS: return 120                     // 2.5 ms frames at 48 kHz
        case AV_CODEC_ID_TRUEHD, AV_CODEC_ID_MLP: return 40
        default: return 256
        }
    }

    /// Audio samples per packet of what Kiln encodes.
    static func samplesPerPacket(encoder codec: String) -> Double {
        codec == "aac" ? 1024 : 1536
    }

    /// The container tags copied into the output's `udta`.
    static func metadataBytes(_ dict: OpaquePointer?) -> Int64 {
        var total: Int64 = 0
        var e: UnsafeMutablePointer<AVDictionaryEntry>? = nil
        while let entry = av_dict_get(dict, "", e, AV_DICT_IGNORE_SUFFIX) {
            e = entry
            total += Int64(strlen(entry.pointee.key) + strlen(entry.pointee.value)) + 32
        }
        return total
    }
}
