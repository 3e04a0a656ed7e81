/// The `Cache-Control` directives a cache acts on (RFC 9111 §5.2, RFC 5861, RFC 8246), from a
/// request or a response; those for shared caches only (`s-maxage`, `proxy-revalidate`,
/// `private="…"`) count where ``HTTPAudience/shared`` says. Unknown directives are ignored; a
/// malformed number counts as 0, the safe side.
struct CacheControl: Sendable, Equatable {
    /// `max-age`; two that disagree count as 0 (§4.2.1: the first, or stale — stale is safe).
    var maxAge: Int64?
    /// Unqualified `no-cache`: revalidate every use.
    var noCache = false
    /// The fields named by a qualified `no-cache="…"` (§5.2.2.4), lowercase: the rest of the
    /// response may be reused, these fields not without revalidation.
    var noCacheFields: [String] = []
    var noStore = false
    var mustRevalidate = false
    /// `public` (§5.2.2.9): storable, and heuristically cacheable, whatever the status.
    var isPublic = false
    /// `private`, qualified or not (§5.2.2.7): a private cache may store it all.
    var isPrivate = false
    /// The fields named by a qualified `private="…"` (§5.2.2.7), lowercase: a shared cache may
    /// store the rest of the response, never these; an unqualified `private` names none.
    var privateFields: [String] = []
    /// `s-maxage` (§5.2.2.10): a shared cache's `max-age`, which also keeps it from serving the
    /// response stale; two that disagree count as 0.
    var sharedMaxAge: Int64?
    /// `proxy-revalidate` (§5.2.2.8): `must-revalidate`, for shared caches only.
    var proxyRevalidate = false
    /// `must-understand` (§5.2.2.3): store only a status code the cache understands.
    var mustUnderstand = false
    /// `immutable` (RFC 8246): a fresh response is not revalidated on a reload.
    var immutable = false
    /// `stale-while-revalidate` (RFC 5861 §3), seconds.
    var staleWhileRevalidate: Int64?
    /// `stale-if-error` (RFC 5861 §4), seconds; in a request or a response.
    var staleIfError: Int64?
    /// Request only: `max-stale` without a value accepts any staleness (`Int64.max`).
    var maxStale: Int64?
    var minFresh: Int64?
    var onlyIfCached = false

    init() {}

    /// Parses every `Cache-Control` value of a message (`nil` when it has none).
    init(_ value: String?) {
        guard let value else { return }
        for directive in FieldList.members(value) {
            let parts = directive.trimmingSpaces().split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            // `token [ "=" ( token / quoted-string ) ]` (§5.2): no space around the "=", so
            // `max-age =60` or `max-age= 60` is no directive at all, and is ignored.
            guard !parts.contains(where: { $0.first == " " || $0.first == "\t" || $0.last == " " || $0.last == "\t" })
            else { continue }
            let name = parts[0].lowercased()
            let argument = parts.count > 1 ? Self.unquoted(parts[1]) : nil
            let seconds = argument.map(Self.deltaSeconds)
            switch name {
            case "max-age":
                let value = seconds ?? 0
                maxAge = maxAge.map { $0 == value ? value : 0 } ?? value
            case "s-maxage":
                let value = seconds ?? 0
                sharedMaxAge = sharedMaxAge.map { $0 == value ? value : 0 } ?? value
            case "no-cache":
                if let argument, !argument.isEmpty {
                    noCacheFields += Self.fieldNames(argument)
                } else {
                    noCache = true
                }
            case "no-store": noStore = true
            case "must-revalidate": mustRevalidate = true
            case "proxy-revalidate": proxyRevalidate = true
            case "public": isPublic = true
            case "private":
                isPrivate = true
                if let argument { privateFields += Self.fieldNames(argument) }
            case "must-understand": mustUnderstand = true
            case "immutable": immutable = true
            // A directive given twice counts as its most restrictive value (§4.2.1): never the
            // last one just because it came last.
            case "stale-while-revalidate": staleWhileRevalidate = Self.least(staleWhileRevalidate, seconds ?? 0)
            case "stale-if-error": staleIfError = Self.least(staleIfError, seconds ?? 0)
            case "max-stale": maxStale = Self.least(maxStale, seconds ?? .max)
            case "min-fresh": minFresh = max(minFresh ?? 0, seconds ?? 0)
            case "only-if-cached": onlyIfCached = true
            default: break
            }
        }
    }

    /// Whether a cache serving `audience` must revalidate the response once stale, never
    /// serving it stale (§4.2.4): `must-revalidate`, or `no-cache`; for a shared cache also
    /// `proxy-revalidate` and `s-maxage` (§5.2.2.8, §5.2.2.10).
    func forbidsStaleUse(for audience: HTTPAudience) -> Bool {
        mustRevalidate || noCache || audience == .shared && (proxyRevalidate || sharedMaxAge != nil)
    }

    /// The fields a cache serving `audience` may not keep: those `no-cache="…"` names, and for
    /// a shared cache those `private="…"` names.
    func unreusableFields(for audience: HTTPAudience) -> [String] {
        audience == .shared ? noCacheFields + privateFields : noCacheFields
    }

    /// The field names of a qualified directive's argument, lowercase.
    private static func fieldNames(_ argument: String) -> [String] {
        argument.split(separator: ",").map { $0.trimmingSpaces().lowercased() }.filter { !$0.isEmpty }
    }

    /// The smaller of a directive's value so far (if any) and a new one.
    private static func least(_ value: Int64?, _ new: Int64) -> Int64 {
        value.map { min($0, new) } ?? new
    }

    /// `delta-seconds = 1*DIGIT` (§1.2.2): too large for the cache saturates at 2³¹; anything
    /// else (a sign, a fraction, a letter) counts as 0.
    static func deltaSeconds(_ text: String) -> Int64 {
        guard FieldList.isDigits(text) else { return 0 }
        return Int64(text).map { min($0, 1 << 31) } ?? 1 << 31
    }

    /// A directive's argument: a token as it is, a quoted string without its quotes and with
    /// each `quoted-pair` (RFC 9110 §5.6.4) replaced by the character it escapes.
    private static func unquoted(_ argument: Substring) -> String {
        guard argument.count >= 2, argument.first == "\"", argument.last == "\"" else { return String(argument) }
        var text = ""
        var escaped = false
        for character in argument.dropFirst().dropLast() {
            if character == "\\" && !escaped {
                escaped = true
                continue
            }
            escaped = false
            text.append(character)
        }
        return text
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }
}
