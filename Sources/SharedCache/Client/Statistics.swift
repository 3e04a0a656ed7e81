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
    /// Whether opening found the manifest missing or corrupt and rebuilt it from the blobs.
    public var rebuiltOnOpen: Bool = false
}
