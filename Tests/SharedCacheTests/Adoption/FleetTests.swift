import Foundation
import SharedCacheCLI
import SharedCacheTestSupport
import Testing

@testable import SharedCache

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The fleet setup of the DocC article "Beyond one machine": nginx `proxy_cache` in front of
/// the origin, each host's SharedCache revalidating against it. Runs the article's own nginx
/// block, with the addresses and the cache path replaced.
@Suite("Adoption: a fleet behind nginx proxy_cache")
struct FleetTests {
    static let article = "Sources/SharedCache/SharedCache.docc/AFleetOfHosts.md"

    /// The article's nginx block, split into what goes in the `http` block and the
    /// `location / { … }` that goes in the server block.
    static func tierConfiguration(origin: String, cachePath: String) throws -> (http: String, location: String) {
        let text = try String(
            contentsOf: DocumentationSnippetTests.root.appendingPathComponent(article), encoding: .utf8)
        let block = try #require(text.components(separatedBy: "```nginx\n").dropFirst().first?
            .components(separatedBy: "\n```").first)
        let replaced = block.replacingOccurrences(of: "http://origin.example.com", with: origin)
            .replacingOccurrences(of: "/var/cache/nginx/shared", with: cachePath)
        let http = replaced.components(separatedBy: "\n").filter { $0.hasPrefix("proxy_cache_path") }
            .joined(separator: "\n")
        let start = try #require(replaced.range(of: "    location / {"))
        var depth = 0
        var end = start.lowerBound
        for index in replaced[start.lowerBound...].indices {
            if replaced[index] == "{" { depth += 1 }
            if replaced[index] == "}" {
                depth -= 1
                if depth == 0 {
                    end = replaced.index(after: index)
                    break
                }
            }
        }
        #expect(!http.isEmpty)
        return (http, String(replaced[start.lowerBound..<end]))
    }

    @Test func twoHostsFetchingThroughTheTierMakeOneOriginRequest() async throws {
        let origin = try Origin()
        try origin.write("/fresh/toolchain.tar.gz", Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 17) }))
        let directory = try TemporaryDirectory()
        let (http, location) = try Self.tierConfiguration(
            origin: origin.url("").absoluteString, cachePath: directory("tier-cache"))
        let tier = try #require(
            try LoopbackOrigin(root: directory("tier"), http: http, locations: location, populate: { _ in }))

        // Two hosts: two cache directories, each its own SharedCache.
        let hostA = try SharedCache(directory: directory("host-a"))
        let hostB = try SharedCache(directory: directory("host-b"))
        let artifact = URL(string: tier.url + "/fresh/toolchain.tar.gz")!
        let a = try await hostA.fetch(URLRequest(url: artifact))
        let b = try await hostB.fetch(URLRequest(url: artifact))
        #expect(a.source == .downloaded && b.source == .downloaded)
        #expect(a.data == b.data && a.data.count == 200_000)
        #expect(a.headers["X-Cache-Status"] == "MISS" && b.headers["X-Cache-Status"] == "HIT")
        // Again on each host: fresh in its own cache, no request leaves it.
        #expect(try await hostA.fetch(URLRequest(url: artifact)).source == .fresh)
        #expect(try await hostB.fetch(URLRequest(url: artifact)).source == .fresh)
        #expect(origin.requests(to: "/fresh/toolchain.tar.gz", atLeast: 1).count == 1)

        // A reload on a host is a conditional request the tier answers 304 from its own copy.
        var reload = URLRequest(url: artifact)
        reload.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        let revalidated = try await hostB.fetch(reload)
        #expect(revalidated.source == .revalidated && revalidated.data == a.data)
        #expect(origin.requests(to: "/fresh/toolchain.tar.gz", atLeast: 2, timeout: 0.5).count == 1)
    }
}
