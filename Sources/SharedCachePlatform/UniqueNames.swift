/// Cheap unique numbers for temporary file names and blob IDs.
///
/// Uniqueness is enforced by the filesystem (`O_EXCL`, `RENAME_NOREPLACE`), so these only need
/// to collide rarely, not to be unpredictable: a SplitMix64 stream seeded once from the system
/// generator, instead of a `getrandom(2)` call per name.
package enum UniqueNames {
    private static let state = Locked(UInt64.random(in: 1...UInt64.max))

    /// A non-zero 64-bit number, different on every call in this process.
    package static func next() -> UInt64 {
        let value = state.withLock { state -> UInt64 in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        return value == 0 ? 1 : value
    }

    /// This process's ID, read once (it cannot change while the process runs).
    package static let processID = System.processID
}
