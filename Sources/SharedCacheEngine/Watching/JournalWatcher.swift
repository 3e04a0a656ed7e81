#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SharedCacheFormat
import SharedCachePlatform
import Foundation

/// What wakes a process when the journal changes.
public enum JournalWatching: Sendable, Hashable {
    /// The kernel's file events (inotify on Linux, kqueue on Darwin), plus a re-check at this
    /// interval as the safety net for coalesced or overflowed events. The default.
    case fileEvents(recheckEvery: Duration)
    /// Only a check of the journal's size at this interval: for network filesystems, which
    /// deliver no file events, and for testing the fallback.
    case polling(every: Duration)

    /// File events (inotify, kqueue), with a recheck every second as a safety net.
    public static let `default` = JournalWatching.fileEvents(recheckEvery: .seconds(1))

    var interval: Duration {
        switch self {
        case .fileEvents(let interval), .polling(let interval): interval
        }
    }
}

/// A thread that calls `onChange` whenever the journal may have changed.
///
/// The thread is its own, not one of the concurrency pool's: it spends its life blocked in
/// poll(2) or kevent(2). It costs nothing while the journal is idle but one size check per
/// re-check interval.
final class JournalWatcher: Sendable {
    private let stopSignal: StopSignal
    private let finished = DispatchSemaphore(value: 0)
    private let running = Locked(true)
    private let thread = Locked<Thread?>(nil)

    /// - Parameters:
    ///   - segment: the journal segment being read now (relative to the cache directory), so a
    ///     source that watches files (kqueue) sees the very first append.
    ///   - onChange: picks up and delivers what changed; returns the segment now being read.
    init(
        directory: CacheDirectory, watching: JournalWatching, segment: String,
        onChange: @escaping @Sendable () -> String?
    ) throws {
        let stop = try StopSignal()
        let source: any ChangeSource
        switch watching {
        case .fileEvents:
            #if os(Linux)
            source = try InotifySource(folder: CacheDirectory.journalDirectory, of: directory, stop: stop)
            #elseif canImport(Darwin)
            source = try KqueueSource(folder: CacheDirectory.journalDirectory, of: directory, stop: stop)
            #else
            source = PollingSource(stop: stop)
            #endif
        case .polling:
            source = PollingSource(stop: stop)
        }
        source.follow(file: segment)
        stopSignal = stop
        let interval = watching.interval
        let running = running
        let finished = finished
        let box = UncheckedBox((source: source, fallback: PollingSource(stop: stop)))
        let thread = Thread {
            defer { finished.signal() }
            while running.withLock({ $0 }) {
                // A failing wait (poll(2) refused, the queue gone) must not spin: wait out the
                // interval on the stop signal alone and re-check, as polling does.
                do {
                    try box.value.source.wait(timeout: interval)
                } catch {
                    try? box.value.fallback.wait(timeout: interval)
                }
                guard running.withLock({ $0 }) else { break }
                if let segment = onChange() { box.value.source.follow(file: segment) }
            }
        }
        thread.name = "SharedCache journal watcher"
        self.thread.withLock { $0 = thread }
        thread.start()
    }

    /// Stops the thread and waits for it to finish its current pass. Idempotent.
    func stop() {
        let wasRunning = running.withLock { running -> Bool in
            defer { running = false }
            return running
        }
        guard wasRunning else { return }
        stopSignal.signal()
        // The last reference to the cache can be dropped by the watcher's own pass; it must not
        // wait for itself. It sees `running == false` and exits after this pass.
        if thread.withLock({ $0 }) !== Thread.current { finished.wait() }
    }

    deinit { stop() }
}

/// Moves a source owned by exactly one thread into that thread.
private struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
