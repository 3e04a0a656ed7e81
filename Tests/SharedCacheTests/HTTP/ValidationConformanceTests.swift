import Foundation
import SharedCachePlatform
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// Conditional requests the cache answers itself, what a HEAD says about the stored GET, what
// an unsafe request invalidates, and the request directives that keep a response from use.
extension ConformanceTests {
    /// RFC 9110 §13.2.1: preconditions are ignored when the response would not be a 2xx; a
    /// stored 404 is what the request gets, whatever validators it sends.
    @Test("RFC 9110 §13.2.1: a stored 404 answers a conditional request as itself, never with a 304")
    func aStoredErrorIsNeverNotModified() async throws {
        let transport = ScriptedTransport([
            TransportResponse(
                status: 404,
                headers: [
                    "Cache-Control": "max-age=3600", "ETag": "\"gone\"",
                    "Last-Modified": "Thu, 01 Jan 2015 00:00:00 GMT",
                ],
                body: Data("missing".utf8))
        ])
        _ = try await fetch("/missing", transport: transport)
        let since = HTTPDate.format(Clock.nowMilliseconds())
        for condition in [("If-None-Match", "\"gone\""), ("If-None-Match", "*"), ("If-Modified-Since", since)] {
            let answer = try await fetch("/missing", [condition], transport: transport)
            #expect(answer.status == 404 && answer.source == .fresh, "\(condition)")
            #expect(answer.data == Data("missing".utf8), "\(condition)")
        }
    }

    @Test("RFC 9111 §4.3.4: a 304 whose Last-Modified names another version serves nothing; the GET is repeated")
    func aNotModifiedWithAnotherLastModifiedIsNotUsed() async throws {
        let (thursday, friday) = ("Thu, 01 Jan 2015 00:00:00 GMT", "Fri, 02 Jan 2015 00:00:00 GMT")
        func response(_ status: Int, modified: String, _ body: String) -> TransportResponse {
            let headers: HTTPHeaders = ["Cache-Control": "max-age=0", "Last-Modified": modified]
            return TransportResponse(status: status, headers: headers, body: Data(body.utf8))
        }
        let transport = ScriptedTransport([
            response(200, modified: thursday, "old body"), response(304, modified: friday, ""),
            response(200, modified: friday, "new body"),
        ])
        _ = try await fetch("/remodified", transport: transport)
        let second = try await fetch("/remodified", transport: transport)
        #expect(second.source == .downloaded && second.status == 200 && second.data == Data("new body".utf8))
        let stored = try await fetch("/remodified", options: FetchOptions(onlyFromCache: true), transport: transport)
        #expect(stored.data == Data("new body".utf8) && stored.headers["Last-Modified"] == friday)
    }

    @Test("RFC 9111 §4.3.4, RFC 9110 §8.8.2: a 304 whose Last-Modified names the same time in another format is used")
    func aNotModifiedWithTheSameTimeInAnotherFormatIsUsed() async throws {
        let headers: HTTPHeaders = ["Cache-Control": "max-age=0", "Last-Modified": "Thu, 01 Jan 2015 00:00:00 GMT"]
        let transport = ScriptedTransport([
            TransportResponse(status: 200, headers: headers, body: Data("same body".utf8)),
            TransportResponse(
                status: 304, headers: ["Last-Modified": "Thursday, 01-Jan-15 00:00:00 GMT"], body: Data()),
        ])
        _ = try await fetch("/sametime", transport: transport)
        let second = try await fetch("/sametime", transport: transport)
        #expect(second.source == .revalidated && second.data == Data("same body".utf8))
    }

    /// RFC 9111 §4.3.5: a HEAD's 200 whose validators are not the stored GET's is about another
    /// representation; the stored one is stale, and the next GET goes to the origin.
    @Test("RFC 9111 §4.3.5: a HEAD with another ETag makes the stored GET stale")
    func aHeadAboutAnotherRepresentationMakesTheStoredGetStale() async throws {
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "ETag": "\"old\""], body: Data("old".utf8)),
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "ETag": "\"new\""], body: Data()),
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "ETag": "\"new\""], body: Data("new".utf8)),
        ])
        _ = try await fetch("/changed", transport: transport)
        let head = try await fetch("/changed", [("Cache-Control", "no-cache")], method: "HEAD", transport: transport)
        #expect(head.status == 200 && head.headers["ETag"] == "\"new\"")
        let after = try await fetch("/changed", transport: transport)
        #expect(after.source == .downloaded && after.data == Data("new".utf8))
    }

    /// RFC 9111 §4.3.5: only the validators a HEAD's 200 carries are compared; one with the
    /// stored `Last-Modified` and no `ETag` is about the stored GET, and freshens it.
    @Test("RFC 9111 §4.3.5: a HEAD is compared by the validators it carries")
    func aHeadIsComparedByTheValidatorsItCarries() async throws {
        let modified = "Thu, 01 Jan 2015 00:00:00 GMT"
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=0", "ETag": "\"t\"", "Last-Modified": modified],
                body: Data("kept".utf8)),
            TransportResponse(
                status: 200,
                headers: ["Cache-Control": "max-age=3600", "Last-Modified": modified, "X-From-Head": "yes"],
                body: Data()),
        ])
        _ = try await fetch("/described", transport: transport)
        _ = try await fetch("/described", method: "HEAD", transport: transport)
        let after = try await fetch("/described", transport: transport)
        #expect(after.source == .fresh && after.data == Data("kept".utf8) && after.headers["X-From-Head"] == "yes")
    }

    /// RFC 9111 §4.4: a non-error answer to an unsafe method (one whose safety the cache does
    /// not know included) invalidates its URL and the `Location` and `Content-Location` it names
    /// on the same origin; another origin's URL, and an error, invalidate nothing.
    @Test("RFC 9111 §4.4: unsafe requests invalidate the URL, its Location and its Content-Location")
    func unsafeRequestsInvalidate() async throws {
        let elsewhere = URL(string: "http://elsewhere.invalid/loc")!
        let same = origin.url("/cl").absoluteString
        let transport = RoutedTransport { request in
            switch (request.httpMethod ?? "GET", request.url?.path ?? "") {
            case ("GET", let path):
                TransportResponse(status: 200, headers: ["Cache-Control": "max-age=3600"], body: Data(path.utf8))
            case ("POST", "/form"):
                TransportResponse(status: 201, headers: ["Location": "/loc", "Content-Location": same], body: Data())
            case ("POST", "/away"):
                TransportResponse(status: 303, headers: ["Location": elsewhere.absoluteString], body: Data())
            case (_, "/failed"):
                TransportResponse(status: 500, headers: ["Location": "/loc"], body: Data())
            default:
                TransportResponse(status: 200, headers: [:], body: Data())
            }
        }
        func get(_ url: URL) async throws -> FetchSource {
            try await cache.fetch(URLRequest(url: url), transport: transport).source
        }
        let stored = ["/form", "/loc", "/cl", "/failed", "/search", "/away"].map(origin.url) + [elsewhere]
        for url in stored { #expect(try await get(url) == .downloaded, "\(url)") }

        _ = try await fetch("/form", method: "POST", transport: transport)
        _ = try await fetch("/search", method: "M-SEARCH", transport: transport)
        _ = try await fetch("/away", method: "POST", transport: transport)
        _ = try await fetch("/failed", method: "PUT", transport: transport)
        for path in ["/form", "/loc", "/cl", "/search", "/away"] {
            #expect(try await get(origin.url(path)) == .downloaded, "\(path)")
        }
        #expect(try await get(elsewhere) == .fresh)
        #expect(try await get(origin.url("/failed")) == .fresh)
    }

    /// RFC 9111 §4.1: `Vary: *` matches no request. §5.4: a request's `Pragma: no-cache` is its
    /// `no-cache` when it has no `Cache-Control`, and is ignored when it has one. §5.2.1.5: a
    /// request's `no-store` stores nothing of its response.
    @Test("RFC 9111 §4.1, §5.4, §5.2.1.5: Vary: * never matches; Pragma: no-cache revalidates; no-store stores")
    func requestsAStoredResponseMayNotAnswer() async throws {
        let transport = RoutedTransport { request in
            let path = request.url?.path ?? ""
            var headers: HTTPHeaders = ["Cache-Control": "max-age=3600", "ETag": "\"p\""]
            if path == "/star" { headers.append("Vary", "*") }
            let status = request.value(forHTTPHeaderField: "If-None-Match") == "\"p\"" ? 304 : 200
            return TransportResponse(status: status, headers: headers, body: Data(status == 200 ? path.utf8 : "".utf8))
        }
        _ = try await fetch("/star", transport: transport)
        #expect(try await fetch("/star", transport: transport).source == .downloaded)

        _ = try await fetch("/pragma", transport: transport)
        #expect(try await fetch("/pragma", [("Pragma", "no-cache")], transport: transport).source == .revalidated)
        let both = [("Pragma", "no-cache"), ("Cache-Control", "max-stale")]
        #expect(try await fetch("/pragma", both, transport: transport).source == .fresh)

        let unstored = try await fetch("/unstored", [("Cache-Control", "no-store")], transport: transport)
        #expect(unstored.source == .downloaded && unstored.status == 200)
        #expect(try await fetch("/unstored", [("Cache-Control", "only-if-cached")], transport: transport).status == 504)
    }

    /// RFC 9111 §4.3.2: `If-Match` and `If-Unmodified-Since` are the origin's to evaluate; a
    /// fresh stored response does not answer a request that carries one, and offline
    /// (`only-if-cached`, RFC 9111 §5.2.1.7) such a request finds nothing usable.
    @Test("RFC 9111 §4.3.2: a request with If-Match or If-Unmodified-Since goes to the origin")
    func originPreconditionsGoToTheOrigin() async throws {
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "ETag": "\"a\""], body: Data("a".utf8)),
            TransportResponse(status: 412, headers: [:], body: Data()),
        ])
        _ = try await fetch("/preconditions", transport: transport)
        for condition in [("If-Match", "\"b\""), ("If-Unmodified-Since", "Thu, 01 Jan 2015 00:00:00 GMT")] {
            let answer = try await fetch("/preconditions", [condition], transport: transport)
            #expect(answer.status == 412 && answer.source == .downloaded, "\(condition)")
            let offline = try await fetch(
                "/preconditions", [condition, ("Cache-Control", "only-if-cached")], transport: transport)
            #expect(offline.status == 504, "\(condition)")
        }
        #expect(try await fetch("/preconditions", transport: transport).source == .fresh)
    }

    /// RFC 9111 §4.1: a field named by `Vary` that a request lacks matches only a request that
    /// lacks it too, never one that sends it with an empty value.
    @Test("RFC 9111 §4.1: an absent Vary field does not match an empty one")
    func anAbsentVaryFieldMatchesOnlyAnAbsentOne() async throws {
        let transport = ScriptedTransport([
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "Vary": "X-Variant"],
                body: Data("without".utf8)),
            TransportResponse(
                status: 200, headers: ["Cache-Control": "max-age=3600", "Vary": "X-Variant"],
                body: Data("empty".utf8)),
        ])
        _ = try await fetch("/vary-absent", transport: transport)
        let empty = try await fetch("/vary-absent", [("X-Variant", "")], transport: transport)
        #expect(empty.source == .downloaded && empty.data == Data("empty".utf8))
        let without = try await fetch("/vary-absent", transport: transport)
        #expect(without.source == .fresh && without.data == Data("without".utf8))
    }

    /// `nil`: the second response does not vary at all.
    @Test(
        "RFC 9111 §4, §4.1: a URL that varies by other fields, or stops varying, drops the variants the old ones selected, for good",
        arguments: ["X-Other", nil])
    func variantsOfFormerVaryFieldsNeverComeBack(secondVaryingBy second: String?) async throws {
        func response(varyingBy field: String?, _ body: String) -> TransportResponse {
            let vary = field.map { [("Vary", $0)] } ?? []
            let fields = HTTPHeaders([("Cache-Control", "max-age=3600")] + vary)
            return TransportResponse(status: 200, headers: fields, body: Data(body.utf8))
        }
        let transport = ScriptedTransport([
            response(varyingBy: "Accept-Language", "first"), response(varyingBy: second, "second"),
            response(varyingBy: "Accept-Language", "third"), response(varyingBy: "Accept-Language", "fourth"),
        ])
        let (path, refresh) = ("/vary-changes-\(second ?? "none")", FetchOptions(forceRefresh: true))
        _ = try await fetch(path, [("Accept-Language", "en")], transport: transport)
        _ = try await fetch(path, [("Accept-Language", "en")], options: refresh, transport: transport)
        _ = try await fetch(path, [("Accept-Language", "fr")], options: refresh, transport: transport)
        // "second" is the most recent response for this request, and no longer stored: never "first".
        let english = try await fetch(path, [("Accept-Language", "en")], transport: transport)
        #expect(english.source == .downloaded && english.data == Data("fourth".utf8) && transport.requests == 4)
    }

    @Test("RFC 9111 §4, §4.3.5: a HEAD that answers after a more recent response dropped its variant does not store it back")
    func aVariantDroppedWhileAHeadWasOutStaysDropped() async throws {
        func response(_ vary: String, _ fields: [(String, String)], _ body: String) -> TransportResponse {
            let headers = HTTPHeaders([("Vary", vary), ("ETag", "\"v\"")] + fields)
            return TransportResponse(status: 200, headers: headers, body: Data(body.utf8))
        }
        let other = try SharedCache(directory: directory("cache"))
        let newer = ScriptedTransport([response("X-Other", [("Cache-Control", "max-age=3600")], "second")])
        let english = [("Accept-Language", "en")]
        let newerRequest = request("/vary-head", english)
        let transport = ScriptedTransport([
            response("Accept-Language", [("Cache-Control", "max-age=0")], "first"),
            response("Accept-Language", [("Cache-Control", "max-age=3600"), ("X-New", "1")], ""),
            response("Accept-Language", [("Cache-Control", "max-age=3600")], "third"),
            response("Accept-Language", [("Cache-Control", "max-age=3600")], "fourth"),
        ]) { number in
            // While the HEAD is out, another process stores a response that varies by another field.
            guard number == 1 else { return }
            _ = try await other.fetch(newerRequest, options: FetchOptions(forceRefresh: true), transport: newer)
        }
        _ = try await fetch("/vary-head", english, transport: transport)
        _ = try await fetch("/vary-head", english, method: "HEAD", transport: transport)
        #expect(newer.requests == 1)
        let refresh = FetchOptions(forceRefresh: true)
        _ = try await fetch("/vary-head", [("Accept-Language", "fr")], options: refresh, transport: transport)
        let again = try await fetch("/vary-head", english, transport: transport)
        #expect(again.source == .downloaded && again.data == Data("fourth".utf8) && transport.requests == 4)
    }

    /// RFC 5861 §4: an error is a 500, 502, 503 or 504, or no answer; a 501 is the origin's
    /// answer, and no directive allows a stale response in its place (RFC 9111 §4.2.4).
    @Test("RFC 5861 §4: stale-if-error answers a 502, never a 501")
    func staleIfErrorCoversOnlyTheErrorsItNames() async throws {
        for (status, servesStale) in [(502, true), (501, false)] {
            let path = "/sie\(status)"
            let transport = ScriptedTransport([
                TransportResponse(
                    status: 200, headers: ["Cache-Control": "max-age=0, stale-if-error=3600", "ETag": "\"s\""],
                    body: Data("kept".utf8)),
                TransportResponse(status: status, headers: [:], body: Data("error".utf8)),
            ])
            _ = try await fetch(path, transport: transport)
            let answer = try await fetch(path, transport: transport)
            #expect(answer.status == (servesStale ? 200 : status), "\(status)")
            #expect(answer.source == (servesStale ? .offline : .downloaded), "\(status)")
        }
    }
}

/// Answers each request as `answer` says, whatever its URL or method.
final class RoutedTransport: HTTPTransport {
    private let answer: @Sendable (URLRequest) -> TransportResponse

    init(_ answer: @escaping @Sendable (URLRequest) -> TransportResponse) {
        self.answer = answer
    }

    func send(_ request: URLRequest) async throws -> TransportResponse { answer(request) }
}
