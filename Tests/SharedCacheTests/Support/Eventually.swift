import Dispatch
import Foundation
import SharedCacheCLI

@testable import SharedCache
@testable import SharedCachePlatform

/// Collects removal batches from a callback, for tests to wait on.
final class RemovalCollector: Sendable {
    private let removals = Locked<[Removal]>([])

    func append(_ batch: [Removal]) { removals.withLock { $0 += batch } }

    var all: [Removal] { removals.withLock { $0 } }

    /// Waits until at least `count` removals arrived, or `timeout` passed; returns them.
    @discardableResult
    func wait(for count: Int, timeout: TimeInterval = 5) -> [Removal] {
        let deadline = Date().addingTimeInterval(timeout)
        while all.count < count && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        return all
    }
}

/// Reads a child's output on a thread of its own, so the child never blocks on a full pipe
/// while the test is busy elsewhere.
final class BackgroundLines: @unchecked Sendable {
    private let lines = Locked<[String]>([])
    private let finished = DispatchSemaphore(value: 0)

    init(_ reader: LineReader) {
        Thread {
            while let line = reader.next() { self.lines.withLock { $0.append(line) } }
            self.finished.signal()
        }.start()
    }

    /// Every line, once the child closed its end.
    func all() -> [String] {
        finished.wait()
        finished.signal()
        return lines.withLock { $0 }
    }
}
