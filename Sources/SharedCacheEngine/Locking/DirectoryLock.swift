#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
package import SharedCachePlatform

/// The exclusive flock on `<root>/lock`: whoever holds it may write the manifest, initialise
/// the directory, retire journal segments or compact. Readers and appenders never need it.
///
/// One descriptor per opened cache; threads of the process take turns through an in-process
/// mutex first, because flock alone cannot exclude two threads sharing one descriptor.
package final class DirectoryLock: Sendable {
    private let file: FileDescriptor
    private let threads = ThreadLock()
    private let path: String

    package init(in directory: CacheDirectory) throws {
        file = try directory.open(CacheDirectory.lockFile, flags: O_RDWR | O_CREAT | O_NONBLOCK)
        try directory.requireRegularFile(
            file, named: CacheDirectory.lockFile, role: "its directory lock", advice: "open the cache again")
        path = "\(directory.path)/\(CacheDirectory.lockFile)"
    }

    /// Runs `body` holding the lock, waiting at most `timeout` for another process to let go.
    package func withExclusiveLock<Result>(timeout: Duration, _ body: () throws -> Result) throws -> Result {
        try threads.withLock {
            try file.withLock(
                .exclusive, timeout: timeout,
                orThrow: SharedCacheError(
                    .lockTimeout,
                    "another process has held \(path) for more than \(timeout) (a checkpoint or compaction "
                        + "that hangs, or a stopped process); find it with `fuser \(path)` and end it or let it "
                        + "finish (a program may wait longer with Configuration.lockTimeout)",
                    path: path),
                body)
        }
    }
}
