import Foundation
import KilnCore
import KilnTestSupport
import Store
import Testing
@testable import Farm

@Suite("Farm with a fake child and an injected clock")
struct FarmTests {

    @Test("200 concurrent identical prepares make one artifact and one job")
    func dedupeStorm() throws {
        let h = try Harness("storm")
        defer { h.cleanUp() }
        let source = try h.source()
        let request = h.request("ref-1", source)
        let ids = LockedArray<String>()
        let errors = LockedArray<String>()
        Concurrently.run(200) { _ in
            do { ids.append(try h.farm.prepare(request).artifact.id) } catch { errors.append("\(error)") }
        }
        #expect(errors.values.isEmpty, "\(errors.values.prefix(3))")
        #expect(Set(ids.values).count == 1)
        let snapshot = try h.store.queueSnapshot(recentFailures: 0, queuedLimit: 10)
        #expect(snapshot.jobsByState.values.reduce(0, +) == 1)
        let a = try #require(try h.artifact(ids.values[0]))
        #expect(a.references == ["ref-1"])

        // Different references, same target: still one artifact and one job.
        Concurrently.run(200) { i in
            do { ids.append(try h.farm.prepare(h.request("ref-storm-\(i)", source)).artifact.id) } catch { errors.append("\(error)") }
        }
        #expect(errors.values.isEmpty)
        #expect(Set(ids.values).count == 1)
        #expect(try h.store.queueSnapshot(recentFailures: 0, queuedLimit: 10).jobsByState.values.reduce(0, +) == 1)
        #expect(try h.artifact(ids.values[0])?.references.count == 201)
    }

    @Test("the same reference with a new target moves; the old artifact, now unheld, is canceled")
    func referenceMoves() throws {
        let h = try Harness("move")
        defer { h.cleanUp() }
        let source = try h.source()
        let first = try h.farm.prepare(h.request("dl-7", source, .mbps1))
        let again = try h.farm.prepare(h.request("dl-7", source, .mbps1))
        #expect(again.artifact.id == first.artifact.id && !again.enqueued && again.movedFrom == nil)
        let moved = try h.farm.prepare(h.request("dl-7", source, .mbps2))
        #expect(moved.artifact.id != first.artifact.id)
        #expect(moved.movedFrom == first.artifact.id)
        #expect(moved.reference.revision == 2)
        #expect(try h.artifact(first.artifact.id)?.state == .canceled)
        let events = try h.store.events(after: 0, limit: 10)
        #expect(events.map(\.type) == [.canceled])
        #expect(events.first?.artifactID == first.artifact.id)
        #expect(events.first?.references == [], "dl-7 lives on, on the new artifact: the cancel names nobody")
        #expect((h.prober as! FakeProber).probes == 1, "the probe is cached by the source's fingerprint")
    }

    @Test("a remux whose copied picture the engine had to re-encode is delivered as the transcode it is, at its encode's rung, not as a remux")
    func reencodedRemuxSaysSo() throws {
        let h = try Harness("reencoded", launcher: FakeLauncher([.succeedReencodingVideo(bytes: 5)]))
        defer { h.cleanUp() }
        try h.farm.start()
        let ios = try #require(TestPresets.shared.deviceCaps(named: "ios"))
        let asked = try h.farm.prepare(h.request("r", try h.source(), .original, caps: ios)).artifact
        #expect(asked.plan.deliveryFormat == .remux && asked.plan.videoFallback != nil, "a Matroska for iOS: a remux")
        #expect(try eventually { try h.artifact(asked.id)?.state == .ready })
        let made = try #require(try h.artifact(asked.id))
        #expect(made.plan.deliveryFormat == .transcode && made.plan.video?.action == .transcode, "\(made.plan)")
        #expect(made.plan.effectiveQuality != .original && made.plan.targetBitrateKbps == made.plan.effectiveQuality.capKbps)
        #expect(made.plan.reasons.contains("video_reencoded") && made.plan.videoFallback == nil)
        #expect(try h.store.reference("r")?.plan == nil, "the reference answers with what was delivered")
        #expect(made.plan.artifactKey == asked.plan.artifactKey, "the same artifact")
    }

    @Test("a remux whose copied sound the engine had to re-encode answers with that encode (AAC), still a remux: the plan no longer says the sound was copied")
    func reencodedSoundSaysSo() throws {
        let h = try Harness("reencoded-sound", launcher: FakeLauncher([.succeedReencodingAudio(bytes: 5)]))
        defer { h.cleanUp() }
        try h.farm.start()
        let ios = try #require(TestPresets.shared.deviceCaps(named: "ios"))
        let asked = try h.farm.prepare(h.request("r", try h.source(), .original, caps: ios)).artifact
        #expect(asked.plan.deliveryFormat == .remux && asked.plan.audio?.action == .copy, "\(asked.plan)")
        #expect(try eventually { try h.artifact(asked.id)?.state == .ready })
        let made = try #require(try h.artifact(asked.id))
        #expect(made.plan.deliveryFormat == .remux && made.plan.video?.action == .copy)
        #expect(made.plan.audio?.action == .transcode && made.plan.audio?.codec == "aac" && made.plan.audio?.bitrateKbps == 160, "\(String(describing: made.plan.audio))")
        #expect(made.plan.reasons.contains("audio_reencoded") && !made.plan.reasons.contains("video_reencoded"))
        #expect(made.plan.artifactKey == asked.plan.artifactKey, "the same artifact")
    }

    @Test("two copies of one film at two paths: each original is its own file; a queued job reads the copy last asked for")
    func copiesAtTwoPaths() throws {
        let h = try Harness("copies") { $0.maxTranscodes = 1 }
        defer { h.cleanUp() }
        let a = try h.source("a.mkv")
        let b = h.dir.appendingPathComponent("b.mkv").path
        try FileManager.default.copyItem(atPath: a, toPath: b)
        let fromA = try h.farm.prepare(h.request("o-a", a, .original)).artifact
        let fromB = try h.farm.prepare(h.request("o-b", b, .original)).artifact
        #expect(fromA.id != fromB.id)
        #expect(fromA.file?.path == a && fromB.file?.path == b, "each answer names its own file")
        // The farm is not started: the transcode waits in the queue while A goes away.
        let queued = try h.farm.prepare(h.request("t-a", a, .mbps1)).artifact
        try FileManager.default.removeItem(atPath: a)
        let same = try h.farm.prepare(h.request("t-b", b, .mbps1)).artifact
        #expect(same.id == queued.id, "the same content at either path is one artifact")
        #expect(try h.artifact(queued.id)?.source.path == b, "the job will read the copy that is there")
    }

    @Test("a queued job whose source path (the copy last asked for) is gone reads the same content from another reference's path, not failing every reference as source_not_found")
    func lastAskedCopyGone() throws {
        let h = try Harness("copy-gone") { $0.maxTranscodes = 1 }
        defer { h.cleanUp() }
        let a = try h.source("a.mkv")
        let b = h.dir.appendingPathComponent("b.mkv").path
        try FileManager.default.copyItem(atPath: a, toPath: b)
        let first = try h.farm.prepare(h.request("t-a", a, .mbps1)).artifact
        let second = try h.farm.prepare(h.request("t-b", b, .mbps1)).artifact
        #expect(first.id == second.id && second.source.path == b)
        try FileManager.default.removeItem(atPath: b)
        try h.farm.start()
        #expect(try eventually { try h.artifact(first.id)?.state == .ready })
        #expect(try h.artifact(first.id)?.errors.isEmpty == true)
        #expect(h.fake.launches.map(\.sourcePath) == [a])
        #expect(try h.artifact(first.id)?.source.path == a)
    }

    @Test("a description cached by an older probe is not planned from: the source is probed again")
    func olderProbeIsNotReused() throws {
        let h = try Harness("probe-version")
        defer { h.cleanUp() }
        let source = try h.source()
        // What the previous probe (before codec tags) cached, under the bare fingerprint.
        let fingerprint = try SourceFingerprint.compute(path: source)
        let stale = MediaInfo(formatName: "mov,mp4,m4a,3gp,3g2,mj2", container: "mp4", durationSeconds: 10, bitRate: 1,
                              sizeBytes: 1, streams: [])
        try h.store.cacheProbe(stale, fingerprint: fingerprint, now: 1)
        // Planned from the stale description (no streams), this throws source_corrupt.
        _ = try h.farm.prepare(h.request("dl-stale", source, .mbps1))
        #expect((h.prober as! FakeProber).probes == 1, "the stale description was used instead of a fresh probe")
        _ = try h.farm.prepare(h.request("dl-again", source, .mbps1))
        #expect((h.prober as! FakeProber).probes == 1, "the fresh description is cached")
    }

    @Test("transient failures are retried with exponential backoff timed by the injected clock")
    func retriesAndBackoff() throws {
        let h = try Harness("retry", launcher: FakeLauncher([.exit(4, code: "io_error"), .crash(signal: SIGSEGV)])) {
            $0.retry = RetryPolicy(baseSeconds: 10, capSeconds: 600)
        }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("r", try h.source())).artifact.id
        let t0 = h.clock.nowMillis()

        #expect(try eventually { try h.artifact(id)?.job?.state == .retrying })
        var job = try #require(try h.artifact(id)?.job)
        #expect(job.attempt == 1)
        #expect((t0 + 5_000...t0 + 10_000).contains(job.runAfter), "first retry waits 5–10 s: \(job.runAfter - t0) ms")
        // Not due yet: nothing runs however often the scheduler looks.
        h.farm.wake()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(h.fake.launches.count == 1)

        h.clock.advance(seconds: 10)
        h.farm.wake()
        #expect(try eventually { try h.fake.launches.count == 2 && h.artifact(id)?.job?.state == .retrying })
        job = try #require(try h.artifact(id)?.job)
        let t1 = h.clock.nowMillis()
        #expect(job.attempt == 2)
        #expect((t1 + 10_000...t1 + 20_000).contains(job.runAfter), "second retry waits 10–20 s: \(job.runAfter - t1) ms")
        #expect(h.tempFiles().isEmpty, "the crashed child's temporary file is removed")

        h.clock.advance(seconds: 20)
        h.farm.wake()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        let a = try #require(try h.artifact(id))
        #expect(a.errors.map(\.code) == ["io_error", "crashed"])
        #expect(a.errors[0].exitStatus == 4 && a.errors[0].logTail == ["log line before io_error"])
        #expect(a.errors[1].signal == SIGSEGV && a.errors[1].exitStatus == nil)
        #expect(a.file?.owned == true && a.file?.bytes == 1000)
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
        #expect(try h.store.events(after: 0, limit: 10).map(\.type) == [.ready])
    }

    @Test("exit 3 fails at once; transient failures fail once attempts are exhausted")
    func permanentVersusTransient() throws {
        let h = try Harness("perm", launcher: FakeLauncher([.exit(3, code: "source_corrupt"),
                                                             .exit(4, code: "disk_full"), .exit(1, code: "internal_error")])) {
            $0.maxAttempts = 2
            $0.retry = RetryPolicy(baseSeconds: 1, capSeconds: 1)
        }
        defer { h.cleanUp() }
        try h.farm.start()
        let permanent = try h.farm.prepare(h.request("p", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(permanent)?.state == .failed })
        let p = try #require(try h.artifact(permanent))
        #expect(p.errors.count == 1 && p.errors[0].code == "source_corrupt" && p.errors[0].exitStatus == 3)
        #expect(p.job?.attempt == 1)

        let transient = try h.farm.prepare(h.request("t", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(transient)?.job?.state == .retrying })
        h.clock.advance(seconds: 2)
        h.farm.wake()
        #expect(try eventually { try h.artifact(transient)?.state == .failed })
        let t = try #require(try h.artifact(transient))
        #expect(t.errors.map(\.code) == ["disk_full", "internal_error"])
        let failed = try h.store.events(after: 0, limit: 10).filter { $0.type == .failed }
        #expect(failed.map(\.artifactID) == [permanent, transient])
        #expect(failed.last?.error?.code == "internal_error")
        #expect(failed.first?.references == ["p"])

        // A new request for the failed artifact queues it again with fresh attempts.
        let again = try h.farm.prepare(h.request("p2", h.artifact(permanent)!.source.path))
        #expect(again.artifact.id == permanent && again.enqueued)
        #expect(try eventually { try h.artifact(permanent)?.state == .ready })
    }

    @Test("a daemon paused past its lease (SIGSTOP, a suspended VM) keeps its own running job when it wakes: it took the job's lease from itself, killed the child with most of its work done and spent an attempt")
    func pausedDaemonKeepsItsJob() throws {
        let gate = Gate()
        let h = try Harness("paused", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 111)), .succeed(bytes: 222)])) {
            $0.leaseSeconds = 60
            $0.heartbeatSeconds = 3600   // its runner, paused too, has not renewed
            $0.rescueIntervalSeconds = 30
        }
        defer { gate.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("p", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        _ = try h.farm.rescueExpiredLeases()   // a pass on time
        h.clock.advance(seconds: 300)          // the whole process stood still for 5 minutes
        #expect(try h.farm.rescueExpiredLeases() == 0)
        gate.release()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.errors.isEmpty == true && h.fake.launches.count == 1)
        #expect(try h.artifact(id)?.file?.bytes == 111)
    }

    @Test("an expired lease is rescued and the old runner's late result is refused")
    func leaseExpiryAndFencing() throws {
        let first = Gate(), second = Gate()
        let h = try Harness("lease", launcher: FakeLauncher([.gated(first, then: .succeed(bytes: 111)),
                                                             .gated(second, then: .succeed(bytes: 222))])) {
            $0.leaseSeconds = 60
            $0.heartbeatSeconds = 3600   // the first runner never renews: its lease lapses
            $0.rescueIntervalSeconds = 3600
            $0.maxTranscodes = 2         // the stale runner still holds a slot until its child ends
        }
        defer { first.release(); second.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("l", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })

        h.clock.advance(seconds: 61)
        #expect(try h.farm.rescueExpiredLeases() == 1)
        // Rescued: a second attempt starts while the first child still runs.
        #expect(try eventually { h.fake.launches.count == 2 })
        #expect(try h.artifact(id)?.errors.map(\.code) == ["lease_expired"])
        // Its time as the API writes times (it gave epoch milliseconds).
        let expiry = RFC3339.string(millis: 1_800_000_000_000 + 60_000)
        let rescued = try h.artifact(id)?.errors.first?.message ?? ""
        #expect(rescued.contains("expired at \(expiry)"), "\(rescued)")

        first.release()   // the old child finishes now: its result must not count
        #expect(try eventually { h.log.lines.contains { $0.contains("after its lease was lost") } })
        #expect(try h.artifact(id)?.state == .pending)
        #expect(!FileManager.default.fileExists(atPath: h.config.artifactPath(id)))

        second.release()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.file?.bytes == 222)
        #expect(try eventually { h.farm.runningJobIDs.isEmpty && h.tempFiles().isEmpty })
    }

    @Test("a finished file the store cannot record for a while (its write lock held by another program, as by a full disk) is kept and recorded once it can: ready after one attempt, where it was thrown away, the job shown running until its lease lapsed and then encoded again")
    func finishedFileKeptWhileStoreFails() throws {
        let gate = Gate()
        let h = try Harness("record-later", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 333))])) {
            $0.heartbeatSeconds = 3600   // the running job writes nothing of its own meanwhile
        }
        defer { gate.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("r", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        // Another program takes the database's write lock: every write waits out the busy
        // timeout (5 s) and fails.
        let lock = try HeldWriteLock(database: h.store.path)
        gate.release()
        #expect(try eventually { h.log.lines.contains { $0.contains("keeping it and trying again") } }, "\(h.log.lines)")
        try lock.release()
        #expect(try eventually { try h.artifact(id)?.state == .ready }, "\(h.log.lines)")
        #expect(try h.artifact(id)?.file?.bytes == 333)
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
        #expect(h.fake.launches.count == 1, "encoded once")
        #expect(try eventually { h.farm.runningJobIDs.isEmpty && h.tempFiles().isEmpty })
    }

    @Test("a failure the store cannot record for a while (a full disk fills the database's disk too) is recorded once it can, as what it was: it was given up at once, and the rescuer later wrote the attempt off as lease_expired")
    func failureKeptWhileStoreFails() throws {
        let gate = Gate()
        let h = try Harness("fail-later", launcher: FakeLauncher([.gated(gate, then: .exit(4, code: "disk_full")), .succeed(bytes: 444)])) {
            $0.leaseSeconds = 60
            $0.heartbeatSeconds = 3600     // the running job writes nothing of its own meanwhile
            $0.rescueIntervalSeconds = 3600
            $0.retry = RetryPolicy(baseSeconds: 1, capSeconds: 1)
        }
        defer { gate.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("f", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        let lock = try HeldWriteLock(database: h.store.path)
        gate.release()
        #expect(try eventually { h.log.lines.contains { $0.contains("could not record its failure") && $0.contains("trying again") } },
                "\(h.log.lines)")
        // The lease lapses while the database cannot be written; the first rescue pass after
        // it can again comes before the runner's next try.
        h.clock.advance(seconds: 61)
        try lock.release()
        _ = try h.farm.rescueExpiredLeases()
        #expect(try eventually { try h.artifact(id)?.errors.isEmpty == false }, "\(h.log.lines)")
        #expect(try h.artifact(id)?.errors.map(\.code) == ["disk_full"], "\(h.log.lines)")
        h.clock.advance(seconds: 2)
        h.farm.wake()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.errors.map(\.code) == ["disk_full"] && h.fake.launches.count == 2)
    }

    @Test("cancel stops a running child; the job is not run again")
    func cancelStopsChild() throws {
        let h = try Harness("cancel", launcher: FakeLauncher([.hang]))
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("c", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        #expect(try h.farm.cancel(artifactID: id))
        #expect(try eventually { h.farm.runningJobIDs.isEmpty })
        #expect(h.fake.allHandles.first?.wasTerminated == true)
        let a = try #require(try h.artifact(id))
        #expect(a.state == .canceled && a.job?.state == .canceled && a.errors.isEmpty)
        #expect(try h.store.events(after: 0, limit: 10).map(\.type) == [.canceled])
        h.farm.wake()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(h.fake.launches.count == 1)

        // Operator retry queues it again.
        #expect(try h.farm.retry(artifactID: id))
        #expect(try eventually { try h.artifact(id)?.state == .ready })
    }

    @Test("releasing the last reference of a running job stops its child")
    func releaseWhileRunning() throws {
        let h = try Harness("release-running", launcher: FakeLauncher([.hang]))
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("x", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        #expect(try h.farm.release(reference: "x"))
        #expect(try eventually { h.farm.runningJobIDs.isEmpty })
        #expect(h.fake.allHandles.first?.wasTerminated == true)
        #expect(try h.artifact(id)?.state == .canceled)
        #expect(try h.store.events(after: 0, limit: 10).first?.references == ["x"])
    }

    @Test("a running job released and asked for again while its child is still stopping runs again beside it, tracked: the old run's end had erased the new run's entry, so releasing it again left its child running, and both children wrote to one path (found by a helper's soak of the daemon)")
    func releasedAndAskedAgainWhileStopping() throws {
        let stopping = Gate()
        let h = try Harness("release-reask", launcher: FakeLauncher([.stopsLate(stopping), .hang])) {
            $0.maxTranscodes = 2
            $0.maxRemuxes = 2
            $0.heartbeatSeconds = 3600   // a run learns of a cancel only from the farm, as a long encode does
        }
        defer { stopping.release(); h.cleanUp() }
        try h.farm.start()
        let source = try h.source()
        _ = try h.farm.prepare(h.request("a", source))
        #expect(try eventually { h.fake.launches.count == 1 })
        #expect(try h.farm.release(reference: "a"))
        #expect(try eventually { h.fake.allHandles.first?.wasTerminated == true })
        // Asked for again while the first child has not exited: a second run starts.
        _ = try h.farm.prepare(h.request("b", source))
        #expect(try eventually { h.fake.launches.count == 2 })
        let paths = h.fake.launches.map(\.outputPath)
        #expect(paths[0] != paths[1], "\(paths)")
        // The first child exits now; the second run is still the farm's to stop.
        stopping.release()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(h.farm.runningJobIDs.count == 1, "\(h.farm.runningJobIDs)")
        #expect(try h.farm.release(reference: "b"))
        #expect(try eventually { h.fake.allHandles.count == 2 && h.fake.allHandles[1].wasTerminated })
        #expect(try eventually { h.farm.runningJobIDs.isEmpty && h.tempFiles().isEmpty })
    }

    @Test("an artifact whose only reference let go before it was made is canceled and never run")
    func neverReferenced() throws {
        let h = try Harness("never")
        defer { h.cleanUp() }
        let id = try h.farm.prepare(h.request("gone", try h.source())).artifact.id
        #expect(try h.farm.release(reference: "gone"))
        #expect(try !h.farm.release(reference: "gone"))
        try h.farm.start()
        h.farm.wake()
        Thread.sleep(forTimeInterval: 0.5)
        #expect(h.fake.launches.isEmpty)
        #expect(try h.artifact(id)?.state == .canceled)
        #expect(try h.artifact(id)?.file == nil)
    }

    @Test("a queued job starts at once when a slot is free: the scheduler wakes on insert, not on its idle timer")
    func promptStart() throws {
        let h = try Harness("prompt") { $0.idleClaimSeconds = 60 }
        defer { h.cleanUp() }
        try h.farm.start()
        Thread.sleep(forTimeInterval: 0.2)   // the scheduler is asleep on its 60 s timer
        _ = try h.farm.prepare(h.request("now", try h.source()))
        #expect(try eventually(timeout: 10) { h.fake.launches.count == 1 })
    }

    @Test("shutdown stops a running child and queues its job again without spending the attempt")
    func shutdownRequeues() throws {
        let h = try Harness("shutdown", launcher: FakeLauncher([.hang]))
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("s", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(id)?.job?.state == .running })
        h.farm.shutdown(grace: 0.2)
        let job = try #require(try h.artifact(id)?.job)
        #expect(job.state == .queued && job.attempt == 0)
        #expect(try h.artifact(id)?.errors.isEmpty == true)
        #expect(h.fake.allHandles.first?.wasTerminated == true)
        #expect(h.tempFiles().isEmpty)

        // The next start picks it up and finishes it.
        h.restart()
        try h.farm.start()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.job?.attempt == 1)
    }

    @Test("shutdown lets a job that finishes within the grace period complete")
    func shutdownGrace() throws {
        let gate = Gate()
        let h = try Harness("grace", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 10))]))
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("g", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) { gate.release() }
        h.farm.shutdown(grace: 20)
        #expect(try h.artifact(id)?.state == .ready)
    }

    @Test("a child with no progress for the stall timeout is stopped and retried as stalled")
    func stallTimeout() throws {
        let h = try Harness("stall", launcher: FakeLauncher([.hang])) { $0.stallTimeoutSeconds = 0.3 }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("st", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(id)?.job?.state == .retrying })
        #expect(try h.artifact(id)?.errors.first?.code == "stalled")
        #expect(h.fake.allHandles.first?.wasTerminated == true)
    }

    @Test("a farm that alone uses its store (the daemon, holding its data directory) rescues a stopped daemon's running job at start, not when its lease runs out")
    func interruptedJobsAtStart() throws {
        let gate = Gate()
        let h = try Harness("interrupted", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 5)), .succeed(bytes: 7)])) {
            $0.leaseSeconds = 3600
        }
        defer { gate.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("i", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        // The daemon is gone (its runner never reports again): a new farm on the same store.
        h.restart()
        let report = try h.farm.start(soleFarm: true)
        #expect(report.rescuedJobs == 1)
        #expect(try h.artifact(id)?.errors.map(\.code) == ["interrupted"])
        #expect(try eventually { try h.artifact(id)?.state == .ready })
    }

    @Test("artifacts on a file system of their own are admitted by its free space, not the data directory's: a job waited for disk with room for it where its file goes (a farm audit)")
    func artifactsMountedApart() throws {
        let h = try Harness("apart") { $0.diskRecheckSeconds = 3600 }
        defer { h.cleanUp() }
        h.space.free = 1 << 20   // the data directory's disk, the database's: at the floor
        h.space.mount(h.config.artifactsDir, free: 1 << 40)
        try h.farm.start()
        let id = try h.farm.prepare(h.request("apart", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(h.farm.freeBytes == 1 << 40)
    }

    @Test("a job that would eat into the free-space floor waits for disk, then runs when space returns")
    func diskAdmission() throws {
        let h = try Harness("disk") { $0.diskRecheckSeconds = 5 }
        defer { h.cleanUp() }
        h.space.free = 1 << 20   // at the floor: no output fits
        try h.farm.start()
        let id = try h.farm.prepare(h.request("d", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(id)?.job?.waitingReason == "waiting_for_disk" })
        let job = try #require(try h.artifact(id)?.job)
        #expect(job.state == .queued && job.attempt == 0)
        #expect(h.fake.launches.isEmpty)

        h.space.free = 1 << 40
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.job?.attempt == 1)
    }

    @Test("a job waiting for disk space keeps its place while the jobs behind it that fit go ahead, and runs first once space returns: one that could not fit had held every job of its kind for as long as it waited")
    func diskWaitLetsOthersPass() throws {
        let h = try Harness("disk-pass") { $0.diskRecheckSeconds = 5 }
        defer { h.cleanUp() }
        h.space.free = 1 << 20   // at the floor: nothing fits yet
        try h.farm.start()
        let big = try h.farm.prepare(h.request("big", try h.source(), .mbps5)).artifact.id
        #expect(try eventually { try h.artifact(big)?.job?.waitingReason == "waiting_for_disk" })
        let small = try h.farm.prepare(h.request("small", try h.source(), .mbps1)).artifact.id
        let large = try #require(try h.artifact(big)).estimatedBytes, little = try #require(try h.artifact(small)).estimatedBytes
        // Two transcodes: one line.
        try #require(try h.artifact(big)?.plan.deliveryFormat == .transcode && h.artifact(small)?.plan.deliveryFormat == .transcode)
        try #require(large > 2 * little)
        // Room for the small output, not the large one.
        h.space.free = h.config.minFreeBytes + little + (large - little) / 2
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(small)?.state == .ready }, "the small job waited behind the one that cannot run")
        #expect(try h.artifact(big)?.state == .pending && h.artifact(big)?.job?.waitingReason == "waiting_for_disk")
        // Space returns: the waiting job runs.
        h.space.free = 1 << 40
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(big)?.state == .ready })
    }

    @Test("a free-space floor the file system cannot leave (KILN_MIN_FREE_BYTES above its size) stops the start with the setting named: every job failed for good while the daemon said ready")
    func floorAboveDisk() throws {
        let h = try Harness("floor-above-disk")
        defer { h.cleanUp() }
        h.space.capacity = h.config.minFreeBytes - 1
        do { _ = try h.farm.start(); Issue.record("started") } catch {
            #expect(error.code == .usage && error.field == "KILN_MIN_FREE_BYTES" && error.message.contains("no output could ever be written"), "\(error)")
        }
        h.space.capacity = h.config.minFreeBytes * 4
        _ = try h.farm.start()
    }

    @Test("a job that fits the file system but not its free space waits; one larger than the whole file system fails at once instead of waiting for ever")
    func neverFits() throws {
        let h = try Harness("never-fits") { $0.diskRecheckSeconds = 5 }
        defer { h.cleanUp() }
        h.space.free = 1 << 20   // at the floor: it waits
        h.space.capacity = 1 << 40   // on a file system that could hold it
        try h.farm.start()
        let big = try h.farm.prepare(h.request("big", try h.source())).artifact
        #expect(try eventually { try h.artifact(big.id)?.job?.waitingReason == "waiting_for_disk" })
        h.clock.advance(seconds: 6)
        h.farm.wake()
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try h.artifact(big.id)?.state == .pending, "it fits once space is freed: it waits")
        h.space.capacity = h.config.minFreeBytes + big.estimatedBytes - 1   // the file system is one byte too small
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(big.id)?.state == .failed })
        let error = try #require(try h.artifact(big.id)?.errors.last)
        // Not disk_full, which says "worth retrying": it would fail again until the disk grows.
        #expect(error.code == "quality_unavailable" && error.message.contains("more than the artifacts folder's file system holds"), "\(error)")
        #expect(!error.message.contains("0.0 GB"), "sizes in a unit that says something: \(error.message)")
        #expect(h.fake.launches.isEmpty)
    }

    @Test("a job waiting for disk space gets it from unheld artifacts, least recently used first, long before their retention ends; none is deleted for a job that still would not fit")
    func diskWaitEvictsUnheld() throws {
        // Cached files smaller than an output's estimate (at least 1 MiB): two of them cannot
        // make room that one output lacks by more than their size.
        let cached: Int64 = 128 << 10
        let h = try Harness("disk-evicts", launcher: FakeLauncher([.succeed(bytes: Int(cached)), .succeed(bytes: Int(cached)), .succeed(bytes: 5)])) {
            $0.diskRecheckSeconds = 5
            $0.gcIntervalSeconds = 3600   // only the waiting job's call collects
        }
        defer { h.cleanUp() }
        h.space.free = 1 << 40
        try h.farm.start()
        let old = try h.farm.prepare(h.request("old", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(old)?.state == .ready })
        h.clock.advance(seconds: 1)
        let newer = try h.farm.prepare(h.request("newer", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(newer)?.state == .ready })
        #expect(try h.farm.release(reference: "old"))
        h.clock.advance(seconds: 1)
        #expect(try h.farm.release(reference: "newer"))
        let estimate = try #require(try h.artifact(old)).estimatedBytes

        // Even with both cached files gone the next output would not fit: they stay.
        h.space.holding(h.config.artifactsDir, bytes: h.config.minFreeBytes + estimate - 1024)
        let third = try h.farm.prepare(h.request("third", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(third)?.job?.waitingReason == "waiting_for_disk" })
        Thread.sleep(forTimeInterval: 0.3)   // the collection the wait asked for
        #expect(try h.farm.collectGarbage().deleted.isEmpty)
        #expect(try h.artifact(old)?.state == .ready && h.artifact(newer)?.state == .ready)

        // One cached file's room is enough: the least recently used goes, and the job runs.
        h.space.holding(h.config.artifactsDir, bytes: 2 * cached + h.config.minFreeBytes + estimate - cached / 2)
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(third)?.state == .ready })
        #expect(try h.artifact(old) == nil, "the least recently used unheld artifact is collected: \(h.log.lines)")
        #expect(try h.artifact(newer)?.state == .ready, "one file's room was enough")
    }

    @Test("disk admission keeps what running jobs have still to write: a second job that fits the free space alone, not beside the first, waits")
    func diskAdmissionCountsRunningJobs() throws {
        let gate = Gate()
        let h = try Harness("disk-running", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 5)), .succeed(bytes: 5)])) {
            $0.maxTranscodes = 2
            $0.diskRecheckSeconds = 5
        }
        defer { gate.release(); h.cleanUp() }
        h.space.free = 1 << 40
        try h.farm.start()
        let first = try h.farm.prepare(h.request("one", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        let estimate = try #require(try h.artifact(first)).estimatedBytes
        // Room for one more output beside the floor, not for two.
        h.space.free = h.config.minFreeBytes + estimate * 3 / 2
        let second = try h.farm.prepare(h.request("two", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(second)?.job?.waitingReason == "waiting_for_disk" })
        #expect(h.fake.launches.count == 1)
        gate.release()
        #expect(try eventually { try h.artifact(first)?.state == .ready })
        h.clock.advance(seconds: 6)
        h.farm.wake()
        #expect(try eventually { try h.artifact(second)?.state == .ready })
    }

    @Test("a copied stream whose bitrate nobody states (Matroska) is estimated at the whole file's, not as nothing")
    func estimateWithoutStreamBitrates() {
        let source = MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 90, bitRate: 3_200_000, sizeBytes: 36_000_000, streams: [
            StreamInfo(index: 0, type: .video, codec: "h264", width: 1280, height: 720),
            StreamInfo(index: 1, type: .audio, codec: "ac3", channels: 2, sampleRate: 48000),
        ])
        let plan = Plan(quality: .mbps5, effectiveQuality: .mbps5, deliveryFormat: .remux, targetBitrateKbps: 5000, container: "mp4",
                        video: VideoPlan(sourceIndex: 0, action: .copy, codec: "h264", width: 1280, height: 720, bitrateKbps: 0),
                        audio: AudioPlan(sourceIndex: 1, action: .transcode, codec: "aac", channels: 2, bitrateKbps: 80),
                        subtitles: [], reasons: [], artifactKey: "k")
        #expect(Farm.estimatedBytes(plan: plan, source: source) >= 36_000_000)
        // A 40 Mb/s film re-encoded at 6 Mb/s with its sound copied (rate unknown): about the
        // encode and a generous sound, not the whole file's 40.
        let film = MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 100, bitRate: 40_000_000, sizeBytes: 500_000_000,
                             streams: source.streams)
        let encode = Plan(quality: .mbps5, effectiveQuality: .mbps5, deliveryFormat: .transcode, targetBitrateKbps: 6000, container: "mp4",
                          video: VideoPlan(sourceIndex: 0, action: .transcode, codec: "h264", width: 1920, height: 1080, bitrateKbps: 6000),
                          audio: AudioPlan(sourceIndex: 1, action: .copy, codec: "ac3", channels: 2, bitrateKbps: 0),
                          subtitles: [], reasons: [], artifactKey: "k")
        let bytes = Farm.estimatedBytes(plan: encode, source: film)
        #expect(bytes > 75_000_000 && bytes < 150_000_000, "\(bytes)")
        // A one-second clip at 1 Mbps (58 kB made) is asked about its own size, not 17 MB
        // (which refused it for good on a 12 MB volume); a three-hour film gets room for
        // its index beside its pictures and sound.
        let rung = Plan(quality: .mbps1, effectiveQuality: .mbps1, deliveryFormat: .transcode, targetBitrateKbps: 1000, container: "mp4",
                        video: VideoPlan(sourceIndex: 0, action: .transcode, codec: "h264", width: 640, height: 360, bitrateKbps: 900),
                        audio: AudioPlan(sourceIndex: 1, action: .transcode, codec: "aac", channels: 2, bitrateKbps: 96),
                        subtitles: [], reasons: [], artifactKey: "k")
        func length(_ seconds: Double) -> MediaInfo {
            MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: seconds, bitRate: 8_000_000,
                      sizeBytes: Int64(seconds * 1_000_000), streams: source.streams)
        }
        let clip = Farm.estimatedBytes(plan: rung, source: length(1.07))
        #expect(clip > 133_000 && clip < 2_000_000, "\(clip)")
        let film3h = Farm.estimatedBytes(plan: rung, source: length(3 * 3600))
        #expect(film3h > 996 * 125 * 3 * 3600 + 10_000_000, "\(film3h)")
    }

    @Test("subscribers hear persisted events in order and live progress")
    func events() throws {
        let gate = Gate()
        let h = try Harness("events", launcher: FakeLauncher([.gated(gate, then: .succeed(bytes: 5))]))
        defer { gate.release(); h.cleanUp() }
        let heard = LockedArray<EventRecord>()
        let subscription = h.farm.events.subscribe(after: 0) { heard.append($0) }
        defer { subscription.cancel() }
        let cursor = h.farm.events.cursor(after: 0)
        try h.farm.start()
        let id = try h.farm.prepare(h.request("e", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        gate.release()
        #expect(try eventually { heard.values.contains { $0.type == .ready } })
        let ready = try #require(heard.values.first { $0.type == .ready })
        #expect(ready.artifactID == id && ready.references == ["e"] && ready.deliveryFormat == .transcode && ready.seq > 0)
        #expect(heard.values.contains { $0.type == .progress && $0.progress?.encodedSeconds == 5 && $0.seq == 0 && $0.references == ["e"] })

        var got: [EventRecord] = []
        #expect(try eventually { got += try cursor.next(timeout: 0.1); return got.contains { $0.type == .ready } })
        #expect(cursor.position == ready.seq)
        #expect(try cursor.next(timeout: 0.05).isEmpty)
    }
}

@Suite("Garbage collection")
struct GarbageCollectionTests {

    /// Makes an artifact ready through the farm and returns its id.
    func ready(_ h: Harness, _ reference: String, quality: Quality = .mbps1) throws -> String {
        let id = try h.farm.prepare(h.request(reference, try h.source(), quality)).artifact.id
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        return id
    }

    @Test("stored events are removed after their retention (the database does not grow for ever), sequence numbers go on; a webhook's undelivered ones stay")
    func eventRetention() throws {
        for held in [false, true] {
            let h = try Harness("event-retention") { $0.eventRetentionSeconds = 3600; $0.gcIntervalSeconds = 3600; $0.eventsHeldForWebhook = held }
            defer { h.cleanUp() }
            try h.farm.start()
            _ = try ready(h, "e1")
            let first = try h.store.events(after: 0, limit: 10)
            #expect(first.count == 1)
            h.clock.advance(seconds: 1800)
            #expect(try h.farm.collectGarbage().prunedEvents == 0, "within retention")
            h.clock.advance(seconds: 1801)
            _ = try ready(h, "e2")   // a fresh event beside the old one
            let report = try h.farm.collectGarbage()
            let left = try h.store.events(after: 0, limit: 10).map(\.seq)
            if held {
                #expect(report.prunedEvents == 0 && left.count == 2, "not yet delivered to the webhook: \(left)")
                try h.store.setWebhookPosition(first[0].seq)
                #expect(try h.farm.collectGarbage().prunedEvents == 1)
            } else {
                #expect(report.prunedEvents == 1 && left.count == 1 && left[0] > first[0].seq, "\(left)")
            }
            #expect(try h.store.lastEventSeq() > first[0].seq)
        }
    }

    @Test("an unreferenced ready artifact is kept for the retention time, then deleted")
    func retention() throws {
        let h = try Harness("gc-retention") { $0.retentionSeconds = 3600; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try ready(h, "r1")
        let path = h.config.artifactPath(id)
        #expect(try h.farm.collectGarbage().deleted.isEmpty, "a held artifact stays")
        try h.farm.release(reference: "r1")
        h.clock.advance(seconds: 3000)
        #expect(try h.farm.collectGarbage().deleted.isEmpty, "within retention it stays")

        // A caller coming back within retention gets it without new work.
        let back = try h.farm.prepare(h.request("r2", try h.artifact(id)!.source.path))
        #expect(back.artifact.id == id && back.artifact.state == .ready && !back.enqueued)
        try h.farm.release(reference: "r2")
        h.clock.advance(seconds: 3599)
        #expect(try h.farm.collectGarbage().deleted.isEmpty, "retention counts from the last release")
        h.clock.advance(seconds: 2)
        let report = try h.farm.collectGarbage()
        #expect(report.deleted == [id] && report.freedBytes == 1000)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try h.artifact(id) == nil)
        #expect(try h.store.events(after: 0, limit: 10).map(\.type) == [.ready, .deleted])
    }

    @Test("over the storage budget, unreferenced artifacts go least recently used first; held ones never")
    func budgetLRU() throws {
        let h = try Harness("gc-budget") { $0.retentionSeconds = 1_000_000; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let a = try ready(h, "a"); h.clock.advance(seconds: 10)
        let b = try ready(h, "b"); h.clock.advance(seconds: 10)
        let c = try ready(h, "c"); h.clock.advance(seconds: 10)
        let held = try ready(h, "held"); h.clock.advance(seconds: 10)
        try h.store.touch(artifactID: a, now: h.clock.nowMillis())   // a was read most recently
        for r in ["a", "b", "c"] { try h.farm.release(reference: r) }

        // 4000 bytes stored; a budget of 2000 needs two of the three unreferenced ones gone.
        let budgeted = Farm(config: { var c = h.config; c.storageBudgetBytes = 2000; return c }(), store: h.store,
                            clock: h.clock, presets: TestPresets.shared, launcher: h.launcher, prober: h.prober,
                            space: h.space, log: h.log)
        let report = try budgeted.collectGarbage()
        #expect(report.deleted == [b, c])
        #expect(try h.artifact(a)?.state == .ready)
        #expect(try h.artifact(held)?.state == .ready)

        // Free space below the floor: the rest of the unreferenced go, the held one stays.
        h.space.free = 0
        #expect(try h.farm.collectGarbage().deleted == [a])
        #expect(try h.artifact(held)?.state == .ready)
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(held)))
    }

    @Test("a lasting condition is logged when it begins, not on every collection pass: a file no row knows, held artifacts over the budget")
    func collectorLogsOnce() throws {
        let h = try Harness("gc-log") { $0.retentionSeconds = 1_000_000; $0.gcIntervalSeconds = 3600; $0.storageBudgetBytes = 10 }
        defer { h.cleanUp() }
        try h.farm.start()
        _ = try ready(h, "held")
        FileManager.default.createFile(atPath: h.config.artifactsDir + "/stray.bin", contents: Data("x".utf8))
        for _ in 0..<3 { _ = try h.farm.collectGarbage() }
        let lines = h.log.lines
        #expect(lines.filter { $0.contains("stray.bin") }.count == 1 && lines.filter { $0.contains("exceed the budget") }.count == 1, "\(lines)")
        // Gone, then back: said again.
        try FileManager.default.removeItem(atPath: h.config.artifactsDir + "/stray.bin")
        _ = try h.farm.collectGarbage()
        FileManager.default.createFile(atPath: h.config.artifactsDir + "/stray.bin", contents: Data("x".utf8))
        _ = try h.farm.collectGarbage()
        #expect(h.log.lines.filter { $0.contains("stray.bin") }.count == 2)
    }

    @Test("an original delivery's file is the user's source and is never deleted")
    func originalNeverDeleted() throws {
        let h = try Harness("gc-original") { $0.retentionSeconds = 0 }
        defer { h.cleanUp() }
        try h.farm.start()
        let source = try h.source()
        let b = try h.farm.prepare(h.request("o", source, .original))
        #expect(b.artifact.state == .ready && b.artifact.plan.deliveryFormat == .original && !b.enqueued)
        #expect(b.artifact.file == FileRecord(path: source, bytes: Harness.size(source), sha256: nil, owned: false))
        try h.farm.release(reference: "o")
        h.space.free = 0
        h.clock.advance(seconds: 10)
        let report = try h.farm.collectGarbage()
        #expect(report.deleted.isEmpty)
        #expect(FileManager.default.fileExists(atPath: source))
        // Its row goes (nothing holds it, nothing to delete): asked for again, it is answered anew.
        #expect(report.forgottenArtifacts == 1)
        #expect(try h.artifact(b.artifact.id) == nil)
        #expect(try h.farm.prepare(h.request("o", source, .original)).artifact.state == .ready)
    }

    @Test("a failed artifact nobody holds is forgotten after the retention time, a held one kept")
    func failedForgotten() throws {
        let h = try Harness("gc-failed", launcher: FakeLauncher([.exit(3, code: "source_corrupt"), .exit(3, code: "source_corrupt")])) {
            $0.retentionSeconds = 3600
        }
        defer { h.cleanUp() }
        try h.farm.start()
        let gone = try h.farm.prepare(h.request("f1", try h.source())).artifact.id
        let held = try h.farm.prepare(h.request("f2", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(gone)?.state == .failed && (try h.artifact(held)?.state) == .failed })
        try h.farm.release(reference: "f1")
        #expect(try h.farm.collectGarbage().forgottenArtifacts == 0, "within retention")
        h.clock.advance(seconds: 3601)
        #expect(try h.farm.collectGarbage().forgottenArtifacts == 1)
        #expect(try h.artifact(gone) == nil)
        #expect(try h.artifact(held)?.state == .failed)
    }

    @Test("an unheld artifact an operator retried or canceled long after its release is kept for the retention time from then (its errors are what they look at)")
    func retriedKeptForRetention() throws {
        let gate = Gate()
        let h = try Harness("gc-retried", launcher: FakeLauncher([.exit(3, code: "source_corrupt"), .exit(3, code: "source_corrupt"),
                                                                 .gated(gate, then: .succeed(bytes: 5))])) {
            $0.retentionSeconds = 3600
        }
        defer { gate.release(); h.cleanUp() }
        try h.farm.start()
        let id = try h.farm.prepare(h.request("r", try h.source())).artifact.id
        #expect(try eventually { try h.artifact(id)?.state == .failed })
        try h.farm.release(reference: "r")
        h.clock.advance(seconds: 7200)   // released two hours ago
        #expect(try h.farm.retry(artifactID: id))
        #expect(try eventually { try h.artifact(id)?.state == .failed && (try h.artifact(id)?.errors.count) == 2 })
        #expect(try h.farm.collectGarbage().forgottenArtifacts == 0, "failed again just now")
        let canceled = try h.farm.prepare(h.request("c", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 3 })
        try h.farm.release(reference: "c")   // the running job is canceled
        #expect(try eventually { try h.artifact(canceled)?.state == .canceled })
        #expect(try h.farm.collectGarbage().forgottenArtifacts == 0)
        h.clock.advance(seconds: 3601)
        #expect(try h.farm.collectGarbage().forgottenArtifacts == 2)
    }

    @Test("files in the artifact folder that no row knows are reported, not deleted")
    func unknownFiles() throws {
        let h = try Harness("gc-unknown") { $0.retentionSeconds = 0 }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try ready(h, "k")
        let stray = h.config.artifactsDir + "/stray.mp4"
        FileManager.default.createFile(atPath: stray, contents: Data("x".utf8))
        let report = try h.farm.collectGarbage()
        #expect(report.unknownFiles == [stray])
        #expect(report.deleted.isEmpty)
        #expect(FileManager.default.fileExists(atPath: stray))
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
        #expect(h.log.lines.contains { $0.contains("unknown file") && $0.contains("stray.mp4") })
    }

    @Test("an artifact file whose row was lost (an emptied or older kiln.db) is removed once as old as the retention, where the farm alone uses its store; an operator's files and a referenced artifact stay (it was left for good, uncounted by the storage budget)")
    func lostArtifactRows() throws {
        let h = try Harness("gc-lost-rows") { $0.retentionSeconds = 3600; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start(soleFarm: true)
        let held = try ready(h, "k")
        let lost = h.config.artifactsDir + "/a_0123456789abcdef01234567.mp4"
        let operatorFiles = ["stray.mp4", "a_restored_by_hand.mp4", "a_0123456789ABCDEF01234567.mp4", "a_0123456789abcdef0123456.mp4"]
            .map { h.config.artifactsDir + "/" + $0 }
        for file in [lost] + operatorFiles {
            FileManager.default.createFile(atPath: file, contents: Data(count: 1000))
            // Written "now" by the farm's clock.
            var times = [timeval(tv_sec: Int(h.clock.nowMillis() / 1000), tv_usec: 0), timeval(tv_sec: Int(h.clock.nowMillis() / 1000), tv_usec: 0)]
            #expect(utimes(file, &times) == 0)
        }
        let early = try h.farm.collectGarbage()
        #expect(early.removedLost.isEmpty && FileManager.default.fileExists(atPath: lost))
        #expect(h.log.lines.contains { $0.contains("row was lost") && $0.contains("a_0123456789abcdef01234567.mp4") }, "\(h.log.lines)")
        #expect(h.log.lines.contains { $0.contains("left alone") && $0.contains("stray.mp4") })
        h.clock.advance(seconds: 3601)
        let later = try h.farm.collectGarbage()
        #expect(later.removedLost == ["a_0123456789abcdef01234567.mp4"])
        #expect(later.freedBytes >= 1000)
        #expect(!FileManager.default.fileExists(atPath: lost))
        for file in operatorFiles { #expect(FileManager.default.fileExists(atPath: file), "\(file)") }
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(held)))
        #expect(try h.artifact(held)?.state == .ready)
    }

    @Test("where another farm may share the store, an artifact file no row names is left (its row may be on the way)")
    func lostArtifactRowsSharedStore() throws {
        let h = try Harness("gc-lost-shared") { $0.retentionSeconds = 0; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let lost = h.config.artifactsDir + "/a_0123456789abcdef01234567.mp4"
        FileManager.default.createFile(atPath: lost, contents: Data(count: 10))
        #expect(try h.farm.collectGarbage().removedLost.isEmpty)
        #expect(FileManager.default.fileExists(atPath: lost))
    }

    @Test("a crash between marking, unlinking and removing the row is finished at start-up")
    func crashBetweenFileAndRow() throws {
        let h = try Harness("gc-crash") { $0.retentionSeconds = 0; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let marked = try ready(h, "m")          // crash after the row was marked, file still there
        let unlinked = try ready(h, "u")        // crash after the file was removed, row still there
        for r in ["m", "u"] { try h.farm.release(reference: r) }
        h.farm.shutdown(grace: 0)
        let now = h.clock.nowMillis()
        #expect(try h.store.beginDeleting(artifactID: marked, now: now))
        #expect(try h.store.beginDeleting(artifactID: unlinked, now: now))
        try FileManager.default.removeItem(atPath: h.config.artifactPath(unlinked))
        // And an attempt that died with its temporaries (the child's and the runner's).
        let stale = [".a_dead.mp4.kiln-tmp-job9-attempt1", "..a_dead.mp4.kiln-tmp-job9-attempt1.kiln-tmp-77-5"]
        for name in stale { FileManager.default.createFile(atPath: h.config.artifactsDir + "/" + name, contents: Data(count: 3)) }

        h.restart()
        let recovery = try h.farm.start()
        #expect(Set(recovery.finishedDeletions) == [marked, unlinked])
        #expect(Set(recovery.removedTemporaries) == Set(stale))
        #expect(try h.artifact(marked) == nil && h.artifact(unlinked) == nil)
        #expect(!FileManager.default.fileExists(atPath: h.config.artifactPath(marked)))
        #expect(h.tempFiles().isEmpty)
        let deleted = try h.store.events(after: 0, limit: 20).filter { $0.type == .deleted }.map(\.artifactID)
        #expect(Set(deleted) == [marked, unlinked])
    }

    @Test("a job left running by a daemon that died is rescued at start-up once its lease lapsed, and finished")
    func deadDaemonJobFinishesAfterRestart() throws {
        let h = try Harness("dead-daemon") { $0.leaseSeconds = 60 }
        defer { h.cleanUp() }
        let id = try h.farm.prepare(h.request("dd", try h.source())).artifact.id
        // The dead daemon had claimed it and its child had begun writing.
        let now = h.clock.nowMillis()
        let claimed = try h.store.claim(kind: .transcode, limit: 1, owner: "dead:1:x#1", leaseUntil: now + 60_000, now: now)
        #expect(claimed.map(\.job.artifactID) == [id])
        let folder = h.config.artifactsDir
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let leftover = folder + "/..\(id).mp4.kiln-tmp-job1-attempt1.kiln-tmp-999-1"
        FileManager.default.createFile(atPath: leftover, contents: Data(count: 100))

        h.clock.advance(seconds: 61)
        let recovery = try h.farm.start()
        #expect(recovery.rescuedJobs == 1)
        #expect(recovery.removedTemporaries.count == 1)
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        let a = try #require(try h.artifact(id))
        #expect(a.errors.map(\.code) == ["lease_expired"])
        #expect(a.job?.attempt == 2)
        #expect(h.fake.launches.count == 1)
        #expect(h.tempFiles().isEmpty)
        #expect(try h.store.queueSnapshot(recentFailures: 0, queuedLimit: 0).artifactsByState["ready"] == 1)
    }

    @Test("a lease still held by a dead daemon at start-up is rescued as soon as it lapses")
    func unexpiredLeaseAtStartUp() throws {
        let h = try Harness("dead-daemon-2") { $0.leaseSeconds = 60; $0.rescueIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        let id = try h.farm.prepare(h.request("dd2", try h.source())).artifact.id
        let now = h.clock.nowMillis()
        _ = try h.store.claim(kind: .transcode, limit: 1, owner: "dead:2:y#1", leaseUntil: now + 60_000, now: now)
        #expect(try h.farm.start().rescuedJobs == 0)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(h.fake.launches.isEmpty)
        h.clock.advance(seconds: 61)   // no hour-long rescue interval to wait for
        #expect(try eventually { try h.artifact(id)?.state == .ready })
    }

    @Test("a ready artifact whose file went missing or was cut short is prepared again (on a request, and at start-up), not answered ready with a link to nothing; an unheld one is left to collection")
    func lostFilesArePreparedAgain() throws {
        let h = try Harness("lost-files") { $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let gone = try ready(h, "gone"), cut = try ready(h, "cut"), unheld = try ready(h, "unheld")
        try h.farm.release(reference: "unheld")
        // Deleted by hand while the daemon runs: the next request queues it again.
        try FileManager.default.removeItem(atPath: h.config.artifactPath(gone))
        let stored = try h.artifact(gone)
        let again = try h.farm.prepare(h.request("gone", try #require(stored).source.path))
        #expect(again.artifact.id == gone && again.artifact.state == .pending && again.enqueued)
        #expect(try eventually { try h.artifact(gone)?.state == .ready })
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(gone)))
        #expect(h.log.lines.contains { $0.contains(gone) && $0.contains("preparing it again") }, "\(h.log.lines)")
        // Cut short, or gone, while the daemon was stopped: found at start-up.
        h.farm.shutdown(grace: 0)
        let handle = try #require(FileHandle(forWritingAtPath: h.config.artifactPath(cut)))
        try handle.truncate(atOffset: 10)
        try handle.close()
        try FileManager.default.removeItem(atPath: h.config.artifactPath(unheld))
        h.restart()
        let recovery = try h.farm.start()
        #expect(recovery.requeuedLost == [cut])
        #expect(try eventually { try h.artifact(cut)?.state == .ready })
        #expect(try h.artifact(cut)?.file?.bytes == Int64(FileIO.size(atPath: h.config.artifactPath(cut)) ?? -1))
        #expect(try h.artifact(unheld)?.state == .ready, "an artifact nobody holds is not made again; collection takes it")
        #expect(h.fake.launches.count == 5)
    }

    @Test("an artifact folder removed while the daemon runs is made again for the next job, which succeeds at its first attempt")
    func artifactFolderMadeAgain() throws {
        let h = try Harness("folder-gone") { $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        _ = try ready(h, "before")
        try FileManager.default.removeItem(atPath: h.config.artifactsDir)
        let id = try ready(h, "after")
        let a = try #require(try h.artifact(id))
        #expect(a.errors.isEmpty && a.job?.attempt == 1, "\(a.errors)")
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
    }

    @Test("a deletion that failed (the file could not be removed then) is finished by a later collection pass, not only at the next start-up")
    func failedDeletionRetried() throws {
        let h = try Harness("gc-retry") { $0.retentionSeconds = 0; $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try ready(h, "r")
        try h.farm.release(reference: "r")
        // unlink(2) cannot remove a folder: a file that cannot go, as on a read-only mount.
        let path = h.config.artifactPath(id)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path + "/in-the-way", withIntermediateDirectories: true)
        #expect(try h.farm.collectGarbage().deleted.isEmpty)
        #expect(try h.artifact(id)?.state == .deleting)
        #expect(h.log.lines.contains { $0.contains("cannot delete \(path)") }, "\(h.log.lines)")
        try FileManager.default.removeItem(atPath: path)
        #expect(try h.farm.collectGarbage().deleted == [id])
        #expect(try h.artifact(id) == nil)
        #expect(try h.store.storedBytes().total == 0)
    }

    @Test("an output moved into place by an attempt whose daemon died before recording it is removed at start-up and made again; a file no row names is left alone")
    func unrecordedOutput() throws {
        let h = try Harness("unrecorded") { $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        let id = try h.farm.prepare(h.request("u", try h.source())).artifact.id
        try FileManager.default.createDirectory(atPath: h.config.artifactsDir, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: h.config.artifactPath(id), contents: Data(count: 77))
        let stranger = h.config.artifactsDir + "/a_restored_by_hand.mp4"
        FileManager.default.createFile(atPath: stranger, contents: Data(count: 5))
        let recovery = try h.farm.start(soleFarm: true)
        #expect(recovery.removedTemporaries == ["\(id).mp4"])
        #expect(try eventually { try h.artifact(id)?.state == .ready })
        #expect(try h.artifact(id)?.file?.bytes != 77)
        #expect(FileManager.default.fileExists(atPath: stranger))
    }

    @Test("a finished file of a canceled artifact that no row names (a deletion that failed, the artifact then asked for again and canceled) is removed by the next collection pass where the farm alone uses its store, not left until a restart")
    func unrecordedOutputLater() throws {
        let h = try Harness("unrecorded-later", launcher: FakeLauncher([.hang])) { $0.gcIntervalSeconds = 3600 }
        defer { h.cleanUp() }
        try h.farm.start(soleFarm: true)
        let id = try h.farm.prepare(h.request("c", try h.source())).artifact.id
        #expect(try eventually { h.fake.launches.count == 1 })
        #expect(try h.farm.cancel(artifactID: id))
        FileManager.default.createFile(atPath: h.config.artifactPath(id), contents: Data(count: 77))
        let stranger = h.config.artifactsDir + "/a_restored_by_hand.mp4"
        FileManager.default.createFile(atPath: stranger, contents: Data(count: 5))
        #expect(try h.farm.collectGarbage().removedUnrecorded == ["\(id).mp4"])
        #expect(!FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
        #expect(FileManager.default.fileExists(atPath: stranger))
        #expect(h.log.lines.contains { $0.contains("removed \(id).mp4") }, "\(h.log.lines)")
    }

    @Test("a reference that comes back during collection wins: the artifact is not deleted")
    func referenceComesBack() throws {
        let h = try Harness("gc-back") { $0.retentionSeconds = 0 }
        defer { h.cleanUp() }
        try h.farm.start()
        let id = try ready(h, "b1")
        try h.farm.release(reference: "b1")
        let candidates = try h.store.unreferencedArtifacts(limit: 10)
        #expect(candidates.map(\.id) == [id])
        _ = try h.farm.prepare(h.request("b2", try h.artifact(id)!.source.path))
        #expect(try !h.store.beginDeleting(artifactID: id, now: h.clock.nowMillis()))
        #expect(try h.farm.collectGarbage().deleted.isEmpty)
        #expect(FileManager.default.fileExists(atPath: h.config.artifactPath(id)))
    }
}

extension Harness {
    static func size(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value ?? -1
    }
}

final class LockedArray<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [T] = []
    func append(_ v: T) { lock.lock(); items.append(v); lock.unlock() }
    var values: [T] { lock.lock(); defer { lock.unlock() }; return items }
}
