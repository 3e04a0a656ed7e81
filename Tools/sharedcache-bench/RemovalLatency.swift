import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Removal notification across processes, next to the kernel's own wake-up between two processes.
//
// The parent removes an entry (or, for the floor, appends 8 bytes to a file) and notes the
// time; the child prints the time at which its callback ran (or its inotify read returned).
// Both read CLOCK_MONOTONIC, which is one clock for every process on the machine.

/// Child role: subscribe to removals and print "TIME KEY" per removal, until stdin closes.
func runRemovalSubscriber(directory: String) throws -> Never {
    let cache = try SharedCache(directory: directory)
    let subscription = cache.onRemovals { batch in
        let stamp = now()
        FileHandle.standardOutput.write(Data(batch.map { "\(stamp) \($0.key ?? "-")\n" }.joined().utf8))
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    _ = FileHandle.standardInput.readDataToEndOfFile()
    subscription.cancel()
    exit(0)
}

/// Child role: subscribe, stay idle for `seconds`, print the CPU microseconds that cost.
func runIdleSubscriber(directory: String, seconds: Double) throws -> Never {
    let cache = try SharedCache(directory: directory)
    let subscription = cache.onRemovals { _ in }
    let before = cpuMicroseconds()
    Thread.sleep(forTimeInterval: seconds)
    let spent = cpuMicroseconds() - before
    subscription.cancel()
    print(spent)
    exit(0)
}

func cpuMicroseconds() -> Int {
    var usage = rusage()
    #if os(Linux)
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return (Int(usage.ru_utime.tv_sec) + Int(usage.ru_stime.tv_sec)) * 1_000_000 + Int(usage.ru_utime.tv_usec)
        + Int(usage.ru_stime.tv_usec)
}

#if os(Linux)
/// Child role: block in read(2) on an inotify watch of `file`'s directory; per 8-byte record
/// appended to `file`, print the time the read returned.
func runInotifyReader(file: String) -> Never {
    let watch = inotify_init1(Int32(IN_CLOEXEC))
    check(watch, "inotify_init1")
    let folder = (file as NSString).deletingLastPathComponent
    check(inotify_add_watch(watch, folder, UInt32(IN_MODIFY)), "inotify_add_watch")
    let reader = open(file, O_RDONLY | O_CLOEXEC)
    check(reader, "open")
    var events = [UInt8](repeating: 0, count: 4096)
    var records = [UInt8](repeating: 0, count: 4096)
    var offset = 0
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    while true {
        guard events.withUnsafeMutableBytes({ read(watch, $0.baseAddress, $0.count) }) > 0 else { exit(1) }
        let stamp = now()
        let count = records.withUnsafeMutableBytes { pread(reader, $0.baseAddress, $0.count, off_t(offset)) }
        guard count > 0 else { continue }
        offset += count
        FileHandle.standardOutput.write(Data(String(repeating: "\(stamp)\n", count: count / 8).utf8))
    }
}
#endif

/// Interleaves `count` raw inotify wake-ups and `count` SharedCache removal notifications.
func removalLatency(in root: String, count: Int) throws -> (floor: Measurement?, cache: Measurement) {
    try FileManager.default.createDirectory(atPath: "\(root)/raw", withIntermediateDirectories: true)
    let cache = try SharedCache(directory: "\(root)/cache")
    let subscriber = try ChildProcess.benchmarkHelper(role: "removal-subscriber", ["\(root)/cache"])
    precondition(subscriber.requireLine() == "ready")

    var floorSamples: [UInt64] = []
    var cacheSamples: [UInt64] = []
    #if os(Linux)
    let rawFile = "\(root)/raw/journal"
    let appender = open(rawFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    check(appender, "open")
    let reader = try ChildProcess.benchmarkHelper(role: "inotify-reader", [rawFile])
    precondition(reader.requireLine() == "ready")
    #endif

    let body = Data(repeating: 7, count: 100)
    for index in 0..<count {
        #if os(Linux)
        var stamp = now()
        _ = withUnsafeBytes(of: &stamp) { write(appender, $0.baseAddress, 8) }
        floorSamples.append(UInt64(reader.requireLine())! - stamp)
        #endif
        let key = "removal-\(index)"
        try cache.put(key: key, data: body)
        let start = now()
        try cache.remove(key: key)
        let fields = subscriber.requireLine().split(separator: " ")
        precondition(fields.count == 2 && fields[1] == key, "unexpected notification \(fields)")
        cacheSamples.append(UInt64(fields[0])! - start)
    }
    subscriber.finish()
    #if os(Linux)
    reader.signal(SIGTERM)
    close(appender)
    #endif
    let floor = floorSamples.isEmpty ? nil : summarize("floor: append in A, inotify read returns in B", floorSamples)
    return (floor, summarize("SharedCache: remove in A, callback runs in B", cacheSamples))
}

/// CPU time an idle subscriber process spends over `seconds`.
func idleSubscriberCPU(in root: String, seconds: Double) throws -> Int {
    _ = try SharedCache(directory: "\(root)/idle")
    let child = try ChildProcess.benchmarkHelper(role: "idle-subscriber", ["\(root)/idle", "\(seconds)"])
    let spent = Int(child.requireLine()) ?? -1
    child.finish()
    return spent
}
