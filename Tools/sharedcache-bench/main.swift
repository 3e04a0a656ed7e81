// sharedcache-bench: SharedCache next to the physical floor of the same work, in one run.
//
//   swift run -c release sharedcache-bench [--quick] [--compaction-only | --http-only | --mixed-only | --operations-only]
//       [--floors FLOORS] [--peer PYTHON] [--dir DIR] [--json FILE]
//   swift run -c release sharedcache-bench --role loop DIR get|put KEYS COUNT   (for a profiler)
//   swift run -c release sharedcache-bench --role http-loop DIR revalidated|bare COUNT
//
// The per-operation rows set each get and put next to the cost of the operation itself, whatever
// the design: the floors of Tools/bench/floors.c (FLOORS, built by Tools/bench/run), in C, in a
// process of their own:
//   in one file: a get is one pread of the value from an open file of all keys, a put one write
//   of it with O_APPEND
//   in a file per key: a get is open + pread + close, a put create + write + close + rename
// and next to python-diskcache (--peer). Each row times operations one by one (monotonic clock),
// SharedCache, the floors and diskcache taking turns, with a warm page cache; it reports p50, p99
// and throughput (ops/s of time spent in the operation itself). The 8-process and scale tables
// keep floors of their own, written here.

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
    case "build-scale":
        try buildScaleDirectory(arguments[0], entries: Int(arguments[1])!)
        exit(0)
    case "scale": try runScale(arguments)
    case "instructions": try runInstructions(arguments)
    case "loop": try runProfileLoop(arguments)
    case "http-loop": try runHTTPProfileLoop(arguments)
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
if options.operationsOnly {
    let (rows, defaultGet) = try operationRows(
        in: runRoot, quick: options.quick, floors: options.floors, peer: options.peer)
    printOperations(rows, defaultGet: defaultGet, targets: targets(rows, defaultGet: defaultGet))
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

let (rows, defaultGet) = try operationRows(
    in: runRoot, quick: options.quick, floors: options.floors, peer: options.peer)
let operationTargets = targets(rows, defaultGet: defaultGet)

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
        + "\(options.quick ? "quick run" : "full run"), floors, cache and peer in turns, directory \(base)")
print("")
printOperations(rows, defaultGet: defaultGet, targets: operationTargets)
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
printMixed(mixed)
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

if let json = options.json {
    struct Report: Codable {
        var rows: [Row]
        var targets: [Target]
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
        var defaultGet: Measurement
        var mixed: MixedRuns
        var scale: [ScaleMeasurement]
        var instructions: InstructionCounts?
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let report = Report(
        rows: rows, targets: operationTargets, openEntries: openEntries, openFromJournalMilliseconds: opening.journal,
        openFromManifestMilliseconds: opening.manifest, manifestBytes: opening.manifestBytes,
        notificationFloor: notification.floor, notification: notification.cache,
        idleSubscriberCPUMicroseconds: idleCPU, idleSeconds: idleSeconds, compaction: compaction, http: http,
        defaultGet: defaultGet,
        mixed: mixed, scale: scaleRows,
        instructions: instructions)
    try encoder.encode(report).write(to: URL(fileURLWithPath: json))
}
