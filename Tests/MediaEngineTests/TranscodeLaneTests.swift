import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

// The transcode lanes on real files, driven by a minimal loop (open, prepare, header,
// read → consume, finish, trailer) so they are tested apart from the pipeline; every
// output is checked with ffprobe and a full decode by the ffmpeg command.

private let mediaDir = "/work/shared/media"

/// Runs a command and returns (status, stdout, stderr).
private func run(_ tool: String, _ args: [String]) throws -> (status: Int32, out: String, err: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    p.arguments = [tool] + args
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    // Drain stderr on another thread so a chatty tool cannot block on a full pipe.
    let errData = DataBox()
    let done = DispatchSemaphore(value: 0)
    let reader = err.fileHandleForReading
    DispatchQueue.global().async {
        errData.set(reader.readDataToEndOfFile())
        done.signal()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    done.wait()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData.take(), as: UTF8.self))
}

private final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    func take() -> Data { lock.lock(); defer { lock.unlock() }; return data }
}

private func scratchDir() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-tx-\(UUID().uuidString.prefix(8))")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// ffprobe's view of one output stream.
private struct ProbedStream {
    var fields: [String: Any]
    subscript(_ key: String) -> String? { fields[key].map { "\($0)" } }
    var int: (String) -> Int? { { key in self[key].flatMap { Int($0) } } }
    var sideDataTypes: [String] {
        (fields["side_data_list"] as? [[String: Any]])?.compactMap { $0["side_data_type"] as? String } ?? []
    }
}

private func probe(_ path: String, countFrames: Bool = false) throws -> [ProbedStream] {
    let r = try run("ffprobe", ["-v", "error", "-of", "json", "-show_streams"] + (countFrames ? ["-count_frames"] : []) + [path])
    #expect(r.status == 0, "ffprobe failed: \(r.err)")
    let json = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
    return ((json?["streams"] as? [[String: Any]]) ?? []).map(ProbedStream.init)
}

/// `path`'s first audio stream as the ffmpeg command decodes it: 48 kHz float samples,
/// channels interleaved.
private func decodedSound(_ path: String) throws -> [Float] {
    let pcm = URL(fileURLWithPath: path + ".f32")
    defer { try? FileManager.default.removeItem(at: pcm) }
    let r = try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", path, "-map", "0:a:0", "-ar", "48000", "-f", "f32le", pcm.path])
    guard r.status == 0 else { throw TestFailure("ffmpeg cannot decode \(path): \(r.err)") }
    return try Data(contentsOf: pcm).withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
}

/// The level (dB against the sources' 0.25 amplitude) of each tone in each channel of
/// `path`'s first audio stream, over one second from `from` (a whole number of cycles of
/// every whole-hertz tone), by Goertzel's algorithm.
private func toneLevels(_ path: String, channels: Int, tones: [Int], from: Int = 1) throws -> [[Double]] {
    let samples = try decodedSound(path)
    let n = 48000, start = 48000 * from * channels
    guard samples.count >= start + n * channels else { throw TestFailure("\(path) holds less than \(from + 1) seconds of sound") }
    return (0..<channels).map { c in
        tones.map { f in
            let w = 2 * Double.pi * Double(f) / 48000, k = 2 * cos(w)
            var s1 = 0.0, s2 = 0.0
            for i in 0..<n { let s0 = Double(samples[start + i * channels + c]) + k * s1 - s2; s2 = s1; s1 = s0 }
            let amplitude = 2 * (s1 * s1 + s2 * s2 - k * s1 * s2).squareRoot() / Double(n)
            return 20 * log10(max(amplitude, 1e-9) / 0.25)
        }
    }
}

/// A full decode with an independent decoder: no error may be logged.
private func decodesCleanly(_ path: String) throws -> String {
    let r = try run("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-f", "null", "-"])
    return r.status == 0 ? r.err : "exit \(r.status): \(r.err)"
}

/// Average PSNR (dB) of `path` against `reference` as the ffmpeg command decodes it
/// (autorotated) scaled to the same size.
private func psnr(_ path: String, against reference: String, width: Int, height: Int) throws -> Double {
    let r = try run("ffmpeg", ["-nostdin", "-hide_banner", "-i", path, "-i", reference, "-filter_complex",
                               "[1:v]scale=\(width):\(height),format=yuv420p[r];[0:v]format=yuv420p[o];[o][r]psnr", "-f", "null", "-"])
    guard let range = r.err.range(of: "average:") else { return 0 }
    let rest = r.err[range.upperBound...].prefix { !$0.isWhitespace }
    return Double(rest) ?? (rest == "inf" ? .infinity : 0)
}

private struct Transcoded {
    var path: String
    var video: VideoTranscodeLane?
    var audio: AudioTranscodeLane?
}

/// The test-only driver: the lanes the plans ask for, timestamps shifted so the output
/// starts at zero, nothing else.
private func transcode(_ source: String, video: VideoPlan? = nil, audio: AudioPlan? = nil,
                       to dir: URL) throws -> Transcoded {
    let cancellation = Cancellation()
    defer { withExtendedLifetime(cancellation) {} }
    let info = try Prober.probe(path: source, cancellation: cancellation, fingerprint: false)
    let demuxer = try Demuxer(path: source, cancellation: cancellation)
    var lanes: [Lane] = []
    var result = Transcoded(path: dir.appendingPathComponent("out.mp4").path)
    if let video {
        let lane = try VideoTranscodeLane(demuxer: demuxer, plan: video, source: info.stream(video.sourceIndex)!)
        lanes.append(lane)
        result.video = lane
    }
    if let audio {
        let lane = try AudioTranscodeLane(demuxer: demuxer, plan: audio, source: info.stream(audio.sourceIndex)!,
                                                sourceSeconds: info.durationSeconds)
        lanes.append(lane)
        result.audio = lane
    }
    let muxer = try Muxer(path: result.path, cancellation: cancellation)
    for lane in lanes { try lane.prepare(muxer: muxer) }
    try muxer.writeHeader()
    var start = Int64.max
    for lane in lanes {
        let st = demuxer.stream(Int(lane.inputIndex))
        if st.pointee.start_time != noPTS {
            start = min(start, rescale(st.pointee.start_time, from: st.pointee.time_base, to: kiln_time_base_q()))
        }
    }
    if start == .max { start = 0 }
    let packet = try Packet()
    while try demuxer.read(into: packet) {
        defer { packet.unref() }
        guard let lane = lanes.first(where: { $0.inputIndex == packet.streamIndex }) else { continue }
        let shift = rescale(start, from: kiln_time_base_q(), to: demuxer.stream(Int(packet.streamIndex)).pointee.time_base)
        let p = packet.pointer
        if p.pointee.pts != noPTS { p.pointee.pts -= shift }
        if p.pointee.dts != noPTS { p.pointee.dts -= shift }
        try lane.consume(packet, muxer: muxer)
    }
    for lane in lanes { try lane.finish(muxer: muxer) }
    try muxer.finish()
    _ = try FastStart.apply(path: result.path)
    return result
}

private func encoderSettings(level: String = "4.1") -> EncoderSettings {
    EncoderSettings(preset: "veryfast", crf: 23, maxrateKbps: 2000, bufsizeKbps: 4000, profile: "high",
                    level: level, gopSeconds: 2)
}

private func videoPlan(_ index: Int, _ w: Int, _ h: Int, toneMap: Bool = false, deinterlace: Bool = false,
                       rotation: Int = 0) -> VideoPlan {
    VideoPlan(sourceIndex: index, action: .transcode, codec: "h264", width: w, height: h, bitrateKbps: 2000,
              toneMap: toneMap, deinterlace: deinterlace, rotation: rotation, encoder: encoderSettings())
}

private func audioPlan(_ index: Int, codec: String = "aac", channels: Int = 2, kbps: Int = 128) -> AudioPlan {
    AudioPlan(sourceIndex: index, action: .transcode, codec: codec, channels: channels, bitrateKbps: kbps)
}

private func duration(_ s: ProbedStream) -> Double { Double(s["duration"] ?? "") ?? 0 }

@Suite("Transcode lanes") struct TranscodeLaneTests {
    @Test("the decoder turns every packet of a video stream into frames")
    func decoderDecodesAllFrames() throws {
        let cancellation = Cancellation()
        let demuxer = try Demuxer(path: "\(mediaDir)/sp_bear-640x360-hevc-hdr10.mp4", cancellation: cancellation)
        let index = demuxer.firstVideoStream
        let decoder = try Decoder(stream: demuxer.stream(index))
        let packet = try Packet()
        var frames = 0
        while try demuxer.read(into: packet) {
            defer { packet.unref() }
            guard packet.streamIndex == Int32(index) else { continue }
            try decoder.decode(packet) { frame in
                #expect(frame.pointer.pointee.width == 640)
                frames += 1
            }
        }
        try decoder.decode(nil) { _ in frames += 1 }
        #expect(frames == 84)  // ffprobe -count_frames says 84
        #expect(decoder.corruptPackets == 0)
        withExtendedLifetime(cancellation) {}
    }

    @Test("the tone curve ends at the lower of MaxCLL and the mastering display's peak, ignoring unknown and impossible values")
    func contentPeak() {
        #expect(ToneCurve.peakNits(maxCLL: 1000, masteringPeak: 4000) == 1000)
        #expect(ToneCurve.peakNits(maxCLL: 0, masteringPeak: 4000) == 4000)
        #expect(ToneCurve.peakNits(maxCLL: 1400, masteringPeak: 0) == 1400)
        #expect(ToneCurve.peakNits(maxCLL: 65535, masteringPeak: 1000) == 1000)
        #expect(ToneCurve.peakNits(maxCLL: 0, masteringPeak: 0) == 1000)
        #expect(ToneCurve.peakNits(maxCLL: 40, masteringPeak: 0.01) == 1000)
    }

    @Test("the filter chain deinterlaces, scales before tone mapping when shrinking, rotates last, and says where the chroma is read and written (sited so that the rotation leaves it left)")
    func filterDescription() {
        let input = VideoInput(width: 1920, height: 1080, pixelFormat: AV_PIX_FMT_YUV420P10LE.rawValue,
                               sampleAspect: AVRational(num: 1, den: 1), interlaced: false)
        let hdr = videoFilterDescription(plan: videoPlan(0, 720, 1280, toneMap: true, deinterlace: true, rotation: 90),
                                         input: input, toneMap: .pq, peakNits: 4000, outputMatrix: "bt709")
        #expect(hdr == "bwdif=mode=send_frame:parity=auto:deint=all,scale=w=1280:h=720:flags=bicubic:in_h_chr_pos=0:in_v_chr_pos=128:out_h_chr_pos=0:out_v_chr_pos=128,"
                + "zscale=tin=smpte2084:pin=bt2020:min=bt2020nc:p=bt2020:t=linear:npl=203,format=gbrpf32le,zscale=p=bt709,"
                + "tonemap=tonemap=mobius:param=0.3:desat=0:peak=4000/203,zscale=t=bt709:m=bt709:r=tv:c=bottom,format=yuv420p,setsar=1,transpose=clock")
        // HLG's peak is its reference display's, whatever the stream says; content dimmer
        // than reference white is left linear.
        let hlg = videoFilterDescription(plan: videoPlan(0, 1920, 1080, toneMap: true), input: input, toneMap: .hlg,
                                         peakNits: 4000, outputMatrix: "bt709")
        #expect(hlg.contains("zscale=tin=arib-std-b67:pin=bt2020:min=bt2020nc:p=bt2020:t=linear:npl=203,") && hlg.contains(":peak=1000/203,"))
        let dim = videoFilterDescription(plan: videoPlan(0, 1920, 1080, toneMap: true), input: input, toneMap: .pq,
                                         peakNits: 150, outputMatrix: "bt709")
        #expect(dim.contains(":peak=203/203,"))
        // At its own size no scale moves the chroma: a quarter turn's is re-sited by zscale on
        // the 4:2:0 planes; a half turn's target (right of its pair) has no zscale name, so
        // it goes through 4:4:4.
        var phone = input
        phone.pixelFormat = AV_PIX_FMT_YUV420P.rawValue
        #expect(videoFilterDescription(plan: videoPlan(0, 1080, 1920, rotation: 90), input: phone, toneMap: nil, outputMatrix: "bt709")
                == "scale=w=1920:h=1080:flags=bicubic:out_range=tv:in_h_chr_pos=0:in_v_chr_pos=128:out_h_chr_pos=0:out_v_chr_pos=128,format=yuv420p,"
                + "zscale=cin=left:c=bottom:f=bicubic,format=yuv420p,setsar=1,transpose=clock")
        #expect(videoFilterDescription(plan: videoPlan(0, 1920, 1080, rotation: 180), input: phone, toneMap: nil, outputMatrix: "bt709")
                == "scale=w=1920:h=1080:flags=bicubic:out_range=tv:in_h_chr_pos=0:in_v_chr_pos=128,format=yuv444p,"
                + "scale=out_h_chr_pos=256:out_v_chr_pos=128,format=yuv420p,setsar=1,hflip,vflip")
        // Tone-mapped at its own size, the tone map's last zscale writes the chroma where the
        // rotation wants it: no second zscale, and no scale after it that would only copy.
        #expect(videoFilterDescription(plan: videoPlan(0, 1080, 1920, toneMap: true, rotation: 90), input: input, toneMap: .pq,
                                       peakNits: 1000, outputMatrix: "bt709")
                == "zscale=tin=smpte2084:pin=bt2020:min=bt2020nc:p=bt2020:t=linear:npl=203,format=gbrpf32le,zscale=p=bt709,"
                + "tonemap=tonemap=mobius:param=0.3:desat=0:peak=1000/203,zscale=t=bt709:m=bt709:r=tv:c=bottom,format=yuv420p,"
                + "setsar=1,transpose=clock")
        #expect(videoFilterDescription(plan: videoPlan(0, 1920, 1080, toneMap: true), input: input, toneMap: .pq,
                                       peakNits: 1000, outputMatrix: "bt709").hasSuffix(",zscale=t=bt709:m=bt709:r=tv:c=left,format=yuv420p,setsar=1"))
        var flagged = input
        flagged.interlaced = true
        let sdr = videoFilterDescription(plan: videoPlan(0, 1920, 1080), input: flagged, toneMap: nil, outputMatrix: "bt709")
        #expect(sdr == "bwdif=mode=send_frame:parity=auto:deint=interlaced,scale=w=1920:h=1080:flags=bicubic:out_range=tv:in_h_chr_pos=0:in_v_chr_pos=128:out_h_chr_pos=0:out_v_chr_pos=128,format=yuv420p,setsar=1")
        // Progressive pictures stored interlaced are matched whole at their own rate; film
        // in 3:2 pulldown is matched, then its repeats left out.
        var matched = videoPlan(0, 1920, 1080, deinterlace: true)
        matched.fieldMatch = true
        #expect(videoFilterDescription(plan: matched, input: flagged, toneMap: nil, outputMatrix: "bt709")
                == "fieldmatch=order=auto:combmatch=full,bwdif=mode=send_frame:parity=auto:deint=interlaced,"
                + "scale=w=1920:h=1080:flags=bicubic:out_range=tv:in_h_chr_pos=0:in_v_chr_pos=128:out_h_chr_pos=0:out_v_chr_pos=128,format=yuv420p,setsar=1")
        var film = videoPlan(0, 1920, 1080, deinterlace: true)
        film.inverseTelecine = true
        #expect(videoFilterDescription(plan: film, input: flagged, toneMap: nil, outputMatrix: "bt709")
                .hasPrefix("fieldmatch=order=auto:combmatch=full,bwdif=mode=send_frame:parity=auto:deint=interlaced,decimate,scale="))
    }

    @Test("a frame rate a millionth away from an NTSC rate (libavformat's 19001/317 for 59.94 in milliseconds) is that rate; others stay as they are")
    func ntscRates() {
        func rate(_ num: Int32, _ den: Int32) -> [Int32] { let r = VideoTranscodeLane.standard(AVRational(num: num, den: den)); return [r.num, r.den] }
        #expect(rate(19001, 317) == [60000, 1001] && rate(30000, 1001) == [30000, 1001])
        #expect(rate(25, 1) == [25, 1] && rate(24, 1) == [24, 1] && rate(60, 1) == [60, 1])
    }

    @Test("a picture whose shape changes mid-stream is fitted inside the plan's frame, not stretched to it")
    func pictureFit() {
        // 4:3 SD recording planned at 640x480; a 16:9 programme follows: letterboxed.
        #expect(pictureSize(frameWidth: 640, frameHeight: 480, firstAspect: 4.0 / 3, aspect: 16.0 / 9)! == (640, 360))
        // The other way round: pillarboxed in a 16:9 frame.
        #expect(pictureSize(frameWidth: 854, frameHeight: 480, firstAspect: 16.0 / 9, aspect: 4.0 / 3)! == (640, 480))
        // The same shape (and rounding noise within 2 %) fills the frame.
        #expect(pictureSize(frameWidth: 854, frameHeight: 480, firstAspect: 16.0 / 9, aspect: 16.0 / 9) == nil)
        #expect(pictureSize(frameWidth: 854, frameHeight: 480, firstAspect: 16.0 / 9, aspect: 1.79) == nil)
        // A container that stretched the first picture (plan 4:3 from a 16:9 bitstream)
        // stretches the next in the same proportion: a 16:9 → 2.35:1 change letterboxes.
        let fit = pictureSize(frameWidth: 640, frameHeight: 480, firstAspect: 16.0 / 9, aspect: 2.35)!
        #expect(fit.width == 640 && abs(Double(fit.height) - 480 * (16.0 / 9) / 2.35) <= 2)
        let input = VideoInput(width: 1280, height: 720, pixelFormat: AV_PIX_FMT_YUV420P.rawValue,
                               sampleAspect: AVRational(num: 1, den: 1), interlaced: false)
        let padded = videoFilterDescription(plan: videoPlan(0, 640, 480), input: input, toneMap: nil, outputMatrix: "bt709",
                                            picture: (640, 360))
        #expect(padded == "scale=w=640:h=360:flags=bicubic:out_range=tv:in_h_chr_pos=0:in_v_chr_pos=128:out_h_chr_pos=0:out_v_chr_pos=128,pad=w=640:h=480:x=0:y=60:color=black,format=yuv420p,setsar=1")
    }

    @Test("an untagged source's colours are written as players assume them for its size: BT.709 from 720 lines, PAL's BT.601 for 576 lines, NTSC's for 480, BT.709 for RGB at any size; tags it has are kept")
    func assumedColours() throws {
        func tags(_ width: Int32, _ height: Int32, primaries: AVColorPrimaries = AVCOL_PRI_UNSPECIFIED,
                  format: AVPixelFormat = AV_PIX_FMT_YUV420P, space: AVColorSpace = AVCOL_SPC_UNSPECIFIED) -> [UInt32] {
            var par = avcodec_parameters_alloc()
            defer { avcodec_parameters_free(&par) }
            par!.pointee.width = width
            par!.pointee.height = height
            par!.pointee.color_primaries = primaries
            par!.pointee.format = format.rawValue
            par!.pointee.color_space = space
            let t = ColorTags(par: par!)
            return [t.primaries.rawValue, t.transfer.rawValue, t.matrix.rawValue]
        }
        #expect(tags(720, 576) == [AVCOL_PRI_BT470BG.rawValue, AVCOL_TRC_SMPTE170M.rawValue, AVCOL_SPC_BT470BG.rawValue])
        #expect(tags(720, 480) == [AVCOL_PRI_SMPTE170M.rawValue, AVCOL_TRC_SMPTE170M.rawValue, AVCOL_SPC_SMPTE170M.rawValue])
        #expect(tags(1920, 1080) == [AVCOL_PRI_BT709.rawValue, AVCOL_TRC_BT709.rawValue, AVCOL_SPC_BT709.rawValue])
        #expect(tags(720, 576, primaries: AVCOL_PRI_SMPTE170M)[0] == AVCOL_PRI_SMPTE170M.rawValue)
        // RGB (sRGB: BT.709's primaries), converted with BT.709's matrix, is BT.709 at any size.
        let bt709 = [AVCOL_PRI_BT709.rawValue, AVCOL_TRC_BT709.rawValue, AVCOL_SPC_BT709.rawValue]
        #expect(tags(640, 480, format: AV_PIX_FMT_BGR0) == bt709 && tags(640, 480, format: AV_PIX_FMT_GBRP, space: AVCOL_SPC_RGB) == bt709)
    }

    @Test("HDR10 HEVC becomes 8-bit SDR BT.709 H.264 at a smaller size, with AAC audio")
    func hdr10ToSDR() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode("\(mediaDir)/sp_bear-640x360-hevc-hdr10.mp4",
                                video: videoPlan(0, 480, 270, toneMap: true), audio: audioPlan(1), to: dir)
        let streams = try probe(out.path, countFrames: true)
        #expect(streams.count == 2)
        let v = streams[0], a = streams[1]
        #expect(v["codec_name"] == "h264")
        #expect(v["pix_fmt"] == "yuv420p")
        #expect(v.int("width") == 480 && v.int("height") == 270)
        #expect(v["color_transfer"] == "bt709" && v["color_primaries"] == "bt709" && v["color_space"] == "bt709")
        #expect(v["profile"] == "High" && v.int("level") == 41)
        #expect(v.int("nb_read_frames") == 84)
        #expect(a["codec_name"] == "aac" && a.int("channels") == 2)
        #expect(abs(duration(v) - duration(a)) < 0.1)
        #expect(try decodesCleanly(out.path) == "")
        #expect(out.video?.stats.corruptPackets == 0)
        #expect(out.video?.stats.framesEncoded == 84)
    }

    @Test("HLG 1080p is tone-mapped to SDR 720p")
    func hlgToSDR() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = "\(mediaDir)/ax_hlg10-color-test.mp4"
        let index = try #require(try Prober.probe(path: source, fingerprint: false).videoStreams.first).index
        let out = try transcode(source, video: videoPlan(index, 1280, 720, toneMap: true), to: dir)
        let v = try #require(try probe(out.path).first)
        #expect(v["codec_name"] == "h264" && v["pix_fmt"] == "yuv420p")
        #expect(v.int("width") == 1280 && v.int("height") == 720)
        #expect(v["color_transfer"] == "bt709")
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("a rotated phone video comes out upright with no display matrix, 5.1 AAC downmixed to stereo")
    func rotationAppliedToPixels() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = "\(mediaDir)/mb_rotate-buck-bunny.mp4"
        let info = try Prober.probe(path: source, fingerprint: false)
        let sv = try #require(info.videoStreams.first)
        let sa = try #require(info.audioStreams.first)
        #expect(sv.rotation == 90 || sv.rotation == 270)
        let out = try transcode(source, video: videoPlan(sv.index, 360, 640, rotation: sv.rotation ?? 0),
                                audio: audioPlan(sa.index), to: dir)
        let streams = try probe(out.path)
        let v = streams[0], a = streams[1]
        #expect(v.int("width") == 360 && v.int("height") == 640)
        #expect(!v.sideDataTypes.contains("Display Matrix"))
        // Upright the same way the ffmpeg command's autorotate makes it: the pictures match.
        #expect(try psnr(out.path, against: source, width: 360, height: 640) > 30)
        #expect(a["codec_name"] == "aac" && a.int("channels") == 2 && a["channel_layout"] == "stereo")
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("10-bit H.264 becomes 8-bit 4:2:0 at the same size")
    func tenBitToEightBit() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode("\(mediaDir)/gr_test_yuv420p10le_x264.mp4", video: videoPlan(0, 720, 480), to: dir)
        let v = try #require(try probe(out.path, countFrames: true).first)
        #expect(v["pix_fmt"] == "yuv420p" && v.int("width") == 720 && v.int("height") == 480)
        let src = try #require(try probe("\(mediaDir)/gr_test_yuv420p10le_x264.mp4", countFrames: true).first)
        #expect(v.int("nb_read_frames") == src.int("nb_read_frames"))
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("4:4:4 H.264 becomes 4:2:0")
    func chroma444To420() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode("\(mediaDir)/ax_sample_with_chapters.mkv", video: videoPlan(0, 320, 240), audio: audioPlan(1), to: dir)
        let streams = try probe(out.path)
        #expect(streams[0]["pix_fmt"] == "yuv420p" && streams[0]["profile"] == "High")
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("MPEG-2 video and MP2 audio from MPEG-TS become H.264 and AAC in sync")
    func mpeg2TransportStream() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode("\(mediaDir)/ax_bbb_2500ms.ts", video: videoPlan(0, 640, 360), audio: audioPlan(1), to: dir)
        let streams = try probe(out.path)
        let v = streams[0], a = streams[1]
        #expect(v.int("width") == 640 && v.int("height") == 360 && a["codec_name"] == "aac")
        #expect(abs(duration(v) - 2.5) < 0.15)
        #expect(abs(duration(v) - duration(a)) < 0.15)
        #expect(Double(a["start_time"] ?? "") ?? 1 < 0.05)
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("MPEG-4 Part 2 video and MP3 audio from AVI become H.264 and AAC")
    func aviWithMP3() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode("\(mediaDir)/ax_sample.avi", video: videoPlan(0, 960, 400), audio: audioPlan(1), to: dir)
        let streams = try probe(out.path)
        #expect(streams[0]["codec_name"] == "h264" && streams[1]["codec_name"] == "aac")
        #expect(abs(duration(streams[0]) - duration(streams[1])) < 0.15)
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("E-AC-3 5.1 is downmixed to stereo AAC, or re-encoded as 5.1 AC-3, E-AC-3 and AAC (whose 5.1 the MP4 index says)")
    func surroundAudio() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = "\(mediaDir)/mb_eac3.mkv"
        let stereo = try transcode(source, audio: audioPlan(0), to: dir)
        let a = try #require(try probe(stereo.path).first)
        #expect(a["codec_name"] == "aac" && a.int("channels") == 2 && a.int("sample_rate") == 48000)
        #expect(abs(duration(a) - 2.0) < 0.1)
        #expect(try decodesCleanly(stereo.path) == "")
        // AAC 5.1 too (the engine's re-encode of a copied 5.1 whose copy stops): written with
        // AAC's own 5.1, whose channel configuration MP4's sample entry says; the source's
        // 5.1 with side surrounds needs a program config element, and the MP4 said 0 channels.
        for codec in ["ac3", "eac3", "aac"] {
            let out = try transcode(source, audio: audioPlan(0, codec: codec, channels: 6, kbps: 384), to: dir)
            let s = try #require(try probe(out.path).first)
            #expect(s["codec_name"] == codec && s.int("channels") == 6)
            // As verification reads the MP4: its index alone, no decoding.
            let indexed = try Prober.describe(try Demuxer(path: out.path, cancellation: Cancellation(), analyze: false), scan: false)
            #expect(indexed.audioStreams.first?.channels == 6, "\(codec): \(String(describing: indexed.audioStreams.first?.channels))")
            #expect(abs(duration(s) - 2.0) < 0.1)
            #expect(try decodesCleanly(out.path) == "")
        }
    }

    @Test("surround channels go to the speakers nearest them: 7.1's side pair is 5.1's surrounds and its back pair folds in at −3 dB; three channels in no stated order are left, right and centre, the centre heard in both sides of a stereo mix")
    func surroundLayouts() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A tone of its own in each channel: FL FR FC LFE BL BR SL SR.
        let tones = [300, 500, 700, 80, 1100, 1300, 1700, 1900]
        let sevenOne = try Media.generated("tones-7.1.mkv", ["-f", "lavfi", "-i",
            "aevalsrc=" + tones.map { "0.25*sin(2*PI*\($0)*t)" }.joined(separator: "|") + ":c=7.1:s=48000:d=4", "-c:a", "pcm_s16le"])
        let out = try transcode(sevenOne, audio: audioPlan(0, codec: "eac3", channels: 6, kbps: 640), to: dir)
        #expect(try probe(out.path).first?["channel_layout"] == "5.1(side)")
        let surround = try toneLevels(out.path, channels: 6, tones: tones)
        // Surround left: SL whole, BL at −3 dB; surround right likewise; the front as it was.
        #expect(abs(surround[4][6]) < 0.5 && abs(surround[4][4] + 3) < 0.5, "\(surround[4])")
        #expect(abs(surround[5][7]) < 0.5 && abs(surround[5][5] + 3) < 0.5, "\(surround[5])")
        #expect((0..<3).allSatisfy { abs(surround[$0][$0]) < 0.5 }, "\(surround)")
        // AAC lists no layouts: libavutil's default 5.1, which AAC signals without a
        // program config element (5.1 with side surrounds needs one).
        #expect(try probe(try transcode(sevenOne, audio: audioPlan(0, channels: 6, kbps: 384), to: dir).path).first?["channel_layout"] == "5.1")

        let three = try Media.generated("tones-3ch-unstated.mkv", ["-f", "lavfi", "-i",
            "aevalsrc=" + tones.prefix(3).map { "0.25*sin(2*PI*\($0)*t)" }.joined(separator: "|") + ":s=48000:d=4", "-c:a", "pcm_s16le"])
        #expect(try probe(three).first?["channel_layout"] == nil, "the generated source must state no layout")
        let stereo = try toneLevels(try transcode(three, audio: audioPlan(0), to: dir).path, channels: 2, tones: tones)
        #expect(abs(stereo[0][0]) < 0.5 && abs(stereo[1][1]) < 0.5 && abs(stereo[0][2] + 3) < 0.5 && abs(stereo[1][2] + 3) < 0.5, "\(stereo)")
    }

    @Test("channels in a count libavutil has no layout for (9) are mixed as WAVE orders them, not dropped as damage (the output was silence, exit 0); 20 such channels, past WAVE's positions, fail as unsupported")
    func countsWithoutDefaultLayout() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let tones = [300, 500, 700, 80, 1100, 1300, 1500, 1700, 1900]
        let nine = try Media.generated("tones-9ch-unstated.mkv", ["-f", "lavfi", "-i",
            "aevalsrc=" + tones.map { "0.25*sin(2*PI*\($0)*t)" }.joined(separator: "|") + ":s=48000:d=4", "-c:a", "pcm_s16le"])
        #expect(try probe(nine).first?["channel_layout"] == nil, "the generated source must state no layout")
        let out = try transcode(nine, audio: audioPlan(0), to: dir)
        #expect(out.audio?.stats.corruptPackets == 0)
        let stereo = try toneLevels(out.path, channels: 2, tones: tones)
        // Front left and right whole on their sides, the centre in both.
        #expect(stereo[0][0] > -6 && stereo[1][1] > -6 && stereo[0][2] > -9 && stereo[1][2] > -9, "\(stereo)")

        let twenty = try Media.generated("tones-20ch-unstated.mkv", ["-f", "lavfi", "-i",
            "aevalsrc=" + (0..<20).map { "0.25*sin(2*PI*\(200 + 100 * $0)*t)" }.joined(separator: "|") + ":s=48000:d=2", "-c:a", "pcm_s16le"])
        #expect { try transcode(twenty, audio: audioPlan(0), to: dir) } throws: { ($0 as? KilnError)?.code == .sourceUnsupported }
    }

    @Test("the sound's format changing mid-stream (mono, then stereo, as at a programme change) goes through the limiter without a gap: every sample once, in order, none lost at the end")
    func formatChangeThroughLimiter() throws {
        var layout = AVChannelLayout()
        ChannelLayouts.assumed(2, into: &layout)
        defer { av_channel_layout_uninit(&layout) }
        let resampler = try Resampler(output: AudioFormat(sampleFormat: AV_SAMPLE_FMT_FLTP, sampleRate: 48000, layout: layout))
        // 2400 samples of mono, then 2400 of stereo, each sample's value its number.
        for (channels, first) in [(Int32(1), 0), (Int32(2), 2400)] {
            let frame = try Frame()
            let f = frame.pointer
            f.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
            f.pointee.sample_rate = 48000
            f.pointee.nb_samples = 2400
            ChannelLayouts.assumed(channels, into: &f.pointee.ch_layout)
            #expect(av_frame_get_buffer(f, 0) == 0)
            for c in 0..<Int(channels) {
                let plane = UnsafeMutableRawPointer(f.pointee.extended_data[c]!).assumingMemoryBound(to: Float.self)
                for i in 0..<2400 { plane[i] = Float(first + i + 1) / 100_000 }
            }
            try resampler.push(frame)
        }
        try resampler.flush()
        let out = try Frame()
        let total = resampler.buffered
        try resampler.pull(total, into: out)
        let left = UnsafeMutableRawPointer(out.pointer.pointee.extended_data[0]!).assumingMemoryBound(to: Float.self)
        let values = (0..<total).map { left[$0] }
        #expect(total == 4800)
        // No silence inserted; the last sample is the last one in.
        #expect(values.allSatisfy { $0 > 0 } && abs(values[total - 1] - 4800.0 / 100_000) < 1e-4, "\(values.suffix(3))")
    }

    @Test("a loud master (pink noise limited to −0.1 dBFS in its samples, above 0 dBTP) re-encoded to 96 kbit/s AAC decodes with next to no clipped sample: 3 in 8 s (limited by its samples to −1 dBFS, 148, the loudest +1.9 dBFS)")
    func loudMasterDoesNotClip() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let master = try Media.generated("loud-master.wav", ["-f", "lavfi", "-i", "anoisesrc=color=pink:amplitude=0.5:duration=8:seed=7",
            "-f", "lavfi", "-i", "sine=frequency=80:duration=8", "-filter_complex",
            "[0][1]amix=inputs=2:weights=1 1,volume=24dB,alimiter=limit=0.99:level=false:attack=1:release=20,aformat=channel_layouts=stereo",
            "-c:a", "pcm_s16le"])
        let out = try transcode(master, audio: audioPlan(0, kbps: 96), to: dir)
        let sound = try decodedSound(out.path)
        #expect(sound.count > 700_000)
        let clipped = sound.filter { abs($0) >= 1 }.count
        // The encoder's own overshoot on the rarest transients is left: a ceiling low enough
        // for every one would take more than it gives from all loud sound.
        #expect(clipped <= 10, "\(clipped) samples at or past full scale, the loudest \(sound.map(abs).max() ?? 0)")
    }

    @Test("a loud 5.1 passage mixed down to stereo stays below full scale (BS.775's mix reaches 2.4 times it with the channels in phase; the ffmpeg command's output clips), and after it the mix is back at its full level")
    func downmixPeaks() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        // 1 kHz in phase on the five main channels, at 0.89 for two seconds, then at 0.1.
        let tone = "if(lt(t\\,2)\\,0.89\\,0.1)*sin(2*PI*1000*t)"
        let loud = try Media.generated("loud-5.1.mkv", ["-f", "lavfi", "-i",
            "aevalsrc=\(tone)|\(tone)|\(tone)|0.5*sin(2*PI*60*t)|\(tone)|\(tone):c=5.1:s=48000:d=5", "-c:a", "pcm_s16le"])
        let transcoded = try transcode(loud, audio: audioPlan(0, kbps: 192), to: dir)
        // The ffmpeg command Kiln names as its equivalent does the same (the benchmark runs it).
        let theirs = dir.appendingPathComponent("ffmpeg.mp4").path
        let r = try run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", loud] + (transcoded.audio?.ffmpegEquivalent ?? []) + [theirs])
        #expect(r.status == 0, "\(r.err)")
        for out in [transcoded.path, theirs] {
            let peak = try decodedSound(out).map(abs).max() ?? 0
            #expect(peak < 1, "\(out): peak \(peak)")
            // Limited to −2 dBTP while loud (0.794 is +10 dB on the 0.25 scale); then
            // 0.1 × (1 + 2 × 0.707) = 0.24, −0.3 dB, within a second of the loud part's end.
            let during = try toneLevels(out, channels: 2, tones: [1000], from: 1), after = try toneLevels(out, channels: 2, tones: [1000], from: 3)
            #expect(during.allSatisfy { abs($0[0] - 10) < 0.6 } && after.allSatisfy { abs($0[0] + 0.3) < 0.3 }, "\(out): \(during) then \(after)")
        }
    }

    @Test("interlaced frames are deinterlaced even when the plan did not ask")
    func interlacedDetected() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("interlaced.mkv").path
        let gen = try run("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=720x576:rate=50",
                                     "-t", "2", "-vf", "tinterlace=mode=interleave_top,setfield=tff",
                                     "-c:v", "libx264", "-flags", "+ildct+ilme", "-x264-params", "tff=1", "-preset", "ultrafast", source])
        #expect(gen.status == 0, "\(gen.err)")
        let src = try #require(try probe(source).first)
        #expect(["tt", "tb", "bb", "bt"].contains(src["field_order"] ?? ""))
        let out = try transcode(source, video: videoPlan(0, 720, 576), to: dir)
        let v = try #require(try probe(out.path, countFrames: true).first)
        #expect(v["field_order"] == nil || v["field_order"] == "progressive")
        #expect(v.int("nb_read_frames") == 50)
        #expect(v["avg_frame_rate"] == "25/1")
        #expect(try decodesCleanly(out.path) == "")

        // The same clip when the plan asks for deinterlacing (deint=all).
        let planned = try transcode(source, video: videoPlan(0, 720, 576, deinterlace: true), to: dir)
        let p = try #require(try probe(planned.path, countFrames: true).first)
        #expect(p.int("nb_read_frames") == 50)
        #expect(p["field_order"] == nil || p["field_order"] == "progressive")
    }

    @Test("10-bit 4:2:2 H.264 becomes 8-bit 4:2:0 High profile")
    func tenBit422() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("422.mkv").path
        let gen = try run("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25", "-t", "1",
                                     "-pix_fmt", "yuv422p10le", "-c:v", "libx264", "-preset", "ultrafast", source])
        #expect(gen.status == 0, "\(gen.err)")
        let out = try transcode(source, video: videoPlan(0, 640, 360), to: dir)
        let v = try #require(try probe(out.path, countFrames: true).first)
        #expect(v["pix_fmt"] == "yuv420p" && v["profile"] == "High" && v.int("nb_read_frames") == 25)
        #expect(try decodesCleanly(out.path) == "")
    }

    /// A 4 s 24 fps H.264 clip in Matroska (millisecond timestamps), optionally with its
    /// packets damaged by the `noise` bitstream filter (1 in `noise` bytes).
    private func generatedClip(_ dir: URL, noise: Int? = nil) throws -> String {
        let clean = dir.appendingPathComponent("clean.mkv").path
        let gen = try run("ffmpeg", ["-nostdin", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=24",
                                     "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100", "-t", "4",
                                     "-c:v", "libx264", "-preset", "ultrafast", "-g", "12", "-c:a", "aac", clean])
        #expect(gen.status == 0, "\(gen.err)")
        guard let noise else { return clean }
        let noisy = dir.appendingPathComponent("noisy-\(noise).mkv").path
        let damage = try run("ffmpeg", ["-nostdin", "-v", "error", "-i", clean, "-c", "copy", "-bsf:v", "noise=amount=\(noise)", noisy])
        #expect(damage.status == 0, "\(damage.err)")
        return noisy
    }

    @Test("millisecond timestamps at 24 fps keep every frame (none collide in the 1/24 time base)")
    func matroskaMillisecondTimestamps() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode(try generatedClip(dir), video: videoPlan(0, 320, 240), audio: audioPlan(1), to: dir)
        let streams = try probe(out.path, countFrames: true)
        #expect(streams[0].int("nb_read_frames") == 96)
        #expect(streams[0]["avg_frame_rate"] == "24/1")
        #expect(out.video?.droppedFrames == 0)
        // gop_seconds 2 at 24 fps: a keyframe at least every 48 frames.
        let flags = try run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=flags", "-of", "csv=p=0", out.path])
        let keyframes = flags.out.split(separator: "\n").enumerated().filter { $0.element.hasPrefix("K") }.map(\.offset)
        #expect(keyframes.first == 0)
        #expect(zip(keyframes, keyframes.dropFirst() + [96]).allSatisfy { $1 - $0 <= 48 })
        #expect(abs(duration(streams[0]) - duration(streams[1])) < 0.1)
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("damaged packets are concealed: the transcode finishes and the output decodes cleanly")
    func corruptPacketsConcealed() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = try transcode(try generatedClip(dir, noise: 200), video: videoPlan(0, 320, 240), audio: audioPlan(1), to: dir)
        #expect((out.video?.stats.corruptPackets ?? 0) >= 1)
        let v = try #require(try probe(out.path, countFrames: true).first)
        #expect((v.int("nb_read_frames") ?? 0) > 48)
        #expect(try decodesCleanly(out.path) == "")
    }

    @Test("a video stream that yields no picture at all fails with a decode error, not an empty file")
    func undecodableStreamFails() throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = try generatedClip(dir, noise: 1)
        #expect {
            _ = try transcode(source, video: videoPlan(0, 320, 240), to: dir)
        } throws: { error in
            guard let e = error as? KilnError else { return false }
            return (e.code == .sourceCorrupt || e.code == .sourceUnsupported) && e.stage == .decode
        }
    }

    /// Every shared file with a video or audio stream, transcoded as a 640-wide rung would
    /// be (HDR tone-mapped, rotation applied, first audio to stereo AAC).
    static let sharedFiles: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: mediaDir)) ?? []
        return names.filter { !$0.hasSuffix(".tsv") && !$0.hasPrefix(".") }.sorted()
    }()

    @Test("every shared file becomes a clean H.264/AAC MP4 or fails with a source error", arguments: sharedFiles)
    func sharedFile(_ name: String) throws {
        let dir = scratchDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = "\(mediaDir)/\(name)"
        let info: MediaInfo
        do {
            info = try Prober.probe(path: source, fingerprint: false)
        } catch {
            #expect(error.exitStatus == 3, "\(name): \(error)")
            return
        }
        var video: VideoPlan?
        if let v = info.videoStreams.first, let size = v.displaySize {
            let width = min(640, size.width) & ~1
            let height = max(2, Int((Double(width) * Double(size.height) / Double(size.width)).rounded()) & ~1)
            video = videoPlan(v.index, width, height, toneMap: v.hdr?.isHDR ?? false,
                              deinterlace: v.fieldOrder?.isInterlaced ?? false, rotation: v.rotation ?? 0)
        }
        let audio = info.audioStreams.first.map { audioPlan($0.index) }
        guard video != nil || audio != nil else { return }
        let out: Transcoded
        do {
            out = try transcode(source, video: video, audio: audio, to: dir)
        } catch {
            #expect((error as? KilnError)?.exitStatus == 3, "\(name): \(error)")
            return
        }
        let streams = try probe(out.path)
        #expect(streams.count == (video == nil ? 0 : 1) + (audio == nil ? 0 : 1), "\(name)")
        if let video {
            let v = try #require(streams.first)
            #expect(v["codec_name"] == "h264" && v["pix_fmt"] == "yuv420p", "\(name)")
            #expect(v.int("width") == video.width && v.int("height") == video.height, "\(name)")
            if video.toneMap { #expect(v["color_transfer"] == "bt709", "\(name)") }
        }
        if audio != nil {
            let a = try #require(streams.last)
            #expect(a["codec_name"] == "aac" && a.int("channels") == 2, "\(name)")
        }
        #expect(try decodesCleanly(out.path) == "", "\(name)")
    }
}

/// Parameters a damaged header or bitstream leaves out are the source's damage (exit 3,
/// not retried), not a failed write or a bug.
@Suite("streams with damaged parameters")
struct DamagedParameterTests {
    @Test("a copied audio stream whose header gives no sample rate is refused as source_corrupt before the MP4 header")
    func copiedAudioWithoutRate() throws {
        let (demuxer, audio) = try Self.eac3Source()
        demuxer.stream(audio).pointee.codecpar.pointee.sample_rate = 0
        let dir = Media.scratch("no-rate")
        defer { try? FileManager.default.removeItem(at: dir) }
        let muxer = try Muxer(path: dir.appendingPathComponent("out.mp4").path, cancellation: Cancellation())
        let lane = CopyLane(demuxer: demuxer, index: audio)
        #expect { try lane.prepare(muxer: muxer) } throws: { ($0 as? KilnError)?.code == .sourceCorrupt }
    }

    @Test("a decoded audio frame without a sample rate is refused as the source's damage, and the resampler goes on")
    func frameWithoutRate() throws {
        var layout = AVChannelLayout()
        av_channel_layout_default(&layout, 2)
        defer { av_channel_layout_uninit(&layout) }
        let resampler = try Resampler(output: AudioFormat(sampleFormat: AV_SAMPLE_FMT_FLTP, sampleRate: 48000, layout: layout))
        func frame(rate: Int32) throws -> Frame {
            let f = try Frame()
            f.pointer.pointee.nb_samples = 1024
            f.pointer.pointee.format = AV_SAMPLE_FMT_FLTP.rawValue
            f.pointer.pointee.sample_rate = rate
            av_channel_layout_default(&f.pointer.pointee.ch_layout, 2)
            #expect(av_frame_get_buffer(f.pointer, 0) == 0)
            av_samples_set_silence(f.pointer.pointee.extended_data, 0, 1024, 2, AV_SAMPLE_FMT_FLTP)
            return f
        }
        #expect { try resampler.push(try frame(rate: 0)) } throws: { ($0 as? KilnError)?.code == .sourceCorrupt }
        try resampler.push(try frame(rate: 48000))
        #expect(resampler.buffered + resampler.held == 1024)
    }
}

extension DamagedParameterTests {
    /// The shared E-AC-3 sample, opened, and its audio stream's index.
    static func eac3Source() throws -> (Demuxer, Int) {
        let demuxer = try Demuxer(path: Media.shared("sp_bear-640x360-ec3.mp4"), cancellation: Cancellation())
        let audio = try #require((0..<demuxer.streamCount).first {
            demuxer.stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_AUDIO
        })
        return (demuxer, audio)
    }

    @Test("a copied E-AC-3 frame whose header is damaged (found by fuzzing) is refused by the MP4 muxer as source_corrupt, not a failed write")
    func damagedFrameHeader() throws {
        let dir = Media.scratch("eac3-header")
        defer { try? FileManager.default.removeItem(at: dir) }
        let (demuxer, audio) = try Self.eac3Source()
        let muxer = try Muxer(path: dir.appendingPathComponent("out.mp4").path, cancellation: Cancellation())
        let lane = CopyLane(demuxer: demuxer, index: audio)
        try lane.prepare(muxer: muxer)
        try muxer.writeHeader()
        let packet = try Packet()
        func nextAudio() throws {
            packet.unref()
            while try demuxer.read(into: packet), packet.streamIndex != Int32(audio) { packet.unref() }
            try #require(packet.streamIndex == Int32(audio) && packet.pointer.pointee.size > 8)
        }
        // The muxer drops damaged frames at the very start of a track; later ones it refuses.
        try nextAudio()
        packet.pointer.pointee.stream_index = lane.outputIndex
        try muxer.write(packet, from: demuxer.stream(audio).pointee.time_base)
        try nextAudio()
        #expect(av_packet_make_writable(packet.pointer) == 0)
        packet.pointer.pointee.data[5] = 0xff   // bsid 31: no AC-3 or E-AC-3 frame has it
        packet.pointer.pointee.stream_index = lane.outputIndex
        #expect { try muxer.write(packet, from: demuxer.stream(audio).pointee.time_base) } throws: {
            ($0 as? KilnError)?.code == .sourceCorrupt
        }
    }
}
