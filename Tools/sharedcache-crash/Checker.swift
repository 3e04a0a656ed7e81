import Foundation
import SharedCache
import SharedCacheCLI
import SharedCacheEngine

/// What the API had acknowledged by a crash point, and so what each key may read back.
struct Expectations {
    /// What a key may read as: a version, or nothing.
    enum Outcome: Hashable {
        case present(Int)
        case absent
        /// Stored already expired: a miss is as good as the version.
        case presentOrAbsent(Int)

        func allows(_ version: Int?) -> Bool {
            switch self {
            case .present(let expected): version == expected
            case .absent: version == nil
            case .presentOrAbsent(let expected): version == nil || version == expected
            }
        }
    }

    /// Every version of each key a put was begun for: the only bodies a get may return.
    var begun: [String: Set<Int>] = [:]
    var acknowledged: [String: Outcome] = [:]
    /// Each writer's call begun and not acknowledged: the keys it touches (`nil`: any) and how.
    var inFlight: [String: (keys: Set<String>?, outcome: Outcome)] = [:]
    var keys: Set<String> = []

    /// Applies the workload's notes (`WRITER begin|ack OP …`), in order.
    mutating func read(_ note: String) {
        let words = note.split(separator: " ").map(String.init)
        guard words.count >= 3 else { return }
        let writer = words[0]
        let key = words.count > 3 ? words[3] : ""
        switch (words[1], words[2]) {
        case ("begin", "put"):
            let version = Int(words[4])!
            keys.insert(key)
            begun[key, default: []].insert(version)
            inFlight[writer] = ([key], words.count > 5 ? .presentOrAbsent(version) : .present(version))
        case ("begin", "remove"):
            inFlight[writer] = ([key], .absent)
        case ("begin", "checkpoint"):
            inFlight[writer] = ([], .absent)
        case ("begin", "compact"):
            inFlight[writer] = (nil, .absent)
        case ("begin", "freshen"):
            inFlight[writer] = ([key], .present(Int(words[4])!))
        case ("ack", "compact"):
            for evicted in key.split(separator: ",") { acknowledged[String(evicted)] = .absent }
            inFlight[writer] = nil
        case ("ack", _):
            // Acknowledged in journal order: a call that lands inside another's append is
            // acknowledged before it.
            if let (keys, outcome) = inFlight[writer] { for key in keys ?? [] { acknowledged[key] = outcome } }
            inFlight[writer] = nil
        default:
            break
        }
    }

    /// What a get of `key` that read `version` (nil: a miss) violates, if anything.
    func violation(_ key: String, read version: Int?, durable: Bool) -> String? {
        if let version, !(begun[key] ?? []).contains(version) {
            return "get(\(key)) returned version \(version), never put"
        }
        guard durable else { return nil }
        let acknowledged = acknowledged[key] ?? .absent
        if acknowledged.allows(version) { return nil }
        if inFlight.values.contains(where: { ($0.keys?.contains(key) ?? true) && $0.outcome.allows(version) }) {
            return nil
        }
        let read = version.map { "version \($0)" } ?? "a miss"
        return "get(\(key)) read \(read), but \(acknowledged) was acknowledged with Durability.synchronized"
    }
}

/// Opens a materialised crash state with the library (and, when asked, the tools) and
/// holds it to the rules.
struct Checker {
    /// The `sharedcache` tool, if one was built next to this one.
    let tool: String?

    /// The violations found in the directory at `root`; it is left repaired and used.
    func check(_ image: Image, at root: String, expecting expectations: Expectations, durable: Bool, runTool: Bool)
        throws -> [String]
    {
        var violations: [String] = []
        var configuration = Configuration(lockTimeout: .seconds(5), memoryCostLimit: 0)
        configuration.journalWatching = .polling(every: .seconds(3600))
        if runTool, let problem = try checkWithTool(image, at: root + ".tool") { violations.append(problem) }
        try image.materialise(at: root)

        let cache: SharedCache
        do {
            cache = try SharedCache(directory: root, configuration: configuration)
        } catch {
            // The error's advice must work.
            guard error.message.contains("sharedcache verify --repair") else {
                return violations + ["does not open, and the error gives no advice that works: \(error.message)"]
            }
            guard let tool else {
                return violations + ["does not open: \(error.message) (no sharedcache tool to follow its advice)"]
            }
            let (status, output) = run(tool, ["--dir", root, "verify", "--repair"])
            do {
                cache = try SharedCache(directory: root, configuration: configuration)
            } catch {
                let advice = "`sharedcache verify --repair` exited \(status) and did not fix it: \(output)"
                return violations + ["does not open: \(error.message); \(advice)"]
            }
        }

        var read: [String: Data] = [:]
        for key in expectations.keys.sorted() {
            do {
                let hit = try cache.get(key: key)
                read[key] = hit?.data
                var version: Int? = nil
                if let hit {
                    version = (expectations.begun[key] ?? []).first { value(key, $0) == hit.data }
                    if version == nil {
                        violations.append("get(\(key)) returned \(hit.data.count) bytes that no put of it stored")
                        continue
                    }
                }
                if let violation = expectations.violation(key, read: version, durable: durable) {
                    violations.append(violation)
                }
            } catch {
                violations.append("get(\(key)) failed: \(error.message)")
            }
        }

        do {
            _ = try cache.verify(repair: true)
            let report = try cache.verify()
            if !report.isClean {
                violations.append("verify is not clean after verify --repair: \(report.problems.map(\.description))")
            }
            let probe = Data("probe".utf8)
            try cache.put(key: "probe", data: probe)
            if try cache.get(key: "probe")?.data != probe {
                violations.append("a put after recovery did not read back")
            }
            // Recovery is done: a checkpoint, and a process opening the directory afresh, see
            // exactly what was read before.
            _ = try cache.checkpoint()
            let reopened = try SharedCache(directory: root, configuration: configuration)
            for key in expectations.keys.sorted() + ["probe"] {
                let again = try reopened.get(key: key)?.data
                if again != (key == "probe" ? probe : read[key]) {
                    violations.append(
                        "get(\(key)) after a checkpoint and a reopen read \(again?.count ?? -1) bytes, "
                            + "not the \(read[key]?.count ?? -1) read before")
                }
            }
        } catch {
            violations.append("recovery or use failed: \(error.message)")
        }
        return violations
    }

    /// Runs `sharedcache verify --repair`, then `sharedcache verify`, on a copy of the state.
    private func checkWithTool(_ image: Image, at copy: String) throws -> String? {
        guard let tool else { return nil }
        try image.materialise(at: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let (repairStatus, repairOutput) = run(tool, ["--dir", copy, "verify", "--repair"])
        guard repairStatus == 0 else { return "`sharedcache verify --repair` exited \(repairStatus): \(repairOutput)" }
        let (status, output) = run(tool, ["--dir", copy, "verify"])
        return status == 0 ? nil : "`sharedcache verify` after --repair exited \(status): \(output)"
    }
}

/// Runs a program to its end; its status and what it printed.
func run(_ path: String, _ arguments: [String], environment: [String: String] = [:]) -> (Int32, String) {
    let child: ChildProcess
    do {
        child = try ChildProcess(
            URL(fileURLWithPath: path), arguments: arguments, environment: environment, errors: .standardOutput)
    } catch {
        return (-1, "\(error)")
    }
    runningChild = child.processID
    defer { runningChild = 0 }
    let output = child.output?.remainingText() ?? ""
    return (child.wait().status, output.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// The program ``run(_:_:environment:)`` waits for, for the hang handler to kill; 0 when none.
nonisolated(unsafe) var runningChild: Int32 = 0
