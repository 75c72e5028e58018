#if canImport(Glibc)
import Glibc
#endif
import CFFmpeg

/// CEA-608 closed captions carried inside the pictures, as ATSC A/53 puts them: US
/// broadcast, cable and satellite recordings. Each picture brings a few byte pairs of the
/// caption stream in its user data: an H.264 or HEVC SEI message (ITU-T T.35, "GA94"),
/// or MPEG-2 user data after the picture header. MP4 players show none of it (AVFoundation
/// and ExoPlayer read captions from a subtitle track, not from the pictures), so Kiln turns
/// them into a `mov_text` track (`SubtitleLane`) through libavcodec's caption decoder,
/// which takes the A/53 `cc_data` triplets this finds, in presentation order
/// (`PresentationOrder`). DVDs put a GOP's captions in its first picture's MPEG-2 user
/// data in a layout of their own (`fromDVD`), and older US cable MPEG-2 in SCTE 20's
/// (`fromSCTE20`): both read too.
enum ClosedCaptions {
    /// The `cc_data` triplets (marker, validity and type in one byte, then two bytes of the
    /// caption stream) in one picture's packet, in the order written; empty when it has none.
    /// `lengthSize`: H.264/HEVC NAL units' length prefix (0: Annex B start codes).
    static func triplets(in data: UnsafeBufferPointer<UInt8>, codec: AVCodecID, lengthSize: Int) -> [UInt8] {
        frames(in: data, codec: codec, lengthSize: lengthSize).flatMap { $0 }
    }

    /// The triplets in one picture's packet, frame by frame: the picture's own, or (a DVD's
    /// GOP) those of each frame from this picture on.
    static func frames(in data: UnsafeBufferPointer<UInt8>, codec: AVCodecID, lengthSize: Int) -> [[UInt8]] {
        var found: [UInt8] = []
        var dvd: [[UInt8]] = []
        switch codec {
        case AV_CODEC_ID_H264, AV_CODEC_ID_HEVC:
            // SEI: H.264 type 6 (one header byte), HEVC prefix SEI 39 (two). All of a packet's
            // are read: one may hold a pair of field pictures, each with its own.
            let h264 = codec == AV_CODEC_ID_H264
            let header = h264 ? 1 : 2
            NALUnits.forEach(in: data, lengthSize: lengthSize) { unit in
                if unit.count > header, NALUnits.type(of: unit[0], h264: h264) == (h264 ? 6 : 39) { found += fromSEI(rbsp(unit.dropFirst(header))) }
            }
        case AV_CODEC_ID_MPEG2VIDEO, AV_CODEC_ID_MPEG1VIDEO:
            // user_data (start code 0xB2), up to the next start code: after each picture
            // header of the packet (a pair of field pictures has two), and after the
            // picture coding extension, whose top_field_first SCTE 20 needs.
            var topFieldFirst = true
            // Cable streams may carry the same captions both ways: SCTE 20's count only
            // where the packet has no A/53 ones, or every character would come twice.
            var scte20: [UInt8] = []
            var at = AnnexB.unitStart(in: data, from: 0)
            while let i = at {
                let next = AnnexB.unitStart(in: data, from: i + 1)
                // (Zeros before the next start code are stuffing, left in: the readers count
                // what they read.)
                let end = next.map { $0 - 3 } ?? data.count
                if data[i] == 0xB5, i + 4 < end, data[i + 1] >> 4 == 8 {
                    // Frame pictures say; a field picture is counted top first, as most are.
                    topFieldFirst = data[i + 3] & 3 != 3 || data[i + 4] & 0x80 != 0
                }
                guard data[i] == 0xB2 else { at = next; continue }
                let body = Array(data[(i + 1)..<max(i + 1, end)])
                if body.starts(with: gaIdentifier), body.count > 4, body[4] == 3 { found += ccData(body[5...]) }
                if body.starts(with: dvdIdentifier) { dvd += fromDVD(body[dvdIdentifier.count...]) }
                if body.count > 2, body[0] == 3, body[1] & 0x7F == 1 { scte20 += fromSCTE20(body[2...], topFieldFirst: topFieldFirst) }
                at = next
            }
            // (A/53 user data with no CEA-608 in it, only CEA-708, leaves SCTE 20's to read.)
            if !carry608(found), !scte20.isEmpty { found = scte20 }
        default: break
        }
        return dvd.isEmpty ? (found.isEmpty ? [] : [found]) : dvd
    }

    /// Whether `triplets` carry CEA-608 (a valid field 1 or field 2 pair): what the caption
    /// decoder reads. CEA-708's own packets, alone, it cannot.
    static func carry608(_ triplets: [UInt8]) -> Bool {
        stride(from: 0, to: triplets.count - 2, by: 3).contains { triplets[$0] & 0x04 != 0 && triplets[$0] & 0x03 < 2 }
    }

    /// Whether `triplets` carry a CEA-708 packet's bytes (valid, cc_type 2 or 3).
    static func carry708(_ triplets: [UInt8]) -> Bool {
        stride(from: 0, to: triplets.count - 2, by: 3).contains { triplets[$0] & 0x04 != 0 && triplets[$0] & 0x03 >= 2 }
    }

    /// One triplet's CEA-608 pair as libavcodec's caption decoder takes it from `field`
    /// (its `data_field`, the triplets' cc_type), parity bits stripped: nil where it drops
    /// the pair (another field, not valid, a second byte that fails its odd parity,
    /// padding); a first byte that fails its parity reads as a solid block (0x7F).
    static func decoderPair(_ marker: UInt8, _ first: UInt8, _ second: UInt8, field: UInt8) -> (hi: UInt8, lo: UInt8)? {
        guard marker & 0x07 == 0x04 | field, second.nonzeroBitCount % 2 == 1 else { return nil }
        let lo = second & 0x7F
        if [0xFA, 0xFC, 0xFD].contains(marker), first & 0x7F == 0, lo == 0 { return nil }
        return (first.nonzeroBitCount % 2 == 1 ? first & 0x7F : 0x7F, lo)
    }

    /// Whether a caption service's triplets (`CaptionChannel.kept`) carry characters, not
    /// only commands: stations send erases and padding through programmes no one captioned.
    static func carryText(_ kept: [UInt8]) -> Bool {
        stride(from: 0, to: kept.count - 2, by: 3).contains { kept[$0 + 1] & 0x7F >= 0x20 }
    }

    /// "GA94", ATSC's user identifier.
    private static let gaIdentifier: [UInt8] = [0x47, 0x41, 0x39, 0x34]
    /// "CC", a DVD's caption user data, its type (1) and block size (0xF8).
    private static let dvdIdentifier: [UInt8] = [0x43, 0x43, 0x01, 0xF8]

    /// A DVD's captions as A/53 triplets, frame by frame. After the identifier, a byte:
    /// which field comes first (bit 7), how many frames' blocks follow (bits 5 to 1, a word
    /// for each field) and whether one more word does (bit 0). Each word: a marker byte
    /// (seven 1 bits, then a field bit many discs get wrong), then two bytes of the caption
    /// stream. The words alternate fields, beginning with the one the first byte names.
    static func fromDVD(_ bytes: ArraySlice<UInt8>) -> [[UInt8]] {
        guard let header = bytes.first else { return [] }
        let words = Int((header >> 1) & 0x1F) * 2 + Int(header & 1)
        var field1 = header & 0x80 != 0
        var frames: [[UInt8]] = []
        var at = bytes.startIndex + 1
        for word in 0..<words {
            guard at + 3 <= bytes.endIndex, bytes[at] & 0xFE == 0xFE else { break }
            // Valid, NTSC field 1 (cc_type 0) or field 2 (1).
            let triplet: [UInt8] = [field1 ? 0xFC : 0xFD, bytes[at + 1], bytes[at + 2]]
            if word % 2 == 0 { frames.append(triplet) } else { frames[frames.count - 1] += triplet }
            field1.toggle()
            at += 3
        }
        return frames
    }

    /// SCTE 20's captions (older US cable MPEG-2) as A/53 triplets. After its type code (3)
    /// and a byte whose low seven bits say VBI data follows (1), bit-packed: a count (5
    /// bits), then per pair its priority (2), field number (2), line offset (5), the two
    /// bytes of the caption stream each sent least significant bit first, and a marker bit.
    /// The field number counts in display order (1 first, 2 second, 3 the first repeated by
    /// 3:2 pulldown): field 1 of a top-field-first picture, field 2 of a bottom-first one.
    /// Number 0 is forbidden: its pair is left out.
    static func fromSCTE20(_ bytes: ArraySlice<UInt8>, topFieldFirst: Bool) -> [UInt8] {
        bytes.withUnsafeBufferPointer { buffer in
            var bits = Bits(buffer)
            guard let count = bits.read(5) else { return [] }
            var found: [UInt8] = []
            for _ in 0..<count {
                guard bits.read(2) != nil, let number = bits.read(2), bits.read(5) != nil,
                      let a = bits.read(8), let b = bits.read(8), bits.read(1) != nil else { break }
                guard number != 0 else { continue }
                let second = (number == 2) == topFieldFirst
                found += [second ? 0xFD : 0xFC, reversedBits(UInt8(a)), reversedBits(UInt8(b))]
            }
            return found
        }
    }

    /// `byte` with its bit order reversed.
    static func reversedBits(_ byte: UInt8) -> UInt8 {
        (0..<8).reduce(UInt8(0)) { $0 << 1 | (byte >> $1 & 1) }
    }

    /// The triplets in an SEI NAL unit's payload (emulation prevention removed): its
    /// `user_data_registered_itu_t_t35` messages (type 4) from the US (country 0xB5) under
    /// ATSC's provider code with "GA94", or DirecTV's, which leaves the identifier out.
    static func fromSEI(_ sei: [UInt8]) -> [UInt8] {
        var found: [UInt8] = []
        var i = 0
        // Each message: its type and size, each a run of 0xFF bytes plus a last byte. The
        // RBSP's stop bit (0x80) is the last byte, less than a message's two.
        while i + 1 < sei.count {
            var type = 0, size = 0
            while i < sei.count, sei[i] == 0xFF { type += 255; i += 1 }
            guard i < sei.count else { break }
            type += Int(sei[i]); i += 1
            while i < sei.count, sei[i] == 0xFF { size += 255; i += 1 }
            guard i < sei.count else { break }
            size += Int(sei[i]); i += 1
            guard size <= sei.count - i else { break }
            let payload = sei[i..<(i + size)]
            i += size
            guard type == 4, payload.count > 4, payload.first == 0xB5 else { continue }
            let provider = Int(payload[payload.startIndex + 1]) << 8 | Int(payload[payload.startIndex + 2])
            var rest = payload.dropFirst(3)
            switch provider {
            case 0x31:
                guard rest.starts(with: gaIdentifier) else { continue }
                rest = rest.dropFirst(4)
            case 0x2F: break
            default: continue
            }
            // user_data_type_code 3: cc_data.
            guard rest.first == 3 else { continue }
            found += ccData(rest.dropFirst())
        }
        return found
    }

    /// A53's `cc_data()`: a byte with process_cc_data_flag and cc_count, a reserved byte,
    /// then cc_count triplets. Nothing when the flag says not to process them.
    static func ccData(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        guard let flags = bytes.first, flags & 0x40 != 0 else { return [] }
        let count = Int(flags & 0x1f)
        let start = bytes.startIndex + 2
        guard count > 0, start + count * 3 <= bytes.endIndex else { return [] }
        return Array(bytes[start..<(start + count * 3)])
    }

    /// A NAL unit's payload with its emulation prevention bytes (00 00 03) taken out.
    static func rbsp(_ unit: UnsafeBufferPointer<UInt8>.SubSequence) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(unit.count)
        var zeros = 0
        for byte in unit {
            if zeros >= 2, byte == 3 { zeros = 0; continue }
            zeros = byte == 0 ? zeros + 1 : 0
            out.append(byte)
        }
        return out
    }
}

/// What the probe learns of a video stream's caption services, picture by picture: which
/// carry text (CC1, CC3: `CaptionChannel`; CEA-708's SERVICE1, SERVICE2, …: `DTVCCService`),
/// and whether there was caption padding at least. CEA-708's services are named only where
/// no CEA-608 service has text: stations send the same captions both ways, and libavcodec's
/// CEA-608 reading is the one the ffmpeg command can check.
struct CaptionSurvey {
    private var services = [("CC1", CaptionChannel(field: 0)), ("CC3", CaptionChannel(field: 1))]
    /// The services with text so far, in service order.
    var found: [String] {
        let cea608 = services.map(\.0).filter(seen.contains)
        return !cea608.isEmpty ? cea608 : dtvccServices.keys.sorted().filter { dtvccServices[$0]!.wroteText }.map { "SERVICE\($0)" }
    }
    private var seen: Set<String> = []
    private(set) var padding = false
    var complete: Bool { seen.count == services.count }
    private var dtvcc = DTVCCPackets()
    private var dtvccServices: [Int: DTVCCService] = [:]
    /// CEA-708's packets run across pictures, so they are read in display order, as the
    /// lane reads them (`CaptionReader`), not in the stream's decode order.
    private var order = PresentationOrder<[UInt8]>()

    /// Reads one picture's triplets, shown at `time` (nil: read as they come).
    mutating func read(_ triplets: [UInt8], at time: Int64?) {
        guard !triplets.isEmpty else { return }
        guard let time else { return survey(triplets) }
        for picture in order.add(triplets, at: time) { survey(picture.item) }
    }

    /// Reads the pictures still waiting for their turn.
    mutating func finish() {
        for picture in order.drain() { survey(picture.item) }
    }

    private mutating func survey(_ triplets: [UInt8]) {
        for k in services.indices where !seen.contains(services[k].0) {
            if ClosedCaptions.carryText(services[k].1.kept(triplets)) { seen.insert(services[k].0) }
        }
        if ClosedCaptions.carry608(triplets) || ClosedCaptions.carry708(triplets) { padding = true }
        for block in dtvcc.read(triplets) where dtvccServices[block.service] != nil || dtvccServices.count < 8 {
            _ = dtvccServices[block.service, default: DTVCCService()].read(block.data, at: 0)
        }
    }
}

/// One caption service of a CEA-608 field: its data channel 1's captions (CC1 in field 1,
/// CC3 in field 2). A field carries two data channels, each with captions and a text
/// service, and field 2 extended data services (XDS: the programme's name, rating, …) as
/// well; libavcodec's caption decoder reads a whole field as one, so another channel's or
/// service's characters, erases, ends of caption and returns land on the captions' screen.
/// Commands (first byte 0x10–0x1F) name their channel (bit 3: 0x18–0x1F are channel 2's);
/// characters belong to the channel of the last command. Text restart and resume text
/// display (0x2A, 0x2B) turn a channel to its text service until a caption mode command
/// (resume caption loading, roll-up, resume direct captioning) turns it back. XDS runs from
/// a start or continue code (0x01–0x0E) to its end (0x0F), or until a caption command.
struct CaptionChannel {
    /// The field's cc_type: 0 for field 1, 1 for field 2.
    let field: UInt8
    private var channel = 1
    private var textService = [false, false]
    private var extendedData = false

    init(field: UInt8) { self.field = field }

    /// The field's triplets for the caption decoder: the data channel 1 captions' as they
    /// are, another service's as a neutral pair. The decoder skips a command equal to the
    /// one before it, and a pair of another service in between makes a repeat a second
    /// command (a carriage return after a stretch of extended data rolls the rows again):
    /// the neutral pair (0x00 0x01, which the decoder takes and ignores) keeps that so.
    /// Pairs the decoder drops itself (padding, a second byte that fails its parity) are
    /// left out; a first byte that fails its parity is a solid block, a character, as the
    /// decoder reads it.
    mutating func kept(_ triplets: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for i in stride(from: 0, to: triplets.count - 2, by: 3) {
            guard let (hi, lo) = ClosedCaptions.decoderPair(triplets[i], triplets[i + 1], triplets[i + 2], field: field),
                  hi != 0 || lo != 0 else { continue }
            let ours: Bool
            switch hi {
            case 0x00...0x0F:
                extendedData = field == 1 && hi != 0 && hi != 0x0F
                ours = false
            case 0x10...0x1F:
                extendedData = false
                channel = hi & 0x08 == 0 ? 1 : 2
                var switchesToText = false
                if hi & 0x06 == 0x04, (0x20...0x2F).contains(lo) {   // miscellaneous control
                    switch lo {
                    case 0x2A, 0x2B: textService[channel - 1] = true; switchesToText = true
                    case 0x20, 0x25...0x27, 0x29: textService[channel - 1] = false
                    default: break
                    }
                }
                ours = channel == 1 && !textService[0] && !switchesToText
            default:
                ours = !extendedData && channel == 1 && !textService[0]
            }
            out += ours ? Array(triplets[i..<(i + 3)]) : [triplets[i], 0x80, 0x01]
        }
        return out
    }
}

/// Keeps libavcodec's caption decoder from starting a caption before its first character.
/// Buffered (as Kiln reads it, for cues with ends), the decoder shows each screen from
/// where the one before was captured (erased, ended, rolled up) to its own capture. Roll-up
/// and paint-on captions appear character by character as they come, so a caption painted
/// after an erase and seconds of silence was shown from the erase, seconds before anyone
/// spoke. This follows field 1 of the caption stream as the decoder reads it (its parity
/// checks, its repeated-command rule, both data channels' commands alike, its modes) and,
/// where a pair is about to write on a screen an erase left blank, in a mode that shows
/// writing at once, puts an erase of that blank screen just before it: the decoder captures
/// nothing there, and the caption starts with its first character.
struct CaptionScreenWatch {
    /// The field the decoder reads (its `data_field`, the triplets' cc_type).
    let field: UInt8
    private enum Mode { case popOn, rollUp, paintOn, text }
    /// The decoder starts in roll-up mode.
    private var mode = Mode.rollUp
    /// Whether the displayed screen is known to be blank: only after an erase of it. An end
    /// of caption may leave it blank in the decoder's reckoning too, but pop-on captions are
    /// timed right already, so it is left alone there.
    private var blank = true
    /// The last command the decoder took: it skips a pair equal to it.
    private var previous: (UInt8, UInt8) = (0, 0)

    init(field: UInt8 = 0) { self.field = field }

    /// `triplets` (one packet's) with the blank screen's erase put before the pair that
    /// first writes on it.
    mutating func marked(_ triplets: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for i in stride(from: 0, to: triplets.count - 2, by: 3) {
            if let mark = read(triplets[i], triplets[i + 1], triplets[i + 2]) { out += mark }
            out += triplets[i..<(i + 3)]
        }
        return out
    }

    /// Takes one triplet as the decoder will; the erase to put before it, if any.
    private mutating func read(_ marker: UInt8, _ first: UInt8, _ second: UInt8) -> [UInt8]? {
        guard let (hi, lo) = ClosedCaptions.decoderPair(marker, first, second, field: field), (hi, lo) != previous else { return nil }
        let before = previous
        previous = (hi, lo)
        let writes: Bool
        if (hi == 0x10 && (0x40...0x5F).contains(lo)) || ((0x11...0x17).contains(hi) && (0x40...0x7F).contains(lo)) {
            writes = false   // a row address moves the cursor; its indent marks no row as used
        } else if (hi == 0x11 && (0x20...0x2F).contains(lo)) || (hi == 0x17 && (0x2E...0x2F).contains(lo)) {
            writes = true    // a mid-row code writes a space
        } else if [0x14, 0x15, 0x1C].contains(hi) {
            switch lo {
            case 0x20: mode = .popOn
            case 0x25...0x27: mode = .rollUp
            case 0x29: mode = .paintOn
            case 0x2B: mode = .text
            case 0x2C: blank = true
            case 0x2F: blank = false
            default: break
            }
            writes = false
        } else if (0x11...0x13).contains(hi) || (hi == 0x17 && (0x21...0x23).contains(lo)) {
            writes = true    // special and extended characters, tab offsets
        } else if hi >= 0x20 {
            writes = true
            previous = (0, 0)   // standard characters repeat freely
        } else {
            writes = false
        }
        guard writes, mode != .popOn, blank else { return nil }
        blank = false
        // An erase the decoder would skip as a repeat of its last command is the other
        // data channel's, which it reads alike.
        return before == (0x14, 0x2C) ? [0xFC | field, 0x1C, 0x2C] : [0xFC | field, 0x94, 0x2C]
    }
}

/// Puts what comes in decode order (a picture's captions) into presentation order. A
/// decoder holds at most 16 pictures back to reorder them (H.264's and HEVC's limit), so
/// once more than that wait, the earliest can go.
struct PresentationOrder<Item> {
    static var depth: Int { 16 }
    private var waiting: [(time: Int64, item: Item)] = []

    /// Adds `item` shown at `time`; what can go now, earliest first.
    mutating func add(_ item: Item, at time: Int64) -> [(time: Int64, item: Item)] {
        // Equal times keep their order: after the last that is not later.
        let at = waiting.lastIndex { $0.time <= time }.map { $0 + 1 } ?? 0
        waiting.insert((time, item), at: at)
        guard waiting.count > Self.depth else { return [] }
        return [waiting.removeFirst()]
    }

    /// Everything still waiting, earliest first.
    mutating func drain() -> [(time: Int64, item: Item)] {
        defer { waiting = [] }
        return waiting
    }
}

/// A video packet's NAL units, length-prefixed (`lengthSize` > 0, MP4 and Matroska) or
/// behind Annex B start codes (MPEG-TS, raw streams).
enum NALUnits {
    /// A unit's type from its first header byte: HEVC's six bits after the forbidden bit,
    /// or H.264's low five (`h264`).
    static func type(of header: UInt8, h264: Bool) -> Int { h264 ? Int(header & 0x1f) : Int(header >> 1) & 0x3f }

    static func forEach(in data: UnsafeBufferPointer<UInt8>, lengthSize: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
        if lengthSize > 0 { return LengthPrefixed.forEachUnit(in: data, lengthSize: lengthSize, body) }
        guard let base = data.baseAddress else { return }
        var at = AnnexB.unitStart(in: data, from: 0)
        while let s = at {
            let next = AnnexB.unitStart(in: data, from: s)
            // A unit ends where the next start code begins; a four-byte start code's leading
            // zero (and trailing zero bytes) belong to neither unit.
            var end = next.map { $0 - 3 } ?? data.count
            while end > s, data[end - 1] == 0 { end -= 1 }
            if end > s { body(UnsafeBufferPointer(start: base + s, count: end - s)) }
            at = next
        }
    }
}

/// Start codes (00 00 01) in MPEG video and Annex B streams.
enum AnnexB {
    /// Whether an access unit holds a picture of its codec: an H.264 slice (types 1 and 5)
    /// or an HEVC base-layer picture unit (types 0–31, layer 0, temporal id 1 or more), with
    /// no unit before it that its codec forbids (the forbidden bit; H.264's unused type 0).
    /// Another codec's units never pass for one: HEVC's read as H.264 are all of even type
    /// (its type sits a bit higher), H.264's read as HEVC all of a layer above the base,
    /// and MPEG video's picture and sequence start codes are H.264's type 0 or set the
    /// forbidden bit. Units are read only up to the first picture.
    static func holdsPicture(_ data: UnsafeBufferPointer<UInt8>, h264: Bool) -> Bool {
        var at = unitStart(in: data, from: 0)
        while let s = at {
            let b0 = data[s]
            guard b0 & 0x80 == 0 else { return false }
            if h264 {
                let type = b0 & 0x1f
                if type == 0 { return false }
                if type == 1 || type == 5 { return true }
            } else if b0 >> 1 <= 31, s + 1 < data.count {
                let b1 = data[s + 1]
                if b0 & 1 == 0, b1 >> 3 == 0, b1 & 7 != 0 { return true }
            }
            at = unitStart(in: data, from: s)
        }
        return false
    }

    /// Where the unit after the first start code at or past `from` begins (the byte after
    /// 00 00 01), nil if none. memchr finds the candidates' 01 bytes: the scan runs over
    /// whole pictures.
    static func unitStart(in data: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        guard let base = data.baseAddress else { return nil }
        var i = max(from, 2)
        while i < data.count {
            guard let hit = memchr(base + i, 1, data.count - i) else { return nil }
            let k = base.distance(to: hit.assumingMemoryBound(to: UInt8.self))
            if data[k - 1] == 0, data[k - 2] == 0 { return k + 1 < data.count ? k + 1 : nil }
            i = k + 1
        }
        return nil
    }
}
