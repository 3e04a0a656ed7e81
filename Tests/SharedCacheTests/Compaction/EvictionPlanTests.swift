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

    @Test func noLimitsMeansOnlyExpiry() {
        let plan = EvictionPlan(index: Self.index(1000), now: 1000, sizeLimit: 0, entryLimit: 0)
        #expect(plan.victims.isEmpty)
    }
}
