import Foundation
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Errors as an app meets them: inside `Task { }`, where the thrown type is lost.
@Suite("Adoption: errors an app can use")
struct ErrorsAnAppCanUseTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    @Test func aFetchCancelledMidBodyIsCancelledAndACatchCanNameTheCode() async throws {
        // 200 MB at 100 KB/s: under way for longer than a busy test run can keep this test waiting.
        try makeSparseFile(origin.directory("www/stall/movie.bin"), size: 200 << 20)
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/stall/movie.bin")
        let task = Task { () -> String in
            do {
                _ = try await cache.fetch(URLRequest(url: url))
                return "finished"
            } catch SharedCacheError.Code.cancelled {
                return "cancelled"
            } catch {
                return "other: \(error)"
            }
        }
        try await URLSessionAdoptionTests.cancel(task, onceFetching: url, in: directory("cache"))
        #expect(await task.value == "cancelled")
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: url)) == nil)
    }

    @Test func aNetworkFailureSaysWhatHappenedInOneLineAndKeepsTheURLError() async throws {
        let cache = try SharedCache(directory: directory("cache"))
        let refusing = try URLSessionAdoptionTests.RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let url = URL(string: "http://127.0.0.1:\(refusing.port)/x")!
        let outcome = await Task { () -> (any Error)? in
            do {
                _ = try await cache.fetch(URLRequest(url: url))
                return nil
            } catch {
                return error
            }
        }.value
        let error = try #require(outcome as? SharedCacheError)
        #expect(error.code == .network)
        #expect((error.underlyingError as? URLError)?.code == .cannotConnectToHost)
        #expect(!error.message.contains("\n"))
        #expect(error.localizedDescription == error.description)
        // The same failure, as URLSession's shape reports it.
        let urlError = error.urlError(for: url)
        #expect(urlError.code == .cannotConnectToHost)
        #expect(urlError.sharedCacheError?.code == .network)
        #expect(urlError.failingURL == url)
    }

    @Test func codesMapToTheURLErrorsAppsHandle() {
        let cases: [(SharedCacheError.Code, URLError.Code)] = [
            (.cancelled, .cancelled), (.notCached, .resourceUnavailable), (.invalidArgument, .unsupportedURL),
            (.noSpace, .cannotWriteToFile), (.permissionDenied, .noPermissionsToReadFile),
            (.corruptData, .cannotOpenFile), (.network, .unknown),
        ]
        for (code, expected) in cases {
            #expect(SharedCacheError(code, "m").urlError().code == expected, "\(code)")
        }
    }

    @Test func onlyFromCacheWithNothingStoredIsResourceUnavailableThroughDataFor() async throws {
        let cache = try SharedCache(directory: directory("cache"))
        var request = URLRequest(url: origin.url("/fresh/absent"))
        request.cachePolicy = .returnCacheDataDontLoad
        do {
            _ = try await cache.data(for: request)
            Issue.record("answered from an empty cache")
        } catch {
            #expect(error.code == .resourceUnavailable)
            #expect(error.sharedCacheError?.code == .notCached)
        }
        #expect(origin.requests.isEmpty)
    }
}
