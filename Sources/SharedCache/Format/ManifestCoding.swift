/// The manifest: a checkpoint of every live entry and the journal position it covers.
///
/// ```
/// manifest = header *entry trailer
/// header   = "SCMF" major:u16 minor:u16
///            generation:u64      ; replay starts at the beginning of this journal segment
///            last-sequence:u64   ; every record up to this sequence number is folded in
///            entry-count:u64
///            entry-size:u32      ; 72 in version 1.0; readers ignore bytes past the fields they know
///            reserved:u32
///            created-at:i64      ; milliseconds since the Unix epoch
///            reserved:12
///            header-crc:u32      ; masked CRC32C of the 60 bytes before it
/// entry    = key-hash:32 blob-id:u64 body-size:u64 stored-at:i64 expires-at:i64 last-access:i64
///            ; in no particular order, each key-hash at most once
/// trailer  = entries-crc:u32     ; masked CRC32C of all entry bytes
/// ```
/// A manifest whose size is not exactly header + count × entry-size + 4, or whose checksums do
/// not match, is corrupt as a whole; the cache then rebuilds it from the blob headers.
enum ManifestCoding {
    static let magic: [UInt8] = Array("SCMF".utf8)
    static let headerSize = 64
    static let entrySize = 72

    struct Header: Equatable, Sendable {
        var generation: UInt64
        var lastSequence: UInt64
        var entryCount: UInt64
        var createdAt: Int64
    }

    static func encode(_ header: Header, entries: some Collection<(KeyHash, IndexEntry)>) -> [UInt8] {
        var writer = ByteWriter(capacity: headerSize + entries.count * entrySize + 4)
        writer.append(bytes: magic)
        writer.append(FormatVersion.current.major)
        writer.append(FormatVersion.current.minor)
        writer.append(header.generation)
        writer.append(header.lastSequence)
        writer.append(UInt64(entries.count))
        writer.append(UInt32(entrySize))
        writer.append(UInt32(0))
        writer.append(header.createdAt)
        writer.append(bytes: repeatElement(UInt8(0), count: 12))
        writer.appendChecksum()
        for (hash, entry) in entries {
            writer.append(hash)
            writer.append(entry.blobID)
            writer.append(entry.bodySize)
            writer.append(entry.storedAt)
            writer.append(entry.expiresAt)
            writer.append(entry.lastAccess)
        }
        writer.appendChecksum(from: headerSize)
        return writer.bytes
    }

    /// Decodes and checks a whole manifest, calling `visit` for each entry in order.
    static func decode(
        _ bytes: UnsafeRawBufferPointer, reserve: (Int) -> Void = { _ in }, visit: (KeyHash, IndexEntry) -> Void
    ) throws(FormatError) -> Header {
        var reader = ByteReader(bytes)
        try reader.expectMagic(magic)
        let major: UInt16 = try reader.read()
        guard major <= FormatVersion.current.major else { throw .unsupportedVersion(major: major) }
        _ = try reader.read(UInt16.self)
        let generation: UInt64 = try reader.read()
        let lastSequence: UInt64 = try reader.read()
        let count: UInt64 = try reader.read()
        let storedEntrySize = Int(try reader.read(UInt32.self))
        _ = try reader.read(UInt32.self)
        let createdAt: Int64 = try reader.read()
        _ = try reader.readBytes(12)
        try reader.verifyChecksum()

        guard storedEntrySize >= entrySize, count <= UInt64(Int.max / storedEntrySize) else {
            throw .invalidField("entry size \(storedEntrySize)")
        }
        guard bytes.count == headerSize + Int(count) * storedEntrySize + 4 else { throw .truncated }
        var entriesReader = ByteReader(bytes, offset: headerSize)
        _ = try entriesReader.readBytes(Int(count) * storedEntrySize)
        try entriesReader.verifyChecksum(from: headerSize)

        reserve(Int(count))
        for index in 0..<Int(count) {
            var entry = ByteReader(bytes, offset: headerSize + index * storedEntrySize)
            let hash = try entry.readHash()
            visit(
                hash,
                IndexEntry(
                    blobID: try entry.read(), bodySize: try entry.read(), storedAt: try entry.read(),
                    expiresAt: try entry.read(), lastAccess: try entry.read()))
        }
        return Header(generation: generation, lastSequence: lastSequence, entryCount: count, createdAt: createdAt)
    }
}
