#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one error SharedCache throws: a code to match on, a message that says what happened and
/// what to do, and the underlying system call, `errno` and path where there is one.
///
/// Match on ``code``; the message text is for people and may change.
public struct SharedCacheError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let description: String
        private init(_ name: String) { description = name }

        /// The cache path exists and is not a directory.
        public static let notADirectory = Code("notADirectory")
        /// The directory is not empty and holds no SharedCache `format` file.
        public static let notACacheDirectory = Code("notACacheDirectory")
        /// The directory was written by a newer, incompatible version of SharedCache.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// The process may not read or write something it must.
        public static let permissionDenied = Code("permissionDenied")
        /// The filesystem is full (or the user's quota is).
        public static let noSpace = Code("noSpace")
        /// Bytes on disk failed their checks and could not be repaired automatically.
        public static let corruptData = Code("corruptData")
        /// Another process held a lock past the configured timeout.
        public static let lockTimeout = Code("lockTimeout")
        /// Another process is doing something that only one may do at a time (compacting).
        public static let busy = Code("busy")
        /// A symbolic link or foreign file stands where the cache expects its own file.
        public static let unsafePath = Code("unsafePath")
        /// An argument is out of range (a key longer than 64 KiB, for example).
        public static let invalidArgument = Code("invalidArgument")
        /// ``SharedCache/fetch(_:options:transport:)`` was asked to answer from the cache alone, and
        /// nothing usable is stored.
        public static let notCached = Code("notCached")
        /// An HTTP request failed in the transport (no response); ``SharedCacheError/underlyingError`` has why.
        public static let network = Code("network")
        /// Any other I/O failure; ``SharedCacheError/errno`` says which.
        public static let ioFailure = Code("ioFailure")
    }

    public var code: Code
    /// What happened and what to do about it, in one sentence for a person.
    public var message: String
    /// The file concerned, where there is one.
    public var path: String?
    /// The C function that failed, where a system call did.
    public var systemCall: String?
    /// The `errno` the system call left.
    public var errno: Int32?
    /// The transport's own error, for ``Code/network``.
    public var underlyingError: (any Error & Sendable)?

    public init(
        _ code: Code, _ message: String, path: String? = nil, systemCall: String? = nil, errno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.systemCall = systemCall
        self.errno = errno
    }

    public var description: String {
        var text = message
        if let systemCall, let errno {
            text += " [\(systemCall): \(String(cString: strerror(errno)))"
            text += path.map { " on \($0)]" } ?? "]"
        }
        return text
    }
}

extension SharedCacheError {
    /// Explains a failed system call made while `activity` (e.g. "writing a blob"), under `root`.
    init(_ error: SystemError, root: String, while activity: String) {
        let path = error.path.map { $0.hasPrefix("/") ? $0 : root + "/" + $0 } ?? root
        let code: Code
        let advice: String
        switch error.errno {
        case ENOSPC, EDQUOT:
            code = .noSpace
            advice = "the filesystem holding \(root) is full; free space or lower the cache's size-limit"
        case EACCES, EPERM, EROFS:
            code = .permissionDenied
            advice = "check the owner and permissions of \(path), or point the cache at a directory you can write"
        case ELOOP:
            code = .unsafePath
            advice = "\(path) is a symbolic link; SharedCache never follows links inside its directory, so remove it"
        case ENOTDIR:
            code = .notADirectory
            advice = "a component of \(path) is not a directory; remove the stray file or choose another path"
        case EMFILE, ENFILE:
            code = .ioFailure
            advice = "the process or system ran out of file descriptors; raise the limit (ulimit -n) or close files"
        default:
            code = .ioFailure
            advice = "the system reported an I/O error; check the disk and the kernel log"
        }
        self.init(
            code, "\(activity) failed: \(advice)", path: path, systemCall: error.call, errno: error.errno)
    }

    static func corrupt(_ what: String, path: String, _ error: FormatError) -> SharedCacheError {
        SharedCacheError(
            .corruptData,
            "\(what) is corrupt (\(error)); run `sharedcache verify --repair`, or remove the directory to start over",
            path: path)
    }
}
