import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KilnAPI
import KilnCore

/// `kiln status`: the daemon's `/v1/queue` as a table in a terminal.
enum StatusCommand {
    static func run(_ config: DaemonConfig, json: Bool) throws(KilnError) -> Int32 {
        let host = config.host == "0.0.0.0" ? "127.0.0.1" : (config.host == "::" ? "::1" : config.host)
        let hostPart = host.contains(":") ? "[\(host)]" : host
        guard let url = URL(string: "http://\(hostPart):\(config.port)/v1/queue") else {
            throw KilnError(.usage, stage: .request, "bad listen address")
        }
        // The daemon is on this machine: a shell's http_proxy (which libcurl follows) sent
        // the question to the proxy, which cannot reach it.
        setenv("NO_PROXY", "*", 1)
        setenv("no_proxy", "*", 1)
        var request = URLRequest(url: url, timeoutInterval: 10)
        if let token = config.token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        final class Box: @unchecked Sendable { var data: Data?; var status = 0; var error: String? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { data, response, error in
            box.data = data
            box.status = (response as? HTTPURLResponse)?.statusCode ?? 0
            box.error = error?.localizedDescription
            done.signal()
        }.resume()
        done.wait()
        if box.status == 401 {
            throw KilnError(.usage, stage: .request, field: "KILN_TOKEN",
                            "the daemon at \(url) wants its token: run kiln status --config with the daemon's settings file, or set KILN_TOKEN")
        }
        guard let data = box.data, box.status == 200 else {
            throw KilnError(.ioError, stage: .request, "cannot read \(url): \(box.error ?? "HTTP \(box.status)")")
        }
        if json { print(String(decoding: data, as: UTF8.self)); return 0 }
        guard let q = try? JSONValue.parse([UInt8](data)) else { throw KilnError(.internalError, stage: .request, "the daemon's answer is not JSON") }
        print(QueueTable.render(q))
        return 0
    }
}

enum QueueTable {
    static func render(_ q: JSONValue) -> String {
        var lines: [String] = []
        func str(_ v: JSONValue?) -> String {
            switch v {
            case .string(let s)?: s
            case .number(let n)?: n == n.rounded() ? String(Int(n)) : String(format: "%.2f", n)
            case .bool(let b)?: String(b)
            default: ""
            }
        }
        if case .object(let counts)? = q["counts"] {
            lines.append("jobs: " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \(str($0.value))" }.joined(separator: ", "))
        }
        if case .object(let slots)? = q["slots"] {
            lines.append("slots: " + slots.sorted { $0.key < $1.key }.map { "\($0.key) \(str($0.value["busy"]))/\(str($0.value["total"]))" }.joined(separator: ", "))
        }
        func table(_ title: String, _ rows: [[String]], _ header: [String]) {
            lines.append("")
            lines.append(title)
            guard !rows.isEmpty else { lines.append("  (none)"); return }
            let all = [header] + rows
            let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
            for r in all { lines.append("  " + r.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")) }
        }
        /// The source's file name, which is how an operator knows the film (the whole path
        /// is in `--json`); at most 40 characters, its end kept.
        func film(_ entry: JSONValue) -> String {
            let name = String(str(entry["source"]).split(separator: "/").last ?? "")
            return name.count > 40 ? "…" + name.suffix(39) : name
        }
        func array(_ key: String) -> [JSONValue] { if case .array(let a)? = q[key] { return a }; return [] }
        table("running", array("running").map { j in
            let p = j["progress"]
            let pct = p.flatMap { if case .number(let f)? = $0["fraction"] { return String(format: "%5.1f%%", f * 100) }; return nil } ?? "  —"
            return [str(j["artifact_id"]), film(j), str(j["kind"]), pct, p.map { str($0["speed"]) + "x" } ?? "", "attempt " + str(j["attempt"])]
        }, ["artifact", "source", "kind", "progress", "speed", "attempt"])
        table("waiting (claim order)", array("queued").map { j in
            [str(j["artifact_id"]), film(j), str(j["kind"]), str(j["priority"]), str(j["state"]), str(j["waiting_reason"])]
        }, ["artifact", "source", "kind", "priority", "state", "why"])
        table("recent failures", array("recent_failures").map { f in
            [str(f["artifact_id"]), film(f), str(f["error"]?["code"]), String(str(f["error"]?["message"]).prefix(60)), str(f["at"])]
        }, ["artifact", "source", "code", "message", "at"])
        if let s = q["storage"] {
            lines.append("")
            func bytes(_ v: JSONValue?) -> String { if case .number(let n)? = v { return Format.bytes(Int64(n)) }; return "—" }
            lines.append("storage: \(bytes(s["stored_bytes"])) stored, \(bytes(s["unreferenced_bytes"])) unreferenced, \(bytes(s["free_bytes"])) free")
        }
        return lines.joined(separator: "\n")
    }
}
