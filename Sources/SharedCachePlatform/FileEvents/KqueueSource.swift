#if canImport(Darwin)
import Darwin

/// kqueue: `EVFILT_VNODE` on one folder of a directory (new files) and on the file being read
/// (appends), plus `EVFILT_READ` on the stop pipe. kqueue watches open descriptors, not names,
/// so the file watch moves when the reader moves to another file.
package final class KqueueSource: ChangeSource {
    private let queue: FileDescriptor
    private let directory: CacheDirectory
    private let folder: FileDescriptor
    private var followed: FollowedFile?

    private final class FollowedFile {
        let name: String
        let file: FileDescriptor

        init(name: String, file: consuming FileDescriptor) {
            self.name = name
            self.file = file
        }
    }

    /// Watches `folder` of `directory` for new files and, once told, one file in it for appends.
    package init(folder name: String, of directory: CacheDirectory, stop: StopSignal) throws(SystemError) {
        queue = try System.makeKqueue()
        self.directory = directory
        folder = try FileDescriptor(at: directory.descriptor, name, flags: O_EVTONLY | O_DIRECTORY)
        try register(folder.rawValue, filter: EVFILT_VNODE, flags: UInt32(NOTE_WRITE))
        try register(stop.readEnd.rawValue, filter: EVFILT_READ, flags: 0)
    }

    private func register(_ descriptor: Int32, filter: Int32, flags: UInt32) throws(SystemError) {
        let change = kevent(
            ident: UInt(descriptor), filter: Int16(filter), flags: UInt16(EV_ADD | EV_CLEAR), fflags: flags,
            data: 0, udata: nil)
        var none: [kevent] = []
        _ = try System.kernelEvents(queue.rawValue, changes: [change], events: &none, timeout: nil)
    }

    package func wait(timeout: Duration) throws(SystemError) {
        let milliseconds = Int(timeout.pollMilliseconds)
        let limit = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        var events = Array(repeating: kevent(), count: 4)
        _ = try System.kernelEvents(queue.rawValue, changes: [], events: &events, timeout: limit)
    }

    package func follow(file name: String) {
        guard followed?.name != name else { return }
        // Closing the old descriptor removes its kevent.
        followed = nil
        guard let file = try? directory.openIfPresent(name, flags: O_EVTONLY),
            (try? register(file.rawValue, filter: EVFILT_VNODE, flags: UInt32(NOTE_WRITE | NOTE_EXTEND | NOTE_DELETE)))
                != nil
        else { return }
        followed = FollowedFile(name: name, file: file)
    }
}
#endif
