#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The cache directory: its layout, and the descriptor every path inside it is opened through.
///
/// ```
/// <root>/format  config  lock  manifest  journal/<generation>  blobs/<xx>/<hash>.<id>  tmp/
/// ```
/// Every file is opened relative to the root descriptor with `O_NOFOLLOW`, so a symbolic link
/// planted where a cache file belongs is refused instead of followed. Thread-safe: it holds
/// only immutable state.
final class CacheDirectory: Sendable {
    static let journalDirectory = "journal"
    static let blobsDirectory = "blobs"
    static let temporaryDirectory = "tmp"
    static let lockFile = "lock"
    static let manifestFile = "manifest"
    static let daemonFile = "daemon"

    /// The path the cache was opened with.
    let path: String
    let descriptor: FileDescriptor
    /// Who may use the directory, which decides the modes of new files and directories.
    let sharing: Sharing

    init(path: String, descriptor: consuming FileDescriptor, sharing: Sharing) {
        self.path = path
        self.descriptor = descriptor
        self.sharing = sharing
    }

    var fileMode: mode_t { sharing.fileMode }
    var directoryMode: mode_t { sharing.directoryMode }

    /// Runs `body`, explaining any platform failure as a public error about `activity`.
    ///
    /// The one place where `SystemError` becomes `SharedCacheError`: code above the platform
    /// layer does its I/O inside `perform` and lets errors propagate.
    func perform<Result>(_ activity: @autoclosure () -> String, _ body: () throws -> Result)
        throws(SharedCacheError) -> Result
    {
        try Self.perform(path: path, activity(), body)
    }

    /// ``perform(_:_:)`` before there is a directory value, for the cache rooted at `path`.
    static func perform<Result>(path: String, _ activity: @autoclosure () -> String, _ body: () throws -> Result)
        throws(SharedCacheError) -> Result
    {
        do {
            return try body()
        } catch let error as SystemError {
            throw SharedCacheError(error, root: path, while: activity())
        } catch let error as SharedCacheError {
            throw error
        } catch {
            throw SharedCacheError(.ioFailure, "\(activity()) failed: \(error)", path: path)
        }
    }

    // MARK: - Files

    /// Opens a file inside the cache, never following a symbolic link in the last component.
    func open(_ name: String, flags: Int32) throws(SystemError) -> FileDescriptor {
        FileDescriptor(rawValue: try openDescriptor(name, flags: flags))
    }

    /// ``open(_:flags:)`` for a caller that keeps the raw descriptor. A file it creates gets
    /// exactly ``fileMode``: in a group-shared cache a umask must not take the group's bits away.
    func openDescriptor(_ name: String, flags: Int32) throws(SystemError) -> Int32 {
        let raw = try System.open(at: descriptor.rawValue, name, flags: flags | O_NOFOLLOW, mode: fileMode)
        if sharing == .group && flags & O_CREAT != 0 {
            do {
                try System.setModeIfOwned(raw, fileMode)
            } catch {
                System.close(raw)
                throw error
            }
        }
        return raw
    }

    /// Creates the directory `name` unless it exists, with exactly ``directoryMode``.
    func makeDirectory(_ name: String) throws(SystemError) {
        do {
            try System.makeDirectory(at: descriptor.rawValue, name, mode: directoryMode)
        } catch {
            guard error.errno == EEXIST else { throw error }
            return
        }
        if sharing == .group {
            let created = try FileDescriptor(at: descriptor, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            try System.setModeIfOwned(created.rawValue, directoryMode)
        }
    }

    /// Opens a file inside the cache that may not exist; `nil` when it does not (or, with
    /// `linkIsAbsence`, when a symbolic link stands in its place).
    ///
    /// Returns the raw descriptor for the caller to wrap in a ``FileDescriptor``.
    func openIfPresent(_ name: String, flags: Int32, linkIsAbsence: Bool = false) throws(SystemError) -> Int32? {
        do {
            return try System.open(at: descriptor.rawValue, name, flags: flags | O_NOFOLLOW, mode: fileMode)
        } catch {
            if error.errno == ENOENT || (linkIsAbsence && error.errno == ELOOP) { return nil }
            throw error
        }
    }

    /// Reads a whole file; `nil` when it does not exist.
    func readFile(_ name: String) throws -> [UInt8]? {
        guard let raw = try openIfPresent(name, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        let file = FileDescriptor(rawValue: raw)
        let status = try file.status()
        guard status.isRegularFile else {
            throw SharedCacheError(
                .unsafePath, "\(path)/\(name) is not a regular file; remove it and try again",
                path: "\(path)/\(name)")
        }
        var bytes = [UInt8](repeating: 0, count: Int(status.size))
        let count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    /// Creates `name` (which must not exist) and lets `write` fill it, flushed with `durable`.
    /// The descriptor is closed before this returns.
    func writeNewFile(_ name: String, durable: Bool, _ write: (borrowing FileDescriptor) throws -> Void) throws {
        let file = try open(name, flags: O_WRONLY | O_CREAT | O_EXCL)
        try write(file)
        if durable { try file.synchronizeData() }
    }

    /// Writes a new file under `tmp/` and hands its name to `publish` (which renames it into
    /// place); if anything fails, the temporary file is removed.
    func publishNewFile<Result>(
        purpose: String, durable: Bool, write: (borrowing FileDescriptor) throws -> Void,
        publish: (String) throws -> Result
    ) throws -> Result {
        let temporary = Self.temporaryName(for: purpose)
        do {
            try writeNewFile(temporary, durable: durable, write)
            return try publish(temporary)
        } catch {
            try? removeFile(temporary)
            throw error
        }
    }

    /// Replaces `name` atomically with what `write` writes: the new file is written in `tmp/`,
    /// then renamed over `name`.
    ///
    /// Readers see the old file or the new one, never a mix. With `durable`, the file is flushed
    /// before the rename and the directory after it, so the new file also survives a power loss.
    func replaceFile(_ name: String, durable: Bool, writing write: (borrowing FileDescriptor) throws -> Void) throws {
        try publishNewFile(purpose: name, durable: durable, write: write) { temporary in
            try System.rename(at: descriptor.rawValue, temporary, to: name)
        }
        if durable { try synchronizeDirectory(containing: name) }
    }

    /// Replaces `name` with `bytes` atomically; see ``replaceFile(_:durable:writing:)``.
    func replaceFile(_ name: String, with bytes: [UInt8], durable: Bool) throws {
        try replaceFile(name, durable: durable) { file in try bytes.withUnsafeBytes { try file.writeAll($0) } }
    }

    /// Flushes the directory that holds `name`, making a rename or unlink in it durable.
    func synchronizeDirectory(containing name: String) throws(SystemError) {
        let parent = name.split(separator: "/").dropLast().joined(separator: "/")
        let directory = try FileDescriptor(
            at: descriptor, parent.isEmpty ? "." : parent, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        try directory.synchronize()
    }

    /// A name in `tmp/` no other writer will choose: the purpose, this process and a random tag.
    static func temporaryName(for purpose: String) -> String {
        let tag = String(UniqueNames.next(), radix: 16)
        return "\(temporaryDirectory)/\(purpose.replacingSlashes).\(UniqueNames.processID).\(tag)"
    }

    /// Status of an entry inside the cache, not following links; `nil` when it does not exist.
    func status(of name: String) throws(SystemError) -> FileStatus? {
        try Self.status(of: name, in: descriptor.rawValue)
    }

    /// ``status(of:)`` before there is a directory value, inside the root open as `root`.
    static func status(of name: String, in root: Int32) throws(SystemError) -> FileStatus? {
        do {
            return try System.status(at: root, name)
        } catch {
            guard error.errno == ENOENT else { throw error }
            return nil
        }
    }

    /// Whether `name` is a real directory (not a link to one).
    func isDirectory(_ name: String) -> Bool {
        (try? status(of: name))??.isDirectory ?? false
    }

    func contents(of name: String) throws(SystemError) -> [String] {
        try System.contentsOfDirectory(at: descriptor.rawValue, name)
    }

    /// Removes a file; a file that is already gone is not an error.
    func removeFile(_ name: String) throws(SystemError) {
        do {
            try System.remove(at: descriptor.rawValue, name)
        } catch {
            guard error.errno == ENOENT else { throw error }
        }
    }
}

extension Sharing {
    var fileMode: mode_t { self == .group ? 0o660 : 0o600 }
    var directoryMode: mode_t { self == .group ? 0o2770 : 0o700 }
}

extension String {
    fileprivate var replacingSlashes: String {
        String(map { $0 == "/" ? "_" : $0 })
    }
}
