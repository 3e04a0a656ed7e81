package import Foundation

/// One output stream of a ``ChildProcess``, read to its end on a thread of its own as the child
/// writes it, kept until the caller takes it as lines or bytes.
package final class CapturedOutput: @unchecked Sendable {
    private let condition = NSCondition()
    private var buffer: [UInt8] = []  // guarded by `condition`, as are the three below
    private var consumed = 0  // bytes of `buffer` already returned
    private var scanned = 0  // bytes of `buffer` known to hold no newline after `consumed`
    private var closed = false

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                condition.lock()
                if chunk.isEmpty { closed = true } else { buffer.append(contentsOf: chunk) }
                condition.broadcast()
                condition.unlock()
                if chunk.isEmpty { break }
            }
        }
    }

    /// Waits, with `condition` held, until `ready` holds, the writer closed its end, or
    /// `deadline` passed; returns whether `ready` holds.
    private func wait(until deadline: Date?, for ready: () -> Bool) -> Bool {
        while !ready() && !closed {
            if let deadline {
                guard condition.wait(until: deadline) else { return ready() }
            } else {
                condition.wait()
            }
        }
        return ready()
    }

    private func deadline(_ timeout: Duration?) -> Date? {
        guard let (seconds, attoseconds) = timeout?.components else { return nil }
        return Date().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// The next line without its newline; `nil` if none came within `timeout` (`nil`: no bound)
    /// or the writer closed its end with nothing more. A last line without a newline counts.
    package func nextLine(within timeout: Duration? = nil) -> String? {
        let deadline = deadline(timeout)
        condition.lock()
        defer { condition.unlock() }
        var newline: Int?
        _ = wait(until: deadline) {
            newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n"))
            scanned = newline ?? buffer.count
            return newline != nil
        }
        let end: Int
        if let newline {
            end = newline
        } else if closed && consumed < buffer.count {
            end = buffer.count
        } else {
            return nil
        }
        let line = String(decoding: buffer[consumed..<end], as: UTF8.self)
        consumed = min(end + 1, buffer.count)
        scanned = consumed
        if consumed >= 1 << 16 {
            buffer.removeFirst(consumed)
            scanned -= consumed
            consumed = 0
        }
        return line
    }

    /// Lines up to the first that satisfies `predicate` (returned last), waiting up to `timeout`
    /// for each; `nil` if it did not come.
    package func lines(through predicate: (String) -> Bool, within timeout: Duration? = nil) -> [String]? {
        var result: [String] = []
        while let line = nextLine(within: timeout) {
            result.append(line)
            if predicate(line) { return result }
        }
        return nil
    }

    /// Lines up to (not including) one equal to `marker`, or to the end.
    package func lines(until marker: String) -> [String] {
        var lines: [String] = []
        while let line = nextLine(), line != marker { lines.append(line) }
        return lines
    }

    /// Every line not yet returned, once the writer closed its end; `nil` if it did not within
    /// `timeout` (`nil`: no bound).
    package func rest(within timeout: Duration? = nil) -> [String]? {
        guard let data = remainingData(within: timeout) else { return nil }
        var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Every byte not yet returned, once the writer closed its end; `nil` if it did not within
    /// `timeout` (`nil`: no bound).
    package func remainingData(within timeout: Duration? = nil) -> Data? {
        let deadline = deadline(timeout)
        condition.lock()
        defer { condition.unlock() }
        guard wait(until: deadline, for: { closed }) else { return nil }
        defer {
            buffer = []
            consumed = 0
            scanned = 0
        }
        return Data(buffer[consumed...])
    }

    /// Every byte not yet returned, as text, once the writer closed its end.
    package func remainingText() -> String {
        String(decoding: remainingData() ?? Data(), as: UTF8.self)
    }

    /// Calls `body` with each line as it comes, on a thread of its own, until the writer closes
    /// its end.
    package func forEachLine(_ body: @escaping @Sendable (String) -> Void) {
        Thread.detachNewThread { [self] in
            while let line = nextLine() { body(line) }
        }
    }
}
