import Foundation
import SharedCacheCLI

/// A built executable of this package (`sharedcache`, `sharedcached`), run as a real process.
struct Tool {
    let name: String

    var executable: URL { Worker.executable.deletingLastPathComponent().appendingPathComponent(name) }

    /// Runs the tool to completion with `arguments`, feeding it `input`.
    func run(_ arguments: [String], input: Data? = nil, environment: [String: String] = [:]) throws -> Worker.Result {
        let child = try start(arguments, environment: environment, input: input.map { .bytes($0) } ?? .none)
        return Worker.Result(finishing: child)
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
    func start(_ arguments: [String], environment: [String: String] = [:], input: ChildProcess.Input = .none) throws
        -> ChildProcess
    {
        try ChildProcess(executable, arguments: arguments, environment: environment, input: input, errors: .captured)
    }
}

extension Tool {
    static let daemon = Tool(name: "sharedcached")
    static let admin = Tool(name: "sharedcache")
}

/// A suite that runs `sharedcache` on a cache of its own, in its temporary directory.
protocol AdminToolSuite {
    var directory: TemporaryDirectory { get }
}

extension AdminToolSuite {
    /// The cache the tool runs on (as `SHAREDCACHE_DIR`).
    var cache: String { directory("cache") }

    /// Runs `sharedcache` with `arguments` on ``cache``, `input` as its standard input.
    func run(_ arguments: String..., input: String? = nil) throws -> Worker.Result {
        try Tool.admin.run(arguments, input: input.map { Data($0.utf8) }, environment: ["SHAREDCACHE_DIR": cache])
    }

    /// ``run(_:input:)`` for async tests: it waits on a thread of its own (``offThePool(_:)``).
    func run(_ arguments: String..., input: String? = nil) async throws -> Worker.Result {
        try await Tool.admin.run(
            arguments, input: input.map { Data($0.utf8) }, environment: ["SHAREDCACHE_DIR": cache])
    }

    /// Runs `script` in sh(1) on ``cache``, `$0` being the sharedcache executable: a command an
    /// error message gives, as a user would.
    func shell(_ script: String) async throws -> Worker.Result {
        let shell = try ChildProcess(
            URL(fileURLWithPath: "/bin/sh"), arguments: ["-c", script, Tool.admin.executable.path],
            environment: ["SHAREDCACHE_DIR": cache], input: .none, errors: .captured)
        return await Worker.Result(finishing: shell)
    }
}
