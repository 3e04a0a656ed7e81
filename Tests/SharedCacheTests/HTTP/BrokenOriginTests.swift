import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import SharedCache

// Linux only: what libcurl, under URLSession there, refuses and the plain connection reads
// again; CFNetwork on Darwin is another reading, which could not be checked here.
#if os(Linux)
/// Responses a broken or hostile origin sends, which libcurl refuses (on Linux, under
/// URLSession) and a laxer reading would make something of. Each follows a good response stored
/// with `stale-if-error`: the refusal is an error, so the good response is served stale and
/// stays stored. (Every one was sent again over the plain connection, which took it: it then
/// replaced the good response, for every process.)
@Suite("HTTP: what a broken origin sends replaces nothing stored", .enabled(if: RawOrigin.isAvailable, "needs python3"))
struct BrokenOriginTests {
    static let good =
        "HTTP/1.1 200 OK\r\nETag: \"good\"\r\nCache-Control: max-age=0, stale-if-error=600\r\nContent-Length: 4\r\n\r\nGOOD"

    /// What follows the good response, and why libcurl refuses it.
    enum Broken: String, CaseIterable, CustomTestStringConvertible {
        case nulInAField =
            "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nX-A: a\u{0}b\r\nContent-Length: 4\r\n\r\nJUNK"
        case unknownTransferCoding =
            "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nTransfer-Encoding: x-foo\r\n\r\nJUNKJUNKJUNK"
        case lengthThatIsNoNumber =
            "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nContent-Length: 4x\r\n\r\nJUNKJUNKJUNK"
        case twoLengths =
            "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nContent-Length: 4\r\nContent-Length: 12\r\n\r\nJUNKJUNKJUNK"
        case aFieldOverLibcurlsLimit
        case gzipThatIsNot =
            "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nJUNK"

        var testDescription: String {
            switch self {
            case .nulInAField: "a NUL in a field (RFC 9110 §5.5)"
            case .unknownTransferCoding: "a transfer coding nothing here undoes (RFC 9112 §6.1)"
            case .lengthThatIsNoNumber: "a Content-Length that is not a number (RFC 9112 §6.3)"
            case .twoLengths: "two different Content-Lengths (RFC 9110 §8.6)"
            case .gzipThatIsNot: "gzip that does not decode (RFC 9110 §8.4.1.3)"
            case .aFieldOverLibcurlsLimit: "a field over libcurl's 100 KB (RFC 9112 §2.3)"
            }
        }

        var response: String {
            guard self == .aFieldOverLibcurlsLimit else { return rawValue }
            return "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nX-Long: "
                + String(repeating: "a", count: 110 << 10) + "\r\nContent-Length: 4\r\n\r\nJUNK"
        }
    }

    @Test(arguments: Broken.allCases)
    func aBrokenResponseIsAnErrorAndTheStoredOneStays(_ broken: Broken) async throws {
        let origin = try RawOrigin([Self.good, broken.response])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try await cache.fetch(URLRequest(url: origin.url("/r"))).data == Data("GOOD".utf8))
        let second = try await cache.fetch(URLRequest(url: origin.url("/r")))
        #expect(second.data == Data("GOOD".utf8) && second.source == .offline)
        let other = try SharedCache(directory: directory("cache"))
        #expect(try await other.fetch(URLRequest(url: origin.url("/r"))).data == Data("GOOD".utf8))
    }

    /// RFC 9110 §15.4.5: a 304 to a request without validators answers nothing: the fetch fails
    /// and nothing is stored (it was passed on, an empty body with exit status 0).
    @Test func aNotModifiedToAnUnconditionalRequestIsAFailure() async throws {
        let origin = try RawOrigin(["HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\nCache-Control: max-age=600\r\n\r\n"])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        await #expect(throws: SharedCacheError.self) { try await cache.fetch(URLRequest(url: origin.url("/n"))) }
        #expect(try cache.statistics().entryCount == 0)
    }

    /// A header section without end (libcurl refuses it past 300 KB, and the plain connection
    /// reads it again): the plain connection stops reading at 256 KiB and the fetch fails, where
    /// it read on into memory for as long as the server sent.
    @Test func aHeaderSectionWithoutEndIsRefused() async throws {
        let origin = try RawOrigin(["HTTP/1.1 200 OK\r\nContent-Encoding: x-unknown\r\nX-Endless: "])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        await #expect(throws: SharedCacheError.self) { try await cache.fetch(URLRequest(url: origin.url("/e"))) }
        let sent = [origin.bytesSent(), origin.bytesSent()]  // to libcurl, then to the plain connection
        // Both ends' socket buffers hold some of what was sent, megabytes at most.
        #expect(sent.allSatisfy { ($0 ?? .max) < 64 << 20 }, "\(sent)")
    }

    /// An unknown content coding is what the plain connection is for: it is stored as received.
    @Test func anUnknownContentCodingIsStillTakenAsReceived() async throws {
        let origin = try RawOrigin([
            "HTTP/1.1 200 OK\r\nETag: \"x\"\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\nContent-Length: 6\r\n\r\nopaque"
        ])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        #expect(try await cache.fetch(URLRequest(url: origin.url("/u"))).data == Data("opaque".utf8))
        let hit = try await cache.fetch(URLRequest(url: origin.url("/u")))
        #expect(
            hit.source == .fresh && hit.data == Data("opaque".utf8) && hit.headers["Content-Encoding"] == "x-unknown")
    }
}
#endif
