import Foundation
import SharedCacheCLI

/// This benchmark re-run as a helper process (`--role NAME ARGS...`), read line by line.
final class ChildProcess {
    let process = Process()
    private let output = Pipe()
    private let input = Pipe()
    private let lines: LineReader

    init(role: String, _ arguments: [String]) throws {
        lines = LineReader(output)
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
        guard let line = lines.next() else { fatalError("benchmark helper \(process.arguments ?? []) exited early") }
        return line
    }

    /// Closes the child's stdin, which tells it to finish, and waits for it.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
