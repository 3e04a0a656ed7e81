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

    /// Whether `other` is this version of its entry, perhaps moved by the compactor (a move
    /// keeps the store time and size) or freshened by a 304 (which keeps the location).
    package func isSameVersion(as other: IndexEntry) -> Bool {
        location == other.location || (storedAt == other.storedAt && bodySize == other.bodySize)
    }
}
