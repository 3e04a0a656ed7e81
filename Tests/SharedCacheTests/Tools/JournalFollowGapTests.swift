import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Issue 18: `journal --follow` stopped for a while went from sequence 758 to 1678 without a
/// word, 428 removals unreported. A follower that falls behind a retired segment must say which
/// records it cannot show, then carry on.
@Suite("sharedcache journal --follow, fallen behind the journal's retention")
struct JournalFollowGapTests {
    let directory: TemporaryDirectory
    var cache: String { directory("cache") }

    init() throws {
        directory = try TemporaryDirectory()
    }

    @Test func aFollowerThatFellBehindReportsTheGap() async throws {
        // This process checkpoints with no retention: a sealed segment goes at the next checkpoint.
        let writer = try SharedCache(
            directory: cache, configuration: Configuration(journalRetention: .zero, memoryCostLimit: 0))
        try writer.put(key: "before", data: Data("x".utf8))

        let follower = try Tool.admin.start(["journal", "--follow", "--json"], environment: ["SHAREDCACHE_DIR": cache])
        // A follower that never prints what is awaited must not hang the suite; generous, as a
        // sanitizer build on a loaded machine can take minutes to get this far. (The hangs once
        // taken for slowness were the follower's: see the next test.)
        let watchdog = DispatchWorkItem { follower.signal(SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 900, execute: watchdog)
        defer {
            watchdog.cancel()
            follower.signal(SIGCONT)
            follower.signal(SIGTERM)
            follower.wait()
        }
        #expect(try Self.record(await follower.nextLine())?["key"] as? String == "before")

        // Stop it, and wait (without polling) until it is stopped.
        follower.signal(SIGSTOP)
        #expect(
            await offThePool {
                var info = siginfo_t()
                return waitid(P_PID, id_t(follower.processID), &info, WSTOPPED | WNOWAIT)
            } == 0)

        // Generation 1 (which it holds open) is sealed; the removals go into generation 2,
        // which the next two checkpoints seal and retire while it sleeps.
        let sealedFirst = try writer.checkpoint().generation - 1
        let gapStart = try writer.statistics().journalSequence + 1
        for index in 0..<5 {
            try writer.put(key: "gone\(index)", data: Data("y".utf8))
            try writer.remove(key: "gone\(index)")
        }
        try writer.checkpoint()
        let gapEnd = try writer.statistics().journalSequence
        try writer.put(key: "kept", data: Data("z".utf8))
        let retired = try writer.checkpoint().retiredSegments
        #expect(retired == [sealedFirst + 1])

        follower.signal(SIGCONT)
        try writer.put(key: "after", data: Data("w".utf8))

        var records: [[String: Any]] = []
        while let line = await follower.nextLine(), let record = try Self.record(line) {
            records.append(record)
            if record["key"] as? String == "after" { break }
        }
        let gaps = records.filter { $0["type"] as? String == "gap" }
        #expect(gaps.count == 1)
        #expect((gaps.first?["from"] as? NSNumber)?.uint64Value == gapStart)
        #expect((gaps.first?["to"] as? NSNumber)?.uint64Value == gapEnd)
        // Nothing from the gap is listed, nothing twice, and what followed it all is.
        let sequences = records.compactMap { ($0["sequence"] as? NSNumber)?.uint64Value }
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
        #expect(!sequences.contains { $0 >= gapStart && $0 <= gapEnd })
        #expect(records.contains { $0["key"] as? String == "kept" && $0["type"] as? String == "stored" })

        // And a line on stderr for the person watching.
        follower.signal(SIGKILL)
        await follower.wait()
        let said = await offThePool { follower.errors?.remainingText() ?? "" }
        #expect(said.split(separator: "\n").count == 1)
    }

    /// A record appended just after the follower's first read is printed without waiting for
    /// another append: the follower subscribes before it reads. (It read, then subscribed; a
    /// record appended in between waited for the next append, and a follower stopped there
    /// printed nothing more: this suite's other test hung at random under load.)
    @Test func aRecordAppendedJustAfterTheFirstReadIsPrinted() async throws {
        let writer = try SharedCache(directory: cache, configuration: Configuration(memoryCostLimit: 0))
        try writer.put(key: "before", data: Data("x".utf8))
        let follower = try Tool.admin.start(
            ["journal", "--follow", "--json"],
            environment: ["SHAREDCACHE_DIR": cache, "SHAREDCACHE_TEST_PAUSE_AFTER_FIRST_READ": "1"], input: .pipe)
        defer {
            follower.signal(SIGKILL)
            follower.wait()
        }
        #expect(try Self.record(await follower.nextLine(within: .seconds(600)))?["key"] as? String == "before")
        #expect(await offThePool { follower.errors?.nextLine(within: .seconds(600)) } == "paused")
        // Appended while the follower waits after its first read: its subscription must wake it.
        try writer.put(key: "during", data: Data("y".utf8))
        follower.send("go")
        #expect(try Self.record(await follower.nextLine(within: .seconds(60)))?["key"] as? String == "during")
    }

    static func record(_ line: String?) throws -> [String: Any]? {
        guard let line else { return nil }
        return try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }
}
