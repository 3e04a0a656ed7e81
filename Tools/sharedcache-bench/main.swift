// sharedcache-bench: SharedCache next to the physical floor of the same work, in one run.
//
//   swift run -c release sharedcache-bench [--quick] [--compaction-only | --http-only | --mixed-only] [--dir DIR] [--json FILE]
//
// Floors are the bare syscalls a cache of one file per entry cannot avoid, timed the same way:
//   get floor: open + pread(whole file) + close of a same-size file
//   put floor: create + write + close + rename to a new name, plus one O_APPEND journal record
// Each row times operations one by one (monotonic clock), a floor operation and a cache operation
// in turn, with a warm page cache; it reports p50, p99 and throughput (ops/s of time spent in
// the operation itself).

import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Main

// Helper processes for the cross-process rows.
if CommandLine.arguments.count >= 3, CommandLine.arguments[1] == "--role" {
    let arguments = Array(CommandLine.arguments.dropFirst(3))
    switch CommandLine.arguments[2] {
    case "removal-subscriber": try runRemovalSubscriber(directory: arguments[0])
    case "idle-subscriber": try runIdleSubscriber(directory: arguments[0], seconds: Double(arguments[1])!)
    case "compact": try runCompaction(directory: arguments[0])
    case "mixed": try runMixedWorker(arguments)
    case "mixed-floor": try runMixedFloorWorker(arguments)
    case "mixed-spin": try runMixedSpinWorker(arguments)
    case "scale": try runScale(arguments)
    case "instructions": try runInstructions(arguments)
    #if os(Linux)
    case "inotify-reader": runInotifyReader(file: arguments[0])
    #endif
    default: usage("unknown role \(CommandLine.arguments[2])")
    }
}

let options = Options(CommandLine.arguments.dropFirst())
let base = options.directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("sharedcache-bench").path
let runRoot = "\(base)/run-\(getpid())"
try FileManager.default.createDirectory(atPath: runRoot, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: runRoot) }

let scale = options.quick ? 10 : 1
let compactionEntries = options.quick ? 100_000 : 1_000_000
let httpRequests = options.quick ? 300 : 3000
if options.httpOnly {
    printHTTP(try httpWorkloads(in: "\(runRoot)/http", requests: httpRequests), requests: httpRequests)
    try? FileManager.default.removeItem(atPath: runRoot)
    exit(0)
}
if options.mixedOnly {
    printMixed(try measureMixed(in: "\(runRoot)/mixed", operations: options.quick ? 2_000 : 20_000, peer: options.peer))
    try? FileManager.default.removeItem(atPath: runRoot)
    exit(0)
}
/// Builds the largest scale directory (just over its size limit, so a pass evicts a tenth),
/// measures per-operation cost in it, then compacts it.
func largestScale() throws -> (ScaleMeasurement, CompactionMeasurement) {
    let root = "\(runRoot)/scale"
    try buildScaleDirectory(root, entries: compactionEntries, sizeLimit: UInt64(compactionEntries * 100) - 1)
    let row = try scaleRow(root, entries: compactionEntries)
    return (row, try compactionAtScale(in: root))
}

if options.compactionOnly {
    printCompaction(try largestScale().1)
    try? FileManager.default.removeItem(atPath: runRoot)
    exit(0)
}

var rows: [Row] = []
var defaultGet: Measurement? = nil
let workloads: [(size: Int, keys: Int)] = [(1024, 20_000 / scale), (100 * 1024, 2_000 / scale)]

for (size, keys) in workloads {
    let label = size >= 1024 * 100 ? "100 KB" : "1 KB"
    let root = "\(runRoot)/\(size)"
    // The memory tier off: these rows measure the disk path against the disk floor.
    let cache = try SharedCache(
        directory: "\(root)/cache", configuration: Configuration(sizeLimit: 0, memoryCostLimit: 0))
    let peer = try options.peer.map { try OperationServer.diskcache(python: $0, directory: "\(root)/diskcache", size: size) }
    let (floorPut, cachePut, peerPut) = try putWorkload(
        in: "\(root)/floor", cache: cache, size: size, count: keys, peer: peer)
    let (floorGet, cacheGet, peerGet) = try getWorkload(
        in: "\(root)/floor", cache: cache, size: size, count: keys, reads: keys * 5, peer: peer)
    rows.append(
        Row(
            workload: "put \(label), no fsync", floor: floorPut, cache: cachePut, peer: peerPut,
            ratio: cachePut.p50Microseconds / floorPut.p50Microseconds, target: 2))
    rows.append(
        Row(
            workload: "get \(label)", floor: floorGet, cache: cacheGet, peer: peerGet,
            ratio: cacheGet.p50Microseconds / floorGet.p50Microseconds, target: size == 1024 ? 1.5 : 2))
    if size == 1024 { defaultGet = try defaultGets(cacheDirectory: "\(root)/cache", keys: keys, reads: keys * 5) }
    try? FileManager.default.removeItem(atPath: root)
}

let openEntries = 100_000 / scale
let opening = try openTimes(in: "\(runRoot)/open", count: openEntries)
let notifications = options.quick ? 200 : 2000
let notification = try removalLatency(in: "\(runRoot)/notify", count: notifications)
let idleSeconds = options.quick ? 2.0 : 10.0
let idleCPU = try idleSubscriberCPU(in: "\(runRoot)/notify", seconds: idleSeconds)
let http = try httpWorkloads(in: "\(runRoot)/http", requests: httpRequests)

// The peer, the 8-process run, the scale rows and the instruction counts.
let mixed = try measureMixed(in: "\(runRoot)/mixed", operations: options.quick ? 2_000 : 20_000, peer: options.peer)
var scaleRows: [ScaleMeasurement] = []
for entries in options.quick ? [1_000, 10_000] : [1_000, 100_000] {
    let root = "\(runRoot)/scale-\(entries)"
    try buildScaleDirectory(root, entries: entries)
    scaleRows.append(try scaleRow(root, entries: entries))
    try? FileManager.default.removeItem(atPath: root)
}
let (largestRow, compaction) = try largestScale()
scaleRows.append(largestRow)
let instructions = try instructionCounts(in: "\(runRoot)/instructions")



print(
    "SharedCache benchmark: \(ProcessInfo.processInfo.activeProcessorCount) CPUs, "
        + "\(options.quick ? "quick run" : "full run"), floor and cache interleaved op by op, directory \(base)")
print("")
print("| workload | floor p50 µs | SharedCache p50 µs | p99 µs | ops/s | ratio (p50) | target |")
print("|---|---|---|---|---|---|---|")
for row in rows {
    print(
        "| \(row.workload) | \(format(row.floor.p50Microseconds)) | \(format(row.cache.p50Microseconds)) | "
            + "\(format(row.cache.p99Microseconds)) | \(formatRate(row.cache.operationsPerSecond)) | "
            + "\(String(format: "%.2f×", row.ratio)) | ≤ \(row.target == 1.5 ? "1.5" : "\(Int(row.target))")× |")
}
print("")
print("| open a cache of \(openEntries) entries | ms | target |")
print("|---|---|---|")
print("| journal only (no checkpoint yet) | \(format(opening.journal)) | |")
print("| after a checkpoint (manifest) | \(format(opening.manifest)) | ≤ 150 ms at 100,000 |")
print("")
print("| removal notification across processes, \(notifications) removals | p50 µs | p99 µs | target |")
print("|---|---|---|---|")
if let floor = notification.floor {
    print("| \(floor.name) | \(format(floor.p50Microseconds)) | \(format(floor.p99Microseconds)) | |")
}
let cacheNotification = notification.cache
print(
    "| \(cacheNotification.name) | \(format(cacheNotification.p50Microseconds)) | "
        + "\(format(cacheNotification.p99Microseconds)) | p50 ≤ 100, p99 ≤ 1000 |")
print("")
print(
    "An idle subscriber process used \(format(Double(idleCPU) / 1000)) ms of CPU in \(Int(idleSeconds)) s "
        + "(one journal check per second; the fallback poll interval bounds a missed wake-up to 1 s).")
print("")
printHTTP(http, requests: httpRequests)
print("")
printPeer()
print("")
printScale(scaleRows, instructions: instructions)
print("")
printCompaction(compaction)
print("")
print(
    "Manifest: \(opening.manifestBytes) bytes for \(openEntries) entries "
        + "(\(opening.manifestBytes / max(1, openEntries)) B/entry). "
        + "CRC32C \(crcMode()): \(String(format: "%.1f", crcGigabytesPerSecond())) GB/s.")
let keyHashing = SharedCacheDiagnostics.keyHashNanoseconds(keyName(12345))
print(
    "SHA-256 of a \(keyName(12345).utf8.count)-byte key (every call hashes its key): "
        + "\(String(format: "%.0f", keyHashing.chosen)) ns \(SharedCacheDiagnostics.sha256IsHardwareAccelerated ? "with SHA-NI" : "portable"), "
        + "\(String(format: "%.0f", keyHashing.portable)) ns portable. (callgrind cannot run SHA-NI, so the "
        + "instruction counts above use the portable code.)")

/// SharedCache next to python-diskcache.
@MainActor func printPeer() {
    func speedUp(_ peer: Double, _ ours: Double) -> String { String(format: "%.1f×", peer / ours) }
    let compared = rows.filter { $0.peer != nil }
    if compared.isEmpty {
        print("(diskcache rows not run: Tools/bench/run runs them, or --peer PYTHON with diskcache installed.)")
    } else {
        print("| same work, interleaved op by op | diskcache 5.6.3 p50 µs | p99 µs | SharedCache p50 µs | p99 µs | faster by (p50) | target |")
        print("|---|---|---|---|---|---|---|")
        for row in compared {
            let peer = row.peer!
            let target = row.workload.hasPrefix("get") ? "≥ 4×" : "≥ 3×"
            print("| \(row.workload) (SharedCache from disk) | \(format(peer.p50Microseconds)) | \(format(peer.p99Microseconds)) "
                + "| \(format(row.cache.p50Microseconds)) | \(format(row.cache.p99Microseconds)) "
                + "| \(speedUp(peer.p50Microseconds, row.cache.p50Microseconds)) | \(target) |")
            if row.workload == "get 1 KB", let defaultGet {
                print("| get 1 KB (SharedCache as configured by default: 16 MB memory tier) | \(format(peer.p50Microseconds)) "
                    + "| \(format(peer.p99Microseconds)) | \(format(defaultGet.p50Microseconds)) | \(format(defaultGet.p99Microseconds)) "
                    + "| \(speedUp(peer.p50Microseconds, defaultGet.p50Microseconds)) | ≥ 4× |")
            }
        }
    }
    print("")
    printMixed(mixed)
}


if let json = options.json {
    struct Report: Codable {
        var rows: [Row]
        var openEntries: Int
        var openFromJournalMilliseconds: Double
        var openFromManifestMilliseconds: Double
        var manifestBytes: Int
        var notificationFloor: Measurement?
        var notification: Measurement
        var idleSubscriberCPUMicroseconds: Int
        var idleSeconds: Double
        var compaction: CompactionMeasurement
        var http: HTTPMeasurement?
        var defaultGet: Measurement?
        var mixed: MixedRuns
        var scale: [ScaleMeasurement]
        var instructions: InstructionCounts?
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let report = Report(
        rows: rows, openEntries: openEntries, openFromJournalMilliseconds: opening.journal,
        openFromManifestMilliseconds: opening.manifest, manifestBytes: opening.manifestBytes,
        notificationFloor: notification.floor, notification: notification.cache,
        idleSubscriberCPUMicroseconds: idleCPU, idleSeconds: idleSeconds, compaction: compaction, http: http,
        defaultGet: defaultGet,
        mixed: mixed, scale: scaleRows,
        instructions: instructions)
    try encoder.encode(report).write(to: URL(fileURLWithPath: json))
}
