import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

/// One request through the cache: decide from what is stored, go to the network when needed
/// (one request per URL across processes), and store or freshen what comes back.
struct HTTPExchange {
    let cache: CacheEngine
    let request: URLRequest
    let url: URL
    let options: FetchOptions
    let transport: any HTTPTransport

    private var method: String { (request.httpMethod ?? "GET").uppercased() }

    /// Sends `outgoing` through the transport, marking its failures as the network's, so that
    /// the boundary never mistakes one for the cache's own (or the other way round).
    private func deliver(_ outgoing: URLRequest) async throws -> TransportResponse {
        do {
            return try await transport.send(outgoing)
        } catch {
            throw TransportFailure(underlying: error)
        }
    }

    func run() async throws -> FetchResult {
        switch method {
        case "GET": return try await retrieve(headOnly: false)
        case "HEAD": return try await retrieve(headOnly: true)
        case "OPTIONS", "TRACE", "CONNECT": return try await passThrough()
        default: return try await unsafeRequest()
        }
    }

    /// The request's own cache directives; `Pragma: no-cache` counts when it has none (§5.4).
    private var directives: CacheControl {
        if let value = request.value(forHTTPHeaderField: "Cache-Control") { return CacheControl(value) }
        var directives = CacheControl()
        directives.noCache = request.value(forHTTPHeaderField: "Pragma")?.lowercased().contains("no-cache") ?? false
        return directives
    }

    private var hasCallerValidators: Bool {
        request.value(forHTTPHeaderField: "If-None-Match") != nil
            || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
    }

    // MARK: GET and HEAD

    private func retrieve(headOnly: Bool) async throws -> FetchResult {
        let directives = directives
        let primaryKey = CacheEngine.cacheKey(for: url)
        let cache = cache
        var lookup = try await lookUp(primaryKey)
        if let candidate = lookup.candidate, !options.forceRefresh, !directives.noCache,
            candidate.isUsable(at: Clock.nowMilliseconds(), for: directives)
        {
            if let body = try await read(candidate) {
                return answer(from: candidate, body: body, source: .fresh, headOnly: headOnly)
            }
            lookup.candidate = nil  // it failed its check and was discarded
        }
        if options.onlyFromCache || directives.onlyIfCached {
            if let candidate = lookup.candidate,
                options.onlyFromCache || candidate.isUsable(at: Clock.nowMilliseconds(), for: directives),
                let body = try await read(candidate)
            {
                return answer(from: candidate, body: body, source: .offline, headOnly: headOnly)
            }
            guard !options.onlyFromCache else {
                throw SharedCacheError(
                    .notCached, "\(url.absoluteString) is not in the cache (offline); fetch it once while online")
            }
            // RFC 9111 §5.2.1.7: only-if-cached with nothing usable is a 504.
            return FetchResult(data: Data(), status: 504, headers: [:], url: url, source: .offline)
        }
        // A HEAD the cache cannot answer, and a request that forbids storing, just pass through.
        if headOnly || directives.noStore { return try await passThrough() }

        let (lock, waited) = try await FetchLock.acquire(
            KeyHash(key: primaryKey), in: cache.directory, timeout: options.waitTimeout, describing: url.absoluteString)
        defer { lock.release() }
        if waited {
            // Another process or task fetched this URL while we waited: use what it brought.
            let before = lookup.candidate?.version
            lookup = try await lookUp(primaryKey)
            if let candidate = lookup.candidate, !options.forceRefresh,
                candidate.version != before
                    || (!directives.noCache && candidate.isUsable(at: Clock.nowMilliseconds(), for: directives)),
                let body = try await read(candidate)
            {
                return answer(from: candidate, body: body, source: .fresh, headOnly: false)
            }
        }
        if lookup.pinFailed && !hasCallerValidators {
            cache.count { $0.withheldValidators += 1 }
            cache.counters?.add(.withheldValidators)
        }
        // The caller's own validators are the caller's business: send them as they are.
        let candidate = hasCallerValidators || options.forceRefresh ? nil : lookup.candidate
        return try await send(primaryKey: primaryKey, validating: candidate, fallback: lookup.candidate)
    }

    /// What is stored for the request, pinned; the accesses it read are journaled off the
    /// cooperative pool when due (rarely: once per recency interval per entry).
    private func lookUp(_ primaryKey: String) async throws -> CacheEngine.StoredLookup {
        let lookup = try cache.lookupStored(primaryKey: primaryKey, request: request)
        let cache = cache
        let interval = cache.configuration.recencyInterval.milliseconds
        let due = lookup.accessesDue.filter { $0.at - $0.entry.lastAccess >= interval }
        if !due.isEmpty {
            try await cache.offPool {
                for access in due { cache.recordAccessIfDue(access.hash, entry: access.entry, now: access.at) }
            }
        }
        return lookup
    }

    /// Sends the request, conditional on `candidate` when there is one, and handles the answer.
    ///
    /// - Parameter fallback: what may be served stale if the network fails.
    private func send(primaryKey: String, validating candidate: StoredCandidate?, fallback: StoredCandidate?)
        async throws -> FetchResult
    {
        var outgoing = request
        if let candidate {
            if let etag = candidate.etag { outgoing.setValue(etag, forHTTPHeaderField: "If-None-Match") }
            if let lastModified = candidate.lastModified {
                outgoing.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
            }
        }
        let requestTime = Clock.nowMilliseconds()
        let response: TransportResponse
        do {
            response = try await deliver(outgoing)
        } catch {
            if let stale = try await staleAnswer(fallback) { return stale }
            throw error
        }
        let responseTime = Clock.nowMilliseconds()
        if response.status >= 500, let stale = try await staleAnswer(fallback) { return stale }

        let cache = cache
        if response.status == 304, let candidate, candidate.etag != nil || candidate.lastModified != nil {
            // The safety rule: serve a 304 only with the pinned body, checked now, and only if
            // the 304 is about that body.
            let matches = response.headers["ETag"].map { Self.weakMatch($0, candidate.etag) } ?? true
            if matches, let body = try await read(candidate) {
                let revalidation = cache.revalidation(
                    of: candidate, by: response.headers, requestTime: requestTime, responseTime: responseTime,
                    heuristic: options.heuristicFreshness)
                // Usually one journal append; either way off the pool, as it may wait for the
                // journal's append lock.
                try await cache.offPool {
                    if try !(revalidation.changesOnlyFreshness && cache.journalFreshening(candidate, revalidation)) {
                        try cache.storeRevalidated(candidate, body: body, revalidation)
                    }
                }
                cache.count { $0.revalidations += 1 }
                cache.counters?.add(.revalidations)
                var served = revalidation.headers
                served.set("Age", "0")
                return FetchResult(
                    data: method == "HEAD" ? Data() : body, status: candidate.response.status, headers: served, url: url,
                    source: .revalidated)
            }
            cache.count { $0.unconditionalRetries += 1 }
            cache.counters?.add(.unconditionalRetries)
            return try await send(primaryKey: primaryKey, validating: nil, fallback: nil)
        }

        let (request, heuristic) = (request, options.heuristicFreshness)
        _ = try await cache.offPool {
            try cache.storeHTTPResponse(
                primaryKey: primaryKey, request: request, response: response, requestTime: requestTime,
                responseTime: responseTime, heuristic: heuristic)
        }
        cache.count { $0.downloads += 1 }
        cache.counters?.add(.downloads)
        return downloaded(response)
    }

    /// The candidate's body, checked; read off the cooperative pool when it is large.
    private func read(_ candidate: StoredCandidate) async throws -> Data? {
        try await cache.offPool(when: candidate.entry.bodySize > CacheEngine.inlineReadLimit) { try candidate.body() }
    }

    /// The stored response served as is (with its `Age`), or a 304 when the caller's own
    /// validators match a fresh one.
    private func answer(from candidate: StoredCandidate, body: Data, source: FetchSource, headOnly: Bool)
        -> FetchResult
    {
        cache.count { $0.fetchHits += 1 }
        cache.counters?.add(.hits)
        var headers = candidate.response.headers
        headers.set("Age", "\(candidate.age(at: Clock.nowMilliseconds()) / 1000)")
        if source == .fresh, callerValidatorsMatch(candidate) {
            return FetchResult(data: Data(), status: 304, headers: headers, url: url, source: source)
        }
        return FetchResult(
            data: headOnly ? Data() : body, status: candidate.response.status, headers: headers, url: url, source: source)
    }

    /// RFC 9110 §13.1: `If-None-Match` by weak comparison, else `If-Modified-Since`.
    private func callerValidatorsMatch(_ candidate: StoredCandidate) -> Bool {
        if let tags = request.value(forHTTPHeaderField: "If-None-Match") {
            return tags.split(separator: ",").contains { tag in
                let tag = tag.trimmingSpaces()
                return tag == "*" || Self.weakMatch(tag, candidate.etag)
            }
        }
        if let since = request.value(forHTTPHeaderField: "If-Modified-Since").flatMap(HTTPDate.parse),
            let modified = (candidate.lastModified ?? candidate.response.headers["Date"]).flatMap(HTTPDate.parse)
        {
            return modified <= since
        }
        return false
    }

    /// Weak entity-tag comparison: equal once any `W/` is set aside.
    static func weakMatch(_ tag: String, _ other: String?) -> Bool {
        guard let other else { return false }
        func opaque(_ tag: String) -> Substring {
            let trimmed = Substring(tag.trimmingSpaces())
            return trimmed.hasPrefix("W/") ? trimmed.dropFirst(2) : trimmed
        }
        return opaque(tag) == opaque(other)
    }

    private func staleAnswer(_ candidate: StoredCandidate?) async throws -> FetchResult? {
        guard options.staleIfError, let candidate, !candidate.response.mustRevalidate,
            let body = try await read(candidate)
        else { return nil }
        return answer(from: candidate, body: body, source: .offline, headOnly: method == "HEAD")
    }

    /// A response as the network delivered it.
    private func downloaded(_ response: TransportResponse) -> FetchResult {
        FetchResult(
            data: response.body, status: response.status, headers: response.headers, url: response.url ?? url,
            source: .downloaded)
    }

    // MARK: Other methods

    private func passThrough() async throws -> FetchResult {
        let response = try await deliver(request)
        return downloaded(response)
    }

    /// RFC 9111 §4.4: a successful unsafe request makes what is stored for its URL, and for
    /// its `Location` and `Content-Location` on the same origin, stale; here, removed.
    private func unsafeRequest() async throws -> FetchResult {
        let response = try await deliver(request)
        if (200..<400).contains(response.status) {
            let targets =
                [url]
                + ["Location", "Content-Location"].compactMap { name in
                    response.headers[name].flatMap { URL(string: $0, relativeTo: url)?.absoluteURL }
                        .flatMap { $0.host == url.host && $0.scheme == url.scheme && $0.port == url.port ? $0 : nil }
                }
            let cache = cache
            try await cache.offPool { for target in targets { try cache.invalidate(target) } }
        }
        return downloaded(response)
    }
}
