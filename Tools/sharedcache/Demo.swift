import SharedCache
import SharedCacheCLI

// `sharedcache demo`: several client processes and the compactor on one temporary directory,
// shown live, ending with a summary checked against the counters every process shares.
//
// The clients and the compactor are this executable re-run with hidden commands, so the demo
// needs nothing but itself. DemoClient.swift is a client, DemoRun.swift the parent and its live
// display, DemoSummary.swift the summary and its checks.

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
            (.value("--seconds"), "how long the clients work at least (default 6; each stores at least 20 entries)"),
            (.flag("--keep"), "keep the temporary directory and print its path"),
        ],
        takesDirectory: false
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
        name: "demo-client", synopsis: "DIR ID SECONDS CLIENTS", summary: "A demo client process.", hidden: true
    ) { invocation in
        let values = try invocation.positional(4...4, "DIR ID SECONDS CLIENTS")
        return try DemoClient(
            directory: values[0], id: Int(values[1]) ?? 0, seconds: Double(values[2]) ?? 5,
            clients: max(1, Int(values[3]) ?? 1)
        ).run()
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
func itemKey(client: Int, item: Int) -> String { "client-\(client)/photo-\(item).jpg" }

/// The key the demo stores and removes last: every client hears its removal and then reports.
let endKey = "demo/end"

enum DemoError: Error, CustomStringConvertible {
    /// A client or the compactor ended before it reported; `kept`: the directory, with --keep.
    case childFailed(kept: String?)

    var description: String {
        switch self {
        case .childFailed(kept: nil):
            "a demo process failed to start or report; run `sharedcache demo --keep` to keep its directory and look"
        case .childFailed(kept: let directory?):
            "a demo process failed to start or report; its directory is kept, to look at what each process "
                + "stored and removed: `sharedcache --dir \(SharedCacheError.shellWord(directory)) journal`"
        }
    }
}
