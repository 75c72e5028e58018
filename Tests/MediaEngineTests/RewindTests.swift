import Foundation
import Testing
import CFFmpeg
import KilnCore
import KilnTestSupport
@testable import MediaEngine

/// The probe reads a source's first packets, then the demuxer goes back to the start for
/// the copy (`Demuxer.rewind`). Whatever the container's seek does, the copy must then
/// read exactly what a freshly opened file gives.
@Suite("going back to the start")
struct RewindTests {
    /// Sources where a seek to the start loses packets: in Matroska it moves the one read
    /// position to an index entry and drops every block timed before that entry.
    static func earlySound() throws -> [String] {
        let picture = ["-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=3"]
        let tone = ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=3"]
        return [
            try Media.lacedEarlySound(),
            // ffmpeg stores the first picture (5 ms) before the first E-AC-3 frame (0 ms):
            // the seek dropped that frame.
            try Media.generated("rewind-eac3-stored-late.mkv", picture + tone + ["-c:v", "libx264", "-preset", "ultrafast", "-c:a", "eac3"]),
            // Cover art, which libavformat hands out again, timed, after a seek.
            try Media.generated("rewind-cover-art.mp4", picture + tone + ["-f", "lavfi", "-i", "testsrc=size=64x64:duration=0.04",
                "-map", "0", "-map", "1", "-map", "2", "-c:v:0", "libx264", "-preset", "ultrafast", "-c:v:1", "mjpeg",
                "-disposition:v:1", "attached_pic", "-c:a", "aac"]),
        ]
    }

    static let sharedSources = ["ax_sample_with_srt.mkv", "mb_eac3.mkv", "sp_bear-320x240-multitrack.webm", "ax_sample_ac3_aac.mp4",
                                "ax_bbb_2500ms.ts", "ax_sample.avi", "mi_many_tracks.mp4", "sp_bear-640x360-trailing-moov.mp4"]

    static func packets(_ demuxer: Demuxer) throws -> [String] {
        var list: [String] = []
        let packet = try Packet()
        while try demuxer.read(into: packet) {
            let p = packet.pointer.pointee
            // Cover art is no part of the timeline: libavformat hands it out again after a
            // seek, timed at zero then, and nothing reads its time.
            let cover = demuxer.stream(Int(p.stream_index)).pointee.disposition & AV_DISPOSITION_ATTACHED_PIC != 0
            list.append("\(p.stream_index) pts \(cover ? 0 : p.pts) dts \(cover ? 0 : p.dts) flags \(p.flags) size \(p.size)")
            packet.unref()
        }
        return list
    }

    @Test("after reading ahead, a rewind reads every packet a fresh open reads, in the same order and with the same times",
          arguments: try earlySound() + sharedSources.map(Media.shared))
    func sameAsFresh(_ path: String) throws {
        // Opened without the H.264 shortcut, whose analysis goes back to the start itself:
        // this reader never seeks.
        let fresh = try Self.packets(try Demuxer(path: path, cancellation: Cancellation(), h264Shortcut: false))
        let demuxer = try Demuxer(path: path, cancellation: Cancellation())
        let packet = try Packet()
        for _ in 0..<100 where try demuxer.read(into: packet) { packet.unref() }
        try demuxer.rewind()
        #expect(demuxer.wasRewound)
        let rewound = try Self.packets(demuxer)
        #expect(rewound.count == fresh.count)
        if let i = fresh.indices.first(where: { $0 >= rewound.count || fresh[$0] != rewound[$0] }) {
            Issue.record("packet \(i) differs: fresh \(fresh[i]), rewound \(i < rewound.count ? rewound[i] : "none")")
        }
    }
}
