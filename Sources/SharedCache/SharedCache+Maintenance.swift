package import SharedCacheEngine

extension SharedCache {
    /// Folds the journal into a new manifest and starts a new journal segment.
    ///
    /// Under the directory lock: seal the current segment (holding its append lock only for
    /// that one record), write the manifest of every entry live at the seal, then delete the
    /// segments the manifest covers that were sealed longer ago than
    /// ``Configuration/journalRetention``. The segment just sealed is always kept, so a process
    /// reading it finds its way to the next one. Appends in other processes continue during the
    /// manifest write.
    ///
    /// The compactor runs this after each pass; a process without one may call it whenever the
    /// journal has grown.
    @discardableResult
    public func checkpoint() throws(SharedCacheError) -> CheckpointSummary {
        try engine.checkpoint()
    }

    /// Runs one compaction pass now: evicts expired entries, then least recently used ones
    /// down to 90 % of the limits, journals every eviction before reclaiming its body (after
    /// ``Configuration/evictionGracePeriod``), and checkpoints.
    ///
    /// - Throws: `.busy` when a compactor (`sharedcached`) already holds the directory.
    public func compact(_ options: CompactionOptions = CompactionOptions()) throws(SharedCacheError)
        -> CompactionReport
    {
        try engine.compact(options)
    }

    /// Removes every expired entry now, and nothing else: a process without `sharedcached`
    /// calls it to clean up (at launch, or when the app goes to the background).
    ///
    /// Each removal is journaled (reason ``RemovalReason/expired``, with its key) before its
    /// body is reclaimed, so every process hears of it. It is a compaction pass limited to
    /// expired entries (``CompactionOptions/expiredOnly``), and checkpoints the journal.
    ///
    /// - Returns: how many entries were removed.
    /// - Throws: `.busy` when a compactor (`sharedcached`) holds the directory; it removes
    ///   expired entries itself.
    @discardableResult
    public func removeExpired() throws(SharedCacheError) -> Int {
        try engine.compact(CompactionOptions(sweepOrphans: false, expiredOnly: true)).evictions.count
    }

    /// The process ID of the compactor that holds this directory, or `nil` when none runs.
    public func compactorProcessID() throws(SharedCacheError) -> Int32? {
        try engine.compactorProcessID()
    }

    /// Reconciles the journal, the manifest and the bodies: reads every entry's body in full
    /// and checks it, and looks for orphaned, foreign and leftover files.
    ///
    /// - Parameter repair: journal the removal of entries whose body is missing or damaged
    ///   (then reclaim it), truncate a damaged journal tail, and delete orphans, foreign files
    ///   and stale temporary files. Files younger than a minute are left alone: a put may be
    ///   in the middle of publishing them.
    public func verify(repair: Bool = false) throws(SharedCacheError) -> VerificationReport {
        try engine.verify(repair: repair)
    }

    /// Lets go of the one file lock this cache keeps between calls: the exclusive `flock(2)` on
    /// the pack segment its puts append to. The next put takes a segment again.
    ///
    /// iOS ends an app that is suspended while it holds a file lock in a shared container
    /// (exception `0xdead10cc`). Call this when the app moves to the background, and when an
    /// extension is done, after the last put: any put after it takes the lock again, one a
    /// background revalidation makes too, so await ``waitForBackgroundRevalidations()`` first. A
    /// call that is in progress then (a compaction, a fetch, which hold locks while they run)
    /// should finish inside a background task (`UIApplication.beginBackgroundTask`) or be
    /// cancelled.
    public func prepareForSuspension() {
        engine.bodies.finishWriting()
    }
}

extension Compactor {
    /// The compactor of `cache`'s directory, as `sharedcached` keeps one.
    ///
    /// - Throws: `.busy` when another compactor holds the directory.
    package convenience init(cache: SharedCache) throws(SharedCacheError) {
        try self.init(engine: cache.engine)
    }
}
