#if canImport(Darwin)
import Darwin

extension FileStatus {
    init(_ raw: stat) {
        self.init(
            size: Int64(raw.st_size),
            mode: UInt32(raw.st_mode),
            linkCount: UInt64(raw.st_nlink),
            owner: UInt32(raw.st_uid),
            group: UInt32(raw.st_gid),
            device: UInt64(UInt32(bitPattern: raw.st_dev)),
            inode: UInt64(raw.st_ino),
            modifiedMilliseconds: Int64(raw.st_mtimespec.tv_sec) * 1000
                + Int64(raw.st_mtimespec.tv_nsec) / 1_000_000
        )
    }
}

extension System {
    /// Renames `from` to `to`, failing with EEXIST rather than replacing an existing file.
    /// The C function is `renameatx_np` with `RENAME_EXCL`.
    static func renameWithoutReplacing(at directory: Int32, _ from: String, to: String) throws(SystemError) {
        _ = try retryingInterrupts("renameatx_np", path: to) {
            renameatx_np(directory, from, directory, to, UInt32(RENAME_EXCL))
        }
    }

    /// Flushes a file's data to stable storage. Darwin's fsync(2) only reaches the drive's
    /// cache, so this asks for `F_FULLFSYNC`, falling back to `fsync` where the filesystem
    /// does not support it.
    static func synchronizeData(_ descriptor: Int32) throws(SystemError) {
        try synchronize(descriptor)
    }

    /// Flushes a file or directory, metadata included, with `F_FULLFSYNC` (else `fsync`).
    static func synchronize(_ descriptor: Int32) throws(SystemError) {
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return }
        _ = try retryingInterrupts("fsync") { fsync(descriptor) }
    }

    /// What kind of filesystem the open file or directory is on. The C function is `fstatfs`.
    static func filesystemKind(_ descriptor: Int32) throws(SystemError) -> FilesystemKind {
        var result = statfs()
        _ = try retryingInterrupts("fstatfs") { fstatfs(descriptor, &result) }
        let name = withUnsafeBytes(of: result.f_fstypename) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return FilesystemKind(darwinTypeName: name)
    }
}
#endif
