import Foundation
import KilnCore
import Planner
import Store

/// Why the farm stopped a child before it ended by itself.
enum StopReason: String, Sendable {
    /// An operator canceled, or the last reference let go: the store already says canceled.
    case canceled
    /// The daemon is shutting down: the job goes back in line, its attempt not spent.
    case shutdown
    /// A heartbeat was refused: the job is no longer ours (rescued, canceled).
    case leaseLost
    /// No progress for `stallTimeoutSeconds`.
    case stalled
    /// Longer than the overall limit for the source's duration.
    case timedOut
}

/// Runs one claimed job on its own thread: starts the child (from this thread, which
/// lives until the child is gone, as the child's parent-death signal is tied to it),
/// renews the lease, watches for stalls and timeouts, then records the outcome through
/// the fenced store calls.
///
/// Sendable by its lock: `stopReason`, `handle` and the progress fields are guarded by `lock`.
final class JobRunner: @unchecked Sendable {
    let claimed: ClaimedJob
    let owner: String
    /// The farm's claim that started this run (`ArtifactFolder.attemptPath`).
    let claim: Int
    private unowned let farm: Farm
    private let lock = NSLock()
    private var stopReason: StopReason?
    private var handle: (any JobHandle)?
    private var lastProgress: JobProgress?
    /// What the child last reported (the store has it as of the last heartbeat).
    var progress: JobProgress? { lock.lock(); defer { lock.unlock() }; return lastProgress }
    private var lastProgressAt: Double
    private var lastLiveAt = -Double.infinity

    var jobID: Int64 { claimed.job.id }
    var artifactID: String { claimed.job.artifactID }
    var kind: JobKind { claimed.job.kind }

    init(claimed: ClaimedJob, owner: String, claim: Int, farm: Farm) {
        self.claimed = claimed
        self.owner = owner
        self.claim = claim
        self.farm = farm
        self.lastProgressAt = farm.clock.monotonicSeconds()
    }

    /// Stops the child for `reason` (the first reason given wins).
    func stop(_ reason: StopReason) {
        lock.lock()
        let first = stopReason == nil
        if first { stopReason = reason }
        let h = handle
        lock.unlock()
        if first { h?.terminate(killAfter: farm.config.killGraceSeconds) }
    }

    private var currentStopReason: StopReason? { lock.lock(); defer { lock.unlock() }; return stopReason }

    /// Of its estimated output, what the job has still to write (by its progress so far):
    /// space the disk admission keeps for it.
    var bytesToCome: Int64 {
        lock.lock()
        defer { lock.unlock() }
        return Int64(Double(claimed.estimatedBytes) * (1 - (lastProgress?.fraction ?? 0)))
    }

    /// Called on the child's reader thread: keeps the progress for the next heartbeat and
    /// announces it live, at most every half second.
    private func noteProgress(_ p: JobProgress) {
        let now = farm.clock.monotonicSeconds()
        lock.lock()
        lastProgress = p
        lastProgressAt = now
        let announce = now - lastLiveAt >= 0.5
        if announce { lastLiveAt = now }
        lock.unlock()
        if announce { farm.publishProgress(artifactID: artifactID, format: claimed.plan.deliveryFormat, progress: p) }
    }

    func run() {
        let config = farm.config
        let folder = farm.folder
        let attemptPath = folder.attemptPath(artifactID, jobID: jobID, attempt: claimed.job.attempt, claim: claim)
        let spec = JobSpec(jobID: jobID, artifactID: artifactID, attempt: claimed.job.attempt, plan: claimed.plan,
                           sourcePath: farm.sameContent(as: claimed) ?? claimed.source.path, sourceDurationSeconds: claimed.source.durationSeconds,
                           sourceFingerprint: claimed.source.fingerprint, outputPath: attemptPath)
        let started = farm.clock.monotonicSeconds()
        let limit = config.attemptTimeout(durationSeconds: claimed.source.durationSeconds)

        let h: any JobHandle
        do {
            // The folder made again if it went (removed by hand, a volume mounted over it):
            // the child refuses an output folder that is not there as a usage error, and
            // every job failed at once, for good. One that cannot be made is retried.
            try folder.create()
            h = try farm.launcher.launch(spec) { [weak self] p in self?.noteProgress(p) }
        } catch {
            let failure = AttemptError(attempt: spec.attempt, code: "launch_failed", stage: "open", message: error.message,
                                       at: farm.clock.nowMillis())
            record(failure: failure, permanent: false)
            return
        }
        // The journal's account of the work: which film, what is made of it, which try.
        farm.log.write("artifact \(artifactID): \(claimed.plan.deliveryFormat.rawValue) of \(claimed.source.path) started "
                       + "(job \(jobID), attempt \(spec.attempt) of \(claimed.job.maxAttempts))")
        lock.lock()
        handle = h
        let stoppedEarly = stopReason != nil
        lock.unlock()
        if stoppedEarly { h.terminate(killAfter: config.killGraceSeconds) }

        var lastHeartbeat = started
        var outcome: JobOutcome
        while true {
            if let ended = h.wait(timeout: 0.1) { outcome = ended; break }
            let now = farm.clock.monotonicSeconds()
            lock.lock()
            let progress = lastProgress
            let sinceProgress = now - lastProgressAt
            let reason = stopReason
            lock.unlock()
            if reason == nil {
                if sinceProgress > config.stallTimeoutSeconds { stop(.stalled) }
                else if now - started > limit { stop(.timedOut) }
            }
            if now - lastHeartbeat >= config.heartbeatSeconds {
                lastHeartbeat = now
                do {
                    let wallNow = farm.clock.nowMillis()
                    let ours = try farm.store.heartbeat(jobID: jobID, owner: owner,
                                                        leaseUntil: wallNow + Int64(config.leaseSeconds * 1000),
                                                        progress: progress, now: wallNow)
                    if !ours { stop(.leaseLost) }
                } catch {
                    farm.log.write("job \(jobID): heartbeat failed (\(error)); the lease may lapse")
                }
            }
        }
        // A child killed by a signal leaves its temporary file behind.
        folder.removeAttemptFiles(attemptPath, keepOutput: true)
        finish(outcome, attemptPath: attemptPath, stopReason: currentStopReason)
        folder.removeAttemptFiles(attemptPath, keepOutput: false)
    }

    private func finish(_ outcome: JobOutcome, attemptPath: String, stopReason: StopReason?) {
        let store = farm.store
        let now = farm.clock.nowMillis()
        if outcome.termination == .exited(0), stopReason != .canceled,
           let bytes = fileSize(attemptPath) {
            deliver(attemptPath: attemptPath, bytes: bytes, sha256: outcome.report?.output?.sha256,
                    equivalent: outcome.report?.stats?.ffmpegEquivalent, description: outcome.report?.output?.description,
                    deliveredPlan: deliveredPlan(adjustments: outcome.report?.stats?.adjustments ?? [], executed: outcome.report?.executedPlan))
            return
        }
        switch stopReason {
        case .canceled?:
            return   // the store already says canceled; there is nothing to record
        case .shutdown?:
            do {
                if try !store.requeue(jobID: jobID, owner: owner, now: now) {
                    farm.log.write("job \(jobID): not requeued at shutdown, the lease was no longer ours")
                }
            } catch { farm.log.write("job \(jobID): requeue at shutdown failed: \(error)") }
            return
        default:
            break
        }
        let (failure, permanent) = classify(outcome, stopReason: stopReason, at: now)
        record(failure: failure, permanent: permanent)
    }

    /// The plan the output answers to when the engine had to re-encode a copied stream
    /// (`Planner.delivered`, at this farm's rungs); nil when it is what the plan said.
    func deliveredPlan(adjustments: [String], executed: Plan?) -> Plan? {
        Planner.delivered(claimed.plan, executed: executed, adjustments: adjustments, rungs: farm.presets.rungs)
    }

    /// Moves the finished file into place and marks the artifact ready, under the farm's
    /// file lock (the collector takes it too) and only after a heartbeat confirms the job is
    /// still ours, so a rescued attempt's late child cannot replace a newer attempt's file.
    /// A store that cannot record it for a while is asked again (`untilRecorded`): the work
    /// is done, and throwing it away had left the job shown running until its lease lapsed
    /// and then redone the whole encode. The file lock is let go between tries, so the
    /// collector can make room meanwhile.
    private func deliver(attemptPath: String, bytes: Int64, sha256: String?, equivalent: [String]?, description: JSONValue?,
                         deliveredPlan: Plan?) {
        untilRecorded(what: "the finished file", givingUp: "the file is discarded") {
            deliverOnce(attemptPath: attemptPath, bytes: bytes, sha256: sha256, equivalent: equivalent,
                        description: description, deliveredPlan: deliveredPlan)
        }
        farm.events.notify()
    }

    /// Whether the run has ended and holds its outcome for a store that cannot take it yet:
    /// alive, though its lease is not renewed meanwhile (the rescuer renews it instead).
    var awaitingStore: Bool { lock.lock(); defer { lock.unlock() }; return waitingForStore }
    private var waitingForStore = false

    /// Runs `attempt` (one try at recording the run's outcome: nil when done) again while
    /// the store cannot write for a while (the database's disk full, its write lock held by
    /// another program) and the farm runs. A full disk usually fills the database's disk
    /// too: a failure given up at once was never recorded, and the rescuer later wrote the
    /// attempt off as `lease_expired` (its disk_full lost, the job shown running meanwhile).
    private func untilRecorded(what: String, givingUp: String, _ attempt: () -> KilnError?) {
        var pause = 0.5
        var said = false
        defer { lock.lock(); waitingForStore = false; lock.unlock() }
        while let failure = attempt() {
            guard failure.code == .diskFull || failure.code == .ioError, !farm.isStopping else {
                farm.log.write("job \(jobID): could not record \(what): \(failure); \(givingUp)")
                return
            }
            if !said {
                farm.log.write("job \(jobID): could not record \(what) (\(failure)); keeping it and trying again")
                said = true
                lock.lock(); waitingForStore = true; lock.unlock()
            }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 5)
        }
    }

    /// One try of `deliver`: nil when it is done with the file (recorded, or discarded as no
    /// longer ours); the store's error when the file, back at `attemptPath`, awaits another.
    private func deliverOnce(attemptPath: String, bytes: Int64, sha256: String?, equivalent: [String]?, description: JSONValue?,
                             deliveredPlan: Plan?) -> KilnError? {
        let store = farm.store
        let finalPath = farm.folder.finalPath(artifactID)
        farm.fileLock.lock()
        defer { farm.fileLock.unlock() }
        let now = farm.clock.nowMillis()
        do throws(KilnError) {
            guard try store.heartbeat(jobID: jobID, owner: owner, leaseUntil: now + Int64(farm.config.leaseSeconds * 1000),
                                      progress: nil, now: now) else {
                farm.log.write("job \(jobID): finished after its lease was lost; the file is discarded")
                return nil
            }
            try farm.folder.moveIntoPlace(attemptPath, finalPath)
            // The child wrote to the attempt's path; the command writes where the file is now.
            let command = equivalent.map { $0.last == attemptPath ? Array($0.dropLast()) + [finalPath] : $0 }
            let file = FileRecord(path: finalPath, bytes: bytes, sha256: sha256, owned: true, ffmpegEquivalent: command,
                                  description: description)
            let recorded: Bool
            do throws(KilnError) {
                recorded = try store.complete(jobID: jobID, owner: owner, file: file, deliveredPlan: deliveredPlan, now: now)
            } catch {
                // Not ready, so not at the artifact's name: back to the attempt's, for the next try.
                try? farm.folder.moveIntoPlace(finalPath, attemptPath)
                throw error
            }
            if recorded {
                farm.log.write("artifact \(artifactID): ready, \(Format.bytes(bytes)) (job \(jobID))")
            } else {
                try? farm.folder.remove(finalPath)
                farm.log.write("job \(jobID): the store refused the result; the file is discarded")
            }
            return nil
        } catch {
            return error
        }
    }

    private func record(failure: AttemptError, permanent: Bool) {
        let store = farm.store
        let now = farm.clock.nowMillis()
        let decision = farm.config.retry.decide(permanent: permanent, attempt: claimed.job.attempt,
                                                maxAttempts: claimed.job.maxAttempts, now: now,
                                                random: Double.random(in: 0..<1))
        let retryAt: Int64? = if case .retry(let at) = decision { at } else { nil }
        untilRecorded(what: "its failure", givingUp: "the lease will lapse") {
            do throws(KilnError) {
                if try store.fail(jobID: jobID, owner: owner, error: failure, retryAt: retryAt, now: now) {
                    if let retryAt { farm.noteRetry(at: retryAt) }
                    farm.log.write("artifact \(artifactID): \(failure.code) (\(failure.message)) (job \(jobID), attempt \(failure.attempt))"
                                   + (retryAt.map { " — retry in \(($0 - now) / 1000) s" } ?? " — failed"))
                }
                return nil
            } catch {
                return error
            }
        }
        farm.events.notify()
    }

    /// Permanent: exit 3 (the source or plan cannot be done) and 2 (a request the child
    /// refuses will be refused again). Everything else may succeed on another try.
    func classify(_ outcome: JobOutcome, stopReason: StopReason?, at now: Int64) -> (AttemptError, Bool) {
        let reported = outcome.report?.error
        var exitStatus: Int32?
        var signal: Int32?
        switch outcome.termination {
        case .exited(let s): exitStatus = s
        case .signaled(let s): signal = s
        }
        func error(_ code: String, _ stage: String, _ message: String) -> AttemptError {
            AttemptError(attempt: claimed.job.attempt, code: code, stage: stage, message: message, exitStatus: exitStatus,
                         signal: signal, logTail: outcome.logTail, at: now)
        }
        switch stopReason {
        case .stalled?:
            return (error("stalled", "run", "no progress for \(Int(farm.config.stallTimeoutSeconds)) s; the child was stopped"), false)
        case .timedOut?:
            let limit = farm.config.attemptTimeout(durationSeconds: claimed.source.durationSeconds)
            return (error("timeout", "run", "the attempt took longer than its limit of \(Int(limit)) s; the child was stopped"), false)
        case .leaseLost?:
            return (error("lease_expired", "run", "the job's lease was lost (rescued or canceled); the child was stopped"), false)
        default:
            break
        }
        if let signal {
            return (error("crashed", reported?.stage ?? "run", "the child was killed by signal \(signal)"), false)
        }
        let status = exitStatus ?? -1
        let code = reported?.code
        let stage = reported?.stage ?? "run"
        let message = reported?.message
        switch status {
        case 0:
            return (error("output_missing", "finalize", "the child reported success but left no file"), false)
        case 2:
            return (error(code ?? "usage", stage, message ?? "the child refused its arguments"), true)
        case 3:
            return (error(code ?? "source_unsupported", stage, message ?? "the source cannot be prepared"), true)
        case 4:
            return (error(code ?? "io_error", stage, message ?? "a transient failure"), false)
        case 5:
            return (error(code ?? "canceled", stage, message ?? "the child was stopped by a signal the farm did not send"), false)
        default:
            return (error(code ?? "internal_error", stage, message ?? "the child ended with exit status \(status)"), false)
        }
    }

    private func fileSize(_ path: String) -> Int64? {
        guard let attrs = try? FileManager.default.attributesOfItem(atPath: path),
              let size = attrs[.size] as? NSNumber else { return nil }
        return size.int64Value
    }
}
