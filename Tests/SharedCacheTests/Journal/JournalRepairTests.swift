import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCacheFormat

/// A writer repairs the tail of the journal segment whose append lock it holds, and no other:
/// following a seal from it leads into the next segment, whose own lock another process may
/// hold while its write(2) is visible only in part. Truncating that "torn" tail cut a record
/// its writer had already applied, and later resynchronised away, losing the put in every
/// process (found by the checkpoint-and-put test, 1 run in 8 on a loaded machine).
@Suite("Repairing the journal's tail")
struct JournalRepairTests {
    @Test func aRecordBeingWrittenInTheNextSegmentIsLeftAlone() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(journalRetention: .seconds(3600), memoryCostLimit: 0)
        let behind = try SharedCache(directory: directory("cache"), configuration: configuration)
        let checkpointer = try SharedCache(directory: directory("cache"), configuration: configuration)
        try behind.put(key: "a", data: Data("1".utf8))
        try checkpointer.checkpoint()  // seals segment 1, starts segment 2

        // Half of a record another writer is in the middle of appending to segment 2.
        let next = directory("cache/journal/0000000000000002")
        let frame = try SegmentFile.frame(.cleared(Remover(processID: 1, name: "x")), for: next, sequence: 4)
        try SegmentFile.append(frame.prefix(frame.count / 2), to: next)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: next)[.size] as? Int)

        // The process still behind in segment 1 reads on, holding segment 1's lock, across the
        // seal into segment 2.
        try behind.engine.withState { state in
            let locked = state.live.cursor.segment
            #expect(locked.generation == 1)
            _ = try state.live.cursor.advance(in: behind.engine.directory, repairing: locked) { _, _ in }
        }
        #expect(try FileManager.default.attributesOfItem(atPath: next)[.size] as? Int == size)
    }

    /// A damaged seal, the next segment already made: a segment is made only after the seal
    /// before it is flushed, so every process, one that only reads too, reads on in the next
    /// segment. (Truncated as a torn tail, it had its writer append to the old segment, where no
    /// other process reads.) `verify --repair` then checkpoints past it.
    @Test func aDamagedSealIsFollowedToTheNextSegment() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(journalRetention: .seconds(3600), memoryCostLimit: 0)
        let behind = try SharedCache(directory: directory("cache"), configuration: configuration)
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        let checkpointer = try SharedCache(directory: directory("cache"), configuration: configuration)
        try behind.put(key: "a", data: Data("1".utf8))
        #expect(try reader.get(key: "a")?.data == Data("1".utf8))
        try checkpointer.checkpoint()  // seals segment 1 with its last record, starts segment 2
        try checkpointer.put(key: "b", data: Data("2".utf8))

        let sealed = URL(fileURLWithPath: directory("cache/journal/0000000000000001"))
        var bytes = try Data(contentsOf: sealed)
        bytes[bytes.count - 3] ^= 0xFF  // inside the seal's next-generation field
        try bytes.write(to: sealed)

        #expect(try reader.get(key: "b")?.data == Data("2".utf8))
        try behind.put(key: "c", data: Data("3".utf8))
        #expect(try checkpointer.get(key: "c")?.data == Data("3".utf8))
        #expect(try reader.get(key: "c")?.data == Data("3".utf8))
        #expect(try SharedCache(directory: directory("cache")).get(key: "c")?.data == Data("3".utf8))
        #expect(try behind.verify().problems.map(\.kind) == [.damagedJournal])
        #expect(try behind.verify(repair: true).isClean)
        #expect(try behind.verify().problems.isEmpty)
    }

    /// A damaged header of the segment the manifest names: its name gives the generation and its
    /// first record the first sequence number, so the opener writes it anew, and the records
    /// after the checkpoint are kept (the advice was to remove the segment, and them with it).
    @Test func aDamagedSegmentHeaderIsWrittenAnew() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "checkpointed", data: Data("1".utf8))
        try cache.checkpoint()
        try cache.put(key: "after", data: Data("2".utf8))
        let segment = URL(fileURLWithPath: directory("cache/journal/0000000000000002"))
        let intact = try Data(contentsOf: segment)
        var bytes = intact
        bytes[12] ^= 0x40  // inside the generation field: the header's checksum fails
        try bytes.write(to: segment)

        // Another process opens it first and writes the header back.
        let read = try Worker.run(["get", directory("cache"), "after"])
        #expect(read.status == 0 && read.output == "2", "\(read.errors)")
        #expect(try Data(contentsOf: segment) == intact)
        let reopened = try SharedCache(directory: directory("cache"))
        #expect(try reopened.get(key: "checkpointed")?.data == Data("1".utf8))
        #expect(try reopened.verify().problems.isEmpty)
    }
}
