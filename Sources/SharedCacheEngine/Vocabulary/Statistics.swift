public import SharedCacheFormat
import SharedCachePlatform
/// A snapshot of a cache directory and of this process's use of it.
public struct Statistics: Sendable, Hashable {
    /// Live entries in the directory, as this process's index sees them.
    public var entryCount: Int
    /// Sum of their body sizes.
    public var totalBytes: UInt64
    /// The directory's shared size limit (0 for none).
    public var sizeLimit: UInt64
    /// The journal segment being appended to.
    public var journalGeneration: UInt64
    /// The sequence number of the last journal record applied.
    public var journalSequence: UInt64

    /// Gets served by this process.
    public var hits: Int = 0
    /// Gets that found nothing (or only an expired or damaged entry).
    public var misses: Int = 0
    /// Puts completed by this process.
    public var stores: Int = 0
    /// Entries this process removed (`remove`, `clear`, discarding a damaged blob).
    public var removals: Int = 0
    /// Blobs that failed a check on read and were discarded.
    public var damagedBlobs: Int = 0
    /// Torn or corrupt journal tails this process truncated while appending.
    public var journalRepairs: Int = 0
    /// Times this process lost its journal position and reloaded from the manifest.
    public var resynchronizations: Int = 0
    /// Fetches answered from the cache without a request (fresh, or offline).
    public var fetchHits: Int = 0
    /// Conditional requests answered 304, served from the pinned body.
    public var revalidations: Int = 0
    /// Responses received with a body (200 and other statuses).
    public var downloads: Int = 0
    /// Requests sent without validators because the stored body could not be pinned first.
    public var withheldValidators: Int = 0
    /// Requests repeated unconditionally because a 304 arrived and the pinned body failed its check.
    public var unconditionalRetries: Int = 0
    /// Whether opening rebuilt the manifest: it was missing or corrupt (rebuilt from the blobs
    /// and the journal), or the journal was gone (the journal starts again after it).
    public var rebuiltOnOpen: Bool = false
    /// What every process using the directory did; `nil` if the counters file is unusable.
    public var directory: DirectoryActivity?
}

public import Foundation

/// What every process using a directory did, from counters they share (`<root>/stats`).
///
/// Each count is exact, except that a process killed between an operation and its count loses
/// that one count. Entry and byte totals are not counted here: they come from the index.
public struct DirectoryActivity: Sendable, Hashable {
    /// When the counters started (the directory's creation).
    public var since: Date
    /// Reads that found an entry, by every process.
    public var hits: UInt64
    /// Reads that found none, by every process.
    public var misses: UInt64
    /// Puts and stored HTTP responses, by every process.
    public var stores: UInt64
    /// Conditional requests answered 304 (the HTTP client).
    public var revalidations: UInt64
    /// Responses with a body the HTTP client received.
    public var downloads: UInt64
    /// Conditional requests the HTTP client sent without validators: the stored body could not be pinned.
    public var withheldValidators: UInt64
    /// Requests the HTTP client repeated unconditionally: a 304 arrived and the pinned body failed its check.
    public var unconditionalRetries: UInt64
    /// Removals by reason: evictions (expired, size), removes, clears, supersessions, discards.
    public var removals: [RemovalReason: UInt64]
    /// Compaction passes, by any compactor.
    public var compactions: UInt64
    /// When a compaction pass last finished; `nil` if none has.
    public var lastCompaction: Date?

    package init(_ counters: SharedCounters) {
        since = Date(millisecondsSince1970: counters.createdAt)
        hits = counters.value(.hits)
        misses = counters.value(.misses)
        stores = counters.value(.stores)
        revalidations = counters.value(.revalidations)
        downloads = counters.value(.downloads)
        withheldValidators = counters.value(.withheldValidators)
        unconditionalRetries = counters.value(.unconditionalRetries)
        var removals: [RemovalReason: UInt64] = [:]
        for reason in RemovalReason.allCases where reason != .unknown { removals[reason] = counters.removals(reason) }
        self.removals = removals
        compactions = counters.value(.compactions)
        let last = counters.value(.lastCompactionAt)
        lastCompaction = last == 0 ? nil : Date(millisecondsSince1970: Int64(last))
    }
}
