/// CEA-708 (CTA-708) digital television closed captions: the captions ATSC A/53's `cc_data`
/// carries beside CEA-608's pairs, in triplets of cc_type 3 (a packet's start) and 2 (the
/// rest). Stations send both, the same captions twice, and Kiln reads CEA-608's where they
/// are (libavcodec's caption decoder); but some sources carry CEA-708 only (ATSC 3.0
/// recordings, some streaming captures), and libavcodec 5.1 has no decoder for it. So this
/// is one: enough of the caption model to know what text is on screen when.
///
/// A caption channel packet (`DTVCCPackets`) holds service blocks; each service (1: the
/// programme's captions, 2: usually a second language, …) is a byte stream of commands and
/// characters (`DTVCCService`) that draws text in up to eight windows, shown or hidden. What
/// a viewer reads is the text of the visible windows, top to bottom.
///
/// The pen's italics and underline are kept (as ASS tags, which the `mov_text` encoder turns
/// into style records, as it does CEA-608's from libavcodec's decoder). Left out: the rest
/// of pen and window styling (colours, fonts, justification: a text track shows none),
/// print directions other than left to right (used for no language ATSC serves), and the
/// delay command (DLY), which holds a service's commands back by tenths of a second and
/// which caption encoders do not use.

/// Caption channel packets from a stream of `cc_data` triplets, as their service blocks.
struct DTVCCPackets {
    private var packet: [UInt8] = []
    /// The packet's whole length, header byte included, from its header.
    private var expected = 0

    /// Reads one picture's triplets; the service blocks of the packets they complete. A
    /// packet cut short by the next one's start (a lost triplet) gives the blocks it holds.
    mutating func read(_ triplets: [UInt8]) -> [(service: Int, data: ArraySlice<UInt8>)] {
        var blocks: [(service: Int, data: ArraySlice<UInt8>)] = []
        for t in stride(from: 0, to: triplets.count - 2, by: 3) {
            let marker = triplets[t]
            guard marker & 0x04 != 0 else { continue }
            switch marker & 0x03 {
            case 3:
                blocks += serviceBlocks()
                let code = Int(triplets[t + 1] & 0x3F)
                expected = code == 0 ? 128 : code * 2
                packet = [triplets[t + 1], triplets[t + 2]]
            case 2 where !packet.isEmpty:
                packet += [triplets[t + 1], triplets[t + 2]]
            default:
                continue
            }
            if packet.count >= expected { blocks += serviceBlocks() }
        }
        return blocks
    }

    /// The blocks of the packet read so far (its header byte left out), which is then done
    /// with. A block header: the service number (3 bits; 7 says an extended number follows
    /// in the next byte) and the block's size (5 bits); service 0 of size 0 ends the packet.
    private mutating func serviceBlocks() -> [(service: Int, data: ArraySlice<UInt8>)] {
        defer { packet = [] }
        guard packet.count > 1 else { return [] }
        let data = packet[1..<min(packet.count, expected)]
        var blocks: [(service: Int, data: ArraySlice<UInt8>)] = []
        var i = data.startIndex
        while i < data.endIndex {
            var service = Int(data[i] >> 5)
            let size = Int(data[i] & 0x1F)
            i += 1
            if service == 0 { break }
            if service == 7 {
                guard i < data.endIndex else { break }
                service = Int(data[i] & 0x3F)
                i += 1
            }
            guard size <= data.endIndex - i else { break }
            if service > 0, size > 0 { blocks.append((service, data[i..<(i + size)])) }
            i += size
        }
        return blocks
    }
}

/// One caption service: its windows, and the text they show as it changes. Times are the
/// caller's (the pictures' presentation times); a change comes out as a `Screen` when it is
/// complete: at once where text goes away or a window is shown or hidden, and for text
/// written on a visible window (roll-up and paint-on captions) at the next line's end,
/// end of text or display command, timed from its first character.
struct DTVCCService {
    /// What the visible windows show from `time` on: lines top to bottom, none when blank.
    /// `lines` is their text; `marked`, the same lines with their italics and underline as
    /// ASS override tags (and backslashes, which ASS reads as tags, made full-width ones).
    struct Screen: Equatable {
        var time: Int64
        var lines: [String]
        var marked: [String]

        init(time: Int64, lines: [String], marked: [String]? = nil) {
            self.time = time
            self.lines = lines
            self.marked = marked ?? lines
        }

        init(time: Int64, rows: [[Cell]]) {
            self.init(time: time, lines: rows.map { String($0.map(\.character)) }, marked: rows.map(Cell.marked))
        }
    }

    /// The pen's attributes that a text track can show.
    struct Style: OptionSet, Equatable {
        let rawValue: UInt8
        static let italic = Style(rawValue: 1)
        static let underline = Style(rawValue: 2)
    }

    struct Cell: Equatable {
        var character: Character
        var style: Style

        static let blank = Cell(character: " ", style: [])

        /// A row as ASS text: each style change as a tag, every tag closed at the row's end.
        static func marked(_ row: [Cell]) -> String {
            var text = "", style: Style = []
            func change(to next: Style) {
                if next.contains(.italic) != style.contains(.italic) { text += next.contains(.italic) ? "{\\i1}" : "{\\i0}" }
                if next.contains(.underline) != style.contains(.underline) { text += next.contains(.underline) ? "{\\u1}" : "{\\u0}" }
                style = next
            }
            for (i, cell) in row.enumerated() {
                var next = cell.style
                if cell.character == " " {
                    // A space's underline shows; its italics do not: it is italic only between
                    // italic words, so that tags do not split a run or close after it.
                    let following = row[(i + 1)...].first { $0.character != " " }?.style ?? []
                    next.remove(.italic)
                    if style.contains(.italic) && following.contains(.italic) { next.insert(.italic) }
                }
                change(to: next)
                text.append(cell.character == "\\" ? "\u{FF3C}" : cell.character)
            }
            change(to: [])
            return text
        }
    }

    struct Window {
        var visible = false
        var rows: [[Cell]]
        var rowCount: Int { rows.count }
        /// Where the window sits: its vertical anchor as a fraction of the screen's height.
        var top = 0.0
        var penRow = 0, penColumn = 0
        /// The style characters are written in (SPA, set pen attributes).
        var pen: Style = []

        init(rowCount: Int) { rows = Array(repeating: [], count: rowCount) }

        /// The rows that hold text, without the spaces around it.
        var shownRows: [[Cell]] {
            rows.compactMap { row in
                guard let first = row.firstIndex(where: { $0.character != " " }),
                      let last = row.lastIndex(where: { $0.character != " " }) else { return nil }
                return Array(row[first...last])
            }
        }

        mutating func put(_ c: Character) {
            guard penRow < rows.count, penColumn < DTVCCService.maxColumns else { return }
            if rows[penRow].count <= penColumn { rows[penRow] += Array(repeating: .blank, count: penColumn + 1 - rows[penRow].count) }
            rows[penRow][penColumn] = Cell(character: c, style: pen)
            penColumn += 1
        }

        /// A carriage return: the next row, the rows rolled up at the last.
        mutating func carriageReturn() {
            penColumn = 0
            if penRow + 1 < rowCount { penRow += 1; return }
            rows.removeFirst()
            rows.append([])
            penRow = rowCount - 1
        }

        mutating func clear() {
            rows = Array(repeating: [], count: rowCount)
            penRow = 0
            penColumn = 0
        }
    }

    /// CEA-708's widest window (42 columns at 16:9), with room for encoders that write past
    /// the columns they declared; the most rows a window has.
    static let maxColumns = 64
    static let maxRows = 16

    private(set) var windows = [Window?](repeating: nil, count: 8)
    private var current: Int?
    /// Bytes of a command a block ended in the middle of.
    private var carry: [UInt8] = []
    /// The screen last given out, and since when text written on a visible window is
    /// waiting to be given.
    private var shown: [String] = []
    private var writtenSince: Int64?
    /// Whether any character other than a space was written, seen or not (the probe's
    /// question: does this service carry captions at all).
    private(set) var wroteText = false

    /// Reads a service block's bytes at `time`; the screens that are complete.
    mutating func read(_ block: ArraySlice<UInt8>, at time: Int64) -> [Screen] {
        let bytes = carry + block
        carry = []
        var screens: [Screen] = []
        var i = 0
        while i < bytes.count {
            guard let length = DTVCCService.codeLength(bytes, at: i) else {
                // A command longer than what is left: the rest comes in the next block
                // (at most a command's worth, 34 bytes; anything longer is damage).
                if bytes.count - i < 36 { carry = Array(bytes[i...]) }
                break
            }
            run(bytes[i..<(i + length)], at: time, &screens)
            i += length
        }
        return screens
    }

    /// What is still waiting to be given at the end of the stream.
    mutating func finish() -> [Screen] {
        var screens: [Screen] = []
        flush(&screens)
        return screens
    }

    /// How many bytes the code at `i` takes, its parameters included; nil when `bytes`
    /// ends before it does.
    static func codeLength(_ bytes: [UInt8], at i: Int) -> Int? {
        let c = bytes[i]
        var length: Int
        switch c {
        case 0x10:
            guard i + 1 < bytes.count else { return nil }
            let e = bytes[i + 1]
            switch e {
            case 0x00...0x07: length = 2
            case 0x08...0x0F: length = 3
            case 0x10...0x17: length = 4
            case 0x18...0x1F: length = 5
            case 0x80...0x87: length = 6
            case 0x88...0x8F: length = 7
            case 0x90...0x9F:
                // Variable length: the next byte's low five bits say how many follow (its
                // top two are a type, then a zero bit).
                guard i + 2 < bytes.count else { return nil }
                length = 3 + Int(bytes[i + 2] & 0x1F)
            default: length = 2
            }
        case 0x11...0x17: length = 2
        case 0x18...0x1F: length = 3
        case 0x88...0x8D: length = 2
        case 0x90, 0x92: length = 3
        case 0x91: length = 4
        case 0x97: length = 5
        case 0x98...0x9F: length = 7
        default: length = 1
        }
        return i + length <= bytes.count ? length : nil
    }

    private mutating func run(_ code: ArraySlice<UInt8>, at time: Int64, _ screens: inout [Screen]) {
        let c = code[code.startIndex]
        let p = Array(code.dropFirst())
        switch c {
        case 0x03:  // ETX: end of text
            flush(&screens)
        case 0x08:  // BS: backspace
            edit(at: time, &screens) { w in
                guard w.penColumn > 0 else { return }
                w.penColumn -= 1
                if w.penColumn < w.rows[w.penRow].count { w.rows[w.penRow][w.penColumn] = .blank }
            }
        case 0x0C:  // FF: form feed, the window cleared and the pen at its start
            edit(at: time, &screens) { $0.clear() }
        case 0x0D:  // CR
            edit(at: time, &screens) { $0.carriageReturn() }
        case 0x0E:  // HCR: the pen to the row's start, the row erased
            edit(at: time, &screens) { w in
                w.penColumn = 0
                if w.penRow < w.rows.count { w.rows[w.penRow] = [] }
            }
        case 0x10:
            let e = p[0]
            if (0x20...0x7F).contains(e) { write(DTVCCService.g2(e), at: time) }
            else if e >= 0xA0 { write("_", at: time) }  // G3: the [CC] icon, and reserved
        case 0x18:  // P16: a 16-bit character
            write(Unicode.Scalar(UInt16(p[0]) << 8 | UInt16(p[1])).map(Character.init) ?? "_", at: time)
        case 0x20...0x7E:
            write(Character(Unicode.Scalar(c)), at: time)
        case 0x7F:
            write("♪", at: time)
        case 0xA0...0xFF:
            // G1: ISO 8859-1, whose code points are Unicode's.
            write(Character(Unicode.Scalar(c)), at: time)
        case 0x80...0x87:  // CWn: current window
            if windows[Int(c & 7)] != nil { current = Int(c & 7) }
        case 0x88:  // CLW: clear windows
            display(p[0], at: time, &screens) { $0.clear() }
        case 0x89:  // DSW: display windows
            display(p[0], at: time, &screens) { $0.visible = true }
        case 0x8A:  // HDW: hide windows
            display(p[0], at: time, &screens) { $0.visible = false }
        case 0x8B:  // TGW: toggle windows
            display(p[0], at: time, &screens) { $0.visible.toggle() }
        case 0x8C:  // DLW: delete windows
            flush(&screens)
            for n in 0..<8 where p[0] >> n & 1 == 1 {
                windows[n] = nil
                if current == n { current = nil }
            }
            commit(at: time, &screens)
        case 0x8F:  // RST: reset
            flush(&screens)
            windows = Array(repeating: nil, count: 8)
            current = nil
            commit(at: time, &screens)
        case 0x90:  // SPA: pen attributes; the second byte's top bits are italics and underline
            if let n = current, windows[n] != nil {
                windows[n]!.pen = Style(rawValue: (p[1] & 0x80 != 0 ? Style.italic.rawValue : 0) | (p[1] & 0x40 != 0 ? Style.underline.rawValue : 0))
            }
        case 0x92:  // SPL: the pen's row and column
            if let n = current, var w = windows[n] {
                w.penRow = min(Int(p[0] & 0x0F), w.rowCount - 1)
                w.penColumn = min(Int(p[1] & 0x3F), DTVCCService.maxColumns - 1)
                windows[n] = w
            }
        case 0x98...0x9F:
            define(Int(c & 7), p, at: time, &screens)
        default:
            // Pen and window attributes and colours, delays, reserved and extended codes.
            break
        }
    }

    /// DFn: defines window `n` (or changes it, its text kept) and makes it current.
    /// Parameters: visible (bit 5 of the first), relative positioning and vertical anchor,
    /// horizontal anchor, anchor point and row count (less one), column count (less one),
    /// window and pen style numbers.
    private mutating func define(_ n: Int, _ p: [UInt8], at time: Int64, _ screens: inout [Screen]) {
        flush(&screens)
        let rowCount = min(Int(p[3] & 0x0F) + 1, DTVCCService.maxRows)
        var w = windows[n] ?? Window(rowCount: rowCount)
        if w.rowCount != rowCount {
            // Fewer rows keep the last ones (roll-up text stays at the bottom).
            w.rows = rowCount < w.rowCount ? Array(w.rows.suffix(rowCount)) : w.rows + Array(repeating: [], count: rowCount - w.rowCount)
            w.penRow = min(w.penRow, rowCount - 1)
        }
        w.visible = p[0] & 0x20 != 0
        // A predefined pen style (1–7, none of them italic or underlined) replaces the pen's
        // attributes; 0 keeps those of a window defined before.
        if p[5] & 0x07 != 0 { w.pen = [] }
        let relative = p[1] & 0x80 != 0
        let vertical = Double(p[1] & 0x7F)
        w.top = relative ? vertical / 100 : vertical / 75
        windows[n] = w
        current = n
        commit(at: time, &screens)
    }

    /// A character at the current window's pen; on a visible window, waiting to be given.
    private mutating func write(_ c: Character, at time: Int64) {
        guard let n = current, windows[n] != nil else { return }
        windows[n]!.put(c)
        if c != " " { wroteText = true }
        if windows[n]!.visible, writtenSince == nil { writtenSince = time }
    }

    /// An edit of the current window that may take text away (or roll it up): what was
    /// written before it is given first, and what it leaves at once.
    private mutating func edit(at time: Int64, _ screens: inout [Screen], _ change: (inout Window) -> Void) {
        guard let n = current, windows[n] != nil else { return }
        if windows[n]!.visible { flush(&screens) }
        change(&windows[n]!)
        if windows[n]!.visible { commit(at: time, &screens) }
    }

    /// A window command for the windows whose bits are set in `mask`.
    private mutating func display(_ mask: UInt8, at time: Int64, _ screens: inout [Screen], _ change: (inout Window) -> Void) {
        flush(&screens)
        for n in 0..<8 where mask >> n & 1 == 1 && windows[n] != nil { change(&windows[n]!) }
        commit(at: time, &screens)
    }

    /// Gives what was written on visible windows, from its first character.
    private mutating func flush(_ screens: inout [Screen]) {
        guard let since = writtenSince else { return }
        commit(at: since, &screens)
    }

    /// Gives the screen as it is now, if it changed, from `time` (in place of one given for
    /// the same time: a character written and taken back in one picture was never seen).
    private mutating func commit(at time: Int64, _ screens: inout [Screen]) {
        writtenSince = nil
        let screen = Screen(time: time, rows: rows)
        guard screen.marked != shown else { return }
        shown = screen.marked
        if screens.last?.time == time { screens.removeLast() }
        if screens.last?.marked != screen.marked { screens.append(screen) }
    }

    /// The visible windows' rows of text, the highest window first.
    var rows: [[Cell]] {
        windows.indices.compactMap { n in windows[n].flatMap { $0.visible ? (n, $0) : nil } }
            .sorted { ($0.1.top, $0.0) < ($1.1.top, $1.0) }
            .flatMap { $0.1.shownRows }
    }

    /// The G2 set: spaces (transparent ones too), typographic marks and box drawing.
    static func g2(_ e: UInt8) -> Character {
        switch e {
        case 0x20, 0x21: return " "
        case 0x25: return "…"
        case 0x2A: return "Š"
        case 0x2C: return "Œ"
        case 0x30: return "█"
        case 0x31: return "‘"
        case 0x32: return "’"
        case 0x33: return "“"
        case 0x34: return "”"
        case 0x35: return "•"
        case 0x39: return "™"
        case 0x3A: return "š"
        case 0x3C: return "œ"
        case 0x3D: return "℠"
        case 0x3F: return "Ÿ"
        case 0x76: return "⅛"
        case 0x77: return "⅜"
        case 0x78: return "⅝"
        case 0x79: return "⅞"
        case 0x7A: return "│"
        case 0x7B: return "┐"
        case 0x7C: return "└"
        case 0x7D: return "─"
        case 0x7E: return "┘"
        case 0x7F: return "┌"
        default: return "_"
        }
    }
}
