import Foundation
import SharedCache
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Answers each request with the next of `responses`, and the last one once they run out.
final class ScriptedTransport: HTTPTransport {
    private let responses: [TransportResponse]
    private let sent = Locked(0)

    init(_ responses: [TransportResponse]) {
        self.responses = responses
    }

    /// How many requests were sent so far.
    var requests: Int { sent.withLock { $0 } }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        let index = sent.withLock { sent in
            defer { sent += 1 }
            return min(sent, responses.count - 1)
        }
        return responses[index]
    }
}
