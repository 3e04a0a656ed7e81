#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
package import SharedCachePlatform

/// The exclusive flock on `<root>/daemon` that makes a compactor the only one.
///
/// The holder writes its process ID into the file, so a second compactor can say who holds it.
/// The lock dies with its process, so a crashed compactor never blocks the next one.
package final class DaemonLock: Sendable {
    private let file: FileDescriptor

    /// Takes the lock, waiting at most ``checkerWait`` (see there).
    ///
    /// - Throws: `.busy`, naming the holder's process ID, when another compactor holds it.
    package init(in directory: CacheDirectory) throws {
        file = try directory.open(CacheDirectory.daemonFile, flags: O_RDWR | O_CREAT | O_NONBLOCK)
        try directory.requireRegularFile(
            file, named: CacheDirectory.daemonFile, role: "the compactor's lock file",
            advice: "start the compactor again (it makes a new one)")
        // A process checking whether a compactor runs holds a shared lock for an instant; wait
        // that out rather than take it for a compactor. A real one holds it for its lifetime.
        guard try file.lock(.exclusive, timeout: Self.checkerWait) else {
            let holder = (try Self.holder(of: file)).flatMap { $0 > 0 ? "process \($0)" : nil } ?? "another process"
            throw SharedCacheError(
                .busy,
                "\(holder) is already compacting \(directory.path) (it holds \(directory.path)/daemon); "
                    + "only one compactor runs per directory, so let that one work or stop it first",
                path: "\(directory.path)/\(CacheDirectory.daemonFile)")
        }
        // The PID is a witness for where the kernel's lock table cannot be read; the lock is what
        // counts. So a full disk, which refuses the write, must not stop a compactor: eviction
        // is what frees the space.
        try? file.truncate(to: 0)
        let text = Array("\(UniqueNames.processID)\n".utf8)
        _ = try? text.withUnsafeBytes { try file.writeOnce($0) }
    }

    /// How long a starting compactor waits for the lock before saying who holds it.
    static let checkerWait = Duration.milliseconds(200)

    /// The process ID of the compactor holding the lock, or `nil` when none does.
    package static func holder(in directory: CacheDirectory) throws -> Int32? {
        guard let file = try directory.openIfPresent(CacheDirectory.daemonFile, flags: O_RDONLY | O_NONBLOCK) else {
            return nil
        }
        return try holder(of: file)
    }

    /// Who holds the lock on `file`: `nil` for nobody, 0 for a process that cannot be named.
    ///
    /// The PID the holder writes into the file is a witness only while it is held by that
    /// process: in the moment between a compactor's flock and its write, or after a holder
    /// that died before writing, it names an earlier compactor. So the kernel's lock table is
    /// asked first (Linux); the file's PID is believed only when that process still exists.
    private static func holder(of file: borrowing FileDescriptor) throws -> Int32? {
        if case .some(let holder) = exclusiveHolder(of: try file.status()) { return holder }
        return try writtenHolder(of: file)
    }

    /// The fallback where the lock table does not say: whether the lock is held (a shared lock
    /// taken and dropped at once), and the PID in the file if that process exists.
    static func writtenHolder(of file: borrowing FileDescriptor) throws -> Int32? {
        if try file.tryLock(.shared) {
            file.unlock()
            return nil
        }
        guard let written = processID(in: file), System.processExists(written) else { return 0 }
        return written
    }

    private static func processID(in file: borrowing FileDescriptor) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = (try? bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }) ?? 0
        let digits = bytes[..<count].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return Int32(String(decoding: digits, as: UTF8.self))
    }
}
