import Foundation
import Testing

@testable import SharedCache

@Suite("HTTP rules on values: dates, Cache-Control, freshness, stored responses")
struct HTTPRulesTests {
    @Test func theThreeDateFormatsOfRFC9110ParseAlike() {
        let expected: Int64 = 784_111_777_000
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == expected)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == expected)
        #expect(HTTPDate.format(expected) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.parse("0") == nil)
        #expect(HTTPDate.parse("yesterday") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 25:49:37 GMT") == nil)
    }

    @Test func cacheControlDirectives() {
        // RFC 9111 §5.2.2.4: a qualified no-cache names fields; the response itself stays reusable.
        let response = CacheControl("public, max-age=60, must-revalidate, no-cache=\"Set-Cookie, X\"")
        #expect(response.maxAge == 60 && response.mustRevalidate && !response.noCache && !response.noStore)
        #expect(response.noCacheFields == ["set-cookie", "x"] && response.isPublic)
        #expect(CacheControl("max-age=abc").maxAge == 0)  // malformed: the safe side
        // RFC 9111 §4.2.1: of conflicting values, the first or stale; stale is the safe side.
        #expect(CacheControl("max-age=100, max-age=5").maxAge == 0)
        #expect(CacheControl("max-age=5, max-age=5").maxAge == 5)
        #expect(CacheControl("MAX-AGE=\"7\"").maxAge == 7)
        let request = CacheControl("max-stale, min-fresh=10, only-if-cached, no-store")
        #expect(request.maxStale == .max && request.minFresh == 10 && request.onlyIfCached && request.noStore)
        #expect(CacheControl("max-stale=30").maxStale == 30)
        #expect(CacheControl(nil) == CacheControl())
        // Found by sharedcache-fuzz: a directive that is only "=" once crashed the parser.
        var onlyMaxAge = CacheControl()
        onlyMaxAge.maxAge = 0
        #expect(CacheControl("=, =5, max-age=") == onlyMaxAge)
    }

    @Test func lifetimeComesFromMaxAgeThenExpiresThenTheHeuristic() {
        let now: Int64 = 1_700_000_000_000
        let date = HTTPDate.format(now)
        func lifetime(_ headers: HTTPHeaders, heuristic: Bool = false) -> Int64 {
            Freshness.lifetime(
                status: 200, headers: headers, responseTime: now, heuristicCap: heuristic ? Freshness.heuristicCap : nil)
        }
        #expect(lifetime(["Cache-Control": "max-age=60", "Expires": HTTPDate.format(now + 999_000)]) == 60_000)
        #expect(lifetime(["Date": date, "Expires": HTTPDate.format(now + 120_000)]) == 120_000)
        #expect(lifetime(["Date": date, "Expires": "0"]) == 0)
        #expect(lifetime(["Cache-Control": "max-age=60, no-cache"]) == 0)
        let modified: HTTPHeaders = ["Date": date, "Last-Modified": HTTPDate.format(now - 100_000_000)]
        #expect(lifetime(modified) == 0)
        #expect(lifetime(modified, heuristic: true) == 10_000_000)
        #expect(
            lifetime(["Date": date, "Last-Modified": HTTPDate.format(now - 10 * Freshness.heuristicCap)], heuristic: true)
                == Freshness.heuristicCap)
    }

    @Test func birthCorrectsForAgeAndTransit() {
        let now: Int64 = 1_700_000_000_000
        // Sent at now - 2 s, answered now, by an origin whose response was already 30 s old.
        let birth = Freshness.birth(
            requestTime: now - 2000, responseTime: now, headers: ["Date": HTTPDate.format(now), "Age": "30"])
        #expect(birth == now - 32_000)
        // A Date in the past shows an apparent age even without Age.
        #expect(Freshness.birth(requestTime: now, responseTime: now, headers: ["Date": HTTPDate.format(now - 5000)]) == now - 5000)
    }

    @Test func storedResponsesAndVariantListsRoundTrip() {
        let response = StoredHTTP.response(
            StoredResponse(
                status: 203, headers: ["ETag": "\"x\"", "Content-Type": "text/plain", "X-Empty": ""], lifetime: 60_000,
                mustRevalidate: true, varyValues: ["accept-language": "fr"]))
        let list = StoredHTTP.variants(VariantList(names: ["accept", "accept-language"], keys: ["a\nb", "c"]))
        #expect(StoredHTTP(response.encoded()) == response)
        #expect(StoredHTTP(list.encoded()) == list)
        #expect(StoredHTTP([]) == nil)
        #expect(StoredHTTP(Array(response.encoded().dropLast(3))) == nil)
    }

    @Test func headersAreCaseInsensitiveAndJoinRepeats() {
        var headers: HTTPHeaders = ["Cache-Control": "max-age=1", "cache-control": "no-store", "Vary": "Accept"]
        #expect(headers["CACHE-CONTROL"] == "max-age=1, no-store")
        headers.set("cache-Control", "private")
        #expect(headers["Cache-Control"] == "private" && headers.count == 2)
        #expect(headers.equals(["vary": "Accept", "CACHE-CONTROL": "private"], ignoring: []) == false)  // order
        #expect(headers.equals(["cache-control": "private", "vary": "Accept", "Date": "x"], ignoring: ["date"]))
        #expect(SharedCache.varyNames(" Accept-Language , accept ,") == ["accept", "accept-language"])
        #expect(HTTPExchange.weakMatch("W/\"a\"", "\"a\"") && !HTTPExchange.weakMatch("\"a\"", "\"b\""))
    }
}
