#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Appends little-endian integers and byte strings, the only encoding the format uses.
package struct ByteWriter {
    package private(set) var bytes: [UInt8]

    package init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    package var count: Int { bytes.count }

    // Journal records and body headers are encoded on every put: an integer goes in a byte at
    // a time, low byte first, which costs less than any append of a buffer (callgrind).

    package mutating func append<T: FixedWidthInteger>(_ value: T) {
        var rest = value
        for _ in 0..<MemoryLayout<T>.size {
            bytes.append(UInt8(truncatingIfNeeded: rest))
            rest >>= 8
        }
    }

    package mutating func append(bytes other: some Sequence<UInt8>) {
        bytes.append(contentsOf: other)
    }

    package mutating func append(zeros count: Int) {
        bytes.append(contentsOf: repeatElement(0, count: count))
    }

    package mutating func append(_ hash: KeyHash) {
        hash.withUnsafeBytes { bytes.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
    }

    /// Overwrites a little-endian integer already written at `offset`.
    package mutating func set<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
    }

    /// Appends the masked CRC32C of every byte from `start` to the current end.
    package mutating func appendChecksum(from start: Int = 0) {
        let crc = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[start...])) }
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
