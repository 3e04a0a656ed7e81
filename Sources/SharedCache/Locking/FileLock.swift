#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whole-file advisory locks (flock(2)) between processes, with a bounded wait.
///
/// flock locks belong to the open file description, so two descriptors opened separately in
/// one process exclude each other exactly as two processes do; a lock is released when its
/// descriptor closes, including when the process dies, so a killed holder never wedges the cache.
/// flock has no timed wait, so a contended lock is polled: a few yields first (holders keep
/// these locks for microseconds), then sleeps that double up to 2 ms until the deadline.
enum FileLock {
    enum Kind {
        case shared
        case exclusive

        var operation: Int32 { self == .shared ? LOCK_SH : LOCK_EX }
    }

    /// Tries once to take the lock without waiting.
    ///
    /// - Returns: `false` when another open file description holds a conflicting lock.
    static func tryLock(_ descriptor: borrowing FileDescriptor, _ kind: Kind) throws(SystemError) -> Bool {
        try System.flock(descriptor.rawValue, operation: kind.operation, nonBlocking: true)
    }

    /// Takes the lock, waiting at most `timeout`.
    ///
    /// - Returns: `false` if the deadline passed with the lock still held elsewhere.
    static func lock(
        _ descriptor: borrowing FileDescriptor, _ kind: Kind, timeout: Duration
    ) throws(SystemError) -> Bool {
        if try tryLock(descriptor, kind) { return true }
        let start = Clock.monotonicNanoseconds()
        let budget =
            UInt64(max(0, timeout.components.seconds)) * 1_000_000_000
            + UInt64(max(0, timeout.components.attoseconds / 1_000_000_000))
        var pause: UInt64 = 10_000
        var attempt = 0
        while true {
            attempt += 1
            if attempt <= 8 {
                sched_yield()
            } else {
                Clock.sleep(nanoseconds: pause)
                pause = min(pause * 2, 200_000)
            }
            if try tryLock(descriptor, kind) { return true }
            if Clock.monotonicNanoseconds() - start >= budget { return false }
        }
    }

    /// Releases the lock. The C function is `flock` with `LOCK_UN`.
    static func unlock(_ descriptor: borrowing FileDescriptor) {
        // LOCK_UN on a valid descriptor cannot fail; if it somehow did, closing the descriptor
        // releases the lock anyway.
        _ = try? System.flock(descriptor.rawValue, operation: LOCK_UN, nonBlocking: false)
    }
}
