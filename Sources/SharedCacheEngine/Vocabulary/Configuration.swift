package import SharedCacheFormat
import SharedCachePlatform

/// How a process opens a cache directory.
///
/// ``sizeLimit``, ``entryLimit``, ``defaultExpiry``, ``packThreshold`` and ``httpAudience`` are
/// *shared*: they are written to the directory's `config` file when the directory is created,
/// and every process then uses the directory's values (``SharedCache/configuration`` shows
/// them; `sharedcache config` changes them), but for one exception: a process that asks for
/// ``HTTPAudience/shared`` is a shared cache whatever the directory says. The other settings
/// are this process's own.
public struct Configuration: Sendable, Hashable {
    /// Bytes of entry bodies the compactor keeps the directory under; 0 for no limit. Shared.
    public var sizeLimit: UInt64
    /// Entries the compactor keeps the directory under; 0 for no limit. Shared.
    public var entryLimit: UInt64
    /// How long an entry lives when its put names no expiry; `nil` for forever. Shared.
    public var defaultExpiry: Duration?
    /// Bodies of at most this many bytes are stored as records in pack segments (one `pread`
    /// to read, one `pwrite` to write); larger ones get a file each. 0 gives every body a file
    /// of its own. Shared; read when a process opens the directory.
    public var packThreshold: Int
    /// Whether a put returns only once its entry would survive a power loss.
    public var durability: Durability
    /// The longest this process waits for a lock another process holds before failing with
    /// ``SharedCacheError/Code/lockTimeout``.
    public var lockTimeout: Duration
    /// How removal subscribers learn that the journal changed. Reads never depend on it: every
    /// call checks the journal itself.
    public var journalWatching: JournalWatching
    /// How long checkpoints made by this process keep a sealed journal segment. A subscriber
    /// that falls behind by less still reads every removal from the journal; one further behind
    /// reloads the manifest and reports what it missed as ``RemovalReason/unknown``.
    public var journalRetention: Duration
    /// A hit is journaled as an access at most once per this interval per entry (by whichever
    /// process reads it first), which is how finely least-recently-used eviction can order
    /// entries. Reads cost no write in between.
    public var recencyInterval: Duration
    /// How long a compaction by this process waits after journaling an eviction before it
    /// unlinks the blob, so a reader that found the entry a moment earlier can still open it.
    public var evictionGracePeriod: Duration
    /// Bytes of recently read and stored bodies this process keeps in memory in front of the
    /// disk; 0 turns the memory tier off. A copy is never served once any process replaced or
    /// removed its entry.
    public var memoryCostLimit: Int
    /// Copies of bodies this process keeps in memory at most; 0 (the default) for no limit but
    /// ``memoryCostLimit``. Past it, the least recently used go.
    public var memoryCountLimit: Int
    /// How long a copy in memory may go unused before it is dropped (an expiry that restarts
    /// on every access); `nil` (the default) keeps copies until the cost or count limit
    /// pushes them out. The entry on disk is not affected.
    public var memoryIdleExpiry: Duration?
    /// Who may use a cache directory this process creates. An existing directory's own mode
    /// decides; asking for ``Sharing/group`` there fails if the directory is private.
    public var sharing: Sharing
    /// Whom the responses ``SharedCache/fetch(_:options:transport:)`` stores are for: one user
    /// (a private cache, as a browser's; the default) or several (a shared cache, as a proxy's).
    /// Shared, with a twist: a process is a shared cache if it asks to be, if the directory's
    /// `config` says so, or if a group shares the directory, and once one stays one while
    /// open. Each stored response records which rules stored it, and a cache reuses only
    /// responses stored by its own, so caches of both kinds may use one directory.
    public var httpAudience: HTTPAudience
    /// The wall clock expiry is judged by: the system's, or a test's.
    package var clock: WallClock = .system

    /// A configuration; every setting has the default described at its property.
    public init(
        sizeLimit: UInt64 = 1 << 30,
        entryLimit: UInt64 = 0,
        defaultExpiry: Duration? = .seconds(7 * 24 * 3600),
        durability: Durability = .none,
        lockTimeout: Duration = .seconds(10),
        journalWatching: JournalWatching = .default,
        journalRetention: Duration = .seconds(60),
        recencyInterval: Duration = .seconds(600),
        evictionGracePeriod: Duration = .seconds(1),
        memoryCostLimit: Int = 16 << 20,
        sharing: Sharing = .owner,
        memoryCountLimit: Int = 0,
        memoryIdleExpiry: Duration? = nil,
        packThreshold: Int = Configuration.defaultPackThreshold,
        httpAudience: HTTPAudience = .private
    ) {
        self.httpAudience = httpAudience
        self.packThreshold = packThreshold
        self.memoryCountLimit = memoryCountLimit
        self.memoryIdleExpiry = memoryIdleExpiry
        self.sizeLimit = sizeLimit
        self.entryLimit = entryLimit
        self.defaultExpiry = defaultExpiry
        self.durability = durability
        self.lockTimeout = lockTimeout
        self.journalWatching = journalWatching
        self.journalRetention = journalRetention
        self.recencyInterval = recencyInterval
        self.evictionGracePeriod = evictionGracePeriod
        self.memoryCostLimit = memoryCostLimit
        self.sharing = sharing
    }

    /// The pack threshold of a new directory, 128 KiB: `sharedcache-bench` finds packing faster
    /// than a file per body for both get and put at every size up to the 1 MiB maximum; the
    /// bound keeps a record small next to its 64 MiB segment.
    public static let defaultPackThreshold = ConfigurationFile.defaultPackThreshold

    /// This configuration with the shared limits taken from a directory's `config`. It is a
    /// shared cache if it was one (asked for, or adopted before: a process never turns private
    /// while open, whatever a `config` written since says), if `config` says so, or if a group
    /// shares the directory (``sharing``).
    package func adopting(_ shared: ConfigurationFile) -> Configuration {
        var result = self
        result.sizeLimit = shared.sizeLimit
        result.entryLimit = shared.entryLimit
        result.defaultExpiry = shared.defaultExpirySeconds.map { .seconds($0) }
        result.packThreshold = shared.packThreshold
        let severalUsers = httpAudience == .shared || shared.storesForSeveralUsers || sharing == .group
        result.httpAudience = severalUsers ? .shared : .private
        return result
    }
}

/// Who may use a cache directory.
public enum Sharing: Sendable, Hashable {
    /// Only the user who owns the directory: files 0600, directories 0700.
    case owner
    /// Every member of the directory's group: files 0660, directories 02770 (set-group-ID, so
    /// what any member creates keeps the group), whatever each process's umask. A new
    /// directory takes the creating process's group; `chgrp -R` it to the group that shares it.
    case group
}

/// Whom a cache's HTTP responses are for (RFC 9111 §1), which decides the rules only a shared
/// cache has: `private` (§5.2.2.7), `s-maxage` (§5.2.2.10), `proxy-revalidate` (§5.2.2.8), and a
/// request's `Authorization` (§3.5).
public enum HTTPAudience: Sendable, Hashable {
    /// One user: a private cache, as a browser's is.
    case `private`
    /// Several users, who must never be served what the origin meant for one of them: a shared
    /// cache, as a proxy's is.
    case shared
}

/// What a put promises about power loss. Crashes of processes never lose or damage a
/// returned put either way; this is only about the machine losing power.
public enum Durability: Sendable, Hashable {
    /// No flushes: after a power loss, recent entries may be missing, never wrong.
    case none
    /// Flush the blob, its directory and the journal record before a put returns
    /// (`fdatasync`, or `F_FULLFSYNC` on Darwin): a few hundred microseconds to milliseconds.
    case synchronized
}

/// Wall-clock time in milliseconds since the epoch, as the engine reads it: the system's, or
/// one a test sets and moves.
package final class WallClock: Sendable, Hashable {
    /// The system's clock.
    package static let system = WallClock { Clock.nowMilliseconds() }

    private let read: @Sendable () -> Int64

    package init(_ read: @escaping @Sendable () -> Int64) {
        self.read = read
    }

    package func now() -> Int64 { read() }

    package static func == (lhs: WallClock, rhs: WallClock) -> Bool { lhs === rhs }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

extension ConfigurationFile {
    package init(_ configuration: Configuration) {
        self.init(
            sizeLimit: configuration.sizeLimit,
            defaultExpirySeconds: configuration.defaultExpiry.map { max(1, $0.components.seconds) },
            entryLimit: configuration.entryLimit, packThreshold: configuration.packThreshold,
            storesForSeveralUsers: configuration.httpAudience == .shared)
    }
}
