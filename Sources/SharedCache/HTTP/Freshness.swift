/// RFC 9111 freshness for a private cache, in milliseconds.
enum Freshness {
    /// Statuses a response may be stored with (RFC 9110 §15.1, heuristically cacheable ones).
    static let storableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]
    /// Heuristic freshness (opt-in) is 10 % of the time since Last-Modified, at most a day.
    static let heuristicFraction: Int64 = 10
    static let heuristicCap: Int64 = 24 * 3600 * 1000

    /// How long a response stays fresh (§4.2.1): `max-age`, else `Expires` − `Date`, else the
    /// heuristic when allowed, else 0 (revalidate every time). `no-cache` means 0.
    static func lifetime(status: Int, headers: HTTPHeaders, responseTime: Int64, heuristic: Bool) -> Int64 {
        let directives = CacheControl(headers["Cache-Control"])
        if directives.noCache { return 0 }
        if let maxAge = directives.maxAge { return maxAge.multipliedReportingOverflow(by: 1000).overflow ? .max : maxAge * 1000 }
        let date = headers["Date"].flatMap(HTTPDate.parse) ?? responseTime
        if let expires = headers["Expires"] {
            // An invalid date, such as "0", means already expired (§5.3).
            guard let expiresAt = HTTPDate.parse(expires) else { return 0 }
            return max(0, expiresAt - date)
        }
        if heuristic, let lastModified = headers["Last-Modified"].flatMap(HTTPDate.parse) {
            return min(max(0, date - lastModified) / heuristicFraction, heuristicCap)
        }
        return 0
    }

    /// When the response was generated, by the origin's clock corrected for transit (§4.2.3):
    /// its age at any later time is that time minus this.
    static func birth(requestTime: Int64, responseTime: Int64, headers: HTTPHeaders) -> Int64 {
        let date = headers["Date"].flatMap(HTTPDate.parse) ?? responseTime
        let apparentAge = max(0, responseTime - date)
        let ageValue = headers["Age"].flatMap { Int64($0.trimmingSpaces()) }.map { max(0, $0) * 1000 } ?? 0
        let correctedAgeValue = ageValue + max(0, responseTime - requestTime)
        return responseTime - max(apparentAge, correctedAgeValue)
    }
}
