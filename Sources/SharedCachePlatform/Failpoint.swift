#if DEBUG
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Fault injection for tests (debug builds only): `SHAREDCACHE_FAILPOINT=CALL:N:FAULT` makes the
/// Nth call of one system call (as ``retryingInterrupts(_:path:_:)`` names it: `write`, `openat`,
/// `renameat2`, `fdatasync`, …) fail with an errno (a number, or `ENOSPC`, `EIO`, `EDQUOT`,
/// `EACCES`, `EMFILE`) without being made, or, for `write` and `writev`, with `short`: the call
/// is made for half the bytes and reports that, as a filling disk does; `mapped-copy` (any
/// fault) makes a copy from a mapping fail as a SIGBUS would. Read once per process;
/// calls are counted only while one is armed.
package enum Failpoint {
    enum Fault: Equatable {
        case error(Int32)
        case shortWrite
    }

    private static let armed: (call: String, occurrence: Int, fault: Fault)? = {
        guard let text = getenv("SHAREDCACHE_FAILPOINT").map({ String(cString: $0) }) else { return nil }
        let parts = text.split(separator: ":").map(String.init)
        let names: [String: Int32] = ["ENOSPC": ENOSPC, "EIO": EIO, "EDQUOT": EDQUOT, "EACCES": EACCES, "EMFILE": EMFILE]
        guard parts.count == 3, let occurrence = Int(parts[1]) else { return nil }
        if parts[2] == "short" { return (parts[0], occurrence, .shortWrite) }
        guard let code = names[parts[2]] ?? Int32(parts[2]) else { return nil }
        return (parts[0], occurrence, .error(code))
    }()
    private static let calls = Locked(0)

    static var isArmed: Bool { armed != nil }

    /// Whether the armed failpoint has injected its fault in this process.
    package static var hasFired: Bool {
        guard let armed else { return false }
        return calls.withLock { $0 } >= armed.occurrence
    }

    /// The errno the armed failpoint injects into this call of `call`, if it is the one.
    static func error(_ call: String) -> Int32? {
        guard case .error(let code) = fires(call, shortWrite: false) else { return nil }
        return code
    }

    /// The byte count this call of `call` writes instead of `requested`, if it is the one cut short.
    static func shortWrite(_ call: String, requested: Int) -> Int? {
        guard fires(call, shortWrite: true) == .shortWrite else { return nil }
        return requested / 2
    }

    /// Counts a call of `call` and returns the fault if this is the armed occurrence. A write
    /// asks twice (may it be cut short; may it fail), so only the question of the armed kind counts.
    private static func fires(_ call: String, shortWrite: Bool) -> Fault? {
        guard let armed, armed.call == call, (armed.fault == .shortWrite) == shortWrite else { return nil }
        let count = calls.withLock { count -> Int in
            count += 1
            return count
        }
        return count == armed.occurrence ? armed.fault : nil
    }
}
#endif
