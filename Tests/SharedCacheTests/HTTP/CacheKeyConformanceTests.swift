import Foundation
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The cache key: one entry for every spelling of a URL (RFC 9110 §4.2.3), and invalidation
// that reaches it however a Location spells it (RFC 9111 §4.4).
extension HTTPRulesTests {
    @Test("RFC 9110 §4.2.3, RFC 3986 §6.2.2-6.2.3: equivalent http(s) URLs have one normal form")
    func normalURLs() throws {
        func normal(_ text: String) throws -> String { NormalURL(try #require(URL(string: text))).string }
        // RFC 9110 §4.2.3's own example: three spellings of one URI.
        for spelling in [
            "http://example.com:80/~smith/home.html", "http://EXAMPLE.com/%7Esmith/home.html",
            "http://EXAMPLE.com:/%7esmith/home.html",
        ] {
            #expect(try normal(spelling) == "http://example.com/~smith/home.html", "\(spelling)")
        }
        #expect(try normal("HTTPS://Example.COM:443?q=%7e#top") == "https://example.com/?q=~")
        #expect(try normal("http://example.com:8080/A/%2f%e2%82%ac") == "http://example.com:8080/A/%2F%E2%82%AC")
        #expect(try normal("http://User:Pw@[::1]:80/a") == "http://User:Pw@[::1]/a")
        #expect(try normal("http://[::1]:8080") == "http://[::1]:8080/")
        let origin = try #require(URL(string: "HTTP://user@Example.com:80/x"))
        #expect(NormalURL(origin).origin == "http://example.com")
        // The host and userinfo are percent-normalized too, a port written in decimal, an IP
        // literal (its zone may be case-sensitive) kept as written.
        #expect(try normal("http://ex%41mple.COM/") == "http://example.com/")
        #expect(try normal("http://EX%c3%a4MPLE.com/") == "http://ex%C3%A4mple.com/")
        #expect(try normal("http://us%65r@h/") == "http://user@h/")
        #expect(try normal("http://h:08080/") == "http://h:8080/")
        #expect(try normal("http://h:080/") == "http://h/")
        #expect(try normal("http://[FE80::1%25Eth0]:8080/") == "http://[FE80::1%25Eth0]:8080/")
        // RFC 3986 §3.1, §6.2.3: no "/" is added without an authority, and text that does not
        // start with a scheme is a relative reference, its case kept.
        #expect(try normal("http:example.com/x") == "http:example.com/x")
        #expect(NormalURL(parsing: "/Search?q=A:b#top").string == "/Search?q=A:b")
        #expect(NormalURL(parsing: "a#b://x/") == NormalURL(parsing: "a"))
        // URLs already written so take a shortcut, which must agree with the full parse.
        for text in [
            "http://example.com/~smith/home.html", "https://example.com/?q=~", "http://example.com:8080/a",
            "http://example.com", "http://example.com?q", "HTTP://example.com/", "http://Example.com/",
            "http://example.com/%7e", "http://example.com/#top", "ftp://example.com", "urn:isbn:0451450523",
            "http://u@example.com/", "http://[::1]/", "http://example.com:/", "http://example.com:80/",
            "https://example.com:443/", "https://example.com:80/", "http://127.0.0.1:8080/a?b",
            "http://example.com:08080/", "http://Example.com:8080/", "a#b://x/", "/Search?q=A:b",
            "http:example.com/x",
        ] {
            let url = try #require(URL(string: text))
            #expect(NormalURL(url) == NormalURL(parsing: url.absoluteString), "\(text)")
        }
        // …and takes it for URLs written so, not only for the rest.
        for text in ["http://example.com/~smith/home.html", "http://127.0.0.1:8080/a?b", "ftp://example.com"] {
            #expect(NormalURL.originEndIfNormal(text.utf8) != nil, "\(text)")
        }
    }
}

extension ConformanceTests {
    /// Fetches a URL given whole, not a path on the origin.
    func fetch(url text: String, method: String = "GET", transport: ScriptedTransport) async throws -> FetchResult {
        var request = URLRequest(url: try #require(URL(string: text)))
        request.httpMethod = method
        return try await cache.fetch(request, transport: transport)
    }

    @Test("RFC 9110 §4.2.3: equivalent spellings of a URL share one stored response")
    func equivalentURLsShareOneEntry() async throws {
        let transport = ScriptedTransport([
            TransportResponse(status: 200, headers: ["Cache-Control": "max-age=3600"], body: Data("smith".utf8)),
            TransportResponse(status: 200, headers: ["Cache-Control": "max-age=3600"], body: Data("another".utf8)),
        ])
        #expect(try await fetch(url: "http://example.com/~smith/home.html", transport: transport).source == .downloaded)
        for spelling in ["http://EXAMPLE.com:80/%7Esmith/home.html", "http://example.com:/%7esmith/home.html#top"] {
            let answer = try await fetch(url: spelling, transport: transport)
            #expect(answer.source == .fresh && answer.data == Data("smith".utf8), "\(spelling)")
        }
        #expect(try cache.get(key: "http://example.com/~smith/home.html")?.data == Data("smith".utf8))
    }

    @Test("RFC 9111 §4.4, RFC 9110 §4.2.3: a Location on the same origin, spelled another way, is invalidated")
    func anEquivalentLocationIsInvalidated() async throws {
        let transport = ScriptedTransport([
            TransportResponse(status: 200, headers: ["Cache-Control": "max-age=3600"], body: Data("item".utf8)),
            TransportResponse(status: 201, headers: ["Location": "HTTP://Example.COM:80/items/1"], body: Data()),
        ])
        _ = try await fetch(url: "http://example.com/items/1", transport: transport)
        #expect(try cache.contains(key: "http://example.com/items/1"))
        _ = try await fetch(url: "http://example.com/items", method: "POST", transport: transport)
        #expect(try !cache.contains(key: "http://example.com/items/1"))
    }
}
