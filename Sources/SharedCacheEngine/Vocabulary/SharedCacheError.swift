#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform

/// The one error SharedCache throws: a code to match on, a message that says what happened and
/// what to do, the underlying system call, `errno` and path where there is one, and the error
/// that caused it.
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
        /// A symbolic link, a folder, a FIFO or another foreign file stands where the cache
        /// expects a file or folder of its own.
        public static let unsafePath = Code("unsafePath")
        /// An argument is out of range (a key longer than 64 KiB, for example), or the system
        /// refused one (`EINVAL`).
        public static let invalidArgument = Code("invalidArgument")
        /// A file the cache was using vanished under it (`ENOENT`): something other than
        /// SharedCache removes files in its directory; or the directory itself was removed or
        /// replaced while this process had it open (open the cache again).
        public static let notFound = Code("notFound")
        /// The process or the system ran out of file descriptors (`EMFILE`, `ENFILE`).
        public static let tooManyOpenFiles = Code("tooManyOpenFiles")
        /// The task was cancelled, or the fetch was stopped, before it finished.
        public static let cancelled = Code("cancelled")
        /// ``SharedCache/fetch(_:options:transport:)`` was asked to answer from the cache alone, and
        /// nothing usable is stored.
        public static let notCached = Code("notCached")
        /// An HTTP request failed in the transport (no response); ``SharedCacheError/underlyingError`` has why.
        public static let network = Code("network")
        /// The disk or the kernel failed an operation (`EIO` and any error without a code of its
        /// own); ``SharedCacheError/errno`` says which.
        public static let ioFailure = Code("ioFailure")
    }

    /// What kind of failure this is: the thing to match on.
    public var code: Code
    /// What happened and what to do about it, in one sentence for a person.
    public var message: String
    /// The file concerned, where there is one.
    public var path: String?
    /// The C function that failed, where a system call did.
    public var systemCall: String?
    /// The `errno` the system call left.
    public var errno: Int32?
    /// The error this one explains: the transport's own for ``Code/network``, the failed
    /// system call's or the decoder's for the cache's own failures.
    public var underlyingError: (any Error & Sendable)?

    /// An error of `code`, with a message for a person that says what happened and what to do.
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
    package init(_ error: SystemError, root: String, while activity: String) {
        let path = error.path.map { $0.hasPrefix("/") ? $0 : root + "/" + $0 } ?? root
        let code: Code
        let advice: String
        if let found = error.found {
            code = .unsafePath
            advice = "\(found) stands at \(path), where the cache keeps a file of its own; remove it"
        } else {
            switch error.errno {
            case ENOSPC, EDQUOT:
                code = .noSpace
                // Lowering the limit alone evicts nothing until a compaction, and the space the
                // limit's write freed (the reserve) would go to the next puts, leaving none to
                // journal the evictions: the two steps go together.
                let dir = Self.shellWord(root)
                advice = "the filesystem holding \(root) is full; free space, or lower the cache's size-limit "
                    + "and compact it at once: `sharedcache --dir \(dir) config size-limit SIZE && "
                    + "sharedcache --dir \(dir) compact`"
            case EACCES, EPERM, EROFS:
                code = .permissionDenied
                advice = "check the owner and permissions of \(path), or point the cache at a directory you can write"
            case ELOOP:
                code = .unsafePath
                advice = "\(path) is a symbolic link, and SharedCache never follows links inside its directory; "
                    + Self.replacingLink(at: path)
            case ENOTDIR:
                code = .notADirectory
                advice = "a component of \(path) is not a directory; remove the stray file or choose another path"
            case EISDIR:
                code = .unsafePath
                advice = "a directory stands at \(path), where the cache keeps a file of its own; remove it"
            case ENOENT:
                code = .notFound
                advice = "\(path) vanished while the cache was using it; if another program deletes files in "
                    + "\(root), stop it, then try again"
            case EMFILE, ENFILE:
                code = .tooManyOpenFiles
                advice = "the process or system ran out of file descriptors; raise the limit (ulimit -n) or close files"
            case EINVAL:
                code = .invalidArgument
                advice = "the system refused an argument (\(error.call)); this is a bug in SharedCache or an "
                    + "unusual filesystem, so please report it"
            default:
                code = .ioFailure
                advice = "the system reported an I/O error; check the disk and the kernel log"
            }
        }
        self.init(code, "\(activity) failed: \(advice)", path: path, systemCall: error.call, errno: error.errno)
        underlyingError = error
    }

    /// What to do about a symbolic link at `path` where the cache keeps a file that holds
    /// something (a journal segment, the manifest): the command that puts a copy of the file it
    /// points to in its place, so nothing is lost; or, when that file is gone, the one that
    /// removes the link.
    package static func replacingLink(at path: String) -> String {
        guard let target = System.linkTarget(atPath: path),
            (try? System.status(atPath: target, followingSymlinks: true))?.isRegularFile == true
        else { return "the file it points to is gone, so remove it: `rm \(shellWord(path))`" }
        let (link, file) = (shellWord(path), shellWord(target))
        return "replace it with a copy of the file it points to: `rm \(link) && cp \(file) \(link)`"
    }

    /// `path` as one word of a command for sh(1): as it is, or in single quotes where it holds
    /// anything but letters, digits and `/._-+,:@%=`.
    package static func shellWord(_ path: String) -> String {
        let plain = Set("/._-+,:@%=0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        if !path.isEmpty, path.utf8.allSatisfy(plain.contains) { return path }
        return "'" + path.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// Bytes that failed to decode, with the advice that repairs them.
    package static func corrupt(_ what: String, path: String, _ error: FormatError) -> SharedCacheError {
        var corrupt = SharedCacheError(
            .corruptData,
            "\(what) is corrupt (\(error)); run `sharedcache verify --repair`, or remove the directory to start over",
            path: path)
        corrupt.underlyingError = error
        return corrupt
    }

    /// The task was cancelled while `activity`.
    package static func cancelled(_ activity: String) -> SharedCacheError {
        var cancelled = SharedCacheError(.cancelled, "\(activity) was cancelled")
        cancelled.underlyingError = CancellationError()
        return cancelled
    }
}
