public import Foundation
package import SharedCacheEngine

/// One on-disk cache directory, shared safely by every process that opens it.
///
/// Entries are immutable bodies named by the SHA-256 of their key; an append-only journal
/// records every store and removal, and a manifest checkpoints it. Each call first picks up what
/// other processes appended (one atomic load of a shared counter when nothing changed), so
/// every process sees every other's puts and removals.
///
/// ```swift
/// let cache = try SharedCache(directory: "/var/cache/myapp")
/// try cache.put(key: url.absoluteString, data: body, metadata: EntryMetadata(etag: etag))
/// if let hit = try cache.get(key: url.absoluteString) { use(hit.data, hit.entry.etag) }
/// ```
///
/// Thread-safe; the methods block on file I/O for microseconds (plus a flush per put with
/// ``Durability/synchronized``), so call them from your own threads or queues rather than from
/// latency-sensitive async code.
public final class SharedCache: Sendable {
    /// The storage engine this is the face of: the HTTP layer, the compactor and the tools
    /// work with it directly.
    package let engine: CacheEngine

    /// The directory path the cache was opened with.
    public var path: String { engine.path }
    /// The configuration in effect: shared limits from the directory, the rest as given.
    public var configuration: Configuration { engine.configuration }
    /// Things about the directory a person should know, found when it was opened: a network
    /// filesystem, or a manifest this process had to rebuild (small entries older than the
    /// journal kept are then gone). The tools print them; an app may log them.
    public var warnings: [String] { engine.warnings }

    /// Opens the cache directory at `path`, creating it (and missing parents) if needed.
    ///
    /// - Parameters:
    ///   - path: the cache directory. Created with mode 0700 if missing (02770 with
    ///     ``Sharing/group``).
    ///   - configuration: the shared limits apply only when this call creates the directory,
    ///     but for ``Configuration/httpAudience``: asking for ``HTTPAudience/shared`` makes this
    ///     process a shared cache in any directory.
    /// - Throws: ``SharedCacheError`` when the path is not a directory, holds something other
    ///   than a cache, was written by a newer major version, or cannot be written.
    public init(directory path: String, configuration: Configuration = Configuration()) throws(SharedCacheError) {
        engine = try CacheEngine(directory: path, configuration: configuration)
    }

    /// Opens the cache directory at a file URL.
    public convenience init(directory url: URL, configuration: Configuration = Configuration()) throws(SharedCacheError)
    {
        try self.init(directory: url.path, configuration: configuration)
    }

    // MARK: - Reading

    /// The body and metadata stored under `key`, or `nil` for a miss.
    ///
    /// Every byte returned was checked against its checksums, and belongs to exactly one put
    /// of this key. An expired entry, or one whose body another process removed a moment ago,
    /// is a miss. A body that fails its checks is discarded (journaled as `corrupt`) and is a miss.
    public func get(key: String) throws(SharedCacheError) -> CacheHit? {
        try engine.get(key: key)
    }

    /// Metadata of the entry stored under `key`, without reading the body.
    public func entry(forKey key: String) throws(SharedCacheError) -> CacheEntry? {
        try engine.entry(forKey: key)
    }

    /// Whether an unexpired entry is indexed under `key`. Cheap (no file is opened), so a
    /// following ``get(key:)`` can still miss if another process removes the entry meanwhile.
    public func contains(key: String) throws(SharedCacheError) -> Bool {
        try engine.contains(key: key)
    }

    // MARK: - Writing

    /// Stores `data` under `key`, replacing any earlier entry for the key.
    ///
    /// The body is written whole before it is journaled, so no process ever reads a partial
    /// body. The replaced entry is removed as `superseded` (every process learns it from this
    /// put's journal record) and its body reclaimed; readers that already opened it keep
    /// reading the old body.
    ///
    /// - Returns: the stored entry's metadata.
    /// - Throws: `.invalidArgument` for a key over 64 KiB or a validator over 65,535 bytes;
    ///   `.noSpace` on a full disk (nothing is stored, nothing else is lost).
    @discardableResult
    public func put(key: String, data: Data, metadata: EntryMetadata = EntryMetadata()) throws(SharedCacheError)
        -> CacheEntry
    {
        let now = engine.now()
        let expiry = metadata.expiry ?? engine.defaultExpiry.map { .after($0) } ?? .never
        return try engine.store(
            key: key, data: data, metadata: metadata, storedAt: now, expiresAt: expiry.milliseconds(from: now)
        ).entry
    }

    /// Removes the entry stored under `key`.
    ///
    /// - Returns: whether there was one.
    @discardableResult
    public func remove(key: String) throws(SharedCacheError) -> Bool {
        try engine.remove(KeyHash(key: key), key: Array(key.utf8), reason: .manual, at: nil)
    }

    /// Removes the entry whose key hashes to `hash` (as `sharedcache rm --hash` does).
    ///
    /// The removal is journaled before the body is reclaimed, so every process that follows
    /// the journal learns of it.
    @discardableResult
    public func remove(hash: KeyHash) throws(SharedCacheError) -> Bool {
        try engine.remove(hash, key: nil, reason: .manual, at: nil)
    }

    /// Removes every entry. Puts that other processes complete after the clear are kept.
    public func clear() throws(SharedCacheError) {
        try engine.clear()
    }

    // MARK: - Streaming, for the tools

    /// Stores everything `input` reads under `key`, a megabyte at a time (`sharedcache put`).
    @discardableResult
    package func put(key: String, from input: BodyInput, metadata: EntryMetadata = EntryMetadata())
        throws(SharedCacheError) -> CacheEntry
    {
        try engine.put(key: key, from: input, metadata: metadata)
    }

    /// Writes the body stored under `key` to `output`, a megabyte at a time (`sharedcache get`).
    package func get(key: String, to output: BodyOutput) throws(SharedCacheError) -> CacheEntry? {
        try engine.get(key: key, to: output)
    }

    // MARK: - The directory

    /// The directory's size and journal position, and this process's counters.
    public func statistics() throws(SharedCacheError) -> Statistics {
        try engine.statistics()
    }

    /// Re-reads the directory's shared limits (`config`), as `sharedcached` does on SIGHUP. A
    /// process that is a shared cache (``Configuration/httpAudience``) stays one.
    public func reloadConfiguration() throws(SharedCacheError) {
        try engine.reloadConfiguration()
    }
}
