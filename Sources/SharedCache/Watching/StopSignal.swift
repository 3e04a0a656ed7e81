#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pipe a watcher thread waits on beside its change source, so another thread can wake it
/// to stop. Writing one byte makes the read end readable for good.
final class StopSignal: Sendable {
    let readEnd: FileDescriptor
    private let writeEnd: FileDescriptor

    init() throws(SystemError) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw SystemError("pipe", errno: errno) }
        readEnd = FileDescriptor(rawValue: ends[0])
        writeEnd = FileDescriptor(rawValue: ends[1])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    }

    func signal() {
        var byte: UInt8 = 1
        _ = withUnsafeBytes(of: &byte) { try? System.write(writeEnd.rawValue, $0) }
    }
}

extension Duration {
    /// Whole milliseconds, at least 0 and at most `Int32.max`, as poll(2) and kevent(2) take them.
    var pollMilliseconds: Int32 { Int32(clamping: max(0, milliseconds)) }
}
