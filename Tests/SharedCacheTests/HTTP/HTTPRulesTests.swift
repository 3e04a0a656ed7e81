import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import SharedCache
import SharedCacheEngine
import SharedCacheFormat

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

    /// RFC 9110 §5.1: field names are case-insensitive, which for tokens means the case of ASCII
    /// letters only: `@` and `` ` `` (or `[` and `{`) differ by the same bit as `A` and `a`.
    @Test func fieldNamesMatchInAnyCaseOfTheirLettersOnly() {
        let headers: HTTPHeaders = ["Content-Type": "text/plain", "X-Tag@": "one", "x-tag[": "two", "X-TAG@": "three"]
        #expect(headers["CONTENT-type"] == "text/plain")
        #expect(headers["x-tag@"] == "one, three")
        #expect(headers["X-Tag`"] == nil)
        #expect(headers["X-Tag{"] == nil)
        #expect(headers["Content-Typ"] == nil)
        var replaced = headers
        replaced.set("x-tag@", "four")
        #expect(replaced["X-Tag@"] == "four")
        #expect(replaced["x-tag["] == "two")
    }

    /// RFC 9110 §5.6.7: year = 4DIGIT. A year before 1000 is written with its leading zero, so
    /// that what is formatted parses back (the fuzzer found "0994" formatted as "994").
    @Test func aYearBeforeOneThousandKeepsFourDigits() throws {
        let date = try #require(HTTPDate.parse("Sun, 06 Nov 0994 08:49:37 GMT"))
        #expect(HTTPDate.format(date).contains(" 0994 "))
        #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
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
                status: 200, headers: headers, responseTime: now, heuristicCap: heuristic ? Freshness.heuristicCap : nil,
                for: .private)
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

    @Test(arguments: [HTTPAudience.private, .shared])
    func storedResponsesAndVariantListsRoundTrip(audience: HTTPAudience) {
        let response = StoredHTTP.response(
            StoredResponse(
                status: 203, headers: ["ETag": "\"x\"", "Content-Type": "text/plain", "X-Empty": ""], lifetime: 60_000,
                mustRevalidate: true, varyValues: ["accept-language": "fr"], audience: audience))
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
        #expect(!headers.equals(["cache-control": "private", "vary": "accept"], ignoring: []))  // a value
        #expect(!headers.equals(["cache-control": "private", "vary": "Accept", "ETag": "x"], ignoring: ["date"]))
        #expect(!headers.equals(["cache-control": "private"], ignoring: ["date"]))
        #expect(CacheEngine.varyNames(" Accept-Language , accept ,") == ["accept", "accept-language"])
        #expect(HTTPExchange.weakMatch("W/\"a\"", "\"a\"") && !HTTPExchange.weakMatch("\"a\"", "\"b\""))
    }

    @Test("RFC 9110 §5.6.7: exactly the three date grammars; anything else is no date")
    func datesAreParsedStrictly() {
        let expected: Int64 = 784_111_777_000
        #expect(HTTPDate.parse("  Sun, 06 Nov 1994 08:49:37 GMT ") == expected)  // OWS is not the value
        for invalid in [
            "Sun, 06 Nov 1994 08:49:37 UTC", "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-1994 08:49:37 GMT",
            "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 GMT+1", "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 UTC", "Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 6-Nov-94 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994", "Sun Nov 06 08:49:37 1994 GMT", "Sun Nov  6 08:49:37 94", "1994-11-06T08:49:37Z",
            "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT", "", "0", "-1",
        ] {
            #expect(HTTPDate.parse(invalid) == nil, "\(invalid)")
        }
        #expect(HTTPDate.parse("Sun Nov 06 08:49:37 1994") == expected)  // asctime's 2DIGIT day
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Sat, 06 Nov 1994 23:59:60 GMT") != nil)  // a leap second
    }

    @Test("RFC 9110 §5.6.7: an RFC 850 year more than 50 years ahead is in the past century")
    func rfc850TwoDigitYears() throws {
        let in2026 = try #require(HTTPDate.parse("Sun, 01 Mar 2026 00:00:00 GMT"))
        func year(_ twoDigits: String) -> Int64? {
            HTTPDate.parse("Monday, 01-Jan-\(twoDigits) 00:00:00 GMT", now: in2026)
        }
        #expect(year("76") == HTTPDate.parse("Thu, 01 Jan 2076 00:00:00 GMT"))  // 50 years ahead: still ahead
        #expect(year("77") == HTTPDate.parse("Sat, 01 Jan 1977 00:00:00 GMT"))  // 51 years ahead: the past
        #expect(year("26") == HTTPDate.parse("Thu, 01 Jan 2026 00:00:00 GMT"))
        #expect(year("99") == HTTPDate.parse("Fri, 01 Jan 1999 00:00:00 GMT"))
    }

    @Test("RFC 9111 §5.1: Age is the first list member, an invalid one is ignored; §1.2.2 saturates")
    func ageValues() {
        #expect(Freshness.ageValue("10") == 10 && Freshness.ageValue(" 10 , 20") == 10)
        #expect(Freshness.ageValue("-5") == nil && Freshness.ageValue("1.5") == nil && Freshness.ageValue("x") == nil)
        #expect(Freshness.ageValue("") == nil && Freshness.ageValue(nil) == nil && Freshness.ageValue(", 5") == nil)
        #expect(Freshness.ageValue("99999999999999999999999") == 1 << 31)
        let now: Int64 = 1_700_000_000_000
        let birth = Freshness.birth(requestTime: now, responseTime: now, headers: ["Date": HTTPDate.format(now), "Age": "abc"])
        #expect(birth == now)
    }

    @Test("RFC 9111 §3: which responses a private cache may store")
    func storability() {
        func storable(_ status: Int, _ headers: HTTPHeaders) -> Bool {
            Freshness.isStorable(status: status, headers: headers, for: .private)
        }
        #expect(storable(500, ["Cache-Control": "max-age=60"]) && storable(503, ["Expires": "0"]))
        #expect(storable(418, ["Cache-Control": "public"]) && storable(599, ["Cache-Control": "private"]))
        #expect(!storable(500, [:]) && storable(404, [:]) && storable(200, [:]) && storable(414, [:]))
        // A 206 is storable (as a part, §3.3); a 304 never is.
        #expect(storable(206, ["Cache-Control": "max-age=60"]) && !storable(304, ["Cache-Control": "max-age=60"]))
        #expect(!storable(200, ["Cache-Control": "no-store, max-age=60"]))
        #expect(!storable(500, ["Cache-Control": "s-maxage=60"]))  // s-maxage is for shared caches
        // §5.2.2.3: must-understand stores an understood status despite no-store, never another.
        #expect(storable(200, ["Cache-Control": "must-understand, no-store"]))
        #expect(!storable(299, ["Cache-Control": "must-understand, no-store, max-age=60"]))
        // §4.2.2: the heuristic only for heuristically cacheable codes, or public.
        let old: HTTPHeaders = ["Last-Modified": "Thu, 01 Jan 2015 00:00:00 GMT", "Date": "Fri, 01 Jan 2016 00:00:00 GMT"]
        func lifetime(_ status: Int, _ headers: HTTPHeaders, cap: Int64 = Freshness.heuristicCap) -> Int64 {
            Freshness.lifetime(status: status, headers: headers, responseTime: 0, heuristicCap: cap, for: .private)
        }
        #expect(lifetime(500, old) == 0)
        var open = old
        open.append("Cache-Control", "public")
        #expect(lifetime(500, open) > 0)
        #expect(lifetime(200, old, cap: 5000) == 5000)
    }

    @Test("RFC 9111 §3, §3.5, §5.2.2.7, §5.2.2.8, §5.2.2.10: what changes for a shared cache")
    func sharedStorabilityAndFreshness() throws {
        func storable(_ headers: HTTPHeaders, for audience: HTTPAudience) -> Bool {
            Freshness.isStorable(status: 500, headers: headers, for: audience)
        }
        // An unqualified private is never stored by a shared cache; a qualified one is, without
        // its fields; s-maxage makes a response storable for a shared cache only.
        #expect(storable(["Cache-Control": "private"], for: .private))
        #expect(!storable(["Cache-Control": "private, max-age=60"], for: .shared))
        #expect(storable(["Cache-Control": "private=\"X-Mine\", max-age=60"], for: .shared))
        let sharedOnly: HTTPHeaders = ["Cache-Control": "s-maxage=60"]
        #expect(storable(sharedOnly, for: .shared) && !storable(sharedOnly, for: .private))
        let fields: HTTPHeaders = [
            "Cache-Control": "max-age=60, private=\"X-Mine\"", "X-Mine": "m", "X-Kept": "k",
        ]
        #expect(CacheEngine.storableFields(fields, for: .shared).map(\.name) == ["Cache-Control", "X-Kept"])
        #expect(CacheEngine.storableFields(fields, for: .private).count == 3)
        // s-maxage before max-age, and then no stale use; proxy-revalidate likewise.
        let both: HTTPHeaders = ["Cache-Control": "max-age=10, s-maxage=600"]
        for (audience, expected) in [(HTTPAudience.private, Int64(10_000)), (.shared, 600_000)] {
            let lifetime = Freshness.lifetime(status: 200, headers: both, responseTime: 0, heuristicCap: nil, for: audience)
            #expect(lifetime == expected)
        }
        for directives in ["s-maxage=60", "proxy-revalidate"] {
            #expect(CacheControl(directives).forbidsStaleUse(for: .shared), "\(directives)")
            #expect(!CacheControl(directives).forbidsStaleUse(for: .private), "\(directives)")
        }
        // §3.5: the answer to a request with Authorization, only when the response allows it.
        var request = URLRequest(url: try #require(URL(string: "http://example.com/a")))
        #expect(!request.isAuthorized)
        request.setValue("Bearer x", forHTTPHeaderField: "Authorization")
        #expect(request.isAuthorized)
        for (directives, allowed) in [
            ("max-age=60", false), ("public, max-age=60", true), ("must-revalidate, max-age=60", true),
            ("s-maxage=60", true),
        ] {
            let headers: HTTPHeaders = ["Cache-Control": directives]
            let shared = Freshness.allowsStoring(answeringAuthorization: true, headers: headers, for: .shared)
            #expect(shared == allowed, "\(directives)")
            #expect(Freshness.allowsStoring(answeringAuthorization: false, headers: headers, for: .shared))
            #expect(Freshness.allowsStoring(answeringAuthorization: true, headers: headers, for: .private))
        }
        // A shared cache: in a directory a group shares, whatever its `config` says; where `config`
        // says so; where the process asked to be one, or was one already (it never turns private).
        for (sharing, asked, severalUsers, audience) in [
            (Sharing.group, HTTPAudience.private, false, HTTPAudience.shared), (.owner, .private, false, .private),
            (.owner, .private, true, .shared), (.owner, .shared, false, .shared),
        ] {
            let file = ConfigurationFile(sizeLimit: 0, storesForSeveralUsers: severalUsers)
            #expect(Configuration(sharing: sharing, httpAudience: asked).adopting(file).httpAudience == audience)
        }
    }

    @Test("RFC 9111 §1.2.2, §5.2: delta-seconds and the directives a private cache reads")
    func moreDirectives() {
        let directives = CacheControl("immutable, stale-while-revalidate=30, stale-if-error=\"60\", private=\"X\", must-understand")
        #expect(directives.immutable && directives.staleWhileRevalidate == 30 && directives.staleIfError == 60)
        #expect(directives.isPrivate && directives.mustUnderstand && !directives.noCache)
        #expect(CacheControl("max-age=-1").maxAge == 0 && CacheControl("max-age=1.5").maxAge == 0)
        #expect(CacheControl("max-age=99999999999999999999").maxAge == 1 << 31)
    }

    @Test("RFC 9111 §3.1, §5.2.2.4: hop-by-hop, Connection-nominated and no-cache-named fields are not kept")
    func fieldsNotStored() {
        let headers: HTTPHeaders = [
            "Connection": "close, X-Hop", "X-Hop": "1", "Keep-Alive": "timeout=5", "Transfer-Encoding": "chunked",
            "Cache-Control": "max-age=60, no-cache=\"Set-Cookie\"", "Set-Cookie": "a=b", "X-Kept": "1", "TE": "trailers",
            "Proxy-Authenticate": "Basic", "Proxy-Authentication-Info": "a=b", "Proxy-Authorization": "Basic eA==",
        ]
        #expect(CacheEngine.storableFields(headers, for: .private).map(\.name) == ["Cache-Control", "X-Kept"])
    }

    @Test("RFC 9111 §3.2, §5.2.2.4: a 304's fields replace the stored ones, but never with an unreusable field")
    func updatedFieldsKeepOnlyWhatMayBeReused() {
        let stored: HTTPHeaders = [
            "Cache-Control": "max-age=60, no-cache=\"X-Secret\"", "ETag": "\"a\"", "Content-Length": "10", "X-Old": "1",
        ]
        let update: HTTPHeaders = [
            "etag": "\"b\"", "Content-Length": "0", "X-Secret": "s", "Connection": "X-Hop", "X-Hop": "h", "X-New": "n",
        ]
        let merged = CacheEngine.updatedFields(stored, by: update, for: .private)
        #expect(merged.map(\.name) == ["Cache-Control", "ETag", "Content-Length", "X-Old", "X-New"])
        #expect(merged["ETag"] == "\"b\"" && merged["Content-Length"] == "10")
        // A new Cache-Control names a stored field: that one goes.
        let renamed = CacheEngine.updatedFields(stored, by: ["Cache-Control": "max-age=60, no-cache=\"x-old\""], for: .private)
        #expect(renamed.map(\.name) == ["Cache-Control", "ETag", "Content-Length"])
    }

    @Test("RFC 3986 §6.2.2-6.2.3: one target however its URL is written")
    func sameTargetIgnoresHowAURLIsWritten() throws {
        func same(_ one: String, _ other: String) throws -> Bool {
            HTTPExchange.sameTarget(try #require(URL(string: one)), try #require(URL(string: other)))
        }
        #expect(try same("HTTP://Example.COM:80", "http://example.com/"))
        #expect(try same("https://example.com:443/a?b=c#top", "https://example.com/a?b=c"))
        #expect(try !same("http://example.com/a", "http://example.com/b"))
        #expect(try !same("http://example.com/a?b=c", "http://example.com/a?b=d"))
        #expect(try !same("http://example.com:8080/", "http://example.com/"))
        #expect(try !same("http://example.com/A", "http://example.com/a"))  // paths keep their case
    }

    @Test("RFC 9111 §4.1: Vary values are normalised before matching")
    func varyNormalisation() {
        func values(_ fields: [(String, String)]) -> HTTPHeaders {
            var request = URLRequest(url: URL(string: "http://example.com/")!)
            for (name, value) in fields { request.addValue(value, forHTTPHeaderField: name) }
            return CacheEngine.varyValues(names: ["accept-language"], request: request)
        }
        let reference = values([("Accept-Language", "en, fr")])
        #expect(values([("accept-language", "en,fr")]) == reference)
        #expect(values([("Accept-Language", " en ,   fr ")]) == reference)
        #expect(values([("Accept-Language", "en"), ("Accept-Language", "fr")]) == reference)
        #expect(values([("Accept-Language", "fr, en")]) != reference)  // order is meaning
        #expect(values([("Accept-Language", "EN, Fr")]) == reference)  // language ranges have no case
        var tokens = URLRequest(url: URL(string: "http://example.com/")!)
        tokens.addValue("Token-A", forHTTPHeaderField: "X-Token")
        var lowercased = tokens
        lowercased.setValue("token-a", forHTTPHeaderField: "X-Token")
        #expect(  // a field the cache does not know keeps its case
            CacheEngine.varyValues(names: ["x-token"], request: tokens)
                != CacheEngine.varyValues(names: ["x-token"], request: lowercased))
        // Whitespace around members and runs of it inside one are the list's; inside a quoted
        // string, commas and whitespace are the value's own.
        let members = FieldList.normalisedMembers
        #expect(members(" a ,,  b   c\t, ") == ["a", "b c"])
        #expect(members(#""a,b", "x  y", "q\"," , z"#) == [#""a,b""#, #""x  y""#, #""q\",""#, "z"])
        #expect(members(#"en;  q=0.5"#) == ["en; q=0.5"])
    }

    @Test("RFC 9110 §14: byte ranges of a stored response")
    func byteRanges() {
        #expect(ByteRange.answer("bytes=0-4", length: 10) == .slice(0..<5))
        #expect(ByteRange.answer("bytes=5-", length: 10) == .slice(5..<10))
        #expect(ByteRange.answer("bytes=-3", length: 10) == .slice(7..<10))
        #expect(ByteRange.answer("bytes=-30", length: 10) == .slice(0..<10))
        #expect(ByteRange.answer("bytes=8-100", length: 10) == .slice(8..<10))
        #expect(ByteRange.answer("bytes=10-", length: 10) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=-0", length: 10) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=5-2", length: 10) == .whole)  // invalid: ignored
        #expect(ByteRange.answer("bytes=0-1,3-4", length: 10) == .whole)
        #expect(ByteRange.answer("items=0-1", length: 10) == .whole && ByteRange.answer(nil, length: 10) == .whole)
        #expect(ByteRange.answer("bytes=a-b", length: 10) == .whole)
    }

    @Test("RFC 9110 §14.4: Content-Range of one part with a known complete length")
    func contentRanges() {
        typealias ContentRange = PartialContent.ContentRange
        #expect(ContentRange("bytes 0-4/10") == ContentRange(bytes: 0..<5, length: 10))
        #expect(ContentRange(" BYTES 9-9/10 ")?.description == "bytes 9-9/10")
        for invalid in [
            "bytes 0-4/*", "bytes */10", "bytes 5-4/10", "bytes 0-10/10", "items 0-4/10", "bytes 0-4", "bytes -1-4/10",
            "bytes 0-4/1x", "bytes=0-4/10", "bytes 0-99999999999999999999/99999999999999999999", "",
        ] {
            #expect(ContentRange(invalid) == nil, "\(invalid)")
        }
    }

    @Test("RFC 9111 §3.3, RFC 9110 §15.3.7.3: the ranges a stored part holds, and the union of parts")
    func storedParts() throws {
        typealias Ranges = PartialContent.Ranges
        let headers: HTTPHeaders = ["ETag": "\"a\"", "Content-Range": "bytes 0-1/10", "Content-Range": "bytes 5-6/10"]
        let held = try #require(Ranges(headers, bodySize: 4))
        #expect(held.ranges == [0..<2, 5..<7] && !held.isComplete)
        #expect(held.offset(of: 5..<7) == 2 && held.offset(of: 6..<7) == 3 && held.offset(of: 1..<6) == nil)
        #expect(Ranges(headers, bodySize: 5) == nil)  // the body is not what the fields say
        #expect(Ranges(["Content-Range": "bytes 5-6/10", "Content-Range": "bytes 0-1/10"], bodySize: 4) == nil)
        #expect(Ranges(["Content-Range": "bytes 0-1/10", "Content-Range": "bytes 2-3/11"], bodySize: 4) == nil)
        #expect(Ranges(["ETag": "\"a\""], bodySize: 0) == nil)

        let whole = Data("0123456789".utf8)
        let body = Data("0156".utf8)
        let (apart, apartBody) = held.adding(8..<10, whole[8..<10], to: body)
        #expect(apart.ranges == [0..<2, 5..<7, 8..<10] && apartBody == Data("015689".utf8))
        let (joined, joinedBody) = held.adding(1..<6, whole[1..<6], to: body)  // overlaps both
        #expect(joined.ranges == [0..<7] && joinedBody == whole[0..<7])
        let (adjacent, adjacentBody) = joined.adding(7..<10, whole[7..<10], to: joinedBody)
        #expect(adjacent.isComplete && adjacentBody == whole && adjacent.fields.map(\.description) == ["bytes 0-9/10"])
        let (inside, insideBody) = joined.adding(2..<4, whole[2..<4], to: joinedBody)
        #expect(inside == joined && insideBody == joinedBody)
    }

    @Test("RFC 9111 §3.3: which 206 responses are stored as parts")
    func storableParts() {
        var request = URLRequest(url: URL(string: "http://example.com/x")!)
        request.setValue("bytes=2-5", forHTTPHeaderField: "Range")
        func part(_ headers: HTTPHeaders, body: String = "2345", status: Int = 206, range: String? = nil) -> Bool {
            var request = request
            if let range { request.setValue(range, forHTTPHeaderField: "Range") }
            return PartialContent.Part(
                TransportResponse(status: status, headers: headers, body: Data(body.utf8)), request: request, for: .private) != nil
        }
        let fields: HTTPHeaders = ["ETag": "\"v\"", "Content-Range": "bytes 2-5/10", "Cache-Control": "max-age=60"]
        #expect(part(fields))
        #expect(!part(fields, status: 200) && !part(fields, range: "bytes=2-5,7-8") && !part(fields, body: "234"))
        func with(_ name: String, _ value: String?) -> HTTPHeaders {
            var headers = fields
            headers.set(name, value)
            return headers
        }
        // Storing needs no validator (§3.3); only combining needs a strong one (§3.4).
        #expect(part(with("ETag", "W/\"v\"")) && part(with("ETag", nil)) && part(with("ETag", "v")))
        #expect(!part(with("Content-Range", "bytes 2-5/*")) && !part(with("Content-Range", nil)))
        #expect(!part(with("Cache-Control", "no-store")) && !part(with("Vary", "Accept")))
        #expect(!part(with("Content-Range", "bytes 2-5/\(PartialContent.storableLength + 1)")))
        #expect(PartialContent.strongMatch("\"v\"", " \"v\"") && !PartialContent.strongMatch("W/\"v\"", "W/\"v\""))
    }

    @Test("RFC 9211: Cache-Status members")
    func cacheStatusMembers() {
        #expect(CacheStatus.hit.description == "SharedCache; hit")
        var forwarded = CacheStatus(forward: .uriMiss)
        forwarded.forwardStatus = 200
        forwarded.stored = true
        forwarded.ttl = 60
        #expect(forwarded.description == "SharedCache; fwd=uri-miss; fwd-status=200; stored; ttl=60")
        var collapsed = CacheStatus(forward: .stale)
        collapsed.collapsed = true
        collapsed.detail = "range"
        #expect(collapsed.description == "SharedCache; fwd=stale; collapsed; detail=range")
        var generated = CacheStatus()
        generated.isGenerated = true
        generated.detail = "only-if-cached"
        #expect(generated.description == "SharedCache; detail=only-if-cached")
    }

    @Test("RFC 9112 §7: the plain connection undoes chunked, keeps an unknown content coding as received, and refuses a transfer coding it cannot undo")
    func identityConnectionParsesResponses() throws {
        let url = URL(string: "http://example.com/x")!
        let chunked = try IdentityConnection.parse(
            Data("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n1\r\n!\r\n0\r\n\r\n".utf8),
            method: "GET", url: url)
        #expect(chunked.status == 200 && chunked.body == Data("hello!".utf8))
        let unknown = try IdentityConnection.parse(
            Data("HTTP/1.1 200 OK\r\nContent-Encoding: x-other\r\n\r\nraw bytes".utf8), method: "GET", url: url)
        #expect(unknown.body == Data("raw bytes".utf8) && unknown.headers["Content-Encoding"] == "x-other")
        // RFC 9112 §6.1, §7: the coded bytes are not the representation, and nothing here
        // undoes them; stored with the hop-by-hop field dropped, they were served as it.
        for coding in ["x-unknown", "x-unknown, chunked", "gzip, chunked"] {
            #expect(throws: URLError.self, "\(coding)") {
                try IdentityConnection.parse(
                    Data("HTTP/1.1 200 OK\r\nTransfer-Encoding: \(coding)\r\n\r\n5\r\nhello\r\n0\r\n\r\n".utf8),
                    method: "GET", url: url)
            }
        }
        let sized = try IdentityConnection.parse(
            Data("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nabcdef".utf8), method: "GET", url: url)
        #expect(sized.status == 404 && sized.body == Data("abc".utf8))
        #expect(throws: URLError.self) { try IdentityConnection.parse(Data("garbage".utf8), method: "GET", url: url) }
    }

    @Test("RFC 9110 §5.3, RFC 6265 §4.1.1: Set-Cookie fields joined with commas come apart at each cookie's name")
    func joinedSetCookieFields() {
        let dated = "a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/"
        let joined = "\(dated), b=2,c=3; Max-Age=60"
        #expect(TransportResponse.setCookieFields(joined: joined) == [dated, "b=2", "c=3; Max-Age=60"])
        #expect(TransportResponse.setCookieFields(joined: dated) == [dated])
        #expect(TransportResponse.setCookieFields(joined: "") == [])
    }

    @Test("RFC 9112 §8, §6.3, RFC 9111 §3.3: on the plain connection, fewer bytes than Content-Length is an incomplete response, a length that is not one none")
    func aShortOrNegativeContentLengthIsNoResponse() throws {
        let url = URL(string: "http://example.com/x")!
        let heads = [
            "Content-Length: 100", "Content-Length: -1", "Content-Length: 4x", "Content-Length: +5",
            "Content-Length: 5\r\nContent-Length: 10", "Content-Length: 5, 10",
            "Content-Length: 3\r\nTransfer-Encoding: chunked",
        ]
        for head in heads {
            let response = Data("HTTP/1.1 200 OK\r\n\(head)\r\n\r\nten bytes!".utf8)
            #expect(throws: URLError.self, "\(head)") { try IdentityConnection.parse(response, method: "GET", url: url) }
        }
        // RFC 9110 §8.6: the same length repeated is one length.
        let repeated = Data("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nten bytes!".utf8)
        #expect(try IdentityConnection.parse(repeated, method: "GET", url: url).body == Data("ten".utf8))
    }

    @Test("RFC 9112 §5, §5.2, §7.1, RFC 9110 §5.5: the plain connection reads fields and chunks strictly, and unfolds obs-fold")
    func thePlainConnectionReadsFramingStrictly() throws {
        let url = URL(string: "http://example.com/x")!
        func parse(_ text: String) throws -> TransportResponse {
            try IdentityConnection.parse(Data(text.utf8), method: "GET", url: url)
        }
        let refused = [
            "HTTP/1.1 200 OK\r\nX-A: a\u{0}b\r\nContent-Length: 2\r\n\r\nok",  // NUL in a value
            "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 2\r\n\r\nok",  // a bare CR
            "HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok",  // a name that is no token
            "HTTP/1.1 200 OK\r\nno colon here\r\nContent-Length: 2\r\n\r\nok",
            "HTTP/1.1 200 OK\r\n folded: first\r\nContent-Length: 2\r\n\r\nok",  // a fold with nothing before it
            "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 -200 OK\r\n\r\nok",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nhello\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+5\r\nhello\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\nhello\r\n0\r\n\r\n",
            "HTTP/1.1 200 OK\r\nX-Long: \(String(repeating: "a", count: IdentityConnection.headerSectionLimit))\r\n\r\n",
        ]
        for response in refused {
            #expect(throws: URLError.self, "\(response.prefix(80))") { try parse(response) }
        }
        let folded = try parse("HTTP/1.1 200 OK\r\nCache-Control: max-age=600,\r\n\t no-store\r\nContent-Length: 2\r\n\r\nok")
        #expect(folded.headers["Cache-Control"] == "max-age=600, no-store")
    }

    @Test("RFC 9110 §5.4, §15.2, RFC 9112 §6.3, §7.1, §7.1.1: the plain connection bounds what it reads (a body as sent, a chunk-size line, all heads together), wherever the bytes are split")
    func thePlainConnectionBoundsWhatItReads() throws {
        /// The body `text` gives, its bytes handed over one at a time (every split a read can make).
        func body(_ text: String, limit: Int = .max) throws -> Data {
            var parser = ResponseParser(method: "GET", bodyLimit: limit)
            var body = Data()
            func handle(_ event: ResponseParser.Event) {
                if case .body(let piece) = event { body.append(contentsOf: piece) }
            }
            try Array(text.utf8).withUnsafeBytes { bytes in
                for index in bytes.indices {
                    try parser.consume(UnsafeRawBufferPointer(rebasing: bytes[index...index]), handle)
                }
            }
            if !parser.isComplete { try parser.finish(handle) }
            return body
        }
        func failure(_ text: String, limit: Int = .max) -> URLError.Code? {
            #expect(throws: URLError.self, "\(text.prefix(60))") { try body(text, limit: limit) }?.code
        }
        let ok = "HTTP/1.1 200 OK\r\n"
        let chunked = ok + "Transfer-Encoding: chunked\r\n\r\n"
        #expect(try body(chunked + "5;x=1\r\nhello\r\n1\r\n!\r\n0\r\n\r\n") == Data("hello!".utf8))
        #expect(try body(ok + "Content-Length: 10\r\n\r\n0123456789", limit: 10) == Data("0123456789".utf8))
        #expect(try body(ok + "\r\n0123456789", limit: 10) == Data("0123456789".utf8))
        // Past the limit: announced, in a chunk (its size line counts, as sent), or until the close.
        #expect(failure(ok + "Content-Length: 11\r\n\r\n", limit: 10) == .dataLengthExceedsMaximum)
        #expect(failure(chunked + "8\r\n01234567\r\n0\r\n\r\n", limit: 10) == .dataLengthExceedsMaximum)
        #expect(failure(ok + "\r\n01234567890", limit: 10) == .dataLengthExceedsMaximum)
        // RFC 9112 §7.1.1: a chunk-size line (extensions included) over 4 KiB; §7.1: a chunk not ended by CRLF.
        let longExtension = "1;" + String(repeating: "x", count: ResponseParser.chunkLineLimit) + "\r\na\r\n0\r\n\r\n"
        #expect(failure(chunked + longExtension) == .badServerResponse)
        #expect(failure(chunked + "4\r\nabcdXY0\r\n\r\n") == .badServerResponse)
        // RFC 9110 §15.2: any number of 1xx heads, within one header section's limit for all.
        let interim = "HTTP/1.1 100 Continue\r\n\r\n"
        #expect(try body(String(repeating: interim, count: 3) + ok + "Content-Length: 2\r\n\r\nok") == Data("ok".utf8))
        let many = String(repeating: interim, count: IdentityConnection.headerSectionLimit / interim.utf8.count + 1)
        #expect(failure(many + ok + "Content-Length: 2\r\n\r\nok") == .badServerResponse)
    }

    /// A chunk-size line of exactly ``ResponseParser/chunkLineLimit`` bytes is read whole or
    /// split anywhere, its CRLF between two reads too: it was refused when a read ended
    /// between its CR and its LF (the line and its CR, one byte past the limit, counted as a
    /// line too long), and taken when both came in one read.
    @Test("RFC 9112 §7.1.1: a chunk-size line at the limit is read wherever the bytes are split")
    func aChunkLineAtTheLimitIsReadWhereverItIsSplit() throws {
        let line = "1;" + String(repeating: "x", count: ResponseParser.chunkLineLimit - 2)
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let bytes = Array((head + line + "\r\na\r\n0\r\n\r\n").utf8)
        let afterCarriageReturn = head.utf8.count + line.utf8.count + 1
        for cuts in [[], [afterCarriageReturn], Array(1..<bytes.count)] {
            var parser = ResponseParser(method: "GET", bodyLimit: .max)
            var body = Data()
            func handle(_ event: ResponseParser.Event) {
                if case .body(let piece) = event { body.append(contentsOf: piece) }
            }
            var start = 0
            for end in cuts + [bytes.count] {
                try bytes.withUnsafeBytes { try parser.consume(UnsafeRawBufferPointer(rebasing: $0[start..<end]), handle) }
                start = end
            }
            #expect(parser.isComplete && body == Data("a".utf8), "cut at \(cuts.prefix(1)) of \(cuts.count)")
        }
    }

    @Test("RFC 9112 §6.3, RFC 9110 §8.6: a Content-Length that is not one length makes a response incomplete, as a short body does")
    func aContentLengthThatIsNoLengthIsIncomplete() {
        func incompleteness(_ length: String, received: Int64) -> DownloadReceiver.Incomplete? {
            var headers = HTTPHeaders()
            for value in length.components(separatedBy: "|") { headers.append("Content-Length", value) }
            return DownloadReceiver.incompleteness(
                of: TransportResponse(status: 200, headers: headers, body: Data(), url: nil), received: received)
        }
        #expect(incompleteness("4x", received: 4) != nil)
        #expect(incompleteness("5|14", received: 14) != nil)
        #expect(incompleteness("5, 14", received: 5) != nil)
        #expect(incompleteness("+5", received: 5) != nil)
        #expect(incompleteness("5|5", received: 5) == nil)
        #expect(incompleteness("5", received: 5) == nil)
        #expect(incompleteness("5", received: 4) != nil)
    }

    @Test("RFC 9110 §12.5.5: a Vary member that is not a field name makes the whole Vary match nothing")
    func aVaryThatIsNotFieldNamesMatchesNothing() {
        #expect(CacheEngine.varyNames("Accept-Encoding, accept-language") == ["accept-encoding", "accept-language"])
        #expect(CacheEngine.varyNames("partial content") == ["*"])
        #expect(CacheEngine.varyNames("Accept, Partial Content") == ["*"])
        #expect(CacheEngine.varyNames("accept, \"x\"") == ["*"])
        #expect(CacheEngine.varyNames("*") == ["*"])
    }
}
