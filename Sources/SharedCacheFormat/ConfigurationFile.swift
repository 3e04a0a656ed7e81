/// The `config` file: the limits every process using a directory agrees on.
///
/// ```
/// config = *line
/// line   = [name *SP "=" *SP value] [*SP "#" comment] LF
/// ```
/// Known names: `size-limit` (bytes of bodies, 0 for none), `entry-limit` (entries, 0 for
/// none), `default-expiry` (seconds, or `never`), `pack-threshold` (bytes; bodies up to it are
/// packed, 0 for none), `http-audience` (`private` or `shared`: whom fetched responses are
/// stored for; a file without it is `private`, whatever the defaults, as every directory made
/// before it was). Unknown names are ignored.
package struct ConfigurationFile: Equatable, Sendable {
    package static let fileName = "config"

    package var sizeLimit: UInt64
    package var defaultExpirySeconds: Int64?
    package var entryLimit: UInt64 = 0
    package var packThreshold: Int = ConfigurationFile.defaultPackThreshold
    /// Whether fetched responses are stored for several users (a shared cache, RFC 9111 §1).
    package var storesForSeveralUsers = false

    /// What a directory whose `config` does not name a threshold (one made by version 1) uses.
    ///
    /// Measured (`Tools/bench/run`): a packed 100 KB put is one `pwrite` (74 µs) where a blob
    /// file is a create, a write and a rename (431 µs), and its get one `preadv` (23 µs, 29 µs
    /// as a file). Packing costs only at compaction, which copies live bytes whatever their
    /// records' size; 128 KiB keeps a record small next to a 64 MiB segment.
    package static let defaultPackThreshold = 128 * 1024
    /// The largest threshold: a packed record must stay small next to a 64 MiB segment.
    package static let maximumPackThreshold = 1 << 20

    package init(
        sizeLimit: UInt64, defaultExpirySeconds: Int64? = nil, entryLimit: UInt64 = 0,
        packThreshold: Int = ConfigurationFile.defaultPackThreshold, storesForSeveralUsers: Bool = false
    ) {
        self.storesForSeveralUsers = storesForSeveralUsers
        self.sizeLimit = sizeLimit
        self.defaultExpirySeconds = defaultExpirySeconds
        self.entryLimit = entryLimit
        self.packThreshold = min(max(packThreshold, 0), Self.maximumPackThreshold)
    }

    package func encoded() -> [UInt8] {
        let expiry = defaultExpirySeconds.map(String.init) ?? "never"
        return Array(
            """
            # SharedCache limits shared by every process using this directory; see sharedcache(5).
            size-limit = \(sizeLimit)
            entry-limit = \(entryLimit)
            default-expiry = \(expiry)
            pack-threshold = \(packThreshold)
            http-audience = \(storesForSeveralUsers ? "shared" : "private")

            """.utf8)
    }

    /// Parses the file; a missing name keeps the value from `defaults`, but for `http-audience`:
    /// a directory stored for several users only if it says so.
    package static func decode(_ bytes: [UInt8], defaults: ConfigurationFile) throws(FormatError) -> ConfigurationFile {
        var result = defaults
        result.storesForSeveralUsers = false
        let text = String(decoding: bytes, as: UTF8.self)
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let trimmed = line.trimmingSpaces
            if trimmed.isEmpty { continue }
            let parts = trimmed.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { throw .invalidField("line \(number + 1): expected \"name = value\"") }
            let name = parts[0].trimmingSpaces
            let value = parts[1].trimmingSpaces
            switch name {
            case "size-limit":
                guard let limit = UInt64(value) else { throw .invalidField("line \(number + 1): size-limit \(value)") }
                result.sizeLimit = limit
            case "entry-limit":
                guard let limit = UInt64(value) else { throw .invalidField("line \(number + 1): entry-limit \(value)") }
                result.entryLimit = limit
            case "default-expiry":
                if value == "never" {
                    result.defaultExpirySeconds = nil
                } else if let seconds = Int64(value), seconds > 0 {
                    result.defaultExpirySeconds = seconds
                } else {
                    throw .invalidField("line \(number + 1): default-expiry \(value)")
                }
            case "pack-threshold":
                guard let threshold = Int(value), threshold >= 0, threshold <= maximumPackThreshold else {
                    throw .invalidField("line \(number + 1): pack-threshold \(value) (0 to \(maximumPackThreshold))")
                }
                result.packThreshold = threshold
            case "http-audience":
                guard value == "private" || value == "shared" else {
                    throw .invalidField("line \(number + 1): http-audience \(value) (private or shared)")
                }
                result.storesForSeveralUsers = value == "shared"
            default:
                continue
            }
        }
        return result
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" || first == "\r" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" || last == "\r" { result.removeLast() }
        return result
    }
}
