import Foundation
import SharedCacheCLI
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request per URL across processes, with real worker processes and nginx's log as the
/// judge: a cold URL is downloaded once, a revalidation is shared, and a waiter whose holder
/// stops making progress fetches for itself.
@Suite("HTTP: single flight across processes", .enabled(if: Origin.isAvailable, "needs nginx (apt-get install nginx-light)"))
struct SingleFlightTests {
    let origin: Origin
    let directory: TemporaryDirectory

    init() throws {
        origin = try Origin()
        directory = try TemporaryDirectory()
    }

    /// Waits for every worker; returns each one's output lines.
    func finish(_ workers: [ChildProcess]) async -> [[String]] {
        var lines: [[String]] = []
        for worker in workers {
            let result = await Worker.Result(finishing: worker)
            #expect(result.status == 0, "\(result.errors)")
            lines.append(result.output.split(separator: "\n").map(String.init))
        }
        return lines
    }

    /// The defect found by a client written as a user would: a process that took the fetch lock
    /// just after another one released it sent the request it had planned on its stale lookup,
    /// so a cold URL was downloaded twice (2 trials in 9, five processes). The lookup is now
    /// repeated after every acquisition. Half the workers pause between lookup and lock (as a
    /// descheduled process would, `SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK`), so every trial
    /// has a late locker; the other half race as they come.
    @Test func eightColdProcessesDownloadEachURLOnceInEveryTrial() async throws {
        let trials = 10
        for index in 0..<trials { try origin.write("/fresh/race\(index).txt", "race \(index)") }
        _ = try SharedCache(directory: directory("cache"))
        let workers = try (0..<8).map { number in
            try Worker.start(
                ["fetch-series", directory("cache"), origin.url("/fresh/race").absoluteString, "\(trials)"],
                environment: number % 2 == 0 ? [:] : ["SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK": "120"], input: .pipe)
        }
        for worker in workers { #expect(await worker.nextLine(within: .seconds(300)) == "ready") }
        // Each trial starts every worker's fetch of its URL at once, after all ended the last.
        var lines = [[String]](repeating: [], count: workers.count)
        for _ in 0..<trials {
            for worker in workers { worker.send("go") }
            for (number, worker) in workers.enumerated() {
                if let line = await worker.nextLine(within: .seconds(300)) { lines[number].append(line) }
            }
        }
        #expect(await finish(workers).allSatisfy(\.isEmpty))
        #expect(lines.allSatisfy { $0.count == trials })
        let logged = origin.requests(atLeast: trials)
        var perPath: [String: Int] = [:]
        for request in logged { perPath[request.path, default: 0] += 1 }
        let twice = perPath.filter { $0.value > 1 }.keys.sorted()
        #expect(twice.isEmpty, "downloaded more than once: \(twice)")
        #expect(perPath.count == trials)
        #expect(lines.joined().filter { $0 == "source=downloaded status=200" }.count == trials)
    }

    /// Where the workers after the first are while the first holds its request back.
    enum Others {
        /// Waiting for the URL's fetch lock, which the first holds.
        case waiting
        /// The odd ones paused between their lookup and the lock, the even ones waiting for it.
        case oddOnesPausedBeforeTheLock
        /// Done: they did not need the lock.
        case done
    }

    /// Runs `count` `fetch` workers on `path`, each step on a signal from them: once all have
    /// opened the cache, the first fetches and holds its request back ("sending": it holds the
    /// URL's fetch lock); then the others fetch, and once each is where `others` says, the first
    /// sends its request; once it ended, the paused ones go on. The others hold every request
    /// they send back `delay` ms, so that requests sent one after another are that far apart.
    func fetchTogether(_ path: String, count: Int, others: Others, delay: Int = 0) async throws -> [[String]] {
        let url = origin.url(path).absoluteString
        let first = try Worker.start(
            ["fetch", directory("cache"), url, "on-go"], environment: ["SHAREDCACHE_TEST_HOLD_SEND": "1"],
            input: .pipe)
        let rest = try (1..<count).map { number in
            let pauses = others == .oddOnesPausedBeforeTheLock && number % 2 == 1
            return try Worker.start(
                ["fetch", directory("cache"), url, "on-go"],
                environment: [
                    "SHAREDCACHE_TEST_SEND_DELAY_MS": "\(delay)", "SHAREDCACHE_TEST_SAY_WHEN_WAITING": "1",
                    "SHAREDCACHE_TEST_PAUSE_BEFORE_LOCK": pauses ? "line" : "0",
                ], input: .pipe)
        }
        for worker in [first] + rest { #expect(await worker.nextLine(within: .seconds(300)) == "ready") }
        first.send("go")
        #expect(await offThePool { first.errors?.nextLine(within: .seconds(300)) } == "sending")
        for worker in rest { worker.send("go") }
        var lines = [[String]](repeating: [], count: count)
        for (index, worker) in rest.enumerated() {
            let number = index + 1
            switch others {
            case .done:
                if let line = await worker.nextLine(within: .seconds(300)) { lines[number].append(line) }
            case .waiting, .oddOnesPausedBeforeTheLock:
                let expected = others == .oddOnesPausedBeforeTheLock && number % 2 == 1 ? "paused" : "waiting"
                #expect(await offThePool { worker.errors?.nextLine(within: .seconds(300)) } == expected)
            }
        }
        first.send("send")
        lines[0] = await finish([first])[0]
        if others == .oddOnesPausedBeforeTheLock {
            for (index, worker) in rest.enumerated() where (index + 1) % 2 == 1 { worker.send("go on") }
        }
        for (index, more) in await finish(rest).enumerated() { lines[index + 1] += more }
        return lines
    }

    /// Collapsed revalidation: processes that ask for a stale entry at the same time share one
    /// conditional request and its 304, which leaves it fresh (as Varnish and nginx's
    /// proxy_cache_lock do) — those that wait for the lock, and those that get it just after the
    /// 304 came back (the odd ones pause past it between their lookup and the lock, and used to
    /// send their own).
    @Test func sixProcessesRevalidatingOneStaleEntrySendOneConditionalRequest() async throws {
        try origin.write("/refreshed/shared.txt", "shared body")
        let cache = try SharedCache(directory: directory("cache"))
        _ = try await cache.fetch(URLRequest(url: origin.url("/refreshed/shared.txt")))
        let lines = try await fetchTogether("/refreshed/shared.txt", count: 6, others: .oddOnesPausedBeforeTheLock)
        let sources = lines.flatMap { $0 }.map { String($0.split(separator: " ")[0]) }
        #expect(sources.filter { $0 == "source=revalidated" }.count == 1, "\(sources)")
        #expect(sources.filter { $0 == "source=fresh" }.count == 5, "\(sources)")
        #expect(origin.requests(atLeast: 2).map(\.status) == [200, 304])
    }

    /// RFC 9111 §4: a response answers the requests collapsed with it only if it may be reused
    /// for them. One stale at once (`max-age=0`) may not (§4.2.4), so each process that waited
    /// sends its own conditional request, all at the same moment once the first one's is back,
    /// and says so (`collapsed=?0`, RFC 9211 §2.6).
    @Test func processesWaitingForARevalidationThatLeavesItStaleRevalidateThemselves() async throws {
        try origin.write("/plain/stays-stale.txt", "stale at once")
        let cache = try SharedCache(directory: directory("cache"))
        _ = try await cache.fetch(URLRequest(url: origin.url("/plain/stays-stale.txt")))
        let delay = 3000
        let lines = try await fetchTogether("/plain/stays-stale.txt", count: 4, others: .waiting, delay: delay)
            .flatMap { $0 }
        #expect(lines.count == 4 && lines.allSatisfy { $0.hasPrefix("source=revalidated status=200") }, "\(lines)")
        #expect(lines.filter { $0.contains("; collapsed=?0") }.count == 3, "\(lines)")
        let logged = origin.requests(atLeast: 5)
        #expect(logged.map(\.status) == [200, 304, 304, 304, 304])
        try Self.expectAtOnce(Array(logged.suffix(3)), within: delay)
    }

    /// A response no process may store (`no-store`) answers none of those that waited for it:
    /// each sends its own request, all at once once the first is back, as without the cache.
    @Test func processesWaitingForAnUnstorableDownloadFetchAtOnce() async throws {
        try origin.write("/nostore/each.txt", "never stored")
        let delay = 3000
        let lines = try await fetchTogether("/nostore/each.txt", count: 4, others: .waiting, delay: delay)
            .flatMap { $0 }
        #expect(lines.count == 4 && lines.allSatisfy { $0.hasPrefix("source=downloaded status=200") }, "\(lines)")
        let logged = origin.requests(atLeast: 4)
        #expect(logged.count == 4)
        try Self.expectAtOnce(Array(logged.suffix(3)), within: delay)
    }

    /// Requests that went out at once: logged closer together than the `delay` (ms) each was
    /// held back before it was sent; one after another, they are at least `delay` apart.
    static func expectAtOnce(_ requests: [Origin.LoggedRequest], within delay: Int) throws {
        let times = requests.map(\.time)
        let spread = try #require(times.max()) - (try #require(times.min()))
        #expect(spread < Double(delay) / 1000, "\(requests) logged \(times)")
    }

    /// RFC 5861 §3 across processes: every process serves the stale response at once, and one
    /// of them revalidates it.
    @Test func sixProcessesServingStaleWhileRevalidatingSendOneRequest() async throws {
        try origin.write("/h/swr/shared.txt", "stale is fine")
        let cache = try SharedCache(directory: directory("cache"))
        _ = try await cache.fetch(URLRequest(url: origin.url("/h/swr/shared.txt")))
        let lines = try await fetchTogether("/h/swr/shared.txt", count: 6, others: .done)
        let sources = lines.flatMap { $0 }.map { String($0.split(separator: " ")[0]) }
        #expect(sources.allSatisfy { $0 == "source=stale" }, "\(sources)")
        #expect(origin.requests(atLeast: 2).map(\.status) == [200, 304])
    }

    /// Starts a `fetch` worker on `url` that holds its request back `delay` ms, and returns
    /// once it says it is holding it back (so it holds the URL's fetch lock): a signal through
    /// its standard error, not a poll that a busy test process could miss.
    func startHolder(_ url: URL, delay: Int) async throws -> ChildProcess {
        let holder = try Worker.start(
            ["fetch", directory("cache"), url.absoluteString], environment: ["SHAREDCACHE_TEST_SEND_DELAY_MS": "\(delay)"])
        let said = await offThePool {
            var said: [String] = []
            while let line = holder.errors?.nextLine() {
                said.append(line)
                if line.hasSuffix("sending") { break }
            }
            return said
        }
        if said.last?.hasSuffix("sending") != true {
            Issue.record("the holder exited before sending: \(said.joined(separator: "\n"))")
        }
        return holder
    }

    /// A waiter is never worse off than without the cache: when the process holding the URL's
    /// fetch lock is stopped (SIGSTOP), its heartbeat stops, and the waiter sends its own request
    /// after `stalledFetchTimeout` (not after `waitTimeout`); once the holder is killed, the lock
    /// is free and the answer is stored.
    @Test func aWaiterWhoseHolderIsStoppedFetchesForItself() async throws {
        try origin.write("/fresh/held.txt", "held")
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/fresh/held.txt")
        let holder = try await startHolder(url, delay: 600_000)
        defer {
            holder.signal(SIGKILL)
            holder.wait()
        }
        holder.signal(SIGSTOP)

        let options = FetchOptions(waitTimeout: .seconds(60), stalledFetchTimeout: .milliseconds(1500))
        let own = try await cache.fetch(URLRequest(url: url), options: options)
        #expect(own.source == .downloaded && own.data == Data("held".utf8))
        // It gave up waiting (not: got the lock), and could not store while the holder held it.
        #expect(own.cacheStatus?.contains("detail=lock-timeout") == true && own.cacheStatus?.contains("stored") == false)

        holder.signal(SIGKILL)
        await holder.wait()
        let stored = try await cache.fetch(URLRequest(url: url), options: options)
        #expect(stored.source == .downloaded && stored.cacheStatus?.contains("stored") == true)
        #expect(try await cache.fetch(URLRequest(url: url)).source == .fresh)
        #expect(origin.requests(atLeast: 2).count == 2)  // the stopped holder never sent its request
    }

    /// A waiter past its own `waitTimeout` goes too, whatever the holder does.
    @Test func aWaiterPastItsWaitTimeoutFetchesForItself() async throws {
        try origin.write("/fresh/slow-holder.txt", "slow")
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/fresh/slow-holder.txt")
        let holder = try await startHolder(url, delay: 600_000)
        defer {
            holder.signal(SIGKILL)
            holder.wait()
        }
        let own = try await cache.fetch(URLRequest(url: url), options: FetchOptions(waitTimeout: .milliseconds(300)))
        #expect(
            own.source == .downloaded && own.cacheStatus?.contains("detail=lock-timeout") == true,
            "source \(own.source), Cache-Status \(own.cacheStatus ?? "none"), nginx saw \(origin.requests)")
    }

    /// A holder that is slow but alive (it shows a sign of life every second) is waited for,
    /// and its answer shared: one request in nginx's log. It holds the lock past the waiter's
    /// stall timeout, which leaves a loaded run's late heartbeats 9 s.
    @Test func aWaiterWaitsForASlowButLiveHolder() async throws {
        try origin.write("/fresh/alive.txt", "alive")
        let cache = try SharedCache(directory: directory("cache"))
        let url = origin.url("/fresh/alive.txt")
        let holder = try await startHolder(url, delay: 12_000)
        let options = FetchOptions(waitTimeout: .seconds(120), stalledFetchTimeout: .seconds(10))
        let shared = try await cache.fetch(URLRequest(url: url), options: options)
        await holder.wait()
        #expect(shared.source == .fresh && shared.data == Data("alive".utf8))
        #expect(origin.requests(atLeast: 1).count == 1)
    }
}
