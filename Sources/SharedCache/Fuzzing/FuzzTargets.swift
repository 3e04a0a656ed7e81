import Foundation
import SharedCacheEngine
import SharedCacheFormat

// Entry points for `sharedcache-fuzz`: every decoder of bytes that come from disk (or from a
// server), with valid seeds to mutate and the property each must keep. `package`: for the
// fuzz driver of this package.

/// One decoder under fuzzing.
package enum FuzzTarget: String, CaseIterable, Sendable {
    case journalFrame = "journal-frame"
    case segmentHeader = "segment-header"
    case manifest
    case blobHeader = "blob-header"
    case formatFile = "format-file"
    case configFile = "config-file"
    case storedHTTP = "stored-http"
    case httpText = "http-text"
    case httpResponse = "http-response"

    /// Valid inputs to start mutating from.
    package var seeds: [[UInt8]] {
        let hash = KeyHash(key: "https://example.com/a")
        switch self {
        case .journalFrame:
            let records: [JournalRecord] = [
                .stored(
                    StoredRecord(
                        hash: hash, location: BodyLocation(blobID: 7), bodySize: 1234, storedAt: 1_700_000_000_000,
                        expiresAt: .max,
                        key: Array("https://example.com/a".utf8), etag: Array("\"v1\"".utf8))),
                .removed(
                    RemovedRecord(
                        hash: hash, location: BodyLocation(blobID: 7), reason: .size,
                        remover: Remover(processID: 42, name: "tool"),
                        key: Array("k".utf8))),
                .cleared(Remover(processID: 1, name: "x")), .sealed(nextGeneration: 9),
                .accessed(AccessedRecord(hash: hash, location: BodyLocation(blobID: 7), accessedAt: 5)),
                .freshened(FreshenedRecord(hash: hash, location: BodyLocation(blobID: 7), storedAt: 6, expiresAt: 8)),
            ]
            return Self.segments.flatMap { header in
                records.enumerated().map { index, record in
                    var writer = ByteWriter()
                    record.encode(mark: header.mark(forSequence: UInt64(index + 1)), into: &writer)
                    return writer.bytes
                }
            }
        case .segmentHeader:
            return [SegmentHeader(generation: 3, firstSequence: 77).encoded()]
        case .manifest:
            let entries = (0..<3).map { number in
                (
                    KeyHash(key: "\(number)"),
                    IndexEntry(
                        location: BodyLocation(blobID: UInt64(number)), bodySize: 10, storedAt: 1, expiresAt: .max,
                        lastAccess: 2)
                )
            }
            return [
                ManifestCoding.encode(
                    ManifestCoding.Header(generation: 2, lastSequence: 9, entryCount: 3, createdAt: 5), entries: entries
                )
            ]
        case .blobHeader:
            return [
                BlobHeader(
                    bodySize: 5, bodyChecksum: 9, storedAt: 1, expiresAt: .max, keyHash: hash,
                    key: Array("https://example.com/a".utf8), etag: Array("\"e\"".utf8),
                    lastModified: Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8), attributes: [1, 2, 3]
                ).encoded()
            ]
        case .formatFile:
            return [FormatVersion.current.encoded()]
        case .configFile:
            return [ConfigurationFile(sizeLimit: 1 << 30, defaultExpirySeconds: 3600, entryLimit: 10).encoded()]
        case .storedHTTP:
            return [
                StoredHTTP.response(
                    StoredResponse(
                        status: 200, headers: ["ETag": "\"x\"", "Cache-Control": "max-age=60"], lifetime: 60_000,
                        mustRevalidate: false, varyValues: ["accept": "text/html"], audience: .shared)
                ).encoded(),
                StoredHTTP.variants(VariantList(names: ["accept"], keys: ["a\naccept: x"])).encoded(),
            ]
        case .httpText:
            return [
                Array("Sun, 06 Nov 1994 08:49:37 GMT".utf8), Array("Sunday, 06-Nov-94 08:49:37 GMT".utf8),
                Array("max-age=60, no-cache=\"a, b\", must-revalidate".utf8), Array("W/\"abc\", \"def\"".utf8),
                Array("bytes 0-4/10\nbytes 7-9/10".utf8), Array("bytes=2-5".utf8),
                Array("a=1; Expires=Wed, 21 Oct 2037 07:28:00 GMT, b=2".utf8),
            ]
        case .httpResponse:
            return [
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Encoding: x-unknown\r\n\r\nhello",
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n0\r\n\r\n",
                "HTTP/1.1 304 Not Modified\r\nETag: \"v\"\r\n\r\n",
            ].map { Array($0.utf8) }
        }
    }

    /// The segments journal frames are decoded as part of: one of the current version, whose
    /// records carry its tag, and one of version 2, whose records carry their numbers.
    static let segments = [
        SegmentHeader(generation: 3, firstSequence: 1, salt: 0x5EED_F00D),
        SegmentHeader(generation: 3, firstSequence: 1, major: 2),
    ]

    /// Taking `bytes` for damage at the start of a segment's rest: where records resume must be
    /// a whole record there, and the placeholders for the bytes before it must fill them exactly
    /// with whole records, when there is room for one.
    private static func checkResumption(_ bytes: [UInt8], in header: SegmentHeader) -> String? {
        bytes.withUnsafeBytes { raw -> String? in
            let base = Int64(SegmentHeader.size)
            guard let resumption = JournalRecord.resumption(in: raw, after: 0, header: header, base: base)
            else { return nil }
            guard
                case .record(_, resumption.sequence, _) = JournalRecord.decodeFrame(
                    raw, at: resumption.offset, in: header, base: base)
            else {
                return "resumed at \(resumption.offset) without its record"
            }
            let placeholders = JournalRecord.placeholders(
                in: header, after: 0, resumingAt: resumption.sequence, size: resumption.offset)
            // In version 3 a record cut short may leave fewer bytes than a frame takes: none fit
            // (readers read past them).
            if header.numbersByPlace && resumption.offset < JournalRecord.frameHeaderSize {
                return placeholders == nil ? nil : "placeholders fit in \(resumption.offset) bytes"
            }
            guard let placeholders
            else { return "no placeholders fit the \(resumption.offset) bytes before the resumption" }
            let records = placeholders.withUnsafeBytes { JournalRecord.wholeRecords(in: $0, header: header) }
            guard let records, records.allSatisfy({ $0 == .lost }) else {
                return "placeholders for \(resumption.offset) bytes do not decode"
            }
            let filled = placeholders.count
            return filled == resumption.offset ? nil : "placeholders fill \(filled) of \(resumption.offset) bytes"
        }
    }

    /// Decodes `bytes` as records of a segment with `header`; returns a description of a broken
    /// property, or `nil`.
    private static func checkFrames(_ bytes: [UInt8], in header: SegmentHeader) -> String? {
        // Frames are checksummed, so mutations rarely reach the payload decoders: also try
        // the bytes re-framed with a length and checksum that fit them.
        if bytes.count >= JournalRecord.frameHeaderSize,
            bytes.count - JournalRecord.frameHeaderSize <= JournalRecord.maximumPayloadSize
        {
            var framed = ByteWriter()
            framed.append(bytes: bytes)
            framed.set(UInt32(bytes.count - JournalRecord.frameHeaderSize), at: 4)
            let crc = framed.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4...])) }
            framed.set(CRC32C.mask(crc), at: 0)
            let frame = framed.withUnsafeBytes { JournalRecord.decodeFrame($0, at: 0, in: header) }
            if frame == .incomplete { return "a whole re-framed record decoded as incomplete" }
        }
        if let problem = checkResumption(bytes, in: header) { return problem }
        return bytes.withUnsafeBytes { raw -> String? in
            var offset = 0
            while offset < raw.count {
                guard
                    case .record(let record, let sequence, let size) = JournalRecord.decodeFrame(
                        raw, at: offset, in: header)
                else { return nil }
                guard size > 0, offset + size <= raw.count else { return "frame size \(size) at \(offset)" }
                if case .unknown = record {
                } else {
                    // What decodes must encode to something that decodes the same, in the same place.
                    var writer = ByteWriter()
                    record.encode(mark: header.mark(forSequence: sequence), into: &writer)
                    let base = Int64(SegmentHeader.size + offset)
                    let again = writer.withUnsafeBytes {
                        JournalRecord.decodeFrame($0, at: 0, in: header, base: base)
                    }
                    guard case .record(record, sequence, _) = again else { return "re-encoding changed \(record)" }
                }
                offset += size
            }
            return nil
        }
    }

    /// Decodes `bytes`; returns a description of a broken property, or `nil`. Bad input must
    /// make a decoder say so, never crash, hang, or allocate what a length field claims.
    package func check(_ bytes: [UInt8]) -> String? {
        switch self {
        case .journalFrame:
            for header in Self.segments {
                if let problem = Self.checkFrames(bytes, in: header) { return "version \(header.major): \(problem)" }
            }
            return nil
        case .segmentHeader:
            guard let header = try? bytes.withUnsafeBytes({ try SegmentHeader.decode($0) }) else { return nil }
            return header.encoded().withUnsafeBytes({ try? SegmentHeader.decode($0) }) == header
                ? nil : "segment header"
        case .manifest:
            var visited = 0
            guard
                let header = try? bytes.withUnsafeBytes({ raw in try ManifestCoding.decode(raw) { _, _ in visited += 1 }
                    })
            else { return nil }
            return UInt64(visited) == header.entryCount ? nil : "manifest visited \(visited) of \(header.entryCount)"
        case .blobHeader:
            guard let header = try? bytes.withUnsafeBytes({ try BlobHeader.decode($0) }) else { return nil }
            let again = header.encoded().withUnsafeBytes { try? BlobHeader.decode($0) }
            return again == header ? nil : "blob header re-encoding"
        case .formatFile:
            guard let version = try? FormatVersion.decode(bytes) else { return nil }
            return (try? FormatVersion.decode(version.encoded())) == version ? nil : "format file re-encoding"
        case .configFile:
            let defaults = ConfigurationFile(sizeLimit: 1, defaultExpirySeconds: nil, entryLimit: 0)
            guard let file = try? ConfigurationFile.decode(bytes, defaults: defaults) else { return nil }
            return (try? ConfigurationFile.decode(file.encoded(), defaults: defaults)) == file
                ? nil : "config re-encoding"
        case .storedHTTP:
            guard let stored = StoredHTTP(bytes) else { return nil }
            return StoredHTTP(stored.encoded()) == stored ? nil : "stored HTTP re-encoding"
        case .httpText:
            let text = String(decoding: bytes, as: UTF8.self)
            if let date = HTTPDate.parse(text), HTTPDate.parse(HTTPDate.format(date)) != date {
                return "date \(text.debugDescription) does not survive formatting"
            }
            _ = CacheControl(text)
            _ = CacheEngine.varyNames(text)
            _ = HTTPExchange.weakMatch(text, "\"x\"")
            if let range = PartialContent.ContentRange(text), PartialContent.ContentRange(range.description) != range {
                return "Content-Range \(text.debugDescription) does not survive formatting"
            }
            // Lines as the Content-Range fields of a stored part: what parses formats back the same.
            let fields = HTTPHeaders(text.split(separator: "\n").map { ("Content-Range", String($0)) })
            for size in [0, 5, 8] {
                guard let held = PartialContent.Ranges(fields, bodySize: size) else { continue }
                let again = HTTPHeaders(held.fields.map { ("Content-Range", $0.description) })
                if PartialContent.Ranges(again, bodySize: size) != held {
                    return "stored parts \(text.debugDescription) do not survive formatting"
                }
            }
            if case .slice(let bytes) = ByteRange.answer(text, length: 1000), bytes.isEmpty || bytes.upperBound > 1000 {
                return "Range \(text.debugDescription) sliced \(bytes) of 1000 bytes"
            }
            // A list's members, normalised, are normal; Set-Cookie fields taken apart survive a join.
            let members = FieldList.normalisedMembers(text)
            if members.map({ FieldList.normalisingWhitespace(Substring($0)) }) != members {
                return "the members of \(text.debugDescription) are not normal"
            }
            let cookies = TransportResponse.setCookieFields(joined: text)
            if TransportResponse.setCookieFields(joined: cookies.joined(separator: ", ")) != cookies {
                return "the Set-Cookie fields of \(text.debugDescription) do not survive a join"
            }
            return nil
        case .httpResponse:
            // What a server sent the plain connection: a response or a refusal, never a crash,
            // and never more body than bytes; and the same however the reads cut the bytes.
            let url = URL(string: "http://example.com/fuzz")!
            let whole = Result { try IdentityConnection.parse([bytes[...]], method: "GET", url: url) }
            let cut = Result { try IdentityConnection.parse(Self.pieces(of: bytes), method: "GET", url: url) }
            if Self.outcome(whole) != Self.outcome(cut) {
                return "read whole: \(Self.outcome(whole)); read in pieces: \(Self.outcome(cut))"
            }
            guard case .success(let response) = whole else { return nil }
            let body = response.body.count
            return body <= bytes.count ? nil : "a body of \(body) bytes from \(bytes.count)"
        }
    }

    /// `bytes` cut into pieces of 1 to 16 bytes, as reads might deliver them; the cuts follow
    /// from the bytes, so a failing input fails again.
    private static func pieces(of bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var state = bytes.reduce(UInt64(0x9E37_79B9_7F4A_7C15)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
        var pieces: [ArraySlice<UInt8>] = []
        var start = 0
        while start < bytes.count {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let end = min(bytes.count, start + 1 + Int(state >> 60))
            pieces.append(bytes[start..<end])
            start = end
        }
        return pieces
    }

    /// What a parse came to, to compare: the response's status, fields and body, or the error.
    private static func outcome(_ result: Result<TransportResponse, any Error>) -> String {
        switch result {
        case .success(let response): "\(response.status) \(Array(response.headers)) \(Array(response.body))"
        case .failure(let error): "\((error as? URLError)?.code.rawValue ?? 0) \(type(of: error))"
        }
    }
}
