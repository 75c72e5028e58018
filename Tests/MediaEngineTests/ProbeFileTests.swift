import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("what the probe reads from the file system")
struct ProbeFileTests {
    @Test("a file's extension is read as NSString.pathExtension read it", arguments: [
        "a.mkv", "/x/y/a.MKV", "a", ".mkv", "a.", "..mkv", "a.b.c", "dir.d/file", "a.mkv/", "/", "", "a b.m p4", "ü.mkv",
        "a..mkv", "/x/.hidden.ts", ".", "..", "a.mkv//", "x/.."])
    func fileExtension(_ path: String) {
        #expect(Prober.fileExtension(path) == (path as NSString).pathExtension)
    }

    @Test("a symbolic link to a source probes with the size of the file it points to")
    func symlinkSize() throws {
        let dir = Media.scratch("probe-link")
        defer { try? FileManager.default.removeItem(at: dir) }
        let target = Media.shared("ax_sample.avi")
        let link = dir.appendingPathComponent("link.avi").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: target)[.size] as? Int)
        #expect(try Prober.probe(path: link, fingerprint: false).sizeBytes == Int64(size))
    }
}
