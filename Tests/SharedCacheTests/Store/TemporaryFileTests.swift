import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
@testable import SharedCachePlatform
import SharedCacheFormat

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 18, defect 2: a put whose temporary file vanished before its rename spun forever
/// (`renameat2` ENOENT, `mkdirat` EEXIST, again), and a sweeper judged writers dead by the age
/// of their files, so a writer stopped for an hour lost its file.
@Suite("Temporary files: a vanished one fails its put, a live writer's is never swept")
struct TemporaryFileTests {
    // It used to spin for ever: the time limit fails the test where the spin would hang it.
    @Test(.hangLimit) func publishingATemporaryFileThatVanishedFailsAtOnce() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let store = BlobFileStore(directory: cache.engine.directory)
        #expect(throws: SystemError.self) { try store.publish("tmp/gone", hash: KeyHash(key: "k")) }
        // The cache is unharmed.
        try cache.put(key: "k", data: Data("v".utf8))
        #expect(try cache.get(key: "k")?.data == Data("v".utf8))
    }

    /// The temporary folder removed under an open cache (a stray file stood in its place, and was
    /// removed as the error about it advised) is made again by the next write that needs it.
    @Test func aTemporaryFolderRemovedUnderAnOpenCacheIsMadeAgain() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try FileManager.default.removeItem(atPath: directory("cache/tmp"))
        let body = Data(repeating: 7, count: 300_000)  // over the pack threshold: a blob, written in tmp/ first
        try cache.put(key: "big", data: body)
        #expect(try cache.get(key: "big")?.data == body)
    }

    @Test func aLockedTemporaryFileIsKeptHoweverOldAndAnUnlockedOneGoes() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let live = directory("cache/tmp/blob.4242.live"), dead = directory("cache/tmp/blob.4243.dead")
        for path in [live, dead] {
            #expect(FileManager.default.createFile(atPath: path, contents: Data("partial".utf8)))
            // Two hours old, as a writer stopped that long (or a clock jump) makes it look.
            var times = [timeval(tv_sec: time(nil) - 7200, tv_usec: 0), timeval(tv_sec: time(nil) - 7200, tv_usec: 0)]
            #expect(utimes(path, &times) == 0)
        }
        // The live writer holds its file's lock, as every writer does until it publishes.
        let writer = try FileDescriptor(path: live, flags: O_RDWR)
        #expect(try writer.tryLock(.exclusive))

        let report = try cache.verify(repair: true)
        #expect(report.problems.map(\.path) == ["tmp/blob.4243.dead"])
        #expect(!FileManager.default.fileExists(atPath: dead))
        try cache.checkpoint()
        #expect(FileManager.default.fileExists(atPath: live))

        writer.unlock()
        #expect(try cache.checkpoint().sweptTemporaryFiles == 1)
        #expect(!FileManager.default.fileExists(atPath: live))
    }
}
