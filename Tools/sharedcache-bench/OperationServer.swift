import Foundation
import SharedCacheCLI

/// A process of its own that does one operation per request and answers with the nanoseconds it
/// took, measured there, so the round trip to it is not counted: python-diskcache, or the C
/// floors. Its operations take turns with SharedCache's (see ``measureInTurns(count:batch:_:)``).
///
/// Requests are "OPERATION N" lines (N a key's index) on its standard input; the end of that
/// input, when this object goes, tells it to finish.
final class OperationServer {
    private let process: ChildProcess
    private let name: String

    private init(_ executable: String, arguments: [String], name: String) throws {
        process = try ChildProcess(URL(fileURLWithPath: executable), arguments: arguments, input: .pipe)
        self.name = name
    }

    /// diskcache (`diskcache_peer.py serve`) on a cache in `directory`, with values of `size` bytes;
    /// its operations are `put` and `get`.
    static func diskcache(python: String, directory: String, size: Int) throws -> OperationServer {
        try OperationServer(python, arguments: [peerScript, "serve", directory, "\(size)"], name: "the diskcache peer")
    }

    /// The floors (`Tools/bench/floors.c`, built by `Tools/bench/run`) in `directory`, with values
    /// of `size` bytes; its operations are `append` and `pread` (all keys in one file), `create`
    /// and `open` (a file per key).
    static func floors(executable: String, directory: String, size: Int) throws -> OperationServer {
        try OperationServer(executable, arguments: [directory, "\(size)"], name: "the floors (\(executable))")
    }

    /// Has the server do `operation` on each of `keys` (indices), one after another; the
    /// nanoseconds each took there. The requests go in one write, so the server does them
    /// without waiting on the pipe in between.
    func time(_ operation: String, _ keys: [Int]) throws -> [UInt64] {
        process.send(keys.map { "\(operation) \($0)" }.joined(separator: "\n"))
        return keys.map { _ in
            guard let line = process.nextLine(), let nanoseconds = UInt64(line) else { fatalError("\(name) stopped") }
            return nanoseconds
        }
    }

    deinit {
        process.finish()
    }
}
