import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Reads an HTTP/1.1 response (RFC 9112) from bytes as they arrive, handing on its head and
/// its body in pieces: a header section of at most ``IdentityConnection/headerSectionLimit``
/// for all heads together, `name: value` fields with token names, no NUL or bare CR, obs-fold
/// unfolded; `Content-Length` (one length, beside no transfer coding), chunked (chunk-size
/// lines of at most ``chunkLineLimit``, sizes that cannot overflow, each chunk ended by CRLF),
/// or the bytes until the connection closes; a body of at most `bodyLimit` bytes as sent.
///
/// Pure code: no system calls, testable on bytes alone.
struct ResponseParser {
    /// What the bytes said.
    enum Event {
        /// The final response's status and fields, before any of its body.
        case head(status: Int, headers: HTTPHeaders)
        /// The next piece of the body, its transfer coding undone.
        case body(UnsafeRawBufferPointer)
    }

    /// The longest chunk-size line, extensions included (RFC 9112 §7.1.1 leaves their limit to
    /// the recipient): a size takes at most 15 hex digits here, and no extension means anything
    /// to this reader.
    static let chunkLineLimit = 4 << 10

    private enum State {
        case head
        case sized(remaining: Int)
        case chunkLine
        case chunkData(remaining: Int)
        case chunkEnd
        case untilClose
        case complete
    }

    let method: String
    let bodyLimit: Int
    private var state = State.head
    /// A head, a chunk-size line or a chunk's CRLF not yet ended.
    private var pending: [UInt8] = []
    /// Bytes of the heads read so far (1xx heads before the final one).
    private var headBytes = 0
    /// Bytes of the body as sent so far.
    private var bodyBytes = 0

    init(method: String, bodyLimit: Int) {
        self.method = method
        self.bodyLimit = bodyLimit
    }

    /// Whether the response has ended by its framing: what follows is not read.
    var isComplete: Bool {
        if case .complete = state { return true }
        return false
    }

    /// Whether the final head has been read.
    var hasHead: Bool {
        if case .head = state { return false }
        return true
    }

    /// Reads the next bytes received, handing on what they complete.
    ///
    /// - Throws: `URLError(.badServerResponse)` for framing that is no response,
    ///   `.cannotDecodeRawData` for a transfer coding nothing here undoes,
    ///   `.dataLengthExceedsMaximum` for a body past `bodyLimit` (before any byte past it is
    ///   handed on), and what `handle` throws.
    mutating func consume(_ input: UnsafeRawBufferPointer, _ handle: (Event) throws -> Void) throws {
        var input = input[...]
        while !input.isEmpty {
            switch state {
            case .complete:
                return
            case .head:
                let searchFrom = max(0, pending.count - 3)
                pending.append(contentsOf: input)
                try readHeads(searchingFrom: searchFrom, handle)
                guard hasHead, !pending.isEmpty else { return }
                // What came after the final head is its body's: read from here, once.
                let rest = pending
                pending = []
                try rest.withUnsafeBytes { try consume($0, handle) }
                return
            case .sized(let remaining):
                let left = try handOnBody(upTo: remaining, of: &input, handle)
                state = left == 0 ? .complete : .sized(remaining: left)
            case .untilClose:
                try countBody(input.count)
                try handle(.body(UnsafeRawBufferPointer(rebasing: input)))
                input = input[input.endIndex...]
            case .chunkLine:
                let searchFrom = max(0, pending.count - 1)
                let take = min(input.count, Self.chunkLineLimit + 2 - pending.count)
                pending.append(contentsOf: input.prefix(take))
                guard let end = Self.find([13, 10], in: pending, from: searchFrom) else {
                    // A line of the limit's length and its CR may be all a read brought: only
                    // the limit and its CRLF's length without a CRLF is too long.
                    guard pending.count < Self.chunkLineLimit + 2 else { throw URLError(.badServerResponse) }
                    try countBody(take)
                    input = input.dropFirst(take)
                    continue
                }
                let used = end + 2 - (pending.count - take)
                try countBody(used)
                input = input.dropFirst(used)
                let size = try Self.chunkSize(pending[..<end])
                pending = []
                // Trailer fields are not read: the response ends with its last chunk, and the
                // connection with it (RFC 9112 §7.1.2 lets a recipient discard them).
                guard size > 0 else {
                    state = .complete
                    return
                }
                guard size <= bodyLimit - bodyBytes else { throw URLError(.dataLengthExceedsMaximum) }
                state = .chunkData(remaining: size)
            case .chunkData(let remaining):
                let left = try handOnBody(upTo: remaining, of: &input, handle)
                state = left == 0 ? .chunkEnd : .chunkData(remaining: left)
            case .chunkEnd:
                // RFC 9112 §7.1: chunk-data CRLF.
                let take = min(input.count, 2 - pending.count)
                pending.append(contentsOf: input.prefix(take))
                try countBody(take)
                input = input.dropFirst(take)
                guard pending.count == 2 else { continue }
                guard pending == [13, 10] else { throw URLError(.badServerResponse) }
                pending = []
                state = .chunkLine
            }
        }
    }

    /// The connection closed: the response ends here, if its framing lets it.
    ///
    /// - Throws: `URLError(.networkConnectionLost)` for a body shorter than its
    ///   `Content-Length`, `.badServerResponse` for a head or chunked body cut short.
    mutating func finish(_ handle: (Event) throws -> Void) throws {
        switch state {
        case .complete, .untilClose:
            // RFC 9112 §6.3 (8): with neither length nor coding, the body is what came before
            // the close.
            state = .complete
        case .sized:
            // Shorter than it says: the connection closed early, and the response is
            // incomplete (RFC 9112 §8), which a cache never stores or serves as whole
            // (RFC 9111 §3.3).
            throw URLError(.networkConnectionLost)
        case .head, .chunkLine, .chunkData, .chunkEnd:
            throw URLError(.badServerResponse)
        }
    }

    /// Hands on up to `remaining` bytes of `input` as body and drops them from it; returns how
    /// many are still due.
    private mutating func handOnBody(
        upTo remaining: Int, of input: inout Slice<UnsafeRawBufferPointer>, _ handle: (Event) throws -> Void
    ) throws -> Int {
        let count = min(remaining, input.count)
        try countBody(count)
        try handle(.body(UnsafeRawBufferPointer(rebasing: input.prefix(count))))
        input = input.dropFirst(count)
        return remaining - count
    }

    /// Counts `bytes` more of the body as sent.
    private mutating func countBody(_ bytes: Int) throws {
        guard bytes <= bodyLimit - bodyBytes else { throw URLError(.dataLengthExceedsMaximum) }
        bodyBytes += bytes
    }

    /// Reads the heads `pending` holds whole, up to the final one, and leaves in it what
    /// follows them. Over ``IdentityConnection/headerSectionLimit`` for all heads together,
    /// with or without their end, the response is refused (RFC 9110 §5.4, §15.2).
    private mutating func readHeads(searchingFrom searchFrom: Int, _ handle: (Event) throws -> Void) throws {
        var offset = 0
        while case .head = state, let end = Self.find([13, 10, 13, 10], in: pending, from: max(offset, searchFrom)) {
            headBytes += end + 4 - offset
            guard headBytes <= IdentityConnection.headerSectionLimit else { throw URLError(.badServerResponse) }
            try readHead(pending[offset..<end], handle)
            offset = end + 4
        }
        pending.removeFirst(offset)
        if case .head = state, headBytes + pending.count > IdentityConnection.headerSectionLimit {
            throw URLError(.badServerResponse)
        }
    }

    /// Reads a head (without its blank line), hands on a final one and sets how its body is
    /// framed; a 1xx head leaves the state as it is, for the next head.
    private mutating func readHead(_ head: ArraySlice<UInt8>, _ handle: (Event) throws -> Void) throws {
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/"), statusParts[1].utf8.count == 3,
            let status = Int(statusParts[1]), (100...599).contains(status)
        else {
            throw URLError(.badServerResponse)
        }
        let headers = try Self.fields(lines.dropFirst())
        if (100..<200).contains(status) { return }
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
        try handle(.head(status: status, headers: headers))
        if method == "HEAD" || status == 204 || status == 304 {
            state = .complete
        } else if transferCoding != nil {
            state = .chunkLine
        } else if let length {
            // A length past the limit is refused before any of the body is read.
            guard length <= bodyLimit else { throw URLError(.dataLengthExceedsMaximum) }
            state = length == 0 ? .complete : .sized(remaining: length)
        } else {
            state = .untilClose
        }
    }

    /// The size a chunk-size line gives: 1*HEXDIG, and no more digits than a size this process
    /// could hold; extensions are ignored (RFC 9112 §7.1.1).
    private static func chunkSize(_ line: ArraySlice<UInt8>) throws -> Int {
        let sizeText =
            String(decoding: line, as: UTF8.self)
            .split(separator: ";", omittingEmptySubsequences: false).first.map { $0.trimmingSpaces() } ?? ""
        guard !sizeText.isEmpty, sizeText.utf8.count <= 15, sizeText.allSatisfy(\.isHexDigit),
            let size = Int(sizeText, radix: 16)
        else { throw URLError(.badServerResponse) }
        return size
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

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        for index in start...(bytes.count - needle.count)
        where bytes[index..<index + needle.count].elementsEqual(needle) {
            return index
        }
        return nil
    }
}
