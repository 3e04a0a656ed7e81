import Foundation
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

/// How a read moves an entry's expiry (Kingfisher's `ExpirationExtending`), for every process.
public enum ExpiryExtension: Sendable, Hashable {
    /// The expiry stays as stored.
    case none
    /// The entry expires its original lifetime (from its put to its expiry) after this read.
    case cacheTime
    /// The entry expires this long after this read.
    case after(Duration)
}

extension SharedCache {
    /// The body and metadata stored under `key`, as ``get(key:)`` reads them, and an expiry
    /// that restarts with this read: an entry read often lives on, one left alone expires.
    ///
    /// ```swift
    /// let cache = try SharedCache(directory: "/tmp/sharedcache-docs")
    /// try cache.put(key: "thumbnail/42", data: Data(), metadata: EntryMetadata(expiry: .after(.seconds(3600))))
    /// let hit = try cache.get(key: "thumbnail/42", extendingExpiry: .cacheTime)   // an hour from now again
    /// print(hit?.entry.expiresAt ?? .distantFuture)
    /// ```
    ///
    /// The new expiry is journaled (a `freshened` record, as a 304 writes), so every process
    /// serves and evicts by it. To keep reads cheap, it is journaled only when it moves the
    /// expiry by at least a tenth of the lifetime (and a second): a read that would move it
    /// less changes nothing. An entry that never expires, or was replaced or removed meanwhile,
    /// is left as it is.
    ///
    /// - Returns: the hit, its `entry.expiresAt` the expiry in effect after the read.
    public func get(key: String, extendingExpiry extension: ExpiryExtension) throws(SharedCacheError) -> CacheHit? {
        guard var hit = try get(key: key) else { return nil }
        let lifetime: Int64
        switch `extension` {
        case .none:
            return hit
        case .cacheTime:
            guard let expiresAt = hit.entry.expiresAt else { return hit }
            lifetime = Int64(((expiresAt.timeIntervalSince1970 - hit.entry.storedAt.timeIntervalSince1970) * 1000).rounded())
        case .after(let duration):
            lifetime = Int64(clamping: duration.nanoseconds / 1_000_000)
        }
        let hash = KeyHash(key: key)
        guard lifetime > 0, let current = try engine.currentEntry(hash), current.expiresAt != .max else { return hit }
        let expiresAt = engine.now() + lifetime
        guard expiresAt - current.expiresAt >= max(1000, lifetime / 10) else {
            hit.entry.expiresAt = Date(millisecondsSince1970: current.expiresAt)
            return hit
        }
        let engine = engine
        let extended = try engine.directory.perform("extending the expiry of \(key)") {
            try engine.commit { index -> ([JournalRecord], Bool) in
                guard index[hash]?.location == current.location else { return ([], false) }
                let record = FreshenedRecord(
                    hash: hash, location: current.location, storedAt: current.storedAt, expiresAt: expiresAt)
                return ([.freshened(record)], true)
            }
        }
        if extended { hit.entry.expiresAt = Date(millisecondsSince1970: expiresAt) }
        return hit
    }
}
