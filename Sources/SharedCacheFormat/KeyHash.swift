import CSharedCacheSupport

/// The identity of an entry: SHA-256 of its key's bytes.
///
/// Blob files are named by it and removal records carry it, so a process maps each removal it
/// hears about 1:1 onto its own per-key state. Its text form is 64 lowercase hex digits.
public struct KeyHash: Hashable, Sendable, Comparable, CustomStringConvertible {
    package static let byteCount = 32

    // Big-endian words, so comparing words compares the hex text.
    private let w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    /// The hash of a key.
    public init(key: String) {
        var key = key
        self = key.withUTF8 { KeyHash(hashing: UnsafeRawBufferPointer($0)) }
    }

    package init(hashing bytes: UnsafeRawBufferPointer) {
        self = withUnsafeTemporaryAllocation(byteCount: 32, alignment: 8) { digest in
            scs_sha256(bytes.baseAddress, bytes.count, digest.baseAddress!.assumingMemoryBound(to: UInt8.self))
            return KeyHash(bytes: UnsafeRawBufferPointer(digest))
        }
    }

    /// Reads a hash from its 32 raw bytes.
    package init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == 32)
        func word(_ index: Int) -> UInt64 {
            UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
        }
        (w0, w1, w2, w3) = (word(0), word(1), word(2), word(3))
    }

    /// Parses 64 hex digits (either case); `nil` for anything else.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var raw = [UInt8](repeating: 0, count: 32)
        for index in 0..<32 {
            guard let high = Self.nibble(digits[2 * index]), let low = Self.nibble(digits[2 * index + 1]) else {
                return nil
            }
            raw[index] = high << 4 | low
        }
        self = raw.withUnsafeBytes { KeyHash(bytes: $0) }
    }

    /// Calls `body` with the 32 raw bytes.
    package func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try Swift.withUnsafeBytes(of: (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)) { try body($0) }
    }

    /// 64 lowercase hex digits.
    public var hex: String {
        String(unsafeUninitializedCapacity: 64) { buffer in
            writeHex(into: UnsafeMutableRawBufferPointer(buffer))
            return 64
        }
    }

    public var description: String { hex }

    /// Writes the 64 hex digits into `buffer` without allocating.
    package func writeHex(into buffer: UnsafeMutableRawBufferPointer) {
        writeHexDigits(w0, width: 16, into: buffer)
        writeHexDigits(w1, width: 16, into: UnsafeMutableRawBufferPointer(rebasing: buffer[16...]))
        writeHexDigits(w2, width: 16, into: UnsafeMutableRawBufferPointer(rebasing: buffer[32...]))
        writeHexDigits(w3, width: 16, into: UnsafeMutableRawBufferPointer(rebasing: buffer[48...]))
    }

    /// Whether keys are hashed with the CPU's SHA instructions (x86-64 SHA-NI, ARMv8 SHA-2).
    package static var isHardwareAccelerated: Bool { scs_sha256_is_hardware_accelerated() != 0 }

    /// Nanoseconds to hash a key of `bytes`' length: with the code ``init(key:)`` uses, and
    /// with the portable code (for the benchmark).
    package static func hashingNanoseconds(_ bytes: [UInt8], rounds: Int, clock: () -> UInt64)
        -> (chosen: Double, portable: Double)
    {
        var digest = [UInt8](repeating: 0, count: 32)
        func time(_ hash: (UnsafeRawPointer?, Int, UnsafeMutablePointer<UInt8>) -> Void) -> Double {
            let start = clock()
            for _ in 0..<rounds { bytes.withUnsafeBytes { hash($0.baseAddress, $0.count, &digest) } }
            return Double(clock() - start) / Double(rounds)
        }
        return (time { scs_sha256($0, $1, $2) }, time { scs_sha256_portable($0, $1, $2) })
    }

    /// 64 bits of the hash for a hash table to mix with its seed.
    package var tableBits: UInt64 { w1 }

    /// The hash's first byte as two hex digits: the name of its `blobs/` fan-out directory.
    package var fanOut: UInt8 { UInt8(w0 >> 56) }

    public func hash(into hasher: inout Hasher) {
        // SHA-256 output is uniform; one word identifies the bucket as well as four.
        hasher.combine(w0)
    }

    public static func < (lhs: KeyHash, rhs: KeyHash) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }

    /// The value of one hex digit, in either case; `nil` for any other byte.
    package static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Writes `value` as `width` lowercase hex digits at the start of `buffer`.
///
/// Every blob path is built with this, so it is arithmetic rather than a table lookup.
@inline(__always)
package func writeHexDigits(_ value: UInt64, width: Int, into buffer: UnsafeMutableRawBufferPointer) {
    precondition(buffer.count >= width)
    let base = buffer.baseAddress!
    for index in 0..<width {
        let nibble = UInt8(truncatingIfNeeded: value >> UInt64(4 * (width - 1 - index))) & 0xf
        // "0"..."9" are 48...57; "a"..."f" are 97...102, 39 further on.
        base.storeBytes(of: nibble &+ 48 &+ (nibble > 9 ? 39 : 0), toByteOffset: index, as: UInt8.self)
    }
}
