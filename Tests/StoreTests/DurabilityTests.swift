import Dispatch
import Foundation
import KilnCore
@testable import Store
import Synchronization
import Testing

/// The log's fsync runs outside the connection (LogFlusher). These tests hold that fsync
/// still, or make it fail, through the store's stand-in for fdatasync.
@Suite("SQLite store durability")
struct DurabilityTests {
    /// A stand-in for fdatasync that counts its calls and, while `held`, blocks them.
    final class HeldSync: Sendable {
        let calls = Atomic<Int>(0)
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let held = Atomic<Bool>(false)
        let failing = Atomic<Bool>(false)

        /// From now on every fsync blocks until `release`.
        func hold() { held.store(true, ordering: .sequentiallyConsistent) }

        /// Stops holding, and lets `waiting` blocked fsyncs finish.
        func release(_ waiting: Int = 1) {
            held.store(false, ordering: .sequentiallyConsistent)
            for _ in 0..<waiting { gate.signal() }
        }

        func call(_ fd: Int32) -> Int32 {
            calls.add(1, ordering: .sequentiallyConsistent)
            if held.load(ordering: .sequentiallyConsistent) {
                entered.signal()
                gate.wait()
            }
            if failing.load(ordering: .sequentiallyConsistent) {
                errno = EIO
                return -1
            }
            return fdatasync(fd)
        }
    }

    final class Flag: Sendable {
        let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .sequentiallyConsistent) }
        var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
    }

    @Test("a write answers only after the log's fsync, a read of it waits for that fsync too, and the next write commits meanwhile")
    func acknowledgedAfterFsync() throws {
        let temp = try TempStore()
        let sync = HeldSync()
        let store = try SQLiteStore(path: temp.path, durability: .full, logSync: { sync.call($0) })
        sync.hold()

        let wrote = Flag(), read = Flag(), second = Flag()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            _ = try? store.bind("held-1", to: "movie@5mbps", now: 1_000)
            wrote.set()
        }
        #expect(sync.entered.wait(timeout: .now() + 10) == .success, "the first write's fsync never began")
        // The first write has committed and its fsync is in flight (held).
        DispatchQueue.global().async(group: group) {
            #expect((try? store.reference("held-1")) != nil)
            read.set()
        }
        DispatchQueue.global().async(group: group) {
            _ = try? store.bind("held-2", to: "movie@2mbps", now: 1_001)
            second.set()
        }
        // The second write's transaction commits while the disk is busy with the first:
        // the connection is free (its fsync, the next one, will be held too).
        Thread.sleep(forTimeInterval: 0.3)
        #expect(!wrote.isSet, "the write returned before its fsync finished")
        #expect(!read.isSet, "a read returned what was not yet durable")
        #expect(!second.isSet)
        sync.release()
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(wrote.isSet && read.isSet && second.isSet)
        // The second write needed an fsync of its own: the first began before it committed.
        #expect(sync.calls.load(ordering: .sequentiallyConsistent) >= 3, "schema, first write, second write")
        #expect(store.broken == nil)
        let reopened = try temp.reopen()
        #expect(try reopened.reference("held-1") != nil)
        #expect(try reopened.reference("held-2") != nil)
    }

    @Test("a running job's claim and outcome do not wait for the fsync, but nobody reads them until it is done")
    func jobWritesDoNotWait() throws {
        let temp = try TempStore()
        let sync = HeldSync()
        let store = try SQLiteStore(path: temp.path, durability: .full, logSync: { sync.call($0) })
        try store.bind("film", to: "movie@5mbps", now: 1_000)
        sync.hold()

        // Claim and completion return although no fsync can finish (a crash now loses
        // them, and the job is simply queued again after the restart)...
        let claimed = Mutex<ClaimedJob?>(nil)
        let finished = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            if let job = try? store.claimOne(leaseUntil: 9_000, now: 2_000),
               (try? store.complete(jobID: job.job.id, owner: "runner-1", file: Fixture.file("film"), now: 3_000)) == true {
                claimed.withLock { $0 = job }
            }
            finished.signal()
        }
        guard finished.wait(timeout: .now() + 5) == .success else {
            sync.release(4)
            Issue.record("claiming and completing a job waited for the log's fsync")
            return
        }
        let job = try #require(claimed.withLock { $0 })
        // ...but what they changed is not told to anyone before it is durable: reading the
        // artifact, or the ready event, waits for the fsync.
        let read = Flag()
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            #expect((try? store.artifact(id: job.job.artifactID))??.state == .ready)
            read.set()
        }
        #expect(sync.entered.wait(timeout: .now() + 10) == .success, "the read started no fsync")
        Thread.sleep(forTimeInterval: 0.3)
        #expect(!read.isSet, "a read returned a completion that was not yet durable")
        sync.release()
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(read.isSet)
        // A request is still only answered once durable: bind waits as before.
        sync.hold()
        let bound = Flag()
        DispatchQueue.global().async(group: group) {
            _ = try? store.bind("film-2", to: "movie@2mbps", now: 4_000)
            bound.set()
        }
        #expect(sync.entered.wait(timeout: .now() + 10) == .success)
        Thread.sleep(forTimeInterval: 0.3)
        #expect(!bound.isSet, "a request was answered before it was durable")
        sync.release()
        #expect(group.wait(timeout: .now() + 10) == .success)
        let reopened = try temp.reopen()
        #expect(try reopened.artifact(id: job.job.artifactID)?.state == .ready)
    }

    @Test("a failed fsync fails the write, and every later call, with io_error (no retry after fsyncgate)")
    func failedFsyncPoisons() throws {
        let temp = try TempStore()
        let sync = HeldSync()
        let store = try SQLiteStore(path: temp.path, durability: .full, logSync: { sync.call($0) })
        try store.bind("before", to: "movie@5mbps", now: 1_000)
        sync.failing.store(true, ordering: .sequentiallyConsistent)
        do {
            try store.bind("lost", to: "movie@2mbps", now: 2_000)
            Issue.record("a write whose fsync failed was reported as done")
        } catch let error as KilnError {
            #expect(error.code == .ioError)
            #expect(error.message.contains("durable"))
        }
        #expect(store.broken?.code == .ioError, "the daemon watches this to exit")
        // The disk answers again, but the store does not trust it: pages may be gone.
        sync.failing.store(false, ordering: .sequentiallyConsistent)
        #expect(throws: KilnError.self) { try store.reference("before") }
        #expect(throws: KilnError.self) { try store.bind("after", to: "movie@1mbps", now: 3_000) }
        // A restarted daemon works from what SQLite holds.
        let reopened = try temp.reopen()
        #expect(try reopened.reference("before") != nil)
    }

    @Test("with synchronous=NORMAL (KILN_SQLITE_SYNC=normal) the store never fsyncs the log itself")
    func processCrashDoesNotFsync() throws {
        let temp = try TempStore()
        let sync = HeldSync()
        let store = try SQLiteStore(path: temp.path, durability: .processCrash, logSync: { sync.call($0) })
        try store.bind("dl-1", to: "movie@5mbps", now: 1_000)
        #expect(try store.reference("dl-1") != nil)
        #expect(sync.calls.load(ordering: .sequentiallyConsistent) == 0)
    }
}
