import Foundation
import SharedCachePlatform
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The rules a scripted origin shows best: what a 304 may update and how, which stale responses
// are kept for stale use, the entity-tag and date comparisons of conditional requests, and the
// fields of answers no stored response gave.
extension ConformanceTests {
    static func response(_ status: Int, _ headers: HTTPHeaders, _ body: String = "") -> TransportResponse {
        TransportResponse(status: status, headers: headers, body: Data(body.utf8))
    }

    /// A `Date` of `offset` milliseconds from now, to the second.
    static func date(_ offset: Int64 = 0) -> String { HTTPDate.format(Clock.nowMilliseconds() + offset) }

    // MARK: Stale use of what has no freshness (RFC 5861, RFC 9111 §4.2.4)

    @Test("RFC 5861 §4: a response with max-age=0 and no validator is kept for stale-if-error, in it or in the request")
    func aResponseWithoutLifetimeOrValidatorIsKeptForStaleIfError() async throws {
        for (path, response, request) in [
            ("/sie-response", "max-age=0, stale-if-error=3600", nil),
            ("/sie-request", "max-age=0", "stale-if-error=3600"),
        ] {
            let transport = ScriptedTransport([
                Self.response(200, ["Cache-Control": response, "Date": Self.date()], "kept"),
                Self.response(500, ["Date": Self.date()], "failed"),
            ])
            _ = try await fetch(path, transport: transport)
            let second = try await fetch(path, request.map { [("Cache-Control", $0)] } ?? [], transport: transport)
            #expect(second.status == 200 && second.source == .offline && second.data == Data("kept".utf8), "\(path)")
            #expect(transport.requests == 2, "\(path)")
        }
    }

    @Test("RFC 5861 §3, RFC 9111 §5.2.1.2: such a response serves stale-while-revalidate and a request's max-stale")
    func aResponseWithoutLifetimeOrValidatorServesStaleWhereAllowed() async throws {
        let revalidating = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0, stale-while-revalidate=3600", "Date": Self.date()], "one")
        ])
        _ = try await fetch("/swr-bare", transport: revalidating)
        let stale = try await fetch("/swr-bare", transport: revalidating)
        #expect(stale.source == .stale && stale.data == Data("one".utf8))
        await cache.waitForBackgroundRevalidations()

        let tolerant = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "Date": Self.date()], "one")
        ])
        _ = try await fetch("/max-stale-bare", transport: tolerant)
        let accepted = try await fetch("/max-stale-bare", [("Cache-Control", "max-stale=3600")], transport: tolerant)
        #expect(accepted.source == .fresh && accepted.data == Data("one".utf8) && tolerant.requests == 1)
        // Without max-stale it goes to the origin, as max-age=0 says.
        #expect(try await fetch("/max-stale-bare", transport: tolerant).source == .downloaded)
    }

    @Test("RFC 9111 §3, §4.2.4: a response with no lifetime and no validator that may not be served stale is not kept")
    func aResponseNothingCouldReuseIsNotKept() async throws {
        for (path, headers) in [
            ("/bare", ["Date": Self.date()]),
            ("/bare-must-revalidate", ["Cache-Control": "max-age=0, must-revalidate"]),
            ("/bare-no-cache", ["Cache-Control": "no-cache, max-age=0, stale-if-error=60"]),
        ] as [(String, HTTPHeaders)] {
            let transport = ScriptedTransport([Self.response(200, headers, "dynamic")])
            _ = try await fetch(path, transport: transport)
            #expect(try cache.entry(forKey: SharedCache.cacheKey(for: origin.url(path))) == nil, "\(path)")
        }
    }

    // MARK: What a 304 updates (RFC 9111 §3.2, §4.3.4)

    @Test("RFC 9111 §3.2: a 304's new Expires is stored even where max-age overrides it")
    func aNotModifiedsExpiresIsStoredBesideMaxAge() async throws {
        let (first, second) = ("Fri, 01 Jan 2038 01:01:01 GMT", "Mon, 11 Jan 2038 11:11:11 GMT")
        let transport = ScriptedTransport([
            Self.response(
                200, ["Cache-Control": "max-age=600", "ETag": "\"x\"", "Expires": first, "Date": Self.date()], "x"),
            Self.response(
                304, ["Cache-Control": "max-age=600", "ETag": "\"x\"", "Expires": second, "Date": Self.date()]),
        ])
        _ = try await fetch("/expires-beside-max-age", transport: transport)
        let revalidated = try await fetch(
            "/expires-beside-max-age", [("Cache-Control", "no-cache")], transport: transport)
        #expect(revalidated.source == .revalidated && revalidated.headers["Expires"] == second)
        let later = try await fetch("/expires-beside-max-age", transport: transport)
        #expect(later.source == .fresh && later.headers["Expires"] == second)
    }

    @Test("RFC 9111 §4.3.4: a 304 that changes only freshness is one journal record; one that changes a field, a new version")
    func aNotModifiedChangingOnlyFreshnessKeepsTheStoredVersion() async throws {
        func location(_ path: String) throws -> BodyLocation? {
            try cache.engine.currentEntry(KeyHash(key: SharedCache.cacheKey(for: origin.url(path))))?.location
        }
        try origin.write("/plain/freshened.txt", "same body")
        _ = try await fetch("/plain/freshened.txt")
        let stored = try #require(try location("/plain/freshened.txt"))
        for _ in 0..<3 { #expect(try await fetch("/plain/freshened.txt").source == .revalidated) }
        #expect(try location("/plain/freshened.txt") == stored)
        // `/updated/` answers with a field the stored response lacks: a new version holds it.
        try origin.write("/updated/u.txt", "updated body")
        _ = try await fetch("/updated/u.txt")
        let before = try #require(try location("/updated/u.txt"))
        let revalidated = try await fetch("/updated/u.txt")
        #expect(revalidated.source == .revalidated && revalidated.headers["X-Revalidated"] == "yes")
        #expect(try location("/updated/u.txt") != before)
    }

    @Test("RFC 9111 §4.2.3, §4.3.4: a 304 with an Age freshens in place; its Age counts, and the Date served is the birth's")
    func anAgedNotModifiedFreshensInPlace() async throws {
        let first = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=600", "ETag": "\"x\"", "Date": Self.date(-10_000)], "x")
        ])
        let key = KeyHash(key: SharedCache.cacheKey(for: origin.url("/aged")))
        _ = try await fetch("/aged", transport: first)
        let stored = try #require(try cache.engine.currentEntry(key)?.location)
        // The 304 says it was made 10 s ago and has been in caches for 100 s.
        let date = Self.date(-10_000)
        let dated = try #require(HTTPDate.parse(date))
        let transport = ScriptedTransport([
            Self.response(304, ["Cache-Control": "max-age=600", "ETag": "\"x\"", "Date": date, "Age": "100"])
        ])
        let sent = Clock.nowMilliseconds()
        #expect(try await fetch("/aged", [("Cache-Control", "no-cache")], transport: transport).source == .revalidated)
        let received = Clock.nowMilliseconds()
        #expect(try cache.engine.currentEntry(key)?.location == stored)
        let later = try await fetch("/aged", transport: transport)
        let age = try #require(later.headers["Age"].flatMap { Int($0) })
        #expect(later.source == .fresh && age >= 100)
        // Born when the older of its Date and its Age says (§4.2.3: the larger of the apparent
        // and the corrected age): 100 s before the request, unless a loaded machine took longer
        // than 90 s from making the 304 to receiving it, and then its Date. Served to the second.
        // (Bounded by the exchange, not by now.)
        let served = try #require(later.headers["Date"].flatMap { HTTPDate.parse($0) })
        let born = (min(dated, sent - 100_000) - 1_000)...min(dated, received - 100_000)
        #expect(born.contains(served), "\(later.headers["Date"] ?? "-") not in \(born)")
    }

    @Test("RFC 9111 §4.3.4: a 304 with a strong ETag updates no stored response whose ETag is weak")
    func aStrongNotModifiedDoesNotUpdateAWeakStoredResponse() async throws {
        let transport = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "ETag": "W/\"v\"", "Date": Self.date()], "weak body"),
            Self.response(304, ["Cache-Control": "max-age=600", "ETag": "\"v\"", "Date": Self.date()]),
            Self.response(200, ["Cache-Control": "max-age=600", "ETag": "\"v\"", "Date": Self.date()], "strong body"),
        ])
        _ = try await fetch("/weak-then-strong", transport: transport)
        let second = try await fetch("/weak-then-strong", transport: transport)
        #expect(second.source == .downloaded && second.data == Data("strong body".utf8))
        #expect(transport.requests == 3)
        // A weak 304 still identifies a stored response by weak comparison.
        let weakly = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "ETag": "\"w\"", "Date": Self.date()], "body"),
            Self.response(304, ["Cache-Control": "max-age=600", "ETag": "W/\"w\"", "Date": Self.date()]),
        ])
        _ = try await fetch("/strong-then-weak", transport: weakly)
        #expect(try await fetch("/strong-then-weak", transport: weakly).source == .revalidated)
    }

    @Test("RFC 9111 §4: a 304 that changes a field stores a new version only over the one it revalidated")
    func aNotModifiedNeverOverwritesANewerVersion() async throws {
        let key = SharedCache.cacheKey(for: origin.url("/overtaken"))
        let cache = cache
        // While the conditional request is out, another process puts a newer version.
        let transport = HookedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "ETag": "\"1\"", "Date": Self.date()], "first"),
            Self.response(304, ["Cache-Control": "max-age=0", "ETag": "\"1\"", "X-Added": "a"]),
        ]) { sent in if sent == 2 { try cache.put(key: key, data: Data("newer".utf8)) } }
        _ = try await fetch("/overtaken", transport: transport)
        let revalidated = try await fetch("/overtaken", transport: transport)
        #expect(revalidated.source == .revalidated && revalidated.data == Data("first".utf8))
        #expect(try cache.get(key: key)?.data == Data("newer".utf8))
    }

    @Test("RFC 9111 §5.2.2.5: a 304 that says no-store is served, and the stored response goes")
    func aNotModifiedWithNoStoreRemovesTheStoredResponse() async throws {
        let transport = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "ETag": "\"s\"", "Date": Self.date()], "body"),
            Self.response(304, ["Cache-Control": "max-age=600, no-store", "ETag": "\"s\"", "Date": Self.date()]),
        ])
        _ = try await fetch("/no-store-304", transport: transport)
        let revalidated = try await fetch("/no-store-304", transport: transport)
        #expect(revalidated.source == .revalidated && revalidated.data == Data("body".utf8))
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: origin.url("/no-store-304"))) == nil)
    }

    @Test(
        "RFC 9111 §3.5, §4.3.4, §4.3.5: in a shared cache, a 304 or a HEAD's 200 to a request with Authorization updates no stored response it does not allow",
        arguments: ["GET", "HEAD"])
    func anAuthorizedAnswerUpdatesNothingInASharedCache(method: String) async throws {
        let shared = try SharedCache(directory: directory("shared-\(method)"), configuration: Configuration(sharing: .group))
        let (tag, path) = (["ETag": "\"a\""] as HTTPHeaders, "/shared-update-\(method)")
        func answer(_ status: Int, _ directives: String, _ body: String = "") -> TransportResponse {
            var headers = tag
            headers.append("Cache-Control", directives)
            headers.append("Date", Self.date())
            return Self.response(status, headers, body)
        }
        // The authorized request's answer gives an hour: a 304 to a GET, a 200 to a HEAD.
        let transport = ScriptedTransport([
            answer(200, "max-age=0", "anyone's"), answer(method == "GET" ? 304 : 200, "max-age=3600"),
            answer(304, "max-age=0"),
        ])
        _ = try await shared.fetch(request(path), transport: transport)
        let authorized = try await shared.fetch(
            request(path, [("Authorization", "Bearer b")], method: method), transport: transport)
        #expect(authorized.status == 200 && authorized.cacheStatus?.contains("; stored") != true)
        if method == "GET" { #expect(authorized.source == .revalidated && authorized.data == Data("anyone's".utf8)) }
        // Still stale for the next user: only that user's answer came with an hour.
        #expect(try await shared.fetch(request(path), transport: transport).source == .revalidated)
        #expect(transport.requests == 3)
    }

    @Test("RFC 9111 §3.5, §3.3: in a shared cache, a part answering a request with Authorization is not kept unless allowed")
    func anAuthorizedPartIsNotKeptInASharedCache() async throws {
        let shared = try SharedCache(directory: directory("shared-part"), configuration: Configuration(sharing: .group))
        for (name, cache, kept) in [("shared", shared, false), ("private", cache, true)] {
            let transport = ScriptedTransport([
                Self.response(206, ["Cache-Control": "max-age=600", "Content-Range": "bytes 0-1/10", "ETag": "\"p\""], "01")
            ])
            let asked = [("Range", "bytes=0-1"), ("Authorization", "Bearer b")]
            _ = try await cache.fetch(request("/authorized-part/\(name)", asked), transport: transport)
            let second = try await cache.fetch(request("/authorized-part/\(name)", asked), transport: transport)
            #expect(second.status == 206 && second.data == Data("01".utf8), "\(name)")
            #expect(transport.requests == (kept ? 1 : 2), "\(name)")
        }
    }

    // MARK: Conditional requests the cache answers (RFC 9110 §13)

    @Test("RFC 9110 §8.8.3, §13.1.2: an entity tag holding a comma matches an If-None-Match member")
    func anEntityTagWithACommaMatches() async throws {
        let transport = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=600", "ETag": "\"a,b\"", "Date": Self.date()], "body")
        ])
        _ = try await fetch("/comma-tag", transport: transport)
        let matched = try await fetch("/comma-tag", [("If-None-Match", "\"x\", \"a,b\"")], transport: transport)
        #expect(matched.status == 304)
        let unmatched = try await fetch("/comma-tag", [("If-None-Match", "\"a\", \"b\"")], transport: transport)
        #expect(unmatched.status == 200 && unmatched.data == Data("body".utf8))
        #expect(HTTPExchange.entityTags(in: " \"a,b\" ,W/\"c\",, *") == ["\"a,b\"", "W/\"c\"", "*"])
    }

    @Test("RFC 9110 §13.1.5, §8.8.2.2: an If-Range date holds only for a strong Last-Modified, compared as a time")
    func anIfRangeDateNeedsAStrongLastModified() async throws {
        let modified = Self.date(-60_000)
        let weak = ScriptedTransport([
            Self.response(
                200, ["Cache-Control": "max-age=600", "Last-Modified": modified, "Date": modified], "0123456789")
        ])
        _ = try await fetch("/if-range-weak", transport: weak)
        let whole = try await fetch(
            "/if-range-weak", [("Range", "bytes=0-1"), ("If-Range", modified)], transport: weak)
        #expect(whole.status == 200 && whole.data.count == 10)

        let strong = ScriptedTransport([
            Self.response(
                200, ["Cache-Control": "max-age=600", "Last-Modified": modified, "Date": Self.date()], "0123456789")
        ])
        _ = try await fetch("/if-range-strong", transport: strong)
        // The same time in the RFC 850 format: "Friday, 27-Nov-26 17:00:00 GMT".
        let fields = modified.split(separator: " ")
        let days = [
            "Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday",
            "Sat": "Saturday", "Sun": "Sunday",
        ]
        let otherFormat =
            "\(days[String(fields[0].dropLast())]!), \(fields[1])-\(fields[2])-\(fields[3].suffix(2)) \(fields[4]) GMT"
        #expect(HTTPDate.parse(otherFormat) == HTTPDate.parse(modified))
        for condition in [modified, otherFormat] {
            let part = try await fetch(
                "/if-range-strong", [("Range", "bytes=0-1"), ("If-Range", condition)], transport: strong)
            #expect(part.status == 206 && part.data == Data("01".utf8), "\(condition)")
        }
    }

    @Test("RFC 9110 §14.1, §14.2: a Range of a body the transport decoded from its Content-Encoding gets the whole")
    func aRangeOfADecodedBodyGetsTheWhole() async throws {
        // URLSession hands on a gzip body decoded, its fields as sent: the stored bytes are not
        // the ones a range counts.
        let transport = ScriptedTransport([
            Self.response(
                200,
                [
                    "Cache-Control": "max-age=600", "Content-Encoding": "gzip", "Content-Length": "31",
                    "Date": Self.date(),
                ],
                "0123456789")
        ])
        _ = try await fetch("/decoded", transport: transport)
        let ranged = try await fetch("/decoded", [("Range", "bytes=0-1")], transport: transport)
        #expect(
            ranged.status == 200 && ranged.data == Data("0123456789".utf8) && ranged.headers["Content-Range"] == nil)
        #expect(ranged.source == .fresh && transport.requests == 1)
    }

    // MARK: Answers without a stored response (RFC 9110 §6.6.1, RFC 9211)

    @Test("RFC 9110 §6.6.1: a response passed on without a Date gets the time it arrived")
    func aResponsePassedOnWithoutADateGetsOne() async throws {
        let transport = ScriptedTransport([Self.response(200, ["Cache-Control": "no-store"], "undated")])
        let before = Clock.nowMilliseconds() / 1000 * 1000
        let answer = try await fetch("/undated-passed-on", transport: transport)
        let date = try #require(answer.headers["Date"].flatMap { HTTPDate.parse($0) })
        #expect((before...Clock.nowMilliseconds()).contains(date))
    }

    @Test("RFC 9211 §2.1, §2.2: the 504 to only-if-cached is neither a hit nor forwarded")
    func theOnlyIfCachedAnswerIsNeitherHitNorForwarded() async throws {
        let transport = ScriptedTransport([Self.response(200, ["Cache-Control": "max-age=600"], "never sent")])
        let answer = try await fetch("/only-if-cached", [("Cache-Control", "only-if-cached")], transport: transport)
        #expect(answer.status == 504 && transport.requests == 0)
        #expect(answer.cacheStatus == "SharedCache; detail=only-if-cached")
    }
}

/// Answers as ``ScriptedTransport`` does, after running `beforeAnswering` with the request's
/// number (from 1): what another process does while a request is out.
final class HookedTransport: HTTPTransport {
    private let scripted: ScriptedTransport
    private let beforeAnswering: @Sendable (Int) throws -> Void

    init(_ responses: [TransportResponse], beforeAnswering: @escaping @Sendable (Int) throws -> Void) {
        scripted = ScriptedTransport(responses)
        self.beforeAnswering = beforeAnswering
    }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        try beforeAnswering(scripted.requests + 1)
        return try await scripted.send(request)
    }
}
