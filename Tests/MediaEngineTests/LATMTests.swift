import Foundation
import Testing
import KilnCore
import KilnTestSupport
@testable import MediaEngine

@Suite("AAC in LATM framing (DVB-T2, ISDB-Tb broadcasts)")
struct LATMTests {
    /// The sound decoded by the ffmpeg command, as the MD5 of its 16-bit samples.
    static func decodedSound(_ path: String) throws -> String {
        let r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-i", path, "-map", "0:a", "-c:a", "pcm_s16le", "-f", "md5", "-"])
        guard r.status == 0 else { throw TestFailure("ffmpeg md5: \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func copyPlan(_ info: MediaInfo) throws -> Plan {
        var plan = try #require(EnginePlans.remux(info))
        let sound = try #require(info.audioStreams.first)
        plan.audio = AudioPlan(sourceIndex: sound.index, action: .copy, codec: "aac", channels: sound.channels ?? 2, bitrateKbps: 0)
        return plan
    }

    @Test("a copy takes each frame out of LATM bit for bit: the output is AAC in MP4 whose decoded samples are the source's, in stereo and 5.1 (it could not be copied: no bitstream filter, the ffmpeg command re-encodes)",
          arguments: [2, 6])
    func unwrapped(channels: Int) throws {
        let path = try Media.soundRecording("aac", channels: [channels], latm: true)
        let info = try Prober.probe(path: path)
        #expect(info.audioStreams.first?.codec == "aac_latm")
        let dir = Media.scratch("latm-\(channels)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: try Self.copyPlan(info), info: info, output: out)
        #expect(result.stats.adjustments == nil, "\(result.stats.adjustments ?? [])")
        let audio = try FFprobe(out).streams("audio")
        #expect(audio.count == 1 && audio.first?["codec_name"] == .string("aac") && audio.first?["channels"]?.int == channels, "\(audio)")
        #expect(try Self.decodedSound(out) == Self.decodedSound(path))
        // The index forecast (a second reader muxing ahead) takes the frames out alike: the
        // hash made while writing is the file's.
        let opened = try Prober.open(path: path, secondReaderFrom: .always)
        let forecast = dir.appendingPathComponent("forecast.mp4").path
        let ahead = try Preparer.prepare(source: opened, plan: try Self.copyPlan(opened.info), output: forecast,
                                         forecastFrom: .always, awaitForecast: true)
        #expect(ahead.stats.hashedWhileWriting, "the forecast held")
        #expect(ahead.output.sha256 == String(try Run.command("sha256sum", [forecast]).stdout.prefix(64)))
    }

    @Test("a recording whose LATM sound goes from stereo to 5.1: the probe's samples find the change (it probed as stereo), and a copy planned anyway stops at the new configuration and re-encodes the sound in 5.1, said in the adjustments")
    func configurationChange() throws {
        let path = try Media.soundRecording("aac", channels: [2, 6], latm: true)
        let info = try Prober.probe(path: path)
        let sound = try #require(info.audioStreams.first)
        #expect(sound.channels == 6 && sound.formatChanges == true, "\(sound)")
        let dir = Media.scratch("latm-change")
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("out.mp4").path
        let result = try Preparer.prepare(source: path, plan: try Self.copyPlan(info), info: info, output: out)
        let said = result.stats.adjustments ?? []
        #expect(said.contains { $0.hasPrefix("audio_reencoded:") && $0.contains("changes from stereo 48000 Hz to 5.1 48000 Hz") }, "\(said)")
        let audio = try FFprobe(out).streams("audio")
        #expect(audio.count == 1 && audio.first?["channels"]?.int == 6, "\(audio)")
        #expect(try FFprobe(out).duration("audio").map { abs($0 - 16) < 0.2 } == true)
    }
}

@Suite("LATM frames read bit by bit")
struct LATMFramesTests {
    /// Writes bits most significant first.
    struct Writer {
        var bytes: [UInt8] = []
        var count = 0
        mutating func put(_ value: Int, _ bits: Int) {
            for k in stride(from: bits - 1, through: 0, by: -1) {
                if count % 8 == 0 { bytes.append(0) }
                if (value >> k) & 1 == 1 { bytes[bytes.count - 1] |= 0x80 >> UInt8(count % 8) }
                count += 1
            }
        }
        mutating func put(_ bytes: [UInt8]) { for b in bytes { put(Int(b), 8) } }
    }

    /// A LOAS sync frame around an AudioMuxElement `body` writes.
    static func loas(_ body: (inout Writer) -> Void) -> [UInt8] {
        var element = Writer()
        body(&element)
        var frame = Writer()
        frame.put(0x2B7, 11)
        frame.put(element.bytes.count, 13)
        frame.put(element.bytes)
        return frame.bytes
    }

    /// LC stereo at 48 kHz: object type 2, rate index 3, channel configuration 2, then
    /// GASpecificConfig's three zero flags.
    static func lcStereo(_ w: inout Writer) {
        w.put(2, 5); w.put(3, 4); w.put(2, 4); w.put(0, 3)
    }

    static let payload: [UInt8] = [0x21, 0x10, 0x05, 0x00, 0xA0, 0x19, 0x33, 0xFF, 0x80]

    static func unwrap(_ bytes: [UInt8], into frames: inout LATMFrames) -> LATMFrames.Unwrapped {
        bytes.withUnsafeBufferPointer { frames.unwrap($0) }
    }

    @Test("version 0 (as ffmpeg's and most broadcasters' muxers write it): the configuration and the payload, neither on a byte boundary, come out whole; a frame that repeats none uses the last one")
    func versionZero() throws {
        let first = Self.loas { w in
            w.put(0, 1)  // useSameStreamMux
            w.put(0, 1); w.put(1, 1); w.put(0, 6); w.put(0, 4); w.put(0, 3)  // version, same framing, subframes, programmes, layers
            Self.lcStereo(&w)
            w.put(0, 3); w.put(0xFF, 8); w.put(0, 1); w.put(0, 1)  // frameLengthType, buffer fullness, other data, CRC
            w.put(Self.payload.count, 8)
            w.put(Self.payload)
        }
        var frames = LATMFrames()
        let config = LATMFrames.Configuration(audioSpecificConfig: [0x11, 0x90], sampleRate: 48000, channels: 2)
        #expect(Self.unwrap(first, into: &frames) == .frame(Self.payload, config))
        let next = Self.loas { w in
            w.put(1, 1)
            w.put(255, 8); w.put(1, 8)  // a length of 256 bytes, in a run of 255
            w.put([UInt8](repeating: 0x5A, count: 256))
        }
        #expect(Self.unwrap(next, into: &frames) == .frame([UInt8](repeating: 0x5A, count: 256), config))
        var fresh = LATMFrames()
        #expect(Self.unwrap(next, into: &fresh) == .unconfigured)
        var seeded = LATMFrames(configuration: config)
        #expect(Self.unwrap(next, into: &seeded) == .frame([UInt8](repeating: 0x5A, count: 256), config))
    }

    @Test("version 1 with HE-AAC signalled explicitly (object type 5 at 48 kHz over LC at 24 kHz), a stated configuration length with bits past the config kept, other data and a CRC: the output rate is SBR's, the configuration is every stated bit")
    func versionOneExplicitSBR() throws {
        var asc = Writer()
        asc.put(5, 5); asc.put(6, 4); asc.put(2, 4)  // SBR, 24 kHz core, stereo
        asc.put(3, 4); asc.put(2, 5)  // extension rate 48 kHz, core object type LC
        asc.put(0, 3)  // GASpecificConfig
        asc.put(0b101, 3)  // three bits of what follows, kept as stated
        let frame = Self.loas { w in
            w.put(0, 1)
            w.put(1, 1); w.put(0, 1)  // audioMuxVersion 1, versionA 0
            w.put(0, 2); w.put(0x12, 8)  // taraBufferFullness, one byte
            w.put(1, 1); w.put(0, 6); w.put(0, 4); w.put(0, 3)
            w.put(0, 2); w.put(asc.count, 8)  // ascLen
            w.put(Array(asc.bytes.prefix(3))); w.put(Int(asc.bytes[3]) >> 4, 4)  // its 28 bits
            w.put(0, 3); w.put(0xFF, 8)
            w.put(1, 1); w.put(0, 2); w.put(16, 8)  // other data, 16 bits
            w.put(1, 1); w.put(0xAB, 8)  // CRC
            w.put(Self.payload.count, 8)
            w.put(Self.payload)
            w.put(0xBEEF, 16)  // the other data
        }
        #expect(asc.count == 28)
        var frames = LATMFrames()
        #expect(Self.unwrap(frame, into: &frames) == .frame(Self.payload, .init(audioSpecificConfig: asc.bytes, sampleRate: 48000, channels: 2)))
    }

    @Test("layouts an MP4 track cannot take as they are are refused with why (several subframes, a program config element, an error-resilient object type); cut or foreign bytes are damage")
    func refusedAndDamaged() throws {
        func config(subFrames: Int = 0, objectType: Int = 2, channels: Int = 2) -> [UInt8] {
            Self.loas { w in
                w.put(0, 1); w.put(0, 1); w.put(1, 1); w.put(subFrames, 6); w.put(0, 4); w.put(0, 3)
                w.put(objectType, 5); w.put(3, 4); w.put(channels, 4); w.put(0, 3)
                w.put(0, 3); w.put(0xFF, 8); w.put(0, 1); w.put(0, 1)
                w.put(Self.payload.count, 8); w.put(Self.payload)
            }
        }
        for (bytes, word) in [(config(subFrames: 1), "subframes"), (config(channels: 0), "program config element"),
                              (config(objectType: 23), "object type 23")] {
            var frames = LATMFrames()
            guard case .unsupported(let why) = Self.unwrap(bytes, into: &frames) else { Issue.record("\(word): not refused"); continue }
            #expect(why.contains(word), "\(why)")
        }
        var twice = LATMFrames()
        #expect(Self.unwrap(config() + config(), into: &twice) == .unsupported("several LATM frames in one packet"))
        var frames = LATMFrames()
        let whole = config()
        #expect(Self.unwrap(Array(whole.dropLast(3)), into: &frames) == .damaged)
        #expect(Self.unwrap([0xFF, 0xF1, 0x50, 0x80, 0x02, 0x1F, 0xFC], into: &frames) == .damaged)
        #expect(Self.unwrap([], into: &frames) == .damaged)
        if case .frame = Self.unwrap(whole, into: &frames) {} else { Issue.record("the whole frame did not read") }
    }
}
