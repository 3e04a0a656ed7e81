/// Finding whole records again after damage in the middle of a segment, and the placeholders a
/// repair writes over the damaged bytes.
///
/// A damaged record must not cost the records after it: a flipped bit in one record (or in its
/// length field, which makes the frame seem to run past the end) would otherwise read as a torn
/// tail, and the repair that truncates a torn tail would throw every later record away. The
/// repair instead finds where intact records resume and writes `lost` records over exactly the
/// damaged bytes, one per sequence number that went with them, so every reader, old or new, reads
/// on past the damage as if those records said nothing.
extension JournalRecord {
    /// Where intact records resume in `bytes`, which start at a damaged or cut-off frame and run
    /// to the end of the segment; `nil` when none do (a torn or damaged tail).
    ///
    /// A candidate must be believable, not merely checksum-valid, because a key may hold bytes
    /// that look like a frame: its sequence number comes after `lastSequence`, the records it
    /// skips fit the bytes skipped (a frame is at least ``frameHeaderSize`` bytes), and it is the
    /// last frame of the segment or the next frame continues its numbering.
    package static func resumption(
        in bytes: UnsafeRawBufferPointer, after lastSequence: UInt64, major: UInt16
    ) -> (offset: Int, sequence: UInt64)? {
        var offset = 1
        while offset + frameHeaderSize <= bytes.count {
            defer { offset += 1 }
            guard case .record(_, let sequence, let size) = decodeFrame(bytes, at: offset, major: major),
                sequence > lastSequence,
                placeholdersFit(count: lostCount(before: sequence, after: lastSequence), size: offset)
            else { continue }
            let end = offset + size
            if end == bytes.count { return (offset, sequence) }
            if case .record(_, let next, _) = decodeFrame(bytes, at: end, major: major), next == sequence + 1 {
                return (offset, sequence)
            }
        }
        return nil
    }

    /// `lost` records for the sequence numbers after `lastSequence` and before `resumingAt`,
    /// exactly `size` bytes in all, and how many numbers were lost; `nil` when they do not fit.
    ///
    /// The bytes left over pad the last record, and records numbered `lastSequence` after it
    /// where one record's payload could not hold them (at most ``maximumPayloadSize``). Every
    /// reader that reaches such a record has applied its number already and passes over it, as
    /// it does the one record numbered so when no number is lost.
    package static func placeholders(
        after lastSequence: UInt64, resumingAt: UInt64, size: Int
    ) -> (bytes: [UInt8], lost: UInt64)? {
        let lost = lostCount(before: resumingAt, after: lastSequence)
        guard lost <= UInt64(size / frameHeaderSize) else { return nil }
        var sequences = (0..<lost).map { lastSequence + 1 + $0 }
        if sequences.isEmpty { sequences = [lastSequence] }
        var paddings = [Int](repeating: 0, count: sequences.count)
        var left = size - sequences.count * frameHeaderSize
        guard left >= 0 else { return nil }
        paddings[paddings.count - 1] = min(left, maximumPayloadSize)
        left -= paddings[paddings.count - 1]
        while left > 0 {
            // Another filler record: it needs a whole frame header of what is left.
            if left < frameHeaderSize {
                paddings[paddings.count - 1] -= frameHeaderSize - left
                left = frameHeaderSize
            }
            sequences.append(lastSequence)
            paddings.append(min(left - frameHeaderSize, maximumPayloadSize))
            left -= frameHeaderSize + paddings[paddings.count - 1]
        }
        var writer = ByteWriter(capacity: size)
        for (sequence, padding) in zip(sequences, paddings) {
            JournalRecord.lost.encode(sequence: sequence, into: &writer, padding: padding)
        }
        return (writer.bytes, lost)
    }

    /// The records `bytes` hold, when they are whole records and nothing else; `nil` otherwise.
    package static func wholeRecords(
        in bytes: UnsafeRawBufferPointer, major: UInt16 = FormatVersion.current.major
    ) -> [JournalRecord]? {
        var offset = 0
        var records: [JournalRecord] = []
        while offset < bytes.count {
            guard case .record(let record, _, let size) = decodeFrame(bytes, at: offset, major: major) else {
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
    /// that follow it (`records`, from the header's end): its first record carries the first
    /// sequence number, and the version is the one in which more of its records decode (a
    /// version-1 location is shorter). `nil` when its first record is not whole and intact.
    package static func reconstructed(generation: UInt64, records: UnsafeRawBufferPointer) -> SegmentHeader? {
        var best: (header: SegmentHeader, decoded: Int)?
        for major in stride(from: FormatVersion.current.major, through: 1, by: -1) {
            var offset = 0, decoded = 0, first: UInt64?
            while case .record(_, let sequence, let size) = JournalRecord.decodeFrame(
                records, at: offset, major: major)
            {
                if first == nil { first = sequence }
                decoded += 1
                offset += size
            }
            if let first, decoded > best?.decoded ?? 0 {
                best = (SegmentHeader(generation: generation, firstSequence: first, major: major), decoded)
            }
        }
        return best?.header
    }
}
