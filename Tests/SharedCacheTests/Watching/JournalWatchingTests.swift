import Foundation
import Testing

@testable import SharedCache

/// The fast path and its fallback, each tested on its own: a subscriber hears another
/// process's removal within a bound its re-check interval cannot meet, so the test fails when
/// the path it is about breaks.
@Suite("Journal watching: file events, and polling as the fallback")
struct JournalWatchingTests {
    /// Re-checking every ten minutes, the subscriber can hear the removal within a minute only
    /// through the kernel's file events (inotify on Linux, kqueue on Darwin). How fast it hears
    /// is the benchmark's to measure (microseconds); the bound only tells the paths apart.
    @Test func fileEventsDeliverAnotherProcesssRemovalWithoutTheRecheck() throws {
        try expectRemovalsHeard(watching: .fileEvents(recheckEvery: .seconds(600)), within: .seconds(60))
    }

    /// Polling every 100 ms (what network filesystems get) hears it too.
    @Test func pollingDeliversAnotherProcesssRemoval() throws {
        try expectRemovalsHeard(watching: .polling(every: .milliseconds(100)), within: .seconds(60))
    }

    /// Three removals, each by a worker process that puts and removes a key and exits; each must
    /// reach this process's subscriber within `bound` of the worker's exit. Nothing in this
    /// process touches the subscribed cache meanwhile, so only its watcher can deliver.
    func expectRemovalsHeard(watching: JournalWatching, within bound: Duration) throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        let subscriber = try SharedCache(directory: path, configuration: Configuration(journalWatching: watching))
        let collector = RemovalCollector()
        let subscription = subscriber.onRemovals { collector.append($0) }
        defer { subscription.cancel() }
        for round in 0..<3 {
            let key = "removed in round \(round)"
            #expect(try Worker.run(["put", path, key, "v"]).status == 0)
            #expect(try Worker.run(["remove", path, key]).status == 0)
            let removed = KeyHash(key: key)
            let heard = eventually(within: bound) { collector.all.contains { $0.hash == removed } }
            #expect(heard, "round \(round): not heard within \(bound) with \(watching)")
            guard heard else { return }
        }
        #expect(collector.all.map(\.reason) == [.manual, .manual, .manual])
    }
}
