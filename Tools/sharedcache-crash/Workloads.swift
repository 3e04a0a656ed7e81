import Foundation
import SharedCache
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

/// A short scripted use of the cache whose system calls are recorded: `setup` runs first,
/// unrecorded (its result is the directory before the crash, all of it on disk), then `steps`
/// runs in a child process with the recorder armed, noting each API call it begins and each
/// acknowledgement it gets, which is what the checker holds the crash states to.
struct Workload: Sendable {
    var name: String
    var summary: String
    /// Shared limits the directory is created with.
    var sizeLimit: UInt64 = 1 << 30
    /// How long checkpoints keep sealed segments: zero retires them at once.
    var journalRetention: Duration = .seconds(60)
    /// Bodies up to this size are packed; larger ones are blobs.
    var packThreshold = Configuration.defaultPackThreshold
    /// `nil`: the directory before the crash is empty, and the steps create the cache.
    var setup: (@Sendable (Driver) throws -> Void)?
    var steps: @Sendable (Driver) throws -> Void

    static let all: [Workload] = [
        Workload(
            name: "create", summary: "a cache created in an empty directory, then a put",
            setup: nil,
            steps: { d in try d.put("k1", 1) }),
        Workload(
            name: "put-remove", summary: "puts, a superseding put, a remove",
            setup: { d in
                try d.put("k1", 1)
                try d.put("k2", 1)
            },
            steps: { d in
                try d.put("k3", 1)
                try d.put("k1", 2)
                try d.remove("k2")
                try d.put("k4", 1)
            }),
        Workload(
            name: "checkpoint", summary: "a remove and puts around a checkpoint (manifest replaced)",
            setup: { d in
                try d.put("k1", 1)
                try d.put("k2", 1)
            },
            steps: { d in
                try d.put("k3", 1)
                try d.remove("k1")
                try d.checkpoint()
                try d.put("k2", 2)
            }),
        Workload(
            name: "rotation", summary: "two checkpoints, the first segment retired", journalRetention: .zero,
            setup: { d in try d.put("k1", 1) },
            steps: { d in
                try d.put("k2", 1)
                try d.checkpoint()
                try d.remove("k1")
                try d.put("k3", 1)
                try d.checkpoint()
                try d.put("k4", 1)
            }),
        Workload(
            name: "compaction", summary: "a compaction pass evicting for size, then a put", sizeLimit: 3000,
            setup: { d in
                for key in ["k1", "k2", "k3", "k4"] { try d.put(key, 1) }
            },
            steps: { d in
                try d.put("k5", 1)
                try d.compact()
                try d.put("k6", 1)
            }),
        Workload(
            name: "freshen", summary: "a 304 freshening (journaled `freshened`) of an expired entry",
            setup: { d in try d.put("k1", 1, expired: true) },
            steps: { d in
                try d.put("k2", 1)
                try d.freshen("k1", 1)
                try d.put("k3", 1)
            }),
        // Two caches on one directory, as two processes have it, in one recorded process so that
        // the interleaving is the same every run: each put or checkpoint lands inside the other's
        // put, between its catch-up and its write, as sharedcache(5) allows.
        Workload(
            name: "concurrent",
            summary:
                "puts of two caches landing inside each other's; a key superseded across them; a put landing "
                + "after a seal it had not read",
            packThreshold: 4096,
            setup: { d in
                try d.put("k1", 1)
                try d.put("k2", 2)
            },
            steps: { a in
                let b = try a.another("b")
                // b's version of k1 lands first; a's, read back after it, supersedes it.
                try a.put("k1", 2) { try b.put("k1", 3) }
                try b.put("k2", 4) { try a.put("k3", 1) }
                // a's record lands after b's seal, which it had not read: void; a appends it again
                // to the next segment.
                try a.put("k4", 1) { try b.checkpoint() }
                try a.put("k3", 2) {
                    try b.put("k5", 1)
                    try b.put("k3", 3)
                }
                try b.remove("k1")
            }),
    ]

    /// The configuration a workload's processes open the cache with.
    func configuration(_ durability: Durability) -> Configuration {
        var configuration = Configuration(
            sizeLimit: sizeLimit, durability: durability, journalRetention: journalRetention,
            evictionGracePeriod: .zero, memoryCostLimit: 0, packThreshold: packThreshold)
        configuration.journalWatching = .polling(every: .seconds(3600))
        return configuration
    }
}

/// The body every put of `key` at `version` stores, so a checker can tell any stored body's
/// origin without keeping a copy: `key#version;` repeated, sized by the version (odd: 700
/// bytes; even: 5,000 bytes, two pages, a blob where the workload's pack threshold is lower).
func value(_ key: String, _ version: Int) -> Data {
    let unit = Array("\(key)#\(version);".utf8)
    let size = version % 2 == 1 ? 700 : 5000
    return Data((0..<size).map { unit[$0 % unit.count] })
}

/// Runs a workload's calls on one open cache, noting them for the checker.
///
/// Notes are `WRITER begin OP [KEY VERSION]` before a call and `WRITER ack OP …` once it
/// returned: `put K V` (`expired` when stored already expired), `remove K`, `checkpoint`,
/// `compact EVICTED,…`, `freshen K V`. The writer names the cache (`a`, or another one
/// opened with ``another(_:)``): each has at most one call in flight.
final class Driver: Sendable {
    let cache: SharedCache
    let writer: String
    private let noting: @Sendable (String) -> Void

    init(cache: SharedCache, writer: String = "a", note: @escaping @Sendable (String) -> Void) {
        self.cache = cache
        self.writer = writer
        self.noting = note
    }

    private func note(_ text: String) { noting("\(writer) \(text)") }

    /// A driver of a second cache on the same directory, as another process would open it.
    func another(_ writer: String) throws -> Driver {
        Driver(
            cache: try SharedCache(directory: cache.path, configuration: cache.configuration), writer: writer,
            note: noting)
    }

    /// Puts version `version` of `key`; `afterCatchingUp` runs where another process's put or
    /// checkpoint may land: after this put caught up with the journal, before its write.
    func put(_ key: String, _ version: Int, expired: Bool = false, afterCatchingUp: () throws -> Void = {}) throws {
        let now = cache.engine.now()
        note("begin put \(key) \(version)\(expired ? " expired" : "")")
        try cache.engine.store(
            key: key, data: value(key, version), metadata: EntryMetadata(), storedAt: now - (expired ? 7_200_000 : 0),
            expiresAt: now + (expired ? -3_600_000 : 86_400_000), afterCatchingUp: afterCatchingUp)
        note("ack put \(key) \(version)")
    }

    func remove(_ key: String) throws {
        note("begin remove \(key)")
        _ = try cache.remove(key: key)
        note("ack remove \(key)")
    }

    func checkpoint() throws {
        note("begin checkpoint")
        try cache.checkpoint()
        note("ack checkpoint")
    }

    func compact() throws {
        note("begin compact")
        let report = try cache.compact()
        let evicted = report.evictions.compactMap { eviction in
            ["k1", "k2", "k3", "k4", "k5", "k6"].first { KeyHash(key: $0) == eviction.hash }
        }
        note("ack compact \(evicted.joined(separator: ","))")
    }

    /// Journals what a 304 with unchanged headers journals: the stored version, fresh again.
    func freshen(_ key: String, _ version: Int) throws {
        let hash = KeyHash(key: key)
        guard let entry = try cache.engine.currentEntry(hash) else { throw CrashCheckError("\(key) is not stored") }
        let now = cache.engine.now()
        note("begin freshen \(key) \(version)")
        try cache.engine.commit { _ in
            (
                [
                    .freshened(
                        FreshenedRecord(
                            hash: hash, location: entry.location, storedAt: now, expiresAt: now + 86_400_000))
                ], ()
            )
        }
        note("ack freshen \(key) \(version)")
    }
}

struct CrashCheckError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
