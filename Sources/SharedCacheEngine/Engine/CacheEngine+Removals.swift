import Dispatch
import SharedCacheFormat
import SharedCachePlatform

extension CacheEngine {
    /// Removals made by any process from now on, in journal order, in batches; see
    /// `SharedCache.removals()`.
    package func removals() -> AsyncStream<[Removal]> {
        var registration: (id: UInt64, continuation: AsyncStream<[Removal]>.Continuation)?
        let stream = AsyncStream<[Removal]>(bufferingPolicy: .unbounded) { continuation in
            registration = (subscribe(.stream(continuation)), continuation)
        }
        if let (id, continuation) = registration {
            continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        }
        return stream
    }

    /// Calls `handler` with each batch of removals made by any process from now on, on a
    /// private serial queue; see `SharedCache.onRemovals(_:)`.
    package func onRemovals(_ handler: @escaping @Sendable ([Removal]) -> Void) -> RemovalSubscription {
        let queue = DispatchQueue(label: "SharedCache removals")
        let id = subscribe(.callback(queue, handler))
        return RemovalSubscription { [weak self] in self?.unsubscribe(id) }
    }

    /// Calls `handler` (on a private serial queue) whenever any process appends to the journal.
    /// The compactor uses it to notice growth without polling.
    package func onJournalChange(_ handler: @escaping @Sendable () -> Void) -> RemovalSubscription {
        let id = subscribe(.change(DispatchQueue(label: "SharedCache journal changes"), handler))
        return RemovalSubscription { [weak self] in self?.unsubscribe(id) }
    }

    /// Whether a watcher thread follows the journal (it does while anyone subscribes).
    package var isWatchingJournal: Bool { state.withLock { $0.watcher != nil } }

    /// Registers a subscriber as of the journal's present, starting the watcher for the first.
    private func subscribe(_ subscriber: RemovalSubscriber) -> UInt64 {
        state.withLock { state in
            // Catch up first, delivering to the subscribers already here, so the new one hears
            // only what happens after it subscribed.
            try? state.live.refresh()
            state.deliverRemovals()
            let id = state.nextSubscriberID
            state.nextSubscriberID += 1
            state.subscribers[id] = subscriber
            state.notifiedSequence = state.live.cursor.lastSequence
            state.live.collectsRemovals = state.subscribers.values.contains { $0.wantsRemovals }
            if state.watcher == nil {
                // Without file events (the user's inotify instances used up: EMFILE), it polls
                // at the re-check interval: with no watcher, a subscriber that makes no call of
                // its own would hear nothing. Without even that (no pipe for its stop signal),
                // subscribers still hear everything at this process's next call.
                let segment = JournalSegment.name(state.live.cursor.segment.generation)
                let watcher = { (watching: JournalWatching) in
                    try JournalWatcher(directory: self.directory, watching: watching, segment: segment) {
                        [weak self] in self?.refreshForWatcher()
                    }
                }
                state.watcher =
                    (try? watcher(configuration.journalWatching))
                    ?? (try? watcher(.polling(every: configuration.journalWatching.interval)))
            }
            return id
        }
    }

    private func unsubscribe(_ id: UInt64) {
        let (removed, idleWatcher) = state.withLock { state -> (RemovalSubscriber?, JournalWatcher?) in
            let removed = state.subscribers.removeValue(forKey: id)
            state.live.collectsRemovals = state.subscribers.values.contains { $0.wantsRemovals }
            guard state.subscribers.isEmpty else { return (removed, nil) }
            state.live.collectsRemovals = false
            _ = state.live.takePendingRemovals()
            defer { state.watcher = nil }
            return (removed, state.watcher)
        }
        // Outside the lock: the watcher may be waiting for it to finish its pass.
        idleWatcher?.stop()
        if case .stream(let continuation)? = removed { continuation.finish() }
    }

    /// The watcher's pass: pick up appends and deliver them; returns the segment now read.
    private func refreshForWatcher() -> String? {
        try? withState { state in
            // Woken by the append's write(2), which may come before its appender raises the
            // shared journal end: read the journal, or that record waits for the next wake-up.
            try state.live.refresh(readingTheJournal: true)
            return JournalSegment.name(state.live.cursor.segment.generation)
        }
    }
}
