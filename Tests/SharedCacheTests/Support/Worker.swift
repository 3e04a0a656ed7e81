import Foundation
import SharedCacheCLI

#if os(macOS)
/// A class of the test bundle's own, for finding the bundle.
private final class BundleMarker {}
#endif

/// The `sharedcache-test-worker` executable built next to the tests, run as a real process.
enum Worker {
    static var executable: URL {
        #if os(macOS)
        // The test bundle (`….xctest`), found through a class it defines: swift-testing's runner
        // may load the bundle without registering it, so `Bundle.allBundles` need not list it.
        let products = Bundle(for: BundleMarker.self).bundleURL.deletingLastPathComponent()
        #else
        let products = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        #endif
        return products.appendingPathComponent("sharedcache-test-worker")
    }

    struct Result {
        var status: Int32
        var output: String
        var errors: String

        /// Takes both outputs to their ends (each was read on a thread of its own all along, so a
        /// process that writes much to one while the test waits for the other never blocks), then
        /// waits for the process.
        init(finishing child: ChildProcess) {
            let out = child.output?.remainingData() ?? Data()
            let err = child.errors?.remainingData() ?? Data()
            status = child.wait().status
            self.output = String(decoding: out, as: UTF8.self)
            self.errors = String(decoding: err, as: UTF8.self)
        }

        /// ``init(finishing:)`` for async tests: it waits on a thread of its own
        /// (``offThePool(_:)``), holding none of the cooperative pool's.
        init(finishing child: ChildProcess) async {
            self = await offThePool { Result(finishing: child) }
        }
    }

    /// Starts the worker with `arguments`; its stdout and stderr are captured.
    ///
    /// - Parameters:
    ///   - asUser: run as this user ID (through setpriv(1); the caller must be root), in a group
    ///     of the same number and the supplementary `groups`.
    ///   - input: the worker's standard input: a ``ChildProcess/Input/pipe`` for commands that
    ///     wait for a line (a "go").
    static func start(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:],
        input: ChildProcess.Input = .inherit
    ) throws -> ChildProcess {
        guard let user else {
            return try ChildProcess(
                executable, arguments: arguments, environment: environment, input: input, errors: .captured)
        }
        let supplementary =
            groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
        return try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            arguments: ["--reuid=\(user)", "--regid=\(user)", supplementary, executable.path] + arguments,
            environment: environment, input: input, errors: .captured)
    }

    /// Runs the worker to completion.
    static func run(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:]
    ) throws -> Result {
        Result(finishing: try start(arguments, asUser: user, groups: groups, environment: environment))
    }

    /// ``run(_:asUser:groups:environment:)`` for async tests: it waits on a thread of its own
    /// (``offThePool(_:)``), holding none of the cooperative pool's.
    static func run(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:]
    ) async throws -> Result {
        try await offThePool { try run(arguments, asUser: user, groups: groups, environment: environment) }
    }

    /// Parses "name=value name=value" summary lines into numbers.
    static func counters(_ line: String) -> [String: Int] {
        var result: [String: Int] = [:]
        for pair in line.split(whereSeparator: \.isWhitespace) {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = Int(parts[1]) { result[String(parts[0])] = value }
        }
        return result
    }
}
