import Foundation
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A writer waiting for the journal's append lock must not hold up this process's readers:
/// the lock is waited for outside the process mutex (issue 14: `commit` used to wait on
/// `flock` while holding it, so every get of the process stalled for up to `lockTimeout`).
@Suite("The journal's append lock and the process mutex")
struct AppendLockTests {
    @Test func readersGoOnWhileAWriterWaitsForTheAppendLock() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(lockTimeout: .seconds(20)))
        try cache.put(key: "a", data: Data("one".utf8))

        // Another open file description holds the newest segment's lock, as a stopped process would.
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory("cache/journal")).sorted()
        let holder = try FileDescriptor(path: directory("cache/journal/\(try #require(segments.last))"), flags: O_RDWR)
        #expect(try holder.tryLock(.exclusive))

        let writerDone = DispatchSemaphore(value: 0)
        let writerResult = Locked<Result<Void, any Error>?>(nil)
        Thread {
            writerResult.withLock { $0 = Result { try cache.put(key: "b", data: Data("two".utf8)) } }
            writerDone.signal()
        }.start()

        // For a while, as the writer waits: every get answers at once (before the fix, the
        // first get after the writer took the process mutex waited out the lock timeout).
        let until = ContinuousClock.now + .milliseconds(400)
        var slowest: Duration = .zero
        var gets = 0
        while gets < 50 || ContinuousClock.now < until {
            let start = ContinuousClock.now
            #expect(try cache.get(key: "a")?.data == Data("one".utf8))
            slowest = max(slowest, ContinuousClock.now - start)
            gets += 1
        }
        // Half the lock timeout: a loaded run's stalls stay far below it.
        #expect(slowest < .seconds(10), "a get waited \(slowest) behind a writer waiting for the append lock")
        #expect(writerDone.wait(timeout: .now()) == .timedOut, "the writer did not wait for the lock")

        holder.unlock()
        #expect(writerDone.wait(timeout: .now() + 60) == .success)
        try writerResult.withLock { try #require($0).get() }
        #expect(try cache.get(key: "b")?.data == Data("two".utf8))
    }
}
