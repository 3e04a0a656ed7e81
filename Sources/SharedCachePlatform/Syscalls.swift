#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#else
#error("Unsupported platform")
#endif
import CSharedCacheSupport

// Every system call the cache makes goes through this file (and its +Linux / +Darwin halves),
// so the errno policy is written once and every call can be failed on purpose (Failpoint.swift):
//
// - EINTR is retried, except for close(2): after EINTR the descriptor is already gone on Linux
//   and may be on Darwin, and retrying could close a descriptor another thread just opened.
// - EBADF is a bug in this library, never a runtime condition, so it traps.
// - Every other errno is thrown as a `SystemError` for the layer above to explain.
//
// The calls take raw descriptors and stay inside this module: the layers above hold
// `FileDescriptor`s, whose methods call these.

/// Calls `body` until it does not fail with EINTR, and throws any other failure.
@inline(__always)
func retryingInterrupts<Result: FixedWidthInteger>(
    _ call: @autoclosure () -> String, path: @autoclosure () -> String? = nil, _ body: () -> Result
) throws(SystemError) -> Result {
    #if DEBUG
    if Failpoint.isArmed, let injected = Failpoint.error(call()) {
        throw SystemError(call(), errno: injected, path: path())
    }
    #endif
    while true {
        let result = body()
        if result != -1 { return result }
        let error = errno
        if error == EINTR { continue }
        precondition(error != EBADF, "SharedCache used a closed file descriptor in \(call())")
        throw SystemError(call(), errno: error, path: path())
    }
}

/// The raw system calls, named after what they do; each doc comment names the C function.
package enum System {
    /// Opens `path` relative to the directory `directory`. The C function is `openat`.
    static func open(
        at directory: Int32, _ path: String, flags: Int32, mode: mode_t = 0
    ) throws(SystemError) -> FileDescriptor {
        let raw = try retryingInterrupts("openat", path: path) { openat(directory, path, flags | O_CLOEXEC, mode) }
        #if DEBUG
        if Recorder.isArmed { Recorder.opened(raw, at: directory, path, flags: flags) }
        #endif
        return FileDescriptor(owning: raw)
    }

    /// Opens a path given as a NUL-terminated buffer, the allocation-free form the hot path uses.
    static func open(
        at directory: Int32, cString path: UnsafePointer<CChar>, flags: Int32, mode: mode_t = 0
    ) throws(SystemError) -> FileDescriptor {
        let raw = try retryingInterrupts("openat", path: String(cString: path)) {
            openat(directory, path, flags | O_CLOEXEC, mode)
        }
        #if DEBUG
        if Recorder.isArmed { Recorder.opened(raw, at: directory, String(cString: path), flags: flags) }
        #endif
        return FileDescriptor(owning: raw)
    }

    /// A descriptor of its own for an inherited one (standard input or output), closing on
    /// exec. The C function is `fcntl` with `F_DUPFD_CLOEXEC`.
    package static func duplicate(_ descriptor: Int32) throws(SystemError) -> FileDescriptor {
        FileDescriptor(
            owning: try retryingInterrupts("fcntl(F_DUPFD_CLOEXEC)") { fcntl(descriptor, F_DUPFD_CLOEXEC, 0) })
    }

    /// Closes a descriptor, never retrying. The C function is `close`.
    static func close(_ descriptor: Int32) {
        #if DEBUG
        if Recorder.isArmed { Recorder.closing(descriptor) }
        #endif
        let result = Glibc_or_Darwin_close(descriptor)
        precondition(result == 0 || errno != EBADF, "SharedCache closed a descriptor twice")
    }

    /// Reads up to `buffer.count` bytes at `offset`. The C function is `pread`.
    static func read(
        _ descriptor: Int32, fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer
    ) throws(SystemError) -> Int {
        try retryingInterrupts("pread") { pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Reads up to `first.count + second.count` bytes at `offset`, filling `first` before
    /// `second`. The C function is `preadv`.
    static func read(
        _ descriptor: Int32, fromAbsoluteOffset offset: Int64, into first: UnsafeMutableRawBufferPointer,
        then second: UnsafeMutableRawBufferPointer
    ) throws(SystemError) -> Int {
        var vectors = (
            iovec(iov_base: first.baseAddress, iov_len: first.count),
            iovec(iov_base: second.baseAddress, iov_len: second.count)
        )
        return try retryingInterrupts("preadv") {
            withUnsafePointer(to: &vectors) { pair in
                pair.withMemoryRebound(to: iovec.self, capacity: 2) { preadv(descriptor, $0, 2, off_t(offset)) }
            }
        }
    }

    /// Reads up to `buffer.count` bytes at the current offset. The C function is `read`.
    static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retryingInterrupts("read") { Glibc_or_Darwin_read(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// Writes up to `buffer.count` bytes at `offset`, leaving the file offset alone.
    /// The C function is `pwrite`.
    static func write(
        _ descriptor: Int32, _ buffer: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64
    ) throws(SystemError) -> Int {
        var count = buffer.count
        #if DEBUG
        if Failpoint.isArmed, let shortened = Failpoint.shortWrite("pwrite", requested: count) { count = shortened }
        #endif
        let written = try retryingInterrupts("pwrite") { pwrite(descriptor, buffer.baseAddress, count, off_t(offset)) }
        #if DEBUG
        if Recorder.isArmed { Recorder.wrote(descriptor, count: written, [buffer], at: offset) }
        #endif
        return written
    }

    /// Writes up to `buffer.count` bytes at the current offset (or at the end with `O_APPEND`).
    /// The C function is `write`.
    static func write(_ descriptor: Int32, _ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        var count = buffer.count
        #if DEBUG
        if Failpoint.isArmed, let shortened = Failpoint.shortWrite("write", requested: count) { count = shortened }
        #endif
        let written = try retryingInterrupts("write") { Glibc_or_Darwin_write(descriptor, buffer.baseAddress, count) }
        #if DEBUG
        if Recorder.isArmed { Recorder.wrote(descriptor, count: written, [buffer]) }
        #endif
        return written
    }

    /// Writes the buffers in order with one call. The C function is `writev`.
    static func write(_ descriptor: Int32, vectors: UnsafeBufferPointer<iovec>) throws(SystemError) -> Int {
        #if DEBUG
        // A short writev writes a prefix; half of the first buffer is one.
        if Failpoint.isArmed, let first = vectors.first,
            let shortened = Failpoint.shortWrite("writev", requested: first.iov_len)
        {
            let written = try retryingInterrupts("writev") {
                Glibc_or_Darwin_write(descriptor, first.iov_base, shortened)
            }
            if Recorder.isArmed { Recorder.wrote(descriptor, count: written, vectors: vectors) }
            return written
        }
        #endif
        let written = try retryingInterrupts("writev") { writev(descriptor, vectors.baseAddress, Int32(vectors.count)) }
        #if DEBUG
        if Recorder.isArmed { Recorder.wrote(descriptor, count: written, vectors: vectors) }
        #endif
        return written
    }

    /// Status of an open descriptor. The C function is `fstat`.
    static func status(_ descriptor: Int32) throws(SystemError) -> FileStatus {
        var raw = stat()
        _ = try retryingInterrupts("fstat") { fstat(descriptor, &raw) }
        return FileStatus(raw)
    }

    /// The open flag that spares a file's reads the access-time update (Linux `O_NOATIME`);
    /// 0 where there is none.
    package static let noAccessTimeFlag: Int32 = scs_no_access_time_flag()

    /// Whether this process's address space is limited (`ulimit -v`), read once. The C function
    /// is `getrlimit(RLIMIT_AS)`.
    static let addressSpaceIsLimited: Bool = {
        var limit = rlimit()
        #if canImport(Glibc)
        let result = getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
        let infinity = rlim_t.max  // RLIM_INFINITY, which Swift's Glibc cannot import
        #elseif canImport(Musl)
        let result = getrlimit(RLIMIT_AS, &limit)
        let infinity = rlim_t.max
        #else
        let result = getrlimit(RLIMIT_AS, &limit)
        let infinity = rlim_t(Int64.max)  // Darwin's RLIM_INFINITY, (1 << 63) - 1
        #endif
        return result == 0 && limit.rlim_cur != infinity
    }()

    /// Size and link count of an open descriptor, and nothing else: see
    /// ``FileDescriptor/sizeAndLinkCount()``. The C function is `statx` on Linux, else `fstat`.
    static func sizeAndLinkCount(_ descriptor: Int32) throws(SystemError) -> (size: Int64, linkCount: UInt64) {
        var size: Int64 = 0
        var links: UInt64 = 0
        #if os(Linux)
        let name = "statx"
        #else
        let name = "fstat"
        #endif
        _ = try retryingInterrupts(name) { scs_size_and_links(descriptor, &size, &links) }
        return (size, links)
    }

    /// Status of `path` without following a final symlink. The C function is `fstatat`.
    static func status(
        at directory: Int32, _ path: String, followingSymlinks: Bool = false
    ) throws(SystemError) -> FileStatus {
        var raw = stat()
        let flags = followingSymlinks ? 0 : AT_SYMLINK_NOFOLLOW
        _ = try retryingInterrupts("fstatat", path: path) { fstatat(directory, path, &raw, flags) }
        return FileStatus(raw)
    }

    /// Status of an absolute or working-directory-relative path. The C function is `fstatat`.
    package static func status(atPath path: String, followingSymlinks: Bool = false) throws(SystemError) -> FileStatus {
        try status(at: AT_FDCWD, path, followingSymlinks: followingSymlinks)
    }

    /// Truncates an open file to `length` bytes. The C function is `ftruncate`.
    static func truncate(_ descriptor: Int32, to length: Int64) throws(SystemError) {
        _ = try retryingInterrupts("ftruncate") { ftruncate(descriptor, off_t(length)) }
        #if DEBUG
        if Recorder.isArmed { Recorder.truncated(descriptor, to: length) }
        #endif
    }

    /// Applies or removes an advisory whole-file lock. The C function is `flock`.
    ///
    /// - Returns: `false` when `nonBlocking` and another open file description holds a
    ///   conflicting lock.
    static func flock(_ descriptor: Int32, operation: Int32, nonBlocking: Bool) throws(SystemError) -> Bool {
        do {
            _ = try retryingInterrupts("flock") {
                Glibc_or_Darwin_flock(descriptor, operation | (nonBlocking ? LOCK_NB : 0))
            }
            return true
        } catch {
            guard error.errno == EWOULDBLOCK else { throw error }
            return false
        }
    }

    /// Gives a file or directory this process owns exactly `mode` (a umask may have narrowed it
    /// at creation); one another user owns is theirs to set. The C functions are `fstat` and `fchmod`.
    static func setModeIfOwned(_ descriptor: Int32, _ mode: mode_t) throws(SystemError) {
        let current = try status(descriptor)
        guard current.owner == effectiveUserID(), current.permissions != UInt32(mode) else { return }
        _ = try retryingInterrupts("fchmod") { fchmod(descriptor, mode) }
    }

    /// Whether this process may write and search the directory. The C function is `faccessat`.
    static func canWriteAndSearch(_ directory: Int32) throws(SystemError) {
        _ = try retryingInterrupts("faccessat") { faccessat(directory, ".", W_OK | X_OK, 0) }
    }

    /// Creates a directory. The C function is `mkdirat`.
    static func makeDirectory(at directory: Int32, _ path: String, mode: mode_t) throws(SystemError) {
        _ = try retryingInterrupts("mkdirat", path: path) { mkdirat(directory, path, mode) }
        #if DEBUG
        if Recorder.isArmed { Recorder.madeDirectory(at: directory, path) }
        #endif
    }

    /// Creates a directory at an absolute or working-directory-relative path. The C function is `mkdirat`.
    package static func makeDirectory(atPath path: String, mode: UInt32) throws(SystemError) {
        try makeDirectory(at: AT_FDCWD, path, mode: mode_t(mode))
    }

    /// Removes a file, or an empty directory. The C function is `unlinkat`.
    static func remove(at directory: Int32, _ path: String, isDirectory: Bool = false) throws(SystemError) {
        _ = try retryingInterrupts("unlinkat", path: path) {
            unlinkat(directory, path, isDirectory ? AT_REMOVEDIR : 0)
        }
        #if DEBUG
        if Recorder.isArmed { Recorder.removed(at: directory, path, isDirectory: isDirectory) }
        #endif
    }

    /// Renames an absolute or working-directory-relative path, replacing any existing `to`.
    /// The C function is `renameat`.
    package static func rename(atPath from: String, to: String) throws(SystemError) {
        try rename(at: AT_FDCWD, from, to: to)
    }

    /// Where the symbolic link at an absolute or working-directory-relative path points, made
    /// absolute; `nil` when it is not a link. The C function is `readlink`.
    package static func linkTarget(atPath path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let target = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard !target.hasPrefix("/"), let slash = path.lastIndex(of: "/") else { return target }
        return "\(path[...slash])\(target)"
    }

    /// Removes a file at an absolute or working-directory-relative path. The C function is `unlinkat`.
    package static func remove(atPath path: String) throws(SystemError) {
        try remove(at: AT_FDCWD, path)
    }

    /// Renames `from` to `to`, failing with EEXIST rather than replacing an existing file: one
    /// atomic rename where the filesystem offers it (``renameExclusively(at:_:to:)``), else
    /// `linkat` + `unlinkat`, which give the same guarantee (a filesystem without the exclusive
    /// rename, some network, FAT and FUSE ones, says EINVAL, ENOSYS or ENOTSUP).
    static func renameWithoutReplacing(at directory: Int32, _ from: String, to: String) throws(SystemError) {
        do {
            try renameExclusively(at: directory, from, to: to)
            #if DEBUG
            if Recorder.isArmed { Recorder.renamed(at: directory, from, to: to, replacing: false) }
            #endif
        } catch {
            guard [EINVAL, ENOSYS, ENOTSUP].contains(error.errno) else { throw error }
            _ = try retryingInterrupts("linkat", path: to) { linkat(directory, from, directory, to, 0) }
            #if DEBUG
            if Recorder.isArmed { Recorder.linked(at: directory, from, to: to) }
            #endif
            try? remove(at: directory, from)
        }
    }

    /// Atomically renames, replacing any existing `to`. The C function is `renameat`.
    static func rename(at directory: Int32, _ from: String, to: String) throws(SystemError) {
        _ = try retryingInterrupts("renameat", path: to) { renameat(directory, from, directory, to) }
        #if DEBUG
        if Recorder.isArmed { Recorder.renamed(at: directory, from, to: to, replacing: true) }
        #endif
    }

    /// Calls `body` with the name and `d_type` of each entry of the directory at `path` but "."
    /// and "..". A failing `readdir` throws: a listing cut short must never pass for a whole one.
    /// The C functions are `fdopendir`, `readdir` and `closedir`.
    static func forEachEntry(
        at directory: Int32, _ path: String, _ body: (String, UInt8) throws(SystemError) -> Void
    ) throws(SystemError) {
        let descriptor = try open(at: directory, path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        // On failure the descriptor is still ours and closes; on success the stream owns it.
        guard let stream = fdopendir(descriptor.rawValue) else {
            throw SystemError("fdopendir", errno: errno, path: path)
        }
        _ = descriptor.relinquish()
        defer { closedir(stream) }
        while true {
            #if DEBUG
            if Failpoint.isArmed, let injected = Failpoint.error("readdir") {
                throw SystemError("readdir", errno: injected, path: path)
            }
            #endif
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw SystemError("readdir", errno: errno, path: path) }
                return
            }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { try body(name, entry.pointee.d_type) }
        }
    }

    /// Waits for one of `descriptors` to be ready, at most `milliseconds` (-1: forever).
    /// The C function is `poll`.
    ///
    /// - Returns: the number of descriptors ready; 0 when the time ran out.
    static func poll(_ descriptors: inout [pollfd], milliseconds: Int32) throws(SystemError) -> Int {
        let count = nfds_t(descriptors.count)
        return Int(try retryingInterrupts("poll") { Glibc_or_Darwin_poll(&descriptors, count, milliseconds) })
    }

    /// Maps `size` bytes of a file from `offset` (a multiple of the page size), readable, and
    /// writable unless `writable` is false: `shared` with every process that maps it (the pages
    /// are the file's, showing what any process writes to it, and writes reach the file); or
    /// privately, the pages the file's until written, a write copying the page for this process
    /// alone. The C function is `mmap` (`MAP_SHARED` or `MAP_PRIVATE`).
    static func map(_ descriptor: Int32, offset: Int64 = 0, size: Int, shared: Bool, writable: Bool = true)
        throws(SystemError) -> UnsafeMutableRawPointer
    {
        #if DEBUG
        if Failpoint.isArmed, let injected = Failpoint.error("mmap") { throw SystemError("mmap", errno: injected) }
        #endif
        let protection = writable ? PROT_READ | PROT_WRITE : PROT_READ
        let flags = shared ? MAP_SHARED : MAP_PRIVATE
        guard let mapped = mmap(nil, size, protection, flags, descriptor, off_t(offset)), mapped != MAP_FAILED
        else { throw SystemError("mmap", errno: errno) }
        return mapped
    }

    /// Unmaps what ``map(_:offset:size:shared:writable:)`` mapped. The C function is `munmap`;
    /// it fails only for arguments that were never mapped, a bug.
    static func unmap(_ address: UnsafeMutableRawPointer, size: Int) {
        let result = munmap(address, size)
        precondition(result == 0, "SharedCache unmapped memory it had not mapped")
    }

    /// The descriptor's file offset. The C function is `lseek` with `SEEK_CUR`.
    static func currentOffset(_ descriptor: Int32) throws(SystemError) -> Int64 {
        Int64(try retryingInterrupts("lseek") { lseek(descriptor, 0, SEEK_CUR) })
    }

    /// The start of the first byte of data at or after `offset`, skipping a hole of a sparse
    /// file; `nil` when only a hole follows up to the end. A filesystem that cannot tell
    /// reports no holes. The C function is `lseek` with `SEEK_DATA`.
    static func nextData(_ descriptor: Int32, from offset: Int64) throws(SystemError) -> Int64? {
        #if os(Linux)
        let seekData: Int32 = 3  // not imported from <unistd.h> without _GNU_SOURCE
        #else
        let seekData = SEEK_DATA
        #endif
        do {
            return Int64(try retryingInterrupts("lseek") { lseek(descriptor, off_t(offset), seekData) })
        } catch {
            switch error.errno {
            case ENXIO: return nil
            case EINVAL: return offset
            default: throw error
            }
        }
    }

    /// Whether a process with this ID exists (another user's counts). The C function is `kill`
    /// with signal 0.
    package static func processExists(_ processID: Int32) -> Bool {
        processID > 0 && (kill(processID, 0) == 0 || errno == EPERM)
    }

    /// The calling process's ID. The C function is `getpid`.
    package static var processID: Int32 { getpid() }

    /// The user the process acts as. The C function is `geteuid`.
    package static func effectiveUserID() -> UInt32 { UInt32(geteuid()) }

    /// Whether the process acts with the rights of group `group`: its effective group or one of
    /// its supplementary groups. The C functions are `getegid` and `getgroups`.
    package static func isMember(ofGroup group: UInt32) -> Bool {
        if UInt32(getegid()) == group { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = getgroups(count, &groups)
        return groups.prefix(Swift.max(0, Int(filled))).contains { UInt32($0) == group }
    }
}

// The unqualified names `close`, `read`, `write`, `flock` and `poll` inside `enum System` would
// refer to the static members; these aliases reach the C functions.
@inline(__always) private func Glibc_or_Darwin_close(_ fd: Int32) -> Int32 { close(fd) }
@inline(__always) private func Glibc_or_Darwin_read(_ fd: Int32, _ p: UnsafeMutableRawPointer?, _ n: Int) -> Int {
    read(fd, p, n)
}
@inline(__always) private func Glibc_or_Darwin_write(_ fd: Int32, _ p: UnsafeRawPointer?, _ n: Int) -> Int {
    write(fd, p, n)
}
@inline(__always) private func Glibc_or_Darwin_flock(_ fd: Int32, _ operation: Int32) -> Int32 {
    flock(fd, operation)
}
@inline(__always) private func Glibc_or_Darwin_poll(_ fds: UnsafeMutablePointer<pollfd>, _ n: nfds_t, _ ms: Int32)
    -> Int32
{
    poll(fds, n, ms)
}

/// The two ends of a pipe.
struct PipeEnds: ~Copyable {
    var read: FileDescriptor
    var write: FileDescriptor
}

/// The parts of `stat` the cache looks at.
package struct FileStatus: Sendable, Equatable {
    package var size: Int64
    package var mode: UInt32
    package var linkCount: UInt64
    package var owner: UInt32
    package var group: UInt32
    package var device: UInt64
    package var inode: UInt64
    /// Last modification, in milliseconds since the Unix epoch.
    package var modifiedMilliseconds: Int64

    package var isRegularFile: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFREG) }
    package var isDirectory: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFDIR) }
    package var isSymbolicLink: Bool { mode & UInt32(S_IFMT) == UInt32(S_IFLNK) }
    package var permissions: UInt32 { mode & 0o7777 }
    /// What kind of file this is, in words, for messages: "a directory", "a FIFO", ….
    package var kindDescription: String {
        switch mode & UInt32(S_IFMT) {
        case UInt32(S_IFREG): "a regular file"
        case UInt32(S_IFDIR): "a directory"
        case UInt32(S_IFLNK): "a symbolic link"
        case UInt32(S_IFIFO): "a FIFO"
        case UInt32(S_IFSOCK): "a socket"
        case UInt32(S_IFCHR): "a character device"
        case UInt32(S_IFBLK): "a block device"
        default: "a file of unknown kind"
        }
    }
}
