import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import KilnAPI

/// What an operator writes in `kiln serve`'s settings, and what the daemon makes of it
/// (found by an audit of Kiln as an operator installs and runs it).
@Suite("daemon configuration")
struct DaemonConfigTests {
    func file(_ name: String, _ text: String) throws -> URL {
        let dir = Media.scratch("config-\(name)")
        let url = dir.appendingPathComponent("kiln.env")
        try Data(text.utf8).write(to: url)
        return url
    }

    @Test("a settings file saved with Windows line endings is read as written: it was one line, a comment, and the daemon started on its defaults (another data folder, no token) without a word")
    func windowsLineEndings() throws {
        let url = try file("crlf", "# kiln\r\nKILN_LISTEN=127.0.0.1:8498\r\nKILN_TOKEN=s3cret\r\nKILN_DATA_DIR=/srv/kiln\r\n")
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        let config = try DaemonConfig.load(environment: [:], file: url.path)
        #expect(config.port == 8498 && config.token == "s3cret" && config.farm.dataDir == "/srv/kiln")
    }

    @Test("a KILN_ name kiln does not read is refused, naming the setting it was surely meant to be: a typo had been ignored and the default used")
    func misspeltSettings() throws {
        let url = try file("typo", "KILN_MAX_TRANSCODE=4\n")
        defer { try? FileManager.default.removeItem(at: url.deletingLastPathComponent()) }
        func refusal(_ environment: [String: String], file: String? = nil) -> KilnError? {
            do { _ = try DaemonConfig.load(environment: environment, file: file); return nil } catch { return error }
        }
        let inFile = try #require(refusal([:], file: url.path))
        #expect(inFile.code == .usage && inFile.field == "KILN_MAX_TRANSCODE"
                && inFile.message.contains("did you mean KILN_MAX_TRANSCODES?") && inFile.message.contains(url.path), "\(inFile)")
        let inEnvironment = try #require(refusal(["KILN_RETENTION_SECOND": "0"]))
        #expect(inEnvironment.message.contains("did you mean KILN_RETENTION_SECONDS?"), "\(inEnvironment)")
        // The child's own name, which the unit file once named for the daemon.
        let child = try #require(refusal(["KILN_NICE": "19"]))
        #expect(child.message.contains("KILN_CHILD_NICE"), "\(child)")
        // In the settings file every KILN_ name must be one; the environment may hold a
        // wrapper's or a test's own, far from any setting.
        let stranger = try file("stranger", "KILN_SHARED_MEDIA=/x\n")
        defer { try? FileManager.default.removeItem(at: stranger.deletingLastPathComponent()) }
        #expect(refusal([:], file: stranger.path)?.field == "KILN_SHARED_MEDIA")
        #expect(refusal(["KILN_SHARED_MEDIA": "/x", "PATH": "/bin"]) == nil)
        // Every setting kiln reads is accepted, in the file as in the environment.
        let every = try file("every", DaemonConfig.settingNames.sorted().map { "\($0)=\n" }.joined())
        defer { try? FileManager.default.removeItem(at: every.deletingLastPathComponent()) }
        #expect(refusal([:], file: every.path) == nil)
    }

    @Test("a webhook without its secret is refused: its events went signed with an empty key, which anyone can forge")
    func webhookNeedsSecret() throws {
        do {
            _ = try DaemonConfig.load(environment: ["KILN_WEBHOOK_URL": "http://127.0.0.1:9/hook"], file: nil)
            Issue.record("a webhook without a secret was accepted")
        } catch {
            #expect(error.code == .usage && error.field == "KILN_WEBHOOK_SECRET", "\(error)")
        }
        let config = try DaemonConfig.load(environment: ["KILN_WEBHOOK_URL": "http://127.0.0.1:9/hook", "KILN_WEBHOOK_SECRET": "k"], file: nil)
        #expect(config.webhookSecret == "k")
    }

    @Test("the log names a webhook without the credentials its URL carries (the journal keeps them for anyone who reads it)")
    func webhookCredentialsHidden() throws {
        let url = try #require(URL(string: "https://hookuser:pw-secret@example.net:8443/hook/kiln?token=qs-secret"))
        let shown = WebhookDeliverer.shown(url)
        #expect(!shown.contains("pw-secret") && !shown.contains("qs-secret") && !shown.contains("hookuser"), "\(shown)")
        #expect(shown.hasPrefix("https://example.net:8443/hook/kiln") && shown.contains("credentials not shown"), "\(shown)")
        #expect(WebhookDeliverer.shown(try #require(URL(string: "http://127.0.0.1:8499/hook"))) == "http://127.0.0.1:8499/hook")
    }
}
