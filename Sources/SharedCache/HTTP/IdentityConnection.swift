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
import SharedCachePlatform

/// One HTTP/1.1 exchange over a plain TCP connection that leaves the body's content coding as
/// it arrived — the way to fetch a response whose `Content-Encoding` (or `Transfer-Encoding`)
/// URLSession's libcurl cannot decode and so fails (RFC 9110 §8.4: a cache stores and returns
/// the bytes as received; decoding is the caller's business).
///
/// `http` only (no TLS here), `Connection: close`, the whole response read to its end; chunked
/// transfer coding is undone. Its framing is read as strictly as libcurl reads it, or more
/// strictly, since what it accepts is stored: a transfer coding other than chunked (which
/// nothing here can undo), a `Content-Length` beside one or not a number, a field that is not
/// `name: value`, a NUL or bare CR in a value, or a header section over 256 KiB is no response. Blocking: runs
/// off the cooperative pool. The socket itself is the platform layer's ``StreamSocket``.
enum IdentityConnection {
    /// The longest header section read, near libcurl's 300 KB (RFC 9112 §2.3 leaves it to each).
    static let headerSectionLimit = 256 << 10

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
        let socket: StreamSocket
        do {
            socket = try StreamSocket(connectingTo: host, port: port, timeout: .seconds(request.timeoutInterval))
        } catch {
            throw URLError(error.call == "getaddrinfo" ? .cannotFindHost : .cannotConnectToHost)
        }
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

    private static func write(_ data: Data, to socket: borrowing StreamSocket) throws {
        // Copied out, because a borrowed socket cannot be used inside Data's closure.
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: data.count, alignment: 1)
        defer { bytes.deallocate() }
        data.copyBytes(to: bytes)
        do {
            try socket.sendAll(UnsafeRawBufferPointer(bytes))
        } catch {
            throw URLError(.networkConnectionLost)
        }
    }

    /// Reads to the end; a response whose header section has not ended within
    /// ``headerSectionLimit`` bytes is refused there (a server sending header lines without end
    /// filled memory).
    private static func readAll(_ socket: borrowing StreamSocket) throws -> Data {
        var data = Data()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 8)
        defer { buffer.deallocate() }
        var headEnded = false
        while true {
            if !headEnded && data.count > headerSectionLimit {
                guard data.range(of: Data([13, 10, 13, 10])) != nil else { throw URLError(.badServerResponse) }
                headEnded = true
            }
            let count: Int
            do {
                count = try socket.receive(into: buffer)
            } catch {
                throw URLError(error.errno == EAGAIN || error.errno == EWOULDBLOCK ? .timedOut : .networkConnectionLost)
            }
            if count == 0 { return data }
            data.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// Status line, fields and body of an HTTP/1.1 response (RFC 9112), past any 1xx.
    static func parse(_ data: Data, method: String, url: URL) throws -> TransportResponse {
        let bytes = [UInt8](data)
        var start = 0
        while true {
            guard let end = find([13, 10, 13, 10], in: bytes, from: start), end - start <= headerSectionLimit else {
                throw URLError(.badServerResponse)
            }
            let lines = String(decoding: bytes[start..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = lines[0].split(separator: " ", maxSplits: 2)
            guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/"), statusParts[1].utf8.count == 3,
                let status = Int(statusParts[1]), (100...599).contains(status)
            else {
                throw URLError(.badServerResponse)
            }
            let headers = try fields(lines.dropFirst())
            start = end + 4
            if (100..<200).contains(status) { continue }
            var body = Array(bytes[start...])
            let length: Int?
            switch headers.contentLength {
            case .absent: length = nil
            case .length(let value): length = value
            case .invalid: throw URLError(.badServerResponse)
            }
            let transferCoding = headers["Transfer-Encoding"]
            if let transferCoding {
                // Only chunked can be undone here, and a length beside a transfer coding is a
                // message smuggled or split (RFC 9112 §6.1, §6.3).
                guard transferCoding.trimmingSpaces().lowercased() == "chunked", length == nil else {
                    throw URLError(.cannotDecodeRawData)
                }
            }
            if method == "HEAD" || status == 204 || status == 304 {
                body = []
            } else if transferCoding != nil {
                body = try dechunk(body)
            } else if let length {
                // Shorter than it says: the connection closed early, and the response is
                // incomplete (RFC 9112 §8), which a cache never stores or serves as whole
                // (RFC 9111 §3.3).
                guard length <= body.count else { throw URLError(.networkConnectionLost) }
                body = Array(body[0..<length])
            }
            return TransportResponse(status: status, headers: headers, body: Data(body), url: url)
        }
    }

    /// The fields of a header section's lines (RFC 9112 §5): `name: value`, the name a token; a
    /// line folded onto the one before it (obs-fold) is joined to it with a space (§5.2). A
    /// value holding a NUL or a bare CR is refused (RFC 9110 §5.5), as libcurl refuses it.
    private static func fields(_ lines: ArraySlice<String>) throws -> HTTPHeaders {
        var fields: [(name: String, value: String)] = []
        for line in lines {
            if let first = line.unicodeScalars.first, first == " " || first == "\t" {
                guard !fields.isEmpty else { throw URLError(.badServerResponse) }
                fields[fields.count - 1].value += " " + line.trimmingSpaces()
                continue
            }
            guard let colon = line.firstIndex(of: ":"), FieldList.isToken(line[..<colon]) else {
                throw URLError(.badServerResponse)
            }
            fields.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces()))
        }
        var headers = HTTPHeaders()
        for field in fields {
            guard !field.value.utf8.contains(where: { $0 == 0 || $0 == 13 }) else { throw URLError(.badServerResponse) }
            headers.append(field.name, field.value)
        }
        return headers
    }

    /// Undoes the chunked transfer coding (RFC 9112 §7.1); trailers are dropped.
    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var body: [UInt8] = []
        var position = 0
        while true {
            guard let lineEnd = find([13, 10], in: bytes, from: position) else { throw URLError(.badServerResponse) }
            let sizeText =
                String(decoding: bytes[position..<lineEnd], as: UTF8.self)
                .split(separator: ";", omittingEmptySubsequences: false).first.map { $0.trimmingSpaces() } ?? ""
            // 1*HEXDIG, and no more digits than a size this process could hold.
            guard !sizeText.isEmpty, sizeText.utf8.count <= 15, sizeText.allSatisfy(\.isHexDigit),
                let size = Int(sizeText, radix: 16)
            else { throw URLError(.badServerResponse) }
            position = lineEnd + 2
            if size == 0 { return body }
            guard size <= bytes.count - position else { throw URLError(.badServerResponse) }
            body += bytes[position..<position + size]
            position += size + 2
        }
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        for index in start...(bytes.count - needle.count)
        where bytes[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }
}
