package import SharedCacheFormat
import SharedCachePlatform

/// The index of a cache directory kept current by following the journal.
///
/// Loading reads the manifest and replays the journal from the position it covers. Every cache
/// call first ``refresh()``es, which costs one atomic load when no process appended anything.
/// Changes go through ``withAppendLock(timeout:durable:shared:repairing:access:_:)``: catch up,
/// take the newest segment's append lock (exclusively: catch up again under it), decide the
/// records from the now-current index, append them in one write; then, the lock released, apply
/// them. Held exclusively, no other process appends meanwhile, so the decision stands; held
/// shared (puts), others append at the same moment, and the records are read back to be applied
/// in journal order (or appended again, if a seal came first).
///
/// Not thread-safe: ``CacheEngine`` keeps it inside its `Locked` state. Its properties are
/// exempt from Swift's run-time exclusivity checks, which cost ~1,000 instructions per put
/// (callgrind): one mutex already serialises every access, and no method of it hands out an
/// `inout` to one of them across a call back into it.
package final class LiveIndex {
    let directory: CacheDirectory
    @exclusivity(unchecked) package private(set) var index: Index
    @exclusivity(unchecked) package private(set) var cursor: JournalCursor
    /// Times the position was lost and the index reloaded from the manifest.
    @exclusivity(unchecked) package private(set) var resynchronizations = 0
    /// Times a damaged journal record stopped reading until a writer repaired it.
    @exclusivity(unchecked) package private(set) var corruptionStops = 0
    /// Torn or corrupt tails truncated while appending, over every cursor this index used.
    @exclusivity(unchecked) private var earlierRepairs = 0
    package var journalRepairs: Int { earlierRepairs + cursor.repairs }

    /// The directory's shared activity counters, `nil` when they cannot be mapped; every count
    /// of this process goes into them, and its appends raise their journal end.
    @exclusivity(unchecked) var counters: SharedCounters?
    /// When ``refresh()`` last made sure ``counters`` are the ones every process reads.
    @exclusivity(unchecked) private var lastCountersCheck: UInt64 = 0
    /// Whether ``refresh()`` may trust the journal's end as the shared counters publish it:
    /// not on a network filesystem, where another machine's mapping is not this one's.
    @exclusivity(unchecked) var trustsSharedJournalEnd = false
    /// When ``refresh()`` last read the journal itself, on the monotonic clock.
    @exclusivity(unchecked) private var lastJournalCheck: UInt64 = 0
    /// The longest ``refresh()`` trusts the shared journal end without reading the journal: a
    /// process killed between its append and raising the counter leaves a record the counter
    /// does not announce, which is then found this late at the latest.
    private static let journalCheckInterval: UInt64 = 50_000_000

    /// Whether applied removals are kept in ``pendingRemovals`` for the owner to deliver; on
    /// only while someone subscribes.
    @exclusivity(unchecked) var collectsRemovals = false
    /// Removals applied since the owner last took them, in journal order.
    @exclusivity(unchecked) private(set) var pendingRemovals: [Removal] = []
    /// The highest sequence number whose removals were collected: a record is reported once,
    /// even if a resynchronisation replays it.
    @exclusivity(unchecked) private var reportedThrough: UInt64 = 0

    /// Whether the hashes of replaced and removed entries are kept for the owner (its memory
    /// tier drops their bodies); on only while that tier holds something.
    @exclusivity(unchecked) var tracksChanges = false
    /// Hashes whose version changed since the owner last took them; `nil` after a clear or a
    /// resynchronisation, meaning "anything may have changed".
    @exclusivity(unchecked) private var changedHashes: [KeyHash]? = []
    /// Pack segments retired since the owner last took them (its body store closes them);
    /// `nil` after a resynchronisation skipped records, meaning "check every open one".
    @exclusivity(unchecked) private var retiredPacks: [UInt64]? = []
    /// The last sequence number the newest checkpoint this index knows of covers: the manifest
    /// it loaded, or the seal it made.
    @exclusivity(unchecked) private var checkpointedThrough: UInt64
    /// The segment whose append lock the owner holds, and whether shared, until ``append(_:)``
    /// has written its records (see ``withAppendLock(timeout:durable:shared:repairing:access:_:)``).
    @exclusivity(unchecked) private var heldAppendLock: (segment: JournalSegment, shared: Bool)?
    /// This process's records appended under a shared lock, until reading them back applies
    /// them: their segment's generation and their numbers; and the versions they replaced then.
    /// Matched by generation too: records that landed after a seal are void, and their numbers
    /// repeat those of the next segment's first records.
    @exclusivity(unchecked) private var beingReadBack: (generation: UInt64, sequences: Set<UInt64>)?
    @exclusivity(unchecked) private var replacedByRecordsReadBack: [BodyLocation] = []
    /// Whether the last ``append(_:)`` found its records after a seal: void, to be appended again.
    @exclusivity(unchecked) private var appendLandedAfterSeal = false

    private init(directory: CacheDirectory, index: Index, cursor: JournalCursor) {
        self.directory = directory
        self.index = index
        self.cursor = cursor
        self.checkpointedThrough = cursor.lastSequence
    }

    /// The index's stamp (see ``Index/stamp()``).
    package func stamp() -> UInt64 { index.stamp() }

    /// Loads the index: the manifest, then every journal record after it.
    ///
    /// When the manifest is missing or corrupt it is rebuilt under the directory lock (see
    /// ``rebuild(_:bodies:lock:timeout:durable:force:)``); the result says how, if this process did.
    static func load(
        _ directory: CacheDirectory, bodies: any BodyStore, lock: DirectoryLock, timeout: Duration, durable: Bool
    ) throws -> (LiveIndex, recovery: Recovery?) {
        var recovery: Recovery?
        var lostPositions = 0
        // The manifest named, or its journal led through a seal to, a segment that is gone.
        // Retired by a checkpoint since we read the manifest: read the new one. If it keeps
        // happening, the manifest is stale (a power loss restored an old manifest, or kept a
        // newer segment while losing the one between): rebuild, once.
        func lostPosition() throws {
            lostPositions += 1
            if lostPositions == 3 {
                recovery =
                    try rebuild(directory, bodies: bodies, lock: lock, timeout: timeout, durable: durable, force: true)
                    ?? recovery
            } else if lostPositions > 6 {
                throw SharedCacheError(
                    .corruptData,
                    "the journal of \(directory.path) leads to segments that do not exist, even after rebuilding "
                        + "its manifest; remove the directory to start over",
                    path: directory.path)
            }
        }
        while true {
            switch try ManifestFile.read(in: directory) {
            case .valid(let header, let index):
                guard let live = try following(header, index, in: directory) else {
                    try lostPosition()
                    continue
                }
                return (live, recovery)
            case .missing, .corrupt:
                // Only the process that rebuilt it says so (another may have, while this one waited).
                recovery =
                    try rebuild(directory, bodies: bodies, lock: lock, timeout: timeout, durable: durable, force: false)
                    ?? recovery
            }
        }
    }

    /// The index a valid manifest gives, with the journal after it read; `nil` when the journal
    /// does not go on from it (its segment, or one a seal leads to, is gone).
    ///
    /// `index` is consumed: borrowed, the live index would share its storage with the caller's
    /// copy, and the first record applied would copy the whole of it (a million entries: 37 MB
    /// more at the compactor's peak).
    private static func following(
        _ header: ManifestCoding.Header, _ index: consuming Index, in directory: CacheDirectory
    ) throws -> LiveIndex? {
        guard let segment = try JournalSegment.open(header.generation, in: directory) else { return nil }
        let live = LiveIndex(directory: directory, index: index, cursor: cursor(segment, after: header))
        return try live.advance() == .mustResynchronize ? nil : live
    }

    /// A cursor at the start of the manifest's segment, past every record the manifest covers.
    private static func cursor(_ segment: JournalSegment, after header: ManifestCoding.Header) -> JournalCursor {
        JournalCursor(segment: segment, lastSequence: max(header.lastSequence, segment.header.firstSequence - 1))
    }

    /// How opening recovered an index the directory could not give whole.
    package enum Recovery: Sendable {
        /// The manifest was missing or damaged, or named segments that are gone: rebuilt from
        /// the blob files and every journal segment kept.
        case rebuiltFromBodies
        /// The journal was gone whole: it starts again after the manifest, whose entries stay.
        case journalStartedAfterManifest
    }

    /// Writes a new manifest from the blob files and every journal segment kept, or, with no
    /// segment left at all, from the valid manifest there; how it did. `nil` when another
    /// process mended it while this one waited for the lock: a valid manifest there (unless
    /// forced), or, forced, one the journal goes on from. (Forced, the second of two openers
    /// waiting rebuilt over the first's mending, from the blobs: every packed entry was lost.)
    ///
    /// Blob files are the truth for large bodies (a removal unlinks them). A packed body stays
    /// in its segment after its entry is removed, so only the journal says which are live:
    /// replaying every segment kept, from the oldest, brings back the packed entries stored
    /// within the journal's retention and no removed one; older packed entries are lost. With
    /// no segment at all (the folder was removed, or a file stood in its place), nothing newer
    /// than the manifest is left to replay: it keeps every entry it names, where a scan would
    /// lose every packed one.
    static func rebuild(
        _ directory: CacheDirectory, bodies: any BodyStore, lock: DirectoryLock, timeout: Duration, durable: Bool,
        force: Bool
    ) throws -> Recovery? {
        try lock.withExclusiveLock(timeout: timeout) {
            // Another process may have rebuilt it while we waited for the lock.
            let manifest = try ManifestFile.read(in: directory)
            if case .valid(let header, let index) = manifest {
                if !force { return nil }
                if try following(header, index, in: directory) != nil { return nil }
            }
            var generations = try JournalSegment.generations(in: directory)
            let index: Index
            let recovery: Recovery
            // A journal made anew is numbered past every record any process may have read (the
            // journal's end they all publish): processes that had the cache open report only
            // records numbered past what they already reported, and would miss the new ones.
            let published = SharedCounters.open(in: directory, creating: false)?.value(.journalSequence) ?? 0
            if generations.isEmpty, case .valid(let header, let checkpointed) = manifest {
                // Numbered on after the manifest, as a checkpoint would have gone on.
                generations = [header.generation + 1]
                try JournalSegment.create(
                    generations[0], firstSequence: max(header.lastSequence, published) + 1, in: directory,
                    durable: durable)
                (index, recovery) = (checkpointed, .journalStartedAfterManifest)
            } else {
                if generations.isEmpty {
                    generations = [1]
                    try JournalSegment.create(1, firstSequence: published + 1, in: directory, durable: durable)
                }
                (index, recovery) = (try ManifestFile.scanBodies(bodies), .rebuiltFromBodies)
            }
            // Replay from the oldest segment whose seals lead to the newest (a run of
            // consecutive generations: a power loss may have lost one in between), then seal
            // like any checkpoint. Its records are no older than the blobs they name, so
            // applying them over the scan is exact.
            var chain = [generations.last!]
            for generation in generations.reversed().dropFirst() where generation == chain[0] - 1 {
                chain.insert(generation, at: 0)
            }
            guard let segment = try JournalSegment.oldestThatOpens(among: chain, in: directory) else {
                throw SharedCacheError(.ioFailure, "the journal segment vanished during a rebuild; try again")
            }
            let live = LiveIndex(
                directory: directory, index: index,
                cursor: JournalCursor(segment: segment, lastSequence: segment.header.firstSequence - 1))
            let sealed = try LiveIndex.withAppendLock(
                timeout: timeout, durable: durable, shared: false, access: { try $0(live) }
            ) {
                try $0.seal(durable: durable)
            }
            try ManifestFile.write(
                sealed.index, generation: sealed.generation, lastSequence: sealed.lastSequence, in: directory,
                durable: durable)
            return recovery
        }
    }

    /// Picks up whatever other processes appended since the last call.
    ///
    /// Costs one atomic load when the shared counters say nothing was appended (every appender
    /// raises them after its write, before its call returns), else a size check of the journal
    /// (``FileDescriptor/sizeAndLinkCount()``) and the reads.
    ///
    /// - Parameter readingTheJournal: read the journal whatever the counters say: the watcher
    ///   does, as it is woken by the write itself, which comes before the counter's raise.
    package func refresh(readingTheJournal: Bool = false) throws {
        // Lost is asked after the load: a load that is the first touch of a file cut short
        // faults, and reads the zeros put in its place.
        if !readingTheJournal, trustsSharedJournalEnd, let counters,
            counters.value(.journalSequence) <= cursor.lastSequence, !counters.isLost
        {
            let now = Clock.monotonicNanoseconds()
            if now &- lastJournalCheck < Self.journalCheckInterval { return }
            lastJournalCheck = now
        } else {
            lastJournalCheck = Clock.monotonicNanoseconds()
        }
        if lastJournalCheck &- lastCountersCheck >= Self.journalCheckInterval {
            lastCountersCheck = lastJournalCheck
            followSharedCounters()
        }
        switch try advance() {
        case .upToDate: return
        case .stoppedAtCorruption: corruptionStops += 1
        case .mustResynchronize:
            do {
                try resynchronize()
            } catch {
                // Lost: the next call looks at the journal again rather than trust the shared
                // counter, so no put lands in a segment that is gone while the position stays lost.
                lastJournalCheck = 0
                throw error
            }
        }
    }

    /// Maps `stats` again when the counters this process raises are not the ones the others
    /// read: none could be mapped, the file was cut short under them (``SharedCounters/isLost``),
    /// or it was deleted and made anew. Until then, the others find this process's appends only
    /// at their own look at the journal, and this one reads the journal at every call. It never
    /// makes the file anew (a directory being deleted would get one back; a process opening the
    /// cache makes it), though it makes one cut short whole again, as an opening process does.
    private func followSharedCounters() {
        if let counters, counters.areShared(in: directory) { return }
        guard let current = SharedCounters.open(in: directory, creating: false) else { return }
        current.raise(.journalSequence, to: cursor.lastSequence)
        counters = current
    }

    /// - Parameter repairing: the segment whose append lock the caller holds, if any.
    private func advance(repairing locked: JournalSegment? = nil, durable: Bool = false) throws
        -> JournalCursor.Progress
    {
        try cursor.advance(in: directory, repairing: locked, durable: durable) { record, sequence in
            apply(record, sequence: sequence)
        }
    }

    /// Whether this index read past records that damage took, where no placeholder stands for
    /// them, since the last checkpoint it knows of: a process that starts from that checkpoint
    /// meets the same damage.
    package var readPastUnrepairedDamage: Bool { cursor.unrepairedLossThrough > checkpointedThrough }

    /// Whether bytes that are not whole records follow the last record read in the current
    /// segment. With the segment's append lock held no write is in progress, so they are damage
    /// or a torn write, hiding whatever follows them (a damaged length reads as a record still
    /// being written). Bytes after a seal are not: they are records appended by a process that
    /// had not read it, void, and appended again.
    package func hasBytesPastItsRecords() throws -> Bool {
        guard !cursor.isAtSealWithoutNextSegment else { return false }
        return try cursor.segment.file.sizeAndLinkCount().size > cursor.offset
    }

    /// Hands over the hashes changed since the last call; `nil` for "assume all".
    package func takeChangedHashes() -> [KeyHash]? {
        defer { changedHashes = [] }
        return changedHashes
    }

    /// Folds one record into the index, noting the removals it carries; returns the version a
    /// stored record replaced.
    ///
    /// In a version 3 segment a stored record supersedes whatever version its key has where it
    /// is applied, so every process reports the same removal; before, a `removed` record follows.
    @discardableResult
    private func apply(_ record: JournalRecord, sequence: UInt64) -> BodyLocation? {
        var isOwnReadBack = false
        if beingReadBack?.generation == cursor.segment.generation {
            isOwnReadBack = beingReadBack?.sequences.remove(sequence) != nil
        }
        if tracksChanges {
            switch record {
            case .stored(let stored): changedHashes?.append(stored.hash)
            case .removed(let removed): changedHashes?.append(removed.hash)
            case .cleared: changedHashes = nil
            case .moved(let moved): changedHashes?.append(moved.hash)
            case .sealed, .accessed, .freshened, .retired, .lost, .unknown: break
            }
        }
        if case .retired(let pack) = record { retiredPacks?.append(pack) }
        let reports = collectsRemovals && sequence > reportedThrough
        if reports {
            switch record {
            case .removed(let removed):
                pendingRemovals.append(
                    Removal(
                        hash: removed.hash, key: removed.key.map { String(decoding: $0, as: UTF8.self) },
                        reason: removed.reason, remover: removed.remover, sequence: sequence))
            case .cleared(let remover):
                for (hash, _) in index {
                    pendingRemovals.append(
                        Removal(hash: hash, key: nil, reason: .cleared, remover: remover, sequence: sequence))
                }
            case .stored, .sealed, .accessed, .freshened, .moved, .retired, .lost, .unknown:
                break
            }
            reportedThrough = sequence
        }
        let replaced = index.apply(record)
        guard case .stored(let stored) = record, let replaced = replaced?.location, replaced != stored.location else {
            return nil
        }
        if reports && cursor.segment.header.numbersByPlace {
            pendingRemovals.append(
                Removal(
                    hash: stored.hash, key: String(decoding: stored.key, as: UTF8.self), reason: .superseded,
                    remover: stored.writer, sequence: sequence))
        }
        if isOwnReadBack { replacedByRecordsReadBack.append(replaced) }
        return replaced
    }

    /// Counts a record this process appended, before it is applied.
    private func count(_ record: JournalRecord) {
        guard let counters else { return }
        switch record {
        case .stored: counters.add(.stores)
        case .removed(let removed): counters.addRemovals(removed.reason)
        case .cleared: counters.addRemovals(.cleared, UInt64(index.count))
        case .sealed, .accessed, .freshened, .moved, .retired, .lost, .unknown: break
        }
    }

    /// Whether pack segments were retired (or may have been) since the last hand-over.
    package var hasRetiredPacks: Bool { retiredPacks?.isEmpty != true }

    /// Hands over the pack segments retired since the last call; `nil` means any may have been.
    package func takeRetiredPacks() -> [UInt64]? {
        defer { retiredPacks = [] }
        return retiredPacks
    }

    /// Hands over the removals collected so far.
    package func takePendingRemovals() -> [Removal] {
        defer { pendingRemovals = [] }
        return pendingRemovals
    }

    /// Reloads from the manifest after the journal position was lost (retired or truncated).
    private func resynchronize() throws {
        // Checkpoints that follow each other quickly (a short retention) can retire the segment
        // a manifest names before we open it, or the next before we reach it; each attempt reads
        // the newest manifest again. (Not under the directory lock: this runs under the
        // process's state mutex, which a checkpoint holding that lock waits for.)
        for _ in 0..<16 where try reload() { return }
        // Nothing to repair where the directory itself was removed or replaced.
        if directory.isRemovedOrReplaced { throw SharedCacheError.removedOrReplaced(directory.path) }
        throw SharedCacheError(
            .corruptData,
            "lost the journal position of \(directory.path) and could not find a manifest and segment that agree; "
                + "run `sharedcache verify --repair`")
    }

    /// One attempt of ``resynchronize()``: whether the manifest and its segment agreed and the
    /// journal could be read from there to its end.
    private func reload() throws -> Bool {
        guard case .valid(let header, let fresh) = try ManifestFile.read(in: directory),
            let segment = try JournalSegment.open(header.generation, in: directory)
        else { return false }
        if collectsRemovals {
            // The records between our position and the manifest are gone: report every
            // version we knew that the manifest no longer has.
            for (hash, entry) in index where !(fresh[hash].map { $0.isSameVersion(as: entry) } ?? false) {
                pendingRemovals.append(Removal(hash: hash, key: nil, reason: .unknown, remover: nil, sequence: nil))
            }
            reportedThrough = max(reportedThrough, header.lastSequence)
        }
        earlierRepairs += cursor.repairs
        if tracksChanges { changedHashes = nil }
        retiredPacks = nil
        index = fresh
        cursor = Self.cursor(segment, after: header)
        checkpointedThrough = cursor.lastSequence
        resynchronizations += 1
        return try advance() != .mustResynchronize
    }

    /// One step of taking the append lock: lock this segment, or it is done.
    package enum AppendStep<Result> {
        case lock(JournalSegment)
        case done(Result)
    }

    /// Runs `body` holding the append lock of the newest segment: held exclusively, with every
    /// record before the end applied; held shared, as of the catch-up before locking (or, on a
    /// pass after a void append, as of its read-back).
    ///
    /// `access` runs what it is given with exclusive use of this index (the owner's mutex, for
    /// the engine). The lock is waited for between two such accesses, never inside one: a wait
    /// on another process must not hold up this process's readers. Threads of one process
    /// share the segment's descriptor, and with it the lock, so the caller also keeps other
    /// appenders of the process out while this runs.
    ///
    /// An ``append(_:)`` in `body` releases the lock once its records are written: applying them
    /// needs only exclusive use of this index, and every microsecond the lock is held is one
    /// in which a preempted holder keeps every other process's puts waiting. Held shared, if the
    /// records landed after a seal (void), `body` runs again, on the segment the journal goes
    /// on in.
    ///
    /// - Parameters:
    ///   - shared: hold the lock shared, so that other processes append at the same moment
    ///     (version 3 segments): for records whose effect is decided where they are applied
    ///     (stored, accessed), never for a decision that must stand (a removal of the current
    ///     version, a seal). Nothing is repaired then, but for a seal whose checkpoint died
    ///     before making the next segment, which takes the lock exclusively.
    ///   - repairing: with the lock exclusive, repair damage at the end of the journal first.
    package static func withAppendLock<Result>(
        timeout: Duration, durable: Bool, shared: Bool, repairing: Bool = true,
        access: ((LiveIndex) throws -> AppendStep<Result>) throws -> AppendStep<Result>,
        _ body: (LiveIndex) throws -> Result
    ) throws -> Result {
        try withoutActuallyEscaping(body) { body in
            try appendLoop(
                timeout: timeout, durable: durable, shared: shared, repairing: repairing, access: access, body)
        }
    }

    private static func appendLoop<Result>(
        timeout: Duration, durable: Bool, shared: Bool, repairing: Bool,
        access: ((LiveIndex) throws -> AppendStep<Result>) throws -> AppendStep<Result>,
        _ body: @escaping (LiveIndex) throws -> Result
    ) throws -> Result {
        // Catch up before locking, so the lock is held only for what other processes append
        // in the meantime: a holder preempted among busy processes keeps everyone waiting.
        var step = try access { live in
            try live.refresh()
            return .lock(live.cursor.segment)
        }
        // A segment whose seal has no next segment yet, which only an exclusive holder makes.
        var needsExclusive: JournalSegment?
        while case .lock(let segment) = step {
            // A segment of an older version is only ever sealed: its appenders knew nothing of
            // sharing.
            let kind: LockKind =
                shared && segment.header.numbersByPlace && needsExclusive !== segment ? .shared : .exclusive
            guard try segment.file.lock(kind, timeout: timeout) else {
                throw appendLockTimeout(segment, timeout: timeout)
            }
            var released = false
            defer { if !released { segment.file.unlock() } }
            step = try access { live in
                live.heldAppendLock = (segment, kind == .shared)
                defer {
                    live.releaseAppendLock()
                    released = true
                }
                // Held exclusively, catch up again: no record can land after this one's without
                // this process knowing. Behind a retired segment, reload from the manifest and
                // lock where it leads. (Held shared, the catch-up before locking is enough: a
                // record that lands after a seal this process had not read is found so when read
                // back, and appended again; see `append(_:)`.)
                if kind == .exclusive,
                    try live.advance(repairing: repairing ? segment : nil, durable: durable) == .mustResynchronize
                {
                    try live.resynchronize()
                    return .lock(live.cursor.segment)
                }
                // Sealed meanwhile (read by that catch-up, or by another thread of this process
                // since the one before locking): appending here would put records after a seal,
                // where no reader looks. Lock the next segment.
                if live.cursor.segment !== segment { return .lock(live.cursor.segment) }
                // Its checkpoint died before making the next segment: make it, exclusively.
                if kind == .shared, live.cursor.isAtSealWithoutNextSegment {
                    needsExclusive = segment
                    return .lock(segment)
                }
                live.appendLandedAfterSeal = false
                let result = try body(live)
                // Void (after a seal): append again where the journal goes on.
                if live.appendLandedAfterSeal { return .lock(live.cursor.segment) }
                return .done(result)
            }
        }
        guard case .done(let result) = step else { preconditionFailure("the loop ends only when done") }
        return result
    }

    /// What an ``append(_:)`` did.
    package struct Appended<Decision> {
        package var decision: Decision
        /// The segment the records went to (for a durable caller to flush, outside the owner's
        /// mutex); `nil` when there were none.
        package var segment: JournalSegment?
        /// The versions the stored records among them replaced where they were applied, whose
        /// bodies the caller reclaims.
        package var replaced: [BodyLocation] = []
    }

    /// Appends the records `decide` returns, deciding from the index as it is; the caller
    /// holds the append lock (see ``withAppendLock(timeout:durable:shared:repairing:access:_:)``).
    ///
    /// - Parameter decide: sees the index with every earlier record applied (held shared, as of
    ///   the catch-up just before locking); returns the records to append (none is fine), which
    ///   are then applied, once written and the append lock released (this process's other
    ///   threads wait for the owner's mutex meanwhile). Held shared, they are read back from the
    ///   journal with whatever landed before them; if a seal did, they are void, and the
    ///   caller's loop (``withAppendLock(timeout:durable:shared:repairing:access:_:)``) appends
    ///   them again where the journal goes on. Throws ``UnconfirmedAppend`` if the read-back
    ///   can tell neither.
    package func append<Decision>(_ decide: (Index) throws -> ([JournalRecord], Decision)) throws -> Appended<Decision>
    {
        let (records, decision) = try decide(index)
        guard !records.isEmpty else { return Appended(decision: decision) }
        let segment = cursor.segment
        // Records are encoded in the current version; an older segment is only ever sealed
        // (by the upgrade), so this cannot happen unless something else wrote the journal.
        guard segment.header.major == FormatVersion.current.major else {
            throw SharedCacheError(
                .unsupportedFormat,
                "\(segment.path) is a journal segment of format version \(segment.header.major), "
                    + "which this SharedCache does not append to; run `sharedcache --dir "
                    + "\(SharedCacheError.shellWord(directory.path)) compact`, "
                    + "whose checkpoint goes on in a segment of this version",
                path: segment.path)
        }
        // One append a hold: the first releases the lock.
        guard let held = heldAppendLock, held.segment === segment else {
            preconditionFailure("appending without the append lock")
        }
        var replaced: [BodyLocation] = []
        if held.shared {
            let landed = try cursor.appendConcurrently(records)
            if let last = landed.sequences.last { publishJournalEnd(through: last) }
            // Written: what other processes append from now on comes after these records.
            releaseAppendLock()
            if landed.landedAtPosition {
                replaced = apply(records, numbered: landed.sequences)
            } else {
                // Others' records landed first: read them back with these, in journal order.
                beingReadBack = (segment.generation, Set(landed.sequences))
                defer {
                    beingReadBack = nil
                    replacedByRecordsReadBack = []
                }
                var unread: (any Error)?
                do {
                    try refresh(readingTheJournal: true)
                } catch {
                    unread = error
                }
                if beingReadBack?.sequences.isEmpty == false {
                    // A checkpoint this process had not read sealed the segment before they
                    // landed: no reader reads past a seal, so they are void, and the loop in
                    // `withAppendLock` appends them again where the journal goes on.
                    if cursor.segment.generation != segment.generation || cursor.isAtSealWithoutNextSegment {
                        appendLandedAfterSeal = true
                        return Appended(decision: decision)
                    }
                    // Not found, nor a seal before them: in effect or void, nobody can say yet.
                    throw UnconfirmedAppend(
                        underlying: unread
                            ?? SharedCacheError(
                                .corruptData,
                                "the journal could not be read as far as this put's record, so whether the entry "
                                    + "was stored is not known; get it to see, or put it again", path: segment.path))
                }
                replaced = replacedByRecordsReadBack
                records.forEach(count)
            }
        } else {
            let sequences = try cursor.append(records, durable: false)
            publishJournalEnd(through: cursor.lastSequence)
            releaseAppendLock()
            replaced = apply(records, numbered: sequences)
        }
        if segment.header.numbersByPlace, !replaced.isEmpty {
            counters?.addRemovals(.superseded, UInt64(replaced.count))
        }
        return Appended(decision: decision, segment: segment, replaced: replaced)
    }

    /// Counts and applies records this process appended, as they landed; returns the versions
    /// their stored records replaced.
    private func apply(_ records: [JournalRecord], numbered sequences: [UInt64]) -> [BodyLocation] {
        zip(records, sequences).compactMap { record, sequence in
            count(record)
            return apply(record, sequence: sequence)
        }
    }

    /// Seals the current segment, starts the next, and returns the index as of the seal; the
    /// caller holds the append lock and the directory lock.
    package func seal(durable: Bool) throws -> (index: Index, generation: UInt64, lastSequence: UInt64) {
        let next = cursor.segment.generation + 1
        // Flushed whatever `durable` says, before the next segment exists: a power loss must
        // never keep segment G+1 (and what is appended to it) while losing the seal naming it,
        // or the next checkpoint would seal G again and find a G+1 that follows another seal.
        _ = try cursor.append([.sealed(nextGeneration: next)], durable: true)
        publishJournalEnd(through: cursor.lastSequence)
        apply(.sealed(nextGeneration: next), sequence: cursor.lastSequence)
        try JournalSegment.create(next, firstSequence: cursor.lastSequence + 1, in: directory, durable: durable)
        let snapshot = index
        let lastSequence = cursor.lastSequence
        checkpointedThrough = lastSequence
        // Step past the seal, applying what follows: the new segment exists, and a process
        // whose reads already followed the seal into it may have appended there.
        _ = try advance()
        return (snapshot, next, lastSequence)
    }

    /// Releases the append lock ``withAppendLock(timeout:durable:shared:repairing:access:_:)``
    /// took, if it is still held.
    private func releaseAppendLock() {
        heldAppendLock?.segment.file.unlock()
        heldAppendLock = nil
    }

    /// Tells every process the journal now ends at least at the record numbered `sequence`
    /// (this index's last, unless records were appended at once and not yet read back). A
    /// record that landed after a seal raises it past the journal's end in the next segment,
    /// which only has readers read the journal until the journal gets there.
    private func publishJournalEnd(through sequence: UInt64) {
        counters?.raise(.journalSequence, to: sequence)
    }

    private static func appendLockTimeout(_ segment: JournalSegment, timeout: Duration) -> SharedCacheError {
        let path = segment.path
        return SharedCacheError(
            .lockTimeout,
            "another process has held the journal's append lock for more than \(timeout) (it is probably "
                + "stopped or hung); find it with `fuser \(path)`; reads keep working meanwhile",
            path: path)
    }
}
