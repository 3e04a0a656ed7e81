#if canImport(Darwin)
package import Darwin
#elseif canImport(Glibc)
package import Glibc
#elseif canImport(Musl)
package import Musl
#endif

/// An open file descriptor with exactly one owner, from the `open` that made it to its close.
///
/// Only this module makes one (the raw number never leaves it), so every descriptor the cache
/// holds is one of these. It is closed by ``close()`` or, failing that, when the value is
/// destroyed; being `~Copyable`, it cannot be closed twice or used after close. Long-lived
/// descriptors (a journal segment, a lock file) live in a class that owns one of these;
/// short-lived ones (a blob being read) live on the stack.
package struct FileDescriptor: ~Copyable, Sendable {
    /// The raw descriptor number, valid until this value is consumed.
    let rawValue: Int32

    /// Takes ownership of a descriptor a system call just returned.
    init(owning rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// Opens `path` relative to `directory`; `O_CLOEXEC` is always added.
    package init(at directory: borrowing FileDescriptor, _ path: String, flags: Int32, mode: mode_t = 0)
        throws(SystemError)
    {
        self = try System.open(at: directory.rawValue, path, flags: flags, mode: mode)
    }

    /// Opens an absolute or working-directory-relative path; `O_CLOEXEC` is always added.
    package init(path: String, flags: Int32, mode: mode_t = 0) throws(SystemError) {
        self = try System.open(at: AT_FDCWD, path, flags: flags, mode: mode)
    }

    deinit { System.close(rawValue) }

    /// Closes the descriptor now. The C function is `close`.
    package consuming func close() {
        let raw = rawValue
        discard self
        System.close(raw)
    }

    /// File status. The C function is `fstat`.
    package func status() throws(SystemError) -> FileStatus {
        try System.status(rawValue)
    }

    /// The file's size and link count, for a reader that only asks whether a file grew or was
    /// deleted, on every cache call.
    ///
    /// Not ``status()``: `fstat` reports the file's times too, and on Linux 6.13 and later a
    /// file whose change time was read gets a fine-grained time stamp at its next write, which
    /// dirties its inode in the filesystem's journal even when the coarse clock has not ticked
    /// since the last write. Measured in C on ext4, appends in a loop each preceded by an
    /// `fstat` of the journal made a put's system calls cost 5.3 µs instead of 3.8 µs.
    package func sizeAndLinkCount() throws(SystemError) -> (size: Int64, linkCount: UInt64) {
        try System.sizeAndLinkCount(rawValue)
    }

    /// Reads until `buffer` is full or the file ends, starting at `offset`.
    ///
    /// - Returns: The number of bytes read; less than `buffer.count` only at end of file.
    package func read(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer)
        throws(SystemError) -> Int
    {
        var total = 0
        while total < buffer.count {
            let count = try System.read(
                rawValue, fromAbsoluteOffset: offset + Int64(total),
                into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
            if count == 0 { break }
            total += count
        }
        return total
    }

    /// Reads into `first` and then `second` until both are full or the file ends, starting at
    /// `offset`: one system call for a whole record whose parts belong in different places.
    ///
    /// - Returns: The number of bytes read; less than both counts together only at end of file.
    package func read(
        fromAbsoluteOffset offset: Int64, into first: UnsafeMutableRawBufferPointer,
        then second: UnsafeMutableRawBufferPointer
    ) throws(SystemError) -> Int {
        let count = try System.read(rawValue, fromAbsoluteOffset: offset, into: first, then: second)
        guard count > 0, count < first.count + second.count else { return count }
        // Cut short, by the end of the file or a signal: go on one buffer at a time.
        guard count < first.count else {
            let rest = UnsafeMutableRawBufferPointer(rebasing: second[(count - first.count)...])
            return count + (try read(fromAbsoluteOffset: offset + Int64(count), into: rest))
        }
        let rest = UnsafeMutableRawBufferPointer(rebasing: first[count...])
        let filled = count + (try read(fromAbsoluteOffset: offset + Int64(count), into: rest))
        guard filled == first.count else { return filled }
        return filled + (try read(fromAbsoluteOffset: offset + Int64(filled), into: second))
    }

    /// Reads at most `buffer.count` bytes at `offset` with a single `pread`: for a regular file,
    /// fewer only at its end, or if a signal cut the call short (the caller checks which).
    package func readOnce(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer)
        throws(SystemError) -> Int
    {
        try System.read(rawValue, fromAbsoluteOffset: offset, into: buffer)
    }

    /// Reads what is available at the current offset, at most `buffer.count` bytes: for pipes,
    /// event queues and streams. The C function is `read`.
    ///
    /// - Returns: the number of bytes read; 0 at end of file.
    package func readAvailable(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try System.read(rawValue, into: buffer)
    }

    /// Writes all of `buffer`, continuing after short writes.
    ///
    /// This either writes every byte or throws; bytes written before the failure stay written.
    package func writeAll(_ buffer: UnsafeRawBufferPointer) throws(SystemError) {
        var written = 0
        while written < buffer.count {
            written += try System.write(rawValue, UnsafeRawBufferPointer(rebasing: buffer[written...]))
        }
    }

    /// Writes all of `parts` in order, with one `writev(2)` when the kernel takes them whole.
    package func writeAll(_ parts: [UnsafeRawBufferPointer]) throws(SystemError) {
        var remaining = parts.filter { $0.count > 0 }
        while !remaining.isEmpty {
            let vectors = remaining.map {
                iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
            }
            var written = try vectors.withUnsafeBufferPointer { vectors throws(SystemError) in
                try System.write(rawValue, vectors: vectors)
            }
            // Drop what was written, continuing after a short write.
            while written > 0, let first = remaining.first {
                if written >= first.count {
                    written -= first.count
                    remaining.removeFirst()
                } else {
                    remaining[0] = UnsafeRawBufferPointer(rebasing: first[written...])
                    written = 0
                }
            }
        }
    }

    /// Writes all of `buffer` at `offset`, continuing after short writes, leaving the file
    /// offset alone. The C function is `pwrite`.
    package func writeAll(_ buffer: UnsafeRawBufferPointer, atAbsoluteOffset offset: Int64) throws(SystemError) {
        var written = 0
        while written < buffer.count {
            written += try System.write(
                rawValue, UnsafeRawBufferPointer(rebasing: buffer[written...]),
                toAbsoluteOffset: offset + Int64(written))
        }
    }

    /// Where the next data at or after `offset` starts, skipping a hole of a sparse file; `nil`
    /// when only a hole follows up to the end. The C function is `lseek` with `SEEK_DATA`.
    package func nextData(from offset: Int64) throws(SystemError) -> Int64? {
        try System.nextData(rawValue, from: offset)
    }

    /// Writes `buffer` with a single `write(2)`, as an `O_APPEND` record must be written.
    ///
    /// - Returns: The number of bytes written, which the caller must compare with the size.
    package func writeOnce(_ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try System.write(rawValue, buffer)
    }

    /// The descriptor's file offset: after a `write(2)` with `O_APPEND`, where what it wrote
    /// ends. The C function is `lseek` with `SEEK_CUR`.
    package func currentOffset() throws(SystemError) -> Int64 {
        try System.currentOffset(rawValue)
    }

    /// Truncates the file to `length` bytes. The C function is `ftruncate`.
    package func truncate(to length: Int64) throws(SystemError) {
        try System.truncate(rawValue, to: length)
    }

    /// Flushes the file's data to the device (`fdatasync`, or `F_FULLFSYNC` on Darwin).
    package func synchronizeData() throws(SystemError) {
        try System.synchronizeData(rawValue)
    }

    /// Flushes the file or directory including its metadata (`fsync`, or `F_FULLFSYNC`).
    package func synchronize() throws(SystemError) {
        try System.synchronize(rawValue)
    }

    /// Status of `name` inside this directory, not following a final symbolic link; `nil` when
    /// there is no such entry. The C function is `fstatat`.
    package func status(of name: String) throws(SystemError) -> FileStatus? {
        do {
            return try System.status(at: rawValue, name)
        } catch {
            guard error.errno == ENOENT else { throw error }
            return nil
        }
    }

    /// Gives the file exactly `mode` if this process's user owns it. The C function is `fchmod`.
    package func setModeIfOwned(_ mode: mode_t) throws(SystemError) {
        try System.setModeIfOwned(rawValue, mode)
    }

    /// Throws unless this process may create files in this directory. The C function is `faccessat`.
    package func checkWriteAndSearchAccess() throws(SystemError) {
        try System.canWriteAndSearch(rawValue)
    }

    /// What kind of filesystem the file is on. The C function is `fstatfs`.
    package func filesystemKind() throws(SystemError) -> FilesystemKind {
        try System.filesystemKind(rawValue)
    }

    /// Names of the entries of the directory at `path` (relative to this directory), without
    /// "." and "..". Throws if the listing cannot be read whole.
    package func entries(of path: String) throws(SystemError) -> [String] {
        var names: [String] = []
        try System.forEachEntry(at: rawValue, path) { name, _ in names.append(name) }
        return names
    }

    /// Names of the symbolic links in the directory at `path`, read with one pass of `readdir`
    /// (and `fstatat` where the filesystem does not report entry types).
    package func symbolicLinks(in path: String) throws(SystemError) -> [String] {
        var links: [String] = []
        try System.forEachEntry(at: rawValue, path) { name, type throws(SystemError) in
            if type == UInt8(DT_LNK) {
                links.append(name)
            } else if type == UInt8(DT_UNKNOWN), try System.status(at: rawValue, "\(path)/\(name)").isSymbolicLink {
                links.append(name)
            }
        }
        return links
    }

    /// Gives up ownership without closing: for a C API that takes the descriptor over
    /// (`fdopendir`, whose `closedir` closes it).
    consuming func relinquish() -> Int32 {
        let raw = rawValue
        discard self
        return raw
    }
}
