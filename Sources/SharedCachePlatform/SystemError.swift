#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call: which call, on what path, and the `errno` it returned.
///
/// The platform layer throws only this; the engine's one boundary translates it into a
/// `SharedCacheError` that says what to do about it, keeping this as its cause.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function that failed, such as `"openat"`.
    package var call: String
    /// The `errno` value the call left.
    package var errno: Int32
    /// The path the call was about, relative to the cache directory where there is one.
    package var path: String?
    /// What stood at `path` when a regular file was expected ("a directory", "a FIFO", …); the
    /// errno is then `EINVAL`.
    package var found: String?

    package init(_ call: String, errno: Int32, path: String? = nil, found: String? = nil) {
        self.call = call
        self.errno = errno
        self.path = path
        self.found = found
    }

    /// Whether the filesystem, or the user's quota on it, is full.
    package var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }

    /// Something other than a regular file stands at `name`.
    package static func notRegularFile(_ name: String, _ status: FileStatus) -> SystemError {
        SystemError("read", errno: EINVAL, path: name, found: status.kindDescription)
    }

    /// `call: strerror(errno)`, and the path if there is one.
    package var description: String {
        if let found { return "\(found) stands where a regular file belongs" + (path.map { " (\($0))" } ?? "") }
        return "\(call): \(String(cString: strerror(errno)))" + (path.map { " (\($0))" } ?? "")
    }
}
