import Foundation
import SharedCache
import SharedCacheCLI
import SharedCachePlatform

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// journal: the records, and with --follow what other processes do as they do it.

extension Command {
    static let journal = Command(
        name: "journal", synopsis: "[--follow]",
        summary: """
            Print the journal, one record per line: what every process stored, read (as recency) \
            and removed, and why. With --follow, keep printing records as they are appended.
            """,
        options: [(.flag("-f", "--follow"), "keep running and print records as any process appends them")]
    ) { invocation in
        _ = try invocation.positional(0...0, "")
        let cache = try invocation.cache()
        let listing = cache.journalListing()
        let terminal = invocation.terminal
        let json = invocation.json
        let print: @Sendable (JournalLine) -> Void = { line in
            json ? terminal.printJSON(line) : terminal.print(line.text.escapingControlCharacters)
        }
        // Records retired before they could be read (a follower stopped for longer than the
        // journal's retention) are said to be missing, never skipped in silence.
        let gap: @Sendable (UInt64, UInt64) -> Void = { from, to in
            terminal.warn(
                "warning: records \(from) to \(to) were retired before they could be printed (this reader fell "
                    + "behind the journal's retention); removals among them are not shown; continuing from \(to + 1)")
            if json { terminal.printJSON(JournalGapJSON(from: from, to: to)) }
        }
        guard invocation.arguments.has("-f") else {
            try listing.readAvailable(print, gap: gap)
            return .success
        }
        // Follow until killed: every append wakes a read of what is new. Subscribed before the
        // first read, so that a record appended in between wakes one too; read after a
        // subscription, it waited for the next append to be printed (and a follower stopped and
        // resumed there printed nothing more until then).
        signal(SIGPIPE, SIG_DFL)
        let subscription = cache.onJournalChange { try? listing.readAvailable(print, gap: gap) }
        try listing.readAvailable(print, gap: gap)
        #if DEBUG
        // `SHAREDCACHE_TEST_PAUSE_AFTER_FIRST_READ` (debug builds only): says "paused" on stderr
        // and waits for a line on stdin, so a test appends right after the first read, which
        // must be printed all the same.
        if ProcessInfo.processInfo.environment["SHAREDCACHE_TEST_PAUSE_AFTER_FIRST_READ"] != nil {
            FileHandle.standardError.write(Data("paused\n".utf8))
            _ = readLine()
        }
        #endif
        // Until the directory followed goes (removed or replaced): a follower of a cache that is
        // no more would otherwise wait in silence for ever.
        let followed = DirectoryIdentity.current(invocation.directory)
        while !DirectoryIdentity.hasChanged(invocation.directory, from: followed) {
            withExtendedLifetime(subscription) { _ = sleep(1) }
        }
        terminal.fail("\(invocation.directory) was removed or replaced; nothing more will be appended there", .unavailable)
    }
}

/// What `journal --json` prints for records it could not read: `{"type":"gap","from":F,"to":T}`.
struct JournalGapJSON: Encodable {
    var type = "gap"
    var from: UInt64
    var to: UInt64
}
