import Foundation
import Testing

@testable import SharedCache

/// Issue 18, defect 3: after emptying an old, already checkpointed journal segment,
/// `verify --repair` said "0 problems" while `compact` and `sharedcached` kept failing with the
/// advice to run it, so compaction was off for good. Now the compactor passes over a damaged
/// retired segment, `verify` reports it, and `verify --repair` removes it.
@Suite("A damaged retired journal segment")
struct RetiredSegmentTests {
    @Test func anEmptiedCheckpointedSegmentStopsNothingAndVerifyRepairsIt() async throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        do {
            // Segments stay a minute after their checkpoint: 1 and 2 are sealed, 3 is current.
            let cache = try SharedCache(directory: path, configuration: Configuration(journalRetention: .seconds(60)))
            try cache.put(key: "a", data: Data("one".utf8))
            try cache.checkpoint()
            try cache.put(key: "b", data: Data("two".utf8))
            try cache.checkpoint()
        }
        let oldest = "\(path)/journal/0000000000000001"
        #expect(FileManager.default.fileExists(atPath: oldest))
        #expect(truncate(oldest, 0) == 0)

        let compact = try await Tool.admin.run(["--dir", path, "compact"])
        #expect(compact.status == 0, "\(compact.errors)")
        let found = try await Tool.admin.run(["--dir", path, "verify"])
        #expect(found.status == 65)
        let repaired = try await Tool.admin.run(["--dir", path, "verify", "--repair"])
        #expect(repaired.status == 0, "\(repaired.errors)")
        #expect(!FileManager.default.fileExists(atPath: oldest))
        #expect(try await Tool.admin.run(["--dir", path, "verify"]).status == 0)
        #expect(try await Tool.daemon.run(["--dir", path, "--once"]).status == 0)

        let cache = try SharedCache(directory: path)
        #expect(try cache.get(key: "a")?.data == Data("one".utf8))
        #expect(try cache.get(key: "b")?.data == Data("two".utf8))
    }

    /// A checkpointer that died between its seal and its manifest leaves a sealed segment that
    /// no manifest covers: its records live only there and in the index of each process that
    /// read them. Should that segment then be damaged, `verify --repair` checkpoints from its
    /// own index before removing it, so nothing it held is lost and no process opening the
    /// directory has to rebuild the manifest. (Removed first, the manifest named a segment that
    /// was gone: the next process rebuilt it, and the packed entry recorded only there was lost.)
    @Test func aDamagedSealedSegmentNoManifestCoversIsCheckpointedBeforeItIsRemoved() throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        let sealed = "\(path)/journal/0000000000000001"
        let cache = try SharedCache(directory: path)
        try cache.put(key: "a", data: Data("one".utf8))
        try CheckpointTests.appendSealOfADeadCheckpoint(to: sealed)
        // Another process makes segment 2 behind the seal and appends there; this one reads on.
        let put = try Worker.run(["put", path, "b", "two"])
        #expect(put.status == 0, "\(put.errors)")
        #expect(try cache.get(key: "b")?.data == Data("two".utf8))
        #expect(try cache.statistics().journalGeneration == 2)
        #expect(truncate(sealed, 0) == 0)

        let report = try cache.verify(repair: true)
        #expect(report.problems.map(\.kind) == [.damagedJournal])
        #expect(report.isClean)
        #expect(!FileManager.default.fileExists(atPath: sealed))

        let fresh = try SharedCache(directory: path)
        #expect(try !fresh.statistics().rebuiltOnOpen)
        #expect(try fresh.get(key: "a")?.data == Data("one".utf8))
        #expect(try fresh.get(key: "b")?.data == Data("two".utf8))
        #expect(try fresh.verify().problems.isEmpty)
    }
}
