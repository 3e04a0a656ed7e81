public import Foundation

/// One on-disk cache directory, shared safely by every process that opens it.
///
/// Entries are immutable blob files named by the SHA-256 of their key; an append-only journal
/// records every store and removal, and a manifest checkpoints it. Each call first picks up what
/// other processes appended (one `fstat` when nothing changed), so every process sees every
/// other's puts and removals.
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
    /// The directory path the cache was opened with.
    public let path: String
    /// The configuration in effect: shared limits from the directory, the rest as given.
    public var configuration: Configuration { settings.withLock { $0 } }
    private let settings: Locked<Configuration>

    let directory: CacheDirectory
    let directoryLock: DirectoryLock
    let blobs: BlobStore
    let state: Locked<State>
    /// Activity counters shared by every process of the directory; `nil` if `stats` is unusable.
    let counters: SharedCounters?
    /// Things about the directory a person should know, found when it was opened: a network
    /// filesystem, for one. The tools print them; an app may log them.
    public let warnings: [String]

    struct State {
        var live: LiveIndex
        var statistics: Statistics
        var subscribers: [UInt64: RemovalSubscriber] = [:]
        var nextSubscriberID: UInt64 = 0
        /// Wakes a refresh when the journal changes; runs while anyone subscribes.
        var watcher: JournalWatcher?
        /// The journal position change subscribers last heard of.
        var notifiedSequence: UInt64 = 0
        var memory: MemoryTier

        /// Drops the memory copies of entries the index saw replaced or removed.
        mutating func forgetChangedEntries() {
            if live.tracksChanges { memory.drop(live.takeChangedHashes()) }
            live.tracksChanges = !memory.isEmpty
        }

        /// Hands the removals the index applied to every subscriber, in journal order, and
        /// tells change subscribers when the journal moved.
        mutating func deliverRemovals() {
            guard !subscribers.isEmpty else { return }
            let batch = live.takePendingRemovals()
            if !batch.isEmpty {
                for subscriber in subscribers.values { subscriber.deliver(batch) }
            }
            if live.cursor.lastSequence != notifiedSequence {
                notifiedSequence = live.cursor.lastSequence
                for subscriber in subscribers.values { subscriber.journalMoved() }
            }
        }
    }

    /// Runs `body` under the process lock, then delivers the removals the index applied.
    /// Every use of the index goes through here, so no removal is applied unreported.
    func withState<Result>(_ body: (inout State) throws -> Result) throws -> Result {
        try state.withLock { state in
            defer {
                state.forgetChangedEntries()
                state.deliverRemovals()
            }
            return try body(&state)
        }
    }

    /// Opens the cache directory at `path`, creating it (and missing parents) if needed.
    ///
    /// - Parameters:
    ///   - path: the cache directory. Created with mode 0700 if missing (02770 with
    ///     ``Sharing/group``).
    ///   - configuration: the shared limits apply only when this call creates the directory.
    /// - Throws: ``SharedCacheError`` when the path is not a directory, holds something other
    ///   than a cache, was written by a newer major version, or cannot be written.
    public init(directory path: String, configuration: Configuration = Configuration()) throws(SharedCacheError) {
        let durable = configuration.durability == .synchronized
        let (directory, lock, shared) = try CacheDirectory.open(
            path: path, creating: ConfigurationFile(configuration), sharing: configuration.sharing,
            timeout: configuration.lockTimeout, durable: durable)
        let (live, rebuilt) = try directory.perform("loading the index of \(path)") {
            try LiveIndex.load(directory, lock: lock, timeout: configuration.lockTimeout, durable: durable)
        }
        self.path = path
        var adopted = configuration.adopting(shared)
        adopted.sharing = directory.sharing
        var warnings: [String] = []
        if case .network(let name) = (try? System.filesystemKind(directory.descriptor.rawValue)) ?? .local,
            case .fileEvents(let interval) = configuration.journalWatching
        {
            // File events do not report other machines' appends: watch by polling instead.
            adopted.journalWatching = .polling(every: interval)
            warnings.append(
                "\(path) is on a network filesystem (\(name)): removals by other machines are noticed by "
                    + "polling the journal every \(interval), and flock(2) must work across clients for the "
                    + "cache to be safe; prefer a local directory")
        }
        self.warnings = warnings
        self.settings = Locked(adopted)
        self.directory = directory
        self.directoryLock = lock
        self.blobs = BlobStore(directory: directory)
        let counters = SharedCounters.open(in: directory)
        self.counters = counters
        live.counters = counters
        var statistics = Statistics(
            entryCount: 0, totalBytes: 0, sizeLimit: shared.sizeLimit, journalGeneration: 0, journalSequence: 0)
        statistics.rebuiltOnOpen = rebuilt
        self.state = Locked(
            State(live: live, statistics: statistics, memory: MemoryTier(costLimit: configuration.memoryCostLimit)))
    }

    /// Opens the cache directory at a file URL.
    public convenience init(directory url: URL, configuration: Configuration = Configuration()) throws(SharedCacheError)
    {
        try self.init(directory: url.path, configuration: configuration)
    }

    var isDurable: Bool { configuration.durability == .synchronized }

    // MARK: - Reading

    /// The body and metadata stored under `key`, or `nil` for a miss.
    ///
    /// Every byte returned was checked against the blob's checksums, and belongs to exactly one
    /// put of this key. An expired entry, or one whose blob another process removed a moment ago,
    /// is a miss. A blob that fails its checks is discarded (journaled as `corrupt`) and is a miss.
    public func get(key: String) throws(SharedCacheError) -> CacheHit? {
        let hash = KeyHash(key: key)
        var key = key
        // A second look after a vanished blob: the process that removed or replaced it journaled
        // that first, so a refreshed index points at the replacement or at nothing.
        for attempt in 0..<2 {
            let now = Clock.nowMilliseconds()
            guard let (entry, held) = try currentEntry(hash, fromMemory: true), !entry.isExpired(at: now) else { break }
            if let held {
                count { $0.hits += 1 }
                counters?.add(.hits)
                recordAccessIfDue(hash, entry: entry, now: now)
                return held
            }
            let result = try directory.perform("reading an entry") {
                try key.withUTF8 { keyBytes in
                    try blobs.read(
                        hash, blobID: entry.blobID, key: UnsafeRawBufferPointer(keyBytes), expectedSize: entry.bodySize)
                }
            }
            switch result {
            case .found(let header, let data):
                count { $0.hits += 1 }
                counters?.add(.hits)
                recordAccessIfDue(hash, entry: entry, now: now)
                let hit = CacheHit(data: data, entry: CacheEntry(header))
                remember(hit, for: hash, blobID: entry.blobID)
                return hit
            case .missing where attempt == 0:
                continue
            case .missing, .damaged:
                // The index names a blob that is gone or bad: journal that so no process trusts it.
                try discard(hash, key: Array(key.utf8), blobID: entry.blobID)
            }
            break
        }
        count { $0.misses += 1 }
        counters?.add(.misses)
        return nil
    }

    /// Journals a hit when the entry's last journaled access is older than the recency
    /// interval, so eviction knows what every process reads without a write per hit.
    func recordAccessIfDue(_ hash: KeyHash, entry: IndexEntry, now: Int64) {
        let interval = configuration.recencyInterval.milliseconds
        guard now - entry.lastAccess >= interval else { return }
        // Best effort: a failure here must not turn a hit into an error.
        _ = try? commit { index -> ([JournalRecord], Void) in
            guard let current = index[hash], current.blobID == entry.blobID, now - current.lastAccess >= interval else {
                return ([], ())
            }
            return ([.accessed(AccessedRecord(hash: hash, blobID: entry.blobID, accessedAt: now))], ())
        }
    }

    /// Re-reads the directory's shared limits (`config`), as `sharedcached` does on SIGHUP.
    public func reloadConfiguration() throws(SharedCacheError) {
        let shared = try directory.perform("reading \(path)/config") {
            try directory.readConfiguration(defaults: ConfigurationFile(configuration))
        }
        settings.withLock { $0 = $0.adopting(shared) }
    }

    /// Metadata of the entry stored under `key` (its blob header), without reading the body.
    public func entry(forKey key: String) throws(SharedCacheError) -> CacheEntry? {
        let hash = KeyHash(key: key)
        guard let entry = try currentEntry(hash), !entry.isExpired(at: Clock.nowMilliseconds()) else { return nil }
        let header = try directory.perform("reading an entry's header") {
            try blobs.readHeader(hash, blobID: entry.blobID)
        }
        var key = key
        guard let header, key.withUTF8({ header.key.hasSameBytes(as: UnsafeRawBufferPointer($0)) }) else { return nil }
        return CacheEntry(header)
    }

    /// Whether an unexpired entry is indexed under `key`. Cheap (no file is opened), so a
    /// following ``get(key:)`` can still miss if another process removes the entry meanwhile.
    public func contains(key: String) throws(SharedCacheError) -> Bool {
        guard let entry = try currentEntry(KeyHash(key: key)) else { return false }
        return !entry.isExpired(at: Clock.nowMilliseconds())
    }

    /// The index's current entry for `hash`, after picking up other processes' appends.
    private func currentEntry(_ hash: KeyHash) throws(SharedCacheError) -> IndexEntry? {
        try currentEntry(hash, fromMemory: false)?.entry
    }

    /// The index's current entry for `hash`, with the memory tier's copy of that version if
    /// `fromMemory` and it holds one.
    func currentEntry(_ hash: KeyHash, fromMemory: Bool) throws(SharedCacheError) -> (entry: IndexEntry, held: CacheHit?)? {
        try directory.perform("reading the journal") {
            try withState { state in
                try state.live.refresh()
                guard let entry = state.live.index[hash] else { return nil }
                let held = fromMemory && !state.memory.isEmpty ? state.memory.hit(hash, blobID: entry.blobID) : nil
                return (entry, held)
            }
        }
    }

    /// Keeps a copy of a body read or stored in the memory tier.
    func remember(_ hit: CacheHit, for hash: KeyHash, blobID: UInt64) {
        guard configuration.memoryCostLimit > 0 else { return }
        _ = try? withState { state in
            state.memory.insert(hit, for: hash, blobID: blobID)
        }
    }

    // MARK: - Writing

    /// Stores `data` under `key`, replacing any earlier entry for the key.
    ///
    /// The body goes to a new immutable blob, which is journaled only once it is complete, so no
    /// process ever reads a partial body. The replaced entry is journaled as `superseded` and its
    /// blob unlinked; readers that already opened it keep reading the old body.
    ///
    /// - Returns: the stored entry's metadata.
    /// - Throws: `.invalidArgument` for a key over 64 KiB or a validator over 65,535 bytes;
    ///   `.noSpace` on a full disk (nothing is stored, nothing else is lost).
    @discardableResult
    public func put(key: String, data: Data, metadata: EntryMetadata = EntryMetadata()) throws(SharedCacheError)
        -> CacheEntry
    {
        let now = Clock.nowMilliseconds()
        let expiry = metadata.expiry ?? configuration.defaultExpiry.map { .after($0) } ?? .never
        return try store(key: key, data: data, metadata: metadata, storedAt: now, expiresAt: expiry.milliseconds(from: now))
            .entry
    }

    /// Stores a new version of `key` with the given times; returns it and its blob ID.
    @discardableResult
    func store(key: String, data: Data, metadata: EntryMetadata, storedAt: Int64, expiresAt: Int64)
        throws(SharedCacheError) -> (entry: CacheEntry, blobID: UInt64)
    {
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
        var header = BlobHeader(
            bodySize: UInt64(data.count), bodyChecksum: 0, storedAt: storedAt, expiresAt: expiresAt,
            keyHash: hash, key: keyBytes, etag: etag, lastModified: lastModified, attributes: metadata.attributes)

        let blobID = try directory.perform("storing an entry") {
            let blobID = try data.withUnsafeBytes { body in
                header.bodyChecksum = CRC32C.checksum(body)
                return try blobs.write(header, body: body, durable: isDurable)
            }
            let stored = StoredRecord(
                hash: hash, blobID: blobID, bodySize: header.bodySize, storedAt: storedAt, expiresAt: expiresAt,
                key: keyBytes, etag: etag)
            let replaced: UInt64?
            do {
                replaced = try commit { index in
                    var records: [JournalRecord] = [.stored(stored)]
                    let previous = index[hash]?.blobID
                    if let previous {
                        records.append(
                            .removed(
                                RemovedRecord(
                                    hash: hash, blobID: previous, reason: .superseded, remover: .current, key: keyBytes)
                            ))
                    }
                    return (records, previous)
                }
            } catch {
                // Not journaled, so no process can know the blob: take it back.
                try? blobs.remove(hash, blobID: blobID)
                throw error
            }
            if let replaced { try? blobs.remove(hash, blobID: replaced) }
            return blobID
        }
        count { $0.stores += 1 }
        let entry = CacheEntry(header)
        remember(CacheHit(data: data, entry: entry), for: hash, blobID: blobID)
        return (entry, blobID)
    }

    /// Removes the entry stored under `key`.
    ///
    /// - Returns: whether there was one.
    @discardableResult
    public func remove(key: String) throws(SharedCacheError) -> Bool {
        try remove(KeyHash(key: key), key: Array(key.utf8), reason: .manual, blobID: nil)
    }

    /// Removes the entry whose key hashes to `hash` (as `sharedcache rm --hash` does).
    ///
    /// The removal is journaled before the blob is unlinked, so every process that follows the
    /// journal learns of it.
    @discardableResult
    public func remove(hash: KeyHash) throws(SharedCacheError) -> Bool {
        try remove(hash, key: nil, reason: .manual, blobID: nil)
    }

    /// Removes every entry. Puts that other processes complete after the clear are kept.
    public func clear() throws(SharedCacheError) {
        let removed = try directory.perform("clearing the cache") {
            try commit { index in ([.cleared(.current)], index) }
        }
        for (hash, entry) in removed { try? blobs.remove(hash, blobID: entry.blobID) }
        count { $0.removals += removed.count }
    }

    /// Journals the removal of `hash` (of version `blobID`, or whatever version is current),
    /// then unlinks its blob. Returns whether there was such an entry.
    @discardableResult
    func remove(_ hash: KeyHash, key: [UInt8]?, reason: RemovalReason, blobID: UInt64?)
        throws(SharedCacheError) -> Bool
    {
        let removed = try directory.perform("removing an entry") {
            try commit { index -> ([JournalRecord], UInt64?) in
                guard let current = index[hash]?.blobID, blobID == nil || blobID == current else { return ([], nil) }
                let record = RemovedRecord(hash: hash, blobID: current, reason: reason, remover: .current, key: key)
                return ([.removed(record)], current)
            }
        }
        guard let removed else { return false }
        try? blobs.remove(hash, blobID: removed)
        count { $0.removals += 1 }
        return true
    }

    /// Removes a version whose blob is missing or failed its checks.
    func discard(_ hash: KeyHash, key: [UInt8], blobID: UInt64) throws(SharedCacheError) {
        if try remove(hash, key: key, reason: .corrupt, blobID: blobID) { count { $0.damagedBlobs += 1 } }
    }

    /// Runs a journal commit under this process's lock.
    func commit<Decision>(_ decide: (Index) throws -> ([JournalRecord], Decision)) throws -> Decision {
        try withState { state in
            try state.live.commit(timeout: configuration.lockTimeout, durable: isDurable, decide)
        }
    }

    // MARK: - Statistics

    /// The directory's size and journal position, and this process's counters.
    public func statistics() throws(SharedCacheError) -> Statistics {
        try directory.perform("reading the journal") {
            try withState { state in
                let live = state.live
                try live.refresh()
                var statistics = state.statistics
                statistics.entryCount = live.index.count
                statistics.totalBytes = live.index.totalBytes
                statistics.journalGeneration = live.cursor.segment.generation
                statistics.journalSequence = live.cursor.lastSequence
                statistics.journalRepairs = live.journalRepairs
                statistics.resynchronizations = live.resynchronizations
                statistics.directory = counters.map(DirectoryActivity.init)
                return statistics
            }
        }
    }

    func count(_ update: (inout Statistics) -> Void) {
        state.withLock { update(&$0.statistics) }
    }
}
