import CFFmpeg
import KilnCore

/// The header of a frame of the sounds broadcasts carry as elementary streams, read from
/// its own bytes: ADTS AAC, AC-3, E-AC-3 and MPEG audio layers I to III. Each states its
/// length, so a run of them can be cut into frames without the container's help
/// (`SoundFramer`), whatever codec the container declared.
struct SoundFrameHeader: Equatable {
    let codec: AVCodecID
    /// The frame's bytes, its header included.
    let length: Int
    let samples: Int
    let sampleRate: Int
    /// 0 where the frame does not say (an ADTS channel configuration of 0 without a program
    /// config element in the frame).
    let channels: Int
    /// An E-AC-3 dependent substream: it extends the frame before it (7.1 over a 5.1 core).
    let dependent: Bool
    /// Two mono programmes side by side (AC-3's 1+1, MPEG audio's dual channel, AAC's two
    /// single channel elements as ISDB sends them): a bilingual broadcast's two languages,
    /// not a stereo pair. nil where the frame does not say (an ADTS frame of channel
    /// configuration 0 whose program config element came in an earlier one).
    var dualMono: Bool? = false

    /// The codecs that decode each other's frames, or whose frames follow each other in
    /// one stream (AC-3 with E-AC-3 dependent substreams, MPEG audio's layers).
    enum Family: Equatable { case aac, dolby, mpeg }

    var family: Family { Self.family(of: codec)! }

    static func family(of codec: AVCodecID) -> Family? {
        switch codec {
        case AV_CODEC_ID_AAC: return .aac
        case AV_CODEC_ID_AC3, AV_CODEC_ID_EAC3: return .dolby
        case AV_CODEC_ID_MP1, AV_CODEC_ID_MP2, AV_CODEC_ID_MP3: return .mpeg
        default: return nil
        }
    }

    /// The header at `i`, nil when none starts there or it states what no frame can be.
    init?(_ b: UnsafeBufferPointer<UInt8>, at i: Int) {
        guard i >= 0, b.count - i >= 7 else { return nil }
        if b[i] == 0x0B && b[i + 1] == 0x77 {
            self.init(dolby: UnsafeBufferPointer(rebasing: b[i...]))
        } else if b[i] == 0xFF && b[i + 1] & 0xF6 == 0xF0 {
            self.init(adts: UnsafeBufferPointer(rebasing: b[i...]))
        } else if b[i] == 0xFF && b[i + 1] & 0xE0 == 0xE0 {
            self.init(mpeg: UnsafeBufferPointer(rebasing: b[i...]))
        } else {
            return nil
        }
    }

    /// ISO/IEC 13818-7's ADTS header: 13 bits of frame length, 1 to 4 raw data blocks.
    private init?(adts b: UnsafeBufferPointer<UInt8>) {
        guard let config = ADTSConfiguration(b), let rate = config.sampleRate else { return nil }
        let length = Int(b[3] & 3) << 11 | Int(b[4]) << 3 | Int(b[5] >> 5)
        let crc = b[1] & 1 == 0
        guard length >= (crc ? 9 : 7) + 1 else { return nil }
        var channels = config.channels ?? 0, dualMono: Bool? = false
        if config.channels == nil {
            // Configuration 0: the channels are the program config element's, sent in the
            // frame's raw data (one block, after a CRC where there is one).
            let raw = crc ? 9 : 7
            let pce = b[6] & 3 == 0 && b.count > raw ? Self.programConfig(UnsafeBufferPointer(rebasing: b[raw..<min(b.count, length)])) : nil
            (channels, dualMono) = pce.map { ($0.channels, $0.dualMono) } ?? (0, nil)
        }
        self.init(codec: AV_CODEC_ID_AAC, length: length, samples: 1024 * (Int(b[6] & 3) + 1), sampleRate: rate,
                  channels: channels, dependent: false)
        self.dualMono = dualMono
    }

    /// The channels of the program config element a raw AAC data block opens with (after
    /// fill elements, which encoders put first), and whether they are two single channels
    /// at the front and nothing else: ARIB STD-B32's dual mono (ISDB's bilingual sound).
    /// nil where the block holds none (ISO/IEC 14496-3 4.4.1.1, 4.5.1.2).
    static func programConfig(_ raw: UnsafeBufferPointer<UInt8>) -> (channels: Int, dualMono: Bool)? {
        var bits = Bits(raw)
        for _ in 0..<4 {
            switch bits.read(3) {
            case 5:
                // Tag, object type, rate; then how many elements of each kind.
                guard bits.skip(10), let front = bits.read(4), let side = bits.read(4), let back = bits.read(4),
                      let lfe = bits.read(2), let assoc = bits.read(3), let coupling = bits.read(4) else { return nil }
                for width in [4, 4, 3] {  // mono and stereo mixdown, matrix mixdown
                    guard let present = bits.read(1), present == 0 || bits.skip(width) else { return nil }
                }
                var channels = 0, frontPairs: [Bool] = []
                for k in 0..<(front + side + back) {
                    guard let pair = bits.read(1), bits.skip(4) else { return nil }
                    channels += pair == 1 ? 2 : 1
                    if k < front { frontPairs.append(pair == 1) }
                }
                guard bits.skip(4 * lfe + 4 * assoc + 5 * coupling) else { return nil }
                return (channels + lfe, frontPairs == [false, false] && side + back + lfe == 0)
            case 6:
                // A fill element: its count, escaped past 14, of bytes.
                guard var count = bits.read(4) else { return nil }
                if count == 15 { guard let more = bits.read(8) else { return nil }; count += more - 1 }
                guard bits.skip(8 * count) else { return nil }
            default:
                return nil
            }
        }
        return nil
    }

    /// AC-3 bit rates by `frmsizecod / 2`, kbit/s (A/52 table 5.18).
    private static let dolbyKbps = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 576, 640]

    /// A/52's sync frame: AC-3's size from its bit rate and rate code (44.1 kHz frames
    /// alternate a word longer), E-AC-3's stated in words, with 1, 2, 3 or 6 blocks of 256
    /// samples.
    private init?(dolby b: UnsafeBufferPointer<UInt8>) {
        guard let config = DolbyDigitalConfiguration(b) else { return nil }
        let length: Int, blocks: Int, dependent: Bool
        if config.enhanced {
            let type = b[2] >> 6
            guard type != 3 else { return nil }
            length = 2 * ((Int(b[2] & 7) << 8 | Int(b[3])) + 1)
            blocks = b[4] >> 6 == 3 ? 6 : [1, 2, 3, 6][Int(b[4] >> 4) & 3]
            dependent = type == 1
        } else {
            let code = Int(b[4] & 0x3F)
            guard code < 2 * Self.dolbyKbps.count else { return nil }
            let kbps = Self.dolbyKbps[code / 2]
            let words = [kbps * 2, kbps * 96_000 / 44_100 + (code & 1), kbps * 3][Int(config.rateCode)]
            length = 2 * words
            blocks = 6
            dependent = false
        }
        // bsid 9 and 10 halve and quarter the rate (libavcodec's `sr_shift`).
        let shift = config.enhanced ? 0 : max(0, Int(b[5] >> 3) - 8)
        self.init(codec: config.enhanced ? AV_CODEC_ID_EAC3 : AV_CODEC_ID_AC3, length: length, samples: 256 * blocks,
                  sampleRate: config.sampleRate >> shift, channels: config.channels, dependent: dependent)
        dualMono = config.acmod == 0
    }

    /// MPEG-1, 2 and 2.5 audio (ISO/IEC 11172-3, 13818-3). A free-format frame (bit rate
    /// index 0) states no length, and is not read.
    private init?(mpeg b: UnsafeBufferPointer<UInt8>) {
        let version = (b[1] >> 3) & 3, layer = (b[1] >> 1) & 3
        let rateIndex = Int(b[2] >> 4), frequency = Int(b[2] >> 2) & 3
        guard version != 1, layer != 0, rateIndex != 0, rateIndex != 15, frequency != 3 else { return nil }
        let mpeg1 = version == 3
        let rate = [44100, 48000, 32000][frequency] >> (mpeg1 ? 0 : version == 2 ? 1 : 2)
        let table: [Int]
        switch (mpeg1, layer) {
        case (true, 3): table = [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448]
        case (true, 2): table = [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384]
        case (true, _): table = [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]
        case (false, 3): table = [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256]
        case (false, _): table = [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160]
        }
        let kbps = table[rateIndex], padding = Int(b[2] >> 1) & 1
        let length: Int, samples: Int, codec: AVCodecID
        switch layer {
        case 3: (length, samples, codec) = ((12_000 * kbps / rate + padding) * 4, 384, AV_CODEC_ID_MP1)
        case 2: (length, samples, codec) = (144_000 * kbps / rate + padding, 1152, AV_CODEC_ID_MP2)
        default: (length, samples, codec) = ((mpeg1 ? 144_000 : 72_000) * kbps / rate + padding, mpeg1 ? 1152 : 576, AV_CODEC_ID_MP3)
        }
        self.init(codec: codec, length: length, samples: samples, sampleRate: rate, channels: b[3] >> 6 == 3 ? 1 : 2, dependent: false)
        dualMono = b[3] >> 6 == 2
    }

    init(codec: AVCodecID, length: Int, samples: Int, sampleRate: Int, channels: Int, dependent: Bool) {
        (self.codec, self.length, self.samples, self.sampleRate, self.channels, self.dependent)
            = (codec, length, samples, sampleRate, channels, dependent)
    }

    /// Whether `b` holds exactly whole frames of `family`, first to last (a packet that a
    /// libavformat parser of the stream's declared codec cut: one frame, or an E-AC-3
    /// access unit).
    static func tiles(_ b: UnsafeBufferPointer<UInt8>, as family: Family) -> Bool {
        var at = 0
        while at < b.count {
            guard let h = SoundFrameHeader(b, at: at), h.family == family else { return false }
            at += h.length
        }
        return at == b.count && at > 0
    }

    /// The first frame in `b` from `from` on of a family other than `declared` that the
    /// next two frames' headers confirm, end to end: a sync word turns up by chance in any
    /// bytes, and a second header at the first's end in a few megabytes of them.
    static func foreignRun(in b: UnsafeBufferPointer<UInt8>, from: Int = 0, declared: Family) -> (offset: Int, header: SoundFrameHeader)? {
        var i = max(0, from)
        while i + 7 <= b.count {
            if b[i] == 0x0B || b[i] == 0xFF, let h = SoundFrameHeader(b, at: i), h.family != declared,
               let second = SoundFrameHeader(b, at: i + h.length), second.family == h.family,
               let third = SoundFrameHeader(b, at: i + h.length + second.length), third.family == h.family {
                return (i, h)
            }
            i += 1
        }
        return nil
    }
}
