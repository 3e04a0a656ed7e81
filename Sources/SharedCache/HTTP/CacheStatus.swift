/// What the cache did with one request, as an RFC 9211 `Cache-Status` list member naming
/// `SharedCache`: `SharedCache; hit; ttl=3417`, `SharedCache; fwd=stale; fwd-status=304; ttl=60`,
/// `SharedCache; fwd=uri-miss; fwd-status=200; stored; ttl=3600`, `SharedCache; fwd=uri-miss; collapsed;
/// ttl=60`.
///
/// Every ``FetchResult`` carries one, appended after any `Cache-Status` members the origin's
/// own caches added (the cache nearest the user comes last, §2).
struct CacheStatus: Sendable, Equatable, CustomStringConvertible {
    /// Why the request went forward (§2.2), or `nil` for a hit.
    enum Forward: String, Sendable {
        /// Nothing was stored for the URL.
        case uriMiss = "uri-miss"
        /// Something was stored for the URL, but no variant matching the request's `Vary` fields.
        case varyMiss = "vary-miss"
        /// Stored, but unusable (its body could not be pinned).
        case miss
        /// Parts of the response were stored, but not all the request's `Range` asks for.
        case partial
        /// The request asked for it: `no-cache`, `max-age`, `min-fresh`, `no-store`, or
        /// ``FetchOptions/forceRefresh``.
        case request
        /// The stored response was stale.
        case stale
        /// The method is one the cache does not answer (HEAD it cannot, POST, OPTIONS, …).
        case method
    }

    /// Why the request went forward; `nil` for a hit, or for an answer the cache made itself
    /// (``isGenerated``).
    var forward: Forward?
    /// The status of the response the origin sent back (§2.3), when forwarded.
    var forwardStatus: Int?
    /// Whether the response was stored (§2.5).
    var stored = false
    /// Whether this request waited for another process's or task's (§2.6): `true` when that
    /// one's response answered it, `false` when it could not, or the wait timed out (this one
    /// then went forward itself); only with ``forward``, which says why. `nil` when it waited
    /// for none.
    var collapsed: Bool?
    /// The cache made the answer itself, from nothing stored and without a request (the 504
    /// to `only-if-cached`): neither `hit` (§2.1: obtained from the cache) nor `fwd`.
    var isGenerated = false
    /// Seconds of freshness left (§2.4); negative when a stale response was served.
    var ttl: Int64?
    /// More about what happened (§2.8): `stale-while-revalidate`, `stale-if-error`, `offline`,
    /// `lock-timeout`, `range`, ``tooLarge``.
    var detail: String?

    /// The detail of a response that would have been stored but for its body, larger than the
    /// cache's size limit: it was served, not stored.
    static let tooLarge = "too-large"

    static let hit = CacheStatus()

    var description: String {
        var parts = ["SharedCache"]
        if let forward {
            parts.append("fwd=\(forward.rawValue)")
            if let forwardStatus { parts.append("fwd-status=\(forwardStatus)") }
        } else if !isGenerated {
            parts.append("hit")
        }
        if stored { parts.append("stored") }
        if let collapsed { parts.append(collapsed ? "collapsed" : "collapsed=?0") }
        if let ttl { parts.append("ttl=\(ttl)") }
        if let detail { parts.append("detail=\(detail)") }
        return parts.joined(separator: "; ")
    }
}
