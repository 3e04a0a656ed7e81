import Foundation
import SharedCacheEngine
import SharedCachePlatform

/// A store running on a thread of its own, its outcome awaited later. The store waits for the
/// body as it arrives (for minutes, on a slow network), so it takes a thread from no pool: not
/// the cooperative pool (the receiver feeding it may block one of its threads, and the store
/// would wait for itself), nor Dispatch's global queues (whose few threads the cache's other
/// blocking work shares; a store holding one would stall it, and a store waiting for one would
/// stall, through the full pipe, every transfer of the session).
final class Storing: Sendable {
    /// What the store did: stored the response, or (told not to publish it) handed back its body.
    typealias Outcome = Publication<CacheEngine.StoredOutcome>

    private let state = Locked<(outcome: Result<Outcome, any Error>?, waiter: Waiter?)>((nil, nil))
    private typealias Waiter = CheckedContinuation<Outcome, any Error>

    init(_ work: @escaping @Sendable () throws -> Outcome) {
        let thread = Thread { self.finish(Result { try work() }) }
        thread.name = "SharedCache store"
        thread.start()
    }

    private func finish(_ outcome: Result<Outcome, any Error>) {
        let waiter = state.withLock { state -> Waiter? in
            state.outcome = outcome
            return state.waiter
        }
        waiter?.resume(with: outcome)
    }

    /// What the store did, once it is done.
    var value: Outcome {
        get async throws {
            try await withCheckedThrowingContinuation { (waiter: Waiter) in
                let outcome = state.withLock { state -> Result<Outcome, any Error>? in
                    if state.outcome == nil { state.waiter = waiter }
                    return state.outcome
                }
                if let outcome { waiter.resume(with: outcome) }
            }
        }
    }
}
