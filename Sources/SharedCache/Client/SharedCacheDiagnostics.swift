import CSharedCacheSupport

/// Facts about how this build runs on this machine, for the benchmark and the admin tool.
package enum SharedCacheDiagnostics {
    /// Whether checksums use the CPU's CRC32C instruction (SSE4.2 or ARMv8) rather than a table.
    package static var crc32cIsHardwareAccelerated: Bool { CRC32C.isHardwareAccelerated }

    /// The CRC32C of `bytes`, as every body is checked on read.
    package static func crc32c(_ bytes: UnsafeRawBufferPointer) -> UInt32 { CRC32C.checksum(bytes) }

    /// Whether key hashes use the CPU's SHA instructions (x86-64 SHA-NI).
    package static var sha256IsHardwareAccelerated: Bool { scs_sha256_is_hardware_accelerated() != 0 }

    /// Nanoseconds to hash one key of `key`'s length, as every cache call does: with the path
    /// `scs_sha256` picks, and with the portable code.
    package static func keyHashNanoseconds(_ key: String) -> (chosen: Double, portable: Double) {
        let bytes = Array(key.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        func time(_ hash: (UnsafeRawPointer?, Int, UnsafeMutablePointer<UInt8>) -> Void) -> Double {
            let rounds = 200_000
            let start = Clock.monotonicNanoseconds()
            for _ in 0..<rounds { bytes.withUnsafeBytes { hash($0.baseAddress, $0.count, &digest) } }
            return Double(Clock.monotonicNanoseconds() - start) / Double(rounds)
        }
        return (time { scs_sha256($0, $1, $2) }, time { scs_sha256_portable($0, $1, $2) })
    }
}
