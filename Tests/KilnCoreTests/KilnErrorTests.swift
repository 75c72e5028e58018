import Testing
@testable import KilnCore

/// The engine composes its messages as clauses ("the source is damaged …: the MP4 muxer
/// refuses …"); what a caller reads (the API's envelopes, the command's JSON) is one
/// sentence, and what only an operator can use stays out of it.
@Suite("Errors as callers read them")
struct KilnErrorTests {
    @Test("a clause becomes a sentence: the first word capitalised unless it is a name, a full stop added once")
    func sentences() {
        #expect(KilnError.sentence("the source is damaged (3 packets could not be decoded)")
                == "The source is damaged (3 packets could not be decoded).")
        #expect(KilnError.sentence("cannot write the output: Input/output error") == "Cannot write the output: Input/output error.")
        #expect(KilnError.sentence("caps: expected an object") == "Caps: expected an object.")
        // Names keep their case: an encoder, a caps field, an environment variable, a flag.
        #expect(KilnError.sentence("libx264 refused the settings") == "libx264 refused the settings.")
        #expect(KilnError.sentence("caps.max_h264_level must be a number") == "caps.max_h264_level must be a number.")
        #expect(KilnError.sentence("max_frame_rate must be positive") == "max_frame_rate must be positive.")
        #expect(KilnError.sentence("--output is required") == "--output is required.")
        // Already a sentence: unchanged.
        #expect(KilnError.sentence("Only a pending artifact can be canceled.") == "Only a pending artifact can be canceled.")
        #expect(KilnError.sentence("  is it? ") == "Is it?")
        #expect(KilnError.sentence("") == "")
    }

    @Test("the command's JSON and the API give the sentence; the detail (a database's path, a statement) only the log")
    func detailStaysOut() throws {
        let e = KilnError(.diskFull, stage: .write, underlying: 13, detail: "/var/lib/kiln/kiln.db, in: INSERT INTO jobs",
                          "the store's database says \"database or disk is full\" (SQLite error 13)")
        let json = String(decoding: try JSON.encode(e), as: UTF8.self)
        #expect(json.contains(#"The store's database says \"database or disk is full\" (SQLite error 13)."#), "\(json)")
        #expect(!json.contains("kiln.db") && !json.contains("INSERT"), "\(json)")
        #expect("\(e)".contains("/var/lib/kiln/kiln.db, in: INSERT INTO jobs"))
    }
}
