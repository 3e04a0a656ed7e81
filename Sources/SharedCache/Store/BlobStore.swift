#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation

/// Reads and writes the immutable blob files, `blobs/<xx>/<hash>.<blobID>`.
///
/// A blob is written once under `tmp/` and renamed into place without replacing anything, so a
/// reader that has one open always reads one consistent body. Reading checks everything the
/// header promises before a byte is returned. Thread-safe.
struct BlobStore: Sendable {
    let directory: CacheDirectory

    /// What reading a blob found.
    enum ReadResult {
        case found(BlobHeader, Data)
        /// The file is not there (removed by another process a moment ago): a plain miss.
        case missing
        /// The file is there but fails its checks; the caller journals its removal.
        case damaged(String)
    }

    // MARK: Paths

    /// `blobs/xx/<64 hex>.<16 hex>` is 90 bytes; with its NUL it fits this buffer.
    private static let pathCapacity = 91

    /// Calls `body` with the blob's path as a C string, without allocating.
    static func withPath<R>(_ hash: KeyHash, _ blobID: UInt64, _ body: (UnsafePointer<CChar>) throws -> R) rethrows
        -> R
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
            writeHexDigits(blobID, width: 16, into: UnsafeMutableRawBufferPointer(rebasing: raw[74..<90]))
            raw[90] = 0
            return try body(raw.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
    }

    static func path(_ hash: KeyHash, _ blobID: UInt64) -> String {
        withPath(hash, blobID) { String(cString: $0) }
    }

    /// The hash and blob ID in a blob file name, `<64 hex>.<16 hex>`; `nil` for any other name.
    static func parseName(_ name: String) -> (KeyHash, UInt64)? {
        let parts = name.split(separator: ".")
        guard parts.count == 2, parts[1].utf8.count == 16, let hash = KeyHash(hex: String(parts[0])),
            let blobID = UInt64(parts[1], radix: 16)
        else { return nil }
        return (hash, blobID)
    }

    static func fanOutDirectory(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return "\(CacheDirectory.blobsDirectory)/\(digits.count == 1 ? "0" + digits : digits)"
    }

    // MARK: Writing

    /// Writes a new blob and returns its ID; the caller journals it.
    ///
    /// - Parameter durable: flush the file before the rename and its directory after it.
    func write(_ header: BlobHeader, body: UnsafeRawBufferPointer, durable: Bool) throws -> UInt64 {
        let headerBytes = header.encoded()
        let blobID = try directory.publishNewFile(
            purpose: "blob", durable: durable,
            write: { file in try headerBytes.withUnsafeBytes { try file.writeAll([$0, body]) } },
            publish: { temporary in try publish(temporary, hash: header.keyHash) })
        if durable { try directory.synchronizeDirectory(containing: Self.path(header.keyHash, blobID)) }
        return blobID
    }

    /// Renames a finished temporary blob to a fresh name, never replacing an existing blob.
    func publish(_ temporary: String, hash: KeyHash) throws -> UInt64 {
        while true {
            let blobID = UniqueNames.next()
            do {
                try System.renameWithoutReplacing(
                    at: directory.descriptor.rawValue, temporary, to: Self.path(hash, blobID))
                return blobID
            } catch {
                switch error.errno {
                case EEXIST:
                    continue  // 2^-64 odds, but a live blob is never replaced
                case ENOENT:
                    // The fan-out directory went missing (removed by hand); recreate it and retry.
                    try directory.makeDirectory(Self.fanOutDirectory(hash.fanOut))
                default:
                    throw error
                }
            }
        }
    }

    /// Unlinks a blob; one that is already gone is fine.
    func remove(_ hash: KeyHash, blobID: UInt64) throws {
        try directory.removeFile(Self.path(hash, blobID))
    }

    // MARK: Reading

    /// Reads and checks a whole blob.
    ///
    /// - Parameters:
    ///   - key: the key the caller asked for; a blob for any other key is damaged.
    ///   - expectedSize: the body size the index recorded.
    func read(_ hash: KeyHash, blobID: UInt64, key: UnsafeRawBufferPointer, expectedSize: UInt64) throws -> ReadResult {
        let opened: Int32
        switch try open(hash, blobID: blobID) {
        case .opened(let descriptor): opened = descriptor
        case .missing: return .missing
        case .damaged(let reason): return .damaged(reason)
        }
        let file = FileDescriptor(rawValue: opened)
        return try read(file, hash: hash, key: key, expectedSize: expectedSize)
    }

    private enum OpenResult {
        case opened(Int32)
        case missing
        case damaged(String)
    }

    private func open(_ hash: KeyHash, blobID: UInt64) throws -> OpenResult {
        do {
            return .opened(
                try Self.withPath(hash, blobID) { path throws(SystemError) in
                    try System.open(
                        at: directory.descriptor.rawValue, cString: path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
                })
        } catch let error as SystemError {
            switch error.errno {
            case ENOENT: return .missing
            case ELOOP: return .damaged("a symbolic link stands where the blob belongs")
            default: throw error
            }
        }
    }

    /// Opens a blob and checks its header, so its body stays readable whoever unlinks it: what
    /// the HTTP client holds while a conditional request is in flight. `nil` when the blob is
    /// gone or its header is wrong.
    func pin(_ hash: KeyHash, blobID: UInt64, key: [UInt8], expectedSize: UInt64) throws -> (PinnedBlob, BlobHeader)? {
        guard case .opened(let opened) = try open(hash, blobID: blobID) else { return nil }
        let pinned = PinnedBlob(
            store: self, file: FileDescriptor(rawValue: opened), hash: hash, key: key, expectedSize: expectedSize)
        guard let header = try readHeader(pinned.file), header.keyHash == hash, header.key == key,
            header.bodySize == expectedSize
        else { return nil }
        return (pinned, header)
    }

    /// Reads and checks the whole blob open as `file`.
    fileprivate func read(
        _ file: borrowing FileDescriptor, hash: KeyHash, key: UnsafeRawBufferPointer, expectedSize: UInt64
    ) throws -> ReadResult {
        // One pread sized from the index (body + this key + room for validators) reads most blobs
        // whole; a read that fills the buffer means there is more, so the file is read again
        // at its real size. Skipping fstat keeps a get to open + pread + close.
        var capacity = Int(clamping: expectedSize) + BlobHeader.fixedSize + key.count + 1024
        var storage = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        var handedOff = false
        defer { if !handedOff { storage.deallocate() } }
        var size: Int
        while true {
            do {
                size = try file.read(fromAbsoluteOffset: 0, into: storage)
            } catch {
                // Not a regular file: a directory (EISDIR), a FIFO or socket (ESPIPE), ...
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
        let header: BlobHeader
        do {
            header = try BlobHeader.decode(bytes)
        } catch {
            return .damaged("header: \(error)")
        }
        let headerSize = header.encodedSize
        guard header.keyHash == hash, header.key.hasSameBytes(as: key) else { return .damaged("holds another key") }
        guard header.bodySize == expectedSize, headerSize + Int(header.bodySize) == size else {
            return .damaged("body size does not match")
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[headerSize...])
        guard CRC32C.checksum(body) == header.bodyChecksum else { return .damaged("body checksum does not match") }

        handedOff = true
        let data = Data(
            bytesNoCopy: storage.baseAddress! + headerSize, count: body.count,
            deallocator: .custom { pointer, _ in (pointer - headerSize).deallocate() })
        return .found(header, data)
    }

    /// Reads and checks only the header of a blob (for metadata and rebuilding the index).
    func readHeader(_ hash: KeyHash, blobID: UInt64) throws -> BlobHeader? {
        try readHeader(at: Self.path(hash, blobID))
    }

    /// Reads and checks the header of the blob file at `path`; `nil` if it is missing or damaged.
    func readHeader(at path: String) throws -> BlobHeader? {
        guard let raw = try directory.openIfPresent(path, flags: O_RDONLY | O_NONBLOCK, linkIsAbsence: true) else {
            return nil
        }
        return try readHeader(FileDescriptor(rawValue: raw))
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

/// A blob held open: unlinking it (an eviction, a replacement) cannot take its body away.
///
/// Immutable, and reading is `pread` at absolute offsets, so any thread may read it.
final class PinnedBlob: @unchecked Sendable {
    private let store: BlobStore
    fileprivate let file: FileDescriptor
    private let hash: KeyHash
    private let key: [UInt8]
    private let expectedSize: UInt64

    fileprivate init(store: BlobStore, file: consuming FileDescriptor, hash: KeyHash, key: [UInt8], expectedSize: UInt64) {
        self.store = store
        self.file = file
        self.hash = hash
        self.key = key
        self.expectedSize = expectedSize
    }

    /// Reads and checks the body, as ``BlobStore/read(_:blobID:key:expectedSize:)`` does.
    func read() throws -> BlobStore.ReadResult {
        try key.withUnsafeBytes { key in try store.read(file, hash: hash, key: key, expectedSize: expectedSize) }
    }
}
