#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension CacheDirectory {
    /// The names a directory may hold before its `format` file exists: an initialisation that
    /// died half-way, which the next opener finishes.
    private static let layoutNames: Set<String> = [
        FormatVersion.fileName, ConfigurationFile.fileName, lockFile, manifestFile, daemonFile, SharedCounters.fileName,
        journalDirectory, blobsDirectory, temporaryDirectory, FetchLock.directoryName,
    ]

    /// Opens the cache directory at `path`, creating and initialising it when needed.
    ///
    /// - Returns: the directory, its lock, and the limits recorded in its `config`.
    /// - Throws: ``SharedCacheError`` with `.notADirectory`, `.notACacheDirectory`,
    ///   `.unsupportedFormat`, `.permissionDenied` or `.corruptData`, each saying what to do.
    static func open(path: String, creating shared: ConfigurationFile, timeout: Duration, durable: Bool)
        throws(SharedCacheError) -> (CacheDirectory, DirectoryLock, ConfigurationFile)
    {
        let fileMode: mode_t = 0o600
        let root = try openRoot(path, mode: fileMode | 0o100)
        let directory = CacheDirectory(path: path, descriptor: root, fileMode: fileMode)
        return try directory.perform("opening the cache at \(path)") {
            try directory.refuseIfExposed()
            guard faccessat(directory.descriptor.rawValue, ".", W_OK | X_OK, 0) == 0 else {
                throw SystemError("faccessat", errno: errno, path: path)
            }
            let isInitialized = try directory.status(of: FormatVersion.fileName) != nil
            // Refuse someone else's directory before creating anything in it, the lock included.
            if !isInitialized { try directory.refuseIfForeign() }
            let lock = try DirectoryLock(in: directory)
            if !isInitialized {
                try lock.withExclusiveLock(timeout: timeout) {
                    try directory.initialize(with: shared, durable: durable)
                }
            }
            try directory.checkFormat()
            return (directory, lock, try directory.readConfiguration(defaults: shared))
        }
    }

    /// Creates `path` and its missing parents, then opens it as a directory.
    private static func openRoot(_ path: String, mode: mode_t) throws(SharedCacheError) -> FileDescriptor {
        func fail(_ error: SystemError) -> SharedCacheError {
            if error.errno == ENOTDIR {
                return SharedCacheError(
                    .notADirectory, "\(path) is not a directory; point the cache at a directory (or a path to create)",
                    path: path, systemCall: error.call, errno: error.errno)
            }
            return SharedCacheError(error, root: path, while: "opening the cache directory")
        }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            do {
                try System.makeDirectory(at: AT_FDCWD, prefix, mode: mode | ((mode & 0o444) >> 2))
            } catch {
                // EEXIST is the usual case. EACCES on a parent is fine too: a parent we may not
                // write may still exist and be searchable, and opening the path tells.
                guard error.errno == EEXIST || (error.errno == EACCES && prefix != path) else { throw fail(error) }
            }
            prefix += "/"
        }
        do {
            return try FileDescriptor(path: path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            // Linux says ENOTDIR for a link opened with O_DIRECTORY | O_NOFOLLOW, Darwin ELOOP.
            if error.errno == ELOOP || error.errno == ENOTDIR,
                (try? System.status(at: AT_FDCWD, path))?.isSymbolicLink == true
            {
                throw SharedCacheError(
                    .unsafePath,
                    "\(path) is a symbolic link; point the cache at the directory itself, so nobody can "
                        + "redirect it by replacing the link",
                    path: path, systemCall: error.call, errno: error.errno)
            }
            throw fail(error)
        }
    }

    /// Reads the shared limits in `config`; a name the file leaves out keeps its value in `defaults`.
    func readConfiguration(defaults: ConfigurationFile) throws -> ConfigurationFile {
        let bytes = try readFile(ConfigurationFile.fileName) ?? []
        do {
            return try ConfigurationFile.decode(bytes, defaults: defaults)
        } catch {
            throw SharedCacheError(
                .corruptData, "\(path)/config has an invalid \(error); fix it or rewrite it with `sharedcache config`",
                path: "\(path)/config")
        }
    }

    /// Refuses a directory written by a newer major version, or one that is not a cache.
    private func checkFormat() throws {
        guard let bytes = try readFile(FormatVersion.fileName) else {
            throw SharedCacheError(.corruptData, "\(path)/format vanished while opening; try again", path: path)
        }
        do {
            _ = try FormatVersion.decode(bytes)
        } catch .unsupportedVersion(let major) {
            throw SharedCacheError(
                .unsupportedFormat,
                "\(path) holds a version \(major) cache, newer than this SharedCache (version "
                    + "\(FormatVersion.current.major)); upgrade SharedCache or use another directory",
                path: "\(path)/format")
        } catch .badMagic {
            throw SharedCacheError(
                .notACacheDirectory,
                "\(path)/format is not a SharedCache format file; this directory belongs to something else, "
                    + "so choose another one",
                path: "\(path)/format")
        } catch {
            throw SharedCacheError.corrupt("\(path)/format", path: "\(path)/format", error)
        }
    }

    /// Refuses a root another user owns (it is theirs; files this process made in it would be
    /// ours and could break it) or that every user may write to (anyone could plant files).
    private func refuseIfExposed() throws {
        let status = try descriptor.status()
        if status.permissions & 0o002 != 0 {
            throw SharedCacheError(
                .unsafePath,
                "\(path) is writable by every user (mode \(String(status.permissions, radix: 8))), so anyone could "
                    + "plant files in the cache; run chmod o-w on it, or use a directory of your own",
                path: path)
        }
        let user = System.effectiveUserID()
        if status.owner != user {
            throw SharedCacheError(
                .permissionDenied,
                "\(path) belongs to user \(status.owner), not to this process's user \(user); a cache directory "
                    + "is its owner's: open it as that user, or use a directory of your own",
                path: path)
        }
    }

    /// Throws `.notACacheDirectory` when a directory without a `format` file holds anything
    /// other than a half-finished cache layout.
    private func refuseIfForeign() throws {
        let foreign = try contents(of: ".").filter { !Self.layoutNames.contains($0) }
        guard foreign.isEmpty else {
            let examples = foreign.sorted().prefix(3).joined(separator: ", ")
            throw SharedCacheError(
                .notACacheDirectory,
                "\(path) is not empty and is not a SharedCache directory (it holds \(examples) and no format "
                    + "file); choose an empty or new directory",
                path: path)
        }
    }

    /// Lays out a new cache. Runs under the directory lock; the `format` file comes last, so
    /// a directory with one is complete, and a directory without one is finished by the next opener.
    private func initialize(with configuration: ConfigurationFile, durable: Bool) throws {
        if try status(of: FormatVersion.fileName) != nil { return }
        try refuseIfForeign()
        for name in [Self.journalDirectory, Self.blobsDirectory, Self.temporaryDirectory]
            + (0...255).map({ BlobStore.fanOutDirectory(UInt8($0)) })
        {
            do {
                try System.makeDirectory(at: descriptor.rawValue, name, mode: directoryMode)
            } catch {
                guard error.errno == EEXIST else { throw error }
            }
        }
        try replaceFile(ConfigurationFile.fileName, with: configuration.encoded(), durable: durable)
        if try status(of: JournalSegment.name(1)) == nil {
            try JournalSegment.create(1, firstSequence: 1, in: self, durable: durable)
        }
        try ManifestFile.write(Index(), generation: 1, lastSequence: 0, in: self, durable: durable)
        try replaceFile(FormatVersion.fileName, with: FormatVersion.current.encoded(), durable: true)
    }
}
