import Foundation
import SharedCacheTestSupport

/// The seed of every random choice a test makes: `SHAREDCACHE_TEST_SEED` to replay a failure,
/// or a fresh one. Tests print it in the comment of each expectation that depends on it, so a
/// failure says how to replay itself.
enum TestSeed {
    /// This run's seed (one per test process, so a replay reproduces every test's choices).
    static let value: UInt64 = {
        if let text = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_SEED"], let seed = UInt64(text) {
            return seed
        }
        var system = SystemRandomNumberGenerator()
        return UInt64.random(in: 1...UInt64(UInt32.max), using: &system)
    }()

    /// A generator of this run's stream for one test; `salt` tells tests apart, so each draws its
    /// own sequence from the one seed.
    static func generator(_ salt: String) -> SplitMix64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a: stable across runs, unlike hashValue
        for byte in salt.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return SplitMix64(seed: value ^ hash)
    }

    /// What to put in a failing expectation's comment.
    static var replay: String { "replay with SHAREDCACHE_TEST_SEED=\(value)" }
}
