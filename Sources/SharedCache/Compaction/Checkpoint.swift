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
    /// Files in `tmp/` left by writers that died, deleted.
    public var sweptTemporaryFiles: Int
}

extension SharedCache {
    /// How long a file in `tmp/` may go unmodified before it is taken for a dead writer's.
    static let temporaryFileGracePeriod: Int64 = 3600 * 1000

    /// Folds the journal into a new manifest and starts a new journal segment.
    ///
    /// Under the directory lock: seal the current segment (holding its append lock only for
    /// that one record), write the manifest of every entry live at the seal, then delete the
    /// segments the manifest covers. The segment just sealed is kept until the next checkpoint,
    /// so a process reading it still finds its way to the next one. Appends in other processes
    /// continue during the manifest write.
    ///
    /// The compactor runs this after each pass; a process without one may call it whenever the
    /// journal has grown.
    @discardableResult
    public func checkpoint() throws(SharedCacheError) -> CheckpointSummary {
        try directory.perform("checkpointing \(path)") {
            try directoryLock.withExclusiveLock(timeout: configuration.lockTimeout) {
                let sealed = try state.withLock { state in
                    try state.live.seal(timeout: configuration.lockTimeout, durable: isDurable)
                }
                try ManifestFile.write(
                    sealed.index, generation: sealed.generation, lastSequence: sealed.lastSequence, in: directory,
                    durable: isDurable)
                var retired: [UInt64] = []
                for generation in try JournalSegment.generations(in: directory) where generation + 1 < sealed.generation
                {
                    try directory.removeFile(JournalSegment.name(generation))
                    retired.append(generation)
                }
                return CheckpointSummary(
                    generation: sealed.generation, entryCount: sealed.index.count,
                    manifestBytes: ManifestCoding.headerSize + sealed.index.count * ManifestCoding.entrySize + 4,
                    retiredSegments: retired, sweptTemporaryFiles: try sweepTemporaryFiles())
            }
        }
    }

    /// Deletes files in `tmp/` nobody has written to for the grace period: writers that died.
    ///
    /// Judged by age, not by process ID, because a writer in another PID namespace (a
    /// container sharing the directory) would look dead.
    private func sweepTemporaryFiles() throws -> Int {
        let cutoff = Clock.nowMilliseconds() - Self.temporaryFileGracePeriod
        var swept = 0
        for name in try directory.contents(of: CacheDirectory.temporaryDirectory) {
            let path = "\(CacheDirectory.temporaryDirectory)/\(name)"
            guard let status = try directory.status(of: path), status.modifiedMilliseconds < cutoff,
                !status.isDirectory
            else { continue }
            try directory.removeFile(path)
            swept += 1
        }
        return swept
    }
}
