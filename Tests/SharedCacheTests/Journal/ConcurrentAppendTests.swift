import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCacheFormat

/// sharedcache(5), "Writing": puts hold the append lock shared, so another process's record may
/// land between a put's catch-up and its write. The put then reads its record back with the
/// other's, in journal order, and the version it replaced is the one that landed first.
///
/// The other writer is a second instance in this process, run from the put's hook, so that its
/// record lands exactly in that window; it shares nothing with the first but the directory (its
/// own descriptors, locks and index), as another process. The same race between processes, at
/// random moments and under kills, is `StressTests`' and the power-loss checker's.
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
        // Counted once each, the put read back too, and theirs as superseded.
        let activity = try #require(try cache.statistics().directory)
        #expect(activity.stores == 2)
        #expect(activity.removals[.superseded] == 1)
    }

    /// What lands between a put's catch-up and its write, in another process.
    enum Landing: String, CaseIterable, CustomTestStringConvertible {
        /// A checkpoint: the put's record lands after its seal.
        case checkpoint
        /// A checkpoint, then a put of the same key with a record of the same size, which is the
        /// next segment's first record: it has the number the put's record has after the seal.
        case checkpointThenAPutNumberedAlike
        /// Three checkpoints with no retention: the segment the put writes to, and the next,
        /// are retired (unlinked) before it writes.
        case checkpointsRetiringTwoSegments

        var testDescription: String { rawValue }
    }

    /// sharedcache(5), "Writing": a put holding the lock shared does not catch up under it. If a
    /// checkpoint this process had not read sealed the segment just before, the record lands
    /// after the seal, where no reader looks: reading it back finds the seal, and the record is
    /// appended again where the journal goes on.
    @Test(arguments: Landing.allCases)
    func aRecordThatLandsAfterASealItHadNotReadIsAppendedAgain(_ landing: Landing) throws {
        let directory = try TemporaryDirectory()
        let retiring = landing == .checkpointsRetiringTwoSegments
        let configuration = Configuration(journalRetention: retiring ? .zero : .seconds(60), memoryCostLimit: 0)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        let other = try SharedCache(directory: directory("cache"), configuration: configuration)
        try cache.put(key: "before", data: Data("before".utf8))
        let (first, second) = (directory("cache/journal/0000000000000001"), directory("cache/journal/0000000000000002"))
        var sealedSize: UInt64 = 0, theirRecordSize: UInt64 = 0
        let ours = Data("ours".utf8)
        try cache.engine.store(key: "k", data: ours, metadata: EntryMetadata(), storedAt: 1, expiresAt: .max) {
            for _ in 0..<(retiring ? 3 : 1) { try other.checkpoint() }
            if landing == .checkpointThenAPutNumberedAlike {
                sealedSize = try fileSize(first)
                try other.engine.store(
                    key: "k", data: Data("them".utf8), metadata: EntryMetadata(), storedAt: 1, expiresAt: .max)
                theirRecordSize = try fileSize(second) - UInt64(SegmentHeader.size)
            }
        }
        if landing == .checkpointThenAPutNumberedAlike {
            // Ours, void after the seal, is as long as theirs: the two have the same number.
            #expect(try fileSize(first) - sealedSize == theirRecordSize)
        }
        if retiring {
            #expect(!FileManager.default.fileExists(atPath: first) && !FileManager.default.fileExists(atPath: second))
        }
        #expect(try cache.statistics().journalGeneration == (retiring ? 4 : 2))
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        #expect(try reader.get(key: "k")?.data == ours)
        #expect(try other.get(key: "k")?.data == ours)
        #expect(try reader.get(key: "before")?.data == Data("before".utf8))
        #expect(try reader.verify().problems.isEmpty)
    }

    private func fileSize(_ path: String) throws -> UInt64 {
        UInt64(try #require(try URL(fileURLWithPath: path).resourceValues(forKeys: [.fileSizeKey]).fileSize))
    }
}
