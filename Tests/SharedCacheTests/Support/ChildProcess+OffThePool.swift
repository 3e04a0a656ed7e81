import SharedCacheCLI

/// A child process's waits for async tests: each waits on a thread of its own
/// (``offThePool(_:)``), holding none of the cooperative pool's, which on 2 cores has 2 threads.
extension ChildProcess {
    /// ``wait()`` for async tests.
    @discardableResult
    func wait() async -> Termination {
        await offThePool { self.wait() }
    }

    /// ``nextLine(within:)`` for async tests.
    func nextLine(within timeout: Duration? = nil) async -> String? {
        await offThePool { self.nextLine(within: timeout) }
    }
}

/// A captured stream's wait for its next line, for async tests (``offThePool(_:)``).
extension CapturedOutput {
    /// ``nextLine(within:)`` for async tests.
    func nextLine(within timeout: Duration? = nil) async -> String? {
        await offThePool { self.nextLine(within: timeout) }
    }

    /// ``rest(within:)`` for async tests.
    func rest(within timeout: Duration? = nil) async -> [String]? {
        await offThePool { self.rest(within: timeout) }
    }
}
