public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import SharedCacheEngine

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
    /// stored response with its whole body), one download per URL across processes for every
    /// request that may reuse it, and every
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
        let (result, response) = try await load(request, options: options)
        return (result.data, response)
    }

    /// Loads `url` through the cache, as ``data(for:options:)`` does a GET request.
    public func data(from url: URL, options: FetchOptions = FetchOptions()) async throws(URLError) -> (
        Data, HTTPURLResponse
    ) {
        try await data(for: URLRequest(url: url), options: options)
    }

    /// Loads `request` through the cache into a file, shaped like `URLSession.download(for:)`:
    /// the body never sits whole in memory, whether it comes from the network (it streams to
    /// its entry's file as it arrives) or from the cache (it is copied from its stored file a
    /// megabyte at a time).
    ///
    /// ```swift
    /// let (file, response) = try await cache.download(for: URLRequest(url: url))
    /// try FileManager.default.moveItem(at: file, to: destination)
    /// ```
    ///
    /// The cache behaves as for ``data(for:options:)`` (and throws the same `URLError`s); a
    /// body that is not stored (`no-store`) is held in memory while it arrives.
    ///
    /// - Returns: a new file in the temporary directory holding the body, which the caller moves
    ///   or removes, and the response as served.
    public func download(for request: URLRequest, options: FetchOptions = FetchOptions()) async throws(URLError) -> (
        URL, HTTPURLResponse
    ) {
        let (result, response) = try await load(request, options: options)
        let file = FileManager.default.temporaryDirectory
            .appendingPathComponent("SharedCache-\(UUID().uuidString).download")
        do {
            try await engine.offPool { try Self.write(result, to: file.path) }
        } catch {
            let failure = SharedCacheError(error, root: path, while: "writing the body to \(file.path)")
            throw failure.urlError(for: request.url)
        }
        return (file, response)
    }

    /// Loads `url` through the cache into a file, as ``download(for:options:)`` does a GET.
    public func download(from url: URL, options: FetchOptions = FetchOptions()) async throws(URLError) -> (
        URL, HTTPURLResponse
    ) {
        try await download(for: URLRequest(url: url), options: options)
    }

    /// Writes a fetched body to a new file at `path`: a large stored body copied from its file,
    /// checked as it goes; any other from memory. The file appears only once it is whole.
    private static func write(_ result: FetchResult, to path: String) throws {
        let output = try BodyOutput(path: path)
        if let stored = result.storedBody {
            let read = stored.reader()
            let buffer = UnsafeMutableRawBufferPointer.allocate(
                byteCount: BlobFileStore.streamingChunkSize, alignment: 16)
            defer { buffer.deallocate() }
            var offset: Int64 = 0
            while case .bytes(let count) = try read(buffer) {
                try output.write(UnsafeRawBufferPointer(rebasing: buffer[..<count]), at: offset)
                offset += Int64(count)
            }
        } else {
            try result.data.withUnsafeBytes { try output.write($0, at: 0) }
        }
        try output.publish()
    }

    /// ``fetch(_:options:transport:)`` with the request's `cachePolicy`, as Foundation's types.
    private func load(_ request: URLRequest, options: FetchOptions) async throws(URLError) -> (
        FetchResult, HTTPURLResponse
    ) {
        do throws(SharedCacheError) {
            let result = try await fetch(honouringCachePolicyOf: request, options: options)
            guard let response = result.httpResponse else {
                throw SharedCacheError(
                    .network, "\(request.url?.absoluteString ?? "the request") got status \(result.status), "
                        + "which is not an HTTP status; check the server")
            }
            return (result, response)
        } catch {
            throw error.urlError(for: request.url)
        }
    }

    /// ``fetch(_:options:transport:)`` with the request's `cachePolicy` applied to `options`,
    /// and `observer` shown a download as it arrives.
    func fetch(
        honouringCachePolicyOf request: URLRequest, options: FetchOptions, observer: ResponseObserver? = nil
    ) async throws(SharedCacheError) -> FetchResult {
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
        return try await fetch(request, options: options, transport: URLSessionTransport(), observer: observer)
    }
}
