import KilnCore

/// Values with every field set, for the tests that compare Kiln's JSON with Foundation's.
public enum SamplePlans {
    /// A transcode with tone mapping, rotation, a converted and a dropped subtitle.
    public static let fullTranscode: Plan = {
        let encoder = EncoderSettings(preset: "medium", crf: 22.5, maxrateKbps: 4700, bufsizeKbps: 9400, profile: "high",
                                      level: "4.1", gopSeconds: 2, pixFmt: "yuv420p")
        return Plan(quality: .mbps5, effectiveQuality: .mbps5, deliveryFormat: .transcode, targetBitrateKbps: 5000,
                    container: "mp4",
                    video: VideoPlan(sourceIndex: 0, action: .transcode, codec: "h264", width: 1920, height: 1080,
                                     bitrateKbps: 4700, toneMap: true, deinterlace: false, rotation: 90, encoder: encoder),
                    audio: AudioPlan(sourceIndex: 1, action: .transcode, codec: "aac", channels: 2, bitrateKbps: 160, language: "eng"),
                    subtitles: [SubtitlePlan(sourceIndex: 2, action: .convert, codec: "mov_text", language: "fra", forced: true),
                                SubtitlePlan(sourceIndex: 3, action: .drop, codec: "hdmv_pgs_subtitle", reason: "subtitle_bitmap")],
                    reasons: ["hdr_unsupported", "hdr_tone_mapped"], artifactKey: String(repeating: "ab", count: 32))
    }()
}
