public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import SharedCacheEngine

/// How ``SharedCache/fetch(_:options:transport:)`` may use the cache and the network.
public struct FetchOptions: Sendable, Hashable {
    /// Send an unconditional request whatever is stored; the response is still stored. The only
    /// way to revalidate an `immutable` response while it is fresh (RFC 8246).
    public var forceRefresh: Bool
    /// Never touch the network: serve what is stored, however stale, or fail with
    /// ``SharedCacheError/Code/notCached``.
    public var onlyFromCache: Bool
    /// When the network fails or the origin answers 5xx, serve the stored response however
    /// stale (unless it says `must-revalidate` or `no-cache`) as ``FetchSource/offline``.
    /// Without it, a `stale-if-error` directive in the response or the request (RFC 5861 §4)
    /// still allows as much staleness as it names, for the errors it names: no answer, or a
    /// 500, 502, 503 or 504.
    public var staleIfError: Bool
    /// Give a response with `Last-Modified` and no explicit freshness (no `max-age`, no
    /// `Expires`) a heuristic lifetime of 10 % of its age, at most ``heuristicFreshnessLimit``,
    /// as RFC 9111 §4.2.2 allows — for heuristically cacheable status codes (RFC 9110 §15.1) or a
    /// `public` response. On by default, as in browsers; off, such responses are revalidated on
    /// every use.
    public var heuristicFreshness: Bool
    /// The longest heuristic lifetime (a day by default).
    public var heuristicFreshnessLimit: Duration
    /// The longest to wait while another process or task fetches the same URL. A fetch that
    /// waited this long (the other one is hung, stopped or just slower) sends its own request
    /// rather than fail, and stores the answer if the URL's lock is free by then.
    public var waitTimeout: Duration
    /// How long to wait without a sign of life from the process or task fetching the same URL
    /// (it shows one every second while it fetches) before sending this fetch's own request: a
    /// stopped or hung holder is passed after this, not after ``waitTimeout``.
    public var stalledFetchTimeout: Duration
    /// The key to store and look up the response under, instead of the URL
    /// (``SharedCache/cacheKey(for:)``): for URLs that change while naming the same thing, as a
    /// signed CDN URL whose query carries an expiring token does. Kingfisher's
    /// `ImageResource(downloadURL:cacheKey:)`, across processes.
    ///
    /// ```swift
    /// let stable = "avatar/\(userID)"
    /// let result = try await cache.fetch(URLRequest(url: signedURL), options: FetchOptions(cacheKey: stable))
    /// ```
    ///
    /// Every process that fetches with the same key shares the entry, its validators and its
    /// one-download-at-a-time lock. An unsafe request (POST, …) with this option invalidates
    /// the entry under the key as well as its URL's. A redirected answer is stored under the key
    /// (it is what the key names); without a key it is not stored, since it is another URL's.
    public var cacheKey: String?

    /// Options for one fetch; the defaults are a private cache by RFC 9111 (a shared one in a
    /// directory a group shares, or set so: ``Configuration/httpAudience``).
    public init(
        forceRefresh: Bool = false, onlyFromCache: Bool = false, staleIfError: Bool = false,
        heuristicFreshness: Bool = true, heuristicFreshnessLimit: Duration = .seconds(86_400),
        waitTimeout: Duration = .seconds(60), stalledFetchTimeout: Duration = .seconds(5), cacheKey: String? = nil
    ) {
        self.cacheKey = cacheKey
        self.stalledFetchTimeout = stalledFetchTimeout
        self.forceRefresh = forceRefresh
        self.onlyFromCache = onlyFromCache
        self.staleIfError = staleIfError
        self.heuristicFreshness = heuristicFreshness
        self.heuristicFreshnessLimit = heuristicFreshnessLimit
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
    /// `only-if-cached`, or a stale response after a failure (``FetchOptions/staleIfError``,
    /// `stale-if-error`).
    case offline
    /// A stale response served at once within its `stale-while-revalidate` window (RFC 5861
    /// §3) while a background request revalidates it.
    case stale

    public var description: String { rawValue }
}

/// A response from ``SharedCache/fetch(_:options:transport:)``.
public struct FetchResult: Sendable {
    /// The body, whatever happened on the wire: a 304 is answered with the stored body.
    ///
    /// A stored body over a megabyte is mapped from its file, checked but not read into memory:
    /// it is paged in as it is read, and stays readable whoever removes its entry meanwhile.
    public var data: Data
    /// The status as served: the stored response's (not 304) when the cache answered.
    public var status: Int
    /// The response headers as served: the stored ones (with `Age`) when the cache answered.
    public var headers: HTTPHeaders
    /// The URL that answered, after any redirects.
    public var url: URL
    /// Where the body came from: the cache, a revalidation, or the network.
    public var source: FetchSource
    /// Where the served body was found: ``CacheType/memory`` or ``CacheType/disk`` when the
    /// cache answered (also after a 304), ``CacheType/none`` when it came from the network.
    public var cacheType: CacheType = .none
    /// The stored body that ``data`` maps, when it is large: a download to a file copies from
    /// it, never touching the mapping (which would make the whole body resident).
    var storedBody: (any PinnedBody)?

    /// This cache's RFC 9211 `Cache-Status` member, also the last `Cache-Status` field of
    /// ``headers``: `SharedCache; hit; ttl=N`, `SharedCache; fwd=stale; fwd-status=304; ttl=N`,
    /// `SharedCache; fwd=uri-miss; fwd-status=200; stored; ttl=N`, … (`fwd` is `uri-miss`,
    /// `vary-miss`, `miss`, `partial`, `stale`, `request` or `method`; `detail` names
    /// `stale-while-revalidate`, `stale-if-error`, `offline`, `range`, `lock-timeout`, or
    /// `too-large` for a response served but not stored, its body being larger than the
    /// cache's size limit).
    public var cacheStatus: String? {
        headers.reversed().first { $0.name.caseInsensitiveEquals("Cache-Status") && $0.value.hasPrefix("SharedCache") }?
            .value
    }

    /// The result as Foundation's response type.
    public var httpResponse: HTTPURLResponse? {
        var fields: [String: String] = [:]
        for (name, value) in headers { fields[name] = fields[name].map { "\($0), \(value)" } ?? value }
        return HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)
    }
}

extension SharedCache {
    /// Sends `request` through the cache: a conditional GET when a stored response needs
    /// validating, no request at all when it is fresh (RFC 9111, as a private cache; as a shared
    /// one in a directory a group shares, ``Sharing/group``, since several users read it then,
    /// and in one whose ``Configuration/httpAudience`` is ``HTTPAudience/shared``, a proxy's).
    ///
    /// - Stored bodies are pinned (held open and checked) before `If-None-Match` /
    ///   `If-Modified-Since` are sent, so a 304 is always answered with a body, even if another
    ///   process evicts the entry meanwhile. A 304 freshens the entry for every process of its
    ///   kind (a private or a shared cache: each reuses only what its own kind stored).
    /// - One request per URL is in flight across all processes: a fetch that finds another
    ///   under way waits for it, then uses its result — a download, or a revalidation shared
    ///   by everyone who asked meanwhile — if it is fresh for its own request (RFC 9111 §4);
    ///   one that is not (`no-cache`, stale at once, not stored) sends its own, without waiting
    ///   for the others that waited. After ``FetchOptions/waitTimeout``, or
    ///   ``FetchOptions/stalledFetchTimeout`` without a sign of life from the other fetch, it gives
    ///   up waiting and sends its own request.
    /// - Every result carries an RFC 9211 `Cache-Status` (``FetchResult/cacheStatus``).
    /// - Unsafe methods (POST, PUT, DELETE, …) pass through; on success they invalidate what is
    ///   stored for their URL and their `Location` / `Content-Location`.
    ///
    /// - Throws: ``SharedCacheError``: `.network` when the transport fails (its error is
    ///   ``SharedCacheError/underlyingError``), `.notCached` for ``FetchOptions/onlyFromCache``
    ///   with nothing stored, and the cache's own errors.
    public func fetch(
        _ request: URLRequest, options: FetchOptions = FetchOptions(),
        transport: any HTTPTransport = URLSessionTransport()
    ) async throws(SharedCacheError) -> FetchResult {
        try await fetch(request, options: options, transport: transport, observer: nil)
    }

    /// ``fetch(_:options:transport:)``, with `observer` shown a download as it arrives.
    func fetch(
        _ request: URLRequest, options: FetchOptions, transport: any HTTPTransport, observer: ResponseObserver?
    ) async throws(SharedCacheError) -> FetchResult {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw SharedCacheError(.invalidArgument, "fetch needs an http or https URL, not \(request.url?.absoluteString ?? "none")")
        }
        // What the request was, said in its failure (made only then: a fetch answered from a
        // fresh copy takes microseconds, and this string a few of them).
        func what() -> String { "\(request.httpMethod ?? "GET") \(url.absoluteString)" }
        do {
            let exchange = HTTPExchange(
                cache: engine, request: request, url: url, options: options, transport: transport, observer: observer)
            return try await exchange.run()
        } catch let failure as TransportFailure {
            throw failure.explained(what())
        } catch {
            // The cache's own failures (a full disk, a stray file in its directory) are said as
            // such, never as the network's.
            throw SharedCacheError(error, root: path, while: what())
        }
    }

    /// The key ``fetch(_:options:transport:)`` stores a URL's response under, so ``get(key:)``
    /// and ``remove(key:)`` reach it too: the URL in the one spelling its equivalent spellings
    /// share (RFC 9110 §4.2.3): scheme and host in lowercase, no default port, `/` for an empty
    /// path after a host, percent-encoded unreserved characters decoded and other
    /// percent-encodings in uppercase hex, no fragment. `http://EXAMPLE.com:80/%7esmith#top` is
    /// stored under `http://example.com/~smith`. (Earlier versions used the URL as written.)
    public static func cacheKey(for url: URL) -> String {
        CacheEngine.cacheKey(for: url)
    }

    /// Waits until every background revalidation this process started through this cache
    /// (`stale-while-revalidate`, RFC 5861 §3) has finished: a short-lived process calls it
    /// before exiting so that its revalidation is not lost.
    public func waitForBackgroundRevalidations() async {
        await BackgroundRevalidations.wait(for: engine)
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
            let reason = (underlying as? URLError).map(Self.reason) ?? "\(underlying)"
            error = SharedCacheError(.network, "\(what) failed: \(reason)")
        }
        error.underlyingError = underlying
        return error
    }
}

extension TransportFailure {
    /// What a URLError means and what to do, in words (Foundation's own description is, on
    /// Linux, "The operation could not be completed. (NSURLErrorDomain error -1004.)").
    static func reason(_ error: URLError) -> String {
        switch error.code {
        case .cannotConnectToHost:
            return "could not connect to the server (nothing listens there, or it refused); check the host and port"
        case .cannotFindHost, .dnsLookupFailed:
            return "the host name was not found; check the URL and the DNS"
        case .notConnectedToInternet, .networkConnectionLost, .dataNotAllowed, .internationalRoamingOff:
            return "the network is not available; try again once connected"
        case .timedOut:
            return "the server did not answer in time; try again later"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate,
            .serverCertificateNotYetValid, .serverCertificateHasUnknownRoot, .clientCertificateRejected,
            .clientCertificateRequired:
            return "the TLS connection failed (URLError \(error.code.rawValue)); check the server's certificate"
        case .badServerResponse, .cannotParseResponse, .cannotDecodeRawData, .cannotDecodeContentData,
            .zeroByteResource:
            return "the server sent a response that could not be read (URLError \(error.code.rawValue))"
        case .dataLengthExceedsMaximum:
            return "the body is longer than the cache's size limit (1 GiB where none is set) would keep (the plain "
                + "connection for a coding URLSession cannot decode reads no further); set size-limit above the "
                + "body's length if it should be fetched"
        case .httpTooManyRedirects, .redirectToNonExistentLocation:
            return "the server's redirects do not end; check the URL"
        case .unsupportedURL, .badURL:
            return "the URL is not one URLSession can load; check it"
        default:
            // What the transfer itself said, where it said more than the code (on Linux, libcurl's
            // words: "transfer closed with 4000000 bytes remaining to read").
            let told = (error.userInfo[NSLocalizedDescriptionKey] as? String).map { " (\($0))" } ?? ""
            return "URLError \(error.code.rawValue)\(told); check the network and the URL"
        }
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
