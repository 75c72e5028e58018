import Testing
import Foundation
@testable import KilnCore

@Suite("the cores other processes leave idle")
struct SpareCoresTests {
    @Test("processes that keep every core busy leave idle no more of the machine than this process's own threads take; its own threads (spinning here, and the rest of the suite's) are not counted as others'")
    func othersBusy() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        // As many spinning shells as cores: whatever else runs, they take the machine.
        let spinners = try (0..<cores).map { _ in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-c", "while :; do :; done"]
            try p.run()
            return p
        }
        // SIGKILL: a shell started so may ignore SIGTERM, and the test would wait forever.
        defer { for p in spinners { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() } }
        // And twice as many threads of this process's own, spinning beside them: a core or
        // more of the machine is this process's.
        let until = Date().addingTimeInterval(1.0)
        for _ in 0..<2 * cores {
            Thread {
                var x = 0.0
                while Date() < until { x += sin(x) + 1 }
                if x < 0 { print(x) }
            }.start()
        }
        Thread.sleep(forTimeInterval: 0.2)
        let mark = try #require(SpareCores.mark())
        Thread.sleep(forTimeInterval: 0.6)
        let idle = try #require(mark.idleOthers(cores: cores))
        let now = try #require(SpareCores.mark())
        // What this process took meanwhile (its spinning threads, and whatever else of the
        // suite runs beside this test) is what others left it: the rest they kept busy. (A
        // bound on `idle` alone flaked: the suite's own threads took 0.64 of the 2 cores.)
        let ownCores = Double(now.own - mark.own) / Double(now.machineAll - mark.machineAll) * Double(cores)
        #expect(abs(idle - ownCores) < 0.25, "\(idle) of \(cores) cores idle beside \(cores) spinning shells, this process taking \(ownCores)")
    }

    @Test("this process's CPU time is read from /proc/self/stat whatever its command name holds, and the machine's from /proc/stat")
    func ticks() throws {
        let own = try #require(SpareCores.ownTicks())
        let until = Date().addingTimeInterval(0.15)
        var x = 0.0
        while Date() < until { x += sin(x) + 1 }
        #expect(x > 0)
        #expect(try #require(SpareCores.ownTicks()) > own, "0.15 s of spinning is at least one tick")
        let machine = try #require(SpareCores.machineTicks())
        #expect(machine.all > machine.busy && machine.busy > 0)
    }
}
