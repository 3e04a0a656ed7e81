package import SharedCacheFormat
import SharedCachePlatform

// Puts and gets whose bodies never sit in memory whole, for the tools (`sharedcache put` and
// `get` of a 2 GB file). `package`: the public API takes and returns `Data`.
extension CacheEngine {
    /// Stores everything `input` reads under `key`, replacing any earlier entry; the body is
    /// read and written a megabyte at a time.
    ///
    /// The same guarantees as a put of `Data`: the body is journaled only once it is complete,
    /// so a failure (a read error, a full disk) stores nothing and loses nothing.
    @discardableResult
    package func put(key: String, from input: BodyInput, metadata: EntryMetadata = EntryMetadata())
        throws(SharedCacheError) -> CacheEntry
    {
        let now = now()
        let expiry = metadata.expiry ?? defaultExpiry.map { .after($0) } ?? .never
        let stored = try store(key: key, metadata: metadata, storedAt: now, expiresAt: expiry.milliseconds(from: now)) {
            buffer in try input.next(into: buffer)
        }
        guard case .stored(let version) = stored else { preconditionFailure("a put publishes what it stores") }
        return version.entry
    }

    /// A version stored from a stream: its entry, where its body is, and the body pinned.
    package struct StreamedVersion: Sendable {
        package var entry: CacheEntry
        package var location: BodyLocation
        /// Held open before the version was journaled, so no eviction or replacement, however
        /// quick, takes it from the caller; `nil` unless asked for.
        package var pinned: (any PinnedBody)?
    }

    /// Stores a new version of `key` whose body is everything `read` produces, a chunk at a
    /// time, with the given times: ``store(key:data:metadata:storedAt:expiresAt:)`` for a body
    /// that arrives in pieces (a download). Nothing is journaled, and nothing is left behind,
    /// unless `read` reaches the end.
    ///
    /// - Parameters:
    ///   - pinning: hold the body (``StreamedVersion/pinned``) for a caller that serves it next.
    ///   - publishing: asked once, when the body has ended: `false` stores nothing and hands
    ///     the body back (``Publication/unpublished(_:)``), for a caller that learned while
    ///     it arrived that it is not to be stored (a download larger than the size limit) but
    ///     must still serve it. The body is written once either way, and never to memory whole.
    @discardableResult
    package func store(
        key: String, metadata: EntryMetadata, storedAt: Int64, expiresAt: Int64, pinning: Bool = false,
        publishing: () -> Bool = { true }, readingBody read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
    ) throws(SharedCacheError) -> Publication<StreamedVersion> {
        let placeholder = try header(
            key: key, metadata: metadata, bodySize: 0, storedAt: storedAt, expiresAt: expiresAt)
        let stored = try directory.perform("storing an entry") {
            try bodies.write(placeholder, durable: isDurable, publishing: publishing, readingBody: read).map {
                location, header in
                // Unjournaled, the body is nobody else's to remove: pinned now, it is surely there.
                let pinned =
                    pinning
                    ? try bodies.pin(header.keyHash, at: location, key: key, expectedSize: header.bodySize) : nil
                try commitStored(header, at: location)
                return StreamedVersion(entry: CacheEntry(header), location: location, pinned: pinned?.0)
            }
        }
        if case .stored = stored { count { $0.stores += 1 } }
        return stored
    }

    /// Writes the body stored under `key` to `output` a megabyte at a time, and returns the
    /// entry; `nil` for a miss, with nothing written.
    ///
    /// Every byte is checked against the body's checksum, as a get checks it. A file is written
    /// beside its destination and published only once the whole body matched; a stream
    /// (standard output) gets the body only after a first pass found it intact. A body that
    /// fails its checks is journaled as `corrupt`, like any damaged body, and is a miss.
    package func get(key: String, to output: BodyOutput) throws(SharedCacheError) -> CacheEntry? {
        let hash = KeyHash(key: key)
        let keyBytes = Array(key.utf8)
        for attempt in 0..<2 {
            let now = now()
            guard let entry = try currentEntry(hash), !entry.isExpired(at: now) else { break }
            let outcome = try directory.perform("reading an entry") { () throws -> BodyStream in
                // Bytes sent to a stream cannot be taken back: check the whole body first.
                if output.isStream {
                    let check = try bodies.stream(
                        hash, at: entry.location, key: keyBytes, expectedSize: entry.bodySize, into: nil)
                    guard case .intact = check else { return check }
                }
                let copied = try bodies.stream(hash, at: entry.location, key: keyBytes, expectedSize: entry.bodySize) {
                    piece, offset in try output.write(piece, at: offset)
                }
                if case .damaged = copied, output.isStream {
                    try? discard(hash, key: keyBytes, at: entry.location)
                    throw SharedCacheError(
                        .corruptData,
                        "the body of \(key) changed on disk while it was written to \(output.name), so what was "
                            + "written is not it; the entry was removed, so store it again",
                        path: "\(path)/\(bodies.describe(hash, at: entry.location))")
                }
                if case .intact = copied { try output.publish() }
                return copied
            }
            switch outcome {
            case .intact(let header):
                count(.hits) { $0.hits += 1 }
                recordAccessIfDue(hash, entry: entry, now: now)
                return CacheEntry(header)
            case .missing where attempt == 0:
                continue
            case .missing, .damaged:
                try discard(hash, key: keyBytes, at: entry.location)
            }
            break
        }
        count(.misses) { $0.misses += 1 }
        return nil
    }
}
