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
            try ChildProcess(
                me, arguments: ["demo-client", directory, "\(id)", "\(seconds)", "\(clients)"], input: .pipe)
        }
        // On a failure the others would go on working, in a directory about to be removed, or
        // kept to be looked at: stop them first. (Run before the directory's removal above.)
        defer {
            for process in [compactor] + children where process.isRunning {
                process.signal(SIGTERM)
                _ = process.wait()
            }
        }
        let failed = DemoError.childFailed(kept: invocation.arguments.has("--keep") ? directory : nil)
        var names = [compactor.processID: "the compactor", getpid(): "the demo"]
        for (index, child) in children.enumerated() { names[child.processID] = "client \(index + 1)" }
        let printer = LinePrinter(show: show, processNames: names)
        compactor.errors?.forEachLine { line in printer.compactor(line) }
        for child in children { guard child.nextLine() == "ready" else { throw failed } }
        let summaries = Locked([Int: ClientSummary]())
        // Every client says it is done, then (once it heard the end marker) reports. One whose
        // output ends before it said so failed (a put threw, or it was killed): the demo stops
        // there, where it waited for it for ever.
        let done = DispatchGroup()
        let reported = DispatchGroup()
        let endedEarly = Locked(false)
        for (index, child) in children.enumerated() {
            done.enter()
            reported.enter()
            Thread.detachNewThread {
                var (saidDone, didReport) = (false, false)
                while let line = child.nextLine() {
                    if line == "done" {
                        saidDone = true
                        done.leave()
                    } else if line.hasPrefix("summary\t"),
                        let summary = try? JSONDecoder().decode(
                            ClientSummary.self, from: Data(line.dropFirst(8).utf8))
                    {
                        summaries.withLock { $0[summary.client] = summary }
                        didReport = true
                        reported.leave()
                    } else {
                        printer.client(index + 1, line)
                    }
                }
                if !saidDone {
                    endedEarly.withLock { $0 = true }
                    done.leave()
                }
                if !didReport { reported.leave() }
            }
        }
        for child in children { child.send("go") }
        done.wait()
        if endedEarly.withLock({ $0 }) { throw failed }
        // The journal wakes the compactor for what the clients left over the limit. Once the
        // directory is within it, the compactor stops, so every eviction is journaled before
        // the end marker the listeners stop at. (The bound is for a compactor that never trims.)
        let trimmed = ContinuousClock.now + .seconds(120)
        while try cache.statistics().totalBytes > limit, ContinuousClock.now < trimmed {
            Thread.sleep(forTimeInterval: 0.02)
        }
        compactor.signal(SIGTERM)
        compactor.wait()
        try cache.put(key: endKey, data: Data())
        try cache.remove(key: endKey)
        for child in children { child.wait() }
        // Its last line may still be on its way from the pipe when a client has exited. (The
        // bound is for one that died without reporting: the summary then says so.)
        _ = reported.wait(timeout: .now() + 60)

        let statistics = try cache.statistics()
        return try summarize(
            summaries.withLock { $0 }, statistics: statistics, printer: printer, directory: directory, failed: failed)
    }

    static let sizeLimit: UInt64 = 250_000
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
