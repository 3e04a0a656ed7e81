import Foundation
import SharedCacheCLI

/// A built executable of this package (`sharedcache`, `sharedcached`), run as a real process.
struct Tool {
    let name: String

    var executable: URL { Worker.executable.deletingLastPathComponent().appendingPathComponent(name) }

    /// Runs the tool to completion with `arguments`, feeding it `input`.
    func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) throws -> Worker.Result {
        Worker.Result(finishing: try start(arguments, environment: environment, input: input))
    }

    /// ``run(_:input:environment:)`` for async tests: it waits on a thread of its own
    /// (``offThePool(_:)``), holding none of the cooperative pool's.
    func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) async throws
        -> Worker.Result
    {
        try await offThePool { try run(arguments, input: input, environment: environment) }
    }

    /// Starts the tool with `arguments`, its standard input `input` (else `/dev/null`); its
    /// stdout and stderr are captured.
    func start(_ arguments: [String], environment: [String: String] = [:], input: Data? = nil) throws -> ChildProcess {
        try ChildProcess(
            executable, arguments: arguments, environment: environment, input: input.map { .bytes($0) } ?? .none,
            errors: .captured)
    }
}

extension Tool {
    static let daemon = Tool(name: "sharedcached")
    static let admin = Tool(name: "sharedcache")
}
