import Testing

@testable import SharedCache

@Suite("Journal records: framing, torn tails, damage, unknown types")
struct JournalRecordTests {
    static let remover = Remover(processID: 4242, name: "tool")
    static let hash = KeyHash(key: "k")
    static let records: [JournalRecord] = [
        .stored(
            StoredRecord(
                hash: hash, location: BodyLocation(blobID: 0xABCDEF), bodySize: 1234, storedAt: 1_700_000_000_000,
                expiresAt: .max,
                key: Array("k".utf8), etag: Array("\"v1\"".utf8))),
        .removed(
            RemovedRecord(hash: hash, location: BodyLocation(blobID: 0xABCDEF), reason: .expired, remover: remover)),
        .cleared(remover),
        .accessed(AccessedRecord(hash: hash, location: BodyLocation(blobID: 0xABCDEF), accessedAt: 1_700_000_000_500)),
        .freshened(
            FreshenedRecord(
                hash: hash, location: BodyLocation(blobID: 0xABCDEF), storedAt: 1_700_000_001_000, expiresAt: .max)),
        .sealed(nextGeneration: 7),
        .stored(
            StoredRecord(
                hash: hash, location: packed, bodySize: 1000, storedAt: 1, expiresAt: 2, key: Array("k".utf8), etag: [])
        ),
        .moved(MovedRecord(hash: hash, from: packed, to: BodyLocation(pack: 0x9999, position: 32, length: 1100))),
        .retired(pack: 0x1234_5678_9ABC_DEF0),
        .lost,
        .stored(
            StoredRecord(
                hash: hash, location: packed, bodySize: 5, storedAt: 3, expiresAt: 4, key: Array("k".utf8), etag: [],
                writer: remover)),
    ]
    static let packed = BodyLocation(pack: 0x1234_5678_9ABC_DEF0, position: 4096, length: 1100)

    /// A segment of the current version (its records carry its tag and are numbered by place),
    /// and one of version 2 (its records carry consecutive numbers), both numbering from 1.
    static let segment = SegmentHeader(generation: 5, firstSequence: 1, salt: 0xA1B2_C3D4)
    static let versionTwo = SegmentHeader(generation: 5, firstSequence: 1, major: 2)

    /// Frames the records for the start of a segment with `header`: numbered from 1 in version 2.
    static func encode(_ records: [JournalRecord], in header: SegmentHeader = segment) -> [UInt8] {
        var writer = ByteWriter()
        for (index, record) in records.enumerated() {
            record.encode(mark: header.mark(forSequence: UInt64(index + 1)), into: &writer)
        }
        return writer.bytes
    }

    /// The sequence numbers of `records` at the start of a segment with `header`: consecutive
    /// before version 3, the place of each one's last byte from version 3.
    static func sequences(_ records: [JournalRecord], in header: SegmentHeader = segment) -> [UInt64] {
        guard header.numbersByPlace else { return Array(1...UInt64(records.count)) }
        var end = 0
        return records.map { record in
            end += encode([record], in: header).count
            return header.firstSequence + UInt64(end) - 1
        }
    }

    /// Decodes frames until one is not a whole valid record; returns what was decoded and why it stopped.
    static func decodeAll(
        _ bytes: [UInt8], in header: SegmentHeader = segment, decoding types: JournalRecord.Types = .all
    ) -> ([(JournalRecord, UInt64)], DecodedFrame?) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            var decoded: [(JournalRecord, UInt64)] = []
            while offset < raw.count {
                let frame = JournalRecord.decodeFrame(raw, at: offset, in: header, decoding: types)
                guard case .record(let record, let sequence, let size) = frame else { return (decoded, frame) }
                decoded.append((record, sequence))
                offset += size
            }
            return (decoded, nil)
        }
    }

    @Test(arguments: [segment, versionTwo])
    func everyRecordTypeRoundTrips(in header: SegmentHeader) {
        let (decoded, stop) = Self.decodeAll(Self.encode(Self.records, in: header), in: header)
        #expect(stop == nil)
        // A version 2 stored record has no writer: bytes after its fields are ignored.
        let expected = Self.records.map { record -> JournalRecord in
            guard case .stored(var stored) = record, !header.numbersByPlace else { return record }
            stored.writer = nil
            return .stored(stored)
        }
        #expect(decoded.map(\.0) == expected)
        #expect(decoded.map(\.1) == Self.sequences(Self.records, in: header))
    }

    /// sharedcache(5), "Journal segment": in version 3 a record's number is the place of its last
    /// byte, counted from first-sequence at the first byte after the header, so numbers run on
    /// across segments: the next segment's first-sequence is one past its seal's.
    @Test func versionThreeRecordsAreNumberedByTheirPlace() {
        let header = SegmentHeader(generation: 5, firstSequence: 1000)
        let bytes = Self.encode(Array(Self.records.prefix(3)), in: header)
        let sizes = Self.records.prefix(3).map { Self.encode([$0], in: header).count }
        #expect(
            Self.decodeAll(bytes, in: header).0.map(\.1)
                == [999 + sizes[0], 999 + sizes[0] + sizes[1], 999 + bytes.count].map(UInt64.init))
        // The same bytes further into the segment: numbered by where they lie.
        let later = bytes.withUnsafeBytes { JournalRecord.decodeFrame($0, at: 0, in: header, base: 132) }
        #expect(later == .record(Self.records[0], sequence: UInt64(1000 + 100 + sizes[0] - 1), size: sizes[0]))
    }

    /// A version 3 frame must carry its segment's tag: a frame of another segment, or one whose
    /// mark is a number (as a key could hold), is damage, though its checksum holds.
    @Test func aFrameWithAnotherSegmentsTagIsCorrupt() {
        let other = SegmentHeader(generation: 5, firstSequence: 1, salt: 0xA1B2_C3D5)
        let (decoded, stop) = Self.decodeAll(Self.encode([Self.records[0]], in: other))
        #expect(decoded.isEmpty)
        #expect(stop == .corrupt(.foreignRecord))
        let (_, numbered) = Self.decodeAll(Self.encode([Self.records[0]], in: Self.versionTwo))
        #expect(numbered == .corrupt(.foreignRecord))
    }

    /// sharedcache(5): a record cut off by the end of the file is "not yet written".
    @Test func tornTailAtEveryLengthIsIncompleteNotCorrupt() {
        let whole = Self.encode(Self.records)
        let firstSize = Self.encode([Self.records[0]]).count
        for cut in (firstSize + 1)..<(firstSize + Self.encode([Self.records[1]]).count) {
            let (decoded, stop) = Self.decodeAll(Array(whole[..<cut]))
            #expect(decoded.count == 1, "cut at \(cut)")
            #expect(stop == .incomplete, "cut at \(cut)")
        }
    }

    /// sharedcache(5): a whole frame with any flipped bit is corrupt, and nothing after it is read.
    @Test func flippedBitAnywhereInAFrameIsCorrupt() {
        let bytes = Self.encode(Self.records)
        let firstSize = Self.encode([Self.records[0]]).count
        for bit in 0..<(firstSize * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            let (decoded, stop) = Self.decodeAll(damaged)
            #expect(decoded.isEmpty, "bit \(bit)")
            // A flipped length bit may also make the frame look longer than the file.
            switch stop {
            case .corrupt?, .incomplete?: break
            default: Issue.record("bit \(bit): \(String(describing: stop))")
            }
        }
    }

    @Test func zeroFilledRegionIsCorrupt() {
        let (decoded, stop) = Self.decodeAll(Array(repeating: 0, count: 64))
        #expect(decoded.isEmpty)
        #expect(stop == .corrupt(.checksumMismatch))
    }

    /// sharedcache(5): an unknown type with a valid frame is skipped; later records still decode.
    @Test func unknownRecordTypeIsSkipped() {
        var writer = ByteWriter()
        JournalRecord.unknown(type: 200).encode(mark: Self.segment.tag, into: &writer)
        JournalRecord.sealed(nextGeneration: 7).encode(mark: Self.segment.tag, into: &writer)
        let (decoded, stop) = Self.decodeAll(writer.bytes)
        #expect(stop == nil)
        #expect(decoded.map(\.0) == [.unknown(type: 200), .sealed(nextGeneration: 7)])
    }

    /// A reader that asks for some types (the compactor, for removals) gets those whole and the
    /// others as `.unknown` of their type, each numbered as it is; their checksums still count.
    @Test func aReaderDecodesOnlyTheTypesItAsksFor() {
        let bytes = Self.encode(Self.records)
        let (decoded, stop) = Self.decodeAll(bytes, decoding: [.removed, .sealed])
        #expect(stop == nil)
        #expect(
            decoded.map(\.0)
                == Self.records.map { record in
                    switch record {
                    case .removed, .sealed: record
                    default: .unknown(type: record.typeCode)
                    }
                })
        #expect(decoded.map(\.1) == Self.sequences(Self.records))
        var flipped = bytes
        flipped[30] ^= 0x01  // in the first record, a stored one
        #expect(Self.decodeAll(flipped, decoding: .removed).1 == .corrupt(.checksumMismatch))
    }

    /// A length field of 4 GiB must be rejected before anything is allocated for it.
    @Test func hugeLengthIsCorruptWithoutAllocating() {
        var writer = ByteWriter()
        writer.append(UInt32(0))
        writer.append(UInt32.max)
        writer.append(UInt64(1))
        writer.append(UInt8(1))
        let (_, stop) = Self.decodeAll(writer.bytes)
        #expect(stop == .corrupt(.invalidField("record length \(UInt32.max)")))
    }

    @Test func unknownRemovalReasonIsCorrupt() {
        var writer = ByteWriter()
        JournalRecord.removed(
            RemovedRecord(hash: Self.hash, location: BodyLocation(blobID: 1), reason: .manual, remover: Self.remover)
        )
        .encode(mark: Self.segment.tag, into: &writer)
        var bytes = writer.bytes
        // The reason byte follows the 17-byte frame header, the hash and the location; re-checksum.
        bytes[17 + 32 + BodyLocation.encodedSize] = 99
        let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4...])) }
        withUnsafeBytes(of: CRC32C.mask(crc).littleEndian) { for i in 0..<4 { bytes[i] = $0[i] } }
        let (_, stop) = Self.decodeAll(bytes)
        #expect(stop == .corrupt(.invalidField("removal reason 99")))
    }

    /// sharedcache(5), "Versions": a version 1 record names its blob by an 8-byte blob ID.
    @Test func versionOneRecordsDecodeWithBlobLocations() throws {
        var writer = ByteWriter()
        writer.append(UInt32(0))
        writer.append(UInt32(0))
        writer.append(UInt64(5))
        writer.append(UInt8(5))  // accessed
        let payloadStart = writer.count
        writer.append(Self.hash)
        writer.append(UInt64(0xABCDEF))  // blob-id:u64
        writer.append(Int64(77))
        writer.set(UInt32(writer.count - payloadStart), at: 4)
        var bytes = writer.bytes
        let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4...])) }
        withUnsafeBytes(of: CRC32C.mask(crc).littleEndian) { for i in 0..<4 { bytes[i] = $0[i] } }
        let versionOne = SegmentHeader(generation: 5, firstSequence: 1, major: 1)
        let frame = bytes.withUnsafeBytes { JournalRecord.decodeFrame($0, at: 0, in: versionOne) }
        #expect(
            frame
                == .record(
                    .accessed(
                        AccessedRecord(hash: Self.hash, location: BodyLocation(blobID: 0xABCDEF), accessedAt: 77)),
                    sequence: 5, size: bytes.count))
        // Read as version 2, the same bytes are too short for a 20-byte location.
        guard case .corrupt = bytes.withUnsafeBytes({ JournalRecord.decodeFrame($0, at: 0, in: Self.versionTwo) })
        else {
            Issue.record("a version 1 record decoded as version 2")
            return
        }
    }

    @Test func segmentHeaderRoundTripsAndRejectsDamage() throws {
        let header = SegmentHeader(generation: 9, firstSequence: 1001, salt: 0xFEED_BEEF)
        let bytes = header.encoded()
        #expect(bytes.count == SegmentHeader.size)
        #expect(try bytes.withUnsafeBytes { try SegmentHeader.decode($0) } == header)

        var flipped = bytes
        flipped[10] ^= 1
        #expect(throws: FormatError.checksumMismatch) { try flipped.withUnsafeBytes { try SegmentHeader.decode($0) } }

        let newer = SegmentHeader(generation: 9, firstSequence: 1001, major: FormatVersion.current.major + 1).encoded()
        #expect(throws: FormatError.unsupportedVersion(major: FormatVersion.current.major + 1)) {
            try newer.withUnsafeBytes { try SegmentHeader.decode($0) }
        }
        // Version 3 keeps a salt; version 2 had none.
        #expect(header.salt == 0xFEED_BEEF)
        let versionTwo = SegmentHeader(generation: 9, firstSequence: 1001, major: 2)
        #expect(versionTwo.salt == 0)
        #expect(try versionTwo.encoded().withUnsafeBytes { try SegmentHeader.decode($0) } == versionTwo)
        // A flipped bit in the version is damage, not a newer SharedCache.
        var damagedVersion = bytes
        damagedVersion[5] ^= 0x58
        #expect(throws: FormatError.checksumMismatch) {
            try damagedVersion.withUnsafeBytes { try SegmentHeader.decode($0) }
        }
        #expect(throws: FormatError.truncated) {
            try Array(bytes[..<20]).withUnsafeBytes { try SegmentHeader.decode($0) }
        }
    }
}
