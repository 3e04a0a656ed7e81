// sharedcache: the admin tool of a SharedCache directory. See sharedcache(1).

import Foundation
import SharedCache
import SharedCacheCLI

reserveStandardDescriptors()
resetSignalMask()
reportPeakMemoryAtExitIfAsked()
let terminal = Terminal(tool: "sharedcache")

let commands: [Command] = [
    .fetch, .get, .put, .remove, .clear, .list, .show, .initialize, .stat, .journal, .verify, .compact, .config, .demo,
    .demoClient, .demoCompactor,
]

let overview: String = {
    var text = """
        usage: sharedcache [--dir PATH] COMMAND [ARGS]

        The admin tool of a SharedCache directory: one on-disk cache shared by many processes.

        commands:

        """
    for command in commands where !command.hidden {
        text += "  \(command.name.padding(toLength: 9, withPad: " ", startingAt: 0)) \(command.synopsis)\n"
    }
    text += """
          help      [COMMAND]

        The directory is --dir PATH, else $SHAREDCACHE_DIR, else the user cache directory.
        Every command takes --json for output a script can parse. 'sharedcache help COMMAND' tells more.

        """
    return text
}()

/// `--dir PATH` is the only option that takes a value before the command, so the command is the
/// first argument that is neither an option nor the value of --dir.
func splitCommand(_ arguments: [String]) -> (String?, [String]) {
    var rest = arguments
    var index = 0
    while index < rest.count {
        let argument = rest[index]
        if argument == "--" { break }
        if argument == CacheLocation.option.name {
            index += 2
            continue
        }
        if argument.hasPrefix("-") {
            index += 1
            continue
        }
        rest.remove(at: index)
        return (argument, rest)
    }
    return (nil, rest)
}

let arguments: [String]
do {
    arguments = try commandLineArguments()
} catch {
    terminal.usage(error, help: "sharedcache help")
}
let (name, rest) = splitCommand(arguments)

if name == nil {
    if rest.contains("--version") {
        terminal.print("sharedcache \(SharedCacheVersion.string)")
        terminal.exit(.success)
    }
    if rest.contains("-h") || rest.contains("--help") || rest.isEmpty {
        terminal.print(overview)
        terminal.exit(rest.isEmpty ? .usage : .success)
    }
    terminal.usage(UsageError("missing command"), help: "sharedcache help")
}

if name == "help" {
    // `sharedcache --dir PATH help put`: the value of --dir is not the topic.
    guard let topic = splitCommand(rest).0, topic != "help" else {
        terminal.print(overview)
        terminal.exit(.success)
    }
    guard let command = commands.first(where: { $0.name == topic }) else {
        terminal.usage(UsageError("unknown command \(topic)"), help: "sharedcache help")
    }
    terminal.print(command.help)
    terminal.exit(.success)
}

guard let command = commands.first(where: { $0.name == name }) else {
    terminal.usage(UsageError("unknown command \(name!)"), help: "sharedcache help")
}

do {
    let arguments = try Arguments(rest, options: (command.options + Command.globalOptions).map(\.0))
    if arguments.has("-h") {
        terminal.print(command.help)
        terminal.exit(.success)
    }
    if !command.takesDirectory, arguments.value(CacheLocation.option.names[0]) != nil {
        throw UsageError("\(command.name) works on a new temporary directory of its own, not one --dir names")
    }
    let directory = try CacheLocation.directory(arguments)
    let invocation = Invocation(arguments: arguments, directory: directory, terminal: terminal)
    terminal.exit(try command.run(invocation))
} catch let error as UsageError {
    terminal.usage(error, help: "sharedcache help \(command.name)")
} catch let error as SharedCacheError {
    terminal.fail(error.description, ExitStatus(error))
} catch {
    terminal.fail("\(error)", .software)
}
