import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A compaction pass at scale: `entries` entries of 100 bytes, the size limit set so that the
// pass evicts 10% of them. The pass runs in a helper process, so its peak resident memory is
// that of a compactor alone: the index it loads, the plan, the journal writes, the checkpoint.

struct CompactionMeasurement: Codable {
    var entries: Int
    var evicted: Int
    var openMilliseconds: Double
    /// Plan, journal the evictions, checkpoint: everything but unlinking the blobs.
    var passMilliseconds: Double
    /// Unlinking the evicted blobs, after their grace period.
    var unlinkMilliseconds: Double
    /// The floor for that: unlinking as many same-size files in the same filesystem.
    var unlinkFloorMilliseconds: Double
    var orphanSweepMilliseconds: Double
    var peakResidentMegabytes: Double
    var manifestBytesPerEntry: Double
}

/// Child role: open the cache, run one pass (no orphan sweep) and unlink what it evicted, then
/// a sweep-only pass; print the numbers as JSON.
func runCompaction(directory: String) throws -> Never {
    var start = now()
    let cache = try SharedCache(directory: directory, configuration: Configuration(evictionGracePeriod: .zero))
    let opened = Double(now() - start) / 1e6
    start = now()
    let report: CompactionReport
    let unlinked: Double
    do {
        let compactor = try Compactor(cache: cache)
        report = try compactor.pass(CompactionOptions(sweepOrphans: false))
        let planned = now()
        _ = try compactor.unlinkPendingBlobs(waitingForGracePeriod: true)
        unlinked = Double(now() - planned) / 1e6
    }
    let pass = Double(now() - start) / 1e6 - unlinked
    start = now()
    _ = try cache.compact(CompactionOptions(sweepOrphans: true))
    let sweep = Double(now() - start) / 1e6
    var usage = rusage()
    #if os(Linux)
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    let peak = Double(usage.ru_maxrss) / 1024  // kilobytes on Linux
    #else
    getrusage(RUSAGE_SELF, &usage)
    let peak = Double(usage.ru_maxrss) / 1024 / 1024  // bytes on Darwin
    #endif
    let checkpoint = report.checkpoint!
    let measurement = CompactionMeasurement(
        entries: report.entriesBefore, evicted: report.evictions.count, openMilliseconds: opened,
        passMilliseconds: pass, unlinkMilliseconds: unlinked,
        unlinkFloorMilliseconds: unlinkFloor(besides: directory, count: report.evictions.count),
        orphanSweepMilliseconds: sweep, peakResidentMegabytes: peak,
        manifestBytesPerEntry: Double(checkpoint.manifestBytes) / Double(max(1, checkpoint.entryCount)))
    FileHandle.standardOutput.write(try JSONEncoder().encode(measurement) + Data("\n".utf8))
    exit(0)
}

/// Creates `count` files the size of a 100-byte blob in 256 folders next to the cache, then
/// times unlinking them: what the evictions' unlinks cost at the least on this filesystem.
func unlinkFloor(besides directory: String, count: Int) -> Double {
    let root = directory + "-unlink-floor"
    let bytes = [UInt8](repeating: 0x42, count: 184)
    var paths: [String] = []
    for index in 0..<count {
        let folder = "\(root)/\(String(format: "%02x", index % 256))"
        if index < 256 { try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        let path = "\(folder)/\(String(format: "%064x", index)).0000000000000001"
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        paths.append(path)
    }
    let start = now()
    for path in paths { unlink(path) }
    let elapsed = Double(now() - start) / 1e6
    try? FileManager.default.removeItem(atPath: root)
    return elapsed
}

/// Measures a pass over a directory built by ``buildScaleDirectory(_:entries:sizeLimit:)``, in a
/// helper process.
func compactionAtScale(in root: String) throws -> CompactionMeasurement {
    let child = try ChildProcess.benchmarkHelper(role: "compact", [root])
    let line = child.requireLine()
    child.finish()
    return try JSONDecoder().decode(CompactionMeasurement.self, from: Data(line.utf8))
}
