import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCacheEngine
import SharedCachePlatform

@Suite("Compaction and verification")
struct CompactionTests {
    static let quickGrace = Configuration(
        sizeLimit: 10_000, journalRetention: .zero, recencyInterval: .zero, evictionGracePeriod: .milliseconds(50))

    @Test func expiredEntriesGoFirstAndTheRestStays() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace.withBlobFiles)
        for index in 0..<5 {
            try cache.put(
                key: "old \(index)", data: Data(count: 100), metadata: EntryMetadata(expiry: .at(.distantPast)))
            try cache.put(key: "new \(index)", data: Data(count: 100))
        }
        let report = try cache.compact()
        #expect(report.expiredCount == 5)
        #expect(report.evictedForSpaceCount == 0)
        #expect(report.duration > .zero)  // a pass that journaled and unlinked took some time
        #expect(report.entriesBefore == 10 && report.entriesAfter == 5)
        #expect(try cache.statistics().entryCount == 5)
        for index in 0..<5 { #expect(try cache.get(key: "new \(index)") != nil) }
        #expect(try blobFiles(in: directory("cache")).count == 5)
        #expect(try cache.verify().isClean)
    }

    /// Entries read by another process are recent; the ones nobody read go first.
    @Test func sizeTrimmingFollowsAccessesJournaledByAnotherProcess() throws {
        let directory = try TemporaryDirectory()
        // The puts happen an hour ago, 10 ms apart, by this process's clock; the other
        // process's reads happen now, by the system's.
        let clock = TestClock(startingAt: Clock.nowMilliseconds() - 3_600_000)
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Self.quickGrace.judgingTime(by: clock))
        for index in 0..<10 {
            try cache.put(key: "k\(index)", data: Data(count: 1000))
            clock.advance(by: .milliseconds(10))
        }
        // Another process reads the five oldest entries; with a zero recency interval each hit
        // is journaled.
        for index in 0..<5 {
            let read = try Worker.run(
                ["get", directory("cache"), "k\(index)"], environment: ["SHAREDCACHE_TEST_RECENCY_MS": "0"])
            #expect(read.status == 0)
        }
        clock.set(to: Clock.nowMilliseconds() + 3_600_000)
        try cache.put(key: "k10", data: Data(count: 1000))  // 11,000 bytes > 10,000

        let report = try cache.compact()
        // Down to 9,000 bytes: the two least recently used go, k5 and k6, not the older k0...k4.
        #expect(report.evictions.map(\.hash) == [KeyHash(key: "k5"), KeyHash(key: "k6")])
        #expect(report.evictions.allSatisfy { $0.reason == .size })
        #expect(report.bytesAfter == 9000)
        #expect(try cache.get(key: "k0") != nil)
        #expect(try cache.get(key: "k5") == nil)
    }

    /// One body nearly as large as the limit, put last, must not cost the cache every other
    /// entry (each older by recency) before it goes itself.
    @Test func anEntryTooLargeToKeepGoesAloneAndTheOthersStay() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace)
        for index in 0..<10 { try cache.put(key: "small \(index)", data: Data(count: 500)) }
        try cache.put(key: "large", data: Data(count: 9_500))  // 14,500 bytes; the low-water mark is 9,000

        let report = try cache.compact()
        #expect(report.evictions.map(\.hash) == [KeyHash(key: "large")])
        #expect(report.evictions.allSatisfy { $0.reason == .size })
        #expect(try cache.get(key: "large") == nil)
        for index in 0..<10 { #expect(try cache.get(key: "small \(index)") != nil) }
    }

    /// A long-lived compactor (as in sharedcached) reads its own evictions back from the
    /// journal: each blob is still unlinked once, and a pass that finds the journal where its
    /// last checkpoint left it does not checkpoint again.
    @Test func aLongLivedCompactorUnlinksOnceAndSkipsIdleCheckpoints() throws {
        let directory = try TemporaryDirectory()
        var configuration = Self.quickGrace
        configuration.evictionGracePeriod = .zero
        configuration.journalRetention = .seconds(60)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration.withBlobFiles)
        for index in 0..<6 {
            try cache.put(
                key: "gone \(index)", data: Data(count: 100), metadata: EntryMetadata(expiry: .at(.distantPast)))
        }
        let compactor = try Compactor(cache: cache)
        let first = try compactor.pass(CompactionOptions())
        #expect(first.expiredCount == 6 && first.checkpoint != nil)
        let second = try compactor.pass(CompactionOptions())
        #expect(second.blobsUnlinked == 6, "each evicted blob unlinked once, not once more when read back")
        #expect(second.checkpoint == nil, "nothing was appended since the last checkpoint")
        #expect(try blobFiles(in: directory("cache")).isEmpty)

        try cache.put(key: "new", data: Data(count: 10))
        let third = try compactor.pass(CompactionOptions())
        #expect(third.blobsUnlinked == 0 && third.checkpoint != nil)
        #expect(try cache.verify().isClean)
    }

    /// A process killed between journaling a removal and unlinking the blob leaves the blob
    /// behind: the next compactor finds the removal in the journal (reading removals among the
    /// stored records, which it does not decode, from the oldest segment kept and across its
    /// seal) and unlinks it, rather than the orphan sweep an hour later.
    @Test func aBlobWhoseRemovalIsJournaledIsUnlinkedByTheNextCompactor() throws {
        let directory = try TemporaryDirectory()
        var configuration = Self.quickGrace
        configuration.journalRetention = .seconds(3600)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration.withBlobFiles)
        for index in 0..<3 { try cache.put(key: "kept \(index)", data: Data(count: 100)) }
        // The segment these went to is sealed, and kept: the removal lands in the next one.
        try cache.checkpoint()
        try cache.put(key: "gone", data: Data(count: 100))
        let hash = KeyHash(key: "gone")
        let location = try #require(cache.engine.withState { $0.live.index[hash] }?.location)
        // What `remove` journals, without the unlink that follows it.
        try cache.engine.commit { _ in
            ([.removed(RemovedRecord(hash: hash, location: location, reason: .manual, remover: .current))], ())
        }
        #expect(try blobFiles(in: directory("cache")).count == 4)

        let compactor = try Compactor(cache: cache)
        #expect(try Compactor.unlinkingNow(compactor) == 1)
        #expect(try blobFiles(in: directory("cache")).count == 3)
        #expect(try cache.verify().isClean)
    }

    /// A cache of blob files on a test clock, with a grace period of 10 s, holding one expired
    /// entry, "victim", of `body`; the cache, its clock and the victim's blob file.
    static func expiredVictim(_ body: Data, in path: String) throws -> (SharedCache, TestClock, blob: String) {
        let clock = TestClock()
        var configuration = Self.quickGrace.judgingTime(by: clock)
        configuration.evictionGracePeriod = .seconds(10)
        let cache = try SharedCache(directory: path, configuration: configuration.withBlobFiles)
        try cache.put(key: "victim", data: body, metadata: EntryMetadata(expiry: .at(.distantPast)))
        return (cache, clock, "\(path)/blobs/\(try #require(try blobFiles(in: path).first))")
    }

    /// The grace period runs on the configured clock, as expiry does: the test moves it, so a
    /// loaded machine cannot end the period before the checks within it run.
    @Test func evictionsAreJournaledBeforeTheirBlobsAreUnlinked() throws {
        let directory = try TemporaryDirectory()
        let (cache, clock, blob) = try Self.expiredVictim(Data("pinned body".utf8), in: directory("cache"))
        let pinned = try #require(FileHandle(forReadingAtPath: blob))  // a reader that opened it

        let compactor = try Compactor(cache: cache)
        let report = try compactor.pass(CompactionOptions())
        #expect(report.expiredCount == 1)
        // Journaled, so no process finds it any more, but the blob waits out its grace period.
        #expect(try cache.get(key: "victim") == nil)
        #expect(FileManager.default.fileExists(atPath: blob))
        #expect(try compactor.unlinkPendingBlobs(waitingForGracePeriod: false) == 0)
        #expect(compactor.nextUnlinkDue == clock.now + 10_000)
        clock.advance(by: .milliseconds(9_999))
        #expect(try compactor.unlinkPendingBlobs(waitingForGracePeriod: false) == 0)
        #expect(FileManager.default.fileExists(atPath: blob))

        // After the grace period the blob is unlinked; the reader that pinned it still reads it whole.
        clock.advance(by: .milliseconds(1))
        #expect(try compactor.unlinkPendingBlobs(waitingForGracePeriod: false) == 1)
        #expect(!FileManager.default.fileExists(atPath: blob))
        let body = try pinned.readToEnd() ?? Data()
        #expect(body.suffix(11) == Data("pinned body".utf8))
    }

    /// A packed body has no file to unlink: neither its eviction nor a removal another process
    /// journaled waits for one (the daemon woke after each grace period and said it had
    /// unlinked as many "evicted blobs").
    @Test func packedBodiesLeaveNothingToUnlink() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace)
        try cache.put(key: "expired", data: Data("small".utf8), metadata: EntryMetadata(expiry: .at(.distantPast)))
        try cache.put(key: "kept", data: Data("small".utf8))
        let compactor = try Compactor(cache: cache)
        let other = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace)
        #expect(try other.remove(key: "kept"))
        #expect(try compactor.pass(CompactionOptions()).expiredCount == 1)
        #expect(compactor.nextUnlinkDue == nil)
        #expect(try compactor.unlinkPendingBlobs(waitingForGracePeriod: true) == 0)
    }

    /// Waiting for the grace period (as `compact()` does) unlinks everything pending once it is
    /// over, by however long the wait was: a test's clock that stands still, or went back an
    /// hour, neither keeps the blob nor makes the wait longer than the grace period.
    @Test func waitingForTheGracePeriodUnlinksWhatIsPendingWhateverTheClockDoes() throws {
        let directory = try TemporaryDirectory()
        let clock = TestClock()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Self.quickGrace.judgingTime(by: clock).withBlobFiles)
        let compactor = try Compactor(cache: cache)
        for (round, move) in [Duration.zero, .seconds(-3600)].enumerated() {
            try cache.put(
                key: "victim \(round)", data: Data("body".utf8), metadata: EntryMetadata(expiry: .at(.distantPast)))
            #expect(try compactor.pass(CompactionOptions()).expiredCount == 1)
            clock.advance(by: move)
            #expect(try Compactor.unlinkingNow(compactor) == 1)
            #expect(try blobFiles(in: directory("cache")).isEmpty)
        }
    }

    /// The plan is made from the index and its evictions journaled a moment later: an entry
    /// another process replaced in between is not evicted (the version planned is gone, and the
    /// new one is fresh), and the pass does not report it. The other process puts when the pass
    /// first asks whether to stop, which it does once it has planned, before it journals.
    @Test func anEntryReplacedWhileAPassIsUnderWayIsNotEvicted() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace.withBlobFiles)
        for key in ["replaced", "expired"] {
            try cache.put(key: key, data: Data(count: 100), metadata: EntryMetadata(expiry: .at(.distantPast)))
        }
        let compactor = try Compactor(cache: cache)
        var replacement: Worker.Result?
        let report = try compactor.pass(CompactionOptions()) {
            if replacement == nil {
                replacement = try? Worker.run(["put", directory("cache"), "replaced", "new version"])
            }
            return false
        }
        #expect(replacement?.status == 0)
        #expect(report.evictions.map(\.hash) == [KeyHash(key: "expired")])
        #expect(try cache.get(key: "replaced")?.data == Data("new version".utf8))
        #expect(try cache.get(key: "expired") == nil)
        #expect(try cache.verify().isClean)
    }

    /// A put renames its blob into place a moment before it journals it, so a blob no entry
    /// names is only an orphan once it is old (ten minutes): the sweep leaves one written just
    /// now, and takes it once it is old.
    @Test func theOrphanSweepLeavesABlobWrittenJustNow() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace.withBlobFiles)
        try cache.put(key: "k", data: Data("body".utf8))
        let blob = try #require(try blobFiles(in: directory("cache")).first)
        // The same bytes under a blob ID nobody journaled: a put between its rename and its record.
        let unjournaled = directory("cache/blobs/\(blob.prefix { $0 != "." }).0123456789abcdef")
        try Data(contentsOf: URL(fileURLWithPath: directory("cache/blobs/\(blob)")))
            .write(to: URL(fileURLWithPath: unjournaled))

        #expect(try cache.compact().orphansRemoved == 0)
        #expect(FileManager.default.fileExists(atPath: unjournaled))
        try backdate(unjournaled)
        #expect(try cache.compact().orphansRemoved == 1)
        #expect(!FileManager.default.fileExists(atPath: unjournaled))
        #expect(try cache.get(key: "k")?.data == Data("body".utf8))
    }

    /// An evicted blob is most often older than the orphan sweep's age (it went because nobody
    /// read it for long): the sweep of the same pass leaves it to wait out its grace period
    /// all the same, or a reader that looked the entry up just before the eviction would find
    /// its blob gone.
    @Test func anOldEvictedBlobStillWaitsOutItsGracePeriod() throws {
        let directory = try TemporaryDirectory()
        let (cache, clock, blob) = try Self.expiredVictim(Data("old body".utf8), in: directory("cache"))
        try backdate(blob)

        let compactor = try Compactor(cache: cache)
        let report = try compactor.pass(CompactionOptions(sweepOrphans: true))
        #expect(report.expiredCount == 1)
        #expect(report.orphansRemoved == 0)
        #expect(FileManager.default.fileExists(atPath: blob))
        clock.advance(by: .seconds(10))
        #expect(try compactor.unlinkPendingBlobs(waitingForGracePeriod: false) == 1)
        #expect(!FileManager.default.fileExists(atPath: blob))
    }

    /// A pass passes over only a full disk when it checkpoints (its evictions are journaled,
    /// and the next pass checkpoints): any other failure, here a hung process holding the
    /// directory's lock, ends the pass with its error, so that `sharedcached` says so rather
    /// than never checkpointing again in silence.
    @Test func aPassThatCannotCheckpointThrowsWhy() async throws {
        let directory = try TemporaryDirectory()
        var configuration = Self.quickGrace.withBlobFiles
        configuration.lockTimeout = .milliseconds(200)
        let cache = try SharedCache(directory: directory("cache"), configuration: configuration)
        try cache.put(key: "expired", data: Data(count: 100), metadata: EntryMetadata(expiry: .at(.distantPast)))
        let holder = try Worker.start(["hold-lock", directory("cache/lock")], input: .pipe)
        defer { holder.signal(SIGKILL) }
        try #require(await holder.nextLine(within: .seconds(120)) == "holding")

        let compactor = try Compactor(cache: cache)
        let failure = #expect(throws: SharedCacheError.self) { try compactor.pass(CompactionOptions()) }
        #expect(failure?.code == .lockTimeout)
        #expect(try cache.get(key: "expired") == nil)  // journaled before the checkpoint
        holder.closeInput()
        #expect(await holder.wait() == .exited(0))
        #expect(try compactor.pass(CompactionOptions()).checkpoint != nil)
    }

    /// The compactor's plan judges expiry by the configured clock.
    @Test func theCompactorExpiresByTheConfiguredClock() throws {
        let directory = try TemporaryDirectory()
        let clock = TestClock()
        let cache = try SharedCache(
            directory: directory("cache"), configuration: Self.quickGrace.judgingTime(by: clock))
        try cache.put(key: "hour", data: Data(count: 100), metadata: EntryMetadata(expiry: .after(.seconds(3600))))
        try cache.put(key: "day", data: Data(count: 100), metadata: EntryMetadata(expiry: .after(.seconds(86400))))
        #expect(try cache.compact().expiredCount == 0)
        clock.advance(by: .seconds(3600))
        let report = try cache.compact()
        #expect(report.evictions.map(\.hash) == [KeyHash(key: "hour")])
        #expect(report.evictions.allSatisfy { $0.reason == .expired })
        #expect(try cache.statistics().entryCount == 1)
    }

    @Test func aSecondCompactorIsRefusedWithTheHoldersProcessID() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        let first = try Compactor(cache: cache)
        #expect(try cache.compactorProcessID() == getpid())
        do {
            _ = try Compactor(cache: try SharedCache(directory: directory("cache")))
            Issue.record("a second compactor started")
        } catch {
            #expect(error.code == .busy)
        }
        #expect(errorCode { try cache.compact() } == "busy")
        withExtendedLifetime(first) {}
    }

    @Test func noCompactorMeansNoProcessID() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try cache.compactorProcessID() == nil)
        _ = try cache.compact()
        #expect(try cache.compactorProcessID() == nil)
    }

    @Test func aDryRunChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.quickGrace.withBlobFiles)
        for index in 0..<20 { try cache.put(key: "k\(index)", data: Data(count: 1000)) }
        let journal = try Data(contentsOf: URL(fileURLWithPath: directory("cache/journal/0000000000000001")))
        let manifest = try Data(contentsOf: URL(fileURLWithPath: directory("cache/manifest")))
        let blobs = try blobFiles(in: directory("cache")).sorted()

        let report = try cache.compact(CompactionOptions(dryRun: true))
        #expect(report.dryRun)
        #expect(report.evictions.count == 11)  // 20,000 bytes down to 9,000
        #expect(report.checkpoint == nil)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("cache/journal/0000000000000001"))) == journal)
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("cache/manifest"))) == manifest)
        #expect(try blobFiles(in: directory("cache")).sorted() == blobs)
        #expect(try cache.statistics().entryCount == 20)
    }

    @Test func verifyRepairsPlantedDamageAndThenIsClean() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: .blobFiles)
        for index in 0..<6 { try cache.put(key: "k\(index)", data: Data(repeating: UInt8(index), count: 500)) }
        #expect(try cache.verify().isClean)
        let blobs = try blobFiles(in: directory("cache")).sorted()

        try FileManager.default.removeItem(atPath: directory("cache/blobs/\(blobs[0])"))  // a deleted blob
        var bytes = try Data(contentsOf: URL(fileURLWithPath: directory("cache/blobs/\(blobs[1])")))
        bytes[bytes.count - 3] ^= 0x40  // a flipped byte
        try bytes.write(to: URL(fileURLWithPath: directory("cache/blobs/\(blobs[1])")))
        let stray = "blobs/ab/\(String(repeating: "ab", count: 32)).0123456789abcdef"
        try Data("stray".utf8).write(to: URL(fileURLWithPath: directory("cache/\(stray)")))  // a stray blob
        try backdate(directory("cache/\(stray)"))
        _ = FileManager.default.createFile(atPath: directory("cache/blobs/notes.txt"), contents: Data())

        let found = try cache.verify()
        #expect(!found.isClean)
        #expect(Set(found.problems.map(\.kind)) == [.missingBlob, .damagedBlob, .orphanBlob, .foreignFile])
        #expect(try blobFiles(in: directory("cache")).count == 7)  // looking changed nothing

        let repaired = try cache.verify(repair: true)
        #expect(repaired.isClean)
        #expect(repaired.problems.count == 4)
        let again = try SharedCache(directory: directory("cache"), configuration: .blobFiles).verify()
        #expect(again.isClean)
        #expect(again.problems.isEmpty)
        #expect(again.entriesChecked == 4)
        let intact = try (0..<6).filter { try cache.get(key: "k\($0)")?.data == Data(repeating: UInt8($0), count: 500) }
        #expect(intact.count == 4)
    }

    /// A damaged length field makes a record seem to run past the end of the journal, as one
    /// still being written does; the whole record after it shows it is not (appends land one
    /// after another), so readers read past it at once, verify reports it, and --repair
    /// checkpoints past it.
    @Test func verifyFindsAndRepairsADamagedLength() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        let segment = URL(fileURLWithPath: directory("cache/journal/0000000000000001"))
        let afterA = try Data(contentsOf: segment).count
        try cache.put(key: "b", data: Data("b".utf8))
        try cache.put(key: "c", data: Data("c".utf8))
        var bytes = try Data(contentsOf: segment)
        bytes[afterA + 6] ^= 0x08  // b's length now runs past the end
        try bytes.write(to: segment)

        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.get(key: "c")?.data == Data("c".utf8))
        #expect(try reader.get(key: "b") == nil)
        #expect(try reader.verify().problems.map(\.kind) == [.damagedJournal])
        let repaired = try reader.verify(repair: true)
        #expect(repaired.problems.map(\.kind) == [.damagedJournal] && repaired.isClean)
        #expect(try reader.get(key: "c")?.data == Data("c".utf8))
        #expect(try SharedCache(directory: directory("cache")).verify().problems.isEmpty)
    }

    @Test func verifyRepairsADamagedJournalTail() throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        try cache.put(key: "a", data: Data("a".utf8))
        let segment = URL(fileURLWithPath: directory("cache/journal/0000000000000001"))
        var bytes = try Data(contentsOf: segment)
        try cache.put(key: "b", data: Data("b".utf8))
        bytes = try Data(contentsOf: segment)
        bytes[bytes.count - 5] ^= 0xFF
        try bytes.write(to: segment)
        let reader = try SharedCache(directory: directory("cache"))
        #expect(try reader.verify().problems.map(\.kind).contains(.damagedJournal))
        #expect(try reader.verify(repair: true).isClean)
        // The record for b is gone, so its blob is now an orphan a later sweep collects; a is fine.
        #expect(try SharedCache(directory: directory("cache")).get(key: "a")?.data == Data("a".utf8))
    }
}

extension Compactor {
    /// Waits out the grace period of everything pending and unlinks it.
    static func unlinkingNow(_ compactor: Compactor) throws -> Int {
        try compactor.unlinkPendingBlobs(waitingForGracePeriod: true)
    }
}

/// Sets a file's modification time an hour back: old enough to be no one's work in progress.
func backdate(_ path: String) throws {
    try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
}
