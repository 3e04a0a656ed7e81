package import Foundation
package import SharedCacheFormat
package import SharedCachePlatform

/// One open cache directory: its index kept current by the journal, the bodies, the locks, and
/// every operation on entries. The public ``SharedCache`` is a thin face on this; the HTTP
/// layer, the compactor and the tools use it directly.
///
/// Thread-safe. State lives behind one process-wide mutex (``withState(_:)``), which is held
/// only for index work, never while waiting for another process: appenders wait for the
/// journal's append lock between two holds of it (see ``commit(_:)``).
package final class CacheEngine: Sendable {
    /// The directory path the cache was opened with.
    package let path: String
    /// The configuration in effect: shared limits from the directory, the rest as given.
    package var configuration: Configuration { settings.withLock { $0 } }
    /// The configuration's default expiry, without copying the whole configuration (every put
    /// reads it).
    package var defaultExpiry: Duration? { settings.withLock { $0.defaultExpiry } }
    /// The configuration's HTTP audience, without copying the whole configuration (every
    /// fetch's lookup reads it).
    package var httpAudience: HTTPAudience { settings.withLock { $0.httpAudience } }
    private let settings: Locked<Configuration>
    // What every get reads, fixed when the cache is opened (a reload changes only the shared
    // limits): plain constants, not a locked copy of the whole configuration.
    private let clock: WallClock
    private let recencyInterval: Int64
    private let keepsBodiesInMemory: Bool
    private let lockTimeout: Duration
    package let isDurable: Bool
    /// Whether puts append to the journal at once, under its shared lock: only on a local
    /// filesystem, where `O_APPEND` lands each write whole after the one before (on a network
    /// filesystem, two machines may write at the same offset).
    let appendsConcurrently: Bool

    package let directory: CacheDirectory
    package let directoryLock: DirectoryLock
    /// Where bodies live; every caller reads, writes and reclaims them through it.
    package let bodies: any BodyStore
    let state: Locked<State>
    /// This process's appenders take turns here while they wait for, and hold, the journal's
    /// append lock: threads share the segment's descriptor, so flock alone would not keep
    /// them apart, and holding ``state`` instead would stall readers behind another process.
    private let appenders = ThreadLock()
    /// One network fetch per URL at a time, across processes.
    package let fetchLocks: FetchLocks
    /// Things about the directory a person should know, found when it was opened: a network
    /// filesystem, for one.
    package let warnings: [String]

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
            if !subscribers.isEmpty { deliverToSubscribers() }
        }

        // Apart from the check above, which every use of the index makes: its set-up (the
        // types of the subscribers' streams, stack for them) cost a call 100 instructions.
        @inline(never)
        private mutating func deliverToSubscribers() {
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

    /// Runs `body` under the process mutex, then delivers the removals the index applied.
    /// Every use of the index goes through here, so no removal is applied unreported.
    func withState<Result>(_ body: (inout State) throws -> Result) throws -> Result {
        try state.withLock { state in
            defer {
                state.forgetChangedEntries()
                state.deliverRemovals()
                if state.live.hasRetiredPacks { bodies.close(retired: state.live.takeRetiredPacks()) }
            }
            return try body(&state)
        }
    }

    /// Opens the cache directory at `path`, creating it (and missing parents) if needed.
    package init(directory path: String, configuration: Configuration) throws(SharedCacheError) {
        let durable = configuration.durability == .synchronized
        let (directory, lock, shared, format) = try CacheDirectory.open(
            path: path, creating: ConfigurationFile(configuration), sharing: configuration.sharing,
            timeout: configuration.lockTimeout, durable: durable)
        let filesystem = Self.filesystemKind(of: directory)
        let bodies = PackedBodyStore(
            directory: directory, packThreshold: shared.packThreshold, mapsSegments: filesystem == .local)
        let (live, recovery) = try directory.perform("loading the index of \(path)") {
            try LiveIndex.load(
                directory, bodies: bodies, lock: lock, timeout: configuration.lockTimeout, durable: durable)
        }
        self.path = path
        var adopted = configuration
        adopted.sharing = directory.sharing
        adopted = adopted.adopting(shared)
        var warnings: [String] = []
        // Never a silent loss.
        switch recovery {
        case .rebuiltFromBodies:
            // A packed body is found again only through the journal.
            warnings.append(
                "the manifest of \(path) was missing or damaged and was rebuilt from the blob files and the "
                    + "journal segments kept; small (packed) entries stored before the oldest segment kept, if "
                    + "any, are no longer in the cache (sharedcache(5), Reading and recovery)")
        case .journalStartedAfterManifest:
            warnings.append(
                "the journal of \(path) was gone, and starts again after the manifest: the entries it names "
                    + "are kept, and what was stored or removed after the last checkpoint is lost "
                    + "(sharedcache(5), Reading and recovery)")
        case nil:
            break
        }
        if case .network(let name) = filesystem, case .fileEvents(let interval) = configuration.journalWatching {
            // File events do not report other machines' appends: watch by polling instead.
            adopted.journalWatching = .polling(every: interval)
            warnings.append(
                "\(path) is on a network filesystem (\(name)): removals by other machines are noticed by "
                    + "polling the journal every \(interval), and flock(2) must work across clients for the "
                    + "cache to be safe; prefer a local directory")
        }
        self.warnings = warnings
        self.settings = Locked(adopted)
        self.clock = configuration.clock
        self.recencyInterval = configuration.recencyInterval.milliseconds
        self.keepsBodiesInMemory = configuration.memoryCostLimit > 0
        self.isDurable = durable
        self.lockTimeout = configuration.lockTimeout
        self.directory = directory
        self.directoryLock = lock
        self.fetchLocks = FetchLocks(directory: directory)
        self.bodies = bodies
        live.counters = SharedCounters.open(in: directory)
        live.trustsSharedJournalEnd = filesystem == .local
        appendsConcurrently = filesystem == .local
        var statistics = Statistics(
            entryCount: 0, totalBytes: 0, sizeLimit: shared.sizeLimit, journalGeneration: 0, journalSequence: 0)
        statistics.rebuiltOnOpen = recovery != nil
        self.state = Locked(
            State(live: live, statistics: statistics, memory: MemoryTier(configuration)))
        if format.major < FormatVersion.current.major { try upgradeFormat() }
    }

    /// Whether `directory` is on a local filesystem. `SHAREDCACHE_TEST_FILESYSTEM` (debug builds
    /// only) names a network filesystem to take it for, as nothing here can mount one.
    private static func filesystemKind(of directory: CacheDirectory) -> FilesystemKind {
        #if DEBUG
        if let name = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_FILESYSTEM"] { return .network(name) }
        #endif
        return (try? directory.descriptor.filesystemKind()) ?? .local
    }

    /// Milliseconds since the epoch, by the configured clock.
    package func now() -> Int64 { clock.now() }

    // MARK: - Reading

    /// The body and metadata stored under `key`, or `nil` for a miss.
    ///
    /// Every byte returned was checked against its checksums and belongs to exactly one put of
    /// this key. An expired entry, or one whose body another process removed a moment ago, is
    /// a miss. A body that fails its checks is discarded (journaled as `corrupt`): a miss.
    package func get(key: String) throws(SharedCacheError) -> CacheHit? {
        let hash = KeyHash(key: key)
        // A second look after a vanished body: the process that removed or replaced it journaled
        // that first, so a refreshed index points at the replacement or at nothing.
        for attempt in 0..<2 {
            let now = now()
            var held: CacheHit?
            guard let entry = try currentEntry(hash, memoryCopy: &held), !entry.isExpired(at: now) else { break }
            if let held {
                count(.hits) { $0.hits += 1 }
                recordAccessIfDue(hash, entry: entry, now: now)
                return held
            }
            let result = try directory.perform("reading an entry") {
                try bodies.read(hash, at: entry.location, key: key, expectedSize: entry.bodySize)
            }
            // Consumed: the hit moves out of the result instead of being copied (a retain and a
            // release of each of its references: 120 ns of a 1.5 µs get).
            switch consume result {
            case .found(let hit):
                count(.hits) { $0.hits += 1 }
                recordAccessIfDue(hash, entry: entry, now: now)
                remember(hit, for: hash, at: entry.location)
                return hit
            case .missing where attempt == 0:
                continue
            case .missing, .damaged:
                // The index names a body that is gone or bad: journal that so no process trusts it.
                try discard(hash, key: Array(key.utf8), at: entry.location)
            }
            break
        }
        count(.misses) { $0.misses += 1 }
        return nil
    }

    /// Journals a hit when the entry's last journaled access is older than the recency
    /// interval, so eviction knows what every process reads without a write per hit.
    package func recordAccessIfDue(_ hash: KeyHash, entry: IndexEntry, now: Int64) {
        let interval = recencyInterval
        guard now - entry.lastAccess >= interval else { return }
        // Best effort: a failure here must not turn a hit into an error.
        // Shared: an access applies only to the version it names, and a second one is harmless.
        _ = try? commit(concurrently: appendsConcurrently) { index -> ([JournalRecord], Void) in
            guard let current = index[hash], current.location == entry.location, now - current.lastAccess >= interval
            else { return ([], ()) }
            return ([.accessed(AccessedRecord(hash: hash, location: entry.location, accessedAt: now))], ())
        }
    }

    /// Re-reads the directory's shared limits (`config`), as `sharedcached` does on SIGHUP.
    package func reloadConfiguration() throws(SharedCacheError) {
        let shared = try directory.perform("reading \(path)/config") {
            try directory.readConfiguration(defaults: ConfigurationFile(configuration))
        }
        settings.withLock { $0 = $0.adopting(shared) }
    }

    /// Metadata of the entry stored under `key` (its body's header), without reading the body.
    package func entry(forKey key: String) throws(SharedCacheError) -> CacheEntry? {
        let hash = KeyHash(key: key)
        guard let entry = try currentEntry(hash), !entry.isExpired(at: now()) else { return nil }
        let header = try directory.perform("reading an entry's header") {
            try bodies.readHeader(hash, at: entry.location)
        }
        var key = key
        guard let header, key.withUTF8({ header.key.hasSameBytes(as: UnsafeRawBufferPointer($0)) }) else { return nil }
        return CacheEntry(header)
    }

    /// Whether an unexpired entry is indexed under `key`.
    package func contains(key: String) throws(SharedCacheError) -> Bool {
        guard let entry = try currentEntry(KeyHash(key: key)) else { return false }
        return !entry.isExpired(at: now())
    }

    /// The index's current entry for `hash`, after picking up other processes' appends.
    package func currentEntry(_ hash: KeyHash) throws(SharedCacheError) -> IndexEntry? {
        try withRefreshedState { state in state.live.index[hash] }
    }

    /// The index's stamp, with every journal record applied that this process has read: while
    /// it stays the same, no entry was stored, changed or removed (see ``Index/stamp()``).
    package func indexStamp() throws(SharedCacheError) -> UInt64 {
        try withRefreshedState { state in state.live.stamp() }
    }

    /// The index's current entry for `hash`, as ``currentEntry(_:)``; `memoryCopy` is set to the
    /// memory tier's copy of that version if it holds one.
    ///
    /// The copy comes back through `memoryCopy`, not in a tuple with the entry, which a get
    /// moved by a 193-byte `memcpy` at each step even when the memory tier was empty.
    package func currentEntry(_ hash: KeyHash, memoryCopy: inout CacheHit?) throws(SharedCacheError)
        -> IndexEntry?
    {
        memoryCopy = nil
        return try withRefreshedState { state in
            guard !state.memory.isEmpty else { return state.live.index[hash] }
            // A copy checked against the index as it still is needs no lookup.
            let stamp = state.live.stamp()
            if let entry = state.memory.hit(hash, checkedAt: stamp, into: &memoryCopy) { return entry }
            guard let entry = state.live.index[hash] else { return nil }
            memoryCopy = state.memory.hit(hash, at: entry.location, entry: entry, stamp: stamp)
            return entry
        }
    }

    /// Runs `body` on the locked state after picking up other processes' appends.
    private func withRefreshedState<Result>(_ body: (inout State) -> Result) throws(SharedCacheError) -> Result {
        try directory.perform("reading the journal") {
            try withState { state in
                try state.live.refresh()
                return body(&state)
            }
        }
    }

    /// Keeps a copy of a body read or stored in the memory tier.
    package func remember(_ hit: CacheHit, for hash: KeyHash, at location: BodyLocation) {
        // A body over the mapping threshold is mapped, not in memory; held here, it would keep an
        // evicted blob's space in use and count file pages as memory.
        guard keepsBodiesInMemory, hit.data.count <= BlobFileStore.mappingThreshold else { return }
        _ = try? withState { state in
            state.memory.insert(hit, for: hash, at: location)
        }
    }

    // MARK: - Writing

    /// Stores a new version of `key` with the given times; returns it and its location.
    ///
    /// The body is written first and journaled only once complete, so no process ever reads a
    /// partial body. The replaced entry is removed as `superseded` where the journal record is
    /// applied, and its body reclaimed; readers that already opened it keep reading the old body.
    ///
    /// - Parameter afterCatchingUp: see ``commitStored(_:at:afterCatchingUp:)``.
    /// - Throws: `.invalidArgument` for a key over 64 KiB or a validator over 65,535 bytes;
    ///   `.noSpace` on a full disk (nothing is stored, nothing else is lost). If reading the
    ///   journal fails once the record is written, the error is thrown and the entry may be
    ///   stored all the same.
    @discardableResult
    package func store(
        key: String, data: Data, metadata: EntryMetadata, storedAt: Int64, expiresAt: Int64,
        afterCatchingUp: () throws -> Void = {}
    ) throws(SharedCacheError) -> (entry: CacheEntry, location: BodyLocation) {
        let header = try header(
            key: key, metadata: metadata, bodySize: UInt64(data.count), storedAt: storedAt, expiresAt: expiresAt,
            bodyChecksum: data.withUnsafeBytes { CRC32C.checksum($0) })
        let hash = header.keyHash

        let location = try directory.perform("storing an entry") {
            let location = try data.withUnsafeBytes { body in
                try bodies.write(header, body: body, durable: isDurable)
            }
            try commitStored(header, at: location, afterCatchingUp: afterCatchingUp)
            return location
        }
        count { $0.stores += 1 }
        let entry = CacheEntry(
            key: key, hash: hash, metadata: metadata, size: header.bodySize, storedAt: storedAt, expiresAt: expiresAt)
        // Built only for the memory tier: a copy of the entry is a dozen reference counts a put.
        if keepsBodiesInMemory { remember(CacheHit(data: data, entry: entry), for: hash, at: location) }
        return (entry, location)
    }

    /// The header of a new version of `key` (with `bodyChecksum` 0 until the body is known).
    ///
    /// - Throws: `.invalidArgument` for a key over 64 KiB or a validator over 65,535 bytes.
    func header(
        key: String, metadata: EntryMetadata, bodySize: UInt64, storedAt: Int64, expiresAt: Int64,
        bodyChecksum: UInt32 = 0
    ) throws(SharedCacheError) -> BlobHeader {
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
        return BlobHeader(
            bodySize: bodySize, bodyChecksum: bodyChecksum, storedAt: storedAt, expiresAt: expiresAt,
            keyHash: keyBytes.withUnsafeBytes { KeyHash(hashing: $0) }, key: keyBytes, etag: etag,
            lastModified: lastModified, attributes: metadata.attributes)
    }

    /// Journals a body just written as the entry for its key, superseding any earlier version
    /// (whose body is then reclaimed). If the journal refuses it, the body is reclaimed: no
    /// process can know it (but after a write whose fate is unknown, ``UnconfirmedAppend``, the
    /// body stays, for the orphan sweep if the record is void).
    ///
    /// Appended under the shared append lock (on a local filesystem): puts of other processes
    /// land at the same moment, and the version this one replaces is the one before it in the
    /// journal.
    ///
    /// - Parameter afterCatchingUp: runs once, after the put caught up with the journal and
    ///   before it takes the append lock: tests and the power-loss checker land another cache's
    ///   put or checkpoint there, as another process's may. It must not use this engine, whose
    ///   appenders wait for it.
    package func commitStored(
        _ header: BlobHeader, at location: BodyLocation, afterCatchingUp: () throws -> Void = {}
    ) throws {
        let records: [JournalRecord] = [
            .stored(
                StoredRecord(
                    hash: header.keyHash, location: location, bodySize: header.bodySize, storedAt: header.storedAt,
                    expiresAt: header.expiresAt, key: header.key, etag: header.etag, writer: .current))
        ]
        let replaced: [BodyLocation]
        do {
            replaced = try withAppendLock(shared: appendsConcurrently, afterCatchingUp: afterCatchingUp) { live in
                let appended = try live.append { _ in (records, ()) }
                return (appended.replaced, appended.segment)
            }
        } catch let unconfirmed as UnconfirmedAppend {
            throw unconfirmed.underlying
        } catch {
            try? bodies.reclaim(header.keyHash, at: location)
            throw error
        }
        for location in replaced { try? bodies.reclaim(header.keyHash, at: location) }
    }

    /// Removes every entry. Puts that other processes complete after the clear are kept.
    package func clear() throws(SharedCacheError) {
        let removed = try directory.perform("clearing the cache") {
            try commit { index in ([.cleared(.current)], index) }
        }
        for (hash, entry) in removed { try? bodies.reclaim(hash, at: entry.location) }
        count { $0.removals += removed.count }
    }

    /// Journals the removal of `hash` (of the version at `location`, or whatever version is
    /// current), then reclaims its body. Returns whether there was such an entry.
    @discardableResult
    package func remove(_ hash: KeyHash, key: [UInt8]?, reason: RemovalReason, at location: BodyLocation?)
        throws(SharedCacheError) -> Bool
    {
        let removed = try directory.perform("removing an entry") {
            try commit { index -> ([JournalRecord], BodyLocation?) in
                guard let current = index[hash]?.location, location == nil || location == current else {
                    return ([], nil)
                }
                let record = RemovedRecord(hash: hash, location: current, reason: reason, remover: .current, key: key)
                return ([.removed(record)], current)
            }
        }
        guard let removed else { return false }
        try? bodies.reclaim(hash, at: removed)
        count { $0.removals += 1 }
        return true
    }

    /// Removes a version whose body is missing or failed its checks.
    package func discard(_ hash: KeyHash, key: [UInt8], at location: BodyLocation) throws(SharedCacheError) {
        if try remove(hash, key: key, reason: .corrupt, at: location) { count { $0.damagedBlobs += 1 } }
    }

    /// Appends the records `decide` returns to the journal, deciding from the index as it is
    /// under the journal's append lock, and applies them.
    ///
    /// The lock is waited for outside the process mutex (readers go on meanwhile), and with
    /// ``Durability/synchronized`` the append is flushed after the mutex is let go.
    ///
    /// - Parameter concurrently: take the lock shared, for records whose effect is decided where
    ///   they are applied (see ``LiveIndex/withAppendLock(timeout:durable:shared:repairing:access:_:)``).
    package func commit<Decision>(
        concurrently: Bool = false, _ decide: (Index) throws -> ([JournalRecord], Decision)
    ) throws -> Decision {
        try withAppendLock(shared: concurrently) { live in
            let appended = try live.append(decide)
            return (appended.decision, appended.segment)
        }
    }

    /// Runs `body` on the index under the journal's append lock (see
    /// ``LiveIndex/withAppendLock(timeout:durable:shared:repairing:access:_:)``); a durable append
    /// is flushed once the process mutex is let go.
    ///
    /// - Parameters:
    ///   - shared: hold the lock shared, as puts do.
    ///   - repairing: repair damage at the end of the journal first (every exclusive append
    ///     does); `false` only to look at it.
    ///   - afterCatchingUp: runs once, between the catch-up and the lock.
    ///   - body: returns its result and the segment it appended to, if it did.
    package func withAppendLock<Decision>(
        shared: Bool = false, repairing: Bool = true, afterCatchingUp: () throws -> Void = {},
        _ body: (LiveIndex) throws -> (decision: Decision, appendedTo: JournalSegment?)
    ) throws -> Decision {
        try appenders.withLock {
            var flush: JournalSegment?
            var caughtUp = false
            let decision = try LiveIndex.withAppendLock(
                timeout: lockTimeout, durable: isDurable, shared: shared, repairing: repairing,
                access: { (step: (LiveIndex) throws -> LiveIndex.AppendStep<Decision>) in
                    let next = try withState { state in try step(state.live) }
                    if !caughtUp {
                        caughtUp = true
                        try afterCatchingUp()
                    }
                    return next
                }
            ) { live in
                let (decision, segment) = try body(live)
                if isDurable { flush = segment }
                return decision
            }
            try flush?.file.synchronizeData()
            return decision
        }
    }

    // MARK: - Statistics

    /// The directory's size and journal position, and this process's counters.
    package func statistics() throws(SharedCacheError) -> Statistics {
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
                statistics.directory = live.counters.flatMap { counters in
                    let activity = DirectoryActivity(counters)  // read first: the read may find them lost
                    return counters.isLost ? nil : activity
                }
                return statistics
            }
        }
    }

    /// Counts into this process's statistics and, given a `shared` slot, into the directory's
    /// counter every process adds to, under the one lock (the live index owns the counters,
    /// and may map them anew: see ``LiveIndex/counters``).
    package func count(_ shared: SharedCounters.Slot? = nil, _ update: (inout Statistics) -> Void) {
        state.withLock { state in
            update(&state.statistics)
            if let shared { state.live.counters?.add(shared) }
        }
    }

    /// The directory's shared counters this process counts into now, if any.
    package var sharedCounters: SharedCounters? { state.withLock { $0.live.counters } }

    /// Runs `body` on the directory's shared counters, if this process has them.
    package func withSharedCounters(_ body: (SharedCounters) -> Void) {
        state.withLock { state in state.live.counters.map(body) }
    }
}
