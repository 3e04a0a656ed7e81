/// Journal segments and the records in them.
///
/// ```
/// segment        = segment-header *record
/// segment-header = "SCJL" major:u16 minor:u16 generation:u64 first-sequence:u64
///                  salt:u32 header-crc:u32                ; 32 bytes; crc of the 28 before it
/// record         = record-crc:u32 length:u32 mark:u64 type:u8 payload
///                  ; length = bytes of payload (at most 1 MiB)
///                  ; record-crc = masked CRC32C of length, mark, type and payload
///                  ; mark = the segment's tag (version 3), the record's sequence number (1, 2)
///
/// type 1 stored  = key-hash:32 location body-size:u64 stored-at:i64 expires-at:i64
///                  key-size:u32 key etag-size:u16 etag [writer]  ; writer: version 3
/// type 2 removed = key-hash:32 location reason:u8 remover [key-size:u32 key]
///                  ; reason: 1 expired 2 size 3 manual 4 cleared 5 superseded 6 corrupt 7 invalidated
///                  ; the key when the remover knew it
/// type 3 cleared = remover                      ; every entry stored before it is gone
/// type 4 sealed  = next-generation:u64          ; the last record of a segment
/// type 5 accessed = key-hash:32 location accessed-at:i64  ; a hit, journaled at most once
///                  per recency interval per entry, for least-recently-used eviction
/// type 6 freshened = key-hash:32 location stored-at:i64 expires-at:i64  ; a 304 revalidated
///                  this version: its age counts from stored-at again, and it expires later
/// type 7 moved   = key-hash:32 from:location to:location  ; the compactor copied this version's
///                  body; applies only while the entry is still at `from` (version 2)
/// type 8 retired = pack:u64                     ; a pack segment is being deleted: close it (version 2)
/// type 9 lost    = *padding                     ; written over damaged bytes by a repair: a record
///                  that was there is gone (version 2.1)
/// remover        = pid:u32 name-size:u8 name    ; the process that removed, for people
/// writer         = pid:u32 name-size:u8 name    ; the process that stored
/// location       = pack:u64 position:u64 length:u32   ; see BodyLocation; blob-id:u64 in version 1
/// ```
/// Integers are little-endian. In version 3 a record's sequence number is its place in the
/// journal: that of its last byte, counting first-sequence from the first byte after the segment
/// header, so numbers increase across segments but skip (processes append at once, and none can
/// know the next number). In versions
/// 1 and 2 each record carries its number, one more than the record before. A segment's records
/// are encoded in its header's major version; a writer never appends to a segment of an older
/// one (it seals it first). A reader skips a record of a type it does not know (its frame is
/// still checked), so new record types are a minor-version change. Payload bytes after the
/// fields a reader knows are ignored, so fields may be appended the same way.
package enum JournalRecord: Equatable, Sendable {
    case stored(StoredRecord)
    case removed(RemovedRecord)
    case cleared(Remover)
    case sealed(nextGeneration: UInt64)
    case accessed(AccessedRecord)
    case freshened(FreshenedRecord)
    case moved(MovedRecord)
    /// A pack segment is being deleted; every process closes its descriptor of it.
    case retired(pack: UInt64)
    /// A placeholder a repair wrote over damaged bytes: the record with this sequence number is
    /// gone, and what it said with it.
    case lost
    /// A record of a type this version does not know, or whose type the reader did not ask to
    /// decode (see ``Types``); skipped.
    case unknown(type: UInt8)

    /// Record types by their codes, for a reader that decodes only some of them: the compactor
    /// looks for removals among a million stored records, whose keys it would copy for nothing.
    package struct Types: OptionSet, Sendable {
        package let rawValue: UInt16
        package init(rawValue: UInt16) { self.rawValue = rawValue }
        private init(code: UInt8) { rawValue = 1 << code }

        package static let removed = Types(code: 2)
        package static let sealed = Types(code: 4)
        package static let all = Types(rawValue: .max)

        func contains(code: UInt8) -> Bool { self == .all || (code < 16 && rawValue & (1 << code) != 0) }
    }

    package static let frameHeaderSize = 17
    package static let maximumPayloadSize = 1 << 20

    package var typeCode: UInt8 {
        switch self {
        case .stored: 1
        case .removed: 2
        case .cleared: 3
        case .sealed: 4
        case .accessed: 5
        case .freshened: 6
        case .moved: 7
        case .retired: 8
        case .lost: 9
        case .unknown(let type): type
        }
    }
}

/// A body was written to a new blob and is now the entry for its key, superseding any other
/// version (in version 3, that removal is this record's consequence; earlier versions journal it).
package struct StoredRecord: Equatable, Sendable {
    package var hash: KeyHash
    package var location: BodyLocation
    package var bodySize: UInt64
    package var storedAt: Int64
    package var expiresAt: Int64
    package var key: [UInt8]
    package var etag: [UInt8]
    /// The process that stored it: the remover of the version it supersedes (version 3, where
    /// a put journals no removal of its own).
    package var writer: Remover?

    package init(
        hash: KeyHash, location: BodyLocation, bodySize: UInt64, storedAt: Int64, expiresAt: Int64, key: [UInt8],
        etag: [UInt8], writer: Remover? = nil
    ) {
        self.hash = hash
        self.location = location
        self.bodySize = bodySize
        self.storedAt = storedAt
        self.expiresAt = expiresAt
        self.key = key
        self.etag = etag
        self.writer = writer
    }
}

/// One version of an entry is gone (or about to be: the record precedes the unlink).
package struct RemovedRecord: Equatable, Sendable {
    package var hash: KeyHash
    /// The version removed; a removal of an older version leaves a newer one alone.
    package var location: BodyLocation
    package var reason: RemovalReason
    package var remover: Remover
    /// The entry's key, when the remover knew it (a removal by hash alone does not).
    package var key: [UInt8]? = nil

    package init(hash: KeyHash, location: BodyLocation, reason: RemovalReason, remover: Remover, key: [UInt8]? = nil) {
        self.hash = hash
        self.location = location
        self.reason = reason
        self.remover = remover
        self.key = key
    }
}

/// An entry was read; its recency for least-recently-used eviction.
package struct AccessedRecord: Equatable, Sendable {
    package var hash: KeyHash
    package var location: BodyLocation
    package var accessedAt: Int64

    package init(hash: KeyHash, location: BodyLocation, accessedAt: Int64) {
        self.hash = hash
        self.location = location
        self.accessedAt = accessedAt
    }
}

/// A conditional request confirmed the stored version (HTTP 304); its headers are unchanged
/// but for `Date`, `Age` and `Expires`, so only its times move.
package struct FreshenedRecord: Equatable, Sendable {
    package var hash: KeyHash
    package var location: BodyLocation
    /// When the response was generated, by the origin's account: its age counts from here.
    package var storedAt: Int64
    package var expiresAt: Int64

    package init(hash: KeyHash, location: BodyLocation, storedAt: Int64, expiresAt: Int64) {
        self.hash = hash
        self.location = location
        self.storedAt = storedAt
        self.expiresAt = expiresAt
    }
}

/// The compactor copied a version's body to a new place; the entry follows it only if it is
/// still that version at `from` (a put or removal since wins).
package struct MovedRecord: Equatable, Sendable {
    package var hash: KeyHash
    package var from: BodyLocation
    package var to: BodyLocation

    package init(hash: KeyHash, from: BodyLocation, to: BodyLocation) {
        self.hash = hash
        self.from = from
        self.to = to
    }
}

/// Why an entry was removed, as journaled.
public enum RemovalReason: UInt8, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Its expiry passed.
    case expired = 1
    /// Evicted to bring the cache under its size or entry limit.
    case size = 2
    /// Removed by a caller (`remove`, `sharedcache rm`).
    case manual = 3
    /// Removed by `clear`.
    case cleared = 4
    /// Replaced by a newer put of the same key.
    case superseded = 5
    /// Its blob failed a check and was discarded.
    case corrupt = 6
    /// A successful unsafe HTTP request (POST, PUT, DELETE, …) through ``SharedCache/fetch(_:options:transport:)``
    /// made the stored response for its URL stale (RFC 9111 §4.4).
    case invalidated = 7
    /// Not journaled: a subscriber that fell too far behind found it gone when it resynchronised.
    case unknown = 255

    public var description: String {
        switch self {
        case .expired: "expired"
        case .size: "size"
        case .manual: "manual"
        case .cleared: "cleared"
        case .superseded: "superseded"
        case .corrupt: "corrupt"
        case .invalidated: "invalidated"
        case .unknown: "unknown"
        }
    }
}

/// The process that removed an entry.
public struct Remover: Hashable, Sendable, CustomStringConvertible {
    /// The process ID of the remover.
    public var processID: UInt32
    /// The name of the remover's executable, as the process reported it.
    public var name: String

    /// A remover, as the journal records it.
    public init(processID: UInt32, name: String) {
        self.processID = processID
        self.name = name
    }

    public var description: String { "\(name)[\(processID)]" }
}

/// The fixed header at the start of every journal segment.
package struct SegmentHeader: Equatable, Sendable {
    package static let magic: [UInt8] = Array("SCJL".utf8)
    package static let size = 32

    package var generation: UInt64
    /// The sequence number of the segment's first record.
    package var firstSequence: UInt64
    /// The format version its records are encoded in.
    package var major: UInt16
    /// Chosen at random when the segment is made (version 3; 0 before). Every record of the
    /// segment carries it in its ``tag``: a frame that bytes of a key (a URL anyone may choose)
    /// or of another segment make up does not, so a reader that lost its place to damage finds
    /// the next real record by it.
    package var salt: UInt32

    package init(
        generation: UInt64, firstSequence: UInt64, major: UInt16 = FormatVersion.current.major, salt: UInt32 = 0
    ) {
        self.generation = generation
        self.firstSequence = firstSequence
        self.major = major
        self.salt = major >= 3 ? salt : 0
    }

    /// Whether records carry the segment's tag and take their sequence numbers from their place
    /// (version 3), rather than carrying their numbers.
    package var numbersByPlace: Bool { major >= 3 }

    /// What every record of a version 3 segment carries as its mark: the low 32 bits of the
    /// generation, then the salt.
    package var tag: UInt64 { UInt64(truncatingIfNeeded: generation) << 32 | UInt64(salt) }

    /// The sequence number of a version 3 record whose last byte lies just before `end`: the
    /// journal-wide position of that byte, so the next record's numbers start one after it, as
    /// they do in earlier versions (a segment's first number is first-sequence).
    package func sequence(ofRecordEndingAt end: Int64) -> UInt64 {
        firstSequence &+ UInt64(end - Int64(Self.size)) &- 1
    }

    /// The mark a record numbered `sequence` carries in this segment (see ``JournalRecord``).
    package func mark(forSequence sequence: UInt64) -> UInt64 { numbersByPlace ? tag : sequence }

    package func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.size)
        writer.append(bytes: Self.magic)
        writer.append(major)
        writer.append(FormatVersion.current.minor)
        writer.append(generation)
        writer.append(firstSequence)
        writer.append(salt)
        writer.appendChecksum()
        return writer.bytes
    }

    package static func decode(_ bytes: UnsafeRawBufferPointer) throws(FormatError) -> SegmentHeader {
        var reader = ByteReader(bytes)
        try reader.expectMagic(magic)
        let major: UInt16 = try reader.read()
        _ = try reader.read(UInt16.self)
        let generation: UInt64 = try reader.read()
        let firstSequence: UInt64 = try reader.read()
        let salt: UInt32 = try reader.read()
        // The checksum first: a flipped bit in the version is damage, not a newer SharedCache.
        try reader.verifyChecksum()
        guard major <= FormatVersion.current.major else { throw .unsupportedVersion(major: major) }
        guard major >= 1 else { throw .invalidField("version \(major)") }
        return SegmentHeader(generation: generation, firstSequence: firstSequence, major: major, salt: salt)
    }
}

/// What decoding the bytes at one position of a segment found.
package enum DecodedFrame: Equatable {
    /// A whole, valid record occupying `size` bytes.
    case record(JournalRecord, sequence: UInt64, size: Int)
    /// The bytes end inside a record: "not yet written" to a reader, a torn write to a writer
    /// holding the append lock.
    case incomplete
    /// A whole frame whose checksum or contents are wrong.
    case corrupt(FormatError)
}

extension JournalRecord {
    /// Appends one framed record to `writer`, its payload followed by `padding` zero bytes (which
    /// readers ignore).
    ///
    /// - Parameter mark: its segment's tag in version 3, its sequence number before (see
    ///   ``SegmentHeader/mark(forSequence:)``).
    package func encode(mark: UInt64, into writer: inout ByteWriter, padding: Int = 0) {
        let start = writer.count
        writer.append(UInt32(0))  // crc, filled in below
        writer.append(UInt32(0))  // length, filled in below
        writer.append(mark)
        writer.append(typeCode)
        let payloadStart = writer.count
        switch self {
        case .stored(let record):
            writer.append(record.hash)
            writer.append(record.location)
            writer.append(record.bodySize)
            writer.append(record.storedAt)
            writer.append(record.expiresAt)
            writer.append(UInt32(record.key.count))
            writer.append(bytes: record.key)
            writer.append(UInt16(record.etag.count))
            writer.append(bytes: record.etag)
            record.writer?.encode(into: &writer)
        case .removed(let record):
            writer.append(record.hash)
            writer.append(record.location)
            writer.append(record.reason.rawValue)
            record.remover.encode(into: &writer)
            if let key = record.key {
                writer.append(UInt32(key.count))
                writer.append(bytes: key)
            }
        case .cleared(let remover):
            remover.encode(into: &writer)
        case .sealed(let next):
            writer.append(next)
        case .accessed(let record):
            writer.append(record.hash)
            writer.append(record.location)
            writer.append(record.accessedAt)
        case .freshened(let record):
            writer.append(record.hash)
            writer.append(record.location)
            writer.append(record.storedAt)
            writer.append(record.expiresAt)
        case .moved(let record):
            writer.append(record.hash)
            writer.append(record.from)
            writer.append(record.to)
        case .retired(let pack):
            writer.append(pack)
        case .lost, .unknown:
            break
        }
        writer.append(zeros: padding)
        writer.set(UInt32(writer.count - payloadStart), at: start + 4)
        let crc = writer.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[(start + 4)...])) }
        writer.set(CRC32C.mask(crc), at: start)
    }

    /// Decodes the record that starts at `offset` in `bytes`, bytes of a segment with `header`
    /// whose first lies at file offset `base`.
    ///
    /// Following LevelDB's reader: a frame that runs past the end is `incomplete`, never
    /// corruption; a whole frame with a bad checksum is `corrupt`, and nothing after it can be
    /// trusted, because its length field may itself be damaged. In version 3 a frame must also
    /// carry its segment's tag, and its sequence number comes from its place.
    ///
    /// - Parameter types: the record types whose payloads are decoded; a record of another type
    ///   is checked all the same (checksum, tag, place) and comes back `.unknown` of its type.
    package static func decodeFrame(
        _ bytes: UnsafeRawBufferPointer, at offset: Int, in header: SegmentHeader,
        base: Int64 = Int64(SegmentHeader.size), decoding types: Types = .all
    ) -> DecodedFrame {
        var reader = ByteReader(bytes, offset: offset)
        guard reader.remaining >= frameHeaderSize else { return .incomplete }
        do {
            let storedCRC: UInt32 = try reader.read()
            let length = Int(try reader.read(UInt32.self))
            guard length <= maximumPayloadSize else { return .corrupt(.invalidField("record length \(length)")) }
            guard reader.remaining >= 9 + length else { return .incomplete }
            let covered = UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + frameHeaderSize + length)])
            guard CRC32C.unmask(storedCRC) == CRC32C.checksum(covered) else { return .corrupt(.checksumMismatch) }
            let mark: UInt64 = try reader.read()
            let sequence: UInt64
            if header.numbersByPlace {
                guard mark == header.tag else { return .corrupt(.foreignRecord) }
                sequence = header.sequence(ofRecordEndingAt: base + Int64(offset + frameHeaderSize + length))
            } else {
                sequence = mark
            }
            let type: UInt8 = try reader.read()
            guard types.contains(code: type) else {
                return .record(.unknown(type: type), sequence: sequence, size: frameHeaderSize + length)
            }
            var payload = ByteReader(try reader.readBytes(length))
            let record = try decodePayload(type: type, major: header.major, &payload)
            return .record(record, sequence: sequence, size: frameHeaderSize + length)
        } catch {
            return .corrupt(error)
        }
    }

    private static func decodePayload(type: UInt8, major: UInt16, _ reader: inout ByteReader) throws(FormatError)
        -> JournalRecord
    {
        switch type {
        case 1:
            let hash = try reader.readHash()
            let location = try reader.readLocation(major: major)
            let bodySize: UInt64 = try reader.read()
            let storedAt: Int64 = try reader.read()
            let expiresAt: Int64 = try reader.read()
            let key = Array(try reader.readBytes(Int(try reader.read(UInt32.self))))
            let etag = Array(try reader.readBytes(Int(try reader.read(UInt16.self))))
            let writer = major >= 3 && reader.remaining > 0 ? try Remover(&reader) : nil
            return .stored(
                StoredRecord(
                    hash: hash, location: location, bodySize: bodySize, storedAt: storedAt, expiresAt: expiresAt,
                    key: key, etag: etag, writer: writer))
        case 2:
            let hash = try reader.readHash()
            let location = try reader.readLocation(major: major)
            let rawReason: UInt8 = try reader.read()
            guard let reason = RemovalReason(rawValue: rawReason) else {
                throw .invalidField("removal reason \(rawReason)")
            }
            let remover = try Remover(&reader)
            let key = reader.remaining > 0 ? Array(try reader.readBytes(Int(try reader.read(UInt32.self)))) : nil
            return .removed(RemovedRecord(hash: hash, location: location, reason: reason, remover: remover, key: key))
        case 3:
            return .cleared(try Remover(&reader))
        case 4:
            return .sealed(nextGeneration: try reader.read())
        case 5:
            return .accessed(
                AccessedRecord(
                    hash: try reader.readHash(), location: try reader.readLocation(major: major),
                    accessedAt: try reader.read()))
        case 6:
            return .freshened(
                FreshenedRecord(
                    hash: try reader.readHash(), location: try reader.readLocation(major: major),
                    storedAt: try reader.read(),
                    expiresAt: try reader.read()))
        case 7:
            return .moved(
                MovedRecord(
                    hash: try reader.readHash(), from: try reader.readLocation(major: major),
                    to: try reader.readLocation(major: major)))
        case 8:
            return .retired(pack: try reader.read())
        case 9:
            return .lost
        default:
            return .unknown(type: type)
        }
    }
}

extension Remover {
    package func encode(into writer: inout ByteWriter) {
        // From the string's own storage: every put encodes its writer, and copying the name into
        // an array first was a thirtieth of a put's instructions (callgrind).
        var name = name
        name.withUTF8 { utf8 in
            let kept = UnsafeBufferPointer(rebasing: utf8.prefix(255))
            writer.append(processID)
            writer.append(UInt8(kept.count))
            writer.append(bytes: kept)
        }
    }

    package init(_ reader: inout ByteReader) throws(FormatError) {
        let processID: UInt32 = try reader.read()
        let nameSize = Int(try reader.read(UInt8.self))
        self.init(processID: processID, name: String(decoding: try reader.readBytes(nameSize), as: UTF8.self))
    }
}
