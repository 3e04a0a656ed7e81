import Foundation
import SharedCacheTestSupport
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Parts of one representation combine (RFC 9111 §3.4), but never into a body larger than the
/// cache's size limit (a fetch stores no body larger than that, `sharedcached(8)`), nor parts
/// that cannot be of one representation.
@Suite("HTTP: what stored parts combine into")
struct PartSizeLimitTests {
    let directory: TemporaryDirectory

    init() throws {
        directory = try TemporaryDirectory()
    }

    /// Two 600-byte parts of a 2000-byte representation, under a 1000-byte size limit: each is
    /// stored, but together they would be 1200 bytes, so the second replaces the first.
    @Test func partsThatWouldCombinePastTheSizeLimitReplaceEachOther() async throws {
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: 1000))
        let url = URL(string: "http://example.invalid/parts.bin")!
        let whole = Data((0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let transport = ScriptedTransport([
            Self.part(0..<600, of: whole, url: url), Self.part(600..<1200, of: whole, url: url),
            Self.part(0..<600, of: whole, url: url),
        ])
        func fetch(_ range: String) async throws -> FetchResult {
            try await Self.fetch(range, of: url, from: cache, through: transport)
        }
        for range in ["bytes=0-599", "bytes=600-1199"] {
            let stored = try await fetch(range)
            #expect(stored.status == 206 && stored.cacheStatus?.contains("; stored;") == true, "\(range)")
        }
        let parts = try cache.entry(forKey: PartialContent.key(SharedCache.cacheKey(for: url)))
        #expect(parts?.size == 600, "the parts stored are \(parts?.size ?? 0) bytes, over the 1000-byte limit")
        let held = try await fetch("bytes=600-1199")
        #expect(held.source == .fresh && held.data == whole[600..<1200])
        let replaced = try await fetch("bytes=0-599")
        #expect(replaced.source == .downloaded && replaced.data == whole[0..<600])
        #expect(transport.requests == 3)
    }

    /// A broken origin: a second part with the stored part's strong `ETag` but another complete
    /// length. One representation has one length (RFC 9110 §14.4), so the two are not bytes of
    /// one representation (RFC 9111 §3.4 combines only those): the new part replaces the old,
    /// and a range the old one held is asked for again rather than served from a mix of both.
    @Test func partsWithOneETagButTwoLengthsAreNeverCombined() async throws {
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: 0))
        let url = URL(string: "http://example.invalid/two-lengths.bin")!
        let long = Data((0..<2000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let short = Data((0..<1500).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        let transport = ScriptedTransport([
            Self.part(0..<600, of: long, url: url), Self.part(600..<1200, of: short, url: url),
            Self.part(0..<600, of: short, url: url),
        ])
        func fetch(_ range: String) async throws -> FetchResult {
            try await Self.fetch(range, of: url, from: cache, through: transport)
        }
        _ = try await fetch("bytes=0-599")
        let second = try await fetch("bytes=600-1199")
        #expect(second.status == 206 && second.data == short[600..<1200])
        let spanning = try await fetch("bytes=0-599")
        #expect(spanning.source == .downloaded && spanning.data == short[0..<600])
        #expect(transport.requests == 3)
    }

    /// A 206 of `range` of `whole`, with a strong `ETag` and a lifetime of an hour.
    static func part(_ range: Range<Int>, of whole: Data, url: URL) -> TransportResponse {
        TransportResponse(
            status: 206,
            headers: [
                "ETag": "\"p\"", "Cache-Control": "max-age=3600", "Content-Length": "\(range.count)",
                "Content-Range": "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(whole.count)",
            ], body: whole[range], url: url)
    }

    /// A fetch of `url` with `Range: range`.
    static func fetch(_ range: String, of url: URL, from cache: SharedCache, through transport: ScriptedTransport)
        async throws -> FetchResult
    {
        var request = URLRequest(url: url)
        request.setValue(range, forHTTPHeaderField: "Range")
        return try await cache.fetch(request, transport: transport)
    }
}
