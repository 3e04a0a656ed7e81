import Foundation
import SharedCacheTestSupport
import Testing

/// CI's short run of `sharedcache-stress`: 4 clients, 2 subscribers and the compactor for 20 s,
/// with 50 rounds of SIGKILL to a random one of them (and a new one started in its place), the
/// choices drawn from the test run's seed.
@Suite("Stress: many processes, crashes, and the invariants checked from their logs")
struct StressTests {
    @Test func twentySecondsWithFiftyCrashRoundsBreakNoInvariant() async throws {
        let stress = Tool(name: "sharedcache-stress")
        var seeds = TestSeed.generator("twentySecondsWithFiftyCrashRoundsBreakNoInvariant")
        let seed = seeds.next() >> 1
        let result = try await stress.run(["--seconds", "20", "--crash-rounds", "50", "--seed", "\(seed)"])
        #expect(result.status == 0, "\(result.output)\(result.errors)\n\(TestSeed.replay)")
        let summary = result.output.split(separator: "\n").first { $0.hasPrefix("processes=") } ?? ""
        let counts = Worker.counters(String(summary))
        #expect(counts["violations"] == 0, "\(result.output)\n\(TestSeed.replay)")
        #expect(counts["seed"] == Int(seed), "\(summary)")
        #expect((counts["crash-rounds"] ?? 0) >= 40, "\(summary)")
        // That every kind of operation ran many times, not how fast: 20 s under the thread
        // sanitizer, sharing 2 cores with the rest of the suite, made 755 gets (alone: thousands).
        #expect((counts["gets"] ?? 0) > 100 && (counts["puts"] ?? 0) > 100, "\(summary)")
        #expect((counts["fetches"] ?? 0) > 20 && (counts["removals-heard"] ?? 0) > 100, "\(summary)")
    }
}
