import Testing

@testable import SharedCache

@Suite("Eviction policy, on an index alone")
struct EvictionPlanTests {
    /// An index of `count` entries of `size` bytes; entry i was last accessed at time i.
    static func index(_ count: Int, size: UInt64 = 100, expiredEvery: Int = 0) -> Index {
        var index = Index()
        for number in 0..<count {
            let expired = expiredEvery > 0 && number % expiredEvery == 0
            index.insert(
                IndexEntry(
                    location: BodyLocation(blobID: UInt64(number + 1)), bodySize: size, storedAt: 0, expiresAt: expired ? 500 : .max,
                    lastAccess: Int64(number)),
                for: KeyHash(key: "\(number)"))
        }
        return index
    }

    @Test func underTheLimitsNothingButExpiredGoes() {
        let plan = EvictionPlan(index: Self.index(50, expiredEvery: 10), now: 1000, sizeLimit: 100_000, entryLimit: 0)
        #expect(plan.victims.count == 5)
        #expect(plan.victims.allSatisfy { $0.reason == .expired })
    }

    @Test func overTheSizeLimitTheLeastRecentlyUsedGoDownToNinetyPercent() {
        // 100 entries × 100 bytes = 10,000 bytes against a limit of 8,000: keep at most 7,200.
        let plan = EvictionPlan(index: Self.index(100), now: 1000, sizeLimit: 8000, entryLimit: 0)
        #expect(plan.victims.count == 28)
        #expect(plan.victims.allSatisfy { $0.reason == .size })
        #expect(plan.victims.map(\.entry.lastAccess) == (0..<28).map(Int64.init))
    }

    @Test func expiredEntriesCountTowardsTheTrimAndGoFirst() {
        let plan = EvictionPlan(index: Self.index(100, expiredEvery: 10), now: 1000, sizeLimit: 8000, entryLimit: 0)
        // 10 expired leave 9,000 bytes, still over 8,000: 18 more by recency reach 7,200.
        #expect(plan.victims.prefix(10).allSatisfy { $0.reason == .expired })
        #expect(plan.victims.count == 28)
        let bySize = plan.victims.dropFirst(10)
        #expect(bySize.allSatisfy { $0.reason == .size && $0.entry.lastAccess % 10 != 0 })
        #expect(bySize.map(\.entry.lastAccess) == bySize.map(\.entry.lastAccess).sorted())
    }

    @Test func theEntryLimitTrimsToNinetyPercentToo() {
        let plan = EvictionPlan(index: Self.index(100), now: 1000, sizeLimit: 0, entryLimit: 50)
        #expect(plan.victims.count == 55)
    }

    @Test func tiesAtTheCutoffAreBrokenByHashTheSameWayEveryTime() {
        var index = Index()
        for number in 0..<10 {
            index.insert(
                IndexEntry(location: BodyLocation(blobID: 1), bodySize: 100, storedAt: 0, expiresAt: .max, lastAccess: 7),
                for: KeyHash(key: "\(number)"))
        }
        let plan = EvictionPlan(index: index, now: 1000, sizeLimit: 500, entryLimit: 0)
        #expect(plan.victims.count == 6)
        let hashes = plan.victims.map(\.hash)
        #expect(hashes == hashes.sorted())
        #expect(hashes == index.map(\.hash).sorted().prefix(6).map { $0 })
    }

    /// Puts an entry of 950 bytes, the most recently used, under `name`.
    static func insertLarge(_ name: String, into index: inout Index) {
        let entry = IndexEntry(
            location: BodyLocation(blobID: 99), bodySize: 950, storedAt: 0, expiresAt: .max, lastAccess: 50)
        index.insert(entry, for: KeyHash(key: name))
    }

    /// An entry larger than the low-water mark cannot stay after a pass that must free space;
    /// by recency alone, a new one would take every older entry with it before going itself.
    @Test func overTheSizeLimitAnEntryLargerThanTheLowWaterMarkGoesAlone() {
        var index = Self.index(10)  // 1,000 bytes, last accessed at 0...9
        Self.insertLarge("large", into: &index)
        // 1,950 bytes against a limit of 1,050, whose low-water mark is 945.
        let plan = EvictionPlan(index: index, now: 1000, sizeLimit: 1050, entryLimit: 0)
        #expect(plan.victims.map(\.hash) == [KeyHash(key: "large")])
        #expect(plan.victims.allSatisfy { $0.reason == .size })
    }

    @Test func theLargeEntryGoesFirstAndTheLeastRecentlyUsedAfterIt() {
        var index = Self.index(20)  // 2,000 bytes
        for name in ["large", "larger"] { Self.insertLarge(name, into: &index) }
        // 3,900 bytes against 1,050: both large ones, then 2,000 - 945 = 1,055 bytes by recency.
        let plan = EvictionPlan(index: index, now: 1000, sizeLimit: 1050, entryLimit: 0)
        let large = [KeyHash(key: "large"), KeyHash(key: "larger")].sorted()
        #expect(plan.victims.prefix(2).map(\.hash) == large)
        #expect(plan.victims.dropFirst(2).map(\.entry.lastAccess) == (0..<11).map(Int64.init))
    }

    @Test func anEntryLargerThanTheLowWaterMarkStaysWhileTheDirectoryIsWithinItsLimit() {
        var index = Self.index(1)
        Self.insertLarge("large", into: &index)
        #expect(EvictionPlan(index: index, now: 1000, sizeLimit: 1050, entryLimit: 0).victims.isEmpty)
    }

    /// Over a limit means past it: a directory exactly at its size or entry limit keeps every
    /// entry (or one at its limit would be compacted after every put); one byte or one entry
    /// past it, and the trim goes down to ninety percent.
    @Test func atTheLimitsNothingGoes() {
        // 100 entries × 100 bytes = 10,000 bytes.
        #expect(EvictionPlan(index: Self.index(100), now: 1000, sizeLimit: 10_000, entryLimit: 0).victims.isEmpty)
        #expect(EvictionPlan(index: Self.index(100), now: 1000, sizeLimit: 0, entryLimit: 100).victims.isEmpty)
        // Down to 8,999 bytes (90 % of 9,999) and to 90 entries.
        #expect(EvictionPlan(index: Self.index(100), now: 1000, sizeLimit: 9_999, entryLimit: 0).victims.count == 11)
        #expect(EvictionPlan(index: Self.index(101), now: 1000, sizeLimit: 0, entryLimit: 100).victims.count == 11)
    }

    /// The expired go first, the soonest expired first (the order the pass journals and
    /// reports them in), whatever order the index holds them in.
    @Test func theExpiredGoInTheOrderTheyExpired() {
        var index = Index()
        for (number, expiry) in [700, 100, 900, 300, 500].enumerated() {
            index.insert(
                IndexEntry(
                    location: BodyLocation(blobID: UInt64(number + 1)), bodySize: 100, storedAt: 0,
                    expiresAt: Int64(expiry), lastAccess: 0),
                for: KeyHash(key: "\(number)"))
        }
        let plan = EvictionPlan(index: index, now: 1000, sizeLimit: 0, entryLimit: 0)
        #expect(plan.victims.map(\.entry.expiresAt) == [100, 300, 500, 700, 900])
        #expect(plan.victims.allSatisfy { $0.reason == .expired })
    }

    /// Expired entries count towards the entry limit as they do towards the size limit: with
    /// the 10 expired gone, 90 entries are under a limit of 95, and nothing else goes.
    @Test func expiredEntriesCountTowardsTheEntryLimit() {
        let plan = EvictionPlan(index: Self.index(100, expiredEvery: 10), now: 1000, sizeLimit: 0, entryLimit: 95)
        #expect(plan.victims.count == 10)
        #expect(plan.victims.allSatisfy { $0.reason == .expired })
    }

    @Test func noLimitsMeansOnlyExpiry() {
        let plan = EvictionPlan(index: Self.index(1000), now: 1000, sizeLimit: 0, entryLimit: 0)
        #expect(plan.victims.isEmpty)
    }
}
