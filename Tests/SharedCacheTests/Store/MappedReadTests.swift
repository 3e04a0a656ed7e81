import Foundation
import SharedCacheCLI
import SharedCacheEngine
import Testing

@testable import SharedCache

#if os(Linux)
/// sharedcache(5), "Reading": a small get copies its record from the segment's mapping, and a
/// segment cut short under that mapping is a miss, not a SIGBUS that ends the process.
@Suite("Mapped reads: copies from a pack segment's mapping survive the segment being cut short")
struct MappedReadTests {
    static let diskOnly = Configuration(memoryCostLimit: 0)

    /// The reader has seen the segment whole; then it is cut short past the first record. The
    /// other records' pages are now wholly past the file's end, where touching the mapping
    /// raises SIGBUS: each is a miss, discarded as damage, and the first still reads.
    @Test(arguments: [1000, 8000])
    func aSegmentCutShortUnderAReaderIsAMiss(size: Int) throws {
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Self.diskOnly)
        let keys = (0..<(size < 4096 ? 32 : 8)).map { "k\($0)" }
        for (index, key) in keys.enumerated() {
            try cache.put(key: key, data: PackSegmentTests.body(index, size: size))
        }
        for (index, key) in keys.enumerated() {
            #expect(try cache.get(key: key)?.data == PackSegmentTests.body(index, size: size))
        }
        let segment = directory("cache/packs/\(try #require(try packSegments(in: directory("cache")).first))")
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

    enum BusError: String, CaseIterable { case sent, fault, ownHandler = "own-handler" }

    /// The cache's SIGBUS handler takes only faults of its own copies: a SIGBUS sent to the
    /// process, or a fault anywhere else, ends the process as it would have without the cache
    /// (by the signal; under a sanitizer, by its report), or reaches the handler the process
    /// had. (Without Swift's crash backtracer in the worker, whose report would only slow this.)
    @Test(arguments: BusError.allCases)
    func aSIGBUSTheCacheHasNoPartInIsNotSwallowed(how: BusError) throws {
        let directory = try TemporaryDirectory()
        func run(_ cache: String) throws -> ChildProcess.Termination {
            let child = try Worker.start(
                ["bus-error", directory(cache), how.rawValue, cache], environment: ["SWIFT_BACKTRACE": "enable=no"])
            let result = Worker.Result(finishing: child)
            #expect(result.status != 2, "\(result.errors)")
            return child.wait()
        }
        let without = try run("without-cache")
        #expect(without != .exited(0))
        if how == .ownHandler { #expect(without == .exited(42)) }
        #expect(try run("with-cache") == without)
    }
}
#endif
