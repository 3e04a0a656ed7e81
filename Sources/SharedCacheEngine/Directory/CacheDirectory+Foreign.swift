package import SharedCachePlatform

extension CacheDirectory {
    /// The error for something that is not a regular file where the cache keeps `name`: a FIFO
    /// (reading it would fail with ESPIPE, or wait), a directory, a device or a socket.
    ///
    /// - Parameters:
    ///   - found: what stands there instead, e.g. "a FIFO" (``FileStatus/kindDescription``).
    ///   - role: what the cache keeps there, e.g. "the manifest".
    ///   - advice: what to do once it is removed, e.g. "run `sharedcache verify --repair`".
    package func foreignFile(_ name: String, found: String, role: String, advice: String) -> SharedCacheError {
        SharedCacheError(
            .unsafePath, "\(path)/\(name) is \(found) where the cache keeps \(role); remove it and \(advice)",
            path: "\(path)/\(name)")
    }

    /// The status of `file`, opened as `name`; throws ``foreignFile(_:found:role:advice:)``
    /// unless it is a regular file (a FIFO opens, and takes a flock, as well as a file does).
    @discardableResult
    package func requireRegularFile(
        _ file: borrowing FileDescriptor, named name: String, role: String, advice: String
    ) throws -> FileStatus {
        let status = try file.status()
        guard status.isRegularFile else {
            throw foreignFile(name, found: status.kindDescription, role: role, advice: advice)
        }
        return status
    }
}
