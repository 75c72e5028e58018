import CFFmpeg
import KilnCore

/// What the fields of a stream carry, found by decoding windows of its pictures
/// (`windowStarts`, each from a keyframe) at three places in the file:
///
/// - for interlaced pictures, whether each picture's fields weave into a whole picture
///   with its own or a neighbour's (`WeaveSurvey`): progressive pictures stored interlaced
///   (PAL's 25PsF, most films and series on DVB and PAL DVDs; 29.97p in interlaced MPEG-2;
///   film in 2:2 shifted by a field; 3:2 pulldown too) rather than video shot interlaced,
///   whose fields are moments of their own;
/// - at 29.97 or 30, whether they carry film by 3:2 pulldown (`TelecineSurvey`): in
///   interlaced pictures, and in SD pictures flagged progressive (a DVD or an NTSC
///   broadcast re-encoded without its pulldown taken out, 2 pictures in 5 combed). Larger
///   progressive pictures at 30 are phone and camera clips, whose probe would pay for a
///   survey that finds nothing.
///
/// Still pictures say nothing of either: a window with too few moving ones is undecided,
/// and windows further into the file are looked at (a black or still opening had left
/// whole films deinterlaced). The windows vote, each question on its own.
struct FieldSurvey {
    /// Where windows start, as shares of the file; each is read until each question asked
    /// has `movingWanted` moving pictures or `windowFrames` were decoded.
    static let windowStarts = [0.0, 0.3, 0.6]
    static let windowFrames = 150
    static let movingWanted = 60
    /// Fewer moving pictures than this leave a window undecided.
    static let movingNeeded = 30
    /// The most lines of a progressive picture surveyed for pulldown.
    static let progressiveCadenceLines = 576
    /// The largest picture surveyed at all (2K's 2048x1080 with room). No broadcast, disc or
    /// camera format stores larger pictures interlaced or by pulldown (UHD's are all
    /// progressive), while a window of 150 UHD pictures costs seconds of decoding: a
    /// larger picture flagged interlaced is deinterlaced unsurveyed, as before surveys.
    static let largestSurveyedArea = 2048 * 1152

    struct Findings: Equatable {
        /// `StreamInfo.telecined`; nil when not asked.
        var telecined: Bool?
        /// `StreamInfo.progressiveFrames`; nil when not asked.
        var progressiveFrames: Bool?
    }

    /// The questions a survey of a stream asks: `weave` for interlaced pictures, `cadence`
    /// at 29.97 or 30 pictures a second (the rates 3:2 pulldown makes of film), interlaced
    /// or SD at a constant rate.
    struct Questions: Equatable {
        var weave = false
        var cadence = false
        var any: Bool { weave || cadence }
    }

    static func questions(for stream: StreamInfo) -> Questions {
        guard let width = stream.width, let height = stream.height, width * height <= largestSurveyedArea,
              FieldFilters.fit(width: width, height: height) else { return Questions() }
        let interlaced = stream.fieldOrder?.isInterlaced == true
        let fps = stream.frameRate ?? 0
        let pulldownRate = fps > 29.9 && fps < 30.05
        let sd = height <= progressiveCadenceLines && stream.variableFrameRate != true
        return Questions(weave: interlaced, cadence: pulldownRate && (interlaced || sd))
    }

    /// Surveys stream `index` of `demuxer` window by window; each finding nil when no
    /// window could say or they are split. The demuxer is left wherever the reading stopped.
    static func survey(_ demuxer: Demuxer, stream index: Int, asking questions: Questions) -> Findings {
        var film = Votes(), whole = Votes()
        for start in windowStarts {
            guard seek(demuxer, stream: index, to: start) else { continue }
            guard let (telecine, weave) = window(demuxer, stream: index, asking: questions) else { continue }
            if questions.cadence { film.add(telecine.verdict) }
            if questions.weave { whole.add(weave.verdict) }
            if (!questions.cadence || film.settled) && (!questions.weave || whole.settled) { break }
        }
        return Findings(telecined: questions.cadence ? film.outcome : nil, progressiveFrames: questions.weave ? whole.outcome : nil)
    }

    /// The windows' verdicts on one question.
    private struct Votes {
        var yes = 0, no = 0
        mutating func add(_ verdict: Bool?) {
            switch verdict {
            case true?: yes += 1
            case false?: no += 1
            case nil: break
            }
        }
        /// Two of three windows agree: the third cannot change the outcome.
        var settled: Bool { yes >= 2 || no >= 2 }
        var outcome: Bool? { yes == no ? nil : yes > no }
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

    /// Decodes one window from the next keyframe on, each picture looked at once its next
    /// one is there (the weave wants the bottom fields on both sides). nil when the stream
    /// cannot be decoded there.
    private static func window(_ demuxer: Demuxer, stream index: Int, asking questions: Questions) -> (TelecineSurvey, WeaveSurvey)? {
        guard let decoder = try? Decoder(stream: demuxer.stream(index), threads: 2), let packet = try? Packet(),
              let older = try? Frame(), let previous = try? Frame() else { return nil }
        var telecine = TelecineSurvey(), weave = WeaveSurvey()
        var frames = 0, packets = 0, started = false
        var enough: Bool {
            frames >= windowFrames
                || ((!questions.weave || weave.moving >= movingWanted) && (!questions.cadence || telecine.moving >= movingWanted))
        }
        let look = { (frame: Frame) throws(KilnError) in
            guard !enough else { return }
            var t = 0.0, b = 0.0
            if questions.cadence, previous.pointer.pointee.data.0 != nil, kiln_field_motion(frame.pointer, previous.pointer, &t, &b) == 0 {
                telecine.observe(top: t, bottom: b, index: frames)
            }
            var combed = [Int64](repeating: 0, count: 5), above = combed, below = combed, sampled: Int64 = 0
            if questions.weave, older.pointer.pointee.data.0 != nil,
               kiln_weave_combing(older.pointer, previous.pointer, frame.pointer, Int32(WeaveSurvey.combThreshold),
                                  &combed, &above, &below, &sampled) == 0 {
                weave.observe(combed: combed, above: above, below: below, sampled: sampled)
            }
            frames += 1
            older.unref()
            av_frame_move_ref(older.pointer, previous.pointer)
            guard av_frame_ref(previous.pointer, frame.pointer) >= 0 else {
                throw KilnError(.resourceLimit, stage: .probe, "out of memory for a picture")
            }
        }
        // Packets of other streams count too, so a stream that stops early ends the read.
        while !enough, packets < windowFrames * 16 {
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
        return (telecine, weave)
    }
}

/// Whether pictures at 29.97 (or 30) a second carry film by 3:2 pulldown baked into them
/// (hard telecine: a US broadcast or DVD of a film or a scripted series). Such a
/// stream repeats one field in two of every five frames; matched back into film frames
/// (`fieldmatch`, `decimate`) it is 23.976 progressive pictures, sharp and without the
/// judder and half-resolution frames a deinterlacer makes of it at 29.97.
///
/// Each field is compared with the same field of the picture before (`kiln_field_motion`).
/// Pulldown's cadence shows in each field's motion relative to its picture's larger one,
/// averaged by the picture's place in a cycle of five: at one place the top field hardly
/// moves (it repeats), at another the bottom one, while elsewhere both move alike. Video
/// shot interlaced (fields are moments of their own) and progressive video stored
/// interlaced (both fields move together) have no such places. Averaging over the cycle,
/// rather than asking each picture for a still field, holds for grain and noise: a
/// repeated field of grainy film moves by its coding noise, not by nothing (grain at 8
/// had hidden every repeat from a per-picture test).
struct TelecineSurvey {
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
        guard moving >= FieldSurvey.movingNeeded, counts.allSatisfy({ $0 > 0 }) else { return nil }
        func dip(_ sums: [Double]) -> (place: Int, deep: Bool) {
            let means = (0..<5).map { sums[$0] / Double(counts[$0]) }
            let place = means.indices.min { means[$0] < means[$1] }!
            let usual = means.indices.filter { $0 != place }.map { means[$0] }.reduce(0, +) / 4
            return (place, means[place] < usual * Self.dipRatio)
        }
        let t = dip(top), b = dip(bottom)
        return t.deep && b.deep && t.place != b.place
    }
}

/// Whether each picture's fields weave whole with its own picture's other field or a
/// neighbour's (`kiln_weave_combing`): where the picture moves, a whole weave hardly combs
/// while most others do (a progressive picture has one or two whole weaves, a picture of
/// 3:2 pulldown two), so its least-combed weave has a small share of the median weave's
/// combing. Video shot interlaced combs about alike in three weaves, each half a picture's
/// time from the field they are woven with. Only combing beyond the least-combed weave's
/// counts, so detail (which combs alike in all five) and a picture mostly still around a
/// small moving part judge by the motion. Video tilting by one line a field weaves whole
/// by its own fields, each line then equal to its neighbour on one side: a whole weave's
/// lines must lie about as far from the line above as from the one below (`balance`).
struct WeaveSurvey {
    /// 8-bit code values by which a weave must comb beyond the least-combed one to count:
    /// above grain and coding noise.
    static let combThreshold = 16
    /// Combed pixels in the most-combed weave, as a share of those sampled, for a picture
    /// to count as moving.
    static let movingShare = 0.0005
    /// A picture weaves whole where its least-combed weave has at most this share of the
    /// median weave's combed pixels, and is video shot interlaced from this share on (or
    /// where its least-combed weave's lines each follow one neighbour); between, it says
    /// nothing (fine detail moving little combs a little in every weave).
    static let wholeRatio = 0.4
    static let interlacedRatio = 0.7
    /// The least of a whole weave's distances to the lines above and below, as a share of
    /// the larger.
    static let balance = 0.25
    /// Share of the pictures that say which they are that weave whole for progressive
    /// pictures, and at most for video shot interlaced; between the two the window is
    /// undecided.
    static let progressiveShare = 0.8
    static let interlacedShare = 0.5

    private(set) var moving = 0
    private(set) var whole = 0
    private(set) var interlaced = 0

    /// Counts a picture's weaves (`kiln_weave_combing`).
    mutating func observe(combed: [Int64], above: [Int64], below: [Int64], sampled: Int64) {
        let sorted = combed.sorted()
        guard sampled > 0, let most = sorted.last, Double(most) >= max(8, Double(sampled) * Self.movingShare),
              let best = combed.indices.min(by: { combed[$0] < combed[$1] }) else { return }
        moving += 1
        let ratio = Double(sorted[0]) / Double(max(1, sorted[2]))
        let balanced = Double(min(above[best], below[best])) >= Self.balance * Double(max(above[best], below[best]))
        if ratio <= Self.wholeRatio && balanced { whole += 1 } else if ratio >= Self.interlacedRatio || !balanced { interlaced += 1 }
    }

    /// Progressive pictures (true), video shot interlaced (false), or nil with too few
    /// moving pictures that say which they are, or a share in between.
    var verdict: Bool? {
        let saying = whole + interlaced
        guard moving >= FieldSurvey.movingNeeded, saying * 2 >= FieldSurvey.movingNeeded else { return nil }
        let share = Double(whole) / Double(saying)
        if share >= Self.progressiveShare { return true }
        if share <= Self.interlacedShare { return false }
        return nil
    }
}
