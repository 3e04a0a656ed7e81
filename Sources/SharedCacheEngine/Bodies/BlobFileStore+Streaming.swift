#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CSharedCacheSupport
import Foundation
package import SharedCacheFormat
import SharedCachePlatform

// Blobs whose bodies never sit in memory whole: written from a stream and copied out to one in
// chunks of `streamingChunkSize`, so a 2 GB body costs a megabyte of memory. The checks are the
// same as for a body read whole; only where the bytes go differs.

extension BlobFileStore {
    /// Bytes read or written per step when a body is streamed.
    package static let streamingChunkSize = 1 << 20

    /// Bodies larger than this are read by mapping them (``readMapped(_:hash:key:expectedSize:)``),
    /// never into memory whole.
    package static let mappingThreshold: UInt64 = 1 << 20

    /// Writes a new blob whose body is everything `read` produces until it returns 0, and
    /// returns its ID and its finished header; the caller journals it.
    ///
    /// The header is written first with a zero size and checksum and rewritten (it has the same
    /// length) once the body's size and CRC32C are known; the blob is renamed into place only
    /// then, so no reader sees the placeholder. Chunks of zeros are left as holes, so a sparse
    /// input makes a sparse blob.
    ///
    /// A body `publishing` says not to publish is mapped privately from the temporary file,
    /// which is then removed instead of renamed: the caller serves it from there, and its
    /// space goes back with the mapping. Until then the file is a temporary file like any
    /// other, locked by its writer, so a writer that dies meanwhile leaves only what the
    /// orphan sweep of the temporary folder reclaims.
    ///
    /// - Parameters:
    ///   - header: the blob's header; its body size and checksum are filled in here.
    ///   - publishing: asked once the body has ended; `false` hands the body back instead.
    ///   - read: fills the buffer it is given with the next bytes of the body (it may return
    ///     fewer than asked), or says that zeros come next, or that the body ended.
    package func write(
        _ header: BlobHeader, durable: Bool, publishing: () -> Bool,
        readingBody read: (UnsafeMutableRawBufferPointer) throws -> StreamedChunk
    ) throws -> Publication<(BodyLocation, BlobHeader)> {
        var header = header
        header.bodySize = 0
        header.bodyChecksum = 0
        let headerSize = header.encodedSize
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.streamingChunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var unpublished: Data?
        // Not `durable:` here: a body handed back is never flushed, so the flush is the write's.
        let location = try directory.publishNewFile(
            purpose: "blob", durable: false,
            write: { file in
                try header.encoded().withUnsafeBytes { try file.writeAll($0, atAbsoluteOffset: 0) }
                var size: Int64 = 0
                var checksum: UInt32 = 0
                reading: while true {
                    switch try read(buffer) {
                    case .end:
                        break reading
                    case .zeros(let count):
                        checksum = scs_crc32c_extend_zeros(checksum, UInt64(count))
                        size += count
                    case .bytes(let count):
                        let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
                        checksum = CRC32C.checksum(chunk, extending: checksum)
                        if !Self.isAllZeros(chunk) { try file.writeAll(chunk, atAbsoluteOffset: Int64(headerSize) + size) }
                        size += Int64(count)
                    }
                }
                // Trailing holes: extend the file to its full length.
                try file.truncate(to: Int64(headerSize) + size)
                guard publishing() else {
                    let body = size == 0 ? nil : try file.mapPrivately(offset: Int64(headerSize), count: Int(size))
                    unpublished = body.map(Self.data) ?? Data()
                    return
                }
                header.bodySize = UInt64(size)
                header.bodyChecksum = checksum
                let finished = header.encoded()
                precondition(finished.count == headerSize, "a blob header changed length with its body size")
                try finished.withUnsafeBytes { try file.writeAll($0, atAbsoluteOffset: 0) }
                if durable { try file.synchronizeData() }
            },
            publish: { temporary -> BodyLocation? in
                guard unpublished == nil else {
                    try directory.removeFile(temporary)
                    return nil
                }
                return try publish(temporary, hash: header.keyHash)
            })
        guard let location else { return .unpublished(unpublished ?? Data()) }
        if durable { try directory.synchronizeDirectory(containing: Self.path(header.keyHash, location)) }
        return .stored((location, header))
    }

    /// The bytes of `mapped`, which live as long as the `Data` (and every copy of it) does.
    static func data(_ mapped: MappedBytes) -> Data {
        Data(
            bytesNoCopy: mapped.start, count: mapped.count,
            deallocator: .custom { _, _ in withExtendedLifetime(mapped) {} })
    }

    /// A blob opened for streaming its body out, its header checked.
    private struct OpenedBody: ~Copyable {
        let file: FileDescriptor
        let header: BlobHeader
    }

    /// What opening a blob for streaming found.
    private enum BodyOpening: ~Copyable {
        case opened(OpenedBody)
        /// The file is not there (removed by another process a moment ago): a plain miss.
        case missing
        /// The file is there but fails its checks; the caller journals its removal.
        case damaged(String)
    }

    /// Opens a blob and checks everything but the body's checksum (``checkedHeader(_:_:key:expectedSize:)``).
    private func openBody(_ hash: KeyHash, _ location: BodyLocation, key: [UInt8], expectedSize: UInt64) throws
        -> BodyOpening
    {
        let opened: FileDescriptor?
        do {
            opened = try directory.openIfPresent(Self.path(hash, location), flags: O_RDONLY | O_NONBLOCK)
        } catch {
            guard error.errno == ELOOP else { throw error }
            return .damaged("a symbolic link stands where the blob belongs")
        }
        guard let file = opened else { return .missing }
        switch try checkedHeader(file, hash, key: key, expectedSize: expectedSize) {
        case .success(let header): return .opened(OpenedBody(file: file, header: header))
        case .failure(let damage): return .damaged(damage.reason)
        }
    }

    /// Why a blob failed its checks.
    struct Damage: Error {
        var reason: String
    }

    /// Checks everything about an open blob but its body's checksum: the header's own
    /// checksum, that it is the blob of `key` with `expectedSize` bytes of body, and the
    /// file's length.
    func checkedHeader(_ file: borrowing FileDescriptor, _ hash: KeyHash, key: [UInt8], expectedSize: UInt64) throws
        -> Result<BlobHeader, Damage>
    {
        let status = try file.status()
        guard status.isRegularFile else { return .failure(Damage(reason: "not a regular file")) }
        var bytes = [UInt8](repeating: 0, count: min(Int(status.size), 4096))
        var count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        guard let declared = try? bytes.withUnsafeBytes({ try BlobHeader.declaredSize(in: $0) }) else {
            return .failure(Damage(reason: "header"))
        }
        if declared > count, declared <= status.size {
            bytes = [UInt8](repeating: 0, count: declared)
            count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        }
        guard
            let header = try? bytes.withUnsafeBytes({
                try BlobHeader.decode(UnsafeRawBufferPointer(rebasing: $0[..<count]))
            })
        else { return .failure(Damage(reason: "header")) }
        guard header.keyHash == hash, header.key == key else { return .failure(Damage(reason: "holds another key")) }
        guard header.bodySize == expectedSize, Int64(header.encodedSize) + Int64(header.bodySize) == status.size else {
            return .failure(Damage(reason: "body size does not match"))
        }
        return .success(header)
    }

    /// Reads a large blob open as `file` without holding its body in memory: checks it a chunk
    /// at a time, then maps the body privately (a blob is never rewritten or shortened, so the
    /// mapping stays valid and holds what was checked; a caller's writes stay its own).
    func readMapped(_ file: borrowing FileDescriptor, hash: KeyHash, key: String, expectedSize: UInt64) throws
        -> BodyRead
    {
        let header: BlobHeader
        switch try checkedHeader(file, hash, key: Array(key.utf8), expectedSize: expectedSize) {
        case .success(let checked): header = checked
        case .failure(let damage): return .damaged(damage.reason)
        }
        guard try streamBody(of: file, header, into: nil) else { return .damaged("body checksum does not match") }
        let mapped = try file.mapPrivately(offset: Int64(header.encodedSize), count: Int(header.bodySize))
        return .found(CacheHit(data: Self.data(mapped), entry: CacheEntry(header)))
    }

    package func stream(
        _ hash: KeyHash, at location: BodyLocation, key: [UInt8], expectedSize: UInt64,
        into body: ((BodyPiece, Int64) throws -> Void)?
    ) throws -> BodyStream {
        let opening = try openBody(hash, location, key: key, expectedSize: expectedSize)
        switch consume opening {
        case .missing: return .missing
        case .damaged(let reason): return .damaged(reason)
        case .opened(let blob):
            return try streamBody(of: blob.file, blob.header, into: body)
                ? .intact(blob.header) : .damaged("body checksum does not match")
        }
    }

    /// Reads the body of the blob open as `file` in chunks, handing each to `body` (which may
    /// be `nil` to only check), and returns whether the whole body matched its checksum. Holes
    /// in the blob file are handed on as runs of zeros without being read.
    ///
    /// `body` sees bytes before the checksum is known: a caller that must not act on a damaged
    /// body writes them somewhere it can take back (a temporary file), or checks first.
    private func streamBody(
        of file: borrowing FileDescriptor, _ header: BlobHeader, into body: ((BodyPiece, Int64) throws -> Void)?
    ) throws -> Bool {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.streamingChunkSize, alignment: 16)
        defer { buffer.deallocate() }
        let start = Int64(header.encodedSize)
        let size = Int64(header.bodySize)
        var offset: Int64 = 0
        var checksum: UInt32 = 0
        while offset < size {
            let data = try file.nextData(from: start + offset).map { $0 - start } ?? size
            if data > offset {
                let zeros = min(data, size) - offset
                checksum = scs_crc32c_extend_zeros(checksum, UInt64(zeros))
                try body?(.zeros(zeros), offset)
                offset += zeros
                continue
            }
            let wanted = Int(min(Int64(buffer.count), size - offset))
            let count = try file.read(
                fromAbsoluteOffset: start + offset, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted]))
            guard count == wanted else { return false }  // shorter than its header says
            let chunk = UnsafeRawBufferPointer(rebasing: buffer[..<count])
            checksum = CRC32C.checksum(chunk, extending: checksum)
            try body?(.bytes(chunk), offset)
            offset += Int64(count)
        }
        return checksum == header.bodyChecksum
    }

    /// Whether every byte is zero: the first is, and each equals the next.
    package static func isAllZeros(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let first = bytes.first, let base = bytes.baseAddress else { return true }
        return first == 0 && memcmp(base, base + 1, bytes.count - 1) == 0
    }
}
