/// AAC in LATM framing, as broadcast carries it (DVB-T2, DVB-C and ISDB-Tb transport
/// streams: libavformat's `aac_latm`): each packet is a LOAS sync frame (ISO/IEC 14496-3
/// 1.7.2) whose AudioMuxElement holds, now and then, the stream's configuration
/// (StreamMuxConfig with its AudioSpecificConfig) and then the frame's raw AAC, neither
/// aligned to a byte. MP4 takes the same AAC as raw frames with the configuration in the
/// sample entry, so the frames are taken out bit for bit (`LATMFrames.unwrap`): a copy,
/// where libavformat has no bitstream filter for it and the ffmpeg command re-encodes.
///
/// Only the layout broadcasters use is taken out: one programme of one layer, one frame a
/// sync frame, its length given in the frame (`frameLengthType` 0), an AudioSpecificConfig
/// of AAC Main, LC, SSR or LTP (with SBR or PS signalled explicitly or not) and a channel
/// configuration of 1 to 7. Anything else (a program config element, several subframes
/// or layers, scalable or error-resilient object types) is `unsupported`, and the sound is
/// re-encoded as before.
struct LATMFrames {
    /// The stream's configuration as MP4 states it.
    struct Configuration: Equatable, CustomStringConvertible {
        /// The AudioSpecificConfig's bits, zero-padded to a whole byte.
        let audioSpecificConfig: [UInt8]
        /// Samples a second the decoder puts out (the SBR rate where there is one).
        let sampleRate: Int
        let channels: Int

        var description: String {
            "\([1: "mono", 2: "stereo", 6: "5.1", 8: "7.1"][channels] ?? "\(channels) channels") \(sampleRate) Hz"
        }
    }

    enum Unwrapped: Equatable {
        /// One AAC frame, raw, and the configuration it is coded in.
        case frame([UInt8], Configuration)
        /// A frame of the stream before any configuration was read.
        case unconfigured
        /// A layout the copy does not take (why).
        case unsupported(String)
        /// Not a whole LOAS frame (damage).
        case damaged
    }

    /// The latest configuration read (configurations persist until a frame gives another).
    private(set) var configuration: Configuration?

    /// `configuration`: what frames before the stream's first StreamMuxConfig are coded in
    /// (a recording starts between two), as read further on (`first`).
    init(configuration: Configuration? = nil) { self.configuration = configuration }

    /// The stream's first configuration, from its first `limit` packets read by a reader
    /// of its own (`Demuxer.readAfresh`: the sample entry is written before the copy reads
    /// a packet); why not, where none is found or the first is not one MP4 takes as it is.
    static func first(stream index: Int, path: String, limit: Int = 512) -> Result<Configuration, Refusal> {
        var frames = LATMFrames()
        var read = 0
        var found: Result<Configuration, Refusal>?
        let opened = Demuxer.readAfresh(path) { p in
            guard p.stream_index == Int32(index), let data = p.data else { return true }
            read += 1
            switch frames.unwrap(UnsafeBufferPointer(start: data, count: Int(p.size))) {
            case .frame(_, let config): found = .success(config)
            case .unsupported(let why): found = .failure(Refusal(why))
            case .unconfigured, .damaged: break
            }
            return found == nil && read < limit
        }
        guard opened else { return .failure(Refusal("the source could not be read again")) }
        return found ?? .failure(Refusal("no configuration in its first \(read) frames"))
    }

    struct Refusal: Error { let why: String; init(_ why: String) { self.why = why } }

    /// The frame in `bytes` (one LOAS sync frame) as raw AAC.
    mutating func unwrap(_ bytes: UnsafeBufferPointer<UInt8>) -> Unwrapped {
        var bits = Bits(bytes)
        guard bits.read(11) == 0x2B7, let length = bits.read(13), length + 3 <= bytes.count else { return .damaged }
        // libavformat's LATM parser hands out one sync frame a packet; a packet that holds a
        // second would lose its sound here, and is re-encoded instead.
        if bytes.count >= length + 5, bytes[length + 3] == 0x56, bytes[length + 4] & 0xE0 == 0xE0 {
            return .unsupported("several LATM frames in one packet")
        }
        bits.limit(to: (length + 3) * 8)
        guard let sameMux = bits.read(1) else { return .damaged }
        if sameMux == 0 {
            switch readStreamMuxConfig(&bits) {
            case .failure(.damaged): return .damaged
            case .failure(.unsupported(let why)): configuration = nil; return .unsupported(why)
            case .success(let config): configuration = config
            }
        }
        guard let configuration else { return .unconfigured }
        // PayloadLengthInfo: bytes in runs of 255.
        var count = 0
        while true {
            guard let run = bits.read(8) else { return .damaged }
            count += run
            if run != 255 { break }
        }
        guard count > 0, let payload = bits.bytes(count) else { return .damaged }
        // Other data, if any, follows the payload; nothing after it is read.
        return .frame(payload, configuration)
    }

    fileprivate enum Failure: Error { case damaged, unsupported(String) }

    /// StreamMuxConfig (ISO/IEC 14496-3 table 1.42), for the layout described above.
    private mutating func readStreamMuxConfig(_ bits: inout Bits) -> Result<Configuration, Failure> {
        guard let version = bits.read(1) else { return .failure(.damaged) }
        if version == 1 {
            guard let versionA = bits.read(1) else { return .failure(.damaged) }
            guard versionA == 0 else { return .failure(.unsupported("LATM audioMuxVersionA 1")) }
            guard bits.latmValue() != nil else { return .failure(.damaged) }  // taraBufferFullness
        }
        guard let sameFraming = bits.read(1), let subFrames = bits.read(6), let programs = bits.read(4), let layers = bits.read(3)
        else { return .failure(.damaged) }
        guard sameFraming == 1, subFrames == 0, programs == 0, layers == 0 else {
            return .failure(.unsupported("LATM of \(subFrames + 1) subframes, \(programs + 1) programmes, \(layers + 1) layers"))
        }
        let config: Configuration
        if version == 0 {
            switch AudioSpecificConfig.read(&bits, length: nil) {
            case .failure(let f): return .failure(f)
            case .success(let c): config = c
            }
        } else {
            guard let length = bits.latmValue(), length > 0, length <= 1 << 12 else { return .failure(.damaged) }
            switch AudioSpecificConfig.read(&bits, length: length) {
            case .failure(let f): return .failure(f)
            case .success(let c): config = c
            }
        }
        guard let lengthType = bits.read(3) else { return .failure(.damaged) }
        guard lengthType == 0 else { return .failure(.unsupported("LATM frameLengthType \(lengthType)")) }
        // latmBufferFullness; then other data's length, read past (the data follows the
        // frame's payload, where nothing more is read).
        guard bits.read(8) != nil, let other = bits.read(1) else { return .failure(.damaged) }
        if other == 1 {
            if version == 1 {
                guard bits.latmValue() != nil else { return .failure(.damaged) }
            } else {
                var escape = 1
                while escape == 1 {
                    guard let e = bits.read(1), bits.read(8) != nil else { return .failure(.damaged) }
                    escape = e
                }
            }
        }
        guard let crc = bits.read(1) else { return .failure(.damaged) }
        if crc == 1 { guard bits.read(8) != nil else { return .failure(.damaged) } }
        return .success(config)
    }

    /// AudioSpecificConfig (ISO/IEC 14496-3 1.6.2.1), read to learn its length where the
    /// mux states none (audioMuxVersion 0) and what MP4's sample entry takes.
    enum AudioSpecificConfig {
        fileprivate static func read(_ bits: inout Bits, length: Int?) -> Result<Configuration, Failure> {
            let start = bits.position
            func objectType() -> Int? {
                guard let t = bits.read(5) else { return nil }
                return t == 31 ? bits.read(6).map { 32 + $0 } : t
            }
            func rate() -> Int? {
                guard let index = bits.read(4) else { return nil }
                if index == 15 { return bits.read(24) }
                return index < ADTSConfiguration.rates.count ? ADTSConfiguration.rates[index] : 0
            }
            guard var type = objectType(), var sampleRate = rate(), let channelConfiguration = bits.read(4) else { return .failure(.damaged) }
            if type == 5 || type == 29 {
                // SBR (and PS) signalled explicitly: the output's rate, then the core's type.
                guard let extended = rate(), let core = objectType() else { return .failure(.damaged) }
                (sampleRate, type) = (extended, core)
            }
            guard (1...4).contains(type) else { return .failure(.unsupported("AAC object type \(type) in LATM")) }
            guard let channels = ADTSConfiguration.channels(configuration: channelConfiguration) else {
                return .failure(.unsupported("AAC channel configuration \(channelConfiguration) in LATM (a program config element)"))
            }
            guard sampleRate > 0 else { return .failure(.unsupported("AAC sampling frequency index reserved")) }
            // GASpecificConfig: frameLengthFlag, dependsOnCoreCoder (and its delay), extensionFlag.
            guard bits.read(1) != nil, let core = bits.read(1) else { return .failure(.damaged) }
            if core == 1 { guard bits.read(14) != nil else { return .failure(.damaged) } }
            guard let extended = bits.read(1) else { return .failure(.damaged) }
            if extended == 1 { guard bits.read(1) != nil else { return .failure(.damaged) } }  // extensionFlag3
            if let length {
                // The rest of the stated length (a backward-compatible SBR extension) is kept.
                guard length >= bits.position - start, bits.skip(length - (bits.position - start)) else { return .failure(.damaged) }
            }
            guard let config = bits.copy(from: start, to: bits.position) else { return .failure(.damaged) }
            return .success(Configuration(audioSpecificConfig: config, sampleRate: sampleRate, channels: channels))
        }
    }
}
