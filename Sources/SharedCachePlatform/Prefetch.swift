import CSharedCacheSupport

/// Starts loading the memory at `address` into the cache for a write soon, and returns at once
/// (a hint: it never faults). Lets a loop over a table far larger than the caches request the
/// slot it will need a few steps ahead, so that its cache misses overlap instead of adding up.
package func prefetchForWriting(_ address: UnsafeRawPointer) {
    scs_prefetch_for_writing(address)
}
