#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Shared or exclusive, as flock(2) locks a file.
package enum LockKind: Sendable {
    case shared
    case exclusive

    var operation: Int32 { self == .shared ? LOCK_SH : LOCK_EX }
}

// Whole-file advisory locks (flock(2)) between processes, with a bounded wait.
//
// flock locks belong to the open file description, so two descriptors opened separately in
// one process exclude each other exactly as two processes do, while threads sharing one
// descriptor do not exclude each other at all (their owner must, with a mutex); a lock is
// released when its descriptor closes, including when the process dies, so a killed holder
// never wedges the cache. flock has no timed wait, so a contended lock is polled: a few yields
// first (holders keep these locks for microseconds), then sleeps that double up to 200 µs
// until the deadline.
extension FileDescriptor {
    /// Runs `body` holding the lock, waiting at most `timeout` for it; the lock is released
    /// when `body` returns or throws.
    ///
    /// - Throws: `timeoutError()` when the deadline passes with the lock held elsewhere, and
    ///   whatever `body` throws.
    package func withLock<Result>(
        _ kind: LockKind, timeout: Duration, orThrow timeoutError: @autoclosure () -> any Error,
        _ body: () throws -> Result
    ) throws -> Result {
        guard try lock(kind, timeout: timeout) else { throw timeoutError() }
        defer { unlock() }
        return try body()
    }

    /// Tries once to take the lock without waiting; the caller releases it with ``unlock()``.
    ///
    /// - Returns: `false` when another open file description holds a conflicting lock.
    package func tryLock(_ kind: LockKind) throws(SystemError) -> Bool {
        try System.flock(rawValue, operation: kind.operation, nonBlocking: true)
    }

    /// Takes the lock, waiting at most `timeout`; the caller releases it with ``unlock()``.
    ///
    /// - Returns: `false` if the deadline passed with the lock still held elsewhere.
    package func lock(_ kind: LockKind, timeout: Duration) throws(SystemError) -> Bool {
        if try tryLock(kind) { return true }
        let start = Clock.monotonicNanoseconds()
        let budget = timeout.nanoseconds
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
            if try tryLock(kind) { return true }
            if Clock.monotonicNanoseconds() - start >= budget { return false }
        }
    }

    /// Releases the lock. The C function is `flock` with `LOCK_UN`.
    package func unlock() {
        // LOCK_UN on a valid descriptor cannot fail; if it somehow did, closing the descriptor
        // releases the lock anyway.
        _ = try? System.flock(rawValue, operation: LOCK_UN, nonBlocking: false)
    }
}
