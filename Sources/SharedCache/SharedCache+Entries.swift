import SharedCacheEngine

extension SharedCache {
    /// Every entry in the directory, least recently used first, without reading a body.
    ///
    /// Each entry's key, ETag and `Last-Modified` come from its body file's header (one small
    /// read per entry); its size, expiry and recency from the journal-fed index, so an entry
    /// another process freshened shows its new expiry. An entry removed by another process
    /// while the list is made is left out. The list is a snapshot: any entry may be gone by the
    /// time it is used.
    ///
    /// ```swift
    /// for entry in try cache.entries() where entry.etag == nil {
    ///     print(entry.key, entry.size, entry.expiresAt ?? .distantFuture)
    /// }
    /// ```
    ///
    /// - Complexity: one `pread` per entry; a million entries take seconds. Not for a hot path.
    public func entries() throws(SharedCacheError) -> [CacheEntry] {
        try engine.listEntries().compactMap { listed in
            guard let hash = KeyHash(hex: listed.hash) else { return nil }
            return CacheEntry(
                key: listed.key, hash: hash, size: listed.size, etag: listed.etag, lastModified: listed.lastModified,
                storedAt: listed.storedAt, expiresAt: listed.expiresAt)
        }
    }
}
