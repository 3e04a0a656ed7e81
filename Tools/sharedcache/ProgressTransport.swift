import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// ``URLSessionTransport`` with a progress line drawn as a body arrives. Like it, it keeps no
/// cache of its own, and hands the body on in pieces, so a large one streams to its entry.
struct ProgressTransport: HTTPTransport {
    let progress: ProgressLine
    private let transport = URLSessionTransport()

    init(progress: ProgressLine) {
        self.progress = progress
    }

    func send(_ request: URLRequest, streamingTo receive: @escaping @Sendable (TransportEvent) throws -> Void)
        async throws -> TransportResponse
    {
        let counted = Locked((received: 0, expected: Int?.none))
        let progress = progress
        defer { progress.finish() }
        return try await transport.send(request) { event in
            let (received, expected) = counted.withLock { counted in
                switch event {
                case .head(let head):
                    counted = (0, head.headers["Content-Length"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) })
                case .body(let piece):
                    counted.received += piece.count
                }
                return counted
            }
            progress.update(received: received, expected: expected)
            try receive(event)
        }
    }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        let body = Locked(Data())
        var response = try await send(request) { event in
            if case .body(let piece) = event { body.withLock { $0.append(piece) } }
        }
        response.body = body.withLock { $0 }
        return response
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
