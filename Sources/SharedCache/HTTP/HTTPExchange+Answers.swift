import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// What the caller gets: the stored response as served, a 304 for its own validators, the part
// a Range asks for, a stale answer where the directives allow, or the network's response.
extension HTTPExchange {
    /// The candidate's body, checked; read off the cooperative pool when it is large.
    func read(_ candidate: StoredCandidate) async throws -> Data? {
        try await cache.offPool(when: candidate.entry.bodySize > CacheEngine.inlineReadLimit) { try candidate.body() }
    }

    /// The stored response served as is (with its `Age`), a 304 when the caller's own
    /// validators match it, or the part a `Range` asks for.
    func answer(
        from candidate: StoredCandidate, body: Data, source: FetchSource, headOnly: Bool, status: CacheStatus
    ) -> FetchResult {
        cache.count(.hits) { $0.fetchHits += 1 }
        let now = Clock.nowMilliseconds()
        var status = status
        if status.ttl == nil {
            let remaining = candidate.remaining(at: now)
            status.ttl = remaining == .max ? Int64(Int32.max) : remaining / 1000
        }
        let headers = candidate.servedFields(at: now)
        let cacheType: CacheType = candidate.held != nil ? .memory : .disk
        if source == .fresh || source == .stale, callerValidatorsMatch(candidate) {
            return FetchResult(
                data: Data(), status: 304, headers: served(Self.notModifiedFields(headers), status), url: url,
                source: source, cacheType: cacheType)
        }
        var result = FetchResult(
            data: headOnly ? Data() : body, status: candidate.response.status, headers: headers, url: url, source: source,
            cacheType: cacheType)
        if !headOnly { result.storedBody = candidate.largeBody }
        return sliced(result, of: candidate, validators: candidate.response.headers, status: status)
    }

    /// The stored response cut to the request's `Range` (RFC 9110 §14.2, §15.3.7): from a
    /// whole `200`, a `206` with `Content-Range` when the request asks for one part, or a `416`
    /// when no byte satisfies it; the whole response otherwise (no `Range`, several ranges, an
    /// `If-Range` that does not name it). Stored parts (RFC 9111 §3.3) are only ever chosen
    /// for a range they hold (``heldPart(of:)``), and serve just that range as a `206`.
    func sliced(
        _ stored: FetchResult, of candidate: StoredCandidate, validators: HTTPHeaders, status: CacheStatus
    ) -> FetchResult {
        var result = stored
        var status = status
        let held: PartialContent.Ranges
        let answer: ByteRange.Answer
        if let parts = candidate.parts {
            held = parts
            // Were the range not held (the lookup makes sure it is), the first range held,
            // labelled as such by its Content-Range, would still be a true 206.
            answer = .slice(heldPart(of: candidate) ?? parts.ranges[0])
        } else {
            held = PartialContent.Ranges(length: stored.data.count, ranges: [0..<stored.data.count])
            // A range counts the bytes of the representation as sent (RFC 9110 §14.1): a body the
            // transport decoded from a Content-Encoding has others, so it is served whole (§14.2:
            // a Range may be ignored).
            answer =
                stored.status == 200 && candidate.bodyIsAsSent
                ? rangeAnswer(length: held.length, validators: validators) : .whole
        }
        switch answer {
        case .whole:
            break
        case .slice(let bytes):
            result.storedBody = nil
            let start = stored.data.startIndex + (held.offset(of: bytes) ?? 0)
            result.data = stored.data.subdata(in: start..<start + bytes.count)
            result.status = 206
            let range = PartialContent.ContentRange(bytes: bytes, length: held.length)
            result.headers.set("Content-Range", range.description)
            result.headers.set("Content-Length", "\(bytes.count)")
            status.detail = "range"
        case .unsatisfiable:
            result.storedBody = nil
            result.data = Data()
            result.status = 416
            result.headers.set("Content-Range", "bytes */\(held.length)")
            result.headers.set("Content-Length", "0")
            status.detail = "range"
        }
        result.headers = served(result.headers, status)
        return result
    }

    /// What the request's `Range` asks of a stored representation of `length` bytes. Only a
    /// GET's counts, and an `If-Range` (§13.1.5) must name the stored response by a strong
    /// entity tag or its strong `Last-Modified` (``isStrongLastModified(_:_:)``), or the whole
    /// response is what it asks for.
    func rangeAnswer(length: Int, validators: HTTPHeaders) -> ByteRange.Answer {
        guard method == "GET", let range = request.value(forHTTPHeaderField: "Range") else { return .whole }
        if let condition = request.value(forHTTPHeaderField: "If-Range")?.trimmingSpaces() {
            let named =
                condition.hasPrefix("\"")
                ? PartialContent.strongMatch(condition, validators["ETag"])
                : Self.isStrongLastModified(condition, validators)
            guard named else { return .whole }
        }
        return ByteRange.answer(range, length: length)
    }

    /// Whether an `If-Range` date names the stored response (RFC 9110 §13.1.5): it is the
    /// stored `Last-Modified`, as a time (in any of the date formats, §5.6.7), and that is a
    /// strong validator: the stored `Date` at least a second after it (§8.8.2.2).
    static func isStrongLastModified(_ condition: String, _ validators: HTTPHeaders) -> Bool {
        guard let named = HTTPDate.parse(condition),
            let modified = validators["Last-Modified"].flatMap({ HTTPDate.parse($0) }),
            let date = validators["Date"].flatMap({ HTTPDate.parse($0) })
        else { return false }
        return named == modified && date - modified >= 1000
    }

    /// For stored parts, the bytes of the representation the request's `Range` asks for, when
    /// one of their ranges holds them all and any `If-Range` names them (RFC 9111 §3.3: parts
    /// answer only a request for a range wholly within them).
    func heldPart(of candidate: StoredCandidate) -> Range<Int>? {
        guard let parts = candidate.parts,
            case .slice(let bytes) = rangeAnswer(length: parts.length, validators: candidate.response.headers),
            parts.offset(of: bytes) != nil
        else { return nil }
        return bytes
    }

    /// The fields of a 304 made from the stored response: all but its representation metadata
    /// (RFC 9110 §15.4.5: a 304 SHOULD NOT describe a body it does not carry; the caller has
    /// one). Validators, `Date`, `Cache-Control`, `Expires`, `Vary` and `Content-Location` stay.
    static func notModifiedFields(_ headers: HTTPHeaders) -> HTTPHeaders {
        let representation = ["Content-Type", "Content-Encoding", "Content-Language", "Content-Length", "Content-Range"]
        return headers.filtered { name in !representation.contains { $0.caseInsensitiveEquals(name) } }
    }

    /// `headers` with this cache's `Cache-Status` member appended.
    func served(_ headers: HTTPHeaders, _ status: CacheStatus) -> HTTPHeaders {
        var headers = headers
        headers.append("Cache-Status", status.description)
        return headers
    }

    /// RFC 9110 §13.1: `If-None-Match` by weak comparison, else `If-Modified-Since`. Only a
    /// stored 2xx can be "not modified" (§13.2.1: preconditions are ignored when the response
    /// would be anything else), so a stored 404 answers as itself.
    func callerValidatorsMatch(_ candidate: StoredCandidate) -> Bool {
        guard (200..<300).contains(candidate.response.status) else { return false }
        if let tags = request.value(forHTTPHeaderField: "If-None-Match") {
            return Self.entityTags(in: tags).contains { tag in tag == "*" || Self.weakMatch(tag, candidate.etag) }
        }
        if let since = request.value(forHTTPHeaderField: "If-Modified-Since").flatMap({ HTTPDate.parse($0) }),
            let modified = (candidate.lastModified ?? candidate.response.headers["Date"]).flatMap({ HTTPDate.parse($0) })
        {
            return modified <= since
        }
        return false
    }

    /// The members of a list of entity tags (RFC 9110 §13.1.2: `If-None-Match`), trimmed: split
    /// on commas outside quotes, since an opaque tag may hold one (§8.8.3: `etagc` takes any
    /// visible character but `"`, and a backslash is just a character there).
    static func entityTags(in field: String) -> [String] {
        var tags: [String] = []
        var start = field.startIndex
        var quoted = false
        for index in field.indices {
            switch field[index] {
            case "\"": quoted.toggle()
            case "," where !quoted:
                tags.append(field[start..<index].trimmingSpaces())
                start = field.index(after: index)
            default: break
            }
        }
        tags.append(field[start...].trimmingSpaces())
        return tags.filter { !$0.isEmpty }
    }

    /// Whether a 304's or a HEAD's entity tag identifies the stored response for update (RFC 9111
    /// §4.3.4): a strong tag only the same strong tag; a weak one the stored tag, weakly.
    static func identifies(_ tag: String, _ stored: String?) -> Bool {
        let tag = tag.trimmingSpaces()
        return PartialContent.isStrong(tag) ? PartialContent.strongMatch(tag, stored) : weakMatch(tag, stored)
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
    /// request covers how stale it is, and the failure is one it names: no answer at all, or a
    /// 500, 502, 503 or 504 (`errorStatus`); a 501 or a 505 is the origin's answer.
    func staleAnswer(_ candidate: StoredCandidate?, status: CacheStatus, errorStatus: Int? = nil) async throws
        -> FetchResult?
    {
        guard let candidate, !candidate.response.mustRevalidate else { return nil }
        let staleness = max(0, -candidate.remaining(at: Clock.nowMilliseconds()))
        let windows = [candidate.directives.staleIfError, directives.staleIfError].compactMap { $0 }
        let isError = errorStatus.map { [500, 502, 503, 504].contains($0) } ?? true
        guard options.staleIfError || isError && windows.contains(where: { staleness <= $0.saturatingMilliseconds }),
            let body = try await read(candidate)
        else { return nil }
        var status = status
        status.detail = "stale-if-error"
        return answer(from: candidate, body: body, source: .offline, headOnly: method == "HEAD", status: status)
    }

    /// A response as the network delivered it, with this cache's `Cache-Status`, and a `Date`
    /// if it came without one (RFC 9110 §6.6.1: a recipient that forwards it must add one).
    func downloaded(_ response: TransportResponse, _ status: CacheStatus) -> FetchResult {
        let headers = CacheEngine.dated(response.headers, receivedAt: Clock.nowMilliseconds())
        return FetchResult(
            data: response.body, status: response.status, headers: served(headers, status),
            url: response.url ?? url, source: .downloaded)
    }
}
