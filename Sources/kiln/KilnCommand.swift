import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Farm
import HTTPServer
import KilnAPI
import KilnCore
import Planner
import Store

/// `kiln serve [--config FILE]` and `kiln status`.
enum KilnCommand {
    static let usage = """
    usage: kiln serve [--config FILE]            run the daemon (settings: KILN_* environment variables, see README)
           kiln status [--json] [--config FILE]  the queue of the daemon at KILN_LISTEN, as a table
                                                 (--config: the daemon's file, for its address and token)
           kiln --version
    """

    static func run(_ args: [String]) -> Int32 {
        var rest = args
        guard !rest.isEmpty else { FileHandle.standardError.write(Data((usage + "\n").utf8)); return 2 }
        let command = rest.removeFirst()
        // Before the settings are read: a question about the program needs none of them.
        switch command {
        case "--version", "version": print("kiln \(KilnVersion.number)"); return 0
        case "-h", "--help", "help": print(usage); return 0
        default: break
        }
        var configFile: String?
        var json = false
        while let a = rest.first {
            rest.removeFirst()
            switch a {
            case "--config":
                guard let f = rest.first else { return fail("--config needs a file") }
                configFile = f
                rest.removeFirst()
            case "--json": json = true
            default: return fail("unknown argument \(a)")
            }
        }
        do throws(KilnError) {
            let config = try DaemonConfig.load(environment: ProcessInfo.processInfo.environment, file: configFile)
            switch command {
            case "serve": return try Serve.run(config)
            case "status": return try StatusCommand.run(config, json: json)
            default: return fail("unknown command \(command)")
            }
        } catch {
            // A setting's error names the setting: the usage text would bury it.
            return fail("\(error.code.rawValue): \(error.message)", status: error.exitStatus, showUsage: false)
        }
    }

    static func fail(_ message: String, status: Int32 = 2, showUsage: Bool = true) -> Int32 {
        FileHandle.standardError.write(Data("kiln: \(message)\n".utf8))
        if status == 2 && showUsage { FileHandle.standardError.write(Data((usage + "\n").utf8)) }
        return status
    }
}
