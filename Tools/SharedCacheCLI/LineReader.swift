package import Foundation

/// Reads a pipe line by line as a child process writes it.
///
/// Not for concurrent use: one thread reads at a time.
package final class LineReader: @unchecked Sendable {
    private let handle: FileHandle
    private var buffer = Data()

    package init(_ handle: FileHandle) {
        self.handle = handle
    }

    package convenience init(_ pipe: Pipe) {
        self.init(pipe.fileHandleForReading)
    }

    /// The next line without its newline; `nil` once the writer closed its end.
    package func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty {
                defer { buffer = Data() }
                return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }

    /// Lines up to (not including) one equal to `marker`, or to the end.
    package func lines(until marker: String) -> [String] {
        var lines: [String] = []
        while let line = next(), line != marker { lines.append(line) }
        return lines
    }
}
