/// What the index knows of one live entry; the rest (key, validators) is in its blob header.
struct IndexEntry: Equatable, Sendable {
    /// Which immutable blob file holds this version: `blobs/<xx>/<hash>.<blobID>`.
    var blobID: UInt64
    var bodySize: UInt64
    var storedAt: Int64
    /// Milliseconds since the Unix epoch; `Int64.max` for never.
    var expiresAt: Int64
    var lastAccess: Int64

    func isExpired(at now: Int64) -> Bool { expiresAt <= now }
}

/// The live entries of a cache directory: the manifest with the journal replayed over it.
///
/// A value type: a checkpoint snapshots it by copying (copy-on-write) and encodes the copy
/// while appends carry on.
struct Index: Sendable {
    private(set) var entries: [KeyHash: IndexEntry] = [:]
    /// Sum of the body sizes of all entries.
    private(set) var totalBytes: UInt64 = 0

    var count: Int { entries.count }

    subscript(hash: KeyHash) -> IndexEntry? { entries[hash] }

    mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count)
    }

    /// Makes `entry` the current version for `hash`, replacing any other.
    mutating func insert(_ entry: IndexEntry, for hash: KeyHash) {
        if let old = entries.updateValue(entry, forKey: hash) { totalBytes -= old.bodySize }
        totalBytes += entry.bodySize
    }

    /// Removes the entry for `hash` if its current version is `blobID`.
    @discardableResult
    mutating func remove(_ hash: KeyHash, blobID: UInt64) -> IndexEntry? {
        guard let entry = entries[hash], entry.blobID == blobID else { return nil }
        entries[hash] = nil
        totalBytes -= entry.bodySize
        return entry
    }

    mutating func removeAll() {
        entries.removeAll()
        totalBytes = 0
    }

    /// Folds one journal record into the index.
    mutating func apply(_ record: JournalRecord) {
        switch record {
        case .stored(let stored):
            insert(
                IndexEntry(
                    blobID: stored.blobID, bodySize: stored.bodySize, storedAt: stored.storedAt,
                    expiresAt: stored.expiresAt, lastAccess: stored.storedAt),
                for: stored.hash)
        case .removed(let removed):
            remove(removed.hash, blobID: removed.blobID)
        case .cleared:
            removeAll()
        case .accessed(let accessed):
            guard var entry = entries[accessed.hash], entry.blobID == accessed.blobID else { return }
            entry.lastAccess = max(entry.lastAccess, accessed.accessedAt)
            entries[accessed.hash] = entry
        case .sealed, .unknown:
            break
        }
    }
}
