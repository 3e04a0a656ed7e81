#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The exclusive flock on `<root>/daemon` that makes a compactor the only one.
///
/// The holder writes its process ID into the file, so a second compactor can say who holds it.
/// The lock dies with its process, so a crashed compactor never blocks the next one.
final class DaemonLock: Sendable {
    private let file: FileDescriptor

    /// Takes the lock without waiting.
    ///
    /// - Throws: `.busy`, naming the holder's process ID, when another compactor holds it.
    init(in directory: CacheDirectory) throws {
        file = try directory.open(CacheDirectory.daemonFile, flags: O_RDWR | O_CREAT | O_NONBLOCK)
        let status = try file.status()
        guard status.isRegularFile else {
            throw directory.foreignFile(
                CacheDirectory.daemonFile, status, role: "the compactor's lock file",
                advice: "start the compactor again (it makes a new one)")
        }
        guard try FileLock.tryLock(file, .exclusive) else {
            let holder = Self.processID(in: file).map { "process \($0)" } ?? "another process"
            throw SharedCacheError(
                .busy,
                "\(holder) is already compacting \(directory.path) (it holds \(directory.path)/daemon); "
                    + "only one compactor runs per directory, so let that one work or stop it first",
                path: "\(directory.path)/\(CacheDirectory.daemonFile)")
        }
        try file.truncate(to: 0)
        let text = Array("\(UniqueNames.processID)\n".utf8)
        _ = try text.withUnsafeBytes { try System.write(file.rawValue, $0) }
    }

    /// The process ID of the compactor holding the lock, or `nil` when none does.
    static func holder(in directory: CacheDirectory) throws -> Int32? {
        guard let raw = try directory.openIfPresent(CacheDirectory.daemonFile, flags: O_RDONLY | O_NONBLOCK) else {
            return nil
        }
        let file = FileDescriptor(rawValue: raw)
        if try FileLock.tryLock(file, .shared) {
            FileLock.unlock(file)
            return nil
        }
        return processID(in: file) ?? 0
    }

    private static func processID(in file: borrowing FileDescriptor) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = (try? bytes.withUnsafeMutableBytes { try file.read(fromAbsoluteOffset: 0, into: $0) }) ?? 0
        let digits = bytes[..<count].prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return Int32(String(decoding: digits, as: UTF8.self))
    }
}
