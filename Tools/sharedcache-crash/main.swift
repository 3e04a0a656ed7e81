// sharedcache-crash: what a power loss leaves of a cache directory, checked state by state.
//
//   sharedcache-crash [--full] [--seed S] [--workload W] [--durability none|synchronized]
//                     [--model prefix|ext4-ordered|weak] [--state K] [--cap N] [--tools every|sample|none]
//                     [--losing PATH-FRAGMENT] [--verbose]
//
// For each workload and durability: run the workload's setup, copy the directory (the state
// before the crash), run its steps in a child process with SHAREDCACHE_RECORD set (the
// recorder in SharedCachePlatform logs every mutating system call; a debug build), then build
// the states a power loss could leave at each point under each model, materialise each as a
// real directory and check it: it opens (or `sharedcache verify --repair`, as the error
// advises, makes it open), no get returns bytes no put stored, `verify` is clean after
// `verify --repair`, the cache takes a put; with Durability.synchronized, no acknowledged put,
// removal or freshening is lost. Prints a table; exits 1 if any state broke a rule.
// Sampling is seeded: `--seed S --workload W --durability D --model M --state K` replays one
// state and keeps its directory.

import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheTestSupport
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func fail(_ message: String, status: Int32 = 64) -> Never {
    FileHandle.standardError.write(Data("sharedcache-crash: \(message)\n".utf8))
    exit(status)
}

/// `value`, or the usage error `message`.
func required<Value>(_ value: Value?, _ message: String) -> Value {
    guard let value else { fail(message) }
    return value
}

func durabilityNamed(_ name: String) -> Durability? {
    switch name {
    case "none": Durability.none
    case "synchronized": .synchronized
    default: nil
    }
}

let executable = Bundle.main.executableURL?.resolvingSymlinksInPath().path ?? CommandLine.arguments[0]

// MARK: The child: run a workload's steps, recorded.

if CommandLine.arguments.dropFirst().first == "record" {
    #if DEBUG
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    guard arguments.count == 3, let workload = Workload.all.first(where: { $0.name == arguments[0] }),
        let durability = durabilityNamed(arguments[1])
    else { fail("usage: sharedcache-crash record WORKLOAD DURABILITY DIRECTORY") }
    do {
        let cache = try SharedCache(directory: arguments[2], configuration: workload.configuration(durability))
        try workload.steps(Driver(cache: cache, note: { Recorder.note($0) }))
        exit(0)
    } catch {
        fail("the workload failed: \(error)", status: 70)
    }
    #else
    fail("recording needs a debug build (the recorder is compiled only there)", status: 69)
    #endif
}

// MARK: Arguments

var full = false
var seed = UInt64.random(in: 1...UInt64.max)
var workloadNames: [String] = []
var durabilityNames: [String] = []
var modelNames: [String] = []
var replayState: Int? = nil
var capOverride: Int? = nil
var toolsMode: String? = nil
var verbose = false
var losing: String? = nil
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    func value() -> String {
        guard let value = arguments.popFirst() else { fail("\(argument) needs a value") }
        return value
    }
    switch argument {
    case "--full": full = true
    case "--seed": seed = required(UInt64(value()), "--seed takes a number")
    case "--workload": workloadNames.append(value())
    case "--durability": durabilityNames.append(value())
    case "--model": modelNames.append(value())
    case "--state": replayState = required(Int(value()), "--state takes a number")
    case "--cap": capOverride = required(Int(value()), "--cap takes a number")
    case "--tools": toolsMode = value()
    case "--verbose": verbose = true
    case "--losing": losing = value()
    default:
        fail(
            "usage: sharedcache-crash [--full] [--seed S] [--workload W] [--durability none|synchronized] "
                + "[--model prefix|ext4-ordered|weak] [--state K] [--cap N] [--tools every|sample|none] "
                + "[--losing PATH-FRAGMENT] [--verbose]")
    }
}
let workloads =
    workloadNames.isEmpty
    ? Workload.all
    : workloadNames.map { name in
        required(Workload.all.first { $0.name == name }, "no workload \(name): \(Workload.all.map(\.name))")
    }
let durabilities = (durabilityNames.isEmpty ? ["none", "synchronized"] : durabilityNames).map { name in
    (name, required(durabilityNamed(name), "durability is none or synchronized"))
}
let models = modelNames.isEmpty ? Model.allCases : modelNames.map { required(Model(rawValue: $0), "no model \($0)") }
if replayState != nil && (workloads.count, durabilities.count, models.count) != (1, 1, 1) {
    fail("--state needs one --workload, one --durability and one --model")
}
/// States checked per workload, durability and model, drawn with the seed when there are more.
let cap = capOverride ?? (full ? 5000 : 16)
let randomPerPoint = full ? 2 : 0
let tools = toolsMode ?? (full ? "every" : "sample")

// MARK: Programs

/// The build this runs from, or the debug build next to it: only that one records.
let recorder: String = {
    #if DEBUG
    return executable
    #else
    let release = URL(fileURLWithPath: executable).deletingLastPathComponent()
    let debug = release.deletingLastPathComponent().appendingPathComponent("debug/sharedcache-crash").path
    guard FileManager.default.isExecutableFile(atPath: debug) else {
        fail(
            "recording needs a debug build of this tool; run `swift build --product sharedcache-crash` first",
            status: 69)
    }
    return debug
    #endif
}()
let sharedcacheTool: String? = {
    let directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
    for candidate in [directory, directory.deletingLastPathComponent().appendingPathComponent("debug")] {
        let path = candidate.appendingPathComponent("sharedcache").path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return nil
}()

// MARK: Running

// Thousands of directories of 260 folders each are made and removed: on tmpfs where there is one.
let scratch = access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : NSTemporaryDirectory()
let work = scratch + "sharedcache-crash-\(getpid())"
try? FileManager.default.removeItem(atPath: work)
try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)

print("seed \(seed) (replay with --seed \(seed))")
if sharedcacheTool == nil { print("note: no sharedcache tool built next to this one; checking with the library only") }

/// A seed for one workload, durability and model, fixed by the run's seed.
func seed(_ seed: UInt64, for parts: String...) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ seed
    for byte in parts.joined(separator: "/").utf8 {
        hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
    }
    return hash
}

// A state that hangs (an opener looping, a tool spinning) must fail the run, not stall it: each
// state arms alarm(2); the handler names the state, kills the tool it waits for and exits.
nonisolated(unsafe) let hangMessage = UnsafeMutablePointer<CChar>.allocate(capacity: 1024)
hangMessage.initialize(repeating: 0, count: 1024)
signal(SIGALRM) { _ in
    if runningChild != 0 { kill(runningChild, SIGKILL) }
    _ = write(2, hangMessage, strlen(hangMessage))
    _exit(2)
}
/// Seconds a state may take, tool runs included.
let stateTimeLimit: UInt32 = 120

struct Row {
    var workload: String
    var durability: String
    var model: String
    var operations: Int
    var generated: Int
    var checked: Int
    var violations: [(state: Int, description: String, problems: [String])]
}
var rows: [Row] = []
/// With `--tools sample`, states checked until the next one the tool checks too.
var toolCountdown = 1
let started = Date()

for workload in workloads {
    for (durabilityName, durability) in durabilities {
        let directory = "\(work)/\(workload.name)-\(durabilityName)"
        let base = "\(directory)/cache"
        let log = "\(directory)/log"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)

        // The directory before the crash: set up, closed, on disk.
        var setupNotes: [String] = []
        if let setup = workload.setup {
            let notes = Locked<[String]>([])
            let cache = try SharedCache(directory: base, configuration: workload.configuration(durability))
            try setup(Driver(cache: cache, note: { note in notes.withLock { $0.append(note) } }))
            setupNotes = notes.withLock { $0 }
        } else {
            try FileManager.default.createDirectory(
                atPath: base, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        let root = URL(fileURLWithPath: base).resolvingSymlinksInPath().path
        var inodes: [UInt64: Int] = [:]
        let baseImage = try Image.read(root, inodes: &inodes)

        let (status, output) = run(
            recorder, ["record", workload.name, durabilityName, root], environment: ["SHAREDCACHE_RECORD": log])
        guard status == 0 else { fail("recording \(workload.name) failed (\(status)): \(output)", status: 70) }
        let recording = try Recording(
            log: try String(contentsOfFile: log, encoding: .utf8), root: root, base: baseImage, inodes: inodes)
        var baseline = Expectations()
        for note in setupNotes { baseline.read(note) }
        let checker = Checker(tool: sharedcacheTool)

        for model in models {
            let generator = CrashStateGenerator(recording: recording, model: model, randomPerPoint: randomPerPoint)
            let comboSeed = seed(seed, for: workload.name, durabilityName, model.rawValue)
            var all = generator.states(seed: comboSeed)
            if let losing { all = all.filter { $0.loses(losing, of: recording) } }
            var chosen = Array(all.indices)
            if chosen.count > cap {
                var random = SplitMix64(seed: comboSeed)
                chosen.shuffle(using: &random)
                chosen = Array(chosen.prefix(cap)).sorted()
            }
            if let replayState {
                guard replayState < chosen.count else {
                    fail("--state \(replayState): there are \(chosen.count) states")
                }
                chosen = [chosen[replayState]]
            }
            var row = Row(
                workload: workload.name, durability: durabilityName, model: model.rawValue,
                operations: recording.operations.count(where: { !$0.isNote }), generated: all.count, checked: 0,
                violations: [])
            for (number, index) in chosen.enumerated() {
                let state = all[index]
                let stateNumber = replayState ?? number
                var expectations = baseline
                for case .note(let text) in recording.operations[..<state.point] { expectations.read(text) }
                let path = "\(directory)/state-\(stateNumber)"
                if verbose || replayState != nil { print("state \(stateNumber): \(state.describe(recording))") }
                let filter = losing.map { " --losing \($0)" } ?? ""
                let replay =
                    "--seed \(seed) --workload \(workload.name) --durability \(durabilityName) "
                    + "--model \(model.rawValue)\(filter) --cap \(cap)\(full ? " --full" : "") --state \(stateNumber)"
                _ = "sharedcache-crash: HANG: a state did not finish in \(stateTimeLimit) s (replay: \(replay))\n"
                    .withCString { strncpy(hangMessage, $0, 1023) }
                alarm(stateTimeLimit)
                defer { alarm(0) }
                toolCountdown -= 1
                let runTool = tools == "every" || (tools == "sample" && toolCountdown == 0)
                if toolCountdown == 0 { toolCountdown = 8 }
                let problems = try checker.check(
                    state.image(of: recording), at: path, expecting: expectations,
                    durable: durability == .synchronized, runTool: runTool || replayState != nil && tools != "none")
                row.checked += 1
                if !problems.isEmpty {
                    row.violations.append((stateNumber, state.describe(recording), problems))
                }
                if replayState != nil {
                    print(problems.isEmpty ? "no violation" : problems.joined(separator: "\n"))
                    print("directory (after the checker's repair): \(path)")
                } else {
                    try? FileManager.default.removeItem(atPath: path)
                }
            }
            rows.append(row)
        }
    }
}

// MARK: Report

func padded(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
}
print(
    padded("workload", 12) + padded("durability", 14) + padded("model", 14) + padded("ops", 6, right: true)
        + padded("states", 9, right: true) + padded("checked", 9, right: true) + padded("violations", 12, right: true))
for row in rows {
    print(
        padded(row.workload, 12) + padded(row.durability, 14) + padded(row.model, 14)
            + padded("\(row.operations)", 6, right: true) + padded("\(row.generated)", 9, right: true)
            + padded("\(row.checked)", 9, right: true) + padded("\(row.violations.count)", 12, right: true))
}
let checked = rows.reduce(0) { $0 + $1.checked }
let violations = rows.reduce(0) { $0 + $1.violations.count }
let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
print("\(checked) states checked, \(violations) with violations, in \(seconds) s (seed \(seed))")
for row in rows {
    for violation in row.violations.prefix(verbose ? Int.max : (full ? 5 : 3)) {
        print(
            "\nVIOLATION \(row.workload) \(row.durability) \(row.model) state \(violation.state) "
                + "(replay: --seed \(seed) --workload \(row.workload) --durability \(row.durability) "
                + "--model \(row.model)\(losing.map { " --losing \($0)" } ?? "") --cap \(cap)\(full ? " --full" : "") "
                + "--state \(violation.state))")
        print(violation.description)
        for problem in violation.problems { print("  -> \(problem)") }
    }
}
if replayState == nil { try? FileManager.default.removeItem(atPath: work) }
exit(violations == 0 ? 0 : 1)
