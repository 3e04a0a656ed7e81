package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process this one starts and talks to: the demo's clients and compactor, the benchmark's and
/// the stress run's helpers, and the processes the tests run.
///
/// Its standard output (and standard error, when asked) is read on a thread of its own from the
/// moment it starts, whatever the caller is doing: a child that fills a pipe nobody reads waits
/// forever, and reading one pipe to its end before the other deadlocks with a child that writes
/// much to the second. The caller takes the lines (or the bytes) as it needs them, with a bound
/// on how long it waits.
///
/// One caller at a time reads each of ``output`` and ``errors``; signalling and waiting are safe
/// from any thread.
package final class ChildProcess: @unchecked Sendable {
    /// Where the child's standard input comes from.
    package enum Input: Sendable {
        /// This process's standard input.
        case inherit
        /// `/dev/null`: the child reads end-of-file at once.
        case none
        /// A pipe written with ``send(_:)`` and closed by ``closeInput()`` or ``finish()`` (a "go"
        /// line, or the end that tells a helper to finish).
        case pipe
        /// These bytes, then end-of-file.
        case bytes(Data)
    }

    /// Where one of the child's output streams goes.
    package enum Output: Sendable {
        /// This process's own stream.
        case inherit
        /// `/dev/null`.
        case discard
        /// A file, created or truncated.
        case file(String)
        /// Read on a thread of its own, for ``CapturedOutput``'s lines or bytes.
        case captured
        /// Standard error only: into the same pipe as standard output, interleaved as written.
        case standardOutput
    }

    /// How the child ended.
    package enum Termination: Equatable, Sendable {
        /// It called exit(3) with this status.
        case exited(Int32)
        /// A signal ended it.
        case signalled(Int32)

        /// The exit status, or the number of the signal that ended it (as `Process` reports it).
        package var status: Int32 {
            switch self {
            case .exited(let status), .signalled(let status): status
            }
        }
    }

    /// This executable, to re-run with a hidden role.
    package static var currentExecutable: URL {
        #if os(Linux)
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        #else
        Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        #endif
    }

    /// The standard output, if ``Output/captured`` (with standard error in it, if that was
    /// ``Output/standardOutput``).
    package let output: CapturedOutput?
    /// The standard error, if ``Output/captured``.
    package let errors: CapturedOutput?
    private let process = Process()
    private let input: Pipe?

    /// Starts `executable`.
    ///
    /// - Parameters:
    ///   - environment: variables set for the child on top of this process's environment.
    ///   - workingDirectory: the child's working directory; this process's if `nil`.
    /// - Throws: what `Process.run()` throws when the executable cannot be started.
    package init(
        _ executable: URL, arguments: [String] = [], environment: [String: String] = [:],
        workingDirectory: String? = nil, input: Input = .none, output: Output = .captured, errors: Output = .inherit
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }

        switch input {
        case .inherit: self.input = nil
        case .none:
            self.input = nil
            process.standardInput = FileHandle.nullDevice
        case .pipe, .bytes:
            let pipe = Pipe()
            self.input = pipe
            process.standardInput = pipe
        }
        let outputPipe = Self.connect(output, to: &process.standardOutput)
        var errorPipe: Pipe?
        if case .standardOutput = errors {
            if let stream = outputPipe ?? process.standardOutput { process.standardError = stream }
        } else {
            errorPipe = Self.connect(errors, to: &process.standardError)
        }
        try process.run()
        self.output = outputPipe.map { CapturedOutput($0.fileHandleForReading) }
        self.errors = errorPipe.map { CapturedOutput($0.fileHandleForReading) }
        if case .bytes(let data) = input {
            // After the readers started: the child may write much before it reads all of this.
            try? self.input?.fileHandleForWriting.write(contentsOf: data)
            closeInput()
        }
    }

    /// Points `stream` where `output` says; the pipe to capture, if any.
    private static func connect(_ output: Output, to stream: inout Any?) -> Pipe? {
        switch output {
        case .inherit, .standardOutput: return nil
        case .discard: stream = FileHandle.nullDevice
        case .file(let path):
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            stream = FileHandle(forWritingAtPath: path)
        case .captured:
            let pipe = Pipe()
            stream = pipe
            return pipe
        }
        return nil
    }

    package var processID: Int32 { process.processIdentifier }

    package var isRunning: Bool { process.isRunning }

    /// The next line of ``output``, without its newline; `nil` if none came within `timeout`
    /// (`nil`: no bound) or the child closed its standard output.
    package func nextLine(within timeout: Duration? = nil) -> String? {
        output?.nextLine(within: timeout)
    }

    /// Writes `line` and a newline to the child's standard input (a ``Input/pipe``).
    package func send(_ line: String) {
        try? input?.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes the child's standard input: it reads end-of-file.
    package func closeInput() {
        try? input?.fileHandleForWriting.close()
    }

    /// Sends `number` to the child with kill(2).
    package func signal(_ number: Int32) {
        _ = kill(process.processIdentifier, number)
    }

    /// Waits until the child has ended.
    @discardableResult
    package func wait() -> Termination {
        process.waitUntilExit()
        let status = process.terminationStatus
        return process.terminationReason == .uncaughtSignal ? .signalled(status) : .exited(status)
    }

    /// Closes the child's standard input, which tells a helper reading it to finish, and waits.
    @discardableResult
    package func finish() -> Termination {
        closeInput()
        return wait()
    }
}
