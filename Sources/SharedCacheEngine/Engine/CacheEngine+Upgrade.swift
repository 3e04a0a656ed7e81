import SharedCacheFormat
import SharedCachePlatform

extension CacheEngine {
    /// Upgrades a directory of an older format version (1 or 2) to the current version, in
    /// place: its blobs and pack segments stay where they are, readable as they were.
    ///
    /// Under the directory lock, in an order that keeps every step safe to interrupt and to
    /// repeat: make `packs/` (a version 1 directory has none); seal the older journal segment
    /// into a new segment of the current version (a process of the older version that is still
    /// running then stops at it with an error, rather than misreading it, and cannot rebuild
    /// the manifest over ours); write the manifest in the current version; and last, the
    /// `format` file. Until that last write the directory still says the older version, and
    /// the next opener of this version does the rest.
    func upgradeFormat() throws(SharedCacheError) {
        try directory.perform("upgrading \(path) to format version \(FormatVersion.current)") {
            try directoryLock.withExclusiveLock(timeout: configuration.lockTimeout) {
                // Another process may have finished the upgrade while we waited.
                guard try directory.checkFormat().major < FormatVersion.current.major else { return }
                try directory.makeDirectory(CacheDirectory.packsDirectory)
                let durable = isDurable
                let sealed = try withAppendLock { live in (try live.seal(durable: durable), nil) }
                try ManifestFile.write(
                    sealed.index, generation: sealed.generation, lastSequence: sealed.lastSequence, in: directory,
                    durable: durable)
                try directory.replaceFile(FormatVersion.fileName, with: FormatVersion.current.encoded(), durable: true)
            }
        }
    }
}
