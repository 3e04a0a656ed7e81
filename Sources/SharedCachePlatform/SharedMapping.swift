import CSharedCacheSupport

/// Bytes of a file mapped shared with every process that maps it, unmapped when this goes.
///
/// The mapping outlives the descriptor it was made from. Touching it past the end of the file
/// raises SIGBUS, so the caller makes sure the file is at least ``size`` long first. Should the
/// file be cut short later (by hand), the fault does not end the process where the guard is
/// available (Linux, see `scs_guard_losable_mapping`): the mapping is then ``isLost`` and holds
/// zeros of this process's own.
package final class SharedMapping: @unchecked Sendable {
    /// The first mapped byte; valid while this object lives.
    package let address: UnsafeMutableRawPointer
    package let size: Int
    /// The guard's slot, or -1 where there is none.
    private let guardSlot: Int32

    fileprivate init(address: UnsafeMutableRawPointer, size: Int) {
        self.address = address
        self.size = size
        guardSlot = scs_guard_losable_mapping(address, size)
    }

    deinit {
        scs_unguard_losable_mapping(guardSlot)
        System.unmap(address, size: size)
    }

    /// Whether the file was cut short under the mapping, which no longer shares anything.
    package var isLost: Bool { scs_losable_mapping_was_lost(guardSlot) != 0 }

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
