import CFFmpeg
import KilnCore
@testable import MediaEngine

/// Plans built by hand for the engine's tests, so the engine is tested on every file
/// independently of the planner's choices.
enum EnginePlans {
    static let mp4Video: Set<String> = ["h264", "hevc", "av1", "vp9", "mpeg4", "mpeg2video"]
    static let mp4Audio: Set<String> = ["aac", "ac3", "eac3", "mp3", "alac", "flac", "opus"]

    static func subtitles(_ info: MediaInfo) -> [SubtitlePlan] {
        info.subtitleStreams.map { s in
            s.textSubtitle == true
                ? SubtitlePlan(sourceIndex: s.index, action: .convert, codec: "mov_text", language: s.language, forced: s.disposition.forced)
                : SubtitlePlan(sourceIndex: s.index, action: .drop, codec: s.codec, language: s.language, forced: s.disposition.forced,
                               reason: "subtitle_bitmap")
        } + info.videoStreams.prefix(1).filter { $0.closedCaptions == true }.map {
            SubtitlePlan(sourceIndex: $0.index, action: .convert, codec: "mov_text", closedCaptions: true)
        }
    }

    static func audio(_ info: MediaInfo, forceTranscode: Bool = false) -> AudioPlan? {
        guard let a = info.audioStreams.first else { return nil }
        if !forceTranscode, mp4Audio.contains(a.codec) {
            return AudioPlan(sourceIndex: a.index, action: .copy, codec: a.codec, channels: a.channels ?? 2, bitrateKbps: 0, language: a.language)
        }
        return AudioPlan(sourceIndex: a.index, action: .transcode, codec: "aac", channels: min(a.channels ?? 2, 2), bitrateKbps: 128,
                         language: a.language)
    }

    /// Stream copy of the first video, audio copied when MP4 carries it, else AAC.
    static func remux(_ info: MediaInfo) -> Plan? {
        let v = info.videoStreams.first
        if let v, !mp4Video.contains(v.codec) { return nil }
        let video = v.map { VideoPlan(sourceIndex: $0.index, action: .copy, codec: $0.codec, width: $0.width ?? 0,
                                      height: $0.height ?? 0, bitrateKbps: 0, rotation: $0.rotation ?? 0) }
        let audio = audio(info)
        guard video != nil || audio != nil else { return nil }
        return Plan(quality: .original, effectiveQuality: .original, deliveryFormat: .remux, targetBitrateKbps: 0, container: "mp4",
                    video: video, audio: audio, subtitles: subtitles(info), reasons: ["test"], artifactKey: "test")
    }

    /// H.264 at most `height` lines high (upright, even, square pixels) plus AAC stereo.
    static func transcode(_ info: MediaInfo, height maxHeight: Int = 360) -> Plan? {
        let v = info.videoStreams.first
        var video: VideoPlan? = nil
        if let v, let size = v.displaySize {
            let h = min(maxHeight, size.height)
            let w = Int((Double(size.width) * Double(h) / Double(size.height) / 2).rounded()) * 2
            let even = h / 2 * 2
            video = VideoPlan(sourceIndex: v.index, action: .transcode, codec: "h264", width: max(w, 2), height: max(even, 2),
                              bitrateKbps: 1000, toneMap: v.hdr?.isHDR ?? false, deinterlace: v.fieldOrder?.isInterlaced ?? false,
                              rotation: v.rotation ?? 0,
                              encoder: EncoderSettings(preset: "veryfast", crf: 23, maxrateKbps: 1000, bufsizeKbps: 2000,
                                                       profile: "high", level: "4.0", gopSeconds: 2))
        }
        let audio = audio(info, forceTranscode: true)
        guard video != nil || audio != nil else { return nil }
        return Plan(quality: .mbps1, effectiveQuality: .mbps1, deliveryFormat: .transcode, targetBitrateKbps: 1000, container: "mp4",
                    video: video, audio: audio, subtitles: subtitles(info), reasons: ["test"], artifactKey: "test")
    }
}

extension Demuxer {
    /// The index of the first video stream (the tests' sources all have one).
    var firstVideoStream: Int {
        (0..<streamCount).first { stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO }!
    }
}
