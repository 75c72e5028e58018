import Foundation
import Testing
import CFFmpeg
import KilnCore
@testable import MediaEngine

private let mediaDir = "/work/shared/media"

@Suite("Transcode lanes") struct TranscodeLaneTests {
    @Test("the decoder turns every packet of a video stream into frames")
    func decoderDecodesAllFrames() throws {
        let cancellation = Cancellation()
        let demuxer = try Demuxer(path: "\(mediaDir)/sp_bear-640x360-hevc-hdr10.mp4", cancellation: cancellation)
        let index = (0..<demuxer.streamCount).first { demuxer.stream($0).pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_VIDEO }!
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
}
