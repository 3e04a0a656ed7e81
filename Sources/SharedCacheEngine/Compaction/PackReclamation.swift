#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
import SharedCachePlatform

/// What reclaiming pack segments did in one pass.
public struct PackReclamation: Sendable, Hashable {
    /// Segments deleted because no entry was left in them.
    public var segmentsRetired = 0
    /// Their bytes, given back once every process closed them.
    public var bytesReclaimed: Int64 = 0
    /// Live entries copied out of mostly-dead segments first.
    public var entriesMoved = 0
}

extension Compactor {
    /// How long after its last write a finished pack segment is left alone, in milliseconds: a
    /// put writes its record a moment before it journals it, and the segment must not go in
    /// between. Debug builds take `SHAREDCACHE_PACK_SETTLE_MS` (a test seam, like the
    /// failpoints), so that a stress run sees segments reclaimed within its minutes.
    static let packSettleTime: Int64 = {
        #if DEBUG
        if let text = getenv("SHAREDCACHE_PACK_SETTLE_MS").map({ String(cString: $0) }), let value = Int64(text) {
            return value
        }
        #endif
        return 60 * 1000
    }()
    /// A finished segment whose live records fill less than this share of it is compacted:
    /// they are copied to a segment of this process's, and the old one goes whole. Eviction
    /// takes the least recently used entries, which sit together in the oldest segments, so
    /// one pass's evictions leave a segment about a third dead; compacting it then copies two
    /// bytes per byte freed. (Bitcask merges at 40 % dead, for a store that is never evicted.)
    static let packLiveRatioToCompact = 0.7
    /// At most this many bytes of live records are copied per pass, so a pass stays short.
    static let packBytesToMovePerPass: Int64 = 256 << 20

    /// Gives back the space of packed bodies that were evicted, removed or replaced, a segment
    /// at a time (Bitcask's merge, CacheLib's region reclaim): one unlink per segment, not per
    /// entry.
    ///
    /// Only finished segments, whose writer is gone or done with them, are touched, each locked
    /// first so nobody takes it on meanwhile, and only once unwritten for ``packSettleTime``.
    /// A segment with no entry left is journaled as retired (every process then closes its
    /// descriptor, which gives the space back) and deleted. A segment mostly dead has its live
    /// records copied to this process's own segment first, and each copy journaled as a move
    /// that applies only if the entry is still that version there: a put or removal meanwhile
    /// wins, and a reader that looked the entry up before the move reads the old record, which
    /// stays valid until the segment goes.
    func reclaimPacks(shouldStop: () -> Bool) throws(SharedCacheError) -> PackReclamation {
        try cache.directory.perform("reclaiming pack segments") {
            var result = PackReclamation()
            let finished = try cache.bodies.finishedPacks(modifiedBefore: Clock.nowMilliseconds() - Self.packSettleTime)
            guard !finished.isEmpty else { return result }
            // Locked, a finished segment gains no entries: whatever names it is in the journal
            // now. Count what is live in each first (a million entries' locations would cost
            // the compactor tens of megabytes), then list the entries of those to compact.
            let finishedPacks = Set(finished.map(\.pack))
            let liveBytes = try cache.withState { state in
                try state.live.refresh()
                var bytes: [UInt64: Int64] = [:]
                for (_, entry) in state.live.index where finishedPacks.contains(entry.location.pack) {
                    bytes[entry.location.pack, default: 0] += Int64(entry.location.length)
                }
                return bytes
            }
            var budget = Self.packBytesToMovePerPass
            var retiring = finished.filter { liveBytes[$0.pack] == nil }
            var compacting: [FinishedPack] = []
            for pack in finished {
                guard let live = liveBytes[pack.pack], Double(live) < Double(pack.size) * Self.packLiveRatioToCompact,
                    live <= budget
                else { continue }
                budget -= live
                compacting.append(pack)
            }
            for pack in compacting where !shouldStop() {
                let records = try cache.withState { state in
                    state.live.index.compactMap { hash, entry in entry.location.pack == pack.pack ? (hash, entry.location) : nil }
                }
                do {
                    try move(records)
                } catch where CacheDirectory.isFull(error) {
                    // No room for the copies on a full disk: the moves made are journaled, this
                    // segment stays, and no other is compacted this pass. The segments with
                    // nothing live still go below, which is what gives the space back.
                    break
                }
                retiring.append(pack)
                result.entriesMoved += records.count
            }
            guard !retiring.isEmpty else { return result }
            let retired = retiring.map { JournalRecord.retired(pack: $0.pack) }
            // On a full disk the reserve makes room to journal what frees the space.
            try cache.directory.releasingReserveWhenFull { try cache.commit { _ in (retired, ()) } }
            for pack in retiring { try cache.bodies.delete(pack) }
            result.segmentsRetired = retiring.count
            result.bytesReclaimed = retiring.reduce(0) { $0 + $1.size }
            return result
        }
    }

    /// Copies `records` to this process's segment and journals the moves, a batch at a time;
    /// damaged ones are journaled as removed. Afterwards no entry is left at the old places.
    private func move(_ records: [(KeyHash, BodyLocation)]) throws {
        for start in stride(from: 0, to: records.count, by: Self.batchSize) {
            let batch = records[start..<min(start + Self.batchSize, records.count)]
            var moves: [MovedRecord] = []
            var damaged: [(KeyHash, BodyLocation)] = []
            for (hash, location) in batch {
                if let copy = try cache.bodies.copy(hash, at: location, durable: cache.isDurable) {
                    moves.append(MovedRecord(hash: hash, from: location, to: copy))
                } else {
                    damaged.append((hash, location))
                }
            }
            try cache.commit { index -> ([JournalRecord], Void) in
                // Only entries still at the old place move: a put or removal since wins.
                let current = { (hash: KeyHash, location: BodyLocation) in index[hash]?.location == location }
                var journaled = moves.filter { current($0.hash, $0.from) }.map(JournalRecord.moved)
                journaled += damaged.filter(current).map { hash, location in
                    JournalRecord.removed(
                        RemovedRecord(hash: hash, location: location, reason: .corrupt, remover: .current))
                }
                return (journaled, ())
            }
        }
    }
}
