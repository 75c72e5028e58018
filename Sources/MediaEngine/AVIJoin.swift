import Glibc
import KilnCore

/// AVI files joined with `cat` (a film's CD1 and CD2, joined as old rips were before they
/// were played): libavformat reads on past the first file's index through the second file's
/// packets, each stream's timed on after the first's, but its length is the first file's
/// header's, so a whole run was refused as running past it ("the file is damaged").
enum AVIJoin {
    /// Where each AVI file in the file begins: the RIFF chunks of form "AVI " (an OpenDML
    /// file's later RIFF chunks are "AVIX", parts of the same file). One entry for a file
    /// that is not joined.
    static func files(path: String) -> [Int64] {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return [] }
        var offset: Int64 = 0, starts: [Int64] = []
        for _ in 0..<1024 {
            guard let head = try? file.read(upTo: 12, at: offset), head.count == 12, head[0..<4].elementsEqual("RIFF".utf8) else { break }
            if head[8..<12].elementsEqual("AVI ".utf8) { starts.append(offset) }
            offset += 8 + Int64(RIFFHead(head).u32(4)) + Int64(head[4] & 1)
        }
        return starts
    }

    /// The joined files' length: each one's frames (OpenDML's `dmlh` count where it gives
    /// one, else the main header's) times its frame period (`avih`); nil where a header
    /// does not say.
    static func length(path: String, files: [Int64]) -> Double? {
        guard let file = try? FileDescriptor(path: path, flags: O_RDONLY) else { return nil }
        var seconds = 0.0
        for start in files {
            guard let bytes = try? file.read(upTo: 16_384, at: start), bytes.count >= 64, case let head = RIFFHead(bytes),
                  let avih = head.chunk("avih", room: 32) else { return nil }
            let period = Double(head.u32(avih + 8)) / 1_000_000
            let counted = head.chunk("dmlh", room: 12).map { head.u32($0 + 8) } ?? 0
            let frames = counted > 0 ? counted : head.u32(avih + 24)
            guard period > 0, frames > 0 else { return nil }
            seconds += Double(frames) * period
        }
        return seconds
    }
}
