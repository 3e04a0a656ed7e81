#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCachePlatform

extension DaemonLock {
    /// Who holds an exclusive flock on the file with `status`, as the kernel's lock table
    /// (`/proc/locks`) says: `.some(pid)` for the holder (0 when its process is not visible from
    /// this PID namespace), `.some(nil)` when the table shows only shared locks or none on a file
    /// of this device and inode, and `nil` when the table cannot be read.
    ///
    /// The table names the process that took the lock, so it is right even in the moment
    /// between a compactor's flock and the write of its PID into the file, and for a holder in
    /// another PID namespace. A filesystem whose inodes the table shows differently (overlayfs
    /// shows the lower file's) finds no entry; callers fall back to the PID file then.
    static func exclusiveHolder(of status: FileStatus) -> Int32?? {
        guard let table = try? readLockTable() else { return nil }
        // "MAJOR:MINOR:INODE", major and minor in hex as the kernel prints them (fs/locks.c).
        let device = status.device
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
        let minor = (device & 0xff) | ((device >> 12) & ~0xff)
        let file = hex2(major) + ":" + hex2(minor) + ":\(status.inode)"
        var found = false
        for line in table.split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:123456 0 EOF"; "1: -> FLOCK …" is a waiter.
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[5] == file else { continue }
            found = true
            if fields[3] == "WRITE" { return .some(Int32(fields[4]) ?? 0) }
        }
        return found ? .some(nil) : nil
    }

    private static func hex2(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }

    private static func readLockTable() throws(SystemError) -> String {
        let file = try FileDescriptor(path: "/proc/locks", flags: O_RDONLY)
        var bytes: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            let count = try file.readAvailable(into: chunk)
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
#endif
