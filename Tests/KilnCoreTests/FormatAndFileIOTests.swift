import Testing
import Foundation
@testable import KilnCore

@Suite("printf formatting and POSIX file helpers")
struct FormatAndFileIOTests {
    static let values: [Double] = [0, -0.0, 0.125, 0.375, 1.005, 2.25, 2.675, 99.95, 99.96, 100, 0.049999, -0.001, -3.14159,
                                   1e-9, 123456.789, 6.0221e23, .nan, .infinity, -.infinity]

    @Test("fixed and zero-padded numbers print as String(format:) printed them, rounding included")
    func matchesStringFormat() {
        for x in Self.values {
            #expect(Format.fixed(x, decimals: 2) == String(format: "%.2f", x))
            #expect(Format.fixed(x, decimals: 1) == String(format: "%.1f", x))
            #expect(Format.fixed(x * 100, decimals: 1, width: 5) == String(format: "%5.1f", x * 100))
        }
        for n in [0, 5, 9, 10, 59, 60, 99, 100, 12345, -5, -15] {
            #expect(Format.zeroPadded(n, width: 2) == String(format: "%02d", n))
        }
    }

    @Test("a text's occurrences of another are found first to last, not overlapping, by Unicode scalar (without the regex module's ranges(of:))")
    func occurrences() {
        let text: Substring = "a: b: c"
        #expect(text.occurrences(of: ": ").map { text.distance(from: text.startIndex, to: $0.lowerBound) } == [1, 4])
        #expect(Substring("aaaa").occurrences(of: "aa").count == 2)
        #expect(Substring("\\pos(1,2)").occurrences(of: "\\pos(").first?.upperBound == Substring("\\pos(1,2)").index(Substring("\\pos(1,2)").startIndex, offsetBy: 5))
        #expect(Substring("é, e").occurrences(of: "e").count == 1)   // é is one scalar here, not e + accent
        #expect(Substring("abc").occurrences(of: "").isEmpty && Substring("ab").occurrences(of: "abc").isEmpty)
    }

    @Test("sizes are said in the unit that keeps them readable (a 6 MB file system was \"0.0 GB\")")
    func sizes() {
        #expect(Format.bytes(6_000_000) == "6.0 MB")
        #expect(Format.bytes(1_048_576) == "1.0 MB")
        #expect(Format.bytes(52_000) == "52.0 kB")
        #expect(Format.bytes(5_200_000_000) == "5.2 GB")
        #expect(Format.bytes(0) == "0.0 kB")
    }

    @Test("a file reads back whole and at offsets, its size follows symbolic links, a missing one names errno")
    func fileIO() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-fileio-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("a.bin").path
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        do {
            let out = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_TRUNC)
            try bytes.withUnsafeBytes { try out.write($0) }
        }
        let file = try FileDescriptor(path: path, flags: O_RDONLY)
        #expect(try FileIO.readToEnd(fd: file.rawValue) == bytes)
        #expect(try file.read(upTo: 16, at: 99_990) == Array(bytes[99_990...]))
        #expect(try file.read(upTo: 4, at: 200_000) == [])

        let link = dir.appendingPathComponent("link.bin").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        #expect(FileIO.size(atPath: link) == 100_000)
        #expect(FileIO.size(atPath: dir.appendingPathComponent("missing").path) == nil)
        #expect(throws: SystemCallError.self) { try FileDescriptor(path: dir.appendingPathComponent("missing").path, flags: O_RDONLY) }
        do {
            _ = try FileDescriptor(path: dir.appendingPathComponent("missing").path, flags: O_RDONLY)
        } catch {
            #expect(error.errno == ENOENT)
            #expect("\(error)".hasSuffix("No such file or directory"))
        }
    }
}

@Suite("language tags as MP4 writes them")
struct LanguageCodeTests {
    @Test("every ISO 639-1 code, the withdrawn ones old files carry, bibliographic codes and BCP 47 tags become ISO 639-2/T, a list (a DVB descriptor's) its first; a two-letter code no table knows is undetermined, not a code MP4 cannot hold")
    func terminologic() {
        let cases: [(String?, String?)] = [
            ("en", "eng"), ("en-US", "eng"), ("pt_BR", "por"), ("ger", "deu"), ("mao", "mri"), ("ku", "kur"), ("az", "aze"), ("kk", "kaz"),
            ("ne", "nep"), ("mn", "mon"), ("tw", "twi"), ("iw", "heb"), ("in", "ind"), ("ji", "yid"), ("jw", "jav"), ("zh-Hant", "zho"),
            ("yue", "yue"), ("fil", "fil"), ("ENG", "eng"), ("und", nil), ("", nil), (nil, nil), ("xx", nil), ("e1", nil), ("english", nil),
            ("eng,deu", "eng"), ("ger, fre", "deu"), (",eng", "eng"),
        ]
        for (tag, code) in cases { #expect(LanguageCode.terminologic(tag) == code, "\(tag ?? "nil")") }
    }
}
