import Dispatch
import SharedCache

/// Runs async work to completion from synchronous command code (the tools' commands and the
/// benchmark's timing loops are synchronous).
package func runBlocking<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) throws -> Result {
    let outcome = Locked<Swift.Result<Result, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Swift.Result<Result, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}
