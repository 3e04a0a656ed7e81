#if os(Linux)
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// inotify on one folder of a directory. A folder watch reports modifications of the files in
/// it, so one watch sees appends to every file and the creation of new ones.
package final class InotifySource: ChangeSource {
    private let inotify: FileDescriptor
    private let stop: StopSignal
    private let buffer: UnsafeMutableRawBufferPointer

    /// Watches `folder` of `directory` for files created, modified, moved in or deleted.
    package init(folder: String, of directory: CacheDirectory, stop: StopSignal) throws(SystemError) {
        inotify = try System.makeInotify()
        self.stop = stop
        let path = "\(directory.path)/\(folder)"
        let mask = UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW)
        try System.addWatch(inotify.rawValue, path: path, mask: mask)
        // Allocated last: an initializer that throws never runs `deinit`, which frees it, so a
        // buffer allocated before a failed `inotify_init1` (EMFILE) leaked.
        buffer = .allocate(byteCount: 16 * 1024, alignment: 8)
    }

    deinit { buffer.deallocate() }

    package func wait(timeout: Duration) throws(SystemError) {
        var descriptors = [
            pollfd(fd: inotify.rawValue, events: Int16(POLLIN), revents: 0),
            pollfd(fd: stop.readEnd.rawValue, events: Int16(POLLIN), revents: 0),
        ]
        guard try System.poll(&descriptors, milliseconds: timeout.pollMilliseconds) > 0 else { return }
        // Drain the events: what changed does not matter, only that something did (events
        // coalesce and can overflow anyway, which is why the caller re-reads the journal).
        do {
            while try inotify.readAvailable(into: buffer) > 0 {}
        } catch {
            guard error.errno == EAGAIN else { throw error }  // EAGAIN: drained
        }
    }

    package func follow(file: String) {}
}
#endif
