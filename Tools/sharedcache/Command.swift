import Foundation
import SharedCache
import SharedCacheCLI

/// One `sharedcache` command: its grammar, its help, and what it does.
struct Command: Sendable {
    var name: String
    /// Arguments after the command name, as the help and the man page show them.
    var synopsis: String
    var summary: String
    /// The command's own options, with one line of help each; `--dir`, `--json` and `--help`
    /// are accepted by every command.
    var options: [(Arguments.Option, String)] = []
    /// Hidden commands are the demo's helper processes.
    var hidden = false
    /// Whether the command works on the directory `--dir` names (the demo makes its own).
    var takesDirectory = true
    var run: @Sendable (Invocation) throws -> ExitStatus

    var usage: String {
        "sharedcache \(takesDirectory ? "[--dir PATH] " : "")\(name)\(synopsis.isEmpty ? "" : " " + synopsis)"
    }

    var help: String {
        var text = "usage: \(usage)\n\n\(summary)\n"
        let all = options + Command.globalOptions.filter { takesDirectory || $0.0.names != CacheLocation.option.names }
        text += "\noptions:\n"
        for (option, description) in all {
            let names = option.names.joined(separator: ", ") + (option.takesValue ? " VALUE" : "")
            text += "  \(names.padding(toLength: 24, withPad: " ", startingAt: 0)) \(description)\n"
        }
        return text
    }

    static let globalOptions: [(Arguments.Option, String)] = [
        (CacheLocation.option, "the cache directory (default: $SHAREDCACHE_DIR, else the user cache)"),
        (.flag("--json"), "print data as JSON (one object per line for lists)"),
        (.flag("-h", "--help"), "show this command's help"),
    ]
}

/// A command being run: its parsed arguments and where its output goes.
struct Invocation {
    var arguments: Arguments
    var directory: String
    var terminal: Terminal
    var json: Bool { arguments.has("--json") }

    /// Opens the cache directory.
    func cache(_ configuration: Configuration = Configuration()) throws(SharedCacheError) -> SharedCache {
        let cache = try SharedCache(directory: directory, configuration: configuration)
        for warning in cache.warnings { terminal.warn("warning: \(warning)") }
        return cache
    }

    /// The positional arguments, checked against how many the command takes.
    func positional(_ range: ClosedRange<Int>, _ what: String) throws(UsageError) -> [String] {
        let values = arguments.positional
        guard range.contains(values.count) else {
            throw UsageError(
                values.count < range.lowerBound ? "missing \(what)" : "unexpected argument \(values.last!)")
        }
        return values
    }
}
