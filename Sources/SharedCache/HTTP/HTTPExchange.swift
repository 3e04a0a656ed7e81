import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

/// One request through the cache: decide from what is stored, go to the network when needed
/// (one request per URL at a time across processes, whose answer those that waited share when
/// they may reuse it), and store or freshen what comes back. Every answer
/// carries a `Cache-Status` (RFC 9211) saying which of these happened.
struct HTTPExchange: Sendable {
    let cache: CacheEngine
    let request: URLRequest
    let url: URL
    let options: FetchOptions
    let transport: any HTTPTransport
    /// Shown a download as it arrives (the URL protocol's client, on Darwin).
    var observer: ResponseObserver? = nil

    var method: String { (request.httpMethod ?? "GET").uppercased() }

    /// The key of what is stored for the request's URL: the caller's, or the URL's own.
    var primaryKey: String { options.cacheKey ?? CacheEngine.cacheKey(for: url) }

    /// Sends `outgoing` through the transport, marking its failures as the network's, so that
    /// the boundary never mistakes one for the cache's own (or the other way round).
    func deliver(_ outgoing: URLRequest) async throws -> TransportResponse {
        do {
            return try await IdentityConnection.$bodyLimit.withValue(plainBodyLimit) {
                try await transport.send(outgoing)
            }
        } catch {
            throw TransportFailure(underlying: error)
        }
    }

    /// The longest body the plain connection reads for this cache (see
    /// ``IdentityConnection/bodyLimit``): its size limit, or the default one where it has none.
    var plainBodyLimit: Int {
        let limit = cache.configuration.sizeLimit
        return limit == 0 ? IdentityConnection.defaultBodyLimit : Int(clamping: limit)
    }

    /// What is stored for the request, pinned; the accesses it read are journaled off the
    /// cooperative pool when due (rarely: once per recency interval per entry). A GET with a
    /// `Range` that no complete response answers is answered by the URL's stored parts when
    /// they hold all it asks for (RFC 9111 §3.3).
    func lookUp(_ primaryKey: String) async throws -> CacheEngine.StoredLookup {
        var lookup = try cache.lookupStored(primaryKey: primaryKey, request: request)
        if lookup.candidate == nil, method == "GET", request.value(forHTTPHeaderField: "Range") != nil,
            let parts = try cache.lookupParts(primaryKey: primaryKey, accessesDue: &lookup.accessesDue)
        {
            if heldPart(of: parts) != nil { lookup.candidate = parts } else { lookup.partsMiss = true }
        }
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

    func run() async throws -> FetchResult {
        switch method {
        case "GET": return try await retrieve(headOnly: false)
        case "HEAD": return try await retrieve(headOnly: true)
        case "OPTIONS", "TRACE", "CONNECT": return try await passThrough(.method)
        default: return try await unsafeRequest()
        }
    }

    /// The request's own cache directives; `Pragma: no-cache` counts when it has none (§5.4).
    var directives: CacheControl {
        if let value = request.value(forHTTPHeaderField: "Cache-Control") { return CacheControl(value) }
        var directives = CacheControl()
        directives.noCache = request.value(forHTTPHeaderField: "Pragma")?.lowercased().contains("no-cache") ?? false
        return directives
    }

    var hasCallerValidators: Bool {
        request.value(forHTTPHeaderField: "If-None-Match") != nil
            || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
    }

    var hasOriginPreconditions: Bool {
        request.value(forHTTPHeaderField: "If-Match") != nil
            || request.value(forHTTPHeaderField: "If-Unmodified-Since") != nil
    }

    /// The cap on heuristic lifetimes, in milliseconds; `nil` when the heuristic is off.
    var heuristicCap: Int64? {
        options.heuristicFreshness ? Int64(clamping: options.heuristicFreshnessLimit.nanoseconds / 1_000_000) : nil
    }

    // MARK: GET and HEAD

    func retrieve(headOnly: Bool) async throws -> FetchResult {
        let directives = directives
        let primaryKey = primaryKey
        let cache = cache
        var lookup = try await lookUp(primaryKey)
        // RFC 9111 §4.3.2: `If-Match` and `If-Unmodified-Since` are for the origin to evaluate
        // (RFC 9110 §13.1.1, §13.1.4); no stored response can say whether they hold, so such a
        // request goes to the origin, or offline finds nothing usable.
        let answersFromStore = !hasOriginPreconditions
        if answersFromStore, let candidate = lookup.candidate, !options.forceRefresh,
            isFresh(candidate, for: directives)
        {
            if let body = try await read(candidate) {
                return answer(from: candidate, body: body, source: .fresh, headOnly: headOnly, status: .hit)
            }
            lookup.candidate = nil  // it failed its check and was discarded
        }
        if options.onlyFromCache || directives.onlyIfCached {
            if answersFromStore, let candidate = lookup.candidate,
                options.onlyFromCache || candidate.isUsable(at: Clock.nowMilliseconds(), for: directives),
                let body = try await read(candidate)
            {
                var status = CacheStatus.hit
                status.detail = "offline"
                return answer(from: candidate, body: body, source: .offline, headOnly: headOnly, status: status)
            }
            guard !options.onlyFromCache else {
                throw SharedCacheError(
                    .notCached, "\(url.absoluteString) is not in the cache (offline); fetch it once while online")
            }
            // RFC 9111 §5.2.1.7: only-if-cached with nothing usable is a 504.
            var status = CacheStatus()
            status.isGenerated = true
            status.detail = "only-if-cached"
            return FetchResult(data: Data(), status: 504, headers: served([:], status), url: url, source: .offline)
        }
        if !answersFromStore { return try await passThrough(.request) }
        // RFC 5861 §3: serve a stale response within its stale-while-revalidate window at once,
        // and revalidate it in the background (once per URL across processes).
        if let candidate = lookup.candidate, !options.forceRefresh, allowsStaleWhileRevalidate(candidate, directives),
            let body = try await read(candidate)
        {
            revalidateInBackground(primaryKey: primaryKey, seen: candidate)
            var status = CacheStatus.hit
            status.ttl = candidate.remaining(at: Clock.nowMilliseconds()) / 1000
            status.detail = "stale-while-revalidate"
            return answer(from: candidate, body: body, source: .stale, headOnly: headOnly, status: status)
        }
        // A request that forbids storing just passes through, a HEAD too: it may not freshen
        // the stored GET (§5.2.1.5). Any other HEAD the cache cannot answer goes through, and
        // may freshen the stored GET (§4.3.5).
        if directives.noStore { return try await passThrough(.request) }
        if headOnly { return try await head(validating: lookup.candidate) }

        #if DEBUG
        // Tests widen the window between the lookup and the lock, as a descheduled process would:
        // for some milliseconds, or until the test writes a line once it is told "paused".
        switch Self.pauseBeforeLock {
        case "line"?:
            FileHandle.standardError.write(Data("paused\n".utf8))
            _ = readLine()
        case let milliseconds?: try await Task.sleep(for: .milliseconds(Int(milliseconds) ?? 0))
        case nil: break
        }
        #endif
        let before = lookup.candidate?.version
        var (lock, waited) = try await cache.fetchLocks.acquire(
            KeyHash(key: primaryKey), timeout: options.waitTimeout,
            stalledAfter: options.stalledFetchTimeout, describing: url.absoluteString)
        let timedOut = lock == nil
        defer { lock?.release() }
        // Look again after every acquisition: whoever held the lock a moment ago may have stored
        // or revalidated this URL since the lookup above. (Unless the index is as this process
        // last read it then, and the candidate has not expired since: looking again would find
        // the same.)
        let previous = lookup.candidate
        let reason = forwardReason(lookup, directives)
        let unchanged =
            try cache.indexStamp() == lookup.indexStamp
            && !(previous?.entry.isExpired(at: Clock.nowMilliseconds()) ?? false)
        if !unchanged { lookup = try await lookUp(primaryKey) }
        // What the request this one waited for stored or revalidated answers it too (collapsed
        // with it, as nginx's proxy_cache_lock does), but only if this request may reuse it
        // (RFC 9111 §4): fresh for it, so never one that says `no-cache` or is stale already
        // (§5.2.2.4, §4.2.4), nor after a forced refresh. (Another process may also have stored
        // a version between the lookup and a lock that was free.) One that waited for another
        // range or variant of the URL, which its own answer adds to, was not collapsed with it:
        // it keeps the lock, to store its part or variant beside what that one stored.
        let waitedForThis = waited && !lookup.partsMiss && !lookup.varyMiss
        let collapsed = waitedForThis || lookup.candidate.map { $0.version != before } ?? false
        if let candidate = lookup.candidate, !options.forceRefresh, isFresh(candidate, for: directives) {
            if let body = try await read(candidate) {
                var status = CacheStatus.hit
                if collapsed {
                    status = CacheStatus(forward: reason)
                    status.collapsed = true
                }
                return answer(from: candidate, body: body, source: .fresh, headOnly: false, status: status)
            }
            lookup.candidate = nil  // it failed its check and was discarded
        }
        if lookup.pinFailed && !hasCallerValidators {
            cache.count(.withheldValidators) { $0.withheldValidators += 1 }
        }
        var status = CacheStatus(forward: forwardReason(lookup, directives))
        if timedOut { status.detail = "lock-timeout" }
        if collapsed {
            // It may not (or nothing was stored): this request goes forward itself, without the
            // lock, as it would without the cache; the others that waited go at the same moment,
            // none after another.
            status.collapsed = false
            lock?.release()
            lock = nil
        }
        // The caller's own validators are the caller's business: send them as they are.
        let candidate = hasCallerValidators || options.forceRefresh ? nil : lookup.candidate
        return try await send(
            primaryKey: primaryKey, validating: candidate, fallback: lookup.candidate ?? previous,
            callersCandidate: hasCallerValidators && lock != nil ? lookup.candidate : nil, status: status,
            locked: lock != nil)
    }

    #if DEBUG
    /// `SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK`: how to pause between the first lookup and taking
    /// the fetch lock, milliseconds or `line` (debug builds only).
    static let pauseBeforeLock = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK"]
    #endif

    /// Fresh enough to serve without a request: usable by RFC 9111 §4.2 and the request's own
    /// directives, or `immutable` (RFC 8246 §2) and fresh, which a reload (`no-cache`,
    /// `max-age=0`) does not revalidate; only ``FetchOptions/forceRefresh`` does. The request's
    /// other limits (`min-fresh`, a `max-age` above 0) still hold for an immutable response.
    func isFresh(_ candidate: StoredCandidate, for directives: CacheControl) -> Bool {
        let now = Clock.nowMilliseconds()
        if !directives.noCache && candidate.isUsable(at: now, for: directives) { return true }
        guard candidate.directives.immutable, candidate.remaining(at: now) > 0,
            directives.noCache || directives.maxAge == 0
        else { return false }
        var beyondTheReload = directives
        beyondTheReload.noCache = false
        if beyondTheReload.maxAge == 0 { beyondTheReload.maxAge = nil }
        return candidate.isUsable(at: now, for: beyondTheReload)
    }

    /// RFC 5861 §3: stale by no more than its `stale-while-revalidate`, nothing forbidding stale
    /// (`must-revalidate`, `no-cache`, §4.2.4), and a request that asks for no freshness of its own.
    func allowsStaleWhileRevalidate(_ candidate: StoredCandidate, _ directives: CacheControl) -> Bool {
        guard let window = candidate.directives.staleWhileRevalidate, !candidate.response.mustRevalidate,
            !directives.noCache, directives.maxAge == nil, directives.minFresh == nil
        else { return false }
        let remaining = candidate.remaining(at: Clock.nowMilliseconds())
        return remaining <= 0 && -remaining <= window.saturatingMilliseconds
    }

    /// Why a request goes to the network (RFC 9211 §2.2).
    func forwardReason(_ lookup: CacheEngine.StoredLookup, _ directives: CacheControl) -> CacheStatus.Forward {
        guard let candidate = lookup.candidate else {
            return lookup.varyMiss ? .varyMiss : lookup.partsMiss ? .partial : lookup.pinFailed ? .miss : .uriMiss
        }
        return candidate.remaining(at: Clock.nowMilliseconds()) > 0 ? .request : .stale
    }
}
