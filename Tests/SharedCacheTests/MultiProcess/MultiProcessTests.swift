import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Many processes, one directory", .serialized)
struct MultiProcessTests {
    /// 4 processes × 2,000 mixed operations on 20 overlapping keys: every get returns a body
    /// some put stored for that key, or a miss; afterwards the directory is exactly its index.
    @Test func fourProcessesMixingPutsGetsAndRemoves() async throws {
        let directory = try TemporaryDirectory()
        let cache = directory("cache")
        let workers = try (1...4).map { worker in
            try Worker.start(["mixed", cache, "\(worker)", "2000", "20", "\(worker * 7919)"])
        }
        var totals: [String: Int] = [:]
        for worker in workers {
            let result = await Worker.Result(finishing: worker)
            #expect(result.status == 0, "\(result.errors)")
            for (name, value) in Worker.counters(result.output) { totals[name, default: 0] += value }
        }
        #expect(totals["violations"] == 0)
        #expect(totals["puts"]! > 2000)
        #expect(totals["hits"]! > 1000)
        #expect(totals["removes"]! > 100)

        // A fresh process sees a consistent final state: every indexed entry reads back genuine.
        let verify = try await Worker.run(["verify", cache, "20"])
        #expect(verify.status == 0, "\(verify.errors)")
        let counts = Worker.counters(verify.output)
        #expect(counts["damaged"] == 0)

        // Only live entries have blobs (every superseded or removed one was unlinked), each
        // writer packed into one segment of its own, and no writer left anything in tmp/.
        let reopened = try SharedCache(directory: cache)
        #expect(try blobFiles(in: cache).count <= reopened.statistics().entryCount)
        #expect(try packSegments(in: cache).count <= 4)
        #expect(counts["entries"] == (try reopened.statistics().entryCount))
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(cache)/tmp").isEmpty)
    }

    @Test func anotherProcessSeesPutsAndRemovals() async throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try await Worker.run(["put", directory("cache"), "shared", "from the worker"]).status == 0)
        #expect(try cache.get(key: "shared")?.data == Data("from the worker".utf8))
        try cache.put(key: "shared", data: Data("from the test".utf8))
        let read = try await Worker.run(["get", directory("cache"), "shared"])
        #expect(read.status == 0)
        #expect(read.output == "from the test")
        #expect(try await Worker.run(["remove", directory("cache"), "shared"]).status == 0)
        #expect(try cache.get(key: "shared") == nil)
        #expect(try await Worker.run(["get", directory("cache"), "shared"]).status == 1)
    }

    /// A writer killed with SIGKILL at random moments, 24 times: after each kill the cache opens,
    /// every entry reads back intact or is absent, and no indexed entry has lost its blob.
    ///
    /// The moments are the behaviour under test, not a wait: they come from the run's seed,
    /// printed with any failure (the kernel decides the rest, so a replay is close, not exact).
    @Test func writerKilledAtRandomMoments() async throws {
        let directory = try TemporaryDirectory()
        let cache = directory("cache")
        var random = TestSeed.generator("writerKilledAtRandomMoments")
        for round in 1...24 {
            let writer = try Worker.start(["writer", cache, "\(round)"])
            let moment = UInt32.random(in: 5_000...120_000, using: &random)
            // The wait, the random moment and the kill run on a thread of their own, so that
            // none of the cooperative pool's few threads is held meanwhile.
            let (ready, end) = await offThePool {
                let ready = writer.nextLine(within: .seconds(60))  // the cache is open
                usleep(moment)
                writer.signal(SIGKILL)
                return (ready, writer.wait())
            }
            let context = "round \(round), killed after \(moment) µs; \(TestSeed.replay)"
            #expect(ready == "ready", "\(context)")
            #expect(end == .signalled(SIGKILL), "\(context)")

            let verify = try await Worker.run(["verify", cache, "16"])
            #expect(verify.status == 0, "\(context): \(verify.errors)")
            #expect(Worker.counters(verify.output)["damaged"] == 0, "\(context)")
        }
        // The cache still works, and a kill leaves at most one unjournaled blob and one tmp file.
        let reopened = try SharedCache(directory: cache)
        try reopened.put(key: "after", data: Data("fine".utf8))
        #expect(try reopened.get(key: "after")?.data == Data("fine".utf8))
        try reopened.checkpoint()
        let live = try reopened.statistics().entryCount
        #expect(try blobFiles(in: cache).count <= live + 24)
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(cache)/tmp").count <= 24)
    }
}
