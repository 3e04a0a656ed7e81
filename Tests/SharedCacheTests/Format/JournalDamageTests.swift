import Testing

@testable import SharedCache

/// sharedcache(5), "Damage": where intact records resume after a damaged one, and the `lost`
/// placeholders a repair writes over exactly the damaged bytes.
@Suite("Journal damage: finding intact records again, and placeholders")
struct JournalDamageTests {
    typealias Records = JournalRecordTests

    /// Records 1 to 4; the second is the one damaged.
    static let records = Array(Records.records.prefix(4))

    /// Every bit of the second record flipped in turn: the third is where records resume, and
    /// the placeholder over the second leaves a segment that reads 1, lost, 3, 4, numbered as
    /// the intact one is.
    @Test(arguments: [Records.segment, Records.versionTwo])
    func everyFlippedBitCostsOnlyItsRecord(in header: SegmentHeader) throws {
        let intact = Records.encode(Self.records, in: header)
        let sequences = Records.sequences(Self.records, in: header)
        let start = Records.encode(Array(Self.records[..<1]), in: header).count
        let end = Records.encode(Array(Self.records[..<2]), in: header).count
        for position in start..<end {
            for bit in 0..<8 {
                var bytes = intact
                bytes[position] ^= UInt8(1 << bit)
                let damaged = Array(bytes[start...])
                let base = Int64(SegmentHeader.size + start)
                let resumption = damaged.withUnsafeBytes {
                    JournalRecord.resumption(in: $0, after: sequences[0], header: header, base: base)
                }
                #expect(resumption?.offset == end - start, "byte \(position) bit \(bit)")
                #expect(resumption?.sequence == sequences[2], "byte \(position) bit \(bit)")
                let placeholders = try #require(
                    JournalRecord.placeholders(
                        in: header, after: sequences[0], resumingAt: sequences[2], size: end - start),
                    "byte \(position) bit \(bit)")
                let (decoded, stop) = Records.decodeAll(
                    Array(bytes[..<start]) + placeholders + bytes[end...], in: header)
                #expect(stop == nil)
                #expect(decoded.map(\.1) == sequences)
                #expect(decoded.map(\.0) == [Self.records[0], .lost, Self.records[2], Self.records[3]])
            }
        }
    }

    /// Version 3: a record cut short by an appender that died, with the next appender's record
    /// after it, at every length: that record is where reading resumes.
    @Test func aRecordCutShortInTheMiddleIsReadPast() throws {
        let header = Records.segment
        let whole = Records.encode(Self.records, in: header)
        let start = Records.encode(Array(Self.records[..<1]), in: header).count
        let end = Records.encode(Array(Self.records[..<2]), in: header).count
        let next = Records.encode([Self.records[2]], in: header)
        for cut in (start + 1)..<end {
            let bytes = Array(whole[..<cut]) + next
            let frame = bytes.withUnsafeBytes { JournalRecord.decodeFrame($0, at: start, in: header) }
            #expect(frame != .record(Self.records[1], sequence: 0, size: end - start))
            let resumption = Array(bytes[start...]).withUnsafeBytes {
                JournalRecord.resumption(in: $0, after: 0, header: header, base: Int64(SegmentHeader.size + start))
            }
            #expect(resumption?.offset == cut - start, "cut at \(cut)")
            #expect(resumption?.sequence == UInt64(cut + next.count), "cut at \(cut)")
        }
    }

    /// A key may hold bytes that frame a record. Before version 3, frames numbered too far ahead
    /// for the bytes skipped (though the next continues their numbering), and one whose next
    /// frame does not continue its numbering, are passed over.
    @Test func aFrameInsideAKeyIsNotTakenForTheNextRecordInVersionTwo() throws {
        let header = Records.versionTwo
        func frame(_ sequence: UInt64) -> [UInt8] {
            var writer = ByteWriter()
            JournalRecord.cleared(Records.remover).encode(mark: sequence, into: &writer)
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
            record.encode(mark: UInt64(index + 2), into: &writer)
        }
        var bytes = writer.bytes
        bytes[0] ^= 0xFF
        let damagedSize = Records.encode([damagedRecord], in: header).count
        let resumption = bytes.withUnsafeBytes { JournalRecord.resumption(in: $0, after: 1, header: header, base: 99) }
        #expect(resumption?.offset == damagedSize)
        #expect(resumption?.sequence == 3)
    }

    /// Version 3: a key that holds whole frames, numbered or tagged for another segment, cannot
    /// hold one with this segment's tag, which it cannot know; reading resumes after the key's
    /// record.
    @Test func aFrameInsideAKeyIsNotTakenForTheNextRecord() throws {
        let header = Records.segment
        let stranger = SegmentHeader(generation: 5, firstSequence: 1, salt: 0x0BAD_F00D)
        var key = ByteWriter()
        for mark in [UInt64(2), UInt64(3), stranger.tag, header.tag ^ 1] {
            JournalRecord.cleared(Records.remover).encode(mark: mark, into: &key)
        }
        key.append(bytes: Array("the rest of the key".utf8))
        let damagedRecord = JournalRecord.stored(
            StoredRecord(
                hash: KeyHash(key: "k"), location: Records.packed, bodySize: 1, storedAt: 1, expiresAt: 2,
                key: key.bytes,
                etag: []))
        var bytes = Records.encode([damagedRecord, Self.records[2]], in: header)
        bytes[0] ^= 0xFF
        let damagedSize = Records.encode([damagedRecord], in: header).count
        let resumption = bytes.withUnsafeBytes {
            JournalRecord.resumption(in: $0, after: 0, header: header, base: Int64(SegmentHeader.size))
        }
        #expect(resumption?.offset == damagedSize)
        #expect(resumption?.sequence == UInt64(bytes.count))
    }

    /// A record cut off by the end of the segment, with nothing after it, has no resumption:
    /// it is a torn tail (or still being written).
    @Test(arguments: [Records.segment, Records.versionTwo])
    func aTornTailHasNoResumption(in header: SegmentHeader) {
        let bytes = Records.encode(Self.records, in: header)
        let start = Records.encode(Array(Self.records[..<3]), in: header).count
        let applied = Records.sequences(Self.records, in: header)[2]
        for cut in (start + 1)..<bytes.count {
            let tail = Array(bytes[start..<cut])
            let base = Int64(SegmentHeader.size + start)
            #expect(
                tail.withUnsafeBytes { JournalRecord.resumption(in: $0, after: applied, header: header, base: base) }
                    == nil)
        }
    }

    @Test func placeholdersNumberEveryLostRecordAndFillExactlyInVersionTwo() throws {
        let header = Records.versionTwo
        // Three numbers lost need three frames of at least 17 bytes.
        #expect(JournalRecord.placeholders(in: header, after: 5, resumingAt: 9, size: 50) == nil)
        let three = try #require(JournalRecord.placeholders(in: header, after: 5, resumingAt: 9, size: 60))
        #expect(three.count == 60)
        #expect(Records.decodeAll(three, in: header).0.map(\.1) == [6, 7, 8])
        #expect(Records.decodeAll(three, in: header).1 == nil)

        // None lost: one filler numbered as already applied.
        let filler = try #require(JournalRecord.placeholders(in: header, after: 5, resumingAt: 6, size: 30))
        #expect(Records.decodeAll(filler, in: header).0.map(\.1) == [5])
        #expect(JournalRecord.placeholders(in: header, after: 5, resumingAt: 6, size: 16) == nil)

        // More than one record's payload can hold: fillers numbered as applied take the rest,
        // whatever is left over (here 1 to 17 bytes past a full frame).
        let frame = JournalRecord.frameHeaderSize + JournalRecord.maximumPayloadSize
        for size in [frame + 1, frame + 16, frame + 17, frame + 18, 2 * frame + 40] {
            let large = try #require(
                JournalRecord.placeholders(in: header, after: 5, resumingAt: 7, size: size), "\(size)")
            #expect(large.count == size)
            let (decoded, stop) = Records.decodeAll(large, in: header)
            #expect(stop == nil, "\(size)")
            #expect(decoded.first?.1 == 6 && decoded.dropFirst().allSatisfy { $0.1 == 5 }, "\(size)")
        }
    }

    /// Version 3: placeholders only fill the bytes, with the segment's tag; the last one ends
    /// where the damage did, so it takes the number the damaged record had.
    @Test func placeholdersFillExactly() throws {
        let header = Records.segment
        #expect(JournalRecord.placeholders(in: header, after: 5, resumingAt: 900, size: 16) == nil)
        let frame = JournalRecord.frameHeaderSize + JournalRecord.maximumPayloadSize
        for size in [17, 18, 60, frame, frame + 1, frame + 16, frame + 17, frame + 18, 2 * frame + 40] {
            let bytes = try #require(
                JournalRecord.placeholders(in: header, after: 5, resumingAt: 900, size: size), "\(size)")
            #expect(bytes.count == size)
            let (decoded, stop) = Records.decodeAll(bytes, in: header)
            #expect(stop == nil, "\(size)")
            #expect(decoded.allSatisfy { $0.0 == .lost }, "\(size)")
            #expect(decoded.last?.1 == UInt64(size), "\(size)")
        }
    }

    /// A damaged header is worked out again from the segment's records. Before version 3: the
    /// first one's sequence number, and the version in which they decode.
    @Test func aSegmentHeaderIsReconstructedFromItsRecords() throws {
        var writer = ByteWriter()
        for (index, record) in Self.records.enumerated() { record.encode(mark: 41 + UInt64(index), into: &writer) }
        let versionTwo = writer.bytes.withUnsafeBytes { SegmentHeader.reconstructed(generation: 9, records: $0) }
        #expect(versionTwo == SegmentHeader(generation: 9, firstSequence: 41, major: 2))

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

    /// Version 3: the first record's tag gives the salt; the first sequence number comes from
    /// the manifest, and without it the header cannot be worked out (the records would read as
    /// version 2, numbered by their tags, if the tag did not name the generation).
    @Test func aVersionThreeHeaderIsReconstructedWithTheManifestsNumber() throws {
        let header = SegmentHeader(generation: 5, firstSequence: 700, salt: 0x1357_9BDF)
        let bytes = Records.encode(Self.records, in: header)
        #expect(
            bytes.withUnsafeBytes { SegmentHeader.reconstructed(generation: 5, records: $0, firstSequence: 700) }
                == header)
        #expect(bytes.withUnsafeBytes { SegmentHeader.reconstructed(generation: 5, records: $0) } == nil)
        // Records of another generation's segment, put here by hand, are not read as this one's,
        // nor as version 2 records numbered by their tags.
        let elsewhere = bytes.withUnsafeBytes {
            SegmentHeader.reconstructed(generation: 6, records: $0, firstSequence: 700)
        }
        #expect(elsewhere == nil)
    }
}
