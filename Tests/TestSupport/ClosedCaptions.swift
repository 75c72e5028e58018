import Foundation

/// Recordings with CEA-608 closed captions in their pictures (ATSC A/53), as US broadcast
/// and cable recordings carry them. No encoder here writes captions of its own, so the
/// caption bytes are put in by hand: an A/53 `cc_data` per picture, two bytes of the caption
/// stream each, in an H.264 SEI message or MPEG-2 user data. A picture's bytes must be
/// read in display order while the stream is in decode order (B-frames): ffprobe's
/// `coded_picture_number` of each shown picture says which packet is which.
public enum ClosedCaptionSample {
    /// Pop-on captions: each is loaded off screen, shown at `start` (end of caption) and
    /// erased at `end`.
    public static let popOn: [(start: Double, end: Double, text: String)] = [
        (1, 3, "HELLO FROM CC"), (4, 6.5, "SECOND CAPTION"), (8, 10, "THIRD LINE"),
    ]
    /// Roll-up lines (two rows), one a second from `rollUpStart`; the last stays up to the end.
    public static let rollUp = ["ROLL ONE", "ROLL TWO", "ROLL THREE"]
    public static let rollUpStart = 10.5
    public static let seconds = 14.0
    static let rate = 30000.0 / 1001

    public enum Video: String, Sendable {
        case h264, hevc, mpeg2Interlaced = "mpeg2i"
        /// Interlaced MPEG-2 whose GOPs bring their frames' captions in their first picture's
        /// user data, as DVDs do (closed GOPs of 15 frames).
        case dvd
        /// Interlaced MPEG-2 with SCTE 20's caption user data (older US cable).
        case scte20
    }

    /// An MPEG-TS recording with AC-3 sound whose pictures carry the captions: H.264 or HEVC
    /// with B-frames, or interlaced MPEG-2 (an ATSC recording, or a DVD's layout). `delay`:
    /// seconds of caption padding before the captions (and the recording that much longer);
    /// `captioned` false: padding only, as stations send through programmes no one captioned.
    /// `cea708First`: each picture's cc_data begins with a CEA-708 packet's triplet, before
    /// the CEA-608 pairs (a layout some encoders write).
    /// `paintOn`: the captions are `paintOn`'s instead, painted on the screen as they come.
    /// `crowded`: field 1 also carries data channel 2's captions and channel 1's text
    /// service between the captions (`crowding`), and field 2 extended data.
    /// `dtvcc`: CEA-708 captions only (`DTVCCSample`), CEA-608's pairs all marked not valid.
    public static func recording(_ video: Video, delay: Double = 0, captioned: Bool = true, cea708First: Bool = false,
                                 paintOn: Bool = false, crowded: Bool = false, dtvcc: Bool = false) throws -> String {
        let seconds = Self.seconds + delay
        let name = "cc-\(video.rawValue)" + (delay > 0 ? "-late\(Int(delay))" : "") + (captioned ? "" : "-padding") + (cea708First ? "-708" : "")
            + (paintOn ? "-painton" : "") + (crowded ? "-crowded" : "") + (dtvcc ? "-dtvcc" : "")
        return try Media.generated("\(name).ts") { tmp in
            let scratch = Media.scratch(name)
            defer { try? FileManager.default.removeItem(at: scratch) }
            let ext = ["h264": "h264", "hevc": "hevc"][video.rawValue] ?? "m2v"
            let raw = scratch.appendingPathComponent("raw.\(ext)").path
            let encode: [String]
            switch video {
            case .h264: encode = ["-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", "60", "-x264-params", "aud=1"]
            case .hevc: encode = ["-c:v", "libx265", "-preset", "veryfast", "-x265-params", "aud=1:bframes=3:keyint=60:log-level=error"]
            case .mpeg2Interlaced, .dvd, .scte20:
                encode = ["-c:v", "mpeg2video", "-bf", "2", "-g", "15", "-b:v", "4M", "-flags", "+ildct+ilme+cgop", "-sc_threshold", "1000000000",
                          "-top", "1", "-vf", "setfield=tff"]
            }
            var r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i",
                                               "testsrc2=size=\(video == .h264 || video == .hevc ? "640x360" : "704x480"):rate=30000/1001",
                                               "-t", "\(seconds)", "-pix_fmt", "yuv420p"] + encode + [raw])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
            // Where each picture, in stream order, is shown.
            let shown = try displayOrder(raw, scratch: scratch)
            var pairs = !captioned ? Array(repeating: nil, count: shown.count)
                : paintOn ? paintOnPairs(pictures: shown.count) : bytePairs(pictures: shown.count, delay: delay)
            var field2 = [(UInt8, UInt8)?](repeating: nil, count: shown.count)
            if crowded { crowd(&pairs, &field2) }
            let packets = dtvcc ? DTVCCSample.triplets(pictures: shown.count) : []
            let cc = shown.map { dtvcc ? DTVCCSample.ccData(packets[$0]) : ccData(pairs[$0], field2: field2[$0], cea708First: cea708First) }
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
            let withCaptions: [UInt8]
            switch video {
            case .h264, .hevc: withCaptions = nalStream(bytes, cc, hevc: video == .hevc)
            case .mpeg2Interlaced: withCaptions = mpeg2(bytes, cc.map { [0, 0, 1, 0xB2] + Array("GA94".utf8) + [0x03] + $0 })
            // Top field first: field 1 is the first shown (number 1), and carries the captions.
            case .scte20: withCaptions = mpeg2(bytes, shown.map { scte20([(1, pairs[$0] ?? (0x80, 0x80)), (2, (0x80, 0x80))]) })
            case .dvd: withCaptions = dvd(bytes, pairs: pairs, shown: shown)
            }
            let es = scratch.appendingPathComponent("cc.\(ext)").path
            try Data(withCaptions).write(to: URL(fileURLWithPath: es))
            let mkv = try timed(es, scratch: scratch)
            r = try Run.command("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", mkv, "-f", "lavfi", "-i",
                                           "sine=frequency=440:sample_rate=48000:duration=\(seconds)",
                                           "-c:v", "copy", "-c:a", "ac3", "-f", "mpegts", tmp])
            guard r.status == 0 else { throw TestFailure("ffmpeg: \(r.stderr)") }
        }
    }

    /// The elementary stream in Matroska: mkvmerge times its pictures from their headers
    /// (the ffmpeg command cannot, with B-frames).
    static func timed(_ es: String, scratch: URL) throws -> String {
        let mkv = scratch.appendingPathComponent(URL(fileURLWithPath: es).deletingPathExtension().lastPathComponent + ".mkv").path
        let r = try Run.command("mkvmerge", ["-q", "-o", mkv, "--default-duration", "0:30000/1001p", es])
        guard r.status == 0 else { throw TestFailure("mkvmerge: \(r.stdout) \(r.stderr)") }
        return mkv
    }

    /// For each picture of an elementary stream, in stream order, its place in display
    /// order: the rank of its presentation time once timed.
    static func displayOrder(_ es: String, scratch: URL) throws -> [Int] {
        let r = try Run.command("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries", "packet=pts", "-of", "csv=p=0",
                                            try timed(es, scratch: scratch)])
        let pts = r.stdout.split(whereSeparator: \.isNewline).compactMap { Int($0.split(separator: ",").first ?? "") }
        guard r.status == 0, !pts.isEmpty else { throw TestFailure("ffprobe: \(r.stderr)") }
        let rank = Dictionary(uniqueKeysWithValues: pts.sorted().enumerated().map { ($1, $0) })
        return pts.map { rank[$0]! }
    }

    /// A QuickTime movie of the H.264 recording with its captions also in a track of their
    /// own (c608, as ffmpeg's caption reading gives them).
    public static func quickTimeTrack() throws -> String {
        let source = try recording(.h264)
        return try Media.generated("cc-c608.mov", ["-i", source, "-f", "lavfi", "-i", "movie=\(source)[out0+subcc]",
                                                   "-map", "0:v", "-map", "0:a", "-map", "1:s", "-c", "copy", "-f", "mov"])
    }

    /// The caption stream's byte pairs (data channel 1 of field 1) picture by picture in
    /// display order, nil where a picture carries none. Control codes go twice, as
    /// broadcasters send them.
    static func bytePairs(pictures: Int, delay: Double) -> [(UInt8, UInt8)?] {
        var pairs = [(UInt8, UInt8)?](repeating: nil, count: pictures)
        let control = { twice(0x14, $0) }, text = characters
        // The sequence's last control code acts at `seconds` (its repeat follows).
        func put(_ sequence: [(UInt8, UInt8)], actingAt seconds: Double) {
            place(sequence, from: frame(seconds + delay) - sequence.count + 2, in: &pairs)
        }
        // Pop-on: resume caption loading, row 15, the text, end of caption (which shows it).
        for cue in popOn {
            put(control(0x20) + control(0x70) + text(cue.text) + control(0x2F), actingAt: cue.start)
            put(control(0x2C), actingAt: cue.end)
        }
        // Roll-up, two rows: each line a carriage return (which rolls the rows up) and its text.
        for (k, line) in rollUp.enumerated() {
            put((k == 0 ? control(0x25) : []) + control(0x2D) + text(line), actingAt: rollUpStart + Double(k))
        }
        return pairs
    }

    /// Paint-on captions (resume direct captioning): each shows from its row's address at
    /// `start`, character by character, until erased at `end`; seconds of silence between.
    public static let paintOn: [(start: Double, end: Double, text: String)] = [
        (2, 4, "PAINTED ONE"), (6.5, 8.5, "PAINTED TWO"), (11, 13, "PAINTED THREE"),
    ]

    /// `paintOn`'s byte pairs, as `bytePairs` gives them: resume direct captioning and the
    /// row's address, then the text, whose first character shows at the caption's start;
    /// erase displayed memory at its end.
    static func paintOnPairs(pictures: Int) -> [(UInt8, UInt8)?] {
        var pairs = [(UInt8, UInt8)?](repeating: nil, count: pictures)
        for cue in paintOn {
            let before = twice(0x14, 0x29) + twice(0x14, 0x70)
            place(before + characters(cue.text), from: frame(cue.start) - before.count, in: &pairs)
            place(twice(0x14, 0x2C), from: frame(cue.end), in: &pairs)
        }
        return pairs
    }

    static func odd(_ b: UInt8) -> UInt8 { Teletext.oddParity(b) }

    /// A command as broadcasters send it: twice, with its parity.
    static func twice(_ hi: UInt8, _ lo: UInt8) -> [(UInt8, UInt8)] { let p = (odd(hi), odd(lo)); return [p, p] }

    /// The picture, in display order, shown at `seconds`.
    static func frame(_ seconds: Double) -> Int { Int((seconds * rate).rounded()) }

    /// `sequence` put in `pairs` from picture `first` on, as far as they go.
    static func place(_ sequence: [(UInt8, UInt8)], from first: Int, in pairs: inout [(UInt8, UInt8)?]) {
        for (k, p) in sequence.enumerated() where first + k < pairs.count { pairs[first + k] = p }
    }

    /// A/53 `cc_data` with field 1's pair and field 2's (or padding), after a CEA-708
    /// packet's start if asked.
    static func ccData(_ pair: (UInt8, UInt8)?, field2: (UInt8, UInt8)? = nil, cea708First: Bool = false) -> [UInt8] {
        let p = pair ?? (0x80, 0x80), q = field2 ?? (0x80, 0x80)
        let dtvcc: [UInt8] = cea708First ? [0xFF, 0x02, 0x21] : []
        return [0xC0 | UInt8(2 + dtvcc.count / 3), 0xFF] + dtvcc + [0xFC, p.0, p.1, 0xFD, q.0, q.1, 0xFF]
    }

    /// What `crowded` adds: in field 1, data channel 2's roll-up caption "OTHER CHANNEL" at
    /// 5 s and channel 1's text service "TEXT SERVICE" at 7 s (the captions' next loading
    /// turns the channel back); in field 2, extended data (a programme name) every 2 s and
    /// CC3's roll-up captions (`cc3`).
    public static let cc3: [(start: Double, end: Double, text: String)] = [(1.5, 3.5, "UNO"), (3.5, 6, "UNO DOS")]
    static func crowd(_ field1: inout [(UInt8, UInt8)?], _ field2: inout [(UInt8, UInt8)?]) {
        func place(_ sequence: [(UInt8, UInt8)], at seconds: Double, in pairs: inout [(UInt8, UInt8)?]) {
            Self.place(sequence, from: frame(seconds), in: &pairs)
        }
        place(twice(0x1C, 0x25) + twice(0x1C, 0x2D) + characters("OTHER CHANNEL"), at: 5, in: &field1)
        place(twice(0x14, 0x2A) + characters("TEXT SERVICE"), at: 7, in: &field1)
        // CC3: roll-up, two rows; a carriage return and a line at 1.5 s and 3.5 s, erased at 6 s.
        place(twice(0x15, 0x25) + twice(0x15, 0x2D) + characters("UNO"), at: 1.5, in: &field2)
        place(twice(0x15, 0x2D) + characters("DOS"), at: 3.5, in: &field2)
        place(twice(0x15, 0x2C), at: 6, in: &field2)
        for seconds in stride(from: 0.5, to: Self.seconds, by: 2) {
            place([(odd(0x01), odd(0x03))] + characters("NEWS AT NINE") + [(odd(0x0F), odd(0x1D))], at: seconds, in: &field2)
        }
    }

    /// Text as byte pairs with their parity, the last padded with a null.
    static func characters(_ text: String) -> [(UInt8, UInt8)] {
        var b = Array(text.utf8)
        if b.count % 2 == 1 { b.append(0) }
        return stride(from: 0, to: b.count, by: 2).map { (odd(b[$0]), odd(b[$0 + 1])) }
    }

    /// The Annex B stream with an SEI NAL unit (user data registered by ITU-T T.35, "GA94")
    /// before each picture's first slice: H.264's SEI (type 6), or HEVC's prefix SEI (39).
    static func nalStream(_ data: [UInt8], _ cc: [[UInt8]], hevc: Bool) -> [UInt8] {
        var out: [UInt8] = []
        var picture = -1
        for unit in annexBUnits(data) {
            // The slice (segment) that begins a picture: H.264's first_mb_in_slice 0 (its
            // ue(v) code is the single bit 1), HEVC's first_slice_segment_in_pic_flag.
            let first = hevc ? (unit[3] >> 1) & 0x3F < 32 && unit[5] & 0x80 != 0
                             : [1, 5].contains(unit[3] & 0x1F) && unit[4] & 0x80 != 0
            if first {
                picture += 1
                let payload: [UInt8] = [0xB5, 0x00, 0x31] + Array("GA94".utf8) + [0x03] + (picture < cc.count ? cc[picture] : ccData(nil))
                out += [0, 0, 1] + (hevc ? [39 << 1, 0x01] : [6]) + preventingEmulation([4, UInt8(payload.count)] + payload + [0x80])
            }
            out += unit
        }
        return out
    }

    /// The MPEG-2 stream with each picture's user data (`userData`, start code included)
    /// after its header and extensions.
    static func mpeg2(_ data: [UInt8], _ userData: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        var picture = -1, previous: UInt8 = 0
        for unit in annexBUnits(data) {
            let code = unit[3]
            if code == 0x00 { picture += 1 }
            // Before the first slice of a picture.
            if (0x01...0xAF).contains(code), !(0x01...0xAF).contains(previous) {
                out += picture < userData.count ? userData[picture] : []
            }
            previous = code
            out += unit
        }
        return out
    }

    /// SCTE 20's user data for one picture: type 3, a VBI flag, then bit-packed a count
    /// (5 bits) and per pair its priority (2), field number (2, in display order), line
    /// offset (5), the two bytes each least significant bit first, and a marker bit.
    public static func scte20(_ pairs: [(field: UInt8, bytes: (UInt8, UInt8))]) -> [UInt8] {
        var bits: [Bool] = []
        func put(_ value: UInt8, _ count: Int) { for k in stride(from: count - 1, through: 0, by: -1) { bits.append(value >> k & 1 == 1) } }
        func putReversed(_ byte: UInt8) { for k in 0..<8 { bits.append(byte >> k & 1 == 1) } }
        put(UInt8(pairs.count), 5)
        for (field, bytes) in pairs {
            put(0, 2); put(field, 2); put(11, 5); putReversed(bytes.0); putReversed(bytes.1); put(1, 1)
        }
        put(0, 4)   // no non-real-time video
        while bits.count % 8 != 0 { bits.append(false) }
        let packed = stride(from: 0, to: bits.count, by: 8).map { i in bits[i..<(i + 8)].reduce(UInt8(0)) { $0 << 1 | ($1 ? 1 : 0) } }
        return [0, 0, 1, 0xB2, 0x03, 0x81] + packed
    }

    /// The MPEG-2 stream with a DVD's caption user data after each GOP header: a block for
    /// each frame the GOP shows (closed GOPs: from its first picture to the next GOP's), a
    /// word for field 1 (the captions) and one for field 2 (padding) each.
    static func dvd(_ data: [UInt8], pairs: [(UInt8, UInt8)?], shown: [Int]) -> [UInt8] {
        let units = annexBUnits(data)
        // The pictures that open a GOP, by their number in the stream.
        var picture = -1, afterGOP = false
        var opening: [Int] = []
        for unit in units {
            if unit[3] == 0xB8 { afterGOP = true }
            if unit[3] == 0x00 {
                picture += 1
                if afterGOP { opening.append(picture < shown.count ? shown[picture] : 0) }
                afterGOP = false
            }
        }
        let starts = opening.sorted()
        var out: [UInt8] = []
        var gop = 0
        for unit in units {
            out += unit
            guard unit[3] == 0xB8, gop < starts.count else { continue }
            let frames = starts[gop]..<(gop + 1 < starts.count ? starts[gop + 1] : pairs.count)
            gop += 1
            var words: [UInt8] = []
            for shown in frames {
                let p = pairs[shown] ?? (0x80, 0x80)
                words += [0xFF, p.0, p.1, 0xFE, 0x80, 0x80]
            }
            out += [0, 0, 1, 0xB2, 0x43, 0x43, 0x01, 0xF8, 0x80 | UInt8(frames.count << 1)] + words
        }
        return out
    }

    /// Each unit from its start code (00 00 01) to the next.
    static func annexBUnits(_ data: [UInt8]) -> [[UInt8]] {
        var starts: [Int] = []
        var i = 0
        while i + 3 < data.count {
            if data[i] == 0, data[i + 1] == 0, data[i + 2] == 1 { starts.append(i); i += 3 } else { i += 1 }
        }
        return starts.enumerated().map { k, s in Array(data[s..<(k + 1 < starts.count ? starts[k + 1] : data.count)]) }
    }

    /// A NAL unit's payload with emulation prevention bytes put in (00 00 0x, x ≤ 3).
    public static func preventingEmulation(_ payload: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var zeros = 0
        for b in payload {
            if zeros >= 2, b <= 3 { out.append(3); zeros = 0 }
            out.append(b)
            zeros = b == 0 ? zeros + 1 : 0
        }
        return out
    }
}

/// CEA-708 captions (`ClosedCaptionSample.recording(dtvcc: true)`), as a caption encoder
/// writes them: service 1 in English with pop-on captions (a hidden window written, then
/// shown, then deleted), styling commands whose parameters look like text, Latin-1 and G2
/// characters, and roll-up lines in a visible two-row window; service 2 in Spanish with
/// pop-on captions; service 3 with nothing but spaces and commands.
public enum DTVCCSample {
    /// What each service shows (nil end: up to the recording's end), lines joined by a space.
    public static let service1: [(start: Double, end: Double?, text: String)] = [
        (1, 3, "HELLO FROM 708"), (4, 6.5, "CAFÉ ♪ “QUOTED” • DONE"),
        (8, 9, "ROLL ONE"), (9, 10, "ROLL ONE ROLL TWO"), (10, nil, "ROLL TWO ROLL THREE"),
    ]
    public static let service2: [(start: Double, end: Double?, text: String)] = [(2, 5, "HOLA"), (5.5, 7, "¿QUÉ TAL?")]

    /// Each command or run of text, by service, acting at its time (its packet's last
    /// triplet is in the picture shown then).
    public static var events: [(seconds: Double, service: UInt8, bytes: [UInt8])] {
        let spa: [UInt8] = [0x90, 0x05, 0x41], spc: [UInt8] = [0x91, 0x2A, 0x41, 0x42], swa: [UInt8] = [0x97, 0x20, 0x41, 0x42, 0x43]
        let c2: [UInt8] = [0x10, 0x08, 0x41], c3: [UInt8] = [0x10, 0x90, 0x03, 0x41, 0x42, 0x43]
        return [
            (0.5, 1, window(1, visible: false, rows: 2, top: 80) + spa + spc + [0x92, 0, 0] + text("HELLO FROM 708") + [0x03]),
            (1, 1, [0x89, 0x02]),
            (1.8, 2, window(0, visible: false, rows: 1, top: 80) + text("HOLA")),
            (2, 2, [0x89, 0x01]),
            (2.5, 3, window(0, visible: true, rows: 1, top: 10) + text("   ") + spa),
            (3, 1, [0x8C, 0x02]),
            (3.5, 1, window(2, visible: false, rows: 2, top: 80) + swa + text("CAFÉ ♪") + [0x0D] + c2 + text("“QUOTED” • DONE") + c3),
            (4, 1, [0x89, 0x04]),
            (5, 2, [0x88, 0x01]),
            (5.3, 2, window(0, visible: false, rows: 1, top: 80) + text("¿QUÉ TAL?")),
            (5.5, 2, [0x89, 0x01]),
            (6.5, 1, [0x8C, 0x04]),
            (7, 2, [0x8C, 0x01]),
            (8, 1, window(0, visible: true, rows: 2, top: 90) + text("ROLL ONE")),
            (9, 1, [0x0D] + text("ROLL TWO")),
            (10, 1, [0x0D] + text("ROLL THREE")),
        ]
    }

    /// DefineWindow n: visibility, relative vertical anchor `top` (percent), row count, 32 columns.
    public static func window(_ n: UInt8, visible: Bool, rows: UInt8, top: UInt8) -> [UInt8] {
        [0x98 | n, visible ? 0x20 : 0, 0x80 | top, 0, rows - 1, 31, 0]
    }

    /// Text in CEA-708's sets: ASCII (G0), Latin-1 (G1), the music note (0x7F), and G2's
    /// quotes and bullet behind EXT1.
    public static func text(_ s: String) -> [UInt8] {
        s.unicodeScalars.flatMap { c -> [UInt8] in
            switch c {
            case "♪": return [0x7F]
            case "“": return [0x10, 0x33]
            case "”": return [0x10, 0x34]
            case "•": return [0x10, 0x35]
            default: return [UInt8(c.value)]
            }
        }
    }

    /// A caption channel packet holding `bytes` for `service`, in blocks of at most 31
    /// bytes (a command may be cut between two), padded to its even length.
    public static func packet(service: UInt8, _ bytes: [UInt8], sequence: UInt8) -> [UInt8] {
        var body: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: 31) {
            let chunk = bytes[start..<min(bytes.count, start + 31)]
            body += [service << 5 | UInt8(chunk.count)] + chunk
        }
        if body.count % 2 == 0 { body.append(0) }
        precondition(body.count < 128)
        let size = body.count + 1
        return [sequence << 6 | UInt8(size == 128 ? 0 : size / 2)] + body
    }

    /// A packet as cc_data triplets: its start (cc_type 3), then its data (2).
    public static func triplets(of packet: [UInt8]) -> [UInt8] {
        stride(from: 0, to: packet.count, by: 2).flatMap { i in [i == 0 ? 0xFF : 0xFE, packet[i], packet[i + 1]] as [UInt8] }
    }

    /// Each picture's CEA-708 triplets (display order), at most eight.
    static func triplets(pictures: Int) -> [[UInt8]] {
        var out = [[UInt8]](repeating: [], count: pictures)
        let perPicture = 8
        for (k, event) in events.enumerated() {
            let all = triplets(of: packet(service: event.service, event.bytes, sequence: UInt8(k % 4)))
            let count = all.count / 3
            let first = ClosedCaptionSample.frame(event.seconds) - (count - 1) / perPicture
            for i in 0..<count {
                let picture = first + i / perPicture
                precondition(out[picture].count < perPicture * 3, "packets overlap at picture \(picture)")
                out[picture] += all[(i * 3)..<(i * 3 + 3)]
            }
        }
        return out
    }

    /// A/53 `cc_data`: CEA-608's two pairs marked not valid, the picture's CEA-708 triplets,
    /// and padding (not valid) to the same count in every picture.
    static func ccData(_ triplets: [UInt8]) -> [UInt8] {
        let padding = Array(repeating: [0xFA, 0x00, 0x00] as [UInt8], count: 8 - triplets.count / 3).flatMap { $0 }
        return [0xC0 | 10, 0xFF, 0xF8, 0x80, 0x80, 0xF9, 0x80, 0x80] + triplets + padding + [0xFF]
    }
}
