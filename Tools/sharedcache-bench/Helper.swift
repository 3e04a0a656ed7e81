import Foundation
import SharedCacheCLI

extension ChildProcess {
    /// This benchmark re-run as a helper process (`--role NAME ARGS...`), read line by line; the
    /// end of its standard input (``finish()``) tells it to finish.
    static func benchmarkHelper(role: String, _ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(currentExecutable, arguments: ["--role", role] + arguments, input: .pipe)
    }

    /// The next line the helper printed, without its newline: a helper that exits first is a bug.
    func requireLine() -> String {
        guard let line = nextLine() else { fatalError("benchmark helper (pid \(processID)) exited early") }
        return line
    }
}
