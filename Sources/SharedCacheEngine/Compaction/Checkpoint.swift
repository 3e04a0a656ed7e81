import SharedCacheFormat
import SharedCachePlatform

/// What a checkpoint did.
public struct CheckpointSummary: Sendable, Hashable {
    /// The journal segment appends now go to; the new manifest replays from its start.
    public var generation: UInt64
    /// Live entries written to the manifest.
    public var entryCount: Int
    /// Bytes of the new manifest.
    public var manifestBytes: Int
    /// Journal segments deleted because the new manifest covers them.
    public var retiredSegments: [UInt64]
    /// Files in `tmp/` and `fetching/` left by processes that died, deleted.
    public var sweptTemporaryFiles: Int
}

extension CacheEngine {
    /// How long a file in `fetching/` may go unmodified before the sweep may delete it (when
    /// nobody holds it): creating one per request would cost more than the rest of a fetch.
    package static let temporaryFileGracePeriod: Int64 = 3600 * 1000

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
    package func checkpoint() throws(SharedCacheError) -> CheckpointSummary {
        try directory.perform("checkpointing \(path)") {
            try directoryLock.withExclusiveLock(timeout: configuration.lockTimeout) {
                let durable = isDurable
                let sealed = try withAppendLock { live in (try live.seal(durable: durable), nil) }
                try ManifestFile.write(
                    sealed.index, generation: sealed.generation, lastSequence: sealed.lastSequence, in: directory,
                    durable: isDurable)
                let retired = try retireSegments(before: sealed.generation - 1)
                return CheckpointSummary(
                    generation: sealed.generation, entryCount: sealed.index.count,
                    manifestBytes: ManifestCoding.headerSize + sealed.index.count * ManifestCoding.entrySize + 4,
                    retiredSegments: retired, sweptTemporaryFiles: try sweepTemporaryFiles())
            }
        }
    }

    /// Deletes the segments older than `generation` that were sealed longer ago than the
    /// retention period (a sealed segment's modification time is its seal's).
    private func retireSegments(before generation: UInt64) throws -> [UInt64] {
        let cutoff = now() - configuration.journalRetention.milliseconds
        var retired: [UInt64] = []
        for candidate in try JournalSegment.generations(in: directory) where candidate < generation {
            let name = JournalSegment.name(candidate)
            guard let status = try directory.status(of: name), status.modifiedMilliseconds <= cutoff else { continue }
            try directory.removeFile(name)
            retired.append(candidate)
        }
        return retired
    }

    /// Deletes files in `tmp/` whose writers are gone: nobody holds their lock (see
    /// `CacheDirectory.isLeftover`). Judged by the lock, not by the clock or a process ID (a
    /// writer in another PID namespace, a container sharing the directory, would look dead).
    private func sweepTemporaryFiles() throws -> Int {
        let now = now()
        var swept = 0
        for name in try directory.contents(of: CacheDirectory.temporaryDirectory) {
            let path = "\(CacheDirectory.temporaryDirectory)/\(name)"
            guard try directory.isLeftover(path, now: now) else { continue }
            try directory.removeFile(path)
            swept += 1
        }
        let cutoff = now - Self.temporaryFileGracePeriod
        return swept + (try FetchLock.sweep(in: directory, olderThan: cutoff))
    }
}
