import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCachePlatform

/// The delegate of ``URLSessionTransport/uncachedSession``: hands each response on as URLSession
/// receives it, for ``URLSessionTransport/send(_:streamingTo:)``. (A task delegate would serve
/// any session, but swift-corelibs-foundation never calls one.)
///
/// It also decides, for every task of its session (those of `data(for:)` too), whether a
/// redirect is followed: declined, URLSession completes the task with the `3xx` itself.
///
/// URLSession calls it on its delegate queue, one call at a time per task; its table of
/// transfers is in a lock. Tasks it did not start (`data(for:)` on the same session) are not
/// in the table and are left alone.
final class StreamingDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    /// URLSession could not decode the body's coding before any of it was handed on: the
    /// transport may send the request again another way.
    struct UndecodedBody: Error {
        var error: URLError
    }

    private struct Transfer {
        var receive: @Sendable (TransportEvent) throws -> Void
        var continuation: CheckedContinuation<TransportResponse, any Error>
        var head: TransportResponse?
        var bodyStarted = false
        /// What `receive` threw, which stopped the transfer: the error the caller gets.
        var failure: (any Error)?
    }

    private let transfers = Locked([Int: Transfer]())
    /// Whether the session's redirects are followed.
    let followsRedirects: Bool

    init(followsRedirects: Bool) {
        self.followsRedirects = followsRedirects
    }

    func send(
        _ request: URLRequest, in session: URLSession,
        streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void
    ) async throws -> TransportResponse {
        let task = session.dataTask(with: request)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfers.withLock { $0[task.taskIdentifier] = Transfer(receive: receive, continuation: continuation) }
                // Cancelled before the transfer was in the table, the handler below found
                // nothing to end: end it here, and send nothing.
                guard !Task.isCancelled else { return complete(task, error: URLError(.cancelled)) }
                task.resume()
            }
        } onCancel: {
            // The handler runs under the Swift task's own lock, and `cancel()` waits for the
            // session's work queue, whose threads may be waiting for that lock to resume a task
            // (swift-corelibs-foundation #5412): it is called from elsewhere.
            DispatchQueue.global().async { task.cancel() }
            // The caller's cancellation does not wait for URLSession to report the task's end
            // (swift-corelibs-foundation reports none for a task whose protocol has gone): it
            // ends on the delegate queue (serial), after the callbacks already queued.
            session.delegateQueue.addOperation { self.complete(task, error: URLError(.cancelled)) }
        }
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
        guard let receive = transfers.withLock({ $0[dataTask.taskIdentifier]?.receive }) else {
            return completionHandler(.allow)
        }
        guard let http = response as? HTTPURLResponse else {
            stop(dataTask, because: URLError(.badServerResponse))
            return completionHandler(.cancel)
        }
        let head = TransportResponse(http, body: Data())
        do {
            try receive(.head(head))
            guard head.status != 304 else {
                // A 304 ends with its fields (RFC 9110 §15.4.5): the caller goes on now, not
                // after one more trip through the delegate queue for the task's completion
                // (~20 µs of a revalidation on loopback).
                transfers.withLock { $0.removeValue(forKey: dataTask.taskIdentifier) }?.continuation
                    .resume(returning: head)
                return completionHandler(.allow)
            }
            transfers.withLock { $0[dataTask.taskIdentifier]?.head = head }
            completionHandler(.allow)
        } catch {
            stop(dataTask, because: error)
            completionHandler(.cancel)
        }
    }

    /// Follows the redirect, or declines it so that the task ends with the `3xx` as received
    /// (what `nil` means to URLSession, on Darwin and in swift-corelibs-foundation alike).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(followsRedirects ? request : nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let receive = transfers.withLock { transfers -> (@Sendable (TransportEvent) throws -> Void)? in
            guard transfers[dataTask.taskIdentifier]?.failure == nil else { return nil }
            transfers[dataTask.taskIdentifier]?.bodyStarted = true
            return transfers[dataTask.taskIdentifier]?.receive
        }
        guard let receive else { return }
        do {
            try receive(.body(data))
        } catch {
            stop(dataTask, because: error)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        complete(task, error: error)
    }

    /// Ends `task`'s transfer, unless it has ended: URLSession's report of a task's end and the
    /// cancellations decided in ``send(_:in:streamingTo:)`` meet here, and the first wins.
    private func complete(_ task: URLSessionTask, error: (any Error)?) {
        guard let transfer = transfers.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let failure = transfer.failure {
            transfer.continuation.resume(throwing: failure)
        } else if let error = error as? URLError, !transfer.bodyStarted, error.code != .cancelled {
            transfer.continuation.resume(throwing: UndecodedBody(error: error))
        } else if let error {
            transfer.continuation.resume(throwing: error)
        } else if let head = transfer.head {
            transfer.continuation.resume(returning: head)
        } else {
            transfer.continuation.resume(throwing: URLError(.badServerResponse))
        }
    }

    /// Stops a transfer whose receiver failed; the caller gets the receiver's error.
    private func stop(_ task: URLSessionTask, because error: any Error) {
        transfers.withLock { transfers in
            if transfers[task.taskIdentifier]?.failure == nil { transfers[task.taskIdentifier]?.failure = error }
        }
        task.cancel()
    }
}
