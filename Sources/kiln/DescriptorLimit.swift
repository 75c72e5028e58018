import Glibc

/// The daemon's file descriptors: each HTTP connection holds one (and a download one more,
/// its file), beside SQLite's, the job children's pipes and libdispatch's own. A daemon
/// started under the shell's usual soft limit (1024) accepted its default 1,000 connections
/// until none was left, and libdispatch, failing to open one, ended the process (SIGILL).
enum DescriptorLimit {
    /// Raises the soft limit to the hard one (as servers do: the soft limit is a default
    /// for programs that use `select`, which libmicrohttpd's epoll does not), and returns
    /// it; nil where it cannot be read.
    static func raise() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The connections `descriptors` can carry beside what the daemon keeps for itself (a
    /// quarter, at most 256), two each, as a multiple of the server's `threads` (which
    /// share the limit), and never more than `configured`.
    static func connections(for descriptors: Int, configured: Int, threads: Int) -> Int {
        let reserve = min(256, descriptors / 4)
        let fitting = max(0, descriptors - reserve) / 2
        let step = max(1, threads)
        return max(step, min(configured, fitting) / step * step)
    }
}
