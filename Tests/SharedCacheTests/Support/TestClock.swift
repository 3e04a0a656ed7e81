import SharedCacheEngine
import SharedCachePlatform

/// A wall clock a test sets and moves, for `Configuration.clock`: expiry is judged by it, so a
/// test moves time past an expiry instead of waiting for it.
final class TestClock: Sendable {
    private let milliseconds: Locked<Int64>
    /// What to put in `Configuration.clock`.
    let wallClock: WallClock

    /// Starts at `start` milliseconds since the epoch: the system's time unless given.
    init(startingAt start: Int64 = Clock.nowMilliseconds()) {
        let milliseconds = Locked(start)
        self.milliseconds = milliseconds
        wallClock = WallClock { milliseconds.withLock { $0 } }
    }

    var now: Int64 { milliseconds.withLock { $0 } }

    func advance(by duration: Duration) {
        milliseconds.withLock { $0 += duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000 }
    }

    func set(to value: Int64) { milliseconds.withLock { $0 = value } }
}

extension Configuration {
    /// This configuration, judging time by `clock`.
    func judgingTime(by clock: TestClock) -> Configuration {
        var result = self
        result.clock = clock.wallClock
        return result
    }
}
