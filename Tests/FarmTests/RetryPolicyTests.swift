import Foundation
import KilnCore
import Testing
@testable import Farm

@Suite("RetryPolicy and FarmConfig")
struct RetryPolicyTests {
    let policy = RetryPolicy(baseSeconds: 10, capSeconds: 600)

    @Test("the wait doubles per attempt, between half and all of the ceiling, never above the cap")
    func backoff() {
        #expect(policy.delaySeconds(afterAttempt: 1, random: 0) == 5)
        #expect(policy.delaySeconds(afterAttempt: 1, random: 1) == 10)
        #expect(policy.delaySeconds(afterAttempt: 2, random: 0) == 10)
        #expect(policy.delaySeconds(afterAttempt: 3, random: 0.5) == 30)
        #expect(policy.delaySeconds(afterAttempt: 7, random: 1) == 600)
        #expect(policy.delaySeconds(afterAttempt: 50, random: 0) == 300)
        #expect(policy.delaySeconds(afterAttempt: 10_000, random: 1) == 600)
        for attempt in 1...20 {
            for r in stride(from: 0.0, to: 1.0, by: 0.1) {
                let d = policy.delaySeconds(afterAttempt: attempt, random: r)
                #expect(d > 0 && d <= 600)
                #expect(d <= policy.delaySeconds(afterAttempt: attempt + 1, random: 1))
            }
        }
    }

    @Test("permanent failures and the last attempt fail; others retry at now + delay")
    func decisions() {
        #expect(policy.decide(permanent: true, attempt: 1, maxAttempts: 4, now: 0, random: 0) == .fail)
        #expect(policy.decide(permanent: false, attempt: 4, maxAttempts: 4, now: 0, random: 0) == .fail)
        #expect(policy.decide(permanent: false, attempt: 1, maxAttempts: 4, now: 1_000, random: 0) == .retry(at: 6_000))
        #expect(policy.decide(permanent: false, attempt: 3, maxAttempts: 4, now: 0, random: 1) == .retry(at: 40_000))
        #expect(policy.decide(permanent: false, attempt: 1, maxAttempts: 1, now: 0, random: 0) == .fail)
    }

    @Test("settings come from KILN_* variables with their defaults; bad values name the variable")
    func config() throws {
        let d = try FarmConfig.fromEnvironment([:])
        #expect(d.dataDir == "./var" && d.maxRemuxes == 2 && d.maxAttempts == 4 && d.retentionSeconds == 259_200)
        #expect(d.maxTranscodes == max(1, ProcessInfo.processInfo.activeProcessorCount / 2))
        #expect(d.storageBudgetBytes == nil && d.minFreeBytes == 1 << 30)
        #expect(d.prepArtifactPath.hasSuffix("/prep-artifact"))
        let c = try FarmConfig.fromEnvironment(["KILN_DATA_DIR": "/srv/kiln", "KILN_MAX_TRANSCODES": "3", "KILN_RETENTION_SECONDS": "0",
                                                "KILN_STORAGE_BUDGET_BYTES": "5000000000", "KILN_PREP_ARTIFACT": "/opt/prep",
                                                "KILN_STALL_TIMEOUT_SECONDS": "45.5"])
        #expect(c.dataDir == "/srv/kiln" && c.maxTranscodes == 3 && c.retentionSeconds == 0)
        #expect(c.storageBudgetBytes == 5_000_000_000 && c.prepArtifactPath == "/opt/prep" && c.stallTimeoutSeconds == 45.5)
        #expect(c.artifactPath("a_1") == "/srv/kiln/artifacts/a_1.mp4")
        for (name, value) in [("KILN_MAX_TRANSCODES", "0"), ("KILN_MAX_ATTEMPTS", "many"), ("KILN_RETENTION_SECONDS", "-1"),
                              ("KILN_LEASE_SECONDS", "0"), ("KILN_MIN_FREE_BYTES", "1GB")] {
            #expect(throws: KilnError.self) { try FarmConfig.fromEnvironment([name: value]) }
            do { _ = try FarmConfig.fromEnvironment([name: value]) } catch {
                #expect(error.code == .usage && error.field == name)
            }
        }
        #expect(throws: KilnError.self) {
            try FarmConfig.fromEnvironment(["KILN_LEASE_SECONDS": "10", "KILN_HEARTBEAT_SECONDS": "10"])
        }
    }
}
