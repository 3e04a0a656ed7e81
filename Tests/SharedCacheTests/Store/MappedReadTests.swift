import Foundation
import SharedCacheCLI
import SharedCacheEngine
import SharedCachePlatform
import Testing

@testable import SharedCache

#if os(Linux)
/// sharedcache(5), "Reading": a small get copies its record from the segment's mapping, and a
/// segment cut short under that mapping is a miss, not a SIGBUS that ends the process.
@Suite("Mapped reads: copies from a pack segment's mapping survive the segment being cut short")
struct MappedReadTests {
    /// The reader has seen the segment whole; then it is cut short past the first record. The
    /// other records' pages are now wholly past the file's end, where touching the mapping
    /// raises SIGBUS: each is a miss, discarded as damage, and the first still reads.
    @Test(arguments: [1000, 8000])
    func aSegmentCutShortUnderAReaderIsAMiss(size: Int) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: PackSegmentTests.diskOnly)
        let keys = (0..<(size < 4096 ? 32 : 8)).map { "k\($0)" }
        for (index, key) in keys.enumerated() {
            try cache.put(key: key, data: PackSegmentTests.body(index, size: size))
        }
        // Read often enough that the reader copies from the mapping (earlier reads are preads).
        for _ in 0...GrowingFileMapping.preadsBeforeMapping {
            for (index, key) in keys.enumerated() {
                #expect(try cache.get(key: key)?.data == PackSegmentTests.body(index, size: size))
            }
        }
        let segment = directory("cache/packs/\(try #require(try packSegments(in: directory("cache")).first))")
        // Read through the mapping. Under a sanitizer, whose runtime stands in for signal
        // handlers and mmap, a segment may not be mapped: then this tests the pread, and the run
        // reports that as a known issue.
        withKnownIssue("a sanitizer's runtime may keep the segment unmapped", isIntermittent: true) {
            #expect(PackSegmentTests.mappedFiles(under: segment) == [segment])
        } when: {
            Requirements.underSanitizer
        }
        let first = try #require(try cache.engine.currentEntry(KeyHash(key: keys[0]))).location
        let last = try #require(try cache.engine.currentEntry(KeyHash(key: keys.last!))).location
        let cut = first.position + UInt64(first.length)
        // The last record starts two pages past the cut: its pages are not the one the file ends in.
        try #require(last.position >= cut + 8192)
        #expect(truncate(segment, off_t(cut)) == 0)

        #expect(try cache.get(key: keys.last!) == nil)
        #expect(try cache.statistics().damagedBlobs == 1)
        #expect(try !cache.contains(key: keys.last!))
        #expect(try cache.get(key: keys[0])?.data == PackSegmentTests.body(0, size: size))
    }

    /// How the test worker's `bus-error` command sets SIGBUS's disposition before the cache is
    /// opened, and how that process ends (`nil`: by the signal).
    static let dispositions: [(name: String, sent: ChildProcess.Termination?, fault: ChildProcess.Termination?)] = [
        ("default", nil, nil), ("default-siginfo", nil, nil),
        ("ignore", .exited(0), nil), ("ignore-siginfo", .exited(0), nil),
        ("handler", .exited(42), .exited(42)), ("masking-handler", .exited(44), .exited(44)),
        ("nodefer-handler", .exited(43), .exited(43)), ("resethand-handler", .exited(0), nil),
    ]

    /// The cache's SIGBUS handler takes only faults of its own copies: a SIGBUS sent to the
    /// process, or a fault anywhere else, meets the disposition the process had, as the kernel
    /// would have applied it (its handler under its own mask and flags: SA_NODEFER lets the
    /// handler fault again, as Swift's crash backtracer does; SA_RESETHAND leaves the default
    /// action), and ends the process exactly as it would have without the cache. (Swift's crash
    /// backtracer is off in the worker; it would only slow this down.) Not under a sanitizer,
    /// whose runtime puts its own wrapper around every SIGBUS handler, with semantics of its own
    /// (it ignores SA_NODEFER, and an ignored fault comes back for ever).
    @Test(
        .enabled(if: !Requirements.underSanitizer, "a sanitizer's runtime wraps signal handlers its own way"),
        arguments: ["sent", "fault"])
    func aSIGBUSTheCacheHasNoPartInMeetsTheDispositionTheProcessHad(how: String) throws {
        let directory = try TemporaryDirectory()
        for disposition in Self.dispositions {
            func run(_ cache: String) throws -> ChildProcess.Termination {
                let child = try Worker.start(
                    ["bus-error", directory("\(disposition.name)-\(cache)"), how, disposition.name, cache],
                    environment: ["SWIFT_BACKTRACE": "enable=no"])
                let result = Worker.Result(finishing: child)
                #expect(result.status != 2, "\(disposition.name): \(result.errors)")
                return child.wait()
            }
            let without = try run("without-cache")
            if let expected = how == "sent" ? disposition.sent : disposition.fault {
                #expect(without == expected, "\(disposition.name)")
            } else {
                #expect(without == .signalled(SIGBUS), "\(disposition.name)")
            }
            #expect(try run("with-cache") == without, "\(disposition.name)")
        }
    }

    /// On a network filesystem a segment is read with `pread`, never through a mapping: pages
    /// mapped there are not revalidated as a read is, so a record another machine appended could
    /// read as damage. (The filesystem is named by a debug hook: nothing here mounts NFS.)
    @Test func onANetworkFilesystemSegmentsAreReadNotMapped() throws {
        let directory = try TemporaryDirectory()
        let result = try Worker.run(
            ["mapped-size", directory("cache"), "unlimited"], environment: ["SHAREDCACHE_TEST_FILESYSTEM": "nfs"])
        #expect(result.status == 0, "\(result.errors)")  // the entries read back
        let found = Worker.counters(result.output)
        #expect(found["mapped"] == 0)
        #expect((found["size"] ?? 0) > 0)
    }

    /// A process reserves a segment's whole capacity of address space for its mapping (64 MiB,
    /// which the segment grows into), but under a limit on address space only what the segment
    /// holds, rounded up to a page. (Not under a sanitizer, which reserves terabytes of address
    /// space for its shadow memory.)
    @Test(.enabled(if: !Requirements.underSanitizer, "a sanitizer's shadow memory takes terabytes of address space"))
    func underALimitOnAddressSpaceOnlyWhatASegmentHoldsIsMapped() throws {
        let directory = try TemporaryDirectory()
        func run(_ limit: String) throws -> (mapped: Int, size: Int) {
            let result = try Worker.run(["mapped-size", directory(limit), limit])
            #expect(result.status == 0, "\(result.errors)")
            let fields = result.output.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "=" }).compactMap {
                Int($0)
            }
            try #require(fields.count == 2, "\(result.output)")
            return (fields[0], fields[1])
        }
        let unlimited = try run("unlimited")
        #expect(unlimited.mapped == Int(PackSegments.segmentCapacity))
        let limited = try run("limited")
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        #expect(limited.size > 0 && limited.mapped == (limited.size + page - 1) / page * page)
    }

    /// `stats` cut short (`: > stats`) under a process: its counters' mapping then lies past the
    /// file's end, and the next count raised SIGBUS, which ended every process using the cache.
    /// The process now goes on as one without counters (each call looks at the journal itself,
    /// so it sees another's put at once) until, at its next look at the journal (every 50 ms),
    /// it maps `stats` again, making it whole. The worker holds 21 caches open, each mapping
    /// it: the ones that fault before that are all guarded.
    @Test func statsCutShortUnderAProcessLeavesItRunning() async throws {
        let directory = try TemporaryDirectory()
        let worker = try Worker.start(["stats-cut", directory("cache")], input: .pipe)
        #expect(await worker.nextLine(within: .seconds(60)) == "ready")
        #expect(truncate(directory("cache/stats"), 0) == 0)
        worker.send("go")
        let result = await Worker.Result(finishing: worker)
        #expect(result.status == 0, "\(result.errors)")
        let outcome = Worker.counters(result.output)
        #expect(outcome["seen"] == 1, "a put by another cache, seen at once")
        #expect(outcome["rejoined"] == 1, "counting into stats again")
        #expect(outcome["announced"] == 1, "its put raised the journal end the other reads")
        let later = try await Tool.admin.run(["--dir", directory("cache"), "get", "after"])
        #expect(later.output == "a")
        let stat = try await Tool.admin.run(["--dir", directory("cache"), "stat", "--json"])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(stat.output.utf8)) as? [String: Any])
        #expect(report["entries"] as? Int == 4)
    }

    /// A thread that blocks SIGBUS would be ended by the kernel on a fault: one that blocks it
    /// from before its first read (its mask is asked then) reads with `pread`, so a segment cut
    /// short is a miss there too, while another thread has been copying from the mapping.
    @Test func aThreadThatBlocksSIGBUSReadsACutSegmentAsAMiss() throws {
        try expectAMissWithSIGBUSBlocked("new-thread")
    }

    /// A SIGBUS the cache passes on to the handler the process had may come back with SIGBUS
    /// blocked (a handler that leaves by `longjmp` does that): the thread's mask is asked again
    /// at its next copy, which then reads with `pread`, so a segment cut short is a miss there,
    /// not the end of the process. (Not under a sanitizer, whose runtime wraps signal handlers.)
    @Test(.enabled(if: !Requirements.underSanitizer, "a sanitizer's runtime wraps signal handlers its own way"))
    func aHandlerThatLeavesSIGBUSBlockedHasTheNextReadUsePread() throws {
        try expectAMissWithSIGBUSBlocked("after-handler")
    }

    private func expectAMissWithSIGBUSBlocked(_ how: String) throws {
        let directory = try TemporaryDirectory()
        let child = try Worker.start(["blocked-read", directory("cache"), how])
        let result = Worker.Result(finishing: child)
        #expect(child.wait() == .exited(0), "\(how): \(result.errors)")
    }
}
#endif
