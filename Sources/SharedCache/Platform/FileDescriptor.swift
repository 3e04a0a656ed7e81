#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open file descriptor with exactly one owner.
///
/// The descriptor is closed when its owner is done with it: by ``close()`` or, failing that,
/// when the value is destroyed. It is `~Copyable`, so it cannot be closed twice or used after
/// close. Long-lived descriptors (the journal segment, the lock file) live in a class that owns
/// one of these; short-lived ones (a blob being read) live on the stack.
struct FileDescriptor: ~Copyable, Sendable {
    /// The raw descriptor number, valid until this value is consumed.
    let rawValue: Int32

    init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// Opens `path` relative to `directory`; `O_CLOEXEC` is always added.
    init(at directory: borrowing FileDescriptor, _ path: String, flags: Int32, mode: mode_t = 0)
        throws(SystemError)
    {
        rawValue = try System.open(at: directory.rawValue, path, flags: flags, mode: mode)
    }

    /// Opens an absolute or working-directory-relative path; `O_CLOEXEC` is always added.
    init(path: String, flags: Int32, mode: mode_t = 0) throws(SystemError) {
        rawValue = try System.open(at: AT_FDCWD, path, flags: flags, mode: mode)
    }

    deinit { System.close(rawValue) }

    /// Closes the descriptor now. The C function is `close`.
    consuming func close() {
        let raw = rawValue
        discard self
        System.close(raw)
    }

    /// File status. The C function is `fstat`.
    func status() throws(SystemError) -> FileStatus {
        try System.status(rawValue)
    }

    /// Reads until `buffer` is full or the file ends, starting at `offset`.
    ///
    /// - Returns: The number of bytes read; less than `buffer.count` only at end of file.
    func read(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
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

    /// Writes all of `buffer`, continuing after short writes.
    ///
    /// This either writes every byte or throws; bytes written before the failure stay written.
    func writeAll(_ buffer: UnsafeRawBufferPointer) throws(SystemError) {
        var written = 0
        while written < buffer.count {
            written += try System.write(rawValue, UnsafeRawBufferPointer(rebasing: buffer[written...]))
        }
    }

    /// Writes all of `parts` in order, with one `writev(2)` when the kernel takes them whole.
    func writeAll(_ parts: [UnsafeRawBufferPointer]) throws(SystemError) {
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

    /// Writes `buffer` with a single `write(2)`, as an `O_APPEND` record must be written.
    ///
    /// - Returns: The number of bytes written, which the caller must compare with the size.
    func writeOnce(_ buffer: UnsafeRawBufferPointer) throws(SystemError) -> Int {
        try System.write(rawValue, buffer)
    }

    /// Truncates the file to `length` bytes. The C function is `ftruncate`.
    func truncate(to length: Int64) throws(SystemError) {
        try System.truncate(rawValue, to: length)
    }

    /// Flushes the file's data to the device (`fdatasync`, or `F_FULLFSYNC` on Darwin).
    func synchronizeData() throws(SystemError) {
        try System.synchronizeData(rawValue)
    }

    /// Flushes the file or directory including its metadata (`fsync`, or `F_FULLFSYNC`).
    func synchronize() throws(SystemError) {
        try System.synchronize(rawValue)
    }
}
