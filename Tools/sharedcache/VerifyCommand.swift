import Foundation
import SharedCache
import SharedCacheCLI

// verify: every entry against its blob, and --repair.

extension Command {
    static let verify = Command(
        name: "verify", synopsis: "[--repair]",
        summary: """
            Check every entry's blob in full against the journal and manifest, and look for orphaned, \
            foreign and leftover files. Exits 65 when problems remain.
            """,
        options: [(.flag("--repair"), "fix what is found: journal the removal of damaged entries, delete strays")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let report = try invocation.cache().verify(repair: invocation.arguments.has("--repair"))
        if invocation.json {
            invocation.terminal.printJSON(VerifyJSON(report))
        } else {
            for problem in report.problems { invocation.terminal.print(problem.description) }
            invocation.terminal.print(
                "\(report.entriesChecked) entries checked (\(formatBytes(report.bytesChecked))), "
                    + "\(report.problems.count) problem(s), \(report.problems.filter { !$0.repaired }.count) remaining")
        }
        return report.isClean ? .success : .dataError
    }
}

struct VerifyJSON: Encodable {
    struct Problem: Encodable {
        var kind: String
        var path: String
        var detail: String
        var repaired: Bool
    }

    var clean: Bool
    var entriesChecked: Int
    var bytesChecked: UInt64
    var problems: [Problem]

    init(_ report: VerificationReport) {
        clean = report.isClean
        entriesChecked = report.entriesChecked
        bytesChecked = report.bytesChecked
        problems = report.problems.map {
            Problem(kind: $0.kind.rawValue, path: $0.path, detail: $0.detail, repaired: $0.repaired)
        }
    }
}
