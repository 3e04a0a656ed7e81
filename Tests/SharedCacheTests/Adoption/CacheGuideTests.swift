import Foundation
import Testing

@testable import SharedCache
import SharedCacheEngine
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Kingfisher's cache guide, across processes: custom keys, cleaning expired entries only.
@Suite("Adoption: the cache guide across processes")
struct CacheGuideTests {
    @Test func aCustomCacheKeyServesSignedURLsWhoseQueryChanges() async throws {
        let origin = try Origin()
        let directory = try TemporaryDirectory()
        try origin.write("/fresh/avatar.png", "avatar bytes")
        let cache = try SharedCache(directory: directory("cache"))
        let other = try SharedCache(directory: directory("cache"))
        let options = FetchOptions(cacheKey: "avatar/42")
        let first = try await cache.fetch(URLRequest(url: origin.url("/fresh/avatar.png?token=aaa")), options: options)
        let second = try await other.fetch(URLRequest(url: origin.url("/fresh/avatar.png?token=bbb")), options: options)
        #expect(first.source == .downloaded && second.source == .fresh)
        #expect(second.data == Data("avatar bytes".utf8))
        #expect(origin.requests(to: "/fresh/avatar.png", atLeast: 1).count == 1)
        #expect(try cache.get(key: "avatar/42")?.data == Data("avatar bytes".utf8))
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: origin.url("/fresh/avatar.png?token=aaa"))) == nil)
    }

    @Test func removeExpiredRemovesOnlyExpiredEntriesWithTheirKeys() throws {
        let directory = try TemporaryDirectory()
        let offset = Locked<Int64>(0)
        var configuration = Configuration(entryLimit: 2, evictionGracePeriod: .zero)
        configuration.clock = WallClock { Clock.nowMilliseconds() + offset.withLock { $0 } }
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let collector = RemovalCollector()
        let subscription = cache.onRemovals { collector.append($0) }
        defer { subscription.cancel() }
        try cache.put(key: "short", data: Data("1".utf8), metadata: EntryMetadata(expiry: .after(.seconds(10))))
        for index in 0..<4 {
            try cache.put(key: "long\(index)", data: Data("2".utf8), metadata: EntryMetadata(expiry: .never))
        }
        offset.withLock { $0 = 20_000 }
        #expect(try cache.removeExpired() == 1)
        let removals = collector.wait(for: 1)
        #expect(removals.map(\.key) == ["short"] && removals.map(\.reason) == [.expired])
        // Over its entry limit, but nothing else expired: nothing else goes.
        #expect(try cache.entries().count == 4)
    }
}
