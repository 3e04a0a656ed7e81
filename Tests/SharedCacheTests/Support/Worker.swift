import Foundation

/// The `sharedcache-test-worker` executable built next to the tests, run as a real process.
enum Worker {
    static var executable: URL {
        #if os(macOS)
        let products = Bundle.allBundles.first { $0.bundlePath.hasSuffix(".xctest") }!.bundleURL
            .deletingLastPathComponent()
        #else
        let products = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        #endif
        return products.appendingPathComponent("sharedcache-test-worker")
    }

    struct Result {
        var status: Int32
        var output: String
        var errors: String
    }

    /// Starts the worker with `arguments`; stdout and stderr go to pipes.
    ///
    /// - Parameters:
    ///   - asUser: run as this user ID (through setpriv(1); the caller must be root), in a group
    ///     of the same number and the supplementary `groups`.
    static func start(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:]
    ) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if let user {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            let supplementary = groups.isEmpty ? "--clear-groups" : "--groups=" + groups.map(String.init).joined(separator: ",")
            process.arguments = ["--reuid=\(user)", "--regid=\(user)", supplementary, executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        return (process, output, errors)
    }

    /// Runs the worker to completion.
    static func run(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:]
    ) throws -> Result {
        let (process, output, errors) = try start(arguments, asUser: user, groups: groups, environment: environment)
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, output: String(decoding: out, as: UTF8.self),
            errors: String(decoding: err, as: UTF8.self))
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
