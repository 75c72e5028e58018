import Testing
import KilnTestSupport

@Suite("what the job child links")
struct LinkageTests {
    /// The libraries the dynamic loader must load for a binary (its ELF `NEEDED` entries).
    static func neededLibraries(_ path: String) throws -> [String] {
        let r = try Run.command("readelf", ["-d", "-W", path])
        guard r.status == 0 else { throw TestFailure("readelf failed on \(path): \(r.stderr)") }
        // "0x…01 (NEEDED)  Shared library: [libc.so.6]"
        return r.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }.compactMap { line in
            guard let open = line.lastIndex(of: "["), let close = line.lastIndex(of: "]"), open < close else { return nil }
            return String(line[line.index(after: open)..<close])
        }
    }

    @Test("prep-artifact uses FoundationEssentials, not the full Foundation")
    func noFullFoundation() throws {
        let needed = try Self.neededLibraries(Command.binary)
        #expect(needed.contains { $0.hasPrefix("libavformat") }, "readelf saw the libraries: \(needed)")
        // One child runs per job: the full Foundation (and ICU through Internationalization) costs ~7 MB RSS in each.
        let full = needed.filter { $0 == "libFoundation.so" || $0 == "libFoundationInternationalization.so" }
        #expect(full.isEmpty, """
            prep-artifact links \(full): a module it uses imports Foundation. (Debug builds are incremental: an object \
            compiled while its module still imported Foundation keeps asking for it; `rm -rf .build/debug/KilnCore.build` \
            or the module concerned, then build again.)
            """)
    }
}
