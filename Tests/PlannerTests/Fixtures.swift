import Foundation
import KilnCore
import Testing
@testable import Planner

/// The repository's own `Presets` folder, found from this file's path.
let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let presets: Presets = {
    do { return try Presets.load(directory: repoRoot.appendingPathComponent("Presets").path) } catch {
        fatalError("cannot load Presets: \(error)")
    }
}()
let deviceNames = ["ios", "apple-tv-4k", "android", "android-tv", "web"]
func device(_ name: String) -> DeviceCaps { presets.deviceCaps(named: name)! }

// MARK: synthetic sources

func video(_ codec: String = "h264", _ w: Int, _ h: Int, index: Int = 0, fps: Double = 24, pix: String = "yuv420p",
           profile: String? = nil, level: Int? = nil, sar: Rational? = nil, rotation: Int? = nil, field: FieldOrder = .progressive,
           kbps: Int? = nil, transfer: String? = nil, hdr: HDRKind? = nil, dv: DolbyVision? = nil,
           isDefault: Bool = true, attached: Bool = false) -> StreamInfo {
    StreamInfo(index: index, type: .video, codec: codec, profile: profile, level: level, bitRate: kbps.map { $0 * 1000 },
               disposition: Disposition(isDefault: isDefault, attachedPicture: attached), width: w, height: h,
               pixelFormat: pix, sampleAspectRatio: sar, frameRate: fps, fieldOrder: field, rotation: rotation,
               colorTransfer: transfer, hdr: hdr, dolbyVision: dv)
}

func hdr10(_ w: Int = 1920, _ h: Int = 1080, index: Int = 0) -> StreamInfo {
    video("hevc", w, h, index: index, pix: "yuv420p10le", profile: "Main 10", transfer: "smpte2084", hdr: .hdr10)
}
func hlg(_ w: Int = 1920, _ h: Int = 1080) -> StreamInfo {
    video("hevc", w, h, pix: "yuv420p10le", profile: "Main 10", transfer: "arib-std-b67", hdr: .hlg)
}
func dolbyVision(profile: Int, compat: Int, transfer: String? = "smpte2084", w: Int = 1920, h: Int = 1080) -> StreamInfo {
    video("hevc", w, h, pix: "yuv420p10le", profile: "Main 10", transfer: transfer, hdr: .dolbyVision,
          dv: DolbyVision(profile: profile, level: 6, blCompatibilityId: compat))
}

func audio(_ codec: String = "aac", ch: Int = 2, index: Int = 1, lang: String? = "eng", isDefault: Bool = false,
           kbps: Int? = 128, commentary: Bool = false, described: Bool = false, title: String? = nil, rate: Int = 48000) -> StreamInfo {
    StreamInfo(index: index, type: .audio, codec: codec, bitRate: kbps.map { $0 * 1000 }, language: lang, title: title,
               disposition: Disposition(isDefault: isDefault, visualImpaired: described, commentary: commentary),
               channels: ch, sampleRate: rate)
}

/// `s` as the probe's survey describes sound whose format changes along the file.
func changing(_ s: StreamInfo) -> StreamInfo {
    var s = s
    s.formatChanges = true
    return s
}

func subtitle(_ codec: String, index: Int, lang: String? = "eng", forced: Bool = false, text: Bool? = nil, title: String? = nil,
              hearingImpaired: Bool = false, commentary: Bool = false) -> StreamInfo {
    StreamInfo(index: index, type: .subtitle, codec: codec, language: lang, title: title,
               disposition: Disposition(forced: forced, hearingImpaired: hearingImpaired, commentary: commentary), textSubtitle: text)
}

func media(_ container: String = "mp4", kbps: Int = 4000, seconds: Double = 3600, _ streams: StreamInfo...) -> MediaInfo {
    let format = ["mp4": "mov,mp4,m4a,3gp,3g2,mj2", "mov": "mov,mp4,m4a,3gp,3g2,mj2", "mkv": "matroska,webm",
                  "webm": "matroska,webm", "ts": "mpegts", "avi": "avi", "ogg": "ogg"][container] ?? container
    return MediaInfo(formatName: format, container: container, durationSeconds: seconds, bitRate: kbps * 1000,
                     sizeBytes: Int64(Double(kbps) * 125 * seconds), streams: streams, fingerprint: "fp1-test-\(container)-\(kbps)")
}

// MARK: invariants every plan must keep

/// The promises of issue 3 for any plan: no upscale, even sides, never above the rung,
/// never HDR to an SDR device, never a codec or container the device cannot play.
func checkInvariants(_ plan: Plan, source: MediaInfo, quality: Quality, caps: DeviceCaps?,
                     sourceLocation: SourceLocation = #_sourceLocation) {
    let dev = Device(caps)
    #expect(plan.artifactKey.count == 64, sourceLocation: sourceLocation)
    #expect(plan.quality == quality, sourceLocation: sourceLocation)
    let src = plan.video.flatMap { v in source.streams.first { $0.index == v.sourceIndex } }
    if plan.deliveryFormat != .transcode {
        #expect(plan.targetBitrateKbps == 0, sourceLocation: sourceLocation)
        #expect(plan.effectiveQuality == .original, sourceLocation: sourceLocation)
    } else {
        #expect(plan.targetBitrateKbps == plan.effectiveQuality.capKbps, sourceLocation: sourceLocation)
        #expect(plan.container == "mp4", sourceLocation: sourceLocation)
        if quality != .original { #expect(plan.effectiveQuality == quality, sourceLocation: sourceLocation) }
    }
    if plan.deliveryFormat == .remux { #expect(plan.container == "mp4", sourceLocation: sourceLocation) }

    // Never above the rung.
    if let cap = plan.effectiveQuality.capKbps {
        let videoKbps = plan.video?.bitrateKbps ?? 0
        var audioKbps = plan.audio?.bitrateKbps ?? 0
        if let a = plan.audio, a.action == .copy {
            let s = source.stream(a.sourceIndex)
            #expect(s?.bitRate != nil, "a copied audio track at a rung has a known bitrate", sourceLocation: sourceLocation)
            audioKbps = ((s?.bitRate ?? Int.max / 2) + 999) / 1000
        }
        #expect(videoKbps + audioKbps <= cap, sourceLocation: sourceLocation)
        if let e = plan.video?.encoder { #expect(e.maxrateKbps == videoKbps, sourceLocation: sourceLocation) }
        // An encode keeps the room the rung leaves for MP4's index (its largest sound beside
        // its picture), whatever sound it carries.
        if plan.deliveryFormat == .transcode, let rung = presets.rung(for: plan.effectiveQuality) {
            #expect(videoKbps + audioKbps <= rung.videoKbps + rung.maxAudioKbps, "\(plan.reasons)", sourceLocation: sourceLocation)
        }
    }
    if let cap = quality.capKbps, plan.deliveryFormat == .original {
        // Delivered untouched at a rung: the source's own bitrate fits the rung.
        #expect(source.bitRate > 0 && (source.bitRate + 999) / 1000 <= cap, sourceLocation: sourceLocation)
    }
    if let cap = quality.capKbps, plan.deliveryFormat == .remux, (source.bitRate + 999) / 1000 > cap {
        // Remuxed at a rung although the file is above it: what goes out must fit.
        let knownAudio = source.audioStreams.compactMap(\.bitRate).reduce(0, +)
        let videoBits = plan.video.map { v in source.stream(v.sourceIndex)?.bitRate ?? (source.bitRate - knownAudio) } ?? 0
        let audioBits = plan.audio.map { a in a.action == .copy ? (source.stream(a.sourceIndex)?.bitRate ?? Int.max / 2) : a.bitrateKbps * 1000 } ?? 0
        #expect((videoBits + 999) / 1000 + (audioBits + 999) / 1000 <= cap, sourceLocation: sourceLocation)
    }

    if let v = plan.video, let s = src {
        if v.action == .transcode {
            #expect(v.codec == "h264" && v.encoder?.name == "libx264" && v.encoder?.pixFmt == "yuv420p", sourceLocation: sourceLocation)
            #expect(v.width % 2 == 0 && v.height % 2 == 0 && v.width > 0 && v.height > 0, sourceLocation: sourceLocation)
            // Never an upscale: no more lines than coded, no wider than displayed (an
            // anamorphic frame's samples spread by its aspect ratio, to the next even width).
            let sar = s.sampleAspectRatio.map { $0.num > 0 && $0.den > 0 ? $0.value : 1 } ?? 1
            let shown = (Int(min(Double(s.width!) * sar, Double(FrameSize.maxSide)).rounded(.up)) + 1) & ~1
            let turned = Codecs.rotation(s) % 180 != 0
            let uw = turned ? s.height! : shown, uh = turned ? shown : s.height!
            #expect(v.width <= uw && v.height <= uh, "never an upscale: \(v.width)x\(v.height) from \(uw)x\(uh)", sourceLocation: sourceLocation)
            #expect(v.toneMap == Codecs.isHDR(s), sourceLocation: sourceLocation)
            #expect(v.deinterlace == (s.fieldOrder?.isInterlaced ?? false), sourceLocation: sourceLocation)
            #expect(v.rotation == Codecs.rotation(s), sourceLocation: sourceLocation)
            if let cap = caps?.maxResolution { #expect(cap.fits(width: v.width, height: v.height), sourceLocation: sourceLocation) }
            if let rungClass = presets.rung(for: plan.effectiveQuality)?.maxResolution4K ?? presets.rung(for: plan.effectiveQuality)?.maxResolution {
                #expect(rungClass.fits(width: v.width, height: v.height), sourceLocation: sourceLocation)
            }
        } else {
            #expect(v.codec == Codecs.canonical(s.codec) && v.width == (s.width ?? 0) && v.height == (s.height ?? 0), sourceLocation: sourceLocation)
            #expect(v.encoder == nil && v.bitrateKbps == 0, sourceLocation: sourceLocation)
        }
        if caps != nil || plan.deliveryFormat != .original {
            // Playable: the output picture is one the device decodes and shows.
            if v.action == .copy {
                #expect(dev.videoProblems(s).isEmpty, "copied video must play: \(dev.videoProblems(s))", sourceLocation: sourceLocation)
                if !dev.hdr { #expect(!Codecs.isHDR(s), "never HDR to an SDR device", sourceLocation: sourceLocation) }
            } else {
                #expect(dev.video.contains("h264"), sourceLocation: sourceLocation)
            }
        }
    }
    if let a = plan.audio, caps != nil || plan.deliveryFormat != .original {
        #expect(dev.playsAudio(a.codec), "audio \(a.codec) must play on the device", sourceLocation: sourceLocation)
        if plan.container == "mp4" && plan.deliveryFormat != .original {
            #expect(Codecs.mp4Audio.contains(a.codec), sourceLocation: sourceLocation)
        }
    }
    if plan.deliveryFormat != .original {
        #expect(dev.playsMP4, sourceLocation: sourceLocation)
        if let v = plan.video, v.action == .copy { #expect(Codecs.mp4Video.contains(v.codec), sourceLocation: sourceLocation) }
    } else if caps != nil {
        #expect(dev.playsContainer(source.container), sourceLocation: sourceLocation)
    }
    // The encode's buffer and bitrate within the level it signals (x264 warns, players may refuse).
    if let e = plan.video?.encoder, let level = H264Level(e.level) {
        #expect(e.bufsizeKbps <= level.maxHighBufferKbps && e.maxrateKbps <= level.maxHighBitrateKbps, "\(e)", sourceLocation: sourceLocation)
    }
    // Within the finer caps: the encode's level, the decoded sound's channels.
    if let most = caps?.maxH264Level, let level = plan.video?.encoder?.level {
        #expect((H264Level(level)?.idc ?? 99) <= most, "level \(level) for a device of \(most)", sourceLocation: sourceLocation)
    }
    for a in [plan.audio, plan.audioFallback].compactMap({ $0 }) where a.action == .transcode {
        if let most = caps?.maxAudioChannels, !dev.audioPassthrough.contains(a.codec) {
            #expect(a.channels <= most, "\(a.channels) channels for a device of \(most)", sourceLocation: sourceLocation)
        }
    }
    for s in plan.subtitles {
        if s.action == .convert { #expect(s.codec == "mov_text" && s.reason == nil, sourceLocation: sourceLocation) }
        else { #expect(s.reason != nil, sourceLocation: sourceLocation) }
        // Painted into pictures only where they are re-encoded, one track at most.
        if s.action == .burn { #expect(plan.video?.action == .transcode, sourceLocation: sourceLocation) }
    }
    #expect(plan.subtitles.filter { $0.action == .burn }.count <= 1, sourceLocation: sourceLocation)
    #expect(Set(plan.reasons).count == plan.reasons.count, "reasons are not repeated", sourceLocation: sourceLocation)
}
