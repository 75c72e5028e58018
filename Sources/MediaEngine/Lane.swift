import CFFmpeg
import KilnCore

/// One output stream of a pipeline and how it is made from one input stream: copied
/// (`CopyLane`), re-encoded (`VideoTranscodeLane`, `AudioTranscodeLane`) or converted
/// (`SubtitleLane`). The pipeline demuxes once and hands each lane its packets, already
/// shifted so the output starts at zero; lanes write through the muxer.
protocol Lane: AnyObject {
    /// The input stream this lane consumes.
    var inputIndex: Int32 { get }
    /// Every input stream whose packets this lane takes, `inputIndex` first: more than one
    /// for a sound made of several streams (`ChannelMerge`).
    var inputIndices: [Int32] { get }
    /// The output stream index, set by `prepare`.
    var outputIndex: Int32 { get }
    /// Adds the output stream to the muxer and configures it (codec parameters, time
    /// base, side data, metadata). Called before the header is written; encoders open here.
    func prepare(muxer: Muxer) throws(KilnError)
    /// Consumes one input packet (timestamps in the input stream's time base, shifted).
    func consume(_ packet: Packet, muxer: Muxer) throws(KilnError)
    /// Drains decoders, filters and encoders at end of input.
    func finish(muxer: Muxer) throws(KilnError)
    /// Goes on with `stream`'s packets, which carry on the sound or pictures of this lane's
    /// stream from here (`StreamSuccession`); they come with this lane's stream index.
    func follow(_ stream: UnsafeMutablePointer<AVStream>, muxer: Muxer) throws(KilnError)
    /// Counters reported in the result (concealed corrupt packets, dropped frames, …).
    var stats: LaneStats { get }
    /// The ffmpeg command options that make the same output stream (after `prepare`):
    /// every setting that shapes it, so anyone can reproduce and compare the work.
    var ffmpegEquivalent: [String] { get }
    /// The decoder options that command needs before its `-i` (none for most lanes).
    var ffmpegInputOptions: [String] { get }
    /// Whether the lane reads no more of a packet's payload than its first bytes
    /// (`IndexForecast.skimKeepBytes`), so a reader may skim the rest (false for most).
    var readsOnlyPacketHeads: Bool { get }
}

extension Lane {
    var inputIndices: [Int32] { [inputIndex] }
    var ffmpegInputOptions: [String] { [] }
    var readsOnlyPacketHeads: Bool { false }

    func follow(_ stream: UnsafeMutablePointer<AVStream>, muxer: Muxer) throws(KilnError) {
        throw KilnError(.internalError, stage: .demux, "only an audio or video lane follows its stream into another")
    }
}

public struct LaneStats: Sendable, Codable, Equatable {
    public var packetsIn = 0
    public var packetsOut = 0
    /// Packets a decoder rejected and the pipeline skipped (concealed corruption).
    public var corruptPackets = 0
    public var framesDecoded = 0
    public var framesEncoded = 0
    /// Audio: gaps in the source filled with silence, and frames dropped or cut where the
    /// source overlapped itself, to keep the sound on its timestamps.
    public var gapsFilled = 0
    public var framesDropped = 0
    /// Timestamps put right (a picture shown out of its order count's order, an audio
    /// frame's time past the source's end).
    public var repairedTimestamps = 0
    public init() {}
    enum CodingKeys: String, CodingKey {
        case packetsIn = "packets_in", packetsOut = "packets_out", corruptPackets = "corrupt_packets"
        case framesDecoded = "frames_decoded", framesEncoded = "frames_encoded"
        case gapsFilled = "gaps_filled", framesDropped = "frames_dropped", repairedTimestamps = "repaired_timestamps"
    }
}

/// Copies the stream metadata a player shows (language, name) and the dispositions we
/// keep (default, forced, hearing impaired, commentary) from an input to an output stream.
/// MP4 keeps no track title (movenc writes a `udta` name few players read): a sound's or a
/// subtitle's name also becomes its handler name, which players that name tracks show.
func copyStreamMetadata(from input: UnsafeMutablePointer<AVStream>, to output: UnsafeMutablePointer<AVStream>) {
    if let v = trackTitle(input) {
        av_dict_set(&output.pointee.metadata, "title", v, 0)
        if input.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO || SubtitleLane.isText(input.pointee.codecpar.pointee) {
            av_dict_set(&output.pointee.metadata, "handler_name", v, 0)
        }
    }
    setLanguage(dictValue(input.pointee.metadata, "language"), of: output)
    let keep = AV_DISPOSITION_DEFAULT | AV_DISPOSITION_FORCED | AV_DISPOSITION_HEARING_IMPAIRED
        | AV_DISPOSITION_VISUAL_IMPAIRED | AV_DISPOSITION_COMMENT
    output.pointee.disposition = input.pointee.disposition & keep
}

/// A stream's name as a player shows it: its title; in an MP4 or QuickTime source, where a
/// track's name is its handler name, that name unless it is a muxer's own for any track of
/// its kind ("SoundHandler", "Core Media Audio", "GPAC ISO Audio Handler", Android's
/// "SoundHandle", …).
func trackTitle(_ stream: UnsafeMutablePointer<AVStream>) -> String? {
    if let title = dictValue(stream.pointee.metadata, "title"), !title.isEmpty { return title }
    guard let handler = dictValue(stream.pointee.metadata, "handler_name")?.trimmingSpaces, !handler.isEmpty else { return nil }
    let generic = handler.lowercased()
    return generic.hasSuffix("handler") || generic.hasSuffix("handle") || generic.hasPrefix("core media") || generic.hasPrefix("iso media") ? nil : handler
}

/// Tags an output stream with `tag` as MP4 defines languages (`LanguageCode`), or with
/// none when it is undetermined.
func setLanguage(_ tag: String?, of output: UnsafeMutablePointer<AVStream>) {
    av_dict_set(&output.pointee.metadata, "language", LanguageCode.terminologic(tag), 0)
}
