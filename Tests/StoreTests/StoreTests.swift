import Dispatch
import Foundation
import KilnCore
import KilnTestSupport
import Store
import Testing

@Suite("SQLite store")
struct StoreTests {

    // MARK: Intake

    @Test("a failure says whether asking again later may succeed: the source's and the request's faults, a cancel and a bug do not; I/O, space, a crash, a stall, a lost lease may")
    func retryableFailures() {
        func retryable(_ code: String) -> Bool { AttemptError(attempt: 1, code: code, stage: "run", message: "m", at: 0).retryable }
        for code in ["source_corrupt", "source_unsupported", "invalid_caps", "quality_unavailable", "canceled", "internal_error", "output_missing"] {
            #expect(!retryable(code), "\(code)")
        }
        for code in ["io_error", "disk_full", "resource_limit", "verify_failed", "crashed", "stalled", "timeout", "lease_expired", "interrupted", "launch_failed"] {
            #expect(retryable(code), "\(code)")
        }
    }

    @Test("a first request creates a pending artifact with one queued job")
    func bindCreates() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        #expect(b.enqueued)
        #expect(b.movedFrom == nil)
        #expect(b.artifact.id == "a_" + Fixture.key("movie@5mbps").prefix(24))
        #expect(b.artifact.state == .pending)
        #expect(b.artifact.references == ["dl-1"])
        #expect(b.artifact.job?.state == .queued)
        #expect(b.artifact.job?.attempt == 0)
        #expect(b.artifact.job?.maxAttempts == 4)
        #expect(b.reference.revision == 1)
        #expect(try t.store.reference("dl-1")?.artifactID == b.artifact.id)
        #expect(try t.store.artifact(id: b.artifact.id) == b.artifact)
    }

    @Test("the same request twice answers with the same artifact and makes no second job")
    func sameRequestTwice() throws {
        let t = try TempStore()
        let first = try t.store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        let second = try t.store.bind("dl-1", to: "movie@5mbps", now: 2_000)
        #expect(!second.enqueued)
        #expect(second.artifact.id == first.artifact.id)
        #expect(second.artifact.job?.id == first.artifact.job?.id)
        #expect(second.reference.revision == 1)
        let snapshot = try t.store.queueSnapshot(recentFailures: 10, queuedLimit: 10)
        #expect(snapshot.jobsByState["queued"] == 1)
        #expect(snapshot.artifactsByState["pending"] == 1)
    }

    @Test("another reference for an equal output shares the artifact and its job")
    func equalOutputsShare() throws {
        let t = try TempStore()
        let a = try t.store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        let b = try t.store.bind("dl-2", to: "movie@5mbps", now: 1_001)
        #expect(!b.enqueued)
        #expect(b.artifact.id == a.artifact.id)
        #expect(b.artifact.references == ["dl-1", "dl-2"])
    }

    @Test("200 threads binding the same key at once leave one artifact and one job")
    func dedupeStorm() throws {
        let t = try TempStore()
        let store = t.store
        let results = Mutex200()
        Concurrently.run(200) { i in
            do {
                let b = try store.bind("dl-\(i)", to: "storm", now: 1_000 + Int64(i))
                results.append(b)
            } catch {
                results.fail("\(error)")
            }
        }
        #expect(results.failures.isEmpty)
        let bindings = results.bindings
        #expect(bindings.count == 200)
        #expect(Set(bindings.map(\.artifact.id)).count == 1)
        #expect(bindings.filter(\.enqueued).count == 1)
        let snapshot = try store.queueSnapshot(recentFailures: 0, queuedLimit: 10)
        #expect(snapshot.jobsByState["queued"] == 1)
        #expect(snapshot.artifactsByState.values.reduce(0, +) == 1)
        #expect(try store.artifact(id: bindings[0].artifact.id)?.references.count == 200)
    }

    @Test("200 concurrent identical requests (same reference) make one job and one revision")
    func dedupeStormSameReference() throws {
        let t = try TempStore()
        let store = t.store
        let results = Mutex200()
        Concurrently.run(200) { _ in
            do { results.append(try store.bind("dl-1", to: "storm", now: 1_000)) } catch { results.fail("\(error)") }
        }
        #expect(results.failures.isEmpty)
        #expect(results.bindings.filter(\.enqueued).count == 1)
        #expect(try store.reference("dl-1")?.revision == 1)
        #expect(try store.queueSnapshot(recentFailures: 0, queuedLimit: 10).jobsByState["queued"] == 1)
    }

    @Test("writers that meet share commits: 300 concurrent binds, claims and completions each land exactly once, and survive a reopen")
    func groupCommit() throws {
        let t = try TempStore()
        let store = t.store
        let results = Mutex200()
        Concurrently.run(300) { i in
            do {
                let b = try store.bind("g-\(i)", to: "target-\(i % 100)", now: 1_000)
                results.append(b)
                for c in try store.claim(kind: .transcode, limit: 1, owner: "w\(i)", leaseUntil: 99_000, now: 2_000) {
                    _ = try store.complete(jobID: c.job.id, owner: "w\(i)",
                                           file: FileRecord(path: "/a/\(c.job.artifactID)", bytes: 1, sha256: nil, owned: true), now: 3_000)
                }
            } catch { results.fail("\(error)") }
        }
        #expect(results.failures.isEmpty, "\(results.failures.prefix(3))")
        #expect(results.bindings.filter(\.enqueued).count == 100, "one job per distinct target")
        let reopened = try SQLiteStore(path: store.path)
        let snap = try reopened.queueSnapshot(recentFailures: 0, queuedLimit: 0)
        #expect(snap.artifactsByState["ready"] == 100)
        #expect(try reopened.events(after: 0, limit: 1000).filter { $0.type == .ready }.count == 100, "one ready event each")
        for i in [0, 150, 299] { #expect(try reopened.reference("g-\(i)") != nil) }
    }

    @Test("a reference asking for a new target moves; the old artifact's unfinished job is canceled with an event")
    func referenceMoves() throws {
        let t = try TempStore()
        let old = try t.store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        let moved = try t.store.bind(request: Fixture.request("dl-1", quality: .mbps2), plan: Fixture.plan("movie@2mbps"),
                                     source: Fixture.source(), estimatedBytes: 1, maxAttempts: 4, originalFile: nil, now: 2_000)
        #expect(moved.movedFrom == old.artifact.id)
        #expect(moved.enqueued)
        #expect(moved.reference.revision == 2)
        #expect(moved.reference.request.quality == .mbps2)
        #expect(moved.reference.createdAt == 1_000)
        #expect(moved.reference.updatedAt == 2_000)
        let left = try #require(try t.store.artifact(id: old.artifact.id))
        #expect(left.state == .canceled)
        #expect(left.references.isEmpty)
        #expect(left.job?.state == .canceled)
        #expect(left.unreferencedSince == 2_000)
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.count == 1)
        #expect(events.first?.type == .canceled)
        #expect(events.first?.artifactID == old.artifact.id)
        #expect(events.first?.references == [], "dl-1 moved and lives on: the cancel names nobody")
        #expect(events.first?.status == "canceled")
        #expect(events.first?.deliveryFormat == .transcode)
    }

    @Test("a reference moving off a ready artifact leaves it ready, retention starting")
    func referenceMovesOffReady() throws {
        let t = try TempStore()
        let old = try t.store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 1_100))
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("a"), now: 1_500))
        try t.store.bind("dl-1", to: "movie@2mbps", now: 2_000)
        let left = try #require(try t.store.artifact(id: old.artifact.id))
        #expect(left.state == .ready)
        #expect(left.unreferencedSince == 2_000)
        #expect(try t.store.unreferencedArtifacts(limit: 10).map(\.id) == [old.artifact.id])
    }

    @Test("a failed artifact asked for again is queued with fresh attempts, earlier errors kept")
    func failedRequeued() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "movie@5mbps", maxAttempts: 1, now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 1_100))
        #expect(try t.store.fail(jobID: job.job.id, owner: "runner-1", error: Fixture.error("source_corrupt", at: 1_200),
                                 retryAt: nil, now: 1_200))
        #expect(try t.store.artifact(id: b.artifact.id)?.state == .failed)
        let again = try t.store.bind("dl-1", to: "movie@5mbps", maxAttempts: 3, now: 2_000)
        #expect(again.enqueued)
        #expect(again.artifact.state == .pending)
        #expect(again.artifact.job?.state == .queued)
        #expect(again.artifact.job?.attempt == 0)
        #expect(again.artifact.job?.maxAttempts == 3)
        #expect(again.artifact.job?.queuedAt == 2_000)
        #expect(again.artifact.errors.map(\.code) == ["source_corrupt"])
        let reclaimed = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 2_100))
        #expect(reclaimed.job.attempt == 1)
    }

    @Test("a daemon stopping under a job does not spend the job's attempts, unless it stops under it as many times in a row as it has attempts; a failed attempt between counts as usual")
    func interruptedAttemptsGivenBack() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "movie@5mbps", maxAttempts: 2, now: 1_000)
        // A failure, then the daemon stops under the second attempt: it is tried again as the second.
        var job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 1_100))
        #expect(try t.store.fail(jobID: job.job.id, owner: "runner-1", error: Fixture.error(at: 1_200), retryAt: 1_300, now: 1_200))
        job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 1_300))
        #expect(job.job.attempt == 2)
        #expect(try t.store.rescueInterruptedJobs(now: 1_400) == 1)
        #expect(try t.store.artifact(id: b.artifact.id)?.job?.state == .retrying)
        job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 1_500))
        #expect(job.job.attempt == 2)
        // The second stop in a row under the same attempt, with two attempts: failed.
        #expect(try t.store.rescueInterruptedJobs(now: 1_600) == 1)
        let failed = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(failed.state == .failed)
        #expect(failed.errors.map(\.code) == ["io_error", "interrupted", "interrupted"])
        // Asked for afresh: earlier stops are not counted against the new attempts.
        try t.store.bind("dl-1", to: "movie@5mbps", maxAttempts: 2, now: 2_000)
        job = try #require(try t.store.claimOne(leaseUntil: 60_000, now: 2_100))
        #expect(try t.store.rescueInterruptedJobs(now: 2_200) == 1)
        #expect(try t.store.artifact(id: b.artifact.id)?.job?.state == .retrying)
    }

    @Test("an original delivery is ready at once with the source as its file, without job or event")
    func originalDelivery() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "movie@original", format: .original, now: 1_000)
        #expect(!b.enqueued)
        #expect(b.artifact.state == .ready)
        #expect(b.artifact.job == nil)
        #expect(b.artifact.file?.path == "/media/movie.mkv")
        #expect(b.artifact.file?.owned == false)
        #expect(b.artifact.readyAt == 1_000)
        #expect(try t.store.events(after: 0, limit: 10).isEmpty)
        #expect(try t.store.claim(kind: .remux, limit: 10, owner: "r", leaseUntil: 9_000, now: 1_000).isEmpty)
        #expect(try t.store.ownedFilePaths().isEmpty)
        #expect(try t.store.release(reference: "dl-1", now: 2_000))
        #expect(try t.store.unreferencedArtifacts(limit: 10).isEmpty)
        #expect(try t.store.storedBytes() == (0, 0))
    }

    @Test("an interactive request raises a background job waiting for the same artifact")
    func priorityRaised() throws {
        let t = try TempStore()
        try t.store.bind("sync-1", to: "a", priority: .background, now: 1_000)
        try t.store.bind("sync-2", to: "b", priority: .background, now: 1_001)
        try t.store.bind("phone", to: "b", priority: .interactive, now: 1_002)
        let first = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_003))
        #expect(first.plan.artifactKey == Fixture.key("b"))
        #expect(first.job.priority == .interactive)
    }

    @Test("an artifact delivered as something else than planned (a re-encoded remux), collected and asked for again, is its plan's again everywhere: job kind and events")
    func deliveredThenRemade() throws {
        let t = try TempStore()
        let first = try t.store.bind("r", to: "x", format: .remux, now: 1_000)
        let job = try #require(try t.store.claimOne(.remux, leaseUntil: 9_000, now: 1_001))
        var delivered = Fixture.plan("x", format: .transcode)
        delivered.reasons = ["video_reencoded"]
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: FileRecord(path: "/a/x.mp4", bytes: 5, sha256: "s", owned: true),
                                     deliveredPlan: delivered, now: 1_100))
        #expect(try t.store.artifact(id: first.artifact.id)?.plan.deliveryFormat == .transcode)
        #expect(try t.store.release(reference: "r", now: 1_200))
        #expect(try t.store.beginDeleting(artifactID: first.artifact.id, now: 1_300))
        _ = try t.store.bind("r", to: "x", format: .remux, now: 1_400)   // asked again while it was being deleted
        #expect(try t.store.claimOne(.remux, leaseUntil: 9_000, now: 1_500) != nil, "a remux job, in the remux slot")
        #expect(try t.store.release(reference: "r", now: 1_600))
        #expect(try t.store.events(after: 0, limit: 10).last?.deliveryFormat == .remux, "events say what it is now")
    }

    @Test("a background job raised to interactive joins that line at the back: it does not pass people who asked before")
    func raisedJoinsAtTheBack() throws {
        let t = try TempStore()
        try t.store.bind("sync", to: "old", priority: .background, now: 1_000)
        try t.store.bind("phone-1", to: "asked", priority: .interactive, now: 2_000)
        try t.store.bind("phone-2", to: "old", priority: .interactive, now: 3_000)
        let order = [try t.store.claimOne(leaseUntil: 9_000, now: 3_001), try t.store.claimOne(leaseUntil: 9_000, now: 3_002)]
        #expect(order.map { $0?.plan.artifactKey } == [Fixture.key("asked"), Fixture.key("old")])
        // Its place in line moved; its work was asked for at 1,000 all the same (the queue-wait metric).
        #expect(order[1]?.job.queuedAt == 3_000 && order[1]?.job.askedAt == 1_000)
    }

    @Test("upgrading to schema 6: jobs already queued were asked for when they were queued")
    func askedAtUpgrade() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        _ = try sqlite3CLI(t.path, "ALTER TABLE jobs DROP COLUMN asked_at; PRAGMA user_version = 5;")
        t.store = try t.reopen()
        let job = try #require(try t.store.artifact(id: b.artifact.id)?.job)
        #expect(job.askedAt == 1_000 && job.queuedAt == 1_000)
    }

    @Test("release: the last reference gone cancels an unfinished job and names the released reference")
    func releaseCancels() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        try t.store.bind("dl-2", to: "x", now: 1_001)
        #expect(try t.store.release(reference: "dl-2", now: 1_500))
        #expect(try t.store.artifact(id: b.artifact.id)?.state == .pending)
        #expect(try t.store.events(after: 0, limit: 10).isEmpty)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_600))
        #expect(try t.store.release(reference: "dl-1", now: 2_000))
        #expect(try !t.store.release(reference: "dl-1", now: 2_001))
        #expect(try t.store.reference("dl-1") == nil)
        let a = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(a.state == .canceled)
        #expect(a.job?.state == .canceled)
        #expect(a.unreferencedSince == 2_000)
        // The runner hears of it at its next heartbeat and cannot complete.
        #expect(try !t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 10_000, progress: nil, now: 2_100))
        #expect(try !t.store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("x"), now: 2_200))
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.map(\.type) == [.canceled])
        #expect(events.first?.references == ["dl-1"])
    }

    @Test("release of a ready artifact's last reference starts its retention; a new request stops it")
    func releaseReady() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_001))
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("x", bytes: 500), now: 1_100))
        #expect(try t.store.storedBytes() == (500, 0))
        #expect(try t.store.release(reference: "dl-1", now: 3_000))
        #expect(try t.store.artifact(id: b.artifact.id)?.unreferencedSince == 3_000)
        #expect(try t.store.storedBytes() == (500, 500))
        let back = try t.store.bind("dl-9", to: "x", now: 4_000)
        #expect(!back.enqueued)
        #expect(back.artifact.state == .ready)
        #expect(back.artifact.unreferencedSince == nil)
        #expect(back.artifact.lastUsedAt == 4_000)
        #expect(try t.store.storedBytes() == (500, 0))
    }

    // MARK: Scheduling

    @Test("claims go interactive first, first queued first within a priority, and by kind")
    func claimOrder() throws {
        let t = try TempStore()
        try t.store.bind("bg-1", to: "bg-1", priority: .background, now: 1_000)
        try t.store.bind("ia-1", to: "ia-1", now: 1_001)
        try t.store.bind("bg-2", to: "bg-2", priority: .background, now: 1_002)
        try t.store.bind("ia-2", to: "ia-2", now: 1_003)
        try t.store.bind("rx-1", to: "rx-1", format: .remux, now: 900)
        let claimed = try t.store.claim(kind: .transcode, limit: 3, owner: "o", leaseUntil: 9_000, now: 2_000)
        #expect(claimed.map(\.plan.artifactKey) == ["ia-1", "ia-2", "bg-1"].map(Fixture.key))
        #expect(claimed.allSatisfy { $0.job.state == .running && $0.job.attempt == 1 && $0.job.leaseOwner == "o" })
        #expect(claimed.allSatisfy { $0.job.leaseExpiresAt == 9_000 && $0.job.startedAt == 2_000 })
        #expect(claimed.first?.source == Fixture.source())
        #expect(claimed.first?.estimatedBytes == 40_000_000)
        let rest = try t.store.claim(kind: .transcode, limit: 10, owner: "o", leaseUntil: 9_000, now: 2_000)
        #expect(rest.map(\.plan.artifactKey) == [Fixture.key("bg-2")])
        #expect(try t.store.claim(kind: .transcode, limit: 10, owner: "o", leaseUntil: 9_000, now: 2_000).isEmpty)
        let remux = try t.store.claim(kind: .remux, limit: 10, owner: "o", leaseUntil: 9_000, now: 2_000)
        #expect(remux.map(\.plan.artifactKey) == [Fixture.key("rx-1")])
        #expect(remux.first?.job.kind == .remux)
        #expect(try t.store.claim(kind: .transcode, limit: 0, owner: "o", leaseUntil: 9_000, now: 2_000).isEmpty)
    }

    @Test("a retrying job is claimed only once its time has come")
    func retryingWhenDue() throws {
        let t = try TempStore()
        try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_000))
        #expect(try t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 9_000,
                                      progress: JobProgress(encodedSeconds: 30, durationSeconds: 60, speed: 2), now: 1_400))
        #expect(try t.store.fail(jobID: job.job.id, owner: "runner-1", error: Fixture.error(at: 1_500), retryAt: 5_000, now: 1_500))
        let waiting = try #require(try t.store.artifact(id: job.job.artifactID))
        #expect(waiting.job?.progress == nil)
        #expect(waiting.state == .pending)
        #expect(waiting.job?.state == .retrying)
        #expect(waiting.job?.runAfter == 5_000)
        #expect(waiting.job?.leaseOwner == nil)
        #expect(try t.store.claimOne(leaseUntil: 9_000, now: 4_999) == nil)
        let again = try #require(try t.store.claimOne(owner: "runner-2", leaseUntil: 9_000, now: 5_000))
        #expect(again.job.attempt == 2)
        #expect(try t.store.events(after: 0, limit: 10).isEmpty)
    }

    @Test("heartbeats renew the lease and store progress")
    func heartbeat() throws {
        let t = try TempStore()
        try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 2_000, now: 1_000))
        let progress = JobProgress(encodedSeconds: 30, durationSeconds: 60, speed: 2)
        #expect(try t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 3_000, progress: progress, now: 1_500))
        #expect(try t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 4_000, progress: nil, now: 1_600))
        let stored = try #require(try t.store.artifact(id: job.job.artifactID)?.job)
        #expect(stored.progress == progress)
        #expect(stored.leaseExpiresAt == 4_000)
        #expect(try t.store.rescueExpiredLeases(now: 3_500) == 0)
        #expect(try !t.store.heartbeat(jobID: job.job.id, owner: "someone-else", leaseUntil: 9_000, progress: nil, now: 1_700))
    }

    @Test("after a rescue the old owner's heartbeat, complete and fail change nothing")
    func leaseFencing() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(owner: "old", leaseUntil: 2_000, now: 1_000))
        #expect(try t.store.rescueExpiredLeases(now: 2_000) == 0)  // expires strictly after its time
        #expect(try t.store.rescueExpiredLeases(now: 2_001) == 1)
        let rescued = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(rescued.job?.state == .retrying)
        #expect(rescued.job?.runAfter == 2_001)
        #expect(rescued.errors.map(\.code) == ["lease_expired"])
        #expect(rescued.errors.first?.attempt == 1)

        #expect(try !t.store.heartbeat(jobID: job.job.id, owner: "old", leaseUntil: 9_000, progress: nil, now: 2_100))
        #expect(try !t.store.complete(jobID: job.job.id, owner: "old", file: Fixture.file("x"), now: 2_100))
        #expect(try !t.store.fail(jobID: job.job.id, owner: "old", error: Fixture.error(at: 2_100), retryAt: nil, now: 2_100))
        #expect(try !t.store.requeue(jobID: job.job.id, owner: "old", now: 2_100))
        #expect(try t.store.artifact(id: b.artifact.id) == rescued)

        let next = try #require(try t.store.claimOne(owner: "new", leaseUntil: 9_000, now: 2_200))
        #expect(next.job.attempt == 2)
        #expect(try !t.store.complete(jobID: job.job.id, owner: "old", file: Fixture.file("x"), now: 2_300))
        #expect(try t.store.complete(jobID: next.job.id, owner: "new", file: Fixture.file("x"), now: 2_300))
        #expect(try t.store.artifact(id: b.artifact.id)?.state == .ready)
    }

    @Test("a lease that expires on the last attempt fails the artifact with an event")
    func rescueLastAttemptFails() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", maxAttempts: 1, now: 1_000)
        _ = try #require(try t.store.claimOne(leaseUntil: 2_000, now: 1_000))
        #expect(try t.store.rescueExpiredLeases(now: 5_000) == 1)
        let a = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(a.state == .failed)
        #expect(a.job?.state == .failed)
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.map(\.type) == [.failed])
        #expect(events.first?.error?.code == "lease_expired")
        #expect(events.first?.references == ["dl-1"])
    }

    @Test("complete makes the artifact ready with its file and announces it with its references")
    func complete() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        try t.store.bind("dl-2", to: "x", now: 1_001)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_002))
        let file = Fixture.file("x", bytes: 12_345)
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: file, now: 3_000))
        let a = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(a.state == .ready)
        #expect(a.file == file)
        #expect(a.readyAt == 3_000)
        #expect(a.job?.state == .succeeded)
        #expect(a.job?.finishedAt == 3_000)
        #expect(a.job?.leaseOwner == nil)
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.count == 1)
        #expect(events[0].type == .ready)
        #expect(events[0].status == "ready")
        #expect(events[0].references == ["dl-1", "dl-2"])
        #expect(events[0].at == 3_000)
        #expect(events[0].error == nil)
        #expect(try t.store.ownedFilePaths() == [file.path])
        #expect(try !t.store.complete(jobID: job.job.id, owner: "runner-1", file: file, now: 3_001))
        #expect(try t.store.events(after: 0, limit: 10).count == 1)
    }

    @Test("fail without a retry time fails the artifact; every attempt's error is kept")
    func failKeepsErrors() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        var now: Int64 = 1_000
        for attempt in 1...3 {
            let job = try #require(try t.store.claimOne(leaseUntil: now + 9_000, now: now))
            #expect(job.job.attempt == attempt)
            var error = Fixture.error(attempt == 3 ? "source_corrupt" : "io_error", at: now + 10)
            error.signal = attempt == 2 ? 9 : nil
            #expect(try t.store.fail(jobID: job.job.id, owner: "runner-1", error: error,
                                     retryAt: attempt == 3 ? nil : now + 100, now: now + 10))
            now += 100
        }
        let a = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(a.state == .failed)
        #expect(a.job?.state == .failed)
        #expect(a.errors.map(\.attempt) == [1, 2, 3])
        #expect(a.errors.map(\.code) == ["io_error", "io_error", "source_corrupt"])
        #expect(a.errors[1].signal == 9)
        #expect(a.errors[0].logTail == ["last line"])
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.map(\.type) == [.failed])
        #expect(events[0].error?.code == "source_corrupt")
        #expect(events[0].error?.attempt == 3)
        #expect(events[0].status == "failed")
        let snapshot = try t.store.queueSnapshot(recentFailures: 5, queuedLimit: 5)
        #expect(snapshot.recentFailures.map(\.id) == [b.artifact.id])
        #expect(snapshot.recentFailures.first?.errors.count == 3)
    }

    @Test("a shutdown requeue gives the attempt back and keeps the job's place in line")
    func requeueGivesAttemptBack() throws {
        let t = try TempStore()
        try t.store.bind("first", to: "first", now: 1_000)
        try t.store.bind("second", to: "second", now: 1_001)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_002))
        #expect(job.plan.artifactKey == Fixture.key("first"))
        let progress = JobProgress(encodedSeconds: 30, durationSeconds: 60, speed: 2)
        #expect(try t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 9_000, progress: progress, now: 1_400))
        #expect(try t.store.requeue(jobID: job.job.id, owner: "runner-1", now: 1_500))
        let back = try #require(try t.store.artifact(id: job.job.artifactID)?.job)
        #expect(back.state == .queued)
        #expect(back.attempt == 0)
        #expect(back.leaseOwner == nil)
        #expect(back.progress == nil, "the next attempt starts from nothing: no stale percentage while it waits")
        #expect(try !t.store.requeue(jobID: job.job.id, owner: "runner-1", now: 1_500))
        let again = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 2_000))
        #expect(again.job.id == job.job.id)
        #expect(again.job.attempt == 1)
    }

    @Test("a waiting reason is shown for a claimable job and cleared by a claim")
    func waitingReason() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let jobID = try #require(b.artifact.job?.id)
        try t.store.setWaiting(jobID: jobID, reason: "waiting_for_disk")
        #expect(try t.store.queueSnapshot(recentFailures: 0, queuedLimit: 10).queued.first?.waitingReason == "waiting_for_disk")
        try t.store.setWaiting(jobID: jobID, reason: nil)
        #expect(try t.store.artifact(id: b.artifact.id)?.job?.waitingReason == nil)
        try t.store.setWaiting(jobID: jobID, reason: "waiting_for_disk")
        let claimed = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_100))
        #expect(claimed.job.waitingReason == nil)
    }

    @Test("an operator cancels an unfinished artifact and retries it with fresh attempts")
    func operatorCancelAndRetry() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_000))
        #expect(try !t.store.retry(artifactID: b.artifact.id, maxAttempts: 4, now: 1_100))  // not failed
        #expect(try t.store.cancel(artifactID: b.artifact.id, now: 1_200))
        #expect(try !t.store.cancel(artifactID: b.artifact.id, now: 1_300))
        #expect(try !t.store.cancel(artifactID: "a_nothing", now: 1_300))
        let canceled = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(canceled.state == .canceled)
        #expect(canceled.references == ["dl-1"])
        #expect(try !t.store.heartbeat(jobID: job.job.id, owner: "runner-1", leaseUntil: 9_000, progress: nil, now: 1_250))
        #expect(try t.store.retry(artifactID: b.artifact.id, maxAttempts: 2, now: 1_400))
        let retried = try #require(try t.store.artifact(id: b.artifact.id))
        #expect(retried.state == .pending)
        #expect(retried.job?.state == .queued)
        #expect(retried.job?.attempt == 0)
        #expect(retried.job?.maxAttempts == 2)
        let again = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_500))
        #expect(again.job.attempt == 1)
        let events = try t.store.events(after: 0, limit: 10)
        #expect(events.map(\.type) == [.canceled])
        #expect(events[0].references == ["dl-1"])
        // A ready artifact cannot be canceled.
        #expect(try t.store.complete(jobID: again.job.id, owner: "runner-1", file: Fixture.file("x"), now: 1_600))
        #expect(try !t.store.cancel(artifactID: b.artifact.id, now: 1_700))
    }

    // MARK: Garbage collection

    @Test("garbage collection: least recently used first, never a held artifact, rows and event gone after the file")
    func garbageCollection() throws {
        let t = try TempStore()
        var ids: [String] = []
        for (i, name) in ["a", "b", "c"].enumerated() {
            let b = try t.store.bind("dl-\(name)", to: name, now: 1_000 + Int64(i))
            let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_100))
            #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file(name, bytes: 100), now: 1_200 + Int64(i)))
            ids.append(b.artifact.id)
        }
        #expect(try t.store.unreferencedArtifacts(limit: 10).isEmpty)
        for name in ["a", "b", "c"] { #expect(try t.store.release(reference: "dl-\(name)", now: 2_000)) }
        try t.store.touch(artifactID: ids[0], now: 3_000)  // a was read again: it goes last
        #expect(try t.store.unreferencedArtifacts(limit: 10).map(\.id) == [ids[1], ids[2], ids[0]])
        #expect(try t.store.unreferencedArtifacts(limit: 1).map(\.id) == [ids[1]])

        // b is taken again before the collector gets to it.
        try t.store.bind("dl-b2", to: "b", now: 3_100)
        #expect(try !t.store.beginDeleting(artifactID: ids[1], now: 3_200))
        #expect(try t.store.artifact(id: ids[1])?.state == .ready)

        #expect(try t.store.beginDeleting(artifactID: ids[2], now: 3_200))
        #expect(try !t.store.beginDeleting(artifactID: ids[2], now: 3_200))
        #expect(try t.store.artifactsBeingDeleted().map(\.id) == [ids[2]])
        #expect(try t.store.unreferencedArtifacts(limit: 10).map(\.id) == [ids[0]])
        #expect(try t.store.ownedFilePaths().contains(Fixture.file("c").path))
        try t.store.finishDeleting(artifactID: ids[2], now: 3_300)
        #expect(try t.store.artifact(id: ids[2]) == nil)
        #expect(try t.store.artifactsBeingDeleted().isEmpty)
        #expect(try !t.store.ownedFilePaths().contains(Fixture.file("c").path))
        let events = try t.store.events(after: 0, limit: 20).filter { $0.type == .deleted }
        #expect(events.count == 1)
        #expect(events[0].artifactID == ids[2])
        #expect(events[0].references == [])
        #expect(events[0].status == "deleted")
        try t.store.finishDeleting(artifactID: ids[2], now: 3_400)  // again: nothing
        #expect(try t.store.events(after: 0, limit: 20).filter { $0.type == .deleted }.count == 1)
        #expect(try t.store.storedBytes() == (200, 100))
    }

    /// "dl-1" made ready, released, and the collector's deletion begun (times 1,000–1,300).
    func readyReleasedAndDeleting(_ store: SQLiteStore) throws -> Binding {
        let b = try store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try store.claimOne(leaseUntil: 9_000, now: 1_000))
        #expect(try store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("x"), now: 1_100))
        #expect(try store.release(reference: "dl-1", now: 1_200))
        #expect(try store.beginDeleting(artifactID: b.artifact.id, now: 1_300))
        return b
    }

    @Test("a request for an artifact being deleted makes it anew; the collector's finish then changes nothing")
    func bindWhileDeleting() throws {
        let t = try TempStore()
        let b = try readyReleasedAndDeleting(t.store)
        let again = try t.store.bind("dl-2", to: "x", now: 1_400)
        #expect(again.enqueued)
        #expect(again.artifact.id == b.artifact.id)
        #expect(again.artifact.state == .pending)
        #expect(again.artifact.file == nil)
        #expect(again.artifact.job?.state == .queued)
        #expect(again.artifact.job?.attempt == 0)
        try t.store.finishDeleting(artifactID: b.artifact.id, now: 1_500)
        #expect(try t.store.artifact(id: b.artifact.id)?.state == .pending)
        #expect(try t.store.events(after: 0, limit: 10).map(\.type) == [.ready])
        #expect(try t.store.artifactsBeingDeleted().isEmpty)
    }

    @Test("deletion begun before a crash is found again after reopening the file")
    func deletingSurvivesCrash() throws {
        let t = try TempStore()
        let b = try readyReleasedAndDeleting(t.store)
        crash(t)
        let reopened = try t.reopen()
        let pending = try reopened.artifactsBeingDeleted()
        #expect(pending.map(\.id) == [b.artifact.id])
        #expect(pending.first?.file?.path == Fixture.file("x").path)
        try reopened.finishDeleting(artifactID: b.artifact.id, now: 2_000)
        #expect(try reopened.artifact(id: b.artifact.id) == nil)
    }

    // MARK: Events and small state

    @Test("event sequence numbers rise strictly and are readable after reopening")
    func eventsPersist() throws {
        let t = try TempStore()
        for i in 0..<5 {
            try t.store.bind("dl-\(i)", to: "x\(i)", now: 1_000)
            #expect(try t.store.cancel(artifactID: SQLiteStore.artifactID(forKey: Fixture.key("x\(i)")), now: 1_100 + Int64(i)))
        }
        let events = try t.store.events(after: 0, limit: 100)
        #expect(events.count == 5)
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.seq < $1.seq })
        #expect(try t.store.lastEventSeq() == events.last?.seq)
        #expect(try t.store.events(after: events[2].seq, limit: 100).map(\.seq) == events.dropFirst(3).map(\.seq))
        #expect(try t.store.events(after: 0, limit: 2).count == 2)
        crash(t)
        let reopened = try t.reopen()
        #expect(try reopened.events(after: 0, limit: 100) == events)
        try reopened.bind("dl-new", to: "new", now: 2_000)
        #expect(try reopened.cancel(artifactID: SQLiteStore.artifactID(forKey: Fixture.key("new")), now: 2_001))
        #expect(try reopened.lastEventSeq() > events.last!.seq)
    }

    @Test("the webhook's position persists across a restart")
    func webhookPosition() throws {
        let t = try TempStore()
        #expect(try t.store.webhookPosition() == 0)
        try t.store.setWebhookPosition(7)
        try t.store.setWebhookPosition(42)
        #expect(try t.store.webhookPosition() == 42)
        crash(t)
        #expect(try t.reopen().webhookPosition() == 42)
    }

    @Test("a probe is cached by fingerprint and read back equal")
    func probeCache() throws {
        let t = try TempStore()
        let info = MediaInfo(formatName: "matroska,webm", container: "mkv", durationSeconds: 60.5, bitRate: 8_000_000,
                             sizeBytes: 61_000_000, streams: [], fingerprint: "fp-1", warnings: ["truncated"])
        #expect(try t.store.cachedProbe(fingerprint: "fp-1") == nil)
        try t.store.cacheProbe(info, fingerprint: "fp-1", now: 1_000)
        #expect(try t.store.cachedProbe(fingerprint: "fp-1") == info)
        var newer = info
        newer.durationSeconds = 61
        try t.store.cacheProbe(newer, fingerprint: "fp-1", now: 2_000)
        #expect(try t.store.cachedProbe(fingerprint: "fp-1") == newer)
        #expect(try t.reopen().cachedProbe(fingerprint: "fp-1") == newer)
    }

    @Test("a store dropped without closing (a crash) reopens with every committed change")
    func crashSimulation() throws {
        let t = try TempStore()
        let kept = try t.store.bind("dl-1", to: "done", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_000))
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("done"), now: 1_100))
        let running = try t.store.bind("dl-2", to: "running", now: 1_200)
        _ = try #require(try t.store.claimOne(owner: "dead-daemon", leaseUntil: 5_000, now: 1_300))
        let before = try [kept.artifact.id, running.artifact.id].map { id throws in try t.store.artifact(id: id) }
        crash(t)
        let reopened = try t.reopen()
        let after = try [kept.artifact.id, running.artifact.id].map { id throws in try reopened.artifact(id: id) }
        #expect(after == before)
        // Start-up rescues the dead daemon's job; it runs again.
        #expect(try reopened.rescueExpiredLeases(now: 6_000) == 1)
        let again = try #require(try reopened.claimOne(owner: "new-daemon", leaseUntil: 99_000, now: 6_000))
        #expect(again.job.artifactID == running.artifact.id)
        #expect(again.job.attempt == 2)
    }

    @Test("an in-memory store works for tests")
    func inMemory() throws {
        let store = try SQLiteStore(path: ":memory:")
        let b = try store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try store.claimOne(leaseUntil: 9_000, now: 1_000))
        #expect(try store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("x"), now: 1_100))
        #expect(try store.artifact(id: b.artifact.id)?.state == .ready)
    }

    @Test("a database with a damaged page is refused at open, saying so and what to do (it was found only when a job's row was read)")
    func damagedPageRefused() throws {
        let temp = try TempDatabasePath()
        defer { withExtendedLifetime(temp) {} }   // its folder goes with it
        do {
            let store = try SQLiteStore(path: temp.path)
            for k in 0..<400 { try store.bind("r\(k)", to: "p\(k)", now: 1_000) }
        }
        _ = try sqlite3CLI(temp.path, "PRAGMA wal_checkpoint(TRUNCATE);")
        #expect(try sqlite3CLI(temp.path, "PRAGMA quick_check;") == "ok\n")
        #expect(throws: Never.self) { _ = try SQLiteStore(path: temp.path) }
        // A page in the middle of the file, overwritten.
        let file = try FileHandle(forUpdating: URL(fileURLWithPath: temp.path))
        let size = try file.seekToEnd()
        try file.seek(toOffset: (size / 2 / 4096) * 4096)
        try file.write(contentsOf: Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }))
        try file.close()
        do {
            _ = try SQLiteStore(path: temp.path)
            Issue.record("a damaged database opened")
        } catch {
            #expect(error.message.contains("is damaged") && error.message.contains("restore it from a backup"), "\(error.message)")
        }
    }

    @Test("the database is in WAL mode at the newest schema version")
    func pragmas() throws {
        let t = try TempStore()
        #expect(FileManager.default.fileExists(atPath: t.path + "-wal"))
        let out = try sqlite3CLI(t.path, "PRAGMA journal_mode; PRAGMA user_version;")
        #expect(out == "wal\n10\n")
    }

    @Test("upgrading to schema 5 keys the originals already stored by their path as well, keeping their ids: their holders' next requests find them (no move, no new revision)")
    func originalsRekeyed() throws {
        let t = try TempStore()
        let held = try t.store.bind("o", to: "film", format: .original, now: 1_000)
        // As a schema-4 Kiln left it: no plan column, the original keyed by content alone.
        _ = try sqlite3CLI(t.path, "ALTER TABLE artifact_references DROP COLUMN plan; ALTER TABLE jobs DROP COLUMN asked_at; PRAGMA user_version = 4;")
        t.store = try t.reopen()
        let key = try sqlite3CLI(t.path, "SELECT key FROM artifacts WHERE id = '\(held.artifact.id)'")
        #expect(key == Plan.originalKey(Fixture.key("film"), path: "/media/movie.mkv") + "\n")
        var plan = Fixture.plan("film", format: .original)
        plan.artifactKey = Plan.originalKey(plan.artifactKey, path: "/media/movie.mkv")   // what the farm now binds
        let again = try t.store.bind(request: Fixture.request("o", quality: .original, priority: .interactive), plan: plan, source: Fixture.source(),
                                     estimatedBytes: 0, maxAttempts: 4,
                                     originalFile: FileRecord(path: "/media/movie.mkv", bytes: 61_000_000, sha256: nil, owned: false), now: 2_000)
        #expect(again.artifact.id == held.artifact.id && again.movedFrom == nil && again.reference.revision == 1)
    }

    @Test("a data directory copied elsewhere serves and collects its own files, not those of the folder it was copied from")
    func copiedDataDirectory() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_001))
        let folder = t.file.directory.path
        let file = FileRecord(path: folder + "/artifacts/\(b.artifact.id).mp4", bytes: 1_000, sha256: SHA256.hex("x"), owned: true)
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: file, deliveredPlan: nil, now: 1_002))
        t.store = try SQLiteStore(path: ":memory:")   // closes the file
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("kiln-store-copy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: copy) }
        try FileManager.default.copyItem(at: t.file.directory, to: copy)
        let copied = try SQLiteStore(path: copy.appendingPathComponent("kiln.sqlite").path)
        let own = copy.standardizedFileURL.path + "/artifacts/\(b.artifact.id).mp4"
        #expect(try copied.artifact(id: b.artifact.id)?.file?.path == own)
        #expect(try copied.ownedFilePaths() == [own])
        #expect(try copied.heldFiles(owned: true).map(\.path) == [own])
        #expect(try copied.requeueLost(artifactID: b.artifact.id, path: own, maxAttempts: 4, now: 2_000))
        // The original folder's store still names its own file.
        #expect(try SQLiteStore(path: t.path).artifact(id: b.artifact.id)?.file?.path == file.path)
    }

    @Test("upgrading to schema 8 takes owned files from the database's own folder, whatever folder their rows named; a source delivered as it is keeps its path")
    func ownedPathsUpgrade() throws {
        let t = try TempStore()
        let b = try t.store.bind("dl-1", to: "x", now: 1_000)
        let o = try t.store.bind("o", to: "film", format: .original, now: 1_000)
        let job = try #require(try t.store.claimOne(leaseUntil: 9_000, now: 1_001))
        let file = FileRecord(path: "/elsewhere/kiln/artifacts/\(b.artifact.id).mp4", bytes: 1_000, sha256: nil, owned: true)
        #expect(try t.store.complete(jobID: job.job.id, owner: "runner-1", file: file, deliveredPlan: nil, now: 1_002))
        _ = try sqlite3CLI(t.path, "PRAGMA user_version = 7;")
        t.store = try t.reopen()
        let folder = t.file.directory.standardizedFileURL.path
        #expect(try t.store.artifact(id: b.artifact.id)?.file?.path == folder + "/artifacts/\(b.artifact.id).mp4")
        #expect(try t.store.artifact(id: o.artifact.id)?.file?.path == "/media/movie.mkv")
    }

    @Test("the database refuses a state no one defined")
    func checkConstraints() throws {
        let t = try TempStore()
        try t.store.bind("dl-1", to: "x", now: 1_000)
        let out = try sqlite3CLI(t.path, "UPDATE jobs SET state = 'sleeping';")
        #expect(out.contains("CHECK constraint failed"))
    }

    // MARK: Status

    @Test("the queue snapshot answers over 10,000 jobs, claimable ones in claim order")
    func bigQueueSnapshot() throws {
        // Filling 10,000 jobs with an fsync each would take the test half a minute.
        let t = try TempStore(durability: .processCrash)
        let start = Date()
        for i in 0..<10_000 {
            try t.store.bind("dl-\(i)", to: "job-\(i)", format: i % 3 == 0 ? .remux : .transcode,
                             priority: i % 2 == 0 ? .background : .interactive, now: 1_000 + Int64(i))
        }
        let filled = Date().timeIntervalSince(start)
        _ = try t.store.claim(kind: .transcode, limit: 2, owner: "o", leaseUntil: 99_000, now: 20_000)
        var timings: [Double] = []
        var snapshot: QueueSnapshot?
        for _ in 0..<5 {
            let s = Date()
            snapshot = try t.store.queueSnapshot(recentFailures: 20, queuedLimit: 50)
            timings.append(Date().timeIntervalSince(s))
        }
        let claimStart = Date()
        _ = try t.store.claim(kind: .remux, limit: 1, owner: "o", leaseUntil: 99_000, now: 20_000)
        let claimTime = Date().timeIntervalSince(claimStart)
        print(String(format: "store: 10,000 binds %.2f s (%.0f/s); queueSnapshot median %.2f ms; claim %.3f ms",
                     filled, 10_000 / filled, timings.sorted()[2] * 1000, claimTime * 1000))
        let snap = try #require(snapshot)
        #expect(snap.jobsByState["queued"] == 9_998)
        #expect(snap.jobsByState["running"] == 2)
        #expect(snap.running.count == 2)
        #expect(snap.queued.count == 50)
        #expect(snap.queued.prefix(25).allSatisfy { $0.priority == .interactive })
        #expect(zip(snap.queued, snap.queued.dropFirst()).allSatisfy {
            ($0.priority.rank, $0.queuedAt) <= ($1.priority.rank, $1.queuedAt)
        })
        #expect(snap.artifactsByState["pending"] == 10_000)
    }
}

// MARK: - Helpers

/// Simulates a crash: the store is leaked, never closed, its connection left open as a
/// killed process would leave its file; the test then opens the file afresh.
func crash(_ t: TempStore) {
    _ = Unmanaged.passRetained(t.store)
}

/// Runs the sqlite3 command-line shell on the database, as an operator would.
func sqlite3CLI(_ path: String, _ sql: String) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    p.arguments = [path, sql]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

/// Collects results from many threads.
final class Mutex200: @unchecked Sendable {
    private let lock = NSLock()
    private var _bindings: [Binding] = []
    private var _failures: [String] = []
    func append(_ b: Binding) { lock.lock(); _bindings.append(b); lock.unlock() }
    func fail(_ s: String) { lock.lock(); _failures.append(s); lock.unlock() }
    var bindings: [Binding] { lock.lock(); defer { lock.unlock() }; return _bindings }
    var failures: [String] { lock.lock(); defer { lock.unlock() }; return _failures }
}
