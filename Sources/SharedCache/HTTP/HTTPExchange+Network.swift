import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// Going to the network: the request (conditional when a stored response can be validated),
// what a 304 or a HEAD changes about the stored response, and storing what comes back.
extension HTTPExchange {
    /// Sends the request, conditional on `candidate` when there is one, and handles the answer.
    ///
    /// - Parameters:
    ///   - fallback: what may be served stale if the network fails (RFC 5861 §4).
    ///   - callersCandidate: the stored response the caller's own validators (sent as they are)
    ///     may select: a 304 to them updates it too (``updateFromCallersNotModified(_:_:_:_:locked:)``).
    ///   - locked: whether this fetch holds the URL's fetch lock; one without it (it gave up
    ///     waiting, or the answer it waited for was not one it could reuse) stores only if the
    ///     lock is free by then (``underFetchLock(locked:_:)``).
    func send(
        primaryKey: String, validating candidate: StoredCandidate?, fallback: StoredCandidate?,
        callersCandidate: StoredCandidate? = nil, status: CacheStatus, locked: Bool
    ) async throws -> FetchResult {
        var outgoing = request
        if let candidate, candidate.etag != nil || candidate.lastModified != nil {
            // The request has no validators of its own (else there is no candidate): they are
            // added in one assignment, a third of what two `setValue`s cost on Linux.
            var fields = request.allHTTPHeaderFields ?? [:]
            fields["If-None-Match"] = candidate.etag
            fields["If-Modified-Since"] = candidate.lastModified
            outgoing.allHTTPHeaderFields = fields
        }
        var status = status
        let requestTime = Clock.nowMilliseconds()
        // Under the URL's lock, a body to store goes to its entry's file as it arrives; but a
        // 5xx that a stale response may answer instead is never stored.
        let (cache, request, heuristicCap) = (cache, request, heuristicCap)
        let forwarded = status
        let announcement = observer.map { observer in
            DownloadReceiver.Announcement(observer: observer) { [self] head, plan, tooLarge in
                guard head.status != 304, head.status < 500 || fallback == nil else { return nil }
                var shown = forwarded
                shown.forwardStatus = head.status
                shown.record(plan.map { CacheEngine.StoredOutcome(lifetime: $0.response.lifetime, birth: $0.birth) })
                if tooLarge { shown.recordTooLarge() }
                return downloaded(head, shown)
            }
        }
        let receiver = DownloadReceiver(cache: cache, announcement: announcement) { [self] head, responseTime in
            guard locked, head.status < 500 || fallback == nil, answersTheURLAskedFor(head) else { return nil }
            return cache.storagePlan(
                primaryKey: primaryKey, request: request, response: head, requestTime: requestTime,
                responseTime: responseTime, heuristicCap: heuristicCap)
        }
        let received: DownloadReceiver.Received
        do {
            received = try await deliver(outgoing, to: receiver)
        } catch {
            // A response already shown is what this fetch answers, or it fails.
            if !receiver.announced, let stale = try await staleAnswer(fallback, status: status) { return stale }
            throw error
        }
        let responseTime = Clock.nowMilliseconds()
        let response: TransportResponse
        switch received {
        case .stored(let stored, let outcome, let pinned):
            status.forwardStatus = stored.status
            var result = countedDownload(stored, status, stored: outcome)
            result.storedBody = pinned
            return result
        case .whole(let whole):
            response = whole
        }
        status.forwardStatus = response.status
        if response.status >= 500,
            let stale = try await staleAnswer(fallback, status: status, errorStatus: response.status)
        {
            return stale
        }

        if response.status == 304, let candidate, candidate.etag != nil || candidate.lastModified != nil {
            // The safety rule: serve a 304 only with the pinned body, checked now, and only if
            // the 304 is about that body.
            // A 304 from where a redirect led is about that URL's response, not this one.
            let matches = answersTheURLAskedFor(response) && Self.confirms(response.headers, candidate)
            if matches, let body = try await read(candidate) {
                let (revalidation, _) = try await freshen(
                    candidate, body: body, by: response.headers, requestTime, responseTime, locked: locked)
                cache.count(.revalidations) { $0.revalidations += 1 }
                // Age and freshness as of the 304's birth (RFC 9111 §4.2.3: an `Age` it carried counts).
                let now = Clock.nowMilliseconds()
                var served = revalidation.served
                served.set("Age", "\(max(0, now - revalidation.birth) / 1000)")
                status.ttl = CacheEngine.StoredOutcome(lifetime: revalidation.lifetime, birth: revalidation.birth)
                    .ttl(at: now)
                var result = FetchResult(
                    data: method == "HEAD" ? Data() : body, status: candidate.response.status, headers: served, url: url,
                    source: .revalidated, cacheType: candidate.held != nil ? .memory : .disk)
                if method != "HEAD" { result.storedBody = candidate.largeBody }
                return sliced(result, of: candidate, validators: revalidation.headers, status: status)
            }
            cache.count(.unconditionalRetries) { $0.unconditionalRetries += 1 }
            return try await send(primaryKey: primaryKey, validating: nil, fallback: nil, status: status, locked: locked)
        }

        // RFC 9110 §15.4.5: a 304 answers a request with validators; to one without, it says
        // nothing about any body, and passed on it read as an empty answer.
        if response.status == 304, !Self.isConditional(outgoing) {
            if let stale = try await staleAnswer(fallback, status: status) { return stale }
            throw URLError(.badServerResponse)
        }
        guard answersTheURLAskedFor(response) else { return countedDownload(response, status, stored: nil) }
        if response.status == 304, let callersCandidate {
            status.stored = await updateFromCallersNotModified(
                callersCandidate, response, requestTime, responseTime, locked: locked)
        }
        // Larger than the size limit: served, not stored (a store that began published nothing).
        if receiver.exceededSizeLimit || Int64(response.body.count) > cache.storedBodyLimit {
            if receiver.exceededSizeLimit { status.recordTooLarge() }
            return countedDownload(response, status, stored: nil)
        }
        let store: @Sendable () throws -> CacheEngine.StoredOutcome? = {
            try cache.storeHTTPResponse(
                primaryKey: primaryKey, request: request, response: response, requestTime: requestTime,
                responseTime: responseTime, heuristicCap: heuristicCap)
        }
        let outcome = try await underFetchLock(locked: locked) { try await cache.offPool(store) } ?? nil
        return countedDownload(response, status, stored: outcome)
    }

    /// Runs `body` under the URL's fetch lock, which keeps its variant list and parts whole:
    /// the one this fetch holds (`locked`), or one free at once; `nil` without running it if
    /// another fetch holds the lock (for this answer, another variant or a range: what it
    /// stores is as new, and this one's answer is served all the same).
    func underFetchLock<Result>(locked: Bool, _ body: () async throws -> Result) async throws -> Result? {
        if locked { return try await body() }
        guard
            let (lock, _) = try? await cache.fetchLocks.acquire(
                KeyHash(key: primaryKey), timeout: .zero, describing: url.absoluteString),
            let lock
        else { return nil }
        defer { lock.release() }
        return try await body()
    }

    /// Whether `response` is about what this request's stored response is: it answers the URL
    /// asked for, or the caller named what it is (``FetchOptions/cacheKey``). URLSession follows
    /// redirects, and the answer it ends at is the target's, never to be stored as the URL's
    /// asked for (RFC 9111 §2: a response is stored under its request's target URI).
    private func answersTheURLAskedFor(_ response: TransportResponse) -> Bool {
        guard options.cacheKey == nil, let answered = response.url else { return true }
        return Self.sameTarget(answered, url)
    }

    /// Whether `request` carries a validator a 304 may answer (RFC 9110 §13.1.2, §13.1.3).
    static func isConditional(_ request: URLRequest) -> Bool {
        request.value(forHTTPHeaderField: "If-None-Match") != nil
            || request.value(forHTTPHeaderField: "If-Modified-Since") != nil
    }

    /// Whether two URLs name one target once written alike (``NormalURL``). URLSession on Darwin
    /// reports the URL it sent, normalised so, whatever the request said.
    static func sameTarget(_ one: URL, _ other: URL) -> Bool {
        // Spelled alike, as URLSession on Linux reports them: no parsing at all.
        one.absoluteString == other.absoluteString || NormalURL(one).string == NormalURL(other).string
    }

    /// Updates `stored` from a 304 to the caller's own validators when the 304 selects it
    /// (RFC 9111 §4.3.4: any 304 received updates the stored responses it selects); the caller
    /// gets its 304 either way. Best effort: that answer is in hand, and failing to update the
    /// copy (a full disk) must not turn it into an error. Returns whether it was updated.
    private func updateFromCallersNotModified(
        _ stored: StoredCandidate, _ response: TransportResponse, _ requestTime: Int64, _ responseTime: Int64,
        locked: Bool
    ) async -> Bool {
        guard Self.selects(response.headers, stored), let body = try? await read(stored) else { return false }
        let freshened = try? await freshen(
            stored, body: body, by: response.headers, requestTime, responseTime, locked: locked)
        return freshened?.updated ?? false
    }

    /// A response from the network as served, counted as a download; its `Cache-Status` says
    /// whether it was stored (`outcome`) and for how long it is fresh.
    private func countedDownload(
        _ response: TransportResponse, _ status: CacheStatus, stored outcome: CacheEngine.StoredOutcome?
    ) -> FetchResult {
        var status = status
        status.record(outcome)
        cache.count(.downloads) { $0.downloads += 1 }
        return downloaded(response, status)
    }

    /// Sends `outgoing`, its body handed to `receiver` as it arrives. The transport's failures
    /// are marked as the network's (see ``deliver(_:)``); a failure of the store the body went
    /// to is the cache's own.
    func deliver(_ outgoing: URLRequest, to receiver: DownloadReceiver) async throws -> DownloadReceiver.Received {
        do {
            _ = try await IdentityConnection.$bodyLimit.withValue(plainBodyLimit) {
                try await transport.send(outgoing, streamingTo: receiver.receive)
            }
        } catch is BodyPipe.StoreStopped {
            throw await receiver.storeFailure()
        } catch {
            await receiver.abandon(because: error)
            throw TransportFailure(underlying: error)
        }
        do {
            return try await receiver.finish()
        } catch let incomplete as DownloadReceiver.Incomplete {
            throw TransportFailure(underlying: incomplete)
        }
    }

    /// Applies a 304's or a HEAD's fields to the stored response (RFC 9111 §4.3.4): usually one
    /// journal append (see ``CacheEngine/Revalidation/changesOnlyFreshness``), made inline like
    /// any other (one `write` under a lock other processes hold as briefly: microseconds, fewer
    /// than a trip off the pool and back), unless the directory is durable (the append then
    /// waits for `fdatasync`); else a new version (when other fields changed), written off the
    /// pool when its body is large, under the URL's fetch lock (``underFetchLock(locked:_:)``),
    /// and only over that version or none. One the update forbids storing (`no-store`) is
    /// removed; one it may not change (§3.5) is left as it is.
    ///
    /// - Returns: what the update says, and whether the stored response now holds it.
    func freshen(
        _ candidate: StoredCandidate, body: Data, by update: HTTPHeaders, _ requestTime: Int64, _ responseTime: Int64,
        locked: Bool
    ) async throws -> (revalidation: CacheEngine.Revalidation, updated: Bool) {
        let cache = cache
        let revalidation = cache.revalidation(
            of: candidate, by: update, answeringAuthorization: request.isAuthorized, requestTime: requestTime,
            responseTime: responseTime, heuristicCap: heuristicCap)
        guard revalidation.mayUpdate else { return (revalidation, false) }
        guard revalidation.isStorable else {
            // RFC 9111 §5.2.2.5: the update forbids storing it; it is served this once, and goes.
            try await invalidate(candidate)
            return (revalidation, false)
        }
        // The record names the version it freshens, and applies only while that one is current.
        if revalidation.changesOnlyFreshness,
            try await cache.offPool(when: cache.isDurable, { try cache.journalFreshening(candidate, revalidation) })
        {
            return (revalidation, true)
        }
        let (hash, location, primaryKey) = (candidate.hash, candidate.entry.location, primaryKey)
        let stored = try await underFetchLock(locked: locked) { () async throws -> Bool in
            // Never over what another request stored since this one looked (a newer version, a
            // variant list, combined parts); where nothing is stored now, the update stands, but
            // for a variant the URL's list no longer names (a more recent response removed it).
            if let current = try cache.currentEntry(hash), current.location != location { return false }
            guard try cache.mayStoreVariant(candidate.key, of: primaryKey) else { return false }
            try await cache.offPool(when: candidate.entry.bodySize > CacheEngine.inlineReadLimit) {
                try cache.storeRevalidated(candidate, body: body, revalidation)
            }
            return true
        }
        return (revalidation, stored ?? false)
    }

    /// A HEAD the cache could not answer: sent as is. A `200` that describes the stored GET
    /// (``describes(_:_:)``) freshens it and updates its fields, as a 304 would; one that does
    /// not is about another representation, and the stored GET is stale (RFC 9111 §4.3.5):
    /// here, removed, since its validators could no longer revalidate it.
    func head(validating candidate: StoredCandidate?) async throws -> FetchResult {
        let requestTime = Clock.nowMilliseconds()
        let response = try await deliver(request)
        let responseTime = Clock.nowMilliseconds()
        var status = CacheStatus(forward: candidate == nil ? .uriMiss : .method)
        status.forwardStatus = response.status
        guard let candidate, response.status == 200 else { return downloaded(response, status) }
        if candidate.response.status == 200, Self.describes(response.headers, candidate),
            let body = try await read(candidate)
        {
            let (revalidation, updated) = try await freshen(
                candidate, body: body, by: response.headers, requestTime, responseTime, locked: false)
            status.stored = updated
            status.ttl = revalidation.lifetime == .max ? Int64(Int32.max) : revalidation.lifetime / 1000
        } else {
            try await invalidate(candidate)
        }
        return downloaded(response, status)
    }

    /// Removes the stored version `candidate` is, journaled as `invalidated` (off the pool). The
    /// removal names the version, so it needs no fetch lock: it never removes another.
    private func invalidate(_ candidate: StoredCandidate) async throws {
        let cache = cache
        let (hash, key, location) = (candidate.hash, Array(candidate.key.utf8), candidate.entry.location)
        _ = try await cache.offPool { try cache.remove(hash, key: key, reason: .invalidated, at: location) }
    }

    /// Whether a HEAD's `200` is about the stored GET response (RFC 9111 §4.3.5): each validator
    /// it carries (`ETag`, `Last-Modified`) matches the stored one, and so does its
    /// `Content-Length`, when it has one and the stored body is as sent (not decoded from a
    /// `Content-Encoding`, which changes its size).
    static func describes(_ headers: HTTPHeaders, _ candidate: StoredCandidate) -> Bool {
        if let etag = headers["ETag"], !identifies(etag, candidate.etag) { return false }
        if let lastModified = headers["Last-Modified"], !sameTime(lastModified, candidate.lastModified) { return false }
        guard candidate.bodyIsAsSent, let length = headers["Content-Length"] else { return true }
        return Int64(length.trimmingSpaces()) == Int64(candidate.entry.bodySize)
    }

    /// Whether a 304 to the cache's own conditional request is about the stored response (RFC
    /// 9111 §4.3.4's selection): its entity tag identifies the stored one, or, without one, its
    /// `Last-Modified` is the stored one's. A 304 that names another version updates nothing and
    /// serves nothing; one with no validator at all answers the validators the request sent.
    static func confirms(_ headers: HTTPHeaders, _ candidate: StoredCandidate) -> Bool {
        if let etag = headers["ETag"] { return identifies(etag, candidate.etag) }
        guard let lastModified = headers["Last-Modified"], let stored = candidate.lastModified else { return true }
        return sameTime(lastModified, stored)
    }

    /// Whether a response's validators name the stored one (RFC 9111 §4.3.4's selection): the
    /// entity tag identifying it, or, neither having one, the same `Last-Modified`.
    static func selects(_ headers: HTTPHeaders, _ candidate: StoredCandidate) -> Bool {
        if let etag = headers["ETag"] { return identifies(etag, candidate.etag) }
        guard candidate.etag == nil else { return false }
        return sameTime(headers["Last-Modified"], candidate.lastModified)
    }

    /// Whether two `Last-Modified` values name one time (RFC 9110 §8.8.2: an HTTP-date, in any
    /// of its three formats, §5.6.7); compared as text when either is not a date. Both absent
    /// is the same too.
    static func sameTime(_ one: String?, _ other: String?) -> Bool {
        guard let one, let other else { return one == nil && other == nil }
        if let first = HTTPDate.parse(one), let second = HTTPDate.parse(other) { return first == second }
        return one.trimmingSpaces() == other.trimmingSpaces()
    }
}

extension CacheStatus {
    /// Says that the response was stored, if it was, and its freshness left now (`ttl`); leaves
    /// what an update of a stored response by a 304 to the caller's validators said.
    fileprivate mutating func record(_ outcome: CacheEngine.StoredOutcome?) {
        guard let outcome else { return }
        stored = true
        ttl = outcome.ttl(at: Clock.nowMilliseconds())
    }

    /// Says that a response that would have been stored was not, its body being larger than
    /// the size limit (`detail=too-large`, with no `stored`), unless a detail is said already.
    fileprivate mutating func recordTooLarge() {
        stored = false
        ttl = nil
        if detail == nil { detail = Self.tooLarge }
    }
}
