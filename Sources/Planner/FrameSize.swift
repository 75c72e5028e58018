import KilnCore

/// Output frame geometry for a transcode.
enum FrameSize {
    /// The widest side a frame may be given (libx264's limit).
    static let maxSide = 16384

    /// Upright display size in square pixels: an anamorphic frame keeps every line and
    /// takes the width its display aspect ratio gives (ffmpeg's usual `scale=ih*dar:ih`):
    /// 720x480 at 32:27 (16:9 DVD) becomes 853x480, at 8:9 (4:3 DVD) 640x480, and HDV's
    /// 1440x1080 at 4:3 becomes 1920x1080. Narrowing the lines instead (720x405) would throw
    /// away a sixth of a DVD's vertical detail, while widening only spreads samples that are
    /// there. Then 90/270 degree rotation swaps the axes. The height never exceeds the coded
    /// height; `fit` keeps both sides inside the frame class.
    static func squareUpright(_ s: StreamInfo) -> (width: Double, height: Double)? {
        guard let w = s.width, let h = s.height, w > 0, h > 0 else { return nil }
        var dw = Double(w)
        let dh = Double(h)
        if let sar = s.sampleAspectRatio, sar.num > 0, sar.den > 0, sar.num != sar.den {
            // A damaged aspect ratio must not make a width no encoder takes (or Int cannot hold).
            dw = min(dw * sar.value, Double(maxSide))
        }
        return Codecs.rotation(s) % 180 == 0 ? (dw, dh) : (dh, dw)
    }

    /// Fits the upright size into the class's box (longer side against the box's width,
    /// so portrait video is judged fairly), never upscaling, both sides even.
    static func fit(_ s: StreamInfo, into cls: ResolutionClass?) -> (width: Int, height: Int)? {
        guard let (w, h) = squareUpright(s) else { return nil }
        var scale = 1.0
        var limitW = w, limitH = h
        if let cls {
            let long = max(w, h), short = min(w, h)
            scale = min(1.0, Double(cls.box.width) / long, Double(cls.box.height) / short)
            let (boxW, boxH) = w >= h ? (cls.box.width, cls.box.height) : (cls.box.height, cls.box.width)
            limitW = min(w, Double(boxW))
            limitH = min(h, Double(boxH))
        }
        // Nearest even size (1080p scaled to 480p is 854x480, not 852; a 16:9 DVD's 853.3
        // wide is 854), but never past the box or the source's size rounded up.
        func even(_ x: Double, limit: Double) -> Int {
            max(2, min(Int((x * scale / 2).rounded()) * 2, Int(limit.rounded(.up)) & ~1))
        }
        return (even(w, limit: limitW), even(h, limit: limitH))
    }

    /// `size` made smaller at its shape (even sides) until it has at most `limit` macroblocks;
    /// nil when nothing of at least 16x16 does.
    static func shrunk(_ size: (width: Int, height: Int), toMacroblocks limit: Int) -> (width: Int, height: Int)? {
        var (w, h) = size
        let aspect = Double(size.width) / Double(size.height)
        while H264Level.macroblocks(width: w, height: h) > limit {
            if w <= 16 || h <= 16 { return nil }
            if w >= h { w -= 2; h = max(2, Int((Double(w) / aspect / 2).rounded()) * 2) }
            else { h -= 2; w = max(2, Int((Double(h) * aspect / 2).rounded()) * 2) }
        }
        return (w, h)
    }

    /// Whether the coded frame fits a class: the coded size is what a decoder must hold.
    /// Unknown sizes fit (nothing says they do not).
    static func codedFits(_ s: StreamInfo, _ cls: ResolutionClass) -> Bool {
        guard let w = s.width, let h = s.height, w > 0, h > 0 else { return true }
        return cls.fits(width: w, height: h)
    }

    /// The smallest class the coded frame fits, nil above 4K or when unknown.
    static func smallestClass(_ s: StreamInfo) -> ResolutionClass? {
        guard let w = s.width, let h = s.height, w > 0, h > 0 else { return nil }
        return ResolutionClass.allCases.first { $0.fits(width: w, height: h) }
    }

    /// One class down (480p stays 480p).
    static func stepDown(_ c: ResolutionClass) -> ResolutionClass {
        let all = ResolutionClass.allCases
        let i = all.firstIndex(of: c)!
        return all[max(0, i - 1)]
    }

    /// Frame rates above this step the frame down a class (29.97 and 30 do not).
    static let highFrameRate = 30.5
}

/// H.264 levels (ITU-T H.264 Table A-1) with the limits that matter for our encodes.
struct H264Level: Comparable {
    let name: String
    let maxMacroblocksPerSecond: Int
    let maxFrameMacroblocks: Int
    /// kbit/s for High profile (Table A-1 value x 1.25).
    let maxHighBitrateKbps: Int
    /// The VBV buffer, kbit, for High profile (Table A-1's MaxCPB x 1.25).
    let maxHighBufferKbps: Int

    static let table: [H264Level] = [
        H264Level(name: "3.0", maxMacroblocksPerSecond: 40_500, maxFrameMacroblocks: 1_620, maxHighBitrateKbps: 12_500, maxHighBufferKbps: 12_500),
        H264Level(name: "3.1", maxMacroblocksPerSecond: 108_000, maxFrameMacroblocks: 3_600, maxHighBitrateKbps: 17_500, maxHighBufferKbps: 17_500),
        H264Level(name: "3.2", maxMacroblocksPerSecond: 216_000, maxFrameMacroblocks: 5_120, maxHighBitrateKbps: 25_000, maxHighBufferKbps: 25_000),
        H264Level(name: "4.0", maxMacroblocksPerSecond: 245_760, maxFrameMacroblocks: 8_192, maxHighBitrateKbps: 25_000, maxHighBufferKbps: 31_250),
        H264Level(name: "4.1", maxMacroblocksPerSecond: 245_760, maxFrameMacroblocks: 8_192, maxHighBitrateKbps: 62_500, maxHighBufferKbps: 78_125),
        H264Level(name: "4.2", maxMacroblocksPerSecond: 522_240, maxFrameMacroblocks: 8_704, maxHighBitrateKbps: 62_500, maxHighBufferKbps: 78_125),
        H264Level(name: "5.0", maxMacroblocksPerSecond: 589_824, maxFrameMacroblocks: 22_080, maxHighBitrateKbps: 168_750, maxHighBufferKbps: 168_750),
        H264Level(name: "5.1", maxMacroblocksPerSecond: 983_040, maxFrameMacroblocks: 36_864, maxHighBitrateKbps: 300_000, maxHighBufferKbps: 300_000),
        H264Level(name: "5.2", maxMacroblocksPerSecond: 2_073_600, maxFrameMacroblocks: 36_864, maxHighBitrateKbps: 300_000, maxHighBufferKbps: 300_000),
    ]

    init?(_ name: String) {
        guard let l = H264Level.table.first(where: { $0.name == name }) else { return nil }
        self = l
    }

    private init(name: String, maxMacroblocksPerSecond: Int, maxFrameMacroblocks: Int, maxHighBitrateKbps: Int, maxHighBufferKbps: Int) {
        self.name = name
        self.maxMacroblocksPerSecond = maxMacroblocksPerSecond
        self.maxFrameMacroblocks = maxFrameMacroblocks
        self.maxHighBitrateKbps = maxHighBitrateKbps
        self.maxHighBufferKbps = maxHighBufferKbps
    }

    /// Whether a picture at a rate, bitrate and buffer is within the level.
    func holds(width: Int, height: Int, fps: Double, maxrateKbps: Int, bufsizeKbps: Int) -> Bool {
        let mbs = H264Level.macroblocks(width: width, height: height)
        return mbs <= maxFrameMacroblocks && Double(mbs) * (fps > 0 ? fps : 30) <= Double(maxMacroblocksPerSecond)
            && maxrateKbps <= maxHighBitrateKbps && bufsizeKbps <= maxHighBufferKbps
    }

    static func macroblocks(width: Int, height: Int) -> Int { ((width + 15) / 16) * ((height + 15) / 16) }

    private var index: Int { H264Level.table.firstIndex { $0.name == name }! }
    /// As H.264's `level_idc` writes it: 41 for 4.1.
    var idc: Int { Int(name.filter { $0 != "." }) ?? 0 }
    static func < (a: H264Level, b: H264Level) -> Bool { a.index < b.index }

    /// The lowest level at or above `floor` that holds the frame at the rate, bitrate and
    /// buffer; 5.2 when nothing does (x264 then signals 5.2 and players that care will say so).
    static func required(width: Int, height: Int, fps: Double, maxrateKbps: Int, bufsizeKbps: Int, floor: H264Level) -> H264Level {
        table.first { $0 >= floor && $0.holds(width: width, height: height, fps: fps, maxrateKbps: maxrateKbps, bufsizeKbps: bufsizeKbps) }
            ?? table.last!
    }
}
