/// Reading and replacing `<root>/manifest`, and rebuilding it when it is lost.
enum ManifestFile {
    enum Contents {
        case missing
        case corrupt(FormatError)
        case valid(ManifestCoding.Header, Index)
    }

    static func read(in directory: CacheDirectory) throws -> Contents {
        guard let bytes = try directory.readFile(CacheDirectory.manifestFile) else { return .missing }
        var index = Index()
        do {
            let header = try bytes.withUnsafeBytes { raw throws(FormatError) in
                try ManifestCoding.decode(raw, reserve: { index.reserveCapacity($0) }) { hash, entry in
                    index.insert(entry, for: hash)
                }
            }
            return .valid(header, index)
        } catch let error as FormatError {
            return .corrupt(error)
        }
    }

    /// Replaces the manifest; the caller holds the directory lock.
    static func write(
        _ index: Index, generation: UInt64, lastSequence: UInt64, in directory: CacheDirectory, durable: Bool
    ) throws {
        let header = ManifestCoding.Header(
            generation: generation, lastSequence: lastSequence, entryCount: UInt64(index.count),
            createdAt: Clock.nowMilliseconds())
        let bytes = ManifestCoding.encode(header, entries: index.entries.lazy.map { ($0.key, $0.value) })
        try directory.replaceFile(CacheDirectory.manifestFile, with: bytes, durable: durable)
    }

    /// Builds an index from the blob headers alone: the recovery when the manifest is lost.
    ///
    /// Blobs are the source of truth; a hash with several blobs (a put whose superseded
    /// predecessor was not unlinked yet) keeps the newest. Files that are not blobs are skipped.
    static func scanBlobs(_ store: BlobStore) throws -> Index {
        var newest: [KeyHash: IndexEntry] = [:]
        for fanOut in try store.directory.contents(of: CacheDirectory.blobsDirectory) {
            let folder = "\(CacheDirectory.blobsDirectory)/\(fanOut)"
            guard fanOut.utf8.count == 2, store.directory.isDirectory(folder) else { continue }
            for name in try store.directory.contents(of: folder) {
                guard let (hash, blobID) = BlobStore.parseName(name),
                    let header = try store.readHeader(at: "\(folder)/\(name)"),
                    header.keyHash == hash,
                    header.key.withUnsafeBytes({ KeyHash(hashing: $0) }) == hash
                else { continue }
                let entry = IndexEntry(
                    blobID: blobID, bodySize: header.bodySize, storedAt: header.storedAt,
                    expiresAt: header.expiresAt, lastAccess: header.storedAt)
                if let existing = newest[hash],
                    (existing.storedAt, existing.blobID) > (entry.storedAt, entry.blobID)
                {
                    continue
                }
                newest[hash] = entry
            }
        }
        var index = Index()
        index.reserveCapacity(newest.count)
        for (hash, entry) in newest { index.insert(entry, for: hash) }
        return index
    }
}
