#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform

/// A position in the journal, and the reading that moves it forward across segments.
///
/// The position is (segment, byte offset, last sequence number applied). Reading never takes a
/// lock: only whole records below the file size are decoded, and a record cut off by the end of
/// the file is "not yet written" (another process's `write(2)` may be visible page by page).
/// Given the segment whose append lock the caller holds exclusively (`repairing`), damage in
/// that segment is repaired, because no one else can be writing it: where intact records follow,
/// `lost` placeholders are written over exactly the damaged bytes
/// (``JournalRecord/resumption(in:after:header:base:)``), so the records after it are kept; a
/// cut-off or corrupt tail is truncated away. Other segments the cursor reaches are never
/// touched, as their owner may be mid-write; where intact records resume after a damaged one
/// there, it reads on from them, as every process does. In a version 3 segment, where processes
/// append at once, that includes a record cut off with records after it: appends land one after
/// another, so it is one whose appender died, not one being written.
///
/// Not thread-safe; ``LiveIndex`` keeps it under its owner's lock, and its properties are
/// exempt from run-time exclusivity checks for the same reason as ``LiveIndex``'s.
package final class JournalCursor {
    package enum Progress: Equatable {
        /// Every whole record has been applied.
        case upToDate
        /// The position no longer exists (the segment was retired or truncated under us):
        /// start again from the manifest.
        case mustResynchronize
        /// A damaged record stops reading until a writer repairs the tail.
        case stoppedAtCorruption
    }

    @exclusivity(unchecked) package private(set) var segment: JournalSegment
    @exclusivity(unchecked) package private(set) var offset: Int64
    @exclusivity(unchecked) package private(set) var lastSequence: UInt64
    /// Set once the current segment's `sealed` record has been applied.
    @exclusivity(unchecked) private(set) var sealedNext: UInt64?
    /// Whether the position is at a seal whose next segment does not exist yet (a checkpoint
    /// died between the two): only a writer holding the lock exclusively makes it.
    var isAtSealWithoutNextSegment: Bool { sealedNext != nil }
    /// Torn or corrupt tails this cursor truncated, and damage it wrote placeholders over, while
    /// repairing.
    @exclusivity(unchecked) package private(set) var repairs = 0
    /// The last sequence number damage took that this cursor read past with no placeholder
    /// written (in a segment it did not hold the lock of); 0 when none.
    @exclusivity(unchecked) package private(set) var unrepairedLossThrough: UInt64 = 0
    /// Where damage was found with no intact record after it, and the segment's size then: the
    /// search is not made again until the segment grows or is repaired.
    @exclusivity(unchecked) private var damageWithoutResumption: (generation: UInt64, offset: Int64, size: Int64)?
    @exclusivity(unchecked) private var buffer: [UInt8] = []
    /// Where appended records are encoded for their one write, kept from one append to the
    /// next so that a put allocates no buffer (the cursor's owner appends under its mutex).
    @exclusivity(unchecked) private var encoding = ByteWriter(capacity: 512)

    /// The records whose payloads are decoded; the others are applied as `.unknown(type:)`.
    private let decodedTypes: JournalRecord.Types

    /// Starts at the beginning of `segment`, treating records up to `lastSequence` as applied.
    ///
    /// - Parameter decoding: the records to decode (seals always are, to follow them); a
    ///   reader after a few kinds skips copying the rest.
    package init(segment: JournalSegment, lastSequence: UInt64, decoding: JournalRecord.Types = .all) {
        self.segment = segment
        self.offset = Int64(SegmentHeader.size)
        self.lastSequence = lastSequence
        decodedTypes = decoding.union(.sealed)
    }

    /// Applies every whole record past the position, following seals into later segments.
    ///
    /// Costs one size check (``FileDescriptor/sizeAndLinkCount()``: `statx` on Linux, `fstat`
    /// elsewhere) when nothing was appended.
    ///
    /// - Parameter repairing: the segment whose append lock the caller holds, if any: only its
    ///   tail may be truncated, and only behind its seal may a missing next segment be made.
    package func advance(
        in directory: CacheDirectory, repairing locked: JournalSegment? = nil, durable: Bool = false,
        apply: (JournalRecord, UInt64) throws -> Void
    ) throws -> Progress {
        while true {
            if let next = sealedNext {
                guard let following = try JournalSegment.open(next, in: directory) else {
                    // Later segments exist: the next one was retired while we were behind, and
                    // only the manifest can tell where to continue. (Re-creating it here would
                    // append records no process that is up to date would ever read.)
                    let newest = try JournalSegment.generations(in: directory).last ?? 0
                    if newest > next { return .mustResynchronize }
                    if let locked, locked === segment {
                        // The process that sealed this segment died before creating the next.
                        try JournalSegment.create(
                            next, firstSequence: lastSequence + 1, in: directory, durable: durable)
                        continue
                    }
                    return .upToDate
                }
                guard following.header.firstSequence == lastSequence + 1 else { return .mustResynchronize }
                segment = following
                offset = Int64(SegmentHeader.size)
                sealedNext = nil
            }

            let (size, linkCount) = try segment.file.sizeAndLinkCount()
            if size < offset { return .mustResynchronize }
            if size == offset {
                // A deleted segment is always sealed first; reaching its end without the seal
                // means it was removed by hand or truncated.
                return linkCount == 0 ? .mustResynchronize : .upToDate
            }

            let available = Int(size - offset)
            let chunk = min(available, 4 << 20)
            if buffer.count < chunk { buffer = [UInt8](repeating: 0, count: chunk) }
            let start = offset
            let current = segment
            let count = try buffer.withUnsafeMutableBytes { raw in
                try current.file.read(
                    fromAbsoluteOffset: start, into: UnsafeMutableRawBufferPointer(rebasing: raw[..<chunk]))
            }

            var consumed = 0
            var stop: Progress? = nil
            let header = segment.header
            try buffer.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[..<count])
                decoding: while consumed < count {
                    let frame = JournalRecord.decodeFrame(
                        bytes, at: consumed, in: header, base: start, decoding: decodedTypes)
                    switch frame {
                    case .record(let record, let sequence, let size):
                        if sequence <= lastSequence {
                            consumed += size
                            continue
                        }
                        guard header.numbersByPlace || sequence == lastSequence + 1 else {
                            stop = .stoppedAtCorruption
                            break decoding
                        }
                        try apply(record, sequence)
                        lastSequence = sequence
                        consumed += size
                        if case .sealed(let next) = record {
                            sealedNext = next
                            break decoding
                        }
                    case .incomplete:
                        // More of the file may follow past this chunk; re-read from here.
                        if count < available && consumed > 0 { break decoding }
                        // Version 3: a frame cut off with a whole frame after it is not being
                        // written (each append lands after the one before it has ended) but was
                        // cut short by an appender that died; read on past it as past damage.
                        if header.numbersByPlace, consumed < count, locked !== segment,
                            try readPastDamage(at: start + Int64(consumed), size: size, consumed: &consumed)
                        {
                            break decoding
                        }
                        stop = .upToDate
                        break decoding
                    case .corrupt:
                        // Damage inside the file is final: a write in progress only ever shows a
                        // prefix of itself. Where intact records resume, read on from there, as
                        // every process does; the damage in a segment whose lock is held is left
                        // to the repair below, which stands placeholders in for it.
                        if locked !== segment,
                            try readPastDamage(at: start + Int64(consumed), size: size, consumed: &consumed)
                        {
                            break decoding
                        }
                        stop = .stoppedAtCorruption
                        break decoding
                    }
                }
            }
            offset += Int64(consumed)

            if let stop, sealedNext == nil {
                // Only the segment whose lock is held is repaired: following a seal from it leads
                // into the next segment, whose own lock another process may hold while it writes
                // there, so a record cut off by the end of the file there is being written.
                let holdsLock = locked === segment
                // Holding the append lock: nobody is mid-write, so whatever follows the last
                // whole record is damage, or a torn write from a process that died.
                if holdsLock, try replaceDamage(in: directory, durable: durable) { continue }
                switch try laterSegment(in: directory, sizeRead: size) {
                case .follow, .readAgain: continue
                case .resynchronize: return .mustResynchronize
                case .none: break
                }
                guard holdsLock else { return stop }
                try segment.file.truncate(to: offset)
                repairs += 1
                return .upToDate
            }
        }
    }

    /// What a later segment says about damage that no intact record follows.
    private enum LaterSegment {
        /// None exists: the damage is this segment's tail.
        case none
        /// The next one exists: read on there, as if this one were sealed.
        case follow
        /// This segment grew since it was read: what looked cut off was still landing.
        case readAgain
        /// Only later ones exist: the next was retired, and the manifest says where to go on.
        case resynchronize
    }

    /// Whether damage that no intact record follows took this segment's seal. A segment is made
    /// only after the seal of the one before is written and flushed, so if a later one exists,
    /// this one was sealed: every process, writer or reader, reads on in the next one the same
    /// way (the numbers before its first lost), and `verify --repair` checkpoints past it.
    ///
    /// - Parameter sizeRead: the segment's size when it was read. If it has grown since, what
    ///   looked cut off was a write still landing (the seal, just before the next segment was
    ///   made): read it again instead.
    private func laterSegment(in directory: CacheDirectory, sizeRead: Int64) throws -> LaterSegment {
        let current = segment.generation
        guard let first = try JournalSegment.generations(in: directory).first(where: { $0 > current }) else {
            return .none
        }
        if try segment.file.sizeAndLinkCount().size != sizeRead { return .readAgain }
        guard first == current + 1 else { return .resynchronize }
        guard let following = try? JournalSegment.open(first, in: directory),
            following.header.firstSequence > lastSequence
        else { return .resynchronize }
        skipLost(before: following.header.firstSequence)
        sealedNext = first
        return .follow
    }

    /// Reads on past damage at `position` of the current segment (whose size was `size` when
    /// read) to where intact records resume, if they do: moves `consumed` there (past what the
    /// buffer may hold, so the caller reads again). The search is not made again at the same
    /// place until the segment grows.
    private func readPastDamage(at position: Int64, size: Int64, consumed: inout Int) throws -> Bool {
        let damage = (generation: segment.generation, offset: position, size: size)
        if let searched = damageWithoutResumption, searched == damage { return false }
        guard let resumption = try resumption(afterDamageAt: position) else {
            damageWithoutResumption = damage
            return false
        }
        skipLost(before: resumption.sequence)
        consumed += resumption.offset
        return true
    }

    /// Counts the numbers damage took before `next` as read, with no placeholder written.
    private func skipLost(before next: UInt64) {
        guard next > lastSequence + 1 else { return }
        lastSequence = next - 1
        unrepairedLossThrough = lastSequence
    }

    /// Writes `lost` placeholders over the damage at the position, if intact records follow it
    /// in this segment; whether they do. Where placeholders cannot stand in for the damage (a
    /// version 3 record cut short after fewer bytes than a frame header), it reads past it, as
    /// every other reader does: the records after it are never truncated.
    ///
    /// A whole record numbered out of turn is left to truncation: no bit flip makes one.
    private func replaceDamage(in directory: CacheDirectory, durable: Bool) throws -> Bool {
        let start = offset, current = segment
        guard let resumption = try resumption(afterDamageAt: start) else { return false }
        guard
            let placeholders = JournalRecord.placeholders(
                in: current.header, after: lastSequence, resumingAt: resumption.sequence, size: resumption.offset),
            // Checked before they are written: a repair that wrote damage would loop on it.
            placeholders.withUnsafeBytes({ JournalRecord.wholeRecords(in: $0, header: current.header) }) != nil,
            try JournalSegment.writeInPlace(
                placeholders, at: start, of: current.file, named: JournalSegment.name(current.generation),
                in: directory, flush: durable)
        else {
            skipLost(before: resumption.sequence)
            offset += Int64(resumption.offset)
            return true
        }
        repairs += 1
        return true
    }

    /// Where intact records resume after damage at `position` of the current segment, read to
    /// its end (``JournalRecord/resumption(in:after:header:base:)``), as an offset from `position`;
    /// `nil` when none do, or when a whole record stands at `position` (one numbered out of
    /// turn, which no bit flip makes, is left to truncation).
    private func resumption(afterDamageAt position: Int64) throws -> (offset: Int, sequence: UInt64)? {
        let end = try segment.file.sizeAndLinkCount().size
        guard end > position else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(end - position))
        let current = segment, applied = lastSequence, header = segment.header
        let count = try bytes.withUnsafeMutableBytes { try current.file.read(fromAbsoluteOffset: position, into: $0) }
        guard count == bytes.count else { return nil }
        return bytes.withUnsafeBytes { raw in
            if case .record = JournalRecord.decodeFrame(raw, at: 0, in: header, base: position) { return nil }
            return JournalRecord.resumption(in: raw, after: applied, header: header, base: position)
        }
    }

    /// Appends `records` with one `write(2)` and moves past them; returns their sequence numbers.
    ///
    /// The caller holds the segment's append lock exclusively and has just advanced with
    /// `repairing`, so the records land exactly at `offset`. If the write is cut short (a full
    /// disk), the partial bytes are truncated away and the call throws.
    func append(_ records: [JournalRecord], durable: Bool) throws -> [UInt64] {
        precondition(sealedNext == nil, "appending to a sealed segment")
        let ends = try write(records) { try? segment.file.truncate(to: offset) }
        let sequences = sequences(endingAt: ends, writtenAt: offset)
        offset += Int64(ends.last ?? 0)
        lastSequence = sequences.last ?? lastSequence
        if case .sealed(let next) = records.last { sealedNext = next }
        if durable { try segment.file.synchronizeData() }
        return sequences
    }

    /// Where records appended at once landed (see ``appendConcurrently(_:)``).
    struct ConcurrentAppend {
        /// Their sequence numbers.
        var sequences: [UInt64]
        /// Whether they landed right at the position (the file ended there: no other process
        /// appended since the cursor read to the end), which has then moved past them. If not,
        /// records of others came first, and these are read back with them, in journal order.
        var landedAtPosition: Bool
    }

    /// Appends `records` with one `write(2)` at the end of a version 3 segment whose append lock
    /// the caller holds shared, as other processes may at the same moment. Throws
    /// ``UnconfirmedAppend`` if, the write made, the descriptor cannot say where it ended.
    ///
    /// If the write is cut short (a full disk), the call throws; the partial record stays, and
    /// readers read past it as damage once a record follows it (the next exclusive holder of the
    /// lock truncates it if none does).
    func appendConcurrently(_ records: [JournalRecord]) throws -> ConcurrentAppend {
        precondition(sealedNext == nil, "appending to a sealed segment")
        precondition(segment.header.numbersByPlace, "appending at once to a segment numbered by its records")
        let ends = try write(records)
        // With O_APPEND the descriptor's offset is where this write ended (the caller keeps the
        // process's other appenders out, and readers use pread).
        let end: Int64
        do {
            end = try segment.file.currentOffset()
        } catch {
            throw UnconfirmedAppend(underlying: error)
        }
        let start = end - Int64(ends.last ?? 0)
        let sequences = sequences(endingAt: ends, writtenAt: start)
        guard start == offset else { return ConcurrentAppend(sequences: sequences, landedAtPosition: false) }
        offset = end
        lastSequence = sequences.last ?? lastSequence
        return ConcurrentAppend(sequences: sequences, landedAtPosition: true)
    }

    /// Frames `records` for the current segment (numbered on from the last one applied, where
    /// records carry their numbers) and writes them with one `write(2)`; returns where each ends
    /// in what was written. A write cut short throws, once `cutShort` has run.
    private func write(_ records: [JournalRecord], cutShort: () -> Void = {}) throws -> [Int] {
        let header = segment.header
        // Kept up to 64 KiB: a put's record is a few hundred bytes, and a batch of evictions
        // with long keys, which can reach megabytes, should not stay allocated.
        encoding.removeAll(keepingCapacityUpTo: 64 << 10)
        var ends: [Int] = []
        ends.reserveCapacity(records.count)
        for index in records.indices {
            records[index].encode(mark: header.mark(forSequence: lastSequence + 1 + UInt64(index)), into: &encoding)
            ends.append(encoding.count)
        }
        let current = segment
        let written = try encoding.withUnsafeBytes { try current.file.writeOnce($0) }
        guard written == encoding.count else {
            // A regular file takes fewer bytes than asked only when it cannot take more:
            // the disk or quota is full (or a file size limit was hit).
            cutShort()
            throw SystemError("write", errno: ENOSPC, path: JournalSegment.name(current.generation))
        }
        return ends
    }

    /// The sequence numbers of records written by ``write(_:cutShort:)`` at file offset `start`:
    /// by their places in version 3, on from the last one applied before.
    private func sequences(endingAt ends: [Int], writtenAt start: Int64) -> [UInt64] {
        let header = segment.header
        return ends.enumerated().map { index, end in
            header.numbersByPlace
                ? header.sequence(ofRecordEndingAt: start + Int64(end)) : lastSequence + 1 + UInt64(index)
        }
    }
}

/// An append whose write was made but whose fate is unknown: the records may or may not be
/// read (they were not found before the failure, nor after a seal). What they name must be
/// kept, since a body that a record in effect may name is never reclaimed; the orphan sweep
/// reclaims it if they are not in effect.
package struct UnconfirmedAppend: Error {
    package var underlying: any Error
}
