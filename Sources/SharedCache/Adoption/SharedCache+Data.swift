public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension SharedCache {
    /// Loads `request` through the cache, shaped like `URLSession.data(for:)`: a call site
    /// changes one token, `URLSession.shared` to `cache`.
    ///
    /// ```swift
    /// let (data, response) = try await cache.data(for: URLRequest(url: url))
    /// response.value(forHTTPHeaderField: "Cache-Status")   // "SharedCache; hit; ttl=3517"
    /// ```
    ///
    /// It is ``fetch(_:options:transport:)`` with Foundation's types: fresh responses are served
    /// with no request, stale ones revalidated against a pinned body (a 304 arrives as the
    /// stored response with its whole body), one download per URL across processes, and every
    /// response carries an RFC 9211 `Cache-Status` field naming `SharedCache`. The request's
    /// `cachePolicy` is honoured as URLSession's own cache would honour it:
    /// `.reloadIgnoringLocalCacheData` sends an unconditional request (and stores the answer),
    /// `.returnCacheDataDontLoad` never touches the network, `.returnCacheDataElseLoad` serves
    /// anything stored however stale, and `.reloadRevalidatingCacheData` revalidates whatever
    /// is stored.
    ///
    /// It throws `URLError`, as URLSession does, so the `catch` clauses an app already has keep
    /// working: a network failure is the transport's own (`.notConnectedToInternet`,
    /// `.cannotConnectToHost`, `.timedOut`), a cancelled task `.cancelled`; the cache's own
    /// failures have file codes (see ``SharedCacheError/urlError(for:)``), and
    /// `URLError/sharedCacheError` says what SharedCache knows.
    ///
    /// - Parameters:
    ///   - request: an `http` or `https` request, of any method.
    ///   - options: how the cache may use the network; the request's `cachePolicy` is applied
    ///     on top of them.
    /// - Returns: the body and the response as served (status, headers with `Age` and
    ///   `Cache-Status`, the URL that answered).
    /// - Throws: `URLError`, typed, so that `catch { error.code }` compiles.
    public func data(for request: URLRequest, options: FetchOptions = FetchOptions()) async throws(URLError) -> (
        Data, HTTPURLResponse
    ) {
        do throws(SharedCacheError) {
            let result = try await fetch(honouringCachePolicyOf: request, options: options)
            guard let response = result.httpResponse else {
                throw SharedCacheError(
                    .network, "\(request.url?.absoluteString ?? "the request") got status \(result.status), "
                        + "which is not an HTTP status; check the server")
            }
            return (result.data, response)
        } catch {
            throw error.urlError(for: request.url)
        }
    }

    /// Loads `url` through the cache, as ``data(for:options:)`` does a GET request.
    public func data(from url: URL, options: FetchOptions = FetchOptions()) async throws(URLError) -> (
        Data, HTTPURLResponse
    ) {
        try await data(for: URLRequest(url: url), options: options)
    }

    /// ``fetch(_:options:transport:)`` with the request's `cachePolicy` applied to `options`.
    func fetch(honouringCachePolicyOf request: URLRequest, options: FetchOptions) async throws(SharedCacheError)
        -> FetchResult
    {
        var options = options
        var request = request
        switch request.cachePolicy {
        case .reloadIgnoringLocalCacheData, .reloadIgnoringLocalAndRemoteCacheData:
            options.forceRefresh = true
        case .returnCacheDataDontLoad:
            options.onlyFromCache = true
        case .returnCacheDataElseLoad:
            var offline = options
            offline.onlyFromCache = true
            do {
                return try await fetch(request, options: offline)
            } catch where error.code == .notCached {
                // Nothing stored: load it.
            }
        case .reloadRevalidatingCacheData:
            if request.value(forHTTPHeaderField: "Cache-Control") == nil {
                request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            }
        default:
            break
        }
        return try await fetch(request, options: options)
    }
}
