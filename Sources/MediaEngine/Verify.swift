import CFFmpeg
import KilnCore
#if canImport(Glibc)
import Glibc
#endif

/// Checks a finished output against its plan before it may take the destination's name:
/// the index is in front, the streams and codecs are the ones planned, the duration
/// matches the source, and the first and last second of every audio and video stream
/// decode. Returns the output as a fresh probe sees it.
enum Verifier {
    /// How far the output's duration may stray from the source's.
    static func durationTolerance(_ seconds: Double) -> Double { max(0.5, seconds * 0.02) }
    static let lastPictureAllowance = 5.0

    /// `witness`: keyframes of a copied video stream already decoded during the copy; used
    /// for the output's keyframes that are byte for byte those packets.
    /// `sourceDamaged(stream, from)`: whether the source is damaged where an output stream's
    /// second from `from` is (a copied stream: the same bytes). Such a second may carry the
    /// source's corrupt packets as long as some of it decodes, as a transcode conceals them;
    /// without it every second must decode cleanly.
    /// `undecodable(stream)`: told which output stream failed to decode, before the error.
    /// `lastPicture`: the length of the source's pictures, by which the output may run past
    /// the length the source declares where they last longer than the tolerance (up to
    /// `lastPictureAllowance`): MPEG-TS says nothing of how long a picture lasts, and the
    /// last of a slideshow at a picture every 2.5 s lasts its 2.5 s in the copy, past the
    /// 0.5 s libavformat guessed for it.
    static func verify(path: String, plan: Plan, expectedDuration: Double, lastPicture: Double = 0, cancellation: Cancellation,
                       witness: KeyframeWitness? = nil,
                       sourceDamaged: ((_ stream: Int, _ from: Double) -> Bool)? = nil,
                       undecodable: ((_ stream: Int) -> Void)? = nil) throws(KilnError) -> MediaInfo {
        try checkIndexFirst(path: path)
        let demuxer: Demuxer
        do { demuxer = try Demuxer(path: path, cancellation: cancellation, analyze: false) } catch {
            throw KilnError(.verifyFailed, stage: .verify, "the output cannot be reopened: \(error.message)")
        }
        var info = try Prober.describe(demuxer, scan: false)
        let video = info.streams.filter { $0.type == .video }
        let audio = info.streams.filter { $0.type == .audio }
        let subtitles = info.streams.filter { $0.type == .subtitle }
        func fail(_ why: String) -> KilnError { KilnError(.verifyFailed, stage: .verify, why) }

        if let v = plan.video {
            guard video.count == 1, video[0].codec == v.codec else {
                throw fail("expected one \(v.codec) video stream, found \(video.map(\.codec))")
            }
            if v.action == .transcode, video[0].width != v.width || video[0].height != v.height {
                throw fail("expected \(v.width)x\(v.height) video, found \(video[0].width ?? 0)x\(video[0].height ?? 0)")
            }
        } else if !video.isEmpty {
            throw fail("expected no video stream, found \(video.count)")
        }
        if let a = plan.audio {
            guard audio.count == 1, audio[0].codec == a.codec else {
                throw fail("expected one \(a.codec) audio stream, found \(audio.map(\.codec))")
            }
            if a.action == .transcode, audio[0].channels != a.channels {
                throw fail("expected \(a.channels) audio channels, found \(audio[0].channels ?? 0)")
            }
        } else if !audio.isEmpty {
            throw fail("expected no audio stream, found \(audio.count)")
        }
        let converted = plan.subtitles.filter { $0.action == .convert }.count
        guard subtitles.count == converted, subtitles.allSatisfy({ $0.codec == "mov_text" }) else {
            throw fail("expected \(converted) mov_text subtitle streams, found \(subtitles.map(\.codec))")
        }
        // Each stream from its start (the output starts at zero; a stream may start later,
        // as the source's did) to its end.
        func start(_ s: StreamInfo) -> Double { max(0, s.startSeconds ?? 0) }
        let avDuration = (video + audio).compactMap { s in s.durationSeconds.map { start(s) + $0 } }.max() ?? info.durationSeconds
        // Pictures shorter than the tolerance are within it anyway: 13 frames of an AVI
        // written again still run past it, and are the source's damage.
        let tolerance = durationTolerance(expectedDuration)
        let slideshow = lastPicture > tolerance ? min(lastPicture, lastPictureAllowance) : 0
        if expectedDuration > 0, avDuration - expectedDuration > tolerance + slideshow || expectedDuration - avDuration > tolerance {
            throw fail("the output lasts \(Format.fixed(avDuration, decimals: 2)) s but the source \(Format.fixed(expectedDuration, decimals: 2)) s")
        }
        // Audio first: a witness still decoding the video's last keyframe gets the time.
        for s in audio + video {
            let streamEnd = s.durationSeconds.map { start(s) + $0 } ?? avDuration
            let trusted = s.type == .video ? witness.flatMap { sameParameters(demuxer.stream(s.index), $0) ? $0 : nil } : nil
            let format: Int32
            do throws(KilnError) {
                format = try decodes(demuxer, stream: s.index, from: start(s), streamEnd: streamEnd, cancellation: cancellation,
                                     witness: trusted, sourceDamaged: sourceDamaged)
                try decodes(demuxer, stream: s.index, from: max(start(s), streamEnd - 1), streamEnd: streamEnd, cancellation: cancellation,
                            witness: trusted, sourceDamaged: sourceDamaged)
            } catch {
                if error.code == .verifyFailed { undecodable?(s.index) }
                throw error
            }
            // Without analysis the pixel format is only known once a picture is decoded.
            if s.type == .video, s.pixelFormat == nil, let i = info.streams.firstIndex(where: { $0.index == s.index }),
               let desc = av_pix_fmt_desc_get(AVPixelFormat(rawValue: format)) {
                info.streams[i].pixelFormat = string(desc.pointee.name)
                info.streams[i].bitDepth = Int(desc.pointee.comp.0.depth)
            }
        }
        return info
    }

    /// Whether the output stream's decoder setup (codec and sample entry) is the one the
    /// witness decodes with.
    static func sameParameters(_ st: UnsafeMutablePointer<AVStream>, _ witness: KeyframeWitness) -> Bool {
        let out = st.pointee.codecpar.pointee, seen = witness.parameters.pointer.pointee
        guard out.codec_id == seen.codec_id, out.extradata_size == seen.extradata_size else { return false }
        return out.extradata_size == 0 || memcmp(out.extradata, seen.extradata, Int(out.extradata_size)) == 0
    }

    /// Reads a second of one stream from `start` (from the keyframe before it) and fails
    /// unless it decodes without error. Audio is decoded in full. Video decodes one
    /// picture, the keyframe that opens that second, and its packets are read on to the
    /// second's end: that proves what a remux or mux can break — parameter sets in the
    /// sample entry, the index reaching both ends, a decodable start — without paying for
    /// a second of 4K HEVC (seconds of CPU) on every artifact. One picture, not every
    /// keyframe in reach: an HEVC decoder holds reference pictures for each keyframe it is
    /// given, and invents those an open-GOP CRA names unless it is decoded as the IDR it is
    /// when decoding starts there (`Decoder.decodeKeyframeAlone`).
    /// The stream's packets must also reach the second's end (or `streamEnd`, what the
    /// index says the stream lasts): a file cut short keeps its index, and its last
    /// second would otherwise pass on whatever keyframe the seek found before the cut.
    /// Returns the decoded frames' format (pixel or sample format).
    @discardableResult
    static func decodes(_ demuxer: Demuxer, stream index: Int, from start: Double, streamEnd: Double,
                        cancellation: Cancellation, witness: KeyframeWitness? = nil,
                        sourceDamaged: ((_ stream: Int, _ from: Double) -> Bool)? = nil) throws(KilnError) -> Int32 {
        let second = try decodeSecond(demuxer, stream: index, from: start, streamEnd: streamEnd, cancellation: cancellation,
                                      witness: witness)
        // Half a second of slack: streams end a frame or an audio packet apart.
        guard second.reached >= second.end - 0.5 else {
            throw KilnError(.verifyFailed, stage: .verify,
                            "the output's stream \(index) stops at \(Format.fixed(max(0, second.reached), decimals: 2)) s, "
                            + "before \(Format.fixed(second.end, decimals: 2)) s (cut short?)")
        }
        guard second.decoded || (second.frames > 0 && sourceDamaged?(index, start) == true) else {
            throw KilnError(.verifyFailed, stage: .verify,
                            "the output's stream \(index) does not decode near \(Int(start)) s (\(second.frames) frames, \(second.errors) errors)")
        }
        return second.format
    }

    /// What decoding a second of one stream found (`decodeSecond`).
    struct Second {
        var frames = 0
        var errors = 0
        var witnessFailed = false
        /// Video: whether a keyframe was reached and decoded (or taken from the witness).
        var keyframeSent = false
        /// Where the stream's packets reached, and where the second ends.
        var reached = -Double.infinity
        var end = 0.0
        /// The decoded frames' pixel or sample format.
        var format: Int32 = -1
        var decoded: Bool { frames > 0 && errors == 0 && !witnessFailed }
    }

    /// Decodes a second of one stream from `start` as `decodes` describes, and says what
    /// it found. Also used on a source, to tell its damage from a failed write.
    static func decodeSecond(_ demuxer: Demuxer, stream index: Int, from start: Double, streamEnd: Double,
                             cancellation: Cancellation, witness: KeyframeWitness? = nil) throws(KilnError) -> Second {
        let st = demuxer.stream(index)
        let isVideo = st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
        // Opened when a packet needs it: a video keyframe the witness decoded needs none, and
        // a UHD HEVC decoder's context alone is most of a megabyte.
        var opened: Decoder? = nil
        // A keyframe that is no intra picture (a recovery point) is decoded on from, with
        // every packet of the second after it, by a decoder that keeps its references.
        var recovering: Decoder? = nil
        func open(recovering: Bool) throws(KilnError) -> Decoder {
            do { return try Decoder(stream: st, threads: 1, sharedPicture: !recovering, showUnrecovered: recovering) } catch {
                throw KilnError(.verifyFailed, stage: .verify, "the output's stream \(index) has no decoder: \(error.message)")
            }
        }
        func decoder() throws(KilnError) -> Decoder {
            if let opened { return opened }
            opened = try open(recovering: false)
            return opened!
        }
        if !isVideo || witness == nil { _ = try decoder() }
        let target = Int64(start * Double(kiln_time_base()))
        // Seek on this stream: seeking the default (video) stream would land on its keyframe
        // before `start`, and an audio check would then decode from there, seconds earlier,
        // over a stretch that depends on the video's GOPs (a transcode's differ from the
        // source's, so the output and the source would be judged on different sound).
        guard demuxer.seek(stream: Int32(index), to: rescale(target, from: kiln_time_base_q(), to: st.pointee.time_base),
                           flags: AVSEEK_FLAG_BACKWARD) >= 0
                || demuxer.seek(stream: -1, to: target, flags: AVSEEK_FLAG_BACKWARD) >= 0 else {
            throw KilnError(.verifyFailed, stage: .verify, "the output cannot be read from \(Int(start)) s (seek failed)")
        }
        let end = min(start + 1, streamEnd)
        var frames = 0, reads = 0, own = 0, pictureSent = false, witnessFailed = false
        var reached = -Double.infinity
        let packet = try Packet()
        var done = false
        // The stream's own packets are counted, and the others only to bound a read gone
        // wrong: from a keyframe that opens ten pictures a minute, a sound track's packets
        // (47 a second) before its last second are more than 20,000, and the video's end
        // was not reached (a slideshow's output refused as cut short).
        var ended = false, lastPosition: Int64 = -1
        while !done, own < 20_000, reads < 1_000_000 {
            reads += 1
            guard try demuxer.read(into: packet) else { ended = true; break }
            defer { packet.unref() }
            try cancellation.check(.verify)
            guard packet.streamIndex == Int32(index) else { continue }
            own += 1
            lastPosition = packet.pointer.pointee.pos
            let t = seconds(packet.pointer.pointee.pts, st.pointee.time_base)
            if let t {
                reached = max(reached, t + (seconds(packet.pointer.pointee.duration, st.pointee.time_base) ?? 0))
            }
            if isVideo {
                if !pictureSent && packet.pointer.pointee.flags & AV_PKT_FLAG_KEY != 0 {
                    if let entry = witness?.entry(matching: packet) {
                        // These very bytes, through this very decoder setup, were decoded
                        // during the copy.
                        if entry.verdict { frames += 1 } else { witnessFailed = true }
                    } else if !Decoder.decodesAlone(packet, parameters: st.pointee.codecpar) {
                        // Periodic intra refresh: the keyframe is a P-picture whose refresh
                        // completes over the pictures after it. Decoding on from it (its
                        // pictures shown before they are whole) is what a player does.
                        let decoder = try open(recovering: true)
                        recovering = decoder
                        try decoder.decode(packet) { (_: Frame) throws(KilnError) in frames += 1 }
                    } else {
                        // The one picture: sent, then drained at once, so the decoder never
                        // holds more than it and the references it names.
                        try decoder().decodeKeyframeAlone(packet) { (_: Frame) throws(KilnError) in frames += 1 }
                    }
                    pictureSent = true
                } else if let recovering, !done {
                    try recovering.decode(packet) { (_: Frame) throws(KilnError) in frames += 1 }
                }
                if pictureSent, let t, t >= end { done = true }
                continue
            }
            try decoder().decode(packet) { (frame: Frame) throws(KilnError) in
                frames += 1
                if let t = seconds(frame.pointer.pointee.best_effort_timestamp, st.pointee.time_base), t >= end { done = true }
            }
        }
        try opened?.decode(nil) { (_: Frame) throws(KilnError) in frames += 1 }
        try recovering?.decode(nil) { (_: Frame) throws(KilnError) in frames += 1 }
        // The file ended on the last sample its index lists for the stream: the stream is
        // whole, however long that sample's packet says it lasts. An encoder's packets of
        // sparse pictures (Theora's unchanged frames are no packets) carry no length, and
        // the last, shown for half a second to the end, reached only its own start.
        if ended, lastPosition >= 0, case let count = avformat_index_get_entries_count(st), count > 0,
           let last = avformat_index_get_entry(st, count - 1), last.pointee.pos == lastPosition {
            reached = max(reached, end)
        }
        // Without a decoder (the witness answered), the format is the one it was opened
        // with: the stream's parameters, which verification found equal to the source's.
        let format = (opened ?? recovering).map { d in
            d.context.pointee.codec_type == AVMEDIA_TYPE_VIDEO ? d.context.pointee.pix_fmt.rawValue : d.context.pointee.sample_fmt.rawValue
        } ?? st.pointee.codecpar.pointee.format
        return Second(frames: frames, errors: (opened?.corruptPackets ?? 0) + (recovering?.corruptPackets ?? 0), witnessFailed: witnessFailed, keyframeSent: pictureSent,
                      reached: reached, end: end, format: format)
    }

    /// MP4 top-level boxes: the `moov` index must come before `mdat`, so players can
    /// start before the whole file has arrived (faststart).
    static func checkIndexFirst(path: String) throws(KilnError) {
        var st = stat()
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY), fstat(file.rawValue, &st) == 0 else {
            throw KilnError(.verifyFailed, stage: .verify, "the output cannot be read back")
        }
        let boxes: [FastStart.Box]
        do { boxes = try FastStart.topLevelBoxes(file, fileSize: Int64(st.st_size)) } catch {
            throw KilnError(.verifyFailed, stage: .verify, "the output's boxes cannot be read: \(error.message)")
        }
        let types = boxes.map(\.type)
        guard let moov = types.firstIndex(of: "moov"), moov < types.firstIndex(of: "mdat") ?? types.count else {
            throw KilnError(.verifyFailed, stage: .verify, "the output's index (moov) is not before its media data")
        }
    }
}
