import Foundation
import Testing

/// Every descriptor the library opens has an owner that closes it: after a process used a
/// cache in every way and let go of it, it holds exactly the descriptors it held before.
/// Counted in a worker process, where no other test opens files meanwhile.
@Suite("File descriptors")
struct DescriptorTests {
    @Test(.enabled(if: Requirements.hasProcFileDescriptors, "counts /proc/self/fd"))
    func releasingACacheClosesEveryDescriptorItOpened() async throws {
        let directory = try TemporaryDirectory()
        let result = try await Worker.run(["descriptors", directory("cache")])
        #expect(result.status == 0, "\(result.errors)")
        let counts = Worker.counters(result.output)
        let baseline = try #require(counts["baseline"], "\(result.output)")
        #expect(baseline >= 3)  // stdin, stdout, stderr at least: the count is real
        #expect(counts["after"] == baseline, "\(result.output)")
    }
}
