#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A pipe a watcher thread waits on beside its change source, so another thread can wake it
/// to stop. Writing one byte makes the read end readable for good.
package final class StopSignal: Sendable {
    let readEnd: FileDescriptor
    private let writeEnd: FileDescriptor

    package init() throws(SystemError) {
        let ends = try System.pipe()
        readEnd = ends.read
        writeEnd = ends.write
    }

    package func signal() {
        var byte: UInt8 = 1
        // A full pipe (it never is: one byte is written once) would already be readable.
        _ = withUnsafeBytes(of: &byte) { try? writeEnd.writeOnce($0) }
    }
}
