import Dispatch
import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// `sharedcache demo`: several client processes and the compactor on one temporary directory,
// shown live, ending with a summary checked against the counters every process shares.
//
// The clients and the compactor are this executable re-run with hidden commands, so the demo
// needs nothing but itself.

extension Command {
    static let demo = Command(
        name: "demo", synopsis: "[--clients N] [--seconds N] [--keep]",
        summary: """
            Run several client processes and the compactor on a new temporary cache directory and show \
            live what each stores, reads, and learns the others removed; end with a summary checked \
            against the directory's shared counters. Needs no network. Exits 70 if the counts disagree.
            """,
        options: [
            (.value("--clients"), "how many client processes (default 3)"),
            (.value("--seconds"), "how long the clients work (default 6)"),
            (.flag("--keep"), "keep the temporary directory and print its path"),
        ]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        guard let clients = Int(invocation.arguments.value("--clients") ?? "3"), (1...8).contains(clients) else {
            throw UsageError("--clients takes a number from 1 to 8")
        }
        guard let seconds = Double(invocation.arguments.value("--seconds") ?? "6"), seconds > 0, seconds <= 50 else {
            throw UsageError("--seconds takes a number of seconds up to 50")
        }
        return try DemoRun(clients: clients, seconds: seconds, invocation: invocation).run()
    }

    /// Hidden: one demo client.
    static let demoClient = Command(
        name: "demo-client", synopsis: "DIR ID SECONDS", summary: "A demo client process.", hidden: true
    ) { invocation in
        let values = try invocation.positional(3...3, "DIR ID SECONDS")
        return try DemoClient(directory: values[0], id: Int(values[1]) ?? 0, seconds: Double(values[2]) ?? 5).run()
    }

    /// Hidden: the demo's compactor, the same loop as sharedcached.
    static let demoCompactor = Command(
        name: "demo-compactor", synopsis: "DIR", summary: "The demo's compactor.", hidden: true
    ) { invocation in
        let directory = try invocation.positional(1...1, "DIR")[0]
        return Daemon(directory: directory, verbose: true, interval: .seconds(1), terminal: Terminal(tool: "compactor"))
            .run(once: false, dryRun: false)
    }
}

/// The name a client gives its n-th item.
private func itemKey(client: Int, item: Int) -> String { "client-\(client)/photo-\(item).jpg" }
private let endKey = "demo/end"

/// What one client did, as it reports at the end.
struct ClientSummary: Codable {
    var client: Int
    var stored = 0
    var hits = 0
    var misses = 0
    var removed = 0
    /// Every removal it was told of, its own included.
    var heard = 0
    /// Of those, removals made by another process.
    var heardFromOthers = 0
}

/// One client process: subscribe, then store, read and remove at random for a while, printing
/// each step as a tab-separated line for the parent to show.
struct DemoClient {
    let directory: String
    let id: Int
    let seconds: Double

    func run() throws -> ExitStatus {
        let cache = try SharedCache(directory: directory, configuration: Configuration(recencyInterval: .seconds(1)))
        let out = FileHandle.standardOutput
        let summary = Locked(ClientSummary(client: id))
        let names = Locked([KeyHash: String]())
        let ended = DispatchSemaphore(value: 0)
        let me = getpid()
        let subscription = cache.onRemovals { batch in
            for removal in batch {
                if removal.key == endKey { ended.signal(); continue }
                let fromOther = removal.remover?.processID != UInt32(me)
                summary.withLock {
                    $0.heard += 1
                    if fromOther { $0.heardFromOthers += 1 }
                }
                guard fromOther else { continue }
                let name = removal.key ?? names.withLock { $0[removal.hash] } ?? "an entry it never saw"
                out.write(Data("heard\t\(name)\t\(removal.reason)\t\(removal.remover?.processID ?? 0)\n".utf8))
            }
        }
        out.write(Data("ready\n".utf8))
        _ = readLine()  // "go": every client has subscribed, so every removal reaches all of them

        var random = SystemRandomNumberGenerator()
        var mine: [Int] = []
        let deadline = Date().addingTimeInterval(seconds)
        var item = 0
        while Date() < deadline {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                item += 1
                let key = itemKey(client: id, item: item)
                let size = Int.random(in: 6_000...24_000, using: &random)
                try cache.put(key: key, data: Data(repeating: UInt8(id), count: size))
                names.withLock { $0[KeyHash(key: key)] = key }
                mine.append(item)
                summary.withLock { $0.stored += 1 }
                out.write(Data("stored\t\(key)\t\(size)\n".utf8))
            case 4..<9:
                let other = Int.random(in: 1...4, using: &random)
                let key = itemKey(client: other, item: Int.random(in: max(1, item - 12)...max(1, item), using: &random))
                names.withLock { $0[KeyHash(key: key)] = key }
                if let hit = try cache.get(key: key) {
                    summary.withLock { $0.hits += 1 }
                    out.write(Data("hit\t\(key)\t\(hit.data.count)\n".utf8))
                } else {
                    summary.withLock { $0.misses += 1 }
                    out.write(Data("miss\t\(key)\n".utf8))
                }
            default:
                guard let victim = mine.randomElement(using: &random) else { continue }
                mine.removeAll { $0 == victim }
                let key = itemKey(client: id, item: victim)
                if try cache.remove(key: key) {
                    summary.withLock { $0.removed += 1 }
                    out.write(Data("removed\t\(key)\n".utf8))
                }
            }
            Thread.sleep(forTimeInterval: Double.random(in: 0.02...0.08, using: &random))
        }
        out.write(Data("done\n".utf8))
        // Keep listening until the parent's end marker: removals by others may still be coming.
        ended.wait()
        subscription.cancel()
        let encoded = try JSONEncoder().encode(summary.withLock { $0 })
        out.write(Data("summary\t".utf8) + encoded + Data("\n".utf8))
        return .success
    }
}

/// The parent: start everything, show what happens, check the totals.
struct DemoRun {
    let clients: Int
    let seconds: Double
    let invocation: Invocation

    func run() throws -> ExitStatus {
        let terminal = invocation.terminal
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("sharedcache-demo-\(getpid())-\(Int(Date().timeIntervalSince1970))").path
        let limit = Self.sizeLimit
        let cache = try SharedCache(directory: directory, configuration: Configuration(sizeLimit: limit))
        defer { if !invocation.arguments.has("--keep") { try? FileManager.default.removeItem(atPath: directory) } }
        let show: (String) -> Void = { line in if !invocation.json { terminal.print(line) } }
        show("SharedCache demo: \(clients) client processes and the compactor share \(directory)")
        show("(size limit \(formatBytes(limit)); the compactor trims to 90% of it)\n")

        let me = ChildProcess.currentExecutable
        // The compactor's log (stderr) is what the display shows of it.
        let compactor = try ChildProcess(
            me, arguments: ["demo-compactor", directory], input: .pipe, output: .discard, errors: .captured)
        let children = try (1...clients).map { id in
            try ChildProcess(me, arguments: ["demo-client", directory, "\(id)", "\(seconds)"], input: .pipe)
        }
        var names = [compactor.processID: "the compactor", getpid(): "the demo"]
        for (index, child) in children.enumerated() { names[child.processID] = "client \(index + 1)" }
        let printer = LinePrinter(show: show, processNames: names)
        compactor.errors?.forEachLine { line in printer.compactor(line) }
        for child in children { guard child.nextLine() == "ready" else { throw DemoError.childFailed } }
        let summaries = Locked([Int: ClientSummary]())
        let done = DispatchGroup()
        for (index, child) in children.enumerated() {
            done.enter()
            child.output?.forEachLine { line in
                if line == "done" {
                    done.leave()
                } else if line.hasPrefix("summary\t"),
                    let summary = try? JSONDecoder().decode(
                        ClientSummary.self, from: Data(line.dropFirst(8).utf8))
                {
                    summaries.withLock { $0[summary.client] = summary }
                } else {
                    printer.client(index + 1, line)
                }
            }
        }
        for child in children { child.send("go") }
        done.wait()
        // Give the compactor a last pass over what the clients left, then end the listeners.
        Thread.sleep(forTimeInterval: 1.5)
        try cache.put(key: endKey, data: Data())
        try cache.remove(key: endKey)
        for child in children { child.wait() }
        compactor.signal(SIGTERM)
        compactor.wait()

        let statistics = try cache.statistics()
        return try summarize(summaries.withLock { $0 }, statistics: statistics, printer: printer, directory: directory)
    }

    private func summarize(
        _ summaries: [Int: ClientSummary], statistics: Statistics, printer: LinePrinter, directory: String
    ) throws -> ExitStatus {
        let terminal = invocation.terminal
        let clientList = (1...clients).compactMap { summaries[$0] }
        guard clientList.count == clients, let activity = statistics.directory else { throw DemoError.childFailed }
        let total = { (field: KeyPath<ClientSummary, Int>) in UInt64(clientList.reduce(0) { $0 + $1[keyPath: field] }) }
        let journaledRemovals = activity.removals.values.reduce(0, +) - 1  // not the end marker
        let evicted = (activity.removals[.size] ?? 0) + (activity.removals[.expired] ?? 0)
        // The parent's end-marker put and removal are in the counters too.
        let checks: [(String, Bool)] = [
            ("stores counted by the directory = stores the clients made", activity.stores == total(\.stored) + 1),
            (
                "hits and misses counted = what the clients read",
                activity.hits == total(\.hits) && activity.misses == total(\.misses)
            ),
            (
                "manual removals counted = removals the clients made",
                (activity.removals[.manual] ?? 0) == total(\.removed) + 1
            ),
            (
                "every client heard every removal, its own and the others'",
                clientList.allSatisfy { UInt64($0.heard) == journaledRemovals }
            ),
            ("the directory is within its size limit", statistics.totalBytes <= Self.sizeLimit),
        ]
        let consistent = checks.allSatisfy(\.1)
        if invocation.json {
            terminal.printJSON(
                DemoJSON(
                    clients: clientList, compactorEvictions: evicted, compactions: activity.compactions,
                    journaledRemovals: journaledRemovals, entries: statistics.entryCount, bytes: statistics.totalBytes,
                    consistent: consistent))
        } else {
            terminal.print("\nSummary")
            terminal.print("  process    stored  hits  misses  removed  heard (from others)")
            for summary in clientList {
                terminal.print(
                    "  client \(summary.client)   \(pad(summary.stored, 6))  \(pad(summary.hits, 4))  \(pad(summary.misses, 6))  "
                        + "\(pad(summary.removed, 7))  \(summary.heard) (\(summary.heardFromOthers))")
            }
            terminal.print("  compactor  evicted \(evicted) in \(activity.compactions) passes")
            terminal.print(
                "  directory  \(statistics.entryCount) entries, \(formatBytes(statistics.totalBytes)); "
                    + "\(journaledRemovals) removals journaled")
            for (check, passed) in checks { terminal.print("  \(passed ? "✓" : "✗") \(check)") }
            if invocation.arguments.has("--keep") { terminal.print("  kept \(directory)") }
        }
        return consistent ? .success : .software
    }

    static let sizeLimit: UInt64 = 250_000

    private func pad(_ value: Int, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - "\(value)".count)) + "\(value)"
    }
}

struct DemoJSON: Encodable {
    var clients: [ClientSummary]
    var compactorEvictions: UInt64
    var compactions: UInt64
    var journaledRemovals: UInt64
    var entries: Int
    var bytes: UInt64
    var consistent: Bool
}

enum DemoError: Error, CustomStringConvertible {
    case childFailed
    var description: String { "a demo process failed to start or report; run `sharedcache demo --keep` to look" }
}

/// Turns children's lines into the live display.
final class LinePrinter: @unchecked Sendable {
    private let show: (String) -> Void
    private let processNames: [Int32: String]
    private let lock = NSLock()
    private var evictedInPass = 0

    init(show: @escaping (String) -> Void, processNames: [Int32: String]) {
        self.show = show
        self.processNames = processNames
    }

    func client(_ id: Int, _ line: String) {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
        let text: String
        switch fields.first {
        case "stored": text = "stored  \(fields[1])  \(formatBytes(UInt64(fields[2]) ?? 0))"
        case "hit": text = "read    \(fields[1])  \(formatBytes(UInt64(fields[2]) ?? 0))"
        case "miss": text = "missed  \(fields[1])"
        case "removed": text = "removed \(fields[1])"
        case "heard":
            let remover = Int32(fields[3]).flatMap { processNames[$0] } ?? "process \(fields[3])"
            text = "learned \(fields[1]) is gone (\(fields[2]), by \(remover))"
        default: text = line
        }
        lock.withLock { show("[client \(id)] \(text)") }
    }

    /// The compactor logs with -d: "compactor: evicted HASH SIZE reason R" and "compactor: pass: …".
    func compactor(_ line: String) {
        let fields = line.split(separator: " ")
        lock.withLock {
            if fields.count >= 4, fields[1] == "evicted" {
                evictedInPass += 1
            } else if fields.count >= 2, fields[1] == "pass:" {
                if evictedInPass > 0 { show("[compactor] evicted \(evictedInPass) entries to stay under the limit") }
                evictedInPass = 0
            }
        }
    }
}
