import CFFmpeg
import Testing
@testable import MediaEngine

@Suite("burnt-in subtitles' canvas")
struct SubtitleBurnerTests {
    func canvas(_ declared: (Int32, Int32), _ codec: AVCodecID, picture: (Int32, Int32), reach: (Int32, Int32)) -> [Int32] {
        let c = SubtitleBurner.canvas(declared: declared, codec: codec, picture: picture, reach: reach)
        return [c.width, c.height]
    }

    @Test("the stream's canvas, else the standard's (DVB 720x576, DVD by its lines), else the picture's; positions past a guess widen it")
    func canvasGuess() {
        #expect(canvas((1920, 1080), AV_CODEC_ID_HDMV_PGS_SUBTITLE, picture: (1920, 800), reach: (1500, 1000)) == [1920, 1080])
        // An HD broadcast's DVB subtitles without a display definition are placed on 720x576.
        #expect(canvas((0, 0), AV_CODEC_ID_DVB_SUBTITLE, picture: (1920, 1080), reach: (600, 560)) == [720, 576])
        #expect(canvas((0, 0), AV_CODEC_ID_DVD_SUBTITLE, picture: (720, 480), reach: (700, 470)) == [720, 480])
        #expect(canvas((0, 0), AV_CODEC_ID_DVD_SUBTITLE, picture: (1024, 576), reach: (700, 560)) == [720, 576])
        #expect(canvas((0, 0), AV_CODEC_ID_XSUB, picture: (640, 352), reach: (600, 340)) == [640, 352])
        // DVB subtitles placed in HD coordinates without saying so: the picture's canvas holds them.
        #expect(canvas((0, 0), AV_CODEC_ID_DVB_SUBTITLE, picture: (1920, 1080), reach: (1400, 1000)) == [1920, 1080])
        // A declared canvas is trusted (a damaged rectangle past it is cut, the rest stays in place).
        #expect(canvas((720, 576), AV_CODEC_ID_DVD_SUBTITLE, picture: (720, 576), reach: (800, 600)) == [720, 576])
    }

    @Test("the canvas's pixels: the picture's on its own grid (anamorphic DVD), the whole screen for SD over HD, square for a disc's HD canvas")
    func canvasPixels() {
        #expect(SubtitleBurner.canvasPixelAspect(canvas: (720, 480), picture: (720, 480), pictureSAR: 32.0 / 27.0) == 32.0 / 27.0)
        #expect(SubtitleBurner.canvasPixelAspect(canvas: (720, 576), picture: (720, 404), pictureSAR: 64.0 / 45.0) == 64.0 / 45.0)
        #expect(SubtitleBurner.canvasPixelAspect(canvas: (720, 576), picture: (1920, 1080), pictureSAR: 1) == 0)
        #expect(SubtitleBurner.canvasPixelAspect(canvas: (1920, 1080), picture: (1920, 800), pictureSAR: 1) == 1)
        #expect(SubtitleBurner.canvasPixelAspect(canvas: (1280, 720), picture: (1080, 720), pictureSAR: 1) == 1)
    }

    /// Where one opaque rectangle of a canvas lands in a picture (x0, y0, x1, y1, inclusive),
    /// drawn by `kiln_overlay_new` and blended into a black picture.
    func landing(canvas: (Int32, Int32), pixelAspect: Double, rect: (x: Int32, y: Int32, w: Int32, h: Int32),
                 picture: (Int32, Int32)) throws -> [Int] {
        let r = try #require(av_mallocz(MemoryLayout<AVSubtitleRect>.size)?.assumingMemoryBound(to: AVSubtitleRect.self))
        defer { av_free(r.pointee.data.0); av_free(r.pointee.data.1); av_free(r) }
        r.pointee.type = SUBTITLE_BITMAP
        r.pointee.x = rect.x; r.pointee.y = rect.y; r.pointee.w = rect.w; r.pointee.h = rect.h
        r.pointee.nb_colors = 2
        r.pointee.linesize.0 = rect.w
        let pixels = try #require(av_mallocz(Int(rect.w * rect.h))?.assumingMemoryBound(to: UInt8.self))
        pixels.update(repeating: 1, count: Int(rect.w * rect.h))
        r.pointee.data.0 = pixels
        let palette = try #require(av_mallocz(1024)?.assumingMemoryBound(to: UInt32.self))
        palette[1] = 0xFFFF_FFFF  // opaque white
        r.pointee.data.1 = UnsafeMutableRawPointer(palette).assumingMemoryBound(to: UInt8.self)
        var rects: [UnsafeMutablePointer<AVSubtitleRect>?] = [r]
        var error: Int32 = 0
        var overlay = kiln_overlay_new(&rects, 1, canvas.0, canvas.1, pixelAspect, picture.0, picture.1, 0, &error)
        defer { kiln_overlay_free(&overlay) }
        #expect(error == 0)
        let frame = try Frame()
        frame.pointer.pointee.width = picture.0
        frame.pointer.pointee.height = picture.1
        frame.pointer.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        #expect(av_frame_get_buffer(frame.pointer, 0) == 0)
        for plane in 0..<3 {
            let rows = plane == 0 ? Int(picture.1) : Int(picture.1) / 2
            let stride = Int(plane == 0 ? frame.pointer.pointee.linesize.0 : plane == 1 ? frame.pointer.pointee.linesize.1 : frame.pointer.pointee.linesize.2)
            let data = plane == 0 ? frame.pointer.pointee.data.0 : plane == 1 ? frame.pointer.pointee.data.1 : frame.pointer.pointee.data.2
            data?.update(repeating: plane == 0 ? 16 : 128, count: rows * stride)
        }
        #expect(kiln_overlay_blend(overlay, frame.pointer) == 0)
        var box = [Int.max, Int.max, -1, -1]
        let stride = Int(frame.pointer.pointee.linesize.0)
        for y in 0..<Int(picture.1) {
            for x in 0..<Int(picture.0) where frame.pointer.pointee.data.0![y * stride + x] > 128 {
                box = [min(box[0], x), min(box[1], y), max(box[2], x), max(box[3], y)]
            }
        }
        return box
    }

    @Test("a canvas's rectangle lands where a player shows it: an anamorphic DVD's across the picture's width, a disc's HD canvas fitted into a cropped picture, an SD canvas over an HD picture stretched")
    func overlayPlacement() throws {
        // 720x480 at 32:27 (16:9 NTSC DVD) made 854x480: x 60…660 of 720 is 71…783 of 854.
        let dvd = try landing(canvas: (720, 480), pixelAspect: 32.0 / 27.0, rect: (60, 400, 600, 40), picture: (854, 480))
        #expect(abs(dvd[0] - 71) <= 1 && abs(dvd[2] - 783) <= 1 && abs(dvd[1] - 400) <= 1 && abs(dvd[3] - 439) <= 1, "\(dvd)")
        // 1920x1080 over 1920x800 (a 2.4:1 rip): one scale, 800/1080, the canvas centred
        // (1422 wide): x lands at (1920 − 1422)/2 + 0.74·x, y at 0.74·y.
        let scope = try landing(canvas: (1920, 1080), pixelAspect: 1, rect: (480, 900, 960, 60), picture: (1920, 800))
        let s = 800.0 / 1080.0, left = (1920 - 1920 * s) / 2
        #expect(abs(Double(scope[0]) - (left + 480 * s)) <= 1.5 && abs(Double(scope[2]) - (left + 1440 * s - 1)) <= 1.5, "\(scope)")
        #expect(abs(Double(scope[1]) - 900 * s) <= 1.5 && abs(Double(scope[3]) - (960 * s - 1)) <= 1.5, "\(scope)")
        // A DVB canvas (720x576) over an HD channel's 1920x1080: the whole screen.
        let dvb = try landing(canvas: (720, 576), pixelAspect: 0, rect: (0, 500, 720, 40), picture: (1920, 1080))
        #expect(dvb[0] == 0 && dvb[2] == 1919 && abs(Double(dvb[1]) - 500 * 1080.0 / 576) <= 1.5, "\(dvb)")
    }
}
