import Dispatch
import Foundation
import SharedCacheCLI

/// Checks `condition` every few milliseconds until it holds or `timeout` passed; returns
/// whether it held. The bounded wait for a signal another process or thread leaves (a file it
/// creates, a record it journals), never a guess at how long that takes.
func eventually(within timeout: Duration = .seconds(5), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.002)
    }
}

/// A child's output lines, read on a thread of their own as they come, which a test can wait
/// on with a bound: the line a child prints when it is ready is the handshake.
final class ChildLines: @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []  // guarded by `condition`
    private var closed = false  // guarded by `condition`
    private var consumed = 0  // guarded by `condition`

    init(_ pipe: Pipe) {
        let reader = LineReader(pipe)
        Thread.detachNewThread { [self] in
            while let line = reader.next() {
                condition.lock()
                lines.append(line)
                condition.broadcast()
                condition.unlock()
            }
            condition.lock()
            closed = true
            condition.broadcast()
            condition.unlock()
        }
    }

    /// The next line not yet returned, waiting up to `timeout`; `nil` if none came in time or
    /// the child closed its end.
    func next(within timeout: Duration = .seconds(10)) -> String? {
        let deadline = Date().addingTimeInterval(timeout.timeInterval)
        condition.lock()
        defer { condition.unlock() }
        while consumed == lines.count && !closed {
            guard condition.wait(until: deadline) else { break }
        }
        guard consumed < lines.count else { return nil }
        consumed += 1
        return lines[consumed - 1]
    }

    /// Lines up to the first that satisfies `predicate` (returned last), waiting up to `timeout`
    /// for it; `nil` if it did not come.
    func lines(through predicate: (String) -> Bool, within timeout: Duration = .seconds(10)) -> [String]? {
        var result: [String] = []
        while let line = next(within: timeout) {
            result.append(line)
            if predicate(line) { return result }
        }
        return nil
    }

    /// Every line not yet returned, once the child closed its end (bounded: `nil` if it did not).
    func rest(within timeout: Duration = .seconds(30)) -> [String]? {
        let deadline = Date().addingTimeInterval(timeout.timeInterval)
        condition.lock()
        defer { condition.unlock() }
        while !closed {
            guard condition.wait(until: deadline) else { return nil }
        }
        defer { consumed = lines.count }
        return Array(lines[consumed...])
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
