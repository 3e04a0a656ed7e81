import Foundation
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request per URL across processes, with real worker processes and nginx's log as the
/// judge: a cold URL is downloaded once, a revalidation is shared, and a waiter whose holder
/// stops making progress fetches for itself.
@Suite("HTTP: single flight across processes")
struct SingleFlightTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    /// Waits for every worker; returns each one's output lines.
    func finish(_ workers: [(Process, Pipe, Pipe)]) -> [[String]] {
        workers.map { process, output, errors in
            let result = Worker.Result(finishing: process, output: output, errors: errors)
            #expect(result.status == 0, "\(result.errors)")
            return result.output.split(separator: "\n").map(String.init)
        }
    }

    /// The defect found by a client written as a user would: a process that took the fetch lock
    /// just after another one released it sent the request it had planned on its stale lookup,
    /// so a cold URL was downloaded twice (2 trials in 9, five processes). The lookup is now
    /// repeated after every acquisition. Half the workers pause between lookup and lock (as a
    /// descheduled process would, `SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK_MS`), so every trial
    /// has a late locker; the other half race as they come.
    @Test func eightColdProcessesDownloadEachURLOnceInEveryTrial() throws {
        let trials = 10
        for index in 0..<trials { try origin.write("/fresh/race\(index).txt", "race \(index)") }
        _ = try SharedCache(directory: directory("cache"))
        let startAt = Int((Date().timeIntervalSince1970 + 1.5) * 1000)
        let workers = try (0..<8).map { number in
            try Worker.start(
                [
                    "fetch-series", directory("cache"), origin.url("/fresh/race").absoluteString, "\(trials)",
                    "\(startAt)", "250",
                ], environment: number % 2 == 0 ? [:] : ["SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK_MS": "120"])
        }
        let lines = finish(workers)
        #expect(lines.allSatisfy { $0.count == trials })
        let logged = origin.requests(atLeast: trials)
        var perPath: [String: Int] = [:]
        for request in logged { perPath[request.path, default: 0] += 1 }
        let twice = perPath.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "downloaded more than once: \(twice)")
        #expect(perPath.count == trials)
        #expect(lines.joined().filter { $0 == "source=downloaded status=200" }.count == trials)
    }
}
