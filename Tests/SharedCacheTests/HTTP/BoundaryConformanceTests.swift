import Foundation
import SharedCachePlatform
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Rules at their edges, each found untested by a mutation audit of the HTTP rules: the value
// on either side of a boundary, and a condition that only one response shape reaches.
extension HTTPRulesTests {
    @Test("RFC 9111 §4.2.1: an Expires lifetime counts from the origin's Date, not from when the response arrived")
    func expiresCountsFromTheOriginsDate() {
        let now: Int64 = 1_700_000_000_000
        // An origin an hour behind: its Date is an hour ago, its Expires a minute after that.
        let headers: HTTPHeaders = [
            "Date": HTTPDate.format(now - 3_600_000), "Expires": HTTPDate.format(now - 3_540_000),
        ]
        let lifetime = Freshness.lifetime(
            status: 200, headers: headers, responseTime: now, heuristicCap: nil, for: .private)
        #expect(lifetime == 60_000)
    }

    @Test("RFC 9111 §5.2.2.4: no-cache with an empty list names no field, and is the unqualified no-cache")
    func anEmptyQualifiedNoCacheIsUnqualified() {
        for value in ["no-cache=\"\"", "no-cache=", "max-age=60, no-cache=\"\""] {
            let directives = CacheControl(value)
            #expect(directives.noCache && directives.noCacheFields.isEmpty, "\(value)")
        }
        #expect(!CacheControl("no-cache=\"X-A\"").noCache)
    }

    @Test("RFC 9110 §8.8.2.2: a Last-Modified is strong from one second before the Date on, not within it")
    func aLastModifiedOneSecondBeforeTheDateIsStrong() {
        let modified = "Thu, 01 Jan 2015 00:00:00 GMT"
        func strong(date: String) -> Bool {
            HTTPExchange.isStrongLastModified(modified, ["Last-Modified": modified, "Date": date])
        }
        #expect(strong(date: "Thu, 01 Jan 2015 00:00:01 GMT"))
        #expect(!strong(date: modified))
    }

    @Test("RFC 9110 §14.1.1: a range whose last-pos is its first-pos is one byte, served as a part")
    func aOneByteRangeIsAPart() {
        #expect(ByteRange.answer("bytes=5-5", length: 10) == .slice(5..<6))
        #expect(ByteRange.answer("bytes=9-9", length: 10) == .slice(9..<10))
        #expect(ByteRange.answer("bytes=0-0", length: 1) == .slice(0..<1))
    }

    @Test(
        "RFC 9110 §14.1.2, §14.2: a suffix range of an empty representation is satisfiable, so it gets the whole (empty) response, never a 416"
    )
    func aSuffixRangeOfAnEmptyRepresentationGetsTheWhole() {
        #expect(ByteRange.answer("bytes=-5", length: 0) == .whole)
        // A zero suffix-length is never satisfiable, nor is any first-pos of an empty one.
        #expect(ByteRange.answer("bytes=-0", length: 0) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=0-", length: 0) == .unsatisfiable)
    }
}

extension ConformanceTests {
    /// The HTTP-date a second before `date` (counted from it, not from a clock that moved on).
    static func secondBefore(_ date: String) throws -> String {
        HTTPDate.format(try #require(HTTPDate.parse(date)) - 1000)
    }

    @Test("RFC 9110 §13.1.3: an If-Modified-Since equal to the stored Last-Modified is answered with a 304")
    func anIfModifiedSinceOfTheLastModifiedItselfIsNotModified() async throws {
        let modified = Self.date(-3_600_000)
        let transport = ScriptedTransport([
            Self.response(
                200, ["Cache-Control": "max-age=600", "Last-Modified": modified, "Date": Self.date()], "body")
        ])
        _ = try await fetch("/ims-equal", transport: transport)
        let same = try await fetch("/ims-equal", [("If-Modified-Since", modified)], transport: transport)
        #expect(same.status == 304 && same.source == .fresh && same.data.isEmpty)
        let earlier = try await fetch(
            "/ims-equal", [("If-Modified-Since", try Self.secondBefore(modified))], transport: transport)
        #expect(earlier.status == 200 && earlier.data == Data("body".utf8))
        #expect(transport.requests == 1)
    }

    @Test("RFC 9111 §4.3.2: without a Last-Modified, an If-Modified-Since is evaluated against the stored Date")
    func anIfModifiedSinceWithoutLastModifiedComparesTheDate() async throws {
        let date = Self.date(-60_000)
        let transport = ScriptedTransport([Self.response(200, ["Cache-Control": "max-age=600", "Date": date], "body")])
        _ = try await fetch("/ims-date", transport: transport)
        let since = try await fetch("/ims-date", [("If-Modified-Since", date)], transport: transport)
        #expect(since.status == 304 && since.source == .fresh)
        let before = try await fetch(
            "/ims-date", [("If-Modified-Since", try Self.secondBefore(date))], transport: transport)
        #expect(before.status == 200 && before.data == Data("body".utf8))
        #expect(transport.requests == 1)
    }

    @Test("RFC 8246 §2, RFC 9111 §5.2.1.4: a stale immutable response is revalidated on a reload, even with max-stale")
    func aStaleImmutableResponseIsRevalidatedOnAReload() async throws {
        let transport = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0, immutable", "Date": Self.date()], "one"),
            Self.response(200, ["Cache-Control": "max-age=0, immutable", "Date": Self.date()], "two"),
        ])
        _ = try await fetch("/immutable-stale", transport: transport)
        let reload = try await fetch(
            "/immutable-stale", [("Cache-Control", "no-cache, max-stale=3600")], transport: transport)
        #expect(reload.source == .downloaded && reload.data == Data("two".utf8) && transport.requests == 2)
    }

    @Test("RFC 9111 §5.2.1.1: a request's max-age refuses a stale response, stale-while-revalidate or not")
    func aRequestMaxAgeRefusesStaleWhileRevalidate() async throws {
        let transport = ScriptedTransport([
            Self.response(
                200, ["Cache-Control": "max-age=0, stale-while-revalidate=3600", "Date": Self.date()], "one"),
            Self.response(
                200, ["Cache-Control": "max-age=0, stale-while-revalidate=3600", "Date": Self.date()], "two"),
        ])
        _ = try await fetch("/swr-max-age", transport: transport)
        let answer = try await fetch("/swr-max-age", [("Cache-Control", "max-age=3600")], transport: transport)
        #expect(answer.source == .downloaded && answer.data == Data("two".utf8) && transport.requests == 2)
    }

    @Test("RFC 9111 §5.2.2.2: must-revalidate forbids stale-while-revalidate and a request's max-stale")
    func mustRevalidateForbidsStaleWhileRevalidateAndMaxStale() async throws {
        let transport = ScriptedTransport([
            Self.response(
                200,
                [
                    "Cache-Control": "max-age=0, must-revalidate, stale-while-revalidate=3600", "ETag": "\"v\"",
                    "Date": Self.date(),
                ], "body"),
            Self.response(304, ["ETag": "\"v\"", "Date": Self.date()]),
        ])
        _ = try await fetch("/must-revalidate-stale", transport: transport)
        let plain = try await fetch("/must-revalidate-stale", transport: transport)
        #expect(plain.source == .revalidated && plain.data == Data("body".utf8) && transport.requests == 2)
        let tolerant = try await fetch(
            "/must-revalidate-stale", [("Cache-Control", "max-stale=3600")], transport: transport)
        #expect(tolerant.source == .revalidated && transport.requests == 3)
        await cache.waitForBackgroundRevalidations()
    }

    @Test(
        "RFC 9111 §5.2.1.7, §4.2.4: only-if-cached with nothing but a stale response is a 504, unless max-stale allows it"
    )
    func onlyIfCachedDoesNotServeStale() async throws {
        let transport = ScriptedTransport([
            Self.response(200, ["Cache-Control": "max-age=0", "ETag": "\"v\"", "Date": Self.date()], "stale")
        ])
        _ = try await fetch("/only-if-cached-stale", transport: transport)
        let refused = try await fetch(
            "/only-if-cached-stale", [("Cache-Control", "only-if-cached")], transport: transport)
        #expect(refused.status == 504 && refused.data.isEmpty)
        let allowed = try await fetch(
            "/only-if-cached-stale", [("Cache-Control", "only-if-cached, max-stale=3600")], transport: transport)
        #expect(allowed.status == 200 && allowed.data == Data("stale".utf8))
        #expect(transport.requests == 1)
    }

    @Test("RFC 9111 §4.3.4, §4.2.1: a 304 with a later Date shortens an Expires lifetime")
    func aNotModifiedWithALaterDateShortensAnExpiresLifetime() async throws {
        // Stored: fresh for the minute from its Date to its Expires, both two minutes ago or
        // less, so stale now. The 304's Date is now, after that Expires: stale still.
        let transport = ScriptedTransport([
            Self.response(
                200, ["Expires": Self.date(-60_000), "ETag": "\"v\"", "Date": Self.date(-120_000)], "body"),
            Self.response(304, ["ETag": "\"v\"", "Date": Self.date()]),
        ])
        _ = try await fetch("/expires-304", transport: transport)
        #expect(try await fetch("/expires-304", transport: transport).source == .revalidated)
        #expect(try await fetch("/expires-304", transport: transport).source == .revalidated)
        #expect(transport.requests == 3)
    }
}
