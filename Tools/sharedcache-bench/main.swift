// sharedcache-bench: SharedCache next to the physical floor of the same work, in one run.
//
//   swift run -c release sharedcache-bench [--quick] [--dir DIR] [--json FILE]
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
            case "--dir": directory = value()
            case "--json": json = value()
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
    let text = "usage: sharedcache-bench [--quick] [--dir DIR] [--json FILE]\n"
    if let problem {
        FileHandle.standardError.write(Data("sharedcache-bench: \(problem)\n\(text)".utf8))
        exit(64)
    }
    print(text, terminator: "")
    exit(0)
}

// MARK: - Timing

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

struct Measurement: Codable {
    var name: String
    var operations: Int
    var p50Microseconds: Double
    var p99Microseconds: Double
    var operationsPerSecond: Double
}

/// Times `floor(i)` and `cache(i)` alternately for i in 0..<count, one call at a time, so both
/// see the same machine: on a shared VM the filesystem's speed drifts by several times within
/// a minute, and timing one after the other would compare two different machines.
func measurePair(
    _ name: String, count: Int, floor: (Int) throws -> Void, cache: (Int) throws -> Void
) rethrows -> (floor: Measurement, cache: Measurement) {
    var floorSamples = [UInt64](repeating: 0, count: count)
    var cacheSamples = [UInt64](repeating: 0, count: count)
    for index in 0..<count {
        var before = now()
        try floor(index)
        floorSamples[index] = now() - before
        before = now()
        try cache(index)
        cacheSamples[index] = now() - before
    }
    return (summarize("floor: \(name)", floorSamples), summarize("SharedCache \(name)", cacheSamples))
}

func summarize(_ name: String, _ samples: [UInt64]) -> Measurement {
    let sorted = samples.sorted()
    func percentile(_ p: Double) -> Double {
        Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
    }
    return Measurement(
        name: name, operations: sorted.count, p50Microseconds: percentile(0.5), p99Microseconds: percentile(0.99),
        operationsPerSecond: Double(sorted.count) / (Double(sorted.reduce(0, +)) / 1e9))
}

func check(_ result: Int32, _ what: String) {
    if result < 0 { fatalError("\(what): \(String(cString: strerror(errno)))") }
}

// MARK: - Workloads

func keyName(_ index: Int) -> String { "https://example.com/assets/\(index)/image.png" }

/// Puts of new keys, next to the floor: create + write + close + rename to a fresh name in a
/// fan-out folder, then one 120-byte O_APPEND record.
func putWorkload(in root: String, cache: SharedCache, size: Int, count: Int) throws -> (Measurement, Measurement) {
    let bytes = [UInt8](repeating: 0x5A, count: size)
    let body = Data(bytes)
    let record = [UInt8](repeating: 0x11, count: 120)
    try FileManager.default.createDirectory(atPath: "\(root)/tmp", withIntermediateDirectories: true)
    for index in 0..<256 { mkdir("\(root)/\(String(format: "%02x", index))", 0o700) }
    let journal = open("\(root)/journal", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    check(journal, "journal")
    defer { close(journal) }
    let names = (0..<count).map { index in
        ("\(root)/tmp/\(index)", "\(root)/\(String(format: "%02x", index % 256))/\(String(format: "%064x", index))")
    }
    let keys = (0..<count).map(keyName)
    return try measurePair(
        "put", count: count,
        floor: { index in
            let (temporary, final) = names[index]
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, size) }
            close(fd)
            rename(temporary, final)
            _ = record.withUnsafeBytes { write(journal, $0.baseAddress, 120) }
        },
        cache: { index in
            try cache.put(key: keys[index], data: body, metadata: EntryMetadata(etag: "\"v\(index)\""))
        })
}

/// Gets in random order over the keys the put workload stored, next to the floor: open +
/// pread + close of the files the floor put wrote.
func getWorkload(in root: String, cache: SharedCache, size: Int, count: Int, reads: Int) throws -> (
    Measurement, Measurement
) {
    let order = (0..<reads).map { _ in Int.random(in: 0..<count) }
    let paths = (0..<count).map { "\(root)/\(String(format: "%02x", $0 % 256))/\(String(format: "%064x", $0))" }
    let keys = (0..<count).map(keyName)
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: size + 4096, alignment: 16)
    defer { buffer.deallocate() }
    return try measurePair(
        "get", count: reads,
        floor: { index in
            let fd = open(paths[order[index]], O_RDONLY | O_CLOEXEC)
            _ = pread(fd, buffer, size + 4096, 0)
            close(fd)
        },
        cache: { index in
            guard try cache.get(key: keys[order[index]]) != nil else { fatalError("benchmark key missing") }
        })
}

/// Fills a cache with `count` tiny entries, then times opening it from the journal alone and
/// from a checkpointed manifest.
func openTimes(in root: String, count: Int) throws -> (journal: Double, manifest: Double, manifestBytes: Int) {
    let cache = try SharedCache(directory: root, configuration: Configuration(sizeLimit: 0))
    let body = Data(repeating: 1, count: 16)
    for index in 0..<count { try cache.put(key: keyName(index), data: body) }
    func timeOpen() throws -> Double {
        let start = now()
        let opened = try SharedCache(directory: root)
        let entries = try opened.statistics().entryCount
        precondition(entries == count)
        return Double(now() - start) / 1e6
    }
    let fromJournal = try (0..<3).map { _ in try timeOpen() }.sorted()[1]
    let summary = try cache.checkpoint()
    let fromManifest = try (0..<3).map { _ in try timeOpen() }.sorted()[1]
    return (fromJournal, fromManifest, summary.manifestBytes)
}

// MARK: - Main

let options = Options(CommandLine.arguments.dropFirst())
let base = options.directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("sharedcache-bench").path
let runRoot = "\(base)/run-\(getpid())"
try FileManager.default.createDirectory(atPath: runRoot, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: runRoot) }

struct Row: Codable {
    var workload: String
    var floor: Measurement
    var cache: Measurement
    var ratio: Double
    var target: Double
}

var rows: [Row] = []
let scale = options.quick ? 10 : 1
let workloads: [(size: Int, keys: Int)] = [(1024, 20_000 / scale), (100 * 1024, 2_000 / scale)]

for (size, keys) in workloads {
    let label = size >= 1024 * 100 ? "100 KB" : "1 KB"
    let root = "\(runRoot)/\(size)"
    let cache = try SharedCache(directory: "\(root)/cache", configuration: Configuration(sizeLimit: 0))
    let (floorPut, cachePut) = try putWorkload(in: "\(root)/floor", cache: cache, size: size, count: keys)
    let (floorGet, cacheGet) = try getWorkload(
        in: "\(root)/floor", cache: cache, size: size, count: keys, reads: keys * 5)
    rows.append(
        Row(
            workload: "put \(label), no fsync", floor: floorPut, cache: cachePut,
            ratio: cachePut.p50Microseconds / floorPut.p50Microseconds, target: 2))
    rows.append(
        Row(
            workload: "get \(label)", floor: floorGet, cache: cacheGet,
            ratio: cacheGet.p50Microseconds / floorGet.p50Microseconds, target: 2))
    try? FileManager.default.removeItem(atPath: root)
}

let openEntries = 100_000 / scale
let opening = try openTimes(in: "\(runRoot)/open", count: openEntries)

/// CRC32C throughput over a 100 KB buffer: what checking a body costs per byte.
let crcGigabytesPerSecond: Double = {
    let buffer = [UInt8](repeating: 0xA5, count: 100 * 1024)
    var sink: UInt32 = 0
    let start = now()
    for _ in 0..<2000 { sink &+= buffer.withUnsafeBytes { SharedCacheDiagnostics.crc32c($0) } }
    let seconds = Double(now() - start) / 1e9
    precondition(sink != 1)
    return Double(buffer.count * 2000) / seconds / 1e9
}()

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
            + "\(String(format: "%.2f×", row.ratio)) | ≤ \(Int(row.target))× |")
}
print("")
print("| open a cache of \(openEntries) entries | ms | target |")
print("|---|---|---|")
print("| journal only (no checkpoint yet) | \(format(opening.journal)) | |")
print("| after a checkpoint (manifest) | \(format(opening.manifest)) | ≤ 150 ms at 100,000 |")
print("")
print(
    "Manifest: \(opening.manifestBytes) bytes for \(openEntries) entries "
        + "(\(opening.manifestBytes / max(1, openEntries)) B/entry). "
        + "CRC32C \(crcMode()): \(String(format: "%.1f", crcGigabytesPerSecond)) GB/s.")

func crcMode() -> String { SharedCacheDiagnostics.crc32cIsHardwareAccelerated ? "in hardware" : "by table" }

if let json = options.json {
    struct Report: Codable {
        var rows: [Row]
        var openEntries: Int
        var openFromJournalMilliseconds: Double
        var openFromManifestMilliseconds: Double
        var manifestBytes: Int
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let report = Report(
        rows: rows, openEntries: openEntries, openFromJournalMilliseconds: opening.journal,
        openFromManifestMilliseconds: opening.manifest, manifestBytes: opening.manifestBytes)
    try encoder.encode(report).write(to: URL(fileURLWithPath: json))
}
