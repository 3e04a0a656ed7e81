import Foundation
import Testing

@testable import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SharedCache under an app's own URLSession (`install(in:)`) and in URLSession's shape
/// (`data(for:)`), written as an app would use them, against nginx on loopback.
@Suite("Adoption: SharedCache under URLSession")
struct URLSessionAdoptionTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    /// A session as an app makes one, with `cache` installed.
    func session(_ cache: SharedCache) -> URLSession {
        let configuration = URLSessionConfiguration.default
        cache.install(in: configuration)
        return URLSession(configuration: configuration)
    }

    @Test func installTurnsFoundationsCacheOffAndPutsTheProtocolFirst() throws {
        let cache = try SharedCache(directory: directory("cache"))
        let configuration = URLSessionConfiguration.default
        let earlier = configuration.protocolClasses ?? []
        cache.install(in: configuration)
        cache.install(in: configuration)  // again: replaces, never stacks
        let classes = configuration.protocolClasses ?? []
        #expect(configuration.urlCache == nil)
        #expect(classes.first is SharedCacheURLProtocol.Type)
        #expect(classes.filter { $0 is SharedCacheURLProtocol.Type }.count == 1)
        #expect(classes.count == earlier.count + 1)
    }

    @Test func aFreshResponseIsServedWithoutTheNetworkAndSaysSo() async throws {
        try origin.write("/fresh/logo.txt", "the logo")
        let cache = try SharedCache(directory: directory("cache"))
        let session = session(cache)
        let url = origin.url("/fresh/logo.txt")

        let (first, firstResponse) = try await session.data(from: url)
        let (second, secondResponse) = try await session.data(from: url)
        #expect(first == Data("the logo".utf8) && second == first)
        let status = try #require(secondResponse as? HTTPURLResponse)
        #expect(status.statusCode == 200)
        #expect(status.value(forHTTPHeaderField: "Cache-Status")?.hasPrefix("SharedCache; hit; ttl=") == true)
        #expect((firstResponse as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status")?
            .contains("fwd=uri-miss; fwd-status=200; stored") == true)
        // One request reached nginx: the second answer came from the cache.
        #expect(origin.requests(to: "/fresh/logo.txt", atLeast: 1).count == 1)
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: url)) != nil)
    }

    @Test func noCacheIsAConditionalRequestAndTheAppSeesTheStored200WithItsBody() async throws {
        let body = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try origin.write("/fresh/data.bin", body)
        let cache = try SharedCache(directory: directory("cache"))
        let session = session(cache)
        var request = URLRequest(url: origin.url("/fresh/data.bin"))
        _ = try await session.data(for: request)
        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        let (data, response) = try await session.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200 && data == body)
        #expect(http.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd-status=304") == true)
        let logged = origin.requests(to: "/fresh/data.bin", atLeast: 2)
        #expect(logged.map(\.status) == [200, 304])
        #expect(logged.last?.ifNoneMatch != nil)
    }

    @Test func aPostGoesThroughIsNotStoredAndInvalidatesTheURL() async throws {
        try origin.write("/things/list", "one thing")
        let cache = try SharedCache(directory: directory("cache"))
        let session = session(cache)
        let url = origin.url("/things/list")
        _ = try await session.data(from: url)
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: url)) != nil)

        var post = URLRequest(url: url)
        post.httpMethod = "POST"
        post.httpBody = Data("new".utf8)
        let (_, response) = try await session.data(for: post)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
        #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd=method") == true)
        let _ = try await session.data(for: post)
        #expect(origin.requests(atLeast: 3).filter { $0.method == "POST" }.count == 2)
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: url)) == nil)
    }

    @Test func aDeadOriginIsCannotConnectToHost() async throws {
        let cache = try SharedCache(directory: directory("cache"))
        let refusing = try RefusingPort()
        defer { withExtendedLifetime(refusing) {} }
        let url = URL(string: "http://127.0.0.1:\(refusing.port)/fresh/x")!
        do {
            _ = try await session(cache).data(from: url)
            Issue.record("a dead origin answered")
        } catch let error as URLError {
            #expect(error.code == .cannotConnectToHost)
        }
        // data(for:) throws URLError by type: `error.code` compiles in a bare catch.
        do {
            _ = try await cache.data(from: url)
            Issue.record("a dead origin answered")
        } catch {
            #expect(error.code == .cannotConnectToHost)
            #expect(error.sharedCacheError?.code == .network)
        }
    }

    @Test func cancellingMidBodyIsCancelledAndStoresNothingPartial() async throws {
        // 3 MB at 100 KB/s: thirty seconds of body; each task is cancelled once its download
        // holds the URL's fetch lock, so the cancellation comes mid-body (unless the machine
        // stalls this test for longer than the download, when the whole body may be stored:
        // never a part of it).
        let size = 3_000_000
        try origin.write("/stall/big.bin", Data(count: size))
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/stall/big.bin")
        let key = SharedCache.cacheKey(for: url)
        let session = session(cache)
        let task = Task { try await session.data(from: url) }
        try await Self.cancel(task, onceFetching: url, in: directory("cache"))
        do {
            _ = try await task.value
            Issue.record("a cancelled task returned a body")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
        }
        // At most one request, never a retry. nginx logs it once the connection is dropped, when
        // the 30 s of body end, or 10 s after the client stopped reading (the origin's
        // send_timeout). None at all when the cancellation came before the request left: the
        // fetch lock is taken before sending, and under the address sanitizer CI saw that.
        #expect(origin.requests(to: "/stall/big.bin", atLeast: 1, timeout: 45).count <= 1)
        let stored = try cache.entry(forKey: key)
        #expect(stored == nil || stored?.size == UInt64(size), "a partial body was stored")

        // The same through data(for:).
        try cache.remove(key: key)
        let direct = Task { try await cache.data(from: url) }
        try await Self.cancel(direct, onceFetching: url, in: directory("cache"))
        do {
            let (data, _) = try await direct.value
            #expect(data.count == size, "a cancelled fetch returned part of a body")
        } catch let error as URLError {
            #expect(error.code == .cancelled)
            #expect(error.sharedCacheError?.code == .cancelled)
        }
        let again = try cache.entry(forKey: key)
        #expect(again == nil || again?.size == UInt64(size), "a partial body was stored")
    }

    @Test func twoCachesInOneProcessStayApart() async throws {
        try origin.write("/fresh/shared.txt", "body")
        let first = try SharedCache(directory: directory("one"))
        let second = try SharedCache(directory: directory("two"))
        let (firstSession, secondSession) = (session(first), session(second))
        let url = origin.url("/fresh/shared.txt")
        let key = SharedCache.cacheKey(for: url)

        _ = try await firstSession.data(from: url)
        #expect(try first.entry(forKey: key) != nil)
        #expect(try second.entry(forKey: key) == nil)
        _ = try await secondSession.data(from: url)
        #expect(try second.entry(forKey: key) != nil)
        // Each cache answered its own session: one request each reached nginx, and a third
        // (fresh, from the first cache) none.
        _ = try await firstSession.data(from: url)
        #expect(origin.requests(to: "/fresh/shared.txt", atLeast: 2).count == 2)

        let classes = [first, second].map { cache -> ObjectIdentifier in
            let configuration = URLSessionConfiguration.ephemeral
            cache.install(in: configuration)
            return ObjectIdentifier(configuration.protocolClasses![0])
        }
        #expect(classes[0] != classes[1])
    }

    @Test func fiveColdProcessesWithInstalledSessionsDownloadOnce() async throws {
        try origin.write("/slow/cold.bin", Data((0..<1_500_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }))
        _ = try SharedCache(directory: directory("cache"))
        let workers = try (0..<5).map { _ in
            try Worker.start(
                ["session-fetch", directory("cache"), origin.url("/slow/cold.bin").absoluteString, "on-go"],
                input: .pipe)
        }
        for worker in workers { #expect(await worker.nextLine(within: .seconds(300)) == "ready") }
        for worker in workers { worker.send("go") }
        for worker in workers {
            let result = await Worker.Result(finishing: worker)
            #expect(result.status == 0, "\(result.errors)")
            #expect(Worker.counters(result.output)["bytes"] == 1_500_000)
            #expect(Worker.counters(result.output)["status"] == 200)
        }
        #expect(origin.requests(to: "/slow/cold.bin", atLeast: 1).count == 1)
    }

    // MARK: Helpers

    /// A loopback port nobody listens on, which refuses every connection: bound and never
    /// listened on, and kept bound for as long as this lives, so that no other test's server
    /// takes it meanwhile (one closed at once was taken by another test's origin, which answered).
    final class RefusingPort {
        let port: Int
        private let socket: Int32

        init() throws {
            (socket, port) = try URLSessionAdoptionTests.boundSocket()
        }

        deinit { close(socket) }
    }

    private static func boundSocket() throws -> (Int32, Int) {
        #if canImport(Glibc)
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let socket = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                guard bind(socket, raw, length) == 0, getsockname(socket, raw, &length) == 0 else {
                    close(socket)
                    throw POSIXError(.EADDRINUSE)
                }
            }
        }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Whether some fetch holds `url`'s fetch lock in the cache at `root` (the request is then
    /// on the wire).
    static func isFetching(_ url: URL, in root: String) -> Bool {
        let path = "\(root)/fetching/\(KeyHash(key: SharedCache.cacheKey(for: url)).hex)"
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        let held = flock(descriptor, LOCK_EX | LOCK_NB) != 0
        if !held { flock(descriptor, LOCK_UN) }
        return held
    }

    /// Cancels `task` as soon as some fetch holds `url`'s fetch lock in the cache at `root`,
    /// from a thread of its own (see ``act(once:within:_:)``).
    static func cancel<Success: Sendable, Failure: Error>(
        _ task: Task<Success, Failure>, onceFetching url: URL, in root: String
    ) async throws {
        #expect(try await act(once: { isFetching(url, in: root) }) { task.cancel() }, "nobody started fetching \(url)")
    }
}
