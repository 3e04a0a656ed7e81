package import Foundation
package import SharedCacheFormat
package import SharedCachePlatform

// What the admin tool needs beyond the cache API: listing, lookups by hash, the journal as
// records, the directory's layout, and changing the shared limits. `package`: for the tools of
// this package, not a promise to library users.

/// An entry as `sharedcache ls` and `show` present it.
package struct ListedEntry: Sendable, Codable {
    package var hash: String
    package var key: String
    package var size: UInt64
    package var etag: String?
    package var lastModified: String?
    package var storedAt: Date
    package var expiresAt: Date?
    package var lastAccess: Date
    package var path: String
}

/// What a directory holds besides its entries, as `sharedcache stat` shows it.
package struct DirectoryLayout: Sendable {
    /// The journal segments present, oldest first.
    package var segments: [UInt64]
    package var manifestBytes: Int64
    package var packSegments: Int
    /// Bytes of the pack segments, dead records included (the compactor gives them back).
    package var packBytes: Int64
}

/// One journal record as `sharedcache journal` prints it.
package struct JournalLine: Sendable, Codable {
    package var sequence: UInt64
    package var generation: UInt64
    package var type: String
    package var hash: String?
    package var key: String?
    package var size: UInt64?
    package var etag: String?
    package var expiresAt: Date?
    package var reason: String?
    package var remover: String?
    /// The process that stored it (a `stored` record of format version 3).
    package var writer: String?
    package var accessedAt: Date?
    package var nextGeneration: UInt64?
    /// The pack segment a `retired` record names, in hex.
    package var pack: String?

    /// `SEQUENCE TYPE fields…` on one line.
    package var text: String {
        var fields = ["\(sequence)", type]
        if let hash { fields.append(String(hash.prefix(16))) }
        if let size { fields.append("\(size)B") }
        if let reason { fields.append(reason) }
        if let by = remover ?? writer { fields.append("by \(by)") }
        if let nextGeneration { fields.append("next \(nextGeneration)") }
        if let pack { fields.append("pack \(pack)") }
        if let key { fields.append(key) }
        return fields.joined(separator: " ")
    }

    package init(_ record: JournalRecord, sequence: UInt64, generation: UInt64) {
        self.sequence = sequence
        self.generation = generation
        func date(_ milliseconds: Int64) -> Date? {
            milliseconds == .max ? nil : Date(millisecondsSince1970: milliseconds)
        }
        switch record {
        case .stored(let stored):
            type = "stored"
            hash = stored.hash.hex
            key = String(decoding: stored.key, as: UTF8.self)
            size = stored.bodySize
            etag = stored.etag.isEmpty ? nil : String(decoding: stored.etag, as: UTF8.self)
            expiresAt = date(stored.expiresAt)
            writer = stored.writer?.description
        case .removed(let removed):
            type = "removed"
            hash = removed.hash.hex
            key = removed.key.map { String(decoding: $0, as: UTF8.self) }
            reason = removed.reason.description
            remover = removed.remover.description
        case .cleared(let remover):
            type = "cleared"
            self.remover = remover.description
        case .sealed(let next):
            type = "sealed"
            nextGeneration = next
        case .accessed(let accessed):
            type = "accessed"
            hash = accessed.hash.hex
            accessedAt = date(accessed.accessedAt)
        case .freshened(let freshened):
            type = "freshened"
            hash = freshened.hash.hex
            expiresAt = date(freshened.expiresAt)
        case .moved(let moved):
            type = "moved"
            hash = moved.hash.hex
        case .retired(let pack):
            type = "retired"
            self.pack = String(pack, radix: 16)
        case .lost:
            type = "lost"
        case .unknown(let code):
            type = "unknown-\(code)"
        }
    }
}

/// Reads the journal from its oldest segment on, for `sharedcache journal`.
package final class JournalListing: @unchecked Sendable {
    private let directory: CacheDirectory
    private let lock = ThreadLock()
    private var cursor: JournalCursor?
    /// The sequence of the last record listed.
    private var listedThrough: UInt64?

    package init(directory: CacheDirectory) {
        self.directory = directory
    }

    /// Every whole record not yet listed, in order, across segments. A reader that loses its
    /// place (the segment it was in was retired) continues from the oldest segment left, and
    /// first calls `gap` with the first and last sequence numbers it can no longer list.
    package func readAvailable(
        _ body: (JournalLine) -> Void, gap: (_ from: UInt64, _ to: UInt64) -> Void = { _, _ in }
    ) throws(SharedCacheError) {
        try directory.perform("reading the journal") {
            try lock.withLock {
                for _ in 0..<3 {
                    if cursor == nil {
                        guard let oldest = try JournalSegment.generations(in: directory).first,
                            let segment = try JournalSegment.open(oldest, in: directory)
                        else { return }
                        let first = segment.header.firstSequence
                        if let listed = listedThrough, first > listed + 1 { gap(listed + 1, first - 1) }
                        cursor = JournalCursor(segment: segment, lastSequence: first - 1)
                    }
                    guard let cursor else { return }
                    let progress = try cursor.advance(in: directory) { record, sequence in
                        listedThrough = sequence
                        body(JournalLine(record, sequence: sequence, generation: cursor.segment.generation))
                    }
                    if progress != .mustResynchronize { return }
                    self.cursor = nil
                }
            }
        }
    }
}

extension CacheEngine {
    /// Every live entry with the metadata its blob header holds, oldest access first.
    package func listEntries() throws(SharedCacheError) -> [ListedEntry] {
        let entries = try directory.perform("reading the index") {
            try withState { state in
                try state.live.refresh()
                return state.live.index
            }
        }
        return try directory.perform("reading entry headers") {
            try entries.sorted { ($0.entry.lastAccess, $0.hash) < ($1.entry.lastAccess, $1.hash) }
                .compactMap { hash, entry in try listed(hash, entry) }
        }
    }

    /// The entry whose key hashes to `hash`, if there is one.
    package func listedEntry(hash: KeyHash) throws(SharedCacheError) -> ListedEntry? {
        try directory.perform("reading an entry") {
            let entry = try withState { state in
                try state.live.refresh()
                return state.live.index[hash]
            }
            return try entry.flatMap { try listed(hash, $0) }
        }
    }

    private func listed(_ hash: KeyHash, _ entry: IndexEntry) throws -> ListedEntry? {
        guard let header = try bodies.readHeader(hash, at: entry.location) else { return nil }
        let metadata = CacheEntry(header)
        return ListedEntry(
            hash: hash.hex, key: metadata.key, size: metadata.size, etag: metadata.etag,
            lastModified: metadata.lastModified, storedAt: metadata.storedAt,
            expiresAt: entry.expiresAt == .max ? nil : Date(millisecondsSince1970: entry.expiresAt),
            lastAccess: Date(millisecondsSince1970: entry.lastAccess),
            path: "\(path)/\(bodies.describe(hash, at: entry.location))")
    }

    /// A reader of the whole journal, oldest segment first.
    package func journalListing() -> JournalListing {
        JournalListing(directory: directory)
    }

    /// The journal segments present, the manifest's size and the pack segments', for
    /// `sharedcache stat`.
    package func layout() throws(SharedCacheError) -> DirectoryLayout {
        try directory.perform("inspecting \(path)") {
            var packBytes: Int64 = 0
            let packs = try directory.contents(of: CacheDirectory.packsDirectory).filter {
                PackSegments.parseName($0) != nil
            }
            for name in packs {
                packBytes += try directory.status(of: "\(CacheDirectory.packsDirectory)/\(name)")?.size ?? 0
            }
            return DirectoryLayout(
                segments: try JournalSegment.generations(in: directory),
                manifestBytes: try directory.status(of: CacheDirectory.manifestFile)?.size ?? 0,
                packSegments: packs.count, packBytes: packBytes)
        }
    }

    /// The shared limits as the `config` file has them.
    package struct SharedLimits: Sendable, Equatable {
        package var sizeLimit: UInt64
        package var entryLimit: UInt64
        package var defaultExpiry: Duration?
        /// Takes effect in processes that open the directory afterwards.
        package var packThreshold: Int
        /// Takes effect in processes that open the directory afterwards, and in open ones that
        /// become shared caches (none turns private while open).
        package var httpAudience: HTTPAudience

        package init(
            sizeLimit: UInt64, entryLimit: UInt64, defaultExpiry: Duration?, packThreshold: Int,
            httpAudience: HTTPAudience
        ) {
            self.sizeLimit = sizeLimit
            self.entryLimit = entryLimit
            self.defaultExpiry = defaultExpiry
            self.packThreshold = packThreshold
            self.httpAudience = httpAudience
        }
    }

    /// Changes the shared limits in `config` (atomically, under the directory lock) and adopts
    /// them in this process. Other processes see them when they next open the directory;
    /// `sharedcached` when it gets SIGHUP.
    @discardableResult
    package func updateSharedLimits(_ change: (inout SharedLimits) -> Void) throws(SharedCacheError) -> SharedLimits {
        try reloadConfiguration()
        let current = configuration
        var limits = SharedLimits(
            sizeLimit: current.sizeLimit, entryLimit: current.entryLimit, defaultExpiry: current.defaultExpiry,
            packThreshold: current.packThreshold, httpAudience: current.httpAudience)
        change(&limits)
        let file = ConfigurationFile(
            sizeLimit: limits.sizeLimit,
            defaultExpirySeconds: limits.defaultExpiry.map { max(1, $0.components.seconds) },
            entryLimit: limits.entryLimit, packThreshold: limits.packThreshold,
            storesForSeveralUsers: limits.httpAudience == .shared)
        try directory.perform("writing \(path)/config") {
            try directoryLock.withExclusiveLock(timeout: current.lockTimeout) {
                // A full disk says "lower the size-limit": the reserve pays for that file, and
                // the compactor makes a new reserve once the pass has freed space.
                try directory.releasingReserveWhenFull {
                    try directory.replaceFile(ConfigurationFile.fileName, with: file.encoded(), durable: true)
                }
            }
        }
        try reloadConfiguration()
        return limits
    }
}
