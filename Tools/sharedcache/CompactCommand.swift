import Foundation
import SharedCache
import SharedCacheCLI

// compact: one compactor pass, or with --dry-run what it would evict.

extension Command {
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
    var packSegmentsRetired: Int
    var packEntriesMoved: Int
    var packBytesReclaimed: Int64

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
        packSegmentsRetired = report.packs.segmentsRetired
        packEntriesMoved = report.packs.entriesMoved
        packBytesReclaimed = report.packs.bytesReclaimed
    }
}
