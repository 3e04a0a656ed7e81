#if os(Linux)
import CSharedCacheSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension FileStatus {
    init(_ raw: stat) {
        self.init(
            size: Int64(raw.st_size),
            mode: UInt32(raw.st_mode),
            linkCount: UInt64(raw.st_nlink),
            owner: UInt32(raw.st_uid),
            group: UInt32(raw.st_gid),
            device: UInt64(raw.st_dev),
            inode: UInt64(raw.st_ino),
            modifiedMilliseconds: Int64(raw.st_mtim.tv_sec) * 1000 + Int64(raw.st_mtim.tv_nsec) / 1_000_000
        )
    }
}

extension System {
    /// Renames `from` to `to` unless `to` exists (EEXIST). The C function is `renameat2` with
    /// `RENAME_NOREPLACE`.
    static func renameExclusively(at directory: Int32, _ from: String, to: String) throws(SystemError) {
        _ = try retryingInterrupts("renameat2", path: to) { scs_rename_noreplace(directory, from, directory, to) }
    }

    /// A pipe whose ends close on exec, made in one step so that a thread spawning a process
    /// meanwhile cannot inherit them. The C function is `pipe2` with `O_CLOEXEC`.
    static func pipe() throws(SystemError) -> PipeEnds {
        var ends: [Int32] = [0, 0]
        _ = try retryingInterrupts("pipe2") { scs_pipe_cloexec(&ends) }
        return PipeEnds(read: FileDescriptor(owning: ends[0]), write: FileDescriptor(owning: ends[1]))
    }

    /// A new inotify instance. The C function is `inotify_init1`.
    static func makeInotify() throws(SystemError) -> FileDescriptor {
        FileDescriptor(owning: try retryingInterrupts("inotify_init1") { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) })
    }

    /// Watches `path` for the events in `mask`. The C function is `inotify_add_watch`.
    static func addWatch(_ inotify: Int32, path: String, mask: UInt32) throws(SystemError) {
        _ = try retryingInterrupts("inotify_add_watch", path: path) { inotify_add_watch(inotify, path, mask) }
    }

    /// Flushes a file's data (and the metadata needed to read it back) to the device.
    /// The C function is `fdatasync`.
    static func synchronizeData(_ descriptor: Int32) throws(SystemError) {
        _ = try retryingInterrupts("fdatasync") { fdatasync(descriptor) }
        #if DEBUG
        if Recorder.isArmed { Recorder.synchronized(descriptor, dataOnly: true) }
        #endif
    }

    /// Flushes a file or directory, metadata included. The C function is `fsync`.
    static func synchronize(_ descriptor: Int32) throws(SystemError) {
        _ = try retryingInterrupts("fsync") { fsync(descriptor) }
        #if DEBUG
        if Recorder.isArmed { Recorder.synchronized(descriptor, dataOnly: false) }
        #endif
    }

    /// What kind of filesystem the open file or directory is on. The C function is `fstatfs`.
    static func filesystemKind(_ descriptor: Int32) throws(SystemError) -> FilesystemKind {
        FilesystemKind(linuxMagic: try retryingInterrupts("fstatfs") { scs_filesystem_magic(descriptor) })
    }
}
#endif
