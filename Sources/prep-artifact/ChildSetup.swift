import CProcess
import Glibc
import KilnCore

/// When the daemon runs this command as a job's child it says so in the environment:
/// `KILN_PARENT_PID` makes the kernel kill us if the daemon dies (no orphan keeps
/// encoding), `KILN_NICE` lowers our CPU priority below the daemon's (the API stays
/// responsive while jobs encode).
enum ChildSetup {
    static func apply(environment: (String) -> String? = Environment.value) {
        if let parent = environment("KILN_PARENT_PID").flatMap(Int32.init) {
            if kiln_die_with_parent(parent) != 0 {
                FileIO.writeStandardError("prep-artifact: the daemon that started this job is gone\n")
                exit(1)
            }
        }
        if let nice = environment("KILN_NICE").flatMap(Int32.init) {
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
        }
    }
}
