/// The self-describing header of every body: at the start of its blob file, or inside its
/// pack record (see ``PackRecord``).
///
/// ```
/// blob   = header body
/// header = "SCBL"                 ; magic
///          version:u16 flags:u16  ; 1, the same in format versions 1 and 2; flags reserved, 0
///          header-size:u32        ; bytes of the whole header, its checksum included
///          body-crc:u32           ; masked CRC32C of the body
///          body-size:u64
///          stored-at:i64          ; milliseconds since the Unix epoch
///          expires-at:i64         ; milliseconds; INT64_MAX means never
///          key-hash:32            ; SHA-256 of the key
///          key-size:u32 etag-size:u16 last-modified-size:u16 attributes-size:u32
///          key etag last-modified attributes
///          header-crc:u32         ; masked CRC32C of every header byte before it
/// body   = body-size bytes
/// ```
/// All integers are little-endian. The blob, not the journal, is the truth: a reader checks
/// the header checksum, that the key hashes to `key-hash` and is the key it asked for, the body
/// size and the body checksum before it returns a byte.
package struct BlobHeader: Equatable, Sendable {
    package static let magic: [UInt8] = Array("SCBL".utf8)
    /// The header's own version: unchanged since format version 1.
    package static let version: UInt16 = 1
    package static let fixedSize = 84
    package static let maximumKeySize = 64 * 1024
    package static let maximumFieldSize = Int(UInt16.max)

    package var bodySize: UInt64
    package var bodyChecksum: UInt32
    package var storedAt: Int64
    package var expiresAt: Int64
    package var keyHash: KeyHash
    package var key: [UInt8]
    package var etag: [UInt8]
    package var lastModified: [UInt8]
    /// Opaque bytes for layers above the store (the HTTP client keeps response headers here).
    package var attributes: [UInt8]

    package init(bodySize: UInt64, bodyChecksum: UInt32, storedAt: Int64, expiresAt: Int64, keyHash: KeyHash, key: [UInt8], etag: [UInt8], lastModified: [UInt8], attributes: [UInt8]) {
        self.bodySize = bodySize
        self.bodyChecksum = bodyChecksum
        self.storedAt = storedAt
        self.expiresAt = expiresAt
        self.keyHash = keyHash
        self.key = key
        self.etag = etag
        self.lastModified = lastModified
        self.attributes = attributes
    }

    /// Size of the encoded header, its checksum included.
    package var encodedSize: Int {
        Self.fixedSize + key.count + etag.count + lastModified.count + attributes.count + 4
    }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: encodedSize)
        encode(into: &writer)
        return writer.bytes
    }

    /// Appends the encoded header (``encodedSize`` bytes) to `writer`.
    package func encode(into writer: inout ByteWriter) {
        let start = writer.count
        writer.append(bytes: Self.magic)
        writer.append(Self.version)
        writer.append(UInt16(0))
        writer.append(UInt32(encodedSize))
        writer.append(CRC32C.mask(bodyChecksum))
        writer.append(bodySize)
        writer.append(storedAt)
        writer.append(expiresAt)
        writer.append(keyHash)
        writer.append(UInt32(key.count))
        writer.append(UInt16(etag.count))
        writer.append(UInt16(lastModified.count))
        writer.append(UInt32(attributes.count))
        writer.append(bytes: key)
        writer.append(bytes: etag)
        writer.append(bytes: lastModified)
        writer.append(bytes: attributes)
        writer.appendChecksum(from: start)
    }

    /// How many bytes the header occupies, read from its fixed part; lets a reader that fetched
    /// too few bytes know how many more it needs.
    package static func declaredSize(in bytes: UnsafeRawBufferPointer) throws(FormatError) -> Int {
        var reader = ByteReader(bytes)
        try reader.expectMagic(magic)
        let major: UInt16 = try reader.read()
        guard major == version else { throw .unsupportedVersion(major: major) }
        _ = try reader.read(UInt16.self)
        let size = Int(try reader.read(UInt32.self))
        guard size >= fixedSize + 4, size <= fixedSize + maximumKeySize + 2 * maximumFieldSize + (1 << 24) else {
            throw .invalidField("header size \(size)")
        }
        return size
    }

    /// Decodes and checks a header (not the body) from the start of `bytes`.
    package static func decode(_ bytes: UnsafeRawBufferPointer) throws(FormatError) -> BlobHeader {
        BlobHeader(try Layout(checking: bytes), in: bytes)
    }

    /// The header `layout` describes, its fields copied out of `bytes`.
    package init(_ layout: Layout, in bytes: UnsafeRawBufferPointer) {
        self.init(
            bodySize: layout.bodySize, bodyChecksum: layout.bodyChecksum, storedAt: layout.storedAt,
            expiresAt: layout.expiresAt, keyHash: layout.keyHash, key: Array(bytes[layout.key]),
            etag: Array(bytes[layout.etag]), lastModified: Array(bytes[layout.lastModified]),
            attributes: Array(bytes[layout.attributes]))
    }

    /// A header checked where it lies: its fixed fields, and where its variable ones are in the
    /// bytes it was checked in. A read compares the key in place and copies only what it
    /// returns, where ``decode(_:)`` would copy every field into an array of its own.
    package struct Layout {
        /// Bytes of the whole header, its checksum included.
        package var size: Int
        package var bodySize: UInt64
        package var bodyChecksum: UInt32
        package var storedAt: Int64
        package var expiresAt: Int64
        package var keyHash: KeyHash
        package var key: Range<Int>
        package var etag: Range<Int>
        package var lastModified: Range<Int>
        package var attributes: Range<Int>

        /// Checks the header at the start of `bytes` (not the body) and finds its fields.
        package init(checking bytes: UnsafeRawBufferPointer) throws(FormatError) {
            size = try BlobHeader.declaredSize(in: bytes)
            guard bytes.count >= size else { throw .truncated }
            // The size is at least the fixed part's and is all there: every load below is in
            // bounds, so the fields are read at their offsets without a check each (this runs
            // on every get).
            func load<T: FixedWidthInteger>(_ offset: Int, as type: T.Type) -> T {
                T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
            }
            bodyChecksum = CRC32C.unmask(load(12, as: UInt32.self))
            bodySize = load(16, as: UInt64.self)
            storedAt = load(24, as: Int64.self)
            expiresAt = load(32, as: Int64.self)
            keyHash = KeyHash(bytes: UnsafeRawBufferPointer(rebasing: bytes[40..<72]))
            let keySize = Int(load(72, as: UInt32.self))
            let etagSize = Int(load(76, as: UInt16.self))
            let lastModifiedSize = Int(load(78, as: UInt16.self))
            let attributesSize = Int(load(80, as: UInt32.self))
            guard fixedSize + keySize + etagSize + lastModifiedSize + attributesSize + 4 == size else {
                throw .invalidField("header field sizes do not add up to the header size")
            }
            key = fixedSize..<(fixedSize + keySize)
            etag = key.upperBound..<(key.upperBound + etagSize)
            lastModified = etag.upperBound..<(etag.upperBound + lastModifiedSize)
            attributes = lastModified.upperBound..<(lastModified.upperBound + attributesSize)
            let covered = UnsafeRawBufferPointer(rebasing: bytes[..<(size - 4)])
            guard CRC32C.unmask(load(size - 4, as: UInt32.self)) == CRC32C.checksum(covered) else {
                throw .checksumMismatch
            }
        }

        /// Whether the header, checked in `bytes`, holds `key`: its bytes compared in place.
        package func holds(key: String, in bytes: UnsafeRawBufferPointer) -> Bool {
            var key = key
            let stored = UnsafeRawBufferPointer(rebasing: bytes[self.key])
            return key.withUTF8 { UnsafeRawBufferPointer($0).hasSameBytes(as: stored) }
        }
    }
}
