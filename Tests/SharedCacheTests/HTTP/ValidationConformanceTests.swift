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
}
