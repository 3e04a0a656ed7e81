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
            // Caught up, not yet appending: another process's put of the same key lands.
            try other.put(key: "k", data: theirs)
            theirLocation = try other.engine.withState { $0.live.index[KeyHash(key: "k")] }?.location
        }
        let replacedLocation = try #require(theirLocation)
        #expect(replacedLocation != location)
        // Ours replaced theirs, and the put reclaimed their body: one blob is left.
        #expect(try cache.get(key: "k")?.data == ours)
        #expect(try other.get(key: "k")?.data == ours)
        #expect(try blobFiles(in: directory("cache")).count == 1)
        #expect(try cache.verify().problems.isEmpty)
    }

    /// What lands between a put's catch-up and its write, in another process.
    enum Landing: String, CaseIterable, CustomTestStringConvertible {
        /// A checkpoint: the put's record lands after its seal.
        case checkpoint
        /// A checkpoint, then a put of the same key with a body of the same size, which is the
        /// next segment's first record: it has the number the put's record has after the seal.
        case checkpointThenAPutNumberedAlike
        /// A checkpoint that retires the sealed segment at once (no retention).
        case checkpointRetiringTheSegment

        var testDescription: String { rawValue }
    }

    /// sharedcache(5), "Writing": a put holding the lock shared does not catch up under it. If a
    /// checkpoint this process had not read sealed the segment just before, the record lands
    /// after the seal, where no reader looks: reading it back finds the seal, and the record is
    /// appended again where the journal goes on.
    @Test(arguments: Landing.allCases)
    func aRecordThatLandsAfterASealItHadNotReadIsAppendedAgain(_ landing: Landing) throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(
            journalRetention: landing == .checkpointRetiringTheSegment ? .zero : .seconds(60), memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        try cache.put(key: "before", data: Data("before".utf8))
        let ours = Data("ours".utf8)
        try cache.engine.store(key: "k", data: ours, metadata: EntryMetadata(), storedAt: 1, expiresAt: .max) {
            try other.checkpoint()
            if landing == .checkpointThenAPutNumberedAlike {
                try other.engine.store(
                    key: "k", data: Data("them".utf8), metadata: EntryMetadata(), storedAt: 1, expiresAt: .max)
            }
        }
        #expect(try cache.statistics().journalGeneration == 2)
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        #expect(try reader.get(key: "k")?.data == ours)
        #expect(try other.get(key: "k")?.data == ours)
        #expect(try reader.get(key: "before")?.data == Data("before".utf8))
        #expect(try reader.verify().problems.isEmpty)
    }
}
