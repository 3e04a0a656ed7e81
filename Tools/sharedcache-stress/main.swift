// sharedcache-stress: many processes on one cache directory for a set time — clients putting,
// getting, removing and fetching, removal subscribers, and the compactor — optionally killing
// one of them with SIGKILL at random moments and starting a new one; then a checker proves the
// invariants of DESIGN.md from what every process logged:
//
//   1. every get returned exactly the bytes some put stored for that key (bodies say which
//      writer and version they are, and every writer logged each put before making it), or a miss;
//   2. every removal reached every subscriber that ran throughout, exactly once and in journal
//      order; such subscribers saw the same removals;
//   3. every fetch served the origin's bytes (a 304 is never answered without its body);
//   4. the directory verifies clean at the end, but for at most one unjournaled blob per killed
//      writer (it died between renaming its blob into place and journaling it; no put
//      happened, and the compactor's orphan sweep removes such files after ten minutes);
//   5. a process that followed the journal all along and one opened at the end hold the same
//      entries (checkpoints lose nothing).
//
//   sharedcache-stress [--seconds N] [--clients N] [--subscribers N] [--crash-rounds N]
//                      [--victims client,compactor,subscriber] [--dir DIR]
//
// Prints one summary line; exits 1 on any violation, listing them.

import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

resetSignalMask()

func monotonic() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("sharedcache-stress: \(message)\n".utf8))
    exit(2)
}

let keys = (0..<48).map { "https://stress.example/key/\($0)" }
let originFiles = 16

/// The origin's bytes for file `n`: what every fetch of it must return.
func originBody(_ number: Int) -> Data {
    Data(String(repeating: "origin file \(number) ", count: 40 + number * 30).utf8)
}

/// One line per event, written with one write(2) each so a killed process leaves whole lines.
final class History: @unchecked Sendable {
    private let descriptor: Int32

    init(_ path: String) {
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if descriptor < 0 { fail("cannot write \(path)") }
    }

    func log(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    }
}

// MARK: - Roles

/// `--role client CACHE HISTORY WRITER END_AT SEED ORIGIN|-`
func runClient(_ arguments: [String]) async throws {
    let (cacheDirectory, history, writer) = (arguments[0], arguments[1], Int(arguments[2])!)
    let endAt = UInt64(arguments[3])!
    var random = SplitMix64(seed: UInt64(arguments[4])!)
    let origin = arguments[5] == "-" ? nil : arguments[5]
    let cache = try SharedCache(directory: cacheDirectory, configuration: Configuration(lockTimeout: .seconds(30)))
    let log = History("\(history)/client-\(writer).log")
    var version = 0
    while monotonic() < endAt {
        let key = keys[Int.random(in: 0..<keys.count, using: &random)]
        let choice = Int.random(in: 0..<100, using: &random)
        if choice < 30 {
            version += 1
            let size = [100, 3000, 40_000].randomElement(using: &random)!
            log.log("P \(key) \(writer) \(version)")  // before the put: a get may see it at once
            try cache.put(key: key, data: VerifiableBody.make(key: key, writer: writer, version: version, size: size))
        } else if choice < 80 {
            if let hit = try cache.get(key: key) {
                if let made = VerifiableBody.origin(of: hit.data, key: key) {
                    log.log("G \(key) \(made.writer) \(made.version)")
                } else {
                    log.log("X wrong bytes for \(key): \(hit.data.count) bytes")
                }
            }
        } else if choice < 90 {
            if try cache.remove(key: key) { log.log("R \(KeyHash(key: key).hex)") }
        } else if let origin {
            let number = Int.random(in: 0..<originFiles, using: &random)
            let result = try await cache.fetch(URLRequest(url: URL(string: "\(origin)/f/\(number).txt")!))
            if result.data != originBody(number) {
                log.log("X fetch of file \(number) (\(result.source)) served \(result.data.count) wrong bytes")
            } else {
                log.log("F \(number) \(result.source)")
            }
        }
    }
}

/// `--role subscriber CACHE HISTORY ID`: logs every removal as "SEQUENCE HASH REASON" ("-" for
/// one learned by resynchronising) until its standard input closes.
func runSubscriber(_ arguments: [String]) throws -> Never {
    let cache = try SharedCache(directory: arguments[0])
    let log = History("\(arguments[1])/subscriber-\(arguments[2]).log")
    let subscription = cache.onRemovals { batch in
        for removal in batch {
            log.log("\(removal.sequence.map(String.init) ?? "-") \(removal.hash.hex) \(removal.reason)")
        }
    }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    _ = FileHandle.standardInput.readDataToEndOfFile()
    subscription.cancel()
    exit(0)
}

// MARK: - The run

struct Options {
    var seconds = 60.0
    var clients = 4
    var subscribers = 2
    var crashRounds = 0
    /// Which kinds of process the crash rounds may kill.
    var victims: [Child.Kind] = [.client, .client, .compactor, .subscriber]
    var directory: String?
}

func parseOptions() -> Options {
    var options = Options()
    var arguments = CommandLine.arguments.dropFirst()
    func number(_ name: String) -> Double {
        guard let value = arguments.popFirst().flatMap(Double.init), value >= 0 else { fail("\(name) needs a number") }
        return value
    }
    while let argument = arguments.popFirst() {
        switch argument {
        case "--seconds": options.seconds = number(argument)
        case "--clients": options.clients = max(1, Int(number(argument)))
        case "--subscribers": options.subscribers = max(1, Int(number(argument)))
        case "--crash-rounds": options.crashRounds = Int(number(argument))
        case "--dir": options.directory = arguments.popFirst()
        case "--victims":
            let kinds = (arguments.popFirst() ?? "").split(separator: ",").map { Child.Kind(rawValue: String($0)) }
            guard !kinds.isEmpty, kinds.allSatisfy({ $0 != nil }) else {
                fail("--victims takes a list of client, compactor, subscriber")
            }
            options.victims = kinds.map { $0! }
        default:
            fail(
                "unknown option \(argument); usage: sharedcache-stress [--seconds N] [--clients N] "
                    + "[--subscribers N] [--crash-rounds N] [--victims client,compactor,subscriber] [--dir DIR]")
        }
    }
    return options
}

let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()

final class Child {
    enum Kind: String { case client, subscriber, compactor }
    let kind: Kind
    let id: Int
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    var killed = false

    init(_ kind: Kind, id: Int, arguments: [String], program: URL = executable, errors: String? = nil) throws {
        self.kind = kind
        self.id = id
        process.executableURL = program
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        if let errors {
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: errors)
        } else {
            process.standardError = FileHandle.standardError
        }
        try process.run()
    }

    func waitForReady() {
        let line = LineReader(output).next()
        if line != "ready" { fail("\(kind) \(id) did not start") }
    }

    func kill() {
        killed = true
        send(SIGKILL, to: process)
        process.waitUntilExit()
    }

    /// Closes standard input (a subscriber's signal to finish) and waits.
    func finish() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// kill(2), reachable where `Child.kill()` would shadow it.
func send(_ signal: Int32, to process: Process) { _ = kill(process.processIdentifier, signal) }

func runStress(_ options: Options) async throws -> Int32 {
    let root = options.directory ?? NSTemporaryDirectory() + "sharedcache-stress-\(getpid())"
    let cacheDirectory = "\(root)/cache"
    let history = "\(root)/history"
    try FileManager.default.createDirectory(atPath: history, withIntermediateDirectories: true)
    // Small limits, so the compactor evicts for size and for expiry all along.
    let cache = try SharedCache(
        directory: cacheDirectory, configuration: Configuration(sizeLimit: 256 << 10, defaultExpiry: .seconds(3)))

    let origin = try LoopbackOrigin(root: "\(root)/origin") { www in
        try FileManager.default.createDirectory(atPath: "\(www)/f", withIntermediateDirectories: true)
        for number in 0..<originFiles { try originBody(number).write(to: URL(fileURLWithPath: "\(www)/f/\(number).txt")) }
    }

    var nextID = 0
    func newID() -> Int {
        nextID += 1
        return nextID
    }
    func subscriber() throws -> Child {
        let id = newID()
        let child = try Child(.subscriber, id: id, arguments: ["--role", "subscriber", cacheDirectory, history, "\(id)"])
        child.waitForReady()
        return child
    }
    let endAt = monotonic() + UInt64(options.seconds * 1e9)
    func client() throws -> Child {
        let id = newID()
        return try Child(
            .client, id: id,
            arguments: [
                "--role", "client", cacheDirectory, history, "\(id)", "\(endAt)", "\(UInt64.random(in: 1...UInt64.max))",
                origin?.url ?? "-",
            ])
    }
    let daemon = executable.deletingLastPathComponent().appendingPathComponent("sharedcached")
    func compactor() throws -> Child {
        let id = newID()
        return try Child(
            .compactor, id: id, arguments: ["--dir", cacheDirectory, "--interval", "1s"], program: daemon,
            errors: "\(root)/compactor-\(id).log")
    }

    var children: [Child] = []
    for _ in 0..<options.subscribers { children.append(try subscriber()) }
    let fullRunSubscribers = children.map(\.id)
    children.append(try compactor())
    for _ in 0..<options.clients { children.append(try client()) }

    var crashes: [String] = []
    if options.crashRounds > 0 {
        let pause = options.seconds / Double(options.crashRounds + 1)
        for round in 0..<options.crashRounds {
            try await Task.sleep(for: .seconds(pause))
            let live = children.filter { !$0.killed && $0.process.isRunning }
            // Always keep one subscriber from the start alive to check against.
            let kind = options.victims.randomElement()!
            let candidates = live.filter { $0.kind == kind && !($0.kind == .subscriber && $0.id == fullRunSubscribers[0]) }
            guard let victim = candidates.randomElement() else { continue }
            victim.kill()
            crashes.append("\(round):\(kind.rawValue)-\(victim.id)")
            switch kind {
            case .client where monotonic() < endAt: children.append(try client())
            case .client: break
            case .compactor: children.append(try compactor())
            case .subscriber: children.append(try subscriber())
            }
        }
    }
    for child in children where child.kind == .client && !child.killed { child.process.waitUntilExit() }

    // A last removal every live subscriber must report, so we know they have caught up.
    try cache.put(key: "__end__", data: Data("end".utf8))
    try cache.remove(key: "__end__")
    let endHash = KeyHash(key: "__end__").hex
    let deadline = Date().addingTimeInterval(20)
    for child in children where child.kind == .subscriber && !child.killed {
        let path = "\(history)/subscriber-\(child.id).log"
        while Date() < deadline, !((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").contains(endHash) {
            try await Task.sleep(for: .milliseconds(20))
        }
    }
    for child in children where !child.killed {
        if child.kind == .compactor { send(SIGTERM, to: child.process) }
        child.finish()
    }

    // Subscribers there from start to end; the others heard only part of the run.
    let survivors = children.filter { $0.kind == .subscriber && !$0.killed && fullRunSubscribers.contains($0.id) }
    let report = try check(history: history, fullRunSubscribers: survivors.map(\.id), endHash: endHash)
    let verification = try cache.verify()
    var violations = report.violations
    // A writer killed after renaming its blob into place and before journaling it leaves one
    // blob nobody knows: not a put, so not wrong; the compactor sweeps such files after ten
    // minutes. At most one per killed client; anything else verify finds is a violation.
    let killedClients = children.filter { $0.kind == .client && $0.killed }.count
    let leftovers = verification.problems.filter { $0.kind == .orphanBlob }
    if leftovers.count > killedClients {
        violations += leftovers.map { "verify: \($0) (more leftovers than killed writers)" }
    }
    violations += verification.problems.filter { $0.kind != .orphanBlob }.map { "verify: \($0)" }
    // Every process agrees on what is stored: this process followed the journal all along; a new
    // one reads the manifest the compactors last wrote, then the journal after it.
    let followed = Set(try cache.listEntries().map(\.hash))
    let reopened = Set(try SharedCache(directory: cacheDirectory).listEntries().map(\.hash))
    if followed != reopened {
        violations.append(
            "views differ: \(followed.subtracting(reopened).count) entries only in the journal follower's index, "
                + "\(reopened.subtracting(followed).count) only in a newly opened one's")
    }
    print(
        "processes=\(children.count) seconds=\(Int(options.seconds)) clients=\(options.clients) "
            + "subscribers=\(options.subscribers) operations=\(report.operations) gets=\(report.gets) "
            + "hits=\(report.hits) puts=\(report.puts) removes=\(report.removes) fetches=\(report.fetches) "
            + "removals-heard=\(report.removalsHeard) crash-rounds=\(crashes.count) "
            + "leftovers=\(leftovers.count) violations=\(violations.count)")
    for violation in violations.prefix(20) { print("violation: \(violation)") }
    if violations.isEmpty && options.directory == nil { try? FileManager.default.removeItem(atPath: root) }
    return violations.isEmpty ? 0 : 1
}

// MARK: - The checker

struct CheckReport {
    var violations: [String] = []
    var operations = 0, gets = 0, hits = 0, puts = 0, removes = 0, fetches = 0, removalsHeard = 0
}

func check(history: String, fullRunSubscribers: [Int], endHash: String) throws -> CheckReport {
    var report = CheckReport()
    var puts = Set<String>()  // "key writer version"
    var gets: [String] = []
    var removed: [String] = []
    var subscriberLogs: [Int: [Substring]] = [:]
    for name in try FileManager.default.contentsOfDirectory(atPath: history) {
        let lines = try String(contentsOfFile: "\(history)/\(name)", encoding: .utf8).split(separator: "\n")
        if name.hasPrefix("subscriber-") {
            subscriberLogs[Int(name.dropFirst("subscriber-".count).dropLast(".log".count))!] = lines
            continue
        }
        for line in lines {
            report.operations += 1
            let fields = line.split(separator: " ")
            switch fields.first {
            case "P":
                report.puts += 1
                puts.insert(fields.dropFirst().joined(separator: " "))
            case "G":
                report.gets += 1
                report.hits += 1
                gets.append(fields.dropFirst().joined(separator: " "))
            case "R":
                report.removes += 1
                removed.append(String(fields[1]))
            case "F": report.fetches += 1
            case "X": report.violations.append("\(name): \(line)")
            default: report.violations.append("\(name): unreadable line \(line)")
            }
        }
    }
    // 1. Every get returned a body some put made for that key.
    for get in gets where !puts.contains(get) { report.violations.append("a get returned \(get), which no put made") }

    // 2. Exactly once, in order; full-run subscribers heard every removal and the same ones.
    var heard: [Int: [String]] = [:]
    for (id, lines) in subscriberLogs {
        var last: UInt64 = 0
        var sequences = Set<UInt64>()
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 3 else {
                report.violations.append("subscriber \(id): unreadable line \(line)")
                continue
            }
            if let sequence = UInt64(fields[0]) {
                if !sequences.insert(sequence).inserted { report.violations.append("subscriber \(id) heard \(sequence) twice") }
                if sequence < last { report.violations.append("subscriber \(id) heard \(sequence) after \(last)") }
                last = max(last, sequence)
            }
            heard[id, default: []].append("\(fields[0]) \(fields[1])")
        }
        report.removalsHeard += lines.count
    }
    for id in fullRunSubscribers {
        let lines = heard[id] ?? []
        let hashes = Set(lines.map { $0.split(separator: " ")[1] })
        for hash in removed where !hashes.contains(Substring(hash)) {
            report.violations.append("subscriber \(id) never heard of the removal of \(hash.prefix(16))")
        }
        if !hashes.contains(Substring(endHash)) { report.violations.append("subscriber \(id) never caught up") }
        if id != fullRunSubscribers[0], lines != heard[fullRunSubscribers[0]] ?? [] {
            report.violations.append("subscribers \(fullRunSubscribers[0]) and \(id) heard different removals")
        }
    }
    return report
}

// MARK: - Main

let arguments = CommandLine.arguments
if arguments.count >= 3, arguments[1] == "--role" {
    let rest = Array(arguments.dropFirst(3))
    do {
        switch arguments[2] {
        case "client": try await runClient(rest)
        case "subscriber": try runSubscriber(rest)
        default: fail("unknown role \(arguments[2])")
        }
    } catch {
        fail("\(arguments[2]): \(error)")
    }
    // Exit only once the client's frame is gone: what an async frame holds at exit(3) is
    // invisible to LeakSanitizer, which would report it as leaked.
    exit(0)
}
exit(try await runStress(parseOptions()))
