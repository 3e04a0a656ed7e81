import Foundation
import Testing

@testable import SharedCache
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Issue 14: the HTTP path never went through the error boundary, so the cache's own failures
/// (a stray file where `fetching/` belongs) and a cancelled task came back as `.network` with
/// "check the network and the URL". Now the cache's failures keep their own codes, and a
/// cancellation is `.cancelled`; only the transport's failures are `.network`.
@Suite("HTTP: the cache's failures are not the network's", .enabled(if: Origin.isAvailable, "needs nginx"))
struct ErrorBoundaryTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    @Test func aStrayFileWhereTheFetchLocksBelongIsTheCachesFailure() async throws {
        try origin.write("/plain/a.txt", "body")
        let cache = try SharedCache(directory: directory("cache"))
        try? FileManager.default.removeItem(atPath: directory("cache/fetching"))
        #expect(FileManager.default.createFile(atPath: directory("cache/fetching"), contents: Data("stray".utf8)))
        do {
            _ = try await cache.fetch(URLRequest(url: origin.url("/plain/a.txt")))
            Issue.record("a fetch through a broken cache directory succeeded")
        } catch {
            #expect(error.code == .notADirectory, "\(error.code): \(error)")
            #expect(error.underlyingError is SystemError)
        }
    }

    @Test(.hangLimit) func aCancelledFetchIsCancelled() async throws {
        // 200 MB at 1 MB/s: under way for minutes, so the cancellation lands mid-body however
        // long a busy test run keeps this test from running (two seconds' worth did not).
        try makeSparseFile(origin.directory("www/slow/big.bin"), size: 200 << 20)
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/slow/big.bin")
        let task = Task { try await cache.fetch(URLRequest(url: url)) }
        let lockFile = directory(
            "cache/fetching/\(KeyHash(key: SharedCache.cacheKey(for: origin.url("/slow/big.bin"))).hex)")
        #expect(try await act(once: { FileManager.default.fileExists(atPath: lockFile) }) { task.cancel() })
        do {
            _ = try await task.value
            Issue.record("a cancelled fetch of a 200-second download returned a body")
        } catch let error as SharedCacheError {
            #expect(error.code == .cancelled, "\(error.code): \(error)")
        }
        #expect(try !cache.contains(key: origin.url("/slow/big.bin").absoluteString))
    }

    /// A task cancelled before its request is sent ends as `.cancelled`, and sends nothing. Its
    /// cancellation handler runs before the transfer is in the delegate's table, and whether
    /// what it queues runs before the transfer is added is a race: run many times.
    @Test(.hangLimit) func aFetchCancelledBeforeItsRequestIsSentSendsNothing() async throws {
        try origin.write("/plain/a.txt", "body")
        try origin.write("/plain/b.txt", "body")
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/plain/a.txt")
        for _ in 0..<200 {
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await cache.fetch(URLRequest(url: url))
            }
            do {
                _ = try await task.value
                Issue.record("a fetch cancelled before it began returned a body")
            } catch let error as SharedCacheError {
                #expect(error.code == .cancelled, "\(error.code): \(error)")
            }
        }
        // nginx logs a request once answered: the one after them is logged after them.
        _ = try await cache.fetch(URLRequest(url: origin.url("/plain/b.txt")))
        #expect(origin.requests(to: "/plain/b.txt", atLeast: 1).count == 1)
        #expect(origin.requests.filter { $0.path == "/plain/a.txt" }.isEmpty)
        #expect(try !cache.contains(key: url.absoluteString))
    }

    @Test func aDeadOriginIsTheNetworksFailure() async throws {
        let cache = try SharedCache(directory: directory("cache"))
        // A port nothing listens on: the connection is refused.
        do {
            _ = try await cache.fetch(URLRequest(url: URL(string: "http://127.0.0.1:9/nothing")!))
            Issue.record("a fetch from a dead origin succeeded")
        } catch {
            #expect(error.code == .network, "\(error.code): \(error)")
        }
    }
}

/// What a transport's failure says where its code says little (`URLError.unknown`, as a transfer
/// cut short is on Linux): the transfer's own words, which it dropped ("URLError -1").
@Suite("HTTP: a transport's failure keeps the transfer's own words")
struct TransportFailureWordsTests {
    @Test func anUnknownURLErrorCarriesWhatTheTransferSaid() {
        let said = "transfer closed with 4000000 bytes remaining to read"
        let failure = TransportFailure(underlying: URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: said]))
        let error = failure.explained("GET http://127.0.0.1/x")
        #expect(error.code == .network)
        #expect(error.message.contains(said), "\(error.message)")
    }
}
