package import SharedCacheFormat
import SharedCachePlatform

/// Which entries a compaction pass removes, decided from an index alone (no I/O).
///
/// Policy: every expired entry first; then, if the directory is still over its size or entry
/// limit, the least recently used entries until it is at or below the low-water mark: 90 % of
/// each limit (as ccache trims), so a directory at its limit is not compacted on every put.
/// Recency is the last access journaled by any process (see ``Configuration/recencyInterval``),
/// or the time of the put; ties go to the lower hash, so every compactor decides alike.
///
/// Over the size limit, an entry larger than the low-water mark goes before any other: no pass
/// could keep it, and by recency alone a new one would first take every older entry with it.
package struct EvictionPlan: Sendable {
    package struct Victim: Sendable, Equatable {
        package var hash: KeyHash
        package var entry: IndexEntry
        package var reason: RemovalReason
    }

    package static let lowWaterPercent: UInt64 = 90

    package private(set) var victims: [Victim] = []

    package init(index: Index, now: Int64, sizeLimit: UInt64, entryLimit: UInt64) {
        var bytes = index.totalBytes
        var count = UInt64(index.count)
        let lowWaterBytes = sizeLimit * Self.lowWaterPercent / 100
        // In the same pass: the live entries larger than the low-water mark, which go only if
        // the directory is still over its size limit once the expired are gone.
        var tooLarge: [Victim] = []
        for (hash, entry) in index {
            if entry.isExpired(at: now) {
                victims.append(Victim(hash: hash, entry: entry, reason: .expired))
                bytes -= entry.bodySize
                count -= 1
            } else if sizeLimit > 0 && entry.bodySize > lowWaterBytes {
                tooLarge.append(Victim(hash: hash, entry: entry, reason: .size))
            }
        }
        victims.sort { $0.entry.expiresAt < $1.entry.expiresAt }

        let largestKept = sizeLimit > 0 && bytes > sizeLimit ? lowWaterBytes : .max
        if largestKept < .max {
            for victim in tooLarge {
                bytes -= victim.entry.bodySize
                count -= 1
            }
            victims += tooLarge.sorted { $0.hash < $1.hash }
        }

        let overSize = sizeLimit > 0 && bytes > sizeLimit
        let overCount = entryLimit > 0 && count > entryLimit
        guard overSize || overCount else { return }
        let bytesToFree = overSize ? bytes - lowWaterBytes : 0
        let entriesToFree = overCount ? count - entryLimit * Self.lowWaterPercent / 100 : 0

        // Find the recency cutoff from (access, size) pairs alone: 16 bytes per entry instead of
        // copying whole entries, which matters at a million of them.
        var recency: [(lastAccess: Int64, size: UInt64)] = []
        recency.reserveCapacity(Int(count))
        let isCandidate = { (entry: IndexEntry) in !entry.isExpired(at: now) && entry.bodySize <= largestKept }
        for (_, entry) in index where isCandidate(entry) {
            recency.append((entry.lastAccess, entry.bodySize))
        }
        recency.sort { $0.lastAccess < $1.lastAccess }
        var freedBytes: UInt64 = 0
        var freedEntries: UInt64 = 0
        var taken = 0
        while taken < recency.count && (freedBytes < bytesToFree || freedEntries < entriesToFree) {
            freedBytes += recency[taken].size
            freedEntries += 1
            taken += 1
        }
        guard taken > 0 else { return }
        let cutoff = recency[taken - 1].lastAccess
        let atCutoff = recency[..<taken].reversed().prefix { $0.lastAccess == cutoff }.count

        var older: [Victim] = []
        var ties: [Victim] = []
        for (hash, entry) in index where isCandidate(entry) && entry.lastAccess <= cutoff {
            let victim = Victim(hash: hash, entry: entry, reason: .size)
            if entry.lastAccess < cutoff { older.append(victim) } else { ties.append(victim) }
        }
        older.sort { ($0.entry.lastAccess, $0.hash) < ($1.entry.lastAccess, $1.hash) }
        ties.sort { $0.hash < $1.hash }
        victims += older + ties.prefix(atCutoff)
    }

    package var bytes: UInt64 { victims.reduce(0) { $0 + $1.entry.bodySize } }
}
