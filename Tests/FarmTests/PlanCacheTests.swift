import KilnCore
import Store
import Synchronization
import Testing
@testable import Farm

@Suite("plan cache")
struct PlanCacheTests {
    static func plan(_ key: String) -> Plan {
        Plan(quality: .mbps5, effectiveQuality: .mbps5, deliveryFormat: .transcode, targetBitrateKbps: 5000, container: "mp4",
             video: nil, audio: nil, subtitles: [], reasons: [key], artifactKey: key)
    }

    @Test("the same source, quality, caps and language plan once; any difference plans again")
    func reusesOnlyEqualInputs() throws {
        let cache = PlanCache()
        let made = Mutex(0)
        func plan(_ fingerprint: String, _ request: PrepareRequest) throws -> Plan {
            try cache.plan(fingerprint: fingerprint, request: request) { () throws(KilnError) -> Plan in
                made.withLock { $0 += 1 }
                return Self.plan("\(fingerprint)-\(request.quality.rawValue)-\(request.audioLanguage ?? "")")
            }
        }
        let phone = DeviceCaps(codecsVideo: ["h264"], codecsAudio: ["aac"], containers: ["mp4"])
        let tv = DeviceCaps(codecsVideo: ["h264", "hevc"], codecsAudio: ["aac", "ac3"], containers: ["mp4", "mkv"], hdr: true)
        let base = PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps5, caps: phone)
        let first = try plan("fp1", base)
        // Another reference, path or priority: nothing the plan depends on.
        #expect(try plan("fp1", PrepareRequest(reference: "b", sourcePath: "/other/a.mkv", quality: .mbps5, caps: phone,
                                               priority: .background)) == first)
        #expect(made.withLock { $0 } == 1)
        _ = try plan("fp2", base)                                                              // another file
        _ = try plan("fp1", PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps2, caps: phone))
        _ = try plan("fp1", PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps5, caps: tv))
        _ = try plan("fp1", PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps5, caps: phone,
                                          audioLanguage: "fra"))
        _ = try plan("fp1", PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps5, caps: nil))
        #expect(made.withLock { $0 } == 6)
    }

    @Test("a planning error is not remembered")
    func errorsAreNotCached() throws {
        let cache = PlanCache()
        let request = PrepareRequest(reference: "a", sourcePath: "/m/a.mkv", quality: .mbps5)
        #expect(throws: KilnError.self) {
            try cache.plan(fingerprint: "fp", request: request) { () throws(KilnError) -> Plan in
                throw KilnError(.qualityUnavailable, stage: .plan, "no")
            }
        }
        let p = try cache.plan(fingerprint: "fp", request: request) { () throws(KilnError) -> Plan in Self.plan("ok") }
        #expect(p.artifactKey == "ok")
    }
}
