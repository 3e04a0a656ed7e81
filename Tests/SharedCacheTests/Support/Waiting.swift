import Dispatch
import Foundation
import Testing

/// Checks `condition` every few milliseconds until it holds or `timeout` passed; returns
/// whether it held. The bounded wait for a signal another process or thread leaves (a file it
/// creates, a record it journals), never a guess at how long that takes.
func eventually(within timeout: Duration = .seconds(60), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        Thread.sleep(forTimeInterval: 0.002)
    }
}

/// How long a test waits for a slow download (200 MB at 1 MB/s) to get under way. It bounds
/// only a hang: under the thread sanitizer, with every suite running on 2 cores, one fetch sent
/// its first request more than 180 s after it was started. The download itself lasts 200 s
/// from that request, so it is still under way whenever the wait ends.
let downloadUnderWayTimeout: Duration = .seconds(600)

extension Trait where Self == TimeLimitTrait {
    /// The time limit of a test that once hung: it fails the test that hangs instead of letting
    /// the run hang, and bounds nothing else. A test's body can wait minutes for the cooperative
    /// pool in a loaded run: on CI, two whose bodies take a fifth of a second alone passed 60 s
    /// (and the slow download's wait above is allowed 600 s).
    static var hangLimit: Self { .timeLimit(.minutes(15)) }
}

/// ``eventually(within:_:)`` for async tests: it waits with `Task.sleep`, so it never holds one
/// of the cooperative pool's few threads (on 2 cores, two such waits would starve the very task
/// they wait for).
func eventually(
    within timeout: Duration = .seconds(60), _ condition: () throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// Runs `body`, which blocks (it waits for a process), on a thread of its own, so that an async
/// test waiting for it holds none of the cooperative pool's few threads meanwhile. It throws
/// what `body` throws: nothing, for a wait that cannot fail.
func offThePool<Value: Sendable, Failure: Error>(
    _ body: @escaping @Sendable () throws(Failure) -> Value
) async throws(Failure) -> Value {
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<Value, Failure>, Never>) in
        Thread { continuation.resume(returning: Result { () throws(Failure) -> Value in try body() }) }.start()
    }
    return try result.get()
}

/// Waits on a thread of its own until `condition` holds, and runs `action` on that thread the
/// moment it does (or once the wait ended without it, so that what the test started ends all
/// the same); returns whether it held within `timeout`. For a test that must act while
/// something is under way (kill a download, cancel a fetch): a wait on the cooperative pool,
/// which a loaded run can keep busy for minutes, once missed a 200-second download whole.
func act(
    once condition: @escaping @Sendable () throws -> Bool, within timeout: Duration = downloadUnderWayTimeout,
    _ action: @escaping @Sendable () -> Void
) async throws -> Bool {
    try await offThePool {
        defer { action() }
        return try eventually(within: timeout, condition)
    }
}

/// Makes `path` a file of `size` zero bytes that takes no space (a hole), world-readable: a
/// body for a slow download that lasts minutes, written in an instant.
func makeSparseFile(_ path: String, size: Int) throws {
    guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o644]),
        truncate(path, off_t(size)) == 0
    else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
}
