import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// init, stat, journal, verify, compact, config: the directory as a whole.

extension Command {
    static let initialize = Command(
        name: "init", synopsis: "[--group]",
        summary: """
            Create the cache directory (any command does, privately) and say who may use it. With \
            --group, every member of the directory's group may: directories get mode 2770 and files \
            0660 whatever each process's umask. A new directory takes your group; to share with \
            another, chgrp -R it, or run init in an empty directory made with that group and mode 2770.
            """,
        options: [(.flag("--group"), "share the new directory with its group")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache(Configuration(sharing: invocation.arguments.has("--group") ? .group : .owner))
        let sharing = SharingReport(cache)
        if invocation.json {
            invocation.terminal.printJSON(["directory": cache.path, "sharing": sharing.name])
        } else {
            invocation.terminal.print("\(cache.path): \(sharing.description)")
        }
        return .success
    }

    static let stat = Command(
        name: "stat", synopsis: "",
        summary: """
            Show the directory: entries and bytes against the limits, the journal, the last \
            compaction, the compactor's process, and what every process using it did (hits, misses, \
            stores, revalidations, downloads, removals by reason).
            """
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache()
        let statistics = try cache.statistics()
        let configuration = cache.configuration
        let layout = try cache.layout()
        let daemon = try cache.compactorProcessID()
        let report = StatReport(
            directory: cache.path, entries: statistics.entryCount, bytes: statistics.totalBytes,
            sizeLimit: configuration.sizeLimit, entryLimit: configuration.entryLimit,
            defaultExpirySeconds: configuration.defaultExpiry?.components.seconds,
            journalSegments: layout.segments.count, journalGeneration: statistics.journalGeneration,
            journalSequence: statistics.journalSequence, manifestBytes: layout.manifestBytes,
            sharing: SharingReport(cache).name, compactorProcessID: daemon,
            activity: statistics.directory.map(ActivityJSON.init))
        if invocation.json {
            invocation.terminal.printJSON(report)
            return .success
        }
        let limit = report.sizeLimit == 0 ? "no limit" : formatBytes(report.sizeLimit)
        var lines = [
            ("directory", report.directory),
            ("sharing", SharingReport(cache).description),
            ("entries", "\(report.entries)" + (report.entryLimit == 0 ? "" : " of at most \(report.entryLimit)")),
            ("bytes", "\(formatBytes(report.bytes)) of \(limit)"),
            ("default expiry", configuration.defaultExpiry.map(DurationText.format) ?? "never"),
            (
                "journal",
                "\(report.journalSegments) segment(s), generation \(report.journalGeneration), sequence \(report.journalSequence)"
            ),
            ("manifest", formatBytes(UInt64(report.manifestBytes))),
            ("compactor", daemon.map { "sharedcached, process \($0)" } ?? "not running"),
        ]
        if let activity = statistics.directory {
            lines += [
                ("last compaction", activity.lastCompaction.map(formatDate) ?? "never"),
                ("since", formatDate(activity.since)),
                ("hits", "\(activity.hits)"), ("misses", "\(activity.misses)"), ("stores", "\(activity.stores)"),
                ("revalidations", "\(activity.revalidations)"), ("downloads", "\(activity.downloads)"),
                ("compactions", "\(activity.compactions)"),
            ]
            let removals = RemovalReason.allCases.compactMap { reason in
                activity.removals[reason].map { "\(reason) \($0)" }
            }
            lines.append(("removals", removals.joined(separator: ", ")))
        } else {
            lines.append(("activity", "unavailable (\(cache.path)/stats is not a counters file)"))
        }
        for (name, value) in lines {
            invocation.terminal.print("\(name.padding(toLength: 16, withPad: " ", startingAt: 0))\(value)")
        }
        return .success
    }

    static let journal = Command(
        name: "journal", synopsis: "[--follow]",
        summary: """
            Print the journal, one record per line: what every process stored, read (as recency) \
            and removed, and why. With --follow, keep printing records as they are appended.
            """,
        options: [(.flag("-f", "--follow"), "keep running and print records as any process appends them")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache()
        let listing = cache.journalListing()
        let terminal = invocation.terminal
        let json = invocation.json
        let print: @Sendable (JournalLine) -> Void = { line in
            json ? terminal.printJSON(line) : terminal.print(line.text)
        }
        // Records retired before they could be read (a follower stopped for longer than the
        // journal's retention) are said to be missing, never skipped in silence.
        let gap: @Sendable (UInt64, UInt64) -> Void = { from, to in
            terminal.warn(
                "warning: records \(from) to \(to) were retired before they could be printed (this reader fell "
                    + "behind the journal's retention); removals among them are not shown; continuing from \(to + 1)")
            if json { terminal.printJSON(JournalGapJSON(from: from, to: to)) }
        }
        try listing.readAvailable(print, gap: gap)
        guard invocation.arguments.has("-f") else { return .success }
        // Follow until killed: every append wakes a read of what is new.
        signal(SIGPIPE, SIG_DFL)
        let subscription = cache.onJournalChange { try? listing.readAvailable(print, gap: gap) }
        while true { withExtendedLifetime(subscription) { _ = sleep(3600) } }
    }

    static let verify = Command(
        name: "verify", synopsis: "[--repair]",
        summary: """
            Check every entry's blob in full against the journal and manifest, and look for orphaned, \
            foreign and leftover files. Exits 65 when problems remain.
            """,
        options: [(.flag("--repair"), "fix what is found: journal the removal of damaged entries, delete strays")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let report = try invocation.cache().verify(repair: invocation.arguments.has("--repair"))
        if invocation.json {
            invocation.terminal.printJSON(VerifyJSON(report))
        } else {
            for problem in report.problems { invocation.terminal.print(problem.description) }
            invocation.terminal.print(
                "\(report.entriesChecked) entries checked (\(formatBytes(report.bytesChecked))), "
                    + "\(report.problems.count) problem(s), \(report.problems.filter { !$0.repaired }.count) remaining")
        }
        return report.isClean ? .success : .dataError
    }

    static let compact = Command(
        name: "compact", synopsis: "[--dry-run]",
        summary: """
            Run one compaction pass now: evict expired entries, then the least recently used down to 90% \
            of the limits, and checkpoint. Exits 75 if sharedcached is running (it compacts on its own).
            """,
        options: [(.flag("--dry-run"), "print what would be evicted and why, change nothing")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let report = try invocation.cache().compact(CompactionOptions(dryRun: invocation.arguments.has("--dry-run")))
        if invocation.json {
            invocation.terminal.printJSON(CompactJSON(report))
            return .success
        }
        if report.dryRun {
            for eviction in report.evictions {
                invocation.terminal.print(
                    "would evict \(eviction.hash.hex) \(formatBytes(eviction.size)) reason \(eviction.reason) "
                        + "(last access \(formatDate(eviction.lastAccess)))")
            }
        }
        invocation.terminal.print(
            "\(report.dryRun ? "would evict" : "evicted") \(report.expiredCount) expired and "
                + "\(report.evictedForSpaceCount) for space; \(report.entriesAfter) entries, "
                + "\(formatBytes(report.bytesAfter)) left")
        return .success
    }

    static let config = Command(
        name: "config", synopsis: "[NAME [VALUE]]",
        summary: """
            Show the limits every process shares, or one of them, or set one: size-limit (bytes, or \
            with K, M, G, T; Ki, Mi, Gi, Ti for powers of 1024; 0 for none), entry-limit (0 for none), \
            default-expiry (a duration such as 7d, or never; 0 is never too). A running sharedcached is told \
            to re-read them.
            """
    ) { invocation in
        let values = try invocation.positional(0...2, "NAME")
        let cache = try invocation.cache()
        var limits: SharedCache.SharedLimits
        if values.count == 2 {
            let (name, text) = (values[0], values[1])
            try validate(name, text)
            limits = try cache.updateSharedLimits { limits in
                switch name {
                case "size-limit": limits.sizeLimit = parseSize(text) ?? .max
                case "entry-limit": limits.entryLimit = UInt64(text) ?? .max
                case "default-expiry":
                    // 0 is "none", as for the other limits (it used to be stored as 1 second).
                    let duration = text == "never" ? nil : DurationText.parse(text)
                    limits.defaultExpiry = duration == .zero ? nil : duration
                default: break
                }
            }
            if let pid = try cache.compactorProcessID(), pid > 0, kill(pid, SIGHUP) == 0 {
                invocation.terminal.warn("told sharedcached (process \(pid)) to re-read the limits")
            }
        } else {
            let configuration = cache.configuration
            limits = SharedCache.SharedLimits(
                sizeLimit: configuration.sizeLimit, entryLimit: configuration.entryLimit,
                defaultExpiry: configuration.defaultExpiry)
        }
        var settings: [(String, String)] = [
            ("size-limit", "\(limits.sizeLimit)"), ("entry-limit", "\(limits.entryLimit)"),
            ("default-expiry", limits.defaultExpiry.map { "\($0.components.seconds)" } ?? "never"),
        ]
        if !values.isEmpty {
            guard let setting = settings.first(where: { $0.0 == values[0] }) else { throw unknownSetting(values[0]) }
            settings = [setting]
        }
        if invocation.json {
            invocation.terminal.printJSON(Dictionary(uniqueKeysWithValues: settings))
        } else if values.count == 1 {
            invocation.terminal.print(settings[0].1)
        } else if values.count == 2 {
            invocation.terminal.print("\(settings[0].0) = \(settings[0].1)")
        } else {
            for (name, value) in settings { invocation.terminal.print("\(name) = \(value)") }
        }
        return .success
    }

    /// Checks a setting before anything is written.
    private static func validate(_ name: String, _ text: String) throws {
        switch name {
        case "size-limit" where parseSize(text) == nil:
            throw UsageError("size-limit \(text) is not a size like 500M, 2Gi or 1073741824")
        case "entry-limit" where UInt64(text) == nil:
            throw UsageError("entry-limit \(text) is not a whole number")
        case "default-expiry" where text != "never" && DurationText.parse(text) == nil:
            throw UsageError("default-expiry \(text) is not a duration like 12h or 7d, or never")
        case "size-limit", "entry-limit", "default-expiry":
            return
        default:
            throw unknownSetting(name)
        }
    }

    private static func unknownSetting(_ name: String) -> UsageError {
        UsageError("unknown setting \(name); the settings are size-limit, entry-limit and default-expiry")
    }
}

/// `500`, `500K`, `2M`, `1G`, `1T` (powers of 1000), `2Ki`, `1Gi` (powers of 1024).
func parseSize(_ text: String) -> UInt64? {
    let units: [(String, UInt64)] = [
        ("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40),
        ("K", 1000), ("M", 1_000_000), ("G", 1_000_000_000), ("T", 1_000_000_000_000),
    ]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        guard let number = UInt64(text.dropLast(suffix.count)) else { return nil }
        let (value, overflow) = number.multipliedReportingOverflow(by: scale)
        return overflow ? nil : value
    }
    return UInt64(text)
}

/// What `journal --json` prints for records it could not read: `{"type":"gap","from":F,"to":T}`.
struct JournalGapJSON: Encodable {
    var type = "gap"
    var from: UInt64
    var to: UInt64
}

struct StatReport: Encodable {
    var directory: String
    var entries: Int
    var bytes: UInt64
    var sizeLimit: UInt64
    var entryLimit: UInt64
    var defaultExpirySeconds: Int64?
    var journalSegments: Int
    var journalGeneration: UInt64
    var journalSequence: UInt64
    var manifestBytes: Int64
    /// "owner" or "group".
    var sharing: String
    var compactorProcessID: Int32?
    var activity: ActivityJSON?
}

struct ActivityJSON: Encodable {
    var since: Date
    var hits: UInt64
    var misses: UInt64
    var stores: UInt64
    var revalidations: UInt64
    var downloads: UInt64
    var removals: [String: UInt64]
    var compactions: UInt64
    var lastCompaction: Date?

    init(_ activity: DirectoryActivity) {
        since = activity.since
        hits = activity.hits
        misses = activity.misses
        stores = activity.stores
        revalidations = activity.revalidations
        downloads = activity.downloads
        removals = Dictionary(uniqueKeysWithValues: activity.removals.map { ($0.key.description, $0.value) })
        compactions = activity.compactions
        lastCompaction = activity.lastCompaction
    }
}

struct VerifyJSON: Encodable {
    struct Problem: Encodable {
        var kind: String
        var path: String
        var detail: String
        var repaired: Bool
    }

    var clean: Bool
    var entriesChecked: Int
    var bytesChecked: UInt64
    var problems: [Problem]

    init(_ report: VerificationReport) {
        clean = report.isClean
        entriesChecked = report.entriesChecked
        bytesChecked = report.bytesChecked
        problems = report.problems.map {
            Problem(kind: $0.kind.rawValue, path: $0.path, detail: $0.detail, repaired: $0.repaired)
        }
    }
}

struct CompactJSON: Encodable {
    struct Eviction: Encodable {
        var hash: String
        var size: UInt64
        var reason: String
        var lastAccess: Date
    }

    var dryRun: Bool
    var entriesBefore: Int
    var bytesBefore: UInt64
    var entriesAfter: Int
    var bytesAfter: UInt64
    var evictions: [Eviction]
    var orphansRemoved: Int

    init(_ report: CompactionReport) {
        dryRun = report.dryRun
        entriesBefore = report.entriesBefore
        bytesBefore = report.bytesBefore
        entriesAfter = report.entriesAfter
        bytesAfter = report.bytesAfter
        evictions = report.evictions.map {
            Eviction(hash: $0.hash.hex, size: $0.size, reason: $0.reason.description, lastAccess: $0.lastAccess)
        }
        orphansRemoved = report.orphansRemoved
    }
}

/// Who may use the directory, as `init` and `stat` print it.
struct SharingReport {
    var name: String
    var description: String

    init(_ cache: SharedCache) {
        var status = stat()
        let group = lstat(cache.path, &status) == 0 ? status.st_gid : 0
        switch cache.configuration.sharing {
        case .owner:
            name = "owner"
            description = "private to its owner (mode 700)"
        case .group:
            name = "group"
            let groupName = getgrgid(group).map { String(cString: $0.pointee.gr_name) } ?? "\(group)"
            description = "shared with group \(groupName) (mode 2770)"
        }
    }
}

