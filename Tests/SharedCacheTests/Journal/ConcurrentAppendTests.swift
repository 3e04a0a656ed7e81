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

    /// sharedcache(5), "Writing": a put holding the lock shared does not catch up under it. If a
    /// checkpoint this process had not read sealed the segment just before, the record lands
    /// after the seal, where no reader looks: reading it back finds the seal, and the record is
    /// appended again to the next segment.
    @Test func aRecordThatLandsAfterASealItHadNotReadIsAppendedAgain() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        try cache.put(key: "before", data: Data("before".utf8))
        let engine = cache.engine
        let data = Data("after".utf8)
        var header = try engine.header(
            key: "k", metadata: EntryMetadata(), bodySize: UInt64(data.count), storedAt: 1, expiresAt: .max)
        header.bodyChecksum = data.withUnsafeBytes { CRC32C.checksum($0) }
        let location = try data.withUnsafeBytes { try engine.bodies.write(header, body: $0, durable: false) }
        let stored = StoredRecord(
            hash: header.keyHash, location: location, bodySize: header.bodySize, storedAt: 1, expiresAt: .max,
            key: header.key, etag: [], writer: .current)

        var checkpointed = false
        let appended = try LiveIndex.withAppendLock(
            timeout: .seconds(10), durable: false, shared: true,
            access: { step in
                let result = try engine.withState { state in try step(state.live) }
                // Caught up, not yet locked: another process's checkpoint seals the segment.
                if !checkpointed {
                    checkpointed = true
                    try other.checkpoint()
                }
                return result
            }
        ) { live in try live.append { _ in ([.stored(stored)], ()) } }
        #expect(checkpointed)
        #expect(appended.segment?.generation == 2)
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        #expect(try reader.get(key: "k")?.data == data)
        #expect(try other.get(key: "k")?.data == data)
        #expect(try reader.get(key: "before")?.data == Data("before".utf8))
        #expect(try reader.verify().problems.isEmpty)
    }
}
