import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheEngine
import SharedCachePlatform

/// One HTTP/1.1 exchange over a plain TCP connection that leaves the body's content coding as
/// it arrived — the way to fetch a response whose `Content-Encoding` (or `Transfer-Encoding`)
/// URLSession's libcurl cannot decode and so fails (RFC 9110 §8.4: a cache stores and returns
/// the bytes as received; decoding is the caller's business).
///
/// `http` only (no TLS here), `Connection: close`; chunked transfer coding is undone. Its
/// framing is read as strictly as libcurl reads it, or more strictly, since what it accepts is
/// stored (``ResponseParser``). What a server can make it spend is bounded: memory by the
/// header section's limit (every head, 1xx included) and the body's (``bodyLimit``), time by
/// the request's timeout (a wait for bytes, and the whole head) and the session's resource
/// timeout, and the caller's task cancels its reading (a connect or a send is bounded by the
/// request's timeout). It reads a response to the end of its framing, never on to a close that
/// a server keeping the connection open would not send. Blocking: runs off the cooperative
/// pool. The socket itself is the platform layer's ``StreamSocket``.
enum IdentityConnection {
    /// The longest header section read, all heads together (a `100 Continue` and the final
    /// one), near libcurl's 300 KB. HTTP sets no limit and leaves one to each recipient
    /// (RFC 9110 §5.4); a client reads any number of 1xx heads before the final one (§15.2),
    /// so the limit is on their sum, or a server could send heads without end.
    static let headerSectionLimit = 256 << 10

    /// The longest body read, as sent (chunk framing included): the size limit of the cache
    /// that fetches (``Configuration/sizeLimit``, set for the fetch's transfer), or the default
    /// one where that is 0 (no limit) or the transport is used on its own. A body larger than
    /// the whole cache would be evicted by the next compaction, and this connection is the
    /// fallback for codings libcurl does not know, not the way to download without bound.
    @TaskLocal static var bodyLimit = defaultBodyLimit

    /// The default size limit of a cache, 1 GiB: the body limit where no other is set.
    static let defaultBodyLimit = Int(Configuration().sizeLimit)

    /// How long the plain connection waits between looks at its task's cancellation: a read
    /// blocks in `poll(2)` for at most this long at a time.
    static let cancellationSlice: Duration = .milliseconds(250)

    /// Sends `request` and reads the response, handing it to `receive` as it arrives, if
    /// `takes` its head.
    ///
    /// - Parameters:
    ///   - resourceTimeout: the longest the whole exchange may take (the session's
    ///     `timeoutIntervalForResource`).
    ///   - takes: whether the response with this head is one to take; it is asked once, on
    ///     the thread reading, before any of the body is read.
    /// - Returns: the head (with an empty body) once the body has ended; `nil` if no response
    ///   came that `takes` took (none could be read, or it was not one to take).
    /// - Throws: once the head was taken, why the body could not be read whole
    ///   (`URLError(.dataLengthExceedsMaximum)` past ``bodyLimit``, `.timedOut`, …) or what
    ///   `receive` threw; `URLError(.cancelled)` when the task was cancelled.
    static func send(
        _ request: URLRequest, resourceTimeout: TimeInterval,
        taking takes: @escaping @Sendable (TransportResponse) -> Bool,
        streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void
    ) async throws -> TransportResponse? {
        let bodyLimit = bodyLimit
        let cancelled = Locked(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                DispatchQueue.global().async {
                    continuation.resume(
                        with: Result {
                            try exchange(
                                request, bodyLimit: bodyLimit, resourceTimeout: resourceTimeout,
                                cancelled: cancelled, takes: takes, receive: receive)
                        })
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    /// A `TimeInterval` as a timeout: `fallback` for none that is positive, at most 10⁹ s.
    static func timeout(_ interval: TimeInterval, fallback: Duration) -> Duration {
        guard interval > 0 else { return fallback }  // NaN too
        return .milliseconds(Int64(max(1, min(interval, 1e9) * 1000)))
    }

    /// The head was not one to take: stop reading.
    private struct NotTaken: Error {}

    private static func exchange(
        _ request: URLRequest, bodyLimit: Int, resourceTimeout: TimeInterval, cancelled: Locked<Bool>,
        takes: (TransportResponse) -> Bool, receive: (TransportEvent) throws -> Void
    ) throws -> TransportResponse? {
        guard let url = request.url, url.scheme?.lowercased() == "http", let host = url.host else { return nil }
        let clock = ContinuousClock()
        let start = clock.now
        // URLSession's request timeout is an idle one (the longest wait for bytes) and its
        // resource timeout bounds the whole transfer; the head must also come whole within the
        // first, or a server could trickle header lines for as long as it liked.
        let idle = timeout(request.timeoutInterval, fallback: .seconds(60))
        let headDeadline = start + idle
        let deadline = start + timeout(resourceTimeout, fallback: .seconds(7 * 24 * 3600))
        let method = (request.httpMethod ?? "GET").uppercased()
        var taken: TransportResponse?
        do {
            let socket: StreamSocket
            do {
                socket = try StreamSocket(connectingTo: host, port: url.port ?? 80, timeout: idle)
            } catch {
                throw URLError(error.call == "getaddrinfo" ? .cannotFindHost : .cannotConnectToHost)
            }
            try write(head(of: request, url: url, host: host, method: method), to: socket)
            var parser = ResponseParser(method: method, bodyLimit: bodyLimit)
            func handle(_ event: ResponseParser.Event) throws {
                switch event {
                case .head(let status, let headers):
                    let head = TransportResponse(status: status, headers: headers, body: Data(), url: url)
                    guard takes(head) else { throw NotTaken() }
                    taken = head
                    try receive(.head(head))
                case .body(let bytes):
                    try receive(.body(Data(bytes)))
                }
            }
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)
            defer { buffer.deallocate() }
            var lastBytes = start
            while !parser.isComplete {
                if cancelled.withLock({ $0 }) { throw URLError(.cancelled) }
                let now = clock.now
                let until = min(lastBytes + idle, deadline, parser.hasHead ? deadline : headDeadline)
                guard now < until else { throw URLError(.timedOut) }
                let count: Int
                do {
                    count = try socket.receive(into: buffer, waitingAtMost: min(until - now, cancellationSlice))
                } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                    continue
                } catch {
                    throw URLError(.networkConnectionLost)
                }
                if count == 0 {
                    try parser.finish(handle)
                    break
                }
                lastBytes = clock.now
                try parser.consume(UnsafeRawBufferPointer(rebasing: buffer[..<count]), handle)
            }
        } catch let error as URLError where error.code == .cancelled {
            throw error
        } catch {
            // Before a head was taken, the failure URLSession reported stands.
            guard taken != nil else { return nil }
            throw error
        }
        return taken
    }

    /// The request's head: its own fields but `Host`, `Connection` and `Content-Length`, which
    /// are this connection's.
    private static func head(of request: URLRequest, url: URL, host: String, method: String) -> Data {
        var head = "\(method) \(target(url)) HTTP/1.1\r\nHost: \(url.port.map { "\(host):\($0)" } ?? host)\r\n"
        for (name, value) in request.allHTTPHeaderFields ?? [:]
        where !["host", "connection", "content-length"].contains(name.lowercased()) {
            head += "\(name): \(value)\r\n"
        }
        if let body = request.httpBody { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: close\r\n\r\n"
        return Data(head.utf8) + (request.httpBody ?? Data())
    }

    /// The request-target: the path and query as the URL spells them (RFC 9112 §3.2.1).
    private static func target(_ url: URL) -> String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        let path = components?.percentEncodedPath ?? "/"
        let query = components?.percentEncodedQuery.map { "?\($0)" } ?? ""
        return (path.isEmpty ? "/" : path) + query
    }

    private static func write(_ data: Data, to socket: borrowing StreamSocket) throws {
        // Copied out, because a borrowed socket cannot be used inside Data's closure.
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 1)
        defer { bytes.deallocate() }
        data.copyBytes(to: bytes)
        do {
            try socket.sendAll(UnsafeRawBufferPointer(bytes))
        } catch {
            throw URLError(error.errno == EAGAIN || error.errno == EWOULDBLOCK ? .timedOut : .networkConnectionLost)
        }
    }

    /// The parse of a response received in one piece.
    static func parse(_ data: Data, method: String, url: URL) throws -> TransportResponse {
        try parse([Array(data)[...]], method: method, url: url)
    }

    /// Status line, fields and body of an HTTP/1.1 response (RFC 9112) received in these pieces,
    /// past any 1xx: what the connection would take from them, with no limit on the body.
    static func parse(_ pieces: [ArraySlice<UInt8>], method: String, url: URL) throws -> TransportResponse {
        var parser = ResponseParser(method: method, bodyLimit: .max)
        var response: TransportResponse?
        var body = Data()
        func handle(_ event: ResponseParser.Event) {
            switch event {
            case .head(let status, let headers):
                response = TransportResponse(status: status, headers: headers, body: Data(), url: url)
            case .body(let bytes):
                body.append(contentsOf: bytes)
            }
        }
        for piece in pieces where !parser.isComplete {
            try piece.withUnsafeBytes { try parser.consume($0, handle) }
        }
        if !parser.isComplete { try parser.finish(handle) }
        guard var response else { throw URLError(.badServerResponse) }
        response.body = body
        return response
    }
}
