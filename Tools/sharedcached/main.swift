// sharedcached: the compactor daemon of a SharedCache directory. See sharedcached(8).

import Foundation
import SharedCache
import SharedCacheCLI

reserveStandardDescriptors()
resetSignalMask()
let terminal = Terminal(tool: "sharedcached")
let help = """
    usage: sharedcached [--dir PATH] [-d] [--once] [--dry-run] [--interval DURATION]

    Keeps a SharedCache directory within its limits: evicts expired entries, then the least
    recently used down to 90% of the size and entry limits, journals every removal before
    unlinking its blob, and checkpoints. One compactor runs per directory.

    options:
      --dir PATH            the cache directory (default: $SHAREDCACHE_DIR, else the user cache)
      -d, --foreground      log every step to stderr, not just one line per pass
      --once                run one pass and exit
      --dry-run             print what one pass would evict and why, change nothing, exit
      --interval DURATION   time between passes, e.g. 30s, 5m (default 5m)
      -h, --help            show this help
      --version             show the version

    signals: SIGTERM and SIGINT finish the current step and exit 0; SIGHUP re-reads config.
    """

let options: [Arguments.Option] = [
    CacheLocation.option, .flag("-d", "--foreground"), .flag("--once"), .flag("--dry-run"), .value("--interval"),
    .flag("-h", "--help"), .flag("--version"),
]
let arguments: Arguments
do {
    arguments = try Arguments(commandLineArguments(), options: options)
} catch {
    terminal.usage(error, help: "sharedcached --help")
}
if arguments.has("-h") {
    terminal.print(help)
    terminal.exit(.success)
}
if arguments.has("--version") {
    terminal.print("sharedcached \(SharedCacheVersion.string)")
    terminal.exit(.success)
}
let directory: String
do {
    directory = try CacheLocation.directory(arguments)
} catch {
    terminal.usage(error, help: "sharedcached --help")
}
if let extra = arguments.positional.first {
    terminal.usage(UsageError("unexpected argument \(extra)"), help: "sharedcached --help")
}
var interval = Duration.seconds(300)
if let text = arguments.value("--interval") {
    guard let parsed = DurationText.parse(text), parsed > .zero else {
        terminal.usage(UsageError("--interval \(text) is not a duration like 30s or 5m"), help: "sharedcached --help")
    }
    interval = parsed
}

let daemon = Daemon(directory: directory, verbose: arguments.has("-d"), interval: interval, terminal: terminal)
terminal.exit(daemon.run(once: arguments.has("--once"), dryRun: arguments.has("--dry-run")))
