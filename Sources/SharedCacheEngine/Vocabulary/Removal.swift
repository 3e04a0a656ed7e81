#if canImport(Dispatch)
package import Dispatch
#endif
public import SharedCacheFormat
import SharedCachePlatform

/// One version of an entry that is gone, as every process following the journal learns of it:
/// the cross-process form of Kingfisher's "cleaned disk cache" hashes.
public struct Removal: Sendable, Hashable, CustomStringConvertible {
    /// The entry's identity: SHA-256 of its key.
    public var hash: KeyHash
    /// The key, when the process that removed the entry knew it (a `remove(key:)`, a superseding
    /// put, a discarded blob); `nil` for removals by hash and for `clear`.
    public var key: String?
    /// Why it was removed.
    public var reason: RemovalReason
    /// The process that removed it; `nil` when learned by resynchronising (reason `.unknown`).
    public var remover: Remover?
    /// The journal sequence number of the record that removed it (a removal, a clear, or a put
    /// that superseded it); `nil` when learned by resynchronising. Numbers increase along the
    /// journal but skip (format version 3 numbers a record by its place). Removals from one
    /// `clear` share its record's number.
    public var sequence: UInt64?

    public var description: String {
        let who = remover.map { " by \($0)" } ?? ""
        return "\(hash.hex.prefix(16))… \(reason)\(who)" + (key.map { " (\($0))" } ?? "")
    }
}

/// A callback subscription to removals; cancel it, or let it go, to stop.
public final class RemovalSubscription: Sendable {
    private let cancellation: Locked<(@Sendable () -> Void)?>

    package init(cancel: @escaping @Sendable () -> Void) {
        cancellation = Locked(cancel)
    }

    /// Stops delivery. Batches already handed to the callback's queue may still run.
    public func cancel() {
        let cancel = cancellation.withLock { current -> (@Sendable () -> Void)? in
            defer { current = nil }
            return current
        }
        cancel?()
    }

    deinit { cancel() }
}

/// Where one subscriber's batches go.
package enum RemovalSubscriber {
    case stream(AsyncStream<[Removal]>.Continuation)
    case callback(DispatchQueue, @Sendable ([Removal]) -> Void)
    /// Told only that the journal moved (any record, not just removals): the compactor's wake-up.
    case change(DispatchQueue, @Sendable () -> Void)

    package var wantsRemovals: Bool {
        if case .change = self { return false }
        return true
    }

    /// Hands over a batch without running subscriber code on the caller's thread: a stream
    /// buffers it, a callback runs later on its own serial queue. Order is kept either way.
    package func deliver(_ batch: [Removal]) {
        switch self {
        case .stream(let continuation): continuation.yield(batch)
        case .callback(let queue, let handler): queue.async { handler(batch) }
        case .change: break
        }
    }

    package func journalMoved() {
        if case .change(let queue, let handler) = self { queue.async { handler() } }
    }
}
