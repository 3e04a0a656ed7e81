import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache
@testable import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `fetch` against a real nginx on loopback, asserting on what nginx logged.
@Suite("HTTP: conditional fetch against nginx", .enabled(if: Origin.isAvailable, "needs nginx (apt-get install nginx-light)"))
struct FetchTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    func cache(_ configuration: Configuration = Configuration()) throws -> SharedCache {
        try SharedCache(directory: directory("cache"), configuration: configuration)
    }

    func request(_ path: String, headers: [String: String] = [:], method: String = "GET") -> URLRequest {
        var request = URLRequest(url: origin.url(path))
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    @Test func validatorsAre304AndBodyThenNewBodyThenNoneAfterAnotherProcessRemoves() async throws {
        try origin.write("/plain/a.txt", "version one")
        let cache = try cache()

        let first = try await cache.fetch(request("/plain/a.txt"))
        #expect(first.source == .downloaded && first.status == 200 && first.data == Data("version one".utf8))
        let second = try await cache.fetch(request("/plain/a.txt"))
        #expect(second.source == .revalidated && second.status == 200 && second.data == Data("version one".utf8))
        #expect(second.headers["ETag"] == first.headers["ETag"])

        try origin.write("/plain/a.txt", "version two, longer", modified: Date())
        let third = try await cache.fetch(request("/plain/a.txt"))
        #expect(third.source == .downloaded && third.data == Data("version two, longer".utf8))

        let removed = try await Worker.run(["remove", directory("cache"), origin.url("/plain/a.txt").absoluteString])
        #expect(removed.status == 0, "\(removed.errors)")
        let fourth = try await cache.fetch(request("/plain/a.txt"))
        #expect(fourth.source == .downloaded && fourth.data == Data("version two, longer".utf8))

        let logged = origin.requests(atLeast: 4)
        #expect(logged.map(\.status) == [200, 304, 200, 200])
        #expect(!logged[0].hasValidators)
        #expect(logged[1].ifNoneMatch == first.headers["ETag"] && logged[1].ifModifiedSince == first.headers["Last-Modified"])
        #expect(logged[2].ifNoneMatch == first.headers["ETag"])
        #expect(!logged[3].hasValidators, "validators sent for a body another process removed: \(logged[3])")
        let statistics = try cache.statistics()
        #expect(statistics.revalidations == 1 && statistics.downloads == 3)
        #expect(statistics.directory?.revalidations == 1)
    }

    @Test func eightProcessesFetchingOneColdURLSendOneRequest() async throws {
        // The download takes 2 s at 1 MB/s. Each worker opens the cache and says "ready"; once
        // all have, all are told to go at once: every process but one finds the fetch under way.
        try origin.write("/slow/big.bin", Data((0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
        try origin.write("/plain/fence.txt", "after every worker")
        _ = try cache()
        let workers = try (0..<8).map { _ in
            try Worker.start(
                ["fetch", directory("cache"), origin.url("/slow/big.bin").absoluteString, "on-go"], input: .pipe)
        }
        for worker in workers { #expect(await worker.nextLine(within: .seconds(300)) == "ready") }
        for worker in workers { worker.send("go") }
        var sources: [String] = []
        for worker in workers {
            let text = await worker.nextLine(within: .seconds(60)) ?? ""
            let problems = worker.errors?.remainingText() ?? ""
            #expect(await worker.wait() == .exited(0), "\(problems)")
            let fields = Worker.counters(text)
            #expect(fields["bytes"] == 2_000_000)
            sources += text.split(separator: " ").filter { $0.hasPrefix("source=") }.map(String.init)
        }
        #expect(sources.filter { $0 == "source=downloaded" }.count == 1, "\(sources)")
        #expect(sources.filter { $0 == "source=fresh" }.count == 7, "\(sources)")
        // A fence: nginx logs requests in the order it finishes them, so once a request made
        // after every worker exited is logged, any request of theirs is too.
        _ = try Data(contentsOf: origin.url("/plain/fence.txt"))
        #expect(origin.requests(to: "/plain/fence.txt", atLeast: 1).count == 1)
        #expect(origin.requests.filter { $0.path == "/slow/big.bin" }.count == 1, "\(origin.requests)")
    }

    /// RFC 9111 §3.4 across processes: four processes that fetch the four quarters of one file
    /// at once each store their part under the URL's fetch lock, one after another, so that each
    /// reads the parts the others stored and combines its own with them: the whole file is then
    /// one complete response, a hit. (Were two to combine at once, one's part would be lost.)
    @Test func fourProcessesFetchingTheQuartersOfAFileCombineThemIntoTheWhole() async throws {
        let file = ConformanceTests.representation(1000)
        try origin.write("/fresh/quarters.bin", file)
        let cache = try cache()
        let workers = try (0..<4).map { quarter in
            try Worker.start(
                ["fetch", directory("cache"), origin.url("/fresh/quarters.bin").absoluteString, "on-go"],
                environment: [
                    "SHAREDCACHE_TEST_RANGE": "bytes=\(quarter * 250)-\(quarter * 250 + 249)",
                    "SHAREDCACHE_TEST_SEND_DELAY_MS": "50",
                ], input: .pipe)
        }
        for worker in workers { #expect(await worker.nextLine(within: .seconds(300)) == "ready") }
        for worker in workers { worker.send("go") }
        for worker in workers {
            let text = await worker.nextLine(within: .seconds(60)) ?? ""
            let problems = worker.errors?.remainingText() ?? ""
            #expect(await worker.wait() == .exited(0), "\(problems)")
            #expect(text.hasPrefix("source=downloaded status=206 bytes=250"), "\(text)")
        }
        let whole = try await cache.fetch(request("/fresh/quarters.bin"))
        #expect(whole.source == .fresh && whole.status == 200 && whole.data == file)
        #expect(origin.requests(atLeast: 4).map(\.status) == [206, 206, 206, 206])
    }

    @Test func maxAgeServesWithoutARequestAndNoStoreStoresNothing() async throws {
        try origin.write("/fresh/f.txt", "fresh for an hour")
        try origin.write("/nostore/n.txt", "never stored")
        let cache = try cache()
        _ = try await cache.fetch(request("/fresh/f.txt"))
        let again = try await cache.fetch(request("/fresh/f.txt"))
        #expect(again.source == .fresh && again.data == Data("fresh for an hour".utf8))
        #expect(again.headers["Age"] != nil)

        _ = try await cache.fetch(request("/nostore/n.txt"))
        let notStored = try await cache.fetch(request("/nostore/n.txt"))
        #expect(notStored.source == .downloaded)
        #expect(try !cache.contains(key: origin.url("/nostore/n.txt").absoluteString))

        // The caller's own directives: no-cache revalidates a fresh entry; max-age=0 too.
        let revalidated = try await cache.fetch(request("/fresh/f.txt", headers: ["Cache-Control": "no-cache"]))
        #expect(revalidated.source == .revalidated)

        let logged = origin.requests(atLeast: 4)
        #expect(logged.map(\.path) == ["/fresh/f.txt", "/nostore/n.txt", "/nostore/n.txt", "/fresh/f.txt"])
        #expect(logged.map(\.status) == [200, 200, 200, 304])
    }

    /// The caller's max-age, min-fresh and max-stale against a stored response's freshness.
    @Test func theCallersOwnFreshnessDirectives() async throws {
        try origin.write("/fresh/d.txt", "fresh for an hour")
        try origin.write("/plain/d.txt", "stale at once")
        let cache = try cache()
        _ = try await cache.fetch(request("/fresh/d.txt"))
        _ = try await cache.fetch(request("/plain/d.txt"))
        func source(_ path: String, _ directives: String) async throws -> FetchSource {
            try await cache.fetch(request(path, headers: ["Cache-Control": directives])).source
        }
        #expect(try await source("/fresh/d.txt", "max-age=3600") == .fresh)
        #expect(try await source("/fresh/d.txt", "max-age=0") == .revalidated)
        #expect(try await source("/fresh/d.txt", "min-fresh=30") == .fresh)
        #expect(try await source("/fresh/d.txt", "min-fresh=7200") == .revalidated)
        #expect(try await source("/plain/d.txt", "max-stale") == .fresh)
        #expect(try await source("/plain/d.txt", "max-stale=3600") == .fresh)
        #expect(try await source("/plain/d.txt", "no-cache") == .revalidated)
        #expect(origin.requests(atLeast: 5).count == 5)
    }

    @Test func variantsAreKeptApart() async throws {
        try origin.write("/vary/en.txt", "hello")
        try origin.write("/vary/fr.txt", "bonjour")
        let cache = try cache()
        let english = try await cache.fetch(request("/vary/page", headers: ["Accept-Language": "en"]))
        let french = try await cache.fetch(request("/vary/page", headers: ["Accept-Language": "fr"]))
        let englishAgain = try await cache.fetch(request("/vary/page", headers: ["Accept-Language": "en"]))
        let frenchAgain = try await cache.fetch(request("/vary/page", headers: ["Accept-Language": "fr"]))
        #expect(english.data == Data("hello".utf8) && french.data == Data("bonjour".utf8))
        #expect(englishAgain.source == .fresh && englishAgain.data == Data("hello".utf8))
        #expect(frenchAgain.source == .fresh && frenchAgain.data == Data("bonjour".utf8))
        #expect(origin.requests(atLeast: 2).count == 2)

        // A POST to the URL invalidates every variant.
        let posted = try await cache.fetch(request("/vary/page", method: "POST"))
        #expect(posted.status == 405)  // nginx refuses POST to a static file: nothing invalidated
        try origin.write("/things/t.txt", "thing")
        _ = try await cache.fetch(request("/things/t.txt"))
        #expect(try cache.contains(key: origin.url("/things/t.txt").absoluteString))
        let created = try await cache.fetch(request("/things/t.txt", method: "POST"))
        #expect(created.status == 201)
        #expect(try !cache.contains(key: origin.url("/things/t.txt").absoluteString))
        #expect(try cache.statistics().directory?.removals[.invalidated] == 1)
    }

    /// The safety rule under fire: the compactor evicts (and unlinks) the entry after it was
    /// pinned and before the 304 arrives; the caller still gets the right body.
    @Test func anEvictionBetweenPinAndThe304StillServesTheBody() async throws {
        let body = String(repeating: "pinned body ", count: 1000)
        try origin.write("/plain/p.txt", body)
        let cache = try cache(Configuration(memoryCostLimit: 0))
        _ = try await cache.fetch(request("/plain/p.txt"))
        let compactor = try SharedCache(
            directory: directory("cache"), configuration: Configuration(evictionGracePeriod: .zero))
        _ = try compactor.updateSharedLimits { $0.sizeLimit = 1 }
        let evicting = EvictingTransport(compactor: compactor, blobs: directory("cache/blobs"))

        let result = try await cache.fetch(request("/plain/p.txt"), transport: evicting)
        #expect(evicting.blobsLeftWhenSending.withLock { $0 } == [0])
        #expect(result.source == .revalidated && result.data == Data(body.utf8))
        #expect(origin.requests(atLeast: 2).map(\.status) == [200, 304])
    }

    @Test func aPinnedBodyThatFailsItsCheckAfterA304IsFetchedAgainUnconditionally() async throws {
        try origin.write("/plain/d.txt", "the real body")
        let cache = try cache(Configuration(memoryCostLimit: 0).withBlobFiles)
        _ = try await cache.fetch(request("/plain/d.txt"))
        let damaging = DamagingTransport(blobs: directory("cache/blobs"))
        let result = try await cache.fetch(request("/plain/d.txt"), transport: damaging)
        #expect(result.source == .downloaded && result.data == Data("the real body".utf8))
        let logged = origin.requests(atLeast: 3)
        #expect(logged.map(\.status) == [200, 304, 200])
        #expect(logged[1].hasValidators && !logged[2].hasValidators)
        #expect(try cache.statistics().unconditionalRetries == 1)
    }

    @Test func aBlobThatCannotBePinnedMeansNoValidators() async throws {
        try origin.write("/plain/g.txt", "gone")
        let cache = try cache(Configuration(memoryCostLimit: 0).withBlobFiles)
        _ = try await cache.fetch(request("/plain/g.txt"))
        for blob in try blobFiles(in: directory("cache")) {
            try FileManager.default.removeItem(atPath: directory("cache/blobs/\(blob)"))
        }
        let result = try await cache.fetch(request("/plain/g.txt"))
        #expect(result.source == .downloaded && result.data == Data("gone".utf8))
        #expect(!origin.requests(atLeast: 2)[1].hasValidators)
        #expect(try cache.statistics().withheldValidators == 1)
    }

    @Test func offlineAnswersFromTheCacheOrSaysItCannot() async throws {
        try origin.write("/plain/o.txt", "offline copy")
        let cache = try cache()
        let missing = await #expect(throws: SharedCacheError.self) {
            try await cache.fetch(self.request("/plain/o.txt"), options: FetchOptions(onlyFromCache: true))
        }
        #expect(missing?.code == .notCached)
        _ = try await cache.fetch(request("/plain/o.txt"))
        let offline = try await cache.fetch(request("/plain/o.txt"), options: FetchOptions(onlyFromCache: true))
        #expect(offline.source == .offline && offline.data == Data("offline copy".utf8))
        let onlyIfCached = try await cache.fetch(request("/plain/x.txt", headers: ["Cache-Control": "only-if-cached"]))
        #expect(onlyIfCached.status == 504)
        #expect(origin.requests(atLeast: 1).count == 1)
    }

    @Test func staleOnErrorIsOptIn() async throws {
        try origin.write("/plain/s.txt", "stale but useful")
        let cache = try cache()
        _ = try await cache.fetch(request("/plain/s.txt"))
        let failing = FailingTransport()
        await #expect(throws: SharedCacheError.self) { try await cache.fetch(self.request("/plain/s.txt"), transport: failing) }
        let stale = try await cache.fetch(
            request("/plain/s.txt"), options: FetchOptions(staleIfError: true), transport: failing)
        #expect(stale.source == .offline && stale.data == Data("stale but useful".utf8))
    }

    @Test func aCallersOwnValidatorsAreAnsweredFromAFreshEntry() async throws {
        try origin.write("/fresh/v.txt", "validated by the caller")
        let cache = try cache()
        let first = try await cache.fetch(request("/fresh/v.txt"))
        let etag = try #require(first.headers["ETag"])
        let conditional = try await cache.fetch(request("/fresh/v.txt", headers: ["If-None-Match": etag]))
        #expect(conditional.status == 304 && conditional.data.isEmpty && conditional.source == .fresh)
        let head = try await cache.fetch(request("/fresh/v.txt", method: "HEAD"))
        #expect(head.status == 200 && head.data.isEmpty && head.source == .fresh)
        #expect(origin.requests(atLeast: 1).count == 1)
    }

    @Test func aKilledDownloadLeavesNoEntryAndNoPartialBlob() async throws {
        // At 1 MB/s this download takes minutes: it is surely under way when the worker dies,
        // however long a busy test run takes to get here.
        try makeSparseFile(origin.directory("www/slow/killed.bin"), size: 200 << 20)
        let cache = try cache(.blobFiles)
        let url = origin.url("/slow/killed.bin")
        let worker = try Worker.start(["fetch", directory("cache"), url.absoluteString])
        let lockFile = directory("cache/fetching/\(KeyHash(key: SharedCache.cacheKey(for: url)).hex)")
        let temporary = directory("cache/tmp")
        // Under way: the worker holds the URL's fetch lock, and the body is going to the
        // entry's file (a temporary file stands in the cache). Killed at once.
        let received = try await act(once: {
            try FileManager.default.fileExists(atPath: lockFile)
                && !FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty
        }) { worker.signal(SIGKILL) }
        #expect(received, "the download never got under way")
        await worker.wait()
        #expect(origin.requests(atLeast: 1).first?.path == "/slow/killed.bin")
        #expect(try !cache.contains(key: url.absoluteString))
        #expect(try blobFiles(in: directory("cache")).isEmpty)
        // What the dead writer left is a temporary file nobody holds: once older than the
        // moment between creating and locking one, the next checkpoint removes it.
        let left = try FileManager.default.contentsOfDirectory(atPath: temporary)
        #expect(left.count == 1)
        for name in left {
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: "\(temporary)/\(name)")
        }
        try cache.checkpoint()
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary).isEmpty)
        // The dead process's fetch lock died with it: the next fetch of the URL need not wait.
        let (lock, waited) = try await cache.engine.fetchLocks.acquire(
            KeyHash(key: SharedCache.cacheKey(for: url)), timeout: .milliseconds(100),
            describing: url.absoluteString)
        #expect(!waited && lock != nil)
        lock?.release()
    }
}

/// Forwards to URLSession; before a conditional request, has the compactor evict everything
/// (the size limit is 1 byte, the grace period zero) and counts the blob files left.
final class EvictingTransport: HTTPTransport {
    let compactor: SharedCache
    let blobs: String
    let blobsLeftWhenSending = Locked<[Int]>([])

    init(compactor: SharedCache, blobs: String) {
        self.compactor = compactor
        self.blobs = blobs
    }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        if request.value(forHTTPHeaderField: "If-None-Match") != nil {
            _ = try compactor.compact()
            let left = try FileManager.default.subpathsOfDirectory(atPath: blobs).filter { $0.contains(".") }.count
            blobsLeftWhenSending.withLock { $0.append(left) }
        }
        return try await URLSessionTransport().send(request)
    }
}

/// Forwards to URLSession; before a conditional request, flips a byte in every blob's body.
struct DamagingTransport: HTTPTransport {
    let blobs: String

    func send(_ request: URLRequest) async throws -> TransportResponse {
        if request.value(forHTTPHeaderField: "If-None-Match") != nil {
            for path in try FileManager.default.subpathsOfDirectory(atPath: blobs) where path.contains(".") {
                let file = "\(blobs)/\(path)"
                var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
                bytes[bytes.count - 2] ^= 0x01
                try bytes.write(to: URL(fileURLWithPath: file))
            }
        }
        return try await URLSessionTransport().send(request)
    }
}

/// A network that is down.
struct FailingTransport: HTTPTransport {
    func send(_ request: URLRequest) async throws -> TransportResponse {
        throw URLError(.notConnectedToInternet)
    }
}
