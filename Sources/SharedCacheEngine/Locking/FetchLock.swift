#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Foundation
package import SharedCacheFormat
package import SharedCachePlatform

/// One network fetch per URL at a time, across every process and task: an exclusive flock(2)
/// on `fetching/<hash>` while the request is in flight (taken through ``FetchLocks``).
///
/// The file stays when the fetch is done (creating and unlinking an inode per request costs
/// more than the rest of a revalidation); checkpoints delete those more than an hour old. A
/// waiter that gets the lock on a file the sweep has just unlinked sees that the path now names
/// another file (or none) and starts over. Waiting polls with async sleeps, so no thread
/// blocks; a holder killed mid-fetch releases the lock with its descriptor.
///
/// A holder shows it is alive: every second while it holds the lock it changes the file's size
/// between 0 and 1 byte, which moves its modification time. A waiter that sees no such sign for
/// `stalledAfter` (the holder is stopped or hung) stops waiting, as it does after `timeout`.
///
/// Its holder releases it once, and does not use it after: the released lock, its file still
/// open, may already be the next fetch's. Until then the heartbeat thread shares it: the
/// descriptor is only locked, truncated and unlocked.
package final class FetchLock: @unchecked Sendable {
    package static let directoryName = CacheDirectory.fetchingDirectory
    /// How often a holder shows it is alive.
    static let heartbeat: Duration = .seconds(1)

    fileprivate let name: String
    fileprivate let file: FileDescriptor
    /// The inode the descriptor was opened on: the path names it until a sweep unlinks it.
    fileprivate let inode: UInt64
    /// Where the lock goes when released; gone with its cache.
    private weak var pool: FetchLocks?

    fileprivate init(name: String, file: consuming FileDescriptor, pool: FetchLocks) throws {
        inode = try file.status().inode
        self.name = name
        self.file = file
        self.pool = pool
    }

    /// Moves the file's modification time by changing its size (one `ftruncate` of a one-byte
    /// file: microseconds, like a journal append; a size change updates the time everywhere).
    fileprivate func beat() {
        guard let size = try? file.status().size else { return }
        try? file.truncate(to: size == 0 ? 1 : 0)
    }

    /// Stops the heartbeat and lets the next fetch of the URL go.
    package func release() {
        Heartbeats.shared.remove(self)
        file.unlock()
        pool?.keep(self)
    }

    /// Deletes the files in `fetching/` created before `cutoff` that nobody holds right now.
    /// Safe at any moment: a fetch that opened one of them finds it unlinked and starts over,
    /// and the next fetch of its URL makes a new one.
    package static func sweep(in directory: CacheDirectory, olderThan cutoff: Int64) throws -> Int {
        guard directory.isDirectory(directoryName) else { return 0 }
        var swept = 0
        for entry in try directory.contents(of: directoryName) {
            let name = "\(directoryName)/\(entry)"
            guard let status = try directory.status(of: name), status.modifiedMilliseconds < cutoff,
                status.isRegularFile, let file = try directory.openIfPresent(name, flags: O_RDWR, linkIsAbsence: true)
            else { continue }
            guard try file.tryLock(.exclusive) else { continue }
            try directory.removeFile(name)
            swept += 1
        }
        return swept
    }
}

/// A cache's fetch locks (see ``FetchLock``): takes them, and keeps the files of those released
/// open for the next fetch of the same URL, as opening a lock file (a walk of its path) and
/// closing it again were a third of the cost of taking the lock. Each acquisition checks that
/// the path still names the file, so one a sweep has unlinked meanwhile is closed and opened
/// anew. A few at most, so that a process fetching many URLs keeps few descriptors; they close
/// with the cache.
package final class FetchLocks: Sendable {
    static let idleLimit = 16

    #if DEBUG
    /// `SHAREDCACHE_TEST_SAY_WHEN_WAITING` (debug builds only): a fetch that finds its URL's
    /// lock taken says "waiting" on standard error, once.
    static let saysWhenWaiting = ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_SAY_WHEN_WAITING"] != nil
    #endif

    private let directory: CacheDirectory
    private let idle = Locked<[FetchLock]>([])

    package init(directory: CacheDirectory) {
        self.directory = directory
    }

    /// Takes the lock for `hash`, waiting at most `timeout` for another fetch of it, and at most
    /// `stalledAfter` without a sign of life from the holder.
    ///
    /// - Returns: the lock, or `nil` if another fetch still held it after `timeout`, or showed
    ///   no sign of life for `stalledAfter` (a holder that is slow, stopped or hung: the caller
    ///   goes to the network without it rather than fail); and whether another fetch held it
    ///   first (so its result may be in the cache now).
    package func acquire(
        _ hash: KeyHash, timeout: Duration, stalledAfter: Duration = .seconds(5), describing url: String
    ) async throws -> (FetchLock?, waited: Bool) {
        let name = "\(FetchLock.directoryName)/\(hash.hex)"
        let start = Clock.monotonicNanoseconds()
        let deadline = start + timeout.nanoseconds
        let stall = Int64(clamping: stalledAfter.nanoseconds / 1_000_000)
        var waited = false
        var pause: UInt64 = 1_000_000
        while true {
            let lock = try take(name) ?? FetchLock(name: name, file: try open(name), pool: self)
            while true {
                if try lock.file.tryLock(.exclusive) { break }
                #if DEBUG
                // Tests wait for this before they let the holder go on.
                if !waited, Self.saysWhenWaiting { FileHandle.standardError.write(Data("waiting\n".utf8)) }
                #endif
                waited = true
                let now = Clock.monotonicNanoseconds()
                guard now < deadline else { return (nil, waited) }
                if now - start >= stalledAfter.nanoseconds, let status = try directory.status(of: name),
                    Clock.nowMilliseconds() - status.modifiedMilliseconds > stall
                {
                    return (nil, waited)
                }
                try await Task.sleep(nanoseconds: pause)
                pause = min(pause * 2, 20_000_000)
            }
            // Locked; but the previous holder may have unlinked this file before we got it.
            let current = try directory.status(of: name)
            if let current, current.inode == lock.inode {
                // The file is reused: its time is the last holder's. A sign of life now, unless
                // a recent one stands, so no waiter takes this holder for a stalled one before
                // the heartbeat thread's next beat.
                if Clock.nowMilliseconds() - current.modifiedMilliseconds >= FetchLock.heartbeat.milliseconds {
                    lock.beat()
                }
                Heartbeats.shared.add(lock)
                return (lock, waited)
            }
        }
    }

    private func open(_ name: String) throws -> FileDescriptor {
        let flags = O_RDWR | O_CREAT
        do {
            return try directory.open(name, flags: flags)
        } catch {
            // A directory made before fetching existed, or whose `fetching/` was removed by hand.
            guard error.errno == ENOENT else { throw error }
            try directory.makeDirectory(FetchLock.directoryName)
            return try directory.open(name, flags: flags)
        }
    }

    /// A released lock on `name`, taken out of the pool: no other fetch gets it meanwhile.
    private func take(_ name: String) -> FetchLock? {
        idle.withLock { idle in idle.firstIndex { $0.name == name }.map { idle.remove(at: $0) } }
    }

    /// Keeps a released lock, unless one on its file is kept already; the oldest goes when full.
    fileprivate func keep(_ lock: FetchLock) {
        idle.withLock { idle in
            guard !idle.contains(where: { $0.name == lock.name }) else { return }
            if idle.count == Self.idleLimit { idle.removeFirst() }
            idle.append(lock)
        }
    }
}

/// The one thread per process that shows every fetch lock it holds alive, once a
/// ``FetchLock/heartbeat``: no task or timer per fetch, which cost a revalidation more than
/// its lock's system calls. A lock released between a snapshot of those held and its beat is
/// beaten once more: a harmless change of a file its holder has let go of.
private final class Heartbeats: @unchecked Sendable {
    static let shared = Heartbeats()

    private struct Held {
        weak var lock: FetchLock?
    }

    private struct State {
        var held: [ObjectIdentifier: Held] = [:]
        var started = false
    }

    private let state = Locked(State())

    func add(_ lock: FetchLock) {
        let start = state.withLock { state -> Bool in
            state.held[ObjectIdentifier(lock)] = Held(lock: lock)
            defer { state.started = true }
            return !state.started
        }
        guard start else { return }
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: Double(FetchLock.heartbeat.nanoseconds) / 1e9)
                beat()
            }
        }
        thread.name = "SharedCache fetch heartbeat"
        thread.start()
    }

    func remove(_ lock: FetchLock) {
        state.withLock { _ = $0.held.removeValue(forKey: ObjectIdentifier(lock)) }
    }

    /// Beats every lock still held; forgets those dropped without a release (their descriptor,
    /// and with it the lock, went with them).
    private func beat() {
        let locks = state.withLock { state -> [FetchLock] in
            state.held = state.held.filter { $0.value.lock != nil }
            return state.held.values.compactMap(\.lock)
        }
        for lock in locks { lock.beat() }
    }
}
