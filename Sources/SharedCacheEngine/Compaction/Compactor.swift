public import Foundation
public import SharedCacheFormat
import SharedCachePlatform

/// What a compaction pass did, or with `dryRun` would do.
public struct CompactionReport: Sendable {
    /// One entry evicted (or to be evicted), and why.
    public struct Eviction: Sendable, Hashable {
        /// The evicted entry's hash (its key is in the removal record).
        public var hash: KeyHash
        /// Bytes of its body.
        public var size: UInt64
        /// ``RemovalReason/expired`` or ``RemovalReason/size``.
        public var reason: RemovalReason
        /// When any process last read it (to the recency interval), or stored it.
        public var lastAccess: Date
        /// When it expired or would have; `nil` for never.
        public var expiresAt: Date?
    }

    /// Whether this was a dry run: nothing was changed.
    public var dryRun: Bool
    /// Entries in the directory before the pass.
    public var entriesBefore: Int
    /// Bytes of bodies before the pass.
    public var bytesBefore: UInt64
    /// Entries after the pass (for a dry run, as they would be).
    public var entriesAfter: Int
    /// Bytes of bodies after the pass (for a dry run, as they would be).
    public var bytesAfter: UInt64
    /// Oldest first: expired entries, then least recently used.
    public var evictions: [Eviction]
    /// The checkpoint that ended the pass: none for a dry run, a pass stopped early, or a pass
    /// that found the journal where this compactor's last checkpoint left it, less than
    /// ``Configuration/journalRetention`` ago (there is nothing to fold, and nothing to retire).
    public var checkpoint: CheckpointSummary?
    /// Blob files no entry refers to (left by killed writers), deleted.
    public var orphansRemoved: Int
    /// Blobs of earlier evictions unlinked in this pass, once their grace period was over.
    public var blobsUnlinked: Int
    /// Pack segments given back whole, and live entries moved out of them first.
    public var packs = PackReclamation()
    /// Whether a stop request ended the pass before it finished.
    public var stoppedEarly: Bool
    /// How long the pass took.
    public var duration: Duration

    /// How many entries went because they had expired.
    public var expiredCount: Int { evictions.count { $0.reason == .expired } }
    /// How many entries went, least recently used first, to bring the directory under its limits.
    public var evictedForSpaceCount: Int { evictions.count { $0.reason == .size } }
}

/// What a pass should do besides evicting.
public struct CompactionOptions: Sendable, Hashable {
    /// Report what would be evicted and change nothing.
    public var dryRun: Bool
    /// Also look through every blob file for ones no entry refers to. Costs a directory scan.
    public var sweepOrphans: Bool
    /// Evict expired entries only, however far over its limits the directory is (Kingfisher's
    /// `cleanExpiredDiskCache`, across processes).
    public var expiredOnly: Bool

    /// Options for one pass; the defaults are what `sharedcached` does.
    public init(dryRun: Bool = false, sweepOrphans: Bool = true, expiredOnly: Bool = false) {
        self.dryRun = dryRun
        self.sweepOrphans = sweepOrphans
        self.expiredOnly = expiredOnly
    }
}

extension CacheEngine {
    /// Runs one compaction pass now; see `SharedCache.compact(_:)`.
    package func compact(_ options: CompactionOptions = CompactionOptions()) throws(SharedCacheError)
        -> CompactionReport
    {
        let compactor = try Compactor(engine: self)
        var report = try compactor.pass(options)
        report.blobsUnlinked += try compactor.unlinkPendingBlobs(waitingForGracePeriod: true)
        return report
    }

    /// The process ID of the compactor that holds this directory, or `nil` when none runs.
    package func compactorProcessID() throws(SharedCacheError) -> Int32? {
        try directory.perform("checking for a compactor") { try DaemonLock.holder(in: directory) }
    }
}

/// The only compactor of a directory while it exists: it holds the daemon lock, and keeps the
/// blobs it evicted until their grace period is over.
///
/// `sharedcached` keeps one for its lifetime; `SharedCache.compact(_:)` makes one per pass.
package final class Compactor: Sendable {
    let cache: CacheEngine
    private let lock: DaemonLock
    private let pendingUnlinks = Locked<[(hash: KeyHash, location: BodyLocation, due: Int64)]>([])
    /// Where ``adoptJournaledRemovals()`` has read the journal to.
    private let removalReader = Locked<JournalCursor?>(nil)
    /// Blobs this compactor evicted (and queued for unlinking) whose removal records
    /// ``adoptJournaledRemovals()`` has not read back yet: read back, they are not queued twice.
    private let ownEvictions = Locked<Set<BodyLocation>>([])
    /// The journal position just after this compactor's last checkpoint, and when it was made.
    private let lastCheckpoint = Locked<(sequence: UInt64, at: Int64)?>(nil)

    /// A blob file no entry refers to is only taken for an orphan once it is this old: a put
    /// renames its blob into place a moment before it journals it.
    static let orphanAge: Int64 = 10 * 60 * 1000
    static let batchSize = 1024

    /// - Throws: `.busy` when another compactor holds the directory.
    package init(engine cache: CacheEngine) throws(SharedCacheError) {
        self.cache = cache
        lock = try cache.directory.perform("taking the compactor lock") { try DaemonLock(in: cache.directory) }
        cache.directory.keepReserve()  // a directory made before there was a reserve
        try adoptJournaledRemovals()
    }

    /// Takes on the unlink of every blob whose removal the journal records, whoever journaled
    /// it: a process killed between journaling a removal and unlinking its blob (a remove, a
    /// previous compactor's evictions, a superseding put of format version 2) leaves the blob
    /// behind otherwise, until the orphan sweep finds it ``orphanAge`` later. (A version 3 put
    /// journals no removal: the blob it replaced, if its process died before unlinking it, is
    /// the orphan sweep's.) Unlinking a blob that is already gone does
    /// nothing, and a removed version never comes back (blob IDs are never reused), so this is
    /// safe. Starts at the oldest segment kept, then follows the journal pass by pass.
    private func adoptJournaledRemovals() throws(SharedCacheError) {
        let due = cache.now() + cache.configuration.evictionGracePeriod.milliseconds
        var removals: [(hash: KeyHash, location: BodyLocation, due: Int64)] = []
        try cache.directory.perform("reading the journal's removals") {
            try removalReader.withLock { reader in
                let directory = cache.directory
                for _ in 0..<2 {
                    if reader == nil {
                        // A damaged segment older than the newest is a retired one a checkpoint
                        // covers: its removals only speed up unlinking, which the orphan sweep
                        // does anyway, so it is passed over (`verify --repair` removes it) rather
                        // than stopping every compaction for good.
                        guard
                            let segment = try JournalSegment.oldestThatOpens(
                                among: JournalSegment.generations(in: directory), in: directory)
                        else { return }
                        reader = JournalCursor(
                            segment: segment, lastSequence: segment.header.firstSequence - 1, decoding: .removed)
                    }
                    // The cursor follows the seals through later segments.
                    let progress = try reader!.advance(in: directory) { record, _ in
                        if case .removed(let removed) = record { removals.append((removed.hash, removed.location, due)) }
                    }
                    if progress != .mustResynchronize { return }
                    reader = nil  // fell behind a retired segment: start again from the oldest
                }
            }
        }
        let adopted = ownEvictions.withLock { own in removals.filter { own.remove($0.location) == nil } }
        pendingUnlinks.withLock { $0 += adopted.filter { !$0.location.isPacked } }
    }

    /// One pass. `shouldStop` is asked between steps; a stop leaves everything journaled so far
    /// consistent (the directory verifies), and skips the rest.
    package func pass(_ options: CompactionOptions, shouldStop: () -> Bool = { false }) throws(SharedCacheError)
        -> CompactionReport
    {
        let start = Clock.monotonicNanoseconds()
        // Timed here, around the steps: a `defer` in them ran after `return` had copied the report.
        var report = try steps(options, shouldStop: shouldStop)
        report.duration = .nanoseconds(Clock.monotonicNanoseconds() - start)
        return report
    }

    private func steps(_ options: CompactionOptions, shouldStop: () -> Bool) throws(SharedCacheError)
        -> CompactionReport
    {
        let configuration = cache.configuration
        let now = cache.now()
        let (plan, entriesBefore, bytesBefore) = try cache.directory.perform("planning a compaction") {
            try cache.withState { state in
                try state.live.refresh()
                let index = state.live.index
                let plan = EvictionPlan(
                    index: index, now: now, sizeLimit: options.expiredOnly ? 0 : configuration.sizeLimit,
                    entryLimit: options.expiredOnly ? 0 : configuration.entryLimit)
                return (plan, index.count, index.totalBytes)
            }
        }
        var report = CompactionReport(
            dryRun: options.dryRun, entriesBefore: entriesBefore, bytesBefore: bytesBefore,
            entriesAfter: entriesBefore - plan.victims.count, bytesAfter: bytesBefore - plan.bytes,
            evictions: plan.victims.map(Self.eviction), checkpoint: nil, orphansRemoved: 0, blobsUnlinked: 0,
            stoppedEarly: false, duration: .zero)
        guard !options.dryRun else { return report }

        try adoptJournaledRemovals()
        report.blobsUnlinked = try unlinkPendingBlobs(waitingForGracePeriod: false)
        var evicted: [EvictionPlan.Victim] = []
        for batchStart in stride(from: 0, to: plan.victims.count, by: Self.batchSize) {
            if shouldStop() {
                report.stoppedEarly = true
                break
            }
            let batch = plan.victims[batchStart..<min(batchStart + Self.batchSize, plan.victims.count)]
            // On a full disk the reserve makes room to journal what frees the space.
            evicted += try cache.directory.releasingReserveWhenFull { () throws(SharedCacheError) in
                try journalEvictions(batch)
            }
        }
        let due = cache.now() + configuration.evictionGracePeriod.milliseconds
        // A packed body has no file of its own to unlink: its space comes back with its segment's.
        pendingUnlinks.withLock { pending in
            pending += evicted.filter { !$0.entry.location.isPacked }.map { ($0.hash, $0.entry.location, due) }
        }
        ownEvictions.withLock { $0.formUnion(evicted.map(\.entry.location)) }
        report.evictions = evicted.map(Self.eviction)
        let after = try cache.statistics()
        (report.entriesAfter, report.bytesAfter) = (after.entryCount, after.totalBytes)
        if shouldStop() {
            report.stoppedEarly = true
            return report
        }
        let idle = lastCheckpoint.withLock { last in
            guard let last else { return false }
            return after.journalSequence == last.sequence
                && Clock.nowMilliseconds() - last.at < configuration.journalRetention.milliseconds
        }
        if !idle {
            do {
                report.checkpoint = try cache.checkpoint()
            } catch where error.code == .noSpace {
                // The evictions are journaled; their space comes back once their bodies are
                // reclaimed, and the next pass checkpoints.
            }
            let position = try cache.statistics().journalSequence
            lastCheckpoint.withLock { $0 = (position, Clock.nowMilliseconds()) }
        }
        if !shouldStop() { report.packs = try reclaimPacks(shouldStop: shouldStop) }
        if options.sweepOrphans && !shouldStop() { report.orphansRemoved = try sweepOrphans() }
        cache.withSharedCounters { counters in
            counters.add(.compactions)
            counters.raise(.lastCompactionAt, to: UInt64(Clock.nowMilliseconds()))
        }
        return report
    }

    /// Journals the removal of each victim still current, in one append; returns those.
    ///
    /// Each record carries the victim's key, read from its blob's header before the journal's
    /// append lock is taken (one `pread` per victim, none under the lock), so that subscribers
    /// hear which key went, not only its hash. A victim whose header cannot be read is
    /// journaled without its key.
    private func journalEvictions(_ batch: ArraySlice<EvictionPlan.Victim>) throws(SharedCacheError)
        -> [EvictionPlan.Victim]
    {
        let keys = Dictionary(
            batch.compactMap { victim in
                (try? cache.bodies.readHeader(victim.hash, at: victim.entry.location)).flatMap { header in
                    header.map { (victim.hash, $0.key) }
                }
            },
            uniquingKeysWith: { first, _ in first })
        return try cache.directory.perform("journaling evictions") {
            try cache.commit { index -> ([JournalRecord], [EvictionPlan.Victim]) in
                // Another process may have replaced or removed an entry since the plan.
                let current = batch.filter { index[$0.hash]?.location == $0.entry.location }
                let records = current.map { victim in
                    JournalRecord.removed(
                        RemovedRecord(
                            hash: victim.hash, location: victim.entry.location, reason: victim.reason,
                            remover: .current, key: keys[victim.hash]))
                }
                return (records, current)
            }
        }
    }

    /// Unlinks evicted blobs whose grace period is over (or, waiting, all of them once the
    /// last one's is). The grace period runs on the configured clock, as expiry does.
    ///
    /// - Returns: how many were unlinked.
    @discardableResult
    package func unlinkPendingBlobs(waitingForGracePeriod wait: Bool) throws(SharedCacheError) -> Int {
        var pending = pendingUnlinks.withLock { pending in
            defer { pending = [] }
            return pending
        }
        if wait, let last = pending.map(\.due).max() {
            // At most one grace period, whatever a test's clock did meanwhile.
            let remaining = min(last - cache.now(), cache.configuration.evictionGracePeriod.milliseconds)
            if remaining > 0 { Clock.sleep(nanoseconds: UInt64(remaining) * 1_000_000) }
        }
        let now = wait ? .max : cache.now()
        let due = pending.filter { $0.due <= now }
        pending.removeAll { $0.due <= now }
        pendingUnlinks.withLock { $0 += pending }
        try cache.directory.perform("unlinking evicted blobs") {
            for body in due { try cache.bodies.reclaim(body.hash, at: body.location) }
        }
        // Space came back: keep the reserve again, if a full disk made this compactor use it.
        if !due.isEmpty { cache.directory.keepReserve() }
        return due.count
    }

    /// When the next evicted blob may be unlinked, in milliseconds since the epoch (of the
    /// configured clock).
    package var nextUnlinkDue: Int64? { pendingUnlinks.withLock { $0.map(\.due).min() } }

    /// How long until the next evicted blob may be unlinked, in milliseconds (0 once one may);
    /// `nil` when none waits.
    package var millisecondsUntilNextUnlink: Int64? { nextUnlinkDue.map { max(0, $0 - cache.now()) } }

    /// Deletes blob files that no entry refers to and that nobody wrote for ``orphanAge``:
    /// bodies of puts whose process died before journaling them, and of removals whose process
    /// died before unlinking.
    private func sweepOrphans() throws(SharedCacheError) -> Int {
        let pending = Set(pendingUnlinks.withLock { $0.map(\.location) })
        let cutoff = Clock.nowMilliseconds() - Self.orphanAge
        return try cache.directory.perform("sweeping orphaned blobs") {
            let problems = try cache.bodies.audit(
                isLive: { hash, location in
                    pending.contains(location)
                        || (try? cache.withState { $0.live.index[hash]?.location == location }) ?? true
                },
                orphanCutoff: cutoff, repair: false)
            // Only orphans go: a foreign file is for `verify --repair` to report first.
            let orphans = problems.compactMap(\.orphan)
            for (hash, location) in orphans { try cache.bodies.reclaim(hash, at: location) }
            return orphans.count
        }
    }

    private static func eviction(_ victim: EvictionPlan.Victim) -> CompactionReport.Eviction {
        CompactionReport.Eviction(
            hash: victim.hash, size: victim.entry.bodySize, reason: victim.reason,
            lastAccess: Date(millisecondsSince1970: victim.entry.lastAccess),
            expiresAt: victim.entry.expiresAt == .max ? nil : Date(millisecondsSince1970: victim.entry.expiresAt))
    }
}
