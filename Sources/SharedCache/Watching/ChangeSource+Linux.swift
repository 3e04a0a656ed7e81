#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// inotify on the `journal/` directory. A directory watch reports modifications of the files in
/// it, so one watch sees appends to every segment and the creation of new ones.
final class InotifySource: ChangeSource {
    private let inotify: FileDescriptor
    private let stop: StopSignal
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)

    init(directory: CacheDirectory, stop: StopSignal) throws {
        let raw = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard raw >= 0 else { throw SystemError("inotify_init1", errno: errno) }
        inotify = FileDescriptor(rawValue: raw)
        self.stop = stop
        let path = "\(directory.path)/\(CacheDirectory.journalDirectory)"
        let mask = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW)
        guard inotify_add_watch(raw, path, mask) >= 0 else {
            throw SystemError("inotify_add_watch", errno: errno, path: path)
        }
    }

    func wait(timeout: Duration) {
        var descriptors = [
            pollfd(fd: inotify.rawValue, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stop.readEnd.rawValue, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&descriptors, 2, timeout.pollMilliseconds) > 0 else { return }
        // Drain the events: what changed does not matter, only that something did (events
        // coalesce and can overflow anyway, which is why the caller re-reads the journal).
        let descriptor = inotify.rawValue
        while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
    }

    func follow(segment: String) {}
}

func makeFileEventSource(directory: CacheDirectory, stop: StopSignal) throws -> any ChangeSource {
    try InotifySource(directory: directory, stop: stop)
}
#endif
