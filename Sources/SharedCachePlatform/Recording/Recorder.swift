#if DEBUG
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A log of every mutating system call, for the power-loss checker (debug builds only):
/// `SHAREDCACHE_RECORD=/path/to/log` makes ``System`` append one line per successful
/// open-for-writing, write, `writev`, `ftruncate`, `mkdirat`, `unlinkat`, rename, link, `fsync`,
/// `fdatasync` and close-of-a-writable-descriptor, with absolute paths, inode numbers, resolved
/// offsets and the bytes written. Read once per process, like ``Failpoint``; unarmed, each hook
/// is one predictable branch, and release builds have none.
///
/// Each line is `pid TAB sequence TAB call TAB fields…`, appended with one `write(2)` to a file
/// opened with `O_APPEND`, so several processes may record into one log: their lines never
/// interleave, and lines of one inode, or written under one lock, are in the order the calls
/// were made. A write's offset is where its bytes landed, read back with `lseek` after the
/// call (exact for `O_APPEND`, whoever else appends). The workload driver adds its own lines
/// with ``note(_:)``: what the API acknowledged, which the checker compares the crash states with.
///
/// The log is written with the C functions directly, so recording never records itself.
package enum Recorder {
    private static let log: Int32? = {
        guard let path = getenv("SHAREDCACHE_RECORD").map({ String(cString: $0) }), !path.isEmpty else { return nil }
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        return descriptor >= 0 ? descriptor : nil
    }()
    /// This process's line counter; held while a line is written, so sequence order is file order.
    private static let sequence = Locked<UInt64>(0)

    static var isArmed: Bool { log != nil }

    /// Appends a line the workload writes itself: an acknowledgement, a step boundary.
    package static func note(_ text: String) {
        guard isArmed else { return }
        append("note", [text])
    }

    // MARK: Hooks, one per mutating call, made after it succeeded

    static func opened(_ descriptor: Int32, at directory: Int32, _ path: String, flags: Int32) {
        guard flags & O_CREAT != 0 || flags & O_ACCMODE != O_RDONLY else { return }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return }
        let fields = [absolute(path, at: directory), String(UInt64(status.st_ino)), String(flags, radix: 16)]
        append("open", fields + [String(status.st_size)])
    }

    static func closing(_ descriptor: Int32) {
        guard fcntl(descriptor, F_GETFL) & O_ACCMODE != O_RDONLY else { return }
        append("close", [inode(descriptor), path(of: descriptor)])
    }

    /// `count` bytes of `buffers` (in order) were just written at the descriptor's offset, or
    /// at `position` (a `pwrite`, which leaves the offset alone).
    static func wrote(
        _ descriptor: Int32, count: Int, _ buffers: [UnsafeRawBufferPointer], at position: Int64? = nil
    ) {
        guard count > 0 else { return }
        let end = position.map { $0 + Int64(count) } ?? Int64(lseek(descriptor, 0, SEEK_CUR))
        var hex: [UInt8] = []
        hex.reserveCapacity(count * 2)
        var remaining = count
        for buffer in buffers where remaining > 0 {
            for byte in buffer.prefix(remaining) {
                hex.append(hexDigits[Int(byte >> 4)])
                hex.append(hexDigits[Int(byte & 0xF)])
            }
            remaining -= min(remaining, buffer.count)
        }
        let offset = String(Int64(end) - Int64(count))
        append("write", [inode(descriptor), offset, String(decoding: hex, as: UTF8.self), path(of: descriptor)])
    }

    /// `count` bytes of the buffers `vectors` describes were just written.
    static func wrote(_ descriptor: Int32, count: Int, vectors: UnsafeBufferPointer<iovec>) {
        wrote(descriptor, count: count, vectors.map { UnsafeRawBufferPointer(start: $0.iov_base, count: $0.iov_len) })
    }

    static func truncated(_ descriptor: Int32, to length: Int64) {
        append("truncate", [inode(descriptor), String(length), path(of: descriptor)])
    }

    static func madeDirectory(at directory: Int32, _ path: String) {
        append("mkdir", [absolute(path, at: directory)])
    }

    static func removed(at directory: Int32, _ path: String, isDirectory: Bool) {
        append(isDirectory ? "rmdir" : "unlink", [absolute(path, at: directory)])
    }

    static func renamed(at directory: Int32, _ from: String, to: String, replacing: Bool) {
        append(replacing ? "rename" : "rename-noreplace", [absolute(from, at: directory), absolute(to, at: directory)])
    }

    static func linked(at directory: Int32, _ from: String, to: String) {
        append("link", [absolute(from, at: directory), absolute(to, at: directory)])
    }

    static func synchronized(_ descriptor: Int32, dataOnly: Bool) {
        var status = stat()
        let isDirectory = fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR
        let fields = [String(UInt64(status.st_ino)), path(of: descriptor), isDirectory ? "d" : "f"]
        append(dataOnly ? "fdatasync" : "fsync", fields)
    }

    // MARK: Writing lines

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func append(_ call: String, _ fields: [String]) {
        guard let log else { return }
        sequence.withLock { sequence in
            sequence += 1
            var line = "\(getpid())\t\(sequence)\t\(call)"
            for field in fields { line += "\t" + field }
            line += "\n"
            var bytes = Array(line.utf8)
            // One write(2) per line: with O_APPEND, lines of several processes never interleave.
            _ = bytes.withUnsafeMutableBytes { write(log, $0.baseAddress, $0.count) }
        }
    }

    private static func inode(_ descriptor: Int32) -> String {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? String(UInt64(status.st_ino)) : "?"
    }

    /// `path` made absolute: relative to the directory `directory` is open on, or to the
    /// working directory for `AT_FDCWD`.
    private static func absolute(_ path: String, at directory: Int32) -> String {
        if path.hasPrefix("/") { return path }
        let base: String
        if directory == AT_FDCWD {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            base =
                getcwd(&buffer, buffer.count) != nil
                ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        } else {
            base = self.path(of: directory)
        }
        return path == "." ? base : base + "/" + path
    }
}
#endif
