import CFFmpeg
import KilnCore

/// Decode times for a reordered video stream whose container stores presentation times
/// only (Matroska, WebM), derived from them with the stream's reorder depth.
///
/// libavformat derives them too, but only once it trusts the reorder depth its analysis
/// measured, and before that takes a packet's presentation time for its decode time. A
/// slideshow with B-frames at a picture every 30 s, with sound, outlasted the analysis:
/// its second picture (shown at 240 s, decoded second) got 240 s as its decode time, the
/// pictures decoded after it ran back from there, and the copy lost one and showed
/// others at the wrong time (the ffmpeg command's copy does the same).
///
/// A decoder shows a picture once it has taken in `depth` more, so the n-th picture
/// decoded is never shown before the (n - depth)-th smallest presentation time: that is
/// its decode time, and with presentation times seen so far kept in order, the smallest
/// one not yet used. The first `depth` pictures are decoded a picture's length apart
/// before the first one shown, as libavformat and encoders time them. Decode times then
/// rise, and none is later than its own picture's presentation time, whatever the spacing
/// of the pictures (a pause of minutes) — unless the stream reorders deeper than its
/// headers say, which the muxer's repair then settles, as before.
struct DecodeTimes {
    let depth: Int
    /// One picture's length in the stream's time base (at least 1).
    let step: Int64
    /// Presentation times seen and not yet given out as decode times, in ascending order.
    private var waiting: [Int64] = []
    private var first: Int64?
    private var count = 0

    init(depth: Int, step: Int64) {
        self.depth = depth
        self.step = max(1, step)
    }

    /// Whether the stream's decode times are derived here: a video stream (not a cover)
    /// with a known reorder depth, in a container that stores presentation times only.
    static func applies(to st: UnsafeMutablePointer<AVStream>, in context: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        String(cString: context.pointee.iformat.pointee.name).hasPrefix("matroska")
            && st.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO
            && st.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 && depth(of: st) > 0
    }

    /// The stream's reorder depth: the analysis's, or for H.264 its sequence parameter
    /// set's, which the analysis learns only from a decoded picture (a slideshow's second
    /// picture came 30 s after its first, past the analysis).
    static func depth(of st: UnsafeMutablePointer<AVStream>) -> Int {
        let par = st.pointee.codecpar!
        var depth = Int(par.pointee.video_delay)
        var h264 = KilnH264Parameters()
        if par.pointee.codec_id == AV_CODEC_ID_H264, kiln_h264_parameters(par, &h264) == 1 { depth = max(depth, Int(h264.reorder_depth)) }
        return min(16, depth)
    }

    /// The derivation for `st`: its depth, and its pictures' length from the packets'
    /// duration where the first one states it, else from the stream's rate.
    static func make(for st: UnsafeMutablePointer<AVStream>, firstDuration: Int64) -> DecodeTimes {
        var step = firstDuration
        if step <= 0 {
            let rate = st.pointee.avg_frame_rate.num > 0 ? st.pointee.avg_frame_rate : st.pointee.r_frame_rate
            if rate.num > 0, rate.den > 0 { step = av_rescale_q(1, av_inv_q(rate), st.pointee.time_base) }
        }
        return DecodeTimes(depth: depth(of: st), step: step)
    }

    /// Gives the packet its decode time; packets without a presentation time are left as
    /// they are.
    mutating func time(_ p: inout AVPacket) {
        guard p.pts != noPTS else { return }
        let at = waiting.firstIndex { $0 > p.pts } ?? waiting.count
        waiting.insert(p.pts, at: at)
        if first == nil { first = p.pts }
        if count < depth {
            p.dts = first! - Int64(depth - count) * step
        } else {
            p.dts = waiting.removeFirst()
        }
        count += 1
    }
}
