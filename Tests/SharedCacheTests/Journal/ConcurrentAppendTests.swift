import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCacheFormat

/// sharedcache(5), "Writing": puts hold the append lock shared, so another process's record may
/// land between a put's catch-up and its write. The put then reads its record back with the
/// other's, in journal order, and the version it replaced is the one that landed first.
@Suite("Appending at once: a record that lands after another's")
struct ConcurrentAppendTests {
    @Test func aRecordThatLandsAfterAnothersIsReadBackInJournalOrder() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        // Blobs: a replaced version's body must be unlinked.
        let ours = Data(repeating: 1, count: 200_000), theirs = Data(repeating: 2, count: 200_000)
        var theirLocation: BodyLocation?
        let (_, location) = try cache.engine.store(
            key: "k", data: ours, metadata: EntryMetadata(), storedAt: 1, expiresAt: .max
        ) {
            // Caught up, holding the lock shared: another process's put of the same key lands.
            try other.put(key: "k", data: theirs)
            theirLocation = try other.engine.withState { $0.live.index[KeyHash(key: "k")] }?.location
        }
        #expect(theirLocation != nil && theirLocation != location)
        // Ours replaced theirs, and the put reclaimed their body: one blob is left.
        #expect(try cache.get(key: "k")?.data == ours)
        #expect(try other.get(key: "k")?.data == ours)
        #expect(try blobFiles(in: directory("cache")).count == 1)
        #expect(try cache.verify().problems.isEmpty)
    }
}
