import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// URLSession through a delegate, so `fetch` can show a progress line while a body arrives.
/// Like ``URLSessionTransport``, it keeps no cache of its own.
struct ProgressTransport: HTTPTransport {
    let progress: ProgressLine

    func send(_ request: URLRequest) async throws -> TransportResponse {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let receiver = BodyReceiver(progress: progress)
        let session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        return try await withCheckedThrowingContinuation { continuation in
            receiver.continuation = continuation
            session.dataTask(with: request).resume()
        }
    }
}

/// Collects one response. URLSession calls a delegate serially, from its delegate queue.
private final class BodyReceiver: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    var continuation: CheckedContinuation<TransportResponse, any Error>?
    private let progress: ProgressLine
    private var response: HTTPURLResponse?
    private var body = Data()

    init(progress: ProgressLine) {
        self.progress = progress
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        self.response = response as? HTTPURLResponse
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        body.append(data)
        let expected = response?.expectedContentLength ?? -1
        progress.update(received: body.count, expected: expected > 0 ? Int(expected) : nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        progress.finish()
        if let error {
            continuation?.resume(throwing: error)
        } else if let response {
            var headers = HTTPHeaders()
            for (name, value) in response.allHeaderFields { headers.append("\(name)", "\(value)") }
            continuation?.resume(
                returning: TransportResponse(status: response.statusCode, headers: headers, body: body, url: response.url))
        } else {
            continuation?.resume(throwing: URLError(.badServerResponse))
        }
        continuation = nil
    }
}

/// "received 12.0 MB of 50.0 MB (24%)" on standard error, redrawn in place at most ten times a
/// second, for bodies past 1 MB; erased when the body is complete.
final class ProgressLine: @unchecked Sendable {
    private let terminal: Terminal
    private var lastDrawn: UInt64 = 0
    private var shown = false
    static let threshold = 1 << 20

    init(terminal: Terminal) {
        self.terminal = terminal
    }

    func update(received: Int, expected: Int?) {
        guard received >= Self.threshold || (expected ?? 0) >= Self.threshold else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - lastDrawn >= 100_000_000 else { return }
        lastDrawn = now
        var line = "received \(formatBytes(UInt64(received)))"
        if let expected, expected > 0 {
            line += " of \(formatBytes(UInt64(expected))) (\(received * 100 / expected)%)"
        }
        FileHandle.standardError.write(Data("\r\(line)\u{1B}[K".utf8))
        shown = true
    }

    func finish() {
        if shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        shown = false
    }
}
