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

struct Options {
    var quick = false
    var directory: String? = nil
    var json: String? = nil
    var compactionOnly = false
    var httpOnly = false
    var mixedOnly = false
    var peer: String? = nil

    init(_ arguments: ArraySlice<String>) {
        var arguments = arguments
        while let argument = arguments.popFirst() {
            let (name, inline) = argument.split(separator: "=", maxSplits: 1).map(String.init).pair
            func value() -> String {
                if let inline { return inline }
                guard let next = arguments.popFirst() else { usage("\(name) needs a value") }
                return next
            }
            switch name {
            case "--quick": quick = true
            case "--compaction-only": compactionOnly = true
            case "--http-only": httpOnly = true
            case "--mixed-only": mixedOnly = true
            case "--dir": directory = value()
            case "--json": json = value()
            case "--peer": peer = value()
            case "-h", "--help": usage(nil)
            default: usage("unknown option \(argument)")
            }
        }
    }
}

extension Array where Element == String {
    var pair: (String, String?) { (self[0], count > 1 ? self[1] : nil) }
}

func usage(_ problem: String?) -> Never {
    let text =
        "usage: sharedcache-bench [--quick] [--compaction-only | --http-only | --mixed-only] [--peer PYTHON] [--dir DIR] [--json FILE]\n"
    if let problem {
        FileHandle.standardError.write(Data("sharedcache-bench: \(problem)\n\(text)".utf8))
        exit(64)
    }
    print(text, terminator: "")
    exit(0)
}

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

struct Row: Codable {
    var workload: String
    var floor: Measurement
    var cache: Measurement
    /// python-diskcache doing the same operations, interleaved with these (with `--peer`).
    var peer: Measurement?
    var ratio: Double
    var target: Double
}

/// The compaction table.
func printCompaction(_ compaction: CompactionMeasurement) {
    print("| compaction pass, \(compaction.entries) entries, evicting \(compaction.evicted) | value | target |")
    print("|---|---|---|")
    print("| open the cache (load the index) | \(format(compaction.openMilliseconds)) ms | |")
    print(
        "| pass: plan, journal, checkpoint | \(format(compaction.passMilliseconds)) ms | ≤ 3000 ms at 1,000,000 |")
    print("| then unlink the evicted blobs | \(format(compaction.unlinkMilliseconds)) ms | |")
    print("| floor: unlink as many same-size files | \(format(compaction.unlinkFloorMilliseconds)) ms | |")
    print("| orphan sweep of every blob file | \(format(compaction.orphanSweepMilliseconds)) ms | |")
    print("| peak resident memory of the compactor | \(format(compaction.peakResidentMegabytes)) MB | ≤ 200 MB |")
    print("| checkpoint (manifest) size | \(format(compaction.manifestBytesPerEntry)) B/entry | |")
}

/// The HTTP table.
func printHTTP(_ http: HTTPMeasurement?) {
    if let http {
        let added = http.revalidatedFetch.p50Microseconds - http.bareConditional.p50Microseconds
        let share = added / http.bareConditional.p50Microseconds * 100
        print("| HTTP against nginx on loopback, 1 KB, \(httpRequests) requests | p50 µs | p99 µs | added (p50) | target |")
        print("|---|---|---|---|---|")
        print(
            "| URLSession alone: conditional GET, 304 | \(format(http.bareConditional.p50Microseconds)) | "
                + "\(format(http.bareConditional.p99Microseconds)) | | |")
        print(
            "| fetch, revalidated (pin, 304, freshen, serve) | \(format(http.revalidatedFetch.p50Microseconds)) | "
                + "\(format(http.revalidatedFetch.p99Microseconds)) | \(format(added)) µs = \(String(format: "%.0f", share)) % "
                + "| ≤ 10 % or ≤ 100 µs |")
        print("| get (memory tier) | \(format(http.plainGet.p50Microseconds)) | \(format(http.plainGet.p99Microseconds)) | | |")
        print(
            "| fetch, fresh hit | \(format(http.freshFetch.p50Microseconds)) | \(format(http.freshFetch.p99Microseconds)) | "
                + "\(format(http.freshFetch.p50Microseconds - http.plainGet.p50Microseconds)) µs | |")
        print("| get 1 KB from disk | \(format(http.diskGet.p50Microseconds)) | \(format(http.diskGet.p99Microseconds)) | | |")
        print("| get 1 KB from the memory tier | \(format(http.memoryGet.p50Microseconds)) | \(format(http.memoryGet.p99Microseconds)) | | |")
    } else {
        print("(HTTP rows skipped: /usr/sbin/nginx is not installed; apt-get install nginx-light)")
    }
}

let scale = options.quick ? 10 : 1
let compactionEntries = options.quick ? 100_000 : 1_000_000
let httpRequests = options.quick ? 300 : 3000
if options.httpOnly {
    printHTTP(try httpWorkloads(in: "\(runRoot)/http", requests: httpRequests))
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
    let peer = try options.peer.map { try PeerServer(python: $0, directory: "\(root)/diskcache", size: size) }
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

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }
func formatRate(_ value: Double) -> String {
    value >= 1000 ? String(format: "%.0fk", value / 1000) : String(format: "%.0f", value)
}

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
printHTTP(http)
print("")
printPeer()
print("")
printScale()
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

/// The 8-process table: the floors, diskcache (when measured) and SharedCache.
func printMixed(_ runs: MixedRuns) {
    print("| \(mixedProcesses) processes at once, 90 % get / 10 % put of 1 KB over \(mixedKeys) keys | ops/s (all processes) "
        + "| p50 µs | p99 µs | p99.9 µs | max µs | target |")
    print("|---|---|---|---|---|---|---|")
    func mixedLine(_ name: String, _ run: MixedMeasurement, _ target: String) {
        print("| \(name) | \(formatRate(run.operationsPerSecond)) | \(format(run.p50Microseconds)) | \(format(run.p99Microseconds)) "
            + "| \(format(run.p999Microseconds)) | \(format(run.maxMicroseconds)) | \(target) |")
    }
    mixedLine("floor: the same syscalls alone (open + pread + close; create + write + rename + append)", runs.floor, "")
    mixedLine(
        "scheduler: each operation only keeps the CPU busy for SharedCache's p50 (\(format(runs.sharedCache.p50Microseconds)) µs)",
        runs.scheduler, "")
    if let diskcache = runs.diskcache { mixedLine("diskcache", diskcache, "") }
    let ratio = runs.diskcache.map { String(format: ", %.1f× diskcache's ops/s", runs.sharedCache.operationsPerSecond / $0.operationsPerSecond) } ?? ""
    mixedLine("SharedCache\(ratio)", runs.sharedCache, "≥ 2× ops/s, p99.9 ≤ 5000 µs")
    let cores = runs.sharedCacheOnePerCore.processes
    mixedLine("SharedCache with \(cores) processes, one per core (4× the operations each)", runs.sharedCacheOnePerCore, "")
}

/// Cost per operation, open time and memory as the directory grows; instructions per operation.
@MainActor func printScale() {
    print("| entries (100 B each) | open ms | resident B/entry | get p50 µs | get floor | get ÷ floor | put p50 µs | put floor | put ÷ floor |")
    print("|---|---|---|---|---|---|---|---|---|")
    func getRatio(_ row: ScaleMeasurement) -> Double { row.get.p50Microseconds / row.getFloor.p50Microseconds }
    func putRatio(_ row: ScaleMeasurement) -> Double { row.put.p50Microseconds / row.putFloor.p50Microseconds }
    for row in scaleRows {
        print("| \(row.entries) | \(format(row.openMilliseconds)) | \(format(row.residentBytesPerEntry)) "
            + "| \(format(row.get.p50Microseconds)) | \(format(row.getFloor.p50Microseconds)) | \(String(format: "%.2f", getRatio(row))) "
            + "| \(format(row.put.p50Microseconds)) | \(format(row.putFloor.p50Microseconds)) | \(String(format: "%.2f", putRatio(row))) |")
    }
    if let first = scaleRows.first, let last = scaleRows.last {
        print("")
        print("From \(first.entries) to \(last.entries) entries, against the floor in the same folders: "
            + "get \(String(format: "%.2f×", getRatio(last) / getRatio(first))), "
            + "put \(String(format: "%.2f×", putRatio(last) / putRatio(first))) (target ≤ 1.5×); "
            + "unnormalised: get \(String(format: "%.2f×", last.get.p50Microseconds / first.get.p50Microseconds)), "
            + "put \(String(format: "%.2f×", last.put.p50Microseconds / first.put.p50Microseconds)); "
            + "open \(format(last.openMilliseconds)) ms (target ≤ 500 ms at 1,000,000); "
            + "\(format(last.residentBytesPerEntry)) B/entry resident (target ≤ 150).")
    }
    if let instructions {
        print("Instructions per operation (callgrind, 1 KB, memory tier off): get \(Int(instructions.get)), put \(Int(instructions.put)).")
    } else {
        print("(Instruction counts skipped: valgrind is not installed.)")
    }
}

func crcMode() -> String { SharedCacheDiagnostics.crc32cIsHardwareAccelerated ? "in hardware" : "by table" }

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
