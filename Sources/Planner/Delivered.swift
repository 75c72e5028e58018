import KilnCore

extension Planner {
    /// The plan an output answers to when the engine had to re-encode a stream the plan
    /// copied (`PrepareResult.executedPlan`, `stats.adjustments`); nil when the output is
    /// what the plan said. `prep-artifact prepare` answers with it, and the daemon stores
    /// it for the artifact.
    /// - A sound (its format changed, the muxer refused a packet): the encode the engine
    ///   made (`executed.audio`), reason `audio_reencoded`.
    /// - A picture (its size changed mid-stream, no keyframe to start on): the plan's
    ///   fallback encode, so a transcode at the rung that encode belongs to (the lowest
    ///   whose video budget holds it), not a remux "as the source"; reason `video_reencoded`.
    /// - A camera's tracks merged into one sound that failed as one (one of them damaged):
    ///   the first alone, reason `audio_tracks_not_merged`.
    /// - A sound stream that gave no packet at all: left out, reason `audio_dropped`.
    /// - A text track that gave no text to show: left out, reason `subtitle_empty`.
    public static func delivered(_ plan: Plan, executed: Plan?, adjustments: [String], rungs: [Rung]) -> Plan? {
        var delivered = plan
        if adjustments.contains(where: { $0.hasPrefix("audio_reencoded") }), plan.audio?.action == .copy,
           let sound = executed?.audio, sound.action == .transcode, sound.sourceIndex == plan.audio?.sourceIndex {
            delivered.audio = sound
            delivered.audioFallback = nil
            delivered.reasons.append("audio_reencoded")
        }
        if adjustments.contains(where: { $0.hasPrefix("video_reencoded") }), let fallback = plan.videoFallback, plan.video?.action == .copy {
            delivered.video = fallback
            delivered.videoFallback = nil
            delivered.deliveryFormat = .transcode
            if let rung = rungs.filter({ $0.videoKbps >= fallback.bitrateKbps }).min(by: { $0.videoKbps < $1.videoKbps }) {
                delivered.effectiveQuality = rung.quality
                delivered.targetBitrateKbps = rung.capKbps
            }
            delivered.reasons.append("video_reencoded")
        }
        if adjustments.contains(where: { $0.hasPrefix("audio_tracks_not_merged") }), let sound = executed?.audio,
           delivered.audio?.mergeSources != nil, sound.mergeSources == nil {
            delivered.audio?.mergeSources = nil
            delivered.reasons.removeAll { $0 == "audio_tracks_merged" }
            delivered.reasons.append("audio_tracks_not_merged")
        }
        if adjustments.contains(where: { $0.hasPrefix("audio_dropped") }), plan.audio != nil, let executed, executed.audio == nil {
            delivered.audio = nil
            delivered.audioFallback = nil
            delivered.reasons.append("audio_dropped")
        }
        // Text tracks that gave no text to show (`subtitle_empty`) are left out.
        if adjustments.contains(where: { $0.hasPrefix("subtitle_empty") }), let executed {
            for (i, sub) in delivered.subtitles.enumerated() where sub.action == .convert {
                if let left = executed.subtitles.first(where: { $0.sourceIndex == sub.sourceIndex && $0.reason == "subtitle_empty" }) {
                    delivered.subtitles[i] = left
                }
            }
            delivered.reasons.append("subtitle_empty")
        }
        return delivered == plan ? nil : delivered
    }
}
