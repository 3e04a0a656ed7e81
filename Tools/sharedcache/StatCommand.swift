import Foundation
import SharedCache
import SharedCacheCLI

// stat: what the directory holds, its limits, and what its processes did.

extension Command {
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
            packSegments: layout.packSegments, packBytes: layout.packBytes, packThreshold: configuration.packThreshold,
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
            (
                "packs",
                "\(report.packSegments) segment(s), \(formatBytes(UInt64(report.packBytes))) "
                    + "(bodies up to \(formatBytes(UInt64(report.packThreshold))))"
            ),
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
    var packSegments: Int
    /// Bytes of the pack segments, dead records included.
    var packBytes: Int64
    var packThreshold: Int
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
