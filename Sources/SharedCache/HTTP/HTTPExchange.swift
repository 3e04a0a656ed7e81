import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

/// One request through the cache: decide from what is stored, go to the network when needed
/// (one request per URL across processes), and store or freshen what comes back. Every answer
/// carries a `Cache-Status` (RFC 9211) saying which of these happened.
struct HTTPExchange: Sendable {
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

    func run() async throws -> FetchResult {
        switch method {
        case "GET": return try await retrieve(headOnly: false)
        case "HEAD": return try await retrieve(headOnly: true)
        case "OPTIONS", "TRACE", "CONNECT": return try await passThrough(.method)
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

    /// The cap on heuristic lifetimes, in milliseconds; `nil` when the heuristic is off.
    private var heuristicCap: Int64? {
        options.heuristicFreshness ? Int64(clamping: options.heuristicFreshnessLimit.nanoseconds / 1_000_000) : nil
    }

    // MARK: GET and HEAD

    private func retrieve(headOnly: Bool) async throws -> FetchResult {
        let directives = directives
        let primaryKey = options.cacheKey ?? CacheEngine.cacheKey(for: url)
        let cache = cache
        var lookup = try await lookUp(primaryKey)
        if let candidate = lookup.candidate, !options.forceRefresh, isFresh(candidate, for: directives) {
            if let body = try await read(candidate) {
                return answer(from: candidate, body: body, source: .fresh, headOnly: headOnly, status: .hit)
            }
            lookup.candidate = nil  // it failed its check and was discarded
        }
        if options.onlyFromCache || directives.onlyIfCached {
            if let candidate = lookup.candidate,
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
            var status = CacheStatus(forward: .request)
            status.detail = "only-if-cached"
            return FetchResult(data: Data(), status: 504, headers: served([:], status), url: url, source: .offline)
        }
        // RFC 5861 §3: serve a stale response within its stale-while-revalidate window at once,
        // and revalidate it in the background (once per URL across processes).
        if let candidate = lookup.candidate, !options.forceRefresh, allowsStaleWhileRevalidate(candidate, directives),
            let body = try await read(candidate)
        {
            revalidateInBackground(primaryKey: primaryKey, seen: candidate.version)
            var status = CacheStatus.hit
            status.ttl = candidate.remaining(at: Clock.nowMilliseconds()) / 1000
            status.detail = "stale-while-revalidate"
            return answer(from: candidate, body: body, source: .stale, headOnly: headOnly, status: status)
        }
        // A HEAD the cache cannot answer goes through, and may freshen the stored GET (§4.3.5);
        // a request that forbids storing just passes through.
        if headOnly { return try await head(validating: lookup.candidate) }
        if directives.noStore { return try await passThrough(.request) }

        #if DEBUG
        // Tests widen the window between the lookup and the lock, as a descheduled process would.
        if let pause = Self.pauseBeforeLock { try await Task.sleep(for: .milliseconds(pause)) }
        #endif
        let before = lookup.candidate?.version
        let (lock, _) = try await FetchLock.acquire(
            KeyHash(key: primaryKey), in: cache.directory, timeout: options.waitTimeout,
            stalledAfter: options.stalledFetchTimeout, describing: url.absoluteString)
        defer { lock?.release() }
        // Look again after every acquisition: whoever held the lock a moment ago may have stored
        // or revalidated this URL since the lookup above. A version that arrived after this
        // request began answers it (collapsed, as nginx's proxy_cache_lock does), unless the
        // caller forces a refresh.
        let previous = lookup.candidate
        lookup = try await lookUp(primaryKey)
        if let candidate = lookup.candidate, !options.forceRefresh {
            let collapsed = candidate.version != before
            if collapsed || isFresh(candidate, for: directives), let body = try await read(candidate) {
                var status = CacheStatus.hit
                status.collapsed = collapsed
                return answer(from: candidate, body: body, source: .fresh, headOnly: false, status: status)
            }
        }
        if lookup.pinFailed && !hasCallerValidators {
            cache.count { $0.withheldValidators += 1 }
            cache.counters?.add(.withheldValidators)
        }
        var status = CacheStatus(forward: forwardReason(lookup, directives))
        if lock == nil { status.detail = "lock-timeout" }
        // The caller's own validators are the caller's business: send them as they are.
        let candidate = hasCallerValidators || options.forceRefresh ? nil : lookup.candidate
        return try await send(
            primaryKey: primaryKey, validating: candidate, fallback: lookup.candidate ?? previous, status: status,
            locked: lock != nil)
    }

    #if DEBUG
    /// `SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK_MS`: milliseconds to pause between the first lookup
    /// and taking the fetch lock (debug builds only).
    private static let pauseBeforeLock = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK_MS"]
        .flatMap(Int.init)
    #endif

    /// Fresh enough to serve without a request: usable by RFC 9111 §4.2 and the request's own
    /// directives, or `immutable` (RFC 8246 §2) and fresh, which a reload (`no-cache`,
    /// `max-age=0`) does not revalidate; only ``FetchOptions/forceRefresh`` does.
    private func isFresh(_ candidate: StoredCandidate, for directives: CacheControl) -> Bool {
        let now = Clock.nowMilliseconds()
        if !directives.noCache && candidate.isUsable(at: now, for: directives) { return true }
        return candidate.directives.immutable && candidate.remaining(at: now) > 0
    }

    /// RFC 5861 §3: stale by no more than its `stale-while-revalidate`, nothing forbidding stale
    /// (`must-revalidate`, `no-cache`, §4.2.4), and a request that asks for no freshness of its own.
    private func allowsStaleWhileRevalidate(_ candidate: StoredCandidate, _ directives: CacheControl) -> Bool {
        guard let window = candidate.directives.staleWhileRevalidate, !candidate.response.mustRevalidate,
            !directives.noCache, directives.maxAge == nil, directives.minFresh == nil
        else { return false }
        let remaining = candidate.remaining(at: Clock.nowMilliseconds())
        return remaining <= 0 && -remaining <= window.saturatingMilliseconds
    }

    /// Why a request goes to the network (RFC 9211 §2.2).
    private func forwardReason(_ lookup: CacheEngine.StoredLookup, _ directives: CacheControl) -> CacheStatus.Forward {
        guard let candidate = lookup.candidate else {
            return lookup.varyMiss ? .varyMiss : lookup.pinFailed ? .miss : .uriMiss
        }
        return candidate.remaining(at: Clock.nowMilliseconds()) > 0 ? .request : .stale
    }

    /// Sends the request, conditional on `candidate` when there is one, and handles the answer.
    ///
    /// - Parameters:
    ///   - fallback: what may be served stale if the network fails (RFC 5861 §4).
    ///   - locked: whether this fetch holds the URL's fetch lock; one that gave up waiting for
    ///     it stores only if the lock is free by then.
    private func send(
        primaryKey: String, validating candidate: StoredCandidate?, fallback: StoredCandidate?, status: CacheStatus,
        locked: Bool
    ) async throws -> FetchResult {
        var outgoing = request
        if let candidate {
            if let etag = candidate.etag { outgoing.setValue(etag, forHTTPHeaderField: "If-None-Match") }
            if let lastModified = candidate.lastModified {
                outgoing.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
            }
        }
        var status = status
        let requestTime = Clock.nowMilliseconds()
        let response: TransportResponse
        do {
            response = try await deliver(outgoing)
        } catch {
            if let stale = try await staleAnswer(fallback, status: status) { return stale }
            throw error
        }
        let responseTime = Clock.nowMilliseconds()
        status.forwardStatus = response.status
        if response.status >= 500, let stale = try await staleAnswer(fallback, status: status) { return stale }

        let cache = cache
        if response.status == 304, let candidate, candidate.etag != nil || candidate.lastModified != nil {
            // The safety rule: serve a 304 only with the pinned body, checked now, and only if
            // the 304 is about that body.
            let matches = response.headers["ETag"].map { Self.weakMatch($0, candidate.etag) } ?? true
            if matches, let body = try await read(candidate) {
                let revalidation = try await freshen(candidate, body: body, by: response.headers, requestTime, responseTime)
                cache.count { $0.revalidations += 1 }
                cache.counters?.add(.revalidations)
                var served = revalidation.headers
                served.set("Age", "0")
                status.ttl = revalidation.lifetime == .max ? Int64(Int32.max) : revalidation.lifetime / 1000
                let result = FetchResult(
                    data: method == "HEAD" ? Data() : body, status: candidate.response.status, headers: served, url: url,
                    source: .revalidated, cacheType: candidate.held != nil ? .memory : .disk)
                return sliced(result, validators: revalidation.headers, status: status)
            }
            cache.count { $0.unconditionalRetries += 1 }
            cache.counters?.add(.unconditionalRetries)
            return try await send(primaryKey: primaryKey, validating: nil, fallback: nil, status: status, locked: locked)
        }

        let (request, heuristicCap) = (request, heuristicCap)
        let store: @Sendable () throws -> CacheEngine.StoredOutcome? = {
            try cache.storeHTTPResponse(
                primaryKey: primaryKey, request: request, response: response, requestTime: requestTime,
                responseTime: responseTime, heuristicCap: heuristicCap)
        }
        var outcome: CacheEngine.StoredOutcome?
        if locked {
            outcome = try await cache.offPool(store)
        } else if let (lock, _) = try? await FetchLock.acquire(
            KeyHash(key: primaryKey), in: cache.directory, timeout: .zero, describing: url.absoluteString),
            let lock
        {
            defer { lock.release() }
            outcome = try await cache.offPool(store)
        }
        status.stored = outcome != nil
        status.ttl = outcome?.ttl(at: Clock.nowMilliseconds())
        cache.count { $0.downloads += 1 }
        cache.counters?.add(.downloads)
        return downloaded(response, status)
    }

    /// Applies a 304's or a HEAD's fields to the stored response: usually one journal append,
    /// else a new version (when other fields changed); either way off the pool, as an append may
    /// wait for the journal's append lock.
    private func freshen(
        _ candidate: StoredCandidate, body: Data, by update: HTTPHeaders, _ requestTime: Int64, _ responseTime: Int64
    ) async throws -> CacheEngine.Revalidation {
        let cache = cache
        let revalidation = cache.revalidation(
            of: candidate, by: update, requestTime: requestTime, responseTime: responseTime, heuristicCap: heuristicCap)
        try await cache.offPool {
            if try !(revalidation.changesOnlyFreshness && cache.journalFreshening(candidate, revalidation)) {
                try cache.storeRevalidated(candidate, body: body, revalidation)
            }
        }
        return revalidation
    }

    /// A HEAD the cache could not answer: sent as is; a `200` whose validators match the stored
    /// GET freshens it and updates its fields, as a 304 would (RFC 9111 §4.3.5). One whose
    /// `Content-Length` differs from the stored body is about another representation.
    private func head(validating candidate: StoredCandidate?) async throws -> FetchResult {
        let requestTime = Clock.nowMilliseconds()
        let response = try await deliver(request)
        let responseTime = Clock.nowMilliseconds()
        var status = CacheStatus(forward: candidate == nil ? .uriMiss : .method)
        status.forwardStatus = response.status
        if let candidate, response.status == 200, candidate.response.status == 200,
            Self.selects(response.headers, candidate),
            response.headers["Content-Length"].map({ Int($0.trimmingSpaces()) == Int(candidate.entry.bodySize) }) ?? true,
            let body = try await read(candidate)
        {
            let revalidation = try await freshen(candidate, body: body, by: response.headers, requestTime, responseTime)
            status.stored = true
            status.ttl = revalidation.lifetime == .max ? Int64(Int32.max) : revalidation.lifetime / 1000
        }
        return downloaded(response, status)
    }

    /// Whether a response's validators name the stored one (RFC 9111 §4.3.4's selection): the
    /// same entity tag, or, neither having one, the same `Last-Modified`.
    private static func selects(_ headers: HTTPHeaders, _ candidate: StoredCandidate) -> Bool {
        if let etag = headers["ETag"] { return weakMatch(etag, candidate.etag) }
        guard candidate.etag == nil else { return false }
        return headers["Last-Modified"] == candidate.lastModified
    }

    /// The candidate's body, checked; read off the cooperative pool when it is large.
    private func read(_ candidate: StoredCandidate) async throws -> Data? {
        try await cache.offPool(when: candidate.entry.bodySize > CacheEngine.inlineReadLimit) { try candidate.body() }
    }

    /// The stored response served as is (with its `Age`), a 304 when the caller's own
    /// validators match it, or the part a `Range` asks for.
    private func answer(
        from candidate: StoredCandidate, body: Data, source: FetchSource, headOnly: Bool, status: CacheStatus
    ) -> FetchResult {
        cache.count { $0.fetchHits += 1 }
        cache.counters?.add(.hits)
        let now = Clock.nowMilliseconds()
        var status = status
        if status.ttl == nil {
            let remaining = candidate.remaining(at: now)
            status.ttl = remaining == .max ? Int64(Int32.max) : remaining / 1000
        }
        var headers = candidate.response.headers
        headers.set("Age", "\(candidate.age(at: now) / 1000)")
        let cacheType: CacheType = candidate.held != nil ? .memory : .disk
        if source == .fresh || source == .stale, callerValidatorsMatch(candidate) {
            return FetchResult(
                data: Data(), status: 304, headers: served(headers, status), url: url, source: source,
                cacheType: cacheType)
        }
        let result = FetchResult(
            data: headOnly ? Data() : body, status: candidate.response.status, headers: headers, url: url, source: source,
            cacheType: cacheType)
        return sliced(result, validators: candidate.response.headers, status: status)
    }

    /// A whole `200` cut to the request's `Range` when it asks for one part (RFC 9110 §14.2,
    /// §15.3.7): a `206` with `Content-Range`, or a `416` when no byte satisfies it. `If-Range`
    /// (§13.1.5) must name the stored response by a strong entity tag or its exact
    /// `Last-Modified`, or the whole response is served.
    private func sliced(_ whole: FetchResult, validators: HTTPHeaders, status: CacheStatus) -> FetchResult {
        var result = whole
        var status = status
        switch rangeAnswer(length: whole.data.count, status: whole.status, validators: validators) {
        case .whole:
            break
        case .slice(let bytes):
            result.data = whole.data.subdata(in: bytes)
            result.status = 206
            result.headers.set("Content-Range", "bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(whole.data.count)")
            result.headers.set("Content-Length", "\(bytes.count)")
            status.detail = "range"
        case .unsatisfiable:
            result.data = Data()
            result.status = 416
            result.headers.set("Content-Range", "bytes */\(whole.data.count)")
            result.headers.set("Content-Length", "0")
            status.detail = "range"
        }
        result.headers = served(result.headers, status)
        return result
    }

    /// What the request's `Range` asks of a stored response of `length` bytes.
    private func rangeAnswer(length: Int, status: Int, validators: HTTPHeaders) -> ByteRange.Answer {
        guard method == "GET", status == 200, let range = request.value(forHTTPHeaderField: "Range") else {
            return .whole
        }
        if let condition = request.value(forHTTPHeaderField: "If-Range")?.trimmingSpaces() {
            let named =
                condition.hasPrefix("\"")
                ? validators["ETag"].map { !$0.hasPrefix("W/") && $0.trimmingSpaces() == condition } ?? false
                : validators["Last-Modified"].map { $0.trimmingSpaces() == condition } ?? false
            guard named else { return .whole }
        }
        return ByteRange.answer(range, length: length)
    }

    /// `headers` with this cache's `Cache-Status` member appended.
    private func served(_ headers: HTTPHeaders, _ status: CacheStatus) -> HTTPHeaders {
        var headers = headers
        headers.append("Cache-Status", status.description)
        return headers
    }

    /// RFC 9110 §13.1: `If-None-Match` by weak comparison, else `If-Modified-Since`.
    private func callerValidatorsMatch(_ candidate: StoredCandidate) -> Bool {
        if let tags = request.value(forHTTPHeaderField: "If-None-Match") {
            return tags.split(separator: ",").contains { tag in
                let tag = tag.trimmingSpaces()
                return tag == "*" || Self.weakMatch(tag, candidate.etag)
            }
        }
        if let since = request.value(forHTTPHeaderField: "If-Modified-Since").flatMap({ HTTPDate.parse($0) }),
            let modified = (candidate.lastModified ?? candidate.response.headers["Date"]).flatMap({ HTTPDate.parse($0) })
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

    /// The stored response in place of a failure or a 5xx, where allowed (RFC 9111 §4.2.4, RFC
    /// 5861 §4): never when it says `must-revalidate` or `no-cache`; otherwise when the caller
    /// opted in (``FetchOptions/staleIfError``) or a `stale-if-error` in the response or the
    /// request covers how stale it is.
    private func staleAnswer(_ candidate: StoredCandidate?, status: CacheStatus) async throws -> FetchResult? {
        guard let candidate, !candidate.response.mustRevalidate else { return nil }
        let staleness = max(0, -candidate.remaining(at: Clock.nowMilliseconds()))
        let windows = [candidate.directives.staleIfError, directives.staleIfError].compactMap { $0 }
        guard options.staleIfError || windows.contains(where: { staleness <= $0.saturatingMilliseconds }),
            let body = try await read(candidate)
        else { return nil }
        var status = status
        status.detail = "stale-if-error"
        return answer(from: candidate, body: body, source: .offline, headOnly: method == "HEAD", status: status)
    }

    /// A response as the network delivered it, with this cache's `Cache-Status`.
    private func downloaded(_ response: TransportResponse, _ status: CacheStatus) -> FetchResult {
        FetchResult(
            data: response.body, status: response.status, headers: served(response.headers, status),
            url: response.url ?? url, source: .downloaded)
    }

    // MARK: Background revalidation

    /// Revalidates the URL's stored response in a task of its own, unless another fetch of the
    /// URL is under way in any process (its lock is held) or the version seen has been replaced
    /// by the time the lock is taken. ``SharedCache/waitForBackgroundRevalidations()`` waits for it.
    private func revalidateInBackground(primaryKey: String, seen version: StoredCandidate.Version) {
        var plain = request
        for name in ["Range", "If-Range", "If-None-Match", "If-Modified-Since", "Cache-Control", "Pragma"] {
            plain.setValue(nil, forHTTPHeaderField: name)
        }
        let exchange = HTTPExchange(cache: cache, request: plain, url: url, options: options, transport: transport)
        BackgroundRevalidations.start(for: cache) {
            do {
                let (lock, _) = try await FetchLock.acquire(
                    KeyHash(key: primaryKey), in: exchange.cache.directory, timeout: .zero,
                    describing: exchange.url.absoluteString)
                guard let lock else { return }  // another fetch of the URL is under way
                defer { lock.release() }
                let lookup = try await exchange.lookUp(primaryKey)
                guard let candidate = lookup.candidate, candidate.version == version else { return }
                _ = try await exchange.send(
                    primaryKey: primaryKey, validating: candidate, fallback: nil,
                    status: CacheStatus(forward: .stale), locked: true)
            } catch {
                // A failed background revalidation leaves the stale response as it was; the next
                // use past its window goes to the network in the foreground.
            }
        }
    }

    // MARK: Other methods

    private func passThrough(_ reason: CacheStatus.Forward) async throws -> FetchResult {
        let response = try await deliver(request)
        var status = CacheStatus(forward: reason)
        status.forwardStatus = response.status
        return downloaded(response, status)
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

/// The background revalidations this process started, per cache, for
/// ``SharedCache/waitForBackgroundRevalidations()``.
enum BackgroundRevalidations {
    private static let tasks = Locked<[ObjectIdentifier: [UInt64: Task<Void, Never>]]>([:])
    private static let next = Locked<UInt64>(0)

    static func start(for cache: CacheEngine, _ work: @escaping @Sendable () async -> Void) {
        let owner = ObjectIdentifier(cache)
        let number = next.withLock { value -> UInt64 in
            value += 1
            return value
        }
        tasks.withLock { tasks in
            tasks[owner, default: [:]][number] = Task.detached {
                await work()
                _ = BackgroundRevalidations.tasks.withLock { $0[owner]?.removeValue(forKey: number) }
            }
        }
    }

    static func wait(for cache: CacheEngine) async {
        while let pending = tasks.withLock({ $0[ObjectIdentifier(cache)]?.values.first }) {
            await pending.value
        }
    }
}
