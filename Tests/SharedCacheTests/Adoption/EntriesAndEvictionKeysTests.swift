import Foundation
import Testing

@testable import SharedCache
import SharedCacheEngine
import SharedCachePlatform

/// The public listing of entries, and the keys that eviction removals carry.
@Suite("Adoption: listing entries, keys of evictions")
struct EntriesAndEvictionKeysTests {
    @Test func entriesListsKeySizeETagAndExpiryLeastRecentlyUsedFirst() throws {
        let directory = try TemporaryDirectory()
        // Recency is kept in milliseconds: the second put is made a second later by the clock.
        let clock = TestClock()
        let configuration = Configuration().judgingTime(by: clock)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        let inAnHour = Date(timeIntervalSinceNow: 3600)
        try cache.put(key: "first", data: Data(count: 10), metadata: EntryMetadata(etag: "\"1\"", expiry: .never))
        clock.advance(by: .seconds(1))
        try other.put(key: "second", data: Data(count: 20), metadata: EntryMetadata(expiry: .at(inAnHour)))

        let entries = try cache.entries()
        #expect(entries.map(\.key) == ["first", "second"])
        #expect(entries.map(\.size) == [10, 20])
        #expect(entries.map(\.etag) == ["\"1\"", nil])
        #expect(entries[0].expiresAt == nil)
        #expect(abs((entries[1].expiresAt ?? .distantPast).timeIntervalSince(inAnHour)) < 0.01)
        #expect(entries.map(\.hash) == ["first", "second"].map { KeyHash(key: $0) })

        try other.remove(key: "first")
        #expect(try cache.entries().map(\.key) == ["second"])
    }

    @Test func evictionsByTheCompactorCarryTheirKeys() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(entryLimit: 10, evictionGracePeriod: .zero))
        let subscriber = try SharedCache(directory: directory("cache"))
        let collector = RemovalCollector()
        let subscription = subscriber.onRemovals { collector.append($0) }
        defer { subscription.cancel() }
        let keys = (0..<20).map { "https://example.com/image/\($0).png" }
        for key in keys { try cache.put(key: key, data: Data(key.utf8)) }

        let report = try cache.compact()
        #expect(report.evictions.count == 11)  // down to 90 % of 10
        let removals = collector.wait(for: report.evictions.count)
        #expect(removals.count == report.evictions.count)
        #expect(removals.allSatisfy { $0.reason == .size })
        for removal in removals {
            #expect(removal.key.map { KeyHash(key: $0) } == removal.hash, "\(removal)")
        }
        #expect(Set(removals.compactMap(\.key)).isSubset(of: Set(keys)))
    }
}
