/// Pack segments, `packs/<pack>`: small bodies appended one after another by the one process
/// that owns the segment.
///
/// ```
/// pack-segment = pack-header *(record padding)
/// pack-header  = "SCPK" major:u16 minor:u16 pack:u64 created-at:i64
///                reserved:u32 header-crc:u32        ; 32 bytes; crc of the 28 before it
/// record       = "SCPR" length:u32 check:u32 header body
///                ; length = bytes of the whole record, these 12 included (not the padding)
///                ; check  = masked CRC32C of pack:u64 position:u64 length:u32 header-crc:u32,
///                ;          where position is the record's offset in the segment and
///                ;          header-crc the last 4 bytes of its header
///                ; header = a body header (BlobHeader), whose checksums cover itself and the body
/// padding      = zeros up to the next multiple of 8 bytes
/// ```
/// The check ties a record to its place: the same bytes anywhere else (another segment, another
/// offset, a copy) fail it. Records are found through the journal, never by scanning: a removed
/// entry's record stays until its whole segment goes. Integers are little-endian.
package enum PackRecord {
    package static let segmentMagic: [UInt8] = Array("SCPK".utf8)
    package static let recordMagic: [UInt8] = Array("SCPR".utf8)
    package static let segmentHeaderSize = 32
    /// Bytes before the body header: magic, length, check.
    package static let prefixSize = 12
    /// Records start at multiples of this.
    package static let alignment = 8

    /// The 32-byte header of pack `pack`.
    package static func segmentHeader(pack: UInt64, createdAt: Int64) -> [UInt8] {
        var writer = ByteWriter(capacity: segmentHeaderSize)
        writer.append(bytes: segmentMagic)
        writer.append(FormatVersion.current.major)
        writer.append(FormatVersion.current.minor)
        writer.append(pack)
        writer.append(createdAt)
        writer.append(UInt32(0))
        writer.appendChecksum()
        return writer.bytes
    }

    /// Whether `bytes` begin with the header of pack `pack`: its magic, its number and its
    /// checksum (any version: an older one's segments are read too).
    package static func isSegmentHeader(_ bytes: UnsafeRawBufferPointer, of pack: UInt64) -> Bool {
        var reader = ByteReader(bytes)
        do {
            guard try reader.readBytes(segmentMagic.count).elementsEqual(segmentMagic) else { return false }
            _ = try reader.read(UInt16.self)
            _ = try reader.read(UInt16.self)
            guard try reader.read(UInt64.self) == pack else { return false }
            _ = try reader.read(Int64.self)
            _ = try reader.read(UInt32.self)
            try reader.verifyChecksum()
            return true
        } catch {
            return false
        }
    }

    /// The record's length for a body header of `headerSize` bytes and a body of `bodySize`.
    package static func length(headerSize: Int, bodySize: Int) -> Int { prefixSize + headerSize + bodySize }

    /// Where the record after one at `position` of `length` bytes starts.
    package static func next(after position: UInt64, length: UInt32) -> UInt64 {
        let end = position + UInt64(length)
        return (end + UInt64(alignment - 1)) & ~UInt64(alignment - 1)
    }

    /// The record holding `header` and `body` at `position` in pack `pack`, and the padding
    /// after it: the bytes a writer appends, encoded into one buffer.
    package static func encoded(
        _ header: BlobHeader, body: UnsafeRawBufferPointer, pack: UInt64, position: UInt64
    ) -> [UInt8] {
        var writer = ByteWriter(capacity: encodedSize(header, bodySize: body.count, at: position))
        encode(header, body: body, pack: pack, position: position, into: &writer)
        return writer.bytes
    }

    /// How many bytes ``encode(_:body:pack:position:into:)`` appends: the record and its padding.
    package static func encodedSize(_ header: BlobHeader, bodySize: Int, at position: UInt64) -> Int {
        let length = UInt32(length(headerSize: header.encodedSize, bodySize: bodySize))
        return Int(next(after: position, length: length) - position)
    }

    /// Appends the record holding `header` and `body` at `position` in pack `pack`, and the
    /// padding after it, to `writer`.
    package static func encode(
        _ header: BlobHeader, body: UnsafeRawBufferPointer, pack: UInt64, position: UInt64,
        into writer: inout ByteWriter
    ) {
        let start = writer.count
        let length = UInt32(length(headerSize: header.encodedSize, bodySize: body.count))
        writer.append(bytes: recordMagic)
        writer.append(length)
        writer.append(UInt32(0))  // the check, once the header's checksum is known
        header.encode(into: &writer)
        let headerChecksum = writer.withUnsafeBytes { Self.headerChecksum($0) }
        writer.set(check(pack: pack, position: position, length: length, headerChecksum: headerChecksum), at: start + 8)
        writer.append(bytes: body)
        writer.append(zeros: Int(next(after: position, length: length) - position) - (writer.count - start))
    }

    /// The last four bytes of an encoded body header (here, of anything that ends with one): its
    /// own masked checksum.
    private static func headerChecksum(_ header: UnsafeRawBufferPointer) -> UInt32 {
        UInt32(littleEndian: header.loadUnaligned(fromByteOffset: header.count - 4, as: UInt32.self))
    }

    /// The masked CRC32C of pack, position, length and header checksum, from 24 bytes on the
    /// stack: this runs on every read.
    private static func check(pack: UInt64, position: UInt64, length: UInt32, headerChecksum: UInt32) -> UInt32 {
        var fields = (pack.littleEndian, position.littleEndian, length.littleEndian, headerChecksum.littleEndian)
        return withUnsafeBytes(of: &fields) { raw in
            CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[..<24])))
        }
    }

    /// Checks the start of the record at `location`: its prefix and body header, which `bytes`
    /// begins with (the body may follow, or have been read elsewhere). Does not check the body.
    ///
    /// - Returns: where the header's fields are, and its bytes (the body follows them).
    package static func decode(_ bytes: UnsafeRawBufferPointer, at location: BodyLocation) throws(FormatError)
        -> (header: BlobHeader.Layout, headerBytes: UnsafeRawBufferPointer)
    {
        var reader = ByteReader(bytes)
        try reader.expectMagic(recordMagic)
        let length: UInt32 = try reader.read()
        guard length == location.length else { throw .invalidField("record length \(length)") }
        let stored: UInt32 = try reader.read()
        let rest = UnsafeRawBufferPointer(rebasing: bytes[prefixSize...])
        let headerSize = try BlobHeader.declaredSize(in: rest)
        guard headerSize <= rest.count else { throw .truncated }
        let headerBytes = UnsafeRawBufferPointer(rebasing: rest[..<headerSize])
        let expected = check(
            pack: location.pack, position: location.position, length: length,
            headerChecksum: headerChecksum(headerBytes))
        guard stored == expected else { throw .checksumMismatch }
        let header = try BlobHeader.Layout(checking: headerBytes)
        let bodySize = Int(length) - prefixSize - headerSize
        guard bodySize >= 0, header.bodySize == UInt64(bodySize) else {
            throw .invalidField("body size \(header.bodySize)")
        }
        return (header, headerBytes)
    }
}
