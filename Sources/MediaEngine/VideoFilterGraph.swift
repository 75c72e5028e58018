import CFFmpeg
import KilnCore

/// What a video filter graph is built for: the decoded frames' size, pixel format, sample
/// aspect ratio and chroma siting, and whether interlaced frames have been seen. A change
/// of any of these mid-stream rebuilds the graph.
struct VideoInput: Equatable {
    var width: Int32
    var height: Int32
    var pixelFormat: Int32
    var sampleAspect: AVRational
    var interlaced: Bool
    var chromaLocation: AVChromaLocation

    init(width: Int32, height: Int32, pixelFormat: Int32, sampleAspect: AVRational, interlaced: Bool,
         chromaLocation: AVChromaLocation = AVCHROMA_LOC_UNSPECIFIED) {
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.sampleAspect = sampleAspect
        self.interlaced = interlaced
        self.chromaLocation = chromaLocation
    }

    init(_ frame: UnsafeMutablePointer<AVFrame>, interlacedSeen: Bool) {
        let sar = frame.pointee.sample_aspect_ratio
        self.init(width: frame.pointee.width, height: frame.pointee.height, pixelFormat: frame.pointee.format,
                  sampleAspect: sar.num > 0 && sar.den > 0 ? sar : AVRational(num: 1, den: 1),
                  interlaced: interlacedSeen, chromaLocation: frame.pointee.chroma_location)
    }

    static func == (a: VideoInput, b: VideoInput) -> Bool {
        a.width == b.width && a.height == b.height && a.pixelFormat == b.pixelFormat
            && av_cmp_q(a.sampleAspect, b.sampleAspect) == 0 && a.interlaced == b.interlaced
            && a.chromaLocation == b.chromaLocation
    }

    var isRGB: Bool {
        guard let d = av_pix_fmt_desc_get(AVPixelFormat(rawValue: pixelFormat)) else { return false }
        return (d.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB)) != 0
    }

    /// Which axes the format keeps fewer chroma samples on (4:2:0 both, 4:2:2 across).
    var chromaSubsampled: (across: Bool, down: Bool) {
        guard !isRGB, let d = av_pix_fmt_desc_get(AVPixelFormat(rawValue: pixelFormat)) else { return (false, false) }
        return (d.pointee.log2_chroma_w > 0, d.pointee.log2_chroma_h > 0)
    }
}

/// Where a subsampled picture's chroma samples sit, in 1/256 of a luma pixel from the
/// top-left luma sample of the block they stand for (libswscale's `*_chr_pos` units): H.264
/// and MPEG-2's "left" (0, 128) is co-sited with the left column and midway down, JPEG's and
/// MPEG-1's "center" (128, 128), UHD HDR10's "top-left" (0, 0).
///
/// The output is 4:2:0 that says nothing of its siting, which players read as left. A
/// helper's audit measured what came out: libswscale takes every source's chroma as
/// centred unless told (a left-sited film shrunk to 720 lines had its colour 0.17 px left
/// of its edges, 0.27 px at 480), zscale keeps the source's siting (a top-left HDR10 film
/// came out 0.5 px low), and a rotation moves the samples with the planes (a portrait
/// phone clip turned a quarter came out sited at the top). The chain now says both ends.
struct ChromaSiting: Equatable {
    var across: Int32
    var down: Int32

    static let left = ChromaSiting(across: 0, down: 128)

    init(across: Int32, down: Int32) {
        self.across = across
        self.down = down
    }

    /// A stream's or frame's chroma location; unsaid is left (H.264's and HEVC's default).
    init(_ location: AVChromaLocation) {
        switch location {
        case AVCHROMA_LOC_CENTER: self.init(across: 128, down: 128)
        case AVCHROMA_LOC_TOPLEFT: self.init(across: 0, down: 0)
        case AVCHROMA_LOC_TOP: self.init(across: 128, down: 0)
        case AVCHROMA_LOC_BOTTOMLEFT: self.init(across: 0, down: 256)
        case AVCHROMA_LOC_BOTTOM: self.init(across: 128, down: 256)
        default: self = .left
        }
    }

    /// The siting that turning the picture as `turn` does (transpose and flips, plane by
    /// plane) makes into this one.
    func beforeTurn(rotation degrees: Int, mirrored: Bool) -> ChromaSiting {
        switch (((degrees % 360) + 360) % 360, mirrored) {
        case (90, false): return ChromaSiting(across: down, down: 256 - across)
        case (180, false): return ChromaSiting(across: 256 - across, down: 256 - down)
        case (270, false): return ChromaSiting(across: 256 - down, down: across)
        case (0, true): return ChromaSiting(across: across, down: 256 - down)
        case (90, true): return ChromaSiting(across: down, down: across)
        case (180, true): return ChromaSiting(across: 256 - across, down: down)
        case (270, true): return ChromaSiting(across: 256 - down, down: 256 - across)
        default: return self
        }
    }

    /// zscale's name for the siting, nil where it has none.
    var zscaleName: String? {
        switch (across, down) {
        case (0, 128): return "left"
        case (128, 128): return "center"
        case (0, 0): return "topleft"
        case (128, 0): return "top"
        case (0, 256): return "bottomleft"
        case (128, 256): return "bottom"
        default: return nil
        }
    }

    /// libswscale's options for chroma read at `self` on the axes `subsampled` says the
    /// input has (elsewhere there is nothing to place) and written at `output`, if given
    /// (4:2:0 unless `outputSubsampled` says otherwise).
    func swscale(subsampled: (across: Bool, down: Bool), to output: ChromaSiting?,
                 outputSubsampled: (across: Bool, down: Bool) = (true, true)) -> String {
        var options = ""
        if subsampled.across { options += ":in_h_chr_pos=\(across)" }
        if subsampled.down { options += ":in_v_chr_pos=\(down)" }
        if let output, outputSubsampled.across { options += ":out_h_chr_pos=\(output.across)" }
        if let output, outputSubsampled.down { options += ":out_v_chr_pos=\(output.down)" }
        return options
    }
}

/// How HDR is mapped to SDR, when it is, or SDR in BT.2020's primaries to BT.709's.
enum ToneMapSource: Equatable {
    /// SMPTE ST 2084 (HDR10, Dolby Vision profile 8.1 base layer).
    case pq
    /// ARIB STD-B67 (HLG, Dolby Vision profile 8.4 base layer).
    case hlg
    /// Dolby Vision without a watchable base layer (profile 5): `DolbyVisionMapper` has
    /// already made the frames linear-light BT.2020 RGB at the output size.
    case dolbyVision
    /// SDR in primaries wider than BT.709's (BT.2020: a UHD broadcast's SDR, 10-bit camera
    /// footage; P3: a cinema master, a grading suite's export): the colours are moved into
    /// BT.709's primaries in linear light, with no tone curve. Left as they were, 8-bit
    /// H.264 for devices that play SDR alone came out washed out wherever a player takes
    /// the primaries for BT.709's, as most without HDR do.
    case wideGamut
}

/// HDR → SDR after ITU-R BT.2408: HDR's reference white (graphics white, 203 cd/m²) is
/// 1.0 of the linear scale SDR's white stands at, so a grey card (26 cd/m²) or a face
/// comes out as bright as an SDR grade shows it. Linear light up to `linearUpTo` of that
/// white passes as it is; above it Möbius' curve rolls the rest smoothly into the top of
/// the range, reaching SDR white at the content's peak, so highlights stay apart: reference
/// white itself lands at about 85 % (Y ~200 for a 1,000 cd/m² master), the headroom
/// BT.2390-style curves leave too. Hable from 100 cd/m² (the usual ffmpeg recipe, Kiln's
/// until engine recipe 4) put a grey card at Y 99 and reference white at Y 182: whole
/// films came out a stop too dark.
enum ToneCurve {
    /// cd/m² that linear 1.0 stands for in the tone-mapping graph (zscale's `npl`).
    static let referenceWhite = 203
    /// The tonemap filter's Möbius `param`: where the curve leaves linear, as a fraction
    /// of reference white (its default, 0.3, about 60 cd/m²).
    static let linearUpTo = 0.3
    /// The peak assumed when HDR10 says nothing usable about its light: the commonest
    /// mastering display's.
    static let assumedPeak = 1000
    /// HLG is relative to its display; zimg's HLG EOTF takes BT.2100's 1000 cd/m² one.
    static let hlgPeak = 1000

    /// The brightest light the content holds, in cd/m², for the curve's end: the lower of
    /// MaxCLL and the mastering display's peak (content brighter than its display was never
    /// seen), each only from 100 to 10,000 (0 is "unknown"; some encoders write nonsense),
    /// else `assumedPeak`.
    static func peakNits(maxCLL: Double, masteringPeak: Double) -> Int {
        let given = [maxCLL, masteringPeak].filter { $0 >= 100 && $0 <= 10000 }
        return Int((given.min() ?? Double(assumedPeak)).rounded())
    }
}

/// The filters that work on the pictures' fields, first in the chain: none for a picture
/// too small for them (`FieldFilters`), whatever the plan or the pictures' flags say.
private func fieldFilters(plan: VideoPlan, input: VideoInput) -> [String] {
    guard FieldFilters.fit(width: Int(input.width), height: Int(input.height)) else { return [] }
    if plan.inverseTelecine == true || plan.fieldMatch == true {
        // Each picture's fields matched with its neighbours' into whole pictures (one
        // still combed where no match makes it whole, flagged for bwdif). Film in 3:2
        // pulldown then leaves out the one picture in five that repeats another, the rest
        // evenly timed at 4/5 of the rate.
        return ["fieldmatch=order=auto:combmatch=full", "bwdif=mode=send_frame:parity=auto:deint=interlaced"]
            + (plan.inverseTelecine == true ? ["decimate"] : [])
    }
    if plan.deinterlace { return ["bwdif=mode=send_frame:parity=auto:deint=all"] }
    if input.interlaced { return ["bwdif=mode=send_frame:parity=auto:deint=interlaced"] }
    return []
}

/// The tone map's curve step (`tonemap=tonemap=mobius:desat=0`), which the engine applies
/// itself between two filter graphs (`kiln_tone_map_mobius`, bit for bit the filter's):
/// libavfilter's filter took 17 ms of a 1080p picture, a fifth of an HDR transcode's CPU.
struct MobiusToneMap: Equatable {
    /// Where the curve leaves linear, in reference white.
    var param: Double
    /// The content's peak and reference white, cd/m².
    var peakNits: Int
    var whiteNits: Int

    /// The step as the ffmpeg command writes it.
    var filter: String { "tonemap=tonemap=mobius:param=\(param):desat=0:peak=\(peakNits)/\(whiteNits)" }

    /// Applies the curve to a linear-light gbrpf32le frame in place.
    func apply(to frame: Frame) throws(KilnError) {
        try check(kiln_tone_map_mobius(frame.pointer, param, Double(peakNits) / Double(whiteNits)), .filter,
                  "cannot tone-map the picture")
    }
}

/// A `VideoPlan`'s filter chain: libavfilter text, split around the tone map's curve where
/// there is one (`MobiusToneMap`).
struct VideoFilterChain {
    /// The filters before the curve (all of them without one).
    var before: [String]
    var toneMap: MobiusToneMap?
    /// The filters after the curve.
    var after: [String]

    /// The whole chain as the ffmpeg command's `-vf` takes it.
    var description: String { (before + (toneMap.map { [$0.filter] } ?? []) + after).joined(separator: ",") }
}

/// The filter chain a `VideoPlan` asks for, as libavfilter text (`videoFilterChain`).
func videoFilterDescription(plan: VideoPlan, input: VideoInput, toneMap: ToneMapSource?, peakNits: Int = ToneCurve.assumedPeak,
                            sourceColor: ColorTags = .bt2020, frameRate: AVRational? = nil,
                            outputMatrix: String?, inputMatrix: String? = nil, picture: (width: Int32, height: Int32)? = nil) -> String {
    videoFilterChain(plan: plan, input: input, toneMap: toneMap, peakNits: peakNits, sourceColor: sourceColor, frameRate: frameRate,
                     outputMatrix: outputMatrix, inputMatrix: inputMatrix, picture: picture).description
}

/// The filter chain a `VideoPlan` asks for. Pure, so it can be tested and reproduced with
/// the ffmpeg command (`-vf`).
///
/// Order: deinterlace or inverse telecine (full fields, before anything moves pixels
/// between lines) → tone-map
/// (scaling first to the smaller working size when downscaling: PITFALLS.md measured 39 vs
/// 23 fps) → scale to the plan's size (square pixels, limited range) → 8-bit 4:2:0 →
/// rotate (last, on the smallest frames). `frameRate`, when the plan limits the rate:
/// pictures kept at that rate right after deinterlacing, so no later filter works on the
/// ones left out. Tone mapping: zscale to linear light with `ToneCurve.referenceWhite`
/// as 1.0, then `ToneCurve` (`tonemap=mobius`, desat=0) to the content's peak.
/// `picture`: the size the picture takes inside the plan's frame when it does not fill it
/// (`pictureSize`); the rest is padded black.
func videoFilterChain(plan: VideoPlan, input: VideoInput, toneMap: ToneMapSource?, peakNits: Int = ToneCurve.assumedPeak,
                      sourceColor: ColorTags = .bt2020, frameRate: AVRational? = nil,
                      outputMatrix: String?, inputMatrix: String? = nil, picture: (width: Int32, height: Int32)? = nil) -> VideoFilterChain {
    var parts = fieldFilters(plan: plan, input: input)
    var curve: (at: Int, step: MobiusToneMap)?
    if let frameRate { parts.append("fps=fps=\(frameRate.num)/\(frameRate.den)") }
    // Scale before rotating: the scaler's target is the stored (pre-rotation) size.
    let (frameW, frameH) = plan.storedSize
    let w = picture.map { Int($0.width) } ?? frameW
    let h = picture.map { Int($0.height) } ?? frameH
    let convertsMatrix = outputMatrix != nil && inputMatrix != nil && !input.isRGB && inputMatrix != outputMatrix
    // Converting matrices, rounded exactly and with chroma at full resolution in between:
    // libswscale's fast path tinted a BT.601 source's greys green by one to three levels.
    var scale = "scale=w=\(w):h=\(h):flags=bicubic\(convertsMatrix ? "+accurate_rnd+full_chroma_int" : ""):out_range=tv"
    if let outputMatrix, input.isRGB { scale += ":out_color_matrix=\(outputMatrix)" }
    if convertsMatrix, let outputMatrix, let inputMatrix { scale += ":in_color_matrix=\(inputMatrix):out_color_matrix=\(outputMatrix)" }
    // Chroma sited where, once rotated, players look for it (`ChromaSiting`).
    let target = ChromaSiting.left.beforeTurn(rotation: plan.rotation, mirrored: plan.mirrored == true)
    let source = ChromaSiting(input.chromaLocation)
    let subsampled = input.chromaSubsampled
    // Where no scale resamples the chroma on an axis it must move on (at its own size
    // libswscale copies the chroma planes as they are), it is re-sited last: by zscale,
    // which resamples only the chroma planes (~0.4 ms a 1080p picture), where zscale has
    // names for both sitings; otherwise (a half turn's target is right-sited) through
    // 4:4:4 and back (~3.5 ms).
    var viaYUV444 = false
    var resite: (from: String, to: String)? = nil
    func finalScale(from siting: ChromaSiting, subsampled: (across: Bool, down: Bool)) -> [String] {
        let resampled = (across: w != Int(input.width) || !subsampled.across, down: h != Int(input.height) || !subsampled.down)
        guard (!resampled.across && siting.across != target.across) || (!resampled.down && siting.down != target.down) else {
            return [scale + siting.swscale(subsampled: subsampled, to: target)]
        }
        // What the scale leaves: the target on the axes it resamples, the source's elsewhere.
        let between = ChromaSiting(across: resampled.across ? target.across : siting.across,
                                   down: resampled.down ? target.down : siting.down)
        if let from = between.zscaleName, let to = target.zscaleName {
            resite = (from, to)
            return [scale + siting.swscale(subsampled: subsampled, to: between), "format=yuv420p"]
        }
        viaYUV444 = true
        return [scale + siting.swscale(subsampled: subsampled, to: nil), "format=yuv444p"]
    }
    if let toneMap {
        let downscale = Int(w) * Int(h) < Int(input.width) * Int(input.height)
        // Shrunk first, its chroma kept where it was: zscale reads the frame's siting.
        if downscale { parts.append("scale=w=\(w):h=\(h):flags=bicubic" + source.swscale(subsampled: subsampled, to: source, outputSubsampled: subsampled)) }
        let white = ToneCurve.referenceWhite
        switch toneMap {
        case .pq, .hlg:
            let tin = toneMap == .pq ? "smpte2084" : "arib-std-b67"
            parts.append("zscale=tin=\(tin):\(sourceColor.zscaleInput):t=linear:npl=\(white)")
            parts.append("format=gbrpf32le")
            parts.append("zscale=p=bt709")
        case .dolbyVision:
            // Already linear with 1.0 = reference white (DolbyVisionMapper).
            parts.append("zscale=tin=linear:pin=bt2020:t=linear:p=bt709:npl=\(white)")
        case .wideGamut:
            parts.append("zscale=tin=\(sourceColor.zscaleSDRTransfer):\(sourceColor.zscaleInput):t=linear:npl=100")
            parts.append("format=gbrpf32le")
            parts.append("zscale=p=bt709")
        }
        if toneMap != .wideGamut {
            let peak = toneMap == .hlg ? ToneCurve.hlgPeak : max(peakNits, white)
            curve = (parts.count, MobiusToneMap(param: ToneCurve.linearUpTo, peakNits: peak, whiteNits: white))
        }
        // zscale's picture is at the plan's size (shrunk first, or the source's own): it
        // writes the chroma where the rotation wants it, or 4:4:4 where it has no name for
        // that (re-sited last). Only a larger picture's scale comes after it, moving the
        // chroma from left.
        let atSize = downscale || (w == Int(input.width) && h == Int(input.height))
        if !atSize {
            parts.append("zscale=t=bt709:m=bt709:r=tv:c=left")
            parts.append("format=yuv420p")
            parts += finalScale(from: .left, subsampled: (true, true))
        } else if let name = target.zscaleName {
            parts.append("zscale=t=bt709:m=bt709:r=tv:c=\(name)")
            parts.append("format=yuv420p")
        } else {
            parts.append("zscale=t=bt709:m=bt709:r=tv")
            parts.append("format=yuv444p")
            viaYUV444 = true
        }
    } else {
        parts += finalScale(from: source, subsampled: subsampled)
    }
    if w != frameW || h != frameH {
        // Centred on even lines and columns, so the 4:2:0 chroma of the bars stays black.
        parts.append("pad=w=\(frameW):h=\(frameH):x=\((frameW - w) / 4 * 2):y=\((frameH - h) / 4 * 2):color=black")
    }
    if viaYUV444 { parts.append("scale=out_h_chr_pos=\(target.across):out_v_chr_pos=\(target.down)") }
    if let resite { parts.append("zscale=cin=\(resite.from):c=\(resite.to):f=bicubic") }
    // Once: a tone-mapped picture at its size is 4:2:0 already.
    if parts.last != "format=yuv420p" { parts.append("format=yuv420p") }
    parts.append("setsar=1")
    parts += turn(rotation: plan.rotation, mirrored: plan.mirrored == true)
    guard let curve else { return VideoFilterChain(before: parts, toneMap: nil, after: []) }
    return VideoFilterChain(before: Array(parts[..<curve.at]), toneMap: curve.step, after: Array(parts[curve.at...]))
}

/// The filters that show a picture as its display matrix asks: turned clockwise by
/// `rotation`, and where the matrix mirrors too, as the FFmpeg command's autorotate does
/// since 6.0 (a mirror reads as a turn to libavutil: left to right as 180, top to bottom
/// as 0, the diagonals as 90 and 270). A front camera's mirrored selfie had come out
/// upside down, turned 180.
func turn(rotation: Int, mirrored: Bool) -> [String] {
    switch (((rotation % 360) + 360) % 360, mirrored) {
    case (90, false): return ["transpose=clock"]
    case (180, false): return ["hflip,vflip"]
    case (270, false): return ["transpose=cclock"]
    case (0, true): return ["vflip"]
    case (90, true): return ["transpose=cclock_flip"]
    case (180, true): return ["hflip"]
    case (270, true): return ["transpose=clock_flip"]
    default: return []
    }
}

/// The size a picture takes inside the plan's frame (stored orientation, `frameWidth` x
/// `frameHeight`) when its shape changed mid-stream: a broadcast recording that goes from
/// a 4:3 programme to a 16:9 one, or from SD to HD. The plan's frame was made for the
/// first picture (`firstAspect`, its display aspect ratio); a picture whose display aspect
/// ratio differs from that by more than 2 % is fitted inside the frame at its own shape
/// (letterboxed or pillarboxed) rather than stretched to the first one's. nil when it
/// fills the frame. A container's aspect override (which the plan follows) applies to the
/// later picture in the same proportion.
func pictureSize(frameWidth: Int32, frameHeight: Int32, firstAspect: Double, aspect: Double) -> (width: Int32, height: Int32)? {
    guard firstAspect > 0, aspect > 0, frameWidth > 0, frameHeight > 0, abs(aspect / firstAspect - 1) > 0.02 else { return nil }
    let frame = Double(frameWidth) / Double(frameHeight)
    let target = frame * aspect / firstAspect
    func even(_ x: Double, _ limit: Int32) -> Int32 { min(limit, max(2, Int32((x / 2).rounded()) * 2)) }
    return target > frame ? (frameWidth, even(Double(frameWidth) / target, frameHeight))
                          : (even(Double(frameHeight) * target, frameWidth), frameHeight)
}

extension VideoPlan {
    /// The frame as the encoder stores it: the plan's size before a 90/270 degree rotation.
    var storedSize: (width: Int, height: Int) { rotation % 180 != 0 ? (height, width) : (width, height) }
}

extension VideoInput {
    /// Display aspect ratio: width over height, times the sample aspect ratio.
    var displayAspect: Double {
        guard height > 0 else { return 0 }
        return Double(width) * sampleAspect.seconds / Double(height)
    }
}

/// The filters between the decoder and the encoder: one libavfilter graph, or, where the
/// chain tone-maps, two with the curve applied between them (`MobiusToneMap`). The second
/// graph is made from the first picture the first one gives (its size and time base).
final class VideoFilters {
    let input: VideoInput
    let chain: VideoFilterChain
    private let first: VideoFilterGraph
    private var second: VideoFilterGraph?
    private var firstEnded = false
    private var secondEnded = false
    private let between: Frame

    init(input: VideoInput, timeBase: AVRational, frameRate: AVRational, chain: VideoFilterChain,
         streamStart: Bool = true) throws(KilnError) {
        self.input = input
        self.chain = chain
        first = try VideoFilterGraph(input: input, timeBase: timeBase, frameRate: frameRate, description: chain.before.joined(separator: ","),
                                     streamStart: streamStart, output: chain.toneMap == nil ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_GBRPF32LE)
        between = try Frame()
    }

    /// The time base of frames coming out.
    var outputTimeBase: AVRational { second?.outputTimeBase ?? first.outputTimeBase }

    /// Pushes a decoded frame (its `pts` in the input time base), or nil at the end.
    func push(_ frame: Frame?) throws(KilnError) {
        try first.push(frame)
        if frame == nil { firstEnded = true }
    }

    /// Takes the next filtered frame into `frame`; false when more input is needed or
    /// everything is out.
    func pull(into frame: Frame) throws(KilnError) -> Bool {
        guard let toneMap = chain.toneMap else { return try first.pull(into: frame) }
        while true {
            if let second, try second.pull(into: frame) { return true }
            if try first.pull(into: between) {
                defer { between.unref() }
                try toneMap.apply(to: between)
                let next: VideoFilterGraph
                if let second { next = second } else {
                    next = try VideoFilterGraph(input: VideoInput(between.pointer, interlacedSeen: false), timeBase: first.outputTimeBase,
                                                frameRate: AVRational(num: 0, den: 1), description: chain.after.joined(separator: ","),
                                                streamStart: false)
                    second = next
                }
                try next.push(between)
                continue
            }
            // The first graph gives nothing more: the second has everything once it ended.
            guard firstEnded, let second, !secondEnded else { return false }
            try second.push(nil)
            secondEnded = true
        }
    }
}

/// A configured libavfilter graph from a buffer source to a buffer sink of one pixel
/// format (yuv420p unless said); owns the `AVFilterGraph`.
final class VideoFilterGraph {
    let input: VideoInput
    let description: String
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>
    /// `decimate` times the pictures it keeps from the first one it keeps, not from the
    /// first it was given: where the first cycle's repeat is its first picture, every
    /// picture came out one video frame (33 ms) late, behind the sound. The first kept
    /// picture shows the film's first frame, whose time is the first picture's: the
    /// output is moved back by the difference (`shift`, in the output's time base, once
    /// known), when it is under two video frames. Only for the stream's first graph: one
    /// made again mid-stream starts at any point of the pattern, where the first picture it
    /// is given may repeat the film frame before, and the first it keeps is on time.
    private let decimates: Bool
    private let inputTimeBase: AVRational
    private let inputFrameRate: AVRational
    private var firstIn = noPTS
    private var shift: Int64?

    init(input: VideoInput, timeBase: AVRational, frameRate: AVRational, description: String,
         streamStart: Bool = true, output: AVPixelFormat = AV_PIX_FMT_YUV420P) throws(KilnError) {
        self.input = input
        self.description = description
        decimates = streamStart && description.split(separator: ",").contains { $0.hasPrefix("decimate") }
        inputTimeBase = timeBase
        inputFrameRate = frameRate
        // libavfilter is not linked (probe and remux children start without it): it is loaded
        // here, by the first graph, and a machine without it fails the transcode, not the start.
        var why = [CChar](repeating: 0, count: 512)
        guard kiln_avfilter_available(&why, why.count) != 0 else {
            // Its mapping fails under an address-space or open-files limit too: then the
            // machine is short, not the installation broken.
            if let short = Shortage.current() {
                throw KilnError(.resourceLimit, stage: .filter, "\(cString(why)) (\(short))")
            }
            throw KilnError(.internalError, stage: .filter, cString(why))
        }
        // A few formats libavcodec decodes to are ones libswscale cannot read (packed 4:1:1,
        // uyyvyy411, from raw video): no graph converts them (ENOSYS from its configuration,
        // as from the ffmpeg command), which is the source's doing, not Kiln's.
        let format = AVPixelFormat(rawValue: input.pixelFormat)
        guard sws_isSupportedInput(format) != 0 else {
            let name = av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "number \(input.pixelFormat)"
            throw KilnError(.sourceUnsupported, stage: .filter, "the pictures' pixel format \(name) cannot be converted (libswscale reads no such pictures)")
        }
        guard let g = kiln_avfilter_graph_alloc() else {
            throw KilnError(.resourceLimit, stage: .filter, "out of memory for a filter graph")
        }
        do {
            (source, sink) = try Self.build(g, input: input, timeBase: timeBase, frameRate: frameRate, description: description,
                                            output: output)
        } catch {
            var owned: UnsafeMutablePointer<AVFilterGraph>? = g
            kiln_avfilter_graph_free(&owned)
            throw error
        }
        graph = g
    }

    private static func build(_ g: UnsafeMutablePointer<AVFilterGraph>, input: VideoInput, timeBase: AVRational,
                              frameRate: AVRational, description: String, output: AVPixelFormat) throws(KilnError)
        -> (UnsafeMutablePointer<AVFilterContext>, UnsafeMutablePointer<AVFilterContext>) {
        var src: UnsafeMutablePointer<AVFilterContext>?
        let args = "video_size=\(input.width)x\(input.height):pix_fmt=\(input.pixelFormat)"
            + ":time_base=\(timeBase.num)/\(timeBase.den):pixel_aspect=\(input.sampleAspect.num)/\(input.sampleAspect.den)"
            + (frameRate.num > 0 ? ":frame_rate=\(frameRate.num)/\(frameRate.den)" : "")
        try check(kiln_avfilter_graph_create_filter(&src, kiln_avfilter_get_by_name("buffer"), "in", args, nil, g),
                  .filter, "cannot create the filter source")
        guard let src, let snk = kiln_avfilter_graph_alloc_filter(g, kiln_avfilter_get_by_name("buffersink"), "out") else {
            throw KilnError(.resourceLimit, stage: .filter, "cannot create the filter sink")
        }
        try check(kiln_opt_set_int_list_pix_fmt(snk, "pix_fmts", output), .filter,
                  "cannot restrict the filter sink to one pixel format")
        try check(kiln_avfilter_init_str(snk, nil), .filter, "cannot create the filter sink")

        var outputs = kiln_avfilter_inout_alloc()
        var inputs = kiln_avfilter_inout_alloc()
        // parse_ptr leaves in these lists what it did not link; free whatever remains.
        defer { kiln_avfilter_inout_free(&outputs); kiln_avfilter_inout_free(&inputs) }
        guard let o = outputs, let i = inputs else {
            throw KilnError(.resourceLimit, stage: .filter, "out of memory for a filter graph")
        }
        o.pointee.name = av_strdup("in")
        o.pointee.filter_ctx = src
        o.pointee.pad_idx = 0
        o.pointee.next = nil
        i.pointee.name = av_strdup("out")
        i.pointee.filter_ctx = snk
        i.pointee.pad_idx = 0
        i.pointee.next = nil
        try check(kiln_avfilter_graph_parse_ptr(g, description, &inputs, &outputs, nil), .filter,
                  "cannot build the filter graph \"\(description)\"")
        try check(kiln_avfilter_graph_config(g, nil), .filter, "cannot configure the filter graph \"\(description)\"")
        return (src, snk)
    }

    deinit { kiln_avfilter_graph_free(&graph) }

    /// The time base of frames coming out of the graph.
    var outputTimeBase: AVRational { kiln_av_buffersink_get_time_base(sink) }

    /// Pushes a decoded frame (its `pts` in the graph's input time base), or nil at the end.
    func push(_ frame: Frame?) throws(KilnError) {
        if decimates, firstIn == noPTS, let pts = frame?.pointer.pointee.pts { firstIn = pts }
        let ret = kiln_av_buffersrc_add_frame_flags(source, frame?.pointer, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        try check(ret, .filter, "cannot feed the filter graph")
    }

    /// Takes the next filtered frame into `frame`; false when the graph needs more input
    /// or is drained.
    func pull(into frame: Frame) throws(KilnError) -> Bool {
        let ret = kiln_av_buffersink_get_frame(sink, frame.pointer)
        if ret == avErrorEAGAIN || ret == avErrorEOF { return false }
        try check(ret, .filter, "the filter graph failed")
        let pts = frame.pointer.pointee.pts
        guard decimates, pts != noPTS else { return true }
        if shift == nil {
            shift = 0
            if firstIn != noPTS, inputFrameRate.num > 0, inputFrameRate.den > 0 {
                let late = pts - rescale(firstIn, from: inputTimeBase, to: outputTimeBase)
                let frame = rescale(1, from: av_inv_q(inputFrameRate), to: outputTimeBase)
                if late > 0, late < 2 * frame { shift = -late }
            }
        }
        frame.pointer.pointee.pts = pts + (shift ?? 0)
        return true
    }
}
