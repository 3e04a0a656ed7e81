public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import SharedCacheEngine

/// How ``SharedCache/fetch(_:options:transport:)`` may use the cache and the network.
public struct FetchOptions: Sendable, Hashable {
    /// Send an unconditional request whatever is stored; the response is still stored.
    public var forceRefresh: Bool
    /// Never touch the network: serve what is stored, however stale, or fail with
    /// ``SharedCacheError/Code/notCached``.
    public var onlyFromCache: Bool
    /// When the network fails or the origin answers 5xx, serve the stored response (unless it
    /// says `must-revalidate`) as ``FetchSource/offline``.
    public var staleIfError: Bool
    /// Treat a response with `Last-Modified` and no explicit freshness as fresh for 10 % of
    /// its age (at most a day), as RFC 9111 §4.2.2 allows. Off: such responses are revalidated
    /// on every use.
    public var heuristicFreshness: Bool
    /// The longest to wait while another process or task fetches the same URL.
    public var waitTimeout: Duration

    public init(
        forceRefresh: Bool = false, onlyFromCache: Bool = false, staleIfError: Bool = false,
        heuristicFreshness: Bool = false, waitTimeout: Duration = .seconds(60)
    ) {
        self.forceRefresh = forceRefresh
        self.onlyFromCache = onlyFromCache
        self.staleIfError = staleIfError
        self.heuristicFreshness = heuristicFreshness
        self.waitTimeout = waitTimeout
    }
}

/// Where a fetched body came from.
public enum FetchSource: String, Sendable, Hashable, CustomStringConvertible {
    /// The stored response was fresh: no request was sent (or another process's request,
    /// made while this one waited for it, brought it).
    case fresh
    /// A conditional request was answered 304; the stored body was served.
    case revalidated
    /// The response came from the network with its body.
    case downloaded
    /// Served from the cache without the network: ``FetchOptions/onlyFromCache``,
    /// `only-if-cached`, or ``FetchOptions/staleIfError`` after a failure.
    case offline

    public var description: String { rawValue }
}

/// A response from ``SharedCache/fetch(_:options:transport:)``.
public struct FetchResult: Sendable {
    public var data: Data
    public var status: Int
    /// The response headers as served: the stored ones (with `Age`) when the cache answered.
    public var headers: HTTPHeaders
    public var url: URL
    public var source: FetchSource

    /// The result as Foundation's response type.
    public var httpResponse: HTTPURLResponse? {
        var fields: [String: String] = [:]
        for (name, value) in headers { fields[name] = fields[name].map { "\($0), \(value)" } ?? value }
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}

extension SharedCache {
    /// Sends `request` through the cache: a conditional GET when a stored response needs
    /// validating, no request at all when it is fresh (RFC 9111, as a private cache).
    ///
    /// - Stored bodies are pinned (held open and checked) before `If-None-Match` /
    ///   `If-Modified-Since` are sent, so a 304 is always answered with a body, even if another
    ///   process evicts the entry meanwhile. A 304 freshens the entry for every process.
    /// - One request per URL is in flight across all processes: a fetch that finds another
    ///   under way waits for it (at most ``FetchOptions/waitTimeout``), then uses its result.
    /// - Unsafe methods (POST, PUT, DELETE, …) pass through; on success they invalidate what is
    ///   stored for their URL and their `Location` / `Content-Location`.
    ///
    /// - Throws: ``SharedCacheError``: `.network` when the transport fails (its error is
    ///   ``SharedCacheError/underlyingError``), `.notCached` for ``FetchOptions/onlyFromCache``
    ///   with nothing stored, `.lockTimeout` when another fetch of the URL outlasts the wait,
    ///   and the cache's own errors.
    public func fetch(
        _ request: URLRequest, options: FetchOptions = FetchOptions(),
        transport: any HTTPTransport = URLSessionTransport()
    ) async throws(SharedCacheError) -> FetchResult {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw SharedCacheError(.invalidArgument, "fetch needs an http or https URL, not \(request.url?.absoluteString ?? "none")")
        }
        let what = "\(request.httpMethod ?? "GET") \(url.absoluteString)"
        do {
            let exchange = HTTPExchange(cache: engine, request: request, url: url, options: options, transport: transport)
            return try await exchange.run()
        } catch let failure as TransportFailure {
            throw failure.explained(what)
        } catch {
            // The cache's own failures (a full disk, a stray file in its directory) are said as
            // such, never as the network's.
            throw SharedCacheError(error, root: path, while: what)
        }
    }

    /// The key ``fetch(_:options:transport:)`` stores a URL's response under (the URL without
    /// its fragment), so ``get(key:)`` and ``remove(key:)`` reach it too.
    public static func cacheKey(for url: URL) -> String {
        CacheEngine.cacheKey(for: url)
    }
}

/// A failure of the transport (no response), as opposed to one of the cache.
struct TransportFailure: Error {
    var underlying: any Error

    /// `.cancelled` when the task or the request was cancelled, else `.network`.
    func explained(_ what: String) -> SharedCacheError {
        var error: SharedCacheError
        if underlying is CancellationError || (underlying as? URLError)?.code == .cancelled {
            error = .cancelled(what)
        } else {
            let reason = (underlying as? URLError)?.localizedDescription ?? "\(underlying)"
            error = SharedCacheError(.network, "\(what) failed: \(reason); check the network and the URL")
        }
        error.underlyingError = underlying
        return error
    }
}

extension CacheEngine {
    /// Bodies up to this size are read on the calling task's thread: reading one takes
    /// microseconds, less than the two thread switches of moving the read elsewhere.
    static let inlineReadLimit: UInt64 = 64 * 1024

    /// Runs cache work that takes long — writing a body, reading a large one — on a Dispatch
    /// thread, off the cooperative pool. Index lookups (no lock, a `pread` or two), small reads
    /// and single journal appends (whose lock other processes hold for one `write`) take
    /// microseconds, less than the two thread switches of a trip elsewhere, and run inline.
    func offPool<Result: Sendable>(when condition: Bool = true, _ body: @escaping @Sendable () throws -> Result)
        async throws -> Result
    {
        guard condition else { return try body() }
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Swift.Result { try body() }) }
        }
    }
}
