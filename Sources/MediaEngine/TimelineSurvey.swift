import CFFmpeg
import KilnCore

/// How long a recording whose timestamps may jump (MPEG-TS) lasts when they do jump.
///
/// libavformat takes such a file's length as its last time less its first, which across a
/// splice is any span: a recording whose clock jumped on by hours looks days long, two
/// recordings back to back the second of which was timed earlier look shorter than one.
/// Reading the whole file to know is what a prepare does, not a probe. So the survey reads
/// one stream's time at evenly spaced bytes. A stretch between two of them whose time ran
/// back, or ran on far more than its bytes could hold (twice the file's median seconds per
/// byte, plus the 10 s the pipeline leaves as a gap), is suspect: it is halved until it is
/// `readBytes` or less, then read packet by packet as the pipeline delivers it (a black
/// minute, next to no bytes for 60 s, is suspect at first and reads as continuous; a jump
/// stays a jump however small the stretch around it). A file of a few such reads is read
/// through at the first suspect stretch. Every stretch but the jumps counts its own times,
/// so the length is what the pipeline, which closes those jumps, delivers. When no stretch
/// is suspect, libavformat's length stands.
enum TimelineSurvey {
    /// Evenly spaced samples, and the most a survey reads, halvings included (hostile
    /// files whose times jump everywhere).
    static let samples = 32
    static let maximumSamples = 256
    /// How far past a sample's byte a reference packet is looked for.
    static let sampleBytes: Int64 = 8 << 20
    /// A suspect stretch this short is read through, packet by packet.
    static let readBytes: Int64 = 2 << 20

    private struct Sample {
        var bytes: Int64
        var seconds: Double
    }

    /// The length, when the file's times jump; nil when they do not (libavformat's length
    /// holds) or the file cannot be surveyed. Leaves the read position anywhere: the caller
    /// rewinds.
    static func duration(_ demuxer: Demuxer, size: Int64, readBytes: Int64 = readBytes) -> Double? {
        guard size > 0, demuxer.readsFromAnyByte, let reference = referenceStream(demuxer), let packet = try? Packet() else { return nil }
        var budget = maximumSamples
        func sample(at bytes: Int64) -> Sample? {
            budget -= 1
            var found: Sample? = nil
            demuxer.read(fromByte: bytes, limit: 4096, into: packet) { packet in
                let p = packet.pointer.pointee
                if p.pos >= 0, p.pos - bytes > sampleBytes { return false }
                guard p.stream_index == reference, let t = time(packet, demuxer) else { return true }
                found = Sample(bytes: p.pos >= 0 ? p.pos : bytes, seconds: t)
                return false
            }
            return found
        }
        var found: [Sample] = []
        for i in 0..<samples {
            if let s = sample(at: size * Int64(i) / Int64(samples)), s.bytes > (found.last?.bytes ?? -1) { found.append(s) }
        }
        if let end = lastSample(demuxer, reference: reference, size: size, packet: packet),
           end.bytes > (found.last?.bytes ?? -1) { found.append(end) }
        let stretches = zip(found, found.dropFirst())
        let rates = stretches.filter { $1.seconds > $0.seconds }.map { ($1.seconds - $0.seconds) / Double($1.bytes - $0.bytes) }.sorted()
        guard !rates.isEmpty else { return nil }
        let rate = rates[rates.count / 2]
        var jumped = false
        func plausible(_ a: Sample, _ b: Sample) -> Bool {
            let span = b.seconds - a.seconds
            return span >= 0 && span <= 2 * Double(b.bytes - a.bytes) * rate + 10
        }
        guard !stretches.allSatisfy(plausible), let first = found.first, let last = found.last else { return nil }
        // A file of a few stretches' reads is read through: its stretches are short enough
        // for a sample to land in a run that comes back (a stretch written twice), which
        // seen from the samples alone is a jump ahead and one back.
        if last.bytes - first.bytes <= Int64(samples) * readBytes {
            guard let (seconds, jumps) = stepped(demuxer, reference: reference, from: first, to: last, packet: packet) else { return nil }
            return jumps ? seconds : nil
        }

        /// The time the content between two samples lasts.
        func measure(_ a: Sample, _ b: Sample) -> Double {
            let span = b.seconds - a.seconds
            let expected = Double(b.bytes - a.bytes) * rate
            if plausible(a, b) { return span }
            if b.bytes - a.bytes <= readBytes, let (seconds, jumps) = stepped(demuxer, reference: reference, from: a, to: b, packet: packet) {
                if jumps { jumped = true }
                return seconds
            }
            guard budget > 0, let mid = sample(at: a.bytes + (b.bytes - a.bytes) / 2), mid.bytes > a.bytes, mid.bytes < b.bytes else {
                // Nothing more to read: a time that ran back is a jump, and what is between
                // lasts what its bytes do; one that ran on is taken as it is.
                if span >= 0 { return span }
                jumped = true
                return expected
            }
            return measure(a, mid) + measure(mid, b)
        }
        let total = stretches.reduce(0.0) { $0 + measure($1.0, $1.1) }
        return jumped ? total : nil
    }

    /// The time the reference stream's packets from `a` to `b` cover, read one by one, as
    /// the pipeline delivers them: a run that jumps more than `TimelineOutliers.jump` away
    /// and comes back within its `runPackets` counts for nothing (it is left out), and the
    /// steps that are splices (`SpliceTimeline.isJump`: the pipeline closes them) count for
    /// nothing either; whether there were any. nil if the packets do not lead from `a` to `b`.
    private static func stepped(_ demuxer: Demuxer, reference: Int32, from a: Sample, to b: Sample,
                                packet: Packet) -> (seconds: Double, jumps: Bool)? {
        let second = Double(kiln_time_base()), away = Double(TimelineOutliers.jump) / second
        var previous = a.seconds, total = 0.0, jumps = false
        // Where a run that jumped away started: what was counted then, and its packets since.
        var run: (from: Double, total: Double, jumps: Bool, packets: Int)? = nil
        var result: (seconds: Double, jumps: Bool)? = nil
        demuxer.read(fromByte: a.bytes, limit: 100_000, bytes: b.bytes - a.bytes + Demuxer.lookBytes, into: packet) { packet in
            let p = packet.pointer.pointee
            guard p.stream_index == reference, p.pos > a.bytes, let t = time(packet, demuxer) else { return true }
            if let r = run, r.packets < TimelineOutliers.runPackets, TimelineOutliers.returns(t, from: r.from, last: previous, within: away) {
                // Back where it was: the run is left out.
                (total, jumps, run) = (r.total + max(0, t - r.from), r.jumps, nil)
            } else {
                if abs(t - previous) > away {
                    run = (previous, total, jumps, 0)
                } else if let r = run {
                    run = r.packets + 1 < TimelineOutliers.runPackets ? (r.from, r.total, r.jumps, r.packets + 1) : nil
                }
                // A splice is closed one packet's length after the last (as the pipeline does).
                if SpliceTimeline.isJump(Int64((t - previous) * second)) {
                    jumps = true
                    total += seconds(p.duration, demuxer.stream(Int(reference)).pointee.time_base) ?? 0
                } else {
                    total += max(0, t - previous)
                }
            }
            previous = t
            guard p.pos >= b.bytes else { return true }
            // The last sample's time is where its packet ends.
            if p.pos == b.bytes { result = (total + max(0, b.seconds - t), jumps) }
            return false
        }
        return result
    }

    /// The stream whose times are read: the first video (not a cover), else the first audio.
    private static func referenceStream(_ demuxer: Demuxer) -> Int32? {
        let streams = (0..<demuxer.streamCount).map { demuxer.stream($0) }
        let video = streams.first {
            $0.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO && $0.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0
        }
        return (video ?? streams.first { $0.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO })?.pointee.index
    }

    /// A packet's time in seconds: its decode time, which rises, else its presentation time.
    private static func time(_ packet: Packet, _ demuxer: Demuxer) -> Double? {
        let p = packet.pointer.pointee
        let t = p.dts != noPTS ? p.dts : p.pts
        return t == noPTS ? nil : seconds(t, demuxer.stream(Int(p.stream_index)).pointee.time_base)
    }

    /// The reference stream's last packet in the file's last `Prober.tailBytes`, its time
    /// the end of it.
    private static func lastSample(_ demuxer: Demuxer, reference: Int32, size: Int64, packet: Packet) -> Sample? {
        var last: Sample? = nil
        demuxer.read(fromByte: max(0, size - Prober.tailBytes), limit: 100_000, into: packet) { packet in
            let p = packet.pointer.pointee
            guard p.stream_index == reference, p.pos >= 0, let t = time(packet, demuxer) else { return true }
            last = Sample(bytes: p.pos, seconds: t + (seconds(p.duration, demuxer.stream(Int(reference)).pointee.time_base) ?? 0))
            return true
        }
        return last
    }
}
