#if canImport(Glibc)
import Glibc
#endif

/// How much of the machine other processes kept busy over a stretch of this one's work:
/// whether a second thread of work would run beside this one's first or take its turn.
///
/// The machine's CPU time (`/proc/stat`) less this process's own (`/proc/self/stat`),
/// both in clock ticks, between a mark and now. A measure of the stretch itself, not the
/// load average, whose minute-long memory still counts a benchmark's previous run, and
/// which cannot tell this process's own threads from others'.
public struct SpareCores: Sendable {
    let machineBusy: UInt64
    let machineAll: UInt64
    let own: UInt64

    /// Now; nil where /proc cannot be read.
    public static func mark() -> SpareCores? {
        guard let machine = machineTicks(), let own = ownTicks() else { return nil }
        return SpareCores(machineBusy: machine.busy, machineAll: machine.all, own: own)
    }

    /// The cores other processes left idle on average since `self`, out of `cores`; nil
    /// where the stretch was too short to say (under two ticks a core).
    public func idleOthers(cores: Int = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) -> Double? {
        guard cores > 0, let now = SpareCores.mark(), now.machineAll >= machineAll + UInt64(2 * cores) else { return nil }
        let all = Double(now.machineAll - machineAll)
        // Ticks are sampled, so this process's may slightly outrun the machine's busy ones.
        let others = max(0, Double(now.machineBusy &- machineBusy) - Double(now.own &- own))
        return Double(cores) * (1 - min(1, others / all))
    }

    /// The first line of /proc/stat: user nice system idle iowait irq softirq steal, summed
    /// over every core (guest time is counted in user already).
    static func machineTicks() -> (busy: UInt64, all: UInt64)? {
        guard let line = firstLine("/proc/stat"), line.hasPrefix("cpu ") else { return nil }
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard fields.count >= 5 else { return nil }
        let idle = fields[3] + fields[4]
        let all = fields.reduce(0, +)
        return (all - idle, all)
    }

    /// utime + stime of this process (every thread), fields 14 and 15 of /proc/self/stat,
    /// counted after the command name's closing parenthesis (which may hold spaces).
    static func ownTicks() -> UInt64? {
        guard let line = firstLine("/proc/self/stat"), let close = line.lastIndex(of: ")") else { return nil }
        let fields = line[line.index(after: close)...].split(separator: " ")
        // After ")": state is field 3, so utime (14) and stime (15) are the 12th and 13th.
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        return user + system
    }

    private static func firstLine(_ path: String) -> String? {
        guard let fd = try? FileDescriptor(path: path, flags: O_RDONLY), let bytes = try? FileIO.readToEnd(fd: fd.rawValue) else { return nil }
        return String(decoding: bytes.prefix { $0 != 0x0A }, as: UTF8.self)
    }
}
