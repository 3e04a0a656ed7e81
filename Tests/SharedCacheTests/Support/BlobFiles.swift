import Foundation
import SharedCache

extension Configuration {
    /// Every body in a file of its own (no pack segments): for tests about blob files.
    static let blobFiles = Configuration().withBlobFiles

    /// This configuration, with every body in a file of its own.
    var withBlobFiles: Configuration {
        var configuration = self
        configuration.packThreshold = 0
        return configuration
    }
}

/// Flips one bit of the byte at `offset` in the file at `path` (counted from its end when
/// negative): damage that only a checksum can catch.
func flipByte(at offset: Int64, inFileAt path: String) throws {
    let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    let position = offset < 0 ? try handle.seekToEnd() - UInt64(-offset) : UInt64(offset)
    try handle.seek(toOffset: position)
    guard let byte = try handle.read(upToCount: 1)?.first else { throw CocoaError(.fileReadCorruptFile) }
    try handle.seek(toOffset: position)
    try handle.write(contentsOf: [byte ^ 0x40])
}

/// The pack segments under `packs/`, by name.
func packSegments(in cache: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: "\(cache)/packs")
}
