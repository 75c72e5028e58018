/// Parses one environment variable at a time, naming it in the error. (Without
/// Foundation, which the media child does not load: docs/NOTES.md.)
public struct EnvironmentReader {
    let env: [String: String]

    public init(env: [String: String]) { self.env = env }

    public func string(_ name: String) -> String? {
        guard let raw = env[name] else { return nil }
        let v = raw.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed()
        return v.isEmpty ? nil : String(v)
    }

    public func int(_ name: String, min: Int) throws(KilnError) -> Int? {
        guard let text = string(name) else { return nil }
        guard let v = Int(text), v >= min else {
            throw KilnError(.usage, stage: .request, field: name, "\(name) must be a whole number ≥ \(min), got \"\(text)\"")
        }
        return v
    }

    /// A whole number within `range` (`meaning` says what it counts, for the message).
    public func int(_ name: String, in range: ClosedRange<Int>, meaning: String = "a whole number") throws(KilnError) -> Int? {
        guard let text = string(name) else { return nil }
        guard let v = Int(text), range.contains(v) else {
            throw KilnError(.usage, stage: .request, field: name,
                            "\(name) must be \(meaning), \(range.lowerBound)…\(range.upperBound), got \"\(text)\"")
        }
        return v
    }

    /// One of a few words, in any case (`choices`: each word and what it means).
    public func choice<T>(_ name: String, _ choices: [String: T]) throws(KilnError) -> T? {
        guard let text = string(name) else { return nil }
        guard let v = choices[text.lowercased()] else {
            throw KilnError(.usage, stage: .request, field: name,
                            "\(name) must be one of \(choices.keys.sorted().joined(separator: ", ")), got \"\(text)\"")
        }
        return v
    }

    /// A switch: on, true, 1 or off, false, 0.
    public func flag(_ name: String) throws(KilnError) -> Bool? {
        try choice(name, ["on": true, "true": true, "1": true, "off": false, "false": false, "0": false])
    }

    public func seconds(_ name: String, allowZero: Bool = false) throws(KilnError) -> Double? {
        guard let text = string(name) else { return nil }
        guard let v = Double(text), v.isFinite, allowZero ? v >= 0 : v > 0 else {
            throw KilnError(.usage, stage: .request, field: name,
                            "\(name) must be a number of seconds \(allowZero ? "≥ 0" : "> 0"), got \"\(text)\"")
        }
        return v
    }
}
