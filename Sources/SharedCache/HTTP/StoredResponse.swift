/// What the HTTP client keeps in an entry's attributes: a response, or the list of variants
/// stored for a URL whose responses vary.
///
/// ```
/// attributes = "H1" kind:u8 payload
/// kind 1     = status:u16 lifetime:i64 flags:u8 headers vary-values   ; a stored response
/// kind 2     = name-count:u16 {name-size:u16 name} key-count:u32 {key-size:u32 key}  ; variants
/// headers    = count:u16 {name-size:u16 name value-size:u32 value}
/// vary-values = headers
/// ```
/// `lifetime` is how long the response stays fresh, in milliseconds, counted from the entry's
/// stored-at (which a 304 moves); flag 1 is must-revalidate, flag 2 that a shared cache stored
/// it (by a shared cache's rules, for several users). `vary-values` are the request's
/// values of the fields the response varies on, which select this variant. A URL's stored
/// parts are a kind 1 response with status 206 (``PartialContent``).
enum StoredHTTP: Equatable {
    case response(StoredResponse)
    case variants(VariantList)

    private static let magic: [UInt8] = Array("H1".utf8)

    func encoded() -> [UInt8] {
        var writer = ByteWriter()
        writer.append(bytes: Self.magic)
        switch self {
        case .response(let response):
            writer.append(UInt8(1))
            writer.append(UInt16(clamping: response.status))
            writer.append(response.lifetime)
            writer.append(UInt8(response.mustRevalidate ? 1 : 0) | (response.audience == .shared ? 2 : 0))
            Self.encode(response.headers, into: &writer)
            Self.encode(response.varyValues, into: &writer)
        case .variants(let list):
            writer.append(UInt8(2))
            writer.append(UInt16(list.names.count))
            for name in list.names {
                writer.append(UInt16(name.utf8.count))
                writer.append(bytes: name.utf8)
            }
            writer.append(UInt32(list.keys.count))
            for key in list.keys {
                writer.append(UInt32(key.utf8.count))
                writer.append(bytes: key.utf8)
            }
        }
        return writer.bytes
    }

    /// `nil` for attributes the HTTP client did not write (a plain put) or cannot read.
    init?(_ attributes: [UInt8]) {
        let decoded = attributes.withUnsafeBytes { raw -> StoredHTTP? in
            var reader = ByteReader(raw)
            return try? Self.decode(&reader)
        }
        guard let decoded else { return nil }
        self = decoded
    }

    private static func decode(_ reader: inout ByteReader) throws(FormatError) -> StoredHTTP {
        try reader.expectMagic(magic)
        switch try reader.read(UInt8.self) {
        case 1:
            let status = Int(try reader.read(UInt16.self))
            let lifetime = try reader.read(Int64.self)
            let flags = try reader.read(UInt8.self)
            return .response(
                StoredResponse(
                    status: status, headers: try decodeHeaders(&reader), lifetime: lifetime,
                    mustRevalidate: flags & 1 != 0, varyValues: try decodeHeaders(&reader),
                    audience: flags & 2 != 0 ? .shared : .private))
        case 2:
            var names: [String] = []
            for _ in 0..<(try reader.read(UInt16.self)) {
                names.append(String(decoding: try reader.readBytes(Int(try reader.read(UInt16.self))), as: UTF8.self))
            }
            var keys: [String] = []
            for _ in 0..<(try reader.read(UInt32.self)) {
                keys.append(String(decoding: try reader.readBytes(Int(try reader.read(UInt32.self))), as: UTF8.self))
            }
            return .variants(VariantList(names: names, keys: keys))
        case let kind:
            throw .invalidField("stored HTTP kind \(kind)")
        }
    }

    private static func encode(_ headers: HTTPHeaders, into writer: inout ByteWriter) {
        writer.append(UInt16(clamping: headers.count))
        for (name, value) in headers.prefix(Int(UInt16.max)) {
            writer.append(UInt16(clamping: name.utf8.count))
            writer.append(bytes: name.utf8.prefix(Int(UInt16.max)))
            writer.append(UInt32(value.utf8.count))
            writer.append(bytes: value.utf8)
        }
    }

    private static func decodeHeaders(_ reader: inout ByteReader) throws(FormatError) -> HTTPHeaders {
        var headers = HTTPHeaders()
        for _ in 0..<(try reader.read(UInt16.self)) {
            let name = String(decoding: try reader.readBytes(Int(try reader.read(UInt16.self))), as: UTF8.self)
            let value = String(decoding: try reader.readBytes(Int(try reader.read(UInt32.self))), as: UTF8.self)
            headers.append(name, value)
        }
        return headers
    }
}

/// A response as stored: what serving it again needs.
struct StoredResponse: Equatable {
    var status: Int
    var headers: HTTPHeaders
    /// Milliseconds of freshness from the entry's stored-at; 0 means revalidate on every use.
    var lifetime: Int64
    var mustRevalidate: Bool
    /// The request's values of the fields named by the response's `Vary`, lowercase names.
    var varyValues: HTTPHeaders
    /// Whose rules stored it: only a cache of the same audience reuses it (a shared cache must
    /// not serve what a private one kept for its user; a private one ignores `s-maxage`).
    var audience: HTTPAudience
}

/// The variants stored for one URL: the fields its responses vary on, and every variant key
/// stored so far (so an invalidation of the URL reaches them all).
struct VariantList: Equatable {
    var names: [String]
    var keys: [String]
}
