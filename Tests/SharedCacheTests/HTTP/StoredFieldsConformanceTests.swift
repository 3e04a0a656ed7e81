import Foundation
import SharedCachePlatform
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// What is stored of a response, and what a 304 changes in it: proxy fields, dates in any case,
// redirects, a missing Date, the Age and Date of a revalidated response, a 304 to the caller's
// own validators, and the limits a request sets on an immutable response.
extension ConformanceTests {
    @Test("RFC 9111 §3.1: a proxy's authentication fields are never stored")
    func proxyAuthenticationFieldsAreNotStored() async throws {
        let (second, logged) = try await twice("/h/proxyauth/p.txt")
        #expect(second.source == .fresh && logged.count == 1)
        for field in ["Proxy-Authenticate", "Proxy-Authentication-Info", "Proxy-Authorization"] {
            #expect(second.headers[field] == nil, "\(field)")
        }
        #expect(second.headers["X-Kept"] == "kept")
    }

    @Test("RFC 9111 §4.2: a date's day, month and GMT are matched in any case")
    func datesAreMatchedInAnyCase() async throws {
        let (second, logged) = try await twice("/h/gmtcase/g.txt")
        #expect(second.source == .fresh && logged.count == 1)
    }

    @Test("RFC 9111 §2: a redirect's answer is never stored under the URL asked for; under a key named, it is")
    func aFollowedRedirectIsNotStoredUnderTheURLAskedFor() async throws {
        try origin.write("/h/redirected/r.txt", "target")
        let first = try await fetch("/h/redirect")
        #expect(first.status == 200 && first.data == Data("target".utf8))
        #expect(first.url.path == "/h/redirected/r.txt")
        #expect(try cache.entry(forKey: SharedCache.cacheKey(for: origin.url("/h/redirect"))) == nil)
        let second = try await fetch("/h/redirect")
        #expect(second.source == .downloaded)
        #expect(origin.requests(to: "/h/redirect", atLeast: 2).map(\.status) == [302, 302])
        // A caller that names what the URL stands for (a signed URL that redirects) gets it cached.
        let named = FetchOptions(cacheKey: "the-target")
        #expect(try await fetch("/h/redirect", options: named).source == .downloaded)
        let hit = try await fetch("/h/redirect", options: named)
        #expect(hit.source == .fresh && hit.data == Data("target".utf8))
        #expect(origin.requests(to: "/h/redirect", atLeast: 3).count == 3)
    }

    @Test("RFC 9110 §6.6.1: a response stored without a Date gets the time it arrived")
    func aResponseWithoutADateIsStoredWithOne() async throws {
        let response = TransportResponse(
            status: 200, headers: ["Cache-Control": "max-age=3600"], body: Data("undated".utf8))
        let transport = ScriptedTransport([response])
        let before = Clock.nowMilliseconds() / 1000 * 1000
        _ = try await fetch("/undated", transport: transport)
        let after = Clock.nowMilliseconds()
        let second = try await fetch("/undated", transport: transport)
        #expect(second.source == .fresh)
        let date = try #require(second.headers["Date"].flatMap { HTTPDate.parse($0) })
        #expect((before...after).contains(date))
    }

    @Test("RFC 9111 §4.2.3: a revalidated answer's Age counts the Age its 304 came with")
    func aRevalidatedAnswerKeepsTheAgeOfItsNotModified() async throws {
        _ = try await fetch("/h/aged304")
        let revalidated = try await fetch("/h/aged304")
        #expect(revalidated.source == .revalidated && revalidated.data == Data("aged body".utf8))
        #expect(try #require(revalidated.headers["Age"].flatMap { Int($0) }) >= 7)
    }

    @Test("RFC 9111 §4.3.4: a 304 to the caller's own validators updates the stored response too")
    func aNotModifiedForTheCallersValidatorsFreshensTheStoredResponse() async throws {
        _ = try await fetch("/h/caller304")
        let conditional = try await fetch("/h/caller304", [("If-None-Match", "\"c1\"")])
        #expect(conditional.status == 304 && conditional.data.isEmpty)
        #expect(conditional.cacheStatus?.contains("; stored") == true, "\(conditional.cacheStatus ?? "-")")
        let after = try await fetch("/h/caller304")
        #expect(after.source == .fresh && after.data == Data("caller body".utf8))
        #expect(origin.requests(to: "/h/caller304", atLeast: 2).map(\.status) == [200, 304])
    }

    @Test("RFC 9110 §15.4.5: a 304 the cache makes for the caller's validators carries no representation metadata")
    func aNotModifiedFromTheCacheDescribesNoBody() async throws {
        let stored: HTTPHeaders = [
            "ETag": "\"m1\"", "Cache-Control": "max-age=3600", "Content-Type": "text/plain",
            "Content-Language": "en", "Content-Encoding": "identity", "Vary": "Accept",
            "Last-Modified": "Thu, 01 Jan 2015 00:00:00 GMT", "Content-Location": "/metadata.txt",
        ]
        let transport = ScriptedTransport([TransportResponse(status: 200, headers: stored, body: Data("body".utf8))])
        _ = try await fetch("/metadata", transport: transport)
        let answer = try await fetch("/metadata", [("If-None-Match", "\"m1\"")], transport: transport)
        #expect(answer.status == 304 && answer.source == .fresh && answer.data.isEmpty)
        for name in ["Content-Type", "Content-Language", "Content-Encoding", "Content-Length"] {
            #expect(answer.headers[name] == nil, "\(name)")
        }
        for name in ["ETag", "Cache-Control", "Vary", "Last-Modified", "Content-Location"] {
            #expect(answer.headers[name] == stored[name], "\(name)")
        }
        // The stored response itself keeps them.
        let whole = try await fetch("/metadata", transport: transport)
        #expect(whole.status == 200 && whole.headers["Content-Type"] == "text/plain")
    }

    @Test("RFC 9111 §4.3.4: a 304's Expires replaces the stored one, which max-age does not override")
    func aNotModifiedReplacesTheStoredExpires() async throws {
        _ = try await fetch("/h/expires304")
        #expect(try await fetch("/h/expires304").source == .revalidated)
        let stored = try await fetch("/h/expires304", options: FetchOptions(onlyFromCache: true))
        #expect(stored.data == Data("expires body".utf8))
        #expect(stored.headers["Expires"] == "Fri, 02 Jan 2015 00:00:00 GMT")
    }

    @Test("RFC 9111 §4.3.4: once a 304 freshened the stored response, it is served with the 304's Date")
    func aFreshenedResponseIsServedWithTheDateOfItsNotModified() async throws {
        let now = Clock.nowMilliseconds() / 1000 * 1000
        let validator: HTTPHeaders = ["ETag": "\"d1\"", "Cache-Control": "max-age=0"]
        func dated(_ milliseconds: Int64) -> HTTPHeaders {
            var headers = validator
            headers.append("Date", HTTPDate.format(milliseconds))
            return headers
        }
        let transport = ScriptedTransport([
            TransportResponse(status: 200, headers: dated(now - 60_000), body: Data("dated body".utf8)),
            TransportResponse(status: 304, headers: dated(now), body: Data()),
        ])
        _ = try await fetch("/dated", transport: transport)
        #expect(try await fetch("/dated", transport: transport).source == .revalidated)
        let stored = try await fetch("/dated", options: FetchOptions(onlyFromCache: true), transport: transport)
        #expect(stored.data == Data("dated body".utf8))
        let served = try #require(stored.headers["Date"].flatMap { HTTPDate.parse($0) })
        #expect(abs(served - now) <= 1000, "served \(served), the 304's \(now)")
    }

    @Test("RFC 9110 §6.6.1, RFC 9111 §4.3.4: a 304 without a Date counts freshness from its arrival")
    func aNotModifiedWithoutADateIsDatedOnArrival() async throws {
        let now = Clock.nowMilliseconds() / 1000 * 1000
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200,
                headers: ["ETag": "\"e1\"", "Date": HTTPDate.format(now - 600_000), "Expires": HTTPDate.format(now - 1000)],
                body: Data("expired body".utf8)),
            TransportResponse(
                status: 304, headers: ["ETag": "\"e1\"", "Expires": HTTPDate.format(now + 3_600_000)], body: Data()),
        ])
        _ = try await fetch("/undated304", transport: transport)
        let revalidated = try await fetch("/undated304", transport: transport)
        #expect(revalidated.source == .revalidated)
        // Expires less the 304's arrival: an hour less the time the fetches took, never the stored
        // Date's ten minutes more.
        let elapsed = Int((Clock.nowMilliseconds() - now) / 1000) + 1
        let ttl = try #require(revalidated.cacheStatus.flatMap { Self.parameter("ttl", in: $0) })
        #expect((3600 - elapsed...3600).contains(ttl), "ttl \(ttl) after \(elapsed) s")
        let date = try #require(revalidated.headers["Date"].flatMap { HTTPDate.parse($0) })
        #expect(date >= now)
    }

    @Test("RFC 9111 §3.2, RFC 9110 §5.3: a 304's Set-Cookie fields replace the stored one, each a field of its own")
    func aNotModifiedKeepsItsSetCookieFieldsApart() async throws {
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200,
                headers: HTTPHeaders([("ETag", "\"k1\""), ("Cache-Control", "max-age=0"), ("Set-Cookie", "a=1")]),
                body: Data("cookie body".utf8)),
            TransportResponse(
                status: 304,
                headers: HTTPHeaders([
                    ("ETag", "\"k1\""), ("Cache-Control", "max-age=3600"), ("Set-Cookie", "b=2; Path=/"),
                    ("Set-Cookie", "c=3"),
                ]),
                body: Data()),
        ])
        _ = try await fetch("/cookies", transport: transport)
        let revalidated = try await fetch("/cookies", transport: transport)
        #expect(revalidated.source == .revalidated)
        let stored = try await fetch("/cookies", transport: transport)
        #expect(stored.source == .fresh && stored.data == Data("cookie body".utf8))
        for answer in [revalidated, stored] {
            #expect(answer.headers.values("Set-Cookie") == ["b=2; Path=/", "c=3"])
        }
    }

    @Test("RFC 9110 §5.3: Set-Cookie fields URLSession joined into one are stored and served apart")
    func setCookieFieldsFromTheNetworkStayApart() async throws {
        try origin.write("/h/setcookie/apart.txt", "sets two cookies")
        let (first, second) = (try await fetch("/h/setcookie/apart.txt"), try await fetch("/h/setcookie/apart.txt"))
        #expect(second.source == .fresh)
        let sent = ["a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/", "b=2"]
        for answer in [first, second] { #expect(answer.headers.values("Set-Cookie") == sent) }
    }

    @Test("RFC 9111 §4.1: the default transport keeps no cookie jar, so a request goes out with its own fields only")
    func theDefaultTransportSendsOnlyTheCookiesItIsGiven() async throws {
        try origin.write("/h/setcookie/jar.txt", "sets two cookies")
        for path in ["/fresh/after-jar.txt", "/fresh/given.txt"] { try origin.write(path, "body") }
        _ = try await fetch("/h/setcookie/jar.txt")
        _ = try await fetch("/fresh/after-jar.txt")
        _ = try await fetch("/fresh/given.txt", [("Cookie", "mine=1")])
        #expect(origin.requests(to: "/fresh/after-jar.txt", atLeast: 1).map(\.cookie) == [nil])
        #expect(origin.requests(to: "/fresh/given.txt", atLeast: 1).map(\.cookie) == ["mine=1"])
    }

    @Test("RFC 9111 §5.2.2.4: a field no-cache names is served with the 304 that brought it, never from storage")
    func aFieldNamedByNoCacheComesWithItsRevalidation() async throws {
        func response(_ status: Int, cookie: String, _ body: String) -> TransportResponse {
            let headers: HTTPHeaders = [
                "ETag": "\"n1\"", "Cache-Control": "max-age=0, no-cache=\"Set-Cookie\"", "Set-Cookie": cookie,
            ]
            return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
        }
        let transport = ScriptedTransport([
            response(200, cookie: "s=1", "named body"), response(304, cookie: "s=2", ""),
        ])
        #expect(try await fetch("/named", transport: transport).headers["Set-Cookie"] == "s=1")
        let revalidated = try await fetch("/named", transport: transport)
        #expect(revalidated.source == .revalidated && revalidated.data == Data("named body".utf8))
        #expect(revalidated.headers["Set-Cookie"] == "s=2")
        let stored = try await fetch("/named", options: FetchOptions(onlyFromCache: true), transport: transport)
        #expect(stored.data == Data("named body".utf8) && stored.headers["Set-Cookie"] == nil)
    }

    @Test("RFC 8246 §2, RFC 9111 §5.2.1.3: immutable skips a reload, not a request's min-fresh")
    func immutableDoesNotOverrideMinFresh() async throws {
        try origin.write("/h/immutable/m.txt", "forever")
        _ = try await fetch("/h/immutable/m.txt")
        let demanding = try await fetch("/h/immutable/m.txt", [("Cache-Control", "min-fresh=7200")])
        #expect(demanding.source != .fresh)
        #expect(origin.requests(to: "/h/immutable/m.txt", atLeast: 2).count == 2)
    }
}

extension HTTPRulesTests {
    @Test("RFC 9111 §4.2: names in a date are matched in any case; other zones are still no date")
    func dateNamesInAnyCase() {
        let expected: Int64 = 784_111_777_000
        for spelling in [
            "sun, 06 nov 1994 08:49:37 gmt", "SUN, 06 NOV 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 gMT",
            "SUNDAY, 06-NOV-94 08:49:37 GMT", "sun nov  6 08:49:37 1994",
        ] {
            #expect(HTTPDate.parse(spelling, now: expected) == expected, "\(spelling)")
        }
        #expect(HTTPDate.parse("sun, 06 nov 1994 08:49:37 utc") == nil)
    }

    @Test("RFC 9111 §5.2: a directive with space around its \"=\" is no directive")
    func spaceAroundTheEqualsSignVoidsADirective() {
        #expect(CacheControl("max-age =3600").maxAge == nil)
        #expect(CacheControl("max-age= 3600").maxAge == nil)
        #expect(CacheControl("max-age = 3600, no-store").noStore)
        #expect(CacheControl(" max-age=3600 ,\tno-cache=\"a, b\" ").maxAge == 3600)
        #expect(CacheControl("max-age=3600, no-cache=\"a, b\"").noCacheFields == ["a", "b"])
    }
}
