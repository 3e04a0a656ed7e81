/// The `Cache-Control` directives a private cache acts on (RFC 9111 §5.2), from a request or
/// a response. Unknown directives are ignored; a malformed number counts as 0, the safe side.
struct CacheControl: Sendable, Equatable {
    var maxAge: Int64?
    var noCache = false
    var noStore = false
    var mustRevalidate = false
    /// Request only: `max-stale` without a value accepts any staleness (`Int64.max`).
    var maxStale: Int64?
    var minFresh: Int64?
    var onlyIfCached = false

    init() {}

    /// Parses every `Cache-Control` value of a message (`nil` when it has none).
    init(_ value: String?) {
        guard let value else { return }
        for directive in Self.split(value) {
            let parts = directive.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingSpaces().lowercased()
            let argument = parts.count > 1 ? parts[1].trimmingSpaces().trimmingQuotes() : nil
            let seconds = argument.map { Int64($0).map { max(0, $0) } ?? 0 }
            switch name {
            case "max-age": maxAge = maxAge.map { min($0, seconds ?? 0) } ?? seconds ?? 0
            case "no-cache": noCache = true
            case "no-store": noStore = true
            case "must-revalidate": mustRevalidate = true
            case "max-stale": maxStale = seconds ?? .max
            case "min-fresh": minFresh = seconds ?? 0
            case "only-if-cached": onlyIfCached = true
            default: break
            }
        }
    }

    /// Splits on commas outside quoted strings (`no-cache="a, b"` is one directive).
    private static func split(_ value: String) -> [Substring] {
        var directives: [Substring] = []
        var start = value.startIndex
        var quoted = false
        for index in value.indices {
            switch value[index] {
            case "\"": quoted.toggle()
            case "," where !quoted:
                directives.append(value[start..<index])
                start = value.index(after: index)
            default: break
            }
        }
        directives.append(value[start...])
        return directives.filter { !$0.trimmingSpaces().isEmpty }
    }
}

extension StringProtocol {
    func trimmingSpaces() -> String {
        var text = Substring(self)
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return String(text)
    }

    func trimmingQuotes() -> String {
        count >= 2 && hasPrefix("\"") && hasSuffix("\"") ? String(dropFirst().dropLast()) : String(self)
    }
}
