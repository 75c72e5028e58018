import Testing
import CFFmpeg
import KilnCore
@testable import MediaEngine

/// The first `count` decoded pictures of `path`'s first video stream, each handed to `body`
/// with the decoder (its time base) as it comes out.
func firstPictures(_ path: String, count: Int, _ body: (Frame, Decoder) throws -> Void) throws {
    let demuxer = try Demuxer(path: path, cancellation: Cancellation())
    let index = demuxer.firstVideoStream
    let decoder = try Decoder(stream: demuxer.stream(index))
    let packet = try Packet()
    var seen = 0
    while seen < count, try demuxer.read(into: packet) {
        defer { packet.unref() }
        guard packet.pointer.pointee.stream_index == Int32(index) else { continue }
        try decoder.decode(packet) { (frame: Frame) throws(KilnError) in
            guard seen < count else { return }
            seen += 1
            do { try body(frame, decoder) } catch { throw KilnError(.internalError, stage: .filter, "\(error)") }
        }
    }
    #expect(seen == count)
}
