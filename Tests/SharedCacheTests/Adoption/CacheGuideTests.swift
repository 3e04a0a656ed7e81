import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Kingfisher's cache guide: custom keys (one instance's download fresh for another's), cleaning
/// expired entries only.
@Suite("Adoption: the cache guide")
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
        let clock = TestClock()
        let cache = try SharedCache(
            directory: directory("cache"),
            configuration: Configuration(entryLimit: 2, evictionGracePeriod: .zero).judgingTime(by: clock))
        let collector = RemovalCollector()
        let subscription = cache.onRemovals { collector.append($0) }
        defer { subscription.cancel() }
        try cache.put(key: "short", data: Data("1".utf8), metadata: EntryMetadata(expiry: .after(.seconds(10))))
        for index in 0..<4 {
            try cache.put(key: "long\(index)", data: Data("2".utf8), metadata: EntryMetadata(expiry: .never))
        }
        clock.advance(by: .seconds(20))
        #expect(try cache.removeExpired() == 1)
        let removals = collector.wait(for: 1)
        #expect(removals.map(\.key) == ["short"] && removals.map(\.reason) == [.expired])
        // Over its entry limit, but nothing else expired: nothing else goes.
        #expect(try cache.entries().count == 4)
    }

    @Test func everyHitSaysWhereTheBodyWasFound() async throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"))
        let reader = try SharedCache(directory: directory("cache"))
        let diskOnly = try SharedCache(directory: directory("cache"), configuration: Configuration(memoryCostLimit: 0))
        try writer.put(key: "k", data: Data("body".utf8))
        #expect(try writer.get(key: "k")?.cacheType == .memory)  // the put kept a copy
        #expect(try reader.get(key: "k")?.cacheType == .disk)
        #expect(try reader.get(key: "k")?.cacheType == .memory)
        #expect(try diskOnly.get(key: "k")?.cacheType == .disk)
        #expect(try diskOnly.get(key: "k")?.cacheType == .disk)

        let origin = try Origin()
        try origin.write("/fresh/a.txt", "a")
        let request = URLRequest(url: origin.url("/fresh/a.txt"))
        #expect(try await reader.fetch(request).cacheType == CacheType.none)
        #expect(try await reader.fetch(request).cacheType == .memory)
        #expect(try await diskOnly.fetch(request).cacheType == .disk)
    }

    static func hit(_ key: String, size: Int = 10) -> CacheHit {
        CacheHit(
            data: Data(count: size),
            entry: CacheEntry(
                key: key, hash: KeyHash(key: key), size: UInt64(size), etag: nil, lastModified: nil, storedAt: Date(),
                expiresAt: nil))
    }

    @Test func theMemoryTierKeepsAtMostItsCountLimitMostRecentlyUsedFirst() {
        var tier = MemoryTier(costLimit: 1 << 20, countLimit: 4)
        let keys = (0..<10).map { "key\($0)" }
        for (index, key) in keys.enumerated() {
            tier.insert(Self.hit(key), for: KeyHash(key: key), at: BodyLocation(blobID: UInt64(index)))
            #expect(tier.count <= 4)
        }
        #expect(tier.hit(KeyHash(key: "key9"), at: BodyLocation(blobID: 9)) != nil)
        #expect(tier.hit(KeyHash(key: "key0"), at: BodyLocation(blobID: 0)) == nil)
    }

    @Test func aCopyUnusedForTheIdleExpiryIsDroppedAndEachUseRestartsIt() {
        var tier = MemoryTier(costLimit: 1 << 20, idleExpiry: .seconds(1))
        let (hash, location) = (KeyHash(key: "k"), BodyLocation(blobID: 1))
        let second: UInt64 = 1_000_000_000
        tier.insert(Self.hit("k"), for: hash, at: location, now: 0)
        #expect(tier.hit(hash, at: location, now: second / 2)?.cacheType == .memory)
        #expect(tier.hit(hash, at: location, now: second * 14 / 10) != nil)  // 0.9 s after the last use
        #expect(tier.hit(hash, at: location, now: second * 3) == nil)  // 1.6 s after it
        #expect(tier.isEmpty)
    }

    @Test func aReadCanExtendTheExpiryForEveryProcess() throws {
        let directory = try TemporaryDirectory()
        let clock = TestClock()
        let configuration = Configuration().judgingTime(by: clock)
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        let lifetime = EntryMetadata(expiry: .after(.seconds(10)))
        try reader.put(key: "extended", data: Data("e".utf8), metadata: lifetime)
        try reader.put(key: "plain", data: Data("p".utf8), metadata: lifetime)

        clock.advance(by: .seconds(8))
        let hit = try reader.get(key: "extended", extendingExpiry: .cacheTime)
        #expect(hit?.data == Data("e".utf8))
        #expect(try reader.get(key: "plain", extendingExpiry: .none) != nil)
        clock.advance(by: .seconds(7))  // past the first 10 s, within 10 s of the read
        #expect(try other.get(key: "extended")?.data == Data("e".utf8))
        #expect(try other.get(key: "plain") == nil)
        clock.advance(by: .seconds(15))
        #expect(try other.get(key: "extended") == nil)
    }
}
