import Foundation
import Testing
import CFFmpeg
import KilnTestSupport
@testable import MediaEngine

@Suite("sound frames cut by their own headers")
struct SoundFramesTests {
    /// Five seconds of a tone encoded by the ffmpeg command as an elementary stream.
    static func encoded(_ name: String, _ args: [String]) throws -> [UInt8] {
        let path = try Media.generated(name, ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=5"] + args)
        return Array(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    static let cases: [(name: String, args: [String], codec: AVCodecID, rate: Int, channels: Int)] = [
        ("ac3-44k-192k.ac3", ["-c:a", "ac3", "-ar", "44100", "-ac", "2", "-b:a", "192k"], AV_CODEC_ID_AC3, 44100, 2),
        ("ac3-32k-51.ac3", ["-c:a", "ac3", "-ar", "32000", "-ac", "6", "-b:a", "384k"], AV_CODEC_ID_AC3, 32000, 6),
        ("eac3-51.eac3", ["-c:a", "eac3", "-ac", "6", "-b:a", "640k"], AV_CODEC_ID_EAC3, 48000, 6),
        ("aac-stereo.aac", ["-c:a", "aac", "-ac", "2", "-f", "adts"], AV_CODEC_ID_AAC, 48000, 2),
        ("aac-44k-51.aac", ["-c:a", "aac", "-ar", "44100", "-ac", "6", "-f", "adts"], AV_CODEC_ID_AAC, 44100, 6),
        ("mp2-44k.mp2", ["-c:a", "mp2", "-ar", "44100", "-ac", "2", "-b:a", "192k"], AV_CODEC_ID_MP2, 44100, 2),
        ("mp3-44k-vbr.mp3", ["-c:a", "libmp3lame", "-ar", "44100", "-ac", "2", "-q:a", "4", "-write_xing", "0", "-id3v2_version", "0"],
         AV_CODEC_ID_MP3, 44100, 2),
        ("mp3-22k-mono.mp3", ["-c:a", "libmp3lame", "-ar", "22050", "-ac", "1", "-b:a", "32k", "-write_xing", "0", "-id3v2_version", "0"],
         AV_CODEC_ID_MP3, 22050, 1),
    ]

    @Test("each frame of what the ffmpeg command encodes ends where the next one's header begins, to the file's last byte, with the codec, rate and channels it was encoded at (AC-3's 44.1 kHz frames a word longer every other one, MP2's padded ones, VBR MP3, MPEG-2 half-rate MP3)",
          arguments: cases.indices)
    func framesEndToEnd(_ k: Int) throws {
        let c = Self.cases[k]
        let bytes = try Self.encoded(c.name, c.args)
        var at = 0, frames = 0
        bytes.withUnsafeBufferPointer { b in
            while at < b.count, let h = SoundFrameHeader(b, at: at) {
                #expect(h.codec == c.codec && h.sampleRate == c.rate && h.channels == c.channels, "frame \(frames) at \(at): \(h)")
                at += h.length
                frames += 1
            }
            #expect(SoundFrameHeader.tiles(b, as: SoundFrameHeader.family(of: c.codec)!))
            #expect(SoundFrameHeader.foreignRun(in: b, declared: SoundFrameHeader.family(of: c.codec)!) == nil)
        }
        #expect(at == bytes.count && frames > 50, "\(frames) frames cover \(at) of \(bytes.count) bytes")
    }

    @Test("a framer given AC-3 after AAC's last bytes, in chunks of any size with the times of the chunks they began in, gives every AC-3 frame whole and in order, timed by its samples, and a chunk whose time jumps (a dropout) moves the frames from there on")
    func framerFollowsChunks() throws {
        let ac3 = try Self.encoded("ac3-44k-192k.ac3", Self.cases[0].args)
        let aacTail = Array(try Self.encoded("aac-stereo.aac", Self.cases[3].args).suffix(300))
        let timeBase = AVRational(num: 1, den: 90000)
        let frameTicks = 1536.0 * 90000 / 44100
        var lengths: [Int] = []
        ac3.withUnsafeBufferPointer { b in
            var at = 0
            while let h = SoundFrameHeader(b, at: at) { lengths.append(h.length); at += h.length }
        }
        let dropoutFrame = 100, dropout: Int64 = 90000
        var framer = SoundFramer(timeBase: timeBase)
        var random = SplitMix(seed: 7)
        var cuts: [SoundFramer.Cut] = []
        aacTail.withUnsafeBufferPointer { framer.append($0, pts: 0) }
        // The dropout shows from the first frame a chunk's time is given for after it.
        var offset = 0, frameStarts = [0], dropoutFrom = Int.max
        for l in lengths { frameStarts.append(frameStarts.last! + l) }
        while offset < ac3.count {
            let size = min(ac3.count - offset, 200 + Int(random.next() % 4000))
            // The time of the first frame that begins in the chunk (a PES's), as a demuxer gives it.
            let first = frameStarts.firstIndex { $0 >= offset } ?? lengths.count
            let pts = first < lengths.count ? Int64((Double(first) * frameTicks).rounded()) + (first >= dropoutFrame ? dropout : 0) + 1000 : noPTS
            if first >= dropoutFrame, first < lengths.count { dropoutFrom = min(dropoutFrom, first) }
            ac3.withUnsafeBufferPointer { framer.append(UnsafeBufferPointer(rebasing: $0[offset..<offset + size]), pts: pts) }
            cuts += try framer.frames(streamIndex: 1, flushing: false)
            offset += size
        }
        cuts += try framer.frames(streamIndex: 1, flushing: true)
        #expect(cuts.count == lengths.count, "\(cuts.count) frames of \(lengths.count)")
        #expect(dropoutFrom < dropoutFrame + 5)
        #expect(framer.skippedBytes == aacTail.count && framer.skippedRuns == 1, "the AAC tail is one damaged stretch")
        for (i, cut) in cuts.enumerated() where i < lengths.count {
            let p = cut.packet.pointer.pointee
            let same = Int(p.size) == lengths[i] && memcmp(p.data, ac3.withUnsafeBufferPointer { $0.baseAddress! + frameStarts[i] }, lengths[i]) == 0
            #expect(same && cut.header?.codec == AV_CODEC_ID_AC3, "frame \(i)")
            let expected = Double(i) * frameTicks + (i >= dropoutFrom ? Double(dropout) : 0) + 1000
            #expect(abs(Double(p.pts) - expected) <= 2, "frame \(i) at \(p.pts), expected \(expected)")
            guard same else { break }
        }
    }

    @Test("bytes that are no frames, or an E-AC-3 frame followed by dependent substreams without end, hold neither bytes nor chunk times as they come: a hostile stream's memory stays flat")
    func flatOnJunk() throws {
        var framer = SoundFramer(timeBase: AVRational(num: 1, den: 90000))
        let junk = [UInt8](repeating: 0x47, count: 184)
        for i in 0..<20_000 {
            junk.withUnsafeBufferPointer { framer.append($0, pts: Int64(i) * 100) }
            _ = try framer.frames(streamIndex: 0, flushing: false)
            #expect(framer.held.bytes < 200 && framer.held.times <= 2, "after \(i) chunks: \(framer.held)")
            if framer.held.bytes >= 200 || framer.held.times > 2 { break }
        }
        // An E-AC-3 independent frame, then its dependent substream over and over.
        let eac3 = try Self.encoded("eac3-51.eac3", Self.cases[2].args)
        let first = eac3.withUnsafeBufferPointer { SoundFrameHeader($0, at: 0)! }
        var dependent = Array(eac3[0..<first.length])
        dependent[2] = dependent[2] & 0x3F | 0x40  // strmtyp 1: dependent
        var chained = SoundFramer(timeBase: AVRational(num: 1, den: 90000))
        Array(eac3[0..<first.length]).withUnsafeBufferPointer { chained.append($0, pts: 0) }
        var cut = 0
        for i in 0..<2_000 {
            dependent.withUnsafeBufferPointer { chained.append($0, pts: Int64(i + 1) * 2880) }
            cut += try chained.frames(streamIndex: 0, flushing: false).count
            #expect(chained.held.bytes < 12 * first.length, "after \(i) substreams: \(chained.held)")
            if chained.held.bytes >= 12 * first.length { break }
        }
        #expect(cut >= 1)
    }

    @Test("an AAC frame's program config element gives its channels and whether it is dual mono: two single channels at the front are (ISDB); a pair, or two singles with an LFE, are not; a fill element before it is read past; a block without one says nothing")
    func programConfig() throws {
        func block(_ bits: String) -> [UInt8] {
            let padded = bits + String(repeating: "0", count: (8 - bits.count % 8) % 8)
            return stride(from: 0, to: padded.count, by: 8).map { i in
                UInt8(padded.dropFirst(i).prefix(8), radix: 2)!
            }
        }
        // id 5, tag, object type, rate; front, side, back, LFE, assoc, coupling counts; no mixdowns.
        func pce(front: String, lfe: Int = 0) -> String {
            "101" + "0000" + "01" + "0011" + String(repeating: "0", count: 4 - String(front.count / 5, radix: 2).count)
                + String(front.count / 5, radix: 2) + "0000" + "0000" + (lfe == 1 ? "01" : "00") + "000" + "0000" + "000"
                + front + (lfe == 1 ? "0000" : "")
        }
        let cases: [(String, (channels: Int, dualMono: Bool)?)] = [
            (pce(front: "00000" + "00001"), (2, true)),
            (pce(front: "10000"), (2, false)),
            (pce(front: "00000" + "00001", lfe: 1), (3, false)),
            (pce(front: "00000" + "10000" + "10001", lfe: 1), (6, false)),
            ("110" + "0010" + "0100100001001000" + pce(front: "00000" + "00001"), (2, true)),
            ("000" + "0000" + "11111111", nil),
        ]
        for (bits, expected) in cases {
            let found = block(bits).withUnsafeBufferPointer { SoundFrameHeader.programConfig($0) }
            #expect(found?.channels == expected?.channels && found?.dualMono == expected?.dualMono, "\(bits): \(String(describing: found))")
        }
    }
}
