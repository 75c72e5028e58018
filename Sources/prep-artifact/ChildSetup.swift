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

/// Standard streams a caller closed (`prep-artifact … >&-`, a daemon started without
/// them) stay closed in effect. Left free, the next file opened takes descriptor 1 or 2,
/// and the answer or a log line would be written into the source or the output; held by
/// /dev/null opened read-only, every write to them fails as it would on a closed stream.
enum StandardStreams {
    static func keepClosedOnesClosed() {
        for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(fd, F_GETFD) == -1 {
            let held = open("/dev/null", O_RDONLY)
            if held >= 0 && held != fd { dup2(held, fd); close(held) }
        }
    }
}
