import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform
import SharedCacheTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// 8 processes at once doing 90 % gets and 10 % puts over 10,000 keys: SharedCache, the syscall
// floor, the scheduler's floor, and python-diskcache, each started together and merged.

/// One side of the 8-process run.
struct MixedMeasurement: Codable {
    var processes: Int
    var operations: Int
    var operationsPerSecond: Double
    var p50Microseconds: Double
    var p99Microseconds: Double
    var p999Microseconds: Double
    var maxMicroseconds: Double
    /// The mean of the operations faster than the p99: what one costs the CPU when nothing
    /// preempts it (the slowest waited for other processes' time slices).
    var meanBelowP99Microseconds: Double
    /// The share of operations that took over 1 ms: with 8 processes on fewer cores, those a
    /// preemption landed in (one operation in about a thousand, by the length of a time slice,
    /// so the p99.9 of a CPU-bound operation of a few µs falls on either side of it by chance).
    var overOneMillisecondFraction: Double
}

let mixedKeys = 10_000
let mixedProcesses = 8

/// `--role mixed DIR KEYS OPERATIONS SEED START_AT_NS OUT`: one of the 8 SharedCache processes.
func runMixedWorker(_ arguments: [String]) throws -> Never {
    let (directory, keys, operations) = (arguments[0], Int(arguments[1])!, Int(arguments[2])!)
    var random = SplitMix64(seed: UInt64(arguments[3])!)
    let startAt = UInt64(arguments[4])!
    let cache = try SharedCache(directory: directory)
    let names = (0..<keys).map(keyName)
    let value = Data((0..<1024).map { _ in UInt8.random(in: 0...255, using: &random) })
    try timeOperations(operations, startingAt: startAt, writingTo: arguments[5]) { _ in
        let name = names[Int.random(in: 0..<keys, using: &random)]
        if Int.random(in: 0..<10, using: &random) == 0 {
            try cache.put(key: name, data: value)
        } else {
            _ = try cache.get(key: name)
        }
    }
}

/// Waits until `startAt`, times each of `operations` calls of `body`, writes "START END" and one
/// latency per line to `path` (what ``mixedRun`` merges), and exits.
func timeOperations(
    _ operations: Int, startingAt startAt: UInt64, writingTo path: String, _ body: (Int) throws -> Void
) throws -> Never {
    while now() < startAt { usleep(500) }
    var samples = [UInt64](repeating: 0, count: operations)
    let start = now()
    for index in 0..<operations {
        let before = now()
        try body(index)
        samples[index] = now() - before
    }
    let end = now()
    let text = "\(start) \(end)\n" + samples.map(String.init).joined(separator: "\n") + "\n"
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    exit(0)
}

/// `--role mixed-floor DIR KEYS OPERATIONS SEED START_AT_NS OUT [exclusive|shared]`: the floor
/// of one mixed process, the operations' own cost: a get is one `pread` of the key's 1 KB from a
/// file open all along, a put one 1 KB `write` with `O_APPEND` to a file every process appends
/// to. Run 8 at once, it shows what 8 processes doing that work cost on this machine's cores
/// (scheduling and the filesystem's stalls included).
///
/// With `exclusive` or `shared`, a put is instead the system calls of a SharedCache put alone:
/// a `pwrite` of a 1,208-byte record at the end of a segment of the process's own, then, holding
/// the journal's flock (waited for as SharedCache waits), one 154-byte `write` with `O_APPEND`.
/// `shared` is the lock as SharedCache's puts take it, with the `lseek` that asks where the
/// write ended; `exclusive` is a put before format 3.0, which read the journal's size (`statx`)
/// under the lock held exclusively.
func runMixedFloorWorker(_ arguments: [String]) throws -> Never {
    let (directory, keys, operations) = (arguments[0], Int(arguments[1])!, Int(arguments[2])!)
    var random = SplitMix64(seed: UInt64(arguments[3])!)
    let startAt = UInt64(arguments[4])!
    let lock: LockKind? =
        switch arguments.count > 6 ? arguments[6] : nil {
        case nil: nil
        case "exclusive": .exclusive
        case "shared": .shared
        case let other?: fatalError("mixed-floor: \(other) is neither exclusive nor shared")
        }
    let value = [UInt8](repeating: 0x66, count: 1024)
    // What SharedCache's put writes: a pack record (header and 1 KB body), a journal record.
    let packRecord = [UInt8](repeating: 0x67, count: 1208)
    let journalRecord = [UInt8](repeating: 0x68, count: 154)
    let records = open("\(directory)/records", O_RDONLY | O_CLOEXEC)
    let appends = open("\(directory)/appends", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    let segment = open("\(directory)/segment-\(arguments[3])", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard records >= 0, appends >= 0, segment >= 0 else { fatalError("mixed-floor: open failed in \(directory)") }
    let journal = try Journal(path: "\(directory)/journal")
    var segmentEnd: off_t = 0
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1024, alignment: 16)
    try timeOperations(operations, startingAt: startAt, writingTo: arguments[5]) { _ in
        let key = Int.random(in: 0..<keys, using: &random)
        if Int.random(in: 0..<10, using: &random) == 0 {
            guard let lock else {
                _ = value.withUnsafeBytes { write(appends, $0.baseAddress, $0.count) }
                return
            }
            _ = packRecord.withUnsafeBytes { pwrite(segment, $0.baseAddress, $0.count, segmentEnd) }
            segmentEnd += off_t(packRecord.count)
            try journal.file.withLock(lock, timeout: .seconds(10), orThrow: POSIXError(.ETIMEDOUT)) {
                if lock == .exclusive { _ = try journal.file.sizeAndLinkCount() }
                _ = try journalRecord.withUnsafeBytes { try journal.file.writeOnce($0) }
                if lock == .shared { _ = try journal.file.currentOffset() }
            }
        } else {
            _ = pread(records, buffer, 1024, off_t(key * 1024))
        }
    }
}

/// The journal every floor process appends to. A class, not a local descriptor: the worker
/// never returns, so a noncopyable local's closing would be code that never runs.
private final class Journal {
    let file: FileDescriptor

    init(path: String) throws {
        file = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_APPEND, mode: 0o600)
    }
}

/// `--role mixed-spin OPERATIONS NANOSECONDS START_AT_NS OUT`: the scheduler's floor: each
/// "operation" keeps the CPU busy for NANOSECONDS and does nothing else (no I/O, no locks).
/// Eight of these on fewer cores show what time-slicing alone does to the tail: an operation
/// that straddles the end of a slice waits for the other processes' slices.
func runMixedSpinWorker(_ arguments: [String]) throws -> Never {
    let (operations, busy, startAt) = (Int(arguments[0])!, UInt64(arguments[1])!, UInt64(arguments[2])!)
    try timeOperations(operations, startingAt: startAt, writingTo: arguments[3]) { _ in
        let begun = now()
        while now() - begun < busy {}
    }
}

/// 8 processes each busy for `nanoseconds` per operation: the tail latency time-slicing alone
/// gives a CPU-bound process on this machine.
func spinMixed(in root: String, operations: Int, nanoseconds: UInt64) throws -> MixedMeasurement {
    let executable = ChildProcess.currentExecutable.path
    return try mixedRun(in: root, operations: operations) { _, startAt, out in
        (executable, ["--role", "mixed-spin", "\(operations)", "\(nanoseconds)", "\(startAt)", out])
    }
}

/// The floor of 8 processes (see ``runMixedFloorWorker(_:)``): puts as one `O_APPEND` write, or
/// (`putLock`) as the system calls of SharedCache's put under that lock.
func floorMixed(in root: String, operations: Int, putLock: LockKind? = nil) throws -> MixedMeasurement {
    let directory = "\(root)/floor-\(putLock.map { "\($0)" } ?? "append")"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try Data(repeating: 0x66, count: 1024 * mixedKeys).write(to: URL(fileURLWithPath: "\(directory)/records"))
    let executable = ChildProcess.currentExecutable.path
    return try mixedRun(in: root, operations: operations) { worker, startAt, out in
        (
            executable,
            ["--role", "mixed-floor", directory, "\(mixedKeys)", "\(operations)", "\(worker + 1)", "\(startAt)", out]
                + (putLock.map { ["\($0)"] } ?? [])
        )
    }
}

/// The 8-process runs: the syscall floor, the scheduler's floor, SharedCache, and diskcache.
struct MixedRuns: Codable {
    var floor: MixedMeasurement
    var scheduler: MixedMeasurement
    /// The scheduler's floor with SharedCache's CPU per process: each operation as long as
    /// SharedCache's mean below its p99, so as many operations straddle the end of a time slice.
    var schedulerSameCPU: MixedMeasurement
    var sharedCache: MixedMeasurement
    var diskcache: MixedMeasurement?
    /// SharedCache with as many processes as this machine has cores: its tail without time-slicing.
    var sharedCacheOnePerCore: MixedMeasurement
    /// The system calls of SharedCache's put alone (in the floor's gets' company), appended
    /// under an exclusive lock as SharedCache does, and under a shared one no put waits for.
    var putCallsExclusive: MixedMeasurement
    var putCallsShared: MixedMeasurement
}

func measureMixed(in root: String, operations: Int, peer: String?) throws -> MixedRuns {
    try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    let floor = try floorMixed(in: root, operations: operations)
    let sharedCache = try sharedCacheMixed(in: root, operations: operations)
    let scheduler = try spinMixed(
        in: root, operations: operations, nanoseconds: UInt64(sharedCache.p50Microseconds * 1000))
    let schedulerSameCPU = try spinMixed(
        in: root, operations: operations, nanoseconds: UInt64(sharedCache.meanBelowP99Microseconds * 1000))
    let diskcache = try peer.map { try diskcacheMixed($0, in: root, operations: operations) }
    let onePerCore = try sharedCacheMixed(
        in: root, operations: operations * 4, processes: ProcessInfo.processInfo.activeProcessorCount)
    let putCallsExclusive = try floorMixed(in: root, operations: operations, putLock: .exclusive)
    let putCallsShared = try floorMixed(in: root, operations: operations, putLock: .shared)
    return MixedRuns(
        floor: floor, scheduler: scheduler, schedulerSameCPU: schedulerSameCPU, sharedCache: sharedCache,
        diskcache: diskcache,
        sharedCacheOnePerCore: onePerCore, putCallsExclusive: putCallsExclusive, putCallsShared: putCallsShared)
}

/// Starts `mixedProcesses` processes made by `command` together 1 s from now, waits for all,
/// and merges what they wrote.
func mixedRun(
    in root: String, operations: Int, processes count: Int = mixedProcesses,
    command: (Int, UInt64, String) -> (String, [String])
) throws -> MixedMeasurement {
    let startAt = now() + 1_000_000_000
    var processes: [ChildProcess] = []
    var outputs: [String] = []
    for worker in 0..<count {
        let out = "\(root)/latencies-\(worker)"
        let (executable, arguments) = command(worker, startAt, out)
        processes.append(
            try ChildProcess(
                URL(fileURLWithPath: executable), arguments: arguments, input: .inherit, output: .inherit))
        outputs.append(out)
    }
    for process in processes {
        guard process.wait() == .exited(0) else { fatalError("a mixed-workload process failed") }
    }
    var samples: [UInt64] = []
    var first = UInt64.max
    var last: UInt64 = 0
    for out in outputs {
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        let bounds = lines[0].split(separator: " ").map { UInt64($0)! }
        first = min(first, bounds[0])
        last = max(last, bounds[1])
        samples += lines.dropFirst().map { UInt64($0)! }
    }
    samples.sort()
    func percentile(_ p: Double) -> Double {
        Double(samples[min(samples.count - 1, Int(Double(samples.count) * p))]) / 1000
    }
    let belowP99 = samples.prefix(max(1, Int(Double(samples.count) * 0.99)))
    return MixedMeasurement(
        processes: count, operations: samples.count,
        operationsPerSecond: Double(samples.count) / (Double(last - first) / 1e9), p50Microseconds: percentile(0.5),
        p99Microseconds: percentile(0.99), p999Microseconds: percentile(0.999),
        maxMicroseconds: Double(samples.last ?? 0) / 1000,
        meanBelowP99Microseconds: Double(belowP99.reduce(0, +)) / Double(belowP99.count) / 1000,
        overOneMillisecondFraction: Double(samples.count { $0 > 1_000_000 }) / Double(max(1, samples.count)))
}

func sharedCacheMixed(in root: String, operations: Int, processes: Int = mixedProcesses) throws -> MixedMeasurement {
    let directory = "\(root)/sharedcache-\(processes)"
    let cache = try SharedCache(directory: directory, configuration: Configuration(sizeLimit: 0))
    let value = Data((0..<1024).map { _ in UInt8.random(in: 0...255) })
    for index in 0..<mixedKeys { try cache.put(key: keyName(index), data: value) }
    try cache.checkpoint()
    let executable = ChildProcess.currentExecutable.path
    return try mixedRun(in: root, operations: operations, processes: processes) { worker, startAt, out in
        (
            executable,
            ["--role", "mixed", directory, "\(mixedKeys)", "\(operations)", "\(worker + 1)", "\(startAt)", out]
        )
    }
}

func diskcacheMixed(_ python: String, in root: String, operations: Int) throws -> MixedMeasurement {
    let directory = "\(root)/diskcache"
    _ = try runPeer(python, ["fill", directory, "\(mixedKeys)", "1024"])
    return try mixedRun(in: root, operations: operations) { worker, startAt, out in
        (python, [peerScript, "mixed", directory, "\(mixedKeys)", "\(operations)", "\(worker + 1)", "\(startAt)", out])
    }
}
