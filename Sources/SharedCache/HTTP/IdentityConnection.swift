import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Darwin)
import Darwin
private let streamSocket = SOCK_STREAM
private let sendFlags: Int32 = 0
#elseif canImport(Glibc)
import Glibc
private let streamSocket = Int32(SOCK_STREAM.rawValue)
private let sendFlags = Int32(MSG_NOSIGNAL)
#elseif canImport(Musl)
import Musl
private let streamSocket = SOCK_STREAM
private let sendFlags = MSG_NOSIGNAL
#endif

/// One HTTP/1.1 exchange over a plain TCP connection that leaves the body's content coding as
/// it arrived — the way to fetch a response whose `Content-Encoding` (or `Transfer-Encoding`)
/// URLSession's libcurl cannot decode and so fails (RFC 9110 §8.4: a cache stores and returns
/// the bytes as received; decoding is the caller's business).
///
/// `http` only (no TLS here), `Connection: close`, the whole response read to its end; chunked
/// transfer coding is undone, any other is left as received. Blocking: runs off the
/// cooperative pool. The socket calls live here rather than in `Platform/` because nothing
/// else opens a socket; they go through ``retryingInterrupts(_:path:_:)`` all the same.
enum IdentityConnection {
    /// Sends `request` and reads the response.
    static func send(_ request: URLRequest) async throws -> TransportResponse {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try exchange(request) }) }
        }
    }

    private static func exchange(_ request: URLRequest) throws -> TransportResponse {
        guard let url = request.url, url.scheme?.lowercased() == "http", let host = url.host else {
            throw URLError(.unsupportedURL)
        }
        let port = url.port ?? 80
        let socket = try connect(host: host, port: port, timeout: request.timeoutInterval)
        defer { _ = close(socket) }
        let method = (request.httpMethod ?? "GET").uppercased()
        var head = "\(method) \(target(url)) HTTP/1.1\r\nHost: \(url.port.map { "\(host):\($0)" } ?? host)\r\n"
        for (name, value) in request.allHTTPHeaderFields ?? [:]
        where !["host", "connection", "content-length"].contains(name.lowercased()) {
            head += "\(name): \(value)\r\n"
        }
        if let body = request.httpBody { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: close\r\n\r\n"
        try write(Data(head.utf8) + (request.httpBody ?? Data()), to: socket)
        return try parse(try readAll(socket), method: method, url: url)
    }

    /// The request-target: the path and query as the URL spells them (RFC 9112 §3.2.1).
    private static func target(_ url: URL) -> String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        let path = components?.percentEncodedPath ?? "/"
        let query = components?.percentEncodedQuery.map { "?\($0)" } ?? ""
        return (path.isEmpty ? "/" : path) + query
    }

    private static func connect(host: String, port: Int, timeout: TimeInterval) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = streamSocket
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, "\(port)", &hints, &list) == 0, let first = list else {
            throw URLError(.cannotFindHost)
        }
        defer { freeaddrinfo(list) }
        var seconds = timeval(tv_sec: max(1, Int(timeout)), tv_usec: 0)
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let address = entry {
            entry = address.pointee.ai_next
            guard
                let socket = try? retryingInterrupts("socket", {
                    Glue.socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
                })
            else { continue }
            _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
            #if canImport(Darwin)
            var one: Int32 = 1
            _ = setsockopt(socket, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            // connect(2) is not retried after EINTR (the connection goes on asynchronously).
            if Glue.connect(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 { return socket }
            _ = close(socket)
        }
        throw URLError(.cannotConnectToHost)
    }

    private static func write(_ data: Data, to socket: Int32) throws {
        try data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let sent = try? retryingInterrupts("send") {
                    Glue.send(socket, raw.baseAddress! + offset, raw.count - offset, sendFlags)
                }
                guard let sent, sent > 0 else { throw URLError(.networkConnectionLost) }
                offset += sent
            }
        }
    }

    private static func readAll(_ socket: Int32) throws -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = try? buffer.withUnsafeMutableBytes { raw in
                try retryingInterrupts("recv") { recv(socket, raw.baseAddress, raw.count, 0) }
            }
            guard let count else { throw URLError(.timedOut) }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Status line, fields and body of an HTTP/1.1 response (RFC 9112), past any 1xx.
    static func parse(_ data: Data, method: String, url: URL) throws -> TransportResponse {
        let bytes = [UInt8](data)
        var start = 0
        while true {
            guard let end = find([13, 10, 13, 10], in: bytes, from: start) else { throw URLError(.badServerResponse) }
            let lines = String(decoding: bytes[start..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = lines[0].split(separator: " ", maxSplits: 2)
            guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/"), let status = Int(statusParts[1]) else {
                throw URLError(.badServerResponse)
            }
            var headers = HTTPHeaders()
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers.append(String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces())
            }
            start = end + 4
            if (100..<200).contains(status) { continue }
            var body = Array(bytes[start...])
            if method == "HEAD" || status == 204 || status == 304 {
                body = []
            } else if let coding = headers["Transfer-Encoding"],
                coding.split(separator: ",").last?.trimmingSpaces().lowercased() == "chunked"
            {
                body = try dechunk(body)
            } else if let length = headers["Content-Length"].flatMap({ Int($0.trimmingSpaces()) }), length <= body.count {
                body = Array(body[0..<length])
            }
            return TransportResponse(status: status, headers: headers, body: Data(body), url: url)
        }
    }

    /// Undoes the chunked transfer coding (RFC 9112 §7.1); trailers are dropped.
    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var body: [UInt8] = []
        var position = 0
        while true {
            guard let lineEnd = find([13, 10], in: bytes, from: position) else { throw URLError(.badServerResponse) }
            let sizeText = String(decoding: bytes[position..<lineEnd], as: UTF8.self)
                .split(separator: ";").first.map { $0.trimmingSpaces() } ?? ""
            guard let size = Int(sizeText, radix: 16), size >= 0 else { throw URLError(.badServerResponse) }
            position = lineEnd + 2
            if size == 0 { return body }
            guard position + size <= bytes.count else { throw URLError(.badServerResponse) }
            body += bytes[position..<position + size]
            position += size + 2
        }
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        for index in start...(bytes.count - needle.count) where bytes[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }

    /// The C functions whose names the static methods above shadow.
    private enum Glue {
        static func socket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
            #if canImport(Darwin)
            Darwin.socket(domain, type, proto)
            #elseif canImport(Glibc)
            Glibc.socket(domain, type, proto)
            #else
            Musl.socket(domain, type, proto)
            #endif
        }

        static func connect(_ socket: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: socklen_t) -> Int32 {
            #if canImport(Darwin)
            Darwin.connect(socket, address, length)
            #elseif canImport(Glibc)
            Glibc.connect(socket, address, length)
            #else
            Musl.connect(socket, address, length)
            #endif
        }

        static func send(_ socket: Int32, _ buffer: UnsafeRawPointer, _ count: Int, _ flags: Int32) -> Int {
            #if canImport(Darwin)
            Darwin.send(socket, buffer, count, flags)
            #elseif canImport(Glibc)
            Glibc.send(socket, buffer, count, flags)
            #else
            Musl.send(socket, buffer, count, flags)
            #endif
        }
    }
}
