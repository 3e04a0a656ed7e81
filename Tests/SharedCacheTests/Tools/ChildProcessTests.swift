import Foundation
import SharedCacheCLI
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The helper every test, the demo, the benchmark and the stress run start processes with: a
/// child must neither hold this process's descriptors open nor leave a wait hanging.
@Suite struct ChildProcessTests {
    static let shell = URL(fileURLWithPath: "/bin/sh")
    static let cat = URL(fileURLWithPath: "/bin/cat")

    /// A pipe opened without close-on-exec, as Foundation's `Pipe` and much C code open theirs,
    /// is not inherited: a long-lived child holding its write end would keep its reader from
    /// ever seeing the end.
    ///
    /// The end is waited for (up to 10 s, while the child runs on): a child another test is
    /// starting at that moment holds a copy of every descriptor between its fork and its exec.
    @Test func aChildInheritsNoDescriptorButItsStandardStreams() throws {
        var ends: [Int32] = [-1, -1]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        _ = fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK)

        let child = try ChildProcess(Self.cat, input: .pipe)
        close(ends[1])
        var ready = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
        _ = poll(&ready, 1, 60_000)
        var byte: UInt8 = 0
        let count = read(ends[0], &byte, 1)
        let readError = errno
        #expect(count == 0, "the child kept the write end open (read: \(count), errno \(readError))")
        #expect(child.finish() == .exited(0))
    }

    /// Many short children started at once from several threads, while a long-lived one runs,
    /// each end with the status they exited with, and each one's output reaches its end.
    @Test(.hangLimit) func childrenStartedTogetherAreEachWaitedFor() throws {
        let keeper = try ChildProcess(Self.cat, input: .pipe)
        let threads = 8, perThread = 12
        let results = Results(count: threads * perThread)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread {
                let number = thread * perThread + index
                let script = "echo \(number); exit \(number % 100)"
                let outcome = try? ChildProcess.run(Self.shell, arguments: ["-c", script])
                results.record(number, outcome.map { ($0.termination, $0.output) })
            }
        }
        for number in 0..<(threads * perThread) {
            let outcome = results[number]
            #expect(outcome?.termination == .exited(Int32(number % 100)), "child \(number)")
            #expect(outcome?.output == "\(number)\n", "child \(number)")
        }
        #expect(keeper.isRunning)
        #expect(keeper.finish() == .exited(0))
    }

    /// A child that a signal ends reports the signal.
    @Test func aSignalledChildReportsItsSignal() throws {
        let child = try ChildProcess(Self.shell, arguments: ["-c", "kill -TERM $$"])
        #expect(child.wait() == .signalled(SIGTERM))
        #expect(!child.isRunning)
    }

    /// Standard streams left as this process's own stay open in the child: on Darwin, where
    /// only the descriptors a spawn names are inherited, they must be named.
    @Test func inheritedStreamsStayOpenInTheChild() throws {
        // A redirection to a closed descriptor fails, and the shell exits non-zero.
        let child = try ChildProcess(
            Self.shell, arguments: ["-c", ": >&1 && : >&2"], output: .inherit, errors: .inherit)
        #expect(child.wait() == .exited(0))
    }

    /// The child starts with no signal blocked, whatever the thread that started it blocks: a
    /// test runner's threads may block SIGTERM, and a child inheriting that could not be stopped.
    @Test func aChildStartsWithNoSignalBlocked() throws {
        var blocked = sigset_t(), previous = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let started = Result { try ChildProcess(Self.cat, input: .pipe) }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        let child = try started.get()

        child.signal(SIGTERM)
        let ended = eventually { !child.isRunning }
        if !ended { child.signal(SIGKILL) }
        #expect(ended, "SIGTERM was blocked in the child")
        #expect(child.wait() == .signalled(SIGTERM))
    }

    /// The child starts with every signal's default action, whatever this process ignores: a
    /// tool ignores SIGTERM on Darwin (to route it to a dispatch source), and a child that
    /// inherited that could not be stopped. SIGUSR2, which nothing here uses, stands in.
    @Test func aChildStartsWithNoSignalIgnored() throws {
        let previous = signal(SIGUSR2, SIG_IGN)
        let started = Result { try ChildProcess(Self.shell, arguments: ["-c", "kill -USR2 $$; exit 0"]) }
        signal(SIGUSR2, previous)
        #expect(try started.get().wait() == .signalled(SIGUSR2))
    }

    @Test func aMissingExecutableIsAnError() {
        #expect(throws: POSIXError(.ENOENT)) {
            try ChildProcess(URL(fileURLWithPath: "/nonexistent/program"))
        }
    }

    /// Each child's outcome, recorded from several threads.
    private final class Results: @unchecked Sendable {
        private let lock = NSLock()
        private var outcomes: [(termination: ChildProcess.Termination, output: String)?]

        init(count: Int) { outcomes = Array(repeating: nil, count: count) }

        func record(_ number: Int, _ outcome: (ChildProcess.Termination, String)?) {
            lock.withLock { outcomes[number] = outcome.map { (termination: $0.0, output: $0.1) } }
        }

        subscript(number: Int) -> (termination: ChildProcess.Termination, output: String)? {
            lock.withLock { outcomes[number] }
        }
    }
}
