#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One network fetch per URL at a time, across every process and task: an exclusive flock(2)
/// on `fetching/<hash>` while the request is in flight.
///
/// The file stays when the fetch is done (creating and unlinking an inode per request costs
/// more than the rest of a revalidation); checkpoints delete those more than an hour old. A
/// waiter that gets the lock on a file the sweep has just unlinked sees that the path now names
/// another file (or none) and starts over. Waiting polls with async sleeps, so no thread
/// blocks; a holder killed mid-fetch releases the lock with its descriptor.
final class FetchLock {
    static let directoryName = "fetching"

    private let directory: CacheDirectory
    private let name: String
    private let file: FileDescriptor

    private init(directory: CacheDirectory, name: String, file: consuming FileDescriptor) {
        self.directory = directory
        self.name = name
        self.file = file
    }

    /// Takes the lock for `hash`, waiting at most `timeout` for another fetch of it.
    ///
    /// - Returns: the lock, or `nil` if another fetch still held it after `timeout` (a holder
    ///   that is hung, stopped or slow: the caller goes to the network without it rather than
    ///   fail); and whether another fetch held it first (so its result may be in the cache now).
    static func acquire(_ hash: KeyHash, in directory: CacheDirectory, timeout: Duration, describing url: String)
        async throws -> (FetchLock?, waited: Bool)
    {
        let name = "\(directoryName)/\(hash.hex)"
        let deadline = Clock.monotonicNanoseconds() + timeout.nanoseconds
        var waited = false
        var pause: UInt64 = 1_000_000
        while true {
            let file = FileDescriptor(rawValue: try open(name, in: directory))
            while true {
                if try FileLock.tryLock(file, .exclusive) { break }
                waited = true
                guard Clock.monotonicNanoseconds() < deadline else { return (nil, waited) }
                try await Task.sleep(nanoseconds: pause)
                pause = min(pause * 2, 20_000_000)
            }
            // Locked; but the previous holder may have unlinked this file before we got it.
            let current = try directory.status(of: name)
            if let current, current.inode == (try file.status()).inode {
                return (FetchLock(directory: directory, name: name, file: file), waited)
            }
        }
    }

    private static func open(_ name: String, in directory: CacheDirectory) throws -> Int32 {
        let flags = O_RDWR | O_CREAT
        do {
            return try directory.openDescriptor(name, flags: flags)
        } catch {
            // A directory made before fetching existed, or whose `fetching/` was removed by hand.
            guard error.errno == ENOENT else { throw error }
            try directory.makeDirectory(directoryName)
            return try directory.openDescriptor(name, flags: flags)
        }
    }

    /// Lets the next fetch of the URL go.
    func release() {
        FileLock.unlock(file)
    }

    /// Deletes the files in `fetching/` created before `cutoff` that nobody holds right now.
    /// Safe at any moment: a fetch that opened one of them finds it unlinked and starts over,
    /// and the next fetch of its URL makes a new one.
    static func sweep(in directory: CacheDirectory, olderThan cutoff: Int64) throws -> Int {
        guard directory.isDirectory(directoryName) else { return 0 }
        var swept = 0
        for entry in try directory.contents(of: directoryName) {
            let name = "\(directoryName)/\(entry)"
            guard let status = try directory.status(of: name), status.modifiedMilliseconds < cutoff,
                status.isRegularFile, let raw = try directory.openIfPresent(name, flags: O_RDWR, linkIsAbsence: true)
            else { continue }
            let file = FileDescriptor(rawValue: raw)
            guard try FileLock.tryLock(file, .exclusive) else { continue }
            try directory.removeFile(name)
            swept += 1
        }
        return swept
    }
}

extension Duration {
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000)
    }
}
