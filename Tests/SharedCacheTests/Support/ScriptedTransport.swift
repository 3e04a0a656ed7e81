import Foundation
import SharedCache
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Answers each request with the next of `responses`, and the last one once they run out;
/// `beforeAnswering` runs first, given the request's number (from 0), for a test to change
/// something while the request is out.
final class ScriptedTransport: HTTPTransport {
    private let responses: [TransportResponse]
    private let beforeAnswering: @Sendable (Int) async throws -> Void
    private let sent = Locked(0)

    init(_ responses: [TransportResponse], beforeAnswering: @escaping @Sendable (Int) async throws -> Void = { _ in }) {
        self.responses = responses
        self.beforeAnswering = beforeAnswering
    }

    /// How many requests were sent so far.
    var requests: Int { sent.withLock { $0 } }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        let number = sent.withLock { sent in
            defer { sent += 1 }
            return sent
        }
        try await beforeAnswering(number)
        return responses[min(number, responses.count - 1)]
    }
}

/// Streams a 200's head and the first KiB of `body`, runs `meanwhile`, then sends the rest: a
/// body over 1 MiB is stored only once it has all arrived, after the decision to store it.
final class InterruptedTransport: HTTPTransport {
    private let response: TransportResponse
    private let meanwhile: @Sendable () throws -> Void

    init(headers: HTTPHeaders, body: Data, meanwhile: @escaping @Sendable () throws -> Void) {
        response = TransportResponse(status: 200, headers: headers, body: body)
        self.meanwhile = meanwhile
    }

    func send(_ request: URLRequest) async throws -> TransportResponse { response }

    func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
    {
        var head = response
        head.body = Data()
        try receive(.head(head))
        try receive(.body(response.body.prefix(1024)))
        try meanwhile()
        try receive(.body(response.body.dropFirst(1024)))
        return head
    }
}
