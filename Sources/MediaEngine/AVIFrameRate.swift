import CFFmpeg
import Glibc
import KilnCore

/// An AVI file states its picture rate twice: the main header's frame period (`avih`
/// dwMicroSecPerFrame) and the video stream header's dwRate/dwScale (`strh`), which
/// libavformat uses alone (the period only when the stream's is zero). A damaged `strh`
/// (dwScale 1 → 223, one flipped byte) made 150 pictures of a 6 s clip last 1338 s, and the
/// remux went out that way beside 6 s of sound, exit 0. Where the two disagree, the sound
/// says which is right: the video's pictures span what the sound does at one rate only.
enum AVIFrameRate {
    /// Gives the video stream the main header's rate when its own is off by more than half
    /// and only the main header's makes the pictures last as long as the sound. Called on
    /// an AVI's context right after it is opened, before any packet is read.
    static func reconcile(_ ctx: UnsafeMutablePointer<AVFormatContext>, path: String) {
        guard let header = Header(path: path), let sound = header.soundSeconds, sound > 0 else { return }
        let period = header.framePeriod
        guard let video = (0..<Int(ctx.pointee.nb_streams)).map({ ctx.pointee.streams[$0]! }).first(where: {
                  $0.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO && $0.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 }),
              video.pointee.duration > 0 else { return }
        let stated = video.pointee.time_base.seconds
        let main = Double(period.num) / Double(period.den)
        guard stated > 0, max(stated, main) / min(stated, main) > 1.5 else { return }
        let frames = Double(video.pointee.duration)
        let tolerance = max(1, sound * 0.1)
        guard abs(frames * main - sound) <= tolerance, abs(frames * stated - sound) > 3 * tolerance else { return }
        // AVI's timestamps are frame numbers in the stream's time base: a new time base
        // re-times every packet, and the stream's length in frames stays what it was.
        video.pointee.time_base = period
        video.pointee.avg_frame_rate = av_inv_q(period)
        video.pointee.r_frame_rate = av_inv_q(period)
        // libavformat worked the stream's rate out from its length in time, at the old rate.
        let par = video.pointee.codecpar!
        if par.pointee.bit_rate > 0 { par.pointee.bit_rate = Int64((Double(par.pointee.bit_rate) * stated / main).rounded()) }
    }

    /// What an AVI's header lists: the main header's frame period, and the first sound
    /// stream's length (its `strh` dwLength × dwScale / dwRate: libavformat gives PCM's none).
    struct Header {
        var framePeriod: AVRational
        var soundSeconds: Double?

        init?(path: String) {
            guard let fd = try? FileDescriptor(path: path, flags: O_RDONLY),
                  let head = try? fd.read(upTo: 16_384, at: 0), head.count >= 64,
                  head[0..<4].elementsEqual("RIFF".utf8), head[8..<12].elementsEqual("AVI ".utf8) else { return nil }
            let riff = RIFFHead(head)
            func u32(_ at: Int) -> UInt32 { riff.u32(at) }
            func chunk(_ tag: String, _ accepted: (Int) -> Bool = { _ in true }) -> Int? { riff.chunk(tag, room: 49, accepted) }
            // The header list's first chunk: "avih" size dwMicroSecPerFrame …
            guard let avih = chunk("avih") else { return nil }
            let micro = u32(avih + 8)
            // Between 1 and 1000 fps: anything else is no rate a picture stream has.
            guard (1_000...1_000_000).contains(micro) else { return nil }
            var num: Int32 = 0, den: Int32 = 0
            av_reduce(&num, &den, Int64(micro), 1_000_000, Int64(Int32.max))
            framePeriod = AVRational(num: num, den: den)
            // "strh" size fccType fccHandler dwFlags wPriority wLanguage dwInitialFrames
            // dwScale dwRate dwStart dwLength …
            soundSeconds = chunk("strh", { head[$0 + 8..<$0 + 12].elementsEqual("auds".utf8) }).flatMap { at in
                let scale = Double(u32(at + 28)), rate = Double(u32(at + 32)), length = Double(u32(at + 40))
                return rate > 0 && scale > 0 ? length * scale / rate : nil
            }
        }
    }
}

/// The first bytes of an AVI file, or of a file joined into one (`AVIJoin`): its
/// little-endian fields, and where its header's chunks begin.
struct RIFFHead {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func u32(_ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << UInt32(8 * $1) }
    }

    /// Where the first chunk `tag` that `accepted` begins, past the RIFF header's 12 bytes,
    /// with at least `room` bytes from its start to the end of what was read.
    func chunk(_ tag: String, room: Int, _ accepted: (Int) -> Bool = { _ in true }) -> Int? {
        let t = Array(tag.utf8)
        guard bytes.count - room >= 12 else { return nil }
        return (12...(bytes.count - room)).first { bytes[$0..<$0 + 4].elementsEqual(t) && accepted($0) }
    }
}
