#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform
import Foundation

/// The body store of format version 1: every body in an immutable blob file of its own,
/// `blobs/<xx>/<hash>.<blob-id>`, its location being the blob ID.
///
/// A blob is written once under `tmp/` and renamed into place without replacing anything, so a
/// reader that has one open always reads one consistent body. Reading checks everything the
/// header promises before a byte is returned. Thread-safe.
package struct BlobFileStore: BodyStore {
    let directory: CacheDirectory

    package init(directory: CacheDirectory) {
        self.directory = directory
    }

    /// How often a publish may find its name taken or its folder missing before giving up:
    /// either happens once in a blue moon, so more than a few times means something else is
    /// wrong (a sweeper removing the temporary file, a folder that cannot be made).
    private static let publishAttempts = 4

    // MARK: Paths

    /// `blobs/xx/<64 hex>.<16 hex>` is 90 bytes; with its NUL it fits this buffer.
    private static let pathCapacity = 91

    /// Calls `body` with the blob's path as a C string, without allocating.
    static func withPath<R>(_ hash: KeyHash, _ location: BodyLocation, _ body: (UnsafePointer<CChar>) throws -> R)
        rethrows -> R
    {
        try withUnsafeTemporaryAllocation(byteCount: pathCapacity, alignment: 1) { raw in
            // "blobs/" xx "/" <64 hex digits> "." <16 hex digits> NUL, where xx = the first two digits.
            let prefix: StaticString = "blobs/"
            raw.baseAddress!.copyMemory(from: prefix.utf8Start, byteCount: 6)
            hash.writeHex(into: UnsafeMutableRawBufferPointer(rebasing: raw[9..<73]))
            raw[6] = raw[9]
            raw[7] = raw[10]
            raw[8] = UInt8(ascii: "/")
            raw[73] = UInt8(ascii: ".")
            writeHexDigits(location.blobID, width: 16, into: UnsafeMutableRawBufferPointer(rebasing: raw[74..<90]))
            raw[90] = 0
            return try body(raw.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
    }

    /// `blobs/<xx>/<hash>.<blob-id>`, relative to the cache directory.
    package static func path(_ hash: KeyHash, _ location: BodyLocation) -> String {
        withPath(hash, location) { String(cString: $0) }
    }

    package func describe(_ hash: KeyHash, at location: BodyLocation) -> String {
        Self.path(hash, location)
    }

    package func file(holding hash: KeyHash, at location: BodyLocation) -> String {
        Self.path(hash, location)
    }

    /// The hash and location in a blob file name, `<64 hex>.<16 hex>`; `nil` for any other name.
    static func parseName(_ name: String) -> (KeyHash, BodyLocation)? {
        let parts = name.split(separator: ".")
        guard parts.count == 2, parts[1].utf8.count == 16, let hash = KeyHash(hex: String(parts[0])),
            let blobID = UInt64(parts[1], radix: 16)
        else { return nil }
        return (hash, BodyLocation(blobID: blobID))
    }

    /// The fan-out folder of the hashes whose first byte is `byte`: `blobs/<xx>`.
    package static func fanOutFolder(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return "\(CacheDirectory.blobsDirectory)/\(digits.count == 1 ? "0" + digits : digits)"
    }

    /// Makes `blobs/` and its 256 fan-out folders, as a new cache needs.
    package static func makeFolders(in directory: CacheDirectory) throws(SystemError) {
        try directory.makeDirectory(CacheDirectory.blobsDirectory)
        for byte in 0...255 { try directory.makeDirectory(fanOutFolder(UInt8(byte))) }
    }

    // MARK: Writing

    /// Writes a new blob and returns its location; the caller journals it.
    ///
    /// - Parameter durable: flush the file before the rename and its directory after it.
    package func write(_ header: BlobHeader, body: UnsafeRawBufferPointer, durable: Bool) throws -> BodyLocation {
        let headerBytes = header.encoded()
        let location = try directory.publishNewFile(
            purpose: "blob", durable: durable,
            write: { file in try headerBytes.withUnsafeBytes { try file.writeAll([$0, body]) } },
            publish: { temporary in try publish(temporary, hash: header.keyHash) })
        if durable { try directory.synchronizeDirectory(containing: Self.path(header.keyHash, location)) }
        return location
    }

    /// Renames a finished temporary blob to a fresh name, never replacing an existing blob.
    func publish(_ temporary: String, hash: KeyHash) throws -> BodyLocation {
        var lastError: SystemError?
        for _ in 0..<Self.publishAttempts {
            let location = BodyLocation(blobID: UniqueNames.next())
            do {
                try directory.renameWithoutReplacing(temporary, to: Self.path(hash, location))
                return location
            } catch {
                lastError = error
                switch error.errno {
                case EEXIST:
                    continue  // 2^-64 odds, but a live blob is never replaced
                case ENOENT:
                    // Either the fan-out folder went missing (removed by hand): make it again;
                    // or the temporary file did (removed by hand or a sweeper): nothing to
                    // publish, and retrying would spin.
                    guard try directory.status(of: temporary) != nil else {
                        throw SystemError("renameat2", errno: ENOENT, path: temporary)
                    }
                    try directory.makeDirectory(Self.fanOutFolder(hash.fanOut))
                default:
                    throw error
                }
            }
        }
        throw lastError ?? SystemError("renameat2", errno: EEXIST, path: temporary)
    }

    /// Unlinks a blob; one that is already gone is fine.
    package func reclaim(_ hash: KeyHash, at location: BodyLocation) throws {
        let path = Self.path(hash, location)
        do {
            try directory.removeFile(path)
        } catch {
            // A folder planted where the blob belongs goes too if it is empty; one with contents
            // is someone's, and the error says to remove it.
            guard (try? directory.status(of: path))??.isDirectory == true,
                try directory.removeFileOrEmptyFolder(path, isFolder: true)
            else { throw error }
        }
    }

    // MARK: Reading

    package func read(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64)
        throws -> BodyRead
    {
        let file: FileDescriptor
        switch try open(hash, location) {
        case .opened(let opened): file = opened
        case .missing: return .missing
        case .damaged(let reason): return .damaged(reason)
        }
        return try read(file, hash: hash, key: key, expectedSize: expectedSize)
    }

    private enum OpenResult: ~Copyable {
        case opened(FileDescriptor)
        case missing
        case damaged(String)
    }

    private func open(_ hash: KeyHash, _ location: BodyLocation) throws -> OpenResult {
        do {
            // The path lives on the stack only while the buffer does, so the descriptor is
            // carried out in an optional (a noncopyable value cannot be the closure's result).
            var opened: FileDescriptor?
            try Self.withPath(hash, location) { path in
                opened = try directory.open(cString: path, flags: O_RDONLY | O_NONBLOCK)
            }
            return .opened(opened.take()!)
        } catch let error as SystemError {
            switch error.errno {
            case ENOENT: return .missing
            case ELOOP: return .damaged("a symbolic link stands where the blob belongs")
            default: throw error
            }
        }
    }

    package func pin(_ hash: KeyHash, at location: BodyLocation, key: String, expectedSize: UInt64) throws
        -> (any PinnedBody, BlobHeader)?
    {
        guard case .opened(let file) = try open(hash, location),
            let header = try readHeader(file), header.keyHash == hash, header.key.elementsEqual(key.utf8),
            header.bodySize == expectedSize
        else { return nil }
        return (PinnedBlob(store: self, file: file, header: header, key: key), header)
    }

    /// Reads and checks the whole blob open as `file`.
    fileprivate func read(
        _ file: borrowing FileDescriptor, hash: KeyHash, key: String, expectedSize: UInt64
    ) throws -> BodyRead {
        // One pread sized from the index (body + this key + room for validators) reads most blobs
        // whole; a read that fills the buffer means there is more, so the file is read again
        // at its real size. Skipping fstat, and the second pread that would only find the end
        // of the file, keeps a get to open + pread + close: a short read of a regular file is
        // its end, unless the header says more is there (a signal cut the read short).
        if expectedSize > Self.mappingThreshold {
            return try readMapped(file, hash: hash, key: key, expectedSize: expectedSize)
        }
        var capacity = Int(clamping: expectedSize) + BlobHeader.fixedSize + key.utf8.count + 1024
        var storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        var handedOff = false
        defer { if !handedOff { storage.deallocate() } }
        var size: Int
        while true {
            do {
                size = try file.readOnce(fromAbsoluteOffset: 0, into: storage)
                if size < capacity, size < Self.declaredFileSize(storage, count: size, bodySize: expectedSize) {
                    size = try file.read(fromAbsoluteOffset: 0, into: storage)
                }
            } catch {
                // An I/O error is not damage: it is thrown, and the entry stays for a retry.
                guard Self.meansNotAFile(error.errno) else { throw error }
                return .damaged("unreadable as a file: \(error)")
            }
            guard size == capacity else { break }
            let status = try file.status()
            guard status.isRegularFile, status.size > capacity else { break }
            capacity = Int(status.size)
            storage.deallocate()
            storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        }
        guard size >= BlobHeader.fixedSize + 4, UInt64(size) >= expectedSize else {
            return .damaged("\(size) bytes is too short")
        }

        let bytes = UnsafeRawBufferPointer(rebasing: storage[..<size])
        let header: BlobHeader.Layout
        do {
            header = try BlobHeader.Layout(checking: bytes)
        } catch {
            return .damaged("header: \(error)")
        }
        let headerSize = header.size
        guard header.keyHash == hash, header.holds(key: key, in: bytes) else { return .damaged("holds another key") }
        guard header.bodySize == expectedSize, headerSize + Int(header.bodySize) == size else {
            return .damaged("body size does not match")
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[headerSize...])
        guard CRC32C.checksum(body) == header.bodyChecksum else { return .damaged("body checksum does not match") }

        handedOff = true
        let data = Data(
            bytesNoCopy: storage.baseAddress! + headerSize, count: body.count,
            deallocator: .custom { pointer, _ in (pointer - headerSize).deallocate() })
        return .found(CacheHit(data: data, entry: CacheEntry(header, in: bytes, key: key)))
    }

    /// Whether a read failed because a blob's place holds no regular file: a directory
    /// (EISDIR), a FIFO or socket (ESPIPE), a device (EINVAL, ENXIO).
    private static func meansNotAFile(_ code: Int32) -> Bool {
        code == EISDIR || code == ESPIPE || code == EINVAL || code == ENXIO
    }

    /// The size a blob file whose first `count` bytes are in `bytes` says it has (its header's
    /// size and the body's); 0 when those bytes do not say.
    private static func declaredFileSize(_ bytes: UnsafeMutableRawBufferPointer, count: Int, bodySize: UInt64) -> Int {
        let prefix = UnsafeRawBufferPointer(rebasing: bytes[..<count])
        guard let headerSize = try? BlobHeader.declaredSize(in: prefix) else { return 0 }
        return headerSize + Int(clamping: bodySize)
    }

    package func readHeader(_ hash: KeyHash, at location: BodyLocation) throws -> BlobHeader? {
        try readHeader(at: Self.path(hash, location))
    }

    /// Reads and checks the header of the blob file at `path`; `nil` if it is missing or damaged.
    private func readHeader(at path: String) throws -> BlobHeader? {
        guard let file = try directory.openIfPresent(path, flags: O_RDONLY | O_NONBLOCK, linkIsAbsence: true) else {
            return nil
        }
        return try readHeader(file)
    }

    /// Reads and checks the header of the blob open as `file`; `nil` if it is damaged.
    private func readHeader(_ file: borrowing FileDescriptor) throws -> BlobHeader? {
        let status = try file.status()
        guard status.isRegularFile else { return nil }
        var bytes = [UInt8](repeating: 0, count: min(Int(status.size), 4096))
        var count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        guard let declared = try? bytes.withUnsafeBytes({ try BlobHeader.declaredSize(in: $0) }) else { return nil }
        if declared > count, declared <= status.size {
            bytes = [UInt8](repeating: 0, count: declared)
            count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        }
        guard
            let header = try? bytes.withUnsafeBytes({
                try BlobHeader.decode(UnsafeRawBufferPointer(rebasing: $0[..<count]))
            }),
            Int64(header.encodedSize) + Int64(header.bodySize) == status.size
        else { return nil }
        return header
    }
}

extension BlobFileStore {
    // MARK: Scanning

    package func forEachBody(_ visit: (KeyHash, BodyLocation, BlobHeader) throws -> Void) throws {
        for fanOut in try directory.contents(of: CacheDirectory.blobsDirectory) {
            let folder = "\(CacheDirectory.blobsDirectory)/\(fanOut)"
            guard fanOut.utf8.count == 2, directory.isDirectory(folder) else { continue }
            for name in try directory.contents(of: folder) {
                guard let (hash, location) = Self.parseName(name),
                    let header = try readHeader(at: "\(folder)/\(name)"),
                    header.keyHash == hash,
                    header.key.withUnsafeBytes({ KeyHash(hashing: $0) }) == hash
                else { continue }
                try visit(hash, location, header)
            }
        }
    }

    package func audit(isLive: (KeyHash, BodyLocation) -> Bool, orphanCutoff: Int64, repair: Bool) throws
        -> [BodyProblem]
    {
        var problems: [BodyProblem] = []
        func note(
            _ kind: BodyProblem.Kind, _ path: String, _ detail: String, isFolder: Bool = false,
            orphan: (KeyHash, BodyLocation)? = nil
        ) throws {
            problems.append(
                try .found(kind, at: path, detail, isFolder: isFolder, orphan: orphan, repair: repair, in: directory))
        }
        let blobs = CacheDirectory.blobsDirectory
        for fanOut in try directory.contents(of: blobs).sorted() {
            let folder = "\(blobs)/\(fanOut)"
            guard let status = try directory.status(of: folder) else { continue }
            guard status.isDirectory, fanOut.utf8.count == 2, UInt8(fanOut, radix: 16) != nil else {
                try note(.foreign, folder, "not a blob fan-out folder", isFolder: status.isDirectory)
                continue
            }
            for name in try directory.contents(of: folder).sorted() {
                let path = "\(folder)/\(name)"
                guard let status = try directory.status(of: path) else { continue }
                // A link named like a live entry's blob is that entry's damage, reported by its check.
                if status.isSymbolicLink, let (hash, location) = Self.parseName(name), isLive(hash, location) {
                    continue
                }
                guard status.isRegularFile, let (hash, location) = Self.parseName(name),
                    hash.fanOut == UInt8(fanOut, radix: 16)
                else {
                    try note(.foreign, path, "not a blob file", isFolder: status.isDirectory)
                    continue
                }
                guard !isLive(hash, location), status.modifiedMilliseconds < orphanCutoff else { continue }
                try note(.orphan, path, "no entry refers to it", orphan: (hash, location))
            }
        }
        return problems
    }
}

/// A blob held open: unlinking it (an eviction, a replacement) cannot take its body away.
///
/// Immutable, and reading is `pread` at absolute offsets, so any thread may read it.
final class PinnedBlob: PinnedBody {
    private let store: BlobFileStore
    private let file: FileDescriptor
    private let header: BlobHeader
    private let key: String

    fileprivate init(store: BlobFileStore, file: consuming FileDescriptor, header: BlobHeader, key: String) {
        self.store = store
        self.file = file
        self.header = header
        self.key = key
    }

    func read() throws -> BodyRead {
        try store.read(file, hash: header.keyHash, key: key, expectedSize: header.bodySize)
    }

    /// `pread`s from the open file, a buffer at a time, checksumming as it goes.
    func reader() -> (UnsafeMutableRawBufferPointer) throws -> StreamedChunk {
        let start = Int64(header.encodedSize)
        let size = Int64(header.bodySize)
        var offset: Int64 = 0
        var checksum: UInt32 = 0
        return { [self] buffer in
            guard offset < size else {
                guard checksum == header.bodyChecksum else { throw BodyDamage(reason: "body checksum does not match") }
                return .end
            }
            let wanted = Int(min(Int64(buffer.count), size - offset))
            let target = UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted])
            guard try file.read(fromAbsoluteOffset: start + offset, into: target) == wanted else {
                throw BodyDamage(reason: "shorter than its header says")
            }
            checksum = CRC32C.checksum(UnsafeRawBufferPointer(target), extending: checksum)
            offset += Int64(wanted)
            return .bytes(wanted)
        }
    }
}
