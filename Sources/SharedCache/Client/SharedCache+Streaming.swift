// Puts and gets whose bodies never sit in memory whole, for the tools (`sharedcache put` and
// `get` of a 2 GB file). `package`: the public API takes and returns `Data`.

extension SharedCache {
    /// Stores everything `input` reads under `key`, replacing any earlier entry; the body is
    /// read and written a megabyte at a time.
    ///
    /// The same guarantees as ``put(key:data:metadata:)``: the blob is journaled only once it
    /// is complete, so a failure (a read error, a full disk) stores nothing and loses nothing.
    @discardableResult
    package func put(key: String, from input: BodyInput, metadata: EntryMetadata = EntryMetadata())
        throws(SharedCacheError) -> CacheEntry
    {
        let now = Clock.nowMilliseconds()
        let expiry = metadata.expiry ?? configuration.defaultExpiry.map { .after($0) } ?? .never
        let expiresAt = expiry.milliseconds(from: now)
        let keyBytes = Array(key.utf8)
        let etag = Array((metadata.etag ?? "").utf8)
        let lastModified = Array((metadata.lastModified ?? "").utf8)
        guard keyBytes.count <= BlobHeader.maximumKeySize else {
            throw SharedCacheError(
                .invalidArgument, "a key of \(keyBytes.count) bytes is longer than the 64 KiB limit; hash long keys")
        }
        guard etag.count <= BlobHeader.maximumFieldSize, lastModified.count <= BlobHeader.maximumFieldSize else {
            throw SharedCacheError(.invalidArgument, "an ETag or Last-Modified value is longer than 65,535 bytes")
        }
        let hash = keyBytes.withUnsafeBytes { KeyHash(hashing: $0) }
        let placeholder = BlobHeader(
            bodySize: 0, bodyChecksum: 0, storedAt: now, expiresAt: expiresAt, keyHash: hash, key: keyBytes,
            etag: etag, lastModified: lastModified, attributes: metadata.attributes)

        let header = try directory.perform("storing an entry") {
            let (blobID, header) = try blobs.write(placeholder, durable: isDurable) { buffer in
                try input.next(into: buffer)
            }
            // As in `store`: journal the new version (and the one it replaces) under the
            // journal's lock, or take the unjournaled blob back.
            let stored = StoredRecord(
                hash: hash, blobID: blobID, bodySize: header.bodySize, storedAt: now, expiresAt: expiresAt,
                key: keyBytes, etag: etag)
            let replaced: UInt64?
            do {
                replaced = try commit { index in
                    var records: [JournalRecord] = [.stored(stored)]
                    let previous = index[hash]?.blobID
                    if let previous {
                        let removal = RemovedRecord(
                            hash: hash, blobID: previous, reason: .superseded, remover: .current, key: keyBytes)
                        records.append(.removed(removal))
                    }
                    return (records, previous)
                }
            } catch {
                try? blobs.remove(hash, blobID: blobID)
                throw error
            }
            if let replaced { try? blobs.remove(hash, blobID: replaced) }
            return header
        }
        count { $0.stores += 1 }
        return CacheEntry(header)
    }

    /// Writes the body stored under `key` to `output` a megabyte at a time, and returns the
    /// entry; `nil` for a miss, with nothing written.
    ///
    /// Every byte is checked against the blob's checksum, as ``get(key:)`` checks it. A file is
    /// written beside its destination and published only once the whole body matched; a stream
    /// (standard output) gets the body only after a first pass found it intact. A blob that fails
    /// its checks is journaled as `corrupt`, like any damaged blob, and is a miss.
    package func get(key: String, to output: BodyOutput) throws(SharedCacheError) -> CacheEntry? {
        enum Outcome {
            case copied(BlobHeader)
            case missing
            case damaged
        }
        let hash = KeyHash(key: key)
        let keyBytes = Array(key.utf8)
        for attempt in 0..<2 {
            let now = Clock.nowMilliseconds()
            guard let (entry, _) = try currentEntry(hash, fromMemory: false), !entry.isExpired(at: now) else { break }
            let outcome = try directory.perform("reading an entry") { () throws -> Outcome in
                let opening = try blobs.openBody(
                    hash, blobID: entry.blobID, key: keyBytes, expectedSize: entry.bodySize)
                switch consume opening {
                case .missing:
                    return .missing
                case .damaged:
                    return .damaged
                case .opened(let blob):
                    // Bytes sent to a stream cannot be taken back: check the whole body first.
                    if output.isStream, try !blobs.streamBody(blob, into: nil) { return .damaged }
                    let intact = try blobs.streamBody(blob) { piece, offset in try output.write(piece, at: offset) }
                    guard intact else {
                        guard output.isStream else { return .damaged }
                        try? discard(hash, key: keyBytes, blobID: entry.blobID)
                        throw SharedCacheError(
                            .corruptData,
                            "the body of \(key) changed on disk while it was written to \(output.name), so what was "
                                + "written is not it; the entry was removed, so store it again",
                            path: "\(path)/\(BlobStore.path(hash, entry.blobID))")
                    }
                    try output.publish()
                    return .copied(blob.header)
                }
            }
            switch outcome {
            case .copied(let header):
                count { $0.hits += 1 }
                counters?.add(.hits)
                recordAccessIfDue(hash, entry: entry, now: now)
                return CacheEntry(header)
            case .missing where attempt == 0:
                continue
            case .missing, .damaged:
                try discard(hash, key: keyBytes, blobID: entry.blobID)
            }
            break
        }
        count { $0.misses += 1 }
        counters?.add(.misses)
        return nil
    }
}
