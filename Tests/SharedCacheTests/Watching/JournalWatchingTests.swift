import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    /// No file events to be had (the user's inotify instances used up: `inotify_init1` fails with
    /// EMFILE, by a failpoint in the subscriber's process): the subscriber polls at its re-check
    /// interval, and hears another process's removal while it makes no call of its own. (It had
    /// no watcher at all, and heard nothing until its next call: the demo's clients, waiting for
    /// the end marker, waited for ever.)
    @Test func fileEventsUnavailableFallBackToPolling() async throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        let owner = try SharedCache(directory: path)
        let subscriber = try Worker.start(
            ["subscribe", path, "events", "100"], environment: ["SHAREDCACHE_FAILPOINT": "inotify_init1:1:EMFILE"])
        defer { if subscriber.isRunning { subscriber.signal(SIGKILL) } }
        #expect(await subscriber.nextLine(within: .seconds(60)) == "ready")
        try owner.put(key: "__end__", data: Data("end".utf8))
        #expect(try owner.remove(key: "__end__"))
        let lines = try #require(await subscriber.output?.rest(within: .seconds(60)), "the removal was not heard")
        let said = await subscriber.errors?.rest(within: .seconds(60)) ?? []
        // Under the address sanitizer, its leak check at exit found the read buffer the failed
        // inotify source had allocated, and the subscriber exited 1 (now and then: the check
        // runs at exit). What it says is kept for the message.
        #expect(await subscriber.wait() == .exited(0), "\(said)")
        // "SEQUENCE HASH REASON", one line a removal.
        let heard = lines.map { $0.split(separator: " ").dropFirst().joined(separator: " ") }
        #expect(heard.contains("\(KeyHash(key: "__end__").hex) manual"))
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
