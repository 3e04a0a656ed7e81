#if !os(Linux)
import SharedCachePlatform

extension DaemonLock {
    /// The kernel's lock table is Linux's; elsewhere the PID file is the only witness.
    static func exclusiveHolder(of status: FileStatus) -> Int32?? { nil }
}
#endif
