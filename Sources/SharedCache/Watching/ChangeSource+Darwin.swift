#if canImport(Darwin)
import Darwin

/// kqueue: `EVFILT_VNODE` on the `journal/` directory (new segments) and on the segment being
/// read (appends), plus `EVFILT_READ` on the stop pipe. kqueue watches open descriptors, not
/// names, so the segment watch moves when the journal rotates.
final class KqueueSource: ChangeSource {
    private let queue: FileDescriptor
    private let directory: CacheDirectory
    private let journalDirectory: FileDescriptor
    private var segment: WatchedSegment?

    private final class WatchedSegment {
        let name: String
        let file: FileDescriptor
        init(name: String, file: consuming FileDescriptor) {
            self.name = name
            self.file = file
        }
    }

    init(directory: CacheDirectory, stop: StopSignal) throws {
        let raw = kqueue()
        guard raw >= 0 else { throw SystemError("kqueue", errno: errno) }
        queue = FileDescriptor(rawValue: raw)
        self.directory = directory
        journalDirectory = try FileDescriptor(
            at: directory.descriptor, CacheDirectory.journalDirectory, flags: O_EVTONLY | O_DIRECTORY)
        register(journalDirectory.rawValue, filter: EVFILT_VNODE, flags: UInt32(NOTE_WRITE))
        register(stop.readEnd.rawValue, filter: EVFILT_READ, flags: 0)
    }

    private func register(_ descriptor: Int32, filter: Int32, flags: UInt32) {
        var change = kevent(
            ident: UInt(descriptor), filter: Int16(filter), flags: UInt16(EV_ADD | EV_CLEAR), fflags: flags,
            data: 0, udata: nil)
        _ = Darwin.kevent(queue.rawValue, &change, 1, nil, 0, nil)
    }

    func wait(timeout: Duration) {
        let milliseconds = Int(timeout.pollMilliseconds)
        var limit = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        var events = [kevent](repeating: kevent(), count: 4)
        _ = Darwin.kevent(queue.rawValue, nil, 0, &events, Int32(events.count), &limit)
    }

    func follow(segment name: String) {
        guard segment?.name != name else { return }
        // Closing the old descriptor removes its kevent.
        segment = nil
        guard let raw = try? directory.openIfPresent(name, flags: O_EVTONLY) else { return }
        register(raw, filter: EVFILT_VNODE, flags: UInt32(NOTE_WRITE | NOTE_EXTEND | NOTE_DELETE))
        segment = WatchedSegment(name: name, file: FileDescriptor(rawValue: raw))
    }
}

func makeFileEventSource(directory: CacheDirectory, stop: StopSignal) throws -> any ChangeSource {
    try KqueueSource(directory: directory, stop: stop)
}
#endif
