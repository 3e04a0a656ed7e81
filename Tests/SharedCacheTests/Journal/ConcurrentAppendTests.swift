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
        let engine = cache.engine
        // A body written as a put writes it (a blob: it must be unlinked when replaced), not yet
        // journaled.
        let ours = Data(repeating: 1, count: 200_000), theirs = Data(repeating: 2, count: 200_000)
        var header = try engine.header(
            key: "k", metadata: EntryMetadata(), bodySize: UInt64(ours.count), storedAt: 1, expiresAt: .max)
        header.bodyChecksum = ours.withUnsafeBytes { CRC32C.checksum($0) }
        let location = try ours.withUnsafeBytes { try engine.bodies.write(header, body: $0, durable: false) }
        let stored = StoredRecord(
            hash: header.keyHash, location: location, bodySize: header.bodySize, storedAt: 1, expiresAt: .max,
            key: header.key, etag: [], writer: .current)

        let replaced = try engine.withAppendLock(shared: true) { live in
            // Caught up, holding the lock shared: another process's put of the same key lands.
            try other.put(key: "k", data: theirs)
            let appended = try live.append { _ in ([.stored(stored)], ()) }
            return (appended.replaced, appended.segment)
        }
        let theirLocation = try #require(try other.engine.withState { $0.live.index[header.keyHash] }).location
        #expect(theirLocation != location)
        #expect(replaced == [theirLocation])
        // What a put then does with it (CacheEngine.commitStored): its body goes.
        for location in replaced { try engine.bodies.reclaim(header.keyHash, at: location) }
        #expect(try cache.get(key: "k")?.data == ours)
        #expect(try other.get(key: "k")?.data == ours)
        #expect(try blobFiles(in: directory("cache")).count == 1)
        #expect(try cache.verify().problems.isEmpty)
    }
}
