#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif
import SharedCachePlatform

/// The `URLProtocol` that ``SharedCache/install(in:)`` puts first in a configuration's
/// `protocolClasses`: every `http` and `https` request of a session made from that
/// configuration goes through the cache it was installed from.
///
/// You do not register or create it yourself: ``SharedCache/install(in:)`` puts a class bound
/// to one cache into the configuration (see there for how several caches in one process are
/// kept apart). Requests through it behave as ``SharedCache/data(for:options:)``: fresh hits
/// without the network, validators only from a pinned body, a 304 delivered as the stored
/// response with its whole body, one download per URL across processes for every request that
/// may reuse it, unsafe methods passed
/// through and invalidating, and an RFC 9211 `Cache-Status` field on every response.
/// Responses are handed to URLSession with `.notAllowed`, so no Foundation cache stores them
/// a second time.
///
/// Stopping a task (`task.cancel()`, or cancelling the Swift task awaiting `data(for:)`)
/// cancels the fetch at once; a body being downloaded is dropped, and nothing partial is
/// stored. Failures reach the app as the `URLError`s URLSession would report
/// (``SharedCacheError/urlError(for:)``).
///
/// A download reaches the client as it arrives on Darwin: the response once its body starts,
/// then each piece. On Linux the body is delivered in one piece once the fetch has it whole (a
/// large one mapped from its stored file, not copied), because swift-corelibs-foundation keeps
/// only the last piece a protocol hands a task with a completion handler.
/// - Note: Redirects are followed by the cache's own transport; the app sees the final
///   response, whose `url` names where it came from. An answer reached through a redirect is
///   not stored: it is another URL's response (RFC 9111 §2).
/// - Note: A `Set-Cookie` field reaches the app in the response, but is stored in no cookie
///   jar, nor are those of redirects the cache follows (see ``SharedCache/install(in:)``).
///
/// Thread-safe: URLSession calls it on its own threads; its state is in a lock, and it calls
/// its client on the thread (Darwin: the run loop) that started it.
public class SharedCacheURLProtocol: URLProtocol {
    private struct State {
        var work: Task<Void, Never>?
        var stopped = false
        /// The response went to the client while its body arrived.
        var streamed = false
    }

    private let state = Locked(State())

    /// The cache this class was bound to by ``SharedCache/install(in:)``; `nil` for this base
    /// class, and once that cache is gone.
    static var boundCache: SharedCache? { URLProtocolBinding.cache(for: self) }

    /// Whether this class handles `request`: an `http` or `https` URL, and a bound cache.
    override public class func canInit(with request: URLRequest) -> Bool {
        guard let scheme = request.url?.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        return boundCache != nil
    }

    /// Upload tasks are left to URLSession's own protocols: their body is not part of the
    /// request a protocol is given. (Darwin asks this; swift-corelibs-foundation asks only
    /// ``canInit(with:)-(URLRequest)``.)
    override public class func canInit(with task: URLSessionTask) -> Bool {
        guard !(task is URLSessionUploadTask), let request = task.currentRequest ?? task.originalRequest else {
            return false
        }
        return canInit(with: request)
    }

    /// The request as given: the cache's key is derived from its URL.
    override public class func canonicalRequest(for request: URLRequest) -> URLRequest {
        request
    }

    /// Starts the fetch on a task of its own.
    override public func startLoading() {
        guard let cache = Self.boundCache else {
            client?.urlProtocol(self, didFailWithError: URLError(.cancelled))
            return
        }
        var request = request
        if request.httpBody == nil, let stream = request.httpBodyStream {
            request.httpBody = Self.readAll(stream)
            request.httpBodyStream = nil
        }
        let caller = ClientThread()
        let loader = Unchecked(self)
        let observer = Self.observer(of: loader, calling: caller)
        let work = Task {
            let outcome: Result<(Data, HTTPURLResponse), URLError>
            do throws(SharedCacheError) {
                let result = try await cache.fetch(
                    honouringCachePolicyOf: request, options: FetchOptions(), observer: observer)
                if let response = result.httpResponse {
                    outcome = .success((result.data, response))
                } else {
                    outcome = .failure(URLError(.badServerResponse))
                }
            } catch {
                outcome = .failure(error.urlError(for: request.url))
            }
            caller.perform { loader.value.deliver(outcome) }
        }
        let stoppedAlready = state.withLock { state -> Bool in
            state.work = work
            return state.stopped
        }
        if stoppedAlready { work.cancel() }
    }

    /// Cancels the fetch. URLSession itself reports the task as cancelled, so nothing more is
    /// said to the client.
    override public func stopLoading() {
        let work = state.withLock { state -> Task<Void, Never>? in
            state.stopped = true
            return state.work
        }
        guard let work else { return }
        // Cancelled from another thread: cancelling runs the fetch's cancellation handlers at
        // once, and the transport's (URLSession's `cancel()`) waits for a queue that, in
        // swift-corelibs-foundation, the one calling `stopLoading` may be running on.
        DispatchQueue.global().async { work.cancel() }
    }

    #if canImport(Darwin)
    /// What shows the client a download as it arrives: on Darwin, each call queued to the
    /// client's thread in order.
    private static func observer(of loader: Unchecked<SharedCacheURLProtocol>, calling caller: ClientThread)
        -> ResponseObserver?
    {
        ResponseObserver(
            response: { result in caller.perform { loader.value.begin(result) } },
            piece: { data in caller.perform { loader.value.load(data) } })
    }
    #else
    /// None on Linux (see the type's discussion).
    private static func observer(of loader: Unchecked<SharedCacheURLProtocol>, calling caller: ClientThread)
        -> ResponseObserver?
    {
        nil
    }
    #endif

    /// Hands the client the response whose body is arriving.
    private func begin(_ result: FetchResult) {
        guard !state.withLock({ $0.stopped }), let client, let response = result.httpResponse else { return }
        state.withLock { $0.streamed = true }
        client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
    }

    /// Hands the client the next piece of the body ``begin(_:)`` announced.
    private func load(_ data: Data) {
        guard state.withLock({ $0.streamed && !$0.stopped }), let client else { return }
        client.urlProtocol(self, didLoad: data)
    }

    /// Hands the outcome to the client, unless the task was stopped meanwhile.
    private func deliver(_ outcome: Result<(Data, HTTPURLResponse), URLError>) {
        let (stopped, streamed) = state.withLock { ($0.stopped, $0.streamed) }
        guard !stopped, let client else { return }
        switch outcome {
        case .success where streamed:
            client.urlProtocolDidFinishLoading(self)
        case .success(let (data, response)):
            client.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
            // One call with the whole body: swift-corelibs-foundation keeps only the last
            // chunk for a task with a completion handler (and `data(for:)`).
            if !data.isEmpty { client.urlProtocol(self, didLoad: data) }
            client.urlProtocolDidFinishLoading(self)
        case .failure(let error):
            // URLSession reports a cancelled task itself.
            guard error.code != .cancelled else { return }
            client.urlProtocol(self, didFailWithError: error)
        }
    }

    /// A request body given as a stream, read whole.
    private static func readAll(_ stream: InputStream) -> Data {
        var data = Data()
        stream.open()
        defer { stream.close() }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            data.append(buffer, count: count)
        }
        return data
    }
}

/// A value handed between threads by hand: the protocol object URLSession owns, which
/// Foundation does not declare `Sendable`, and which this file touches only through its lock or
/// on its client's thread.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Calls into a protocol's client on the thread that started it, as URLSession expects.
///
/// On Darwin that thread runs a run loop (URLSession's loader thread), and blocks are queued
/// to it in the mode it was running and the default mode, as Apple's CustomHTTPProtocol sample
/// does. swift-corelibs-foundation's client hands every call to the session's queues itself
/// and may be called from any thread, so there the call is made at once.
private struct ClientThread: @unchecked Sendable {
    #if canImport(Darwin)
    private let runLoop = CFRunLoopGetCurrent()!
    private let modes = [RunLoop.current.currentMode ?? .default, .default].map(\.rawValue) as CFArray
    #endif

    func perform(_ block: @escaping () -> Void) {
        #if canImport(Darwin)
        CFRunLoopPerformBlock(runLoop, modes, block)
        CFRunLoopWakeUp(runLoop)
        #else
        block()
        #endif
    }
}
