public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif
import SharedCachePlatform

/// A response as a transport delivers it.
public struct TransportResponse: Sendable {
    /// The final status code (a `304` as it arrived).
    public var status: Int
    /// The response fields, in order.
    public var headers: HTTPHeaders
    /// The body, as received (decoded of its transfer coding).
    public var body: Data
    /// The URL that answered, after any redirects.
    public var url: URL?

    /// A response, as a transport (or a test double) builds one.
    public init(status: Int, headers: HTTPHeaders, body: Data, url: URL? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
    }
}

/// What a transport hands on while a response arrives, to
/// ``HTTPTransport/send(_:streamingTo:)``.
public enum TransportEvent: Sendable {
    /// The status and fields, with an empty body. It may come again, before any of the body,
    /// when the transport sends the request a second time (as ``URLSessionTransport`` does for
    /// a coding URLSession cannot decode); the last one is the response.
    case head(TransportResponse)
    /// The next piece of the body.
    case body(Data)
}

/// What sends HTTP requests for ``SharedCache/fetch(_:options:transport:)``: URLSession by default, any
/// other client (or a test double) by conforming.
///
/// A transport must not cache by itself and must hand back a `304` as it arrived.
public protocol HTTPTransport: Sendable {
    /// Sends `request` as it is and returns the response, whatever its status; throws only when no response came (the network failed, the task was cancelled).
    func send(_ request: URLRequest) async throws -> TransportResponse

    /// Sends `request` and hands the response to `receive` as it arrives: its head, then its
    /// body in pieces, so that a large body never sits whole in memory. Returns the head (with
    /// an empty body) once the body has ended; throws when the transfer failed or was cut
    /// short, or when `receive` threw (the transfer is then stopped).
    ///
    /// The default implementation calls ``send(_:)`` and hands on the whole body at once:
    /// conform to it only if the transport can do better.
    func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
}

extension HTTPTransport {
    /// Calls ``send(_:)`` and hands the response on whole: its head, then its body in one piece.
    public func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
    {
        try await send(request).handedOn(to: receive)
    }
}

/// URLSession as a transport, with its own cache turned off: SharedCache is the cache.
public struct URLSessionTransport: HTTPTransport {
    /// The session requests go through.
    public let session: URLSession

    /// A transport over `session`: give one whose configuration has no `URLCache` and no SharedCache installed, or it would cache twice or loop.
    ///
    /// Bodies stream to the cache as they arrive through SharedCache's own sessions only (the
    /// default one, and those of ``init(followsRedirects:)``, have a delegate of its own); through
    /// any other, a body arrives whole.
    public init(session: URLSession = URLSessionTransport.uncachedSession) {
        self.session = session
    }

    /// A transport over a session like ``uncachedSession`` that follows redirects or hands them back.
    ///
    /// Not following, it returns a `3xx` as it arrived (status, fields with its `Location`, body),
    /// as a browser's `fetch` does with `redirect: "manual"`: the cache then sees the redirect
    /// itself and stores and reuses it as RFC 9111 allows (a `301` or `308` is heuristically
    /// cacheable, RFC 9110 §15.1), and the caller decides whether to go where it points.
    ///
    /// - Parameter followsRedirects: whether URLSession follows redirects to the response they
    ///   end at (as ``init(session:)`` does), or hands the `3xx` back.
    public init(followsRedirects: Bool) {
        self.init(session: followsRedirects ? Self.uncachedSession : Self.uncachedSessionKeepingRedirects)
    }

    /// An ephemeral session with no `URLCache`, so it neither answers from nor stores into a
    /// cache of its own, and passes `304` responses through; and with no cookie jar, so a request
    /// goes out with the fields it was given and no others.
    ///
    /// A jar would add the cookies of earlier responses to later requests behind the cache's
    /// back: `Vary: Cookie` would be matched against a request other than the one sent (RFC
    /// 9111 §4.1), and in a shared cache one user's cookies would go out on every other user's
    /// requests. To send cookies, set `Cookie` on the request.
    public static let uncachedSession = makeUncachedSession(followingRedirects: true)

    /// ``uncachedSession``, but handing each redirect back instead of following it.
    static let uncachedSessionKeepingRedirects = makeUncachedSession(followingRedirects: false)

    private static func makeUncachedSession(followingRedirects: Bool) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        let delegate = StreamingDelegate(followsRedirects: followingRedirects)
        return URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    /// Sends `request`. A GET or HEAD to an `http` URL whose response URLSession fails to
    /// decode (libcurl, under URLSession on Linux, refuses a `Content-Encoding` it does not
    /// know) is sent again over a plain connection that keeps the body's coding as received
    /// (RFC 9110 §8.4), and its response taken if it names such a coding; any other failure
    /// stands, as it does over https. A transport
    /// that does not follow redirects receives through ``send(_:streamingTo:)``, which keeps a
    /// `3xx`'s body.
    public func send(_ request: URLRequest) async throws -> TransportResponse {
        if let delegate = session.delegate as? StreamingDelegate, !delegate.followsRedirects {
            // swift-corelibs-foundation's `data(for:)` ends a declined redirect with an empty
            // body; the delegate's path hands that body on.
            let body = Locked(Data())
            var head = try await send(request) { event in
                if case .body(let piece) = event { body.withLock { $0.append(piece) } }
            }
            head.body = body.withLock { $0 }
            return head
        }
        let body: Data
        let response: URLResponse
        do {
            (body, response) = try await session.data(for: request)
        } catch let error as URLError where Self.resendsPlainly(request, after: error) {
            let body = Locked(Data())
            let plain = try await resendPlainly(request) { event in
                if case .body(let piece) = event { body.withLock { $0.append(piece) } }
            }
            guard var received = plain else { throw error }
            received.body = body.withLock { $0 }
            return received
        }
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return TransportResponse(http, body: body)
    }

    /// Sends `request`, handing the body on as URLSession receives it (through the default
    /// session; through another, as ``send(_:)`` does). A plain resend after a coding URLSession
    /// could not decode (see ``send(_:)``) hands on a second head, and its body as it arrives.
    public func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
    {
        guard let delegate = session.delegate as? StreamingDelegate else {
            return try await send(request).handedOn(to: receive)
        }
        do {
            return try await delegate.send(request, in: session, streamingTo: receive)
        } catch let failure as StreamingDelegate.UndecodedBody
            where Self.resendsPlainly(request, after: failure.error)
        {
            guard let received = try await resendPlainly(request, streamingTo: receive) else { throw failure.error }
            return received
        } catch let failure as StreamingDelegate.UndecodedBody {
            throw failure.error
        }
    }

    /// Sends `request` again over a plain connection, handing its response to `receive` if it
    /// names a coding URLSession could not decode; `nil` if none came that does (URLSession's
    /// failure then stands). The plain connection's limits (IdentityConnection) hold, with the
    /// session's resource timeout; a failure once such a response has started is the fetch's.
    private func resendPlainly(
        _ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void
    ) async throws -> TransportResponse? {
        try await IdentityConnection.send(
            request, resourceTimeout: session.configuration.timeoutIntervalForResource, taking: Self.isUndecodable,
            streamingTo: receive)
    }

    /// Whether a response the plain connection received is one URLSession refused for its
    /// coding: it names a content coding libcurl does not decode. libcurl reports its other
    /// refusals (a NUL in a field, a length that is not one, a coding's bytes that do not
    /// decode) with the same code; those stand, whatever another reading would make of them.
    private static func isUndecodable(_ response: TransportResponse) -> Bool {
        guard let codings = response.headers["Content-Encoding"] else { return false }
        return codings.split(separator: ",").contains { !decodedCodings.contains($0.trimmingSpaces().lowercased()) }
    }

    /// The content codings libcurl decodes (and `identity`, which is none).
    private static let decodedCodings: Set<String> = ["gzip", "x-gzip", "deflate", "br", "zstd", "identity"]

    /// Whether a failure may be libcurl refusing a coding it does not know, on a request that a
    /// plain connection can send again.
    private static func resendsPlainly(_ request: URLRequest, after error: URLError) -> Bool {
        [.unknown, .cannotDecodeContentData, .cannotDecodeRawData].contains(error.code)
            && request.url?.scheme?.lowercased() == "http"
            && ["GET", "HEAD"].contains((request.httpMethod ?? "GET").uppercased())
    }
}

extension TransportResponse {
    /// A response as URLSession reports it. Foundation keeps fields in a dictionary and joins
    /// repeated ones with ", ": `Set-Cookie` fields, which cannot be joined (RFC 9110 §5.3), are
    /// taken apart again.
    init(_ http: HTTPURLResponse, body: Data) {
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            let (name, value) = ("\(name)", "\(value)")
            if name.caseInsensitiveEquals("Set-Cookie") {
                for cookie in Self.setCookieFields(joined: value) { headers.append(name, cookie) }
            } else {
                headers.append(name, value)
            }
        }
        self.init(status: http.statusCode, headers: headers, body: body, url: http.url)
    }

    /// `Set-Cookie` fields joined with commas, apart again, as well as a join allows: a comma
    /// ends a field where a cookie's name and `=` follow it. A server sends no comma in a
    /// cookie's value (RFC 6265 §4.1.1), and the comma of an `Expires` date is followed by the
    /// day of the month; a value that holds `,name=` anyway is cut there.
    static func setCookieFields(joined: String) -> [String] {
        let bytes = Array(joined.utf8)
        var fields: [String] = []
        var start = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: ",") && startsCookie(bytes, at: index + 1) {
            fields.append(String(decoding: bytes[start..<index], as: UTF8.self).trimmingSpaces())
            start = index + 1
        }
        fields.append(String(decoding: bytes[start...], as: UTF8.self).trimmingSpaces())
        return fields.filter { !$0.isEmpty }
    }

    /// Whether a cookie's name (a token, RFC 9110 §5.6.2) and `=` start at `position`, after
    /// spaces.
    private static func startsCookie(_ bytes: [UInt8], at position: Int) -> Bool {
        var index = position
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
            index += 1
        }
        let name = index
        while index < bytes.count, FieldList.isTokenCharacter(bytes[index]) { index += 1 }
        return index > name && index < bytes.count && bytes[index] == UInt8(ascii: "=")
    }

    /// Hands a response received whole on as its head and one piece of body; returns the head.
    func handedOn(to receive: (TransportEvent) throws -> Void) throws -> TransportResponse {
        var head = self
        head.body = Data()
        try receive(.head(head))
        try receive(.body(body))
        return head
    }
}
