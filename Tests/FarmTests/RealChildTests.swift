import Foundation
import KilnCore
import KilnTestSupport
import Store
import Testing
@testable import Farm

/// The real `prep-artifact` as a launcher, remembering each child's pid and progress.
final class RecordingLauncher: JobLauncher, @unchecked Sendable {
    let real: ChildProcessLauncher
    private let lock = NSLock()
    private var pids: [Int32] = []
    private var progressCount = 0

    init(_ real: ChildProcessLauncher) { self.real = real }

    var childPIDs: [Int32] { lock.lock(); defer { lock.unlock() }; return pids }
    var progressReports: Int { lock.lock(); defer { lock.unlock() }; return progressCount }

    func launch(_ spec: JobSpec, onProgress: @escaping @Sendable (JobProgress) -> Void) throws(KilnError) -> any JobHandle {
        let handle = try real.launch(spec) { [self] p in
            lock.lock(); progressCount += 1; lock.unlock()
            onProgress(p)
        }
        lock.lock(); if let pid = handle.pid { pids.append(pid) }; lock.unlock()
        return handle
    }
}

@Suite("Farm with the real prep-artifact", .serialized)
struct RealChildTests {
    static let binary = Binaries.path("prep-artifact")
    static let presetsDir = Media.repoRoot.appendingPathComponent("Presets").path

    func harness(_ label: String, configure: (inout FarmConfig) -> Void = { _ in }) throws -> (Harness, RecordingLauncher) {
        let launcher = RecordingLauncher(ChildProcessLauncher(executable: Self.binary, nice: 10, presetsDir: Self.presetsDir))
        let h = try Harness(label, launcher: launcher, prober: ChildProcessProber(executable: Self.binary)) {
            $0.prepArtifactPath = Self.binary
            $0.presetsDir = Self.presetsDir
            $0.heartbeatSeconds = 0.5
            configure(&$0)
        }
        return (h, launcher)
    }

    func expectDelivered(_ h: Harness, _ id: String) throws {
        let a = try #require(try h.artifact(id))
        let file = try #require(a.file)
        #expect(file.owned && file.path == h.config.artifactPath(id))
        #expect(Harness.size(file.path) == file.bytes)
        let sum = try Run.command("sha256sum", [file.path]).stdout.split(separator: " ").first.map(String.init)
        #expect(sum == file.sha256)
        let probe = try FFprobe(file.path)
        #expect(probe.streams("video").count == 1)
        #expect(probe.formatDuration > 1)
        #expect(h.tempFiles().isEmpty, "temporary files left: \(h.tempFiles())")
        #expect(try h.farm.unknownFiles().isEmpty)
    }

    @Test("a remux (web caps, original quality, E-AC-3 audio) is made end to end")
    func remux() throws {
        let (h, launcher) = try harness("real-remux")
        defer { h.cleanUp() }
        try h.farm.start()
        let web = try #require(TestPresets.shared.deviceCaps(named: "web"))
        let b = try h.farm.prepare(h.request("remux-1", Media.shared("sp_bear-640x360-ec3.mp4"), .original, caps: web))
        #expect(b.artifact.plan.deliveryFormat == .remux)
        #expect(b.artifact.job?.kind == .remux)
        #expect(try eventually(timeout: 120) { try [.ready, .failed].contains(h.artifact(b.artifact.id)?.state) })
        let made = try #require(try h.artifact(b.artifact.id))
        #expect(made.state == .ready, "\(made.errors)")
        try expectDelivered(h, b.artifact.id)
        #expect(launcher.childPIDs.count == 1)
        #expect(try h.store.events(after: 0, limit: 10).map(\.type) == [.ready])
    }

    @Test("a transcode (720p HEVC to 1 Mbps H.264) is made end to end")
    func transcode() throws {
        let (h, _) = try harness("real-transcode")
        defer { h.cleanUp() }
        try h.farm.start()
        let b = try h.farm.prepare(h.request("tx-1", Media.shared("sp_bear-1280x720-hevc.mp4"), .mbps1))
        #expect(b.artifact.plan.deliveryFormat == .transcode)
        #expect(try eventually(timeout: 180) { try [.ready, .failed].contains(h.artifact(b.artifact.id)?.state) })
        let made = try #require(try h.artifact(b.artifact.id))
        #expect(made.state == .ready, "\(made.errors)")
        try expectDelivered(h, b.artifact.id)
        let probe = try FFprobe(h.config.artifactPath(b.artifact.id))
        #expect(probe.streams("video").first?["codec_name"] == .string("h264"))
    }

    @Test("a source replaced after it was asked for, before its job ran, fails as source_changed in one attempt (the artifact its key names cannot be made); asked for again, the new file's artifact is made")
    func sourceReplacedBeforeItsJob() throws {
        let (h, _) = try harness("real-changed")
        defer { h.cleanUp() }
        let dir = Media.scratch("real-changed-source")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("episode.mkv").path
        try FileManager.default.copyItem(atPath: Media.shared("ax_sample_with_chapters.mkv"), toPath: source)
        let web = try #require(TestPresets.shared.deviceCaps(named: "web"))
        let asked = try h.farm.prepare(h.request("changed-1", source, .original, caps: web))
        #expect(asked.artifact.plan.deliveryFormat != .original)
        // Rewritten in place (a library manager's upgrade) while the job waits for a slot.
        let replacement = try Data(contentsOf: URL(fileURLWithPath: Media.shared("ax_sample_with_srt.mkv")))
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
        try file.truncate(atOffset: 0)
        try file.write(contentsOf: replacement)
        try file.close()
        try h.farm.start()
        #expect(try eventually(timeout: 120) { try [.ready, .failed].contains(h.artifact(asked.artifact.id)?.state) })
        let failed = try #require(try h.artifact(asked.artifact.id))
        #expect(failed.state == .failed)
        #expect(failed.errors.map(\.code) == ["source_changed"], "one attempt, not retried: \(failed.errors)")
        #expect(failed.file == nil && h.tempFiles().isEmpty)

        let again = try h.farm.prepare(h.request("changed-1", source, .original, caps: web))
        #expect(again.artifact.id != asked.artifact.id)
        #expect(try eventually(timeout: 120) { try [.ready, .failed].contains(h.artifact(again.artifact.id)?.state) })
        #expect(try h.artifact(again.artifact.id)?.state == .ready)
        try expectDelivered(h, again.artifact.id)
    }

    @Test("a source cut short after it was asked for (its index gone with its tail) fails as source_changed, which says to ask again, not as an unreadable file for good")
    func sourceCutShortBeforeItsJob() throws {
        let (h, _) = try harness("real-cut")
        defer { h.cleanUp() }
        let dir = Media.scratch("real-cut-source")
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = dir.appendingPathComponent("clip.mp4").path
        try FileManager.default.copyItem(atPath: Media.shared("sp_bear-640x360-trailing-moov.mp4"), toPath: source)
        let asked = try h.farm.prepare(h.request("cut-1", source, .mbps1))
        #expect(asked.artifact.plan.deliveryFormat != .original)
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
        try file.truncate(atOffset: UInt64((FileIO.size(atPath: source) ?? 0) / 2))
        try file.close()
        let cutRun = try Run.command(Binaries.path("prep-artifact"), ["probe", source, "--json"])
        #expect(cutRun.status == 3, "the cut file alone is unreadable: \(cutRun.stdout.prefix(200))")
        try h.farm.start()
        #expect(try eventually(timeout: 120) { try [.ready, .failed].contains(h.artifact(asked.artifact.id)?.state) })
        let failed = try #require(try h.artifact(asked.artifact.id))
        #expect(failed.errors.map(\.code) == ["source_changed"], "\(failed.errors)")
    }

    @Test("an unreadable source fails at intake with the probe child's error")
    func badSource() throws {
        let (h, _) = try harness("real-bad")
        defer { h.cleanUp() }
        #expect(throws: KilnError.self) { try h.farm.prepare(h.request("bad", Media.shared("vd_empty.mp4"), .mbps1)) }
        do { _ = try h.farm.prepare(h.request("bad", Media.shared("vd_empty.mp4"), .mbps1)) } catch {
            #expect(error.exitStatus == 3, "\(error)")
        }
    }

    @Test("a child dies with the thread that spawned it (KILN_PARENT_PID sets its parent-death signal)")
    func childDiesWithItsThread() throws {
        let source = try Media.generated("cli-long-720p.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
            "-t", "60", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        let (h, _) = try harness("real-orphan")
        defer { h.cleanUp() }
        let plan = try h.farm.prepare(h.request("orphan", source, .mbps1)).artifact.plan
        let dir = Media.scratch("orphan")
        defer { try? FileManager.default.removeItem(at: dir) }
        let spec = JobSpec(jobID: 1, artifactID: "a_orphan", attempt: 1, plan: plan, sourcePath: source,
                           sourceDurationSeconds: 60, outputPath: dir.appendingPathComponent("out.mp4").path)
        let started = LockedArray<any JobHandle>()
        let progressed = LockedArray<JobProgress>()
        let launcher = ChildProcessLauncher(executable: Self.binary, presetsDir: Self.presetsDir)
        let thread = Thread {
            if let handle = try? launcher.launch(spec, onProgress: { progressed.append($0) }) { started.append(handle) }
            // Wait until the child works, then let this thread end while the child is busy.
            while progressed.values.isEmpty { Thread.sleep(forTimeInterval: 0.02) }
        }
        thread.start()
        #expect(eventually(timeout: 120) { !progressed.values.isEmpty })
        let handle = try #require(started.values.first)
        let outcome = try #require(handle.wait(timeout: 60))
        #expect(outcome.termination == .signaled(SIGKILL))
        let left = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        #expect(!left.contains("out.mp4"))
    }

    @Test("a child killed with SIGKILL mid-transcode is retried and then succeeds, leaving no temporary file")
    func sigkilledChildIsRetried() throws {
        let source = try Media.generated("cli-long-720p.mkv", [
            "-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30", "-f", "lavfi", "-i", "sine=frequency=440",
            "-t", "60", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"])
        let (h, launcher) = try harness("real-kill") { $0.retry = RetryPolicy(baseSeconds: 0.2, capSeconds: 0.2) }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("kill-1", source, .mbps1)).artifact.id
        #expect(try eventually(timeout: 120) { launcher.progressReports > 0 })
        let victim = try #require(launcher.childPIDs.first)
        #expect(kill(victim, SIGKILL) == 0)
        // The retry is due 0.2 s later by the farm's clock, which this test moves.
        #expect(try eventually(timeout: 60) { try h.artifact(id)?.job?.state == .retrying })
        h.clock.advance(seconds: 1)
        h.farm.wake()

        #expect(try eventually(timeout: 600) { try [.ready, .failed].contains(h.artifact(id)?.state) })
        let a = try #require(try h.artifact(id))
        #expect(a.state == .ready)
        #expect(a.errors.count == 1)
        #expect(a.errors.first?.code == "crashed" && a.errors.first?.signal == SIGKILL)
        #expect(a.job?.attempt == 2)
        #expect(launcher.childPIDs.count == 2)
        #expect(kill(victim, 0) == -1 && errno == ESRCH, "the killed child is reaped")
        try expectDelivered(h, id)
        #expect(abs(try FFprobe(h.config.artifactPath(id)).formatDuration - 60) < 1)
    }
}
