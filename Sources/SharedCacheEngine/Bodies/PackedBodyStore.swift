#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
package import SharedCacheFormat
package import SharedCachePlatform

/// The body store of format version 2: bodies up to the directory's pack threshold as records in pack
/// segments (see ``PackSegments``), larger ones in blob files of their own
/// (``BlobFileStore``, which also keeps reading the blobs of a directory made by version 1).
///
/// A small get is a copy from the mapping of a segment kept open (or one `pread`), where a blob
/// costs open, read and close; a small put is one `pwrite` to a file this process owns, where a
/// blob costs a create and a rename. Space of packed bodies comes back a segment at a time
/// (``finishedPacks(modifiedBefore:)``), not per entry. Thread-safe.
package struct PackedBodyStore: BodyStore {
    /// Bodies of at most this many bytes are packed (`pack-threshold` in the directory's
    /// `config`); 0 packs none.
    package let packThreshold: Int
    package let blobs: BlobFileStore
    package let packs: PackSegments

    /// - Parameter mapsSegments: see ``PackSegments/mapsSegments``.
    package init(directory: CacheDirectory, packThreshold: Int, mapsSegments: Bool = true) {
        self.packThreshold = packThreshold
        blobs = BlobFileStore(directory: directory)
        packs = PackSegments(directory: directory, mapsSegments: mapsSegments)
    }

    // MARK: Writing

    package func write(_ header: BlobHeader, body: UnsafeRawBufferPointer, durable: Bool) throws -> BodyLocation {
        guard body.count <= packThreshold, packThreshold > 0 else { return try blobs.write(header, body: body, durable: durable) }
        return try packs.append(header, body: body, durable: durable)
    }

    /// Reads up to ``packThreshold`` bytes first: a body that ends within them is packed (or,
    /// not to be published, handed back from memory); a longer one goes to a blob, starting
    /// with the bytes already read.
    package func write(
        _ header: BlobHeader, durable: Bool, publishing: () -> Bool,
        readingBody read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
    ) throws -> Publication<(BodyLocation, BlobHeader)> {
        guard packThreshold > 0 else {
            return try blobs.write(header, durable: durable, publishing: publishing, readingBody: read)
        }
        let start = UnsafeMutableRawBufferPointer.allocate(byteCount: packThreshold + 1, alignment: 16)
        defer { start.deallocate() }
        var count = 0
        var ended = false
        while count < start.count, !ended {
            switch try read(UnsafeMutableRawBufferPointer(rebasing: start[count...])) {
            case .end:
                ended = true
            case .bytes(let read):
                count += read
            case .zeros(let zeros):
                let fill = min(Int(clamping: zeros), start.count - count)
                UnsafeMutableRawBufferPointer(rebasing: start[count..<(count + fill)]).initializeMemory(
                    as: UInt8.self, repeating: 0)
                count += fill
                // More zeros than fit make the body too big to pack: the blob gets the rest.
                if Int64(fill) < zeros {
                    return try writeBlob(header, durable, publishing, start, count, zeros - Int64(fill), read)
                }
            }
        }
        guard ended else { return try writeBlob(header, durable, publishing, start, count, 0, read) }
        let body = UnsafeRawBufferPointer(rebasing: start[..<count])
        guard publishing() else { return .unpublished(Data(body)) }
        var finished = header
        finished.bodySize = UInt64(count)
        finished.bodyChecksum = CRC32C.checksum(body)
        return .stored((try packs.append(finished, body: body, durable: durable), finished))
    }

    /// A streamed body too big to pack: the bytes (and zeros) already read, then the rest.
    private func writeBlob(
        _ header: BlobHeader, _ durable: Bool, _ publishing: () -> Bool, _ start: UnsafeMutableRawBufferPointer,
        _ count: Int, _ zeros: Int64, _ read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
    ) throws -> Publication<(BodyLocation, BlobHeader)> {
        var replayed = 0
        var zerosLeft = zeros
        return try blobs.write(header, durable: durable, publishing: publishing) { buffer in
            if replayed < count {
                let piece = min(buffer.count, count - replayed)
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: start[replayed..<(replayed + piece)]))
                replayed += piece
                return .bytes(piece)
            }
            if zerosLeft > 0 {
                defer { zerosLeft = 0 }
                return .zeros(zerosLeft)
            }
            return try read(buffer)
        }
    }

    /// Nothing to do for a packed body: its space comes back with its segment's.
    package func reclaim(_ hash: KeyHash, at location: BodyLocation) throws {
        guard !location.isPacked else { return }
        try blobs.reclaim(hash, at: location)
    }

    // MARK: Reading

    package func read(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64)
        throws -> BodyRead
    {
        guard location.isPacked else {
            return try blobs.read(hash, at: location, key: key, expectedSize: expectedSize)
        }
        switch try open(location.pack) {
        case .opened(let file): return try Self.read(file, hash: hash, at: location, key: key, expectedSize: expectedSize)
        case .missing: return .missing
        case .damaged(let reason): return .damaged(reason)
        }
    }

    private enum Opening {
        case opened(PackFile)
        case missing
        case damaged(String)
    }

    /// The segment `pack` for reading: gone once retired; damage when something other than a
    /// segment stands in its place.
    private func open(_ pack: UInt64) throws -> Opening {
        do {
            guard let file = try packs.open(pack) else { return .missing }
            return .opened(file)
        } catch let error as SystemError where error.errno == ELOOP {
            return .damaged("a symbolic link stands where the pack segment belongs")
        } catch let error as SystemError {
            guard let found = error.found else { throw error }
            return .damaged("\(found) stands where the pack segment belongs")
        }
    }

    /// What reading a record whole found.
    private enum RecordRead {
        /// Its place and header check out, and it is `hash`'s; `body` lives while the caller's
        /// closure runs.
        case record(BlobHeader, body: UnsafeRawBufferPointer)
        case damaged(String)

        /// The header, when the record checked out.
        var header: BlobHeader? {
            guard case .record(let header, _) = self else { return nil }
            return header
        }
    }

    /// Reads the record at `location` whole with one `pread`, checks its place, its header and
    /// that it is `hash`'s (not its body), and hands what it found to `body`.
    private static func withRecord<Result>(
        _ file: PackFile, _ hash: KeyHash, at location: BodyLocation, _ body: (RecordRead) throws -> Result
    ) throws -> Result {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: Int(location.length), alignment: 16)
        defer { storage.deallocate() }
        return try body(readRecord(file, hash, at: location, into: storage))
    }

    private static func readRecord(
        _ file: PackFile, _ hash: KeyHash, at location: BodyLocation, into storage: UnsafeMutableRawBufferPointer
    ) throws -> RecordRead {
        let count = try file.file.read(fromAbsoluteOffset: Int64(location.position), into: storage)
        guard count == Int(location.length) else { return .damaged("the pack segment ends inside the record") }
        do {
            let (header, headerBytes) = try PackRecord.decode(UnsafeRawBufferPointer(storage), at: location)
            guard header.keyHash == hash else { return .damaged("holds another key") }
            let body = UnsafeRawBufferPointer(rebasing: storage[(PackRecord.prefixSize + header.size)...])
            return .record(BlobHeader(header, in: headerBytes), body: body)
        } catch {
            return .damaged("record: \(error)")
        }
    }

    /// Bodies up to this size are read with their record by one `pread` and then moved to the
    /// front of the memory; larger ones go straight to their place with a `preadv`. Its two
    /// vectors cost ~240 ns more than a `pread` (measured in C), as much as moving 4 KiB.
    static let wholeRecordReadLimit = 4096

    /// Reads the record at `location` into the memory of the `Data` returned and checks it
    /// whole: its place, header, key, size and body checksum. From the segment's mapping when
    /// it can: the header copied to the stack and the body to its place, no system call. Else
    /// (on a thread that blocks SIGBUS, and when the mapping cannot give the bytes, which the
    /// `pread` then explains) with one system call (see ``wholeRecordReadLimit``).
    fileprivate static func read(
        _ file: PackFile, hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64
    ) throws -> BodyRead {
        let length = Int(location.length)
        guard expectedSize < UInt64(length) else { return .damaged("body size does not match") }
        let headLength = length - Int(expectedSize)
        let bodySize = Int(expectedSize)
        let whole = bodySize <= wholeRecordReadLimit
        // malloc'd, as `Data`'s `.free` deallocator expects; at least a byte, so never NULL.
        guard let memory = malloc(max(1, whole ? length : bodySize)) else { throw SystemError("malloc", errno: ENOMEM) }
        var handedOff = false
        defer { if !handedOff { free(memory) } }
        func check(_ head: UnsafeMutableRawBufferPointer, _ body: UnsafeMutableRawBufferPointer, read count: Int)
            -> BodyRead
        {
            guard count == length else { return .damaged("the pack segment ends inside the record") }
            let header: BlobHeader.Layout
            let headerBytes: UnsafeRawBufferPointer
            do {
                (header, headerBytes) = try PackRecord.decode(UnsafeRawBufferPointer(head), at: location)
            } catch {
                return .damaged("record: \(error)")
            }
            guard header.keyHash == hash, header.holds(key: key, in: headerBytes) else {
                return .damaged("holds another key")
            }
            // The header says where the body starts; the index said how long it is.
            guard PackRecord.prefixSize + header.size == headLength else { return .damaged("body size does not match") }
            guard CRC32C.checksum(UnsafeRawBufferPointer(body)) == header.bodyChecksum else {
                return .damaged("body checksum does not match")
            }
            let entry = CacheEntry(header, in: headerBytes, key: key)
            if body.baseAddress != memory { memmove(memory, body.baseAddress!, bodySize) }
            handedOff = true
            return .found(CacheHit(data: Data(bytesNoCopy: memory, count: bodySize, deallocator: .free), entry: entry))
        }
        let position = Int64(location.position)
        let body = UnsafeMutableRawBufferPointer(start: memory, count: bodySize)
        if let mapping = file.mapping {
            let copied = withUnsafeTemporaryAllocation(byteCount: headLength, alignment: 16) { head -> BodyRead? in
                guard mapping.copy(from: location.position, into: head, then: body, of: file.file) else { return nil }
                return check(head, body, read: length)
            }
            if let copied { return copied }
        }
        if whole {
            let record = UnsafeMutableRawBufferPointer(start: memory, count: length)
            let count = try file.file.read(fromAbsoluteOffset: position, into: record)
            return check(
                UnsafeMutableRawBufferPointer(rebasing: record[..<headLength]),
                UnsafeMutableRawBufferPointer(rebasing: record[headLength...]), read: count)
        }
        return try withUnsafeTemporaryAllocation(byteCount: headLength, alignment: 16) { head in
            check(head, body, read: try file.file.read(fromAbsoluteOffset: position, into: head, then: body))
        }
    }

    package func stream(
        _ hash: KeyHash, at location: BodyLocation, key: [UInt8], expectedSize: UInt64,
        into body: ((BodyPiece, Int64) throws -> Void)?
    ) throws -> BodyStream {
        guard location.isPacked else {
            return try blobs.stream(hash, at: location, key: key, expectedSize: expectedSize, into: body)
        }
        // A packed body is small: read and check it whole, then hand it on in one piece.
        guard case .opened(let file) = try open(location.pack) else { return .missing }
        return try Self.withRecord(file, hash, at: location) { found in
            switch found {
            case .damaged(let reason): return .damaged(reason)
            case .record(let header, let bytes):
                guard header.key == key else { return .damaged("holds another key") }
                guard header.bodySize == expectedSize else { return .damaged("body size does not match") }
                guard CRC32C.checksum(bytes) == header.bodyChecksum else {
                    return .damaged("body checksum does not match")
                }
                try body?(.bytes(bytes), 0)
                return .intact(header)
            }
        }
    }

    package func pin(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64) throws
        -> (any PinnedBody, BlobHeader)?
    {
        guard location.isPacked else { return try blobs.pin(hash, at: location, key: key, expectedSize: expectedSize) }
        guard case .opened(let file) = try open(location.pack),
            let header = try Self.withRecord(file, hash, at: location, { $0.header }),
            header.key.elementsEqual(key.utf8), header.bodySize == expectedSize
        else { return nil }
        return (PinnedRecord(file: file, hash: hash, location: location, key: key, expectedSize: expectedSize), header)
    }

    package func readHeader(_ hash: KeyHash, at location: BodyLocation) throws -> BlobHeader? {
        guard location.isPacked else { return try blobs.readHeader(hash, at: location) }
        guard case .opened(let file) = try open(location.pack) else { return nil }
        return try Self.withRecord(file, hash, at: location) { $0.header }
    }

    package func describe(_ hash: KeyHash, at location: BodyLocation) -> String {
        guard location.isPacked else { return blobs.describe(hash, at: location) }
        return "\(file(holding: hash, at: location)) at \(location.position)"
    }

    package func file(holding hash: KeyHash, at location: BodyLocation) -> String {
        location.isPacked ? PackSegments.name(location.pack) : blobs.file(holding: hash, at: location)
    }

    // MARK: Scanning

    /// Visits blob files only: a packed record stays in its segment after its entry is
    /// removed, so a scan cannot tell the live from the removed; the journal can (see the
    /// rebuild in `LiveIndex`).
    package func forEachBody(_ visit: (KeyHash, BodyLocation, BlobHeader) throws -> Void) throws {
        try blobs.forEachBody(visit)
    }

    package func audit(isLive: (KeyHash, BodyLocation) -> Bool, orphanCutoff: Int64, repair: Bool) throws
        -> [BodyProblem]
    {
        try blobs.audit(isLive: isLive, orphanCutoff: orphanCutoff, repair: repair)
            + packs.audit(repair: repair)
    }

    // MARK: Segments

    package func finishedPacks(modifiedBefore cutoff: Int64) throws -> [FinishedPack] {
        try packs.finished(modifiedBefore: cutoff)
    }

    package func copy(_ hash: KeyHash, at location: BodyLocation, durable: Bool) throws -> BodyLocation? {
        guard location.isPacked, case .opened(let file) = try open(location.pack) else { return nil }
        return try Self.withRecord(file, hash, at: location) { found in
            guard case .record(let header, let body) = found, CRC32C.checksum(body) == header.bodyChecksum else {
                return nil
            }
            return try packs.append(header, body: body, durable: durable)
        }
    }

    package func delete(_ pack: FinishedPack) throws {
        try packs.delete(pack)
    }

    package func close(retired packs: [UInt64]?) {
        self.packs.close(retired: packs)
    }

    package func finishWriting() {
        packs.finishWriting()
    }

    package func headerlessSegments(sparing livePacks: Set<UInt64>, cutoff: Int64, repair: Bool) throws
        -> [BodyProblem]
    {
        try packs.headerless(sparing: livePacks, cutoff: cutoff, repair: repair)
    }
}

/// A packed body held readable: the segment's descriptor stays open while this exists, even
/// after the segment is retired and deleted. Immutable; any thread may read it.
final class PinnedRecord: PinnedBody {
    private let file: PackFile
    private let hash: KeyHash
    private let location: BodyLocation
    private let key: String
    private let expectedSize: UInt64

    init(file: PackFile, hash: KeyHash, location: BodyLocation, key: String, expectedSize: UInt64) {
        self.file = file
        self.hash = hash
        self.location = location
        self.key = key
        self.expectedSize = expectedSize
    }

    func read() throws -> BodyRead {
        try PackedBodyStore.read(file, hash: hash, at: location, key: key, expectedSize: expectedSize)
    }
}
