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

/// One output stream of a ``ChildProcess``, read to its end on a thread of its own as the child
/// writes it, kept until the caller takes it as lines or bytes.
package final class CapturedOutput: @unchecked Sendable {
    private let condition = NSCondition()
    private var buffer: [UInt8] = []  // guarded by `condition`, as are the three below
    private var consumed = 0  // bytes of `buffer` already returned
    private var scanned = 0  // bytes of `buffer` known to hold no newline after `consumed`
    private var closed = false

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                condition.lock()
                if chunk.isEmpty { closed = true } else { buffer.append(contentsOf: chunk) }
                condition.broadcast()
                condition.unlock()
                if chunk.isEmpty { break }
            }
        }
    }

    /// Waits, with `condition` held, until `ready` holds, the writer closed its end, or
    /// `deadline` passed; returns whether `ready` holds.
    private func wait(until deadline: Date?, for ready: () -> Bool) -> Bool {
        while !ready() && !closed {
            if let deadline {
                guard condition.wait(until: deadline) else { return ready() }
            } else {
                condition.wait()
            }
        }
        return ready()
    }

    private func deadline(_ timeout: Duration?) -> Date? {
        timeout.map { Date().addingTimeInterval(Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18) }
    }

    /// The next line without its newline; `nil` if none came within `timeout` (`nil`: no bound)
    /// or the writer closed its end with nothing more. A last line without a newline counts.
    package func nextLine(within timeout: Duration? = nil) -> String? {
        let deadline = deadline(timeout)
        condition.lock()
        defer { condition.unlock() }
        var newline: Int?
        _ = wait(until: deadline) {
            newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n"))
            scanned = newline ?? buffer.count
            return newline != nil
        }
        let end: Int
        if let newline {
            end = newline
        } else if closed && consumed < buffer.count {
            end = buffer.count
        } else {
            return nil
        }
        let line = String(decoding: buffer[consumed..<end], as: UTF8.self)
        consumed = min(end + 1, buffer.count)
        scanned = consumed
        if consumed >= 1 << 16 {
            buffer.removeFirst(consumed)
            scanned -= consumed
            consumed = 0
        }
        return line
    }

    /// Lines up to the first that satisfies `predicate` (returned last), waiting up to `timeout`
    /// for each; `nil` if it did not come.
    package func lines(through predicate: (String) -> Bool, within timeout: Duration? = nil) -> [String]? {
        var result: [String] = []
        while let line = nextLine(within: timeout) {
            result.append(line)
            if predicate(line) { return result }
        }
        return nil
    }

    /// Lines up to (not including) one equal to `marker`, or to the end.
    package func lines(until marker: String) -> [String] {
        var lines: [String] = []
        while let line = nextLine(), line != marker { lines.append(line) }
        return lines
    }

    /// Every line not yet returned, once the writer closed its end; `nil` if it did not within
    /// `timeout` (`nil`: no bound).
    package func rest(within timeout: Duration? = nil) -> [String]? {
        guard let data = remainingData(within: timeout) else { return nil }
        var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        if lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Every byte not yet returned, once the writer closed its end; `nil` if it did not within
    /// `timeout` (`nil`: no bound).
    package func remainingData(within timeout: Duration? = nil) -> Data? {
        let deadline = deadline(timeout)
        condition.lock()
        defer { condition.unlock() }
        guard wait(until: deadline, for: { closed }) else { return nil }
        defer {
            buffer = []
            consumed = 0
            scanned = 0
        }
        return Data(buffer[consumed...])
    }

    /// Every byte not yet returned, as text, once the writer closed its end.
    package func remainingText() -> String {
        String(decoding: remainingData() ?? Data(), as: UTF8.self)
    }

    /// Calls `body` with each line as it comes, on a thread of its own, until the writer closes
    /// its end.
    package func forEachLine(_ body: @escaping @Sendable (String) -> Void) {
        Thread.detachNewThread { [self] in
            while let line = nextLine() { body(line) }
        }
    }
}
