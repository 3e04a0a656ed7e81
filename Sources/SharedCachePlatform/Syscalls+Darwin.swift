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
    /// Renames `from` to `to` unless `to` exists (EEXIST). The C function is `renameatx_np`
    /// with `RENAME_EXCL`.
    static func renameExclusively(at directory: Int32, _ from: String, to: String) throws(SystemError) {
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
        do {
            _ = try retryingInterrupts("fcntl(F_FULLFSYNC)") { fcntl(descriptor, F_FULLFSYNC) }
        } catch {
            // Filesystems that cannot flush the drive's cache (some network and FUSE ones) say
            // ENOTSUP or EINVAL, or ENOTTY where the request reaches no handler at all; fsync is
            // the most they offer. Anything else is a real failure.
            guard [ENOTSUP, EINVAL, ENOTTY].contains(error.errno) else { throw error }
            _ = try retryingInterrupts("fsync") { fsync(descriptor) }
        }
        #if DEBUG
        if Recorder.isArmed { Recorder.synchronized(descriptor, dataOnly: false) }
        #endif
    }

    /// A pipe whose ends close on exec. Darwin has no `pipe2`, so `FD_CLOEXEC` is set right
    /// after `pipe`: a process spawned by another thread in between could inherit the ends,
    /// which Foundation's `Process` avoids on Darwin by spawning with `POSIX_SPAWN_CLOEXEC_DEFAULT`.
    /// The C functions are `pipe` and `fcntl`.
    static func pipe() throws(SystemError) -> PipeEnds {
        var ends: [Int32] = [0, 0]
        _ = try retryingInterrupts("pipe") { Darwin.pipe(&ends) }
        let pipe = PipeEnds(read: FileDescriptor(owning: ends[0]), write: FileDescriptor(owning: ends[1]))
        for end in ends {
            _ = try retryingInterrupts("fcntl(F_SETFD)") { fcntl(end, F_SETFD, FD_CLOEXEC) }
            _ = try retryingInterrupts("fcntl(F_SETFL)") { fcntl(end, F_SETFL, O_NONBLOCK) }
        }
        return pipe
    }

    /// A new kernel event queue. The C function is `kqueue`.
    static func makeKqueue() throws(SystemError) -> FileDescriptor {
        FileDescriptor(owning: try retryingInterrupts("kqueue") { kqueue() })
    }

    /// Registers `change` with the queue, or waits up to `timeout` for events into `events`.
    /// The C function is `kevent`.
    ///
    /// - Returns: the number of events received.
    static func kernelEvents(
        _ queue: Int32, changes: [Darwin.kevent], events: inout [Darwin.kevent], timeout: timespec?
    ) throws(SystemError) -> Int {
        let capacity = Int32(events.count)
        let received = try changes.withUnsafeBufferPointer { changes throws(SystemError) in
            try events.withUnsafeMutableBufferPointer { events throws(SystemError) in
                // `&` cannot stand inside a conditional expression: the pointer is made first.
                try withUnsafePointer(to: timeout ?? timespec()) { limit throws(SystemError) in
                    try retryingInterrupts("kevent") {
                        kevent(
                            queue, changes.baseAddress, Int32(changes.count), events.baseAddress, capacity,
                            timeout == nil ? nil : limit)
                    }
                }
            }
        }
        return Int(received)
    }

    /// What kind of filesystem the open file or directory is on. The C function is `fstatfs`.
    static func filesystemKind(_ descriptor: Int32) throws(SystemError) -> FilesystemKind {
        var result = statfs()
        _ = try retryingInterrupts("fstatfs") { fstatfs(descriptor, &result) }
        let name = withUnsafeBytes(of: result.f_fstypename) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return FilesystemKind(darwinTypeName: name, isLocal: result.f_flags & UInt32(MNT_LOCAL) != 0)
    }
}
#endif
