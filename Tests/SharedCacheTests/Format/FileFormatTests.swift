import Testing

@testable import SharedCache

@Suite("Manifest, blob header, format and config files")
struct FileFormatTests {
    static func sampleIndex(_ count: Int) -> Index {
        var index = Index()
        for number in 0..<count {
            index.insert(
                IndexEntry(
                    location: BodyLocation(blobID: UInt64(number + 1)), bodySize: UInt64(number * 10),
                    storedAt: Int64(number),
                    expiresAt: number.isMultiple(of: 2) ? .max : Int64(number + 100), lastAccess: Int64(number + 5)),
                for: KeyHash(key: "key \(number)"))
        }
        return index
    }

    static func encodeManifest(_ index: Index) -> [UInt8] {
        ManifestCoding.encode(
            ManifestCoding.Header(generation: 3, lastSequence: 77, entryCount: UInt64(index.count), createdAt: 5),
            entries: Array(index))
    }

    static func decodeManifest(_ bytes: [UInt8]) throws -> (ManifestCoding.Header, [KeyHash: IndexEntry]) {
        var entries: [KeyHash: IndexEntry] = [:]
        let header = try bytes.withUnsafeBytes { raw in
            try ManifestCoding.decode(raw) { entries[$0] = $1 }
        }
        return (header, entries)
    }

    @Test func manifestRoundTrips() throws {
        let index = Self.sampleIndex(100)
        let bytes = Self.encodeManifest(index)
        #expect(bytes.count == ManifestCoding.headerSize + 100 * ManifestCoding.entrySize + 4)
        let (header, entries) = try Self.decodeManifest(bytes)
        #expect(header == ManifestCoding.Header(generation: 3, lastSequence: 77, entryCount: 100, createdAt: 5))
        #expect(entries == Dictionary(uniqueKeysWithValues: index.map { ($0.hash, $0.entry) }))
    }

    /// A header claiming more entries than an index can hold is corrupt (it would not fit the
    /// index's slots), not a size to reserve.
    @Test func aManifestClaimingTooManyEntriesIsCorrupt() throws {
        let limit = ManifestCoding.maximumEntryCount
        for (count, accepted) in [(limit, true), (limit + 1, false)] {
            let header = ManifestCoding.encodeHeader(
                ManifestCoding.Header(generation: 1, lastSequence: 0, entryCount: count, createdAt: 0))
            let decoded = try? header.withUnsafeBytes { try ManifestCoding.decodeHeader($0) }
            #expect((decoded != nil) == accepted, "entry count \(count)")
        }
    }

    /// sharedcache(5): a manifest of the wrong size is corrupt as a whole.
    @Test func truncatedManifestIsRejected() {
        let bytes = Self.encodeManifest(Self.sampleIndex(10))
        for cut in [0, 3, 30, 63, 64, 100, bytes.count - 1] {
            #expect(throws: FormatError.self, "cut at \(cut)") { try Self.decodeManifest(Array(bytes[..<cut])) }
        }
        #expect(throws: FormatError.truncated) { try Self.decodeManifest(bytes + [0]) }
    }

    @Test func flippedBitInManifestIsRejected() {
        let bytes = Self.encodeManifest(Self.sampleIndex(10))
        for position in stride(from: 0, to: bytes.count, by: 7) {
            var damaged = bytes
            damaged[position] ^= 0x10
            #expect(throws: FormatError.self, "byte \(position)") { try Self.decodeManifest(damaged) }
        }
    }

    /// sharedcache(5), "Versions": a version 1 manifest has 72-byte entries with a blob ID.
    @Test func versionOneManifestDecodes() throws {
        var entries = ByteWriter()
        entries.append(KeyHash(key: "a"))
        entries.append(UInt64(0x42))  // blob-id:u64
        entries.append(UInt64(10))
        entries.append(Int64(1))
        entries.append(Int64.max)
        entries.append(Int64(3))
        var writer = ByteWriter()
        writer.append(bytes: ManifestCoding.magic)
        writer.append(UInt16(1))
        writer.append(UInt16(0))
        writer.append(UInt64(2))
        writer.append(UInt64(9))
        writer.append(UInt64(1))
        writer.append(UInt32(72))
        writer.append(UInt32(0))
        writer.append(Int64(5))
        writer.append(bytes: repeatElement(UInt8(0), count: 12))
        writer.appendChecksum()
        writer.append(bytes: entries.bytes)
        writer.append(CRC32C.mask(entries.bytes.withUnsafeBytes { CRC32C.checksum($0) }))
        let (header, decoded) = try Self.decodeManifest(writer.bytes)
        #expect(header.major == 1 && header.lastSequence == 9)
        #expect(
            decoded[KeyHash(key: "a")]
                == IndexEntry(
                    location: BodyLocation(blobID: 0x42), bodySize: 10, storedAt: 1, expiresAt: .max, lastAccess: 3))
    }

    @Test func newerManifestMajorVersionIsRefused() {
        var bytes = Self.encodeManifest(Self.sampleIndex(1))
        let newer = FormatVersion.current.major + 1
        bytes[4] = UInt8(newer)
        #expect(throws: FormatError.unsupportedVersion(major: newer)) { try Self.decodeManifest(bytes) }
    }

    @Test func blobHeaderRoundTripsAndChecksItself() throws {
        let header = BlobHeader(
            bodySize: 99, bodyChecksum: 0xDEAD_BEEF, storedAt: 1, expiresAt: .max, keyHash: KeyHash(key: "k\0../x"),
            key: Array("k\0../x".utf8), etag: Array("W/\"1\"".utf8), lastModified: Array("Tue".utf8),
            attributes: [1, 2, 3])
        let bytes = header.encoded()
        #expect(bytes.count == header.encodedSize)
        #expect(try bytes.withUnsafeBytes { try BlobHeader.decode($0) } == header)
        for position in 0..<bytes.count {
            var damaged = bytes
            damaged[position] ^= 0x01
            #expect(throws: FormatError.self, "byte \(position)") {
                try damaged.withUnsafeBytes { try BlobHeader.decode($0) }
            }
        }
    }

    @Test func formatFileVersions() throws {
        #expect(try FormatVersion.decode(FormatVersion.current.encoded()) == .current)
        #expect(try FormatVersion.decode(Array("sharedcache 1.7\n".utf8)) == FormatVersion(major: 1, minor: 7))
        #expect(try FormatVersion.decode(Array("sharedcache 2.3\n".utf8)) == FormatVersion(major: 2, minor: 3))
        #expect(try FormatVersion.decode(Array("sharedcache 3.4\n".utf8)) == FormatVersion(major: 3, minor: 4))
        #expect(throws: FormatError.unsupportedVersion(major: 4)) {
            try FormatVersion.decode(Array("sharedcache 4.0\n".utf8))
        }
        #expect(throws: FormatError.badMagic) { try FormatVersion.decode(Array("something else\n".utf8)) }
        #expect(throws: FormatError.self) { try FormatVersion.decode(Array("sharedcache one\n".utf8)) }
    }

    @Test func configFileParsesAndKeepsDefaults() throws {
        let defaults = ConfigurationFile(sizeLimit: 1, defaultExpirySeconds: 2)
        let parsed = try ConfigurationFile.decode(
            Array("# comment\nsize-limit = 500  # bytes\n\nfuture-setting = yes\n".utf8), defaults: defaults)
        #expect(parsed == ConfigurationFile(sizeLimit: 500, defaultExpirySeconds: 2))
        let never = try ConfigurationFile.decode(Array("default-expiry=never\n".utf8), defaults: defaults)
        #expect(never.defaultExpirySeconds == nil)
        #expect(try ConfigurationFile.decode(defaults.encoded(), defaults: .init(sizeLimit: 0)) == defaults)
        #expect(throws: FormatError.self) {
            try ConfigurationFile.decode(Array("size-limit = lots\n".utf8), defaults: defaults)
        }
        #expect(throws: FormatError.self) {
            try ConfigurationFile.decode(Array("no equals sign\n".utf8), defaults: defaults)
        }
    }

    /// A directory stores for several users only if its `config` says so: one made before the
    /// setting existed is private whatever the process asks, so nothing stored for one user is
    /// served to many.
    @Test func configFileIsSharedOnlyWhenItSaysSo() throws {
        let shared = ConfigurationFile(sizeLimit: 1, storesForSeveralUsers: true)
        #expect(try ConfigurationFile.decode(shared.encoded(), defaults: .init(sizeLimit: 0)) == shared)
        #expect(try !ConfigurationFile.decode(Array("size-limit = 5\n".utf8), defaults: shared).storesForSeveralUsers)
        #expect(throws: FormatError.self) {
            try ConfigurationFile.decode(Array("http-audience = everyone\n".utf8), defaults: shared)
        }
    }
}
