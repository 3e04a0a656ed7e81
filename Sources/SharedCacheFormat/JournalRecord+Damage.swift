/// Finding whole records again after damage in the middle of a segment, and the placeholders a
/// repair writes over the damaged bytes.
///
/// A damaged record must not cost the records after it: a flipped bit in one record (or in its
/// length field, which makes the frame seem to run past the end) would otherwise read as a torn
/// tail, and the repair that truncates a torn tail would throw every later record away. The
/// repair instead finds where intact records resume and writes `lost` records over exactly the
/// damaged bytes (before version 3, one per sequence number that went with them), so every
/// reader, old or new, reads on past the damage as if those records said nothing. In version 3,
/// where processes append at once, a record cut short by an appender that died is followed by
/// the records of the others: damage in the middle is then part of normal operation.
extension JournalRecord {
    /// Where intact records resume in `bytes`, which start at a damaged or cut-off frame at file
    /// offset `base` of a segment with `header` and run to what the segment holds; `nil` when
    /// none do (a torn or damaged tail, or a record still being written).
    ///
    /// A candidate must be believable, not merely checksum-valid, because a key may hold bytes
    /// that look like a frame. In version 3 that is its segment's tag, which no key can know, and
    /// nothing else: the first whole frame that carries it is where every reader resumes, whatever
    /// follows it, so a reader that sees more of the segment later decides the same. Before, its
    /// sequence number comes after `lastSequence`, the records it skips fit the bytes skipped (a
    /// frame is at least ``frameHeaderSize`` bytes), and it is the last frame of the segment or
    /// the next frame continues its numbering.
    package static func resumption(
        in bytes: UnsafeRawBufferPointer, after lastSequence: UInt64, header: SegmentHeader, base: Int64
    ) -> (offset: Int, sequence: UInt64)? {
        var offset = 1
        while offset + frameHeaderSize <= bytes.count {
            defer { offset += 1 }
            guard case .record(_, let sequence, let size) = decodeFrame(bytes, at: offset, in: header, base: base)
            else { continue }
            if header.numbersByPlace { return (offset, sequence) }
            guard sequence > lastSequence,
                placeholdersFit(count: lostCount(before: sequence, after: lastSequence), size: offset)
            else { continue }
            let end = offset + size
            if end == bytes.count { return (offset, sequence) }
            if case .record(_, let next, _) = decodeFrame(bytes, at: end, in: header, base: base), next == sequence + 1
            {
                return (offset, sequence)
            }
        }
        return nil
    }

    /// `lost` records for a segment with `header`, exactly `size` bytes in all, to stand in for
    /// damaged bytes followed by the record numbered `resumingAt`; `nil` when they do not fit.
    ///
    /// In version 3 they only fill the bytes: numbers come from places. Before, there is one for
    /// each sequence number after `lastSequence` and before `resumingAt`, and the bytes left over
    /// pad the last record, and records numbered `lastSequence` after it where one record's
    /// payload could not hold them (at most ``maximumPayloadSize``). Every reader that reaches such
    /// a record has applied its number already and passes over it, as it does the one record
    /// numbered so when no number is lost.
    package static func placeholders(
        in header: SegmentHeader, after lastSequence: UInt64, resumingAt: UInt64, size: Int
    ) -> [UInt8]? {
        let lost = header.numbersByPlace ? 0 : lostCount(before: resumingAt, after: lastSequence)
        guard lost <= UInt64(size / frameHeaderSize) else { return nil }
        var marks = (0..<lost).map { lastSequence + 1 + $0 }
        let filler = header.mark(forSequence: lastSequence)
        if marks.isEmpty { marks = [filler] }
        var paddings = [Int](repeating: 0, count: marks.count)
        var left = size - marks.count * frameHeaderSize
        guard left >= 0 else { return nil }
        paddings[paddings.count - 1] = min(left, maximumPayloadSize)
        left -= paddings[paddings.count - 1]
        while left > 0 {
            // Another filler record: it needs a whole frame header of what is left.
            if left < frameHeaderSize {
                paddings[paddings.count - 1] -= frameHeaderSize - left
                left = frameHeaderSize
            }
            marks.append(filler)
            paddings.append(min(left - frameHeaderSize, maximumPayloadSize))
            left -= frameHeaderSize + paddings[paddings.count - 1]
        }
        var writer = ByteWriter(capacity: size)
        for (mark, padding) in zip(marks, paddings) {
            JournalRecord.lost.encode(mark: mark, into: &writer, padding: padding)
        }
        return writer.bytes
    }

    /// The records `bytes` of a segment with `header` hold, when they are whole records and
    /// nothing else; `nil` otherwise.
    package static func wholeRecords(in bytes: UnsafeRawBufferPointer, header: SegmentHeader) -> [JournalRecord]? {
        var offset = 0
        var records: [JournalRecord] = []
        while offset < bytes.count {
            guard case .record(let record, _, let size) = decodeFrame(bytes, at: offset, in: header) else {
                return nil
            }
            records.append(record)
            offset += size
        }
        return records
    }

    /// Sequence numbers strictly between `lastSequence` and `sequence`.
    private static func lostCount(before sequence: UInt64, after lastSequence: UInt64) -> UInt64 {
        sequence > lastSequence + 1 ? sequence - lastSequence - 1 : 0
    }

    private static func placeholdersFit(count: UInt64, size: Int) -> Bool {
        max(count, 1) <= UInt64(size / frameHeaderSize)
    }
}

extension SegmentHeader {
    /// The header a segment named `generation` was created with, worked out from the records
    /// that follow it (`records`, from the header's end); `nil` when its first record is not
    /// whole and intact.
    ///
    /// A first record whose mark names the generation in its high half is of version 3: the
    /// mark's low half is the salt, and the first sequence number must come from elsewhere
    /// (`firstSequence`: one past the manifest's, when the manifest names the segment), or the
    /// header cannot be worked out. Otherwise the first record carries the first sequence
    /// number, and the version is the one before 3 in which more of the records decode (a
    /// version-1 location is shorter); a number of 2^32 or more is taken for a version 3 tag of
    /// another generation, not read as one.
    package static func reconstructed(
        generation: UInt64, records: UnsafeRawBufferPointer, firstSequence: UInt64? = nil
    ) -> SegmentHeader? {
        guard records.count >= JournalRecord.frameHeaderSize else { return nil }
        let mark = records.loadUnaligned(fromByteOffset: 8, as: UInt64.self).littleEndian
        if mark >> 32 == generation & 0xFFFF_FFFF {
            guard let firstSequence else { return nil }
            let header = SegmentHeader(
                generation: generation, firstSequence: firstSequence, major: FormatVersion.current.major,
                salt: UInt32(truncatingIfNeeded: mark))
            guard case .record = JournalRecord.decodeFrame(records, at: 0, in: header) else { return nil }
            return header
        }
        guard mark >> 32 == 0 else { return nil }
        var best: (header: SegmentHeader, decoded: Int)?
        for major in stride(from: UInt16(2), through: 1, by: -1) {
            var offset = 0, decoded = 0
            let candidate = SegmentHeader(generation: generation, firstSequence: mark, major: major)
            while case .record(_, _, let size) = JournalRecord.decodeFrame(records, at: offset, in: candidate) {
                decoded += 1
                offset += size
            }
            if decoded > best?.decoded ?? 0 { best = (candidate, decoded) }
        }
        return best?.header
    }
}
