import SharedCacheFormat
import SharedCachePlatform

extension Compactor {
    /// How long after its last write a finished pack segment is left alone: a put writes its
    /// record a moment before it journals it, and the segment must not go in between.
    static let packSettleTime: Int64 = 60 * 1000

    /// Deletes the pack segments that no entry refers to any more and that nobody appends to:
    /// the space of every packed body evicted, removed or replaced in them, in one unlink per
    /// segment rather than one per entry.
    ///
    /// Each segment is locked first (so nobody can take it on meanwhile), the index is brought
    /// up to date, and the segments it does not name are journaled as retired (every process
    /// then closes its descriptor of them, which is what gives the space back) and deleted.
    ///
    /// - Returns: how many segments went, and their bytes.
    func retireEmptyPacks() throws(SharedCacheError) -> (count: Int, bytes: Int64) {
        try cache.directory.perform("retiring empty pack segments") {
            let finished = try cache.bodies.finishedPacks(modifiedBefore: Clock.nowMilliseconds() - Self.packSettleTime)
            guard !finished.isEmpty else { return (0, 0) }
            // Locked, a finished segment gains no entries: whatever names it is in the journal now.
            let live = try cache.withState { state in
                try state.live.refresh()
                var packs = Set<UInt64>()
                for (_, entry) in state.live.index where entry.location.isPacked { packs.insert(entry.location.pack) }
                return packs
            }
            let empty = finished.filter { !live.contains($0.pack) }
            guard !empty.isEmpty else { return (0, 0) }
            try cache.commit { _ in (empty.map { JournalRecord.retired(pack: $0.pack) }, ()) }
            for pack in empty { try cache.bodies.delete(pack) }
            return (empty.count, empty.reduce(0) { $0 + $1.size })
        }
    }
}
