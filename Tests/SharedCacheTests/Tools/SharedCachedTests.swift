import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("sharedcached, the compactor daemon", .serialized)
struct SharedCachedTests {
    /// A cache with `count` entries of `size` bytes, over a `limit`, expiring ones first if asked.
    static func filledCache(_ path: String, count: Int, size: Int, limit: UInt64, expired: Int = 0) throws
        -> SharedCache
    {
        let cache = try SharedCache(
            directory: path,
            configuration: Configuration(
                sizeLimit: limit, journalRetention: .zero, evictionGracePeriod: .milliseconds(20)
            ).withBlobFiles)
        for index in 0..<count {
            let expiry: Expiry? = index < expired ? .at(.distantPast) : nil
            try cache.put(key: "k\(index)", data: Data(count: size), metadata: EntryMetadata(expiry: expiry))
        }
        return cache
    }

    @Test func onePassEvictsLogsOneLineAndExits() async throws {
        let directory = try TemporaryDirectory()
        let cache = try Self.filledCache(directory("cache"), count: 30, size: 1000, limit: 20_000, expired: 5)
        let result = try await Tool.daemon.run(["--dir", directory("cache"), "--once"])
        #expect(result.status == 0)
        #expect(result.output.isEmpty)
        let lines = result.errors.split(separator: "\n")
        #expect(lines.count == 1)
        // What the pass did, as the directory's shared counters tell it.
        let activity = try #require(try cache.statistics().directory)
        #expect(activity.removals[.expired] == 5 && activity.removals[.size] == 7, "\(activity.removals)")
        #expect(activity.compactions == 1)
        #expect(try cache.statistics().entryCount == 18)
        #expect(try cache.statistics().totalBytes <= 18_000)
        #expect(try blobFiles(in: directory("cache")).count == 18)
        #expect(try cache.verify().isClean)
    }

    @Test func aDryRunPrintsWhatItWouldEvictAndChangesNothing() async throws {
        let directory = try TemporaryDirectory()
        let cache = try Self.filledCache(directory("cache"), count: 30, size: 1000, limit: 20_000, expired: 5)
        let journal = try Data(contentsOf: URL(fileURLWithPath: directory("cache/journal/0000000000000001")))
        let result = try await Tool.daemon.run(["--dir=\(directory("cache"))", "--dry-run"])
        #expect(result.status == 0)
        let lines = result.output.split(separator: "\n")
        // The pass as the library plans it: each eviction has a line naming it and its reason,
        // and a last line totals them.
        let plan = try cache.compact(CompactionOptions(dryRun: true)).evictions
        #expect(plan.filter { $0.reason == .expired }.count == 5 && plan.filter { $0.reason == .size }.count == 7)
        #expect(lines.count == plan.count + 1, "\(result.output)")
        for eviction in plan {
            let line = lines.first { $0.contains(eviction.hash.hex) }
            let named = eviction.hash.hex + " " + eviction.reason.description
            #expect(line?.contains(" \(eviction.reason) ") == true, "\(named): \(line ?? "no line")")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory("cache/journal/0000000000000001"))) == journal)
        #expect(try cache.statistics().entryCount == 30)
        #expect(try blobFiles(in: directory("cache")).count == 30)
    }

    @Test func aSecondDaemonSaysWhoHoldsTheDirectoryAndExits75() async throws {
        let directory = try TemporaryDirectory()
        _ = try SharedCache(directory: directory("cache"))
        let first = try Tool.daemon.start(["--dir", directory("cache")])
        #expect(await first.errors?.nextLine() != nil)  // its start line
        let second = try await Tool.daemon.run(["--dir", directory("cache")])
        #expect(second.status == 75)
        #expect(second.errors.contains("\(first.processID)"))  // who holds it
        first.signal(SIGTERM)
        #expect(await first.wait() == .exited(0))
    }

    @Test func badUsageExits64() async throws {
        #expect(try await Tool.daemon.run(["--interval", "soon"]).status == 64)
        #expect(try await Tool.daemon.run(["--no-such-option"]).status == 64)
        #expect(try await Tool.daemon.run(["extra"]).status == 64)
        let help = try await Tool.daemon.run(["--help"])
        #expect(help.status == 0)
        #expect(help.output.contains("usage: sharedcached"))
    }

    /// SIGTERM as the journal shows a pass's first evictions (100,000 bytes over a 10,000-byte
    /// limit: a whole pass evicts 9,100 entries, 1,024 to a step): the pass stops at its next
    /// step, the daemon exits 0, and the directory verifies.
    @Test func sigtermInTheMiddleOfAPassLeavesADirectoryThatVerifies() async throws {
        let directory = try TemporaryDirectory()
        let cache = try Self.filledCache(directory("cache"), count: 10_000, size: 10, limit: 10_000)
        // Nothing else writes the journal: its first change is the pass's first evictions.
        let daemonID = Locked<Int32>(0)
        let subscription = cache.onJournalChange {
            daemonID.withLock { id in if id != 0 { _ = kill(id, SIGTERM) } }
        }
        defer { subscription.cancel() }
        let daemon = try Tool.daemon.start(["--dir", directory("cache")])
        daemonID.withLock { $0 = daemon.processID }
        let reader = try #require(daemon.errors)
        #expect(await reader.nextLine() != nil)  // its start line
        // The pass's line; had no evictions signalled it, this stops it, for the checks below to fail.
        #expect(await reader.nextLine() != nil)
        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == .exited(0))

        // It had evicted when the signal came, and stopped before the pass was done: the pass
        // never counted itself, and left entries it planned to evict.
        let activity = try #require(try cache.statistics().directory)
        let evicted = Int(activity.removals[.size] ?? 0)
        #expect(evicted > 0 && evicted < 9100, "\(evicted) evicted")
        #expect(activity.compactions == 0)
        #expect(try cache.statistics().entryCount == 10_000 - evicted)
        let report = try SharedCache(directory: directory("cache")).verify()
        #expect(report.isClean, "\(report.problems)")
    }

    /// Its directory replaced under it (moved aside and made again): the daemon says so and
    /// exits 69 (it said the directory was damaged, exit 65, and to run a repair, which found
    /// nothing). Moved, not deleted: a deletion under way empties the same directory a file at
    /// a time, which the daemon can meet as damage before the directory is gone.
    @Test(.hangLimit) func aDirectoryReplacedUnderTheDaemonEndsIt() async throws {
        let directory = try TemporaryDirectory()
        try SharedCache(directory: directory("cache")).put(key: "k", data: Data("v".utf8))
        let daemon = try Tool.daemon.start(["--dir", directory("cache"), "--interval", "1s"])
        let reader = try #require(daemon.errors)
        #expect(await reader.nextLine() != nil)  // its start line
        #expect(await reader.nextLine() != nil)  // its first pass
        try FileManager.default.moveItem(atPath: directory("cache"), toPath: directory("replaced"))
        let again = try SharedCache(directory: directory("cache"))
        try again.put(key: "new", data: Data("n".utf8))
        #expect(await daemon.wait() == .exited(69))
        #expect(try again.verify().isClean)
        #expect(try again.get(key: "new")?.data == Data("n".utf8))
    }

    /// Its directory deleted under it (as `rm -rf` does, a file at a time): the daemon says the
    /// directory was removed and exits 69, every time. It met the deletion under way as damage
    /// in most rounds, and said to run a repair (exit 65): the verdict now waits for the
    /// directory to be still or gone. Several rounds, as the moment it wakes varies.
    @Test(.hangLimit) func aDirectoryDeletedUnderTheDaemonEndsIt() async throws {
        let directory = try TemporaryDirectory()
        for round in 0..<8 {
            let path = directory("cache \(round)")
            _ = try Self.filledCache(path, count: 300, size: 100, limit: 0)
            let daemon = try Tool.daemon.start(["--dir", path, "--interval", "1s"])
            let reader = try #require(daemon.errors)
            #expect(await reader.nextLine() != nil)  // its start line: its first pass is under way
            // Again while something is left: as with `rm -rf`, a file the daemon makes meanwhile
            // (a checkpoint's) fails the folder's removal.
            while FileManager.default.fileExists(atPath: path) { try? FileManager.default.removeItem(atPath: path) }
            #expect(await daemon.wait() == .exited(69), "round \(round)")
        }
    }

    /// A deletion under way inside one of `blobs/`'s folders (a large one, or a slow disk: a
    /// file every 50 ms here, for 2 s) is not stillness: each unlink changes that folder
    /// alone, and the directory was judged still, so damage, after a second of it.
    @Test func aDeletionInsideABlobFolderIsNotStillness() throws {
        let directory = try TemporaryDirectory()
        let path = directory("cache")
        for folder in ["journal", "packs", "tmp", "blobs/ab"] {
            try FileManager.default.createDirectory(atPath: "\(path)/\(folder)", withIntermediateDirectories: true)
        }
        let files = (0..<40).map { "\(path)/blobs/ab/blob\($0)" }
        for file in files { #expect(FileManager.default.createFile(atPath: file, contents: Data("b".utf8))) }
        let identity = try #require(DirectoryIdentity.current(path))
        let deletion = Thread {
            for file in files {
                try? FileManager.default.removeItem(atPath: file)
                usleep(50_000)
            }
            try? FileManager.default.removeItem(atPath: path)
        }
        deletion.start()
        #expect(DirectoryIdentity.hasChanged(path, from: identity, onceStillFor: .seconds(1)))
    }

    /// SIGHUP re-reads the shared limits and acts on them at once. A config with a typo, re-read
    /// first, stopped the daemon with exit 65 (and under a service manager, every restart the
    /// same way): it keeps its limits, says why, and takes the fixed file on the next SIGHUP.
    @Test(arguments: [false, true])
    func sighupRereadsTheSharedLimits(afterABrokenConfig: Bool) async throws {
        let directory = try TemporaryDirectory()
        let cache = try Self.filledCache(directory("cache"), count: 20, size: 1000, limit: 100_000)
        let daemon = try Tool.daemon.start(["--dir", directory("cache")])
        let reader = try #require(daemon.errors)
        #expect(await reader.nextLine() != nil)  // its start line
        #expect(await reader.nextLine() != nil)  // its first pass, under the limit
        #expect(try cache.statistics().directory?.compactions == 1)
        #expect(try cache.statistics().entryCount == 20)
        let path = URL(fileURLWithPath: directory("cache/config"))
        if afterABrokenConfig {
            try Data("size-limit = 10X\n".utf8).write(to: path)
            daemon.signal(SIGHUP)
            // It says why on a line of its own, and keeps running: the fixed file is taken next.
            #expect(await reader.nextLine() != nil)
        }
        try Data("size-limit = 10000\nentry-limit = 0\ndefault-expiry = 604800\n".utf8).write(to: path)
        daemon.signal(SIGHUP)
        // The re-read names the file; the line after it is the pass it runs at once.
        #expect(await reader.nextLine()?.contains("\(directory("cache"))/config") == true)
        #expect(await reader.nextLine() != nil)
        // Over its new limit: 20,000 bytes down to 9,000, all for space.
        let activity = try #require(try cache.statistics().directory)
        #expect(activity.compactions == 2)
        #expect(activity.removals[.size] == 11 && activity.removals[.expired, default: 0] == 0, "\(activity.removals)")
        #expect(try cache.statistics().totalBytes == 9000)
        daemon.signal(SIGTERM)
        #expect(await daemon.wait() == .exited(0))
    }

    /// The daemon runs while 4 client processes write its whole limit every second for 15 s: it
    /// compacts as the journal shows the directory over its limit (its interval is an hour),
    /// brings it back under once they stop, and every eviction is journaled (the
    /// directory verifies: no entry lost its blob) and reaches a subscriber in another process.
    ///
    /// How far past the limit the directory gets meanwhile is how soon the scheduler runs the
    /// daemon, not what the daemon does: a loaded run peaked at 8 MB against a 2 MB limit, and
    /// it is not asserted.
    @Test func compactsAsTheJournalShowsFourWritersPastTheLimit() async throws {
        let directory = try TemporaryDirectory()
        let limit: UInt64 = 2_000_000, size = 10_000, seconds = 15
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: limit))
        let subscriber = try Worker.start(["subscribe", directory("cache"), "events"])
        #expect(await subscriber.nextLine() == "ready")
        let daemon = try Tool.daemon.start(["--dir", directory("cache"), "-d", "--interval", "1h"])
        #expect(await daemon.errors?.nextLine() != nil)  // its start line

        // Paced, at a quarter of the limit per writer per second (every put made, however late).
        let putsPerSecond = Int(limit) / size / 4
        let writers = try (1...4).map {
            try Worker.start(["flood", directory("cache"), "\($0)", "\(seconds)", "\(size)", "\(putsPerSecond)"])
        }
        var puts = 0
        for writer in writers {
            let result = await Worker.Result(finishing: writer)
            let counts = Worker.counters(result.output)
            #expect(result.status == 0)
            #expect(counts["violations"] == 0)
            puts += counts["puts"] ?? 0
        }
        #expect(puts == 4 * seconds * putsPerSecond)  // 30 MB: 15 times the limit

        // A pass after the last put brings the directory under the limit (the bound is only for
        // a daemon that never runs one). Then stop the daemon, and end the subscriber.
        #expect(try await eventually(within: .seconds(300)) { try cache.statistics().totalBytes <= limit })
        daemon.signal(SIGTERM)
        let log = await daemon.errors?.rest() ?? []
        let evicted = Set(
            log.compactMap { line -> String? in
                let fields = line.split(separator: " ")
                return fields.count > 2 && fields[1] == "evicted" ? String(fields[2]) : nil
            })
        #expect(await daemon.wait() == .exited(0))
        // Its first pass found nothing to evict; those after it ran because the journal showed
        // the directory over its limit, and evicted for space.
        let activity = try #require(try cache.statistics().directory)
        #expect(activity.compactions >= 2 && (activity.removals[.size] ?? 0) > 0, "\(log)")
        try cache.put(key: "__end__", data: Data())
        try cache.remove(key: "__end__")
        let heard = Set(
            (await subscriber.output?.rest() ?? []).compactMap { line -> String? in
                let fields = line.split(separator: " ")
                return fields.count == 3 && fields[2] == "size" ? String(fields[1]) : nil
            })
        await subscriber.wait()
        #expect(evicted.count > 100)
        #expect(evicted == heard)
        #expect(try cache.statistics().totalBytes <= limit)
        let report = try cache.verify()
        #expect(report.isClean, "\(report.problems.prefix(5))")
    }
}
