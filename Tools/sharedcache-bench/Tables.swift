import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The tables the benchmark prints, in the README's form.

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
func printHTTP(_ http: HTTPMeasurement?, requests httpRequests: Int) {
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
func printScale(_ scaleRows: [ScaleMeasurement], instructions: InstructionCounts?) {
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

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }
func formatRate(_ value: Double) -> String {
    value >= 1000 ? String(format: "%.0fk", value / 1000) : String(format: "%.0f", value)
}

func crcMode() -> String { SharedCacheDiagnostics.crc32cIsHardwareAccelerated ? "in hardware" : "by table" }
