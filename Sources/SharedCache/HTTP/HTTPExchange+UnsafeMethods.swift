import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// Methods the cache does not answer: passed through, and unsafe ones invalidate (RFC 9111 §4.4).
extension HTTPExchange {
    func passThrough(_ reason: CacheStatus.Forward) async throws -> FetchResult {
        let response = try await deliver(request)
        var status = CacheStatus(forward: reason)
        status.forwardStatus = response.status
        return downloaded(response, status)
    }

    /// RFC 9111 §4.4: a successful unsafe request makes what is stored for its URL, and for
    /// its `Location` and `Content-Location` on the same origin, stale; here, removed.
    func unsafeRequest() async throws -> FetchResult {
        let response = try await deliver(request)
        if (200..<400).contains(response.status) {
            let origin = NormalURL(url).origin
            let targets =
                [url]
                + ["Location", "Content-Location"].compactMap { name in
                    response.headers[name].flatMap { URL(string: $0, relativeTo: url)?.absoluteURL }
                        .flatMap { NormalURL($0).origin == origin ? $0 : nil }
                }
            let (cache, customKey) = (cache, options.cacheKey)
            try await cache.offPool {
                for target in targets { try cache.invalidate(target) }
                if let customKey { try cache.invalidate(primaryKey: customKey) }
            }
        }
        var status = CacheStatus(forward: .method)
        status.forwardStatus = response.status
        return downloaded(response, status)
    }
}
