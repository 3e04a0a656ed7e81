import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// config: the limits every process of the directory shares.

extension Command {
    static let config = Command(
        name: "config", synopsis: "[NAME [VALUE]]",
        summary: """
            Show the limits every process shares, or one of them, or set one: size-limit (bytes, or \
            with K, M, G, T; Ki, Mi, Gi, Ti for powers of 1024; 0 for none), entry-limit (0 for none), \
            default-expiry (a duration such as 7d, or never; 0 is never too), pack-threshold (bytes up to \
            which a body is packed into a segment instead of a file of its own, at most 1Mi; 0 for none; \
            processes that open the cache afterwards use it), http-audience (private: fetch stores \
            responses for one user, as a browser does; shared: for several, as a proxy does, never keeping \
            what the origin meant for one; a directory shared with a group is always shared; each stored \
            response is reused only by a cache of the kind that stored it, so switching needs no clear). \
            A running sharedcached is told to re-read them.
            """
    ) { invocation in
        let values = try invocation.positional(0...2, "NAME")
        let cache = try invocation.cache()
        var limits: SharedCache.SharedLimits
        if values.count == 2 {
            let (name, text) = (values[0], values[1])
            try validate(name, text)
            if name == "http-audience", text == "private", cache.configuration.sharing == .group {
                throw UsageError(
                    "\(cache.path) is shared with a group, so fetch is a shared cache there whatever http-audience "
                        + "says; leave it shared")
            }
            limits = try cache.updateSharedLimits { limits in
                switch name {
                case "size-limit": limits.sizeLimit = parseSize(text) ?? .max
                case "entry-limit": limits.entryLimit = UInt64(text) ?? .max
                case "default-expiry":
                    // 0 is "none", as for the other limits (it used to be stored as 1 second).
                    let duration = text == "never" ? nil : DurationText.parse(text)
                    limits.defaultExpiry = duration == .zero ? nil : duration
                case "pack-threshold": limits.packThreshold = Int(parseSize(text) ?? 0)
                case "http-audience": limits.httpAudience = text == "shared" ? .shared : .private
                default: break
                }
            }
            if let pid = try cache.compactorProcessID(), pid > 0, kill(pid, SIGHUP) == 0 {
                invocation.terminal.warn("told sharedcached (process \(pid)) to re-read the limits")
            }
        } else {
            let configuration = cache.configuration
            limits = SharedCache.SharedLimits(
                sizeLimit: configuration.sizeLimit, entryLimit: configuration.entryLimit,
                defaultExpiry: configuration.defaultExpiry, packThreshold: configuration.packThreshold,
                httpAudience: configuration.httpAudience)
        }
        var settings: [(String, String)] = [
            ("size-limit", "\(limits.sizeLimit)"), ("entry-limit", "\(limits.entryLimit)"),
            ("default-expiry", limits.defaultExpiry.map { "\($0.components.seconds)" } ?? "never"),
            ("pack-threshold", "\(limits.packThreshold)"),
            ("http-audience", limits.httpAudience == .shared ? "shared" : "private"),
        ]
        if !values.isEmpty {
            guard let setting = settings.first(where: { $0.0 == values[0] }) else { throw unknownSetting(values[0]) }
            settings = [setting]
        }
        if invocation.json {
            invocation.terminal.printJSON(Dictionary(uniqueKeysWithValues: settings))
        } else if values.count == 1 {
            invocation.terminal.print(settings[0].1)
        } else if values.count == 2 {
            invocation.terminal.print("\(settings[0].0) = \(settings[0].1)")
        } else {
            for (name, value) in settings { invocation.terminal.print("\(name) = \(value)") }
        }
        return .success
    }

    /// Checks a setting before anything is written.
    private static func validate(_ name: String, _ text: String) throws {
        switch name {
        case "size-limit" where parseSize(text) == nil:
            throw UsageError("size-limit \(text) is not a size like 500M, 2Gi or 1073741824")
        case "entry-limit" where UInt64(text) == nil:
            throw UsageError("entry-limit \(text) is not a whole number")
        case "default-expiry" where text != "never" && DurationText.parse(text) == nil:
            throw UsageError("default-expiry \(text) is not a duration like 12h or 7d, or never")
        case "pack-threshold" where (parseSize(text) ?? .max) > UInt64(ConfigurationFile.maximumPackThreshold):
            throw UsageError("pack-threshold \(text) is not a size from 0 to 1Mi")
        case "http-audience" where text != "private" && text != "shared":
            throw UsageError("http-audience \(text) is neither private nor shared")
        case "size-limit", "entry-limit", "default-expiry", "pack-threshold", "http-audience":
            return
        default:
            throw unknownSetting(name)
        }
    }

    private static func unknownSetting(_ name: String) -> UsageError {
        UsageError(
            "unknown setting \(name); the settings are size-limit, entry-limit, default-expiry, pack-threshold "
                + "and http-audience")
    }

}

/// `500`, `500K`, `2M`, `1G`, `1T` (powers of 1000), `2Ki`, `1Gi` (powers of 1024).
func parseSize(_ text: String) -> UInt64? {
    let units: [(String, UInt64)] = [
        ("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40),
        ("K", 1000), ("M", 1_000_000), ("G", 1_000_000_000), ("T", 1_000_000_000_000),
    ]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        guard let number = UInt64(text.dropLast(suffix.count)) else { return nil }
        let (value, overflow) = number.multipliedReportingOverflow(by: scale)
        return overflow ? nil : value
    }
    return UInt64(text)
}
