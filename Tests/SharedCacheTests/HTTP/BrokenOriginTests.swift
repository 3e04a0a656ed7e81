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

    /// A response in a coding libcurl does not know: URLSession refuses it, and the plain
    /// connection is sent the response that follows it.
    static let undecodable = "HTTP/1.1 200 OK\r\nContent-Encoding: x-unknown\r\nContent-Length: 4\r\n\r\nJUNK"

    /// A body without end, in a coding only the plain connection takes.
    enum EndlessBody: CaseIterable, CustomTestStringConvertible {
        case untilTheClose, inChunks, announced

        var testDescription: String {
            switch self {
            case .untilTheClose: "with no length, read until the close (RFC 9112 §6.3)"
            case .inChunks: "in chunks (RFC 9112 §7.1)"
            case .announced: "with a Content-Length past the limit (RFC 9110 §8.6)"
            }
        }

        var response: String {
            let head =
                "HTTP/1.1 200 OK\r\nETag: \"new\"\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\n"
            switch self {
            case .untilTheClose: return head + "\r\n" + RawOrigin.endlessBody
            case .inChunks: return head + "Transfer-Encoding: chunked\r\n\r\n" + RawOrigin.endlessChunks
            case .announced: return head + "Content-Length: \(1 << 40)\r\n\r\n" + RawOrigin.endlessBody
            }
        }
    }

    /// The plain connection read a body into memory for as long as the server sent it: it stops
    /// at the cache's size limit (no longer body could be kept), or before reading any of one
    /// announced longer. The fetch fails for the length, a stored response with
    /// `stale-if-error` answers instead and stays, and the server sent little past the limit.
    @Test(arguments: EndlessBody.allCases)
    func aBodyPastTheSizeLimitIsNotRead(_ endless: EndlessBody) async throws {
        let origin = try RawOrigin([Self.good, endless.response])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: 1 << 20))
        #expect(try await cache.fetch(URLRequest(url: origin.url("/r"))).data == Data("GOOD".utf8))
        let stale = try await cache.fetch(URLRequest(url: origin.url("/r")))
        #expect(stale.data == Data("GOOD".utf8) && stale.source == .offline)
        do {
            let result = try await cache.fetch(URLRequest(url: origin.url("/new")))
            Issue.record("a body without end was taken: \(result.data.count) bytes, \(result.source)")
        } catch {
            #expect(error.code == .network)
            #expect((error.underlyingError as? URLError)?.code == .dataLengthExceedsMaximum)
        }
        let other = try SharedCache(directory: directory("cache"))
        #expect(try await other.fetch(URLRequest(url: origin.url("/r"))).data == Data("GOOD".utf8))
        // Each refused response went to libcurl, then to the plain connection; the socket
        // buffers at both ends hold some of what was sent, megabytes at most.
        let sent = (0..<7).map { _ in origin.bytesSent() }
        #expect(sent.allSatisfy { ($0 ?? .max) < 64 << 20 }, "\(sent)")
    }

    /// The advice for a body past the size limit, followed: with `size-limit` set above the
    /// body's length (`sharedcache config size-limit`), a process that opens the cache then
    /// fetches and stores it.
    @Test func aBodyPastTheSizeLimitIsFetchedOnceTheLimitIsSetAboveIt() async throws {
        let body = String(repeating: "b", count: 2 << 20)
        let origin = try RawOrigin([
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        ])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"), configuration: Configuration(sizeLimit: 1 << 20))
        let refused = await #expect(throws: SharedCacheError.self) {
            try await cache.fetch(URLRequest(url: origin.url("/large")))
        }
        #expect((refused?.underlyingError as? URLError)?.code == .dataLengthExceedsMaximum)

        let set = try await Tool.admin.run(["--dir", directory("cache"), "config", "size-limit", "4M"])
        #expect(set.status == 0, "\(set.errors)")
        let reopened = try SharedCache(directory: directory("cache"))
        let fetched = try await reopened.fetch(URLRequest(url: origin.url("/large")))
        #expect(fetched.data == Data(body.utf8))
        #expect(try reopened.statistics().entryCount == 1)
    }

    /// Interim heads and the final one.
    enum EndlessHeads: CaseIterable, CustomTestStringConvertible {
        case anInterimHeadThenAFinalOneWithoutEnd, interimHeadsWithoutEnd

        var testDescription: String {
            switch self {
            case .anInterimHeadThenAFinalOneWithoutEnd: "a 100 Continue, then a final head without end"
            case .interimHeadsWithoutEnd: "100 Continue heads without end"
            }
        }

        var response: String {
            switch self {
            case .anInterimHeadThenAFinalOneWithoutEnd:
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Encoding: x-unknown\r\nX-Endless: "
            case .interimHeadsWithoutEnd:
                "HTTP/1.1 100 Continue\r\n\r\n" + RawOrigin.endlessInterimHeads
            }
        }
    }

    /// RFC 9110 §15.2, §5.4: a client reads any number of 1xx heads before the final one, and
    /// the header section's limit is on all of them together: per head, a server sending 1xx
    /// heads without end (or one more after the limit) was read for as long as it sent.
    @Test(arguments: EndlessHeads.allCases)
    func theHeaderSectionLimitCountsInterimHeads(_ heads: EndlessHeads) async throws {
        let origin = try RawOrigin([Self.undecodable, heads.response])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        do {
            let result = try await cache.fetch(URLRequest(url: origin.url("/h")))
            Issue.record("a head without end was taken: \(result.status)")
        } catch {
            #expect(error.code == .network)
        }
        let sent = [origin.bytesSent(), origin.bytesSent()]  // to libcurl, then to the plain connection
        #expect(sent.allSatisfy { ($0 ?? .max) < 64 << 20 }, "\(sent)")
    }

    /// A head that trickles in, a byte every 50 ms: each wait for bytes is short, but the head
    /// must come whole within the request's timeout, as a server answering at all sends it.
    /// It was read for as long as it came (here 15 s, then taken).
    @Test func aHeadThatTricklesInIsGivenUpAtTheRequestTimeout() async throws {
        let origin = try RawOrigin([
            Self.undecodable,
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\nX-Slow: "
                + RawOrigin.trickle,
        ])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        var request = URLRequest(url: origin.url("/t"))
        request.timeoutInterval = 2
        do {
            let result = try await cache.fetch(request)
            Issue.record("a head that took longer than the request's timeout was taken: \(result.source)")
        } catch {
            #expect(error.code == .network)
        }
        #expect(try cache.statistics().entryCount == 0)
    }

    /// A body that trickles in is bounded in time by the session's resource timeout, as
    /// URLSession bounds its own transfers (`timeoutIntervalForResource`); it was read for as
    /// long as it came.
    @Test func aBodyThatTricklesInEndsAtTheResourceTimeout() async throws {
        let origin = try RawOrigin([
            Self.undecodable,
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\n\r\n" + RawOrigin.trickle,
        ])
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.timeoutIntervalForResource = 2
        let transport = URLSessionTransport(session: URLSession(configuration: configuration))
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        do {
            let result = try await cache.fetch(URLRequest(url: origin.url("/b")), transport: transport)
            Issue.record("a body that took longer than the resource timeout was taken: \(result.data.count) bytes")
        } catch {
            #expect(error.code == .network)
            #expect((error.underlyingError as? URLError)?.code == .timedOut)
        }
        #expect(try cache.statistics().entryCount == 0)
    }

    /// Cancelling the fetch's task stops the plain connection, as it stops URLSession's task:
    /// it waited for the server until the request's timeout (here 600 s, so that the bound on
    /// the cancelled fetch's end leaves a loaded run minutes: the fetch's start alone once took
    /// two under the thread sanitizer).
    @Test(.hangLimit) func cancellingTheFetchStopsThePlainConnection() async throws {
        let origin = try RawOrigin([
            Self.undecodable, "HTTP/1.1 200 OK\r\nContent-Encoding: x-unknown\r\n\r\nsome" + RawOrigin.hold,
        ])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        var request = URLRequest(url: origin.url("/c"))
        request.timeoutInterval = 600
        let fetch = Task { try await cache.fetch(request) }
        // libcurl's connection ends, then the plain connection has the whole response but its end.
        #expect(await offThePool { origin.bytesSent() } != nil)
        #expect(await offThePool { origin.held() })
        let cancelled = ContinuousClock.now
        fetch.cancel()
        do {
            let result = try await fetch.value
            Issue.record("a cancelled fetch answered: \(result.source)")
        } catch let error as SharedCacheError {
            #expect(error.code == .cancelled)
        }
        #expect(ContinuousClock.now - cancelled < .seconds(300))
    }

    /// A response that ends by its framing (a length, a last chunk) is read to there: a server
    /// that keeps the connection open after it, `Connection: close` notwithstanding, is not
    /// waited for. It was read on to a close that never came, and failed at the timeout.
    @Test(arguments: ["Content-Length: 6\r\n\r\nopaque", "Transfer-Encoding: chunked\r\n\r\n6\r\nopaque\r\n0\r\n\r\n"])
    func aResponseEndsWithItsFramingOnAConnectionLeftOpen(_ framing: String) async throws {
        let origin = try RawOrigin([
            Self.undecodable,
            "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Encoding: x-unknown\r\n" + framing
                + RawOrigin.hold,
        ])
        let directory = try TemporaryDirectory()
        let cache = try SharedCache(directory: directory("cache"))
        var request = URLRequest(url: origin.url("/o"))
        request.timeoutInterval = 120  // read on to the close, it failed at this timeout
        let result = try await cache.fetch(request)
        #expect(result.data == Data("opaque".utf8) && result.headers["Content-Encoding"] == "x-unknown")
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
