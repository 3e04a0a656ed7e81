#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Blocks until something watched may have changed.
package protocol ChangeSource: AnyObject {
    /// Returns on a change, when the stop signal is signalled, or after `timeout`.
    func wait(timeout: Duration) throws(SystemError)
    /// The file now being read, for sources that watch individual files (kqueue).
    func follow(file: String)
}

/// Waits only for the stop signal or the interval: the fallback everywhere.
package final class PollingSource: ChangeSource {
    private let stop: StopSignal

    package init(stop: StopSignal) {
        self.stop = stop
    }

    package func wait(timeout: Duration) throws(SystemError) {
        var descriptors = [pollfd(fd: stop.readEnd.rawValue, events: Int16(POLLIN), revents: 0)]
        _ = try System.poll(&descriptors, milliseconds: timeout.pollMilliseconds)
    }

    package func follow(file: String) {}
}
