import SharedCacheFormat
import SharedCachePlatform

/// This process's copies of recently read bodies, in front of the disk, limited by cost.
///
/// Copies are keyed by version (hash and blob ID), and every read first checks the version
/// against the journal-fed index, so a copy another process replaced or removed is never
/// served; the index also hands over the hashes it saw change, and their copies are dropped.
/// Least recently used copies go first when the cost limit or the count limit is passed, and a
/// copy not used for the idle expiry is dropped when next looked at (Kingfisher's memory
/// storage: `totalCostLimit`, `countLimit`, `expiration` counted from the last access).
struct MemoryTier {
    private struct Item {
        var location: BodyLocation
        var hit: CacheHit
        var cost: Int
        var lastUse: UInt64
        /// Monotonic nanoseconds of the last use, for the idle expiry; 0 without one (and
        /// never read then).
        var lastUseTime: UInt64
    }

    /// Bytes of bodies (plus a little per copy) this tier may hold; 0 turns it off.
    let costLimit: Int
    /// Copies this tier may hold; 0 for no limit but the cost.
    let countLimit: Int
    /// Nanoseconds a copy may go unused before it is dropped; `nil` for no limit.
    let idleExpiry: UInt64?
    private var items: [KeyHash: Item] = [:]
    private var totalCost = 0
    private var clock: UInt64 = 0

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

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var cost: Int { totalCost }

    /// The copy of the version at `location` of `hash`, if held.
    ///
    /// One lookup, and the copy's use is marked in place: taking the item out and storing it
    /// back cost a second lookup and two moves of the whole item.
    mutating func hit(_ hash: KeyHash, at location: BodyLocation, now: UInt64? = nil) -> CacheHit? {
        guard let index = items.index(forKey: hash) else { return nil }
        let now = useTime(now)
        let idle = idleExpiry.map { now &- items.values[index].lastUseTime > $0 } ?? false
        guard items.values[index].location == location, !idle else {
            drop(hash)
            return nil
        }
        clock += 1
        items.values[index].lastUse = clock
        items.values[index].lastUseTime = now
        var hit = items.values[index].hit
        hit.cacheType = .memory
        return hit
    }

    /// The monotonic clock idle expiry is measured on.
    static func now() -> UInt64 { UInt64(clamping: Clock.monotonicNanoseconds()) }

    /// The time to record a use at: `given`, else the clock, which is read only when there is
    /// an idle expiry to measure (0 otherwise, never read then).
    private func useTime(_ given: UInt64?) -> UInt64 {
        idleExpiry == nil ? 0 : given ?? Self.now()
    }

    /// Keeps a copy of a body just read or stored. Bodies over a quarter of the limit are not
    /// kept: one of them would push out everything else.
    mutating func insert(_ hit: CacheHit, for hash: KeyHash, at location: BodyLocation, now: UInt64? = nil) {
        let cost = hit.data.count + hit.entry.key.utf8.count + Self.overhead
        guard costLimit > 0, cost <= costLimit / 4 else { return }
        let now = useTime(now)
        drop(hash)
        clock += 1
        var hit = hit
        hit.cacheType = .disk  // as read or stored; a later hit says `.memory`
        items[hash] = Item(location: location, hit: hit, cost: cost, lastUse: clock, lastUseTime: now)
        totalCost += cost
        if totalCost > costLimit || (countLimit > 0 && items.count > countLimit) { trim() }
    }

    mutating func drop(_ hash: KeyHash) {
        if let removed = items.removeValue(forKey: hash) { totalCost -= removed.cost }
    }

    /// Drops the copies of `hashes`, or every copy for `nil`.
    mutating func drop(_ hashes: [KeyHash]?) {
        guard let hashes else {
            items.removeAll()
            totalCost = 0
            return
        }
        for hash in hashes { drop(hash) }
    }

    /// Drops the least recently used copies down to three quarters of the limits, so trimming
    /// (a sort) happens once per many inserts rather than on each.
    private mutating func trim() {
        let target = costLimit / 4 * 3
        let countTarget = countLimit > 0 ? max(1, countLimit / 4 * 3) : Int.max
        for (hash, _) in items.sorted(by: { $0.value.lastUse < $1.value.lastUse }) {
            guard totalCost > target || items.count > countTarget else { break }
            drop(hash)
        }
    }
}
