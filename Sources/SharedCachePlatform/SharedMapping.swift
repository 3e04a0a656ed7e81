import CSharedCacheSupport

/// Bytes of a file mapped shared with every process that maps it, unmapped when this goes.
///
/// The mapping outlives the descriptor it was made from. Touching it past the end of the file
/// raises SIGBUS, so the caller makes sure the file is at least ``size`` long first, and only
/// files nobody shrinks are mapped.
package final class SharedMapping: @unchecked Sendable {
    /// The first mapped byte; valid while this object lives.
    package let address: UnsafeMutableRawPointer
    package let size: Int

    fileprivate init(address: UnsafeMutableRawPointer, size: Int) {
        self.address = address
        self.size = size
    }

    deinit { System.unmap(address, size: size) }

    /// Adds `value` to the 64-bit counter at `offset` (8-byte aligned) atomically, so that every
    /// process mapping the file counts into it without a lock.
    package func add(_ value: UInt64, atOffset offset: Int) {
        _ = scs_atomic_add_u64(counter(offset), value)
    }

    /// Raises the 64-bit value at `offset` to at least `value`, atomically.
    package func raise(to value: UInt64, atOffset offset: Int) {
        scs_atomic_max_u64(counter(offset), value)
    }

    /// The 64-bit value at `offset`, read atomically.
    package func load(atOffset offset: Int) -> UInt64 {
        scs_atomic_load_u64(counter(offset))
    }

    private func counter(_ offset: Int) -> UnsafeMutablePointer<UInt64> {
        precondition(offset >= 0 && offset + 8 <= size && offset % 8 == 0, "a counter outside the mapping")
        return (address + offset).assumingMemoryBound(to: UInt64.self)
    }
}

extension FileDescriptor {
    /// Maps the first `size` bytes of the file for reading and writing, shared with every
    /// process that maps it. The C function is `mmap` with `MAP_SHARED`.
    package func mapShared(size: Int) throws(SystemError) -> SharedMapping {
        SharedMapping(address: try System.map(rawValue, size: size, shared: true), size: size)
    }
}
