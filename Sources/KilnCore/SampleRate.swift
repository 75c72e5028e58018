/// The sample rate a re-encode keeps of its source's: the source's own up to 48 kHz, else
/// 48 or 44.1 kHz, whichever is of its family (a whole ratio: a studio master's 96 kHz
/// becomes 48, its 88.2 kHz 44.1). Android guarantees AAC-LC decoding from 8 to 48 kHz only
/// (its compatibility definition), and Media Foundation's decoder stops there too. The
/// engine opens its encoder at it; the planner sizes a bitrate the encoder reaches there.
public enum EncodedSampleRate {
    public static let most = 48_000

    public static func of(source: Int) -> Int {
        source <= most ? source : source % 44_100 == 0 ? 44_100 : most
    }
}
