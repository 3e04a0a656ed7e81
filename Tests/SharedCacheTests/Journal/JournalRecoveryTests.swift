import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine

/// sharedcache(5), Reading and recovery: a journal lost whole beside a valid manifest (its
/// folder removed, or a file in its place) starts again after the manifest, whose entries stay.
@Suite("A journal lost whole starts again after the manifest")
struct JournalRecoveryTests {
    /// Five packed entries checkpointed, then the journal's folder removed.
    func cacheWithoutItsJournal(_ directory: TemporaryDirectory) throws -> String {
        let path = directory("cache")
        let cache = try SharedCache(directory: path)
        for index in 0..<5 { try cache.put(key: "k\(index)", data: Data("v\(index)".utf8)) }
        try cache.checkpoint()
        try FileManager.default.removeItem(atPath: "\(path)/journal")
        return path
    }

    func expectEveryEntry(in path: String) throws {
        let cache = try SharedCache(directory: path)
        for index in 0..<5 { #expect(try cache.get(key: "k\(index)")?.data == Data("v\(index)".utf8), "k\(index)") }
    }

    @Test func theManifestsEntriesStay() throws {
        let directory = try TemporaryDirectory()
        let path = try cacheWithoutItsJournal(directory)
        let reopened = try SharedCache(directory: path)
        #expect(try reopened.statistics().rebuiltOnOpen)
        #expect(reopened.warnings.count == 1)
        try expectEveryEntry(in: path)
        #expect(try reopened.verify().isClean)
    }

    /// Two openers waiting on the directory lock to mend it: the second finds the first's
    /// journal going on from the manifest, and stands down. (Forced, it rebuilt over it from
    /// the blob files, and every packed entry was lost.)
    @Test func anOpenerThatWaitedStandsDownForTheJournalAnotherStarted() throws {
        let directory = try TemporaryDirectory()
        let path = try cacheWithoutItsJournal(directory)
        let first = try SharedCache(directory: path)
        let engine = first.engine
        let recovery = try LiveIndex.rebuild(
            engine.directory, bodies: engine.bodies, lock: engine.directoryLock, timeout: .seconds(10), durable: false,
            force: true)
        #expect(recovery == nil)
        try expectEveryEntry(in: path)
    }

    /// A process that had the cache open read records past the checkpoint, in the journal now
    /// gone: the journal made anew is numbered past them, so that process still reports every
    /// removal in it. (Numbered on from the manifest, its removals were below what the process
    /// had reported through, and it heard none.)
    @Test(arguments: [JournalWatching.polling(every: .milliseconds(10)), .default])
    func aSubscriberHearsRemovalsInTheJournalMadeAnew(watching: JournalWatching) throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        let writer = try SharedCache(directory: path)
        try writer.put(key: "k", data: Data("v".utf8))
        try writer.checkpoint()
        let subscriber = try SharedCache(directory: path, configuration: Configuration(journalWatching: watching))
        let heard = RemovalCollector()
        let subscription = subscriber.onRemovals { heard.append($0) }
        defer { subscription.cancel() }
        for index in 0..<20 {
            try writer.put(key: "junk\(index)", data: Data("j".utf8))
            try writer.remove(key: "junk\(index)")
        }
        #expect(heard.wait(for: 20).count == 20)
        try FileManager.default.removeItem(atPath: "\(path)/journal")
        let mender = try SharedCache(directory: path)
        try mender.put(key: "x", data: Data("x".utf8))
        try mender.remove(key: "x")
        #expect(heard.wait(for: 21).contains { $0.key == "x" })
    }
}
