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

        /// Reads both pipes to their ends, at the same time (a process that fills the pipe
        /// nobody reads would wait forever), then waits for the process.
        init(finishing process: Process, output: Pipe, errors: Pipe) {
            let errorBytes = BackgroundRead(errors.fileHandleForReading)
            let out = output.fileHandleForReading.readDataToEndOfFile()
            let err = errorBytes.wait()
            process.waitUntilExit()
            status = process.terminationStatus
            self.output = String(decoding: out, as: UTF8.self)
            self.errors = String(decoding: err, as: UTF8.self)
        }
    }

    /// A file read to its end on a thread of its own.
    final class BackgroundRead: @unchecked Sendable {
        private var bytes = Data()  // written by the reader thread before `done` is signalled
        private let done = DispatchSemaphore(value: 0)

        init(_ file: FileHandle) {
            Thread.detachNewThread { [self] in
                bytes = file.readDataToEndOfFile()
                done.signal()
            }
        }

        func wait() -> Data {
            done.wait()
            return bytes
        }
    }

    /// Starts the worker with `arguments`; stdout and stderr go to pipes.
    ///
    /// - Parameters:
    ///   - asUser: run as this user ID (through setpriv(1); the caller must be root), in a group
    ///     of the same number and the supplementary `groups`.
    ///   - input: the worker's standard input, for commands that wait for a line (a "go").
    static func start(
        _ arguments: [String], asUser user: UInt32? = nil, groups: [UInt32] = [], environment: [String: String] = [:],
        input: Pipe? = nil
    ) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        if let input { process.standardInput = input }
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
        return Result(finishing: process, output: output, errors: errors)
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
