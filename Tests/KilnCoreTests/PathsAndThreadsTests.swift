import Testing
import Foundation
import Synchronization
@testable import KilnCore

/// The media child's own path, environment and thread helpers (it does without Foundation
/// and Dispatch): they must answer what those did.
@Suite("paths, environment and threads without Foundation")
struct PathsAndThreadsTests {
    @Test("folder and last component as POSIX dirname and basename split them")
    func split() {
        // (path, folder, last component): the cases the output's temporary name meets.
        let cases = [("/a/b", "/a", "b"), ("a/b", "a", "b"), ("b", ".", "b"), ("/b", "/", "b"), ("/", "/", "/"),
                     ("a/b/", "a", "b"), ("/a//b", "/a", "b"), ("./b", ".", "b"), ("../x/y.mp4", "../x", "y.mp4"),
                     ("/a/b/.c.kiln-tmp-1-2", "/a/b", ".c.kiln-tmp-1-2"), ("Alien: Covenant.mkv", ".", "Alien: Covenant.mkv"),
                     ("dir/Alien: Covenant.mkv", "dir", "Alien: Covenant.mkv"), ("/ünï/cödé 家.mp4", "/ünï", "cödé 家.mp4"),
                     ("/a/", "/", "a")]
        for (path, folder, last) in cases {
            #expect(Path.directory(of: path) == folder, "\(path)")
            #expect(Path.lastComponent(of: path) == last, "\(path)")
            // What Glibc's dirname says (it may modify its argument: a copy).
            var copy = Array(path.utf8CString)
            #expect(Path.directory(of: path) == String(cString: dirname(&copy)), "\(path)")
        }
        #expect(Path.join("/a", "b") == "/a/b" && Path.join("/a/", "b") == "/a/b" && Path.join(".", "b") == "./b")
    }

    @Test("absolute paths resolve . and .. against the working folder, as URL.standardized does")
    func absolute() {
        let cwd = FileManager.default.currentDirectoryPath
        for path in ["/a/./b/../c", "/../a", "x/y/../z", ".", "../up", "/a//b/", "Presets"] {
            let expected = URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: cwd, isDirectory: true))
                .standardizedFileURL.path
            #expect(Path.absolute(path) == expected, "\(path)")
        }
        #expect(Path.currentDirectory() == cwd)
    }

    @Test("folders, files and what is missing are told apart; a folder lists its entries")
    func fileSystem() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-paths-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let names = ["a.json", ".hidden", "ünï.json", "sub"]
        for n in names.dropLast() { FileManager.default.createFile(atPath: dir.appendingPathComponent(n).path, contents: Data(n.utf8)) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("sub"), withIntermediateDirectories: false)
        #expect(Path.entries(ofDirectory: dir.path)?.sorted() == names.sorted())
        #expect(Path.entries(ofDirectory: dir.appendingPathComponent("none").path) == nil)
        #expect(Path.isDirectory(dir.path) && !Path.isDirectory(dir.appendingPathComponent("a.json").path))
        #expect(Path.exists(dir.appendingPathComponent("a.json").path) && !Path.exists(dir.appendingPathComponent("b").path))
        #expect(try FileIO.contents(atPath: dir.appendingPathComponent("ünï.json").path) == Array("ünï.json".utf8))
        #expect(throws: SystemCallError.self) { try FileIO.contents(atPath: dir.path) }
        #expect(Path.executable() == (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")))
        #expect(Environment.value("PATH") == ProcessInfo.processInfo.environment["PATH"])
        #expect(Environment.value("KILN_SURELY_UNSET_\(UUID().uuidString.prefix(8))") == nil)
    }

    @Test("a latch lets its waiters through once opened, before or after they wait; a timed wait gives up")
    func latch() {
        let early = Latch()
        early.open()
        early.wait()
        #expect(early.wait(seconds: 0))

        let closed = Latch()
        let start = ContinuousClock.now
        #expect(!closed.wait(seconds: 0.2))
        #expect(ContinuousClock.now - start >= .milliseconds(190))
        #expect(!closed.wait(seconds: -1) && !closed.wait(seconds: -0.5) && !closed.wait(seconds: .nan))

        // Several threads wait; one open lets all of them through.
        let gate = Latch(), done = Latch()
        let passed = Atomic<Int>(0)
        for _ in 0..<4 {
            Threads.start {
                gate.wait()
                if passed.add(1, ordering: .relaxed).newValue == 4 { done.open() }
            }
        }
        #expect(passed.load(ordering: .relaxed) == 0)
        gate.open()
        #expect(done.wait(seconds: 10))
        #expect(passed.load(ordering: .relaxed) == 4)
    }

    @Test("substring search agrees with Foundation's, on bytes")
    func includes() {
        let texts = ["", "commentary", "Director's Commentary", "audio description", "yuv420p10le", "ünï 家 commentary", "aaab"]
        let parts = ["", "commentary", "Commentary", "10", "p10", "家", "aab", "aaaa", "description", "ünï"]
        for t in texts {
            for p in parts { #expect(t.includes(p) == t.contains(p), "\(t) / \(p)") }
        }
    }
}
