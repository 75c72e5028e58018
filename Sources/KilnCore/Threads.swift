#if canImport(Glibc)
import Glibc
#endif

/// Threads for the media child without Dispatch: its Swift overlay loads the concurrency
/// and regex runtimes (libswift_Concurrency, libswift_StringProcessing), about 2 MB of
/// resident memory in every `prep-artifact` process for a handful of background jobs that
/// a plain thread runs as well (see docs/NOTES.md).
public enum Threads {
    /// Runs `work` on a new detached thread; where no thread can be had (the system's
    /// limit), here and now, since someone waits for what it does. Whoever needs the
    /// result waits for it with a `Latch`.
    public static func start(_ work: @escaping @Sendable () -> Void) {
        if !tryStart(work) { work() }
    }

    /// Whether `count` more threads can be started now: each is started, waits for the
    /// rest, and ends. A library that fails without saying why (libx264's encoder open,
    /// which starts its worker threads) is told from a misconfiguration so.
    public static func canStart(_ count: Int) -> Bool {
        var threads: [pthread_t] = []
        defer { for t in threads { pthread_join(t, nil) } }
        for _ in 0..<count {
            var thread = pthread_t()
            guard pthread_create(&thread, nil, { _ in nil }, nil) == 0 else { return false }
            threads.append(thread)
        }
        return true
    }

    /// Runs `work` on a new detached thread; false if none could be started.
    public static func tryStart(_ work: @escaping @Sendable () -> Void) -> Bool {
        final class Job {
            let work: @Sendable () -> Void
            init(_ work: @escaping @Sendable () -> Void) { self.work = work }
        }
        let job = Unmanaged.passRetained(Job(work)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { raw in
            Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue().work()
            return nil
        }, job)
        guard started == 0 else {
            Unmanaged<Job>.fromOpaque(job).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}

/// A gate that opens once and stays open: `wait` returns as soon as someone has called
/// `open` (before or after). Owns its pthread mutex and condition variable.
public final class Latch: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var isOpen = false

    public init() {
        pthread_mutex_init(mutex, nil)
        // Timed waits measure against the monotonic clock: a wall-clock step must not
        // stretch or cut a deadline.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func open() {
        pthread_mutex_lock(mutex)
        isOpen = true
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    public func wait() {
        pthread_mutex_lock(mutex)
        while !isOpen { pthread_cond_wait(condition, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Waits at most `seconds`; whether the latch is open.
    public func wait(seconds: Double) -> Bool {
        // No wait for a negative or undefined time; at most ~30 years.
        let seconds = seconds.isNaN ? 0 : min(max(seconds, 0), 1e9)
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let whole = seconds.rounded(.down)
        var nanoseconds = Int(deadline.tv_nsec) + Int((seconds - whole) * 1e9)
        deadline.tv_sec += Int(whole) + nanoseconds / 1_000_000_000
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        pthread_mutex_lock(mutex)
        // 0 is a wake-up (perhaps spurious: look again); anything else is the deadline.
        while !isOpen, pthread_cond_timedwait(condition, mutex, &deadline) == 0 {}
        let result = isOpen
        pthread_mutex_unlock(mutex)
        return result
    }
}
