package import Foundation
import CSharedCacheSupport
import SharedCachePlatform

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
/// It is started with posix_spawn(3) rather than Foundation's `Process`, whose Linux version
/// learns of an exit from a socket the child holds, opened without close-on-exec: a child another
/// thread started meanwhile could inherit that socket and leave the wait spinning until it, too,
/// ended. Here the child inherits only its standard streams, starts with no signal blocked and
/// none ignored, and waiting is waitid(2).
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
    /// The write end of the child's standard input, if ``Input/pipe`` or ``Input/bytes(_:)``.
    private let input: FileHandle?
    /// The child's process ID.
    package let processID: Int32
    /// How the child ended, once reaped. While it is `nil` the child's process ID is still its
    /// own, so signalling it under the lock cannot reach a stranger.
    private let termination = Locked<Termination?>(nil)

    /// Starts `executable`. The child gets the standard streams asked for and no other
    /// descriptor of this process (``scs_spawn``), so a pipe or a lock another thread holds open
    /// cannot outlive its owner in the child.
    ///
    /// - Parameters:
    ///   - environment: variables set for the child on top of this process's environment.
    /// - Throws: `POSIXError` when the executable cannot be started (`ENOENT`, `EACCES`), or a
    ///   pipe or file for its streams cannot be made.
    package init(
        _ executable: URL, arguments: [String] = [], environment: [String: String] = [:],
        input: Input = .none, output: Output = .captured, errors: Output = .inherit
    ) throws {
        var parentEnds: [Int32] = []  // ours, kept open: the pipes' other ends
        var childEnds: [Int32] = []  // the child's, closed here once it has started
        defer { childEnds.forEach { _ = close($0) } }
        /// A pipe between the child and this process; the child reads it or writes it.
        func pipeWithChild(reading childReads: Bool) throws -> (child: Int32, parent: Int32) {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { throw POSIXError.code(errno) }
            let (child, parent) = childReads ? (ends[0], ends[1]) : (ends[1], ends[0])
            childEnds.append(child)
            parentEnds.append(parent)
            return (child, parent)
        }
        func openForChild(_ path: String, _ flags: Int32) throws -> Int32 {
            let descriptor = open(path, flags | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw POSIXError.code(errno) }
            childEnds.append(descriptor)
            return descriptor
        }
        func stream(_ output: Output) throws -> (source: Int32, captured: Int32?) {
            switch output {
            case .inherit, .standardOutput: return (-1, nil)
            case .discard: return (try openForChild("/dev/null", O_WRONLY), nil)
            case .file(let path): return (try openForChild(path, O_WRONLY | O_CREAT | O_TRUNC), nil)
            case .captured:
                let ends = try pipeWithChild(reading: false)
                return (ends.child, ends.parent)
            }
        }

        var inputSource: Int32 = -1
        var inputWriter: Int32?
        do {
            switch input {
            case .inherit: break
            case .none: inputSource = try openForChild("/dev/null", O_RDONLY)
            case .pipe, .bytes:
                let ends = try pipeWithChild(reading: true)
                (inputSource, inputWriter) = (ends.child, ends.parent)
            }
            let (outputSource, outputReader) = try stream(output)
            let (errorSource, errorReader) = try stream(errors)
            let errorTarget: Int32 = if case .standardOutput = errors { 1 } else { errorSource }
            processID = try Self.spawn(
                executable.path, arguments: arguments, environment: environment,
                input: inputSource, output: outputSource, errors: errorTarget)
            self.output = outputReader.map { CapturedOutput(FileHandle(fileDescriptor: $0, closeOnDealloc: true)) }
            self.errors = errorReader.map { CapturedOutput(FileHandle(fileDescriptor: $0, closeOnDealloc: true)) }
            self.input = inputWriter.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) }
        } catch {
            parentEnds.forEach { _ = close($0) }
            throw error
        }
        if case .bytes(let data) = input {
            // After the readers started: the child may write much before it reads all of this.
            try? self.input?.write(contentsOf: data)
            closeInput()
        }
    }

    /// Starts `path` with this process's environment and `environment` on top; its process ID.
    private static func spawn(
        _ path: String, arguments: [String], environment: [String: String], input: Int32, output: Int32,
        errors: Int32
    ) throws -> Int32 {
        let variables = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var pid: Int32 = 0
        let error = scs_spawn(&pid, path, argv, envp, input, output, errors)
        guard error == 0 else { throw POSIXError.code(error) }
        return pid
    }

    /// Whether the child has not ended yet (reaping it if it has).
    package var isRunning: Bool {
        termination.withLock { reap(&$0, waiting: false) == nil }
    }

    /// The next line of ``output``, without its newline; `nil` if none came within `timeout`
    /// (`nil`: no bound) or the child closed its standard output.
    package func nextLine(within timeout: Duration? = nil) -> String? {
        output?.nextLine(within: timeout)
    }

    /// Writes `line` and a newline to the child's standard input (a ``Input/pipe``).
    package func send(_ line: String) {
        try? input?.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Closes the child's standard input: it reads end-of-file.
    package func closeInput() {
        try? input?.close()
    }

    deinit {
        // An ended child nobody waited for is reaped here rather than left a zombie.
        _ = termination.withLock { reap(&$0, waiting: false) }
    }

    /// Sends `number` to the child with kill(2), unless it has ended and been reaped.
    package func signal(_ number: Int32) {
        termination.withLock { termination in
            if termination == nil { _ = kill(processID, number) }
        }
    }

    /// Waits until the child has ended.
    ///
    /// It waits with waitid(2) without reaping, then reaps under the lock: a signal sent
    /// meanwhile reaches the ended child, never a process that took its ID after it.
    @discardableResult
    package func wait() -> Termination {
        var info = siginfo_t()
        while waitid(P_PID, id_t(processID), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
        return termination.withLock { reap(&$0, waiting: true) } ?? .exited(-1)
    }

    /// How the child ended, reaping it if it has, with `termination`'s lock held; `nil` while
    /// it runs.
    private func reap(_ termination: inout Termination?, waiting: Bool) -> Termination? {
        if let termination { return termination }
        var status: Int32 = 0
        var reaped: Int32
        repeat {
            reaped = waitpid(processID, &status, waiting ? 0 : WNOHANG)
        } while reaped < 0 && errno == EINTR
        guard reaped == processID else { return nil }
        // The encoding of wait(2)'s status, which Swift imports no macros for.
        let signal = status & 0x7f
        termination = signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal)
        return termination
    }

    /// Runs `executable` to its end, with its standard error in its standard output; how it
    /// ended and what it printed.
    package static func run(
        _ executable: URL, arguments: [String] = [], environment: [String: String] = [:], input: Input = .none
    ) throws -> (termination: Termination, output: String) {
        let child = try ChildProcess(
            executable, arguments: arguments, environment: environment, input: input, errors: .standardOutput)
        let output = child.output?.remainingText() ?? ""
        return (child.wait(), output)
    }

    /// Closes the child's standard input, which tells a helper reading it to finish, and waits.
    @discardableResult
    package func finish() -> Termination {
        closeInput()
        return wait()
    }
}

extension POSIXError {
    /// The error for an errno value.
    fileprivate static func code(_ value: Int32) -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: value) ?? .EIO)
    }
}
