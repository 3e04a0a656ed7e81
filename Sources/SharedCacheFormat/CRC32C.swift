import CSharedCacheSupport

/// CRC32C (Castagnoli), the checksum of every journal record, header, manifest and body.
///
/// Stored checksums are *masked* as in LevelDB: a CRC of bytes that themselves contain CRCs is
/// weak, so the stored value is rotated and offset. Verified against RFC 3720's test vectors.
package enum CRC32C {
    /// The CRC32C of `bytes`, continuing from `crc` (0 to start).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, extending crc: UInt32 = 0) -> UInt32 {
        scs_crc32c_extend(crc, bytes.baseAddress, bytes.count)
    }

    package static func checksum(_ bytes: some ContiguousBytes) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    package static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xa282_ead8
    }

    package static func unmask(_ masked: UInt32) -> UInt32 {
        let rotated = masked &- 0xa282_ead8
        return (rotated >> 17) | (rotated << 15)
    }

    /// Whether the CPU's CRC instruction is in use (the benchmark reports it).
    package static var isHardwareAccelerated: Bool { scs_crc32c_is_hardware_accelerated() != 0 }
}

/// `ContiguousBytes` without Foundation: the byte containers the codecs accept.
package protocol ContiguousBytes {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytes where Element == UInt8 {}
extension ArraySlice: ContiguousBytes where Element == UInt8 {}
