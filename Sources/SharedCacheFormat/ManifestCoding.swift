/// The manifest: a checkpoint of every live entry and the journal position it covers.
///
/// ```
/// manifest = header *entry trailer
/// header   = "SCMF" major:u16 minor:u16
///            generation:u64      ; replay starts at the beginning of this journal segment
///            last-sequence:u64   ; every record up to this sequence number is folded in
///            entry-count:u64
///            entry-size:u32      ; 84 in version 2.0 (72 in 1.0); readers ignore bytes past the fields they know
///            reserved:u32
///            created-at:i64      ; milliseconds since the Unix epoch
///            reserved:12
///            header-crc:u32      ; masked CRC32C of the 60 bytes before it
/// entry    = key-hash:32 location body-size:u64 stored-at:i64 expires-at:i64 last-access:i64
///            ; in no particular order, each key-hash at most once
///            ; location: 20 bytes (see BodyLocation); blob-id:u64 in version 1
/// trailer  = entries-crc:u32     ; masked CRC32C of all entry bytes
/// ```
/// A manifest whose size is not exactly header + count × entry-size + 4, or whose checksums do
/// not match, is corrupt as a whole; the cache then rebuilds it from the stored bodies.
/// Version 2 names the file `checkpoint`; version 1 named it `manifest`.
package enum ManifestCoding {
    package static let magic: [UInt8] = Array("SCMF".utf8)
    package static let headerSize = 64
    /// Bytes per entry as this version writes them.
    package static let entrySize = 84

    /// Bytes per entry in format version `major`.
    package static func entrySize(major: UInt16) -> Int { major >= 2 ? entrySize : 72 }
    package static let trailerSize = 4

    package struct Header: Equatable, Sendable {
        package var generation: UInt64
        package var lastSequence: UInt64
        package var entryCount: UInt64
        package var createdAt: Int64
        /// Bytes per entry as stored; at least ``entrySize(major:)``.
        package var storedEntrySize: Int = ManifestCoding.entrySize
        /// The format version the entries are encoded in.
        package var major: UInt16 = FormatVersion.current.major

        package init(
            generation: UInt64, lastSequence: UInt64, entryCount: UInt64, createdAt: Int64,
            storedEntrySize: Int = ManifestCoding.entrySize, major: UInt16 = FormatVersion.current.major
        ) {
            self.generation = generation
            self.lastSequence = lastSequence
            self.entryCount = entryCount
            self.createdAt = createdAt
            self.storedEntrySize = storedEntrySize
            self.major = major
        }

        /// The exact size of a manifest with this header.
        package var fileSize: Int { headerSize + Int(entryCount) * storedEntrySize + trailerSize }
    }

    /// The most entries an index holds (its slots keep 32-bit positions beside 32-bit tags, for
    /// tables of up to 2^32 slots, twice the entries): a header claiming more is corrupt.
    package static let maximumEntryCount: UInt64 = 1 << 31

    // The pieces are separate so a manifest of a million entries can be written and read in
    // chunks, with the entries' checksum carried along, instead of whole in memory.

    package static func encodeHeader(_ header: Header) -> [UInt8] {
        var writer = ByteWriter(capacity: headerSize)
        writer.append(bytes: magic)
        writer.append(FormatVersion.current.major)
        writer.append(FormatVersion.current.minor)
        writer.append(header.generation)
        writer.append(header.lastSequence)
        writer.append(header.entryCount)
        writer.append(UInt32(entrySize))
        writer.append(UInt32(0))
        writer.append(header.createdAt)
        writer.append(bytes: repeatElement(UInt8(0), count: 12))
        writer.appendChecksum()
        return writer.bytes
    }

    package static func encodeEntry(_ hash: KeyHash, _ entry: IndexEntry, into writer: inout ByteWriter) {
        writer.append(hash)
        writer.append(entry.location)
        writer.append(entry.bodySize)
        writer.append(entry.storedAt)
        writer.append(entry.expiresAt)
        writer.append(entry.lastAccess)
    }

    /// The trailer for entries whose bytes have the (unmasked) CRC32C `entriesChecksum`.
    package static func encodeTrailer(entriesChecksum: UInt32) -> [UInt8] {
        var writer = ByteWriter(capacity: trailerSize)
        writer.append(CRC32C.mask(entriesChecksum))
        return writer.bytes
    }

    /// Decodes and checks the 64-byte header.
    package static func decodeHeader(_ bytes: UnsafeRawBufferPointer) throws(FormatError) -> Header {
        var reader = ByteReader(bytes)
        try reader.expectMagic(magic)
        let major: UInt16 = try reader.read()
        guard major <= FormatVersion.current.major else { throw .unsupportedVersion(major: major) }
        guard major >= 1 else { throw .invalidField("version \(major)") }
        _ = try reader.read(UInt16.self)
        let generation: UInt64 = try reader.read()
        let lastSequence: UInt64 = try reader.read()
        let count: UInt64 = try reader.read()
        let storedEntrySize = Int(try reader.read(UInt32.self))
        _ = try reader.read(UInt32.self)
        let createdAt: Int64 = try reader.read()
        _ = try reader.readBytes(12)
        try reader.verifyChecksum()
        guard storedEntrySize >= entrySize(major: major), count <= UInt64(Int.max / 2 / storedEntrySize) else {
            throw .invalidField("entry size \(storedEntrySize)")
        }
        guard count <= maximumEntryCount else { throw .invalidField("entry count \(count)") }
        return Header(
            generation: generation, lastSequence: lastSequence, entryCount: count, createdAt: createdAt,
            storedEntrySize: storedEntrySize, major: major)
    }

    /// Decodes whole entries from `chunk` (a multiple of the stored entry size).
    package static func decodeEntries(
        _ chunk: UnsafeRawBufferPointer, of header: Header, visit: (KeyHash, IndexEntry) -> Void
    ) throws(FormatError) {
        let (storedEntrySize, major) = (header.storedEntrySize, header.major)
        for start in stride(from: 0, to: chunk.count, by: storedEntrySize) {
            var entry = ByteReader(chunk, offset: start)
            let hash = try entry.readHash()
            visit(
                hash,
                IndexEntry(
                    location: try entry.readLocation(major: major), bodySize: try entry.read(), storedAt: try entry.read(),
                    expiresAt: try entry.read(), lastAccess: try entry.read()))
        }
    }

    /// The checksum stored in a trailer.
    package static func decodeTrailer(_ bytes: UnsafeRawBufferPointer) throws(FormatError) -> UInt32 {
        var reader = ByteReader(bytes)
        return CRC32C.unmask(try reader.read())
    }

    /// A whole manifest in memory (tests and small caches).
    package static func encode(_ header: Header, entries: some Collection<(KeyHash, IndexEntry)>) -> [UInt8] {
        var counted = header
        counted.entryCount = UInt64(entries.count)
        var writer = ByteWriter(capacity: counted.fileSize)
        writer.append(bytes: encodeHeader(counted))
        for (hash, entry) in entries { encodeEntry(hash, entry, into: &writer) }
        writer.appendChecksum(from: headerSize)
        return writer.bytes
    }

    /// Decodes and checks a whole manifest in memory, calling `visit` for each entry.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, reserve: (Int) -> Void = { _ in }, visit: (KeyHash, IndexEntry) -> Void
    ) throws(FormatError) -> Header {
        let header = try decodeHeader(UnsafeRawBufferPointer(rebasing: bytes[..<min(bytes.count, headerSize)]))
        guard bytes.count == header.fileSize else { throw .truncated }
        let entries = UnsafeRawBufferPointer(rebasing: bytes[headerSize..<(bytes.count - trailerSize)])
        let stored = try decodeTrailer(UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - trailerSize)...]))
        guard stored == CRC32C.checksum(entries) else { throw .checksumMismatch }
        reserve(Int(header.entryCount))
        try decodeEntries(entries, of: header, visit: visit)
        return header
    }
}
