#if canImport(Darwin)
package import Darwin
#elseif canImport(Glibc)
package import Glibc
#elseif canImport(Musl)
package import Musl
#endif

/// The permissions a directory gives what is created in it.
package struct FileModes: Sendable, Hashable {
    /// For new files.
    package var file: mode_t
    /// For new directories.
    package var directory: mode_t
    /// Whether to set the modes with `fchmod` after creating, so that no process's umask can
    /// take bits away (a group-shared directory needs its group's bits).
    package var enforced: Bool

    package init(file: mode_t, directory: mode_t, enforced: Bool) {
        self.file = file
        self.directory = directory
        self.enforced = enforced
    }
}

/// An open directory that every path inside it is opened through: the cache's root.
///
/// Every file is opened relative to the root descriptor with `O_NOFOLLOW`, so a symbolic link
/// planted where a file belongs is refused instead of followed. What the files are is the
/// engine's business; this is only how they are opened, written, replaced and removed.
/// Thread-safe: it holds only immutable state.
package final class CacheDirectory: Sendable {
    /// The path the directory was opened with.
    package let path: String
    package let descriptor: FileDescriptor
    /// The modes of what is created in it.
    package let modes: FileModes
    /// The folder, inside this directory, where new files are written before they are renamed
    /// into place.
    package let temporaryFolder: String

    package init(path: String, descriptor: consuming FileDescriptor, modes: FileModes, temporaryFolder: String) {
        self.path = path
        self.descriptor = descriptor
        self.modes = modes
        self.temporaryFolder = temporaryFolder
    }

    // MARK: - Files

    /// Opens a file inside the directory, never following a symbolic link in the last
    /// component. A file it creates gets exactly the file mode when modes are enforced.
    package func open(_ name: String, flags: Int32) throws(SystemError) -> FileDescriptor {
        let file = try System.open(at: descriptor.rawValue, name, flags: flags | O_NOFOLLOW, mode: modes.file)
        if modes.enforced && flags & O_CREAT != 0 { try file.setModeIfOwned(modes.file) }
        return file
    }

    /// Opens a file from a NUL-terminated path without allocating: the hot path's open.
    package func open(cString name: UnsafePointer<CChar>, flags: Int32) throws(SystemError) -> FileDescriptor {
        try System.open(at: descriptor.rawValue, cString: name, flags: flags | O_NOFOLLOW)
    }

    /// Opens a file that may not exist; `nil` when it does not (or, with `linkIsAbsence`, when
    /// a symbolic link stands in its place).
    package func openIfPresent(_ name: String, flags: Int32, linkIsAbsence: Bool = false) throws(SystemError)
        -> FileDescriptor?
    {
        do {
            return try open(name, flags: flags)
        } catch {
            if error.errno == ENOENT || (linkIsAbsence && error.errno == ELOOP) { return nil }
            throw error
        }
    }

    /// Opens a file that is read again and again (a pack segment) for reading, where the system
    /// allows without updating its access time on each read: Linux `O_NOATIME`, for files this
    /// user owns (another user's, in a shared directory, are opened plainly). Nothing here reads
    /// access times, and a `pread` of 1 KB without the update costs ~85 ns less (measured in C).
    /// `nil` when the file does not exist.
    package func openForRepeatedReading(_ name: String) throws(SystemError) -> FileDescriptor? {
        let flags = O_RDONLY | O_NONBLOCK
        if System.noAccessTimeFlag != 0 {
            do {
                return try openIfPresent(name, flags: flags | System.noAccessTimeFlag)
            } catch {
                guard error.errno == EPERM else { throw error }
            }
        }
        return try openIfPresent(name, flags: flags)
    }

    /// Creates the directory `name` unless it exists, with exactly the directory mode.
    package func makeDirectory(_ name: String) throws(SystemError) {
        do {
            try System.makeDirectory(at: descriptor.rawValue, name, mode: modes.directory)
        } catch {
            guard error.errno == EEXIST else { throw error }
            return
        }
        if modes.enforced {
            let created = try FileDescriptor(at: descriptor, name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
            try created.setModeIfOwned(modes.directory)
        }
    }

    /// Reads a whole regular file; `nil` when it does not exist.
    ///
    /// - Throws: `EINVAL` (as a ``SystemError`` of `"read"`) when something other than a
    ///   regular file stands there: a directory, a FIFO, a device.
    package func readFile(_ name: String) throws -> [UInt8]? {
        guard let file = try openIfPresent(name, flags: O_RDONLY | O_NONBLOCK) else { return nil }
        let status = try file.status()
        guard status.isRegularFile else { throw SystemError.notRegularFile(name, status) }
        var bytes = [UInt8](repeating: 0, count: Int(status.size))
        let count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        bytes.removeLast(bytes.count - count)
        return bytes
    }

    /// Writes a new file in the temporary folder and hands its name to `publish` (which renames
    /// it into place); if anything fails, the temporary file is removed.
    ///
    /// The writer holds an exclusive flock on the file from just after creating it until it is
    /// published: the sign of life a sweeper goes by (``isLeftover(_:)``), whatever the file's
    /// age, so a writer stopped for an hour never has its file swept from under it.
    package func publishNewFile<Result>(
        purpose: String, durable: Bool, write: (borrowing FileDescriptor) throws -> Void,
        publish: (String) throws -> Result
    ) throws -> Result {
        let temporary = temporaryName(for: purpose)
        do {
            let file = try openNewTemporaryFile(temporary)
            _ = try file.tryLock(.exclusive)  // a new file: nobody else can hold it
            try write(file)
            if durable { try file.synchronizeData() }
            let result = try publish(temporary)
            file.close()
            return result
        } catch {
            try? removeFile(temporary)
            throw error
        }
    }

    /// Creates the temporary file `name`, making the temporary folder again if it is gone: a
    /// stray file that stood in its place was removed, as the error about it advised.
    private func openNewTemporaryFile(_ name: String) throws(SystemError) -> FileDescriptor {
        let flags = O_RDWR | O_CREAT | O_EXCL
        do {
            return try open(name, flags: flags)
        } catch {
            guard error.errno == ENOENT, try status(of: temporaryFolder) == nil else { throw error }
            try makeDirectory(temporaryFolder)
            return try open(name, flags: flags)
        }
    }

    /// How long a file in the temporary folder may stand unlocked before it is taken for a
    /// dead writer's: the instant between its writer's `open` and `flock`, with room to spare.
    package static let unlockedTemporaryGrace: Int64 = 10_000

    /// Whether the temporary file `name` was left by a writer that is gone: nobody holds its
    /// lock (a live writer does until it publishes) and it is older than the moment between
    /// creating and locking. Judged by the lock, not the clock, so neither a stopped writer
    /// nor a clock jump makes a live writer's file look abandoned.
    package func isLeftover(_ name: String, now: Int64) throws(SystemError) -> Bool {
        guard let status = try status(of: name), status.isRegularFile,
            status.modifiedMilliseconds < now - Self.unlockedTemporaryGrace,
            let file = try openIfPresent(name, flags: O_RDONLY | O_NONBLOCK, linkIsAbsence: true)
        else { return false }
        return try file.tryLock(.shared)
    }

    /// Renames `from` to `to`, failing with `EEXIST` rather than replacing an existing file
    /// (`renameat2` with `RENAME_NOREPLACE`, `renameatx_np` with `RENAME_EXCL` on Darwin).
    package func renameWithoutReplacing(_ from: String, to: String) throws(SystemError) {
        try System.renameWithoutReplacing(at: descriptor.rawValue, from, to: to)
    }

    /// Replaces `name` atomically with what `write` writes: the new file is written in the
    /// temporary folder, then renamed over `name`.
    ///
    /// Readers see the old file or the new one, never a mix. With `durable`, the file is flushed
    /// before the rename and the directory after it, so the new file also survives a power loss.
    package func replaceFile(_ name: String, durable: Bool, writing write: (borrowing FileDescriptor) throws -> Void)
        throws
    {
        try publishNewFile(purpose: name, durable: durable, write: write) { temporary in
            try System.rename(at: descriptor.rawValue, temporary, to: name)
        }
        if durable { try synchronizeDirectory(containing: name) }
    }

    /// Replaces `name` with `bytes` atomically; see ``replaceFile(_:durable:writing:)``.
    package func replaceFile(_ name: String, with bytes: [UInt8], durable: Bool) throws {
        try replaceFile(name, durable: durable) { file in try bytes.withUnsafeBytes { try file.writeAll($0) } }
    }

    /// Flushes the directory that holds `name`, making a rename or unlink in it durable.
    package func synchronizeDirectory(containing name: String) throws(SystemError) {
        let parent = name.split(separator: "/").dropLast().joined(separator: "/")
        let directory = try FileDescriptor(
            at: descriptor, parent.isEmpty ? "." : parent, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        try directory.synchronize()
    }

    /// A name in the temporary folder no other writer will choose: the purpose, this process
    /// and a random tag.
    package func temporaryName(for purpose: String) -> String {
        let tag = String(UniqueNames.next(), radix: 16)
        return "\(temporaryFolder)/\(purpose.replacingSlashes).\(UniqueNames.processID).\(tag)"
    }

    /// Whether `name`, a file in the temporary folder, has the shape ``temporaryName(for:)``
    /// gives: purpose, process, tag.
    package static func isTemporaryFileName(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && UInt32(parts[1]) != nil && UInt64(parts[2], radix: 16) != nil
    }

    /// Status of an entry inside the directory, not following links; `nil` when it does not exist.
    package func status(of name: String) throws(SystemError) -> FileStatus? {
        try descriptor.status(of: name)
    }

    /// Whether `name` is a real directory (not a link to one).
    package func isDirectory(_ name: String) -> Bool {
        (try? status(of: name))??.isDirectory ?? false
    }

    /// Names in the folder `name`, without "." and ".."; throws rather than return a listing
    /// cut short by a failing `readdir`.
    package func contents(of name: String) throws(SystemError) -> [String] {
        try descriptor.entries(of: name)
    }

    /// Removes a file; a file that is already gone is not an error.
    package func removeFile(_ name: String) throws(SystemError) {
        do {
            try System.remove(at: descriptor.rawValue, name)
        } catch {
            guard error.errno == ENOENT else { throw error }
        }
    }

    /// Removes an empty folder; one that is already gone is not an error.
    package func removeFolder(_ name: String) throws(SystemError) {
        do {
            try System.remove(at: descriptor.rawValue, name, isDirectory: true)
        } catch {
            guard error.errno == ENOENT else { throw error }
        }
    }
}

extension String {
    fileprivate var replacingSlashes: String {
        String(map { $0 == "/" ? "_" : $0 })
    }
}
