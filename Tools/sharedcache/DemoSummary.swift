import SharedCache
import SharedCacheCLI

// The end of the demo: each process's counts, checked against the directory's shared counters.

extension DemoRun {
    func summarize(
        _ summaries: [Int: ClientSummary], statistics: Statistics, printer: LinePrinter, directory: String,
        failed: DemoError
    ) throws -> ExitStatus {
        let terminal = invocation.terminal
        let clientList = (1...clients).compactMap { summaries[$0] }
        guard clientList.count == clients, let activity = statistics.directory else { throw failed }
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
