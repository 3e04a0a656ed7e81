import Foundation
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The fetch lock's file, kept open after a release for the next fetch of the URL: taken again,
/// it still keeps out another fetch of the URL in this process, and a file the sweep deleted
/// meanwhile is never the one locked.
@Suite("HTTP: the fetch lock's files kept open")
struct FetchLockTests {
    let directory: TemporaryDirectory
    let cache: SharedCache
    let hash = KeyHash(key: "https://example.com/locked")

    init() throws {
        directory = try TemporaryDirectory()
        cache = try SharedCache(directory: directory("cache"))
    }

    func acquire(timeout: Duration = .seconds(5)) async throws -> FetchLock? {
        try await cache.engine.fetchLocks.acquire(hash, timeout: timeout, describing: "the test's URL").0
    }

    /// Whether another open file description could lock the file at the lock's path now; `nil`
    /// when there is no file there.
    func pathIsFree() throws -> Bool? {
        let descriptor = open(directory("cache/fetching/\(hash.hex)"), O_RDWR | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return false }
        flock(descriptor, LOCK_UN)
        return true
    }

    @Test func aLockTakenAgainKeepsOutAnotherFetchOfTheURL() async throws {
        let first = try #require(try await acquire())
        first.release()
        let held = try #require(try await acquire())
        #expect(held === first, "the released lock's file was not kept open for the next fetch")
        #expect(try pathIsFree() == false)
        // Another fetch of the URL in this process: the file kept open went to the holder, so
        // this one opens its own, and waits.
        #expect(try await acquire(timeout: .milliseconds(50)) == nil)
        held.release()
        #expect(try pathIsFree() == true)
        let next = try #require(try await acquire(timeout: .milliseconds(50)))
        next.release()
    }

    @Test func aFileTheSweepDeletedIsNotTheOneLocked() async throws {
        let first = try #require(try await acquire())
        first.release()
        // Older than any cutoff: the sweep deletes the file, which nobody holds.
        let swept = try FetchLock.sweep(in: cache.engine.directory, olderThan: Clock.nowMilliseconds() + 60_000)
        #expect(swept == 1)
        #expect(try pathIsFree() == nil)
        // Made anew, as another process's fetch of the URL would.
        #expect(FileManager.default.createFile(atPath: directory("cache/fetching/\(hash.hex)"), contents: nil))
        let lock = try #require(try await acquire())
        // The lock is on the file at the path, not on the deleted one kept open.
        #expect(try pathIsFree() == false)
        lock.release()
    }
}
