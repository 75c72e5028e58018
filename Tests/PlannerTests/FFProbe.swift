import Foundation
import KilnCore

/// A small stand-in for the media engine's probe, for tests only: runs
/// `ffprobe -v error -print_format json -show_format -show_streams -show_chapters FILE`
/// and maps its JSON onto `MediaInfo`. Throws when ffprobe cannot read the file.
enum FFProbe {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func mediaInfo(path: String) throws -> MediaInfo {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ffprobe", "-v", "error", "-print_format", "json", "-show_format", "-show_streams", "-show_chapters", path]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let errText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(description: "ffprobe failed: \(errText)") }
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let format = root["format"] as? [String: Any] else {
            throw Failure(description: "ffprobe printed no format")
        }
        let formatName = format["format_name"] as? String ?? ""
        let ext = (path as NSString).pathExtension
        let duration = double(format["duration"]) ?? 0
        let size = Int64(string(format["size"]) ?? "") ?? 0
        var bitRate = Int(string(format["bit_rate"]) ?? "") ?? 0
        if bitRate == 0, duration > 0 { bitRate = Int(Double(size) * 8 / duration) }
        let streams = (root["streams"] as? [[String: Any]] ?? []).map(stream)
        let chapters = (root["chapters"] as? [[String: Any]] ?? []).map {
            Chapter(startSeconds: double($0["start_time"]) ?? 0, endSeconds: double($0["end_time"]) ?? 0,
                    title: ($0["tags"] as? [String: Any])?["title"] as? String)
        }
        return MediaInfo(formatName: formatName, container: Container.name(formatName: formatName, fileExtension: ext),
                         durationSeconds: duration, startSeconds: double(format["start_time"]) ?? 0, bitRate: bitRate,
                         sizeBytes: size, streams: streams, chapters: chapters,
                         fingerprint: try SourceFingerprint.compute(path: path))
    }

    static func stream(_ s: [String: Any]) -> StreamInfo {
        let type = StreamType(rawValue: s["codec_type"] as? String ?? "") ?? .unknown
        let tags = s["tags"] as? [String: Any] ?? [:]
        let disp = s["disposition"] as? [String: Any] ?? [:]
        func flag(_ k: String) -> Bool { (disp[k] as? Int ?? 0) != 0 }
        let codec = s["codec_name"] as? String ?? "unknown"
        var info = StreamInfo(
            index: s["index"] as? Int ?? 0, type: type, codec: codec, profile: s["profile"] as? String,
            level: s["level"] as? Int, bitRate: Int(string(s["bit_rate"]) ?? ""), durationSeconds: double(s["duration"]),
            language: tags["language"] as? String, title: tags["title"] as? String,
            disposition: Disposition(isDefault: flag("default"), forced: flag("forced"), hearingImpaired: flag("hearing_impaired"),
                                     visualImpaired: flag("visual_impaired"), commentary: flag("comment"),
                                     attachedPicture: flag("attached_pic")))
        guard type == .video || type == .audio || type == .subtitle else { return info }
        if type == .video {
            info.width = s["width"] as? Int
            info.height = s["height"] as? Int
            info.pixelFormat = s["pix_fmt"] as? String
            if let sar = string(s["sample_aspect_ratio"]), let r = rational(sar), r.num > 0 { info.sampleAspectRatio = r }
            // avg_frame_rate unless it is a container timebase (1000 fps in WebM), then r_frame_rate.
            let rates = ["avg_frame_rate", "r_frame_rate"].compactMap { string(s[$0]).flatMap(rational) }
                .filter { $0.num > 0 && $0.den > 0 }.map(\.value)
            info.frameRate = rates.first { $0 <= 240 } ?? rates.first
            info.fieldOrder = (s["field_order"] as? String).flatMap(FieldOrder.init(rawValue:))
            info.colorPrimaries = s["color_primaries"] as? String
            info.colorTransfer = s["color_transfer"] as? String
            info.colorMatrix = s["color_space"] as? String
            info.colorRange = s["color_range"] as? String
            for side in s["side_data_list"] as? [[String: Any]] ?? [] {
                if let r = side["rotation"] as? Int {
                    // ffprobe prints the display matrix's counter-clockwise angle.
                    info.rotation = ((-r % 360) + 360) % 360
                }
                if (side["side_data_type"] as? String) == "DOVI configuration record" {
                    info.dolbyVision = DolbyVision(profile: side["dv_profile"] as? Int ?? 0, level: side["dv_level"] as? Int ?? 0,
                                                   rpuPresent: (side["rpu_present_flag"] as? Int ?? 0) != 0,
                                                   elPresent: (side["el_present_flag"] as? Int ?? 0) != 0,
                                                   blPresent: (side["bl_present_flag"] as? Int ?? 0) != 0,
                                                   blCompatibilityId: side["dv_bl_signal_compatibility_id"] as? Int ?? 0)
                }
            }
            if info.dolbyVision != nil { info.hdr = .dolbyVision }
            else if info.colorTransfer == "smpte2084" { info.hdr = .hdr10 }
            else if info.colorTransfer == "arib-std-b67" { info.hdr = .hlg }
            else { info.hdr = .sdr }
        } else if type == .audio {
            info.channels = s["channels"] as? Int
            info.channelLayout = s["channel_layout"] as? String
            info.sampleRate = Int(string(s["sample_rate"]) ?? "")
        } else {
            let text: Set = ["subrip", "ass", "ssa", "mov_text", "webvtt", "text", "microdvd"]
            let bitmap: Set = ["hdmv_pgs_subtitle", "dvd_subtitle", "dvb_subtitle", "xsub"]
            info.textSubtitle = text.contains(codec) ? true : (bitmap.contains(codec) ? false : nil)
        }
        return info
    }

    static func string(_ v: Any?) -> String? { v as? String ?? (v as? NSNumber)?.stringValue }
    static func double(_ v: Any?) -> Double? { string(v).flatMap(Double.init) }
    static func rational(_ s: String) -> Rational? {
        let parts = s.split(whereSeparator: { $0 == ":" || $0 == "/" }).compactMap { Int($0) }
        return parts.count == 2 ? Rational(parts[0], parts[1]) : nil
    }
}
