import Foundation
import SharedCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The tables the benchmark prints, in the README's form.

/// One workload of the per-operation table: SharedCache and the same operations on the same keys,
/// in turns.
struct Row: Codable {
    var workload: String
    /// The floor in one file for all keys (`Tools/bench/floors.c`, with `--floors`): a get is one
    /// `pread` of the value from an open file, a put one `write` of it with `O_APPEND`.
    var packedFloor: Measurement?
    /// The floor in a file per key (with `--floors`): a get is `open` + `pread` + `close`, a put
    /// create + `write` + `close` + `rename` into place.
    var filePerKeyFloor: Measurement?
    /// For a put (with `--floors`): the system calls SharedCache's put makes, alone, in C: a
    /// `pwrite` of the record, then under the journal's shared `flock` one append and an `lseek`.
    var systemCalls: Measurement?
    var cache: Measurement
    /// python-diskcache doing the same operations (with `--peer`).
    var peer: Measurement?
}

/// One of issue 15's targets, as this run measured it: a ratio of p50s.
struct Target: Codable {
    var name: String
    /// `nil` if a side of it did not run (no `--floors`, or no `--peer`).
    var measured: Double?
    /// "≤" or "≥".
    var relation: String
    var bound: Double
    var met: Bool?
    /// For a speed-up over diskcache: the floor's own, the most any design reading or writing
    /// the disk could reach in this run.
    var ceiling: Double?

    init(_ name: String, _ measured: Double?, _ relation: String, _ bound: Double, ceiling: Double? = nil) {
        (self.name, self.measured, self.relation, self.bound, self.ceiling) = (name, measured, relation, bound, ceiling)
        met = measured.map { relation == "≤" ? $0 <= bound : $0 >= bound }
    }
}

/// The targets the per-operation rows are held to: SharedCache within a small multiple of the
/// operation's floor, and many times faster than diskcache.
func targets(_ rows: [Row], defaultGet: Measurement) -> [Target] {
    func row(_ workload: String) -> Row { rows.first { $0.workload == workload }! }
    func overFloor(_ workload: String) -> Double? {
        let row = row(workload)
        return row.packedFloor.map { row.cache.p50Microseconds / $0.p50Microseconds }
    }
    func speedUp(_ workload: String, _ ours: Measurement? = nil) -> Double? {
        let row = row(workload)
        return row.peer.map { $0.p50Microseconds / (ours ?? row.cache).p50Microseconds }
    }
    func ceiling(_ workload: String) -> Double? {
        let row = row(workload)
        guard let peer = row.peer, let floor = row.packedFloor else { return nil }
        return peer.p50Microseconds / floor.p50Microseconds
    }
    return [
        Target("get 1 KB: SharedCache ÷ floor (pread)", overFloor("get 1 KB"), "≤", 2),
        Target("get 1 KB, turns of one operation: SharedCache ÷ floor (pread)", overFloor(oneByOneGet), "≤", 2),
        Target(
            "put 1 KB, no fsync: SharedCache ÷ floor (write with O_APPEND)", overFloor("put 1 KB, no fsync"), "≤", 3),
        Target(
            "get 1 KB: diskcache ÷ SharedCache (from disk)", speedUp("get 1 KB"), "≥", 10, ceiling: ceiling("get 1 KB")),
        Target(
            "get 1 KB, turns of one operation: diskcache ÷ SharedCache", speedUp(oneByOneGet), "≥", 10,
            ceiling: ceiling(oneByOneGet)),
        Target(
            "get 1 KB: diskcache ÷ SharedCache (as configured by default: 16 MB memory tier)",
            speedUp("get 1 KB", defaultGet), "≥", 10),
        Target(
            "put 1 KB, no fsync: diskcache ÷ SharedCache", speedUp("put 1 KB, no fsync"), "≥", 20,
            ceiling: ceiling("put 1 KB, no fsync")),
        Target(
            "get 100 KB: diskcache ÷ SharedCache (from disk)", speedUp("get 100 KB"), "≥", 4,
            ceiling: ceiling("get 100 KB")),
        Target(
            "put 100 KB, no fsync: diskcache ÷ SharedCache", speedUp("put 100 KB, no fsync"), "≥", 3,
            ceiling: ceiling("put 100 KB, no fsync")),
    ]
}

/// The per-operation table, then its targets.
func printOperations(_ rows: [Row], defaultGet: Measurement, targets: [Target]) {
    func p50(_ measurement: Measurement?) -> String { measurement.map { format($0.p50Microseconds) } ?? "–" }
    print(
        "| workload, in turns of \(steadyBatch) operations | floor: one file p50 µs | floor: file per key p50 µs | SharedCache p50 µs "
            + "| p99 µs | ops/s | diskcache 5.6.3 p50 µs | p99 µs |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows {
        print(
            "| \(row.workload) | \(p50(row.packedFloor)) | \(p50(row.filePerKeyFloor)) | \(p50(row.cache)) "
                + "| \(format(row.cache.p99Microseconds)) | \(formatRate(row.cache.operationsPerSecond)) "
                + "| \(p50(row.peer)) | \(row.peer.map { format($0.p99Microseconds) } ?? "–") |")
    }
    print(
        "| get 1 KB, as configured by default (16 MB memory tier) | | | \(p50(defaultGet)) "
            + "| \(format(defaultGet.p99Microseconds)) | \(formatRate(defaultGet.operationsPerSecond)) | | |")
    print("")
    if rows.first?.packedFloor == nil {
        print("(Floors not run: Tools/bench/run builds Tools/bench/floors.c and passes it, or --floors PATH.)")
    } else {
        print(
            "Floors (Tools/bench/floors.c, timed in its own process): in one file, a get is one pread of the "
                + "value from an open file of all keys, a put one write of it with O_APPEND; in a file per key, "
                + "a get is open + pread + close, a put create + write + close + rename into place. No fsync.")
    }
    for row in rows {
        guard let calls = row.systemCalls else { continue }
        print(
            "\(row.workload): the same system calls alone, in C (pwrite of the record; flock, write of a "
                + "154-byte journal record, lseek, flock): p50 \(format(calls.p50Microseconds)) µs, the rest of "
                + "SharedCache's \(format(row.cache.p50Microseconds)) µs is its own work.")
    }
    if rows.first?.peer == nil {
        print("(diskcache not run: Tools/bench/run runs it, or --peer PYTHON with diskcache installed.)")
    }
    print("")
    print("| target, p50 ÷ p50 in this run | measured | target | met | the floor's own (ceiling from disk) |")
    print("|---|---|---|---|---|")
    for target in targets {
        let measured = target.measured.map { String(format: "%.2f×", $0) } ?? "not run"
        let met = target.met.map { $0 ? "yes" : "no" } ?? ""
        let ceiling = target.ceiling.map { String(format: "%.2f×", $0) } ?? ""
        print(
            "| \(target.name) | \(measured) | \(target.relation) \(String(format: "%g", target.bound))× | \(met) "
                + "| \(ceiling) |")
    }
}

/// The compaction table.
func printCompaction(_ compaction: CompactionMeasurement) {
    print("| compaction pass, \(compaction.entries) entries, evicting \(compaction.evicted) | value | target |")
    print("|---|---|---|")
    print("| open the cache (load the index) | \(format(compaction.openMilliseconds)) ms | |")
    print(
        "| pass: plan, journal, checkpoint, reclaim the segments (space given back included) | "
            + "\(format(compaction.passMilliseconds)) ms | ≤ 2000 ms at 1,000,000 |")
    print(
        "| segments deleted; live entries moved out of them first; bytes given back | "
            + "\(compaction.segmentsRetired); \(compaction.entriesMoved); "
            + "\(format(Double(compaction.bytesReclaimed) / 1e6)) MB | |")
    print(
        "| a file per entry instead: unlink as many same-size files | "
            + "\(format(compaction.unlinkFloorMilliseconds)) ms | |")
    print("| orphan sweep (blob files and pack folders) | \(format(compaction.orphanSweepMilliseconds)) ms | |")
    print("| peak resident memory of the compactor | \(format(compaction.peakResidentMegabytes)) MB | ≤ 200 MB |")
    print("| checkpoint (manifest) size | \(format(compaction.manifestBytesPerEntry)) B/entry | |")
}

/// The HTTP table.
func printHTTP(_ http: HTTPMeasurement?, requests httpRequests: Int) {
    if let http {
        let added = http.revalidatedFetch.p50Microseconds - http.bareConditional.p50Microseconds
        let share = added / http.bareConditional.p50Microseconds * 100
        print(
            "| HTTP against nginx on loopback, 1 KB, \(httpRequests) requests | p50 µs | p99 µs | added (p50) | target |"
        )
        print("|---|---|---|---|---|")
        print(
            "| URLSession alone: conditional GET, 304 | \(format(http.bareConditional.p50Microseconds)) | "
                + "\(format(http.bareConditional.p99Microseconds)) | | |")
        print(
            "| fetch, revalidated (pin, 304, freshen, serve) | \(format(http.revalidatedFetch.p50Microseconds)) | "
                + "\(format(http.revalidatedFetch.p99Microseconds)) | \(format(added)) µs = \(String(format: "%.0f", share)) % "
                + "| ≤ 10 % or ≤ 100 µs |")
        print(
            "| get (memory tier) | \(format(http.plainGet.p50Microseconds)) | \(format(http.plainGet.p99Microseconds)) | | |"
        )
        print(
            "| fetch, fresh hit | \(format(http.freshFetch.p50Microseconds)) | \(format(http.freshFetch.p99Microseconds)) | "
                + "\(format(http.freshFetch.p50Microseconds - http.plainGet.p50Microseconds)) µs | |")
        print(
            "| get 1 KB from disk | \(format(http.diskGet.p50Microseconds)) | \(format(http.diskGet.p99Microseconds)) | | |"
        )
        print(
            "| get 1 KB from the memory tier | \(format(http.memoryGet.p50Microseconds)) | \(format(http.memoryGet.p99Microseconds)) | | |"
        )
    } else {
        print("(HTTP rows skipped: /usr/sbin/nginx is not installed; apt-get install nginx-light)")
    }
}

/// The 8-process table: the floors, diskcache (when measured) and SharedCache.
func printMixed(_ runs: MixedRuns) {
    print(
        "| \(mixedProcesses) processes at once, 90 % get / 10 % put of 1 KB over \(mixedKeys) keys | ops/s (all processes) "
            + "| p50 µs | p99 µs | p99.9 µs | max µs | over 1 ms | target |")
    print("|---|---|---|---|---|---|---|---|")
    func mixedLine(_ name: String, _ run: MixedMeasurement, _ target: String) {
        print(
            "| \(name) | \(formatRate(run.operationsPerSecond)) | \(format(run.p50Microseconds)) | \(format(run.p99Microseconds)) "
                + "| \(format(run.p999Microseconds)) | \(format(run.maxMicroseconds)) "
                + "| \(String(format: "%.3f %%", run.overOneMillisecondFraction * 100)) | \(target) |")
    }
    mixedLine("floor: the operations alone (get: pread from an open file; put: one O_APPEND write)", runs.floor, "")
    mixedLine(
        "scheduler: each operation only keeps the CPU busy for SharedCache's p50 (\(format(runs.sharedCache.p50Microseconds)) µs)",
        runs.scheduler, "")
    mixedLine(
        "scheduler, the same CPU per process: each operation keeps it busy for SharedCache's mean below its p99 "
            + "(\(format(runs.sharedCache.meanBelowP99Microseconds)) µs)", runs.schedulerSameCPU, "")
    if let diskcache = runs.diskcache { mixedLine("diskcache", diskcache, "") }
    let ratio =
        runs.diskcache.map {
            String(format: ", %.1f× diskcache's ops/s", runs.sharedCache.operationsPerSecond / $0.operationsPerSecond)
        } ?? ""
    mixedLine(
        "SharedCache\(ratio)", runs.sharedCache, "≥ 5× diskcache's ops/s; p99.9 ≤ 2× the scheduler's (the same CPU)")
    let cores = runs.sharedCacheOnePerCore.processes
    mixedLine(
        "SharedCache with \(cores) processes, one per core (4× the operations each)", runs.sharedCacheOnePerCore, "")
    mixedLine(
        "a put's system calls alone before format 3.0 (pwrite of the record; flock, statx, O_APPEND write of the "
            + "journal record, flock), the journal locked exclusively", runs.putCallsExclusive, "")
    mixedLine(
        "a put's system calls alone as SharedCache's puts make them (pwrite of the record; flock, O_APPEND write of "
            + "the journal record, lseek, flock), the journal locked shared: no put waits for another",
        runs.putCallsShared, "")
    let (sharedCache, scheduler) = (runs.sharedCache, runs.schedulerSameCPU)
    print(
        String(
            format: "Operations over 1 ms (a preemption landed in them): SharedCache %.3f %%, the same-CPU scheduler "
                + "floor %.3f %% (%.2f×); the p99.9 is one of them when more than 0.1 %% are.",
            sharedCache.overOneMillisecondFraction * 100, scheduler.overOneMillisecondFraction * 100,
            sharedCache.overOneMillisecondFraction / max(scheduler.overOneMillisecondFraction, 1e-9)))
}

/// Cost per operation, open time and memory as the directory grows; instructions per operation.
func printScale(_ scaleRows: [ScaleMeasurement], instructions: InstructionCounts?) {
    print(
        "| entries (100 B each) | open ms | resident B/entry | get p50 µs | get floor | get ÷ floor | put p50 µs | put floor | put ÷ floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    func getRatio(_ row: ScaleMeasurement) -> Double { row.get.p50Microseconds / row.getFloor.p50Microseconds }
    func putRatio(_ row: ScaleMeasurement) -> Double { row.put.p50Microseconds / row.putFloor.p50Microseconds }
    for row in scaleRows {
        print(
            "| \(row.entries) | \(format(row.openMilliseconds)) | \(format(row.residentBytesPerEntry)) "
                + "| \(format(row.get.p50Microseconds)) | \(format(row.getFloor.p50Microseconds)) | \(String(format: "%.2f", getRatio(row))) "
                + "| \(format(row.put.p50Microseconds)) | \(format(row.putFloor.p50Microseconds)) | \(String(format: "%.2f", putRatio(row))) |"
        )
    }
    if let first = scaleRows.first, let last = scaleRows.last {
        print("")
        print(
            "From \(first.entries) to \(last.entries) entries, against the floor in the same folders: "
                + "get \(String(format: "%.2f×", getRatio(last) / getRatio(first))), "
                + "put \(String(format: "%.2f×", putRatio(last) / putRatio(first))) (target ≤ 1.5×); "
                + "unnormalised: get \(String(format: "%.2f×", last.get.p50Microseconds / first.get.p50Microseconds)), "
                + "put \(String(format: "%.2f×", last.put.p50Microseconds / first.put.p50Microseconds)); "
                + "open \(format(last.openMilliseconds)) ms (target ≤ 300 ms at 1,000,000); "
                + "\(format(last.residentBytesPerEntry)) B/entry resident (target ≤ 150).")
    }
    if let instructions {
        print(
            "Instructions per operation (callgrind, 1 KB, memory tier off): get \(Int(instructions.get)), put \(Int(instructions.put))."
        )
    } else {
        print("(Instruction counts skipped: valgrind is not installed.)")
    }
}

func format(_ value: Double) -> String { String(format: value < 10 ? "%.2f" : "%.1f", value) }
func formatRate(_ value: Double) -> String {
    value >= 1000 ? String(format: "%.0fk", value / 1000) : String(format: "%.0f", value)
}

func crcMode() -> String { SharedCacheDiagnostics.crc32cIsHardwareAccelerated ? "in hardware" : "by table" }
