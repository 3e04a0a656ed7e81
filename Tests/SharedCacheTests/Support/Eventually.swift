import Dispatch
import Foundation

@testable import SharedCache

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

/// Reads a child process's output line by line as it arrives. Used by one thread at a time.
final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private var buffer = Data()

    init(_ pipe: Pipe) { handle = pipe.fileHandleForReading }

    /// The next line without its newline; `nil` at end of output.
    func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self) }
            buffer.append(chunk)
        }
    }

    /// Lines up to (not including) one equal to `marker`.
    func lines(until marker: String) -> [String] {
        var lines: [String] = []
        while let line = next(), line != marker { lines.append(line) }
        return lines
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
