#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Appends little-endian integers and byte strings, the only encoding the format uses.
///
/// Every put encodes a pack record and a journal record, so an append is a store into storage
/// already there (an integer one store, a byte string one copy), which grows only when full.
/// Writers on the put path are kept from one put to the next
/// (``removeAll(keepingCapacityUpTo:)``) and read in place (``withUnsafeBytes(_:)``); one made
/// with the exact capacity hands out ``bytes`` uncopied.
package struct ByteWriter {
    /// What was written, then bytes of earlier writes or zeros, up to the capacity.
    private var storage: [UInt8]
    package private(set) var count = 0

    package init(capacity: Int = 64) {
        storage = []
        storage.reserveCapacity(capacity)
        growStorage(by: capacity)
    }

    /// A source of bytes to initialize storage with: `Array(repeating:count:)` looks up the
    /// array's type on every call, and appending `repeatElement` stores a byte at a time.
    private static let zeros = [UInt8](repeating: 0, count: 4096)

    private mutating func growStorage(by size: Int) {
        var left = size
        while left > 0 {
            let some = min(left, Self.zeros.count)
            storage.append(contentsOf: Self.zeros[..<some])
            left -= some
        }
    }

    /// Forgets what was written, keeping the storage for what is written next unless it grew
    /// past `limit` bytes.
    package mutating func removeAll(keepingCapacityUpTo limit: Int) {
        if storage.count > limit { storage = [] }
        count = 0
    }

    /// What was written.
    package var bytes: [UInt8] { count == storage.count ? storage : Array(storage[..<count]) }

    /// Runs `body` on what was written, without copying it.
    package func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try storage.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
    }

    /// Makes room for `size` more bytes; returns where they start.
    @inline(__always)
    private mutating func extend(by size: Int) -> Int {
        precondition(size >= 0, "appending a negative number of bytes")
        let start = count
        if start + size > storage.count {
            growStorage(by: max(start + size, 2 * storage.count) - storage.count)
        }
        count = start + size
        return start
    }

    @inline(__always)
    package mutating func append<T: FixedWidthInteger>(_ value: T) {
        store(value)
    }

    // The integers other modules' encoders write (a stored HTTP response's), each a direct
    // call: across modules the generic `append` runs unspecialized (see `ByteReader.read`).
    @inline(__always) package mutating func append(_ value: UInt8) { store(value) }
    @inline(__always) package mutating func append(_ value: UInt16) { store(value) }
    @inline(__always) package mutating func append(_ value: UInt32) { store(value) }
    @inline(__always) package mutating func append(_ value: Int64) { store(value) }

    @inline(__always)
    private mutating func store<T: FixedWidthInteger>(_ value: T) {
        let start = extend(by: MemoryLayout<T>.size)
        storage.withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: start, as: T.self) }
    }

    @inline(__always)
    package mutating func append(bytes other: UnsafeRawBufferPointer) {
        guard let source = other.baseAddress, !other.isEmpty else { return }
        let start = extend(by: other.count)
        storage.withUnsafeMutableBytes { ($0.baseAddress! + start).copyMemory(from: source, byteCount: other.count) }
    }

    @inline(__always)
    package mutating func append(bytes other: some Sequence<UInt8>) {
        let copied: Void? = other.withContiguousStorageIfAvailable { append(bytes: UnsafeRawBufferPointer($0)) }
        guard copied == nil else { return }
        for byte in other { append(byte) }
    }

    package mutating func append(zeros count: Int) {
        let start = extend(by: count)
        storage.withUnsafeMutableBytes { _ = $0[start..<start + count].initializeMemory(as: UInt8.self, repeating: 0) }
    }

    @inline(__always)
    package mutating func append(_ hash: KeyHash) {
        hash.withUnsafeBytes { append(bytes: $0) }
    }

    /// Overwrites a little-endian integer already written at `offset`.
    package mutating func set<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        precondition(offset >= 0 && offset + MemoryLayout<T>.size <= count, "setting bytes not yet written")
        storage.withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
    }

    /// Appends the masked CRC32C of every byte from `start` to the current end.
    package mutating func appendChecksum(from start: Int = 0) {
        let crc = withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        append(CRC32C.mask(crc))
    }
}

/// Reads little-endian integers and byte strings from memory the caller keeps alive.
package struct ByteReader {
    package let bytes: UnsafeRawBufferPointer
    private(set) var offset: Int

    package init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var remaining: Int { bytes.count - offset }

    package mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws(FormatError) -> T {
        let size = MemoryLayout<T>.size
        guard remaining >= size else { throw .truncated }
        defer { offset += size }
        return T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    // The integers other modules' decoders read (a stored HTTP response's), each a direct call:
    // across modules the generic `read` runs unspecialized, through the type's witness tables,
    // ~900 instructions a field (`package` functions cannot be `@inlinable` here).
    @inline(__always) package mutating func read(_: UInt8.Type) throws(FormatError) -> UInt8 { try read() }
    @inline(__always) package mutating func read(_: UInt16.Type) throws(FormatError) -> UInt16 { try read() }
    @inline(__always) package mutating func read(_: UInt32.Type) throws(FormatError) -> UInt32 { try read() }
    @inline(__always) package mutating func read(_: Int64.Type) throws(FormatError) -> Int64 { try read() }

    package mutating func readBytes(_ count: Int) throws(FormatError) -> UnsafeRawBufferPointer {
        guard count >= 0, remaining >= count else { throw .truncated }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    package mutating func readHash() throws(FormatError) -> KeyHash {
        KeyHash(bytes: try readBytes(KeyHash.byteCount))
    }

    package mutating func expectMagic(_ magic: [UInt8]) throws(FormatError) {
        let found = try readBytes(magic.count)
        guard magic.hasSameBytes(as: found) else { throw .badMagic }
    }

    /// Checks that the masked CRC32C stored at the current offset covers `bytes[start..<offset]`.
    package mutating func verifyChecksum(from start: Int = 0) throws(FormatError) {
        let covered = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
        let stored: UInt32 = try read()
        guard CRC32C.unmask(stored) == CRC32C.checksum(covered) else { throw .checksumMismatch }
    }
}

extension Array where Element == UInt8 {
    /// Whether these bytes are exactly `other`'s (one `memcmp`, where a generic comparison
    /// costs a call per byte).
    package func hasSameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        withUnsafeBytes { $0.hasSameBytes(as: other) }
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes are exactly `other`'s, with one `memcmp`.
    package func hasSameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0 else { return true }
        return memcmp(baseAddress!, other.baseAddress!, count) == 0
    }
}
