import Foundation
import Testing

@testable import SharedCache

@Suite("Removal subscriptions in one process")
struct RemovalTests {
    static let watchings: [JournalWatching] = [.default, .polling(every: .milliseconds(10))]

    @Test(arguments: watchings)
    func everyKindOfRemovalByAnotherInstanceArrivesOnceInOrder(watching: JournalWatching) throws {
        let directory = try TemporaryDirectory()
        let subscriber = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalWatching: watching))
        let remover = try SharedCache(directory: directory("cache"))
        try remover.put(key: "a", data: Data("1".utf8))
        try remover.put(key: "b", data: Data("1".utf8))
        try remover.put(key: "c", data: Data("1".utf8))

        let collector = RemovalCollector()
        let subscription = subscriber.onRemovals { collector.append($0) }
        try remover.put(key: "a", data: Data("2".utf8))  // supersedes a
        try remover.remove(key: "b")
        try remover.remove(hash: KeyHash(key: "c"))
        try remover.put(key: "d", data: Data("1".utf8))
        try remover.clear()  // a and d

        let removals = collector.wait(for: 5)
        #expect(removals.count == 5)
        #expect(removals.prefix(3).map(\.reason) == [.superseded, .manual, .manual])
        #expect(removals.prefix(3).map(\.hash) == ["a", "b", "c"].map { KeyHash(key: $0) })
        #expect(removals.prefix(3).map(\.key) == ["a", "b", nil])
        #expect(Set(removals.suffix(2).map(\.hash)) == Set(["a", "d"].map { KeyHash(key: $0) }))
        #expect(removals.suffix(2).allSatisfy { $0.reason == .cleared })
        #expect(removals.allSatisfy { $0.remover?.processID == UInt32(getpid()) })
        let sequences = removals.compactMap(\.sequence)
        #expect(sequences.count == 5)
        #expect(sequences == sequences.sorted())
        subscription.cancel()

        // Nothing more after cancelling: a subscription made after the cancel hears "e" and
        // then "fence"; once it heard the fence, the instance has read past "e".
        let later = RemovalCollector()
        let laterSubscription = subscriber.onRemovals { later.append($0) }
        try remover.put(key: "e", data: Data())
        try remover.remove(key: "e")
        try remover.put(key: "fence", data: Data())
        try remover.remove(key: "fence")
        #expect(later.wait(for: 2).map(\.key) == ["e", "fence"])
        #expect(collector.all.count == 5)
        laterSubscription.cancel()
    }

    @Test func removalsAsAnAsyncSequence() async throws {
        let directory = try TemporaryDirectory()
        let subscriber = try SharedCache(directory: directory("cache"))
        let remover = try SharedCache(directory: directory("cache"))
        let stream = subscriber.removals()
        let consumer = Task {
            var keys: [String?] = []
            for await batch in stream {
                keys += batch.map(\.key)
                if keys.count >= 3 { break }
            }
            return keys
        }
        for key in ["x", "y", "z"] {
            try remover.put(key: key, data: Data())
            try remover.remove(key: key)
        }
        #expect(await consumer.value == ["x", "y", "z"])
    }

    @Test func aProcessHearsItsOwnRemovalsToo() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let collector = RemovalCollector()
        let subscription = cache.onRemovals { collector.append($0) }
        try cache.put(key: "k", data: Data())
        try cache.remove(key: "k")
        #expect(collector.wait(for: 1).map(\.key) == ["k"])
        withExtendedLifetime(subscription) {}
    }

    @Test func twoSubscribersEachGetEveryRemovalOnce() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let remover = try SharedCache(directory: directory("cache"))
        let first = RemovalCollector(), second = RemovalCollector()
        let subscriptions = [cache.onRemovals { first.append($0) }, cache.onRemovals { second.append($0) }]
        for index in 0..<50 {
            try remover.put(key: "k\(index)", data: Data())
            try remover.remove(key: "k\(index)")
        }
        // Then a fence: once each heard it, each has read every removal there is, once.
        try remover.put(key: "fence", data: Data())
        try remover.remove(key: "fence")
        let expected = (0..<50).map { "k\($0)" } + ["fence"]
        #expect(first.wait(for: 51).map(\.key) == expected)
        #expect(second.wait(for: 51).map(\.key) == expected)
        withExtendedLifetime(subscriptions) {}
    }

    /// A subscriber that could not read while the journal rotated past the segments it needed
    /// reloads the manifest and still reports every entry it knew that is gone.
    @Test func aSubscriberBehindRetiredSegmentsReportsWhatItMissed() throws {
        let directory = try TemporaryDirectory()
        // A re-check interval so long that only an explicit call makes this instance read.
        let lagging = try SharedCache(
            directory: directory("cache"),
            configuration: Configuration(journalWatching: .polling(every: .seconds(3600))))
        let remover = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalRetention: .zero))
        for index in 0..<10 { try remover.put(key: "k\(index)", data: Data()) }
        let collector = RemovalCollector()
        let subscription = lagging.onRemovals { collector.append($0) }
        _ = try lagging.statistics()  // knows k0...k9 now, reading segment 1

        // Segment 1 is sealed; these land in segment 2, which the next checkpoints retire.
        try remover.checkpoint()
        for index in 0..<4 { try remover.remove(key: "k\(index)") }
        try remover.put(key: "k4", data: Data("replaced".utf8))
        for _ in 0..<2 { try remover.checkpoint() }
        #expect(!FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        try remover.remove(key: "k9")

        let statistics = try lagging.statistics()
        #expect(statistics.resynchronizations == 1)
        let removals = collector.wait(for: 6)
        let unknown = removals.filter { $0.reason == .unknown }
        #expect(Set(unknown.map(\.hash)) == Set((0..<5).map { KeyHash(key: "k\($0)") }))
        #expect(unknown.allSatisfy { $0.sequence == nil && $0.remover == nil })
        // What is still in the journal arrives as usual.
        #expect(removals.last?.hash == KeyHash(key: "k9"))
        #expect(removals.last?.reason == .manual)
        #expect(removals.count == 6)
        withExtendedLifetime(subscription) {}
    }

    @Test func theWatcherRunsWhileAnySubscriptionLives() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(!cache.isWatchingJournal)
        let first = cache.onRemovals { _ in }
        let second = cache.onRemovals { _ in }
        #expect(cache.isWatchingJournal)
        first.cancel()
        #expect(cache.isWatchingJournal)
        second.cancel()
        #expect(!cache.isWatchingJournal)
    }

    @Test func cancellingOrReleasingTheLastSubscriptionStopsTheWatcher() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let subscription = cache.onRemovals { _ in }
        #expect(cache.isWatchingJournal)
        subscription.cancel()
        #expect(!cache.isWatchingJournal)
        func subscribeAndRelease() { _ = cache.onRemovals { _ in } }
        subscribeAndRelease()
        #expect(!cache.isWatchingJournal)
    }
}
