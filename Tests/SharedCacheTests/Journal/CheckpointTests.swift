import Foundation
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

@Suite("Checkpoints, segment rotation and journal repair")
struct CheckpointTests {
    @Test func checkpointFoldsTheJournalIntoTheManifestAndRetiresSegments() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalRetention: .zero))
        var generations: [UInt64] = []
        for round in 0..<4 {
            for index in 0..<20 { try cache.put(key: "key \(index)", data: Data("round \(round) \(index)".utf8)) }
            try cache.remove(key: "key \(round)")
            let summary = try cache.checkpoint()
            #expect(summary.entryCount == 19)
            generations.append(summary.generation)
        }
        #expect(generations == [2, 3, 4, 5])
        // The manifest covers everything, so only the segment just sealed and the live one remain.
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory("cache/journal")).sorted()
        #expect(segments == ["0000000000000004", "0000000000000005"])

        let reopened = try SharedCache(directory: directory("cache"))
        let statistics = try reopened.statistics()
        #expect(statistics.entryCount == 19)
        #expect(statistics.journalGeneration == 5)
        #expect(!statistics.rebuiltOnOpen)
        #expect(try reopened.get(key: "key 3") == nil)
        #expect(try reopened.get(key: "key 19")?.data == Data("round 3 19".utf8))
    }

    /// A manifest is written and read a chunk of 8,192 entries at a time, through one buffer
    /// each way: one of 20,000 entries (three chunks, the last part full) reads back whole.
    @Test func aManifestOfSeveralChunksReadsBackWhole() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalRetention: .zero, memoryCostLimit: 0))
        let count = 20_000
        for index in 0..<count { try cache.put(key: "key \(index)", data: Data(count: index % 97)) }
        #expect(try cache.checkpoint().entryCount == UInt64(count))

        let reopened = try SharedCache(directory: directory("cache"))
        let statistics = try reopened.statistics()
        #expect(!statistics.rebuiltOnOpen)
        #expect(statistics.entryCount == count)
        #expect(statistics.totalBytes == UInt64((0..<count).reduce(0) { $0 + $1 % 97 }))
        for index in stride(from: 0, to: count, by: 613) {
            #expect(try reopened.get(key: "key \(index)")?.data.count == index % 97)
        }
    }

    /// A writer whose reads follow a seal into the new segment may append there before the
    /// checkpointing process has stepped past its own seal. The checkpointer must apply those
    /// records, not skip them: it once stepped over them unapplied, so its index (and the next
    /// manifest it wrote) lost entries that every other process still had. Two instances, two
    /// threads, as two processes would race.
    @Test func aCheckpointerAppliesWhatOthersAppendRightAfterItsSeal() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(journalRetention: .zero, memoryCostLimit: 0)
        let checkpointer = try SharedCache(directory: directory("cache"), configuration: configuration)
        let writer = try SharedCache(directory: directory("cache"), configuration: configuration)
        let done = Locked(false)
        let failure = Locked<String?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                while !done.withLock({ $0 }) { try checkpointer.checkpoint() }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
            finished.signal()
        }
        for index in 0..<3000 { try writer.put(key: "key \(index)", data: Data(count: 10)) }
        done.withLock { $0 = true }
        finished.wait()
        #expect(failure.withLock { $0 } == nil)

        let fresh = try SharedCache(directory: directory("cache"), configuration: configuration)
        #expect(try writer.statistics().entryCount == 3000)
        #expect(try checkpointer.statistics().entryCount == 3000)
        #expect(try fresh.statistics().entryCount == 3000)
    }

    /// A process that opened the cache long ago follows the seals across rotations, or, when the
    /// segments it needs were retired, reloads from the manifest.
    @Test func aLaggingReaderCatchesUpAcrossRetiredSegments() throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalRetention: .zero))
        let reader = try SharedCache(directory: directory("cache"))
        try writer.put(key: "stays", data: Data("1".utf8))
        try writer.put(key: "goes", data: Data("1".utf8))
        #expect(try reader.get(key: "goes") != nil)
        for round in 0..<5 {
            try writer.put(key: "stays", data: Data("\(round)".utf8))
            try writer.checkpoint()
        }
        try writer.remove(key: "goes")
        #expect(try reader.get(key: "stays")?.data == Data("4".utf8))
        #expect(try reader.get(key: "goes") == nil)
        let statistics = try reader.statistics()
        #expect(statistics.resynchronizations == 1)
        #expect(statistics.journalGeneration == 6)
    }

    /// Found by sharedcache-stress: a process whose segment's successors were all retired used
    /// to re-create the next segment and append there, where no up-to-date process looks.
    @Test func aWriterBehindRetiredSegmentsAppendsWhereEveryoneReads() throws {
        let directory = try TemporaryDirectory()
        let behind = try SharedCache(directory: directory("cache"), configuration: Configuration(memoryCostLimit: 0))
        let ahead = try SharedCache(
            directory: directory("cache"), configuration: Configuration(journalRetention: .zero, memoryCostLimit: 0))
        #expect(try behind.statistics().journalGeneration == 1)
        for round in 0..<3 {
            try ahead.put(key: "round \(round)", data: Data("\(round)".utf8))
            try ahead.checkpoint()
        }
        #expect(!FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        try behind.put(key: "from behind", data: Data("late".utf8))
        #expect(try ahead.get(key: "from behind")?.data == Data("late".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        #expect(try SharedCache(directory: directory("cache")).get(key: "from behind")?.data == Data("late".utf8))
    }

    @Test func aReaderOneCheckpointBehindFollowsTheSealWithoutReloading() throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"))
        let reader = try SharedCache(directory: directory("cache"))
        try writer.put(key: "k", data: Data("before".utf8))
        try writer.checkpoint()
        try writer.put(key: "k", data: Data("after".utf8))
        #expect(try reader.get(key: "k")?.data == Data("after".utf8))
        #expect(try reader.statistics().resynchronizations == 0)
    }

    /// sharedcache(5): a torn record at the end of the journal is "not yet written" to readers;
    /// once a put (which appends at once, repairing nothing) lands after it, every reader reads
    /// past it.
    @Test func aTornRecordIsReadPastOnceAPutFollowsIt() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        let segment = directory("cache/journal/0000000000000001")
        // The first half of a record, as a process killed in the middle of its write leaves it.
        let dying = JournalRecord.stored(
            StoredRecord(
                hash: KeyHash(key: "dying"), location: BodyLocation(blobID: 1), bodySize: 1, storedAt: 1,
                expiresAt: .max, key: Array("dying".utf8), etag: []))
        let frame = try SegmentFile.frame(dying, for: segment, sequence: 0)
        try SegmentFile.append(frame.prefix(frame.count / 2), to: segment)

        // A put appends after it (puts do not repair: they append at once), and every reader
        // reads past it: a record cut off with one after it is dead.
        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.get(key: "a")?.data == Data("a".utf8))
        try reader.put(key: "b", data: Data("b".utf8))
        #expect(try reader.statistics().journalRepairs == 0)
        #expect(try cache.get(key: "b")?.data == Data("b".utf8))
        // Behind every reader's position now, it stays until verify --repair checkpoints past it.
        #expect(try reader.verify().problems.map(\.kind) == [.damagedJournal])
        #expect(try reader.verify(repair: true).isClean)

        let fresh = try SharedCache(directory: directory("cache"))
        #expect(try fresh.get(key: "a")?.data == Data("a".utf8))
        #expect(try fresh.get(key: "b")?.data == Data("b".utf8))
        #expect(try fresh.get(key: "dying") == nil)
        #expect(try fresh.statistics().entryCount == 2)
        #expect(try fresh.verify().problems.isEmpty)
    }

    /// A torn tail that nothing follows: readers wait at it (it may be a write still landing),
    /// and the next exclusive hold of the append lock (a removal) truncates it.
    @Test func aTornTailIsTruncatedByTheNextExclusiveAppender() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        let segment = directory("cache/journal/0000000000000001")
        let intact = try Data(contentsOf: URL(fileURLWithPath: segment))
        try SegmentFile.append(intact.suffix(40).prefix(30), to: segment)

        let remover = try SharedCache(directory: directory("cache"))
        #expect(try remover.remove(key: "a"))
        #expect(try remover.statistics().journalRepairs == 1)
        #expect(try cache.get(key: "a") == nil)
        #expect(try SharedCache(directory: directory("cache")).verify().problems.isEmpty)
    }

    /// sharedcache(5): readers read on past a damaged record at once, a damaged length too (it
    /// reads as a record cut off, and a whole record follows it). Puts append after it; the next
    /// exclusive append, or `verify --repair`, writes `lost` placeholders over exactly its bytes.
    /// Either way the entry it described becomes a miss, never wrong bytes, and nothing is
    /// truncated.
    @Test(arguments: JournalDamage.allCases)
    func aDamagedRecordCostsOnlyItself(_ damage: JournalDamage) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "first", data: Data("1".utf8))
        let segment = directory("cache/journal/0000000000000001")
        let afterFirst = try FileManager.default.attributesOfItem(atPath: segment)[.size] as! Int
        try cache.put(key: "second", data: Data("2".utf8))
        let afterSecond = try FileManager.default.attributesOfItem(atPath: segment)[.size] as! Int
        try cache.put(key: "third", data: Data("3".utf8))
        let intact = try Data(contentsOf: URL(fileURLWithPath: segment))

        var bytes = intact
        bytes[afterFirst + damage.offsetInRecord] ^= damage.mask
        try bytes.write(to: URL(fileURLWithPath: segment))

        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.get(key: "first")?.data == Data("1".utf8))
        #expect(try reader.get(key: "third")?.data == Data("3".utf8))
        // Another process puts; this one reads on.
        #expect(try Worker.run(["put", directory("cache"), "fourth", "4"]).status == 0)
        #expect(try reader.get(key: "third")?.data == Data("3".utf8))
        #expect(try reader.get(key: "fourth")?.data == Data("4".utf8))
        #expect(try reader.get(key: "second") == nil)

        // Only the damaged record's bytes changed, and nothing was truncated.
        let repaired = try Data(contentsOf: URL(fileURLWithPath: segment))
        #expect(repaired.prefix(afterFirst) == intact.prefix(afterFirst))
        try #require(repaired.count > intact.count)
        #expect(repaired[afterSecond..<intact.count] == intact[afterSecond...])

        let fresh = try SharedCache(directory: directory("cache"))
        #expect(try fresh.get(key: "first")?.data == Data("1".utf8))
        #expect(try fresh.get(key: "second") == nil)
        #expect(try fresh.get(key: "third")?.data == Data("3".utf8))
        #expect(try fresh.get(key: "fourth")?.data == Data("4".utf8))
        // A damaged record every process reads past stays until verify --repair (or the next
        // exclusive append) deals with it.
        #expect(try fresh.verify().problems.map(\.kind).contains(.damagedJournal))
        #expect(try fresh.verify(repair: true).isClean)
        #expect(try SharedCache(directory: directory("cache")).verify().problems.isEmpty)
        #expect(try SharedCache(directory: directory("cache")).get(key: "third")?.data == Data("3".utf8))
    }

    /// A journal more than two reads (4 MiB each) behind a process, whose reads end inside
    /// records: each record cut by a read is read again from its start, never taken for the
    /// journal's end, so the exclusive appender that catches up under the lock truncates nothing.
    @Test func aJournalLongerThanOneReadIsReadWhole() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(memoryCostLimit: 0)
        let behind = try SharedCache(directory: directory("cache"), configuration: configuration)
        let writer = try SharedCache(directory: directory("cache"), configuration: configuration)
        let long = String(repeating: "x", count: 60_000)  // records of ~60 KB: 9 MB in all
        for index in 0..<150 { try writer.put(key: "\(index)-\(long)", data: Data("v".utf8)) }
        #expect(try behind.remove(key: "0-\(long)"))
        let after = try SharedCache(directory: directory("cache"), configuration: configuration)
        let missing = try (1..<150).filter { try !after.contains(key: "\($0)-\(long)") }
        #expect(missing.isEmpty)
        #expect(try after.verify().problems.isEmpty)
    }

    /// A checkpoint leaves its process in the new segment: what it reads right after (within
    /// the 50 ms the shared journal end is trusted) is the new segment's.
    @Test func aCheckpointMovesItsProcessIntoTheNewSegment() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("one".utf8))
        let before = try cache.statistics().journalGeneration
        try cache.checkpoint()
        #expect(try cache.statistics().journalGeneration == before + 1)
    }

    /// Where a test damages a record, relative to its first byte.
    enum JournalDamage: CaseIterable, CustomTestStringConvertible {
        /// A bit inside the record: its checksum fails.
        case payload
        /// A high bit of its length: the frame seems to run past the end of the segment, as a
        /// record still being written does.
        case length

        var offsetInRecord: Int { self == .payload ? 30 : 6 }
        var mask: UInt8 { self == .payload ? 0xFF : 0x08 }
        var testDescription: String { self == .payload ? "a flipped byte" : "a damaged length" }
    }

    /// A checkpointer that died after sealing but before creating the next segment: readers
    /// wait at the seal, and the next writer creates the segment and carries on.
    @Test func sealWithoutNextSegmentIsFinishedByTheNextWriter() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        try Self.appendSealOfADeadCheckpoint(to: directory("cache/journal/0000000000000001"))

        let other = try SharedCache(directory: directory("cache"))
        #expect(try other.get(key: "a")?.data == Data("a".utf8))
        #expect(!FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        try other.put(key: "b", data: Data("b".utf8))
        #expect(FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        #expect(try other.statistics().journalGeneration == 2)
        #expect(try cache.get(key: "b")?.data == Data("b".utf8))
        #expect(try cache.statistics().journalSequence == other.statistics().journalSequence)
        #expect(try SharedCache(directory: directory("cache")).statistics().entryCount == 2)
    }

    /// The same, when the seal lands after the writer caught up: its record lands after the
    /// seal, void; reading it back finds the seal, and it makes the next segment (with the lock
    /// held exclusively) and appends the record again there.
    @Test func sealWithoutNextSegmentIsFinishedByAWriterThatHadNotReadIt() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        try cache.engine.store(
            key: "b", data: Data("b".utf8), metadata: EntryMetadata(), storedAt: 1, expiresAt: .max
        ) {
            try Self.appendSealOfADeadCheckpoint(to: directory("cache/journal/0000000000000001"))
        }
        #expect(FileManager.default.fileExists(atPath: directory("cache/journal/0000000000000002")))
        #expect(try cache.statistics().journalGeneration == 2)
        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.get(key: "b")?.data == Data("b".utf8))
        #expect(try reader.get(key: "a")?.data == Data("a".utf8))
        #expect(try reader.verify().problems.isEmpty)
    }

    /// A put's record that landed after a dead checkpoint's seal, from a process that died
    /// before appending it again: the bytes after the seal are void, not damage.
    @Test func aRecordAfterADeadCheckpointsSealIsNotDamage() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        let segment = directory("cache/journal/0000000000000001")
        let records = try Data(contentsOf: URL(fileURLWithPath: segment)).dropFirst(SegmentHeader.size)
        try Self.appendSealOfADeadCheckpoint(to: segment)
        try SegmentFile.append(records, to: segment)

        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.verify().problems.isEmpty)
        try reader.put(key: "b", data: Data("b".utf8))
        #expect(try SharedCache(directory: directory("cache")).statistics().entryCount == 2)
    }

    /// Appends to segment 1 the seal a checkpoint writes before it makes segment 2, as if it
    /// died right after.
    static func appendSealOfADeadCheckpoint(to segment: String) throws {
        try SegmentFile.append(SegmentFile.frame(.sealed(nextGeneration: 2), for: segment, sequence: 2), to: segment)
    }
}
