import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Per-operation cost, open time and memory at 1,000 / 100,000 / 1,000,000 entries, and
// instruction counts of get and put under callgrind.

struct ScaleMeasurement: Codable {
    var entries: Int
    var openMilliseconds: Double
    /// Resident memory the open added, divided by the entries (the index, mostly).
    var residentBytesPerEntry: Double
    var get: Measurement
    var put: Measurement
    /// The get floor: one pread of a record's size at a random offset of the directory's own
    /// pack segments, open all along.
    var getFloor: Measurement
    /// The put floor: one O_APPEND write of a record's size and one of a journal record's, to
    /// files in the directory's `tmp/`. Both floors run interleaved with the operations, on the
    /// same filesystem and files as large, so its drift over the run is in the floor too.
    var putFloor: Measurement
}

func scaleKey(_ index: Int) -> String { "https://example.com/scale/\(index)" }

/// A directory of `entries` entries of 100 bytes, checkpointed.
func buildScaleDirectory(_ root: String, entries: Int, sizeLimit: UInt64 = 0) throws {
    let cache = try SharedCache(
        directory: root,
        configuration: Configuration(sizeLimit: sizeLimit, recencyInterval: .seconds(86400), memoryCostLimit: 0))
    let body = Data(repeating: 0x42, count: 100)
    for index in 0..<entries { try cache.put(key: scaleKey(index), data: body) }
    try cache.checkpoint()
}

/// Measures a directory built by ``buildScaleDirectory(_:entries:sizeLimit:)`` in a fresh process.
func scaleRow(_ root: String, entries: Int) throws -> ScaleMeasurement {
    let child = try ChildProcess.benchmarkHelper(role: "scale", [root, "\(entries)"])
    let line = child.requireLine()
    child.finish()
    return try JSONDecoder().decode(ScaleMeasurement.self, from: Data(line.utf8))
}

/// `--role scale DIR ENTRIES`: open (timed, resident memory before and after), then 2,000 gets
/// of random entries and 2,000 puts of new ones, with the memory tier off, each followed by its
/// floor. (The floor's files stay in the directory, which the run deletes afterwards.)
func runScale(_ arguments: [String]) throws -> Never {
    let (directory, entries) = (arguments[0], Int(arguments[1])!)
    let before = residentBytes()
    let start = now()
    let cache = try SharedCache(
        directory: directory, configuration: Configuration(recencyInterval: .seconds(86400), memoryCostLimit: 0))
    let opened = Double(now() - start) / 1e6
    let added = Double(residentBytes() - before)
    let operations = 2000
    let body = Data(repeating: 0x43, count: 100)
    let reads = (0..<operations).map { _ in scaleKey(Int.random(in: 0..<entries)) }
    let writes = (0..<operations).map { "https://example.com/scale/new/\($0)" }
    var getSamples: [UInt64] = [], putSamples: [UInt64] = []
    var getFloorSamples: [UInt64] = [], putFloorSamples: [UInt64] = []
    // Every pack segment, open all along: the get floor reads a random offset of all their
    // bytes, the working set the gets read too.
    let segments = try FileManager.default.contentsOfDirectory(atPath: "\(directory)/packs").map {
        open("\(directory)/packs/\($0)", O_RDONLY | O_CLOEXEC | System.noAccessTimeFlag)
    }
    defer { segments.forEach { close($0) } }
    let segmentSizes = segments.map { max(Int(lseek($0, 0, SEEK_END)) - 512, 1) }
    let totalSize = segmentSizes.reduce(0, +)
    func randomFloorRead() -> (descriptor: Int32, offset: off_t) {
        var offset = Int.random(in: 0..<totalSize)
        for (segment, size) in zip(segments, segmentSizes) {
            if offset < size { return (segment, off_t(offset)) }
            offset -= size
        }
        preconditionFailure("an offset past every segment")
    }
    let records = open("\(directory)/tmp/floor-records", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    defer { close(records) }
    let journal = open("\(directory)/tmp/floor-journal", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
    defer { close(journal) }
    let bytes = [UInt8](repeating: 0x43, count: 100 + 180)  // a record: prefix, header and body
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 8192, alignment: 16)
    defer { buffer.deallocate() }
    for index in 0..<operations {
        var before = now()
        guard try cache.get(key: reads[index]) != nil else { fatalError("scale entry missing") }
        getSamples.append(now() - before)
        let (segment, offset) = randomFloorRead()
        before = now()
        _ = pread(segment, buffer, bytes.count, offset)
        getFloorSamples.append(now() - before)
        before = now()
        try cache.put(key: writes[index], data: body)
        putSamples.append(now() - before)
        before = now()
        _ = bytes.withUnsafeBytes { write(records, $0.baseAddress, $0.count) }
        _ = bytes.withUnsafeBytes { write(journal, $0.baseAddress, 120) }
        putFloorSamples.append(now() - before)
    }
    let measurement = ScaleMeasurement(
        entries: entries, openMilliseconds: opened, residentBytesPerEntry: added / Double(entries),
        get: summarize("get 100 B", getSamples), put: summarize("put 100 B", putSamples),
        getFloor: summarize("get floor", getFloorSamples), putFloor: summarize("put floor", putFloorSamples))
    FileHandle.standardOutput.write(try JSONEncoder().encode(measurement) + Data("\n".utf8))
    exit(0)
}

/// This process's resident memory in bytes (Linux: /proc/self/statm; elsewhere 0).
func residentBytes() -> Int {
    #if os(Linux)
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return (fields.count > 1 ? Int(fields[1]) ?? 0 : 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    #else
    return 0
    #endif
}

// MARK: - Instruction counts

/// Instructions per get and per put of 1 KB, from callgrind: the difference between runs of
/// 1,200 and 200 operations, over 1,000, so start-up and setup cancel out. Stable on a noisy
/// machine, where times are not.
struct InstructionCounts: Codable {
    var get: Double
    var put: Double
}

let valgrind = "/usr/bin/valgrind"

func instructionCounts(in root: String) throws -> InstructionCounts? {
    guard FileManager.default.isExecutableFile(atPath: valgrind) else { return nil }
    let cache = try SharedCache(directory: root, configuration: Configuration(sizeLimit: 0, memoryCostLimit: 0))
    let body = Data(repeating: 0x44, count: 1024)
    for index in 0..<1000 { try cache.put(key: keyName(index), data: body) }
    try cache.checkpoint()
    // valgrind 3.19 cannot read the DWARF 5 debug information Swift emits; a copy without it
    // runs the same instructions.
    let executable = "\(root)/sharedcache-bench-stripped"
    let self_ = ChildProcess.currentExecutable.path
    let strip = try? ChildProcess(
        URL(fileURLWithPath: "/usr/bin/objcopy"), arguments: ["--strip-debug", self_, executable], input: .inherit,
        output: .inherit)
    let stripped = strip?.wait() == .exited(0) && FileManager.default.fileExists(atPath: executable)
    let target = stripped ? executable : self_
    func collected(_ operation: String, _ count: Int) throws -> Double {
        let callgrind = try ChildProcess(
            URL(fileURLWithPath: valgrind),
            arguments: [
                "--tool=callgrind", "--callgrind-out-file=/dev/null", target, "--role", "instructions", root,
                operation, "\(count)",
            ], input: .inherit, output: .discard, errors: .captured)
        let text = callgrind.errors?.remainingText() ?? ""
        callgrind.wait()
        guard let line = text.split(separator: "\n").first(where: { $0.contains("Collected :") }),
            let value = line.split(separator: " ").last.flatMap({ Double($0) })
        else { fatalError("callgrind printed no instruction count:\n\(text)") }
        return value
    }
    func perOperation(_ operation: String) throws -> Double {
        (try collected(operation, 1200) - collected(operation, 200)) / 1000
    }
    return InstructionCounts(get: try perOperation("get"), put: try perOperation("put"))
}

/// `--role instructions DIR get|put COUNT`: the operations callgrind counts.
func runInstructions(_ arguments: [String]) throws -> Never {
    let (directory, operation, count) = (arguments[0], arguments[1], Int(arguments[2])!)
    let cache = try SharedCache(directory: directory, configuration: Configuration(memoryCostLimit: 0))
    let body = Data(repeating: 0x45, count: 1024)
    let run = UInt64.random(in: 0...UInt64.max)
    // Keys are made before counting starts, as an application has them: the count is the
    // operation's, not the string formatting's. Runs of up to 1,200 make as many, so they cancel
    // out; a longer run of puts (for a profiler) makes one key per put. Every put key is 56
    // bytes (two SHA-256 blocks): with the run and index in decimal, their lengths varied, and
    // with them the number of blocks hashed, by up to 4,500 instructions per put between runs.
    let keys =
        operation == "get"
        ? (0..<1200).map { keyName($0 % 1000) }
        : (0..<max(1200, count)).map { String(format: "https://example.com/instructions/%016llx/%06d", run, $0) }
    for index in 0..<count {
        if operation == "get" {
            guard try cache.get(key: keys[index % keys.count]) != nil else { fatalError("entry missing") }
        } else {
            try cache.put(key: keys[index], data: body)
        }
    }
    exit(0)
}
