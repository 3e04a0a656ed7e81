/// RFC 9111 storing and freshness, in milliseconds.
enum Freshness {
    /// Status codes heuristically cacheable by default (RFC 9110 §15.1): only these may be
    /// given a heuristic lifetime, unless the response says `public`.
    static let heuristicStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]
    /// Status codes whose caching rules this cache implements, for `must-understand` (§5.2.2.3);
    /// 206 among them, stored as a part (``PartialContent``).
    static let understoodStatuses: Set<Int> = heuristicStatuses.union([302, 303, 307, 400, 403, 500, 502, 503, 504])
    /// Heuristic freshness is 10 % of the time since Last-Modified (§4.2.2), capped.
    static let heuristicFraction: Int64 = 10
    /// The default cap on a heuristic lifetime: a day.
    static let heuristicCap: Int64 = 24 * 3600 * 1000

    /// Whether RFC 9111 §3 lets a cache serving `audience` store a response: a final status
    /// (not 304), no `no-store` (unless `must-understand` with an understood status), and one
    /// of: `public`, `max-age`, `Expires`, a heuristically cacheable status, and for a private
    /// cache `private`, for a shared one `s-maxage`. A shared cache never stores an unqualified
    /// `private` (§5.2.2.7). A 206 is stored only as a part, never as a complete response
    /// (§3.3, ``PartialContent/Part``). The request's part is
    /// ``allowsStoring(answeringAuthorization:headers:for:)``.
    static func isStorable(status: Int, headers: HTTPHeaders, for audience: HTTPAudience) -> Bool {
        guard (200..<600).contains(status), status != 304 else { return false }
        let directives = CacheControl(headers["Cache-Control"])
        if directives.mustUnderstand {
            guard understoodStatuses.contains(status) else { return false }
        } else if directives.noStore {
            return false
        }
        switch audience {
        case .private:
            if directives.isPrivate { return true }
        case .shared:
            if directives.isPrivate && directives.privateFields.isEmpty { return false }
            if directives.sharedMaxAge != nil { return true }
        }
        return directives.isPublic || directives.maxAge != nil || headers["Expires"] != nil
            || heuristicStatuses.contains(status)
    }

    /// Whether a response may be stored for `audience` as far as its request goes (§3.5): a
    /// shared cache keeps the answer to a request with `Authorization` only if the response says
    /// another user may have it (`public`, `must-revalidate`, `s-maxage`). So it is with a 304
    /// or a HEAD's 200 that would update a stored response.
    static func allowsStoring(
        answeringAuthorization authorized: Bool, headers: HTTPHeaders, for audience: HTTPAudience
    ) -> Bool {
        guard audience == .shared, authorized else { return true }
        let directives = CacheControl(headers["Cache-Control"])
        return directives.isPublic || directives.mustRevalidate || directives.sharedMaxAge != nil
    }

    /// How long a response stays fresh for `audience` (§4.2.1): for a shared cache `s-maxage`
    /// first; `max-age`, else `Expires` − `Date`, else the heuristic (§4.2.2) when
    /// `heuristicCap` is given and the status or `public` allows it, else 0 (revalidate every
    /// time). `no-cache` means 0.
    ///
    /// - Parameter heuristicCap: the most a heuristic lifetime may be, in milliseconds; `nil`
    ///   turns the heuristic off.
    static func lifetime(
        status: Int, headers: HTTPHeaders, responseTime: Int64, heuristicCap: Int64?, for audience: HTTPAudience
    ) -> Int64 {
        let directives = CacheControl(headers["Cache-Control"])
        if directives.noCache { return 0 }
        if audience == .shared, let sharedMaxAge = directives.sharedMaxAge {
            return sharedMaxAge.saturatingMilliseconds
        }
        if let maxAge = directives.maxAge { return maxAge.saturatingMilliseconds }
        let date = headers["Date"].flatMap { HTTPDate.parse($0) } ?? responseTime
        if let expires = headers["Expires"] {
            // An invalid date, such as "0", means already expired (§5.3); so do two Expires
            // fields, which join into no date at all (§4.2.1: the first, or stale).
            guard let expiresAt = HTTPDate.parse(expires) else { return 0 }
            return max(0, expiresAt - date)
        }
        if let heuristicCap, heuristicStatuses.contains(status) || directives.isPublic,
            let lastModified = headers["Last-Modified"].flatMap({ HTTPDate.parse($0) })
        {
            return min(max(0, date - lastModified) / heuristicFraction, heuristicCap)
        }
        return 0
    }

    /// The `Age` value in seconds (§5.1): the first member of a list, `nil` if that is not
    /// `delta-seconds` (an invalid Age is ignored).
    static func ageValue(_ value: String?) -> Int64? {
        guard let first = value?.split(separator: ",", omittingEmptySubsequences: false).first else { return nil }
        let text = first.trimmingSpaces()
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        return CacheControl.deltaSeconds(text)
    }

    /// When the response was generated, by the origin's clock corrected for transit (§4.2.3):
    /// its age at any later time is that time minus this.
    static func birth(requestTime: Int64, responseTime: Int64, headers: HTTPHeaders) -> Int64 {
        let date = headers["Date"].flatMap { HTTPDate.parse($0) } ?? responseTime
        let apparentAge = max(0, responseTime - date)
        let ageValue = (ageValue(headers["Age"]) ?? 0) * 1000
        let correctedAgeValue = ageValue + max(0, responseTime - requestTime)
        return responseTime - max(apparentAge, correctedAgeValue)
    }
}
