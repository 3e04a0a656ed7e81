#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
import SharedCachePlatform

/// Reading and replacing `<root>/manifest`, and rebuilding it when it is lost.
enum ManifestFile {
    enum Contents {
        case missing
        case corrupt(FormatError)
        case valid(ManifestCoding.Header, Index)
    }

    /// Bytes read or written per step: a multiple of the entry size, and small enough that a
    /// million-entry manifest never sits in memory whole.
    private static let chunkEntries = 8192

    /// Reads and checks the manifest in chunks, building the index as it goes.
    static func read(in directory: CacheDirectory) throws -> Contents {
        guard let file = try directory.openIfPresent(CacheDirectory.manifestFile, flags: O_RDONLY | O_NONBLOCK) else {
            return .missing
        }
        let status = try directory.requireRegularFile(
            file, named: CacheDirectory.manifestFile, role: "its manifest",
            advice: "open the cache again (the manifest is rebuilt from the blobs)")
        do {
            let header = try header(of: file)
            guard status.size == Int64(header.fileSize) else { throw FormatError.truncated }

            var index = Index()
            // The journal's tail is replayed over this index next: room for it to grow by an
            // eighth without moving.
            index.reserveCapacity(Int(header.entryCount), headroom: Int(header.entryCount) / 8 + 1024)
            var checksum: UInt32 = 0
            var offset = ManifestCoding.headerSize
            let end = header.fileSize - ManifestCoding.trailerSize
            var chunk = [UInt8](repeating: 0, count: chunkEntries * header.storedEntrySize)
            var decoded: [Index.Element] = []
            decoded.reserveCapacity(chunkEntries)
            while offset < end {
                let count = min(chunk.count, end - offset)
                let read = try chunk.withUnsafeMutableBytes { buffer in
                    try file.read(
                        fromAbsoluteOffset: Int64(offset),
                        into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<count]))
                }
                guard read == count else { throw FormatError.truncated }
                try chunk.withUnsafeBytes { buffer in
                    let entries = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                    checksum = CRC32C.checksum(entries, extending: checksum)
                    try ManifestCoding.decodeEntries(entries, of: header) { hash, entry in
                        decoded.append((hash, entry))
                    }
                }
                index.insert(contentsOf: decoded)
                decoded.removeAll(keepingCapacity: true)
                offset += count
            }
            var trailer = [UInt8](repeating: 0, count: ManifestCoding.trailerSize)
            _ = try trailer.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: Int64(end), into: $0) }
            let stored = try trailer.withUnsafeBytes { raw in try ManifestCoding.decodeTrailer(raw) }
            guard stored == checksum, index.count == Int(header.entryCount) else { throw FormatError.checksumMismatch }
            return .valid(header, index)
        } catch let error as FormatError {
            return .corrupt(error)
        }
    }

    /// The manifest's header alone, if it is there and intact (its entries unread).
    static func readHeader(in directory: CacheDirectory) throws -> ManifestCoding.Header? {
        guard let file = try directory.openIfPresent(CacheDirectory.manifestFile, flags: O_RDONLY | O_NONBLOCK),
            try file.status().isRegularFile
        else { return nil }
        do { return try header(of: file) } catch is FormatError { return nil }
    }

    /// The header at the start of the manifest open as `file`.
    ///
    /// - Throws: `FormatError` when it is cut short or does not decode.
    private static func header(of file: borrowing FileDescriptor) throws -> ManifestCoding.Header {
        var bytes = [UInt8](repeating: 0, count: ManifestCoding.headerSize)
        let count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        guard count == bytes.count else { throw FormatError.truncated }
        return try bytes.withUnsafeBytes { raw in try ManifestCoding.decodeHeader(raw) }
    }

    /// Replaces the manifest, writing it in chunks; the caller holds the directory lock.
    static func write(
        _ index: Index, generation: UInt64, lastSequence: UInt64, in directory: CacheDirectory, durable: Bool
    ) throws {
        let header = ManifestCoding.Header(
            generation: generation, lastSequence: lastSequence, entryCount: UInt64(index.count),
            createdAt: Clock.nowMilliseconds())
        try directory.replaceFile(CacheDirectory.manifestFile, durable: durable) { file in
            try ManifestCoding.encodeHeader(header).withUnsafeBytes { try file.writeAll($0) }
            var checksum: UInt32 = 0
            var entries = index.makeIterator()
            var more = true
            // One buffer for every chunk: a fresh one each time allocated and zeroed 688 KB anew,
            // 84 MB at a million entries.
            var chunk = ByteWriter(capacity: chunkEntries * ManifestCoding.entrySize)
            while more {
                chunk.removeAll(keepingCapacityUpTo: .max)
                while chunk.count < chunkEntries * ManifestCoding.entrySize {
                    guard let (hash, entry) = entries.next() else {
                        more = false
                        break
                    }
                    ManifestCoding.encodeEntry(hash, entry, into: &chunk)
                }
                try chunk.withUnsafeBytes { buffer in
                    checksum = CRC32C.checksum(buffer, extending: checksum)
                    try file.writeAll(buffer)
                }
            }
            try ManifestCoding.encodeTrailer(entriesChecksum: checksum).withUnsafeBytes { try file.writeAll($0) }
        }
    }

    /// Builds an index from the stored bodies alone: the recovery when the manifest is lost.
    ///
    /// Bodies are the source of truth; a hash with several (a put whose superseded predecessor
    /// was not reclaimed yet) keeps the newest.
    static func scanBodies(_ store: any BodyStore) throws -> Index {
        var newest = Index()
        try store.forEachBody { hash, location, header in
            let entry = IndexEntry(
                location: location, bodySize: header.bodySize, storedAt: header.storedAt,
                expiresAt: header.expiresAt, lastAccess: header.storedAt)
            if let existing = newest[hash], (existing.storedAt, existing.location) > (entry.storedAt, entry.location) {
                return
            }
            newest.insert(entry, for: hash)
        }
        return newest
    }
}
