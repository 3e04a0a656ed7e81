import CSharedCacheSupport

/// A file that only ever grows (a pack segment), mapped read-only and shared, so that reading
/// a few bytes of it is a copy from memory instead of a `pread`: no system call (but a look at
/// the thread's signal mask at its first copy).
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
/// A first touch of a page in this process costs a page fault (~5 µs, mapping the 64 KiB
/// around it), what a copy saves over a `pread` four or five times over: a process that reads a
/// large cache at random, a few reads per region, would pay one for nearly every read, and
/// read slower than with `pread` alone. So, as in renting before buying, the first
/// ``preadsBeforeMapping`` reads of a region are left to the caller's `pread`, and only a
/// region read more often than that is faulted in and copied from. A read of many pages counts
/// as several, as what a copy saves over a `pread` grows with the pages it moves (1 KB: ~0.6 µs;
/// 100 KB: ~5 µs).
///
/// A failed copy leaves the caller to `pread` the bytes, which says what is wrong. A file is
/// mapped only where copies are guarded (Linux) and addresses are 64 bits wide.
package final class GrowingFileMapping: @unchecked Sendable {
    // @unchecked: the mapping never changes; the size seen and the regions read are atomic.
    private let address: UnsafeMutableRawPointer  // mapped read-only
    private let capacity: Int
    private let sizeSeen: UnsafeMutablePointer<UInt64>
    /// How often each region was read, up to ``preadsBeforeMapping``: a byte each, eight to a
    /// word.
    private let regionReads: UnsafeMutablePointer<UInt64>

    /// What the kernel maps around a faulting page of a file (`fault_around_bytes`).
    static let regionSize = 64 << 10
    /// Reads of a region made with `pread` before it is copied from: a fault's cost over what a
    /// copy saves on each read.
    package static let preadsBeforeMapping: UInt64 = 4

    private init(address: UnsafeMutableRawPointer, capacity: Int) {
        self.address = address
        self.capacity = capacity
        sizeSeen = .allocate(capacity: 1)
        sizeSeen.initialize(to: 0)
        let regionWords = (capacity / Self.regionSize + 7) / 8
        regionReads = .allocate(capacity: regionWords)
        regionReads.initialize(repeating: 0, count: regionWords)
    }

    deinit {
        System.unmap(address, size: capacity)
        sizeSeen.deallocate()
        regionReads.deallocate()
    }

    /// Maps the first `capacity` bytes of `file` (which may be shorter: it grows into them), or
    /// `nil` where copies from a mapping are not guarded, or mapping fails; the caller then
    /// reads with `pread`. Under a limit on address space (`ulimit -v`), which 64 segments'
    /// capacity (4 GiB) could use up for the rest of the program, only what the file holds now
    /// is mapped: bytes it grows into later are read with `pread`.
    package static func map(_ file: borrowing FileDescriptor, capacity: Int) -> GrowingFileMapping? {
        guard MemoryLayout<Int>.size == 8, scs_guarded_copy_is_available() == 1 else { return nil }
        var size = capacity
        if System.addressSpaceIsLimited {
            guard let now = try? file.sizeAndLinkCount().size, now > 0 else { return nil }
            size = min(capacity, Int(now))
        }
        guard let address = try? System.map(file.rawValue, size: size, shared: true, writable: false) else {
            return nil
        }
        return GrowingFileMapping(address: address, capacity: size)
    }

    /// Copies the bytes of the file from `offset` to `first` and the bytes right after them to
    /// `second` (a record's header and its body); whether it did. Not when the file does not
    /// hold them (`file` is the mapped file's descriptor, whose size is read when the range
    /// passes the size last seen), nor at the first reads of their region, nor when touching
    /// them faulted, nor when this thread blocked SIGBUS as it first copied (a fault would end
    /// the process).
    package func copy(
        from offset: UInt64, into first: UnsafeMutableRawBufferPointer, then second: UnsafeMutableRawBufferPointer,
        of file: borrowing FileDescriptor
    ) -> Bool {
        let end = offset + UInt64(first.count) + UInt64(second.count)
        guard end <= UInt64(capacity), end > offset, let firstStart = first.baseAddress,
            let secondStart = second.baseAddress
        else { return false }
        if end > scs_atomic_load_u64(sizeSeen) {
            guard let size = try? file.sizeAndLinkCount().size, UInt64(size) >= end else { return false }
            scs_atomic_max_u64(sizeSeen, UInt64(size))
        }
        // A long read counts as several: what a copy saves over a `pread` grows with its pages.
        let weight = min(1 + (end - offset) / 16_384, Self.preadsBeforeMapping)
        let regions = Int(offset / UInt64(Self.regionSize))...Int((end - 1) / UInt64(Self.regionSize))
        guard readOften(regions, counting: weight) else { return false }
        #if DEBUG
        // `mapped-copy`: this copy faults, as touching a page of a file cut short does.
        if Failpoint.isArmed, Failpoint.error("mapped-copy") != nil { return false }
        #endif
        return scs_guarded_copy(address + Int(offset), firstStart, first.count, secondStart, second.count) == 0
    }

    /// Whether every region in `regions` was read ``preadsBeforeMapping`` times before; counts
    /// this read, as `weight` reads, in those that were not. (Threads reading at once may count
    /// a few reads more, never so many that a byte overflows.)
    private func readOften(_ regions: ClosedRange<Int>, counting weight: UInt64) -> Bool {
        var often = true
        for region in regions {
            let word = regionReads + region / 8
            let shift = UInt64(region % 8 * 8)
            if (scs_atomic_load_u64(word) >> shift) & 0xFF < Self.preadsBeforeMapping {
                _ = scs_atomic_add_u64(word, weight << shift)
                often = false
            }
        }
        return often
    }
}
