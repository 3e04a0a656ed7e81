package import SharedCacheEngine

// What the admin tool needs beyond the cache API, from the engine. `package`: for the tools of
// this package, not a promise to library users.
extension SharedCache {
    /// The shared limits as the `config` file has them.
    package typealias SharedLimits = CacheEngine.SharedLimits

    /// Every live entry with the metadata its header holds, oldest access first.
    package func listEntries() throws(SharedCacheError) -> [ListedEntry] {
        try engine.listEntries()
    }

    /// The entry whose key hashes to `hash`, if there is one.
    package func listedEntry(hash: KeyHash) throws(SharedCacheError) -> ListedEntry? {
        try engine.listedEntry(hash: hash)
    }

    /// A reader of the whole journal, oldest segment first.
    package func journalListing() -> JournalListing {
        engine.journalListing()
    }

    /// The journal segments present and the manifest's size, for `sharedcache stat`.
    package func layout() throws(SharedCacheError) -> DirectoryLayout {
        try engine.layout()
    }

    /// Changes the shared limits in `config` and adopts them in this process.
    @discardableResult
    package func updateSharedLimits(_ change: (inout SharedLimits) -> Void) throws(SharedCacheError) -> SharedLimits {
        try engine.updateSharedLimits(change)
    }
}
