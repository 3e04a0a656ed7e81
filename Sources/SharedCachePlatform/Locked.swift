#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A mutual-exclusion lock protecting a value, for the few pieces of mutable state a
/// `Sendable` class must keep.
///
/// `Synchronization.Mutex` needs macOS 15 / iOS 18; this library supports macOS 13 / iOS 16,
/// so it carries this small pthread-based one. Critical sections must stay short and must
/// never wait for another process while other threads could need the lock for long.
///
/// The value lives in memory of its own rather than in a stored property: the mutex already
/// makes access exclusive, and a class's `var` would add Swift's run-time exclusivity check
/// (two calls into the runtime and a thread-local lookup) to every use, on the hottest paths.
package final class Locked<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let value = UnsafeMutablePointer<Value>.allocate(capacity: 1)

    package init(_ value: Value) {
        self.value.initialize(to: value)
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
