import Foundation
import KilnCore
import Store

/// What one collection did.
public struct GarbageReport: Sendable, Equatable {
    /// Artifacts deleted, in the order they went.
    public var deleted: [String] = []
    public var freedBytes: Int64 = 0
    /// Rows of unheld artifacts without a file of Kiln's (original, failed, canceled) removed
    /// after the retention time, so the database does not grow with every request ever made.
    public var forgottenArtifacts = 0
    /// Stored events older than `eventRetentionSeconds` removed.
    public var prunedEvents = 0
    /// Files in the artifact folder that no row knows: reported, never deleted (they may
    /// be an operator's, or evidence of a bug worth looking at).
    public var unknownFiles: [String] = []
    /// Finished files of artifacts that are not ready, no row naming them, removed
    /// (`GarbageCollector.removeUnrecordedOutputs`).
    public var removedUnrecorded: [String] = []
    /// Artifact files whose row is gone (an emptied or older `kiln.db`), removed once as
    /// old as the retention (`GarbageCollector.removeLostArtifacts`).
    public var removedLost: [String] = []
    public init() {}
}

/// Deletes artifact files nobody holds:
/// - an unreferenced ready artifact once `retentionSeconds` have passed since its last
///   reference let go (a caller who comes back meanwhile gets it without new work);
/// - under storage pressure (owned files above `storageBudgetBytes`, free space below
///   `minFreeBytes`, or a job waiting for more free space than that) unreferenced
///   artifacts least recently used first, retention or not. For a waiting job only when
///   deleting them all would let it in: a cache is not emptied for a job that cannot run.
/// A referenced artifact is never deleted (the store re-checks in `beginDeleting`), nor a
/// file Kiln does not own (an `original` delivery is the user's source).
/// It also forgets, after the same retention, the rows of unheld artifacts that have no
/// file to delete (originals, failures, cancels), and events past their own retention.
///
/// Deleting is three steps that survive a crash between any two: mark the row
/// `deleting`, unlink the file, remove the row; start-up finishes marked rows.
struct GarbageCollector: Sendable {
    let store: any ArtifactStore
    let config: FarmConfig
    let folder: ArtifactFolder
    let space: any DiskSpace
    let log: any FarmLog
    /// Shared with runners moving files into place.
    let fileLock: NSLock
    /// What a pass has already said: a condition that lasts (a budget referenced artifacts
    /// exceed, a file no row knows) is logged when it begins, not on every pass.
    private let said = Said()

    final class Said: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: Set<String> = []
        /// `now` (the lines a pass would log) less those the last pass logged.
        func new(_ now: [String]) -> [String] {
            lock.lock()
            defer { lock.unlock() }
            let fresh = now.filter { !lines.contains($0) }
            lines = Set(now)
            return fresh
        }
    }

    /// - Parameter wantedBytes: free space the jobs waiting for disk need beyond `minFreeBytes`.
    /// - Parameter soleFarm: no other farm uses the store (`removeUnrecordedOutputs`).
    func collect(now: Int64, wantedBytes: Int64 = 0, soleFarm: Bool = false) throws(KilnError) -> GarbageReport {
        var report = GarbageReport()
        var (finished, stuck) = try finishDeletions(now: now)
        report.deleted = finished
        if soleFarm { report.removedUnrecorded = try removeUnrecordedOutputs() }
        for name in report.removedUnrecorded {
            log.write("removed \(name): the finished file of an artifact that is not ready, which no row named")
        }
        if soleFarm {
            let lost = try removeLostArtifacts(now: now)
            report.removedLost = lost.removed
            report.freedBytes += lost.bytes
        }
        for name in report.removedLost {
            log.write("removed \(name): an artifact file whose row was lost, unheld for the retention")
        }
        let candidates = try store.unreferencedArtifacts(limit: 100_000)   // least recently used first
        var gone = Set<String>()
        let retention = config.retentionSeconds * 1000
        for a in candidates where now - (a.unreferencedSince ?? a.lastUsedAt) >= retention {
            if try delete(a, now: now, report: &report, stuck: &stuck) { gone.insert(a.id) }
        }

        var total = try store.storedBytes().total
        var free = space.freeBytes(at: config.artifactsDir)
        // What the waiting jobs want counts if deleting every unheld file would give it.
        let unheld = candidates.reduce(Int64(0)) { sum, a in
            guard !gone.contains(a.id), let file = a.file, file.owned else { return sum }
            return sum + file.bytes
        }
        let wantedFits = free.map { $0 + unheld - config.minFreeBytes >= wantedBytes } ?? false
        let floor = config.minFreeBytes + (wantedFits ? wantedBytes : 0)
        func pressed() -> Bool {
            if let budget = config.storageBudgetBytes, total > budget { return true }
            if let f = free, f < floor { return true }
            return false
        }
        for a in candidates where !gone.contains(a.id) {
            guard pressed() else { break }
            let bytes = a.file?.bytes ?? 0
            if try delete(a, now: now, report: &report, stuck: &stuck) {
                gone.insert(a.id)
                total -= bytes
                free = free.map { $0 + bytes }
            }
        }
        var lines = stuck
        if pressed(), let budget = config.storageBudgetBytes, total > budget {
            lines.append("storage: referenced artifacts exceed the budget of \(budget) bytes; nothing more may be deleted")
        }
        report.forgottenArtifacts = try store.forgetUnheldArtifacts(before: now - retention)
        let held = config.eventsHeldForWebhook ? try store.webhookPosition() : nil
        report.prunedEvents = try store.pruneEvents(before: now - config.eventRetentionSeconds * 1000, deliveredUpTo: held)
        report.unknownFiles = try unknownFiles()
        lines += report.unknownFiles.map {
            soleFarm && Self.lostArtifactID($0) != nil
                ? "artifact file no row knows (its row was lost: kiln.db emptied or restored from an older copy): \($0), removed once as old as the retention"
                : "unknown file in the artifact folder (left alone): \($0)"
        }
        for line in said.new(lines) { log.write(line) }
        return report
    }

    /// Files no row knows; attempt temporaries (in flight or a crash's, which start-up removes) aside.
    func unknownFiles() throws(KilnError) -> [String] {
        fileLock.lock()
        defer { fileLock.unlock() }
        return try unknownFilesLocked()
    }

    private func unknownFilesLocked() throws(KilnError) -> [String] {
        let known = try store.ownedFilePaths()
        return folder.names()
            .filter { !$0.contains(ArtifactFolder.marker) }
            .map { folder.path + "/" + $0 }
            .filter { !known.contains($0) }
            .sorted()
    }

    private func delete(_ a: ArtifactRecord, now: Int64, report: inout GarbageReport, stuck: inout [String]) throws(KilnError) -> Bool {
        guard let file = a.file, file.owned else { return false }
        fileLock.lock()
        defer { fileLock.unlock() }
        guard try store.beginDeleting(artifactID: a.id, now: now) else { return false }   // held again meanwhile
        do { try folder.remove(file.path) } catch {
            // Left `deleting`: the next pass tries again (`finishDeletions`).
            stuck.append("cannot delete \(file.path) of \(a.id): \(error.message)")
            return false
        }
        try store.finishDeleting(artifactID: a.id, now: now)
        report.deleted.append(a.id)
        report.freedBytes += file.bytes
        return true
    }

    /// Deletions left `deleting` (a crash between the steps, or a file that could not be
    /// removed then, on a folder made read-only for a while): finished where the file can
    /// go now. At start-up and on every collection pass, so a deletion that failed once is
    /// not left, its bytes counted and its links answering 409, until the next restart.
    func finishDeletions(now: Int64) throws(KilnError) -> (finished: [String], stuck: [String]) {
        fileLock.lock()
        defer { fileLock.unlock() }
        var finished: [String] = [], stuck: [String] = []
        for a in try store.artifactsBeingDeleted() {
            if let file = a.file, file.owned {
                do { try folder.remove(file.path) } catch {
                    stuck.append("cannot delete \(file.path) of \(a.id): \(error.message)")
                    continue
                }
            }
            try store.finishDeleting(artifactID: a.id, now: now)
            finished.append(a.id)
        }
        return (finished, stuck)
    }

    /// The finished file (`<id>.mp4`) of an artifact that is not ready, which no row names:
    /// moved into place by an attempt whose daemon stopped before it could record it (a
    /// crash between the rename and the row), or left by a deletion that failed before the
    /// artifact was asked for again and then canceled. Its job, if any, writes it anew;
    /// left, it was a file no row knew, for good once its artifact was released. Under the
    /// file lock, which this farm's runners hold from the rename to the row, so none of
    /// theirs is caught between the two; only where no other farm shares the store.
    func removeUnrecordedOutputs() throws(KilnError) -> [String] {
        fileLock.lock()
        defer { fileLock.unlock() }
        var removed: [String] = []
        for path in try unknownFilesLocked() {
            let name = (path as NSString).lastPathComponent
            guard name.hasSuffix(".mp4"), let a = try store.artifact(id: String(name.dropLast(4))),
                  [.pending, .failed, .canceled].contains(a.state) else { continue }
            if (try? folder.remove(path)) != nil { removed.append(name) }
        }
        return removed
    }

    /// The artifact ID a finished file's name carries (`<id>.mp4`, the shape
    /// `SQLiteStore.artifactID(forKey:)` gives), nil for any other name.
    static func lostArtifactID(_ path: String) -> String? {
        let name = (path as NSString).lastPathComponent
        guard name.hasSuffix(".mp4") else { return nil }
        let id = String(name.dropLast(4))
        return SQLiteStore.isArtifactID(id) ? id : nil
    }

    /// Finished artifact files that no row names at all: their rows were lost (`kiln.db`
    /// emptied, or replaced by an older copy or a new file). Nothing can serve one (asked
    /// for again, the artifact is a new row whose job writes it anew), and the storage
    /// budget does not count it, so left alone it took its disk space for good. Each is
    /// held by no reference, so it goes as an unheld artifact does: once the retention has
    /// passed since it was written, which leaves time to put back a `kiln.db` swapped by
    /// mistake. Names of any other shape are an operator's and stay. Under the file lock
    /// (runners hold it from the rename to the row); only where no other farm shares the store.
    func removeLostArtifacts(now: Int64) throws(KilnError) -> (removed: [String], bytes: Int64) {
        fileLock.lock()
        defer { fileLock.unlock() }
        var removed: [String] = [], bytes: Int64 = 0
        let retention = config.retentionSeconds * 1000
        for path in try unknownFilesLocked() {
            guard let id = Self.lostArtifactID(path), try store.artifact(id: id) == nil else { continue }
            var st = stat()
            guard stat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG,
                  now - (Int64(st.st_mtim.tv_sec) * 1000 + Int64(st.st_mtim.tv_nsec) / 1_000_000) >= retention,
                  (try? folder.remove(path)) != nil else { continue }
            removed.append(id + ".mp4")
            bytes += Int64(st.st_size)
        }
        return (removed, bytes)
    }

    /// Start-up: finish deletions a crash interrupted (the file may or may not be gone yet).
    func finishInterrupted(now: Int64) throws(KilnError) -> [String] {
        let (finished, stuck) = try finishDeletions(now: now)
        for line in stuck { log.write("start-up: " + line) }
        return finished
    }
}
