import SharedCacheFormat
import SharedCachePlatform

extension CacheEngine {
    /// Upgrades a directory of format version 1 to the current version, in place: its blobs
    /// stay where they are, readable as large entries, and small bodies stored from now on go
    /// to pack segments.
    ///
    /// Under the directory lock, in an order that keeps every step safe to interrupt and to
    /// repeat: make `packs/`; seal the version 1 journal segment into a new segment of the
    /// current version (a version 1 process that is still running then stops at it with an
    /// error, rather than misreading it, and cannot rebuild the manifest over ours); write the
    /// manifest in the current version; and last, the `format` file. Until that last write
    /// the directory still says version 1, and the next opener of this version does the rest.
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
