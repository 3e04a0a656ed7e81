#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension CacheDirectory {
    /// The error for something that is not a regular file where the cache keeps `name`: a FIFO
    /// (reading it would fail with ESPIPE, or wait), a directory, a device or a socket.
    ///
    /// - Parameters:
    ///   - role: what the cache keeps there, e.g. "the manifest".
    ///   - advice: what to do once it is removed, e.g. "run `sharedcache verify --repair`".
    func foreignFile(_ name: String, _ status: FileStatus, role: String, advice: String) -> SharedCacheError {
        SharedCacheError(
            .unsafePath,
            "\(path)/\(name) is \(Self.kind(of: status)) where the cache keeps \(role); remove it and \(advice)",
            path: "\(path)/\(name)")
    }

    /// "a FIFO", "a directory", …: what a file that should be a regular file is.
    static func kind(of status: FileStatus) -> String {
        switch status.mode & UInt32(S_IFMT) {
        case UInt32(S_IFIFO): "a FIFO"
        case UInt32(S_IFDIR): "a directory"
        case UInt32(S_IFCHR): "a character device"
        case UInt32(S_IFBLK): "a block device"
        case UInt32(S_IFSOCK): "a socket"
        case UInt32(S_IFLNK): "a symbolic link"
        default: "not a regular file"
        }
    }
}
