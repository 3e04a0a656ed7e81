import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheTestSupport

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The run: its options, the children it starts and kills, and the summary.

struct Options {
    var seconds = 60.0
    var clients = 4
    var subscribers = 2
    var crashRounds = 0
    /// Which kinds of process the crash rounds may kill.
    var victims: [Child.Kind] = [.client, .client, .compactor, .subscriber]
    var directory: String?
    /// Draws every client's seed and every crash round's victim: the same seed makes the same
    /// choices (the kernel's scheduling still varies the run).
    var seed = UInt64.random(in: 1...UInt64(UInt32.max))
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
        case "--seed":
            guard let seed = arguments.popFirst().flatMap({ UInt64($0) }) else { fail("--seed needs a number") }
            options.seed = seed
        case "--victims":
            let kinds = (arguments.popFirst() ?? "").split(separator: ",").map { Child.Kind(rawValue: String($0)) }
            guard !kinds.isEmpty, kinds.allSatisfy({ $0 != nil }) else {
                fail("--victims takes a list of client, compactor, subscriber")
            }
            options.victims = kinds.map { $0! }
        default:
            fail(
                "unknown option \(argument); usage: sharedcache-stress [--seconds N] [--clients N] "
                    + "[--subscribers N] [--crash-rounds N] [--victims client,compactor,subscriber] [--seed N] "
                    + "[--dir DIR]")
        }
    }
    return options
}

let executable = ChildProcess.currentExecutable

/// One process of the run: what it is, and whether the run killed it.
final class Child {
    enum Kind: String { case client, subscriber, compactor }
    let kind: Kind
    let id: Int
    let process: ChildProcess
    var killed = false

    /// Starts `program` with a pipe for standard input, whose end tells a subscriber to finish;
    /// its standard error goes to `errors`, or to this process's.
    init(_ kind: Kind, id: Int, arguments: [String], program: URL = executable, errors: String? = nil) throws {
        self.kind = kind
        self.id = id
        process = try ChildProcess(
            program, arguments: arguments, input: .pipe, errors: errors.map { .file($0) } ?? .inherit)
    }

    func waitForReady() {
        if process.nextLine() != "ready" { fail("\(kind) \(id) did not start") }
    }

    func kill() {
        killed = true
        process.signal(SIGKILL)
        process.wait()
    }

    /// Closes standard input (a subscriber's signal to finish) and waits.
    func finish() {
        process.finish()
    }
}

func runStress(_ options: Options) async throws -> Int32 {
    // Debug builds of the compactor then reclaim pack segments two seconds after their last
    // write instead of a minute: moves and retirements happen, under the kills, within a run.
    setenv("SHAREDCACHE_PACK_SETTLE_MS", "2000", 1)
    let root = options.directory ?? NSTemporaryDirectory() + "sharedcache-stress-\(getpid())"
    let cacheDirectory = "\(root)/cache"
    let history = "\(root)/history"
    try FileManager.default.createDirectory(atPath: history, withIntermediateDirectories: true)
    // Small limits, so the compactor evicts for size and for expiry all along; a small pack
    // threshold, so a third of the bodies (40 KB) are blob files and the rest packed records.
    let cache = try SharedCache(
        directory: cacheDirectory,
        configuration: Configuration(sizeLimit: 256 << 10, defaultExpiry: .seconds(3), packThreshold: 16 << 10))

    let origin = try LoopbackOrigin(root: "\(root)/origin") { www in
        try FileManager.default.createDirectory(atPath: "\(www)/f", withIntermediateDirectories: true)
        for number in 0..<originFiles { try originBody(number).write(to: URL(fileURLWithPath: "\(www)/f/\(number).txt")) }
    }

    var random = SplitMix64(seed: options.seed)
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
                "--role", "client", cacheDirectory, history, "\(id)", "\(endAt)", "\(random.next())",
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
            // Always keep one subscriber from the start alive to check against.
            let killable = children.filter {
                !$0.killed && $0.process.isRunning && !($0.kind == .subscriber && $0.id == fullRunSubscribers[0])
            }
            // A kind first, among those with one alive: on a slow machine the last rounds come
            // after the clients' end, and they still kill something rather than nothing.
            let kinds = options.victims.filter { kind in killable.contains { $0.kind == kind } }
            guard let kind = kinds.randomElement(using: &random),
                let victim = killable.filter({ $0.kind == kind }).randomElement(using: &random)
            else { continue }
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
    for child in children where child.kind == .client && !child.killed { child.process.wait() }

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
        if child.kind == .compactor { child.process.signal(SIGTERM) }
        child.finish()
    }

    // Subscribers there from start to end; the others heard only part of the run.
    let survivors = children.filter { $0.kind == .subscriber && !$0.killed && fullRunSubscribers.contains($0.id) }
    let report = try check(history: history, fullRunSubscribers: survivors.map(\.id), endHash: endHash)
    let verification = try cache.verify()
    var violations = report.violations
    // A writer killed while writing its blob leaves its temporary file (unlocked now that it is
    // dead, so verify reports it); one killed after renaming the blob into place and before
    // journaling it leaves a blob nobody knows; one killed in the middle of its journal write
    // leaves a record cut short, which others append after and every process reads past.
    // None is a put, so none is wrong, and the compactor sweeps the files. At most one per
    // killed client; anything else verify finds is a violation.
    let killedClients = children.filter { $0.kind == .client && $0.killed }.count
    let leftoverKinds: Set<VerificationReport.Problem.Kind> = [.orphanBlob, .staleTemporaryFile, .damagedJournal]
    let leftovers = verification.problems.filter { leftoverKinds.contains($0.kind) }
    if leftovers.count > killedClients {
        violations += leftovers.map { "verify: \($0) (more leftovers than killed writers)" }
    }
    violations += verification.problems.filter { !leftoverKinds.contains($0.kind) }.map { "verify: \($0)" }
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
            + "leftovers=\(leftovers.count) violations=\(violations.count) seed=\(options.seed)")
    for violation in violations.prefix(20) { print("violation: \(violation)") }
    if violations.isEmpty && options.directory == nil { try? FileManager.default.removeItem(atPath: root) }
    return violations.isEmpty ? 0 : 1
}
