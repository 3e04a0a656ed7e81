import Testing

@testable import SharedCache

/// sharedcache(5), "Damage": where intact records resume after a damaged one, and the `lost`
/// placeholders a repair writes over exactly the damaged bytes.
@Suite("Journal damage: finding intact records again, and placeholders")
struct JournalDamageTests {
    typealias Records = JournalRecordTests

    /// Records 1 to 4; the second is the one damaged.
    static let records = Array(Records.records.prefix(4))

    static func size(_ records: ArraySlice<JournalRecord>) -> Int { Records.encode(Array(records)).count }

    /// Every bit of the second record flipped in turn: the third is where records resume, and
    /// the placeholder over the second leaves a segment that reads 1, lost, 3, 4.
    @Test func everyFlippedBitCostsOnlyItsRecord() throws {
        let intact = Records.encode(Self.records)
        let start = Self.size(Self.records[..<1]), end = Self.size(Self.records[..<2])
        for position in start..<end {
            for bit in 0..<8 {
                var bytes = intact
                bytes[position] ^= UInt8(1 << bit)
                let damaged = Array(bytes[start...])
                let resumption = damaged.withUnsafeBytes {
                    JournalRecord.resumption(in: $0, after: 1, major: FormatVersion.current.major)
                }
                #expect(resumption?.offset == end - start, "byte \(position) bit \(bit)")
                #expect(resumption?.sequence == 3, "byte \(position) bit \(bit)")
                let placeholders = try #require(
                    JournalRecord.placeholders(after: 1, resumingAt: 3, size: end - start),
                    "byte \(position) bit \(bit)")
                #expect(placeholders.lost == 1)
                let (decoded, stop) = Records.decodeAll(Array(bytes[..<start]) + placeholders.bytes + bytes[end...])
                #expect(stop == nil)
                #expect(decoded.map(\.1) == [1, 2, 3, 4])
                #expect(decoded.map(\.0) == [Self.records[0], .lost, Self.records[2], Self.records[3]])
            }
        }
    }

    /// A key may hold bytes that frame a record. Frames numbered too far ahead for the bytes
    /// skipped (though the next continues their numbering), and one whose next frame does not
    /// continue its numbering, are passed over.
    @Test func aFrameInsideAKeyIsNotTakenForTheNextRecord() throws {
        func frame(_ sequence: UInt64) -> [UInt8] {
            var writer = ByteWriter()
            JournalRecord.cleared(Records.remover).encode(sequence: sequence, into: &writer)
            return writer.bytes
        }
        let key = frame(900) + frame(901) + frame(3) + Array("the rest of the key".utf8)
        let damagedRecord = JournalRecord.stored(
            StoredRecord(
                hash: KeyHash(key: "k"), location: Records.packed, bodySize: 1, storedAt: 1, expiresAt: 2, key: key,
                etag: []))
        // Numbered 2, 3, 4, after a record 1 already applied; then the damaged record's checksum broken.
        var writer = ByteWriter()
        for (index, record) in [damagedRecord, Self.records[2], Self.records[3]].enumerated() {
            record.encode(sequence: UInt64(index + 2), into: &writer)
        }
        var bytes = writer.bytes
        bytes[0] ^= 0xFF
        let damagedSize = Records.encode([damagedRecord]).count
        let resumption = bytes.withUnsafeBytes {
            JournalRecord.resumption(in: $0, after: 1, major: FormatVersion.current.major)
        }
        #expect(resumption?.offset == damagedSize)
        #expect(resumption?.sequence == 3)
    }

    /// A record cut off by the end of the segment, with nothing after it, has no resumption:
    /// it is a torn tail, and truncated.
    @Test func aTornTailHasNoResumption() {
        let bytes = Records.encode(Self.records)
        let start = Self.size(Self.records[..<3])
        for cut in (start + 1)..<bytes.count {
            let tail = Array(bytes[start..<cut])
            #expect(tail.withUnsafeBytes { JournalRecord.resumption(in: $0, after: 3, major: 2) } == nil)
        }
    }

    @Test func placeholdersNumberEveryLostRecordAndFillExactly() throws {
        // Three numbers lost need three frames of at least 17 bytes.
        #expect(JournalRecord.placeholders(after: 5, resumingAt: 9, size: 50) == nil)
        let three = try #require(JournalRecord.placeholders(after: 5, resumingAt: 9, size: 60))
        #expect(three.bytes.count == 60 && three.lost == 3)
        #expect(Records.decodeAll(three.bytes).0.map(\.1) == [6, 7, 8])
        #expect(Records.decodeAll(three.bytes).1 == nil)

        // None lost: one filler numbered as already applied.
        let filler = try #require(JournalRecord.placeholders(after: 5, resumingAt: 6, size: 30))
        #expect(filler.lost == 0)
        #expect(Records.decodeAll(filler.bytes).0.map(\.1) == [5])
        #expect(JournalRecord.placeholders(after: 5, resumingAt: 6, size: 16) == nil)

        // More than one record's payload can hold: fillers numbered as applied take the rest,
        // whatever is left over (here 1 to 17 bytes past a full frame).
        let frame = JournalRecord.frameHeaderSize + JournalRecord.maximumPayloadSize
        for size in [frame + 1, frame + 16, frame + 17, frame + 18, 2 * frame + 40] {
            let large = try #require(JournalRecord.placeholders(after: 5, resumingAt: 7, size: size), "\(size)")
            #expect(large.bytes.count == size)
            let (decoded, stop) = Records.decodeAll(large.bytes)
            #expect(stop == nil, "\(size)")
            #expect(decoded.first?.1 == 6 && decoded.dropFirst().allSatisfy { $0.1 == 5 }, "\(size)")
        }
    }

    /// A damaged header is worked out again from the segment's records: the first one's sequence
    /// number, and the version in which they decode.
    @Test func aSegmentHeaderIsReconstructedFromItsRecords() throws {
        var writer = ByteWriter()
        for (index, record) in Self.records.enumerated() { record.encode(sequence: 41 + UInt64(index), into: &writer) }
        let current = writer.bytes.withUnsafeBytes { SegmentHeader.reconstructed(generation: 9, records: $0) }
        #expect(current == SegmentHeader(generation: 9, firstSequence: 41, major: FormatVersion.current.major))

        // A version-1 record: an access with an 8-byte blob location, which version 2 cannot read.
        var old = ByteWriter()
        old.append(UInt32(0))
        old.append(UInt32(0))
        old.append(UInt64(7))
        old.append(UInt8(5))
        old.append(Records.hash)
        old.append(UInt64(0xABCDEF))
        old.append(Int64(77))
        old.set(UInt32(old.count - JournalRecord.frameHeaderSize), at: 4)
        let crc = old.bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4...])) }
        old.set(CRC32C.mask(crc), at: 0)
        let versionOne = old.bytes.withUnsafeBytes { SegmentHeader.reconstructed(generation: 3, records: $0) }
        #expect(versionOne == SegmentHeader(generation: 3, firstSequence: 7, major: 1))

        let garbage = Array("not a journal record at all, not even close".utf8)
        #expect(garbage.withUnsafeBytes { SegmentHeader.reconstructed(generation: 3, records: $0) } == nil)
    }
}
