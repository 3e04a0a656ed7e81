import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// A compaction pass at scale: `entries` entries of 100 bytes, the size limit set so that the
// pass evicts 10% of them, and their space given back (the pack segments they were in are
// compacted and deleted). The segments are dated an hour back first, as in a cache whose
// compactor runs while it fills, since the compactor leaves segments written in the last
// minute alone. The pass runs in a helper process, so its peak resident memory is that of a
// compactor alone: the index it loads, the plan, the journal writes, the moves, the checkpoint.

struct CompactionMeasurement: Codable {
    var entries: Int
    var evicted: Int
    var openMilliseconds: Double
    /// Plan, journal the evictions, checkpoint, reclaim the pack segments (moves included).
    var passMilliseconds: Double
    /// Pack segments deleted, live entries moved out of them first, and their bytes.
    var segmentsRetired: Int
    var entriesMoved: Int
    var bytesReclaimed: Int64
    /// What one-file-per-entry costs for the same evictions: unlinking as many same-size files.
    var unlinkFloorMilliseconds: Double
    var orphanSweepMilliseconds: Double
    var peakResidentMegabytes: Double
    var manifestBytesPerEntry: Double
}

/// Child role: open the cache, run one pass (no orphan sweep) and unlink what it evicted, then
/// a sweep-only pass; print the numbers as JSON.
func runCompaction(directory: String) throws -> Never {
    let hourAgo = Date(timeIntervalSinceNow: -3600)
    for name in try FileManager.default.contentsOfDirectory(atPath: "\(directory)/packs") {
        try FileManager.default.setAttributes([.modificationDate: hourAgo], ofItemAtPath: "\(directory)/packs/\(name)")
    }
    var start = now()
    let cache = try SharedCache(directory: directory, configuration: Configuration(evictionGracePeriod: .zero))
    let opened = Double(now() - start) / 1e6
    start = now()
    let report = try Compactor(cache: cache).pass(CompactionOptions(sweepOrphans: false))
    let pass = Double(now() - start) / 1e6
    start = now()
    _ = try cache.compact(CompactionOptions(sweepOrphans: true))
    let sweep = Double(now() - start) / 1e6
    // Its own peak, not the driver's: see `peakResidentKilobytes`.
    let peak = Double(peakResidentKilobytes() ?? 0) / 1024
    let checkpoint = report.checkpoint!
    let measurement = CompactionMeasurement(
        entries: report.entriesBefore, evicted: report.evictions.count, openMilliseconds: opened,
        passMilliseconds: pass, segmentsRetired: report.packs.segmentsRetired, entriesMoved: report.packs.entriesMoved,
        bytesReclaimed: report.packs.bytesReclaimed,
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
