import Dispatch
import Foundation
import SharedCache

/// The daemon's life: open, hold the compactor lock, then passes until a signal says stop.
///
/// A pass runs on the interval, as soon as the journal shows the directory over a limit, or when
/// evicted blobs are due to be unlinked. Signals only set flags and wake the loop, so a pass
/// always ends at a step boundary.
package final class Daemon: @unchecked Sendable {
    private let directory: String
    private let verbose: Bool
    private let interval: Duration
    private let terminal: Terminal
    private let wake = DispatchSemaphore(value: 0)
    private let flags = LockedFlags()
    private var signalSources: [any DispatchSourceSignal] = []

    /// Create the daemon before the process starts other threads: it routes its signals to
    /// dispatch sources, which only works for threads started afterwards.
    package init(directory: String, verbose: Bool, interval: Duration, terminal: Terminal) {
        routeSignalsToDispatch(Self.signals.map(\.0))
        self.directory = directory
        self.verbose = verbose
        self.interval = interval
        self.terminal = terminal
    }

    package func run(once: Bool, dryRun: Bool) -> ExitStatus {
        let opened = DirectoryIdentity.current(directory)
        do {
            return try runChecked(once: once || dryRun, dryRun: dryRun, opened: opened)
        } catch {
            // Gone from under it, the directory is not damaged: what the error says to do would
            // not help (a repair of a new directory finds nothing, of a removed one makes one).
            // Looked at once the directory is still: a deletion under way meets the daemon as
            // damage before the directory itself is gone.
            if isGone(since: opened, onceStill: true) { return saidGone() }
            terminal.warn(error.description)
            return ExitStatus(error)
        }
    }

    /// Whether the directory path names is no longer the one opened (removed, or replaced);
    /// `onceStill`, judged once it has been still for a second (or a stop signal came).
    private func isGone(since opened: DirectoryIdentity?, onceStill: Bool = false) -> Bool {
        guard opened != nil else { return false }
        guard onceStill else { return DirectoryIdentity.hasChanged(directory, from: opened) }
        return DirectoryIdentity.hasChanged(directory, from: opened, onceStillFor: .seconds(1)) { [flags] in
            flags.get(\.stop)
        }
    }

    private func saidGone() -> ExitStatus {
        terminal.warn("\(directory) was removed or replaced; nothing more will be compacted there")
        return .unavailable
    }

    private func runChecked(once: Bool, dryRun: Bool, opened: DirectoryIdentity?) throws(SharedCacheError)
        -> ExitStatus
    {
        let cache = try SharedCache(directory: directory)
        for warning in cache.warnings { terminal.warn("warning: \(warning)") }
        let compactor = try Compactor(cache: cache)
        installSignalHandlers()
        log("compacting \(directory) (pid \(getpid()))", always: !once)

        // Follow the journal like any client: a change may put the directory over a limit.
        let subscription = cache.onJournalChange { [wake] in wake.signal() }
        defer { subscription.cancel() }

        var lastPass = ContinuousClock.now
        var firstPass = true
        while true {
            if flags.take(\.reload) {
                // A config with a typo must not stop the compactor (the directory would then
                // grow without bound): it keeps the limits it had, and says why.
                do {
                    try cache.reloadConfiguration()
                    log("re-read \(directory)/config: \(limits(cache.configuration))", always: true)
                } catch {
                    terminal.warn(
                        "\(error.description); keeping the limits read before (\(limits(cache.configuration))) "
                            + "until config is fixed and sharedcached is sent SIGHUP again")
                }
            }
            if flags.get(\.stop) { break }
            // A directory moved aside still works through the descriptors open on it: compacting
            // it on would go on unseen by every process using the path.
            if isGone(since: opened) { return saidGone() }
            let dueToInterval = ContinuousClock.now - lastPass >= interval
            let dueToUnlink = compactor.millisecondsUntilNextUnlink == 0
            let overLimit = try overLimit(cache)
            if firstPass || dueToInterval || overLimit {
                firstPass = false
                lastPass = .now
                let report = try compactor.pass(
                    CompactionOptions(dryRun: dryRun, sweepOrphans: dueToInterval || once),
                    shouldStop: { [flags] in flags.get(\.stop) })
                describe(report, cache: cache)
            } else if dueToUnlink {
                let unlinked = try compactor.unlinkPendingBlobs(waitingForGracePeriod: false)
                log("unlinked \(unlinked) evicted blob\(unlinked == 1 ? "" : "s")", always: false)
            }
            if once || flags.get(\.stop) { break }
            _ = wake.wait(timeout: .now() + nextWait(compactor))
        }
        // Evicted blobs are journaled already; unlink them after their (short) grace period
        // rather than leave them for the next compactor's orphan sweep.
        let unlinked = try compactor.unlinkPendingBlobs(waitingForGracePeriod: true)
        if unlinked > 0 { log("unlinked \(unlinked) evicted blob\(unlinked == 1 ? "" : "s")", always: false) }
        if !once { log("stopped", always: true) }
        return .success
    }

    /// Whether the directory is over its size or entry limit right now.
    private func overLimit(_ cache: SharedCache) throws(SharedCacheError) -> Bool {
        let statistics = try cache.statistics()
        let configuration = cache.configuration
        return (configuration.sizeLimit > 0 && statistics.totalBytes > configuration.sizeLimit)
            || (configuration.entryLimit > 0 && UInt64(statistics.entryCount) > configuration.entryLimit)
    }

    /// Until the next interval pass or the next evicted blob falls due, whichever is first.
    private func nextWait(_ compactor: Compactor) -> DispatchTimeInterval {
        var milliseconds = Int(interval.components.seconds * 1000)
        if let wait = compactor.millisecondsUntilNextUnlink {
            milliseconds = min(milliseconds, max(1, Int(wait)))
        }
        return .milliseconds(milliseconds)
    }

    private func describe(_ report: CompactionReport, cache: SharedCache) {
        if report.dryRun {
            for eviction in report.evictions {
                let expiry = eviction.expiresAt.map { ", expired \($0.formatted(.iso8601))" } ?? ""
                terminal.print(
                    "would evict \(eviction.hash.hex) \(formatBytes(eviction.size)) reason \(eviction.reason) "
                        + "(last access \(eviction.lastAccess.formatted(.iso8601))\(expiry))")
            }
            terminal.print(
                "would evict \(report.evictions.count) of \(report.entriesBefore) entries, "
                    + "leaving \(report.entriesAfter) entries, \(formatBytes(report.bytesAfter)) "
                    + "(\(limits(cache.configuration)))")
            return
        }
        if verbose {
            for eviction in report.evictions {
                log(
                    "evicted \(eviction.hash.hex) \(formatBytes(eviction.size)) reason \(eviction.reason)",
                    always: false)
            }
        }
        let checkpoint = report.checkpoint.map { ", checkpoint \($0.generation)" } ?? ""
        let stopped = report.stoppedEarly ? ", stopped early" : ""
        log(
            "pass: \(report.expiredCount) expired, \(report.evictedForSpaceCount) evicted for space, "
                + "\(report.orphansRemoved) orphans, \(report.packs.segmentsRetired) pack segments reclaimed; "
                + "\(report.entriesAfter) entries, \(formatBytes(report.bytesAfter)) "
                + "(\(limits(cache.configuration)))\(checkpoint)\(stopped), "
                + String(format: "%.3f s", seconds(report.duration)),
            always: true)
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    private func limits(_ configuration: Configuration) -> String {
        let size = configuration.sizeLimit == 0 ? "no size limit" : "limit \(formatBytes(configuration.sizeLimit))"
        let entries = configuration.entryLimit == 0 ? "" : ", \(configuration.entryLimit) entries"
        return size + entries
    }

    /// One line on stderr: always for pass summaries and lifecycle, otherwise only with -d.
    private func log(_ message: String, always: Bool) {
        guard always || verbose else { return }
        terminal.warn(message)
    }

    /// What each handled signal asks for: SIGTERM and SIGINT stop, SIGHUP reloads.
    private static var signals: [(Int32, WritableKeyPath<Flags, Bool>)] {
        [(SIGTERM, \Flags.stop), (SIGINT, \Flags.stop), (SIGHUP, \Flags.reload)]
    }

    private func installSignalHandlers() {
        for (number, flag) in Self.signals {
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [flags, wake] in
                flags.set(flag)
                wake.signal()
            }
            source.resume()
            signalSources.append(source)
        }
    }
}

struct Flags {
    var stop = false
    var reload = false
}

/// Flags set by signal handlers on one queue and read by the loop on another.
final class LockedFlags: @unchecked Sendable {
    private var flags = Flags()
    private let lock = NSLock()

    func set(_ flag: WritableKeyPath<Flags, Bool>) { lock.withLock { flags[keyPath: flag] = true } }
    func get(_ flag: KeyPath<Flags, Bool>) -> Bool { lock.withLock { flags[keyPath: flag] } }

    /// Reads and clears a flag.
    func take(_ flag: WritableKeyPath<Flags, Bool>) -> Bool {
        lock.withLock {
            defer { flags[keyPath: flag] = false }
            return flags[keyPath: flag]
        }
    }
}
