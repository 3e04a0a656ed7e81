import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// The HTTP client's blocking steps on the store: finding and pinning a stored response,
// storing one, freshening one after a 304, invalidating a URL. All synchronous; the exchange
// runs them off the cooperative pool.

/// A stored response that matches a request, with its body pinned: held open (or held in the
/// memory tier), so it can be served after a 304 whoever removes the entry meanwhile.
///
/// Immutable; reading the pinned file is `pread`, safe from any thread.
final class StoredCandidate: @unchecked Sendable {
    let key: String
    let hash: KeyHash
    let entry: IndexEntry
    let response: StoredResponse
    let etag: String?
    let lastModified: String?
    /// The birth the stored response was written with; the entry's `storedAt` moves past it
    /// when a 304 freshens this version (a `freshened` journal record).
    let writtenBirth: Int64
    /// For a stored partial response (status 206), the ranges its body holds; `nil` for a
    /// complete response, and for a 206 whose `Content-Range` fields do not describe its body.
    let parts: PartialContent.Ranges?
    /// The memory tier's copy of this version, when it held one.
    let held: CacheHit?
    private let pinned: (any PinnedBody)?
    private let cache: CacheEngine

    fileprivate init(
        key: String, hash: KeyHash, entry: IndexEntry, metadata: CacheEntry, response: StoredResponse,
        held: CacheHit?, pinned: (any PinnedBody)?, cache: CacheEngine
    ) {
        self.key = key
        self.hash = hash
        self.entry = entry
        self.response = response
        etag = metadata.etag
        lastModified = metadata.lastModified
        writtenBirth = Int64((metadata.storedAt.timeIntervalSince1970 * 1000).rounded())
        parts = response.status == 206 ? PartialContent.Ranges(response.headers, bodySize: Int(entry.bodySize)) : nil
        self.held = held
        self.pinned = pinned
        self.cache = cache
    }

    /// Which version this is: a replacement or a 304 in any process changes it.
    struct Version: Equatable {
        var location: BodyLocation
        var storedAt: Int64
    }

    var version: Version { Version(location: entry.location, storedAt: entry.storedAt) }

    /// The pinned body, checked; `nil` (and the version discarded) if it fails its checks.
    func body() throws -> Data? {
        if let held { return held.data }
        guard let pinned else { return nil }
        switch try pinned.read() {
        case .found(let hit):
            cache.remember(hit, for: hash, at: entry.location)
            return hit.data
        case .missing, .damaged:
            try cache.discard(hash, key: Array(key.utf8), at: entry.location)
            return nil
        }
    }

    /// The pinned body when it is large (and so served mapped), for copying it (to a file, or
    /// into a new version) without reading it into memory; `nil` for a small one.
    var largeBody: (any PinnedBody)? {
        entry.bodySize > BlobFileStore.mappingThreshold ? pinned : nil
    }

    /// Milliseconds since the response was generated.
    func age(at now: Int64) -> Int64 { max(0, now - entry.storedAt) }

    /// Whether the stored body is the representation's bytes as the origin sent them: it has no
    /// `Content-Encoding` (but `identity`), which a transport may have decoded (URLSession does).
    var bodyIsAsSent: Bool {
        (response.headers["Content-Encoding"]?.trimmingSpaces().lowercased() ?? "identity") == "identity"
    }

    /// The stored fields as served at `now`: with the `Age` of this version (§4.2.3), and, once
    /// a 304 freshened it, the `Date` of its birth then (§4.3.4: the 304's `Date` replaces the
    /// stored one; a `freshened` record keeps only the birth, which the `Date` and `Age` the 304
    /// came with decide, §4.2.3, so `Date` and `Age` agree).
    func servedFields(at now: Int64) -> HTTPHeaders {
        var headers = response.headers
        headers.set("Age", "\(age(at: now) / 1000)")
        if entry.storedAt != writtenBirth { headers.set("Date", HTTPDate.format(entry.storedAt)) }
        return headers
    }

    /// Milliseconds of freshness left at `now`; negative once stale (by how much).
    func remaining(at now: Int64) -> Int64 {
        response.lifetime == .max ? Int64.max : response.lifetime - age(at: now)
    }

    /// The response's own `Cache-Control`.
    var directives: CacheControl { CacheControl(response.headers["Cache-Control"]) }

    /// Whether it may be served without validation (RFC 9111 §4.2, with the request's own
    /// `max-age`, `min-fresh` and `max-stale`).
    func isUsable(at now: Int64, for request: CacheControl) -> Bool {
        let age = age(at: now)
        if let maxAge = request.maxAge, age > maxAge.saturatingMilliseconds { return false }
        let remaining = remaining(at: now)
        if let minFresh = request.minFresh, remaining < minFresh.saturatingMilliseconds { return false }
        if remaining > 0 { return true }
        if response.mustRevalidate { return false }
        guard let maxStale = request.maxStale else { return false }
        return maxStale == .max || -remaining <= maxStale.saturatingMilliseconds
    }
}

extension URLRequest {
    /// Whether the request carries `Authorization` (RFC 9111 §3.5).
    var isAuthorized: Bool { value(forHTTPHeaderField: "Authorization") != nil }
}

extension Int64 {
    /// Seconds to milliseconds, saturating.
    var saturatingMilliseconds: Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: 1000)
        return overflow ? .max : product
    }
}

extension CacheEngine {
    /// What a lookup found.
    struct StoredLookup: Sendable {
        var candidate: StoredCandidate?
        /// An entry was indexed but its blob could not be pinned: send no validators.
        var pinFailed = false
        /// Versions read whose access is due to be journaled (see `recordAccessIfDue`); the
        /// exchange journals them off the cooperative pool.
        var accessesDue: [(hash: KeyHash, entry: IndexEntry, at: Int64)] = []
        /// Something is stored for the URL, but no variant for this request (RFC 9211 `vary-miss`).
        var varyMiss = false
        /// Parts are stored for the URL, but not all the request's `Range` asks for (RFC 9211
        /// `partial`).
        var partsMiss = false
        /// The index's stamp before the lookup: while it stands, and the candidate has not
        /// expired, a lookup again finds the same.
        var indexStamp: UInt64 = 0
    }

    /// The key ``fetch(_:options:transport:)`` stores a URL's response under: the URL in its
    /// normal form, without its fragment (``NormalURL``), so that equivalent spellings share one
    /// entry (RFC 9110 §4.2.3), and ``get(key:)`` and ``remove(key:)`` reach it too.
    static func cacheKey(for url: URL) -> String {
        NormalURL(url).string
    }

    /// The key of the variant of `primaryKey` that `request` selects: a line per field named,
    /// `name: value`, or the name alone when the request lacks the field. A newline cannot occur
    /// in a URL, so no variant key is another URL's key, nor the URL's own.
    static func variantKey(_ primaryKey: String, names: [String], request: URLRequest) -> String {
        let values = varyValues(names: names, request: request)
        return ([primaryKey] + names.map { name in values[name].map { "\(name): \($0)" } ?? name })
            .joined(separator: "\n")
    }

    /// The request's values of the fields named (lowercase), normalised as RFC 9111 §4.1
    /// allows; a field the request lacks is left out, as it matches only a request that lacks
    /// it too, never one that sends it empty (§4.1). Several fields of a name are combined into
    /// one list (URLRequest does that), its members (``FieldList/normalisedMembers(_:)``)
    /// joined by ", ", and the
    /// values of ``caseInsensitiveValues`` lowercased. So `en,fr`, `EN , fr` and two fields `en`
    /// and `fr` select one variant; `fr, en` does not (order is a preference), nor `"a,b"` and
    /// `"a, b"` (a quoted string's commas and spaces are its own).
    static func varyValues(names: [String], request: URLRequest) -> HTTPHeaders {
        HTTPHeaders(
            names.compactMap { name in
                guard let value = request.value(forHTTPHeaderField: name) else { return nil }
                let list = FieldList.normalisedMembers(value).joined(separator: ", ")
                return (name, caseInsensitiveValues.contains(name) ? list.lowercased() : list)
            })
    }

    /// Request fields whose values mean the same in any case: language ranges (RFC 4647 §2),
    /// content codings (RFC 9110 §8.4.1) and charsets (§12.5.2 with RFC 2978).
    private static let caseInsensitiveValues: Set<String> = ["accept-language", "accept-encoding", "accept-charset"]

    /// The field names of a `Vary` value, lowercase and sorted; `["*"]` for a value that is not
    /// a list of field names (RFC 9110 §12.5.5: `#( "*" / field-name )`), which nothing then
    /// matches. (A name with a space in it named the key the URL's stored parts live under.)
    static func varyNames(_ value: String?) -> [String] {
        guard let value else { return [] }
        let names = Set(value.split(separator: ",").map { $0.trimmingSpaces().lowercased() }.filter { !$0.isEmpty })
        guard names.allSatisfy({ $0 == "*" || FieldList.isToken($0) }) else { return ["*"] }
        return names.sorted()
    }

    /// The stored response `request` selects, pinned; following the URL's variant list when its
    /// responses vary. A plain put under the URL counts as a 200 to revalidate on every use.
    func lookupStored(primaryKey: String, request: URLRequest) throws -> StoredLookup {
        var lookup = StoredLookup()
        lookup.indexStamp = try indexStamp()
        guard let primary = try pinnedVersion(primaryKey, pinFailed: &lookup.pinFailed, accessesDue: &lookup.accessesDue)
        else { return lookup }
        switch primary.stored {
        case .variants(let list):
            let key = Self.variantKey(primaryKey, names: list.names, request: request)
            guard let variant = try pinnedVersion(key, pinFailed: &lookup.pinFailed, accessesDue: &lookup.accessesDue),
                case .response(let response) = variant.stored,
                response.varyValues == Self.varyValues(names: list.names, request: request)
            else {
                lookup.varyMiss = true
                return lookup
            }
            lookup.candidate = variant.candidate(response)
        case .response(let response) where response.varyValues.count == 0:
            lookup.candidate = primary.candidate(response)
        case .response:
            lookup.varyMiss = true
        case nil:
            var headers = HTTPHeaders()
            if let etag = primary.metadata.etag { headers.append("ETag", etag) }
            if let lastModified = primary.metadata.lastModified { headers.append("Last-Modified", lastModified) }
            lookup.candidate = primary.candidate(
                StoredResponse(
                    status: 200, headers: headers, lifetime: 0, mustRevalidate: false, varyValues: [:],
                    audience: audience))
        }
        return lookup
    }

    /// An entry's current version, pinned, with what its attributes say.
    struct PinnedVersion {
        var stored: StoredHTTP?
        var metadata: CacheEntry
        var candidate: (StoredResponse) -> StoredCandidate
    }

    func pinnedVersion(
        _ key: String, pinFailed: inout Bool, accessesDue: inout [(hash: KeyHash, entry: IndexEntry, at: Int64)]
    ) throws -> PinnedVersion? {
        let hash = KeyHash(key: key)
        let now = Clock.nowMilliseconds()
        var held: CacheHit?
        guard let entry = try currentEntry(hash, memoryCopy: &held), !entry.isExpired(at: now) else { return nil }
        let metadata: CacheEntry
        let pinned: (any PinnedBody)?
        if let held {
            (metadata, pinned) = (held.entry, nil)
        } else {
            guard let (blob, header) = try bodies.pin(hash, at: entry.location, key: key, expectedSize: entry.bodySize)
            else {
                pinFailed = true
                return nil
            }
            (metadata, pinned) = (CacheEntry(header), blob)
        }
        let stored = StoredHTTP(metadata.attributes)
        // Stored by another audience's rules: not this cache's to reuse, not even for validators
        // (a 304 would serve its body).
        if case .response(let response) = stored, response.audience != audience { return nil }
        accessesDue.append((hash, entry, now))
        return PinnedVersion(stored: stored, metadata: metadata) { response in
            StoredCandidate(
                key: key, hash: hash, entry: entry, metadata: metadata, response: response, held: held, pinned: pinned,
                cache: self)
        }
    }

    /// How long the store keeps a response: while it is fresh, and for the directory's default
    /// expiry after it was last validated (a stale response is still worth revalidating).
    func retention(birth: Int64, lifetime: Int64, now: Int64) -> Int64 {
        let freshUntil = lifetime == .max ? Int64.max : birth.addingReportingOverflow(lifetime).partialValue
        let kept = defaultExpiry.map { Expiry.after($0).milliseconds(from: now) } ?? .max
        return max(freshUntil, kept)
    }

    /// Header fields never stored (RFC 9111 §3.1): those of one connection (RFC 9110 §7.6.1),
    /// and those of a proxy's authentication, which only a cache keyed on the proxy's identity
    /// may keep.
    private static let neverStored: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "proxy-authenticate", "proxy-authentication-info", "proxy-authorization",
    ]

    /// Whom this cache's responses are for (``Configuration/httpAudience``): several users if
    /// this process asked, if the directory's `config` says so, or if a group shares it; once
    /// several, for as long as it is open. Read it once for a decision made of several rules.
    var audience: HTTPAudience { httpAudience }

    /// The fields of `headers` a cache serving `audience` may keep (RFC 9111 §3.1): not the
    /// hop-by-hop ones nor a proxy's (``neverStored``), nor those `Connection` nominates, nor
    /// those a qualified `no-cache="…"` names (§5.2.2.4: they must not be reused without
    /// revalidation, so they are not kept at all; the rest of the response is), nor, in a
    /// shared cache, those a qualified `private="…"` names (§5.2.2.7).
    static func storableFields(_ headers: HTTPHeaders, for audience: HTTPAudience) -> HTTPHeaders {
        withoutUnreusable(endToEndFields(headers), for: audience)
    }

    /// The fields of `headers` that are not the connection's nor a proxy's (``neverStored``),
    /// nor nominated by `Connection`.
    private static func endToEndFields(_ headers: HTTPHeaders) -> HTTPHeaders {
        let nominated = (headers["Connection"] ?? "").split(separator: ",").map { $0.trimmingSpaces() }
        return headers.filtered { name in
            !neverStored.contains(name.lowercased()) && !nominated.contains { $0.caseInsensitiveEquals(name) }
        }
    }

    /// `headers` without the fields its `Cache-Control` keeps `audience` from reusing
    /// (``CacheControl/unreusableFields(for:)``), but for those `validated` carries.
    private static func withoutUnreusable(
        _ headers: HTTPHeaders, for audience: HTTPAudience, except validated: HTTPHeaders = [:]
    ) -> HTTPHeaders {
        let unreusable = CacheControl(headers["Cache-Control"]).unreusableFields(for: audience)
        guard !unreusable.isEmpty else { return headers }
        return headers.filtered { name in
            validated[name] != nil || !unreusable.contains { $0.caseInsensitiveEquals(name) }
        }
    }

    /// A response's fields with a `Date` of when it arrived if it came without one (RFC 9110
    /// §6.6.1: a recipient with a clock MUST add one to a response it caches). A 304 or a part
    /// gets one too before its fields update a stored response, so that the stored `Date`
    /// never outlives the answer that freshened it.
    static func dated(_ headers: HTTPHeaders, receivedAt responseTime: Int64) -> HTTPHeaders {
        guard headers["Date"] == nil else { return headers }
        var dated = headers
        dated.append("Date", HTTPDate.format(responseTime))
        return dated
    }

    /// What storing a response did: its lifetime and birth, for `Cache-Status`'s `ttl`, and
    /// where its body went.
    struct StoredOutcome: Sendable {
        var lifetime: Int64
        var birth: Int64
        /// The stored version, for reading a streamed body back; `nil` for a part.
        var version: StoredVersion?

        /// Seconds of freshness left at `now` (negative once stale).
        func ttl(at now: Int64) -> Int64 {
            lifetime == .max ? Int64(Int32.max) : (lifetime - max(0, now - birth)) / 1000
        }
    }

    /// A version just stored: its key and where its body is, held for serving when it was
    /// streamed in.
    struct StoredVersion: Sendable {
        var key: String
        var location: BodyLocation
        var bodySize: UInt64
        var pinned: (any PinnedBody)?
    }

    /// How a response is to be stored, decided from its status and fields alone, before its body
    /// arrives: so that a large body can go to its entry's file as it is received.
    struct StoragePlan: Sendable {
        var primaryKey: String
        /// The key the body is stored under: the URL's, or its variant's when it varies.
        var key: String
        /// The `Vary` field names, lowercase and sorted; empty when the response does not vary.
        var varyNames: [String]
        var response: StoredResponse
        var validators: HTTPHeaders
        var birth: Int64
    }

    /// A response body to store: whole in memory, or read a chunk at a time (from a
    /// ``BodyPipe`` as it arrives, or from a pinned body).
    enum ResponseBody {
        case data(Data)
        /// Read a chunk at a time, and stored only if `publishing`, asked once the body has
        /// ended, says so (``CacheEngine/store(key:metadata:storedAt:expiresAt:pinning:publishing:readingBody:)``).
        case reading((UnsafeMutableRawBufferPointer) throws -> StreamedChunk, publishing: () -> Bool = { true })
    }

    /// How to store a response to a GET if RFC 9111 allows it (``Freshness/isStorable(status:headers:for:)``)
    /// and it can ever be reused; `nil` if it is not to be stored. Not for a 206 (see `storePart`).
    ///
    /// - Parameter heuristicCap: the cap on a heuristic lifetime; `nil` for none.
    func storagePlan(
        primaryKey: String, request: URLRequest, response: TransportResponse, requestTime: Int64,
        responseTime: Int64, heuristicCap: Int64?
    ) -> StoragePlan? {
        // Read once: the process may turn shared meanwhile, and one set of rules decides all.
        let audience = audience
        guard response.status != 206,
            Freshness.isStorable(status: response.status, headers: response.headers, for: audience),
            Freshness.allowsStoring(
                answeringAuthorization: request.isAuthorized, headers: response.headers, for: audience)
        else { return nil }
        let names = Self.varyNames(response.headers["Vary"])
        guard !names.contains("*") else { return nil }
        let lifetime = Freshness.lifetime(
            status: response.status, headers: response.headers, responseTime: responseTime, heuristicCap: heuristicCap,
            for: audience)
        // Neither fresh for any time, nor revalidatable, nor given a lifetime or a stale window
        // by the origin: storing it could never save a byte. One the origin gave a lifetime,
        // even 0, is served stale where that is allowed (RFC 5861, `max-stale`), unless its
        // directives forbid that (§4.2.4).
        let directives = CacheControl(response.headers["Cache-Control"])
        let servableStale =
            !directives.forbidsStaleUse(for: audience)
            && (directives.maxAge != nil || response.headers["Expires"] != nil || directives.staleIfError != nil
                || directives.staleWhileRevalidate != nil)
        let revalidatable = response.headers["ETag"] != nil || response.headers["Last-Modified"] != nil
        guard lifetime > 0 || revalidatable || servableStale else { return nil }
        return StoragePlan(
            primaryKey: primaryKey,
            key: names.isEmpty ? primaryKey : Self.variantKey(primaryKey, names: names, request: request),
            varyNames: names,
            response: StoredResponse(
                status: response.status,
                headers: Self.storableFields(Self.dated(response.headers, receivedAt: responseTime), for: audience),
                lifetime: lifetime,
                mustRevalidate: false, varyValues: Self.varyValues(names: names, request: request), audience: audience),
            validators: response.headers,
            birth: Freshness.birth(requestTime: requestTime, responseTime: responseTime, headers: response.headers))
    }

    /// The largest response body stored: the size limit (a larger one would only be evicted,
    /// alone, by the next compaction, having made the directory too large meanwhile); `.max`
    /// when the cache has none.
    var storedBodyLimit: Int64 {
        let limit = configuration.sizeLimit
        return limit == 0 ? .max : Int64(clamping: limit)
    }

    /// Stores a response to a GET as
    /// ``storagePlan(primaryKey:request:response:requestTime:responseTime:heuristicCap:)`` says; a
    /// 206 as a part, as `storePart` says. Not a body larger than ``storedBodyLimit``.
    ///
    /// Runs under the URL's fetch lock, which is what keeps the variant list consistent.
    /// - Returns: what was stored, or `nil` if nothing was.
    @discardableResult
    func storeHTTPResponse(
        primaryKey: String, request: URLRequest, response: TransportResponse, requestTime: Int64,
        responseTime: Int64, heuristicCap: Int64?
    ) throws -> StoredOutcome? {
        guard Int64(response.body.count) <= storedBodyLimit else { return nil }
        if response.status == 206 {
            return try storePart(
                primaryKey: primaryKey, request: request, response: response, requestTime: requestTime,
                responseTime: responseTime, heuristicCap: heuristicCap)
        }
        let plan = storagePlan(
            primaryKey: primaryKey, request: request, response: response, requestTime: requestTime,
            responseTime: responseTime, heuristicCap: heuristicCap)
        guard let plan, case .stored(let outcome) = try store(plan, body: .data(response.body)) else { return nil }
        return outcome
    }

    /// Stores a response as `plan` says, its body first: once it is stored, whatever it makes
    /// unreachable goes (the URL's parts, variants of a URL that no longer varies or varies by
    /// other fields), and the URL's variant list names it. A body that fails to arrive stores
    /// nothing and removes nothing, and so does one that is not to be published: it comes back.
    func store(_ plan: StoragePlan, body: ResponseBody) throws -> Publication<StoredOutcome> {
        // Read before the response is stored: one that does not vary replaces the list.
        let existing = try variantList(plan.primaryKey)
        let version: StoredVersion
        switch try storeResponse(
            key: plan.key, body: body, plan.response, validators: plan.validators, birth: plan.birth)
        {
        case .stored(let stored): version = stored
        case .unpublished(let body): return .unpublished(body)
        }
        let outcome = StoredOutcome(lifetime: plan.response.lifetime, birth: plan.birth, version: version)
        // A complete response holds all a stored part could: the parts go (RFC 9111 §4: the
        // most recent response is the one to use).
        try removeParts(of: plan.primaryKey)
        var list = VariantList(names: plan.varyNames, keys: [])
        if let existing, existing.names == plan.varyNames {
            list = existing
        } else if let existing {
            // The URL no longer varies, or varies by other fields: the variants the old ones
            // selected are unreachable now, and must stay so should those fields come back, as
            // this response is more recent than any of them (RFC 9111 §4).
            for key in existing.keys where key != plan.key {
                try remove(KeyHash(key: key), key: Array(key.utf8), reason: .superseded, at: nil)
            }
        }
        if plan.varyNames.isEmpty { return .stored(outcome) }
        if !list.keys.contains(plan.key) { list.keys.append(plan.key) }
        if list != existing {
            var marker = EntryMetadata()
            marker.attributes = StoredHTTP.variants(list).encoded()
            let now = Clock.nowMilliseconds()
            try store(key: plan.primaryKey, data: Data(), metadata: marker, storedAt: now, expiresAt: .max)
        }
        return .stored(outcome)
    }

    /// Stores `response` and `body` under `key` as a version born at `birth`: the entry's
    /// validators are those of `validators`, its flag says whether its `Cache-Control` forbids
    /// reuse without revalidation (by the rules of `response.audience`, which decided to store
    /// it), and it is kept as ``retention(birth:lifetime:now:)`` says.
    @discardableResult
    func storeResponse(
        key: String, body: ResponseBody, _ response: StoredResponse, validators: HTTPHeaders, birth: Int64
    ) throws -> Publication<StoredVersion> {
        var response = response
        let directives = CacheControl(response.headers["Cache-Control"])
        response.mustRevalidate = directives.forbidsStaleUse(for: response.audience)
        var metadata = EntryMetadata(etag: validators["ETag"], lastModified: validators["Last-Modified"])
        metadata.attributes = StoredHTTP.response(response).encoded()
        let expiresAt = retention(birth: birth, lifetime: response.lifetime, now: Clock.nowMilliseconds())
        switch body {
        case .data(let data):
            let (entry, location) = try store(
                key: key, data: data, metadata: metadata, storedAt: birth, expiresAt: expiresAt)
            return .stored(StoredVersion(key: key, location: location, bodySize: entry.size))
        case .reading(let read, let publishing):
            return try store(
                key: key, metadata: metadata, storedAt: birth, expiresAt: expiresAt, pinning: true,
                publishing: publishing, readingBody: read
            ).map { StoredVersion(key: key, location: $0.location, bodySize: $0.entry.size, pinned: $0.pinned) }
        }
    }

    /// The body of a version just stored, pinned (when it was streamed in, since before it was
    /// journaled) and read back (a large one mapped, not read into memory); `nil` if another
    /// process removed it since.
    func pinnedBody(of version: StoredVersion) throws -> (any PinnedBody, Data)? {
        let hash = KeyHash(key: version.key)
        let read = try directory.perform("reading an entry") { () throws -> (any PinnedBody, BodyRead)? in
            let held =
                try version.pinned
                ?? bodies.pin(hash, at: version.location, key: version.key, expectedSize: version.bodySize)?.0
            guard let pinned = held else { return nil }
            return (pinned, try pinned.read())
        }
        switch read {
        case (let pinned, .found(let hit))?: return (pinned, hit.data)
        case nil, (_, .missing)?: return nil
        case (_, .damaged)?:
            try discard(hash, key: Array(version.key.utf8), at: version.location)
            return nil
        }
    }

    /// The variant list stored under a URL's key, if its responses vary.
    private func variantList(_ primaryKey: String) throws -> VariantList? {
        guard let entry = try entry(forKey: primaryKey), case .variants(let list) = StoredHTTP(entry.attributes) else {
            return nil
        }
        return list
    }

    /// What a 304, or a HEAD response (§4.3.5), changes about a stored response (RFC 9111 §4.3.4).
    struct Revalidation: Sendable {
        /// The stored headers updated with the 304's: what to store.
        var headers: HTTPHeaders
        /// What to serve now: ``headers`` with those of the 304's own fields that a qualified
        /// `no-cache` names. They may not be reused without revalidation (§5.2.2.4), so they are
        /// never stored; but this answer is the revalidation, and they came with it.
        var served: HTTPHeaders
        var lifetime: Int64
        var birth: Int64
        var expiresAt: Int64
        /// Freshness lasts as long as before, and no field changed but `Date` and `Age`: a
        /// `freshened` record, which moves the entry's birth, says it all. The `Date` served is
        /// then the birth's (see ``StoredCandidate/servedFields(at:)``): the 304's, but earlier
        /// by its `Age` when it had one, or our clock's when the origin's is ahead (§4.2.3),
        /// which keeps a revalidation to one journal record where a CDN or a skewed clock is in
        /// the way. A new `Expires`, even one `max-age` overrides, is a field to store (§3.2).
        var changesOnlyFreshness: Bool
        /// Whether the updated response may stay stored (``Freshness/isStorable(status:headers:for:)``):
        /// not once the update says `no-store` (§5.2.2.5), nor, for a shared cache, unqualified
        /// `private`, nor with nothing left that lets it be stored.
        var isStorable: Bool
        /// Whether the update may change the stored response at all: not, for a shared cache,
        /// an answer to a request with `Authorization` that does not say another user may have it
        /// (§3.5); it then answers that request only.
        var mayUpdate: Bool
    }

    /// What a 304's or a HEAD's fields change about `candidate` (RFC 9111 §4.3.4): its fields
    /// updated as ``updatedFields(_:by:for:)`` says, and its freshness counted from them.
    func revalidation(
        of candidate: StoredCandidate, by update: HTTPHeaders, answeringAuthorization authorized: Bool,
        requestTime: Int64, responseTime: Int64, heuristicCap: Int64?
    ) -> Revalidation {
        // By the rules that stored it: it is stored again as that kind's.
        let audience = candidate.response.audience
        let dated = Self.dated(update, receivedAt: responseTime)
        let combined = Self.merged(candidate.response.headers, dated)
        let merged = Self.withoutUnreusable(combined, for: audience)
        let lifetime = Freshness.lifetime(
            status: candidate.response.status, headers: merged, responseTime: responseTime, heuristicCap: heuristicCap,
            for: audience)
        let birth = Freshness.birth(requestTime: requestTime, responseTime: responseTime, headers: update)
        return Revalidation(
            headers: merged, served: Self.withoutUnreusable(combined, for: audience, except: dated), lifetime: lifetime,
            birth: birth,
            expiresAt: retention(birth: birth, lifetime: lifetime, now: Clock.nowMilliseconds()),
            changesOnlyFreshness: lifetime == candidate.response.lifetime
                && merged.equals(candidate.response.headers, ignoring: ["date", "age"]),
            isStorable: Freshness.isStorable(status: candidate.response.status, headers: merged, for: audience),
            mayUpdate: Freshness.allowsStoring(answeringAuthorization: authorized, headers: merged, for: audience)
        )
    }

    /// The stored fields updated from a newer response (RFC 9111 §3.2): the fields it carries
    /// replace the stored ones of their name, each kept apart (two `Set-Cookie` fields are never
    /// one, RFC 9110 §5.3) — validators included — but for `Content-Length`
    /// (a 304's, a HEAD's or a part's is not the stored body's), `Content-Range` (which this
    /// cache processes, and which says what a stored part holds) and the fields a cache never
    /// keeps (``storableFields(_:for:)``).
    static func updatedFields(_ stored: HTTPHeaders, by update: HTTPHeaders, for audience: HTTPAudience)
        -> HTTPHeaders
    {
        // The stored fields were storable, and so are the new ones; but a new `Cache-Control`
        // may name stored fields in its `no-cache="…"`, and the stored one new fields.
        withoutUnreusable(merged(stored, update), for: audience)
    }

    /// `stored` with each field `update` carries in place of the stored ones of its name, but
    /// for `Content-Length`, `Content-Range` and the connection's fields.
    private static func merged(_ stored: HTTPHeaders, _ update: HTTPHeaders) -> HTTPHeaders {
        var merged = stored
        var seen = ["content-length", "content-range"]
        for (name, _) in endToEndFields(update) where !seen.contains(where: { $0.caseInsensitiveEquals(name) }) {
            seen.append(name)
            merged.replace(name, with: update.values(name))
        }
        return merged
    }

    /// Journals a `freshened` record for the candidate, which moves its age and expiry for
    /// every process; `false` if the entry is no longer that version (evicted or replaced while
    /// the request was out).
    func journalFreshening(_ candidate: StoredCandidate, _ revalidation: Revalidation) throws -> Bool {
        try commit { index -> ([JournalRecord], Bool) in
            guard index[candidate.hash]?.location == candidate.entry.location else { return ([], false) }
            let record = FreshenedRecord(
                hash: candidate.hash, location: candidate.entry.location, storedAt: revalidation.birth,
                expiresAt: revalidation.expiresAt)
            return ([.freshened(record)], true)
        }
    }

    /// Whether `key` may be stored as it stands: the URL's own key or its parts', or a variant
    /// its list still names. A variant the list dropped was superseded by a more recent
    /// response (see ``store(_:body:)``) and must not come back.
    func mayStoreVariant(_ key: String, of primaryKey: String) throws -> Bool {
        if key == primaryKey || key == PartialContent.key(primaryKey) { return true }
        return try variantList(primaryKey)?.keys.contains(key) ?? false
    }

    /// Stores the revalidated body again as a new version with the merged headers: when the 304
    /// changed more than freshness, or the entry went away while the request was out.
    func storeRevalidated(_ candidate: StoredCandidate, body: Data, _ revalidation: Revalidation) throws {
        var response = candidate.response
        response.headers = revalidation.headers
        response.lifetime = revalidation.lifetime
        try storeResponse(
            key: candidate.key, body: candidate.largeBody.map { .reading($0.reader()) } ?? .data(body), response,
            validators: revalidation.headers, birth: revalidation.birth)
    }

    /// Removes what is stored for `url` (and each variant of it), journaled as `invalidated`.
    func invalidate(_ url: URL) throws {
        try invalidate(primaryKey: Self.cacheKey(for: url))
    }

    /// Removes what is stored under `primaryKey` (its `Vary` variants and its parts too).
    func invalidate(primaryKey: String) throws {
        for key in try variantList(primaryKey)?.keys ?? [] {
            try remove(KeyHash(key: key), key: Array(key.utf8), reason: .invalidated, at: nil)
        }
        try removeParts(of: primaryKey, reason: .invalidated)
        try remove(KeyHash(key: primaryKey), key: Array(primaryKey.utf8), reason: .invalidated, at: nil)
    }
}
