#if canImport(Glibc)
import Glibc
#endif

/// What the machine is short of right now, asked when a library fails without saying why
/// (libx264's "generic error" when its malloc or its worker threads fail, dlopen's "failed
/// to map segment"): the file and the plan are fine, and a retry may find the machine
/// otherwise (`resource_limit`), where a misconfiguration would fail the same way again.
public enum Shortage {
    /// A sentence naming the shortage, or nil when memory, a descriptor and threads can
    /// all be had. Memory comes first: under an address-space limit (`ulimit -v`) no
    /// thread starts either (each reserves its stack), and the limit to raise is memory's.
    public static func current() -> String? {
        if !canAllocate(128 << 20) { return "memory is short (the address-space limit is reached)" }
        if !canOpenDescriptor() { return "no file descriptor is free (the open-files limit is reached)" }
        if !Threads.canStart(4) { return "no threads can be started (the process or user limit is reached)" }
        return nil
    }

    /// Whether `bytes` can be allocated now (given back at once, never touched).
    public static func canAllocate(_ bytes: Int) -> Bool {
        guard let block = malloc(bytes) else { return false }
        free(block)
        return true
    }

    static func canOpenDescriptor() -> Bool {
        let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }
}
