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

/// The pack segments under `packs/`, by name.
func packSegments(in cache: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: "\(cache)/packs")
}
