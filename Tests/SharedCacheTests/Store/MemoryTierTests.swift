import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine

@Suite("The per-process memory tier: served from memory, never stale")
struct MemoryTierTests {
    /// Two instances on one directory coordinate only through its files, as two processes do.
    @Test func aCopyIsServedUntilAnotherInstanceReplacesOrRemovesTheEntry() throws {
        let directory = try TemporaryDirectory()
        let reader = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        let writer = try SharedCache(directory: directory("cache"), configuration: Configuration(memoryCostLimit: 0).withBlobFiles)
        try writer.put(key: "k", data: Data("one".utf8))
        #expect(try reader.get(key: "k")?.data == Data("one".utf8))

        // The blob vanishes behind everyone's back: the reader still has its checked copy.
        for blob in try blobFiles(in: directory("cache")) {
            try FileManager.default.removeItem(atPath: directory("cache/blobs/\(blob)"))
        }
        #expect(try reader.get(key: "k")?.data == Data("one".utf8))

        try writer.put(key: "k", data: Data("two".utf8))
        #expect(try reader.get(key: "k")?.data == Data("two".utf8))
        try writer.remove(key: "k")
        #expect(try reader.get(key: "k") == nil)

        try writer.put(key: "k", data: Data("three".utf8))
        #expect(try reader.get(key: "k")?.data == Data("three".utf8))
        try writer.clear()
        #expect(try reader.get(key: "k") == nil)
    }

    /// A copy is served without an index lookup while the index is unchanged. An expiry
    /// another instance moves changes the index but not the version, so the copy stays: its
    /// next hit must go by the moved expiry, not the one it was checked with.
    @Test func aCopyGoesByTheExpiryAnotherInstanceMoved() throws {
        let directory = try TemporaryDirectory()
        let clock = TestClock()
        let reader = try SharedCache(
            directory: directory("cache"), configuration: Configuration().judgingTime(by: clock))
        let writer = try SharedCache(directory: directory("cache"), configuration: Configuration(memoryCostLimit: 0))
        try writer.put(key: "k", data: Data("body".utf8), metadata: EntryMetadata(expiry: .after(.seconds(60))))
        // Read from disk, then checked against the index, then served on that check alone.
        for _ in 0..<2 { _ = try reader.get(key: "k") }
        #expect(try reader.get(key: "k")?.cacheType == .memory)

        #expect(try writer.get(key: "k", extendingExpiry: .after(.seconds(3600))) != nil)
        // Two minutes on: past the expiry the reader's copy was checked with, not the moved one.
        clock.advance(by: .seconds(120))
        #expect(try reader.get(key: "k")?.cacheType == .memory)
    }

    @Test func thePutterKeepsACopyToo() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        try cache.put(key: "k", data: Data("body".utf8))
        for blob in try blobFiles(in: directory("cache")) {
            try FileManager.default.removeItem(atPath: directory("cache/blobs/\(blob)"))
        }
        #expect(try cache.get(key: "k")?.data == Data("body".utf8))
    }

    @Test func theCostLimitHoldsAndTheLeastRecentlyUsedGoFirst() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let entry = try cache.put(key: "k", data: Data(repeating: 1, count: 100))
        var tier = MemoryTier(costLimit: 10_000)
        let hit = CacheHit(data: Data(repeating: 1, count: 100), entry: entry)
        let hashes = (0..<200).map { KeyHash(key: "key \($0)") }
        for (number, hash) in hashes.enumerated() {
            tier.insert(hit, for: hash, at: BodyLocation(blobID: 1))
            _ = tier.hit(hashes[0], at: BodyLocation(blobID: 1))  // keep the first one in use
            #expect(tier.cost <= 10_000, "after \(number + 1) inserts")
        }
        #expect(tier.hit(hashes[0], at: BodyLocation(blobID: 1)) != nil)
        #expect(tier.hit(hashes[1], at: BodyLocation(blobID: 1)) == nil)
        #expect(tier.hit(hashes[199], at: BodyLocation(blobID: 1)) != nil)
        // Another version of an entry is a miss, and drops the copy.
        #expect(tier.hit(hashes[199], at: BodyLocation(blobID: 2)) == nil)
        #expect(tier.hit(hashes[199], at: BodyLocation(blobID: 1)) == nil)
        // A body over a quarter of the limit is not kept.
        tier.insert(CacheHit(data: Data(count: 3000), entry: entry), for: hashes[5], at: BodyLocation(blobID: 1))
        #expect(tier.hit(hashes[5], at: BodyLocation(blobID: 1)) == nil)
    }

    /// A copy is served while it is used within the idle expiry of its last use, each use
    /// starting the period again, and dropped once it went unused for longer (Kingfisher's
    /// `expiration`, counted from the last access). Times are given, in nanoseconds.
    @Test func aCopyUnusedForLongerThanTheIdleExpiryIsDropped() throws {
        let directory = try TemporaryDirectory()
        let entry = try SharedCache(directory: directory("cache")).put(key: "k", data: Data("body".utf8))
        var tier = MemoryTier(costLimit: 10_000, idleExpiry: .seconds(1))
        let hash = KeyHash(key: "k")
        let location = BodyLocation(blobID: 1)
        tier.insert(CacheHit(data: Data("body".utf8), entry: entry), for: hash, at: location, now: 0)
        #expect(tier.hit(hash, at: location, now: 900_000_000)?.data == Data("body".utf8))
        #expect(tier.hit(hash, at: location, now: 1_800_000_000) != nil, "used 0.9 s after its last use")
        #expect(tier.hit(hash, at: location, now: 2_900_000_000) == nil, "unused for 1.1 s")
        #expect(tier.isEmpty)
    }

    /// Random inserts, hits (some of another version) and drops, against a list kept in order
    /// of use: the tier holds exactly what an exact LRU under both limits would.
    @Test(arguments: [0, 7])
    func theTierHoldsWhatAnExactLeastRecentlyUsedListWould(countLimit: Int) throws {
        var random = TestSeed.generator("theTierHoldsWhatAnExactLeastRecentlyUsedListWould \(countLimit)")
        let directory = try TemporaryDirectory()
        let entry = try SharedCache(directory: directory("cache")).put(key: "k", data: Data())
        let hashes = (0..<24).map { KeyHash(key: "key \($0)") }
        var tier = MemoryTier(costLimit: 4_000, countLimit: countLimit)
        var model: [(hash: KeyHash, location: BodyLocation, cost: Int)] = []  // least recently used first
        for step in 0..<3_000 {
            let hash = hashes[Int.random(in: 0..<hashes.count, using: &random)]
            let location = BodyLocation(blobID: UInt64.random(in: 1...2, using: &random))
            let held = model.firstIndex { $0.hash == hash }
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let size = Int.random(in: 0...900, using: &random)
                tier.insert(CacheHit(data: Data(count: size), entry: entry), for: hash, at: location)
                let cost = size + 1 + 128  // body, key "k", overhead
                guard cost <= 4_000 / 4 else { break }  // too large to keep: nothing changes
                if let held { model.remove(at: held) }
                model.append((hash, location, cost))
                while model.map(\.cost).reduce(0, +) > 4_000 || (countLimit > 0 && model.count > countLimit) {
                    model.removeFirst()
                }
            case 4..<9:
                let found = tier.hit(hash, at: location) != nil
                let expected = held.map { model[$0].location == location } ?? false
                #expect(found == expected, "step \(step); \(TestSeed.replay)")
                if let held {
                    let copy = model.remove(at: held)
                    if copy.location == location { model.append(copy) }
                }
            default:
                tier.drop(hash)
                if let held { model.remove(at: held) }
            }
            #expect(tier.count == model.count, "step \(step); \(TestSeed.replay)")
            #expect(tier.cost == model.map(\.cost).reduce(0, +), "step \(step); \(TestSeed.replay)")
        }
    }
}
