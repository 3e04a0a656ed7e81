public import Foundation
#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

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

/// What sends HTTP requests for ``SharedCache/fetch(_:options:transport:)``: URLSession by default, any
/// other client (or a test double) by conforming.
///
/// A transport must not cache by itself and must hand back a `304` as it arrived.
public protocol HTTPTransport: Sendable {
    /// Sends `request` as it is and returns the response, whatever its status; throws only when no response came (the network failed, the task was cancelled).
    func send(_ request: URLRequest) async throws -> TransportResponse
}

/// URLSession as a transport, with its own cache turned off: SharedCache is the cache.
public struct URLSessionTransport: HTTPTransport {
    /// The session requests go through.
    public let session: URLSession

    /// A transport over `session`: give one whose configuration has no `URLCache` and no SharedCache installed, or it would cache twice or loop.
    public init(session: URLSession = URLSessionTransport.uncachedSession) {
        self.session = session
    }

    /// An ephemeral session with no `URLCache`, so it neither answers from nor stores into a
    /// cache of its own, and passes `304` responses through.
    public static let uncachedSession: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: configuration)
    }()

    /// Sends `request`. A GET or HEAD to an `http` URL whose response URLSession fails to
    /// decode (libcurl, under URLSession on Linux, refuses a `Content-Encoding` or
    /// `Transfer-Encoding` it does not know) is sent again over a plain connection that keeps the
    /// body's coding as received (RFC 9110 §8.4). Over https the failure stands.
    public func send(_ request: URLRequest) async throws -> TransportResponse {
        let body: Data
        let response: URLResponse
        do {
            (body, response) = try await session.data(for: request)
        } catch let error as URLError
            where [.unknown, .cannotDecodeContentData, .cannotDecodeRawData].contains(error.code)
            && request.url?.scheme?.lowercased() == "http"
            && ["GET", "HEAD"].contains((request.httpMethod ?? "GET").uppercased())
        {
            guard let received = try? await IdentityConnection.send(request) else { throw error }
            return received
        }
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers = HTTPHeaders()
        for (name, value) in http.allHeaderFields {
            headers.append("\(name)", "\(value)")
        }
        return TransportResponse(status: http.statusCode, headers: headers, body: body, url: http.url)
    }
}
