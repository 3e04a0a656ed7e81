import Dispatch
import Foundation

@testable import SharedCache
@testable import SharedCachePlatform

/// Collects removal batches from a callback, for tests to wait on.
final class RemovalCollector: Sendable {
    private let removals = Locked<[Removal]>([])

    func append(_ batch: [Removal]) { removals.withLock { $0 += batch } }

    var all: [Removal] { removals.withLock { $0 } }

    /// Waits until at least `count` removals arrived, or `timeout` passed; returns them.
    @discardableResult
    func wait(for count: Int, timeout: TimeInterval = 60) -> [Removal] {
        let deadline = Date().addingTimeInterval(timeout)
        while all.count < count && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        return all
    }
}
