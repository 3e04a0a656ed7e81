import Foundation
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCacheFormat

/// The shared journal end (stats slot 9): how a reader learns from one load that nothing was
/// appended, and how it still finds a record whose appender died before announcing it.
@Suite("The journal's end, as the shared counters publish it")
struct JournalEndTests {
    /// A reader that looked a moment ago trusts the shared end for 50 ms: a single record
    /// appended since raises it, so the reader's very next call reads it.
    @Test func aReaderThatJustLookedSeesTheNextRecordAtOnce() throws {
        let directory = try TemporaryDirectory()
        let configuration = Configuration(memoryCostLimit: 0)
        let writer = try SharedCache(directory: directory("cache"), configuration: configuration)
        let reader = try SharedCache(directory: directory("cache"), configuration: configuration)
        for round in 0..<10 {
            #expect(try !reader.contains(key: "k\(round)"))  // a look: up to date now
            try writer.put(key: "k\(round)", data: Data("v".utf8))
            #expect(try reader.contains(key: "k\(round)"), "round \(round)")
        }
    }

    @Test func everyAppendRaisesTheSharedJournalEnd() throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"))
        let reader = try SharedCache(directory: directory("cache"))
        let counters = try #require(writer.engine.sharedCounters)
        let before = counters.value(.journalSequence)
        try writer.put(key: "a", data: Data("one".utf8))
        #expect(counters.value(.journalSequence) > before)
        #expect(counters.value(.journalSequence) == (try writer.statistics()).journalSequence)
        // Another instance (as another process would) sees it on its very next call.
        #expect(try reader.get(key: "a")?.data == Data("one".utf8))
        try writer.checkpoint()
        #expect(counters.value(.journalSequence) == (try writer.statistics()).journalSequence)
    }

    /// `stats` deleted and made anew while a process has the old file mapped: the two would each
    /// raise a journal end the other never reads, so each found the other's puts only at its
    /// 50 ms look at the journal, for as long as the old process lived. At its next look the old
    /// process maps the file the others read, and its puts raise the end they trust again.
    @Test func countersMadeAnewAreFollowed() throws {
        let directory = try TemporaryDirectory()
        let old = try SharedCache(directory: directory("cache"))
        try old.put(key: "a", data: Data("one".utf8))
        try FileManager.default.removeItem(atPath: directory("cache/stats"))
        let new = try SharedCache(directory: directory("cache"))  // makes stats anew
        var puts = 0
        #expect(
            try eventually(within: .seconds(10)) {
                puts += 1
                try old.put(key: "p\(puts)", data: Data("two".utf8))
                return try new.engine.sharedCounters?.value(.journalSequence) == old.statistics().journalSequence
            })
        #expect(try old.statistics().directory?.stores == new.statistics().directory?.stores)
    }

    /// A reader trusts the shared counter only between checks of the journal itself (every
    /// 50 ms): a record the counter never announced is still found.
    @Test func aRecordNobodyAnnouncedIsStillFound() throws {
        let directory = try TemporaryDirectory()
        let writer = try SharedCache(directory: directory("cache"))
        let reader = try SharedCache(directory: directory("cache"))
        try writer.put(key: "a", data: Data("one".utf8))
        #expect(try reader.contains(key: "a"))
        // Append a removal the way a process killed right after its write(2) leaves it: in the
        // journal, but not raised into the shared counter.
        let announced = try #require(writer.engine.sharedCounters).value(.journalSequence)
        try writer.engine.withState { state in
            let hash = KeyHash(key: "a")
            let location = try #require(state.live.index[hash]).location
            let record = RemovedRecord(hash: hash, location: location, reason: .manual, remover: .current)
            _ = try state.live.cursor.append([.removed(record)], durable: false)
        }
        #expect(try #require(writer.engine.sharedCounters).value(.journalSequence) == announced)
        // Found after at most the check interval (50 ms); 2 s is the bound of a busy machine.
        let deadline = ContinuousClock.now + .seconds(2)
        while try reader.contains(key: "a"), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.005) }
        #expect(try !reader.contains(key: "a"), "the unannounced removal was not found within 2 s")
    }
}
