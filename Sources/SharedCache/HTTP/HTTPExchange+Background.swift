import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// stale-while-revalidate (RFC 5861 §3): the revalidation that runs after the stale answer.
extension HTTPExchange {
    /// Revalidates the URL's stored response in a task of its own, unless another fetch of the
    /// URL is under way in any process (its lock is held) or the version seen has been replaced
    /// by the time the lock is taken. ``SharedCache/waitForBackgroundRevalidations()`` waits for it.
    /// A complete response is revalidated by a plain GET; stored parts by the request's `Range`,
    /// which is what finds them again.
    func revalidateInBackground(primaryKey: String, seen: StoredCandidate) {
        let version = seen.version
        var plain = request
        let ranged = seen.parts == nil ? ["Range", "If-Range"] : []
        for name in ranged + ["If-None-Match", "If-Modified-Since", "Cache-Control", "Pragma"] {
            plain.setValue(nil, forHTTPHeaderField: name)
        }
        let exchange = HTTPExchange(cache: cache, request: plain, url: url, options: options, transport: transport)
        BackgroundRevalidations.start(for: cache) {
            do {
                let (lock, _) = try await exchange.cache.fetchLocks.acquire(
                    KeyHash(key: primaryKey), timeout: .zero,
                    describing: exchange.url.absoluteString)
                guard let lock else { return }  // another fetch of the URL is under way
                defer { lock.release() }
                let lookup = try await exchange.lookUp(primaryKey)
                guard let candidate = lookup.candidate, candidate.version == version else { return }
                _ = try await exchange.send(
                    primaryKey: primaryKey, validating: candidate, fallback: nil,
                    status: CacheStatus(forward: .stale), locked: true)
            } catch {
                // A failed background revalidation leaves the stale response as it was; the next
                // use past its window goes to the network in the foreground.
            }
        }
    }
}

/// The background revalidations this process started, per cache, for
/// ``SharedCache/waitForBackgroundRevalidations()``.
enum BackgroundRevalidations {
    private static let tasks = Locked<[ObjectIdentifier: [UInt64: Task<Void, Never>]]>([:])
    private static let next = Locked<UInt64>(0)

    static func start(for cache: CacheEngine, _ work: @escaping @Sendable () async -> Void) {
        let owner = ObjectIdentifier(cache)
        let number = next.withLock { value -> UInt64 in
            value += 1
            return value
        }
        tasks.withLock { tasks in
            tasks[owner, default: [:]][number] = Task.detached {
                await work()
                _ = BackgroundRevalidations.tasks.withLock { $0[owner]?.removeValue(forKey: number) }
            }
        }
    }

    static func wait(for cache: CacheEngine) async {
        while let pending = tasks.withLock({ $0[ObjectIdentifier(cache)]?.values.first }) {
            await pending.value
        }
    }
}
