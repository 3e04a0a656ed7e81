import Foundation

/// This benchmark re-run as a helper process (`--role NAME ARGS...`), read line by line.
final class ChildProcess {
    let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private var buffer = Data()

    init(role: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #if os(macOS)
        process.executableURL = Bundle.main.executableURL
        #endif
        process.arguments = ["--role", role] + arguments
        process.standardOutput = output
        process.standardInput = input
        try process.run()
    }

    /// The next line the child printed, without its newline.
    func nextLine() -> String {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { fatalError("benchmark helper \(process.arguments ?? []) exited early") }
            buffer.append(chunk)
        }
    }

    /// Closes the child's stdin, which tells it to finish, and waits for it.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
