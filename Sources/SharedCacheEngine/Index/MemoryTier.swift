import SharedCacheFormat
import SharedCachePlatform

/// This process's copies of recently read bodies, in front of the disk, limited by cost.
///
/// Copies are keyed by version (hash and location), and a read checks the version against the
/// journal-fed index, so a copy another process replaced or removed is never served; the index
/// also hands over the hashes it saw change, and their copies are dropped. A copy keeps the
/// index entry and the index's stamp (``Index/stamp()``) it was last checked at: while the
/// stamp is the same, the index has not changed, and the copy is served without a lookup (at a
/// large index, two cache misses of a hit's few).
/// Least recently used copies go first when the cost limit or the count limit is passed, and a
/// copy not used for the idle expiry is dropped when next looked at (Kingfisher's memory
/// storage: `totalCostLimit`, `countLimit`, `expiration` counted from the last access).
///
/// Recency is a doubly linked list threaded through the copies, so a use, an insert and an
/// eviction each cost O(1). (Sorting every copy by last use each time the limit was passed made
/// a get that missed the tier stall for milliseconds once in a few thousand, holding the
/// process's lock: a working set larger than the tier averaged 3–7 µs a get, not 2.)
struct MemoryTier {
    private struct Copy {
        var hash: KeyHash
        var location: BodyLocation
        var hit: CacheHit
        /// The index's entry for this version, as of the index whose stamp is `checkedAt`.
        var entry: IndexEntry?
        /// The stamp of the index this copy was last checked against; 0 for never.
        var checkedAt: UInt64 = 0
        var cost: Int
        /// Monotonic nanoseconds of the last use, for the idle expiry; 0 without one (and
        /// never read then).
        var lastUseTime: UInt64
        /// Neighbours in order of use (positions in `copies`); `none` at either end.
        var newer: Int
        var older: Int
    }

    /// Bytes of bodies (plus a little per copy) this tier may hold; 0 turns it off.
    let costLimit: Int
    /// Copies this tier may hold; 0 for no limit but the cost.
    let countLimit: Int
    /// Nanoseconds a copy may go unused before it is dropped; `nil` for no limit.
    let idleExpiry: UInt64?
    private var positions: [KeyHash: Int] = [:]
    private var copies: ContiguousArray<Copy> = []
    private var newest = none
    private var oldest = none
    private var totalCost = 0

    private static let none = -1
    /// Bookkeeping per copy beyond its body and key, counted against the limit.
    private static let overhead = 128

    init(costLimit: Int, countLimit: Int = 0, idleExpiry: Duration? = nil) {
        self.costLimit = max(0, costLimit)
        self.countLimit = max(0, countLimit)
        self.idleExpiry = idleExpiry.map { UInt64(clamping: max(0, $0.nanoseconds)) }
    }

    init(_ configuration: Configuration) {
        self.init(
            costLimit: configuration.memoryCostLimit, countLimit: configuration.memoryCountLimit,
            idleExpiry: configuration.memoryIdleExpiry)
    }

    var isEmpty: Bool { copies.isEmpty }
    var count: Int { copies.count }
    var cost: Int { totalCost }

    /// The copy of the version at `location` of `hash`, if held; it becomes the most recently
    /// used. `entry`, the index's entry for that version, is kept with the copy as of the index
    /// stamped `stamp`.
    mutating func hit(
        _ hash: KeyHash, at location: BodyLocation, entry: IndexEntry? = nil, stamp: UInt64 = 0, now: UInt64? = nil
    ) -> CacheHit? {
        guard let position = positions[hash] else { return nil }
        guard copies[position].location == location else {
            drop(hash)
            return nil
        }
        copies[position].entry = entry
        copies[position].checkedAt = entry == nil ? 0 : stamp
        var copy: CacheHit?
        _ = use(position, into: &copy, now: now)
        return copy
    }

    /// The index entry of `hash`'s copy, with the copy in `copy`, if the copy was last checked
    /// against an index stamped `stamp`: that index has not changed since, so both are current.
    /// (The copy comes back through `copy`: a hit in a tuple was moved whole at each step.)
    mutating func hit(_ hash: KeyHash, checkedAt stamp: UInt64, into copy: inout CacheHit?, now: UInt64? = nil)
        -> IndexEntry?
    {
        guard let position = positions[hash], copies[position].checkedAt == stamp,
            let entry = copies[position].entry, use(position, into: &copy, now: now)
        else { return nil }
        return entry
    }

    /// Puts the copy at `position` in `copy`, made the most recently used; drops it instead
    /// when it went unused for longer than the idle expiry. Returns whether it was used.
    private mutating func use(_ position: Int, into copy: inout CacheHit?, now: UInt64?) -> Bool {
        let now = useTime(now)
        if let idleExpiry, now &- copies[position].lastUseTime > idleExpiry {
            remove(at: position)
            return false
        }
        unlink(position)
        linkAsNewest(position)
        copies[position].lastUseTime = now
        copy = copies[position].hit
        copy?.cacheType = .memory
        return true
    }

    /// The monotonic clock idle expiry is measured on.
    static func now() -> UInt64 { UInt64(clamping: Clock.monotonicNanoseconds()) }

    /// The time to record a use at: `given`, else the clock, which is read only when there is
    /// an idle expiry to measure (0 otherwise, never read then).
    private func useTime(_ given: UInt64?) -> UInt64 {
        idleExpiry == nil ? 0 : given ?? Self.now()
    }

    /// Keeps a copy of a body just read or stored, dropping the least recently used copies
    /// while over a limit. Bodies over a quarter of the cost limit are not kept: one of them
    /// would push out everything else.
    mutating func insert(_ hit: CacheHit, for hash: KeyHash, at location: BodyLocation, now: UInt64? = nil) {
        let cost = hit.data.count + hit.entry.key.utf8.count + Self.overhead
        guard costLimit > 0, cost <= costLimit / 4 else { return }
        let now = useTime(now)
        drop(hash)
        var hit = hit
        hit.cacheType = .disk  // as read or stored; a later hit says `.memory`
        copies.append(
            Copy(
                hash: hash, location: location, hit: hit, cost: cost, lastUseTime: now, newer: Self.none,
                older: Self.none))
        positions[hash] = copies.count - 1
        linkAsNewest(copies.count - 1)
        totalCost += cost
        while totalCost > costLimit || (countLimit > 0 && copies.count > countLimit) {
            remove(at: oldest)
        }
    }

    mutating func drop(_ hash: KeyHash) {
        if let position = positions[hash] { remove(at: position) }
    }

    /// Drops the copies of `hashes`, or every copy for `nil`.
    mutating func drop(_ hashes: [KeyHash]?) {
        guard let hashes else {
            positions.removeAll()
            copies.removeAll()
            (newest, oldest, totalCost) = (Self.none, Self.none, 0)
            return
        }
        for hash in hashes { drop(hash) }
    }

    // MARK: The list in order of use

    /// Removes the copy at `position`; the last copy moves into its place.
    private mutating func remove(at position: Int) {
        unlink(position)
        totalCost -= copies[position].cost
        positions[copies[position].hash] = nil
        let last = copies.count - 1
        if position != last {
            copies.swapAt(position, last)
            // The moved copy's neighbours (and the ends of the list) follow it.
            let (newer, older) = (copies[position].newer, copies[position].older)
            if newer == Self.none { newest = position } else { copies[newer].older = position }
            if older == Self.none { oldest = position } else { copies[older].newer = position }
            positions[copies[position].hash] = position
        }
        copies.removeLast()
    }

    private mutating func unlink(_ position: Int) {
        let (newer, older) = (copies[position].newer, copies[position].older)
        if newer == Self.none { newest = older } else { copies[newer].older = older }
        if older == Self.none { oldest = newer } else { copies[older].newer = newer }
    }

    private mutating func linkAsNewest(_ position: Int) {
        copies[position].newer = Self.none
        copies[position].older = newest
        if newest != Self.none { copies[newest].newer = position }
        newest = position
        if oldest == Self.none { oldest = position }
    }
}
