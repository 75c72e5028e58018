import CFFmpeg
import KilnCore

/// Whether interlaced pictures at 29.97 (or 30) a second carry film by 3:2 pulldown baked
/// into them (hard telecine: a US broadcast or DVD of a film or a scripted series). Such a
/// stream repeats one field in two of every five frames; matched back into film frames
/// (`fieldmatch`, `decimate`) it is 23.976 progressive pictures, sharp and without the
/// judder and half-resolution frames a deinterlacer makes of it at 29.97.
///
/// The probe decodes windows of pictures (`windowStarts`, each from a keyframe) and
/// compares each field with the same field of the picture before (`kiln_field_motion`).
/// Pulldown's cadence shows in each field's motion relative to its picture's larger one,
/// averaged by the picture's place in a cycle of five: at one place the top field hardly
/// moves (it repeats), at another the bottom one, while elsewhere both move alike. Video
/// shot interlaced (fields are moments of their own) and progressive video stored
/// interlaced (both fields move together) have no such places. Averaging over the cycle,
/// rather than asking each picture for a still field, holds for grain and noise: a
/// repeated field of grainy film moves by its coding noise, not by nothing (grain at 8
/// had hidden every repeat from a per-picture test). Still pictures say nothing: a window
/// with too few moving ones is undecided, and windows further into the file are looked at
/// (a black or still opening had left whole films deinterlaced). The windows vote.
struct TelecineSurvey {
    /// Where windows start, as shares of the file; each is read until `movingWanted`
    /// pictures moved or `windowFrames` were decoded.
    static let windowStarts = [0.0, 0.3, 0.6]
    static let windowFrames = 150
    static let movingWanted = 60
    /// Fewer moving pictures than this leave a window undecided.
    static let movingNeeded = 30
    /// A field's mean difference (8-bit code values) below this in both fields: a still picture.
    static let motionFloor = 1.0
    /// At a cadence place, a field's relative motion at most this share of its usual.
    static let dipRatio = 0.75

    /// Per place in the cycle of five: the sums of each field's motion over its picture's
    /// larger one, and how many moving pictures there were.
    private var top = [Double](repeating: 0, count: 5)
    private var bottom = [Double](repeating: 0, count: 5)
    private var counts = [Int](repeating: 0, count: 5)
    private(set) var moving = 0

    /// Counts the field motion of the `index`-th picture of a window.
    mutating func observe(top t: Double, bottom b: Double, index: Int) {
        let most = max(t, b)
        guard most >= Self.motionFloor else { return }
        moving += 1
        top[index % 5] += t / most
        bottom[index % 5] += b / most
        counts[index % 5] += 1
    }

    /// Film (true), video (false), or nil with too few moving pictures to say.
    var verdict: Bool? {
        guard moving >= Self.movingNeeded, counts.allSatisfy({ $0 > 0 }) else { return nil }
        func dip(_ sums: [Double]) -> (place: Int, deep: Bool) {
            let means = (0..<5).map { sums[$0] / Double(counts[$0]) }
            let place = means.indices.min { means[$0] < means[$1] }!
            let usual = means.indices.filter { $0 != place }.map { means[$0] }.reduce(0, +) / 4
            return (place, means[place] < usual * Self.dipRatio)
        }
        let t = dip(top), b = dip(bottom)
        return t.deep && b.deep && t.place != b.place
    }

    /// Whether a stream is one a survey looks at: interlaced, at 29.97 or 30 pictures a second.
    static func applies(to stream: StreamInfo) -> Bool {
        guard stream.fieldOrder?.isInterlaced == true, let fps = stream.frameRate else { return false }
        return fps > 29.9 && fps < 30.05
    }

    /// Surveys stream `index` of `demuxer` window by window; nil when no window could say
    /// or they are split. The demuxer is left wherever the reading stopped.
    static func survey(_ demuxer: Demuxer, stream index: Int) -> Bool? {
        var film = 0, video = 0
        for start in windowStarts {
            guard seek(demuxer, stream: index, to: start) else { continue }
            switch window(demuxer, stream: index) {
            case true?: film += 1
            case false?: video += 1
            case nil: break
            }
            if film >= 2 || video >= 2 { break }
        }
        return film == video ? nil : film > video
    }

    /// Puts the demuxer at `share` of the file: by byte where times may jump (MPEG-TS/PS),
    /// else by time through the stream's index.
    private static func seek(_ demuxer: Demuxer, stream index: Int, to share: Double) -> Bool {
        if share == 0 { return (try? demuxer.rewind()) != nil }
        if demuxer.hasDiscontinuousTimestamps {
            guard let size = FileIO.size(atPath: demuxer.path), size > 0 else { return false }
            return demuxer.seek(stream: -1, to: Int64(Double(size) * share), flags: AVSEEK_FLAG_BYTE) >= 0
        }
        let st = demuxer.stream(index)
        let duration = st.pointee.duration != noPTS && st.pointee.duration > 0 ? st.pointee.duration
            : rescale(demuxer.context.pointee.duration, from: AVRational(num: 1, den: Int32(AV_TIME_BASE)), to: st.pointee.time_base)
        guard duration > 0 else { return false }
        let begin = st.pointee.start_time != noPTS ? st.pointee.start_time : 0
        return demuxer.seek(stream: Int32(index), to: begin + Int64(Double(duration) * share), flags: AVSEEK_FLAG_BACKWARD) >= 0
    }

    /// Decodes one window from the next keyframe on; its verdict.
    private static func window(_ demuxer: Demuxer, stream index: Int) -> Bool? {
        guard let decoder = try? Decoder(stream: demuxer.stream(index), threads: 2),
              let packet = try? Packet(), let previous = try? Frame() else { return nil }
        var survey = TelecineSurvey()
        var frames = 0, packets = 0, started = false
        let look = { (frame: Frame) throws(KilnError) in
            guard frames < windowFrames, survey.moving < movingWanted else { return }
            var t = 0.0, b = 0.0
            if previous.pointer.pointee.data.0 != nil, kiln_field_motion(frame.pointer, previous.pointer, &t, &b) == 0 {
                survey.observe(top: t, bottom: b, index: frames)
            }
            frames += 1
            previous.unref()
            guard av_frame_ref(previous.pointer, frame.pointer) >= 0 else {
                throw KilnError(.resourceLimit, stage: .probe, "out of memory for a picture")
            }
        }
        // Packets of other streams count too, so a stream that stops early ends the read.
        while frames < windowFrames, survey.moving < movingWanted, packets < windowFrames * 16 {
            guard (try? demuxer.read(into: packet)) == true else {
                try? decoder.decode(nil, look)
                break
            }
            defer { packet.unref() }
            packets += 1
            guard packet.streamIndex == Int32(index) else { continue }
            // From a keyframe: pictures before it decode from references never seen.
            if !started, packet.pointer.pointee.flags & AV_PKT_FLAG_KEY == 0 { continue }
            started = true
            do { try decoder.decode(packet, look) } catch { return nil }
        }
        return survey.verdict
    }
}
