import SharedCacheFormat
import SharedCachePlatform

/// Facts about how this build runs on this machine, for the benchmark and the admin tool.
package enum SharedCacheDiagnostics {
    /// Whether checksums use the CPU's CRC32C instruction (SSE4.2 or ARMv8) rather than a table.
    package static var crc32cIsHardwareAccelerated: Bool { CRC32C.isHardwareAccelerated }

    /// The CRC32C of `bytes`, as every body is checked on read.
    package static func crc32c(_ bytes: UnsafeRawBufferPointer) -> UInt32 { CRC32C.checksum(bytes) }

    /// Whether key hashes use the CPU's SHA instructions (x86-64 SHA-NI).
    package static var sha256IsHardwareAccelerated: Bool { KeyHash.isHardwareAccelerated }

    /// Nanoseconds to hash one key of `key`'s length, as every cache call does: with the path
    /// the hash picks, and with the portable code.
    package static func keyHashNanoseconds(_ key: String) -> (chosen: Double, portable: Double) {
        KeyHash.hashingNanoseconds(Array(key.utf8), rounds: 200_000, clock: Clock.monotonicNanoseconds)
    }
}
