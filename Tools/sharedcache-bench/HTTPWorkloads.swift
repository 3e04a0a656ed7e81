import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheTestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The HTTP rows: a fetch through the cache next to the same request made with URLSession
/// alone, against nginx on loopback, interleaved request by request.
struct HTTPMeasurement: Codable {
    /// A conditional GET answered 304: bare URLSession (the caller sends the validators and
    /// has the body at hand) versus `fetch` (pin, validators, 304, freshen, serve).
    var bareConditional: Measurement
    var revalidatedFetch: Measurement
    /// A fresh stored response: `fetch` versus a plain `get` of the same body.
    var plainGet: Measurement
    var freshFetch: Measurement
    /// `get` answered from the memory tier, and from disk.
    var memoryGet: Measurement
    var diskGet: Measurement
}

/// nginx on loopback serving two 1 KB files, `/plain/1k.bin` with no freshness (every use
/// revalidates) and `/fresh/1k.bin` fresh for an hour, and a cache that has fetched both.
struct HTTPBenchFixture: Sendable {
    /// The plain file has Last-Modified and no freshness: no heuristic, so every use revalidates.
    static let revalidating = FetchOptions(heuristicFreshness: false)

    /// Kept only to keep nginx running; never used from the closures that capture this.
    nonisolated(unsafe) let origin: LoopbackOrigin
    let cache: SharedCache
    let plain: URL
    let fresh: URL
    let transport = URLSessionTransport()
    let session = URLSessionTransport.uncachedSession
    /// URLSession's own conditional GET of the plain file, with the ETag the cache stored.
    let bareRequest: URLRequest

    /// `nil` where nginx is not installed.
    init?(in root: String) throws {
        let body = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        guard
            let origin = try LoopbackOrigin(
                root: "\(root)/origin", locations: "location /fresh/ { expires 1h; }",
                populate: { www in
                    for folder in ["plain", "fresh"] {
                        try FileManager.default.createDirectory(
                            atPath: "\(www)/\(folder)", withIntermediateDirectories: true)
                        try body.write(to: URL(fileURLWithPath: "\(www)/\(folder)/1k.bin"))
                    }
                })
        else { return nil }
        self.origin = origin
        cache = try SharedCache(directory: "\(root)/cache")
        plain = URL(string: origin.url + "/plain/1k.bin")!
        fresh = URL(string: origin.url + "/fresh/1k.bin")!
        // Warm up both paths (connections, the stored entries).
        let (cache, plain, fresh, transport) = (cache, plain, fresh, transport)
        let first = try runBlocking {
            try await cache.fetch(URLRequest(url: plain), options: Self.revalidating, transport: transport)
        }
        _ = try runBlocking { try await cache.fetch(URLRequest(url: fresh), transport: transport) }
        var conditional = URLRequest(url: plain)
        conditional.setValue(first.headers["ETag"], forHTTPHeaderField: "If-None-Match")
        bareRequest = conditional
    }

    /// URLSession alone: the conditional GET, answered 304.
    func bareConditional() async throws {
        let (_, response) = try await session.data(for: bareRequest)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 304 else { fatalError("nginx answered \(status), not 304") }
    }

    /// A fetch of the plain file: pin, validators, 304, freshen, serve.
    func revalidatedFetch() async throws {
        let result = try await cache.fetch(URLRequest(url: plain), options: Self.revalidating, transport: transport)
        guard result.source == .revalidated else { fatalError("fetch was \(result.source), not revalidated") }
    }
}

func httpWorkloads(in root: String, requests: Int) throws -> HTTPMeasurement? {
    guard let fixture = try HTTPBenchFixture(in: root) else { return nil }
    let (cache, fresh, transport) = (fixture.cache, fixture.fresh, fixture.transport)

    let (bare, revalidated) = try measurePairAsync(
        "conditional GET answered 304", count: requests,
        floor: { _ in try await fixture.bareConditional() }, cache: { _ in try await fixture.revalidatedFetch() })

    let key = SharedCache.cacheKey(for: fresh)
    let (plainGet, freshFetch) = try measurePairAsync(
        "fresh hit", count: requests,
        floor: { _ in guard try cache.get(key: key) != nil else { fatalError("entry missing") } },
        cache: { _ in
            let result = try await cache.fetch(URLRequest(url: fresh), transport: transport)
            guard result.source == .fresh else { fatalError("fetch was \(result.source), not fresh") }
        })

    let disk = try SharedCache(directory: "\(root)/cache", configuration: Configuration(memoryCostLimit: 0))
    let (diskGet, memoryGet) = try measurePair(
        "get 1 KB", count: requests * 5,
        floor: { _ in _ = try disk.get(key: key) },
        cache: { _ in _ = try cache.get(key: key) })
    return HTTPMeasurement(
        bareConditional: bare, revalidatedFetch: revalidated, plainGet: plainGet, freshFetch: freshFetch,
        memoryGet: memoryGet, diskGet: diskGet)
}
