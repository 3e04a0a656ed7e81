#if DEBUG
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Fault injection for tests (debug builds only): `SHAREDCACHE_FAILPOINT=CALL:N:ERRNO` makes the
/// Nth call of one system call (as ``retryingInterrupts(_:path:_:)`` names it: `write`, `openat`,
/// `renameat2`, `fdatasync`, …) fail with that errno (a number, or `ENOSPC`, `EIO`, `EDQUOT`,
/// `EACCES`, `EMFILE`) without being made. Read once per process; calls are counted only while
/// one is armed.
package enum Failpoint {
    private static let armed: (call: String, occurrence: Int, errno: Int32)? = {
        guard let text = getenv("SHAREDCACHE_FAILPOINT").map({ String(cString: $0) }) else { return nil }
        let parts = text.split(separator: ":").map(String.init)
        let names: [String: Int32] = ["ENOSPC": ENOSPC, "EIO": EIO, "EDQUOT": EDQUOT, "EACCES": EACCES, "EMFILE": EMFILE]
        guard parts.count == 3, let occurrence = Int(parts[1]), let code = names[parts[2]] ?? Int32(parts[2]) else {
            return nil
        }
        return (parts[0], occurrence, code)
    }()
    private static let calls = Locked(0)

    static var isArmed: Bool { armed != nil }

    /// Whether the armed failpoint has injected its fault in this process.
    package static var hasFired: Bool {
        guard let armed else { return false }
        return calls.withLock { $0 } >= armed.occurrence
    }

    /// The errno the armed failpoint injects into this call of `call`, if it is the one.
    static func fault(_ call: String) -> Int32? {
        guard let armed, armed.call == call else { return nil }
        let count = calls.withLock { count -> Int in
            count += 1
            return count
        }
        return count == armed.occurrence ? armed.errno : nil
    }
}
#endif
