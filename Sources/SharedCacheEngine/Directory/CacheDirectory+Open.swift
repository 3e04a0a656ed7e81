#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
package import SharedCacheFormat
package import SharedCachePlatform

extension CacheDirectory {
    /// The layout's folders; its other names are files.
    private static let folderNames: Set<String> = [
        journalDirectory, blobsDirectory, packsDirectory, temporaryDirectory, FetchLock.directoryName,
    ]

    /// The names a directory may hold before its `format` file exists: an initialisation that
    /// died half-way, which the next opener finishes.
    private static let layoutNames: Set<String> = [
        FormatVersion.fileName, ConfigurationFile.fileName, lockFile, manifestFile, daemonFile, statsFile,
        reserveFile, journalDirectory, blobsDirectory, packsDirectory, temporaryDirectory, fetchingDirectory,
    ]

    /// Opens the cache directory at `path`, creating and initialising it when needed.
    ///
    /// - Parameter sharing: who may use a directory this call creates; an existing one's mode decides.
    /// - Returns: the directory, its lock, the limits recorded in its `config`, and its format
    ///   version (an older one is for the caller to upgrade: see `CacheEngine.upgradeFormat`).
    /// - Throws: ``SharedCacheError`` with `.notADirectory`, `.notACacheDirectory`,
    ///   `.unsupportedFormat`, `.permissionDenied`, `.unsafePath` or `.corruptData`, each saying
    ///   what to do.
    static func open(
        path: String, creating shared: ConfigurationFile, sharing requested: Sharing, timeout: Duration, durable: Bool
    ) throws(SharedCacheError) -> (CacheDirectory, DirectoryLock, ConfigurationFile, FormatVersion) {
        let root = try openRoot(path, mode: requested.modes.directory)
        let (sharing, isInitialized) = try perform(path: path, "opening the cache at \(path)") {
            try admit(root: root, path: path, requested: requested)
        }
        let directory = CacheDirectory(
            path: path, descriptor: root, modes: sharing.modes, temporaryFolder: temporaryDirectory)
        return try directory.perform("opening the cache at \(path)") {
            try directory.descriptor.checkWriteAndSearchAccess()
            let lock = try DirectoryLock(in: directory)
            if !isInitialized {
                try lock.withExclusiveLock(timeout: timeout) {
                    try directory.initialize(with: shared, durable: durable)
                }
            }
            try directory.refuseLinkedFolders()
            let format = try directory.checkFormat()
            try directory.restoreMissingFolders()
            return (directory, lock, try directory.readConfiguration(defaults: shared), format)
        }
    }

    /// Decides whether this process may use the directory, and who shares it.
    ///
    /// Refuses a root every user may write to (anyone could plant files), another user's
    /// private root (files this process made in it would be ours and could break it), and a
    /// directory that holds something other than a cache — before creating or changing
    /// anything. A new cache asked to be group-shared gets mode 02770 here. A root is
    /// group-shared when its group may read, write and search it and it is set-group-ID.
    private static func admit(root: borrowing FileDescriptor, path: String, requested: Sharing) throws
        -> (Sharing, isInitialized: Bool)
    {
        var status = try root.status()
        if status.permissions & 0o002 != 0 {
            throw SharedCacheError(
                .unsafePath,
                "\(path) is writable by every user (mode \(String(status.permissions, radix: 8))), so anyone could "
                    + "plant files in the cache; run chmod o-w on it, or use a directory of your own",
                path: path)
        }
        let isInitialized = try root.status(of: FormatVersion.fileName) != nil
        if !isInitialized {
            try refuseIfForeign(root: root, path: path)
            if requested == .group {
                try root.setModeIfOwned(Sharing.group.modes.directory)
                status = try root.status()
            }
        }
        let sharing = Sharing(rootStatus: status)
        if requested == .group && sharing == .owner {
            throw SharedCacheError(
                .permissionDenied,
                "\(path) is private to its owner (mode \(String(status.permissions, radix: 8))), but this process asked "
                    + "for Sharing.group (`sharedcache init --group`); share it as sharedcache(5), Sharing, says "
                    + "(with no process using it: "
                    + "sharedcache --dir \(path) clear, then chgrp -R GROUP, chmod -R g+rwX and chmod g+s on its "
                    + "directories), or open it without Sharing.group",
                path: path)
        }
        if let refusal = refusal(of: status, path: path) { throw refusal }
        return (sharing, isInitialized)
    }

    /// Why this process may not use a root with `status`: another user's private directory,
    /// or a group-shared one whose group it is not in; `nil` when it may.
    private static func refusal(of status: FileStatus, path: String) -> SharedCacheError? {
        let user = System.effectiveUserID()
        guard status.owner != user else { return nil }
        switch Sharing(rootStatus: status) {
        case .owner:
            return SharedCacheError(
                .permissionDenied,
                "\(path) belongs to user \(status.owner), not to this process's user \(user), and is private "
                    + "to its owner; open it as that user, ask them to share it with a group (sharedcache(5), "
                    + "Sharing), or use a directory of your own",
                path: path)
        case .group:
            guard !System.isMember(ofGroup: status.group) else { return nil }
            return SharedCacheError(
                .permissionDenied,
                "\(path) is shared with group \(status.group), and this process's user \(user) is not in it; "
                    + "add the user to that group, or use a directory of your own",
                path: path)
        }
    }

    /// Creates `path` and its missing parents, then opens it as a directory.
    private static func openRoot(_ path: String, mode: mode_t) throws(SharedCacheError) -> FileDescriptor {
        func fail(_ error: SystemError) -> SharedCacheError {
            // A root this process may not search: say whose it is, if that is why.
            if error.errno == EACCES, let status = try? System.status(atPath: path, followingSymlinks: true),
                status.isDirectory, let refusal = refusal(of: status, path: path)
            {
                return refusal
            }
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
                try System.makeDirectory(atPath: prefix, mode: UInt32(mode))
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
                (try? System.status(atPath: path))?.isSymbolicLink == true
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
    package func readConfiguration(defaults: ConfigurationFile) throws -> ConfigurationFile {
        let bytes: [UInt8]
        do {
            bytes = try readFile(ConfigurationFile.fileName) ?? []
        } catch let error as SystemError {
            guard let found = error.found else { throw error }
            throw foreignFile(
                ConfigurationFile.fileName, found: found, role: "its limits",
                advice: "open the cache again (the default limits then apply; set them again with "
                    + "`sharedcache config`)")
        }
        do {
            return try ConfigurationFile.decode(bytes, defaults: defaults)
        } catch {
            throw SharedCacheError(
                .corruptData,
                "\(path)/config has an \(error); fix that line, or remove the file (the default limits then apply) "
                    + "and set the limits again with `sharedcache config`",
                path: "\(path)/config")
        }
    }

    /// Refuses a cache whose folders are symbolic links: the root's own, or `blobs/`'s fan-out
    /// folders. Every file is opened with `O_NOFOLLOW`, but that guards only a path's last
    /// component; a linked folder would send reads, writes and unlinks somewhere else.
    private func refuseLinkedFolders() throws {
        var links = try descriptor.symbolicLinks(in: ".").filter(Self.layoutNames.contains)
        if links.isEmpty, isDirectory(Self.blobsDirectory) {
            links = try descriptor.symbolicLinks(in: Self.blobsDirectory)
                .map { "\(Self.blobsDirectory)/\($0)" }
        }
        guard let link = links.sorted().first else { return }
        let isFolder = link.contains("/") || Self.folderNames.contains(link)
        // Locks, counters and the reserve hold nothing to keep: a copy of whatever the link
        // points to (any file at all) would only be in the way.
        let isMadeAnew = [Self.lockFile, Self.daemonFile, Self.statsFile, Self.reserveFile].contains(link)
        let linkPath = "\(path)/\(link)", removal = "`rm \(SharedCacheError.shellWord(linkPath))`"
        // A link to nothing leaves nothing to put in its place (what it held is gone): removed,
        // the folder is made anew, and the limits of a config go back to the defaults.
        let target = System.linkTarget(atPath: linkPath)
        let pointsToNothing = target.flatMap { try? System.status(atPath: $0, followingSymlinks: true) } == nil
        throw SharedCacheError(
            .unsafePath,
            "\(linkPath) is a symbolic link, and SharedCache never follows links inside its directory; "
                + (isFolder
                    ? pointsToNothing
                        ? "the folder it points to is gone, so remove it (SharedCache makes it anew): \(removal)"
                        : "replace the link with the folder it points to"
                    : isMadeAnew
                        ? "remove it (SharedCache makes the file anew): \(removal)"
                        : SharedCacheError.replacingLink(at: linkPath))
                + ", then open the cache again"
                + (link == ConfigurationFile.fileName && pointsToNothing
                    ? " (the default limits then apply; set them again with `sharedcache config`)" : ""),
            path: linkPath)
    }

    /// Makes again the layout's folders that are gone: a stray file stood in the place of one,
    /// and was removed as the error about it advised. What they held is gone with them; the
    /// bodies the journal still names are found missing and reported, as any lost body is.
    private func restoreMissingFolders() throws {
        for name in [Self.journalDirectory, Self.packsDirectory, Self.temporaryDirectory]
        where try status(of: name) == nil {
            try makeDirectory(name)
        }
        if try status(of: Self.blobsDirectory) == nil { try BlobFileStore.makeFolders(in: self) }
    }

    /// Refuses a directory written by a newer major version, or one that is not a cache.
    package func checkFormat() throws -> FormatVersion {
        guard let bytes = try readFile(FormatVersion.fileName) else {
            throw SharedCacheError(.corruptData, "\(path)/format vanished while opening; try again", path: path)
        }
        do {
            return try FormatVersion.decode(bytes)
        } catch .unsupportedVersion(let major) {
            throw SharedCacheError(
                .unsupportedFormat,
                "\(path) holds a version \(major) cache, newer than this SharedCache (version "
                    + "\(FormatVersion.current.major)); upgrade SharedCache or use another directory",
                path: "\(path)/format")
        } catch .badMagic where (try? status(of: CacheDirectory.journalDirectory))??.isDirectory != true {
            throw SharedCacheError(
                .notACacheDirectory,
                "\(path)/format is not a SharedCache format file; this directory belongs to something else, "
                    + "so choose another one",
                path: "\(path)/format")
        } catch {
            // Also an emptied or overwritten format file beside a cache's journal: the cache is
            // this program's, and abandoning the directory would lose every entry.
            let line = String(decoding: FormatVersion.current.encoded().dropLast(), as: UTF8.self)
            throw SharedCacheError(
                .corruptData,
                "\(path)/format is damaged (\(error)); it must hold the one line '\(line)', so write that line into it",
                path: "\(path)/format")
        }
    }

    /// Throws unless a directory without a `format` file is empty or a creation that died
    /// half-way (which `initialize` finishes): `.notACacheDirectory` when it holds anything a
    /// creation does not make, even under a layout name (a `config` of another program, a
    /// `tmp/notes.txt`), and `.corruptData` when it holds a cache that was used (journal records,
    /// bodies) and lost its `format` file, which finishing it would misread.
    private static func refuseIfForeign(root: borrowing FileDescriptor, path: String) throws {
        let names = try root.entries(of: ".")
        var foreign = names.filter { !layoutNames.contains($0) }
        if foreign.isEmpty { foreign = try strayEntries(root: root, among: names) }
        guard foreign.isEmpty else {
            let examples = foreign.sorted().prefix(3).joined(separator: ", ")
            throw SharedCacheError(
                .notACacheDirectory,
                "\(path) is not empty and is not a SharedCache directory (it holds \(examples) and no format "
                    + "file); choose an empty or new directory",
                path: path)
        }
        let segments = names.contains(journalDirectory) ? try root.entries(of: journalDirectory).sorted() : []
        guard try wasUsed(root: root, names: names, segments: segments),
            // Not finished and put to use meanwhile by another process, since the caller looked.
            try root.status(of: FormatVersion.fileName) == nil
        else { return }
        // The version its journal was written in: the line to write back.
        var line = String(decoding: FormatVersion.current.encoded().dropLast(), as: UTF8.self)
        if let newest = segments.last,
            let major = journalVersion(root: root, segment: "\(journalDirectory)/\(newest)"),
            major != FormatVersion.current.major
        {
            line = "sharedcache \(major).0"
        }
        throw SharedCacheError(
            .corruptData,
            "\(path) holds a cache (journal records or bodies) whose format file is missing; write the one line "
                + "'\(line)' into \(path)/format",
            path: "\(path)/format")
    }

    /// What a layout name of a directory without a `format` file holds that a creation does not
    /// make: another program's `config`, a file where a folder belongs, a name in a folder that
    /// is not one of the cache's.
    private static func strayEntries(root: borrowing FileDescriptor, among names: [String]) throws -> [String] {
        // What each folder of a creation holds: its names, and whether they are folders.
        let folders: [String: (isOurs: (String) -> Bool, holdsFolders: Bool)] = [
            journalDirectory: ({ isHex($0, digits: 16) }, false), packsDirectory: ({ isHex($0, digits: 16) }, false),
            blobsDirectory: ({ isHex($0, digits: 2) }, true), fetchingDirectory: ({ isHex($0, digits: 64) }, false),
            temporaryDirectory: ({ isTemporaryFileName($0) }, false),
        ]
        var stray: [String] = []
        for name in names {
            guard let status = try root.status(of: name) else { continue }
            if let (isOurs, holdsFolders) = folders[name] {
                guard status.isDirectory else {
                    stray.append(name)
                    continue
                }
                for entry in try root.entries(of: name) {
                    let kind = try root.status(of: "\(name)/\(entry)")
                    let isRightKind = holdsFolders ? kind?.isDirectory == true : kind?.isRegularFile == true
                    if kind != nil, !(isOurs(entry) && isRightKind) { stray.append("\(name)/\(entry)") }
                }
            } else if name == ConfigurationFile.fileName, !(try isOwnConfiguration(root: root, status)) {
                stray.append(name)
            }
        }
        return stray
    }

    /// Whether `config` (not followed, read only if a regular file) is one a creation wrote:
    /// it decodes, or it is empty or zeros, as a write a power loss cut short leaves it.
    private static func isOwnConfiguration(root: borrowing FileDescriptor, _ status: FileStatus) throws -> Bool {
        guard status.isRegularFile, status.size < 1 << 16 else { return false }
        let file = try FileDescriptor(at: root, ConfigurationFile.fileName, flags: O_RDONLY | O_NONBLOCK | O_NOFOLLOW)
        var bytes = [UInt8](repeating: 0, count: Int(status.size))
        let count = try bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        let read = bytes.prefix(count)
        return read.allSatisfy { $0 == 0 }
            || (try? ConfigurationFile.decode(Array(read), defaults: ConfigurationFile(sizeLimit: 0))) != nil
    }

    /// Whether a directory without a `format` file holds what only use makes: a journal
    /// record (a creation makes one segment, a header alone) or a body.
    private static func wasUsed(root: borrowing FileDescriptor, names: [String], segments: [String]) throws -> Bool {
        if segments.count > 1 { return true }
        if let only = segments.first, let size = try root.status(of: "\(journalDirectory)/\(only)")?.size,
            size > Int64(SegmentHeader.size)
        {
            return true
        }
        if names.contains(packsDirectory), !(try root.entries(of: packsDirectory).isEmpty) { return true }
        guard names.contains(blobsDirectory) else { return false }
        return try root.entries(of: blobsDirectory).contains { folder in
            !(try root.entries(of: "\(blobsDirectory)/\(folder)").isEmpty)
        }
    }

    private static func isHex(_ name: String, digits: Int) -> Bool {
        name.utf8.count == digits && name.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The format version a journal segment's header says its records are in; `nil` when it
    /// has none that decodes.
    private static func journalVersion(root: borrowing FileDescriptor, segment: String) -> UInt16? {
        guard let file = try? FileDescriptor(at: root, segment, flags: O_RDONLY | O_NONBLOCK | O_NOFOLLOW) else {
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: SegmentHeader.size)
        let count = try? bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }
        guard count == bytes.count else { return nil }
        return bytes.withUnsafeBytes { try? SegmentHeader.decode($0) }?.major
    }

    /// Lays out a new cache. Runs under the directory lock; the `format` file comes last, so
    /// a directory with one is complete, and a directory without one is finished by the next opener.
    private func initialize(with configuration: ConfigurationFile, durable: Bool) throws {
        if try status(of: FormatVersion.fileName) != nil { return }
        try Self.refuseIfForeign(root: descriptor, path: path)
        for name in [Self.journalDirectory, Self.packsDirectory, Self.temporaryDirectory] { try makeDirectory(name) }
        try BlobFileStore.makeFolders(in: self)
        // The limits a creation that died wrote stay, unless a power loss left them unreadable.
        // Flushed whatever `durable` says (once per directory): a power loss that kept the
        // rename and tore the bytes would leave a `config` no creation wrote, and the directory
        // refused as another program's (`refuseIfForeign`).
        let written = try readFile(ConfigurationFile.fileName)
        if written.flatMap({ try? ConfigurationFile.decode($0, defaults: configuration) }) == nil {
            try replaceFile(ConfigurationFile.fileName, with: configuration.encoded(), durable: true)
        }
        if try status(of: JournalSegment.name(1)) == nil {
            try JournalSegment.create(1, firstSequence: 1, in: self, durable: durable)
        }
        // Empty, whatever a creation that died left: `refuseIfForeign` refused a used cache.
        try ManifestFile.write(Index(), generation: 1, lastSequence: 0, in: self, durable: durable)
        keepReserve()
        try replaceFile(FormatVersion.fileName, with: FormatVersion.current.encoded(), durable: true)
    }
}
