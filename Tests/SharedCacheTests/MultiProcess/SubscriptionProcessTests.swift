import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCacheEngine

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Removal subscriptions across processes", .serialized)
struct SubscriptionProcessTests {
    /// One removal as a subscriber printed it.
    struct Event: Hashable {
        var sequence: UInt64?
        var hash: String
        var reason: String

        init?(_ line: String) {
            let fields = line.split(separator: " ")
            guard fields.count == 3 else { return nil }
            sequence = UInt64(fields[0])
            hash = String(fields[1])
            reason = String(fields[2])
        }
    }

    /// Whether process `id` is stopped by a signal: state `T` in /proc/ID/stat on Linux. Where
    /// there is no /proc, a stop cannot be confirmed and is taken as done.
    static func isStopped(_ id: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(id)/stat", encoding: .utf8) else {
            return !FileManager.default.fileExists(atPath: "/proc/self/stat")
        }
        // "ID (COMMAND) STATE ...": the command may hold spaces and parentheses.
        guard let close = stat.lastIndex(of: ")") else { return false }
        return stat[close...].dropFirst().trimmingCharacters(in: .whitespaces).first == "T"
    }

    /// Runs of `cleared` removals come from one record in no particular order: sort each run.
    static func normalized(_ events: [(hash: String, reason: String)]) -> [String] {
        var result: [String] = []
        var run: [String] = []
        for event in events {
            if event.reason == "cleared" {
                run.append(event.hash)
                continue
            }
            result += run.sorted().map { "\($0) cleared" }
            run = []
            result.append("\(event.hash) \(event.reason)")
        }
        return result + run.sorted().map { "\($0) cleared" }
    }

    /// 4 processes putting over the same 6 keys at once (their journal appends land at the same
    /// moment): every put but the first of each key supersedes exactly one version, which a
    /// subscriber hears of once, in journal order, and whose blob is unlinked.
    @Test func concurrentPutsEachSupersedeOneVersionHeardOnce() async throws {
        let directory = try TemporaryDirectory()
        let cache = directory("cache")
        let owner = try SharedCache(directory: cache)
        let subscriber = try Worker.start(["subscribe", cache, "polling", "20"])
        defer { if subscriber.isRunning { subscriber.signal(SIGKILL) } }
        #expect(await subscriber.nextLine(within: .seconds(60)) == "ready")
        let putters = try (1...4).map { worker in
            try Worker.start(["puts", cache, "\(worker)", "300", "6", "\(worker * 104_729)"])
        }
        for putter in putters {
            let result = await Worker.Result(finishing: putter)
            #expect(result.status == 0, "\(result.errors)")
        }
        try owner.put(key: "__end__", data: Data("end".utf8))
        #expect(try owner.remove(key: "__end__"))
        let lines = try #require(
            await subscriber.output?.rest(within: .seconds(60)), "the subscriber did not finish")
        #expect(await subscriber.wait() == .exited(0))
        let events = lines.compactMap(Event.init)

        let keys = try owner.entries().count
        #expect(keys == 6)
        #expect(events.filter { $0.reason == "superseded" }.count == 4 * 300 - keys)
        #expect(events.filter { $0.reason != "superseded" }.map(\.reason) == ["manual"])
        let sequences = events.compactMap(\.sequence)
        #expect(sequences.count == events.count)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 })
        #expect(try blobFiles(in: cache).count <= keys)
        #expect(try owner.verify().problems.isEmpty)
    }

    /// 3 subscriber processes and a remover process: every removal (remove, clear, superseding
    /// put) reaches every subscriber exactly once and in order, across at least 3 segment
    /// rotations; a subscriber stopped with SIGSTOP while the segments it needed were retired
    /// resynchronises and still reports every entry it knew that is gone.
    ///
    /// File-event subscribers re-check only once a minute, so they hear the removals through
    /// inotify or not at time; every wait on another process is a line it printed, bounded.
    @Test(arguments: ["events", "polling"])
    func everyRemovalReachesEverySubscriberOnce(watching: String) async throws {
        let directory = try TemporaryDirectory()
        let cache = directory("cache")
        _ = try SharedCache(directory: cache)
        let interval = watching == "events" ? "60000" : "20"
        let subscribers = try (0..<3).map { _ in try Worker.start(["subscribe", cache, watching, interval]) }
        var remover: ChildProcess?
        defer {
            for child in subscribers + [remover].compactMap({ $0 }) where child.isRunning { child.signal(SIGKILL) }
        }
        for subscriber in subscribers { #expect(await subscriber.nextLine(within: .seconds(60)) == "ready") }
        var heard: [[String]] = [[], [], []]  // lines each subscriber printed, read so far
        /// Waits until subscriber `index` printed the removal of `key`.
        func waitUntil(_ index: Int, heard key: String) async throws {
            let hash = KeyHash(key: key).hex
            let lines = try #require(
                await offThePool {
                    subscribers[index].output?.lines(through: { $0.contains(hash) }, within: .seconds(60))
                },
                "subscriber \(index) never heard \(key)")
            heard[index] += lines
        }

        let script = try ChildProcess(Worker.executable, arguments: ["remover", cache], input: .pipe)
        remover = script

        try #require(await script.nextLine(within: .seconds(60)) == "phase 1")
        // What the paused subscriber knows: everything live at phase 1, which it has read.
        let liveAtPause = Set(try SharedCache(directory: cache).liveHashes())
        let paused = subscribers[2]
        try await waitUntil(2, heard: "__phase 1__")
        paused.signal(SIGSTOP)
        // kill(2) returns before the process has stopped; wait until the kernel says it has.
        #expect(
            await offThePool { eventually { Self.isStopped(paused.processID) } }, "SIGSTOP did not stop the subscriber")
        script.send("go")
        try #require(await script.nextLine(within: .seconds(60)) == "phase 2")
        // The two running subscribers have read on; now the remover moves its clock past the
        // retention and checkpoints.
        try await waitUntil(0, heard: "__phase 2__")
        try await waitUntil(1, heard: "__phase 2__")
        script.send("go")
        try #require(await script.nextLine(within: .seconds(60)) == "phase 3")
        let liveAtResume = Set(try SharedCache(directory: cache).liveHashes())
        // Checkpoints ran while it was stopped and retired the segments it was reading.
        #expect(!FileManager.default.fileExists(atPath: "\(cache)/journal/0000000000000002"))
        paused.signal(SIGCONT)
        script.send("go")
        let expectedLines = try #require(
            await offThePool { script.output?.lines(through: { $0 == "end" }, within: .seconds(60)) }
        )
        .dropLast()
        #expect(await script.wait() == .exited(0))
        let expected = expectedLines.map { line -> (hash: String, reason: String) in
            let fields = line.split(separator: " ")
            return (String(fields[0]), String(fields[1]))
        }
        #expect(expected.count > 60)

        var results: [(events: [Event], resynchronizations: Int)] = []
        for (index, subscriber) in subscribers.enumerated() {
            var events: [Event] = []
            var resynchronizations = -1
            let rest = try #require(
                await subscriber.output?.rest(within: .seconds(120)), "subscriber \(index) did not finish")
            for line in heard[index] + rest {
                if line.hasPrefix("resynchronizations=") {
                    resynchronizations = Int(line.dropFirst("resynchronizations=".count)) ?? -1
                } else if let event = Event(line) {
                    events.append(event)
                }
            }
            #expect(await subscriber.wait() == .exited(0))
            results.append((events, resynchronizations))
        }

        // The two that kept running: exactly the remover's removals, in order, once each.
        for (events, resynchronizations) in results.prefix(2) {
            #expect(Self.normalized(events.map { ($0.hash, $0.reason) }) == Self.normalized(expected))
            let sequences = events.compactMap(\.sequence)
            #expect(sequences.count == events.count)
            let keys = events.map { "\($0.sequence ?? 0) \($0.hash)" }
            #expect(Set(keys).count == keys.count)
            #expect(sequences == sequences.sorted())
            #expect(resynchronizations == 0)
        }

        // The one that was stopped: no removal twice, a resynchronisation, and every entry it
        // knew at the pause that was gone by the resume is reported after the pause.
        let (events, resynchronizations) = results[2]
        #expect(
            resynchronizations >= 1,
            "\(events.map { "\($0.sequence.map(String.init) ?? "-") \($0.hash.prefix(8)) \($0.reason)" })")
        let journaled = events.compactMap { event in event.sequence.map { "\($0) \(event.hash)" } }
        #expect(Set(journaled).count == journaled.count)
        let reportedGone = Set(events.map(\.hash))
        let goneWhileStopped = liveAtPause.subtracting(liveAtResume)
        #expect(!goneWhileStopped.isEmpty)
        #expect(goneWhileStopped.isSubset(of: reportedGone))
        #expect(events.contains { $0.reason == "unknown" && $0.sequence == nil })
        #expect(events.last?.hash == KeyHash(key: "__end__").hex)
    }
}

extension SharedCache {
    /// Hex hashes of every live entry, as this process's index sees them.
    func liveHashes() throws -> [String] {
        try engine.withState { state in
            try state.live.refresh()
            return state.live.index.map(\.hash.hex)
        }
    }
}
