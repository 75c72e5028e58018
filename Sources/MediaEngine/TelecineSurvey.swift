import CFFmpeg
import KilnCore

/// Whether interlaced pictures at 29.97 (or 30) a second carry film by 3:2 pulldown baked
/// into them (hard telecine: a US broadcast or DVD of a film or a scripted series). Such a
/// stream repeats one field in two of every five frames; matched back into film frames
/// (`fieldmatch`, `decimate`) it is 23.976 progressive pictures, sharp and without the
/// judder and half-resolution frames a deinterlacer makes of it at 29.97.
///
/// The probe decodes up to `frameLimit` pictures and compares each field with the same
/// field of the picture before (`kiln_field_motion`). Of the pictures that moved, a share of
/// `repeatShare` or more with one field still while the other moved is film: 2 in 5 for
/// pulldown, none for video shot interlaced (its fields are moments of their own) or
/// progressive video stored interlaced (both fields move together). Still pictures say
/// nothing and are not counted; too few moving ones leave the stream as it is (deinterlaced).
struct TelecineSurvey {
    static let frameLimit = 180
    /// Moving pictures enough to decide on, and where the survey stops once it has them.
    static let movingNeeded = 40
    /// A field mean difference (8-bit code values) below this is a still picture.
    static let motionFloor = 1.0
    /// A field that moved less than this share of its picture's other field is a repeat.
    static let repeatRatio = 0.3
    static let repeatShare = 0.25

    private(set) var moving = 0
    private(set) var repeated = 0

    /// Counts one picture's field motion.
    mutating func observe(top: Double, bottom: Double) {
        let most = max(top, bottom)
        guard most >= Self.motionFloor else { return }
        moving += 1
        if min(top, bottom) < most * Self.repeatRatio { repeated += 1 }
    }

    var decided: Bool { moving >= Self.movingNeeded }
    /// Film, when enough pictures moved to say and a share of them repeated a field.
    var telecined: Bool { decided && Double(repeated) >= Double(moving) * Self.repeatShare }

    /// Whether a stream is one a survey looks at: interlaced, at 29.97 or 30 pictures a second.
    static func applies(to stream: StreamInfo) -> Bool {
        guard stream.fieldOrder?.isInterlaced == true, let fps = stream.frameRate else { return false }
        return fps > 29.9 && fps < 30.05
    }

    /// Reads the stream `index` of `demuxer` from its start and decodes up to `frameLimit`
    /// of its pictures; nil when no decoder opens or too few pictures moved to say. The
    /// demuxer is left where the reading stopped.
    static func survey(_ demuxer: Demuxer, stream index: Int) -> Bool? {
        let st = demuxer.stream(index)
        guard (try? demuxer.rewind()) != nil, let decoder = try? Decoder(stream: st, threads: 2),
              let packet = try? Packet(), let previous = try? Frame() else { return nil }
        var result = TelecineSurvey()
        var frames = 0, packets = 0, started = false
        let look = { (frame: Frame) throws(KilnError) in
            guard frames < frameLimit, !result.decided else { return }
            frames += 1
            var top = 0.0, bottom = 0.0
            if previous.pointer.pointee.data.0 != nil,
               kiln_field_motion(frame.pointer, previous.pointer, &top, &bottom) == 0 {
                result.observe(top: top, bottom: bottom)
            }
            previous.unref()
            guard av_frame_ref(previous.pointer, frame.pointer) >= 0 else {
                throw KilnError(.resourceLimit, stage: .probe, "out of memory for a picture")
            }
        }
        // Packets of other streams count too, so a stream that stops early ends the read.
        while frames < frameLimit, !result.decided, packets < frameLimit * 16 {
            guard (try? demuxer.read(into: packet)) == true else {
                try? decoder.decode(nil, look)
                break
            }
            defer { packet.unref() }
            packets += 1
            guard packet.streamIndex == Int32(index) else { continue }
            // From the first keyframe: pictures before it decode from references never seen.
            if !started, packet.pointer.pointee.flags & AV_PKT_FLAG_KEY == 0 { continue }
            started = true
            do { try decoder.decode(packet, look) } catch { return nil }
        }
        return result.decided ? result.telecined : nil
    }
}
