import Foundation
import SharedCachePlatform
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Redirects handed back rather than followed (`URLSessionTransport(followsRedirects: false)`):
// the transport returns the 3xx itself, and the cache stores and reuses it as any response.
extension ConformanceTests {
    @Test("RFC 9110 §15.4: not following, the transport hands back the 3xx itself, whole and streamed")
    func theTransportHandsBackARedirect() async throws {
        let transport = URLSessionTransport(followsRedirects: false)
        let whole = try await transport.send(request("/status/301-maxage"))
        #expect(whole.status == 301 && !whole.body.isEmpty)
        #expect(whole.headers["Location"]?.hasSuffix("/h/redirected/r.txt") == true)
        #expect(whole.url == origin.url("/status/301-maxage"))

        let events = Locked([TransportEvent]())
        let head = try await transport.send(request("/status/301-maxage")) { event in
            events.withLock { $0.append(event) }
        }
        #expect(head.status == 301 && head.headers["Location"] == whole.headers["Location"])
        let received = events.withLock { $0 }
        guard case .head(let announced) = received.first else {
            Issue.record("no head first: \(received)")
            return
        }
        #expect(announced.status == 301)
        let body = received.dropFirst().reduce(into: Data()) { body, event in
            if case .body(let piece) = event { body.append(piece) }
        }
        #expect(body == whole.body)
        #expect(origin.requests(to: "/status/301-maxage", atLeast: 2).map(\.status) == [301, 301])
        #expect(origin.requests(to: "/h/redirected/r.txt", atLeast: 0).isEmpty)
    }

    @Test(
        "RFC 9111 §3, §4.2.2; RFC 9110 §15.4: a 3xx handed back is stored and reused: 301, 302 and 307 with max-age, 308 heuristically"
    )
    func aRedirectHandedBackIsStoredAndReused() async throws {
        let transport = URLSessionTransport(followsRedirects: false)
        let redirects = [
            ("/status/301-maxage", 301), ("/status/308-lastmodified", 308), ("/status/302-maxage", 302),
            ("/status/307-maxage", 307),
        ]
        for (path, status) in redirects {
            let first = try await fetch(path, transport: transport)
            #expect(first.source == .downloaded && first.status == status, "\(path)")
            #expect(first.headers["Location"]?.hasSuffix("/h/redirected/r.txt") == true, "\(path)")
            #expect(first.url == origin.url(path), "\(path)")
            let second = try await fetch(path, transport: transport)
            #expect(second.source == .fresh && second.status == status, "\(path)")
            #expect(second.headers["Location"] == first.headers["Location"] && second.data == first.data, "\(path)")
            #expect(origin.requests(to: path, atLeast: 1).map(\.status) == [status], "\(path)")
        }
    }

    @Test("RFC 9111 §4.2.2: a 302 handed back without explicit freshness is not reused, even with Last-Modified")
    func aTemporaryRedirectWithoutFreshnessIsFetchedAgain() async throws {
        let transport = URLSessionTransport(followsRedirects: false)
        let first = try await fetch("/status/302-lastmodified", transport: transport)
        #expect(first.status == 302 && first.headers["Location"]?.hasSuffix("/h/redirected/r.txt") == true)
        let second = try await fetch("/status/302-lastmodified", transport: transport)
        #expect(second.source == .downloaded && second.status == 302)
        #expect(origin.requests(to: "/status/302-lastmodified", atLeast: 2).map(\.status) == [302, 302])
    }
}
