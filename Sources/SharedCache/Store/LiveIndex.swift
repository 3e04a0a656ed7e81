/// The index of a cache directory kept current by following the journal.
///
/// Loading reads the manifest and replays the journal from the position it covers. Every cache
/// call first ``refresh()``es, which costs one `fstat` when no process appended anything.
/// Changes go through ``commit(timeout:durable:_:)``: under the segment's append lock, catch up,
/// decide the records from the now-current index, append them in one write, apply them.
///
/// Not thread-safe: ``SharedCache`` keeps it inside its `Locked` state.
final class LiveIndex {
    let directory: CacheDirectory
    private(set) var index: Index
    private(set) var cursor: JournalCursor
    /// Times the position was lost and the index reloaded from the manifest.
    private(set) var resynchronizations = 0
    /// Times a damaged journal record stopped reading until a writer repaired it.
    private(set) var corruptionStops = 0
    /// Torn or corrupt tails truncated while appending, over every cursor this index used.
    private var earlierRepairs = 0
    var journalRepairs: Int { earlierRepairs + cursor.repairs }

    /// The directory's shared activity counters; appends by this process count into them.
    var counters: SharedCounters?

    /// Whether applied removals are kept in ``pendingRemovals`` for the owner to deliver; on
    /// only while someone subscribes.
    var collectsRemovals = false
    /// Removals applied since the owner last took them, in journal order.
    private(set) var pendingRemovals: [Removal] = []
    /// The highest sequence number whose removals were collected: a record is reported once,
    /// even if a resynchronisation replays it.
    private var reportedThrough: UInt64 = 0

    /// Whether the hashes of replaced and removed entries are kept for the owner (its memory
    /// tier drops their bodies); on only while that tier holds something.
    var tracksChanges = false
    /// Hashes whose version changed since the owner last took them; `nil` after a clear or a
    /// resynchronisation, meaning "anything may have changed".
    private var changedHashes: [KeyHash]? = []

    private init(directory: CacheDirectory, index: Index, cursor: JournalCursor) {
        self.directory = directory
        self.index = index
        self.cursor = cursor
    }

    /// Loads the index: the manifest, then every journal record after it.
    ///
    /// When the manifest is missing or corrupt it is rebuilt from the blobs under the directory
    /// lock (see ``ManifestFile/scanBlobs(_:)``); the report says so.
    static func load(
        _ directory: CacheDirectory, lock: DirectoryLock, timeout: Duration, durable: Bool
    ) throws -> (LiveIndex, rebuilt: Bool) {
        var rebuilt = false
        var missingSegments = 0
        while true {
            switch try ManifestFile.read(in: directory) {
            case .valid(let header, let index):
                guard let segment = try JournalSegment.open(header.generation, in: directory) else {
                    // Retired by a checkpoint since we read the manifest: read the new one. If the
                    // manifest keeps naming a segment that is gone, it is stale (a power loss
                    // restored an old manifest): rebuild.
                    missingSegments += 1
                    if missingSegments >= 3 {
                        try rebuild(directory, lock: lock, timeout: timeout, durable: durable, force: true)
                        rebuilt = true
                    }
                    continue
                }
                let live = LiveIndex(directory: directory, index: index, cursor: cursor(segment, after: header))
                if try live.advance(repairing: false) == .mustResynchronize { continue }
                return (live, rebuilt)
            case .missing, .corrupt:
                try rebuild(directory, lock: lock, timeout: timeout, durable: durable, force: false)
                rebuilt = true
            }
        }
    }

    /// A cursor at the start of the manifest's segment, past every record the manifest covers.
    private static func cursor(_ segment: JournalSegment, after header: ManifestCoding.Header) -> JournalCursor {
        JournalCursor(segment: segment, lastSequence: max(header.lastSequence, segment.header.firstSequence - 1))
    }

    /// Writes a new manifest from the blob headers and the newest journal segment.
    private static func rebuild(
        _ directory: CacheDirectory, lock: DirectoryLock, timeout: Duration, durable: Bool, force: Bool
    ) throws {
        try lock.withExclusiveLock(timeout: timeout) {
            // Another process may have rebuilt it while we waited for the lock.
            if !force, case .valid = try ManifestFile.read(in: directory) { return }
            let store = BlobStore(directory: directory)
            let index = try ManifestFile.scanBlobs(store)
            let newest = try JournalSegment.generations(in: directory).last ?? 0
            if try JournalSegment.open(newest, in: directory) == nil {
                try JournalSegment.create(max(newest, 1), firstSequence: 1, in: directory, durable: durable)
            }
            // Replay the newest segment over the scan: its records are no older than the
            // blobs, so applying them is exact; then seal it like any checkpoint.
            guard let segment = try JournalSegment.open(max(newest, 1), in: directory) else {
                throw SharedCacheError(.ioFailure, "the journal segment vanished during a rebuild; try again")
            }
            let live = LiveIndex(
                directory: directory, index: index,
                cursor: JournalCursor(segment: segment, lastSequence: segment.header.firstSequence - 1))
            let sealed = try live.seal(timeout: timeout, durable: durable)
            try ManifestFile.write(
                sealed.index, generation: sealed.generation, lastSequence: sealed.lastSequence, in: directory,
                durable: durable)
        }
    }

    /// Picks up whatever other processes appended since the last call.
    func refresh() throws {
        switch try advance(repairing: false) {
        case .upToDate: return
        case .stoppedAtCorruption: corruptionStops += 1
        case .mustResynchronize: try resynchronize()
        }
    }

    private func advance(repairing: Bool, durable: Bool = false) throws -> JournalCursor.Progress {
        try cursor.advance(in: directory, repairing: repairing, durable: durable) { record, sequence in
            apply(record, sequence: sequence)
        }
    }

    /// Hands over the hashes changed since the last call; `nil` for "assume all".
    func takeChangedHashes() -> [KeyHash]? {
        defer { changedHashes = [] }
        return changedHashes
    }

    /// Folds one record into the index, first noting the removals it carries.
    private func apply(_ record: JournalRecord, sequence: UInt64) {
        if tracksChanges {
            switch record {
            case .stored(let stored): changedHashes?.append(stored.hash)
            case .removed(let removed): changedHashes?.append(removed.hash)
            case .cleared: changedHashes = nil
            case .sealed, .accessed, .freshened, .unknown: break
            }
        }
        if collectsRemovals && sequence > reportedThrough {
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
            case .stored, .sealed, .accessed, .freshened, .unknown:
                break
            }
            reportedThrough = sequence
        }
        index.apply(record)
    }

    /// Counts a record this process appended, before it is applied.
    private func count(_ record: JournalRecord) {
        guard let counters else { return }
        switch record {
        case .stored: counters.add(.stores)
        case .removed(let removed): counters.addRemovals(removed.reason)
        case .cleared: counters.addRemovals(.cleared, UInt64(index.count))
        case .sealed, .accessed, .freshened, .unknown: break
        }
    }

    /// Hands over the removals collected so far.
    func takePendingRemovals() -> [Removal] {
        defer { pendingRemovals = [] }
        return pendingRemovals
    }

    /// Reloads from the manifest after the journal position was lost (retired or truncated).
    private func resynchronize() throws {
        for _ in 0..<8 {
            guard case .valid(let header, let fresh) = try ManifestFile.read(in: directory),
                let segment = try JournalSegment.open(header.generation, in: directory)
            else { continue }
            if collectsRemovals {
                // The records between our position and the manifest are gone: report every
                // version we knew that the manifest no longer has.
                for (hash, entry) in index where fresh[hash]?.blobID != entry.blobID {
                    pendingRemovals.append(Removal(hash: hash, key: nil, reason: .unknown, remover: nil, sequence: nil))
                }
                reportedThrough = max(reportedThrough, header.lastSequence)
            }
            earlierRepairs += cursor.repairs
            if tracksChanges { changedHashes = nil }
            index = fresh
            cursor = Self.cursor(segment, after: header)
            resynchronizations += 1
            if try advance(repairing: false) != .mustResynchronize { return }
        }
        throw SharedCacheError(
            .corruptData,
            "lost the journal position of \(directory.path) and could not find a manifest and segment that agree; "
                + "run `sharedcache verify --repair`")
    }

    /// Appends the records `decide` returns, deciding from the index as it is under the lock.
    ///
    /// - Parameter decide: sees the index with every earlier record applied; returns the
    ///   records to append (none is fine), which are then applied.
    /// - Returns: what `decide` returned alongside its records.
    func commit<Decision>(
        timeout: Duration, durable: Bool, _ decide: (Index) throws -> ([JournalRecord], Decision)
    ) throws -> Decision {
        try withAppendLock(timeout: timeout, durable: durable) {
            let (records, decision) = try decide(index)
            if !records.isEmpty {
                let first = cursor.lastSequence + 1
                try cursor.append(records, durable: durable)
                for (offset, record) in records.enumerated() {
                    count(record)
                    apply(record, sequence: first + UInt64(offset))
                }
            }
            return decision
        }
    }

    /// Runs `body` holding the append lock of the newest segment, with every record before the
    /// end applied.
    private func withAppendLock<Result>(timeout: Duration, durable: Bool, _ body: () throws -> Result) throws -> Result {
        while true {
            // Catch up before locking, so the lock is held only for what other processes append
            // in the meantime: a holder preempted among busy processes keeps everyone waiting.
            try refresh()
            let segment = cursor.segment
            try lockSegment(segment, timeout: timeout)
            defer { FileLock.unlock(segment.file) }
            // Behind a retired segment: reload from the manifest, then lock where it leads.
            // Appending here would put records after a seal, where no reader looks.
            if try advance(repairing: true, durable: durable) == .mustResynchronize {
                try resynchronize()
                continue
            }
            // A checkpoint sealed the segment we locked; move to the next one and lock that.
            if cursor.segment !== segment { continue }
            return try body()
        }
    }

    /// Seals the current segment, starts the next, and returns the index as of the seal.
    ///
    /// The caller holds the directory lock; the segment's append lock is held only for the seal.
    func seal(timeout: Duration, durable: Bool) throws -> (index: Index, generation: UInt64, lastSequence: UInt64) {
        try withAppendLock(timeout: timeout, durable: durable) {
            let next = cursor.segment.generation + 1
            try cursor.append([.sealed(nextGeneration: next)], durable: durable)
            apply(.sealed(nextGeneration: next), sequence: cursor.lastSequence)
            try JournalSegment.create(next, firstSequence: cursor.lastSequence + 1, in: directory, durable: durable)
            let snapshot = index
            let lastSequence = cursor.lastSequence
            // Step past the seal, applying what follows: the new segment exists, and a process
            // whose reads already followed the seal into it may have appended there.
            _ = try advance(repairing: false)
            return (snapshot, next, lastSequence)
        }
    }

    private func lockSegment(_ segment: JournalSegment, timeout: Duration) throws {
        guard try FileLock.lock(segment.file, .exclusive, timeout: timeout) else {
            let path = "\(directory.path)/\(JournalSegment.name(segment.generation))"
            throw SharedCacheError(
                .lockTimeout,
                "another process has held the journal's append lock for more than \(timeout) (it is probably "
                    + "stopped or hung); find it with `fuser \(path)`; reads keep working meanwhile",
                path: path)
        }
    }
}
