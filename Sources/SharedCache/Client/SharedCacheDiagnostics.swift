/// Facts about how this build runs on this machine, for the benchmark and the admin tool.
package enum SharedCacheDiagnostics {
    /// Whether checksums use the CPU's CRC32C instruction (SSE4.2 or ARMv8) rather than a table.
    package static var crc32cIsHardwareAccelerated: Bool { CRC32C.isHardwareAccelerated }

    /// The CRC32C of `bytes`, as every body is checked on read.
    package static func crc32c(_ bytes: UnsafeRawBufferPointer) -> UInt32 { CRC32C.checksum(bytes) }
}
