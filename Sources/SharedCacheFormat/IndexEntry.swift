/// Where an entry's body lives, as the journal and the index record it: above the engine's
/// body store, an opaque value that also names the version (it is never reused, so two puts
/// of one key never share a location).
///
/// In format version 1 every body is a blob file of its own, `blobs/<xx>/<hash>.<blob-id>`,
/// and the location is that blob ID.
package struct BodyLocation: Hashable, Sendable, Comparable, CustomStringConvertible {
    package var blobID: UInt64

    package init(blobID: UInt64) {
        self.blobID = blobID
    }

    package static func < (lhs: BodyLocation, rhs: BodyLocation) -> Bool { lhs.blobID < rhs.blobID }

    package var description: String { "blob \(String(blobID, radix: 16))" }
}

/// What the index knows of one live entry, and what the manifest stores of it; the rest (key,
/// validators) travels with its body.
package struct IndexEntry: Equatable, Sendable {
    /// Where this version's body is.
    package var location: BodyLocation
    package var bodySize: UInt64
    package var storedAt: Int64
    /// Milliseconds since the Unix epoch; `Int64.max` for never.
    package var expiresAt: Int64
    package var lastAccess: Int64

    package init(location: BodyLocation, bodySize: UInt64, storedAt: Int64, expiresAt: Int64, lastAccess: Int64) {
        self.location = location
        self.bodySize = bodySize
        self.storedAt = storedAt
        self.expiresAt = expiresAt
        self.lastAccess = lastAccess
    }

    package func isExpired(at now: Int64) -> Bool { expiresAt <= now }
}
