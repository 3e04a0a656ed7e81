import SharedCacheEngine

/// Whom a cache's responses are for (RFC 9111 §1), which decides the rules only a shared cache
/// has: `private` (§5.2.2.7), `s-maxage` (§5.2.2.10), `proxy-revalidate` (§5.2.2.8), and a
/// request's `Authorization` (§3.5).
enum Audience: Sendable {
    /// One user: a directory only its owner uses (``Sharing/owner``).
    case `private`
    /// Several users: a directory a group shares (``Sharing/group``), whose members must never
    /// be served what the origin meant for one of them.
    case shared

    init(_ sharing: Sharing) {
        self = sharing == .group ? .shared : .private
    }
}
