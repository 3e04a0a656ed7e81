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
}
