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
        #expect(canvas((720, 576), AV_CODEC_ID_DVD_SUBTITLE, picture: (720, 576), reach: (800, 600)) == [800, 600])
    }
}
