import CSharedCacheSupport

/// A file that only ever grows (a pack segment), mapped read-only and shared, so that reading
/// a few bytes of it is a copy from memory instead of a `pread`: no system call at all.
///
/// Touching a mapped page wholly past the end of the file raises SIGBUS, as does a read error
/// while the kernel pages it in; a `pread` would have returned a short count or EIO instead.
/// So every copy is checked twice:
/// - against the file's size as last seen, read again (one `fstat`) only when a copy reaches
///   past it, so a range the file does not hold is never touched;
/// - by a guarded copy (`scs_guarded_copy`), which turns a SIGBUS into a failed copy, for a
///   file cut short since its size was seen (by hand: SharedCache never shrinks one) or a disk
///   that fails.
///
/// A failed copy leaves the caller to `pread` the bytes, which says what is wrong. A file is
/// mapped only where copies are guarded (Linux) and addresses are 64 bits wide.
package final class GrowingFileMapping: @unchecked Sendable {
    // @unchecked: the mapping never changes; the size seen is read and raised atomically.
    private let address: UnsafeRawPointer
    private let capacity: Int
    private let sizeSeen: UnsafeMutablePointer<UInt64>

    private init(address: UnsafeRawPointer, capacity: Int) {
        self.address = address
        self.capacity = capacity
        sizeSeen = .allocate(capacity: 1)
        sizeSeen.initialize(to: 0)
    }

    deinit {
        System.unmap(UnsafeMutableRawPointer(mutating: address), size: capacity)
        sizeSeen.deallocate()
    }

    /// Maps the first `capacity` bytes of `file` (which may be shorter: it grows into them), or
    /// `nil` where copies from a mapping are not guarded, or mapping fails; the caller then
    /// reads with `pread`.
    package static func map(_ file: borrowing FileDescriptor, capacity: Int) -> GrowingFileMapping? {
        guard MemoryLayout<Int>.size == 8, scs_guarded_copy_is_available() == 1,
            let address = try? System.mapForReading(file.rawValue, size: capacity)
        else { return nil }
        return GrowingFileMapping(address: address, capacity: capacity)
    }

    /// Copies the bytes of the file from `offset` to `first` and the bytes right after them to
    /// `second` (a record's header and its body); whether it did. Not when the file does not
    /// hold them (`file` is the mapped file's descriptor, whose size is read when the range
    /// passes the size last seen), nor when touching them faulted, nor when this thread blocks
    /// SIGBUS (a fault would end the process).
    package func copy(
        from offset: UInt64, into first: UnsafeMutableRawBufferPointer, then second: UnsafeMutableRawBufferPointer,
        of file: borrowing FileDescriptor
    ) -> Bool {
        let end = offset + UInt64(first.count) + UInt64(second.count)
        guard end <= UInt64(capacity), let firstStart = first.baseAddress, let secondStart = second.baseAddress else {
            return false
        }
        if end > scs_atomic_load_u64(sizeSeen) {
            guard let size = try? file.sizeAndLinkCount().size, UInt64(size) >= end else { return false }
            scs_atomic_max_u64(sizeSeen, UInt64(size))
        }
        #if DEBUG
        // `mapped-copy`: this copy faults, as touching a page of a file cut short does.
        if Failpoint.isArmed, Failpoint.error("mapped-copy") != nil { return false }
        #endif
        return scs_guarded_copy(address + Int(offset), firstStart, first.count, secondStart, second.count) == 0
    }
}
