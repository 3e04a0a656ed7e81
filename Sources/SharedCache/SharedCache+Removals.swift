package import SharedCacheEngine

extension SharedCache {
    /// Removals made by any process from now on, in journal order, in batches.
    ///
    /// Every removal — `remove`, `clear`, a superseding put, the compactor's evictions, a
    /// discarded body — reaches every subscriber in every process exactly once. A process that
    /// fell so far behind that the journal records it needed were retired reloads the manifest
    /// and reports each entry it knew that is gone with reason ``RemovalReason/unknown``.
    ///
    /// The stream is fed by a watcher thread (see ``Configuration/journalWatching``) that runs
    /// while anyone subscribes; cancelling the consuming task ends the subscription.
    ///
    /// ```swift
    /// for await batch in cache.removals() {
    ///     for removal in batch { validators[removal.hash] = nil }
    /// }
    /// ```
    public func removals() -> AsyncStream<[Removal]> {
        engine.removals()
    }

    /// Calls `handler` with each batch of removals made by any process from now on.
    ///
    /// Batches arrive in journal order on a private serial queue, never on the thread that
    /// applied them. Keep the returned subscription: delivery stops when it is cancelled or
    /// released.
    public func onRemovals(_ handler: @escaping @Sendable ([Removal]) -> Void) -> RemovalSubscription {
        engine.onRemovals(handler)
    }

    /// Calls `handler` (on a private serial queue) whenever any process appends to the journal
    /// from now on; appends before the call wake nothing, so subscribe first, then read.
    /// The compactor uses it to notice growth without polling.
    package func onJournalChange(_ handler: @escaping @Sendable () -> Void) -> RemovalSubscription {
        engine.onJournalChange(handler)
    }

    /// Whether a watcher thread follows the journal (it does while anyone subscribes).
    package var isWatchingJournal: Bool { engine.isWatchingJournal }
}
