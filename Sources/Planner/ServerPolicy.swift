/// What the server operator allows, independent of any request.
public struct ServerPolicy: Sendable, Equatable, Codable {
    /// When false, any plan whose delivery format is `transcode` fails with
    /// `transcode_disabled`. Remuxes stay allowed, including an audio re-encode inside a
    /// remux: it costs a fraction of a video encode and leaves the picture untouched.
    public var transcodingAllowed: Bool
    /// Lets the 20 and 10 Mbps rungs keep frames above 1080p (up to the device's
    /// `max_resolution`), when the source has them.
    public var allow4KOutput: Bool
    /// Reserved. The engine encodes H.264 only, so this changes no plan today; it exists so
    /// the setting can be stored and shown before an HEVC encoder lands. Copying an HEVC
    /// source to a device that lists `hevc` is not "HEVC output" and is always allowed.
    public var allowHEVCOutput: Bool

    public init(transcodingAllowed: Bool = true, allow4KOutput: Bool = false, allowHEVCOutput: Bool = false) {
        self.transcodingAllowed = transcodingAllowed
        self.allow4KOutput = allow4KOutput
        self.allowHEVCOutput = allowHEVCOutput
    }

    public static let standard = ServerPolicy()

    enum CodingKeys: String, CodingKey {
        case transcodingAllowed = "transcoding_allowed", allow4KOutput = "allow_4k_output"
        case allowHEVCOutput = "allow_hevc_output"
    }
}
