import Foundation
import Testing
import KilnCore
import KilnTestSupport

/// Only a transcode builds a filter graph, so only a transcode loads libavfilter (and its
/// ~30 dependencies): probe and remux children start smaller and faster without it.
@Suite("libavfilter is loaded by a transcode, not at start")
struct LazyFilterTests {
    @Test("the command does not need libavfilter to start")
    func notNeededAtStart() throws {
        let r = try Run.command("ldd", [Command.binary])
        #expect(r.status == 0, "ldd: \(r.stderr)")
        #expect(r.stdout.contains("libavformat"), "ldd lists the libav libraries: \(r.stdout.prefix(300))")
        let filterLines = r.stdout.split(separator: "\n").filter { $0.contains("libavfilter") }
        #expect(filterLines.isEmpty, "linked at start: \(filterLines)")
    }

    @Test("with a broken libavfilter, probe and remux work and a transcode fails with the reason")
    func brokenLibrary() throws {
        // An empty file with libavfilter's soname first on the library path: the dynamic
        // loader rejects it ("file too short"), whether at start or on dlopen.
        let dir = Media.scratch("broken-avfilter")
        defer { try? FileManager.default.removeItem(at: dir) }
        let sonames = try Self.installedAvfilterSonames()
        try #require(!sonames.isEmpty, "ldconfig lists no libavfilter.so.N")
        for name in sonames {
            #expect(FileManager.default.createFile(atPath: dir.appendingPathComponent(name).path, contents: Data()))
        }
        func run(_ args: [String]) throws -> Run.Result {
            try Run.command("env", ["LD_LIBRARY_PATH=\(dir.path)", Command.binary] + args)
        }

        let probe = try run(["probe", Media.shared("sp_bear-flac.mp4"), "--json"])
        #expect(probe.status == 0, "probe: exit \(probe.status) \(probe.stderr)")

        let remuxed = dir.appendingPathComponent("remux.mp4").path
        let remux = try run(["prepare", Media.shared("ax_sample_with_srt.mkv"), "--quality", "original", "--caps", "web",
                             "--output", remuxed, "--json"])
        #expect(remux.status == 0, "remux: exit \(remux.status) \(remux.stderr)")
        if remux.status == 0 {
            #expect(try Command.json(remux)["plan"]?["delivery_format"] == .string("remux"))
            #expect(try FFprobe(remuxed).streams("video").count == 1)
        }

        let transcoded = dir.appendingPathComponent("transcode.mp4").path
        let transcode = try run(["prepare", Media.shared("sp_bear-640x360-hevc-hdr10.mp4"), "--quality", "1mbps",
                                 "--caps", "web", "--output", transcoded, "--json"])
        #expect(transcode.status == 1, "transcode: exit \(transcode.status) \(transcode.stderr)")
        if transcode.status == 1 {
            let e = try Command.json(transcode)["error"]
            #expect(e?["code"] == .string("internal_error"))
            #expect(e?["stage"] == .string("filter"))
            let message = e?["message"]?.string ?? ""
            #expect(message.contains("libavfilter.so.") && message.contains("cannot be loaded"), "\(message)")
            #expect(message.contains("file too short"), "the loader's reason is kept: \(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: transcoded))
    }

    /// The libavfilter sonames the dynamic loader knows (libavfilter.so.8 on Debian 12).
    static func installedAvfilterSonames() throws -> [String] {
        let r = try Run.command("/sbin/ldconfig", ["-p"])
        let names = r.stdout.split(whereSeparator: \.isWhitespace).filter {
            $0.hasPrefix("libavfilter.so.") && $0.dropFirst("libavfilter.so.".count).allSatisfy(\.isNumber)
        }
        return Set(names.map(String.init)).sorted()
    }
}
